//! Publishing counters to the [`metrics`] facade (cargo feature `metrics`, on by default),
//! ready for a Prometheus exporter.
//!
//! Handles are registered once, when a filter or cache is built with a `metrics_name`,
//! and carry the label `name="<metrics_name>"` so several instances can share a process.
//! Nothing is recorded on the hot path: the counters live in per-stripe and per-shard
//! fields that writers update under the locks they already hold, and
//! `publish_metrics()` sums them and sets the handles. Call it periodically (for example
//! every few seconds, from the thread that serves `/metrics` or a timer).
//!
//! | metric | type | meaning |
//! |---|---|---|
//! | `cuckoo_gate_filter_items` | gauge | fingerprints stored |
//! | `cuckoo_gate_filter_slots` | gauge | capacity in slots |
//! | `cuckoo_gate_filter_load_ratio` | gauge | items / slots, in [0, 1] |
//! | `cuckoo_gate_filter_memory_bytes` | gauge | table and stripes |
//! | `cuckoo_gate_filter_false_positive_ratio` | gauge | estimated false-positive rate at the current load |
//! | `cuckoo_gate_filter_fingerprint_width` | gauge | fingerprint width in bits |
//! | `cuckoo_gate_filter_inserts_total` | counter | successful inserts |
//! | `cuckoo_gate_filter_failed_inserts_total` | counter | inserts that returned an error |
//! | `cuckoo_gate_filter_removes_total` | counter | fingerprints removed (`remove`, `clear`) |
//! | `cuckoo_gate_filter_relocations_total` | counter | fingerprints moved to make room |
//! | `cuckoo_gate_filter_doublings_total` | counter | times the filter doubled its capacity |
//! | `cuckoo_gate_cache_hits_total` | counter | `get` calls that found their key |
//! | `cuckoo_gate_cache_misses_total` | counter | `get` calls that did not |
//! | `cuckoo_gate_cache_admitted_total` | counter | misses stored (cache writes; for `foyer::SecondSighting`, entries let onto disk) |
//! | `cuckoo_gate_cache_rejected_total` | counter | misses kept out by the policy (or off disk) |
//! | `cuckoo_gate_cache_evictions_total` | counter | entries pushed out |
//! | `cuckoo_gate_cache_entries` | gauge | entries held |
//! | `cuckoo_gate_cache_capacity` | gauge | most entries held |
//! | `cuckoo_gate_gate_rotations_total` | counter | generations started by the seen-before gate |
//! | `cuckoo_gate_gate_memory_bytes` | gauge | the gate's two filters |

use std::sync::Once;

use metrics::{counter, describe_counter, describe_gauge, gauge, Counter, Gauge, Unit};

use crate::cache::CacheStats;
use crate::filter::FilterStats;
use crate::gate::GateStats;

fn describe() {
    static DESCRIBED: Once = Once::new();
    DESCRIBED.call_once(|| {
        describe_gauge!("cuckoo_gate_filter_items", Unit::Count, "Fingerprints stored in the filter.");
        describe_gauge!("cuckoo_gate_filter_slots", Unit::Count, "Filter capacity in slots.");
        describe_gauge!("cuckoo_gate_filter_load_ratio", "Items divided by slots, in [0, 1].");
        describe_gauge!("cuckoo_gate_filter_memory_bytes", Unit::Bytes, "Memory held by the filter.");
        describe_gauge!(
            "cuckoo_gate_filter_false_positive_ratio",
            "Estimated false-positive rate at the current load, in [0, 1]."
        );
        describe_gauge!("cuckoo_gate_filter_fingerprint_width", Unit::Count, "Fingerprint width, in bits.");
        describe_counter!("cuckoo_gate_filter_inserts_total", Unit::Count, "Successful inserts.");
        describe_counter!(
            "cuckoo_gate_filter_failed_inserts_total",
            Unit::Count,
            "Inserts that returned an error."
        );
        describe_counter!("cuckoo_gate_filter_removes_total", Unit::Count, "Fingerprints removed.");
        describe_counter!(
            "cuckoo_gate_filter_relocations_total",
            Unit::Count,
            "Fingerprints moved to make room."
        );
        describe_counter!(
            "cuckoo_gate_filter_doublings_total",
            Unit::Count,
            "Times the filter doubled its capacity."
        );
        describe_counter!("cuckoo_gate_cache_hits_total", Unit::Count, "Cache lookups that found their key.");
        describe_counter!("cuckoo_gate_cache_misses_total", Unit::Count, "Cache lookups that did not.");
        describe_counter!("cuckoo_gate_cache_admitted_total", Unit::Count, "Misses stored in the cache.");
        describe_counter!("cuckoo_gate_cache_rejected_total", Unit::Count, "Misses kept out by the policy.");
        describe_counter!("cuckoo_gate_cache_evictions_total", Unit::Count, "Entries evicted to make room.");
        describe_gauge!("cuckoo_gate_cache_entries", Unit::Count, "Entries held by the cache.");
        describe_gauge!("cuckoo_gate_cache_capacity", Unit::Count, "Most entries the cache holds.");
        describe_counter!(
            "cuckoo_gate_gate_rotations_total",
            Unit::Count,
            "Generations started by the gate."
        );
        describe_gauge!("cuckoo_gate_gate_memory_bytes", Unit::Bytes, "Memory held by the gate's filters.");
    });
}

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
        describe();
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
        describe();
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

/// The registered handles of an admission condition in front of another cache (see
/// `foyer.rs`) and its gate.
#[cfg(feature = "foyer")]
pub(crate) struct AdmissionMetrics {
    admitted: Counter,
    rejected: Counter,
    rotations: Counter,
    gate_memory: Gauge,
}

#[cfg(feature = "foyer")]
impl AdmissionMetrics {
    pub(crate) fn new(name: &str) -> Self {
        describe();
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
