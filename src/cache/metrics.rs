//! The cache's metric handles (names and descriptions in `crate::metrics`).

use metrics::{counter, gauge, Counter, Gauge};

use super::CacheStats;
use crate::gate::GateStats;

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
            admitted: counter!("cuckoo_gate_cache_admitted_total", &labels),
            rejected: counter!("cuckoo_gate_cache_rejected_total", &labels),
            rotations: counter!("cuckoo_gate_gate_rotations_total", &labels),
            gate_memory: gauge!("cuckoo_gate_gate_memory_bytes", &labels),
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
}

impl CacheMetrics {
    pub(crate) fn new(name: &str) -> Self {
        let labels = [("name", name.to_owned())];
        CacheMetrics {
            admission: AdmissionMetrics::new(name),
            hits: counter!("cuckoo_gate_cache_hits_total", &labels),
            misses: counter!("cuckoo_gate_cache_misses_total", &labels),
            evictions: counter!("cuckoo_gate_cache_evictions_total", &labels),
            entries: gauge!("cuckoo_gate_cache_entries", &labels),
            capacity: gauge!("cuckoo_gate_cache_capacity", &labels),
        }
    }

    pub(crate) fn publish(&self, s: &CacheStats, entries: usize, capacity: u64, gate: &GateStats) {
        self.admission.publish(s.admitted, s.rejected, gate);
        self.hits.absolute(s.hits);
        self.misses.absolute(s.misses);
        self.evictions.absolute(s.evictions);
        self.entries.set(entries as f64);
        self.capacity.set(capacity as f64);
    }
}
