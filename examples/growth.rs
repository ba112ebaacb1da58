//! Automatic growth, measured: a filter built for 1M items grows to 16M (four doublings)
//! at ε = 0.1%, against a fixed-size filter built for 16M from the start.
//!
//! ```text
//! cargo run --release --example growth              # 1M -> 16M (about a minute)
//! cargo run --release --example growth -- --quick   # 100k -> 1.6M
//! cargo run --release --example growth -- --breakdown  # also: where lookup time goes
//! cargo run --release --example growth -- --initial 4000000  # 4M -> 64M
//! ```
//!
//! Reports the false-positive rate, memory, single-thread lookup throughput (9 rounds
//! alternating with the right-sized filter's; the ratio is the median of the per-round
//! ratios) and the latency of every insert across the doublings (p50, p99, p99.9, max;
//! the maximum is an insert that performed a doubling).

use std::hint::black_box;
use std::time::Instant;

use cuckoo_gate::CuckooFilter;

mod common;
use common::{key, median};

/// Keys `[0, n)` are inserted; absent keys come from `[1 << 62, ...)`.
const ABSENT: u64 = 1 << 62;
const EPSILON: f64 = 0.001;

/// Million lookups per second over `keys` lookups starting at `first` (one round).
fn lookup_round(f: &CuckooFilter, first: u64, keys: u64) -> f64 {
    let start = Instant::now();
    let mut hits = 0u64;
    for i in first..first + keys {
        hits += u64::from(f.contains(&key(i)));
    }
    black_box(hits);
    keys as f64 / start.elapsed().as_secs_f64() / 1e6
}

/// Million lookups per second, median of 5 rounds.
fn lookups(f: &CuckooFilter, first: u64, keys: u64) -> f64 {
    median((0..5).map(|_| lookup_round(f, first, keys)).collect())
}

/// Rounds of `a` and `b` alternate, so that a slow spell of a shared machine hits both:
/// the medians of each, and the median of the per-round ratios a / b.
fn paired_lookups(a: &CuckooFilter, b: &CuckooFilter, first: u64, keys: u64) -> (f64, f64, f64) {
    const ROUNDS: usize = 9;
    let (mut ra, mut rb, mut ratios) = (vec![], vec![], vec![]);
    for _ in 0..ROUNDS {
        let (x, y) = (lookup_round(a, first, keys), lookup_round(b, first, keys));
        ra.push(x);
        rb.push(y);
        ratios.push(x / y);
    }
    (median(ra), median(rb), median(ratios))
}

fn percentile(sorted: &[u64], p: f64) -> f64 {
    sorted[((sorted.len() - 1) as f64 * p) as usize] as f64 / 1e3
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let initial: usize = match args.iter().position(|a| a == "--initial") {
        Some(i) => args.get(i + 1).and_then(|v| v.parse().ok()).expect("--initial takes a number of items"),
        None if args.iter().any(|a| a == "--quick") => 100_000,
        None => 1_000_000,
    };
    let n = 16 * initial;
    let grown = CuckooFilter::builder()
        .capacity(initial)
        .max_capacity(n)
        .false_positive_rate(EPSILON)
        .build()
        .unwrap();
    let right =
        CuckooFilter::builder().capacity(n).max_capacity(n).false_positive_rate(EPSILON).build().unwrap();
    println!("# Growth: capacity {initial} -> {n} items, ε = {EPSILON}");

    let mut latencies = Vec::with_capacity(n);
    let mut doublings = Vec::new();
    for i in 0..n as u64 {
        let start = Instant::now();
        grown.insert(&key(i)).expect("grows within max_capacity");
        let ns = start.elapsed().as_nanos() as u64;
        latencies.push(ns);
        if grown.stats().doublings as usize > doublings.len() {
            doublings.push((i, ns));
        }
    }
    for i in 0..n as u64 {
        right.insert(&key(i)).expect("fits");
    }
    assert!((0..n as u64).all(|i| grown.contains(&key(i))), "a key was lost");

    let queries = 10_000_000u64;
    let fpr = |f: &CuckooFilter| {
        (0..queries).filter(|&i| f.contains(&key(ABSENT + i))).count() as f64 / queries as f64
    };
    let (fpr_grown, fpr_right) = (fpr(&grown), fpr(&right));
    let (g, r) = (grown.stats(), right.stats());
    println!();
    println!("| | grown (4 doublings) | right-sized | ratio |");
    println!("|---|---|---|---|");
    println!("| slots | {} | {} | {:.2} |", g.capacity, r.capacity, g.capacity as f64 / r.capacity as f64);
    println!("| slot bits | {} | {} | |", g.slot_bits, r.slot_bits);
    println!(
        "| memory | {:.1} MiB | {:.1} MiB | {:.2} |",
        g.memory_bytes as f64 / (1 << 20) as f64,
        r.memory_bytes as f64 / (1 << 20) as f64,
        g.memory_bytes as f64 / r.memory_bytes as f64
    );
    println!("| load | {:.3} | {:.3} | |", g.load_factor, r.load_factor);
    println!(
        "| false-positive rate ({queries} absent keys) | {fpr_grown:.6} ({:.2} ε) | {fpr_right:.6} ({:.2} ε) | {:.2} |",
        fpr_grown / EPSILON,
        fpr_right / EPSILON,
        fpr_grown / fpr_right
    );
    let lookups_n = 5_000_000.min(n as u64);
    let (present_g, present_r, present) = paired_lookups(&grown, &right, 0, lookups_n);
    let (absent_g, absent_r, absent) = paired_lookups(&grown, &right, ABSENT, lookups_n);
    println!("| present lookups, M/s (medians of 9 alternating rounds) | {present_g:.1} | {present_r:.1} | {present:.2} |");
    println!("| absent lookups, M/s (medians of 9 alternating rounds) | {absent_g:.1} | {absent_r:.1} | {absent:.2} |");

    latencies.sort_unstable();
    println!();
    println!("Insert latency across the doublings ({n} inserts, µs):");
    println!(
        "p50 {:.3}, p99 {:.3}, p99.9 {:.3}, max {:.1}",
        percentile(&latencies, 0.5),
        percentile(&latencies, 0.99),
        percentile(&latencies, 0.999),
        percentile(&latencies, 1.0)
    );
    for (i, ns) in doublings {
        println!("doubling at insert {i}: that insert took {:.1} ms", ns as f64 / 1e6);
    }
    if std::env::args().any(|a| a == "--breakdown") {
        breakdown(n);
    }
}

/// Lookups on four right-sized filters that separate the two costs of a growable filter:
/// the table-pointer re-check, and slots wider than 16 bits (128-bit bucket words).
fn breakdown(n: usize) {
    println!();
    println!("Where lookup time goes ({n} items, M/s, median of 5):");
    println!("| filter | slot bits | pointer re-check | present | absent |");
    println!("|---|---|---|---|---|");
    for (max, eps) in [(n, EPSILON), (2 * n, EPSILON), (n, EPSILON / 10.0), (16 * n, EPSILON)] {
        let f =
            CuckooFilter::builder().capacity(n).max_capacity(max).false_positive_rate(eps).build().unwrap();
        for i in 0..n as u64 {
            f.insert(&key(i)).expect("fits");
        }
        let s = f.stats();
        let pins = if max > n { "yes" } else { "no" };
        let keys = 5_000_000.min(n as u64);
        println!(
            "| max_capacity {max}, ε {eps} | {} | {pins} | {:.1} | {:.1} |",
            s.slot_bits,
            lookups(&f, 0, keys),
            lookups(&f, ABSENT, keys)
        );
    }
}
