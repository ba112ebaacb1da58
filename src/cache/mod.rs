//! [`AdmissionCache`]: a concurrent, sharded cache behind a seen-before gate.
//!
//! * `store.rs`: a shard's entries (hash table, slab, queues).
//! * `policy.rs`: the admission and eviction policies.
//! * `bloom.rs`: S3-FIFO's ghost queue, a shard's own two-generation Bloom filter.
//! * `ghost.rs`: the adaptive split's windows of recent evictions, small cuckoo filters.
//! * `lock.rs`: the shards' reader-writer lock, which also counts their hits.
//! * `shard.rs`: one shard's operations, and what leaves it.
//! * `expiry.rs`: the clock, lifetimes and the column of deadlines.
//! * `listener.rs`: why entries leave, and the listener told of it.
//! * `load.rs`, `loader.rs`: coalesced loading.
//!
//! Each operation hashes its key once; the hash picks the shard, finds the entry in the
//! shard's table and stands for the key in the gate or the shard's ghosts. Lookups take
//! the shard's read lock (except under LRU), writes its write lock, and what leaves a
//! shard is dropped after the lock is released. Under S3-FIFO the shards share one
//! adaptive split, whose mutex a write takes briefly for a sampled key. A hit is counted
//! by the atomic add that releases the shard's read lock; misses on per-thread stripes.

#[cfg(feature = "metrics")]
mod metrics;
#[cfg(all(feature = "metrics", feature = "foyer"))]
pub(crate) use self::metrics::AdmissionMetrics;
mod bloom;
mod expiry;
mod ghost;
mod listener;
mod load;
mod loader;
mod lock;
mod policy;
mod shard;
mod store;

use std::fmt;
use std::hash::Hash;
use std::marker::PhantomData;
use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe};
use std::sync::Arc;
use std::time::Duration;

use crossbeam_utils::CachePadded;

use self::expiry::{ticks, Expiry};
pub use self::expiry::{Clock, ManualClock};
pub use self::listener::RemovalCause;
use self::listener::{report, Listener};
use self::load::Loads;
use self::lock::ShardLock;
pub use self::policy::AdmissionPolicy;
use self::policy::{Removed, SharedSplit};
use self::shard::{Counters, Leftovers, Shard, Write};
use crate::error::BuildError;
use crate::filter::{random_seed, seeded_hasher};
#[cfg(feature = "metrics")]
use crate::gate::GateStats;
use crate::gate::SeenBefore;
use crate::primitive::{Ordering, Tally};

/// Default gate size under [`AdmissionPolicy::SecondHit`], in cache entries: how many
/// first sightings the gate remembers while they wait for a second request. It costs
/// 3 to 4 bytes per key (two generations at 1% false positives), so the default gate is
/// about 55 bytes per cache entry, small beside most values.
pub const DEFAULT_GATE_MULTIPLIER: usize = 16;

/// Most shards a cache may have.
pub const MAX_SHARDS: usize = 1 << 16;

/// Default shards per available core: enough that threads rarely meet on one shard's lock
/// even when a skewed workload sends many of them to the shards of its hottest keys.
const SHARDS_PER_CORE: usize = 16;

/// Most shards a weighted cache gets by default: each shard then holds at least an
/// eighth of the capacity, the most an entry may weigh (see [`Admission::TooHeavy`]).
const WEIGHTED_SHARDS: usize = 8;

/// Fewest entries a default shard is sized for, so that each shard's policy keeps a
/// useful order (S3-FIFO's small queue starts at a tenth of the shard, 25 or more) and, under
/// a weigher, an entry of a few hundred average weights still fits its shard.
const MIN_SHARD_ENTRIES: usize = 256;

/// What [`AdmissionCache::insert`] did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Admission {
    /// The key was absent and is now stored.
    Admitted,
    /// The key was absent and the policy kept it out (first sighting).
    Rejected,
    /// The key was present; its value was replaced.
    Updated,
    /// The entry weighs more than its shard holds (the capacity divided by the shard
    /// count, rounded down; at least an eighth of the capacity under the default shard
    /// count), so it was not stored, and a present key was removed rather than keep the
    /// value it replaced.
    TooHeavy,
}

/// Counters of an [`AdmissionCache`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct CacheStats {
    /// `get` calls that found their key.
    pub hits: u64,
    /// `get` calls that did not.
    pub misses: u64,
    /// Inserts of absent keys that stored them (cache writes).
    pub admitted: u64,
    /// Inserts that the policy refused, or that were too heavy.
    pub rejected: u64,
    /// Entries pushed out to make room.
    pub evictions: u64,
    /// Entries whose lifetime ended, reclaimed or found expired.
    pub expirations: u64,
    /// Loaders run by [`get_or_insert_with`](AdmissionCache::get_or_insert_with) and the
    /// other loading methods (one per key missing at a time).
    pub loads: u64,
    /// Callers of the loading methods that got the value another caller's loader made.
    pub loads_coalesced: u64,
    /// Loads that ended without a value: the loader returned an error, panicked, or its
    /// future was dropped.
    pub load_failures: u64,
    /// Callers waiting now for another caller's load (a gauge, not a counter: a number
    /// that stays high means a slow or stuck origin).
    pub loads_waiting: u64,
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

