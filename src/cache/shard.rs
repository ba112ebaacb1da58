//! One shard of the cache: its entries, its policy and its write counters, all behind the
//! shard's lock.
//!
//! Panic safety: the only user code that runs under the lock is `K::eq` (while finding a
//! key, before anything changes), `V::clone` (on a hit, under the read lock), `K::clone`
//! (copying entries out for iteration, under the read lock) and `retain`'s predicate
//! (between removals of whole entries). Keys and values that leave the shard are handed
//! back, with why they left, to be told to the listener and dropped after the lock is
//! released.

use std::borrow::Borrow;
use std::hash::Hash;
use std::sync::Arc;

use hashbrown::HashTable;

#[cfg(feature = "serde")]
use super::bloom::BloomGhosts;
use super::expiry::{Expiry, Span, Standing};
use super::listener::RemovalCause;
use super::policy::{Policy, Removed, SharedSplit, MAX_FREQ};
use super::store::{Queue, Store};
use super::{Admission, AdmissionPolicy, Op, Tracked};
use crate::error::BuildError;
#[cfg(feature = "metrics")]
use crate::gate::GateStats;
use crate::gate::SeenBefore;
use crate::hashing::Keys;

/// Per-shard counters, written under the shard's write lock.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Counters {
    pub(crate) admitted: u64,
    pub(crate) rejected: u64,
    pub(crate) evictions: u64,
    pub(crate) expirations: u64,
}

/// The store first (`repr(C)`), where its layout expects to be (see `Store`).
#[repr(C)]
pub(crate) struct Shard<K, V> {
    store: Store<K, V>,
    policy: Policy,
    pub(crate) counters: Counters,
    /// Loads in flight for this shard's keys (see [`Pending`]); empty but while one runs.
    loading: HashTable<Pending>,
}

/// A load in flight, from the moment its leader looked for the key under the write lock
/// to the moment it stores its value. A write to the key in between (an insert, a
/// compute, a remove, a clear) marks it `written`, and the load's value is then not
/// stored: what the write did stands.
struct Pending {
    hash: u64,
    /// The load's identity (the address of its shared state, unique among live loads).
    ticket: usize,
    written: bool,
}

/// What a write leaves to report and drop once the lock is released.
pub(crate) struct Leftovers<K, V> {
    /// What the shard does not keep of an entry offered to it: the entry, when not
    /// stored; on an update, the key offered (the entry keeps its own). A load's store and
    /// a track offer their entry here, until the shard takes it.
    pub(crate) unkept: Option<(K, V)>,
    /// Entries that left the shard (evicted, expired, replaced, removed), with why.
    pub(crate) removed: Removed<K, V>,
}

impl<K, V> Leftovers<K, V> {
    /// Nothing yet; `keep` what left, even where dropping it runs no code, if a listener
    /// is to be told.
    pub(crate) fn new(keep: bool) -> Self {
        Leftovers { unkept: None, removed: Removed::new(keep) }
    }
}

/// What an insert stores, and under which rules.
#[derive(Clone, Copy)]
pub(crate) struct Write<'a> {
    pub(crate) hash: u64,
    pub(crate) weight: u32,
    /// The entry's own lifetime, in ticks; the cache's default if `None`.
    pub(crate) span: Option<Span>,
    pub(crate) gate: Option<&'a SeenBefore>,
    pub(crate) expiry: &'a Expiry,
    /// The load this write stores the value of ([`Shard::begin_load`]'s ticket): stored
    /// only if no write to the key came since the load began.
    pub(crate) load: Option<usize>,
    /// The hasher `hash` is by (see `hashing.rs`).
    pub(crate) keys: &'a Keys,
}

#[cfg(feature = "serde")]
/// An entry as a save copies it, and a restore puts it back.
pub(crate) struct Exported<K, V> {
    pub(crate) key: K,
    pub(crate) value: V,
    pub(crate) weight: u32,
    /// Whether it was on the main queue (S3-FIFO's small queue otherwise).
    pub(crate) main: bool,
    /// Its requests counted (S3-FIFO's and CLOCK's frequency).
    pub(crate) freq: u8,
    pub(crate) lifetime: Option<Left>,
}

#[cfg(feature = "serde")]
/// What was left of an entry's lifetime, in ticks: until its grace ends (its deadline, if
/// it has no grace), and its stale window and grace.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Left {
    pub(crate) grace_end: u64,
    pub(crate) window: u64,
    pub(crate) grace: u64,
}

