//! Coalesced loading: of the callers that miss on one key at the same time, one runs its
//! loader (the *leader*) and the others wait for what it gets: its value, or its error.
//!
//! A load in flight is an `Arc<Load>` in a map beside the shards ([`Loads`]: striped
//! mutexes over hash tables), stored with the key it loads. The shards never see a load,
//! so a hit through `get_or_insert_with` is a plain `get`, and an entry costs no more
//! memory for loading. A caller that misses joins the map: the first becomes the leader
//! (its key, made from the caller's borrowed one, is the only copy the miss makes: it
//! moves from the map into the cache), the rest register as waiters on the load's state
//! (a thread handle to unpark, or a task's `Waker`) and sleep. The leader then looks for
//! the key under its shard's write lock and, if it is still missing (or stale, or in
//! grace), registers the load with the shard: from then on a write to the key (an insert,
//! a compute, a remove, a clear) marks the load, and a marked load does not store its
//! value. A reload of a stale entry is such a load, with the old value beside it: callers
//! that find the entry stale while it runs get the old value and do not wait.
//!
//! The state of one key, against what can happen to it (the cache's own entry for the key
//! is separate: a load never holds capacity and is never a hit):
//!
//! | state \ event | a caller misses | a caller finds the entry stale | the leader's loader returns a value | its loader returns an error | the leader panics or is dropped | a waiter is dropped | `insert`, compute | `remove`, `clear` |
//! |---|---|---|---|---|---|---|---|---|
//! | no load | becomes the leader | becomes the leader of a reload | — | — | — | — | stores | removes |
//! | loading | waits | gets the stale value | the value is stored if no write to the key came since the load began (and, for a new key, the policy admits it); every waiter gets it; the load leaves the map | every waiter gets the error, or the old value if the entry was stale or in grace; the load leaves the map, or stays as a kept failure | the longest waiter takes the load over, looks for the key again and runs its own loader; with no waiter the load closes and leaves the map | it leaves the waiters (if it had been handed the load, hands it on) | stores; the load will not store its value | removes; the load will not store its value |
//! | kept failure (negative caching, until its time ends) | gets the error at once (a caller with another error type starts a new load) | — (the entry serves) | — | — | — | — | stores; ends the kept failure | removes; ends the kept failure |
//! | closed (failed, no waiter) | starts again: a new load takes its place in the map | starts a reload likewise | — | — | — | — | stores | removes |
//!
//! An error is shared as an `Arc<dyn Any>` of the leader's error type: a waiter of the
//! same type gets a clone, one of another type (a waiter whose loader cannot fail, say)
//! starts a load of its own. A panic or a dropped future is no origin failure, and is
//! not shared.
//!
//! Locks: a stripe of the map is taken alone, or before a load's state mutex (a join
//! checks whether the load it found has ended), or before the key's shard's write lock
//! (the leader takes its key out of the map and stores it in one hold of the stripe, so
//! that no caller finds neither the load nor the value). The user code that runs under a
//! stripe is the key's `Eq` and `Clone` of a join, and the weigher, the `expire_after`
//! closure and the value's `Clone` of a store; waiters are woken after every lock is
//! released.

use std::any::Any;
use std::borrow::Borrow;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, OnceLock};
use std::task::{Context, Poll, Waker};

use crossbeam_utils::CachePadded;
use hashbrown::HashTable;

use crate::broken;
use crate::primitive::{current_thread, failed_model, park, AtomicU64, Mutex, Ordering, Tally, Thread};

/// The loads in flight, and their counters.
pub(crate) struct Loads<K, V> {
    /// The loads, by key, in stripes picked by hash.
    stripes: Box<[Stripe<K, V>]>,
    /// The counters named above ([`STARTED`] and on), striped by thread (see [`Tally`]).
    pub(crate) counts: Tally<COUNTERS>,
    /// Callers registered as waiters now (on a line of its own: the fields beside it are
    /// read by every lookup).
    pub(crate) waiting: CachePadded<AtomicU64>,
    /// Negative caching: how long a failure is kept, in ticks, and the most kept at a time
    /// (give or take the failures of one moment); `None` if failures are not kept.
    keep: Option<(u64, usize)>,
    /// Failures kept now.
    pub(crate) kept: AtomicU64,
}

/// A stripe of the map of loads, alone on its cache lines.
type Stripe<K, V> = CachePadded<Mutex<Slots<K, V>>>;

/// One stripe's loads, and how many of them are kept failures.
struct Slots<K, V> {
    table: HashTable<Slot<K, V>>,
    failures: usize,
}

