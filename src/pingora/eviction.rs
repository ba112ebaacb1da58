//! [`S3FifoManager`]: this crate's cache, keys and sizes only, as Pingora's eviction
//! manager.

use std::fmt;
use std::fs::{self, File};
use std::io::{BufReader, BufWriter};
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::SystemTime;

use async_trait::async_trait;
use pingora_cache::eviction::{CacheEntryKey, CacheEntryKeyRef, EvictionManager};
use pingora_error::{Error, ErrorType};

use super::key::Identity;
use crate::primitive::{AtomicU64, Ordering};
use crate::{Admission, AdmissionCache, AdmissionPolicy, BuildError, CacheStats, Op, RemovalCause, Tracked};

/// The file [`S3FifoManager`] saves to, in the directory Pingora names.
pub const SAVE_FILE: &str = "cuckoo_gate_s3fifo.data";

/// Pingora's [`EvictionManager`] on this crate's [`AdmissionCache`] under S3-FIFO (or,
/// when built so, behind the seen-before gate): it tracks each entry Pingora's storage
/// holds by its full identity (key and entry id) and its size in bytes, and tells Pingora
/// which entries to purge.
///
/// * [`admit`](EvictionManager::admit) stores the entry (a present one takes its new
///   size, as a request) and returns exactly the entries that this call evicted to keep
///   the total within the limit: they are gathered under the shard's lock and handed to
///   this caller only (see [`AdmissionCache::insert_collecting`]), so of threads
///   admitting at once none loses an eviction and none is told of another's. An entry
///   the manager does not keep is returned too, for Pingora to purge: heavier than a
///   shard holds (the limit over the shard count, at least an eighth of the limit by
///   default; see [`Admission::TooHeavy`]), heavier than 4 GiB (weights are `u32`), or a
///   first sighting under the gate.
/// * [`increment_weight`](EvictionManager::increment_weight) is one atomic
///   read-modify-write of the entry's size under its shard's lock (see
///   [`Entry::and_compute_collecting`](crate::Entry::and_compute_collecting)), capped by
///   `max_weight` (a size already past it is left as it is), floored to 1 for a new
///   entry.
/// * [`access`](EvictionManager::access) counts a request on a tracked entry, or tracks
///   an untracked one with no eviction (see [`AdmissionCache::track`]): the next write
///   to its shard evicts down to the limit.
/// * [`remove`](EvictionManager::remove) and [`peek`](EvictionManager::peek) match the
///   exact identity: a key-only identity never matches an identified entry.
/// * [`save`](EvictionManager::save) and [`load`](EvictionManager::load) go through
///   [`AdmissionCache::save`] and [`AdmissionCache::restore`] to [`SAVE_FILE`] in
///   Pingora's directory, blocking the calling thread for the file's I/O. Every entry
///   saved is restored, or named: the entries a load could not keep (evicted to make room
///   in a smaller manager, or one whose shards split the keys otherwise) are handed out
///   once, by [`take_unkept`](Self::take_unkept), or else with the next `admit` or
///   `increment_weight`, so that Pingora purges them rather than keep them in storage
///   untracked. So are entries [`access`](EvictionManager::access) could not track. A
///   load of a damaged file fails and leaves the manager empty (the entries it held
///   before are named; the file's are not known). No saved file: nothing is loaded.
///
/// Each call takes one shard's write lock (`peek` its read lock), briefly, and runs no
/// user code under it.
///
/// # Examples
///
/// ```
/// use std::sync::LazyLock;
/// use std::time::SystemTime;
/// use cuckoo_gate::pingora::S3FifoManager;
/// use pingora_cache::eviction::{CacheEntryKey, EvictionManager};
/// use pingora_cache::CacheKey;
///
/// // 1 GiB of objects of about 64 KiB.
/// static EVICTION: LazyLock<S3FifoManager> =
///     LazyLock::new(|| S3FifoManager::builder(1 << 30).estimated_entries(16_384).build().expect("a manager"));
///
/// // session.cache.enable(storage, Some(&*EVICTION), predictor, lock, None);
/// let manager: &'static dyn EvictionManager = &*EVICTION;
/// let entry = CacheEntryKey::key_only(CacheKey::new("/a", "").to_compact());
/// assert!(manager.admit(entry.clone(), 70_000, SystemTime::now()).is_empty());
/// assert!(manager.peek(&entry));
/// assert_eq!(manager.total_size(), 70_000);
/// ```
pub struct S3FifoManager {
    cache: AdmissionCache<Identity, usize>,
    /// What the cache's listener hears: the entries a restore lets go.
    let_go: Arc<Mutex<Vec<Identity>>>,
    /// Entries to hand to Pingora to purge with the next admit (a load's, an access's).
    unkept: Mutex<Vec<CacheEntryKey>>,
    evicted_items: AtomicU64,
    evicted_bytes: AtomicU64,
}

