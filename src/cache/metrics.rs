//! The cache's metric handles (names and descriptions in `crate::metrics`).

use metrics::{counter, gauge, Counter, Gauge};

use super::CacheStats;
use crate::gate::GateStats;
use crate::metrics::{
    CACHE_ADMITTED_TOTAL, CACHE_CAPACITY, CACHE_ENTRIES, CACHE_EVICTIONS_TOTAL, CACHE_HITS_TOTAL,
    CACHE_LOADS_COALESCED_TOTAL, CACHE_LOADS_TOTAL, CACHE_LOAD_FAILURES_TOTAL, CACHE_LOAD_WAITERS,
    CACHE_MISSES_TOTAL, CACHE_REJECTED_TOTAL, GATE_MEMORY_BYTES, GATE_ROTATIONS_TOTAL,
};

/// The registered handles of an admission decision and its gate: a cache's, or those of
/// an admission condition in front of another cache (`foyer.rs`).
pub(crate) struct AdmissionMetrics {
    admitted: Counter,
    rejected: Counter,
    rotations: Counter,
    gate_memory: Gauge,
}

impl AdmissionMetrics {
    pub(crate) fn new(name: &str) -> Self {
        crate::metrics::describe();
        let labels = [("name", name.to_owned())];
        AdmissionMetrics {
            admitted: counter!(CACHE_ADMITTED_TOTAL, &labels),
            rejected: counter!(CACHE_REJECTED_TOTAL, &labels),
            rotations: counter!(GATE_ROTATIONS_TOTAL, &labels),
            gate_memory: gauge!(GATE_MEMORY_BYTES, &labels),
        }
    }

    pub(crate) fn publish(&self, admitted: u64, rejected: u64, gate: &GateStats) {
        self.admitted.absolute(admitted);
        self.rejected.absolute(rejected);
        self.rotations.absolute(gate.rotations);
        self.gate_memory.set(gate.memory_bytes as f64);
    }
}

/// The registered handles of one cache and its gate.
pub(crate) struct CacheMetrics {
    admission: AdmissionMetrics,
    hits: Counter,
    misses: Counter,
    evictions: Counter,
    entries: Gauge,
    capacity: Gauge,
    loads: Counter,
    loads_coalesced: Counter,
    load_failures: Counter,
    load_waiters: Gauge,
}

impl CacheMetrics {
    pub(crate) fn new(name: &str) -> Self {
        let labels = [("name", name.to_owned())];
        CacheMetrics {
            admission: AdmissionMetrics::new(name),
            hits: counter!(CACHE_HITS_TOTAL, &labels),
            misses: counter!(CACHE_MISSES_TOTAL, &labels),
            evictions: counter!(CACHE_EVICTIONS_TOTAL, &labels),
            entries: gauge!(CACHE_ENTRIES, &labels),
            capacity: gauge!(CACHE_CAPACITY, &labels),
            loads: counter!(CACHE_LOADS_TOTAL, &labels),
            loads_coalesced: counter!(CACHE_LOADS_COALESCED_TOTAL, &labels),
            load_failures: counter!(CACHE_LOAD_FAILURES_TOTAL, &labels),
            load_waiters: gauge!(CACHE_LOAD_WAITERS, &labels),
        }
    }

    pub(crate) fn publish(&self, s: &CacheStats, entries: usize, capacity: u64, gate: &GateStats) {
        self.admission.publish(s.admitted, s.rejected, gate);
        self.hits.absolute(s.hits);
        self.misses.absolute(s.misses);
        self.evictions.absolute(s.evictions);
        self.entries.set(entries as f64);
        self.capacity.set(capacity as f64);
        self.loads.absolute(s.loads);
        self.loads_coalesced.absolute(s.loads_coalesced);
        self.load_failures.absolute(s.load_failures);
        self.load_waiters.set(s.loads_waiting as f64);
    }
}
