//! Cache throughput against the caches users would pick instead, measured so that a noisy
//! machine hits every cache alike: rounds alternate between the caches, and each ratio is
//! the median of the per-round ratios.
//!
//! ```text
//! cargo run --release --example cache_report                 # 1 and 2 threads (and all cores)
//! cargo run --release --example cache_report -- --rounds 15
//! cargo run --release --example cache_report -- --threads 16 --shards 256
//! cargo run --release --example cache_report -- --threads 1 --neighbour
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
//! default (cuckoo-gate, 16 shards per core, and quick_cache, 4 per core) S shards each;
//! `--caches A,B` runs only the caches named (the first is the one the ratios divide),
//! e.g. `--caches cuckoo-gate+ttl,cuckoo-gate` for what a time to live costs.
//!
//! `--only NAME` runs one cache alone, single-threaded, on the get-heavy workload (or the
//! one `--workload` names: the warm-up and three rounds, with `--shards` if given), and
//! prints its time and hit ratio: the loop to profile or to count instructions in
//! (`valgrind --tool=callgrind`), with nothing else in the way but generating the
//! requests. It takes no `--rounds` or `--threads`.
//!
//! `--cold` runs the read-through from a cold start instead: each round builds every cache
//! afresh (untimed) and times 1M `get-heavy` requests into it, the fill's misses included
//! (0.75 hits at the end), as a service that starts, or one whose keys turn over, sees it.
//! Each cache is dropped once timed, and the allocator's free lists are tidied before the
//! next one runs (see `trim_heap`). In every report a round starts one cache later than
//! the round before.
//!
//! After those, the `String`-key workload: the get-heavy read-through over paths of 30
//! bytes, each cache asked with the `&str` a request handler holds, as its docs suggest
//! (cuckoo-gate, quick_cache and moka take a borrowed key and an owned `String` to
//! store; TinyUFO keeps only hashes, and takes the `&str` as its key), on the same
//! thread counts (`--strings` runs it alone).
//!
//! `--neighbour` runs another thread beside the caches, with `--only` or without, that
//! writes one byte in every 64-byte line of 64 MiB over and over: more than the CPU's
//! last-level cache, so it evicts the caches' lines as a busy service's own request
//! handling would. It takes a core, so on a 2-core machine give it `--threads 1` or
//! `--only`.

use std::sync::atomic::{AtomicBool, Ordering};

mod common;
use common::median;
#[path = "common/caches.rs"]
mod caches;
use caches::{
    paths, peers, peers_sharded, round, string_peers, string_round, zipf_ranks, zipf_requests, OPS, WORKLOADS,
};

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

/// Runs `measure`, with a neighbour beside it if asked: a thread that writes every 64-byte
/// line of 64 MiB, pass after pass, until `measure` returns (or panics).
fn beside_neighbour<R>(neighbour: bool, measure: impl FnOnce() -> R) -> R {
    struct Stop<'a>(&'a AtomicBool);
    impl Drop for Stop<'_> {
        fn drop(&mut self) {
            self.0.store(true, Ordering::Relaxed);
        }
    }
    if !neighbour {
        return measure();
    }
    let stop = AtomicBool::new(false);
    std::thread::scope(|s| {
        s.spawn(|| {
            let mut lines = vec![0u8; 64 << 20];
            while !stop.load(Ordering::Relaxed) {
                lines.iter_mut().step_by(64).for_each(|byte| *byte = byte.wrapping_add(1));
                std::hint::black_box(&mut lines);
            }
        });
        let _stop = Stop(&stop);
        measure()
    })
}

