//! [`SecondRequest`]: the seen-before gate as Pingora's admission policy.

use std::fmt;
use std::io::{self, Read, Write};
use std::num::NonZeroU64;
use std::sync::Arc;

use pingora_cache::admission::{AdmissionPolicy as PingoraAdmission, Decision};
use pingora_cache::key::{CacheHashKey, HashBinary};
use pingora_cache::CacheKey;

#[cfg(feature = "metrics")]
use crate::cache::AdmissionMetrics;
use crate::primitive::{AtomicU64, Ordering};
use crate::sightings::Sightings;
use crate::{SeenBefore, SnapshotError};

/// Pingora's admission policy on a [`SeenBefore`] gate: a storage miss on a key the gate
/// has not seen is served from the origin and not written
/// ([`Decision::Defer`], `observed: 1`); a miss on a key seen before, while the gate
/// still remembers it (at least its `capacity` first sightings later), is written
/// ([`Decision::Ready`], `observed: 2`: the gate knows "seen before", not how often).
///
/// Keys go by [`combined_bin`](CacheHashKey::combined_bin), what Pingora's storage keys
/// by (variance and primary-bin overrides included; the user tag is not part of it), its
/// first eight bytes re-mixed with the gate's random seed, as the foyer integration does, so
/// keys crafted to collide in one process do not collide in another. An observation takes
/// the gate's shared lock and one stripe lock: it does not block but while the gate
/// rotates its generations (once per `capacity` first sightings), and does not panic.
///
/// A handle: clones share one gate and its counters. Pingora takes the policy as a
/// `&'static dyn AdmissionPolicy`; a `static` holds it, and is the handle for the stats.
///
/// # Small objects on first sight
///
/// Every object the gate keeps out loses its first hit, whatever its size; a small object
/// would have cost little storage to keep. AdaptSize (Berger, Sitaraman, Harchol-Balter,
/// NSDI 2017) admits an object of `size` bytes with probability e^(-size/c): with
/// [`first_sight_scale`](Self::first_sight_scale) `c`, a first sighting is written with
/// that probability, every later one always. `observe` sees only the key, so with a
/// scale it answers a first sighting [`Decision::Ready`] with `observed: 1`, and the node
/// decides once the response header gives the size: in
/// `ProxyHttp::response_cache_filter`, [`admit_response`](Self::admit_response) says
/// whether to return `RespCacheable::Cacheable` or
/// `RespCacheable::Uncacheable(NoCacheReason::Deferred)`. Each extra write is a first
/// sighting, most of them one-hit wonders: a small `c` (hundreds of bytes) buys hits on
/// the smallest objects for few writes; the draw comes from the key's hash and the gate's
/// seed, so it is the same for a key within a process, and keys cannot be crafted to win
/// it.
///
/// # Examples
///
/// ```
/// use std::sync::LazyLock;
/// use cuckoo_gate::pingora::SecondRequest;
/// use cuckoo_gate::SeenBefore;
/// use pingora_cache::admission::AdmissionPolicy;
/// use pingora_cache::CacheKey;
///
/// // Remembers the last ~1M first sightings (about 4 MB).
/// static ADMISSION: LazyLock<SecondRequest> =
///     LazyLock::new(|| SecondRequest::new(SeenBefore::builder().capacity(1_000_000).build().expect("a gate")));
///
/// // In `ProxyHttp::request_cache_filter`, after `session.cache.enable(..)`:
/// // session.cache.set_admission_policy(&*ADMISSION);
/// let policy: &'static dyn AdmissionPolicy = &*ADMISSION;
/// let key = CacheKey::new("https://example.com/a.png", "");
/// assert!(policy.observe(&key).is_deferred()); // first sighting: not written
/// assert!(!policy.observe(&key).is_deferred()); // second: written
/// assert_eq!((ADMISSION.stats().deferred, ADMISSION.stats().ready), (1, 1));
/// ```
#[derive(Clone)]
pub struct SecondRequest {
    shared: Arc<Shared>,
    /// AdaptSize's `c`, in bytes: a first sighting of `size` bytes is written with
    /// probability e^(-size/c). `None`: first sightings are deferred.
    scale: Option<NonZeroU64>,
}

/// What clones share: the gate and its counters, and the count of first sightings
/// written for their size.
struct Shared {
    sightings: Sightings,
    small: AtomicU64,
}

/// Counters of a [`SecondRequest`] policy.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct SecondRequestStats {
    /// Misses let through to be written (seen before).
    pub ready: u64,
    /// First sightings: kept out of storage, but for those counted in `small`.
    pub deferred: u64,
    /// First sightings written for their size
    /// ([`first_sight_scale`](SecondRequest::first_sight_scale)).
    pub small: u64,
}