/// A concurrent cache with an admission gate in front of it.
///
/// Sharded by key hash. The default policy is [`AdmissionPolicy::S3Fifo`]: scan
/// resistant, and a hit takes only its shard's read lock. Under
/// [`AdmissionPolicy::Always`] each shard is an exact LRU, so with
/// [`shards(1)`](AdmissionCacheBuilder::shards) the cache has one global LRU order.
/// All methods take `&self`; the cache is `Send + Sync` when its keys and values are.
///
/// Keys' `Hash`, `Eq` and `Drop` and values' `Clone` and `Drop` are user code: if one
/// panics, the call it ran in panics, and the cache stays consistent and usable.
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
    /// The shared gate, under [`AdmissionPolicy::SecondHit`] only.
    gate: Option<SeenBefore>,
    hasher: ahash::RandomState,
    policy: AdmissionPolicy,
    capacity: u64,
    weigher: Option<Weigher<K, V>>,
    /// Misses (each shard's lock counts its hits).
    misses: Tally<1>,
    /// Loads in flight.
    loads: Loads<K, V>,
    expiry: Expiry,
    listener: Option<Listener<K, V>>,
    #[cfg(feature = "metrics")]
    metrics: Option<metrics::CacheMetrics>,
}

type Weigher<K, V> = Arc<dyn Fn(&K, &V) -> u32 + Send + Sync>;

/// A shard behind its lock, alone on its cache lines.
type ShardSlot<K, V> = CachePadded<ShardLock<Shard<K, V>>>;

/// Configures an [`AdmissionCache`]. Made by [`AdmissionCache::builder`].
#[must_use]
pub struct AdmissionCacheBuilder<K, V> {
    _types: PhantomData<fn() -> (K, V)>,
    capacity: usize,
    policy: AdmissionPolicy,
    shards: Option<usize>,
    gate_capacity: Option<usize>,
    estimated_entries: Option<usize>,
    weigher: Option<Weigher<K, V>>,
    seed: Option<u64>,
    time_to_live: Option<Duration>,
    time_to_idle: Option<Duration>,
    clock: Clock,
    listener: Option<Listener<K, V>>,
    #[cfg(feature = "metrics")]
    metrics_name: Option<String>,
}

impl<K, V> Clone for AdmissionCacheBuilder<K, V> {
    fn clone(&self) -> Self {
        AdmissionCacheBuilder {
            _types: PhantomData,
            capacity: self.capacity,
            policy: self.policy,
            shards: self.shards,
            gate_capacity: self.gate_capacity,
            estimated_entries: self.estimated_entries,
            weigher: self.weigher.clone(),
            seed: self.seed,
            time_to_live: self.time_to_live,
            time_to_idle: self.time_to_idle,
            clock: self.clock.clone(),
            listener: self.listener.clone(),
            #[cfg(feature = "metrics")]
            metrics_name: self.metrics_name.clone(),
        }
    }
}

impl<K, V> fmt::Debug for AdmissionCacheBuilder<K, V> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AdmissionCacheBuilder")
            .field("capacity", &self.capacity)
            .field("policy", &self.policy)
            .field("shards", &self.shards)
            .field("gate_capacity", &self.gate_capacity)
            .field("estimated_entries", &self.estimated_entries)
            .field("weigher", &self.weigher.as_ref().map(|_| "Fn(&K, &V) -> u32"))
            .field("seed", &self.seed)
            .field("time_to_live", &self.time_to_live)
            .field("time_to_idle", &self.time_to_idle)
            .field("clock", &self.clock)
            .field("listener", &self.listener.as_ref().map(|_| "Fn(K, V, RemovalCause)"))
            .finish_non_exhaustive()
    }
}

impl<K: Hash + Eq, V: Clone> AdmissionCacheBuilder<K, V> {
    /// Most entries held (required, at least 1); with a [`weigher`](Self::weigher), the
    /// most total weight held.
    ///
    /// # Examples
    ///
    /// ```
    /// let cache = cuckoo_gate::AdmissionCache::<u64, u64>::builder().capacity(1_000).build()?;
    /// assert_eq!(cache.capacity(), 1_000);
    /// # Ok::<(), cuckoo_gate::BuildError>(())
    /// ```
    pub fn capacity(mut self, capacity: usize) -> Self {
        self.capacity = capacity;
        self
    }

    /// The admission policy; default [`AdmissionPolicy::S3Fifo`].
    ///
    /// # Examples
    ///
    /// ```
    /// use cuckoo_gate::{Admission, AdmissionCache, AdmissionPolicy};
    ///
    /// let lru = AdmissionCache::builder().capacity(100).admission(AdmissionPolicy::Always).build()?;
    /// assert_eq!(lru.insert(1, "one"), Admission::Admitted); // no gate: stored at first sight
    /// # Ok::<(), cuckoo_gate::BuildError>(())
    /// ```
    pub fn admission(mut self, policy: AdmissionPolicy) -> Self {
        self.policy = policy;
        self
    }

    /// Number of shards (any count from 1 to the capacity, at most [`MAX_SHARDS`]). 1
    /// gives one global order (an exact LRU under [`AdmissionPolicy::Always`]); the
    /// default is 16 per available core, which keeps lock contention low, but no more
    /// than one per 256 entries (estimated entries under a weigher). Each shard holds an
    /// equal share of the capacity.
    ///
    /// # Examples
    ///
    /// ```
    /// use cuckoo_gate::{AdmissionCache, BuildError};
    ///
    /// assert!(AdmissionCache::<u64, u64>::builder().capacity(100).shards(1).build().is_ok());
    /// let too_many = AdmissionCache::<u64, u64>::builder().capacity(100).shards(101).build();
    /// assert!(matches!(too_many, Err(BuildError::InvalidShards { .. })));
    /// ```
    pub fn shards(mut self, shards: usize) -> Self {
        self.shards = Some(shards);
        self
    }

