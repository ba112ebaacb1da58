//! [`AdmissionCache`]: a concurrent, sharded LRU cache behind a seen-before gate.
//!
//! * `lru.rs`: an exact LRU list over a slab (O(1), no per-entry allocation).
//! * `shard.rs`: one lock-protected shard and the admission decisions.

mod lru;
mod shard;

use std::hash::Hash;
use std::marker::PhantomData;

use crossbeam_utils::CachePadded;

use self::shard::{Counters, Shard};
use crate::admission::SeenBefore;
use crate::error::BuildError;
use crate::primitive::Mutex;

/// Default gate size, in cache capacities. Measured with `examples/replay.rs --sweep` on the
/// shared traces: below 16, second-hit admission lost over a point of hit ratio against
/// LRU on the CDN trace; above it the gains were small.
pub const DEFAULT_GATE_MULTIPLIER: usize = 16;

/// Default fraction of the capacity given to [`AdmissionPolicy::Probation`]'s probation
/// segment. Measured over the shared traces at 1%, 5% and 10% cache sizes (segments of
/// 5% to 70% tried): from 60% up the policy was at or above LRU on every trace and size;
/// smaller segments gained more on CDN-like traces but lost on the recency-heavy one.
pub const DEFAULT_PROBATION_WINDOW: f64 = 0.6;

/// Which misses become cache entries.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum AdmissionPolicy {
    /// Admit every key: a plain LRU cache.
    Always,
    /// Admit a key only on its second request within the gate's memory. One-hit wonders
    /// never take a slot: the fewest cache writes, for caches on flash or disk, at the
    /// cost of the first hit on every key.
    #[default]
    SecondHit,
    /// A segmented LRU behind the gate. New keys enter a probation segment (see
    /// [`AdmissionCacheBuilder::probation_window`]); a hit there, or a request for a key
    /// the gate still remembers (a "ghost" of a key that left the cache), puts the key in
    /// the protected main segment. The main segment's least recently used key is demoted
    /// to probation for a second chance rather than dropped. In the spirit of S3-FIFO and
    /// W-TinyLFU: one-hit wonders never displace keys that were used twice, and hit ratio
    /// stays at or above LRU's on the shared traces.
    Probation,
}

/// What [`AdmissionCache::insert`] did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Admission {
    /// The key was absent and is now stored.
    Admitted,
    /// The key was absent and the policy kept it out (first sighting).
    Rejected,
    /// The key was present; its value was replaced.
    Updated,
}

/// Counters of an [`AdmissionCache`], summed over its shards.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct CacheStats {
    /// `get` calls that found their key.
    pub hits: u64,
    /// `get` calls that did not.
    pub misses: u64,
    /// Inserts of absent keys that stored them (cache writes).
    pub admitted: u64,
    /// Inserts of absent keys that the policy refused.
    pub rejected: u64,
    /// Entries pushed out to make room.
    pub evictions: u64,
}

impl CacheStats {
    /// `hits / (hits + misses)`, or 0 before any `get`.
    pub fn hit_ratio(&self) -> f64 {
        let lookups = self.hits + self.misses;
        if lookups == 0 {
            0.0
        } else {
            self.hits as f64 / lookups as f64
        }
    }
}

/// A concurrent LRU cache with an admission gate in front of it.
///
/// Sharded by key hash; each shard is an exact LRU under one lock, so with
/// [`shards(1)`](AdmissionCacheBuilder::shards) the cache has one global LRU order.
/// All methods take `&self`; the cache is `Send + Sync` when its keys and values are.
///
/// # Examples
///
/// ```
/// use cuckoo_gate::{Admission, AdmissionCache, AdmissionPolicy};
///
/// let cache: AdmissionCache<u64, String> = AdmissionCache::builder()
///     .capacity(10_000)
///     .admission(AdmissionPolicy::SecondHit)
///     .build()?;
/// assert_eq!(cache.insert(1, "one".into()), Admission::Rejected); // first sighting
/// assert_eq!(cache.insert(1, "one".into()), Admission::Admitted); // seen before
/// assert_eq!(cache.get(&1).as_deref(), Some("one"));
/// # Ok::<(), cuckoo_gate::BuildError>(())
/// ```
pub struct AdmissionCache<K, V> {
    shards: Box<[ShardSlot<K, V>]>,
    hasher: ahash::RandomState,
    gate: SeenBefore,
    policy: AdmissionPolicy,
    capacity: usize,
    #[cfg(feature = "metrics")]
    metrics: Option<crate::metrics::CacheMetrics>,
}