impl SecondRequest {
    /// A policy answering with `gate`.
    ///
    /// # Examples
    ///
    /// ```
    /// use cuckoo_gate::pingora::SecondRequest;
    ///
    /// let policy = SecondRequest::new(cuckoo_gate::SeenBefore::builder().capacity(1_000).build()?);
    /// assert_eq!(policy.gate().stats().capacity, 1_000);
    /// # Ok::<(), cuckoo_gate::BuildError>(())
    /// ```
    pub fn new(gate: SeenBefore) -> Self {
        Self::with_parts(
            gate,
            #[cfg(feature = "metrics")]
            None,
        )
    }

    /// As [`new`](Self::new), publishing `cuckoo_gate_cache_admitted_total` (the ready
    /// misses), `cuckoo_gate_cache_rejected_total` (the deferred ones) and the gate's
    /// metrics under the label `name="<name>"` when
    /// [`publish_metrics`](Self::publish_metrics) is called.
    ///
    /// # Errors
    ///
    /// [`BuildError::MetricsNameTaken`](crate::BuildError::MetricsNameTaken) if a live
    /// cache or policy publishes under `name`.
    ///
    /// # Examples
    ///
    /// ```
    /// use cuckoo_gate::pingora::SecondRequest;
    /// use cuckoo_gate::{BuildError, SeenBefore};
    ///
    /// let gate = || SeenBefore::builder().capacity(1_000).build();
    /// let policy = SecondRequest::with_metrics_name(gate()?, "edge")?;
    /// assert!(matches!(SecondRequest::with_metrics_name(gate()?, "edge"), Err(BuildError::MetricsNameTaken { .. })));
    /// policy.publish_metrics();
    /// # Ok::<(), BuildError>(())
    /// ```
    #[cfg(feature = "metrics")]
    pub fn with_metrics_name(gate: SeenBefore, name: &str) -> Result<Self, crate::BuildError> {
        Ok(Self::with_parts(gate, Some(AdmissionMetrics::new(name)?)))
    }

    fn with_parts(gate: SeenBefore, #[cfg(feature = "metrics")] metrics: Option<AdmissionMetrics>) -> Self {
        SecondRequest {
            shared: Arc::new(Shared {
                sightings: Sightings::new(
                    gate,
                    #[cfg(feature = "metrics")]
                    metrics,
                ),
                small: AtomicU64::new(0),
            }),
            scale: None,
        }
    }

    /// This handle, writing a first sighting of `size` bytes with probability
    /// e^(-size/`scale`) (AdaptSize's rule; see [Small objects on first
    /// sight](Self#small-objects-on-first-sight)). [`observe`](PingoraAdmission::observe)
    /// then answers a first sighting `Ready { observed: 1 }`, and the node asks
    /// [`admit_response`](Self::admit_response) once it knows the size: a node that does
    /// not ask writes every first sighting. A first sighting then goes through Pingora's
    /// miss path, and holds the cache lock (if one is set) until its response header
    /// arrives, as any miss does. Set the scale before cloning: clones made earlier keep
    /// deferring first sightings.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::num::NonZeroU64;
    /// use std::sync::LazyLock;
    /// use cuckoo_gate::pingora::SecondRequest;
    /// use cuckoo_gate::SeenBefore;
    /// use pingora_cache::admission::{AdmissionPolicy, Decision};
    /// use pingora_cache::CacheKey;
    ///
    /// static ADMISSION: LazyLock<SecondRequest> = LazyLock::new(|| {
    ///     let gate = SeenBefore::builder().capacity(1_000_000).build().expect("a gate");
    ///     SecondRequest::new(gate).first_sight_scale(NonZeroU64::new(256).expect("not 0"))
    /// });
    ///
    /// // In `ProxyHttp::response_cache_filter`:
    /// // let size = response.headers.get("content-length").and_then(|v| v.to_str().ok()?.parse().ok());
    /// // if !ADMISSION.admit_response(session.cache.cache_key(), session.cache.admission_decision(), size) {
    /// //     return Ok(RespCacheable::Uncacheable(NoCacheReason::Deferred));
    /// // }
    /// let (icon, video) = (CacheKey::new("/icon.png", ""), CacheKey::new("/video.mp4", ""));
    /// let first = ADMISSION.observe(&icon);
    /// assert_eq!(first, Decision::Ready { observed: 1 }); // decided on the size
    /// assert!(ADMISSION.admit_response(&icon, Some(first), Some(0))); // e^0: always
    /// let first = ADMISSION.observe(&video);
    /// assert!(!ADMISSION.admit_response(&video, Some(first), Some(50_000_000))); // e^-195312
    /// let second = ADMISSION.observe(&video);
    /// assert!(ADMISSION.admit_response(&video, Some(second), Some(50_000_000))); // seen before
    /// assert_eq!(ADMISSION.stats().small, 1);
    /// ```
    pub fn first_sight_scale(mut self, scale: NonZeroU64) -> Self {
        self.scale = Some(scale);
        self
    }