    /// Weighs entries: the cache then holds at most [`capacity`](Self::capacity) total
    /// weight instead of that many entries (an entry weighing 0 counts as 1). Give
    /// [`estimated_entries`](Self::estimated_entries) too, which sizes the gate.
    ///
    /// # Examples
    ///
    /// ```
    /// use cuckoo_gate::{Admission, AdmissionCache};
    ///
    /// let cache: AdmissionCache<u64, Vec<u8>> = AdmissionCache::builder()
    ///     .capacity(1 << 20) // 1 MiB of values
    ///     .weigher(|_key, value: &Vec<u8>| value.len() as u32)
    ///     .estimated_entries(1_000)
    ///     .shards(1)
    ///     .build()?;
    /// cache.insert(1, vec![0; 4096]);
    /// assert_eq!(cache.weight(), 4096);
    /// assert_eq!(cache.insert(2, vec![0; 2 << 20]), Admission::TooHeavy);
    /// # Ok::<(), cuckoo_gate::BuildError>(())
    /// ```
    pub fn weigher(mut self, weigher: impl Fn(&K, &V) -> u32 + Send + Sync + 'static) -> Self {
        self.weigher = Some(Arc::new(weigher));
        self
    }

    /// About how many entries the cache will hold; the gate is sized from it. Required
    /// with a [`weigher`](Self::weigher); without one it is the capacity.
    ///
    /// # Examples
    ///
    /// ```
    /// use cuckoo_gate::{AdmissionCache, BuildError};
    ///
    /// let weighed = AdmissionCache::<u64, Vec<u8>>::builder().capacity(1 << 20);
    /// let weighed = weighed.weigher(|_key, value| value.len() as u32);
    /// assert_eq!(weighed.clone().build().unwrap_err(), BuildError::EstimatedEntriesRequired);
    /// assert!(weighed.estimated_entries(256).build().is_ok()); // values of about 4 KiB
    /// ```
    pub fn estimated_entries(mut self, entries: usize) -> Self {
        self.estimated_entries = Some(entries);
        self
    }

    /// Keys the seen-before gate remembers per generation (it remembers each for at least
    /// this many later recordings), or under [`AdmissionPolicy::S3Fifo`] the ghosts, split
    /// over the shards. Defaults: [`DEFAULT_GATE_MULTIPLIER`] entries per cache entry under
    /// [`AdmissionPolicy::SecondHit`]; under S3-FIFO 0.9 per entry, the size of the ghost
    /// queue in S3-FIFO's paper, so that every key that queue would remember is remembered;
    /// unused under [`AdmissionPolicy::Always`]. Fewer ghosts than the default also hold
    /// S3-FIFO's small queue back: it grows only on misses on ghosts.
    ///
    /// # Examples
    ///
    /// ```
    /// use cuckoo_gate::{AdmissionCache, AdmissionPolicy};
    ///
    /// let second_hit = AdmissionCache::<u64, u64>::builder().admission(AdmissionPolicy::SecondHit);
    /// let cache = second_hit.capacity(1_000).gate_capacity(50_000).build()?;
    /// assert_eq!(cache.gate().map(|gate| gate.stats().capacity), Some(50_000));
    /// # Ok::<(), cuckoo_gate::BuildError>(())
    /// ```
    pub fn gate_capacity(mut self, keys: usize) -> Self {
        self.gate_capacity = Some(keys);
        self
    }

    /// Fixes the hash seeds (reproducible runs); random by default.
    ///
    /// # Examples
    ///
    /// ```
    /// let build = || cuckoo_gate::AdmissionCache::<u64, u64>::builder().capacity(100).seed(7).build();
    /// let (a, b) = (build()?, build()?);
    /// (0..1_000).for_each(|k| assert_eq!(a.insert(k, k), b.insert(k, k))); // same decisions
    /// # Ok::<(), cuckoo_gate::BuildError>(())
    /// ```
    pub fn seed(mut self, seed: u64) -> Self {
        self.seed = Some(seed);
        self
    }

    /// Entries expire this long after they were written (inserted, or their value
    /// replaced), unless [`insert_with_ttl`](AdmissionCache::insert_with_ttl) gave them a
    /// lifetime of their own. An expired entry is never returned and its lookup is a miss;
    /// writes reclaim expired entries as they go (eviction takes them first), and
    /// [`purge_expired`](AdmissionCache::purge_expired) reclaims them all. Time is the
    /// system's coarse monotonic clock (see [`Clock`]): an entry may outlive its deadline
    /// by up to a few milliseconds in memory, never in what lookups return.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use cuckoo_gate::{AdmissionCache, Clock};
    ///
    /// let (clock, hand) = Clock::manual();
    /// let cache: AdmissionCache<&str, u32> =
    ///     AdmissionCache::builder().capacity(100).time_to_live(Duration::from_secs(30)).clock(clock).build()?;
    /// cache.insert("login", 7);
    /// hand.advance(Duration::from_secs(30));
    /// assert_eq!(cache.get(&"login"), None);
    /// assert_eq!(cache.stats().expirations, 0); // found expired, not yet reclaimed
    /// cache.purge_expired();
    /// assert_eq!(cache.stats().expirations, 1);
    /// # Ok::<(), cuckoo_gate::BuildError>(())
    /// ```
    pub fn time_to_live(mut self, ttl: Duration) -> Self {
        self.time_to_live = Some(ttl);
        self
    }