/// A load in the map, with its key.
pub(crate) struct Slot<K, V> {
    hash: u64,
    pub(crate) key: K,
    load: Arc<Load<V>>,
    /// A kept failure's end, in ticks; `None` for a load that is no kept failure.
    failure: Option<u64>,
}

/// Loaders run.
pub(crate) const STARTED: usize = 0;
/// Callers served by another caller's load.
pub(crate) const COALESCED: usize = 1;
/// Loads that ended without a value (an error, a panic, a dropped future).
pub(crate) const FAILED: usize = 2;
/// Reloads of stale entries started.
pub(crate) const REFRESHED: usize = 3;
/// Reloads that failed (the old value stayed).
pub(crate) const REFRESH_FAILED: usize = 4;
/// Callers given a stale value: while a reload ran, or in place of an error.
pub(crate) const STALE_SERVED: usize = 5;
/// Callers given another caller's error (waiters on a load that failed).
pub(crate) const FAILURES_SHARED: usize = 6;
/// Callers given a kept failure's error at once.
pub(crate) const FAILURES_CACHED: usize = 7;
/// The counters of [`Loads::counts`].
pub(crate) const COUNTERS: usize = 8;

/// An error, shared with the waiters of the load that got it.
pub(crate) type Failure = Arc<dyn Any + Send + Sync>;

/// One key's load.
pub(crate) struct Load<V> {
    state: Mutex<State>,
    /// The leader's value, set once, before the phase becomes [`Phase::Ready`] under the
    /// state's lock; read by those that saw it ready, without the lock (a clone of it is
    /// user code). It lives in the load's own allocation.
    value: OnceLock<V>,
}

struct State {
    phase: Phase,
    /// Registered waiters, longest waiting first.
    waiters: Vec<(u64, Wake)>,
    next_id: u64,
}

enum Phase {
    /// The leader runs its loader; `handed_to` is the waiter the load was handed to, which
    /// has not yet woken to take it.
    Loading { handed_to: Option<u64> },
    /// The value is set, for every waiter.
    Ready,
    /// The leader's loader returned this error, for every waiter.
    Failed(Failure),
    /// Ended without a value and without a waiter: whoever finds it starts again.
    Closed,
}

/// How to wake a waiter.
enum Wake {
    Thread(Thread),
    Task(Waker),
}

impl Wake {
    fn wake(self) {
        match self {
            Wake::Thread(thread) => thread.unpark(),
            Wake::Task(waker) => waker.wake(),
        }
    }
}

/// What a waiter found.
pub(crate) enum Waited {
    /// The leader's value is ready ([`Load::value`]).
    Value,
    /// The leader's loader failed with this error.
    Failed(Failure),
    /// The load was handed to this waiter: it leads now.
    Lead,
    /// The load closed: start again.
    Again,
}

/// What joining the map gave.
pub(crate) enum Joined<V> {
    /// A new load, which this caller leads.
    Lead(Arc<Load<V>>),
    /// A load in flight, to wait for.
    Wait(Arc<Load<V>>),
    /// A kept failure, still within its time, of an error the caller takes.
    Failed(Failure),
}

/// What a load that lost its leader does next.
enum HandOn {
    /// Wake this waiter, which leads now.
    To(Wake),
    /// No waiter: the load closed, and leaves the map.
    Closed,
}

impl<V> Load<V> {
    fn new() -> Self {
        let state = State { phase: Phase::Loading { handed_to: None }, waiters: Vec::new(), next_id: 0 };
        Load { state: Mutex::new(state), value: OnceLock::new() }
    }

    /// The load's identity among the loads alive: the address of its state.
    pub(crate) fn ticket(self: &Arc<Self>) -> usize {
        Arc::as_ptr(self) as usize
    }

    /// The leader's value, once the load is [`Phase::Ready`].
    pub(crate) fn value(&self) -> &V {
        self.value.get().expect("a ready load holds its value")
    }

    /// Whether the load is still to be waited for: loading, or finished with a value
    /// not yet handed to all (a failed or closed load is over for a caller that comes
    /// after it).
    fn is_joinable(&self) -> bool {
        matches!(self.state.lock().phase, Phase::Loading { .. } | Phase::Ready)
    }

    /// The error of a failed load.
    fn failure(&self) -> Option<Failure> {
        match &self.state.lock().phase {
            Phase::Failed(failure) => Some(failure.clone()),
            _ => None,
        }
    }