/// What a leader found as its load began (see [`Shard::begin_load`]).
pub(crate) enum Begun<V> {
    /// The key is held (and fresh, or stale to a caller that missed): no load.
    Live(V),
    /// The key is held and stale: a reload, registered; the old value.
    Stale(V),
    /// The key expired and is in grace: a load, registered; the old value, for a failure.
    Grace(V),
    /// The key is not held: a load, registered.
    Absent,
}

/// What a loader's look at its key found.
pub(crate) enum Looked<V> {
    /// A hit.
    Fresh(V),
    /// A hit on a stale entry: to be reloaded.
    Stale(V),
    /// A miss.
    Miss,
}

impl<V> Looked<V> {
    #[inline(always)]
    pub(crate) fn is_hit(&self) -> bool {
        !matches!(self, Looked::Miss)
    }

    /// A stale hit's old value.
    #[inline(always)]
    pub(crate) fn stale(self) -> Option<V> {
        match self {
            Looked::Stale(old) => Some(old),
            _ => None,
        }
    }
}

/// What a compute did (see [`Shard::compute`]).
pub(crate) enum Outcome<K, V> {
    /// Nothing changed.
    Kept,
    /// The key was absent; the value is stored.
    Inserted,
    /// The value replaced this one.
    Updated(V),
    /// The key was removed.
    Removed(K, V),
    /// The value weighs more than the shard holds: not stored (handed back here when the
    /// key was present, and removed).
    TooHeavy(Option<V>),
}

impl<K: Hash + Eq, V: Clone> Shard<K, V> {
    /// A shard holding at most `capacity` weight in about `entries` entries (`weighted` if
    /// they weigh other than 1), taking its part of S3-FIFO's `split`; an error if its
    /// policy's tables do not fit in memory.
    pub(crate) fn new(
        policy: AdmissionPolicy,
        capacity: u64,
        entries: usize,
        ghosts: usize,
        split: Option<Arc<SharedSplit>>,
        weighted: bool,
    ) -> Result<Self, BuildError> {
        Ok(Shard {
            // Empty until entries come: an empty cache's memory does not grow with its
            // capacity or its shard count.
            store: Store::expecting(entries, weighted),
            policy: Policy::new(policy, capacity, entries, ghosts, split)?,
            counters: Counters::default(),
            loading: HashTable::new(),
        })
    }

    pub(crate) fn len(&self) -> usize {
        self.store.len()
    }

    pub(crate) fn weight(&self) -> u64 {
        self.store.total_weight()
    }

    /// The counters of S3-FIFO's ghosts, under that policy.
    #[cfg(feature = "metrics")]
    pub(crate) fn ghosts(&self) -> Option<GateStats> {
        self.policy.s3fifo.as_ref().map(|s3fifo| s3fifo.ghosts.stats())
    }

    /// The index of `key`'s entry, unless it has expired; a `hit` moves an idle deadline
    /// on. The clock is read only in a store that has deadlines.
    #[inline]
    fn find_live<Q: ?Sized + Eq>(&self, hash: u64, key: &Q, hit: bool) -> Option<u32>
    where
        K: Borrow<Q>,
    {
        let index = self.store.find(hash, key)?;
        match self.store.deadlines() {
            Some(deadlines) if !deadlines.live(index, hit) => None,
            _ => Some(index),
        }
    }

    /// A lookup under the read lock: a hit counts the request on the entry. An expired
    /// entry is a miss; the clock is read only in a store that has deadlines.
    #[inline(always)]
    pub(crate) fn get<Q: ?Sized + Eq>(&self, hash: u64, key: &Q) -> Option<V>
    where
        K: Borrow<Q>,
    {
        let entry = self.store.find_entry(hash, key)?;
        if let Some(deadlines) = self.store.deadlines() {
            // The lookup of a cache without deadlines stays straight.
            crate::primitive::cold_path();
            if !deadlines.live_lazy(|| self.store.index_of(entry), true) {
                return None;
            }
        }
        entry.touch(MAX_FREQ);
        Some(entry.value.clone())
    }

