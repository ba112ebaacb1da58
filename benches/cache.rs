//! Cache benchmarks: `AdmissionCache` against `moka`, `quick_cache` and a
//! `Mutex<lru::LruCache>`, all in the same run.
//!
//! ```text
//! cargo bench --bench cache
//! ```
//!
//! Keys follow Zipf(0.99) over 1M objects; the caches hold 100k entries of `u64` values.
//! Each timed iteration is 1M operations split over the threads (1, 2, and every core
//! when the machine has more than 2):
//!
//! * `get-heavy`: `get`, and on a miss `insert` (a read-through cache);
//! * `mixed`: half `get`, half `insert` of the key drawn.
//!
//! `AdmissionCache` runs its default policy (S3-FIFO on the gate); moka runs TinyLFU
//! admission, quick_cache its CLOCK-PRO-like policy, lru plain LRU. Before timing, each
//! cache's hit ratio on one round is printed (share of `get`s that hit, one thread), since
//! a fast cache with a worse hit ratio is no win.

use std::hash::BuildHasherDefault;
use std::hint::black_box;
use std::num::NonZeroUsize;
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use cuckoo_gate::AdmissionCache;

#[path = "../examples/common/mod.rs"]
mod common;
use common::key;

const OBJECTS: usize = 1_000_000;
const CAPACITY: usize = 100_000;
const OPS: usize = 1_000_000;

/// 4M draws from Zipf(0.99) over `OBJECTS` keys, by inverse transform sampling, made once.
fn requests() -> &'static [u64] {
    static REQUESTS: OnceLock<Vec<u64>> = OnceLock::new();
    REQUESTS.get_or_init(|| {
        let weights: Vec<f64> = (1..=OBJECTS).map(|rank| 1.0 / (rank as f64).powf(0.99)).collect();
        let total: f64 = weights.iter().sum();
        let cdf: Vec<f64> = weights
            .iter()
            .scan(0.0, |acc, w| {
                *acc += w / total;
                Some(*acc)
            })
            .collect();
        (0..4 * OPS as u64)
            .map(|i| {
                let u = (key(i) >> 11) as f64 / (1u64 << 53) as f64;
                let rank = cdf.partition_point(|&c| c < u).min(OBJECTS - 1);
                key(rank as u64 ^ 0xCAFE) // the object's key: spread, not its rank
            })
            .collect()
    })
}

/// What the benchmarks need of a cache.
trait Cache: Sync {
    fn get(&self, key: u64) -> Option<u64>;
    fn insert(&self, key: u64, value: u64);
}

impl Cache for AdmissionCache<u64, u64> {
    fn get(&self, key: u64) -> Option<u64> {
        AdmissionCache::get(self, &key)
    }
    fn insert(&self, key: u64, value: u64) {
        black_box(AdmissionCache::insert(self, key, value));
    }
}

impl Cache for moka::sync::Cache<u64, u64> {
    fn get(&self, key: u64) -> Option<u64> {
        moka::sync::Cache::get(self, &key)
    }
    fn insert(&self, key: u64, value: u64) {
        moka::sync::Cache::insert(self, key, value);
    }
}

type QuickCache = quick_cache::sync::Cache<u64, u64>;

impl Cache for QuickCache {
    fn get(&self, key: u64) -> Option<u64> {
        QuickCache::get(self, &key)
    }
    fn insert(&self, key: u64, value: u64) {
        QuickCache::insert(self, key, value);
    }
}

type Lru = Mutex<lru::LruCache<u64, u64, BuildHasherDefault<ahash::AHasher>>>;

impl Cache for Lru {
    fn get(&self, key: u64) -> Option<u64> {
        self.lock().unwrap().get(&key).copied()
    }
    fn insert(&self, key: u64, value: u64) {
        self.lock().unwrap().put(key, value);
    }
}