    /// Checks the load for the waiter `id` (`None` before it registered): its result if
    /// there is one, or else registers `wake` (replacing the waiter's earlier one).
    fn poll(&self, id: &mut Option<u64>, wake: Wake) -> Poll<Waited> {
        let mut state = self.state.lock();
        match &mut state.phase {
            Phase::Ready => {
                *id = None;
                return Poll::Ready(Waited::Value);
            }
            Phase::Failed(failure) => {
                let failure = failure.clone();
                *id = None;
                return Poll::Ready(Waited::Failed(failure));
            }
            Phase::Closed => {
                *id = None;
                return Poll::Ready(Waited::Again);
            }
            Phase::Loading { handed_to } => {
                if id.is_some() && *handed_to == *id {
                    *handed_to = None;
                    *id = None;
                    return Poll::Ready(Waited::Lead);
                }
            }
        }
        if broken::UNCHECKED_WAIT {
            // Registers on what it saw in an earlier hold of the lock: the load may have
            // finished, and woken its waiters, in between.
            drop(state);
            state = self.state.lock();
        }
        match *id {
            Some(me) => {
                if let Some(waiter) = state.waiters.iter_mut().find(|(w, _)| *w == me) {
                    waiter.1 = wake;
                }
            }
            None => {
                let me = state.next_id;
                state.next_id += 1;
                state.waiters.push((me, wake));
                *id = Some(me);
            }
        }
        Poll::Pending
    }

    /// Finishes the load with `value`: hands it to the waiters, whom it returns to be
    /// woken once the lock is released.
    fn publish(&self, value: V) -> Vec<(u64, Wake)> {
        let mut state = self.state.lock();
        // Set once: a load is finished once, by the one leader it has at a time.
        let _ = self.value.set(value);
        state.phase = Phase::Ready;
        std::mem::take(&mut state.waiters)
    }

    /// Ends the load with the leader's error: hands it to the waiters, whom it returns to
    /// be woken once the lock is released.
    fn fail(&self, failure: Failure) -> Vec<(u64, Wake)> {
        let mut state = self.state.lock();
        state.phase = Phase::Failed(failure);
        if broken::UNSHARED_FAILURE {
            // Ends the load and forgets its waiters, without waking them.
            state.waiters.clear();
        }
        std::mem::take(&mut state.waiters)
    }

    /// The leader is gone without a value (or a waiter it was handed to is): hands the load
    /// to the longest waiter, or closes it.
    fn hand_on(&self) -> HandOn {
        let mut state = self.state.lock();
        if broken::FORGETFUL_HANDOFF {
            // Closes the load and forgets its waiters, without waking them.
            state.waiters.clear();
        }
        if state.waiters.is_empty() {
            state.phase = Phase::Closed;
            return HandOn::Closed;
        }
        let (next, wake) = state.waiters.remove(0);
        state.phase = Phase::Loading { handed_to: Some(next) };
        HandOn::To(wake)
    }

    /// A waiter leaves (its future was dropped): whether it had been handed the load, which
    /// must then go on to another.
    fn leave(&self, id: u64) -> bool {
        let mut state = self.state.lock();
        if let Phase::Loading { handed_to } = &mut state.phase {
            if *handed_to == Some(id) {
                *handed_to = None;
                return true;
            }
        }
        state.waiters.retain(|(w, _)| *w != id);
        false
    }
}

impl<K, V> Loads<K, V> {
    /// Loads in `stripes` stripes of the map, whose counters have `counters` stripes (both
    /// powers of two); failures kept for `keep`'s ticks, at most `keep`'s count at a time,
    /// if given.
    pub(crate) fn new(stripes: usize, counters: usize, keep: Option<(u64, usize)>) -> Self {
        let slots = || Slots { table: HashTable::new(), failures: 0 };
        Loads {
            stripes: (0..stripes).map(|_| CachePadded::new(Mutex::new(slots()))).collect(),
            counts: Tally::new(counters),
            waiting: CachePadded::new(AtomicU64::new(0)),
            keep,
            kept: AtomicU64::new(0),
        }
    }

    /// Runs `f` on the stripe of the map that holds the loads of keys of `hash`, locked.
    #[inline]
    fn stripe<R>(&self, hash: u64, f: impl FnOnce(&mut Slots<K, V>) -> R) -> R {
        // Bits the shards and their tables leave alone: the shard takes the low half's
        // top bits, a table the low bits and the top seven.
        let index = (hash >> 32) as usize & (self.stripes.len() - 1);
        f(&mut self.stripes[index].lock())
    }

    /// Whether failures are kept (negative caching).
    #[inline]
    pub(crate) fn keeps_failures(&self) -> bool {
        self.keep.is_some()
    }

