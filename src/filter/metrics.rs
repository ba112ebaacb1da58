//! The filter's metric handles (names and descriptions in `crate::metrics`).

use metrics::{counter, gauge, Counter, Gauge};

use super::FilterStats;
use crate::metrics::{
    FILTER_DOUBLINGS_TOTAL, FILTER_FAILED_INSERTS_TOTAL, FILTER_FALSE_POSITIVE_RATIO,
    FILTER_FINGERPRINT_WIDTH, FILTER_INSERTS_TOTAL, FILTER_ITEMS, FILTER_LOAD_RATIO, FILTER_MEMORY_BYTES,
    FILTER_RELOCATIONS_TOTAL, FILTER_REMOVES_TOTAL, FILTER_SLOTS,
};

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
            items: gauge!(FILTER_ITEMS, &labels),
            slots: gauge!(FILTER_SLOTS, &labels),
            load: gauge!(FILTER_LOAD_RATIO, &labels),
            memory: gauge!(FILTER_MEMORY_BYTES, &labels),
            fpr: gauge!(FILTER_FALSE_POSITIVE_RATIO, &labels),
            fingerprint_bits: gauge!(FILTER_FINGERPRINT_WIDTH, &labels),
            inserts: counter!(FILTER_INSERTS_TOTAL, &labels),
            failed: counter!(FILTER_FAILED_INSERTS_TOTAL, &labels),
            removes: counter!(FILTER_REMOVES_TOTAL, &labels),
            relocations: counter!(FILTER_RELOCATIONS_TOTAL, &labels),
            doublings: counter!(FILTER_DOUBLINGS_TOTAL, &labels),
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
