//! Publishing counters to the [`metrics`] facade (cargo feature `metrics`, on by default),
//! ready for a Prometheus exporter.
//!
//! This module names and describes the metrics (the names are constants here, used by
//! both the descriptions and the registrations), and keeps the names in use; each owner
//! publishes its series beside its code (`filter/metrics.rs`, `cache/metrics.rs`,
//! `foyer.rs`). Series carry the label `name="<metrics_name>"` so several instances can
//! share a process, and a name is held by one live instance at a time: a second one gets
//! [`BuildError::MetricsNameTaken`](crate::BuildError::MetricsNameTaken), rather than two
//! instances overwriting each other's series. Handles are looked up in the recorder at each
//! publish, so an instance built before the exporter was installed still publishes.
//! Nothing is recorded on the hot path: the counters live in per-stripe and per-shard
//! fields that writers update under the locks they already hold, and
//! `publish_metrics()` sums them and sets the handles. Call it periodically (for example
//! every few seconds, from the thread that serves `/metrics` or a timer).
//!
//! The metrics and their meaning are listed in the README, section "Metrics".

use std::collections::HashSet;
use std::sync::{Mutex, Once, OnceLock};

use metrics::{describe_counter, describe_gauge, Unit};

use crate::error::BuildError;

/// Which series a name labels: a filter's, or a cache's (whose admission counters a foyer
/// admission condition also publishes).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum Family {
    Filter,
    Cache,
}

/// A `metrics_name` held by a live instance; dropping it frees the name.
#[derive(Debug)]
pub(crate) struct Claim {
    family: Family,
    name: String,
}

fn claimed() -> &'static Mutex<HashSet<(Family, String)>> {
    static CLAIMED: OnceLock<Mutex<HashSet<(Family, String)>>> = OnceLock::new();
    CLAIMED.get_or_init(Mutex::default)
}

impl Claim {
    /// Takes `name` for `family`'s series; an error if a live instance holds it.
    pub(crate) fn new(family: Family, name: &str) -> Result<Self, BuildError> {
        let mut names = claimed().lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if !names.insert((family, name.to_owned())) {
            return Err(BuildError::MetricsNameTaken { name: name.to_owned() });
        }
        describe();
        Ok(Claim { family, name: name.to_owned() })
    }

