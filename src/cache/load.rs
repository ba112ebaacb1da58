//! Coalesced loading: of the callers that miss on one key at the same time, one runs its
//! loader (the *leader*) and the others wait for its value.
//!
//! A load in flight is an `Arc<Load>` in a map beside the shards ([`Loads`]: striped
//! mutexes over hash tables), stored with the key it loads. The shards never see a load,
//! so a hit through `get_or_insert_with` is a plain `get`, and an entry costs no more
//! memory for loading. A caller that misses joins the map: the first becomes the leader
//! (its key, made from the caller's borrowed one, is the only copy the miss makes: it
//! moves from the map into the cache), the rest register as waiters on the load's state
//! (a thread handle to unpark, or a task's `Waker`) and sleep. The leader then looks for
//! the key under its shard's write lock and, if it is still missing, registers the load
//! with the shard: from then on a write to the key (an insert, a compute, a remove, a
//! clear) marks the load, and a marked load does not store its value.
//!
//! The state of one key, against what can happen to it (the cache's own entry for the key
//! is separate: a load never holds capacity and is never a hit):
//!
//! | state \ event | a caller misses | the leader finishes | the leader fails (error, panic, dropped future) | a waiter is dropped | `insert`, compute | `remove`, `clear` |
//! |---|---|---|---|---|---|---|
//! | no load | becomes the leader | — | — | — | stores | removes |
//! | loading | waits | stores the value if the policy admits it and no write to the key came since the load began; every waiter gets the value; the load leaves the map | hands the load to the longest waiter, who looks for the key again and runs its own loader; with no waiter the load closes and leaves the map | leaves the waiters (if it had been handed the load, hands it on) | stores; the load will not store its value | removes; the load will not store its value |
//! | closed (failed, no waiter) | starts again: a new load takes its place in the map | — | — | — | stores | removes |
//!
//! Locks: a stripe of the map is taken alone, or before a load's state mutex (a join
//! checks whether the load it found has closed), or before the key's shard's write lock
//! (the leader takes its key out of the map and stores it in one hold of the stripe, so
//! that no caller finds neither the load nor the value). The user code that runs under a
//! stripe is the key's `Eq` and `Clone` of a join, and the weigher and the value's `Clone`
//! of a store; waiters are woken after every lock is released.

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
    /// [`STARTED`], [`COALESCED`] and [`FAILED`], striped by thread (see [`Tally`]).
    pub(crate) counts: Tally<3>,
    /// Callers registered as waiters now (on a line of its own: the fields beside it are
    /// read by every lookup).
    pub(crate) waiting: CachePadded<AtomicU64>,
}

/// A stripe of the map of loads, alone on its cache lines.
type Stripe<K, V> = CachePadded<Mutex<HashTable<Slot<K, V>>>>;

/// A load in the map, with its key.
pub(crate) struct Slot<K, V> {
    hash: u64,
    pub(crate) key: K,
    load: Arc<Load<V>>,
}

/// Loaders run.
pub(crate) const STARTED: usize = 0;
/// Callers served by another caller's load.
pub(crate) const COALESCED: usize = 1;
/// Loads that ended without a value (an error, a panic, a dropped future).
pub(crate) const FAILED: usize = 2;

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
    /// The load was handed to this waiter: it leads now.
    Lead,
    /// The load closed: start again.
    Again,
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

    /// Whether the load ended without a value and without a waiter.
    fn is_closed(&self) -> bool {
        matches!(self.state.lock().phase, Phase::Closed)
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
    /// powers of two).
    pub(crate) fn new(stripes: usize, counters: usize) -> Self {
        Loads {
            stripes: (0..stripes).map(|_| CachePadded::new(Mutex::new(HashTable::new()))).collect(),
            counts: Tally::new(counters),
            waiting: CachePadded::new(AtomicU64::new(0)),
        }
    }

    /// Runs `f` on the stripe of the map that holds the loads of keys of `hash`, locked.
    #[inline]
    fn stripe<R>(&self, hash: u64, f: impl FnOnce(&mut HashTable<Slot<K, V>>) -> R) -> R {
        // Bits the shards and their tables leave alone: the shard takes the low half's
        // top bits, a table the low bits and the top seven.
        let index = (hash >> 32) as usize & (self.stripes.len() - 1);
        f(&mut self.stripes[index].lock())
    }

    /// Joins the load of `key` (of `hash`): the load, and whether this caller leads it (no
    /// load was in flight; `make_key` made the map's copy of the key). A closed load found
    /// in the map gives its place to a new one.
    pub(crate) fn join<Q: ?Sized + Eq>(
        &self,
        hash: u64,
        key: &Q,
        make_key: impl FnOnce(&Q) -> K,
    ) -> (Arc<Load<V>>, bool)
    where
        K: Borrow<Q>,
    {
        self.stripe(hash, |map| {
            if let Some(slot) = map.find_mut(hash, |slot| slot.hash == hash && slot.key.borrow() == key) {
                if !slot.load.is_closed() {
                    return (slot.load.clone(), false);
                }
                let load = Arc::new(Load::new());
                // The closed load drops here, under the lock: it holds no key or value.
                slot.load = load.clone();
                return (load, true);
            }
            let load = Arc::new(Load::new());
            let slot = Slot { hash, key: make_key(key), load: load.clone() };
            map.insert_unique(hash, slot, |slot| slot.hash);
            (load, true)
        })
    }

    /// Takes `load` out of the map, if it is still there; its key drops after the lock
    /// is released.
    pub(crate) fn forget(&self, hash: u64, load: &Arc<Load<V>>) {
        let _slot = self.stripe(hash, |map| {
            map.find_entry(hash, |slot| Arc::ptr_eq(&slot.load, load)).ok().map(|slot| slot.remove().0)
        });
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
        self.stripe(hash, |map| map.find_entry(hash, |slot| Arc::ptr_eq(&slot.load, load)).ok().map(store))
    }

    /// Hands `value` to the waiters of `load`, which has left the map, and wakes them.
    pub(crate) fn publish(&self, load: &Load<V>, value: V) {
        load.publish(value).into_iter().for_each(|(_, wake)| wake.wake());
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
