//! Coalesced loading: of the callers that miss on one key at the same time, one runs its
//! loader (the *leader*) and the others wait for its value.
//!
//! A load in flight is an `Arc<Load>` in a map beside the shards, keyed by the key
//! ([`Loads`]: a `DashMap`, or a mutex-guarded map under loom). The shards never see a
//! load, so a hit through `get_or_insert_with` is a plain `get`, and an entry costs no more
//! memory for loading. A caller that misses joins the map: the first becomes the leader,
//! the rest register as waiters on the load's state (a thread handle to unpark, or a
//! task's `Waker`) and sleep. The leader looks in the cache once more before it loads, so
//! that a load which finished between its miss and its join is not run twice.
//!
//! The state of one key, against what can happen to it (the cache's own entry for the key
//! is separate: a load never holds capacity and is never a hit):
//!
//! | state \ event | a caller misses | the leader finishes | the leader fails (error, panic, dropped future) | a waiter is dropped | `insert` | `remove` |
//! |---|---|---|---|---|---|---|
//! | no load | becomes the leader | — | — | — | stores | removes |
//! | loading | waits | stores the value if the policy admits it and the key is still absent and not removed since; every waiter gets the value; the load leaves the map | hands the load to the longest waiter, who runs its own loader; with no waiter the load closes and leaves the map | leaves the waiters (if it had been handed the load, hands it on) | stores; the load will not replace it | the load's value will not be stored |
//! | ready (finished, not yet out of the map) | gets the value | — | — | — | stores | takes the load out of the map |
//! | closed (failed, no waiter) | starts again: takes the load out of the map, then joins anew | — | — | — | stores | — |
//!
//! Locks: the load's state mutex is taken alone, or before a shard's write lock (the
//! leader stores its value under the state mutex, so that a `remove` that marks the load
//! either comes first and the value is not stored, or comes after and removes it). No user
//! code runs under the state mutex but the `K::eq` of that store; waiters are woken after
//! it is released. The map's own lock is never held with another.

use std::future::Future;
use std::hash::Hash;
use std::pin::Pin;
use std::sync::{Arc, OnceLock};
use std::task::{Context, Poll, Waker};

use crate::broken;
use crossbeam_utils::CachePadded;

use crate::primitive::{current_thread, failed_model, park, AtomicU64, Mutex, Ordering, Tally, Thread};

/// The loads in flight, and their counters.
pub(crate) struct Loads<K, V> {
    map: Map<K, Arc<Load<V>>>,
    /// [`STARTED`], [`COALESCED`] and [`FAILED`], striped by thread (see [`Tally`]).
    pub(crate) counts: Tally<3>,
    /// Callers registered as waiters now (on a line of its own: the fields beside it are
    /// read by every lookup).
    pub(crate) waiting: CachePadded<AtomicU64>,
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
    /// A `remove` of the key came during this load: its value is not stored.
    invalidated: bool,
}

