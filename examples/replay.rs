//! Replays a request stream through plain LRU and each admission policy, and prints hit
//! ratio, cache writes (insertions) and throughput.
//!
//! ```text
//! cargo run --release --example replay                       # generated workload
//! cargo run --release --example replay -- --trace ../shared/traces/adaptsize_cdn.keys
//! cargo run --release --example replay -- --trace FILE --capacity-pct 5 --threads 2
//! cargo run --release --example replay -- --sweep ../shared/traces   # every trace, 1/5/10%
//! ```
//!
//! A request is a lookup; on a miss the object is offered to the cache (`insert`), which
//! stores it or not according to the policy. A hit is a request whose key was in the cache
//! before the request. The generated workload (Zipf(0.9) over 100,000 objects, with one
//! request in three for an object requested only once) needs no files.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use cuckoo_gate::{AdmissionCache, AdmissionPolicy};

const POLICIES: [(&str, AdmissionPolicy); 3] = [
    ("LRU (Always)", AdmissionPolicy::Always),
    ("SecondHit", AdmissionPolicy::SecondHit),
    ("Probation", AdmissionPolicy::Probation),
];

struct Args {
    trace: Option<PathBuf>,
    sweep: Option<PathBuf>,
    capacity: Option<usize>,
    capacity_pct: f64,
    threads: usize,
}

fn usage(problem: &str) -> ! {
    eprintln!("replay: {problem}");
    eprintln!("usage: replay [--trace FILE | --sweep DIR] [--capacity N | --capacity-pct P] [--threads T]");
    std::process::exit(2)
}

fn parse_args() -> Args {
    let mut args = Args { trace: None, sweep: None, capacity: None, capacity_pct: 5.0, threads: 1 };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let mut value = || it.next().unwrap_or_else(|| usage(&format!("{flag} needs a value")));
        match flag.as_str() {
            "--trace" => args.trace = Some(value().into()),
            "--sweep" => args.sweep = Some(value().into()),
            "--capacity" => args.capacity = Some(value().parse().unwrap_or_else(|_| usage("bad --capacity"))),
            "--capacity-pct" => {
                args.capacity_pct = value().parse().unwrap_or_else(|_| usage("bad --capacity-pct"));
                if !(args.capacity_pct > 0.0 && args.capacity_pct <= 100.0) {
                    usage("--capacity-pct must be in (0, 100]");
                }
            }
            "--threads" => {
                args.threads = value().parse().unwrap_or_else(|_| usage("bad --threads"));
                if args.threads == 0 {
                    usage("--threads must be at least 1");
                }
            }
            "-h" | "--help" => usage("help"),
            other => usage(&format!("unknown argument {other}")),
        }
    }
    args
}

/// Reads a trace: one request per line, the key first (further columns are ignored).
fn read_trace(path: &Path) -> Vec<u64> {
    let text = std::fs::read_to_string(path)
        .unwrap_or_else(|e| usage(&format!("cannot read {}: {e}", path.display())));
    text.lines()
        .filter_map(|line| line.split_whitespace().next())
        .map(|key| key.parse().unwrap_or_else(|_| usage(&format!("bad key {key:?} in {}", path.display()))))
        .collect()
}

/// SplitMix64.
struct Rng(u64);