    /// Joins the load of `key` (of `hash`) at `now`: a kept failure whose error the caller
    /// `takes` (its error type), a load in flight to wait for, or a new load this caller
    /// leads (`make_key` made the map's copy of the key). A load found over (closed, or
    /// failed and not kept, or kept past its time or with another error type) gives its
    /// place to the new one.
    pub(crate) fn join<Q: ?Sized + Eq>(
        &self,
        hash: u64,
        key: &Q,
        make_key: impl FnOnce(&Q) -> K,
        now: u64,
        takes: impl FnOnce(&Failure) -> bool,
    ) -> Joined<V>
    where
        K: Borrow<Q>,
    {
        let replaced = self.stripe(hash, |slots| {
            let load = Arc::new(Load::new());
            let Some(slot) = slots.table.find_mut(hash, |slot| slot.hash == hash && slot.key.borrow() == key)
            else {
                let slot = Slot { hash, key: make_key(key), load: load.clone(), failure: None };
                slots.table.insert_unique(hash, slot, |slot| slot.hash);
                return Ok(Joined::Lead(load));
            };
            if let Some(end) = slot.failure {
                if let Some(failure) = slot.load.failure().filter(|failure| now < end && takes(failure)) {
                    return Ok(Joined::Failed(failure));
                }
                slot.failure = None;
                slots.failures -= 1;
                self.kept.fetch_sub(1, Ordering::Relaxed);
            } else if slot.load.is_joinable() {
                return Ok(Joined::Wait(slot.load.clone()));
            }
            // The ended load (it holds no key, and no value a caller waits for) drops
            // after the lock is released.
            Err((std::mem::replace(&mut slot.load, load.clone()), load))
        });
        match replaced {
            Ok(joined) => joined,
            Err((_ended, load)) => Joined::Lead(load),
        }
    }

    /// Takes `load` out of the map, if it is still there; its key drops after the lock
    /// is released.
    pub(crate) fn forget(&self, hash: u64, load: &Arc<Load<V>>) {
        let _slot = self.stripe(hash, |slots| {
            let slot = slots.table.find_entry(hash, |slot| Arc::ptr_eq(&slot.load, load)).ok()?.remove().0;
            if slot.failure.is_some() {
                slots.failures -= 1;
                self.kept.fetch_sub(1, Ordering::Relaxed);
            }
            Some(slot)
        });
    }

    /// Ends a kept failure of `key` (of `hash`), if there is one: a write to the key.
    #[cold]
    #[inline(never)]
    pub(crate) fn end_failure<Q: ?Sized + Eq>(&self, hash: u64, key: &Q)
    where
        K: Borrow<Q>,
    {
        let _slot = self.stripe(hash, |slots| {
            let found = slots.table.find_entry(hash, |slot| {
                slot.failure.is_some() && slot.hash == hash && slot.key.borrow() == key
            });
            let slot = found.ok()?.remove().0;
            slots.failures -= 1;
            self.kept.fetch_sub(1, Ordering::Relaxed);
            Some(slot)
        });
    }

    /// Ends every kept failure: a clear.
    pub(crate) fn end_failures(&self) {
        if self.keep.is_some() {
            self.stripes.iter().for_each(|stripe| Self::sweep(&mut stripe.lock(), u64::MAX, &self.kept));
        }
    }