    /// The series' labels.
    pub(crate) fn labels(&self) -> [(&'static str, String); 1] {
        [("name", self.name.clone())]
    }
}

impl Drop for Claim {
    fn drop(&mut self) {
        let mut names = claimed().lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        names.remove(&(self.family, std::mem::take(&mut self.name)));
    }
}

// The filter's series (`filter/metrics.rs`).
pub(crate) const FILTER_ITEMS: &str = "cuckoo_gate_filter_items";
pub(crate) const FILTER_SLOTS: &str = "cuckoo_gate_filter_slots";
pub(crate) const FILTER_LOAD_RATIO: &str = "cuckoo_gate_filter_load_ratio";
pub(crate) const FILTER_MEMORY_BYTES: &str = "cuckoo_gate_filter_memory_bytes";
pub(crate) const FILTER_FALSE_POSITIVE_RATIO: &str = "cuckoo_gate_filter_false_positive_ratio";
pub(crate) const FILTER_FINGERPRINT_WIDTH: &str = "cuckoo_gate_filter_fingerprint_width";
pub(crate) const FILTER_INSERTS_TOTAL: &str = "cuckoo_gate_filter_inserts_total";
pub(crate) const FILTER_FAILED_INSERTS_TOTAL: &str = "cuckoo_gate_filter_failed_inserts_total";
pub(crate) const FILTER_REMOVES_TOTAL: &str = "cuckoo_gate_filter_removes_total";
pub(crate) const FILTER_RELOCATIONS_TOTAL: &str = "cuckoo_gate_filter_relocations_total";
pub(crate) const FILTER_DOUBLINGS_TOTAL: &str = "cuckoo_gate_filter_doublings_total";

// The cache's series (`cache/metrics.rs`; admitted and rejected also for `foyer.rs`).
pub(crate) const CACHE_HITS_TOTAL: &str = "cuckoo_gate_cache_hits_total";
pub(crate) const CACHE_MISSES_TOTAL: &str = "cuckoo_gate_cache_misses_total";
pub(crate) const CACHE_ADMITTED_TOTAL: &str = "cuckoo_gate_cache_admitted_total";
pub(crate) const CACHE_REJECTED_TOTAL: &str = "cuckoo_gate_cache_rejected_total";
pub(crate) const CACHE_EVICTIONS_TOTAL: &str = "cuckoo_gate_cache_evictions_total";
pub(crate) const CACHE_ENTRIES: &str = "cuckoo_gate_cache_entries";
pub(crate) const CACHE_CAPACITY: &str = "cuckoo_gate_cache_capacity";
pub(crate) const CACHE_LOADS_TOTAL: &str = "cuckoo_gate_cache_loads_total";
pub(crate) const CACHE_LOADS_COALESCED_TOTAL: &str = "cuckoo_gate_cache_loads_coalesced_total";
pub(crate) const CACHE_LOAD_FAILURES_TOTAL: &str = "cuckoo_gate_cache_load_failures_total";
pub(crate) const CACHE_LOAD_WAITERS: &str = "cuckoo_gate_cache_load_waiters";
pub(crate) const CACHE_REFRESHES_TOTAL: &str = "cuckoo_gate_cache_refreshes_total";
pub(crate) const CACHE_REFRESH_FAILURES_TOTAL: &str = "cuckoo_gate_cache_refresh_failures_total";
pub(crate) const CACHE_STALE_SERVED_TOTAL: &str = "cuckoo_gate_cache_stale_served_total";
pub(crate) const CACHE_FAILURES_SHARED_TOTAL: &str = "cuckoo_gate_cache_failures_shared_total";
pub(crate) const CACHE_FAILURES_CACHED_TOTAL: &str = "cuckoo_gate_cache_failures_cached_total";
pub(crate) const CACHE_FAILURES_KEPT: &str = "cuckoo_gate_cache_failures_kept";
pub(crate) const CACHE_EXPIRATIONS_TOTAL: &str = "cuckoo_gate_cache_expirations_total";
pub(crate) const CACHE_WEIGHT: &str = "cuckoo_gate_cache_weight";
pub(crate) const CACHE_RESTORED_ENTRIES_TOTAL: &str = "cuckoo_gate_cache_restored_entries_total";
pub(crate) const CACHE_RESTORE_EXPIRED_TOTAL: &str = "cuckoo_gate_cache_restore_expired_total";
pub(crate) const CACHE_RESTORE_DROPPED_TOTAL: &str = "cuckoo_gate_cache_restore_dropped_total";
pub(crate) const CACHE_SAVED_BYTES_TOTAL: &str = "cuckoo_gate_cache_saved_bytes_total";
pub(crate) const CACHE_RESTORED_BYTES_TOTAL: &str = "cuckoo_gate_cache_restored_bytes_total";
pub(crate) const CACHE_LAST_SAVE_SECONDS: &str = "cuckoo_gate_cache_last_save_seconds";
pub(crate) const CACHE_LAST_RESTORE_SECONDS: &str = "cuckoo_gate_cache_last_restore_seconds";

// The gate's series (`cache/metrics.rs`, beside the admission counters).
pub(crate) const GATE_ROTATIONS_TOTAL: &str = "cuckoo_gate_gate_rotations_total";
pub(crate) const GATE_MEMORY_BYTES: &str = "cuckoo_gate_gate_memory_bytes";

/// Describes every metric (units and help text), once per process; called when the first
/// handle is registered.
pub(crate) fn describe() {
    static DESCRIBED: Once = Once::new();
    DESCRIBED.call_once(|| {
        describe_gauge!(FILTER_ITEMS, Unit::Count, "Fingerprints stored in the filter.");
        describe_gauge!(FILTER_SLOTS, Unit::Count, "Filter capacity in slots.");
        describe_gauge!(FILTER_LOAD_RATIO, "Items divided by slots, in [0, 1].");
        describe_gauge!(FILTER_MEMORY_BYTES, Unit::Bytes, "Memory held by the filter.");
        describe_gauge!(
            FILTER_FALSE_POSITIVE_RATIO,
            "Estimated false-positive rate at the current load, in [0, 1]."
        );
        describe_gauge!(FILTER_FINGERPRINT_WIDTH, Unit::Count, "Fingerprint width, in bits.");
        describe_counter!(FILTER_INSERTS_TOTAL, Unit::Count, "Successful inserts.");
        describe_counter!(FILTER_FAILED_INSERTS_TOTAL, Unit::Count, "Inserts that returned an error.");
        describe_counter!(FILTER_REMOVES_TOTAL, Unit::Count, "Fingerprints removed.");
        describe_counter!(FILTER_RELOCATIONS_TOTAL, Unit::Count, "Fingerprints moved to make room.");
        describe_counter!(FILTER_DOUBLINGS_TOTAL, Unit::Count, "Times the filter doubled its capacity.");
        describe_counter!(CACHE_HITS_TOTAL, Unit::Count, "Cache lookups that found their key.");
        describe_counter!(CACHE_MISSES_TOTAL, Unit::Count, "Cache lookups that did not.");
        describe_counter!(CACHE_ADMITTED_TOTAL, Unit::Count, "Misses stored in the cache.");
        describe_counter!(CACHE_REJECTED_TOTAL, Unit::Count, "Misses kept out by the policy.");
        describe_counter!(CACHE_EVICTIONS_TOTAL, Unit::Count, "Entries evicted to make room.");
        describe_counter!(
            CACHE_EXPIRATIONS_TOTAL,
            Unit::Count,
            "Entries removed because their lifetime ended."
        );
        describe_gauge!(CACHE_ENTRIES, Unit::Count, "Entries held by the cache.");
        describe_gauge!(
            CACHE_WEIGHT,
            "Total weight held, in the weigher's unit (bytes, say); entries, without a weigher."
        );
        describe_gauge!(
            CACHE_CAPACITY,
            "Most total weight the cache holds, in the weigher's unit; entries, without a weigher."
        );
        describe_counter!(CACHE_LOADS_TOTAL, Unit::Count, "Loaders run on misses (one per key at a time).");
        describe_counter!(
            CACHE_LOADS_COALESCED_TOTAL,
            Unit::Count,
            "Callers served by a load that another caller ran."
        );
        describe_counter!(
            CACHE_LOAD_FAILURES_TOTAL,
            Unit::Count,
            "Loads that ended without a value (error, panic, dropped future)."
        );
        describe_gauge!(CACHE_LOAD_WAITERS, Unit::Count, "Callers waiting now for another caller's load.");
        describe_counter!(CACHE_REFRESHES_TOTAL, Unit::Count, "Reloads of stale entries started.");
        describe_counter!(
            CACHE_REFRESH_FAILURES_TOTAL,
            Unit::Count,
            "Reloads of stale entries that failed (the old value stayed)."
        );
        describe_counter!(
            CACHE_STALE_SERVED_TOTAL,
            Unit::Count,
            "Loader calls given a stale value: while a reload ran, or in place of an error."
        );
        describe_counter!(
            CACHE_FAILURES_SHARED_TOTAL,
            Unit::Count,
            "Loader calls given the error of the load they waited for."
        );
        describe_counter!(
            CACHE_FAILURES_CACHED_TOTAL,
            Unit::Count,
            "Loader calls given a kept failure's error."
        );
        describe_gauge!(
            CACHE_FAILURES_KEPT,
            Unit::Count,
            "Failed loads kept now for their keys (negative caching)."
        );
        describe_counter!(
            CACHE_RESTORED_ENTRIES_TOTAL,
            Unit::Count,
            "Entries put back by restores of saved contents."
        );
        describe_counter!(
            CACHE_RESTORE_EXPIRED_TOTAL,
            Unit::Count,
            "Saved entries a restore dropped: their lifetime ended while the cache was down."
        );
        describe_counter!(
            CACHE_RESTORE_DROPPED_TOTAL,
            Unit::Count,
            "Saved entries a restore did not keep: evicted to make room, or too heavy for their shard (told to the listener)."
        );
        describe_counter!(CACHE_SAVED_BYTES_TOTAL, Unit::Bytes, "Bytes written by saves of the contents.");
        describe_counter!(
            CACHE_RESTORED_BYTES_TOTAL,
            Unit::Bytes,
            "Bytes read by restores of saved contents."
        );
        describe_gauge!(
            CACHE_LAST_SAVE_SECONDS,
            Unit::Seconds,
            "How long the last save of the contents took."
        );
        describe_gauge!(
            CACHE_LAST_RESTORE_SECONDS,
            Unit::Seconds,
            "How long the last restore of saved contents took."
        );
        describe_counter!(GATE_ROTATIONS_TOTAL, Unit::Count, "Generations started by the gate.");
        describe_gauge!(GATE_MEMORY_BYTES, Unit::Bytes, "Memory held by the gate's filters.");
    });
}