    /// A loader's lookup under the read lock: [`Shard::get`], and whether a hit is stale.
    #[inline(always)]
    pub(crate) fn look<Q: ?Sized + Eq>(&self, hash: u64, key: &Q) -> Looked<V>
    where
        K: Borrow<Q>,
    {
        let Some(entry) = self.store.find_entry(hash, key) else {
            return Looked::Miss;
        };
        if let Some(deadlines) = self.store.deadlines() {
            crate::primitive::cold_path();
            // A way out of its own: the path without deadlines tests no standing.
            return match deadlines.look_lazy(|| self.store.index_of(entry)) {
                Standing::Fresh => {
                    entry.touch(MAX_FREQ);
                    Looked::Fresh(entry.value.clone())
                }
                Standing::Stale => {
                    entry.touch(MAX_FREQ);
                    Looked::Stale(entry.value.clone())
                }
                Standing::Expired => Looked::Miss,
            };
        }
        entry.touch(MAX_FREQ);
        Looked::Fresh(entry.value.clone())
    }

    /// [`Shard::look`] under the write lock, for LRU: a hit becomes most recently used.
    #[inline(never)]
    pub(crate) fn look_mut<Q: ?Sized + Eq>(&mut self, hash: u64, key: &Q) -> Looked<V>
    where
        K: Borrow<Q>,
    {
        let Some(index) = self.find_live(hash, key, true) else {
            return Looked::Miss;
        };
        let stale = self
            .store
            .deadlines()
            .is_some_and(|deadlines| deadlines.standing(index, deadlines.now()) == Standing::Stale);
        self.store.requeue(index, Queue::Main);
        let value = self.store.entry(index).value.clone();
        if stale {
            Looked::Stale(value)
        } else {
            Looked::Fresh(value)
        }
    }

    /// A lookup that is not a request: the entry's order, frequency and idle time stay
    /// as they are.
    pub(crate) fn peek<Q: ?Sized + Eq>(&self, hash: u64, key: &Q) -> Option<V>
    where
        K: Borrow<Q>,
    {
        Some(self.store.entry(self.find_live(hash, key, false)?).value.clone())
    }

    /// Whether `key` is held (and not expired); not a request.
    pub(crate) fn contains<Q: ?Sized + Eq>(&self, hash: u64, key: &Q) -> bool
    where
        K: Borrow<Q>,
    {
        self.find_live(hash, key, false).is_some()
    }

    /// A lookup under the write lock, for LRU: a hit becomes most recently used. Out of
    /// line: the read path it sits beside keeps its registers.
    #[inline(never)]
    pub(crate) fn get_mut<Q: ?Sized + Eq>(&mut self, hash: u64, key: &Q) -> Option<V>
    where
        K: Borrow<Q>,
    {
        let index = self.find_live(hash, key, true)?;
        self.store.requeue(index, Queue::Main);
        Some(self.store.entry(index).value.clone())
    }

    /// Removes `key`, returning its entry, with why: removed, or expired (a value the
    /// caller does not get). A load of the key in flight will not store its value.
    pub(crate) fn remove<Q: ?Sized + Eq>(
        &mut self,
        hash: u64,
        key: &Q,
        expiry: &Expiry,
    ) -> Option<(K, V, RemovalCause)>
    where
        K: Borrow<Q>,
    {
        if !crate::broken::REMOVE_IGNORES_LOAD {
            self.written(hash);
        }
        let index = self.store.find(hash, key)?;
        let expired = self.store.deadlines().is_some() && self.store.expired(index, expiry.clock.now());
        let entry = self.store.remove(index);
        if expired {
            self.counters.expirations += 1;
            return Some((entry.key, entry.value, RemovalCause::Expired));
        }
        Some((entry.key, entry.value, RemovalCause::Removed))
    }

    /// Where `key` (of `hash`) is held, if it is: what a write finds before it hands the
    /// shard its entry (see [`Shard::insert`]).
    #[inline(always)]
    pub(crate) fn find(&self, hash: u64, key: &K) -> Option<u32> {
        self.store.find(hash, key)
    }

