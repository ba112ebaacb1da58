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
//! `AdmissionCache` runs its default policy (`Probation`, whose gate sees every miss);
//! moka runs TinyLFU admission, quick_cache S3-FIFO, lru plain LRU.

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

/// Runs `op` on each request of `requests` split over `threads` threads.
fn timed(threads: usize, requests: &[u64], op: &(dyn Fn(u64) + Sync)) -> Duration {
    let start = Instant::now();
    std::thread::scope(|s| {
        for part in requests.chunks(requests.len().div_ceil(threads)) {
            s.spawn(move || part.iter().for_each(|&k| op(k)));
        }
    });
    start.elapsed()
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
                let op: &(dyn Fn(u64) + Sync) = match workload {
                    "get-heavy" => &|k| {
                        if cache.get(k).is_none() {
                            cache.insert(k, k);
                        }
                    },
                    _ => &|k| {
                        if k & 1 == 0 {
                            black_box(cache.get(k));
                        } else {
                            cache.insert(k, k);
                        }
                    },
                };
                // Warm the cache with the first quarter of the requests, then cycle through
                // the other three.
                timed(t, &all[..OPS], op);
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