/// A shard behind its lock, alone on its cache line.
type ShardSlot<K, V> = CachePadded<Mutex<Shard<K, V>>>;

/// Configures an [`AdmissionCache`]. Made by [`AdmissionCache::builder`].
#[derive(Clone, Debug)]
#[must_use]
pub struct AdmissionCacheBuilder<K, V> {
    _types: PhantomData<fn() -> (K, V)>,
    capacity: usize,
    policy: AdmissionPolicy,
    shards: Option<usize>,
    gate_capacity: Option<usize>,
    probation_window: f64,
    seed: Option<u64>,
    #[cfg(feature = "metrics")]
    metrics_name: Option<String>,
}

impl<K: Hash + Eq + Clone, V: Clone> AdmissionCacheBuilder<K, V> {
    /// Most entries held (required, at least 1).
    pub fn capacity(mut self, entries: usize) -> Self {
        self.capacity = entries;
        self
    }

    /// The admission policy; default [`AdmissionPolicy::SecondHit`].
    pub fn admission(mut self, policy: AdmissionPolicy) -> Self {
        self.policy = policy;
        self
    }

    /// Number of shards (a power of two is not required). 1 gives one exact global LRU
    /// order; the default is 4 per available core, which keeps lock contention low.
    pub fn shards(mut self, shards: usize) -> Self {
        self.shards = Some(shards);
        self
    }

    /// Recordings per generation of the seen-before gate; default
    /// [`DEFAULT_GATE_MULTIPLIER`] times the cache capacity (and minimal under
    /// [`AdmissionPolicy::Always`], which never consults the gate). A larger gate remembers first
    /// sightings (and evicted keys) for longer: more second hits are caught, at about 21
    /// bits per recording.
    pub fn gate_capacity(mut self, keys: usize) -> Self {
        self.gate_capacity = Some(keys);
        self
    }

    /// Fraction of the capacity given to the probation segment of
    /// [`AdmissionPolicy::Probation`], in [0, 1); default [`DEFAULT_PROBATION_WINDOW`].
    pub fn probation_window(mut self, fraction: f64) -> Self {
        self.probation_window = fraction;
        self
    }

    /// Fixes the hash seeds (reproducible runs); random by default.
    pub fn seed(mut self, seed: u64) -> Self {
        self.seed = Some(seed);
        self
    }

    /// Registers this cache's metrics (feature `metrics`) under the label
    /// `name="<name>"`; publish them with [`AdmissionCache::publish_metrics`].
    #[cfg(feature = "metrics")]
    pub fn metrics_name(mut self, name: impl Into<String>) -> Self {
        self.metrics_name = Some(name.into());
        self
    }

    /// Builds the cache.
    ///
    /// # Errors
    ///
    /// [`BuildError::ZeroCapacity`] for a zero capacity or gate capacity,
    /// [`BuildError::InvalidShards`] for zero shards or more shards than entries,
    /// [`BuildError::InvalidProbationWindow`] for a window outside [0, 1), and the
    /// gate's own errors.
    ///
    /// # Examples
    ///
    /// ```
    /// use cuckoo_gate::{AdmissionCache, BuildError};
    ///
    /// let zero = AdmissionCache::<u64, u64>::builder().build();
    /// assert_eq!(zero.unwrap_err(), BuildError::ZeroCapacity);
    /// let exact_lru = AdmissionCache::<u64, u64>::builder().capacity(10).shards(1).build();
    /// assert!(exact_lru.is_ok());
    /// ```
    pub fn build(self) -> Result<AdmissionCache<K, V>, BuildError> {
        if self.capacity == 0 {
            return Err(BuildError::ZeroCapacity);
        }
        if self.capacity >= u32::MAX as usize {
            return Err(BuildError::CapacityTooLarge { capacity: self.capacity });
        }
        let default_shards = || {
            let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
            (cores * 4).min(self.capacity)
        };
        let shards = self.shards.unwrap_or_else(default_shards);
        if shards == 0 || shards > self.capacity {
            return Err(BuildError::InvalidShards { shards, capacity: self.capacity });
        }
        let window = self.probation_window;
        if !(0.0..1.0).contains(&window) {
            return Err(BuildError::InvalidProbationWindow { fraction: window });
        }
        let gate_capacity = match (self.policy, self.gate_capacity) {
            (_, Some(keys)) => keys,
            // Plain LRU never consults the gate: keep it minimal.
            (AdmissionPolicy::Always, None) => 1,
            (_, None) => self.capacity.saturating_mul(DEFAULT_GATE_MULTIPLIER),
        };
        let mut gate = SeenBefore::builder().capacity(gate_capacity);
        if let Some(seed) = self.seed {
            gate = gate.seed(seed);
        }
        let gate = gate.build()?;
        let shards: Box<[_]> = (0..shards)
            .map(|i| {
                // Split the capacity exactly: the first `capacity % shards` get one more.
                let entries = self.capacity / shards + usize::from(i < self.capacity % shards);
                let window = match self.policy {
                    AdmissionPolicy::Probation => (entries as f64 * window) as usize,
                    _ => 0,
                };
                CachePadded::new(Mutex::new(Shard::new(entries - window, window)))
            })
            .collect();
        let hasher = match self.seed {
            Some(seed) => ahash::RandomState::with_seeds(seed, !seed, seed.rotate_left(17), 0x5eed),
            None => ahash::RandomState::new(),
        };
        Ok(AdmissionCache {
            shards,
            hasher,
            gate,
            policy: self.policy,
            capacity: self.capacity,
            #[cfg(feature = "metrics")]
            metrics: self.metrics_name.as_deref().map(crate::metrics::CacheMetrics::new),
        })
    }
}