fn main() {
    let mut rounds = None;
    let mut neighbour = false;
    let mut strings = false;
    let mut cold = false;
    let mut only = None;
    let mut threads = None;
    let mut shards = None;
    let mut chosen: Option<Vec<String>> = None;
    let mut workload = WORKLOADS[0];
    let names: Vec<&str> = peers().iter().map(|(name, _)| *name).collect();
    let usage = || -> ! {
        eprintln!(
            "usage: cache_report [--rounds N] [--threads T] [--shards S] [--caches A,B] [--strings|--cold] [--neighbour]\n       cache_report [--shards S] [--neighbour] --only {} [--workload {}]",
            names.join("|"),
            WORKLOADS.join("|")
        );
        std::process::exit(2)
    };
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        if arg == "--neighbour" || arg == "--strings" || arg == "--cold" {
            neighbour |= arg == "--neighbour";
            strings |= arg == "--strings";
            cold |= arg == "--cold";
            continue;
        }
        let value = args.next().unwrap_or_default();
        match (arg.as_str(), value.parse::<usize>()) {
            ("--rounds", Ok(n)) if n > 0 => rounds = Some(n),
            ("--threads", Ok(t)) if t > 0 => threads = Some(t),
            ("--shards", Ok(s)) if s > 0 => shards = Some(s),
            ("--only", _) if names.contains(&value.as_str()) => only = Some(value),
            ("--caches", _) if value.split(',').all(|name| names.contains(&name)) => {
                chosen = Some(value.split(',').map(str::to_owned).collect())
            }
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
        return beside_neighbour(neighbour, || profile(&name, workload, shards));
    }
    if strings {
        let threads = threads.map_or_else(common::thread_counts, |t| vec![t]);
        return beside_neighbour(neighbour, || string_report(rounds.unwrap_or(9), &threads));
    }
    if cold {
        let threads = threads.map_or_else(common::thread_counts, |t| vec![t]);
        return beside_neighbour(neighbour, || {
            cold_report(rounds.unwrap_or(9), &threads, shards, chosen.as_deref())
        });
    }
    beside_neighbour(neighbour, || report(rounds, threads, shards, chosen.as_deref()));
}

/// The caches `chosen` (all, if none), in that order, with `shards` shards where they
/// take a count.
fn chosen_caches(
    shards: Option<usize>,
    chosen: Option<&[String]>,
) -> Vec<(&'static str, Box<dyn caches::Cache>)> {
    let mut caches = peers_sharded(shards);
    if let Some(chosen) = chosen {
        caches = chosen
            .iter()
            .filter_map(|name| {
                let at = caches.iter().position(|(peer, _)| peer == name)?;
                Some(caches.remove(at))
            })
            .collect();
    }
    caches
}

/// The read-through from a cold start, in alternating rounds: each round builds the
/// caches afresh and times one round of `get-heavy` requests into each.
fn cold_report(rounds: usize, threads: &[usize], shards: Option<usize>, chosen: Option<&[String]>) {
    let requests = zipf_requests(4 * OPS);
    let parts: Vec<&[u64]> = requests.chunks(OPS).collect();
    println!("{rounds} alternating rounds of {OPS} requests into cold caches; Mops/s are medians, ratios medians of per-round ratios");
    for &t in threads {
        let names: Vec<&str> = chosen_caches(shards, chosen).iter().map(|(name, _)| *name).collect();
        let mut results = Rounds::new(names.len());
        for r in 0..rounds {
            let part = parts[r % parts.len()];
            let mut caches: Vec<_> = chosen_caches(shards, chosen).into_iter().map(Some).collect();
            trim_heap();
            results.run(r, |i| {
                let (_, cache) = caches[i].take().expect("a round runs each cache once");
                let measured = timed_round(&*cache, "get-heavy", part, t);
                drop(cache);
                trim_heap();
                measured
            });
        }
        results.print(&format!("get-heavy from a cold start, {t} thread(s)"), &names);
    }
}

/// Has glibc's allocator tidy, untimed, what the caches dropped so far freed. It merges
/// freed small chunks (`malloc_consolidate`) when a large allocation next comes, and in a
/// cold round that is the next cache's, growing its tables during its timed round: before
/// this, whichever cache ran after moka's drop (100k entries, each allocated on its own)
/// ran its 2-thread round at 25-29 M requests/s against 36-41 elsewhere.
fn trim_heap() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: `malloc_trim` takes no pointer, and only tidies glibc's own free lists.
    unsafe {
        libc::malloc_trim(0);
    }
}

