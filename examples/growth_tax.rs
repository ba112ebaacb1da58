//! What the ability to grow costs a filter that has not grown: the default-built filter
//! (`capacity(n)`, allowed to double 4 times) against a fixed-size one
//! (`capacity(n).max_capacity(n)`), both filled with n keys, at ε = 0.1%.
//!
//! ```text
//! cargo run --release --example growth_tax                    # n = 1M, 5M and 50M
//! cargo run --release --example growth_tax -- 5000000         # one n
//! cargo run --release --example growth_tax -- 5000000 --doublings 2
//! cargo run --release --example growth_tax -- 50000000 --deciles
//! ```
//!
//! `--doublings D` lets the growable filter double D times (`max_capacity(n << D)`) instead
//! of the default 4: what fewer doublings would save. `--deciles` fills one filter of each
//! kind and prints the time per insert in each tenth of the fill, which shows where inserts
//! differ: on the way in, or near full, where relocations start.
//!
//! Lookups (half present, half absent keys) run on 1 and 2 threads, and on every core when
//! there are more, in 9 rounds that alternate between the two filters; inserts fill a fresh
//! pair of filters 3 times, alternating. Each ratio is the median of the per-round ratios,
//! so a slow spell of a shared machine hits both filters alike.

use std::hint::black_box;
use std::time::Instant;

use cuckoo_gate::CuckooFilter;

mod common;
use common::{key, median};

const EPSILON: f64 = 0.001;
/// Absent keys come from `[ABSENT, ...)`; present ones are `key(0..n)`.
const ABSENT: u64 = 1 << 62;

/// The growable filter (allowed `doublings`, or the default) or the fixed one.
fn build(n: usize, fixed: bool, doublings: Option<u32>) -> CuckooFilter {
    let b = CuckooFilter::builder().capacity(n).false_positive_rate(EPSILON);
    match (fixed, doublings) {
        (true, _) => b.max_capacity(n),
        (false, Some(d)) => b.max_capacity(n << d),
        (false, None) => b,
    }
    .build()
    .expect("a valid configuration")
}

/// Seconds taken to insert the keys numbered `keys` into `f`.
fn insert_keys(f: &CuckooFilter, keys: std::ops::Range<u64>) -> f64 {
    let start = Instant::now();
    for i in keys {
        f.insert(&key(i)).expect("a filter holds its capacity");
    }
    start.elapsed().as_secs_f64()
}

/// Million inserts per second filling a new filter with `n` keys.
fn fill(n: usize, fixed: bool, doublings: Option<u32>) -> (CuckooFilter, f64) {
    let f = build(n, fixed, doublings);
    let mops = n as f64 / insert_keys(&f, 0..n as u64) / 1e6;
    (f, mops)
}

/// Million lookups per second: `lookups` keys, alternating present and absent, split over
/// `threads` threads.
fn lookup_round(f: &CuckooFilter, n: u64, lookups: u64, threads: u64, round: u64) -> f64 {
    let start = Instant::now();
    std::thread::scope(|s| {
        for t in 0..threads {
            s.spawn(move || {
                let mut hits = 0u64;
                for i in (t..lookups).step_by(threads as usize) {
                    let j = (i + round * lookups) % n;
                    let k = if i % 2 == 0 { key(j) } else { key(ABSENT + j) };
                    hits += u64::from(f.contains(&k));
                }
                black_box(hits);
            });
        }
    });
    lookups as f64 / start.elapsed().as_secs_f64() / 1e6
}

/// Nanoseconds per insert in each tenth of filling a new filter with `n` keys.
fn fill_deciles(n: usize, fixed: bool, doublings: Option<u32>) -> Vec<f64> {
    let f = build(n, fixed, doublings);
    let tenth = n as u64 / 10;
    (0..10).map(|d| insert_keys(&f, d * tenth..(d + 1) * tenth) * 1e9 / tenth as f64).collect()
}

fn deciles(n: usize, doublings: Option<u32>) {
    println!();
    println!("## n = {n}: ns per insert in each tenth of the fill");
    println!("| filter | {} |", (1..=10).map(|d| format!("{}%", d * 10)).collect::<Vec<_>>().join(" | "));
    println!("|---|{}", "---|".repeat(10));
    for (name, fixed) in [("default", false), ("fixed", true)] {
        let times = fill_deciles(n, fixed, doublings);
        println!("| {name} | {} |", times.iter().map(|t| format!("{t:.0}")).collect::<Vec<_>>().join(" | "));
    }
}

fn measure(n: usize, doublings: Option<u32>) {
    let mut inserts = Vec::new();
    let mut filters = None;
    for _ in 0..3 {
        let (grow, g) = fill(n, false, doublings);
        let (fixed, x) = fill(n, true, doublings);
        inserts.push((g, x));
        filters = Some((grow, fixed));
    }
    let (grow, fixed) = filters.expect("three rounds ran");
    let (gs, fs) = (grow.stats(), fixed.stats());
    println!();
    println!(
        "## n = {n}: growable ({} doublings) {:.2} bits/item ({}-bit slots), \
         fixed {:.2} bits/item ({}-bit slots)",
        gs.doublings_left,
        grow.memory_usage() as f64 * 8.0 / n as f64,
        gs.slot_bits,
        fixed.memory_usage() as f64 * 8.0 / n as f64,
        fs.slot_bits
    );
    println!("| operation | threads | default M/s | fixed M/s | default / fixed |");
    println!("|---|---|---|---|---|");
    let ratio = |pairs: &[(f64, f64)]| median(pairs.iter().map(|(g, x)| g / x).collect());
    let row = |op: &str, threads: u64, pairs: &[(f64, f64)]| {
        let (g, x): (Vec<f64>, Vec<f64>) = pairs.iter().copied().unzip();
        println!("| {op} | {threads} | {:.1} | {:.1} | {:.2} |", median(g), median(x), ratio(pairs));
    };
    row("insert (fill to n)", 1, &inserts);
    let lookups = 4_000_000.min(4 * n as u64);
    for threads in common::thread_counts().into_iter().map(|t| t as u64) {
        let pairs: Vec<(f64, f64)> = (0..9)
            .map(|r| {
                let g = lookup_round(&grow, n as u64, lookups, threads, r);
                let x = lookup_round(&fixed, n as u64, lookups, threads, r);
                (g, x)
            })
            .collect();
        row("lookup (half present)", threads, &pairs);
    }
}

fn main() {
    let usage = || -> ! {
        eprintln!("usage: growth_tax [N] [--doublings D] [--deciles]  (D from 1 to 4)");
        std::process::exit(2)
    };
    let (mut sizes, mut doublings, mut by_decile) = (Vec::new(), None, false);
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--doublings" => match args.next().and_then(|d| d.parse().ok()) {
                Some(d @ 1..=4) => doublings = Some(d),
                _ => usage(),
            },
            "--deciles" => by_decile = true,
            n => sizes.push(n.parse().unwrap_or_else(|_| usage())),
        }
    }
    if sizes.is_empty() {
        sizes = vec![1_000_000, 5_000_000, 50_000_000];
    }
    let method = if by_decile { "one fill each" } else { "medians of per-round ratios" };
    println!("Default-built (growable) against fixed-size filters, ε = {EPSILON}; {method}");
    for n in sizes {
        if by_decile {
            deciles(n, doublings);
        } else {
            measure(n, doublings);
        }
    }
}