impl<K: Hash + Eq + Clone, V: Clone> AdmissionCache<K, V> {
    /// A builder; set at least [`AdmissionCacheBuilder::capacity`].
    pub fn builder() -> AdmissionCacheBuilder<K, V> {
        AdmissionCacheBuilder {
            _types: PhantomData,
            capacity: 0,
            policy: AdmissionPolicy::default(),
            shards: None,
            gate_capacity: None,
            probation_window: DEFAULT_PROBATION_WINDOW,
            seed: None,
            #[cfg(feature = "metrics")]
            metrics_name: None,
        }
    }

    fn shard(&self, key: &K) -> &Mutex<Shard<K, V>> {
        let index = if self.shards.len() == 1 {
            0
        } else {
            ((self.hasher.hash_one(key) as u128 * self.shards.len() as u128) >> 64) as usize
        };
        &self.shards[index]
    }

    /// The value of `key`, which becomes most recently used. Blocks while another thread
    /// holds the key's shard.
    ///
    /// # Examples
    ///
    /// ```
    /// use cuckoo_gate::{AdmissionCache, AdmissionPolicy};
    ///
    /// let cache: AdmissionCache<u64, &str> =
    ///     AdmissionCache::builder().capacity(100).admission(AdmissionPolicy::Always).build()?;
    /// cache.insert(1, "one");
    /// assert_eq!(cache.get(&1), Some("one"));
    /// assert_eq!(cache.get(&2), None);
    /// # Ok::<(), cuckoo_gate::BuildError>(())
    /// ```
    pub fn get(&self, key: &K) -> Option<V> {
        self.shard(key).lock().get(key, &self.gate)
    }

    /// Stores `value` for `key` if the key is present (replacing its value) or the policy
    /// admits it. Blocks while another thread holds the key's shard.
    ///
    /// # Examples
    ///
    /// ```
    /// use cuckoo_gate::{AdmissionCache, AdmissionPolicy};
    ///
    /// let cache: AdmissionCache<u64, &str> =
    ///     AdmissionCache::builder().capacity(100).admission(AdmissionPolicy::Always).build()?;
    /// use cuckoo_gate::Admission;
    /// assert_eq!(cache.insert(1, "one"), Admission::Admitted);
    /// assert_eq!(cache.insert(1, "uno"), Admission::Updated);
    /// # Ok::<(), cuckoo_gate::BuildError>(())
    /// ```
    pub fn insert(&self, key: K, value: V) -> Admission {
        self.shard(&key).lock().insert(key, value, self.policy, &self.gate)
    }

    /// The value of `key`; on a miss, `make()` computes it, and it is stored if admitted.
    /// `make` runs without any lock held.
    ///
    /// # Examples
    ///
    /// ```
    /// use cuckoo_gate::{AdmissionCache, AdmissionPolicy};
    ///
    /// let cache: AdmissionCache<u64, &str> =
    ///     AdmissionCache::builder().capacity(100).admission(AdmissionPolicy::Always).build()?;
    /// assert_eq!(cache.get_or_insert_with(1, || "computed"), "computed");
    /// assert_eq!(cache.get_or_insert_with(1, || unreachable!()), "computed");
    /// # Ok::<(), cuckoo_gate::BuildError>(())
    /// ```
    pub fn get_or_insert_with(&self, key: K, make: impl FnOnce() -> V) -> V {
        if let Some(value) = self.get(&key) {
            return value;
        }
        let value = make();
        self.insert(key, value.clone());
        value
    }