/// Configures an [`S3FifoManager`]; made by [`S3FifoManager::builder`].
#[must_use]
#[derive(Clone, Debug)]
pub struct S3FifoManagerBuilder {
    limit: usize,
    entries: Option<usize>,
    shards: Option<usize>,
    seed: Option<u64>,
    gate: bool,
    #[cfg(feature = "metrics")]
    metrics_name: Option<String>,
}

impl S3FifoManagerBuilder {
    /// About how many entries the manager will hold (the limit over the mean object
    /// size): sizes S3-FIFO's ghosts and the default shard count. Without it, objects
    /// are assumed to weigh [`ASSUMED_MEAN_WEIGHT`](crate::ASSUMED_MEAN_WEIGHT) bytes.
    pub fn estimated_entries(mut self, entries: usize) -> Self {
        self.entries = Some(entries);
        self
    }

    /// The shard count (see [`AdmissionCacheBuilder::shards`](crate::AdmissionCacheBuilder::shards)):
    /// more shards, less contention, and a lower size past which an object is not kept
    /// (the limit over the shard count).
    pub fn shards(mut self, shards: usize) -> Self {
        self.shards = Some(shards);
        self
    }

    /// The hash seed (see [`AdmissionCacheBuilder::seed`](crate::AdmissionCacheBuilder::seed)).
    pub fn seed(mut self, seed: u64) -> Self {
        self.seed = Some(seed);
        self
    }

    /// Puts the seen-before gate in front of S3-FIFO
    /// ([`AdmissionPolicy::SecondHit`]): an entry admitted the first time its key is seen
    /// is returned at once, for Pingora to purge. Prefer [`SecondRequest`](super::SecondRequest)
    /// as Pingora's admission policy, which keeps a first sighting from being written at
    /// all; this is for storage that cannot take an admission policy.
    pub fn second_hit(mut self) -> Self {
        self.gate = true;
        self
    }

    /// Publishes the cache's metrics under `name` (see
    /// [`AdmissionCacheBuilder::metrics_name`](crate::AdmissionCacheBuilder::metrics_name)),
    /// each time [`S3FifoManager::publish_metrics`] is called.
    #[cfg(feature = "metrics")]
    pub fn metrics_name(mut self, name: impl Into<String>) -> Self {
        self.metrics_name = Some(name.into());
        self
    }

    /// The manager.
    ///
    /// # Errors
    ///
    /// The [`BuildError`] of the cache's builder: a limit of 0, a shard count out of
    /// range, a metrics name taken.
    pub fn build(self) -> Result<S3FifoManager, BuildError> {
        let let_go: Arc<Mutex<Vec<Identity>>> = Arc::default();
        let heard = let_go.clone();
        let policy = if self.gate { AdmissionPolicy::SecondHit } else { AdmissionPolicy::S3Fifo };
        let mut builder = AdmissionCache::builder()
            .capacity(self.limit as u64)
            .admission(policy)
            .weigher(|_, size: &usize| u32::try_from(*size).unwrap_or(u32::MAX))
            .eviction_listener(move |identity, _, cause| {
                // Outside a restore no call leaves these to the listener: the manager's
                // writes collect theirs, and a remove is a `Removed`.
                if matches!(cause, RemovalCause::Evicted | RemovalCause::Expired | RemovalCause::Cleared) {
                    heard.lock().unwrap_or_else(|e| e.into_inner()).push(identity);
                }
            });
        if let Some(entries) = self.entries {
            builder = builder.estimated_entries(entries);
        }
        if let Some(shards) = self.shards {
            builder = builder.shards(shards);
        }
        if let Some(seed) = self.seed {
            builder = builder.seed(seed);
        }
        #[cfg(feature = "metrics")]
        if let Some(name) = self.metrics_name {
            builder = builder.metrics_name(name);
        }
        Ok(S3FifoManager {
            cache: builder.build()?,
            let_go,
            unkept: Mutex::default(),
            evicted_items: AtomicU64::new(0),
            evicted_bytes: AtomicU64::new(0),
        })
    }
}

