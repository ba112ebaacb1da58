//! One shard of the cache: a main LRU, a probation segment (under `Probation`), and counters,
//! all behind the shard's lock. The admission decisions live here.

use std::hash::Hash;

use super::lru::Lru;
use super::{Admission, AdmissionPolicy};
use crate::admission::SeenBefore;

/// Per-shard counters, written under the shard lock.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Counters {
    pub(crate) hits: u64,
    pub(crate) misses: u64,
    pub(crate) admitted: u64,
    pub(crate) rejected: u64,
    pub(crate) evictions: u64,
}

pub(crate) struct Shard<K, V> {
    main: Lru<K, V>,
    /// The probation segment under [`AdmissionPolicy::Probation`]; capacity 0 otherwise.
    window: Lru<K, V>,
    pub(crate) counters: Counters,
}

impl<K: Hash + Eq + Clone, V: Clone> Shard<K, V> {
    pub(crate) fn new(main: usize, window: usize) -> Self {
        Shard { main: Lru::new(main), window: Lru::new(window), counters: Counters::default() }
    }

    pub(crate) fn len(&self) -> usize {
        self.main.len() + self.window.len()
    }

    pub(crate) fn get(&mut self, key: &K, gate: &SeenBefore) -> Option<V> {
        let found = match self.main.get(key) {
            Some(v) => Some(v.clone()),
            // A hit on probation earns the key a place in the main LRU.
            None => self.window.remove(key).inspect(|v| self.promote(key.clone(), v.clone(), gate)),
        };
        match found {
            Some(_) => self.counters.hits += 1,
            None => self.counters.misses += 1,
        }
        found
    }

    /// Moves `key` into the main LRU; main's least recently used entry is demoted to the
    /// window (a second chance), whose own victim leaves the cache as a ghost in the gate.
    fn promote(&mut self, key: K, value: V, gate: &SeenBefore) {
        if let Some((old, old_value)) = self.main.insert(key, value) {
            self.window_insert(old, old_value, gate);
        }
    }

    /// Puts `key` on probation; the window's least recently used entry leaves the cache
    /// and stays only as a recording in the gate.
    fn window_insert(&mut self, key: K, value: V, gate: &SeenBefore) {
        if let Some((old, _)) = self.window.insert(key, value) {
            self.counters.evictions += 1;
            gate.record(&old);
        }
    }

    pub(crate) fn remove(&mut self, key: &K) -> Option<V> {
        self.main.remove(key).or_else(|| self.window.remove(key))
    }

    /// Stores `value` for `key` if the policy admits it.
    pub(crate) fn insert(
        &mut self,
        key: K,
        value: V,
        policy: AdmissionPolicy,
        gate: &SeenBefore,
    ) -> Admission {
        let value = match self.main.update(&key, value) {
            Ok(()) => return Admission::Updated,
            Err(value) => value,
        };
        let value = match self.window.update(&key, value) {
            Ok(()) => return Admission::Updated,
            Err(value) => value,
        };
        let admitted = match policy {
            AdmissionPolicy::Always => {
                // Plain LRU: the gate plays no part, not even for ghosts.
                if self.main.insert(key, value).is_some() {
                    self.counters.evictions += 1;
                }
                true
            }
            AdmissionPolicy::SecondHit => {
                let seen = gate.check_and_record(&key);
                if seen {
                    gate.forget(&key);
                    self.main_insert(key, value, gate);
                }
                seen
            }
            AdmissionPolicy::Probation => {
                if gate.check_and_record(&key) {
                    // Seen recently (a ghost of a key that left the cache, or a key
                    // requested twice before it could be stored): straight to main.
                    gate.forget(&key);
                    self.promote(key, value, gate);
                } else {
                    self.window_insert(key, value, gate);
                }
                true
            }
        };
        if admitted {
            self.counters.admitted += 1;
            Admission::Admitted
        } else {
            self.counters.rejected += 1;
            Admission::Rejected
        }
    }

    /// Inserts into the main LRU; an evicted key is recorded in the gate as a ghost, so
    /// that if it comes back soon it is admitted at once instead of waiting for a second
    /// request again.
    fn main_insert(&mut self, key: K, value: V, gate: &SeenBefore) {
        if let Some((evicted, _)) = self.main.insert(key, value) {
            self.counters.evictions += 1;
            gate.record(&evicted);
        }
    }
}