    /// Entries expire this long after they were last written or hit
    /// ([`get`](AdmissionCache::get) and the loading methods; [`peek`](AdmissionCache::peek)
    /// and [`contains_key`](AdmissionCache::contains_key) are not uses), and never later
    /// than their time to live, if they have one. A hit moves the deadline on only when it
    /// would move by more than 1/64 of the idle time, so that a hot entry's memory is not
    /// written on every hit: an entry may expire up to that much early.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use cuckoo_gate::{AdmissionCache, Clock};
    ///
    /// let (clock, hand) = Clock::manual();
    /// let cache: AdmissionCache<u64, u64> =
    ///     AdmissionCache::builder().capacity(100).time_to_idle(Duration::from_secs(10)).clock(clock).build()?;
    /// cache.insert(1, 1);
    /// for _ in 0..5 {
    ///     hand.advance(Duration::from_secs(9));
    ///     assert_eq!(cache.get(&1), Some(1)); // each hit gives it another 10 s
    /// }
    /// hand.advance(Duration::from_secs(10));
    /// assert_eq!(cache.get(&1), None);
    /// # Ok::<(), cuckoo_gate::BuildError>(())
    /// ```
    pub fn time_to_idle(mut self, tti: Duration) -> Self {
        self.time_to_idle = Some(tti);
        self
    }

    /// The clock expiry is measured by; default [`Clock::system`]. Tests give a
    /// [`Clock::manual`] and move it by hand.
    pub fn clock(mut self, clock: Clock) -> Self {
        self.clock = clock;
        self
    }

    /// Tells `listener` of every entry that leaves the cache, with why (see
    /// [`RemovalCause`]): each exactly once, after the shard's lock is released, on the
    /// thread whose call removed it. Entries the policy never stored (a rejected first
    /// sighting, a [`TooHeavy`](Admission::TooHeavy) value) never entered, and are not
    /// reported. A listener that panics fails the call it ran in; the other entries that
    /// call removed are still reported. The listener must not block for long: the call
    /// that removed the entry waits for it.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::sync::{Arc, Mutex};
    /// use cuckoo_gate::{AdmissionCache, AdmissionPolicy, RemovalCause};
    ///
    /// let told = Arc::new(Mutex::new(Vec::new()));
    /// let log = told.clone();
    /// let cache: AdmissionCache<u64, &str> = AdmissionCache::builder()
    ///     .capacity(1)
    ///     .admission(AdmissionPolicy::Always)
    ///     .eviction_listener(move |key, value, cause| log.lock().unwrap().push((key, value, cause)))
    ///     .build()?;
    /// let _ = cache.insert(1, "one");
    /// let _ = cache.insert(1, "uno");
    /// let _ = cache.insert(2, "two");
    /// cache.remove(&2);
    /// assert_eq!(*told.lock().unwrap(), [
    ///     (1, "one", RemovalCause::Replaced),
    ///     (1, "uno", RemovalCause::Evicted),
    ///     (2, "two", RemovalCause::Removed),
    /// ]);
    /// # Ok::<(), cuckoo_gate::BuildError>(())
    /// ```
    pub fn eviction_listener(
        mut self,
        listener: impl Fn(K, V, RemovalCause) + Send + Sync + 'static,
    ) -> Self {
        self.listener = Some(Arc::new(listener));
        self
    }

