//! One shard of the cache: its entries, its policy and its write counters, all behind the
//! shard's lock.
//!
//! Panic safety: the only user code that runs under the lock is `K::eq` (while finding a
//! key, before anything changes), `V::clone` (on a hit, under the read lock), `K::clone`
//! (copying entries out for iteration, under the read lock) and `retain`'s predicate
//! (between removals of whole entries). Keys and values that leave the shard are handed
//! back, with why they left, to be told to the listener and dropped after the lock is
//! released.

use std::hash::Hash;
use std::sync::Arc;

use super::expiry::{Expiry, NEVER};
use super::listener::RemovalCause;
use super::policy::{Policy, Removed, SharedSplit, MAX_FREQ};
use super::store::{Queue, Store};
use super::{Admission, AdmissionPolicy};
use crate::error::BuildError;
#[cfg(feature = "metrics")]
use crate::gate::GateStats;
use crate::gate::SeenBefore;

/// Per-shard counters, written under the shard's write lock.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Counters {
    pub(crate) admitted: u64,
    pub(crate) rejected: u64,
    pub(crate) evictions: u64,
    pub(crate) expirations: u64,
}

pub(crate) struct Shard<K, V> {
    store: Store<K, V>,
    policy: Policy,
    pub(crate) counters: Counters,
}

/// What a write leaves to report and drop once the lock is released.
pub(crate) struct Leftovers<K, V> {
    /// The entry offered to an insert, until the shard takes it; after, what the shard
    /// does not keep of it: the entry, when not stored; on an update, the key offered (the
    /// entry keeps its own).
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
pub(crate) struct Write<'a> {
    pub(crate) hash: u64,
    pub(crate) weight: u32,
    /// Whether a present value is replaced (an insert) or kept (a load's store).
    pub(crate) replace: bool,
    /// The entry's own time to live, in ticks; the cache's default if `None`.
    pub(crate) lifetime: Option<u64>,
    pub(crate) gate: Option<&'a SeenBefore>,
    pub(crate) expiry: &'a Expiry,
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
            policy: Policy::new(policy, capacity, ghosts, split)?,
            counters: Counters::default(),
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
    fn find_live(&self, hash: u64, key: &K, hit: bool) -> Option<u32> {
        let index = self.store.find(hash, key)?;
        match self.store.deadlines() {
            Some(deadlines) if !deadlines.live(index, hit) => None,
            _ => Some(index),
        }
    }

    /// A lookup under the read lock: a hit counts the request on the entry. An expired
    /// entry is a miss; the clock is read only in a store that has deadlines.
    #[inline(always)]
    pub(crate) fn get(&self, hash: u64, key: &K) -> Option<V> {
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

    /// A lookup that is not a request: the entry's order, frequency and idle time stay
    /// as they are.
    pub(crate) fn peek(&self, hash: u64, key: &K) -> Option<V> {
        Some(self.store.entry(self.find_live(hash, key, false)?).value.clone())
    }

    /// Whether `key` is held (and not expired); not a request.
    pub(crate) fn contains(&self, hash: u64, key: &K) -> bool {
        self.find_live(hash, key, false).is_some()
    }

    /// A lookup under the write lock, for LRU: a hit becomes most recently used.
    pub(crate) fn get_mut(&mut self, hash: u64, key: &K) -> Option<V> {
        let index = self.find_live(hash, key, true)?;
        self.store.requeue(index, Queue::Main);
        Some(self.store.entry(index).value.clone())
    }

    /// Removes `key`, returning its entry, with why: removed, or expired (a value the
    /// caller does not get).
    pub(crate) fn remove(&mut self, hash: u64, key: &K, expiry: &Expiry) -> Option<(K, V, RemovalCause)> {
        let index = self.store.find(hash, key)?;
        let expired = self.store.deadlines().is_some() && self.store.expired(index, expiry.clock.now());
        let entry = self.store.remove(index);
        if expired {
            self.counters.expirations += 1;
            return Some((entry.key, entry.value, RemovalCause::Expired));
        }
        Some((entry.key, entry.value, RemovalCause::Removed))
    }

    /// Stores the entry offered in `out.unkept` if its key is present (replacing its
    /// value: a request, like a hit; unless not `replace`, when the present value stays and
    /// the offered entry is handed back in `out`) or the policy admits it. A present entry that has expired
    /// counts as absent. The entry gets its deadline from `write`'s lifetime or the
    /// cache's, and a few slots are looked at for expired entries to reclaim.
    #[inline]
    pub(crate) fn insert(&mut self, write: &Write<'_>, out: &mut Leftovers<K, V>) -> Admission {
        let (hash, weight) = (write.hash, write.weight);
        let before = (out.removed.evicted, out.removed.expired);
        let timed = self.store.deadlines().is_some() || write.lifetime.is_some() || write.expiry.by_default();
        let (now, lifetime) = match timed {
            true => (write.expiry.clock.now(), write.lifetime.unwrap_or(write.expiry.ttl)),
            false => (0, NEVER),
        };
        let too_heavy = u64::from(weight) > self.policy.capacity;
        // The offered entry waits in `out` while `K::eq` runs: if it panics, the entry is
        // dropped with `out`, after the lock is released.
        let Some((offered, _)) = &out.unkept else {
            debug_assert!(false, "an insert offers an entry");
            return Admission::Rejected;
        };
        let mut found = self.store.find(hash, offered);
        let (key, value) = out.unkept.take().expect("the offered entry");
        if let Some(index) = found.filter(|&index| timed && self.store.expired(index, now)) {
            let old = self.store.remove(index);
            out.removed.push((old.key, old.value), RemovalCause::Expired);
            found = None;
        }
        let (admission, spare) = match found {
            Some(_) if !write.replace => {
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
                if timed {
                    self.store.set_deadline(index, now, lifetime, write.expiry);
                }
                out.removed.push((key, old), RemovalCause::Replaced);
                (Admission::Updated, Some(index))
            }
            None if too_heavy => {
                out.unkept = Some((key, value));
                self.counters.rejected += 1;
                (Admission::TooHeavy, None)
            }
            None => match self.policy.admit(&self.store, hash, weight, write.gate) {
                Some(queue) => {
                    let index = self.store.insert(key, value, hash, weight, queue);
                    if timed {
                        self.store.set_deadline(index, now, lifetime, write.expiry);
                    }
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
        if timed {
            self.reclaim(now, spare, out);
        }
        self.policy.evict(&mut self.store, spare, write.gate, now, &mut out.removed);
        self.counters.evictions += (out.removed.evicted - before.0) as u64;
        self.counters.expirations += (out.removed.expired - before.1) as u64;
        admission
    }

    /// Reclaims what expired at `now` among the few slots a write looks at, sparing
    /// `spare`.
    #[inline]
    fn reclaim(&mut self, now: u64, spare: Option<u32>, out: &mut Leftovers<K, V>) {
        for _ in 0..2 {
            match self.store.next_expired(now) {
                Some(index) if Some(index) != spare => {
                    let old = self.store.remove(index);
                    out.removed.push((old.key, old.value), RemovalCause::Expired);
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
            self.store.indices().filter(|&index| self.store.expired(index, now)).collect();
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

    /// Empties the shard, handing back what it held to be dropped after the lock is
    /// released.
    pub(crate) fn clear(&mut self) -> Store<K, V> {
        let empty = self.store.emptied();
        std::mem::replace(&mut self.store, empty)
    }
}
