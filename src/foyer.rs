//! The seen-before gate in front of [foyer]'s disk tier (cargo feature `foyer`).
//!
//! A flash cache pays for every write in device endurance and bandwidth, and most objects
//! of a CDN trace are requested once. [`SecondSighting`] is a
//! [`foyer::StorageFilterCondition`] that lets an entry onto disk only the second time
//! foyer offers it within the gate's memory, and rejects it the first time. It reads the
//! hash foyer computed for the key, so the key is not hashed again.
//!
//! # Examples
//!
//! ```
//! use cuckoo_gate::foyer::SecondSighting;
//! use cuckoo_gate::SeenBefore;
//! use foyer::StorageFilter;
//!
//! // Remember the last ~100k keys offered to disk.
//! let gate = SecondSighting::new(SeenBefore::builder().capacity(100_000).build()?);
//! // The filter goes to foyer's engine:
//! // `BlockEngineConfig::new(device).with_admission_filter(filter)`.
//! let filter = StorageFilter::new().with_condition(gate.clone());
//! # drop(filter);
//! assert_eq!(gate.stats().admitted, 0);
//! # Ok::<(), cuckoo_gate::BuildError>(())
//! ```
//!
//! [foyer]: https://docs.rs/foyer

use std::fmt;
use std::sync::Arc;

use ::foyer::{Statistics, StorageFilterCondition, StorageFilterResult};

#[cfg(feature = "metrics")]
use crate::cache::AdmissionMetrics;
use crate::sightings::Sightings;
use crate::SeenBefore;

/// Admits an entry to foyer's disk tier on its second sighting: the first time foyer
/// offers a key (by its hash) the gate records it and answers
/// [`Reject`](StorageFilterResult::Reject); when it comes again while the gate still
/// remembers it (at least the gate's `capacity` sightings later), it is admitted.
///
/// A handle: clones share one gate and its counters, so keep one to read
/// [`stats`](Self::stats) and hand another to foyer. The entry's estimated size is not
/// consulted; combine with foyer's other conditions for that.
#[derive(Clone)]
pub struct SecondSighting {
    shared: Arc<Sightings>,
}

/// Counters of a [`SecondSighting`] condition.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct SecondSightingStats {
    /// Entries admitted to disk (seen before).
    pub admitted: u64,
    /// Entries kept off disk (first sightings).
    pub rejected: u64,
}

impl SecondSighting {
    /// A condition answering with `gate`.
    pub fn new(gate: SeenBefore) -> Self {
        Self::with_parts(
            gate,
            #[cfg(feature = "metrics")]
            None,
        )
    }

    /// As [`new`](Self::new), publishing `cuckoo_gate_cache_admitted_total`,
    /// `cuckoo_gate_cache_rejected_total` and the gate's metrics under the label
    /// `name="<name>"` when [`publish_metrics`](Self::publish_metrics) is called.
    ///
    /// # Errors
    ///
    /// [`BuildError::MetricsNameTaken`](crate::BuildError::MetricsNameTaken) if a live
    /// cache or condition publishes under `name`.
    #[cfg(feature = "metrics")]
    pub fn with_metrics_name(gate: SeenBefore, name: &str) -> Result<Self, crate::BuildError> {
        Ok(Self::with_parts(gate, Some(AdmissionMetrics::new(name)?)))
    }

    fn with_parts(gate: SeenBefore, #[cfg(feature = "metrics")] metrics: Option<AdmissionMetrics>) -> Self {
        SecondSighting {
            shared: Arc::new(Sightings::new(
                gate,
                #[cfg(feature = "metrics")]
                metrics,
            )),
        }
    }

    /// The gate answering for this condition.
    pub fn gate(&self) -> &SeenBefore {
        self.shared.gate()
    }

    /// Whether an entry whose key foyer hashed to `hash` goes to disk, recording it.
    /// Foyer's default hasher is unseeded: the hash is re-mixed with the gate's seed.
    pub fn admit(&self, hash: u64) -> bool {
        self.shared.admit(hash)
    }

    /// Admissions and rejections so far.
    pub fn stats(&self) -> SecondSightingStats {
        let (admitted, rejected) = self.shared.counts();
        SecondSightingStats { admitted, rejected }
    }

    /// Sets the metrics registered by [`with_metrics_name`](Self::with_metrics_name) to the
    /// current counters (nothing without a name).
    #[cfg(feature = "metrics")]
    pub fn publish_metrics(&self) {
        self.shared.publish_metrics();
    }
}

impl StorageFilterCondition for SecondSighting {
    fn filter(&self, _: &Arc<Statistics>, hash: u64, _: usize) -> StorageFilterResult {
        if self.admit(hash) {
            StorageFilterResult::Admit
        } else {
            StorageFilterResult::Reject
        }
    }
}

impl fmt::Debug for SecondSighting {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SecondSighting")
            .field("gate", self.shared.gate())
            .field("stats", &self.stats())
            .finish()
    }
}