    /// Publishes this cache's metrics (feature `metrics`) under the label
    /// `name="<name>"`, each time [`AdmissionCache::publish_metrics`] is called, to the
    /// recorder installed then. One live instance holds a name at a time.
    ///
    /// # Examples
    ///
    /// ```
    /// use cuckoo_gate::{AdmissionCache, BuildError};
    ///
    /// let recorder = metrics_util::debugging::DebuggingRecorder::new(); // or a Prometheus exporter
    /// let builder = AdmissionCache::<u64, u64>::builder().capacity(100).metrics_name("edge");
    /// let cache = builder.clone().build()?;
    /// metrics::with_local_recorder(&recorder, || cache.publish_metrics());
    /// assert_eq!(recorder.snapshotter().snapshot().into_vec().len(), 15); // the cache's series
    /// assert!(matches!(builder.build(), Err(BuildError::MetricsNameTaken { .. })));
    /// # Ok::<(), cuckoo_gate::BuildError>(())
    /// ```
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
    /// [`BuildError::MetricsNameTaken`] for a `metrics_name` a live cache publishes under,
    /// [`BuildError::InvalidShards`] for zero shards, more shards than the capacity or
    /// more than [`MAX_SHARDS`], [`BuildError::EstimatedEntriesRequired`] for a weigher
    /// without an estimate, the gate's own errors, and under S3-FIFO
    /// [`BuildError::CapacityTooLarge`] or [`BuildError::OutOfMemory`] for ghosts (or
    /// estimated entries) too many to allocate.
    ///
    /// # Examples
    ///
    /// ```
    /// use cuckoo_gate::{AdmissionCache, BuildError};
    ///
    /// let zero = AdmissionCache::<u64, u64>::builder().build();
    /// assert_eq!(zero.unwrap_err(), BuildError::ZeroCapacity);
    /// let one_order = AdmissionCache::<u64, u64>::builder().capacity(10).shards(1).build();
    /// assert!(one_order.is_ok());
    /// ```
    pub fn build(self) -> Result<AdmissionCache<K, V>, BuildError> {
        if self.capacity == 0 {
            return Err(BuildError::ZeroCapacity);
        }
        let entries = match (&self.weigher, self.estimated_entries) {
            (_, Some(0)) => return Err(BuildError::ZeroCapacity),
            (_, Some(entries)) => entries,
            (None, None) => self.capacity,
            (Some(_), None) => return Err(BuildError::EstimatedEntriesRequired),
        };
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        let shards = self.shards.unwrap_or_else(|| {
            let most = (entries / MIN_SHARD_ENTRIES).min(self.capacity).min(MAX_SHARDS);
            let most = if self.weigher.is_some() { most.min(WEIGHTED_SHARDS) } else { most };
            cores.saturating_mul(SHARDS_PER_CORE).min(most).max(1)
        });
        if shards == 0 || shards > self.capacity || shards > MAX_SHARDS {
            return Err(BuildError::InvalidShards { shards, capacity: self.capacity });
        }
        let gate_capacity = match (self.policy, self.gate_capacity) {
            (_, Some(keys)) => keys,
            (AdmissionPolicy::Always, None) => 1,
            (AdmissionPolicy::SecondHit, None) => entries.saturating_mul(DEFAULT_GATE_MULTIPLIER),
            (AdmissionPolicy::S3Fifo, None) => policy::default_ghost_capacity(entries),
        };
        if gate_capacity == 0 {
            return Err(BuildError::ZeroCapacity);
        }
        let gate = match self.policy {
            AdmissionPolicy::SecondHit => {
                let gate = SeenBefore::builder().capacity(gate_capacity);
                Some(match self.seed {
                    Some(seed) => gate.seed(seed).build()?,
                    None => gate.build()?,
                })
            }
            _ => None,
        };
        let hasher = match &gate {
            Some(gate) => gate.hasher().clone(),
            None => seeded_hasher(self.seed.unwrap_or_else(random_seed)),
        };
        let capacity = self.capacity as u64;
        let split = match self.policy {
            AdmissionPolicy::S3Fifo => Some(Arc::new(SharedSplit::new(capacity, entries)?)),
            _ => None,
        };
        let shards: Box<[_]> = (0..shards as u64)
            .map(|i| {
                // Split exactly: the first `total % shards` shards get one more.
                let share = |total: u64| total / shards as u64 + u64::from(i < total % shards as u64);
                let (entries, ghosts) =
                    (share(entries as u64) as usize, share(gate_capacity as u64) as usize);
                let weighted = self.weigher.is_some();
                let shard =
                    Shard::new(self.policy, share(capacity), entries, ghosts, split.clone(), weighted)?;
                Ok(CachePadded::new(ShardLock::new(shard)))
            })
            .collect::<Result<_, BuildError>>()?;
        let stripes = (2 * cores).next_power_of_two().min(256);
        Ok(AdmissionCache {
            shards,
            gate,
            loads: Loads::new(hasher.clone(), stripes),
            hasher,
            policy: self.policy,
            capacity,
            weigher: self.weigher,
            misses: Tally::new(stripes),
            expiry: Expiry::new(self.clock, self.time_to_live, self.time_to_idle),
            listener: self.listener,
            #[cfg(feature = "metrics")]
            metrics: self.metrics_name.as_deref().map(metrics::CacheMetrics::new).transpose()?,
        })
    }
}

impl<K: Hash + Eq, V: Clone> AdmissionCache<K, V> {
    /// A builder; set at least [`AdmissionCacheBuilder::capacity`].
    pub fn builder() -> AdmissionCacheBuilder<K, V> {
        AdmissionCacheBuilder {
            _types: PhantomData,
            capacity: 0,
            policy: AdmissionPolicy::default(),
            shards: None,
            gate_capacity: None,
            estimated_entries: None,
            weigher: None,
            seed: None,
            time_to_live: None,
            time_to_idle: None,
            clock: Clock::system(),
            listener: None,
            #[cfg(feature = "metrics")]
            metrics_name: None,
        }
    }

    #[inline]
    fn shard(&self, hash: u64) -> &ShardLock<Shard<K, V>> {
        // The low half picks the shard: the table inside uses the top bits for its tags.
        let index = ((hash & 0xFFFF_FFFF) * self.shards.len() as u64) >> 32;
        &self.shards[index as usize]
    }

    /// The value of `key`. A hit takes the key's shard's read lock (its write lock under
    /// [`AdmissionPolicy::Always`], which reorders the shard's LRU list).
    ///
    /// # Examples
    ///
    /// ```
    /// use cuckoo_gate::AdmissionCache;
    ///
    /// let cache: AdmissionCache<u64, &str> = AdmissionCache::builder().capacity(100).build()?;
    /// cache.insert(1, "one");
    /// assert_eq!(cache.get(&1), Some("one"));
    /// assert_eq!(cache.get(&2), None);
    /// # Ok::<(), cuckoo_gate::BuildError>(())
    /// ```
    #[inline]
    pub fn get(&self, key: &K) -> Option<V> {
        self.get_hashed(self.hasher.hash_one(key), key)
    }

    /// [`get`](Self::get) of a key whose hash is known. An expired entry is a miss.
    #[inline(always)]
    fn get_hashed(&self, hash: u64, key: &K) -> Option<V> {
        let shard = self.shard(hash);
        let found = match self.policy {
            AdmissionPolicy::Always => {
                let mut held = shard.write();
                let found = held.get_mut(hash, key);
                if found.is_some() {
                    held.count_hit();
                }
                found
            }
            _ => {
                let held = shard.read();
                let found = held.get(hash, key);
                // A hit is counted as the hold is released (a panic in user code above
                // releases it uncounted).
                if found.is_some() && held.release_hit() {
                    shard.drain_hits();
                }
                found
            }
        };
        if found.is_none() {
            self.misses.add(0);
        }
        found
    }

