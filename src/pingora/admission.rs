//! [`SecondRequest`]: the seen-before gate as Pingora's admission policy.

use std::fmt;
use std::io::{self, Read, Write};
use std::sync::Arc;

use pingora_cache::admission::{AdmissionPolicy as PingoraAdmission, Decision};
use pingora_cache::key::{CacheHashKey, HashBinary};
use pingora_cache::CacheKey;

#[cfg(feature = "metrics")]
use crate::cache::AdmissionMetrics;
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
    shared: Arc<Sightings>,
}

/// Counters of a [`SecondRequest`] policy.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct SecondRequestStats {
    /// Misses let through to be written (seen before).
    pub ready: u64,
    /// Misses kept out of storage (first sightings).
    pub deferred: u64,
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
            shared: Arc::new(Sightings::new(
                gate,
                #[cfg(feature = "metrics")]
                metrics,
            )),
        }
    }

    /// The gate answering for this policy.
    pub fn gate(&self) -> &SeenBefore {
        self.shared.gate()
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
        self.shared.admit(u64::from_le_bytes(head))
    }

    /// Misses let through and kept out so far.
    pub fn stats(&self) -> SecondRequestStats {
        let (ready, deferred) = self.shared.counts();
        SecondRequestStats { ready, deferred }
    }

    /// Sets the metrics registered by [`with_metrics_name`](Self::with_metrics_name) to the
    /// current counters (nothing without a name).
    #[cfg(feature = "metrics")]
    pub fn publish_metrics(&self) {
        self.shared.publish_metrics();
    }

    /// Writes the gate's snapshot (see [`SeenBefore::snapshot`]): what it remembers, and
    /// its seed, so that a restarted node keeps its first sightings.
    ///
    /// # Errors
    ///
    /// The writer's.
    pub fn snapshot<W: Write + ?Sized>(&self, writer: &mut W) -> io::Result<()> {
        self.shared.gate().snapshot(writer)
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
        } else {
            Decision::Defer { observed: 1 }
        }
    }
}

impl fmt::Debug for SecondRequest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SecondRequest")
            .field("gate", self.shared.gate())
            .field("stats", &self.stats())
            .finish()
    }
}
