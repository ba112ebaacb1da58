//! Space, accuracy and single-thread speed of `CuckooFilter`, with the `cuckoofilter` 0.5
//! crate measured in the same run.
//!
//! ```text
//! cargo run --release --example filter_report            # full report (about a minute)
//! cargo run --release --example filter_report -- --quick # smaller sizes
//! cargo run --release --example filter_report -- --throughput # only the speed table
//! ```
//!
//! Keys are distinct pseudo-random u64s. Throughput figures are medians of 5 runs.

use std::time::Instant;

use cuckoo_gate::CuckooFilter;

mod common;
use common::{key, median};

/// Keys `[0, n)` are inserted; absent keys come from `[1 << 62, ...)`.
const ABSENT: u64 = 1 << 62;

fn build(n: usize, eps: f64) -> CuckooFilter {
    CuckooFilter::builder()
        .capacity(n)
        .max_capacity(n)
        .false_positive_rate(eps)
        .build()
        .expect("valid configuration")
}

fn load_and_accuracy(n: usize, queries: u64) {
    println!("## Load at first failed insert, and false-positive rate at 95% load (n = {n})");
    println!(
        "| target ε | slot bits | load at first failure | measured FPR at 95% | FPR / ε | bits/item at 95% |"
    );
    println!("|---|---|---|---|---|---|");
    for eps in [0.01, 0.002, 0.001, 0.0001] {
        let f = build(n, eps);
        let mut i = 0;
        while f.insert(&key(i)).is_ok() {
            i += 1;
        }
        let first_failure = f.load_factor();
        let f = build(n, eps);
        let at95 = (0.95 * f.capacity() as f64) as u64;
        for i in 0..at95 {
            f.insert(&key(i)).expect("95% load fits");
        }
        let fp = (0..queries).filter(|&i| f.contains(&key(ABSENT + i))).count();
        let fpr = fp as f64 / queries as f64;
        println!(
            "| {eps} | {} | {:.4} | {fpr:.6} | {:.3} | {:.2} |",
            f.fingerprint_bits() + 1,
            first_failure,
            fpr / eps,
            f.memory_usage() as f64 * 8.0 / at95 as f64,
        );
    }
    println!();
}

fn space(sizes: &[usize]) {
    println!("## Bits per item when filled to the requested capacity n");
    println!("| n | cuckoo-gate ε=0.2% (FPR bound 0.19%) | cuckoo-gate ε=0.1% | cuckoofilter 0.5 (8-bit fp, ε≈3%) |");
    println!("|---|---|---|---|");
    for &n in sizes {
        let ours = |eps| build(n, eps).memory_usage() as f64 * 8.0 / n as f64;
        let peer = cuckoofilter::CuckooFilter::<std::collections::hash_map::DefaultHasher>::with_capacity(n);
        println!(
            "| {n} | {:.2} | {:.2} | {:.2} |",
            ours(0.002),
            ours(0.001),
            peer.memory_usage() as f64 * 8.0 / n as f64
        );
    }
    println!();
}

fn throughput(n: usize, runs: usize) {
    println!("## Single thread, n = {n} u64 keys (Mops/s, median of {runs} runs)");
    let (mut ins, mut ins_wide, mut hit, mut miss) = (vec![], vec![], vec![], vec![]);
    let (mut pins, mut phit, mut pmiss) = (vec![], vec![], vec![]);
    let rate = |ops: usize, t: Instant| ops as f64 / t.elapsed().as_secs_f64() / 1e6;
    for _ in 0..runs {
        let f = build(n, 0.002);
        let t = Instant::now();
        for i in 0..n as u64 {
            f.insert(&key(i)).expect("fits");
        }
        ins.push(rate(n, t));
        // The same keys into a table with as many buckets as the peer's (and the C++
        // reference's): the next power of two above n / 4, which n keys fill to about 60%.
        let wide = build(n.div_ceil(4).next_power_of_two() * 4 * 95 / 100, 0.002);
        let t = Instant::now();
        for i in 0..n as u64 {
            wide.insert(&key(i)).expect("fits");
        }
        ins_wide.push(rate(n, t));
        drop(wide);
        let t = Instant::now();
        let found = (0..n as u64).filter(|&i| f.contains(&key(i))).count();
        hit.push(rate(n, t));
        assert_eq!(found, n);
        let t = Instant::now();
        let fp = (0..n as u64).filter(|&i| f.contains(&key(ABSENT + i))).count();
        miss.push(rate(n, t));
        std::hint::black_box(fp);

        let mut p = cuckoofilter::CuckooFilter::<std::collections::hash_map::DefaultHasher>::with_capacity(n);
        let t = Instant::now();
        for i in 0..n as u64 {
            // The peer evicts a random victim when full; at this size it has room.
            let _ = p.add(&key(i));
        }
        pins.push(rate(n, t));
        let t = Instant::now();
        let found = (0..n as u64).filter(|&i| p.contains(&key(i))).count();
        phit.push(rate(n, t));
        std::hint::black_box(found);
        let t = Instant::now();
        let fp = (0..n as u64).filter(|&i| p.contains(&key(ABSENT + i))).count();
        pmiss.push(rate(n, t));
        std::hint::black_box(fp);
    }
    let (ins, ins_wide, hit, miss) = (median(ins), median(ins_wide), median(hit), median(miss));
    let (pins, phit, pmiss) = (median(pins), median(phit), median(pmiss));
    println!("| operation | cuckoo-gate (ε=0.2%) | cuckoofilter 0.5 | ratio |");
    println!("|---|---|---|---|");
    println!("| insert (0 → 95% load) | {ins:.1} | {pins:.1} | {:.2}× |", ins / pins);
    println!(
        "| insert, the peer's bucket count (0 → ~60% load) | {ins_wide:.1} | {pins:.1} | {:.2}× |",
        ins_wide / pins
    );
    println!("| lookup, present | {hit:.1} | {phit:.1} | {:.2}× |", hit / phit);
    println!("| lookup, absent | {miss:.1} | {pmiss:.1} | {:.2}× |", miss / pmiss);
    println!();
}

fn main() {
    let quick = std::env::args().any(|a| a == "--quick");
    if std::env::args().any(|a| a == "--throughput") {
        throughput(if quick { 500_000 } else { 5_000_000 }, 5);
    } else if quick {
        load_and_accuracy(100_000, 1_000_000);
        space(&[100_000, 300_000]);
        throughput(500_000, 3);
    } else {
        load_and_accuracy(1_000_000, 20_000_000);
        space(&[1_000_000, 3_000_000, 5_000_000, 10_000_000]);
        throughput(5_000_000, 5);
    }
}