    /// Stores `value` for `key` if the key is present (replacing its value) or the policy
    /// admits it. Takes the key's shard's write lock; evicted entries, a replaced value and
    /// a key the cache does not keep are reported and dropped after it is released. With
    /// a [`time_to_live`](AdmissionCacheBuilder::time_to_live), the entry lives that long
    /// from now.
    ///
    /// # Examples
    ///
    /// ```
    /// use cuckoo_gate::{Admission, AdmissionCache};
    ///
    /// let cache: AdmissionCache<u64, &str> = AdmissionCache::builder().capacity(100).build()?;
    /// assert_eq!(cache.insert(1, "one"), Admission::Admitted);
    /// assert_eq!(cache.insert(1, "uno"), Admission::Updated);
    /// # Ok::<(), cuckoo_gate::BuildError>(())
    /// ```
    #[must_use = "the policy may not store the entry: see `Admission`"]
    pub fn insert(&self, key: K, value: V) -> Admission {
        self.write(key, value, None)
    }

    /// [`insert`](Self::insert), with a lifetime of the entry's own (an HTTP response's
    /// `max-age`, say) in place of the cache's
    /// [`time_to_live`](AdmissionCacheBuilder::time_to_live); any cache takes it. Under
    /// [`time_to_idle`](AdmissionCacheBuilder::time_to_idle) the entry also expires when
    /// idle that long.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use cuckoo_gate::{AdmissionCache, Clock};
    ///
    /// let (clock, hand) = Clock::manual();
    /// let cache: AdmissionCache<&str, &str> = AdmissionCache::builder().capacity(100).clock(clock).build()?;
    /// let _ = cache.insert_with_ttl("/news", "<html>", Duration::from_secs(60));
    /// let _ = cache.insert("/logo.png", "<png>"); // no lifetime
    /// hand.advance(Duration::from_secs(60));
    /// assert_eq!((cache.get(&"/news"), cache.get(&"/logo.png")), (None, Some("<png>")));
    /// # Ok::<(), cuckoo_gate::BuildError>(())
    /// ```
    #[must_use = "the policy may not store the entry: see `Admission`"]
    pub fn insert_with_ttl(&self, key: K, value: V, ttl: Duration) -> Admission {
        self.expiry.start();
        self.write(key, value, Some(ticks(ttl)))
    }

    /// An insert, for `lifetime` ticks if given.
    fn write(&self, key: K, value: V, lifetime: Option<u64>) -> Admission {
        let hash = self.hasher.hash_one(&key);
        let write = Write {
            hash,
            weight: self.weigh(&key, &value),
            replace: true,
            lifetime,
            gate: self.gate.as_ref(),
            expiry: &self.expiry,
        };
        let mut leftovers = self.leftovers();
        leftovers.unkept = Some((key, value));
        let admission = self.shard(hash).write().insert(&write, &mut leftovers);
        self.report(leftovers);
        admission
    }

    /// Somewhere for a write to leave what it removes.
    #[inline]
    fn leftovers(&self) -> Leftovers<K, V> {
        Leftovers::new(self.listener.is_some())
    }

    /// Tells the listener of what a write removed, and drops it all (no lock is held).
    #[inline]
    fn report(&self, leftovers: Leftovers<K, V>) {
        let Leftovers { unkept, removed } = leftovers;
        drop(unkept);
        self.report_removed(removed);
    }

    #[inline]
    fn report_removed(&self, removed: Removed<K, V>) {
        report(self.listener.as_ref(), removed);
    }

    /// The entry's weight: the weigher's, at least 1; 1 without a weigher.
    #[inline]
    fn weigh(&self, key: &K, value: &V) -> u32 {
        self.weigher.as_ref().map_or(1, |weigh| weigh(key, value).max(1))
    }

    /// The value of `key`, without counting a request: no hit or miss is counted, and the
    /// entry's place in the eviction order stays as it is. Takes the key's shard's read
    /// lock (under every policy).
    ///
    /// # Examples
    ///
    /// ```
    /// use cuckoo_gate::AdmissionCache;
    ///
    /// let cache: AdmissionCache<u64, &str> = AdmissionCache::builder().capacity(100).build()?;
    /// cache.insert(1, "one");
    /// assert_eq!((cache.peek(&1), cache.peek(&2)), (Some("one"), None));
    /// assert_eq!((cache.stats().hits, cache.stats().misses), (0, 0));
    /// # Ok::<(), cuckoo_gate::BuildError>(())
    /// ```
    pub fn peek(&self, key: &K) -> Option<V> {
        self.peek_hashed(self.hasher.hash_one(key), key)
    }

    fn peek_hashed(&self, hash: u64, key: &K) -> Option<V> {
        self.shard(hash).read().peek(hash, key)
    }

    /// Whether `key` is held (and not expired), without counting a request, as
    /// [`peek`](Self::peek) does.
    ///
    /// # Examples
    ///
    /// ```
    /// use cuckoo_gate::AdmissionCache;
    ///
    /// let cache: AdmissionCache<u64, &str> = AdmissionCache::builder().capacity(100).build()?;
    /// let _ = cache.insert(1, "one");
    /// assert!(cache.contains_key(&1) && !cache.contains_key(&2));
    /// # Ok::<(), cuckoo_gate::BuildError>(())
    /// ```
    pub fn contains_key(&self, key: &K) -> bool {
        let hash = self.hasher.hash_one(key);
        self.shard(hash).read().contains(hash, key)
    }

