//! Writes that hand what they push out to their caller, and tracking without eviction.
//!
//! A cache in front of a store of its own (a disk, a host framework's storage) must purge
//! from that store each key the cache lets go. The listener hears of every removal, but
//! from every thread at once: a caller that wants the keys its own write pushed out would
//! have to tell them apart (a thread-local, a queue keyed by call). The methods here
//! collect them instead: what leaves the shard during the call is gathered under the
//! shard's write lock, as every write does, and handed to the caller after the lock is
//! released, not to the listener. No state is shared between calls, so each removal goes
//! to exactly one caller.

use std::hash::Hash;

use super::listener::RemovalCause;
use super::shard::Leftovers;
use super::{Admission, AdmissionCache, AdmissionPolicy};

/// What [`AdmissionCache::track`] did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Tracked {
    /// The key was held: a request was counted on it, and its value left as it was.
    Held,
    /// The key was absent and is now stored (with no admission and no eviction).
    Stored,
    /// The entry weighs more than its shard holds (see [`Admission::TooHeavy`]): it was
    /// not stored.
    TooHeavy,
}

impl<K: Hash + Eq, V: Clone> AdmissionCache<K, V> {
    /// [`insert`](Self::insert), handing what leaves the cache to the caller instead of
    /// the listener: every entry this insert evicted (or found expired, or replaced: the
    /// key's old value) is pushed onto `removed` with why, after the shard's lock is
    /// released. What one call pushes out is handed to that call only, so of threads
    /// inserting at once each learns exactly the entries its own insert evicted. The
    /// offered entry, when not stored ([`Admission::Rejected`], [`Admission::TooHeavy`]),
    /// is dropped, not pushed. Takes the key's shard's write lock, as `insert` does.
    ///
    /// # Examples
    ///
    /// ```
    /// use cuckoo_gate::{Admission, AdmissionCache, AdmissionPolicy, RemovalCause};
    ///
    /// let cache: AdmissionCache<u64, &str> =
    ///     AdmissionCache::builder().capacity(2).shards(1).admission(AdmissionPolicy::Always).build()?;
    /// let mut removed = Vec::new();
    /// for key in 1..=3 {
    ///     assert_eq!(cache.insert_collecting(key, "v", &mut removed), Admission::Admitted);
    /// }
    /// assert_eq!(removed, [(1, "v", RemovalCause::Evicted)]);
    /// # Ok::<(), cuckoo_gate::BuildError>(())
    /// ```
    #[must_use = "the policy may not store the entry: see `Admission`"]
    pub fn insert_collecting(&self, key: K, value: V, removed: &mut Vec<(K, V, RemovalCause)>) -> Admission {
        let mut leftovers = Leftovers::new(true);
        let admission = self.write_into(key, value, None, &mut leftovers);
        self.hand_back(leftovers, removed);
        admission
    }

    /// Tracks an entry known to be wanted (one already in a store of the caller's, found
    /// at startup): if `key` is held, counts a request on it, a hit as
    /// [`get`](Self::get) counts one ([`Tracked::Held`], its value left as it is); otherwise stores it with no admission, placed as the policy places
    /// a new key, and **evicts nothing** ([`Tracked::Stored`]). The key's shard may then
    /// hold more than its capacity: the next write to that shard evicts it down to its
    /// capacity (and an [`insert_collecting`](Self::insert_collecting) hands those
    /// evictions to its caller). An entry heavier than its shard is not stored
    /// ([`Tracked::TooHeavy`]). An expired entry of the key counts as absent, and is
    /// told to the listener. A held key takes its shard's read lock (its write lock under
    /// [`AdmissionPolicy::Always`], which reorders the shard's LRU list), an absent one its
    /// write lock.
    ///
    /// # Examples
    ///
    /// ```
    /// use cuckoo_gate::{AdmissionCache, Tracked};
    ///
    /// let cache: AdmissionCache<u64, &str> = AdmissionCache::builder().capacity(2).shards(1).build()?;
    /// for key in 1..=3 {
    ///     assert_eq!(cache.track(key, "v"), Tracked::Stored);
    /// }
    /// assert_eq!((cache.len(), cache.track(1, "v")), (3, Tracked::Held)); // over capacity
    /// let mut removed = Vec::new();
    /// let _ = cache.insert_collecting(4, "v", &mut removed);
    /// assert_eq!((cache.len(), removed.len()), (2, 2)); // the next write evicts down
    /// # Ok::<(), cuckoo_gate::BuildError>(())
    /// ```
    pub fn track(&self, key: K, value: V) -> Tracked {
        let keys = self.hashing.keys();
        let hash = keys.hash(&key);
        let shard = self.shard(hash);
        if self.policy != AdmissionPolicy::Always {
            // A held key is a hit, as `get` finds it: under the read lock, counted as the
            // hold is released.
            let held = shard.read();
            if held.get(hash, &key).is_some() {
                if held.release_hit() {
                    shard.drain_hits();
                }
                return Tracked::Held;
            }
        }
        let mut write = self.write_of(keys, hash, &key, &value, None);
        let mut leftovers = self.leftovers();
        let tracked = {
            let mut held = shard.write();
            while !self.hashing.is_current(write.keys) {
                // A restore replaced the hasher (see `hashing.rs`): hash again.
                drop(held);
                write.keys = self.hashing.keys();
                write.hash = write.keys.hash(&key);
                held = self.shard(write.hash).write();
            }
            leftovers.unkept = Some((key, value));
            let tracked = held.track(&write, &mut leftovers);
            if tracked == Tracked::Held {
                held.count_hit();
            }
            tracked
        };
        self.report(leftovers);
        tracked
    }

    /// Hands what a write removed to its caller (no lock is held), and drops the entry it
    /// did not keep.
    pub(super) fn hand_back(&self, leftovers: Leftovers<K, V>, out: &mut Vec<(K, V, RemovalCause)>) {
        let Leftovers { unkept, removed } = leftovers;
        drop(unkept);
        out.extend(removed);
    }
}