enum Phase {
    /// The leader runs its loader; `handed_to` is the waiter the load was handed to, which
    /// has not yet woken to take it.
    Loading { handed_to: Option<u64> },
    /// The value is set, for every waiter and every caller that finds the load in the map.
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
        let state = State {
            phase: Phase::Loading { handed_to: None },
            waiters: Vec::new(),
            next_id: 0,
            invalidated: false,
        };
        Load { state: Mutex::new(state), value: OnceLock::new() }
    }

    /// The leader's value, once the load is [`Phase::Ready`].
    pub(crate) fn value(&self) -> &V {
        self.value.get().expect("a ready load holds its value")
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

    /// Finishes the load with `value`: runs `store` first unless a `remove` came during the
    /// load, then hands the value to the waiters, whom it returns to be woken once the
    /// lock is released.
    fn finish(&self, value: V, store: impl FnOnce()) -> Vec<Wake> {
        let mut state = self.state.lock();
        if !state.invalidated {
            store();
        }
        // Set once: a load is finished once, by the one leader it has at a time.
        let _ = self.value.set(value);
        state.phase = Phase::Ready;
        state.waiters.drain(..).map(|(_, wake)| wake).collect()
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
        // The new leader runs its own loader, which starts after any `remove` so far.
        state.invalidated = false;
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

    /// A `remove` of the key: a load in progress will not store its value. Returns whether
    /// the load has finished, so that the caller takes it out of the map (a caller that
    /// finds it there would get the removed value).
    fn invalidate(&self) -> bool {
        let mut state = self.state.lock();
        match state.phase {
            Phase::Loading { .. } => {
                state.invalidated = !broken::REMOVE_IGNORES_LOAD;
                false
            }
            Phase::Ready => true,
            Phase::Closed => false,
        }
    }
}

impl<K: Hash + Eq, V> Loads<K, V> {
    /// Loads whose counters have `stripes` stripes (a power of two).
    pub(crate) fn new(hasher: ahash::RandomState, stripes: usize) -> Self {
        Loads {
            map: Map::new(hasher),
            counts: Tally::new(stripes),
            waiting: CachePadded::new(AtomicU64::new(0)),
        }
    }

    /// Takes `load` out of the map, if it is still there for `key`.
    pub(crate) fn forget(&self, key: &K, load: &Arc<Load<V>>) {
        self.map.remove_if(key, |found| Arc::ptr_eq(found, load));
    }

    /// A `remove` of `key`: marks its load, if one is in flight (see [`Load::invalidate`]).
    pub(crate) fn invalidate(&self, key: &K) {
        if let Some(load) = self.map.get(key) {
            if load.invalidate() {
                self.forget(key, &load);
            }
        }
    }

    /// A `clear`: marks every load in flight, as [`Loads::invalidate`] does one.
    pub(crate) fn invalidate_all(&self) {
        self.map.retain(|load| !load.invalidate());
    }

    /// Waits, parking the thread, for the load that `key`'s leader runs.
    pub(crate) fn wait(&self, key: &K, load: &Arc<Load<V>>) -> Waited {
        let mut waiter = Waiter { loads: self, key, load, id: None };
        loop {
            match waiter.poll_with(Wake::Thread(current_thread())) {
                Poll::Ready(waited) => return waited,
                Poll::Pending => park(),
            }
        }
    }

    /// [`Loads::wait`] for a task: the future wakes it through its `Waker`.
    pub(crate) fn wait_async<'a>(&'a self, key: &'a K, load: &'a Arc<Load<V>>) -> Waiter<'a, K, V> {
        Waiter { loads: self, key, load, id: None }
    }

    /// The leader finishes with `value`; see [`Load::finish`].
    pub(crate) fn finish(&self, key: &K, load: &Arc<Load<V>>, value: V, store: impl FnOnce()) {
        let woken = load.finish(value, store);
        // A caller that finds the finished load in the map still gets its value; one that
        // comes after it left finds the value in the cache, stored before.
        self.forget(key, load);
        woken.into_iter().for_each(Wake::wake);
    }

    /// The leader is gone without a value.
    pub(crate) fn abandon(&self, key: &K, load: &Arc<Load<V>>) {
        self.counts.add(FAILED);
        self.hand_on(key, load);
    }

    fn hand_on(&self, key: &K, load: &Arc<Load<V>>) {
        match load.hand_on() {
            HandOn::To(wake) => wake.wake(),
            HandOn::Closed => self.forget(key, load),
        }
    }
}

impl<K: Hash + Eq + Clone, V> Loads<K, V> {
    /// Joins the load of `key`: the load, and whether this caller leads it (it was not in
    /// flight). A closed load found in the map is taken out, and the join starts again.
    pub(crate) fn join(&self, key: &K) -> (Arc<Load<V>>, bool) {
        loop {
            let (load, lead) = self.map.join(key, || Arc::new(Load::new()));
            if lead || !matches!(load.state.lock().phase, Phase::Closed) {
                return (load, lead);
            }
            self.forget(key, &load);
        }
    }
}

