//! What the bounded sweep leaves behind: expired entries a cache still holds, and the hit
//! ratio they cost, against reclaiming every expired entry within a fixed delay (what a
//! timer wheel does, at the price of a record per entry and work on every write).
//!
//! ```text
//! cargo run --release --example expiry_reclaim
//! ```
//!
//! Requests are Zipf(0.99) over 1M keys (`benches/cache.rs`'s), a read-through (`get`,
//! and `insert` on a miss) into a cache of 50,000 entries, default policy and shards.
//! Time is a [`Clock::manual`] moved 1 ms per request. Each key's lifetime is 1, 2, 4 or
//! 8 times a base (fixed by a hash of the key): 12.5, 125 or 1,250 s, around the time the
//! sweep takes to pass over every slot (each write looks at two slots, so a pass takes
//! capacity / 2 writes: 60 to 90 s of requests at the miss ratios here). Two ways to
//! reclaim, on the same requests:
//!
//! - `sweep`: what the cache does by itself (each write looks at two slots, and eviction
//!   takes an expired victim first).
//! - `every 1 s`: the same, and `purge_expired()` every 1,000 requests, so that no expired
//!   entry is held more than 1 s: a wheel with 1 s buckets, driven by writes.
//!
//! Printed per base: the hit ratio (an expired entry is a miss), and the share of the
//! capacity that expired entries hold, sampled every 10,000 requests (`len()` less the
//! entries `iter()` yields).

use std::time::Duration;

use cuckoo_gate::{AdmissionCache, Clock};

#[path = "common/caches.rs"]
mod caches;
mod common;

const CAPACITY: usize = 50_000;
const REQUESTS: usize = 2_000_000;
const SAMPLE_EVERY: usize = 10_000;
const PURGE_EVERY: usize = 1_000;

struct Outcome {
    hit_ratio: f64,
    expired_share: f64,
    expired_share_max: f64,
}

fn run(requests: &[u64], base_ms: u64, purge: bool) -> Outcome {
    let (clock, hand) = Clock::manual();
    let cache: AdmissionCache<u64, u64> = AdmissionCache::builder()
        .capacity(CAPACITY as u64)
        .clock(clock)
        .seed(3)
        .build()
        .expect("a valid cache");
    let (mut hits, mut shares) = (0u64, Vec::new());
    for (i, &key) in requests.iter().enumerate() {
        hand.advance(Duration::from_millis(1));
        if cache.get(&key).is_some() {
            hits += 1;
        } else {
            let lifetime = base_ms << (common::key(key) >> 62);
            let _ = cache.insert_with_ttl(key, key, Duration::from_millis(lifetime));
        }
        if purge && i % PURGE_EVERY == 0 {
            cache.purge_expired();
        }
        if i % SAMPLE_EVERY == SAMPLE_EVERY - 1 {
            let held = cache.len();
            let live = cache.iter().count();
            shares.push((held - live) as f64 / CAPACITY as f64);
        }
    }
    Outcome {
        hit_ratio: hits as f64 / requests.len() as f64,
        expired_share: shares.iter().sum::<f64>() / shares.len() as f64,
        expired_share_max: shares.iter().copied().fold(0.0, f64::max),
    }
}

fn main() {
    let requests = caches::zipf_requests(REQUESTS);
    println!(
        "Zipf(0.99) over 1M keys, {REQUESTS} requests 1 ms apart, read-through into {CAPACITY} entries; \
         lifetimes 1, 2, 4 or 8 x base"
    );
    println!("| base lifetime | reclaim | hit ratio | expired share of capacity, mean | max |");
    println!("|---|---|---|---|---|");
    for base_ms in [12_500, 125_000, 1_250_000] {
        for (label, purge) in [("sweep", false), ("every 1 s", true)] {
            let o = run(&requests, base_ms, purge);
            println!(
                "| {:.1} s | {label} | {:.4} | {:.2}% | {:.2}% |",
                base_ms as f64 / 1000.0,
                o.hit_ratio,
                o.expired_share * 100.0,
                o.expired_share_max * 100.0
            );
        }
    }
}
