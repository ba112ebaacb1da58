//! How long an insert into a full fixed-size filter takes to be refused, for both layouts:
//! fills a filter of 100k items until its first refusal, then times 10,000 inserts of new
//! keys one by one (most are refused; a few find a short path) and prints the quantiles.
//!
//! ```text
//! cargo run --release --example refused_insert
//! ```

use std::hint::black_box;
use std::time::{Duration, Instant};

use cuckoo_gate::{CuckooFilter, Layout};

const CAPACITY: usize = 100_000;
const TRIES: u64 = 10_000;

fn quantile(sorted: &[Duration], q: f64) -> Duration {
    sorted[((sorted.len() - 1) as f64 * q).round() as usize]
}

fn main() {
    println!("fixed-size filters of {CAPACITY} items at ε = 0.1%, filled to their first refusal; then {TRIES} inserts of new keys");
    println!("| layout | load at first refusal | first refusal | refused | p50 | p99 | max |");
    println!("|---|---|---|---|---|---|---|");
    for layout in [Layout::Buckets, Layout::Windows] {
        let filter = CuckooFilter::builder()
            .capacity(CAPACITY)
            .max_capacity(CAPACITY)
            .false_positive_rate(0.001)
            .layout(layout)
            .seed(1)
            .build()
            .unwrap();
        let mut key = 0u64;
        let first = loop {
            let start = Instant::now();
            let result = filter.insert(&key);
            let took = start.elapsed();
            key += 1;
            if result.is_err() {
                break took;
            }
        };
        let load = filter.stats().load_factor;
        let mut times = Vec::with_capacity(TRIES as usize);
        let mut refused = 0;
        for k in key..key + TRIES {
            let start = Instant::now();
            let result = black_box(filter.insert(&k));
            times.push(start.elapsed());
            refused += u64::from(result.is_err());
        }
        times.sort_unstable();
        println!(
            "| {layout:?} | {load:.4} | {first:.1?} | {refused} | {:.1?} | {:.1?} | {:.1?} |",
            quantile(&times, 0.5),
            quantile(&times, 0.99),
            times[times.len() - 1]
        );
    }
}