/// A waiter on a load; as a future, a waiting task. Dropping it leaves the load (and
/// hands the load on, if it had been handed to this waiter and not yet taken).
pub(crate) struct Waiter<'a, K: Hash + Eq, V> {
    loads: &'a Loads<K, V>,
    key: &'a K,
    load: &'a Arc<Load<V>>,
    id: Option<u64>,
}

impl<K: Hash + Eq, V> Future for Waiter<'_, K, V> {
    type Output = Waited;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Waited> {
        let waker = cx.waker().clone();
        self.poll_with(Wake::Task(waker))
    }
}

impl<K: Hash + Eq, V> Waiter<'_, K, V> {
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

impl<K: Hash + Eq, V> Drop for Waiter<'_, K, V> {
    fn drop(&mut self) {
        if let Some(id) = self.id.filter(|_| !failed_model()) {
            self.loads.waiting.fetch_sub(1, Ordering::Relaxed);
            if self.load.leave(id) {
                self.loads.hand_on(self.key, self.load);
            }
        }
    }
}

/// The map of loads in flight: a `DashMap` (its shards' locks are held only inside these
/// three calls).
#[cfg(not(cuckoo_gate_loom))]
struct Map<K, L>(dashmap::DashMap<K, L, ahash::RandomState>);

#[cfg(not(cuckoo_gate_loom))]
impl<K: Hash + Eq, L: Clone> Map<K, L> {
    fn new(hasher: ahash::RandomState) -> Self {
        Map(dashmap::DashMap::with_hasher(hasher))
    }

    fn get(&self, key: &K) -> Option<L> {
        self.0.get(key).map(|found| found.value().clone())
    }

    /// The value for `key`, and whether `make` made it (the key was absent).
    fn join(&self, key: &K, make: impl FnOnce() -> L) -> (L, bool)
    where
        K: Clone,
    {
        match self.0.entry(key.clone()) {
            dashmap::Entry::Occupied(found) => (found.get().clone(), false),
            dashmap::Entry::Vacant(vacant) => (vacant.insert(make()).value().clone(), true),
        }
    }

    fn remove_if(&self, key: &K, is: impl FnOnce(&L) -> bool) {
        // The entry, if removed, is dropped here, after the map's lock is released.
        let _removed = self.0.remove_if(key, |_, found| is(found));
    }

    /// Keeps the entries `keep` accepts. The others' keys (clones of callers' keys) drop
    /// under the map's lock.
    fn retain(&self, mut keep: impl FnMut(&L) -> bool) {
        self.0.retain(|_, load| keep(load));
    }
}

/// The map of loads in flight under loom: one loom mutex, so that the models see it.
#[cfg(cuckoo_gate_loom)]
struct Map<K, L>(Mutex<std::collections::HashMap<K, L, ahash::RandomState>>);

#[cfg(cuckoo_gate_loom)]
impl<K: Hash + Eq, L: Clone> Map<K, L> {
    fn new(hasher: ahash::RandomState) -> Self {
        Map(Mutex::new(std::collections::HashMap::with_hasher(hasher)))
    }

    fn get(&self, key: &K) -> Option<L> {
        self.0.lock().get(key).cloned()
    }

    fn join(&self, key: &K, make: impl FnOnce() -> L) -> (L, bool)
    where
        K: Clone,
    {
        let mut map = self.0.lock();
        match map.get(key) {
            Some(found) => (found.clone(), false),
            None => (map.entry(key.clone()).or_insert_with(make).clone(), true),
        }
    }

    fn remove_if(&self, key: &K, is: impl FnOnce(&L) -> bool) {
        let mut map = self.0.lock();
        let removed = map.get(key).is_some_and(is).then(|| map.remove(key));
        drop(map);
        drop(removed);
    }

    fn retain(&self, mut keep: impl FnMut(&L) -> bool) {
        self.0.lock().retain(|_, load| keep(load));
    }
}