/// The caches in alternating rounds, on each workload and thread count.
fn report(rounds: Option<usize>, threads: Option<usize>, shards: Option<usize>, chosen: Option<&[String]>) {
    let rounds = rounds.unwrap_or(9);
    let threads = threads.map_or_else(common::thread_counts, |t| vec![t]);
    let requests = zipf_requests(4 * OPS);
    let (warm, timed) = requests.split_at(OPS);
    let parts: Vec<&[u64]> = timed.chunks(OPS).collect();
    println!("{rounds} alternating rounds of {OPS} requests; Mops/s are medians, ratios medians of per-round ratios");
    for workload in WORKLOADS {
        for &t in &threads {
            let caches = chosen_caches(shards, chosen);
            let names: Vec<&str> = caches.iter().map(|(name, _)| *name).collect();
            for (_, cache) in &caches {
                round(&**cache, workload, warm, t);
            }
            let mut results = Rounds::new(caches.len());
            for r in 0..rounds {
                let part = parts[r % parts.len()];
                results.run(r, |i| timed_round(&*caches[i].1, workload, part, t));
            }
            results.print(&format!("{workload}, {t} thread(s)"), &names);
        }
    }
    if chosen.is_none() {
        string_report(rounds, &threads);
    }
}

/// The `String`-key get-heavy workload, in alternating rounds as [`report`]'s.
fn string_report(rounds: usize, threads: &[usize]) {
    let paths = paths();
    let requests = zipf_ranks(4 * OPS);
    let (warm, timed) = requests.split_at(OPS);
    let parts: Vec<&[u32]> = timed.chunks(OPS).collect();
    for &t in threads {
        let caches = string_peers();
        for (_, cache) in &caches {
            string_round(&**cache, &paths, warm, t);
        }
        let mut results = Rounds::new(caches.len());
        for r in 0..rounds {
            let part = parts[r % parts.len()];
            results.run(r, |i| {
                let (elapsed, hits) = string_round(&*caches[i].1, &paths, part, t);
                (part.len() as f64 / elapsed.as_secs_f64() / 1e6, hits)
            });
        }
        let names: Vec<&str> = caches.iter().map(|(name, _)| *name).collect();
        results.print(&format!("String keys asked with &str (get-heavy), {t} thread(s)"), &names);
    }
}

/// Each cache's results over alternating rounds: its M ops/s, the first cache's ratio to
/// it, and its last hit ratio.
struct Rounds {
    mops: Vec<Vec<f64>>,
    ratios: Vec<Vec<f64>>,
    hit_ratio: Vec<f64>,
}

impl Rounds {
    fn new(caches: usize) -> Self {
        Rounds {
            mops: vec![Vec::new(); caches],
            ratios: vec![Vec::new(); caches],
            hit_ratio: vec![0.0; caches],
        }
    }

    /// Round `r`: `measure(i)`, cache `i`'s M ops/s and hit ratio, for every cache, in an
    /// order that starts one cache later each round. A round's first cache runs just after
    /// what came before it (a cold round's builds, the last round's drops); each cache
    /// takes that place as often as the others, so that it weighs on none of the ratios.
    fn run(&mut self, r: usize, mut measure: impl FnMut(usize) -> (f64, f64)) {
        let n = self.mops.len();
        let mut round = vec![(0.0, 0.0); n];
        for i in (0..n).map(|k| (k + r) % n) {
            round[i] = measure(i);
        }
        self.add(round);
    }

    /// One round's M ops/s and hit ratio of each cache, in order.
    fn add(&mut self, round: Vec<(f64, f64)>) {
        for (i, &(m, h)) in round.iter().enumerate() {
            self.mops[i].push(m);
            self.ratios[i].push(round[0].0 / m);
            self.hit_ratio[i] = h;
        }
    }

    /// The table, headed `title`: medians of M ops/s and of the per-round ratios.
    fn print(&self, title: &str, names: &[&str]) {
        println!();
        println!("## {title}");
        println!("| cache | Mops/s | {} / cache | hit ratio |", names[0]);
        println!("|---|---|---|---|");
        for (i, name) in names.iter().enumerate() {
            let (m, r) = (median(self.mops[i].clone()), median(self.ratios[i].clone()));
            println!("| {name} | {m:.2} | {r:.2} | {:.4} |", self.hit_ratio[i]);
        }
    }
}