impl S3FifoManager {
    /// A builder for a manager holding at most `limit` bytes.
    ///
    /// # Examples
    ///
    /// ```
    /// use cuckoo_gate::pingora::S3FifoManager;
    ///
    /// let manager = S3FifoManager::builder(64 << 20).estimated_entries(4_096).shards(4).build()?;
    /// assert_eq!(manager.limit(), 64 << 20);
    /// # Ok::<(), cuckoo_gate::BuildError>(())
    /// ```
    pub fn builder(limit: usize) -> S3FifoManagerBuilder {
        S3FifoManagerBuilder {
            limit,
            entries: None,
            shards: None,
            seed: None,
            gate: false,
            #[cfg(feature = "metrics")]
            metrics_name: None,
        }
    }

    /// The most bytes the manager holds.
    pub fn limit(&self) -> usize {
        usize::try_from(self.cache.capacity()).unwrap_or(usize::MAX)
    }

    /// The largest object the manager keeps, in bytes: a shard's part of the limit.
    pub fn max_object_size(&self) -> usize {
        usize::try_from(self.cache.max_weight()).unwrap_or(usize::MAX)
    }

    /// The cache's counters (its hits are `access`es of tracked entries).
    pub fn stats(&self) -> CacheStats {
        self.cache.stats()
    }

    /// Publishes the cache's metrics, if the builder named them.
    #[cfg(feature = "metrics")]
    pub fn publish_metrics(&self) {
        self.cache.publish_metrics();
    }

    /// The entries the last [`load`](EvictionManager::load) could not keep, and those an
    /// [`access`](EvictionManager::access) could not track, not yet handed out: each is
    /// in Pingora's storage and tracked by no one, so purge it. Each is handed out once,
    /// here or with the next `admit` or `increment_weight`.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::SystemTime;
    /// use cuckoo_gate::pingora::S3FifoManager;
    /// use pingora_cache::eviction::{CacheEntryKey, EvictionManager};
    /// use pingora_cache::CacheKey;
    ///
    /// let manager = S3FifoManager::builder(1_000).shards(1).build()?;
    /// let huge = CacheEntryKey::key_only(CacheKey::new("/huge", "").to_compact());
    /// assert!(!manager.access(&huge, 5_000, SystemTime::now())); // too heavy to track
    /// assert_eq!(manager.take_unkept(), [huge]);
    /// assert!(manager.take_unkept().is_empty());
    /// # Ok::<(), cuckoo_gate::BuildError>(())
    /// ```
    pub fn take_unkept(&self) -> Vec<CacheEntryKey> {
        std::mem::take(&mut *self.unkept.lock().unwrap_or_else(|e| e.into_inner()))
    }

    /// Adds what is waiting to be handed out to `evicted`.
    #[inline]
    fn with_unkept(&self, mut evicted: Vec<CacheEntryKey>) -> Vec<CacheEntryKey> {
        // A lock per admit, uncontended but at startup: a flag in front would save little.
        let mut unkept = self.unkept.lock().unwrap_or_else(|e| e.into_inner());
        if !unkept.is_empty() {
            evicted.append(&mut unkept);
        }
        evicted
    }

    /// Counts what a write removed and turns it into the entries Pingora purges.
    fn evicted(&self, removed: Vec<(Identity, usize, RemovalCause)>, out: &mut Vec<CacheEntryKey>) {
        for (identity, size, cause) in removed {
            // A replaced size is the same entry, still tracked.
            if matches!(cause, RemovalCause::Evicted | RemovalCause::Expired) {
                self.count_evicted(size);
                out.push(identity.into());
            }
        }
    }

    fn count_evicted(&self, size: usize) {
        self.evicted_items.fetch_add(1, Ordering::Relaxed);
        self.evicted_bytes.fetch_add(size as u64, Ordering::Relaxed);
    }

    fn save_to(&self, dir: &str) -> std::io::Result<()> {
        fs::create_dir_all(dir)?;
        let path = Path::new(dir).join(SAVE_FILE);
        let partial = Path::new(dir).join(format!("{SAVE_FILE}.partial"));
        let mut writer = BufWriter::new(File::create(&partial)?);
        self.cache.save(&mut writer)?;
        let file = writer.into_inner().map_err(|e| e.into_error())?;
        file.sync_all()?;
        fs::rename(&partial, &path)
    }

    fn load_from(&self, dir: &str) -> Result<(), Box<Error>> {
        let path = Path::new(dir).join(SAVE_FILE);
        let file = match File::open(&path) {
            Ok(file) => file,
            // Nothing saved: nothing to restore, as Pingora's own managers.
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
            Err(e) => {
                return Err(Error::because(
                    ErrorType::InternalError,
                    "opening the eviction manager's save",
                    e,
                ))
            }
        };
        self.let_go.lock().unwrap_or_else(|e| e.into_inner()).clear();
        let restored = self.cache.restore(&mut BufReader::new(file));
        let let_go = std::mem::take(&mut *self.let_go.lock().unwrap_or_else(|e| e.into_inner()));
        // An entry let go and then restored (a duplicate, or one held before the load) is
        // tracked: only the others are Pingora's to purge.
        let named = let_go.into_iter().filter(|identity| !self.cache.contains_key(identity));
        self.unkept.lock().unwrap_or_else(|e| e.into_inner()).extend(named.map(CacheEntryKey::from));
        restored
            .map(drop)
            .map_err(|e| Error::because(ErrorType::InternalError, "restoring the eviction manager", e))
    }
}