    /// Stores `key` and `value` if the key is present (at `found`, replacing its value: a
    /// request, like a hit; unless not `replace`, when the present value stays and the
    /// offered entry is handed back in `out`) or the policy admits it (`hits`, the shard's
    /// lock's count, tells S3-FIFO's climber the hit ratio). A present entry that has
    /// expired counts as absent. The entry gets its deadline from `write`'s lifetime or the
    /// cache's, and a few slots are looked at for expired entries to reclaim. What the
    /// shard does not keep goes to `out`.
    ///
    /// The caller finds the key ([`Shard::find`]) while it still owns the entry, outside
    /// this call: if `K::eq` panics, the entry is dropped after the lock is released.
    #[allow(clippy::too_many_arguments)]
    #[inline(always)]
    pub(crate) fn insert(
        &mut self,
        write: &Write<'_>,
        found: Option<u32>,
        key: K,
        value: V,
        hits: u64,
        out: &mut Leftovers<K, V>,
    ) -> Admission {
        let (hash, weight) = (write.hash, write.weight);
        // A user's insert replaces a present value; a load's store keeps it, and stores
        // nothing if the key was written since the load began.
        let replace = match write.load {
            None => {
                if !crate::broken::WRITE_IGNORES_RELOAD {
                    self.written(hash);
                }
                true
            }
            Some(ticket) if self.end_load(hash, ticket) => return Admission::Updated,
            // No write came since the load began: what the key holds is what the load was
            // to replace (a stale entry, or one in grace), or nothing.
            Some(_) => true,
        };
        let timed = write.expiry.started();
        let now = if timed { write.expiry.clock.now() } else { 0 };
        let too_heavy = u64::from(weight) > self.policy.capacity;
        let mut found = found;
        // An expired entry (in grace, or not yet reclaimed) counts as absent, but its key
        // was held: its new value needs no admission.
        let mut held = false;
        if let Some(index) = found.filter(|&index| timed && self.store.expired(index, now)) {
            let old = self.store.remove(index);
            out.removed.push((old.key, old.value), RemovalCause::Expired);
            self.counters.expirations += 1;
            (found, held) = (None, true);
        }
        let (admission, spare) = match found {
            Some(_) if !replace => {
                out.unkept = Some((key, value));
                return Admission::Updated;
            }
            Some(index) if too_heavy => {
                // The key's new value does not fit: it leaves rather than keep a value
                // its owner has replaced.
                let old = self.store.remove(index);
                out.removed.push((old.key, old.value), RemovalCause::Replaced);
                out.unkept = Some((key, value));
                self.counters.rejected += 1;
                (Admission::TooHeavy, None)
            }
            Some(index) => {
                // A value past its freshness that a write or its reload replaces expired.
                let stale = timed
                    && self
                        .store
                        .deadlines()
                        .is_some_and(|deadlines| deadlines.standing(index, now) == Standing::Stale);
                let old = self.update(index, value, weight);
                let cause = if stale { RemovalCause::Refreshed } else { RemovalCause::Replaced };
                out.removed.push((key, old), cause);
                (Admission::Updated, Some(index))
            }
            None if too_heavy => {
                out.unkept = Some((key, value));
                self.counters.rejected += 1;
                (Admission::TooHeavy, None)
            }
            None => match match held {
                true => Some(self.policy.place(&mut self.store, hash, weight)),
                false => self.policy.admit(&mut self.store, hash, weight, write.gate, hits),
            } {
                Some(queue) => {
                    let index = self.store.insert(key, value, hash, weight, queue);
                    self.counters.admitted += 1;
                    (Admission::Admitted, Some(index))
                }
                None => {
                    out.unkept = Some((key, value));
                    self.counters.rejected += 1;
                    (Admission::Rejected, None)
                }
            },
        };
        if let (true, Some(index)) = (timed, spare) {
            self.store.set_deadline(index, now, write.span, write.expiry);
        }
        self.settle(now, timed, spare, write.gate, out);
        admission
    }

    /// Counts a request on the key offered in `out.unkept` if it is held (and live), and
    /// leaves its value as it is (the offered entry stays in `out`); otherwise stores it
    /// as the policy places a new key, with no admission and no eviction: the shard may
    /// then hold more than its capacity, until a later write evicts down to it. Whether
    /// the key was held, stored, or not stored (heavier than the shard).
    pub(crate) fn track(&mut self, write: &Write<'_>, out: &mut Leftovers<K, V>) -> Tracked {
        self.written(write.hash);
        let timed = write.expiry.started();
        let now = if timed { write.expiry.clock.now() } else { 0 };
        let Some((offered, _)) = &out.unkept else {
            debug_assert!(false, "a track offers an entry");
            return Tracked::TooHeavy;
        };
        if let Some(index) = self.store.find(write.hash, offered) {
            if !(timed && self.store.expired(index, now)) {
                match self.policy.kind {
                    AdmissionPolicy::Always => self.store.requeue(index, Queue::Main),
                    _ => self.store.entry(index).touch(MAX_FREQ),
                }
                return Tracked::Held;
            }
            let old = self.store.remove(index);
            out.removed.push((old.key, old.value), RemovalCause::Expired);
            self.counters.expirations += 1;
        }
        if u64::from(write.weight) > self.policy.capacity {
            self.counters.rejected += 1;
            return Tracked::TooHeavy;
        }
        let (key, value) = out.unkept.take().expect("the offered entry");
        let queue = self.policy.place(&mut self.store, write.hash, write.weight);
        let index = self.store.insert(key, value, write.hash, write.weight, queue);
        if timed {
            self.store.set_deadline(index, now, write.span, write.expiry);
        }
        self.counters.admitted += 1;
        Tracked::Stored
    }