    /// The leader of `load` stores its value: runs `store` with the load's place in the
    /// map (its key), under the stripe's lock, so that the value can be stored before the
    /// load leaves the map. `None` if the load is no longer in the map (a panic took it
    /// out part way through an earlier store).
    pub(crate) fn with_slot<R>(
        &self,
        hash: u64,
        load: &Arc<Load<V>>,
        store: impl FnOnce(hashbrown::hash_table::OccupiedEntry<'_, Slot<K, V>>) -> R,
    ) -> Option<R> {
        self.stripe(hash, |slots| {
            slots.table.find_entry(hash, |slot| Arc::ptr_eq(&slot.load, load)).ok().map(store)
        })
    }

    /// Hands `value` to the waiters of `load`, which has left the map, and wakes them.
    pub(crate) fn publish(&self, load: &Load<V>, value: V) {
        load.publish(value).into_iter().for_each(|(_, wake)| wake.wake());
    }

    /// Ends `load` (of `hash`) with its leader's error at `now`: its waiters get it, and it
    /// stays in the map as a kept failure if failures are kept (and its stripe has room),
    /// or leaves it.
    pub(crate) fn fail(&self, hash: u64, load: &Arc<Load<V>>, failure: Failure, now: u64) {
        self.counts.add(FAILED);
        let woken = self.stripe(hash, |slots| {
            let woken = load.fail(failure);
            let Ok(slot) = slots.table.find_entry(hash, |slot| Arc::ptr_eq(&slot.load, load)) else {
                return (woken, None);
            };
            if let Some((ticks, most)) = self.keep {
                let full = || self.kept.load(Ordering::Relaxed) >= most as u64;
                if full() {
                    Self::sweep(slots, now, &self.kept);
                }
                if !full() {
                    slots.failures += 1;
                    self.kept.fetch_add(1, Ordering::Relaxed);
                    // Found again: the sweep may have moved the table's entries.
                    if let Some(slot) = slots.table.find_mut(hash, |slot| Arc::ptr_eq(&slot.load, load)) {
                        slot.failure = Some(now.saturating_add(ticks));
                    }
                    return (woken, None);
                }
                let slot = slots.table.find_entry(hash, |slot| Arc::ptr_eq(&slot.load, load));
                return (woken, slot.ok().map(|slot| slot.remove().0));
            }
            (woken, Some(slot.remove().0))
        });
        let (woken, _slot) = woken;
        woken.into_iter().for_each(|(_, wake)| wake.wake());
    }

    /// Drops a stripe's kept failures whose time ended by `now` (all of them at `u64::MAX`).
    fn sweep(slots: &mut Slots<K, V>, now: u64, kept: &AtomicU64) {
        let before = slots.failures;
        slots.table.retain(|slot| match slot.failure {
            Some(end) if end <= now => {
                slots.failures -= 1;
                false
            }
            _ => true,
        });
        kept.fetch_sub((before - slots.failures) as u64, Ordering::Relaxed);
    }

    /// Waits, parking the thread, for the load that the leader of `hash`'s key runs.
    pub(crate) fn wait(&self, hash: u64, load: &Arc<Load<V>>) -> Waited {
        let mut waiter = Waiter { loads: self, hash, load, id: None };
        loop {
            match waiter.poll_with(Wake::Thread(current_thread())) {
                Poll::Ready(waited) => return waited,
                Poll::Pending => park(),
            }
        }
    }

    /// [`Loads::wait`] for a task: the future wakes it through its `Waker`.
    pub(crate) fn wait_async<'a>(&'a self, hash: u64, load: &'a Arc<Load<V>>) -> Waiter<'a, K, V> {
        Waiter { loads: self, hash, load, id: None }
    }

    /// The leader is gone without a value.
    pub(crate) fn abandon(&self, hash: u64, load: &Arc<Load<V>>) {
        self.counts.add(FAILED);
        self.hand_on(hash, load);
    }

    fn hand_on(&self, hash: u64, load: &Arc<Load<V>>) {
        match load.hand_on() {
            HandOn::To(wake) => wake.wake(),
            HandOn::Closed => self.forget(hash, load),
        }
    }
}

/// A waiter on a load; as a future, a waiting task. Dropping it leaves the load (and
/// hands the load on, if it had been handed to this waiter and not yet taken).
pub(crate) struct Waiter<'a, K, V> {
    loads: &'a Loads<K, V>,
    hash: u64,
    load: &'a Arc<Load<V>>,
    id: Option<u64>,
}

impl<K, V> Future for Waiter<'_, K, V> {
    type Output = Waited;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Waited> {
        let waker = cx.waker().clone();
        self.poll_with(Wake::Task(waker))
    }
}

impl<K, V> Waiter<'_, K, V> {
    /// [`Load::poll`], counting the waiter in and out of [`Loads::waiting`].
    fn poll_with(&mut self, wake: Wake) -> Poll<Waited> {
        let registered = self.id.is_some();
        let polled = self.load.poll(&mut self.id, wake);
        let loads = self.loads;
        match &polled {
            Poll::Pending if !registered => _ = loads.waiting.fetch_add(1, Ordering::Relaxed),
            Poll::Pending => {}
            Poll::Ready(waited) => {
                if registered {
                    loads.waiting.fetch_sub(1, Ordering::Relaxed);
                }
                if let Waited::Value = waited {
                    loads.counts.add(COALESCED);
                }
            }
        }
        polled
    }
}

impl<K, V> Drop for Waiter<'_, K, V> {
    fn drop(&mut self) {
        if let Some(id) = self.id.filter(|_| !failed_model()) {
            self.loads.waiting.fetch_sub(1, Ordering::Relaxed);
            if self.load.leave(id) {
                self.loads.hand_on(self.hash, self.load);
            }
        }
    }
}
