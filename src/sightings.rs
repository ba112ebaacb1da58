//! What the integrations' admission conditions share (`foyer::SecondSighting`,
//! `pingora::SecondRequest`): a gate answering for a host's unseeded 64-bit hashes, and
//! the counters and metrics of its answers.

#[cfg(feature = "metrics")]
use crate::cache::AdmissionMetrics;
use crate::primitive::{AtomicU64, Ordering};
use crate::SeenBefore;

/// A gate, the admissions and rejections it answered, and where they are published.
pub(crate) struct Sightings {
    gate: SeenBefore,
    admitted: AtomicU64,
    rejected: AtomicU64,
    #[cfg(feature = "metrics")]
    metrics: Option<AdmissionMetrics>,
}

impl Sightings {
    pub(crate) fn new(
        gate: SeenBefore,
        #[cfg(feature = "metrics")] metrics: Option<AdmissionMetrics>,
    ) -> Self {
        Sightings {
            gate,
            admitted: AtomicU64::new(0),
            rejected: AtomicU64::new(0),
            #[cfg(feature = "metrics")]
            metrics,
        }
    }

    /// The gate.
    pub(crate) fn gate(&self) -> &SeenBefore {
        &self.gate
    }

    /// Whether the key the host hashed to `hash` was seen before, recording it, and
    /// counting the answer. The host's hash is unseeded: re-mixing it with the gate's
    /// random seed keeps keys crafted to collide in one process from colliding in another.
    #[inline]
    pub(crate) fn admit(&self, hash: u64) -> bool {
        let admitted = self.gate.check_and_record_hash(self.gate.hash(&hash));
        let counter = if admitted { &self.admitted } else { &self.rejected };
        counter.fetch_add(1, Ordering::Relaxed);
        admitted
    }

    /// Admissions and rejections so far.
    pub(crate) fn counts(&self) -> (u64, u64) {
        (self.admitted.load(Ordering::Relaxed), self.rejected.load(Ordering::Relaxed))
    }

    /// Sets the metrics, if named, to the current counters.
    #[cfg(feature = "metrics")]
    pub(crate) fn publish_metrics(&self) {
        if let Some(metrics) = &self.metrics {
            let (admitted, rejected) = self.counts();
            metrics.publish(admitted, rejected, &self.gate.stats());
        }
    }
}