    /// Gives the entry at `index` its new `value` of `weight`, as a request on it; returns
    /// the old value. The caller gives it its deadline.
    #[inline(always)]
    fn update(&mut self, index: u32, value: V, weight: u32) -> V {
        let reweighed = self.store.weight_of(index) != weight;
        let entry = self.store.entry_mut(index);
        let old = std::mem::replace(&mut entry.value, value);
        match self.policy.kind {
            AdmissionPolicy::Always => self.store.requeue(index, Queue::Main),
            _ => entry.touch(MAX_FREQ),
        }
        if reweighed {
            self.store.reweigh(index, weight);
        }
        old
    }

    /// A write's last steps: reclaims a few expired entries (if `timed`) and evicts down
    /// to the capacity, sparing `spare`, counting what left.
    #[inline(always)]
    fn settle(
        &mut self,
        now: u64,
        timed: bool,
        spare: Option<u32>,
        gate: Option<&SeenBefore>,
        out: &mut Leftovers<K, V>,
    ) {
        if timed {
            self.reclaim(now, spare, out);
        }
        let (evicted, expired) = self.policy.evict(&mut self.store, spare, gate, now, &mut out.removed);
        self.counters.evictions += evicted;
        self.counters.expirations += expired;
    }

    /// Reclaims what expired at `now` among the few slots a write looks at, sparing
    /// `spare`: nothing to do before the column's earliest deadline.
    #[inline(always)]
    fn reclaim(&mut self, now: u64, spare: Option<u32>, out: &mut Leftovers<K, V>) {
        if self.store.sweeping(now) {
            self.sweep(now, spare, out);
        }
    }

    /// [`Shard::reclaim`] past the earliest deadline, out of line.
    #[inline(never)]
    fn sweep(&mut self, now: u64, spare: Option<u32>, out: &mut Leftovers<K, V>) {
        for _ in 0..2 {
            match self.store.next_expired(now) {
                Some(index) if Some(index) != spare => {
                    let old = self.store.remove(index);
                    out.removed.push((old.key, old.value), RemovalCause::Expired);
                    self.counters.expirations += 1;
                }
                _ => break,
            }
        }
    }

    /// Removes every entry expired at `now`.
    pub(crate) fn purge(&mut self, now: u64, out: &mut Removed<K, V>) {
        if self.store.deadlines().is_none() {
            return;
        }
        let expired: Vec<u32> =
            self.store.indices().filter(|&index| self.store.reclaimable(index, now)).collect();
        for index in expired {
            let old = self.store.remove(index);
            out.push((old.key, old.value), RemovalCause::Expired);
            self.counters.expirations += 1;
        }
    }

    /// Removes the entries `keep` rejects (and those expired at `now`), one at a time:
    /// if `keep` panics, the shard is whole, and what it removed is in `out`.
    pub(crate) fn retain(
        &mut self,
        keep: &mut impl FnMut(&K, &V) -> bool,
        now: u64,
        out: &mut Removed<K, V>,
    ) {
        let indices: Vec<u32> = self.store.indices().collect();
        for index in indices {
            let cause = if self.store.expired(index, now) {
                self.counters.expirations += 1;
                RemovalCause::Expired
            } else {
                let entry = self.store.entry(index);
                if keep(&entry.key, &entry.value) {
                    continue;
                }
                RemovalCause::Removed
            };
            let old = self.store.remove(index);
            out.push((old.key, old.value), cause);
        }
    }

