//! What Pingora's admission policy costs: `SecondRequest::observe` against Pingora's own
//! `CacheKey::combined_bin()` (which `observe` calls) and against an exact second-hit
//! map behind a mutex (pingora-cache's test policy, keyed by the 16-byte hash).
//!
//! ```text
//! cargo bench --features pingora --bench pingora
//! ```
//!
//! 1M distinct keys (`/object/N`), one thread; the gate remembers 1M first sightings.
//! Each timed iteration observes every key once: the first round records them, later
//! rounds find them seen (as on a CDN node, most observations of a popular key are not
//! its first). Before timing, the memory of the gate and of the exact map is printed.

use std::collections::HashMap;
use std::hint::black_box;
use std::sync::Mutex;
use std::time::Duration;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use cuckoo_gate::pingora::SecondRequest;
use cuckoo_gate::SeenBefore;
use pingora_cache::admission::AdmissionPolicy;
use pingora_cache::key::{CacheHashKey, HashBinary};
use pingora_cache::CacheKey;

const KEYS: usize = 1_000_000;

/// An exact second-hit policy: a count per key's 16-byte hash, behind a mutex.
struct ExactSecondHit(Mutex<HashMap<HashBinary, u32>>);

impl ExactSecondHit {
    fn observe(&self, key: &CacheKey) -> bool {
        let mut seen = self.0.lock().unwrap();
        let count = seen.entry(key.combined_bin()).or_insert(0);
        *count = count.saturating_add(1);
        *count >= 2
    }

    /// Bytes of its table: hashbrown's buckets (a power of two, at most 7/8 full) of one
    /// entry and one control byte each.
    fn memory_bytes(&self) -> usize {
        let seen = self.0.lock().unwrap();
        let buckets = (seen.capacity() * 8 / 7).next_power_of_two();
        buckets * (std::mem::size_of::<(HashBinary, u32)>() + 1)
    }
}

fn observe(c: &mut Criterion) {
    let keys: Vec<CacheKey> = (0..KEYS).map(|i| CacheKey::new(format!("/object/{i}"), "")).collect();
    let policy = SecondRequest::new(SeenBefore::builder().capacity(KEYS).build().expect("a gate"));
    let exact = ExactSecondHit(Mutex::new(HashMap::new()));
    for key in &keys {
        policy.observe(key);
        exact.observe(key);
    }
    let (gate, map) = (policy.gate().stats().memory_bytes, exact.memory_bytes());
    println!(
        "memory for {KEYS} keys: gate {:.1} MB, exact map {:.1} MB (gate / map = 1/{:.1})",
        gate as f64 / 1e6,
        map as f64 / 1e6,
        map as f64 / gate as f64
    );

    let mut group = c.benchmark_group("pingora/observe");
    group.throughput(Throughput::Elements(KEYS as u64)).sample_size(10).warm_up_time(Duration::from_secs(1));
    group.bench_function("combined_bin", |b| {
        b.iter(|| keys.iter().for_each(|key| _ = black_box(key.combined_bin())))
    });
    group.bench_function("SecondRequest", |b| {
        b.iter(|| keys.iter().for_each(|key| _ = black_box(policy.observe(black_box(key)))))
    });
    group.bench_function("exact map", |b| {
        b.iter(|| keys.iter().for_each(|key| _ = black_box(exact.observe(black_box(key)))))
    });
    group.finish();
}

criterion_group!(benches, observe);
criterion_main!(benches);
