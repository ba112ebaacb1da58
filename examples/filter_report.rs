//! Space, accuracy and single-thread speed of `CuckooFilter`, with the `cuckoofilter` 0.5
//! crate measured in the same run.
//!
//! ```text
//! cargo run --release --example filter_report            # full report (about a minute)
//! cargo run --release --example filter_report -- --quick # smaller sizes
//! cargo run --release --example filter_report -- --throughput # only the speed table
//! valgrind --tool=callgrind target/release/examples/filter_report --only 2 # one row of it
//! ```
//!
//! Keys are distinct pseudo-random u64s. Throughput figures are medians of 5 runs.

use std::time::Instant;

use cuckoo_gate::{CuckooFilter, Layout};

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

/// What the speed table asks of a filter.
trait Filter {
    fn put(&mut self, key: u64);
    fn has(&self, key: u64) -> bool;
    fn bytes(&self) -> usize;
}

impl Filter for CuckooFilter {
    fn put(&mut self, key: u64) {
        self.insert(&key).expect("sized to fit");
    }
    fn has(&self, key: u64) -> bool {
        self.contains(&key)
    }
    fn bytes(&self) -> usize {
        self.memory_usage()
    }
}

impl<H: std::hash::Hasher + Default> Filter for cuckoofilter::CuckooFilter<H> {
    fn put(&mut self, key: u64) {
        // The peer evicts a random victim when full; at these loads it has room.
        let _ = self.add(&key);
    }
    fn has(&self, key: u64) -> bool {
        self.contains(&key)
    }
    fn bytes(&self) -> usize {
        self.memory_usage()
    }
}

/// One contender: n inserts, then n lookups each of present keys, absent keys, and the
/// two interleaved; M ops/s for each.
fn time_one(n: usize, filter: &mut dyn Filter) -> [f64; 4] {
    let rate = |t: Instant| n as f64 / t.elapsed().as_secs_f64() / 1e6;
    let t = Instant::now();
    (0..n as u64).for_each(|i| filter.put(key(i)));
    let insert = rate(t);
    let t = Instant::now();
    let found = (0..n as u64).filter(|&i| filter.has(key(i))).count();
    let present = rate(t);
    assert_eq!(found, n, "no false negatives");
    let t = Instant::now();
    std::hint::black_box((0..n as u64).filter(|&i| filter.has(key(ABSENT + i))).count());
    let absent = rate(t);
    let t = Instant::now();
    std::hint::black_box((0..n as u64).filter(|&i| filter.has(key(i / 2 + (i & 1) * ABSENT))).count());
    [insert, present, absent, rate(t)]
}

/// The speed table's rows, in [`contender`]'s order; ratios are to row [`PEER`].
const CONTENDERS: [&str; 5] = [
    "cuckoo-gate, capacity n",
    "cuckoo-gate, capacity 1.46 n",
    "cuckoo-gate windows, capacity n",
    "cuckoofilter 0.5 + ahash",
    "cuckoofilter 0.5 (SipHash)",
];
const PEER: usize = 3;

/// Contender `c` of the speed table, empty, sized for `n` keys.
fn contender(c: usize, n: usize) -> Box<dyn Filter> {
    type Peer<H> = cuckoofilter::CuckooFilter<H>;
    match c {
        0 => Box::new(build(n, 0.001)),
        1 => Box::new(build(n * 146 / 100, 0.001)),
        2 => Box::new(
            CuckooFilter::builder()
                .capacity(n)
                .false_positive_rate(0.001)
                .layout(Layout::Windows)
                .build()
                .unwrap(),
        ),
        3 => Box::new(Peer::<ahash::AHasher>::with_capacity(n)),
        _ => Box::new(Peer::<std::collections::hash_map::DefaultHasher>::with_capacity(n)),
    }
}

/// Single-thread speed at n keys: cuckoo-gate at ε = 0.1% sized for n (filled to 95%)
/// and for 1.46 n (about 20 bits per item, the C++ reference's footprint), the windowed
/// layout sized for n (filled to 94.5%), against
/// `cuckoofilter` 0.5 with ahash (what a user who picks it for speed runs) and with its
/// SipHash default. The contenders take turns within each run; a ratio is the median of
/// the per-run ratios, so that a slow spell of the machine hits both sides alike.
fn throughput(n: usize, runs: usize) {
    let mut speeds = vec![vec![]; CONTENDERS.len()];
    let mut bits = [0.0; CONTENDERS.len()];
    for _ in 0..runs {
        for (c, runs) in speeds.iter_mut().enumerate() {
            let mut filter = contender(c, n);
            runs.push(time_one(n, &mut *filter));
            bits[c] = filter.bytes() as f64 * 8.0 / n as f64;
        }
    }
    println!(
        "## Single thread, n = {n} u64 keys (M ops/s, median of {runs} runs; ratio to cuckoofilter + ahash)"
    );
    println!("| filter | bits/item | insert | lookup, present | lookup, absent | lookup, half present |");
    println!("|---|---|---|---|---|---|");
    for (c, name) in CONTENDERS.iter().enumerate() {
        let cells: Vec<String> = (0..4)
            .map(|op| {
                let speed = median(speeds[c].iter().map(|s| s[op]).collect());
                let ratio = median(speeds[c].iter().zip(&speeds[PEER]).map(|(s, p)| s[op] / p[op]).collect());
                format!("{speed:.1} ({ratio:.2}x)")
            })
            .collect();
        println!("| {name} | {:.2} | {} |", bits[c], cells.join(" | "));
    }
    println!();
}

fn main() {
    let quick = std::env::args().any(|a| a == "--quick");
    let only = std::env::args().skip_while(|a| a != "--only").nth(1);
    if let Some(only) = only {
        let row: usize = only
            .parse()
            .ok()
            .filter(|r| (1..=CONTENDERS.len()).contains(r))
            .expect("--only takes a row number");
        let n = if quick { 500_000 } else { 5_000_000 };
        println!("{n} keys: {:.1?} M ops/s", time_one(n, &mut *contender(row - 1, n)));
    } else if std::env::args().any(|a| a == "--throughput") {
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
