//! Cache throughput against the caches users would pick instead, measured so that a noisy
//! machine hits every cache alike: rounds alternate between the caches, and each ratio is
//! the median of the per-round ratios.
//!
//! ```text
//! cargo run --release --example cache_report                 # 1 and 2 threads (and all cores)
//! cargo run --release --example cache_report -- --rounds 15
//! ```
//!
//! The workloads are `benches/cache.rs`'s: keys from Zipf(0.99) over 1M objects, caches of
//! 100k entries holding `u64` values; `get-heavy` is a read-through (`get`, and `insert` on
//! a miss), `mixed` half `get`, half `insert`. Every cache is warmed with 1M requests,
//! then each round replays the same 1M requests, split over the threads. The hit ratio is
//! that of the `get`s of the last round. `AdmissionCache` runs its default policy.

use std::hint::black_box;
use std::num::NonZeroUsize;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::Instant;

use cuckoo_gate::AdmissionCache;

mod common;
use common::{key, median};

const OBJECTS: usize = 1_000_000;
const CAPACITY: usize = 100_000;
const OPS: usize = 1_000_000;

/// `2 * OPS` draws from Zipf(0.99) over `OBJECTS` keys (warm-up, then the timed round).
fn requests() -> Vec<u64> {
    let weights: Vec<f64> = (1..=OBJECTS).map(|rank| 1.0 / (rank as f64).powf(0.99)).collect();
    let total: f64 = weights.iter().sum();
    let mut sum = 0.0;
    let cdf: Vec<f64> = weights
        .iter()
        .map(|w| {
            sum += w / total;
            sum
        })
        .collect();
    (0..2 * OPS as u64)
        .map(|i| {
            let u = (key(i) >> 11) as f64 / (1u64 << 53) as f64;
            let rank = cdf.partition_point(|&c| c < u).min(OBJECTS - 1);
            key(rank as u64 ^ 0xCAFE)
        })
        .collect()
}

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

impl Cache for quick_cache::sync::Cache<u64, u64> {
    fn get(&self, key: u64) -> Option<u64> {
        quick_cache::sync::Cache::get(self, &key)
    }
    fn insert(&self, key: u64, value: u64) {
        quick_cache::sync::Cache::insert(self, key, value);
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

type Lru = Mutex<lru::LruCache<u64, u64, ahash::RandomState>>;

impl Cache for Lru {
    fn get(&self, key: u64) -> Option<u64> {
        self.lock().unwrap().get(&key).copied()
    }
    fn insert(&self, key: u64, value: u64) {
        self.lock().unwrap().put(key, value);
    }
}

fn peers() -> Vec<(&'static str, Box<dyn Cache>)> {
    let lru = lru::LruCache::with_hasher(NonZeroUsize::new(CAPACITY).unwrap(), ahash::RandomState::new());
    vec![
        ("cuckoo-gate", Box::new(AdmissionCache::<u64, u64>::builder().capacity(CAPACITY).build().unwrap())),
        ("quick_cache 0.7", Box::new(quick_cache::sync::Cache::<u64, u64>::new(CAPACITY))),
        ("moka 0.12", Box::new(moka::sync::Cache::<u64, u64>::new(CAPACITY as u64))),
        ("Mutex<lru> 0.19", Box::new(Mutex::new(lru))),
    ]
}

/// Whether request `i` of the mixed workload is a `get`.
fn mixed_get(i: usize) -> bool {
    key(i as u64) & 1 == 0
}

/// Runs one round of `workload` on `requests` over `threads` threads: million operations
/// per second, and the `get`s' hit ratio.
fn round(cache: &dyn Cache, workload: &str, requests: &[u64], threads: usize) -> (f64, f64) {
    let (gets, hits) = (AtomicU64::new(0), AtomicU64::new(0));
    let chunk = requests.len().div_ceil(threads);
    let start = Instant::now();
    std::thread::scope(|s| {
        for (n, part) in requests.chunks(chunk).enumerate() {
            let (gets, hits) = (&gets, &hits);
            s.spawn(move || {
                let (mut g, mut h) = (0, 0);
                for (i, &k) in part.iter().enumerate() {
                    if workload == "get-heavy" || mixed_get(n * chunk + i) {
                        g += 1;
                        match cache.get(k) {
                            Some(_) => h += 1,
                            None if workload == "get-heavy" => cache.insert(k, k),
                            None => {}
                        }
                    } else {
                        cache.insert(k, k);
                    }
                }
                gets.fetch_add(g, Ordering::Relaxed);
                hits.fetch_add(h, Ordering::Relaxed);
            });
        }
    });
    let mops = requests.len() as f64 / start.elapsed().as_secs_f64() / 1e6;
    (mops, hits.into_inner() as f64 / gets.into_inner() as f64)
}

fn main() {
    let mut rounds = 9;
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        match (arg.as_str(), args.next().and_then(|v| v.parse().ok())) {
            ("--rounds", Some(n)) if n > 0 => rounds = n,
            _ => {
                eprintln!("usage: cache_report [--rounds N]");
                std::process::exit(2);
            }
        }
    }
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let threads: Vec<usize> = if cores > 2 { vec![1, 2, cores] } else { vec![1, 2] };
    let requests = requests();
    let (warm, timed) = requests.split_at(OPS);
    println!("{rounds} alternating rounds of {OPS} requests; Mops/s are medians, ratios medians of per-round ratios");
    for workload in ["get-heavy", "mixed"] {
        for &t in &threads {
            let caches = peers();
            for (_, cache) in &caches {
                round(&**cache, workload, warm, t);
            }
            let mut mops = vec![Vec::new(); caches.len()];
            let mut ratios = vec![Vec::new(); caches.len()];
            let mut hit_ratio = vec![0.0; caches.len()];
            for _ in 0..rounds {
                let results: Vec<(f64, f64)> =
                    caches.iter().map(|(_, c)| round(&**c, workload, timed, t)).collect();
                for (i, &(m, h)) in results.iter().enumerate() {
                    mops[i].push(m);
                    ratios[i].push(results[0].0 / m);
                    hit_ratio[i] = h;
                }
            }
            println!();
            println!("## {workload}, {t} thread(s)");
            println!("| cache | Mops/s | cuckoo-gate / cache | hit ratio |");
            println!("|---|---|---|---|");
            for (i, (name, _)) in caches.iter().enumerate() {
                let (m, r) = (median(mops[i].clone()), median(ratios[i].clone()));
                println!("| {name} | {m:.2} | {r:.2} | {:.4} |", hit_ratio[i]);
            }
        }
    }
}