#[async_trait]
impl EvictionManager for S3FifoManager {
    fn total_size(&self) -> usize {
        usize::try_from(self.cache.weight()).unwrap_or(usize::MAX)
    }

    fn total_items(&self) -> usize {
        self.cache.len()
    }

    fn evicted_size(&self) -> usize {
        self.evicted_bytes.load(Ordering::Relaxed) as usize
    }

    fn evicted_items(&self) -> usize {
        self.evicted_items.load(Ordering::Relaxed) as usize
    }

    fn admit(&self, item: CacheEntryKey, size: usize, _fresh_until: SystemTime) -> Vec<CacheEntryKey> {
        let mut evicted = Vec::new();
        let identity = Identity::from(&item);
        if u32::try_from(size).is_err() {
            // Weights are u32: an object past 4 GiB is not tracked (nor its old size).
            let _ = self.cache.remove(&identity);
            self.count_evicted(size);
            evicted.push(item);
            return self.with_unkept(evicted);
        }
        let mut removed = Vec::new();
        let admission = self.cache.insert_collecting(identity, size, &mut removed);
        self.evicted(removed, &mut evicted);
        match admission {
            Admission::Admitted | Admission::Updated => {}
            // Not kept (a first sighting under the gate, or heavier than a shard): the
            // storage holds it, so Pingora purges it.
            _ => {
                self.count_evicted(size);
                evicted.push(item);
            }
        }
        self.with_unkept(evicted)
    }

    fn increment_weight(
        &self,
        item: &CacheEntryKey,
        delta: usize,
        max_weight: Option<usize>,
    ) -> Vec<CacheEntryKey> {
        let identity = Identity::from(item);
        let mut removed = Vec::new();
        let mut grown = 0;
        let computed = self.cache.entry(&identity).and_compute_collecting(
            |size| {
                let new = match (size, max_weight) {
                    // The hint does not shrink an entry already past it.
                    (Some(&size), Some(max)) if size >= max => return Op::Keep,
                    (Some(&size), max) => {
                        max.map_or(size.saturating_add(delta), |max| size.saturating_add(delta).min(max))
                    }
                    (None, max) => max.map_or(delta, |max| delta.min(max)).max(1),
                };
                grown = new;
                Op::Put(new)
            },
            &mut removed,
        );
        let mut evicted = Vec::new();
        self.evicted(removed, &mut evicted);
        if computed == crate::Computed::TooHeavy || u32::try_from(grown).is_err() {
            // Grown past a shard (or 4 GiB): no longer tracked, so purged.
            if u32::try_from(grown).is_err() {
                let _ = self.cache.remove(&identity);
            }
            self.count_evicted(grown);
            evicted.push(item.clone());
        }
        self.with_unkept(evicted)
    }

    fn remove(&self, item: CacheEntryKeyRef<'_>) {
        let _ = self.cache.remove(&Identity::from(item));
    }

    fn access(&self, item: &CacheEntryKey, size: usize, _fresh_until: SystemTime) -> bool {
        let tracked = match u32::try_from(size) {
            Ok(_) => self.cache.track(Identity::from(item), size),
            Err(_) => Tracked::TooHeavy,
        };
        match tracked {
            Tracked::Held => true,
            Tracked::Stored => false,
            _ => {
                // In storage but too heavy to track: handed out to be purged.
                self.unkept.lock().unwrap_or_else(|e| e.into_inner()).push(item.clone());
                false
            }
        }
    }

    fn peek(&self, item: &CacheEntryKey) -> bool {
        self.cache.contains_key(&Identity::from(item))
    }

    async fn save(&self, dir_path: &str) -> pingora_error::Result<()> {
        self.save_to(dir_path)
            .map_err(|e| Error::because(ErrorType::InternalError, "saving the eviction manager", e))
    }

    async fn load(&self, dir_path: &str) -> pingora_error::Result<()> {
        self.load_from(dir_path)
    }
}

impl fmt::Debug for S3FifoManager {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("S3FifoManager").field("cache", &self.cache).finish_non_exhaustive()
    }
}