    /// Removes `key`, returning its value. Takes the key's shard's write lock; the removed
    /// key is dropped after it is released. A load of `key` in flight (see
    /// [`get_or_insert_with`](Self::get_or_insert_with)) then does not store its value, so
    /// that a value loaded before the remove does not come back after it.
    ///
    /// # Examples
    ///
    /// ```
    /// use cuckoo_gate::AdmissionCache;
    ///
    /// let cache: AdmissionCache<u64, &str> = AdmissionCache::builder().capacity(100).build()?;
    /// cache.insert(1, "one");
    /// assert_eq!(cache.remove(&1), Some("one"));
    /// assert!(cache.is_empty());
    /// # Ok::<(), cuckoo_gate::BuildError>(())
    /// ```
    pub fn remove(&self, key: &K) -> Option<V> {
        let hash = self.hasher.hash_one(key);
        self.loads.invalidate(key);
        let (key, value, cause) = self.shard(hash).write().remove(hash, key, &self.expiry)?;
        // An expired value is not the caller's, but the listener is told of it.
        let removed = cause == RemovalCause::Removed;
        match &self.listener {
            None => removed.then_some(value),
            Some(listener) => {
                let kept = removed.then(|| value.clone());
                report(Some(listener), [(key, value, cause)]);
                kept
            }
        }
    }

    /// Removes every entry. Each shard is emptied under its write lock, one after the
    /// other, and what it held is reported ([`RemovalCause::Cleared`]) and dropped after
    /// the lock is released. An insert that runs at the same time on a shard already
    /// cleared stays; loads in flight do not store their values (as after a
    /// [`remove`](Self::remove)). Counters keep counting: a clear is not a new cache.
    ///
    /// # Examples
    ///
    /// ```
    /// use cuckoo_gate::AdmissionCache;
    ///
    /// let cache: AdmissionCache<u64, u64> = AdmissionCache::builder().capacity(100).build()?;
    /// (0..10).for_each(|k| { let _ = cache.insert(k, k); });
    /// cache.clear();
    /// assert!(cache.is_empty());
    /// assert_eq!(cache.stats().admitted, 10);
    /// # Ok::<(), cuckoo_gate::BuildError>(())
    /// ```
    pub fn clear(&self) {
        self.loads.invalidate_all();
        let mut panic = None;
        for shard in self.shards.iter() {
            let held = shard.write().clear();
            let cleared = held.into_entries().map(|(key, value)| (key, value, RemovalCause::Cleared));
            // A panicking listener or `Drop` leaves the other shards to be cleared.
            if let Err(payload) = catch_unwind(AssertUnwindSafe(|| report(self.listener.as_ref(), cleared))) {
                panic.get_or_insert(payload);
            }
        }
        if let Some(payload) = panic {
            resume_unwind(payload);
        }
    }

    /// Keeps the entries for which `keep` returns true, removing the others
    /// ([`RemovalCause::Removed`]) and any that expired ([`RemovalCause::Expired`]).
    /// Shard by shard: `keep` runs under each shard's write lock, so it must not call this
    /// cache (it would wait for itself); an entry inserted during the call may or may not
    /// be judged. If `keep` panics, the entries removed so far stay removed and are
    /// reported, and the panic goes on.
    ///
    /// # Examples
    ///
    /// ```
    /// use cuckoo_gate::AdmissionCache;
    ///
    /// let cache: AdmissionCache<u64, u64> = AdmissionCache::builder().capacity(100).build()?;
    /// (0..10).for_each(|k| { let _ = cache.insert(k, k); });
    /// cache.retain(|&key, _| key % 2 == 0);
    /// assert_eq!(cache.len(), 5);
    /// # Ok::<(), cuckoo_gate::BuildError>(())
    /// ```
    pub fn retain(&self, mut keep: impl FnMut(&K, &V) -> bool) {
        for shard in self.shards.iter() {
            let mut removed = Removed::new(self.listener.is_some());
            let judged = catch_unwind(AssertUnwindSafe(|| {
                let mut held = shard.write();
                let now = self.expiry.clock.now();
                held.retain(&mut keep, now, &mut removed);
            }));
            self.report_removed(removed);
            if let Err(payload) = judged {
                resume_unwind(payload);
            }
        }
    }

    /// Removes every expired entry now ([`RemovalCause::Expired`]), rather than as writes
    /// come to them: for a cache that goes quiet, from a timer. Takes each shard's write
    /// lock in turn and looks at every entry of a shard that has held one with a lifetime.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use cuckoo_gate::{AdmissionCache, Clock};
    ///
    /// let (clock, hand) = Clock::manual();
    /// let cache: AdmissionCache<u64, u64> =
    ///     AdmissionCache::builder().capacity(100).time_to_live(Duration::from_secs(1)).clock(clock).build()?;
    /// (0..10).for_each(|k| { let _ = cache.insert(k, k); });
    /// hand.advance(Duration::from_secs(1));
    /// cache.purge_expired();
    /// assert!(cache.is_empty());
    /// # Ok::<(), cuckoo_gate::BuildError>(())
    /// ```
    pub fn purge_expired(&self) {
        for shard in self.shards.iter() {
            let mut removed = Removed::new(self.listener.is_some());
            shard.write().purge(self.expiry.clock.now(), &mut removed);
            self.report_removed(removed);
        }
    }

