//! The entry API: an atomic read-modify-write of one key.
//!
//! The caller's closure runs under the key's shard's write lock, the smallest lock the
//! store has (it has none per entry): running it outside the lock would need a retry loop
//! that could run the caller's code any number of times, and a compute that races a
//! write would lose one of them. So the closure must be short and must not use the cache.

use std::borrow::Borrow;
use std::hash::Hash;

use super::listener::RemovalCause;
use super::shard::{Leftovers, Outcome, Write};
use super::AdmissionCache;
use crate::broken;

/// One key of an [`AdmissionCache`], for an atomic read-modify-write; made by
/// [`AdmissionCache::entry`].
#[must_use = "an entry does nothing until one of its methods runs"]
pub struct Entry<'a, K, V, Q: ?Sized> {
    cache: &'a AdmissionCache<K, V>,
    key: &'a Q,
}

/// What a compute does with its key: the answer of the closure given to
/// [`Entry::and_compute_with`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Op<V> {
    /// Store this value (inserting the key if it is absent).
    Put(V),
    /// Remove the key.
    Remove,
    /// Leave the key as it is.
    Keep,
}

/// What [`Entry::and_compute_with`] did.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Computed<V> {
    /// The key was absent (or expired); the new value is stored.
    Inserted,
    /// The key's value was replaced (the listener gets the old one).
    Updated,
    /// The key was removed; this was its value.
    Removed(V),
    /// Nothing changed: [`Op::Keep`], or [`Op::Remove`] of an absent key.
    Unchanged,
    /// The new value weighs more than the key's shard holds (see
    /// [`Admission::TooHeavy`](super::Admission::TooHeavy)): it was not stored, and a
    /// present key was removed rather than keep the value the compute replaced.
    TooHeavy,
}

impl<K: Hash + Eq, V: Clone> AdmissionCache<K, V> {
    /// The entry of `key`, for an atomic read-modify-write: a counter, a merge, an
    /// insert-if-absent that must not race another writer.
    ///
    /// A compute is a write, ordered with every other write to the key:
    /// * **The closure runs under the key's shard's write lock** (the store has no lock
    ///   per entry), before anything changes: it must be short, and must not use this
    ///   cache (it would wait for itself). If it panics, nothing changed and the panic goes
    ///   on; the cache stays usable.
    /// * **No admission**: a value a compute stores is stored, whatever the policy (the
    ///   caller asked for this key by name; under
    ///   [`AdmissionPolicy::SecondHit`](super::AdmissionPolicy::SecondHit) a first
    ///   sighting is stored too). It is placed as the policy places a new key, lives as the
    ///   [`expire_after`](super::AdmissionCacheBuilder::expire_after) closure (run under the
    ///   lock) or the cache's defaults say, and eviction spares it while anything else can
    ///   go.
    /// * **Loads in flight**: a load of the key that began before the compute (see
    ///   [`get_or_insert_with`](Self::get_or_insert_with)) does not store its value, so
    ///   what the compute did stands; the load's callers still get the loaded value.
    /// * The owned key is made (`ToOwned`) only when an absent key is inserted, or for the
    ///   listener.
    ///
    /// # Examples
    ///
    /// ```
    /// use cuckoo_gate::AdmissionCache;
    ///
    /// let hits: AdmissionCache<String, u64> = AdmissionCache::builder().capacity(1_000).build()?;
    /// for path in ["/a", "/b", "/a"] {
    ///     hits.entry(path).and_upsert_with(|count| count.map_or(1, |n| n + 1));
    /// }
    /// assert_eq!((hits.get("/a"), hits.get("/b")), (Some(2), Some(1)));
    /// # Ok::<(), cuckoo_gate::BuildError>(())
    /// ```
    pub fn entry<'a, Q>(&'a self, key: &'a Q) -> Entry<'a, K, V, Q>
    where
        K: Borrow<Q>,
        Q: ?Sized + Hash + Eq + ToOwned<Owned = K>,
    {
        Entry { cache: self, key }
    }
}