    /// The scale [`first_sight_scale`](Self::first_sight_scale) set, if any.
    pub fn scale(&self) -> Option<NonZeroU64> {
        self.scale
    }

    /// Whether the node writes the response it is about to fill for `key`, of `size`
    /// bytes if known (its `Content-Length`), given the `decision` Pingora recorded
    /// (`HttpCache::admission_decision`). Call it in `ProxyHttp::response_cache_filter`
    /// and answer `RespCacheable::Uncacheable(NoCacheReason::Deferred)` on `false`.
    ///
    /// * No decision (this policy was not asked: a revalidation, a refill of a stale
    ///   entry): `true`.
    /// * Deferred: `false`.
    /// * Ready, seen before (`observed: 2`): `true`.
    /// * Ready on a first sighting (`observed: 1`, only with a
    ///   [`first_sight_scale`](Self::first_sight_scale) `c`): `true` with probability
    ///   e^(-size/c), drawn from `key`'s hash and the gate's seed; `false` if the size is
    ///   not known (a chunked response). Counted in [`SecondRequestStats::small`] when
    ///   `true`.
    ///
    /// Does not block: it hashes and reads the scale (and counts).
    ///
    /// # Examples
    ///
    /// ```
    /// use std::num::NonZeroU64;
    /// use cuckoo_gate::pingora::SecondRequest;
    /// use pingora_cache::admission::Decision;
    /// use pingora_cache::CacheKey;
    ///
    /// let gate = cuckoo_gate::SeenBefore::builder().capacity(1_000).build()?;
    /// let policy = SecondRequest::new(gate).first_sight_scale(NonZeroU64::new(256).unwrap());
    /// let key = CacheKey::new("/a", "");
    /// assert!(policy.admit_response(&key, None, None));
    /// assert!(!policy.admit_response(&key, Some(Decision::Defer { observed: 1 }), Some(1)));
    /// assert!(policy.admit_response(&key, Some(Decision::Ready { observed: 2 }), None));
    /// assert!(!policy.admit_response(&key, Some(Decision::Ready { observed: 1 }), None));
    /// // Of many first sightings of 256 bytes, about e^-1 (37%) are written.
    /// let written = (0..10_000)
    ///     .filter(|i| {
    ///         let key = CacheKey::new(format!("/{i}"), "");
    ///         policy.admit_response(&key, Some(Decision::Ready { observed: 1 }), Some(256))
    ///     })
    ///     .count();
    /// assert!((3_400..4_000).contains(&written), "{written}");
    /// # Ok::<(), cuckoo_gate::BuildError>(())
    /// ```
    pub fn admit_response(&self, key: &CacheKey, decision: Option<Decision>, size: Option<u64>) -> bool {
        match decision {
            None => true,
            Some(Decision::Defer { .. }) => false,
            Some(Decision::Ready { observed }) if observed >= 2 => true,
            Some(Decision::Ready { .. }) => {
                let written = match (self.scale, size) {
                    (Some(scale), Some(size)) => self.small_enough(&key.combined_bin(), size, scale),
                    _ => false,
                };
                if written {
                    self.shared.small.fetch_add(1, Ordering::Relaxed);
                }
                written
            }
        }
    }

    /// AdaptSize's draw: whether a uniform number from the key's hash (its second eight
    /// bytes, which the gate does not use, re-mixed with the gate's seed) is under
    /// e^(-size/scale).
    #[inline]
    fn small_enough(&self, bin: &HashBinary, size: u64, scale: NonZeroU64) -> bool {
        let mut tail = [0u8; 8];
        tail.copy_from_slice(&bin[8..16]);
        let draw = self.gate().hash(&u64::from_le_bytes(tail));
        let uniform = (draw >> 11) as f64 / (1u64 << 53) as f64;
        uniform < (-(size as f64) / scale.get() as f64).exp()
    }

    /// The gate answering for this policy.
    pub fn gate(&self) -> &SeenBefore {
        self.shared.sightings.gate()
    }