/// A peer's name and how to make an empty one.
type Peer = (&'static str, Box<dyn Fn() -> Box<dyn Cache>>);

fn peers() -> Vec<Peer> {
    vec![
        (
            "cuckoo-gate",
            Box::new(|| {
                Box::new(AdmissionCache::<u64, u64>::builder().capacity(CAPACITY).seed(1).build().unwrap())
            }),
        ),
        ("moka-0.12", Box::new(|| Box::new(moka::sync::Cache::<u64, u64>::new(CAPACITY as u64)))),
        ("quick_cache-0.7", Box::new(|| Box::new(QuickCache::new(CAPACITY)))),
        (
            "mutex-lru-0.19",
            Box::new(|| {
                let capacity = NonZeroUsize::new(CAPACITY).unwrap();
                Box::new(Mutex::new(lru::LruCache::with_hasher(capacity, BuildHasherDefault::default())))
            }),
        ),
    ]
}

/// Runs `op` on each request of `requests` (and its index) split over `threads` threads.
fn timed(threads: usize, requests: &[u64], op: &(dyn Fn(usize, u64) + Sync)) -> Duration {
    let start = Instant::now();
    let chunk = requests.len().div_ceil(threads);
    std::thread::scope(|s| {
        for (n, part) in requests.chunks(chunk).enumerate() {
            s.spawn(move || part.iter().enumerate().for_each(|(i, &k)| op(n * chunk + i, k)));
        }
    });
    start.elapsed()
}

/// Whether request `i` of the mixed workload is a `get` (half of them, spread evenly
/// and independently of the key).
fn mixed_get(i: usize) -> bool {
    key(i as u64) & 1 == 0
}

/// Share of the `get`s of one round that hit, replayed on one thread as the workload does.
fn hit_ratio(cache: &dyn Cache, requests: &[u64], workload: &str) -> f64 {
    let (mut gets, mut hits) = (0u64, 0u64);
    for (i, &k) in requests.iter().enumerate() {
        if workload == "get-heavy" || mixed_get(i) {
            gets += 1;
            match cache.get(k) {
                Some(_) => hits += 1,
                None if workload == "get-heavy" => cache.insert(k, k),
                None => {}
            }
        } else {
            cache.insert(k, k);
        }
    }
    hits as f64 / gets as f64
}

fn caches(c: &mut Criterion) {
    let cores = std::thread::available_parallelism().map_or(1, |c| c.get());
    let threads: Vec<usize> = if cores > 2 { vec![1, 2, cores] } else { vec![1, 2] };
    let all = requests();
    for workload in ["get-heavy", "mixed"] {
        let mut group = c.benchmark_group(format!("cache/{workload}"));
        group
            .throughput(Throughput::Elements(OPS as u64))
            .sample_size(10)
            .warm_up_time(Duration::from_secs(1));
        for (label, make) in peers() {
            for &t in &threads {
                let cache = make();
                let cache = &*cache;
                let op: &(dyn Fn(usize, u64) + Sync) = match workload {
                    "get-heavy" => &|_, k| {
                        if cache.get(k).is_none() {
                            cache.insert(k, k);
                        }
                    },
                    _ => &|i, k| {
                        if mixed_get(i) {
                            black_box(cache.get(k));
                        } else {
                            cache.insert(k, k);
                        }
                    },
                };
                // Warm the cache with the first quarter of the requests, then cycle through
                // the other three.
                timed(t, &all[..OPS], op);
                if t == 1 {
                    println!(
                        "{workload} {label}: hit ratio {:.4}",
                        hit_ratio(cache, &all[OPS..2 * OPS], workload)
                    );
                }
                let mut round = 0;
                group.bench_function(format!("{label}/{t}t"), |b| {
                    b.iter_custom(|iters| {
                        (0..iters)
                            .map(|_| {
                                round = round % 3 + 1;
                                timed(t, &all[round * OPS..(round + 1) * OPS], op)
                            })
                            .sum()
                    })
                });
            }
        }
        group.finish();
    }
}

criterion_group!(benches, caches);
criterion_main!(benches);
