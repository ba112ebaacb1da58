//! The cache's metric handles (names and descriptions in `crate::metrics`).

use metrics::{counter, gauge};

use super::CacheStats;
use crate::error::BuildError;
use crate::gate::GateStats;
use crate::metrics::{
    Claim, Family, CACHE_ADMITTED_TOTAL, CACHE_CAPACITY, CACHE_ENTRIES, CACHE_EVICTIONS_TOTAL,
    CACHE_EXPIRATIONS_TOTAL, CACHE_FAILURES_CACHED_TOTAL, CACHE_FAILURES_KEPT, CACHE_FAILURES_SHARED_TOTAL,
    CACHE_HITS_TOTAL, CACHE_LAST_RESTORE_SECONDS, CACHE_LAST_SAVE_SECONDS, CACHE_LOADS_COALESCED_TOTAL,
    CACHE_LOADS_TOTAL, CACHE_LOAD_FAILURES_TOTAL, CACHE_LOAD_WAITERS, CACHE_MISSES_TOTAL,
    CACHE_REFRESHES_TOTAL, CACHE_REFRESH_FAILURES_TOTAL, CACHE_REJECTED_TOTAL, CACHE_RESTORED_BYTES_TOTAL,
    CACHE_RESTORED_ENTRIES_TOTAL, CACHE_RESTORE_DROPPED_TOTAL, CACHE_RESTORE_EXPIRED_TOTAL,
    CACHE_SAVED_BYTES_TOTAL, CACHE_STALE_SERVED_TOTAL, CACHE_WEIGHT, GATE_MEMORY_BYTES, GATE_ROTATIONS_TOTAL,
};

/// The series of an admission decision and its gate: a cache's, or those of an admission
/// condition in front of another cache (`foyer.rs`). Handles are looked up at each
/// publish, in the recorder installed then.
pub(crate) struct AdmissionMetrics {
    claim: Claim,
}

impl AdmissionMetrics {
    /// Takes `name` for the cache series; an error if a live instance holds it.
    pub(crate) fn new(name: &str) -> Result<Self, BuildError> {
        Ok(AdmissionMetrics { claim: Claim::new(Family::Cache, name)? })
    }

    pub(crate) fn publish(&self, admitted: u64, rejected: u64, gate: &GateStats) {
        let labels = self.claim.labels();
        counter!(CACHE_ADMITTED_TOTAL, &labels).absolute(admitted);
        counter!(CACHE_REJECTED_TOTAL, &labels).absolute(rejected);
        counter!(GATE_ROTATIONS_TOTAL, &labels).absolute(gate.rotations);
        gauge!(GATE_MEMORY_BYTES, &labels).set(gate.memory_bytes as f64);
    }
}

/// The series of one cache and its gate.
pub(crate) struct CacheMetrics {
    admission: AdmissionMetrics,
}

/// What a cache publishes besides its counters.
pub(crate) struct Held {
    pub(crate) entries: usize,
    pub(crate) weight: u64,
    pub(crate) capacity: u64,
}

impl CacheMetrics {
    pub(crate) fn new(name: &str) -> Result<Self, BuildError> {
        Ok(CacheMetrics { admission: AdmissionMetrics::new(name)? })
    }

    pub(crate) fn publish(&self, s: &CacheStats, held: &Held, gate: &GateStats) {
        self.admission.publish(s.admitted, s.rejected, gate);
        let labels = self.admission.claim.labels();
        counter!(CACHE_HITS_TOTAL, &labels).absolute(s.hits);
        counter!(CACHE_MISSES_TOTAL, &labels).absolute(s.misses);
        counter!(CACHE_EVICTIONS_TOTAL, &labels).absolute(s.evictions);
        counter!(CACHE_EXPIRATIONS_TOTAL, &labels).absolute(s.expirations);
        gauge!(CACHE_ENTRIES, &labels).set(held.entries as f64);
        gauge!(CACHE_WEIGHT, &labels).set(held.weight as f64);
        gauge!(CACHE_CAPACITY, &labels).set(held.capacity as f64);
        counter!(CACHE_LOADS_TOTAL, &labels).absolute(s.loads);
        counter!(CACHE_LOADS_COALESCED_TOTAL, &labels).absolute(s.loads_coalesced);
        counter!(CACHE_LOAD_FAILURES_TOTAL, &labels).absolute(s.load_failures);
        gauge!(CACHE_LOAD_WAITERS, &labels).set(s.loads_waiting as f64);
        counter!(CACHE_REFRESHES_TOTAL, &labels).absolute(s.refreshes);
        counter!(CACHE_REFRESH_FAILURES_TOTAL, &labels).absolute(s.refresh_failures);
        counter!(CACHE_STALE_SERVED_TOTAL, &labels).absolute(s.stale_served);
        counter!(CACHE_FAILURES_SHARED_TOTAL, &labels).absolute(s.failures_shared);
        counter!(CACHE_FAILURES_CACHED_TOTAL, &labels).absolute(s.failures_cached);
        gauge!(CACHE_FAILURES_KEPT, &labels).set(s.failures_kept as f64);
        counter!(CACHE_RESTORED_ENTRIES_TOTAL, &labels).absolute(s.restored_entries);
        counter!(CACHE_RESTORE_EXPIRED_TOTAL, &labels).absolute(s.restore_expired);
        counter!(CACHE_RESTORE_DROPPED_TOTAL, &labels).absolute(s.restore_dropped);
        counter!(CACHE_SAVED_BYTES_TOTAL, &labels).absolute(s.saved_bytes);
        counter!(CACHE_RESTORED_BYTES_TOTAL, &labels).absolute(s.restored_bytes);
        gauge!(CACHE_LAST_SAVE_SECONDS, &labels).set(s.last_save.as_secs_f64());
        gauge!(CACHE_LAST_RESTORE_SECONDS, &labels).set(s.last_restore.as_secs_f64());
    }
}
