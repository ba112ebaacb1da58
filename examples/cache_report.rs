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

mod common;
use common::median;
#[path = "common/caches.rs"]
mod caches;
use caches::{peers, round, zipf_requests, OPS, WORKLOADS};

/// Million operations per second of a round, and its hit ratio.
fn timed_round(cache: &dyn caches::Cache, workload: &str, requests: &[u64], threads: usize) -> (f64, f64) {
    let (elapsed, hit_ratio) = round(cache, workload, requests, threads);
    (requests.len() as f64 / elapsed.as_secs_f64() / 1e6, hit_ratio)
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
    let requests = zipf_requests(2 * OPS);
    let (warm, timed) = requests.split_at(OPS);
    println!("{rounds} alternating rounds of {OPS} requests; Mops/s are medians, ratios medians of per-round ratios");
    for workload in WORKLOADS {
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
                    caches.iter().map(|(_, c)| timed_round(&**c, workload, timed, t)).collect();
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