    /// Clones of the entries held and not expired, pushed onto `out` (the caller's, so
    /// that if a `clone` panics, the clones made so far drop after the lock is released).
    pub(crate) fn entries_into(&self, expiry: &Expiry, out: &mut Vec<(K, V)>)
    where
        K: Clone,
    {
        let now = if self.store.deadlines().is_some() { expiry.clock.now() } else { 0 };
        out.reserve(self.store.len());
        for index in self.store.indices().filter(|&index| !self.store.expired(index, now)) {
            let entry = self.store.entry(index);
            out.push((entry.key.clone(), entry.value.clone()));
        }
    }

    /// A leader begins its load of `key` (of `hash`, the load's `ticket`): the live value
    /// if the key is held now (another caller's load stored it since this caller missed),
    /// or else the load is registered, and a write to the key from now on marks it. A
    /// stale entry is a reload's to `refresh` (and live to a caller that missed); one in
    /// grace is expired, its value kept for a failed load.
    pub(crate) fn begin_load<Q: ?Sized + Eq>(
        &mut self,
        hash: u64,
        key: &Q,
        ticket: usize,
        refresh: bool,
    ) -> Begun<V>
    where
        K: Borrow<Q>,
    {
        let found = self.store.find(hash, key);
        let begun = match (found, self.store.deadlines()) {
            (None, _) => Begun::Absent,
            (Some(index), None) => return Begun::Live(self.store.entry(index).value.clone()),
            (Some(index), Some(deadlines)) => {
                let now = deadlines.now();
                let value = || self.store.entry(index).value.clone();
                match deadlines.standing(index, now) {
                    Standing::Stale if refresh => Begun::Stale(value()),
                    Standing::Fresh | Standing::Stale => return Begun::Live(value()),
                    Standing::Expired if deadlines.reclaimable(index, now) => Begun::Absent,
                    Standing::Expired => Begun::Grace(value()),
                }
            }
        };
        match self.loading.find_mut(hash, |p| p.ticket == ticket) {
            // A load handed to a new leader starts again.
            Some(pending) => pending.written = false,
            None => {
                _ = self.loading.insert_unique(hash, Pending { hash, ticket, written: false }, |p| p.hash)
            }
        }
        begun
    }

    /// The load of `ticket` ends: whether the key was written since it began.
    pub(crate) fn end_load(&mut self, hash: u64, ticket: usize) -> bool {
        match self.loading.find_entry(hash, |p| p.ticket == ticket) {
            Ok(pending) => pending.remove().0.written,
            // Never registered (it found the key held), or cleared away.
            Err(_) => true,
        }
    }

    /// A write to the key of `hash`: loads in flight for it will not store their values.
    #[inline(always)]
    fn written(&mut self, hash: u64) {
        if !self.loading.is_empty() {
            self.mark_written(hash);
        }
    }

    #[cold]
    #[inline(never)]
    fn mark_written(&mut self, hash: u64) {
        // Keys of equal hashes are marked together: at worst a load is not stored.
        self.loading.iter_hash_mut(hash).filter(|p| p.hash == hash).for_each(|p| p.written = true);
    }

