//! The metrics published by filters and caches (feature `metrics`), read back through
//! `metrics-util`'s debugging recorder.
#![cfg(feature = "metrics")]

use std::time::Duration;

use cuckoo_gate::{AdmissionCache, AdmissionPolicy, BuildError, Clock, CuckooFilter};
use metrics_util::debugging::{DebugValue, DebuggingRecorder};

/// One snapshot (taking a snapshot drains the recorder's counters), keyed by name and label.
type Snapshot = Vec<(String, String, DebugValue)>;

fn snapshot(recorder: &DebuggingRecorder) -> Snapshot {
    let mut out = Vec::new();
    for (key, _, _, value) in recorder.snapshotter().snapshot().into_vec() {
        let key = key.key();
        let label = key.labels().find(|l| l.key() == "name").map_or(String::new(), |l| l.value().to_owned());
        out.push((key.name().to_owned(), label, value));
    }
    out
}

fn value<'a>(snapshot: &'a Snapshot, name: &str, label: &str) -> Option<&'a DebugValue> {
    snapshot.iter().find(|(n, l, _)| n == name && l == label).map(|(_, _, v)| v)
}

#[test]
fn filter_and_cache_publish_their_counters() {
    let recorder = DebuggingRecorder::new();
    let filter = CuckooFilter::builder().capacity(1_000).metrics_name("f").build().unwrap();
    let cache: AdmissionCache<u64, u64> = AdmissionCache::builder()
        .capacity(10)
        .admission(AdmissionPolicy::SecondHit)
        .metrics_name("c")
        .build()
        .unwrap();
    for k in 0..100u32 {
        filter.insert(&k).unwrap();
    }
    filter.remove(&7u32);
    for _ in 0..2 {
        if cache.get(&1).is_none() {
            let _ = cache.insert(1, 1);
        }
    }
    cache.get(&1);
    // Built before the recorder was in place: publishing finds the one in place now.
    metrics::with_local_recorder(&recorder, || {
        filter.publish_metrics();
        cache.publish_metrics();
    });
    let snap = snapshot(&recorder);

    assert_eq!(value(&snap, "cuckoo_gate_filter_items", "f"), Some(&DebugValue::Gauge(99.0.into())));
    assert_eq!(value(&snap, "cuckoo_gate_filter_inserts_total", "f"), Some(&DebugValue::Counter(100)));
    assert_eq!(value(&snap, "cuckoo_gate_filter_removes_total", "f"), Some(&DebugValue::Counter(1)));
    let slots = filter.capacity() as f64;
    assert_eq!(value(&snap, "cuckoo_gate_filter_slots", "f"), Some(&DebugValue::Gauge(slots.into())));
    assert_eq!(value(&snap, "cuckoo_gate_cache_hits_total", "c"), Some(&DebugValue::Counter(1)));
    assert_eq!(value(&snap, "cuckoo_gate_cache_misses_total", "c"), Some(&DebugValue::Counter(2)));
    assert_eq!(value(&snap, "cuckoo_gate_cache_rejected_total", "c"), Some(&DebugValue::Counter(1)));
    assert_eq!(value(&snap, "cuckoo_gate_cache_admitted_total", "c"), Some(&DebugValue::Counter(1)));
    assert_eq!(value(&snap, "cuckoo_gate_cache_entries", "c"), Some(&DebugValue::Gauge(1.0.into())));
}

#[test]
fn nothing_is_registered_without_a_name() {
    let recorder = DebuggingRecorder::new();
    metrics::with_local_recorder(&recorder, || {
        let filter = CuckooFilter::with_capacity(100);
        filter.insert("k").unwrap();
        filter.publish_metrics();
    });
    assert!(snapshot(&recorder).is_empty());
}

#[test]
fn a_metrics_name_is_held_by_one_live_instance() {
    let build = || AdmissionCache::<u64, u64>::builder().capacity(10).metrics_name("one").build();
    let first = build().unwrap();
    assert_eq!(build().unwrap_err(), BuildError::MetricsNameTaken { name: "one".into() });
    let filter = CuckooFilter::builder().capacity(10).metrics_name("one").build();
    assert!(filter.is_ok(), "a filter's series are apart from a cache's");
    drop(first);
    assert!(build().is_ok(), "free again once the first is dropped");
}

#[test]
fn weighted_and_expiring_caches_publish_weight_and_expirations() {
    let (clock, hand) = Clock::manual();
    let cache: AdmissionCache<u64, Vec<u8>> = AdmissionCache::builder()
        .capacity(1 << 20)
        .weigher(|_, value: &Vec<u8>| value.len() as u32)
        .estimated_entries(100)
        .time_to_live(Duration::from_secs(1))
        .clock(clock)
        .metrics_name("bytes")
        .build()
        .unwrap();
    for k in 0..10 {
        let _ = cache.insert(k, vec![0; 1_000]);
    }
    hand.advance(Duration::from_secs(1));
    let _ = cache.insert(10, vec![0; 500]);
    cache.purge_expired();
    let recorder = DebuggingRecorder::new();
    metrics::with_local_recorder(&recorder, || cache.publish_metrics());
    let snap = snapshot(&recorder);
    assert_eq!(value(&snap, "cuckoo_gate_cache_weight", "bytes"), Some(&DebugValue::Gauge(500.0.into())));
    assert_eq!(value(&snap, "cuckoo_gate_cache_expirations_total", "bytes"), Some(&DebugValue::Counter(10)));
    let capacity = f64::from(1u32 << 20);
    assert_eq!(
        value(&snap, "cuckoo_gate_cache_capacity", "bytes"),
        Some(&DebugValue::Gauge(capacity.into()))
    );
}