impl Rng {
    fn next_f64(&mut self) -> f64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        ((z ^ (z >> 31)) >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// Zipf(0.9) over 100,000 objects, with one request in three for a brand-new object.
fn generated_workload(requests: usize) -> Vec<u64> {
    let objects = 100_000;
    let mut cumulative = Vec::with_capacity(objects);
    let mut total = 0.0;
    for rank in 1..=objects {
        total += 1.0 / (rank as f64).powf(0.9);
        cumulative.push(total);
    }
    let mut rng = Rng(42);
    let mut next_unique = 1u64 << 40;
    (0..requests)
        .map(|_| {
            if rng.next_f64() < 1.0 / 3.0 {
                next_unique += 1;
                next_unique
            } else {
                let u = rng.next_f64() * total;
                cumulative.partition_point(|&c| c < u) as u64
            }
        })
        .collect()
}

fn distinct(trace: &[u64]) -> usize {
    let mut keys = trace.to_vec();
    keys.sort_unstable();
    keys.dedup();
    keys.len()
}

struct Outcome {
    hit_ratio: f64,
    writes: u64,
    ops_per_sec: f64,
}

fn replay(
    trace: &[u64],
    capacity: usize,
    policy: AdmissionPolicy,
    threads: usize,
    progress: bool,
) -> Outcome {
    let shards = if threads == 1 { 1 } else { threads * 4 };
    let cache: Arc<AdmissionCache<u64, u32>> = Arc::new(
        AdmissionCache::<u64, u32>::builder()
            .capacity(capacity)
            .admission(policy)
            .shards(shards.min(capacity))
            .seed(7)
            .build()
            .unwrap(),
    );
    let start = Instant::now();
    std::thread::scope(|s| {
        for t in 0..threads {
            let cache = cache.clone();
            s.spawn(move || {
                let step = (trace.len() / 10).max(1);
                for (i, &key) in trace.iter().enumerate().skip(t).step_by(threads) {
                    if cache.get(&key).is_none() {
                        cache.insert(key, 0);
                    }
                    if progress && t == 0 && i % step < threads && i > 0 {
                        eprint!("\r  {:>3}% ", i * 100 / trace.len());
                    }
                }
            });
        }
    });
    if progress {
        eprint!("\r       \r");
    }
    let elapsed = start.elapsed().as_secs_f64();
    let stats = cache.stats();
    Outcome {
        hit_ratio: stats.hit_ratio(),
        writes: stats.admitted,
        ops_per_sec: trace.len() as f64 / elapsed,
    }
}

fn report(name: &str, trace: &[u64], capacity: usize, threads: usize) {
    let objects = distinct(trace);
    println!(
        "## {name}: {} requests, {objects} objects, cache of {capacity} entries ({:.1}%), {threads} thread(s)",
        trace.len(),
        capacity as f64 * 100.0 / objects as f64
    );
    println!("| policy | hit ratio | insertions (writes) | writes saved vs LRU | Mops/s |");
    println!("|---|---|---|---|---|");
    let progress = trace.len() >= 2_000_000;
    let mut lru_writes = None;
    for (label, policy) in POLICIES {
        let o = replay(trace, capacity, policy, threads, progress);
        let base = *lru_writes.get_or_insert(o.writes);
        let saved = 100.0 * (1.0 - o.writes as f64 / base as f64);
        println!(
            "| {label} | {:.4} | {} | {saved:.1}% | {:.2} |",
            o.hit_ratio,
            o.writes,
            o.ops_per_sec / 1e6
        );
    }
    println!();
}

fn main() {
    let args = parse_args();
    if let Some(dir) = &args.sweep {
        let mut files: Vec<_> = std::fs::read_dir(dir)
            .unwrap_or_else(|e| usage(&format!("cannot read {}: {e}", dir.display())))
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|x| x == "keys"))
            .collect();
        files.sort();
        for file in files {
            let trace = read_trace(&file);
            let objects = distinct(&trace);
            for pct in [1.0, 5.0, 10.0] {
                let capacity = ((objects as f64 * pct / 100.0) as usize).max(1);
                report(&file.file_name().unwrap().to_string_lossy(), &trace, capacity, args.threads);
            }
        }
        return;
    }
    let (name, trace) = match &args.trace {
        Some(path) => (path.display().to_string(), read_trace(path)),
        None => ("generated (Zipf 0.9 + one-hit wonders)".to_string(), generated_workload(3_000_000)),
    };
    if trace.is_empty() {
        usage("the trace is empty");
    }
    let capacity = args
        .capacity
        .unwrap_or_else(|| ((distinct(&trace) as f64 * args.capacity_pct / 100.0) as usize).max(1));
    report(&name, &trace, capacity, args.threads);
}
