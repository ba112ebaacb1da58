//! [`AdmissionCacheBuilder`]: a cache's configuration, checked when it is built.

use std::fmt;
use std::hash::Hash;
use std::marker::PhantomData;
use std::sync::Arc;
use std::time::Duration;

use crossbeam_utils::CachePadded;

use super::expiry::{ticks, Clock, Expiry, Lifetime};
use super::listener::{Listener, RemovalCause};
use super::load::Loads;
use super::lock::ShardLock;
#[cfg(feature = "metrics")]
use super::metrics;
use super::policy::{self, SharedSplit};
use super::shard::Shard;
use super::{
    AdmissionCache, AdmissionPolicy, ExpireAfter, Persisted, Reload, Spawner, Weigher,
    DEFAULT_GATE_MULTIPLIER, MAX_SHARDS, MIN_SHARD_ENTRIES, SHARDS_PER_CORE, WEIGHTED_SHARDS,
};
use crate::error::BuildError;
use crate::filter::random_seed;
use crate::gate::SeenBefore;
use crate::hashing::Hashing;
use crate::primitive::Tally;

/// The mean weight a weighted cache without [`estimated_entries`](AdmissionCacheBuilder::estimated_entries)
/// assumes, to size what is sized by entries: a web object of 4 KiB, weighed in bytes.
pub const ASSUMED_MEAN_WEIGHT: u64 = 4096;

/// The most entries a weighted cache without
/// [`estimated_entries`](AdmissionCacheBuilder::estimated_entries) assumes, whatever its
/// capacity: 2^20, 4 GiB of objects of [`ASSUMED_MEAN_WEIGHT`]. A capacity in bytes says
/// little of the entries (`u64::MAX` says nothing), so what is sized by entries is not
/// allocated in proportion to it; give `estimated_entries` for a larger cache.
pub const MAX_ASSUMED_ENTRIES: u64 = 1 << 20;

