//! The cache's metric handles (names and descriptions in `crate::metrics`).

use metrics::{counter, gauge, Counter, Gauge};

use super::CacheStats;
use crate::gate::GateStats;

/// The registered handles of one cache and its gate.
pub(crate) struct CacheMetrics {
    hits: Counter,
    misses: Counter,
    admitted: Counter,
    rejected: Counter,
    evictions: Counter,
    entries: Gauge,
    capacity: Gauge,
    rotations: Counter,
    gate_memory: Gauge,
}

impl CacheMetrics {
    pub(crate) fn new(name: &str) -> Self {
        crate::metrics::describe();
        let labels = [("name", name.to_owned())];
        CacheMetrics {
            hits: counter!("cuckoo_gate_cache_hits_total", &labels),
            misses: counter!("cuckoo_gate_cache_misses_total", &labels),
            admitted: counter!("cuckoo_gate_cache_admitted_total", &labels),
            rejected: counter!("cuckoo_gate_cache_rejected_total", &labels),
            evictions: counter!("cuckoo_gate_cache_evictions_total", &labels),
            entries: gauge!("cuckoo_gate_cache_entries", &labels),
            capacity: gauge!("cuckoo_gate_cache_capacity", &labels),
            rotations: counter!("cuckoo_gate_gate_rotations_total", &labels),
            gate_memory: gauge!("cuckoo_gate_gate_memory_bytes", &labels),
        }
    }

    pub(crate) fn publish(&self, s: &CacheStats, entries: usize, capacity: u64, gate: &GateStats) {
        self.hits.absolute(s.hits);
        self.misses.absolute(s.misses);
        self.admitted.absolute(s.admitted);
        self.rejected.absolute(s.rejected);
        self.evictions.absolute(s.evictions);
        self.entries.set(entries as f64);
        self.capacity.set(capacity as f64);
        self.rotations.absolute(gate.rotations);
        self.gate_memory.set(gate.memory_bytes as f64);
    }
}
