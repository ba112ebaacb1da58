//! [`AdmissionCache`]: a concurrent, sharded cache behind a seen-before gate.
//!
//! * `store.rs`: a shard's entries (hash table, slab, queues).
//! * `policy.rs`: the admission and eviction policies.
//! * `bloom.rs`: S3-FIFO's ghost queue, a shard's own two-generation Bloom filter.
//! * `climber.rs`: the hill climber that sets how long the ghosts remember, and the
//!   sketch's credit.
//! * `sketch.rs`: the frequency sketch S3-FIFO consults at main's door (`S3FifoLfu`).
//! * `ghost.rs`: the adaptive split's windows of recent evictions, small cuckoo filters.
//! * `lock.rs`: the shards' reader-writer lock, which also counts their hits.
//! * `shard.rs`: one shard's operations, and what leaves it.
//! * `expiry.rs`: the clock, lifetimes and the column of deadlines.
//! * `listener.rs`: why entries leave, and the listener told of it.
//! * `load.rs`, `loader.rs`: coalesced loading.
//! * `refresh.rs`: reloads of stale entries, and where they run.
//! * `persist.rs`: saving a cache's contents, and restoring them (feature `serde`).
//! * `entry.rs`: the entry API, an atomic read-modify-write of one key.
//! * `collect.rs`: writes that hand what they push out to their caller; tracking without
//!   eviction.
//!
//! Each operation hashes its key once; the hash picks the shard, finds the entry in the
//! shard's table and stands for the key in the gate or the shard's ghosts. Lookups take
//! the shard's read lock (except under LRU), writes its write lock, and what leaves a
//! shard is dropped after the lock is released. Under S3-FIFO the shards share one
//! adaptive split, whose mutex a write takes briefly for a sampled key. A hit is counted
//! by the atomic add that releases the shard's read lock; misses on per-thread stripes.

#[cfg(feature = "metrics")]
mod metrics;
#[cfg(all(feature = "metrics", any(feature = "foyer", feature = "pingora")))]
pub(crate) use self::metrics::AdmissionMetrics;
mod bloom;
mod builder;
mod climber;
mod collect;
mod entry;
mod expiry;
mod ghost;
mod listener;
mod load;
mod loader;
mod lock;
#[cfg(feature = "serde")]
mod persist;
mod policy;
mod refresh;
mod shard;
mod sketch;
mod store;

use std::borrow::Borrow;
use std::fmt;
use std::hash::Hash;
use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe};
use std::sync::Arc;
use std::time::Duration;

use crossbeam_utils::CachePadded;