    /// Whether a miss on the key whose [`combined_bin`](CacheHashKey::combined_bin) is
    /// `bin` is written (seen before), recording it: what
    /// [`observe`](PingoraAdmission::observe) answers, for a caller that has the hash.
    ///
    /// # Examples
    ///
    /// ```
    /// use cuckoo_gate::pingora::SecondRequest;
    /// use pingora_cache::key::CacheHashKey;
    /// use pingora_cache::CacheKey;
    ///
    /// let policy = SecondRequest::new(cuckoo_gate::SeenBefore::builder().capacity(1_000).build()?);
    /// let bin = CacheKey::new("/a", "").combined_bin();
    /// assert_eq!((policy.admit_bin(&bin), policy.admit_bin(&bin)), (false, true));
    /// # Ok::<(), cuckoo_gate::BuildError>(())
    /// ```
    #[inline]
    pub fn admit_bin(&self, bin: &HashBinary) -> bool {
        // Blake2b's output is uniform: eight bytes of it are a 64-bit hash (Pingora's,
        // unseeded: the gate re-mixes it with its own seed).
        let mut head = [0u8; 8];
        head.copy_from_slice(&bin[..8]);
        self.shared.sightings.admit(u64::from_le_bytes(head))
    }

    /// Misses let through and kept out so far.
    pub fn stats(&self) -> SecondRequestStats {
        let (ready, deferred) = self.shared.sightings.counts();
        SecondRequestStats { ready, deferred, small: self.shared.small.load(Ordering::Relaxed) }
    }

    /// Sets the metrics registered by [`with_metrics_name`](Self::with_metrics_name) to the
    /// current counters (nothing without a name).
    #[cfg(feature = "metrics")]
    pub fn publish_metrics(&self) {
        self.shared.sightings.publish_metrics();
    }

    /// Writes the gate's snapshot (see [`SeenBefore::snapshot`]): what it remembers, and
    /// its seed, so that a restarted node keeps its first sightings.
    ///
    /// # Errors
    ///
    /// The writer's.
    pub fn snapshot<W: Write + ?Sized>(&self, writer: &mut W) -> io::Result<()> {
        self.gate().snapshot(writer)
    }

    /// A policy on the gate a [`snapshot`](Self::snapshot) wrote, with counters at zero.
    /// In a `static`, restore in its initializer and fall back to a fresh gate.
    ///
    /// # Errors
    ///
    /// A [`SnapshotError`] saying what is wrong with the bytes (see
    /// [`SeenBefore::restore`]).
    ///
    /// # Examples
    ///
    /// ```
    /// use std::sync::LazyLock;
    /// use cuckoo_gate::pingora::SecondRequest;
    /// use cuckoo_gate::SeenBefore;
    /// use pingora_cache::key::CacheHashKey;
    /// use pingora_cache::CacheKey;
    ///
    /// let before = SecondRequest::new(SeenBefore::builder().capacity(1_000).build()?);
    /// let bin = CacheKey::new("/a", "").combined_bin();
    /// before.admit_bin(&bin);
    /// let mut file = Vec::new();
    /// before.snapshot(&mut file)?;
    ///
    /// static ADMISSION: LazyLock<SecondRequest> = LazyLock::new(|| {
    ///     # let file: Vec<u8> = Vec::new(); // the saved file in real use: std::fs::File::open(..)
    ///     SecondRequest::restore(&mut file.as_slice()).unwrap_or_else(|_| {
    ///         SecondRequest::new(SeenBefore::builder().capacity(1_000_000).build().expect("a gate"))
    ///     })
    /// });
    /// # let _ = &*ADMISSION;
    /// let after = SecondRequest::restore(&mut file.as_slice())?;
    /// assert!(after.admit_bin(&bin)); // seen before the restart
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn restore<R: Read + ?Sized>(reader: &mut R) -> Result<Self, SnapshotError> {
        Ok(Self::new(SeenBefore::restore(reader)?))
    }
}

impl PingoraAdmission for SecondRequest {
    #[inline]
    fn observe(&self, key: &CacheKey) -> Decision {
        if self.admit_bin(&key.combined_bin()) {
            Decision::Ready { observed: 2 }
        } else if self.scale.is_some() {
            // Written or not once the size is known: see `admit_response`.
            Decision::Ready { observed: 1 }
        } else {
            Decision::Defer { observed: 1 }
        }
    }
}

impl fmt::Debug for SecondRequest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SecondRequest")
            .field("gate", self.gate())
            .field("scale", &self.scale)
            .field("stats", &self.stats())
            .finish()
    }
}
