//! The filter's metric handles (names and descriptions in `crate::metrics`).

use metrics::{counter, gauge};

use super::FilterStats;
use crate::error::BuildError;
use crate::metrics::{
    Claim, Family, FILTER_DOUBLINGS_TOTAL, FILTER_FAILED_INSERTS_TOTAL, FILTER_FALSE_POSITIVE_RATIO,
    FILTER_FINGERPRINT_WIDTH, FILTER_INSERTS_TOTAL, FILTER_ITEMS, FILTER_LOAD_RATIO, FILTER_MEMORY_BYTES,
    FILTER_RELOCATIONS_TOTAL, FILTER_REMOVES_TOTAL, FILTER_SLOTS,
};

/// The series of one filter, looked up at each publish in the recorder installed then.
pub(crate) struct FilterMetrics {
    claim: Claim,
}

impl FilterMetrics {
    /// Takes `name` for the filter series; an error if a live filter holds it.
    pub(crate) fn new(name: &str) -> Result<Self, BuildError> {
        Ok(FilterMetrics { claim: Claim::new(Family::Filter, name)? })
    }

    pub(crate) fn publish(&self, s: &FilterStats) {
        let labels = self.claim.labels();
        gauge!(FILTER_ITEMS, &labels).set(s.len as f64);
        gauge!(FILTER_SLOTS, &labels).set(s.capacity as f64);
        gauge!(FILTER_LOAD_RATIO, &labels).set(s.load_factor);
        gauge!(FILTER_MEMORY_BYTES, &labels).set(s.memory_bytes as f64);
        gauge!(FILTER_FALSE_POSITIVE_RATIO, &labels).set(s.estimated_false_positive_rate);
        gauge!(FILTER_FINGERPRINT_WIDTH, &labels).set(s.fingerprint_bits);
        counter!(FILTER_INSERTS_TOTAL, &labels).absolute(s.inserts);
        counter!(FILTER_FAILED_INSERTS_TOTAL, &labels).absolute(s.failed_inserts);
        counter!(FILTER_REMOVES_TOTAL, &labels).absolute(s.removes);
        counter!(FILTER_RELOCATIONS_TOTAL, &labels).absolute(s.relocations);
        counter!(FILTER_DOUBLINGS_TOTAL, &labels).absolute(u64::from(s.doublings));
    }
}
