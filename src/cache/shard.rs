//! One shard of the cache: its entries, its policy and its write counters, all behind the
//! shard's lock.
//!
//! Panic safety: the only user code that runs under the lock is `K::eq` (while finding a
//! key, before anything changes) and `V::clone` (on a hit, under the read lock). Keys and
//! values that leave the shard are handed back to be dropped after the lock is released.

use std::hash::Hash;
use std::sync::Arc;

use super::policy::{Evicted, Policy, SharedSplit, MAX_FREQ};
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
}

pub(crate) struct Shard<K, V> {
    store: Store<K, V>,
    policy: Policy,
    pub(crate) counters: Counters,
}

/// What an insert leaves to drop once the lock is released.
pub(crate) struct Leftovers<K, V> {
    /// A key and value the shard does not keep: those offered, when they were not
    /// stored; on an update, the key offered (the entry keeps its own) and the value
    /// replaced.
    pub(crate) unkept: Option<(K, V)>,
    /// Entries evicted to make room.
    pub(crate) evicted: Evicted<K, V>,
}

impl<K, V> Leftovers<K, V> {
    pub(crate) fn new() -> Self {
        Leftovers { unkept: None, evicted: Evicted::new() }
    }
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
            // Preallocated up to a bound: a huge capacity is not a reason to reserve memory
            // before anything is stored.
            store: Store::with_capacity(entries.min(1 << 16), weighted),
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

    /// A lookup under the read lock: a hit counts the request on the entry.
    #[inline]
    pub(crate) fn get(&self, hash: u64, key: &K) -> Option<V> {
        let entry = self.store.entry(self.store.find(hash, key)?);
        entry.touch(MAX_FREQ);
        Some(entry.value.clone())
    }

    /// A lookup that is not a request: the entry's order and frequency stay as they are.
    pub(crate) fn peek(&self, hash: u64, key: &K) -> Option<V> {
        Some(self.store.entry(self.store.find(hash, key)?).value.clone())
    }

    /// A lookup under the write lock, for LRU: a hit becomes most recently used.
    pub(crate) fn get_mut(&mut self, hash: u64, key: &K) -> Option<V> {
        let index = self.store.find(hash, key)?;
        self.store.requeue(index, Queue::Main);
        Some(self.store.entry(index).value.clone())
    }

    /// Removes `key`, returning its entry.
    pub(crate) fn remove(&mut self, hash: u64, key: &K) -> Option<(K, V)> {
        let entry = self.store.remove(self.store.find(hash, key)?);
        Some((entry.key, entry.value))
    }

    /// Stores `value` for `key` if the key is present (replacing its value: a request,
    /// like a hit; unless not `replace`, when the present value stays and `value` is
    /// handed back in `out`) or the policy admits it.
    #[inline]
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn insert(
        &mut self,
        key: K,
        value: V,
        hash: u64,
        weight: u32,
        replace: bool,
        gate: Option<&SeenBefore>,
        out: &mut Leftovers<K, V>,
    ) -> Admission {
        let too_heavy = u64::from(weight) > self.policy.capacity;
        let (admission, spare) = match self.store.find(hash, &key) {
            Some(_) if !replace => {
                out.unkept = Some((key, value));
                return Admission::Updated;
            }
            Some(index) if too_heavy => {
                // The key's new value does not fit: it leaves rather than keep a value
                // its owner has replaced.
                let old = self.store.remove(index);
                out.evicted.push((old.key, old.value));
                out.unkept = Some((key, value));
                self.counters.rejected += 1;
                (Admission::TooHeavy, None)
            }
            Some(index) => {
                let reweighed = self.store.weight_of(index) != weight;
                let entry = self.store.entry_mut(index);
                out.unkept = Some((key, std::mem::replace(&mut entry.value, value)));
                match self.policy.kind {
                    AdmissionPolicy::Always => self.store.requeue(index, Queue::Main),
                    _ => entry.touch(MAX_FREQ),
                }
                if reweighed {
                    self.store.reweigh(index, weight);
                }
                (Admission::Updated, Some(index))
            }
            None if too_heavy => {
                out.unkept = Some((key, value));
                self.counters.rejected += 1;
                (Admission::TooHeavy, None)
            }
            None => match self.policy.admit(&self.store, hash, weight, gate) {
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
        self.policy.evict(&mut self.store, spare, gate, &mut out.evicted);
        self.counters.evictions += out.evicted.count() as u64;
        admission
    }
}
