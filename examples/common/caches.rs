//! The cache workloads shared by `benches/cache.rs` and `examples/cache_report.rs`: keys,
//! the caches compared, and one round of a workload.
#![allow(dead_code)]

use std::hint::black_box;
use std::num::NonZeroUsize;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use cuckoo_gate::AdmissionCache;

use super::common::key;

/// Objects the keys are drawn from.
pub const OBJECTS: usize = 1_000_000;
/// Entries every cache holds.
pub const CAPACITY: usize = 100_000;
/// Requests in one round.
pub const OPS: usize = 1_000_000;

/// The workloads: `get-heavy` is a read-through cache (`get`, and `insert` on a miss),
/// `mixed` half `get`, half `insert` of the key drawn, `get-or-insert` the read-through
/// through each cache's own get-or-insert call (coalesced where the cache coalesces).
pub const WORKLOADS: [&str; 3] = ["get-heavy", "mixed", "get-or-insert"];

/// `n` draws from Zipf(0.99) over [`OBJECTS`] keys, by inverse transform sampling.
pub fn zipf_requests(n: usize) -> Vec<u64> {
    zipf_ranks(n).into_iter().map(|rank| key(u64::from(rank) ^ 0xCAFE)).collect()
    // spread, not the rank
}

/// The objects' ranks of [`zipf_requests`]'s draws.
pub fn zipf_ranks(n: usize) -> Vec<u32> {
    let weights: Vec<f64> = (1..=OBJECTS).map(|rank| 1.0 / (rank as f64).powf(0.99)).collect();
    let total: f64 = weights.iter().sum();
    let cdf: Vec<f64> = weights
        .iter()
        .scan(0.0, |acc, w| {
            *acc += w / total;
            Some(*acc)
        })
        .collect();
    (0..n as u64)
        .map(|i| {
            let u = (key(i) >> 11) as f64 / (1u64 << 53) as f64;
            cdf.partition_point(|&c| c < u).min(OBJECTS - 1) as u32
        })
        .collect()
}

/// What the workloads need of a cache.
pub trait Cache: Sync {
    fn get(&self, key: u64) -> Option<u64>;
    fn insert(&self, key: u64, value: u64);
    /// The value of `key`, made (as `key`) and inserted on a miss through the cache's own
    /// get-or-insert call; whether it was a hit.
    fn get_or_insert(&self, key: u64) -> bool;
}

impl Cache for AdmissionCache<u64, u64> {
    fn get(&self, key: u64) -> Option<u64> {
        AdmissionCache::get(self, &key)
    }
    fn insert(&self, key: u64, value: u64) {
        black_box(AdmissionCache::insert(self, key, value));
    }
    fn get_or_insert(&self, key: u64) -> bool {
        let mut hit = true;
        black_box(self.get_or_insert_with(&key, || {
            hit = false;
            key
        }));
        hit
    }
}

impl Cache for quick_cache::sync::Cache<u64, u64> {
    fn get(&self, key: u64) -> Option<u64> {
        quick_cache::sync::Cache::get(self, &key)
    }
    fn insert(&self, key: u64, value: u64) {
        quick_cache::sync::Cache::insert(self, key, value);
    }
    fn get_or_insert(&self, key: u64) -> bool {
        let mut hit = true;
        let made = self.get_or_insert_with(&key, || {
            hit = false;
            Ok::<u64, std::convert::Infallible>(key)
        });
        black_box(made.ok());
        hit
    }
}

impl Cache for moka::sync::Cache<u64, u64> {
    fn get(&self, key: u64) -> Option<u64> {
        moka::sync::Cache::get(self, &key)
    }
    fn insert(&self, key: u64, value: u64) {
        moka::sync::Cache::insert(self, key, value);
    }
    fn get_or_insert(&self, key: u64) -> bool {
        let mut hit = true;
        black_box(self.get_with(key, || {
            hit = false;
            key
        }));
        hit
    }
}