/// Configures an [`AdmissionCache`]. Made by [`AdmissionCache::builder`].
#[must_use]
pub struct AdmissionCacheBuilder<K, V> {
    _types: PhantomData<fn() -> (K, V)>,
    capacity: u64,
    policy: AdmissionPolicy,
    shards: Option<usize>,
    gate_capacity: Option<usize>,
    estimated_entries: Option<usize>,
    weigher: Option<Weigher<K, V>>,
    seed: Option<u64>,
    time_to_live: Option<Duration>,
    time_to_idle: Option<Duration>,
    refresh_after: Option<Duration>,
    grace: Option<Duration>,
    expire_after: Option<ExpireAfter<K, V>>,
    spawner: Option<Spawner>,
    failure_ttl: Option<Duration>,
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
            refresh_after: self.refresh_after,
            grace: self.grace,
            expire_after: self.expire_after.clone(),
            spawner: self.spawner.clone(),
            failure_ttl: self.failure_ttl,
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
            .field("refresh_after", &self.refresh_after)
            .field("grace", &self.grace)
            .field("expire_after", &self.expire_after.as_ref().map(|_| "Fn(&K, &V) -> Lifetime"))
            .field("spawner", &self.spawner.as_ref().map(|_| "Fn(Reload)"))
            .field("failure_ttl", &self.failure_ttl)
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
    pub fn capacity(mut self, capacity: u64) -> Self {
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
    /// weight instead of that many entries (an entry weighing 0 counts as 1). The largest
    /// entry a shard holds is [`AdmissionCache::max_weight`] (see
    /// [`Admission::TooHeavy`](super::Admission::TooHeavy)).
    /// [`estimated_entries`](Self::estimated_entries) sizes the gate or the ghosts; without
    /// it they are sized for entries of [`ASSUMED_MEAN_WEIGHT`].
    ///
    /// # Examples
    ///
    /// ```
    /// use cuckoo_gate::{Admission, AdmissionCache};
    ///
    /// let cache: AdmissionCache<u64, Vec<u8>> = AdmissionCache::builder()
    ///     .capacity(1 << 20) // 1 MiB of values
    ///     .weigher(|_key, value: &Vec<u8>| value.len() as u32)
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

    /// About how many entries the cache will hold, a hint: the gate or the ghosts, and
    /// the default shard count, are sized from it (each shard's table grows with its
    /// entries whatever it says). Without a [`weigher`](Self::weigher) it is the capacity;
    /// with one, the capacity over [`ASSUMED_MEAN_WEIGHT`], at most [`MAX_ASSUMED_ENTRIES`]:
    /// give it when the mean weight is far from that, or the cache holds more entries.
    ///
    /// # Examples
    ///
    /// ```
    /// use cuckoo_gate::{AdmissionCache, BuildError};
    ///
    /// let weighed = AdmissionCache::<u64, Vec<u8>>::builder().capacity(1 << 30);
    /// let weighed = weighed.weigher(|_key, value| value.len() as u32);
    /// assert!(weighed.clone().build().is_ok()); // sized for 4 KiB values
    /// assert!(weighed.clone().estimated_entries(16_384).build().is_ok()); // values of 64 KiB
    /// let zero = weighed.estimated_entries(0).build();
    /// assert_eq!(zero.unwrap_err(), BuildError::ZeroSetting { setting: "estimated_entries" });
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
    /// unused (and not checked) under [`AdmissionPolicy::Always`]. Fewer ghosts than the default also hold
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

    /// Entries turn stale this long after they were written, unless an
    /// [`expire_after`](Self::expire_after) closure says otherwise: a loader
    /// ([`get_or_insert_with`](AdmissionCache::get_or_insert_with) and the others) that
    /// finds a stale entry, still before its [`time_to_live`](Self::time_to_live), returns
    /// it and has one reload of the key start (see the README's loading table for who
    /// pays for it); [`get`](AdmissionCache::get) returns stale entries as any other.
    /// HTTP calls this `stale-while-revalidate`, Caffeine `refreshAfterWrite`.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use cuckoo_gate::{AdmissionCache, Clock};
    ///
    /// let (clock, hand) = Clock::manual();
    /// let cache: AdmissionCache<u64, &str> = AdmissionCache::builder()
    ///     .capacity(100)
    ///     .time_to_live(Duration::from_secs(60))
    ///     .refresh_after(Duration::from_secs(10))
    ///     .clock(clock)
    ///     .build()?;
    /// cache.get_or_insert_with(&1, || "v1");
    /// hand.advance(Duration::from_secs(10)); // stale
    /// // No spawner: the caller that finds it stale reloads it (others meanwhile get "v1").
    /// assert_eq!(cache.get_or_insert_with(&1, || "v2"), "v2");
    /// assert_eq!(cache.get(&1), Some("v2"));
    /// # Ok::<(), cuckoo_gate::BuildError>(())
    /// ```
    pub fn refresh_after(mut self, fresh: Duration) -> Self {
        self.refresh_after = Some(fresh);
        self
    }

    /// Entries are kept this long past their time to live, unless an
    /// [`expire_after`](Self::expire_after) closure says otherwise: for
    /// [`get`](AdmissionCache::get), `peek` and `iter` they are gone, but a fallible loader
    /// that finds one loads anew, and if that load fails returns the old value in place of
    /// the error (HTTP's `stale-if-error`, Varnish's grace). Entries in grace are evicted
    /// before live ones.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use cuckoo_gate::{AdmissionCache, Clock};
    ///
    /// let (clock, hand) = Clock::manual();
    /// let cache: AdmissionCache<u64, &str> = AdmissionCache::builder()
    ///     .capacity(100)
    ///     .time_to_live(Duration::from_secs(60))
    ///     .grace(Duration::from_secs(600))
    ///     .clock(clock)
    ///     .build()?;
    /// let _ = cache.insert(1, "old");
    /// hand.advance(Duration::from_secs(61));
    /// assert_eq!(cache.get(&1), None); // expired
    /// assert_eq!(cache.try_get_or_insert_with(&1, || Err("origin down")), Ok("old")); // in grace
    /// # Ok::<(), cuckoo_gate::BuildError>(())
    /// ```
    pub fn grace(mut self, grace: Duration) -> Self {
        self.grace = Some(grace);
        self
    }

    /// Gives each value written a [`Lifetime`] of its own, from its key and value (an HTTP
    /// response's `Cache-Control`, say): its time to live, freshness and grace, in place of
    /// [`time_to_live`](Self::time_to_live), [`refresh_after`](Self::refresh_after) and
    /// [`grace`](Self::grace). It runs, before any lock, for every insert, compute and
    /// loaded value ([`insert_with_ttl`](AdmissionCache::insert_with_ttl) and
    /// [`insert_with_lifetime`](AdmissionCache::insert_with_lifetime) bring their own).
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use cuckoo_gate::{AdmissionCache, Clock, Lifetime};
    ///
    /// #[derive(Clone)]
    /// struct Object { body: String, max_age: Duration }
    ///
    /// let (clock, hand) = Clock::manual();
    /// let cache: AdmissionCache<u64, Object> = AdmissionCache::builder()
    ///     .capacity(100)
    ///     .expire_after(|_id, object: &Object| Lifetime::ttl(object.max_age))
    ///     .clock(clock)
    ///     .build()?;
    /// let fetch = |id: u64| Object { body: format!("object {id}"), max_age: Duration::from_secs(id) };
    /// cache.get_or_insert_with(&5, || fetch(5));
    /// hand.advance(Duration::from_secs(5));
    /// assert!(cache.get(&5).is_none(), "its own max-age of 5 s has passed");
    /// # Ok::<(), cuckoo_gate::BuildError>(())
    /// ```
    pub fn expire_after(mut self, lifetime: impl Fn(&K, &V) -> Lifetime + Send + Sync + 'static) -> Self {
        self.expire_after = Some(Arc::new(lifetime));
        self
    }

    /// Where reloads of stale entries run for the refreshing loaders, and for them only:
    /// [`try_get_or_refresh_async`](AdmissionCache::try_get_or_refresh_async) and
    /// [`try_get_or_refresh_with`](AdmissionCache::try_get_or_refresh_with), which take the
    /// cache in an `Arc` so that a reload can outlive the call. The other loaders
    /// (`get_or_insert_with`, `try_get_or_insert_with` and their `async` forms) reload a
    /// stale entry on the caller that finds it, spawner or not. `spawn` gets
    /// each reload as a [`Reload`], a `Send + 'static` future, to run on the caller's
    /// runtime or threads, and no caller waits for it. Without one, the caller that finds
    /// an entry stale runs its reload itself. The library needs no particular runtime.
    ///
    /// # Examples
    ///
    /// ```
    /// use cuckoo_gate::AdmissionCache;
    ///
    /// # let runtime = tokio::runtime::Builder::new_multi_thread().enable_time().build().unwrap();
    /// # let _guard = runtime.enter();
    /// let cache: AdmissionCache<u64, String> = AdmissionCache::builder()
    ///     .capacity(100)
    ///     .spawner(|reload| drop(tokio::spawn(reload))) // a tokio service
    ///     .build()?;
    /// let threads: AdmissionCache<u64, String> = AdmissionCache::builder()
    ///     .capacity(100)
    ///     .spawner(|reload| drop(std::thread::spawn(|| reload.run()))) // a service on threads
    ///     .build()?;
    /// # Ok::<(), cuckoo_gate::BuildError>(())
    /// ```
    pub fn spawner(mut self, spawn: impl Fn(Reload) + Send + Sync + 'static) -> Self {
        self.spawner = Some(Arc::new(spawn));
        self
    }

    /// Keeps a failed load's error this long for its key (negative caching, as nginx's
    /// `proxy_cache_valid` for errors): a fallible loader called for the key within it
    /// gets the error at once, without calling the origin. At most an eighth of the
    /// estimated entries (and at least 64) are kept at a time; [`get`](AdmissionCache::get)
    /// never returns one. A write to the key ends it: an insert (`insert`,
    /// `insert_with_ttl`, `insert_with_lifetime`), a compute through
    /// [`entry`](AdmissionCache::entry), a [`remove`](AdmissionCache::remove); and so do a
    /// [`clear`](AdmissionCache::clear) and a restore (which clears first), for every key.
    /// Off by default: a failure is shared by the callers waiting on its load, and the next
    /// caller loads anew.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use cuckoo_gate::{AdmissionCache, Clock};
    ///
    /// let (clock, hand) = Clock::manual();
    /// let cache: AdmissionCache<u64, u64> = AdmissionCache::builder()
    ///     .capacity(100)
    ///     .failure_ttl(Duration::from_secs(5))
    ///     .clock(clock)
    ///     .build()?;
    /// assert_eq!(cache.try_get_or_insert_with(&1, || Err("origin down")), Err("origin down"));
    /// let again = cache.try_get_or_insert_with(&1, || -> Result<u64, &str> { unreachable!("cached") });
    /// assert_eq!(again, Err("origin down"));
    /// hand.advance(Duration::from_secs(5));
    /// assert_eq!(cache.try_get_or_insert_with(&1, || Ok::<_, &str>(10)), Ok(10));
    /// assert_eq!(cache.stats().failures_cached, 1);
    /// # Ok::<(), cuckoo_gate::BuildError>(())
    /// ```
    pub fn failure_ttl(mut self, ttl: Duration) -> Self {
        self.failure_ttl = Some(ttl);
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
    /// sighting, a [`TooHeavy`](super::Admission::TooHeavy) value) never entered, and are not
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
    /// assert_eq!(recorder.snapshotter().snapshot().into_vec().len(), 28); // the cache's series
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
    /// [`BuildError::ZeroCapacity`] for a zero capacity, [`BuildError::ZeroSetting`] for a
    /// zero [`estimated_entries`](Self::estimated_entries) or (under a policy with a gate or
    /// ghosts) [`gate_capacity`](Self::gate_capacity), [`BuildError::MetricsNameTaken`] for
    /// a `metrics_name` a live cache publishes under, [`BuildError::InvalidShards`] for
    /// zero shards, more shards than the capacity or more than [`MAX_SHARDS`], and
    /// [`BuildError::AdmissionTooLarge`] for a gate or ghosts too large to allocate.
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
        let capacity = self.capacity;
        let entries = match (&self.weigher, self.estimated_entries) {
            (_, Some(0)) => return Err(BuildError::ZeroSetting { setting: "estimated_entries" }),
            (_, Some(entries)) => entries,
            (None, None) => usize::try_from(capacity).unwrap_or(usize::MAX),
            (Some(_), None) => (capacity / ASSUMED_MEAN_WEIGHT).clamp(1, MAX_ASSUMED_ENTRIES) as usize,
        };
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        let most_shards = usize::try_from(capacity).unwrap_or(usize::MAX).min(MAX_SHARDS);
        let shards = self.shards.unwrap_or_else(|| {
            let most = (entries / MIN_SHARD_ENTRIES).min(most_shards);
            let most = if self.weigher.is_some() { most.min(WEIGHTED_SHARDS) } else { most };
            cores.saturating_mul(SHARDS_PER_CORE).min(most).max(1)
        });
        if shards == 0 || shards > most_shards {
            return Err(BuildError::InvalidShards { shards, capacity });
        }
        // Which setting sized the gate or the ghosts, for an error that names it.
        let (gate_capacity, setting) = match (self.policy, self.gate_capacity) {
            (AdmissionPolicy::Always, _) => (1, "gate_capacity"),
            (_, Some(0)) => return Err(BuildError::ZeroSetting { setting: "gate_capacity" }),
            (_, Some(keys)) => (keys, "gate_capacity"),
            (AdmissionPolicy::SecondHit, None) => {
                (entries.saturating_mul(DEFAULT_GATE_MULTIPLIER), sized_by(&self))
            }
            (AdmissionPolicy::S3Fifo | AdmissionPolicy::S3FifoLfu, None) => {
                (policy::default_ghost_capacity(entries), sized_by(&self))
            }
        };
        let too_large = |error: BuildError| match error {
            BuildError::CapacityTooLarge { .. } => BuildError::AdmissionTooLarge { setting, bytes: None },
            BuildError::OutOfMemory { bytes } => {
                BuildError::AdmissionTooLarge { setting, bytes: Some(bytes) }
            }
            other => other,
        };
        let gate = match self.policy {
            AdmissionPolicy::SecondHit => {
                let gate = SeenBefore::builder().capacity(gate_capacity);
                Some(
                    match self.seed {
                        Some(seed) => gate.seed(seed).build(),
                        None => gate.build(),
                    }
                    .map_err(too_large)?,
                )
            }
            _ => None,
        };
        let seed = match &gate {
            Some(gate) => gate.seed(),
            None => self.seed.unwrap_or_else(random_seed),
        };
        let split = match self.policy {
            AdmissionPolicy::S3Fifo | AdmissionPolicy::S3FifoLfu => Some(Arc::new(
                SharedSplit::new(capacity, entries)
                    .map_err(|_| BuildError::AdmissionTooLarge { setting: sized_by(&self), bytes: None })?,
            )),
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
                    Shard::new(self.policy, share(capacity), entries, ghosts, split.clone(), weighted)
                        .map_err(too_large)?;
                Ok(CachePadded::new(ShardLock::new(shard)))
            })
            .collect::<Result<_, BuildError>>()?;
        let stripes = (2 * cores).next_power_of_two().min(256);
        Ok(AdmissionCache {
            shards,
            gate,
            loads: Loads::new(
                if cfg!(cuckoo_gate_loom) { 1 } else { 4 * stripes },
                stripes,
                self.failure_ttl.map(|ttl| (ticks(ttl), (entries / 8).max(64))),
            ),
            hashing: Hashing::new(seed),
            policy: self.policy,
            capacity,
            weigher: self.weigher,
            misses: Tally::new(stripes),
            expiry: Expiry::new(
                self.clock,
                default_lifetime(self.time_to_live, self.refresh_after, self.grace),
                self.time_to_idle,
                self.expire_after.is_some(),
            ),
            expire_after: self.expire_after,
            spawner: self.spawner,
            persisted: Persisted::default(),
            listener: self.listener,
            #[cfg(feature = "metrics")]
            metrics: self.metrics_name.as_deref().map(metrics::CacheMetrics::new).transpose()?,
        })
    }
}

/// The lifetime of an entry written without one of its own.
fn default_lifetime(ttl: Option<Duration>, fresh: Option<Duration>, grace: Option<Duration>) -> Lifetime {
    let lifetime = ttl.map_or(Lifetime::forever(), Lifetime::ttl);
    let lifetime = fresh.map_or(lifetime, |fresh| lifetime.fresh_for(fresh));
    grace.map_or(lifetime, |grace| lifetime.grace(grace))
}

/// The setting the gate or the ghosts were sized from, when not their own.
fn sized_by<K, V>(builder: &AdmissionCacheBuilder<K, V>) -> &'static str {
    match (builder.estimated_entries, &builder.weigher) {
        (Some(_), _) => "estimated_entries",
        (None, Some(_)) => "capacity (with a weigher and no estimated_entries)",
        (None, None) => "capacity",
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
            refresh_after: None,
            grace: None,
            expire_after: None,
            spawner: None,
            failure_ttl: None,
            clock: Clock::system(),
            listener: None,
            #[cfg(feature = "metrics")]
            metrics_name: None,
        }
    }
}