    /// Clones of the entries held (and not expired), shard by shard: each shard's are
    /// copied under its read lock, and yielded after it is released, so the caller's code
    /// never runs under a lock. Entries written during the iteration may or may not be
    /// seen; none is seen twice.
    ///
    /// # Examples
    ///
    /// ```
    /// use cuckoo_gate::AdmissionCache;
    ///
    /// let cache: AdmissionCache<u64, u64> = AdmissionCache::builder().capacity(100).build()?;
    /// (0..10).for_each(|k| { let _ = cache.insert(k, k * k); });
    /// let mut entries: Vec<(u64, u64)> = cache.iter().collect();
    /// entries.sort();
    /// assert_eq!(entries[3], (3, 9));
    /// # Ok::<(), cuckoo_gate::BuildError>(())
    /// ```
    pub fn iter(&self) -> impl Iterator<Item = (K, V)> + '_
    where
        K: Clone,
    {
        self.shards.iter().flat_map(move |shard| {
            let mut entries = Vec::new();
            shard.read().entries_into(&self.expiry, &mut entries);
            entries
        })
    }

    /// Entries held (summed over the shards, each read under its lock).
    ///
    /// # Examples
    ///
    /// ```
    /// use cuckoo_gate::AdmissionCache;
    ///
    /// let cache: AdmissionCache<u64, &str> = AdmissionCache::builder().capacity(100).build()?;
    /// cache.insert(1, "one");
    /// assert_eq!((cache.len(), cache.capacity()), (1, 100));
    /// # Ok::<(), cuckoo_gate::BuildError>(())
    /// ```
    pub fn len(&self) -> usize {
        self.shards.iter().map(|s| s.read().len()).sum()
    }

    /// Whether no entry is held.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Total weight held: the number of entries, without a weigher.
    pub fn weight(&self) -> u64 {
        self.shards.iter().map(|s| s.read().weight()).sum()
    }

    /// Most entries held, or most total weight with a weigher.
    pub fn capacity(&self) -> u64 {
        self.capacity
    }

    /// The admission policy.
    pub fn policy(&self) -> AdmissionPolicy {
        self.policy
    }

    /// The seen-before gate in front of the cache, under [`AdmissionPolicy::SecondHit`]
    /// (the other policies have none: S3-FIFO keeps its ghosts in each shard). The cache
    /// records keys by the gate's own hash, so `gate.contains(&key)` asks about `key`.
    ///
    /// # Examples
    ///
    /// ```
    /// use cuckoo_gate::{AdmissionCache, AdmissionPolicy};
    ///
    /// let cache: AdmissionCache<u64, u64> =
    ///     AdmissionCache::builder().capacity(100).admission(AdmissionPolicy::SecondHit).build()?;
    /// cache.insert(7, 7); // first sighting: recorded, not stored
    /// assert!(cache.gate().is_some_and(|gate| gate.contains(&7)));
    /// # Ok::<(), cuckoo_gate::BuildError>(())
    /// ```
    pub fn gate(&self) -> Option<&SeenBefore> {
        self.gate.as_ref()
    }

    /// The admission state's counters: the gate's under [`AdmissionPolicy::SecondHit`],
    /// the shards' ghosts summed under [`AdmissionPolicy::S3Fifo`].
    #[cfg(feature = "metrics")]
    fn gate_stats(&self) -> GateStats {
        if let Some(gate) = &self.gate {
            return gate.stats();
        }
        let mut total = GateStats { len: 0, capacity: 0, rotations: 0, memory_bytes: 0 };
        for shard in self.shards.iter() {
            if let Some(ghosts) = shard.read().ghosts() {
                total.len += ghosts.len;
                total.capacity += ghosts.capacity;
                total.rotations += ghosts.rotations;
                total.memory_bytes += ghosts.memory_bytes;
            }
        }
        total
    }

    /// Publishes [`stats`](Self::stats), the entry count and the gate's counters to the
    /// metrics registered with [`AdmissionCacheBuilder::metrics_name`] (feature `metrics`);
    /// does nothing without a name. Reads each shard briefly; call it periodically.
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
            let held = metrics::Held { entries, weight: self.weight(), capacity: self.capacity };
            metrics.publish(&stats, &held, &self.gate_stats());
        }
    }

    /// Counters, summed over the shards and threads.
    ///
    /// # Examples
    ///
    /// ```
    /// use cuckoo_gate::{AdmissionCache, AdmissionPolicy};
    ///
    /// let cache: AdmissionCache<u64, &str> = AdmissionCache::builder().capacity(100).build()?;
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

    /// Counters and entries, with each shard read once.
    fn snapshot(&self) -> (CacheStats, usize) {
        let loads = &self.loads;
        let mut total = CacheStats {
            misses: self.misses.sum(0),
            loads: loads.counts.sum(load::STARTED),
            loads_coalesced: loads.counts.sum(load::COALESCED),
            load_failures: loads.counts.sum(load::FAILED),
            loads_waiting: loads.waiting.load(Ordering::Relaxed),
            ..CacheStats::default()
        };
        let mut entries = 0;
        for shard in self.shards.iter() {
            let shard = shard.read();
            total.hits += shard.hits();
            let Counters { admitted, rejected, evictions, expirations } = shard.counters;
            total.admitted += admitted;
            total.rejected += rejected;
            total.evictions += evictions;
            total.expirations += expirations;
            entries += shard.len();
        }
        (total, entries)
    }
}

impl<K, V> fmt::Debug for AdmissionCache<K, V> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AdmissionCache")
            .field("capacity", &self.capacity)
            .field("policy", &self.policy)
            .field("shards", &self.shards.len())
            .finish_non_exhaustive()
    }
}
