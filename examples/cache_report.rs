//! Cache throughput against the caches users would pick instead, measured so that a noisy
//! machine hits every cache alike: rounds alternate between the caches, and each ratio is
//! the median of the per-round ratios.
//!
//! ```text
//! cargo run --release --example cache_report                 # 1 and 2 threads (and all cores)
//! cargo run --release --example cache_report -- --rounds 15
//! cargo run --release --example cache_report -- --threads 16 --shards 256
//! cargo build --release --example cache_report &&             # one cache alone, for a profiler:
//!   valgrind --tool=callgrind target/release/examples/cache_report --only cuckoo-gate
//! ```
//!
//! The workloads are `benches/cache.rs`'s: keys from Zipf(0.99) over 1M objects, caches of
//! 100k entries holding `u64` values; `get-heavy` is a read-through (`get`, and `insert` on
//! a miss), `mixed` half `get`, half `insert`. Every cache is warmed with 1M requests,
//! then the rounds cycle through three further 1M requests, as the bench's iterations do,
//! split over the threads. (Replaying one 1M sequence would make the workload a loop,
//! whose period policies with a ghost queue can lock onto.) The hit ratio is that of the
//! `get`s of the last round. `AdmissionCache` runs its default policy.
//!
//! `--threads T` runs T threads alone; `--shards S` gives the two caches that shard by
//! default (cuckoo-gate, 16 shards per core, and quick_cache, 4 per core) S shards each.
//!
//! `--only NAME` runs one cache alone, single-threaded, on the get-heavy workload (or the
//! one `--workload` names: the warm-up and three rounds, with `--shards` if given), and
//! prints its time and hit ratio: the loop to profile or to count instructions in
//! (`valgrind --tool=callgrind`), with nothing else in the way but generating the
//! requests. It takes no `--rounds` or `--threads`.

mod common;
use common::median;
#[path = "common/caches.rs"]
mod caches;
use caches::{peers, peers_sharded, round, zipf_requests, OPS, WORKLOADS};

/// Million operations per second of a round, and its hit ratio.
fn timed_round(cache: &dyn caches::Cache, workload: &str, requests: &[u64], threads: usize) -> (f64, f64) {
    let (elapsed, hit_ratio) = round(cache, workload, requests, threads);
    (requests.len() as f64 / elapsed.as_secs_f64() / 1e6, hit_ratio)
}

/// One cache alone, for a profiler: the warm-up and three rounds of `workload` on one
/// thread, with `shards` shards if set.
fn profile(name: &str, workload: &str, shards: Option<usize>) {
    let requests = zipf_requests(4 * OPS);
    let (warm, timed) = requests.split_at(OPS);
    let caches = peers_sharded(shards);
    let (_, cache) = caches.iter().find(|(peer, _)| *peer == name).expect("a known cache");
    round(&**cache, workload, warm, 1);
    let start = std::time::Instant::now();
    let hit_ratio = timed.chunks(OPS).map(|part| round(&**cache, workload, part, 1).1).last().unwrap_or(0.0);
    println!(
        "{name}: 3 {workload} rounds of {OPS} requests in {:.2?}, hit ratio {hit_ratio:.4}",
        start.elapsed()
    );
}

fn main() {
    let mut rounds = None;
    let mut only = None;
    let mut threads = None;
    let mut shards = None;
    let mut workload = WORKLOADS[0];
    let names: Vec<&str> = peers().iter().map(|(name, _)| *name).collect();
    let usage = || -> ! {
        eprintln!(
            "usage: cache_report [--rounds N] [--threads T] [--shards S]\n       cache_report [--shards S] --only {} [--workload {}]",
            names.join("|"),
            WORKLOADS.join("|")
        );
        std::process::exit(2)
    };
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        let value = args.next().unwrap_or_default();
        match (arg.as_str(), value.parse::<usize>()) {
            ("--rounds", Ok(n)) if n > 0 => rounds = Some(n),
            ("--threads", Ok(t)) if t > 0 => threads = Some(t),
            ("--shards", Ok(s)) if s > 0 => shards = Some(s),
            ("--only", _) if names.contains(&value.as_str()) => only = Some(value),
            ("--workload", _) => {
                workload = WORKLOADS.into_iter().find(|&w| w == value).unwrap_or_else(|| usage())
            }
            _ => usage(),
        }
    }
    if let Some(name) = only {
        if rounds.is_some() || threads.is_some() {
            usage();
        }
        return profile(&name, workload, shards);
    }
    let rounds = rounds.unwrap_or(9);
    let threads = threads.map_or_else(common::thread_counts, |t| vec![t]);
    let requests = zipf_requests(4 * OPS);
    let (warm, timed) = requests.split_at(OPS);
    let parts: Vec<&[u64]> = timed.chunks(OPS).collect();
    println!("{rounds} alternating rounds of {OPS} requests; Mops/s are medians, ratios medians of per-round ratios");
    for workload in WORKLOADS {
        for &t in &threads {
            let caches = peers_sharded(shards);
            for (_, cache) in &caches {
                round(&**cache, workload, warm, t);
            }
            let mut mops = vec![Vec::new(); caches.len()];
            let mut ratios = vec![Vec::new(); caches.len()];
            let mut hit_ratio = vec![0.0; caches.len()];
            for r in 0..rounds {
                let part = parts[r % parts.len()];
                let results: Vec<(f64, f64)> =
                    caches.iter().map(|(_, c)| timed_round(&**c, workload, part, t)).collect();
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
