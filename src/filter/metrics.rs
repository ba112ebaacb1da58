//! The filter's metric handles (names and descriptions in `crate::metrics`).

use metrics::{counter, gauge, Counter, Gauge};

use super::FilterStats;

/// The registered handles of one filter.
pub(crate) struct FilterMetrics {
    items: Gauge,
    slots: Gauge,
    load: Gauge,
    memory: Gauge,
    fpr: Gauge,
    fingerprint_bits: Gauge,
    inserts: Counter,
    failed: Counter,
    removes: Counter,
    relocations: Counter,
    doublings: Counter,
}

impl FilterMetrics {
    pub(crate) fn new(name: &str) -> Self {
        crate::metrics::describe();
        let labels = [("name", name.to_owned())];
        FilterMetrics {
            items: gauge!("cuckoo_gate_filter_items", &labels),
            slots: gauge!("cuckoo_gate_filter_slots", &labels),
            load: gauge!("cuckoo_gate_filter_load_ratio", &labels),
            memory: gauge!("cuckoo_gate_filter_memory_bytes", &labels),
            fpr: gauge!("cuckoo_gate_filter_false_positive_ratio", &labels),
            fingerprint_bits: gauge!("cuckoo_gate_filter_fingerprint_width", &labels),
            inserts: counter!("cuckoo_gate_filter_inserts_total", &labels),
            failed: counter!("cuckoo_gate_filter_failed_inserts_total", &labels),
            removes: counter!("cuckoo_gate_filter_removes_total", &labels),
            relocations: counter!("cuckoo_gate_filter_relocations_total", &labels),
            doublings: counter!("cuckoo_gate_filter_doublings_total", &labels),
        }
    }

    pub(crate) fn publish(&self, s: &FilterStats) {
        self.items.set(s.len as f64);
        self.slots.set(s.capacity as f64);
        self.load.set(s.load_factor);
        self.memory.set(s.memory_bytes as f64);
        self.fpr.set(s.estimated_false_positive_rate);
        self.fingerprint_bits.set(s.fingerprint_bits);
        self.inserts.absolute(s.inserts);
        self.failed.absolute(s.failed_inserts);
        self.removes.absolute(s.removes);
        self.relocations.absolute(s.relocations);
        self.doublings.absolute(u64::from(s.doublings));
    }
}
