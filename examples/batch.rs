//! Batched lookups, measured: `contains_batch` against one `contains` per key on a filter
//! far larger than the CPU cache (n = 50M keys, ε = 0.1%, about 85 MB).
//!
//! ```text
//! cargo run --release --example batch             # n = 50M
//! cargo run --release --example batch -- --quick  # n = 5M
//! ```
//!
//! Reports single-thread lookups per second for present and absent keys, medians of 5
//! rounds of 10M lookups each, and checks that both ways give the same answers.

use std::hint::black_box;
use std::time::Instant;

use cuckoo_gate::CuckooFilter;

mod common;
use common::{key, median};

const LOOKUPS: u64 = 10_000_000;
const ABSENT: u64 = 1 << 62;

/// Million lookups per second of `run` over `keys`, median of 5 rounds.
fn rate(keys: &[u64], mut run: impl FnMut(&[u64]) -> usize) -> (f64, usize) {
    let mut hits = 0;
    let rates = (0..5)
        .map(|_| {
            let start = Instant::now();
            hits = black_box(run(keys));
            keys.len() as f64 / start.elapsed().as_secs_f64() / 1e6
        })
        .collect();
    (median(rates), hits)
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let n: u64 = if std::env::args().any(|a| a == "--quick") { 5_000_000 } else { 50_000_000 };
    let filter = CuckooFilter::builder().capacity(n as usize).max_capacity(n as usize).seed(1).build()?;
    (0..n).try_for_each(|i| filter.insert(&key(i)))?;
    println!("n = {n}, {:.1} MB, {} lookups per round", filter.memory_usage() as f64 / 1e6, LOOKUPS);
    println!("| keys | one by one (M/s) | contains_batch (M/s) | ratio |");
    println!("|---|---|---|---|");
    for (label, first) in [("present", 0), ("absent", ABSENT)] {
        // Spread over the whole table: every n / LOOKUPS-th key.
        let step = (n / LOOKUPS).max(1);
        let keys: Vec<u64> = (0..LOOKUPS).map(|i| key(first + (i * step) % n)).collect();
        let (single, single_hits) = rate(&keys, |keys| keys.iter().filter(|k| filter.contains(*k)).count());
        let mut found = vec![false; keys.len()];
        let (batched, batched_hits) = rate(&keys, |keys| {
            filter.contains_batch(keys, &mut found);
            found.iter().filter(|&&f| f).count()
        });
        assert_eq!(single_hits, batched_hits, "contains_batch disagrees with contains");
        println!("| {label} | {single:.1} | {batched:.1} | {:.2}x |", batched / single);
    }
    Ok(())
}