pub use self::builder::{AdmissionCacheBuilder, ASSUMED_MEAN_WEIGHT, MAX_ASSUMED_ENTRIES};
pub use self::collect::Tracked;
pub use self::entry::{Computed, Entry, Op};
use self::expiry::{ticks, Expiry, Span};
pub use self::expiry::{Clock, Lifetime, ManualClock};
pub use self::listener::RemovalCause;
use self::listener::{report, Listener};
use self::load::Loads;
use self::lock::ShardLock;
#[cfg(feature = "serde")]
pub use self::persist::{Restored, Saved};
pub use self::policy::AdmissionPolicy;
use self::policy::Removed;
pub use self::refresh::Reload;
use self::shard::{Counters, Leftovers, Looked, Shard, Write};
use crate::broken;
#[cfg(feature = "metrics")]
use crate::gate::GateStats;
use crate::gate::SeenBefore;
use crate::hashing::{Hashing, Keys};
use crate::primitive::{AtomicU64, Ordering, Tally};

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
    /// Requests (`get` and the loading methods) that found their key's entry, fresh or
    /// stale.
    pub hits: u64,
    /// Requests that found no usable entry: each caller of a loading method that missed
    /// counts once, whether it ran the load ([`loads`](Self::loads), the origin's calls),
    /// waited for another caller's ([`loads_coalesced`](Self::loads_coalesced)) or was
    /// given a kept failure ([`failures_cached`](Self::failures_cached)). Compare the
    /// origin's load with `loads`, not with this.
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
    /// Reloads of stale entries started (see
    /// [`refresh_after`](AdmissionCacheBuilder::refresh_after)).
    pub refreshes: u64,
    /// Reloads of stale entries that failed; the old value stayed.
    pub refresh_failures: u64,
    /// Loader calls given a stale value: while a reload ran, or (from a stale entry or one
    /// in grace) in place of an error.
    pub stale_served: u64,
    /// Loader calls given the error of the load they waited for (one origin call for all).
    pub failures_shared: u64,
    /// Loader calls given a kept failure's error at once (see
    /// [`failure_ttl`](AdmissionCacheBuilder::failure_ttl)).
    pub failures_cached: u64,
    /// Failed loads kept now (a gauge).
    pub failures_kept: u64,
    /// Entries restored (see `AdmissionCache::restore`, feature `serde`).
    pub restored_entries: u64,
    /// Entries a restore dropped because their lifetime ended while the cache was down
    /// (told to the listener as expired).
    pub restore_expired: u64,
    /// Entries a restore did not keep: evicted to make room, or too heavy for their shard
    /// (told to the listener as evicted).
    pub restore_dropped: u64,
    /// Bytes written by saves.
    pub saved_bytes: u64,
    /// Bytes read by restores.
    pub restored_bytes: u64,
    /// How long the last save took.
    pub last_save: Duration,
    /// How long the last restore took.
    pub last_restore: Duration,
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
    /// The hasher every key goes by (a restore may adopt the saved cache's).
    hashing: Hashing,
    policy: AdmissionPolicy,
    capacity: u64,
    weigher: Option<Weigher<K, V>>,
    /// Misses of the loaders (each shard's lock counts its hits, and the misses of `get`).
    misses: Tally<1>,
    /// Loads in flight.
    loads: Loads<K, V>,
    expiry: Expiry,
    listener: Option<Listener<K, V>>,
    /// Each value's own lifetime, if the builder gave a closure for it.
    expire_after: Option<ExpireAfter<K, V>>,
    /// Where reloads of stale entries run, if the builder gave a spawner.
    spawner: Option<Spawner>,
    /// What saves and restores did, for the metrics.
    persisted: Persisted,
    #[cfg(feature = "metrics")]
    metrics: Option<metrics::CacheMetrics>,
}

type Weigher<K, V> = Arc<dyn Fn(&K, &V) -> u32 + Send + Sync>;

type ExpireAfter<K, V> = Arc<dyn Fn(&K, &V) -> Lifetime + Send + Sync>;

type Spawner = Arc<dyn Fn(Reload) + Send + Sync>;

/// What a cache's saves and restores did (feature `serde`; zeros without it).
#[derive(Debug, Default)]
pub(crate) struct Persisted {
    saved_bytes: AtomicU64,
    restored_bytes: AtomicU64,
    restored_entries: AtomicU64,
    restore_expired: AtomicU64,
    restore_dropped: AtomicU64,
    last_save_nanos: AtomicU64,
    last_restore_nanos: AtomicU64,
}

/// A shard behind its lock, alone on its cache lines.
type ShardSlot<K, V> = CachePadded<ShardLock<Shard<K, V>>>;