impl<K, V, Q> Entry<'_, K, V, Q>
where
    K: Hash + Eq + Borrow<Q>,
    V: Clone,
    Q: ?Sized + Hash + Eq + ToOwned<Owned = K>,
{
    /// Sets the key's value to what `f` makes of the present one (`None` if absent or
    /// expired), atomically, and returns a clone of it. Takes the key's shard's write
    /// lock, under which `f` runs (see [`AdmissionCache::entry`]). A value too heavy for
    /// the shard is returned but not stored (and a present key is removed).
    ///
    /// # Examples
    ///
    /// ```
    /// use cuckoo_gate::AdmissionCache;
    ///
    /// let cache: AdmissionCache<u64, Vec<&str>> = AdmissionCache::builder().capacity(100).build()?;
    /// cache.entry(&1).and_upsert_with(|_| vec!["a"]);
    /// let merged = cache.entry(&1).and_upsert_with(|old| [old.cloned().unwrap_or_default(), vec!["b"]].concat());
    /// assert_eq!(merged, ["a", "b"]);
    /// # Ok::<(), cuckoo_gate::BuildError>(())
    /// ```
    pub fn and_upsert_with(self, f: impl FnOnce(Option<&V>) -> V) -> V {
        let mut made = None;
        self.and_compute_with(|old| {
            let value = f(old);
            made = Some(value.clone());
            Op::Put(value)
        });
        made.expect("the closure ran")
    }

    /// Decides what becomes of the key from its present value (`None` if absent or
    /// expired), atomically: `f` answers [`Op::Put`] a new value, [`Op::Remove`] or
    /// [`Op::Keep`]. Takes the key's shard's write lock, under which `f` runs (see
    /// [`AdmissionCache::entry`]); what leaves the cache is reported to the listener and
    /// dropped after it is released.
    ///
    /// # Examples
    ///
    /// ```
    /// use cuckoo_gate::{AdmissionCache, Computed, Op};
    ///
    /// let stock: AdmissionCache<&str, u32> = AdmissionCache::builder().capacity(100).build()?;
    /// let _ = stock.insert("apples", 1);
    /// let take_one = |left: Option<&u32>| match left {
    ///     Some(&1) => Op::Remove, // the last one
    ///     Some(&n) => Op::Put(n - 1),
    ///     None => Op::Keep,
    /// };
    /// assert_eq!(stock.entry(&"apples").and_compute_with(take_one), Computed::Removed(1));
    /// assert_eq!(stock.entry(&"apples").and_compute_with(take_one), Computed::Unchanged);
    /// # Ok::<(), cuckoo_gate::BuildError>(())
    /// ```
    pub fn and_compute_with(self, f: impl FnOnce(Option<&V>) -> Op<V>) -> Computed<V> {
        self.compute(f, None)
    }

    /// [`and_compute_with`](Self::and_compute_with), handing what leaves the cache to the
    /// caller instead of the listener: every entry the compute evicted, expired, replaced
    /// or removed is pushed onto `removed` with why, after the lock is released, and the
    /// listener is not told of it. For a caller that must act on each key the write
    /// pushed out (purge it from a store of its own, say), with no shared state between
    /// its calls: what one call pushes out is handed to that call only.
    ///
    /// # Examples
    ///
    /// ```
    /// use cuckoo_gate::{AdmissionCache, Op, RemovalCause};
    ///
    /// // Sizes by key, weighed by the size: growing "a" pushes "b" out.
    /// let sizes: AdmissionCache<&str, u32> = AdmissionCache::builder()
    ///     .capacity(10)
    ///     .shards(1)
    ///     .weigher(|_, size| *size)
    ///     .build()?;
    /// let _ = sizes.insert("b", 4);
    /// let _ = sizes.insert("a", 4);
    /// let mut removed = Vec::new();
    /// sizes.entry(&"a").and_compute_collecting(|size| Op::Put(size.copied().unwrap_or(0) + 4), &mut removed);
    /// assert_eq!(removed, [("b", 4, RemovalCause::Evicted), ("a", 4, RemovalCause::Replaced)]);
    /// assert!(sizes.weight() <= 10);
    /// # Ok::<(), cuckoo_gate::BuildError>(())
    /// ```
    pub fn and_compute_collecting(
        self,
        f: impl FnOnce(Option<&V>) -> Op<V>,
        removed: &mut Vec<(K, V, RemovalCause)>,
    ) -> Computed<V> {
        self.compute(f, Some(removed))
    }

    /// A compute, telling the listener of what left, or handing it to `collect`.
    fn compute(
        self,
        f: impl FnOnce(Option<&V>) -> Op<V>,
        collect: Option<&mut Vec<(K, V, RemovalCause)>>,
    ) -> Computed<V> {
        let cache = self.cache;
        let keys = cache.hashing.keys();
        let hash = keys.hash(self.key);
        if cache.loads.keeps_failures() {
            cache.loads.end_failure(hash, self.key);
        }
        let mut write = Write {
            hash,
            weight: 1,
            span: None,
            gate: cache.gate.as_ref(),
            expiry: &cache.expiry,
            load: None,
            keys,
        };
        let mut leftovers = match collect {
            Some(_) => Leftovers::new(true),
            None => cache.leftovers(),
        };
        let weigh = |key: &K, value: &V| (cache.weigh(key, value), cache.span_of(key, value));
        let mut held = cache.shard(hash).write();
        while !cache.hashing.is_current(write.keys) {
            // A restore replaced the hasher (see `hashing.rs`): hash again.
            drop(held);
            write.keys = cache.hashing.keys();
            write.hash = write.keys.hash(self.key);
            held = cache.shard(write.hash).write();
        }
        let hash = write.hash;
        let outcome = if broken::SPLIT_COMPUTE {
            // Reads the value in one hold of the lock and writes in another: a write in
            // between is lost.
            let seen = held.peek(hash, self.key);
            drop(held);
            let decide = |_: Option<&V>| f(seen.as_ref());
            cache.shard(hash).write().compute(
                hash,
                self.key,
                Q::to_owned,
                decide,
                weigh,
                &write,
                &mut leftovers,
            )
        } else {
            held.compute(hash, self.key, Q::to_owned, f, weigh, &write, &mut leftovers)
        };
        let keep = cache.listener.is_some() || collect.is_some();
        let computed = match outcome {
            Outcome::Kept => Computed::Unchanged,
            Outcome::Inserted => Computed::Inserted,
            Outcome::Updated(old) => {
                if keep {
                    leftovers.removed.push((self.key.to_owned(), old), RemovalCause::Replaced);
                }
                Computed::Updated
            }
            Outcome::Removed(key, value) => {
                if keep {
                    leftovers.removed.push((key, value.clone()), RemovalCause::Removed);
                }
                Computed::Removed(value)
            }
            Outcome::TooHeavy(value) => {
                drop(value);
                Computed::TooHeavy
            }
        };
        match collect {
            Some(out) => cache.hand_back(leftovers, out),
            None => cache.report(leftovers),
        }
        computed
    }
}

impl<K, V, Q: ?Sized + std::fmt::Debug> std::fmt::Debug for Entry<'_, K, V, Q> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Entry").field("key", &self.key).finish_non_exhaustive()
    }
}