    /// An atomic read-modify-write of `key` (of `hash`): `decide` sees its live value and
    /// says what becomes of it; `assess` weighs a new value and gives its lifetime (if of
    /// its own). Both run under the write lock, before anything changes. A stored value is
    /// not subject to admission (the caller asked for it by name); a new key is placed
    /// as the policy places a new key, and eviction spares it. Loads of the key in flight
    /// will not store their values, whatever `decide` says.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn compute<Q: ?Sized + Eq>(
        &mut self,
        hash: u64,
        key: &Q,
        make_key: impl FnOnce(&Q) -> K,
        decide: impl FnOnce(Option<&V>) -> Op<V>,
        assess: impl FnOnce(&K, &V) -> (u32, Option<Span>),
        write: &Write<'_>,
        out: &mut Leftovers<K, V>,
    ) -> Outcome<K, V>
    where
        K: Borrow<Q>,
    {
        if !crate::broken::COMPUTE_IGNORES_LOAD {
            self.written(hash);
        }
        let timed = write.expiry.started();
        let now = if timed { write.expiry.clock.now() } else { 0 };
        let mut found = self.store.find(hash, key);
        if let Some(index) = found.filter(|&index| timed && self.store.expired(index, now)) {
            let old = self.store.remove(index);
            out.removed.push((old.key, old.value), RemovalCause::Expired);
            self.counters.expirations += 1;
            found = None;
        }
        let value = match (decide(found.map(|index| &self.store.entry(index).value)), found) {
            (Op::Keep, _) | (Op::Remove, None) => return Outcome::Kept,
            (Op::Remove, Some(index)) => {
                let old = self.store.remove(index);
                return Outcome::Removed(old.key, old.value);
            }
            (Op::Put(value), _) => value,
        };
        let (outcome, spare, span) = match found {
            Some(index) => {
                let (weight, span) = assess(&self.store.entry(index).key, &value);
                let weight = weight.max(1);
                if u64::from(weight) > self.policy.capacity {
                    // As an insert's: the key leaves rather than keep a replaced value.
                    let old = self.store.remove(index);
                    out.removed.push((old.key, old.value), RemovalCause::Replaced);
                    self.counters.rejected += 1;
                    return Outcome::TooHeavy(Some(value));
                }
                let old = self.update(index, value, weight);
                (Outcome::Updated(old), index, span)
            }
            None => {
                let key = make_key(key);
                let (weight, span) = assess(&key, &value);
                let weight = weight.max(1);
                if u64::from(weight) > self.policy.capacity {
                    out.unkept = Some((key, value));
                    self.counters.rejected += 1;
                    return Outcome::TooHeavy(None);
                }
                let queue = self.policy.place(&mut self.store, hash, weight);
                let index = self.store.insert(key, value, hash, weight, queue);
                self.counters.admitted += 1;
                (Outcome::Inserted, index, span)
            }
        };
        if timed {
            self.store.set_deadline(spare, now, span.or(write.span), write.expiry);
        }
        self.settle(now, timed, Some(spare), write.gate, out);
        outcome
    }

    #[cfg(feature = "serde")]
    /// Copies of the entries held (those expired in grace too, not those past it) onto
    /// `out`, each queue oldest first, with what a restore needs to put them back as they
    /// were (the caller's `Vec`, as in [`Shard::entries_into`]).
    pub(crate) fn export(&self, expiry: &Expiry, out: &mut Vec<Exported<K, V>>)
    where
        K: Clone,
    {
        let deadlines = self.store.deadlines();
        let now = if deadlines.is_some() { expiry.clock.now() } else { 0 };
        out.reserve(self.store.len());
        for queue in [Queue::Small, Queue::Main] {
            for index in self.store.in_order(queue) {
                let span = deadlines.and_then(|deadlines| deadlines.span_of(index));
                let lifetime = match span {
                    Some((deadline, window, grace)) => {
                        match deadline.saturating_add(grace).checked_sub(now) {
                            Some(left) if left > 0 => Some(Left { grace_end: left, window, grace }),
                            _ => continue,
                        }
                    }
                    None => None,
                };
                let entry = self.store.entry(index);
                out.push(Exported {
                    key: entry.key.clone(),
                    value: entry.value.clone(),
                    weight: self.store.weight_of(index),
                    main: queue == Queue::Main,
                    freq: entry.freq.load(crate::primitive::Ordering::Relaxed),
                    lifetime,
                });
            }
        }
    }

    #[cfg(feature = "serde")]
    /// The ghosts' state and the climber's, encoded (see `BloomGhosts::save` and
    /// `Climber::save`), under S3-FIFO, with `hits` the shard's lock's count.
    pub(crate) fn save_ghosts(&self, hits: u64) -> Option<Vec<u8>> {
        self.policy.s3fifo.as_ref().map(|s3fifo| {
            let mut out = Vec::new();
            s3fifo.ghosts.save(&mut out);
            s3fifo.climber.save(hits, &mut out);
            match &s3fifo.lfu {
                Some(lfu) => lfu.save(&mut out),
                None => out.push(0),
            }
            out
        })
    }

    #[cfg(feature = "serde")]
    /// Reads the ghosts and (from format version 4) the climber a save wrote: taken over
    /// if `alike` and sized alike (see `BloomGhosts::restore`), the climber counting on
    /// from the `hits` this shard's lock has counted; dropped under another policy.
    pub(crate) fn restore_ghosts<R: std::io::Read + ?Sized>(
        &mut self,
        d: &mut crate::snapshot::Decoder<'_, R>,
        alike: bool,
        hits: u64,
    ) -> Result<(), crate::snapshot::SnapshotError> {
        let mut spare;
        let (ghosts, alike) = match &mut self.policy.s3fifo {
            Some(s3fifo) => (&mut s3fifo.ghosts, alike),
            None => {
                spare = BloomGhosts::new(1).expect("a ghost of one key");
                (&mut spare, false)
            }
        };
        let taken = ghosts.restore(d, alike)?;
        if d.version() >= 4 {
            let climber = super::climber::Climber::restore(d, hits, ghosts.capacity())?;
            if let (Some(s3fifo), true) = (&mut self.policy.s3fifo, taken) {
                s3fifo.climber = climber;
            }
        }
        if d.version() >= 6 {
            // The sketch and the credit, if saved with them: taken over by a shard that has
            // them, if alike and sized alike.
            let mine = match &mut self.policy.s3fifo {
                Some(super::policy::S3Fifo { lfu: Some(lfu), .. }) if alike => Some(&mut **lfu),
                _ => None,
            };
            super::policy::Lfu::restore(d, mine)?;
        }
        Ok(())
    }

    #[cfg(feature = "serde")]
    /// S3-FIFO's split: the shared state every shard holds a handle to.
    pub(crate) fn split(&self) -> Option<&super::policy::SharedSplit> {
        self.policy.s3fifo.as_ref().map(|s3fifo| &*s3fifo.split)
    }

    #[cfg(feature = "serde")]
    /// Sets S3-FIFO's small-queue target to `small` of a cache of `of` (scaled).
    pub(crate) fn set_split_target(&self, small: u64, of: u64) {
        if let Some(s3fifo) = &self.policy.s3fifo {
            s3fifo.split.set_target(small, of);
        }
    }

    #[cfg(feature = "serde")]
    /// Puts back an entry a save copied (see [`Shard::export`]), as the newest of its
    /// queue, with its requests and, ending at `now` plus what was `left` of it, its
    /// lifetime; no admission (it was admitted once). A key already held gives way to it.
    /// What it evicts goes to `out`, and so does the entry itself (as evicted) if it weighs
    /// more than the shard holds; how many entries that evicted.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn import(
        &mut self,
        entry: Exported<K, V>,
        hash: u64,
        weight: u32,
        now: u64,
        expiry: &Expiry,
        gate: Option<&SeenBefore>,
        out: &mut Removed<K, V>,
    ) -> u64 {
        if u64::from(weight) > self.policy.capacity {
            out.push((entry.key, entry.value), RemovalCause::Evicted);
            return 1;
        }
        if let Some(index) = self.store.find(hash, &entry.key) {
            let old = self.store.remove(index);
            out.push((old.key, old.value), RemovalCause::Replaced);
        }
        // Back to the queue it was saved in: a cache smaller than the one saved evicts by
        // its policy as entries arrive (under S3-FIFO those not requested again leave first).
        let queue = match (&self.policy.s3fifo, entry.main) {
            (Some(_), false) => Queue::Small,
            _ => Queue::Main,
        };
        let index = self.store.insert(entry.key, entry.value, hash, weight, queue);
        self.store.entry(index).freq.store(entry.freq.min(MAX_FREQ), crate::primitive::Ordering::Relaxed);
        if let Some(Left { grace_end, window, grace }) = entry.lifetime {
            let grace_end = now.saturating_add(grace_end);
            let deadline = grace_end.saturating_sub(grace);
            let span = Span {
                ttl: deadline.saturating_sub(now),
                fresh: deadline.saturating_sub(window).saturating_sub(now),
                grace: grace_end - deadline.max(now),
            };
            expiry.start();
            self.store.set_deadline(index, now, Some(span), expiry);
        }
        self.counters.admitted += 1;
        // The entry just stored is spared: it weighs no more than the shard holds.
        let (evicted, expired) = self.policy.evict(&mut self.store, Some(index), gate, now, out);
        self.counters.evictions += evicted;
        self.counters.expirations += expired;
        evicted
    }

    /// Empties the shard, handing back what it held to be dropped after the lock is
    /// released.
    pub(crate) fn clear(&mut self) -> Store<K, V> {
        self.loading.iter_mut().for_each(|p| p.written = true);
        let empty = self.store.emptied();
        std::mem::replace(&mut self.store, empty)
    }
}

#[cfg(all(test, not(cuckoo_gate_loom)))]
mod tests {
    #[test]
    fn the_store_comes_first() {
        assert_eq!(std::mem::offset_of!(super::Shard<u64, u64>, store), 0);
    }
}