impl Cache for tinyufo::TinyUfo<u64, u64> {
    fn get(&self, key: u64) -> Option<u64> {
        tinyufo::TinyUfo::get(self, &key)
    }
    fn insert(&self, key: u64, value: u64) {
        black_box(self.put(key, value, 1));
    }
    /// TinyUFO has no get-or-insert: a `get`, then a `put` on a miss.
    fn get_or_insert(&self, key: u64) -> bool {
        let hit = tinyufo::TinyUfo::get(self, &key).is_some();
        if !hit {
            black_box(self.put(key, key, 1));
        }
        hit
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
    fn get_or_insert(&self, key: u64) -> bool {
        let mut lru = self.lock().unwrap();
        let hit = lru.get(&key).is_some();
        if !hit {
            lru.put(key, key);
        }
        hit
    }
}

/// The caches compared, empty, each holding [`CAPACITY`] entries: `AdmissionCache` with
/// its default policy (S3-FIFO on the gate), the same with a time to live (an hour: the
/// cost of checking deadlines, none of which comes), quick_cache, moka (TinyLFU
/// admission), TinyUFO (TinyLFU admission, S3-FIFO eviction) and a `Mutex<lru::LruCache>`
/// (plain LRU), each as a user would build it.
pub fn peers() -> Vec<(&'static str, Box<dyn Cache>)> {
    peers_sharded(None)
}

/// [`peers`], with the two caches that shard by default (cuckoo-gate, 16 shards per core,
/// and quick_cache, 4 per core) given `shards` shards each instead when it is set.
pub fn peers_sharded(shards: Option<usize>) -> Vec<(&'static str, Box<dyn Cache>)> {
    let lru = lru::LruCache::with_hasher(NonZeroUsize::new(CAPACITY).unwrap(), ahash::RandomState::new());
    let mut ours = AdmissionCache::<u64, u64>::builder().capacity(CAPACITY as u64).seed(1);
    let hour = Duration::from_secs(3_600);
    let mut quick = quick_cache::OptionsBuilder::new();
    quick.estimated_items_capacity(CAPACITY).weight_capacity(CAPACITY as u64);
    if let Some(shards) = shards {
        ours = ours.shards(shards);
        quick.shards(shards);
    }
    let quick = quick_cache::sync::Cache::<u64, u64>::with_options(
        quick.build().unwrap(),
        Default::default(),
        Default::default(),
        Default::default(),
    );
    vec![
        ("cuckoo-gate", Box::new(ours.clone().build().unwrap())),
        ("cuckoo-gate+ttl", Box::new(ours.time_to_live(hour).build().unwrap())),
        ("quick_cache-0.7", Box::new(quick)),
        ("moka-0.12", Box::new(moka::sync::Cache::<u64, u64>::new(CAPACITY as u64))),
        ("TinyUFO-0.9", Box::new(tinyufo::TinyUfo::<u64, u64>::new(CAPACITY, CAPACITY))),
        ("mutex-lru-0.19", Box::new(Mutex::new(lru))),
    ]
}

/// Whether request `i` of the mixed workload is a `get` (half of them, spread evenly and
/// independently of the key).
fn mixed_get(i: usize) -> bool {
    key(i as u64) & 1 == 0
}

/// Runs one round of `workload` over `requests`, split over `threads` threads: the wall
/// time, and the share of its `get`s that hit.
pub fn round(cache: &dyn Cache, workload: &str, requests: &[u64], threads: usize) -> (Duration, f64) {
    let (gets, hits) = (AtomicU64::new(0), AtomicU64::new(0));
    let chunk = requests.len().div_ceil(threads);
    let start = Instant::now();
    std::thread::scope(|s| {
        for (n, part) in requests.chunks(chunk).enumerate() {
            let (gets, hits) = (&gets, &hits);
            s.spawn(move || {
                let (mut g, mut h) = (0, 0);
                for (i, &k) in part.iter().enumerate() {
                    if workload == "get-or-insert" {
                        g += 1;
                        h += u64::from(cache.get_or_insert(k));
                    } else if workload == "get-heavy" || mixed_get(n * chunk + i) {
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
    let elapsed = start.elapsed();
    (elapsed, hits.into_inner() as f64 / gets.into_inner() as f64)
}

/// What the `String`-key workload needs of a cache: each is asked with the `&str` a
/// request handler holds, as its docs suggest, and given an owned key only to store.
/// (`'a` is the paths' lifetime: TinyUFO keeps only its keys' hashes, so it takes the
/// `&str` itself as its key.)
pub trait StrCache<'a>: Sync {
    fn get(&self, key: &'a str) -> Option<u64>;
    fn insert(&self, key: &'a str, value: u64);
}

impl<'a> StrCache<'a> for AdmissionCache<String, u64> {
    fn get(&self, key: &'a str) -> Option<u64> {
        AdmissionCache::get(self, key)
    }
    fn insert(&self, key: &'a str, value: u64) {
        black_box(AdmissionCache::insert(self, key.to_owned(), value));
    }
}

impl<'a> StrCache<'a> for quick_cache::sync::Cache<String, u64> {
    fn get(&self, key: &'a str) -> Option<u64> {
        quick_cache::sync::Cache::get(self, key)
    }
    fn insert(&self, key: &'a str, value: u64) {
        quick_cache::sync::Cache::insert(self, key.to_owned(), value);
    }
}

impl<'a> StrCache<'a> for moka::sync::Cache<String, u64> {
    fn get(&self, key: &'a str) -> Option<u64> {
        moka::sync::Cache::get(self, key)
    }
    fn insert(&self, key: &'a str, value: u64) {
        moka::sync::Cache::insert(self, key.to_owned(), value);
    }
}

impl<'a> StrCache<'a> for tinyufo::TinyUfo<&'a str, u64> {
    fn get(&self, key: &'a str) -> Option<u64> {
        tinyufo::TinyUfo::get(self, &key)
    }
    fn insert(&self, key: &'a str, value: u64) {
        black_box(self.put(key, value, 1));
    }
}

/// The paths of the `String`-key workload: one per object, as a URL path of 30 bytes.
pub fn paths() -> Vec<String> {
    (0..OBJECTS as u64).map(|i| format!("/objects/{:021x}", key(i ^ 0xCAFE) >> 1)).collect()
}

/// The caches compared on `String` keys, empty, each holding [`CAPACITY`] entries, built
/// as their docs show.
pub fn string_peers<'a>() -> Vec<(&'static str, Box<dyn StrCache<'a> + 'a>)> {
    let ours = AdmissionCache::<String, u64>::builder().capacity(CAPACITY as u64).build().unwrap();
    vec![
        ("cuckoo-gate", Box::new(ours)),
        ("quick_cache-0.7", Box::new(quick_cache::sync::Cache::<String, u64>::new(CAPACITY))),
        ("moka-0.12", Box::new(moka::sync::Cache::<String, u64>::new(CAPACITY as u64))),
        ("TinyUFO-0.9", Box::new(tinyufo::TinyUfo::<&'a str, u64>::new(CAPACITY, CAPACITY))),
    ]
}

/// One round of the read-through (`get`, and `insert` on a miss) over `requests` (indices
/// into `paths`) on `String` keys, split over `threads` threads: the wall time, and the
/// share of `get`s that hit.
pub fn string_round<'a>(
    cache: &dyn StrCache<'a>,
    paths: &'a [String],
    requests: &[u32],
    threads: usize,
) -> (Duration, f64) {
    let hits = AtomicU64::new(0);
    let chunk = requests.len().div_ceil(threads);
    let start = Instant::now();
    std::thread::scope(|s| {
        for part in requests.chunks(chunk) {
            let hits = &hits;
            s.spawn(move || {
                let mut h = 0;
                for &i in part {
                    let path: &'a str = &paths[i as usize];
                    match cache.get(path) {
                        Some(_) => h += 1,
                        None => cache.insert(path, u64::from(i)),
                    }
                }
                hits.fetch_add(h, Ordering::Relaxed);
            });
        }
    });
    (start.elapsed(), hits.into_inner() as f64 / requests.len() as f64)
}
