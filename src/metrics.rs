//! Publishing counters to the [`metrics`] facade (cargo feature `metrics`, on by default),
//! ready for a Prometheus exporter.
//!
//! This module names and describes the metrics; each owner registers its handles beside
//! its code (`filter/metrics.rs`, `cache/metrics.rs`, `foyer.rs`). Handles are registered
//! once, when a filter or cache is built with a `metrics_name`, and carry the label
//! `name="<metrics_name>"` so several instances can share a process.
//! Nothing is recorded on the hot path: the counters live in per-stripe and per-shard
//! fields that writers update under the locks they already hold, and
//! `publish_metrics()` sums them and sets the handles. Call it periodically (for example
//! every few seconds, from the thread that serves `/metrics` or a timer).
//!
//! The metrics and their meaning are listed in the README, section "Metrics".

use std::sync::Once;

use metrics::{describe_counter, describe_gauge, Unit};

/// Describes every metric (units and help text), once per process; called when the first
/// handle is registered.
pub(crate) fn describe() {
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