impl<K: Hash + Eq, V: Clone> AdmissionCache<K, V> {
    #[inline]
    #[allow(unsafe_code)]
    fn shard(&self, hash: u64) -> &ShardLock<Shard<K, V>> {
        // The low half picks the shard: the table inside uses the top bits for its tags.
        let index = ((hash & 0xFFFF_FFFF) * self.shards.len() as u64) >> 32;
        debug_assert!((index as usize) < self.shards.len());
        // SAFETY: `index` is `h * n / 2^32` for `h < 2^32` and `n` the shard count (at
        // least 1, at most `MAX_SHARDS`, so the product fits in 64 bits): below `n`. The
        // bounds check it saves is two instructions on every call.
        unsafe { self.shards.get_unchecked(index as usize) }
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
    pub fn get<Q>(&self, key: &Q) -> Option<V>
    where
        K: Borrow<Q>,
        Q: ?Sized + Hash + Eq,
    {
        self.get_hashed(self.hashing.hash(key), key)
    }

    /// [`get`](Self::get) of a key whose hash is known. An expired entry is a miss.
    #[inline(always)]
    fn get_hashed<Q>(&self, hash: u64, key: &Q) -> Option<V>
    where
        K: Borrow<Q>,
        Q: ?Sized + Eq,
    {
        let shard = self.shard(hash);
        match self.policy {
            AdmissionPolicy::Always => {
                let mut held = shard.write();
                let found = held.get_mut(hash, key);
                match found {
                    Some(_) => held.count_hit(),
                    None => held.count_miss(),
                }
                found
            }
            _ => {
                let held = shard.read();
                let found = held.get(hash, key);
                // A hit or a miss is counted as the hold is released (a panic in user code
                // above releases it uncounted).
                let drain = match found {
                    Some(_) => held.release_hit(),
                    None => held.release_miss(),
                };
                if drain {
                    shard.drain_hits();
                }
                found
            }
        }
    }

    /// A loader's look at `key` (of `hash`): [`get`](Self::get), and whether a hit is
    /// stale. A fresh hit goes to `fresh`, anything else to `other`: each way out tests
    /// what was found once.
    #[inline(always)]
    fn look<Q, R>(
        &self,
        hash: u64,
        key: &Q,
        fresh: impl FnOnce(V) -> R,
        other: impl FnOnce(Looked<V>) -> R,
    ) -> R
    where
        K: Borrow<Q>,
        Q: ?Sized + Eq,
    {
        // As `get_hashed`, with the loader's lookups.
        let shard = self.shard(hash);
        let found = match self.policy {
            AdmissionPolicy::Always => {
                let mut held = shard.write();
                let found = held.look_mut(hash, key);
                if found.is_hit() {
                    held.count_hit();
                }
                found
            }
            _ => {
                let held = shard.read();
                match held.look(hash, key) {
                    Looked::Fresh(value) => {
                        if held.release_hit() {
                            shard.drain_hits();
                        }
                        return fresh(value);
                    }
                    Looked::Miss => Looked::Miss,
                    stale => {
                        if held.release_hit() {
                            shard.drain_hits();
                        }
                        stale
                    }
                }
            }
        };
        match found {
            Looked::Fresh(value) => fresh(value),
            Looked::Miss => {
                self.misses.add(0);
                other(Looked::Miss)
            }
            stale => other(stale),
        }
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
        self.write(key, value, Some(Span { ttl: ticks(ttl), ..self.expiry.default }))
    }

    /// [`insert`](Self::insert), with a [`Lifetime`] of the entry's own (its time to live,
    /// freshness and grace: an HTTP response's `Cache-Control`, say) in place of the
    /// cache's; any cache takes it.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use cuckoo_gate::{AdmissionCache, Clock, Lifetime};
    ///
    /// let (clock, hand) = Clock::manual();
    /// let cache: AdmissionCache<&str, &str> = AdmissionCache::builder().capacity(100).clock(clock).build()?;
    /// let lifetime = Lifetime::ttl(Duration::from_secs(60)).grace(Duration::from_secs(600));
    /// let _ = cache.insert_with_lifetime("/news", "<html>", lifetime);
    /// hand.advance(Duration::from_secs(60));
    /// assert_eq!(cache.get(&"/news"), None); // expired, kept in grace for loaders
    /// assert_eq!(cache.try_get_or_insert_with(&"/news", || Err("down")), Ok("<html>"));
    /// # Ok::<(), cuckoo_gate::BuildError>(())
    /// ```
    #[must_use = "the policy may not store the entry: see `Admission`"]
    pub fn insert_with_lifetime(&self, key: K, value: V, lifetime: Lifetime) -> Admission {
        self.expiry.start();
        self.write(key, value, Some(lifetime.span()))
    }

    /// An insert, with `span` if given (else the entry's own from `expire_after`, or the
    /// cache's).
    #[inline(always)]
    fn write(&self, key: K, value: V, span: Option<Span>) -> Admission {
        let mut leftovers = self.leftovers();
        let admission = self.write_into(key, value, span, &mut leftovers);
        self.report(leftovers);
        admission
    }

    /// [`write`](Self::write), leaving what it removes (and the entry, if not kept) in
    /// `out`. A write hashed by a hasher that a restore replaced meanwhile hashes again
    /// (see `hashing.rs`).
    #[inline(always)]
    fn write_into(&self, key: K, value: V, span: Option<Span>, out: &mut Leftovers<K, V>) -> Admission {
        let keys = self.hashing.keys();
        let hash = keys.hash(&key);
        if self.loads.keeps_failures() {
            self.loads.end_failure(hash, &key);
        }
        let mut write = self.write_of(keys, hash, &key, &value, span);
        let mut held = self.shard(hash).write();
        while !self.hashing.is_current(write.keys) && !broken::UNCHECKED_HASHER {
            drop(held);
            write.keys = self.hashing.keys();
            write.hash = write.keys.hash(&key);
            held = self.shard(write.hash).write();
        }
        // `K::eq` runs while the entry is this call's: if it panics, the lock is released
        // (`held` goes first) before the entry is dropped.
        let found = held.find(write.hash, &key);
        let hits = held.hits();
        held.insert(&write, found, key, value, hits, out)
    }

    /// What a user's write of `key` (of `hash`, by `keys`) and `value` stores, with `span`
    /// if given (else the entry's own from `expire_after`, or the cache's).
    #[inline(always)]
    fn write_of<'a>(
        &'a self,
        keys: &'a Keys,
        hash: u64,
        key: &K,
        value: &V,
        span: Option<Span>,
    ) -> Write<'a> {
        Write {
            hash,
            weight: self.weigh(key, value),
            span: span.or_else(|| self.span_of(key, value)),
            gate: self.gate.as_ref(),
            expiry: &self.expiry,
            load: None,
            keys,
        }
    }

    /// A load's store of the entry in `out.unkept`: [`Shard::insert`] under the key's
    /// shard's write lock, with the hits that lock has counted (S3-FIFO's climber measures
    /// the hit ratio by them); dropped if a restore replaced the hasher its hash is by
    /// (see `hashing.rs`).
    #[inline(always)]
    fn insert_loaded(&self, write: &Write<'_>, out: &mut Leftovers<K, V>) -> Admission {
        let mut held = self.shard(write.hash).write();
        if !self.hashing.is_current(write.keys) && !broken::UNCHECKED_HASHER {
            return Admission::Rejected;
        }
        // The entry waits in `out` while `K::eq` runs: if it panics, the entry is dropped
        // with `out`, after the lock is released.
        let found = out.unkept.as_ref().and_then(|(offered, _)| held.find(write.hash, offered));
        let Some((key, value)) = out.unkept.take() else {
            return Admission::Rejected;
        };
        let hits = held.hits();
        held.insert(write, found, key, value, hits, out)
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

    /// The lifetime the builder's `expire_after` closure gives an entry, if it gave one.
    #[inline]
    fn span_of(&self, key: &K, value: &V) -> Option<Span> {
        self.expire_after.as_ref().map(|lifetime| lifetime(key, value).span())
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
    pub fn peek<Q>(&self, key: &Q) -> Option<V>
    where
        K: Borrow<Q>,
        Q: ?Sized + Hash + Eq,
    {
        let hash = self.hashing.hash(key);
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
    pub fn contains_key<Q>(&self, key: &Q) -> bool
    where
        K: Borrow<Q>,
        Q: ?Sized + Hash + Eq,
    {
        let hash = self.hashing.hash(key);
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
    pub fn remove<Q>(&self, key: &Q) -> Option<V>
    where
        K: Borrow<Q>,
        Q: ?Sized + Hash + Eq,
    {
        let hash = self.hashing.hash(key);
        if self.loads.keeps_failures() {
            self.loads.end_failure(hash, key);
        }
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
    /// [`remove`](Self::remove)), and kept failures end (see
    /// [`failure_ttl`](AdmissionCacheBuilder::failure_ttl)). Counters keep counting: a
    /// clear is not a new cache.
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
        self.loads.end_failures();
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

    /// The number of shards: each holds an equal share of the capacity (see
    /// [`AdmissionCacheBuilder::shards`]).
    ///
    /// # Examples
    ///
    /// ```
    /// use cuckoo_gate::AdmissionCache;
    ///
    /// let cache: AdmissionCache<u64, u64> = AdmissionCache::builder().capacity(1_000).shards(4).build()?;
    /// assert_eq!((cache.shards(), cache.max_weight()), (4, 250));
    /// # Ok::<(), cuckoo_gate::BuildError>(())
    /// ```
    pub fn shards(&self) -> usize {
        self.shards.len()
    }

    /// The most an entry may weigh: the capacity of the smallest shard (the capacity
    /// divided by the shard count, rounded down). A heavier entry is not stored
    /// ([`Admission::TooHeavy`]). Without a weigher every entry weighs 1.
    ///
    /// # Examples
    ///
    /// ```
    /// use cuckoo_gate::{Admission, AdmissionCache};
    ///
    /// let cache: AdmissionCache<u64, Vec<u8>> =
    ///     AdmissionCache::builder().capacity(1 << 20).weigher(|_, value: &Vec<u8>| value.len() as u32).build()?;
    /// let most = cache.max_weight() as usize;
    /// assert_eq!(cache.insert(1, vec![0; most]), Admission::Admitted);
    /// assert_eq!(cache.insert(2, vec![0; most + 1]), Admission::TooHeavy);
    /// # Ok::<(), cuckoo_gate::BuildError>(())
    /// ```
    pub fn max_weight(&self) -> u64 {
        self.capacity / self.shards.len() as u64
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
            load_failures: loads.counts.sum(load::FAILED) + loads.counts.sum(load::REFRESH_FAILED),
            loads_waiting: loads.waiting.load(Ordering::Relaxed),
            refreshes: loads.counts.sum(load::REFRESHED),
            refresh_failures: loads.counts.sum(load::REFRESH_FAILED),
            stale_served: loads.counts.sum(load::STALE_SERVED),
            failures_shared: loads.counts.sum(load::FAILURES_SHARED),
            failures_cached: loads.counts.sum(load::FAILURES_CACHED),
            failures_kept: loads.kept.load(Ordering::Relaxed),
            restored_entries: self.persisted.restored_entries.load(Ordering::Relaxed),
            restore_expired: self.persisted.restore_expired.load(Ordering::Relaxed),
            restore_dropped: self.persisted.restore_dropped.load(Ordering::Relaxed),
            saved_bytes: self.persisted.saved_bytes.load(Ordering::Relaxed),
            restored_bytes: self.persisted.restored_bytes.load(Ordering::Relaxed),
            last_save: Duration::from_nanos(self.persisted.last_save_nanos.load(Ordering::Relaxed)),
            last_restore: Duration::from_nanos(self.persisted.last_restore_nanos.load(Ordering::Relaxed)),
            ..CacheStats::default()
        };
        let mut entries = 0;
        for shard in self.shards.iter() {
            let shard = shard.read();
            total.hits += shard.hits();
            total.misses += shard.misses();
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

#[cfg(test)]
mod tests {
    use super::AdmissionCache;

    /// `shard` indexes without a bounds check: every hash, the extremes of its low half
    /// included, lands on the shard that checked indexing names (Miri runs this too).
    #[test]
    fn every_hash_picks_one_of_the_shards() {
        for shards in [1, 2, 3, 7, 64] {
            let cache = AdmissionCache::<u64, u64>::builder().capacity(1_000).shards(shards).build().unwrap();
            let hashes = [0, 1, 0xFFFF_FFFF, 0x8000_0000, u64::MAX, u64::MAX << 32, 0x1234_5678_9ABC_DEF0];
            for hash in hashes {
                let index = (((hash & 0xFFFF_FFFF) * shards as u64) >> 32) as usize;
                assert!(
                    std::ptr::eq(cache.shard(hash), &*cache.shards[index]),
                    "{shards} shards, hash {hash:#x}"
                );
            }
        }
    }
}