    /// Removes `key`, returning its value.
    ///
    /// # Examples
    ///
    /// ```
    /// use cuckoo_gate::{AdmissionCache, AdmissionPolicy};
    ///
    /// let cache: AdmissionCache<u64, &str> =
    ///     AdmissionCache::builder().capacity(100).admission(AdmissionPolicy::Always).build()?;
    /// cache.insert(1, "one");
    /// assert_eq!(cache.remove(&1), Some("one"));
    /// assert!(cache.is_empty());
    /// # Ok::<(), cuckoo_gate::BuildError>(())
    /// ```
    pub fn remove(&self, key: &K) -> Option<V> {
        self.shard(key).lock().remove(key)
    }

    /// Entries held (summed over the shards, each read under its lock).
    ///
    /// # Examples
    ///
    /// ```
    /// use cuckoo_gate::{AdmissionCache, AdmissionPolicy};
    ///
    /// let cache: AdmissionCache<u64, &str> =
    ///     AdmissionCache::builder().capacity(100).admission(AdmissionPolicy::Always).build()?;
    /// cache.insert(1, "one");
    /// assert_eq!((cache.len(), cache.capacity()), (1, 100));
    /// # Ok::<(), cuckoo_gate::BuildError>(())
    /// ```
    pub fn len(&self) -> usize {
        self.shards.iter().map(|s| s.lock().len()).sum()
    }

    /// Whether no entry is held.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Most entries held.
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// The admission policy.
    pub fn policy(&self) -> AdmissionPolicy {
        self.policy
    }

    /// The seen-before gate in front of the cache.
    pub fn gate(&self) -> &SeenBefore {
        &self.gate
    }

    /// Publishes [`stats`](Self::stats), the entry count and the gate's counters to the
    /// metrics registered with [`AdmissionCacheBuilder::metrics_name`] (feature `metrics`);
    /// does nothing without a name. Locks each shard briefly; call it periodically.
    ///
    /// # Examples
    ///
    /// ```
    /// use cuckoo_gate::AdmissionCache;
    ///
    /// let cache: AdmissionCache<u64, u64> = AdmissionCache::builder().capacity(100).metrics_name("edge").build()?;
    /// cache.get(&1);
    /// cache.publish_metrics(); // cuckoo_gate_cache_misses_total{name="edge"} is now 1
    /// # Ok::<(), cuckoo_gate::BuildError>(())
    /// ```
    #[cfg(feature = "metrics")]
    pub fn publish_metrics(&self) {
        if let Some(metrics) = &self.metrics {
            let (stats, entries) = self.snapshot();
            metrics.publish(&stats, entries, self.capacity, &self.gate.stats());
        }
    }

    /// Counters, summed over the shards.
    ///
    /// # Examples
    ///
    /// ```
    /// use cuckoo_gate::{AdmissionCache, AdmissionPolicy};
    ///
    /// let cache: AdmissionCache<u64, &str> =
    ///     AdmissionCache::builder().capacity(100).admission(AdmissionPolicy::Always).build()?;
    /// cache.get(&1);
    /// cache.insert(1, "one");
    /// cache.get(&1);
    /// let stats = cache.stats();
    /// assert_eq!((stats.hits, stats.misses, stats.admitted), (1, 1, 1));
    /// assert_eq!(stats.hit_ratio(), 0.5);
    /// # Ok::<(), cuckoo_gate::BuildError>(())
    /// ```
    pub fn stats(&self) -> CacheStats {
        self.snapshot().0
    }

    /// Counters and entries, summed over the shards with each shard locked once.
    fn snapshot(&self) -> (CacheStats, usize) {
        self.shards.iter().fold((CacheStats::default(), 0), |(mut total, entries), shard| {
            let shard = shard.lock();
            let Counters { hits, misses, admitted, rejected, evictions } = shard.counters;
            total.hits += hits;
            total.misses += misses;
            total.admitted += admitted;
            total.rejected += rejected;
            total.evictions += evictions;
            (total, entries + shard.len())
        })
    }
}

impl<K, V> std::fmt::Debug for AdmissionCache<K, V> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AdmissionCache")
            .field("capacity", &self.capacity)
            .field("policy", &self.policy)
            .field("shards", &self.shards.len())
            .finish_non_exhaustive()
    }
}
