//! Warm restarts: what [`AdmissionCache::save`] and [`AdmissionCache::restore`] cost, and
//! what they give back.
//!
//! ```text
//! cargo run --release --example warm_restart
//! cargo run --release --example warm_restart -- --trace ../shared/traces/adaptsize_cdn.keys --trace ../shared/traces/arc_p6.keys
//! ```
//!
//! **Hit ratio after a restart.** Each trace (a generated one without `--trace`) is
//! replayed into a cache of 5% of its distinct keys (in objects; `--capacity-pct` sets the
//! share), a miss inserting the key. At half the trace the cache is saved; the next 10% of
//! the requests are then replayed five ways: by the same cache (uninterrupted), by a new
//! cache built alike that restored the save (restored), by a new empty one (cold), and by
//! a cache of twice the capacity, restored and cold. Every cache has a random seed, as a
//! service's has.
//!
//! **Cost.** A cache of 1M `u64 -> u64` entries (random keys and values: postcard's
//! varints at their longest) is saved to a file in the temporary folder while 2 threads
//! read and write it, and restored into a new cache with a random seed (adopting the
//! saved one), and, for comparison, re-keyed (`restore_rekeyed`) and into a cache built
//! with the saved cache's seed; median of 5 each. The file's size is set beside the
//! entries' raw bytes (16 per entry), and a counting allocator gives the restore's peak
//! memory beside the restored cache's.

use std::alloc::{GlobalAlloc, Layout, System};
use std::fs::File;
use std::io::{BufReader, BufWriter};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use cuckoo_gate::{AdmissionCache, AdmissionPolicy};

#[path = "common/trace.rs"]
mod trace;
use trace::rng::{mix64, Rng};
use trace::{distinct, generated_workload, Request};

/// The system allocator, counting the bytes allocated now and their peak.
struct Counting;

static NOW: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            let now = NOW.fetch_add(layout.size(), Ordering::Relaxed) + layout.size();
            PEAK.fetch_max(now, Ordering::Relaxed);
        }
        p
    }

    unsafe fn dealloc(&self, p: *mut u8, layout: Layout) {
        unsafe { System.dealloc(p, layout) };
        NOW.fetch_sub(layout.size(), Ordering::Relaxed);
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

const ENTRIES: u64 = 1_000_000;
const ROUNDS: usize = 5;
const POLICIES: [(&str, AdmissionPolicy); 3] = [
    ("S3Fifo (default)", AdmissionPolicy::S3Fifo),
    ("SecondHit", AdmissionPolicy::SecondHit),
    ("LRU (Always)", AdmissionPolicy::Always),
];

/// Distinct keys spread over all 64 bits.
fn key(i: u64) -> u64 {
    mix64(i)
}

/// The median of `v`.
fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn usage(problem: &str) -> ! {
    eprintln!("{problem}\nusage: warm_restart [--trace FILE]... [--capacity-pct P]");
    std::process::exit(2);
}

fn cache(policy: AdmissionPolicy, capacity: u64) -> AdmissionCache<u64, u32> {
    AdmissionCache::builder().capacity(capacity).admission(policy).build().expect("a valid configuration")
}

/// Replays `requests` (a miss inserts the key); the hits.
fn replay(cache: &AdmissionCache<u64, u32>, requests: &[Request]) -> u64 {
    let mut hits = 0;
    for r in requests {
        if cache.get(&r.key).is_some() {
            hits += 1;
        } else {
            let _ = cache.insert(r.key, r.size);
        }
    }
    hits
}

fn hit_ratios(name: &str, requests: &[Request], pct: f64) {
    let (objects, _) = distinct(requests);
    let capacity = ((objects as f64 * pct / 100.0) as u64).max(10);
    let (half, next) = (requests.len() / 2, requests.len() / 10);
    let after = &requests[half..half + next];
    println!("\n## {name}: {} requests, a cache of {capacity} objects ({pct}%)", requests.len());
    println!("hit ratio over requests {half}..{} (the 10% after a restart at half)\n", half + next);
    println!("| policy | uninterrupted | restored | restored / uninterrupted | cold | 2x restored | 2x cold | saved |");
    println!("|---|---|---|---|---|---|---|---|");
    for (label, policy) in POLICIES {
        let first = cache(policy, capacity);
        replay(&first, &requests[..half]);
        let mut saved = Vec::new();
        first.save(&mut saved).expect("a save to memory");
        let uninterrupted = replay(&first, after) as f64 / next as f64;
        drop(first);
        let restarted = cache(policy, capacity);
        restarted.restore(&mut saved.as_slice()).expect("the save restores");
        let restored = replay(&restarted, after) as f64 / next as f64;
        let cold = replay(&cache(policy, capacity), after) as f64 / next as f64;
        let larger = cache(policy, 2 * capacity);
        larger.restore(&mut saved.as_slice()).expect("the save restores");
        let larger = replay(&larger, after) as f64 / next as f64;
        let larger_cold = replay(&cache(policy, 2 * capacity), after) as f64 / next as f64;
        println!(
            "| {label} | {uninterrupted:.4} | {restored:.4} | {:.3} | {cold:.4} | {larger:.4} | {larger_cold:.4} | {} KiB |",
            restored / uninterrupted,
            saved.len() / 1024
        );
    }
}

fn big_cache(seed: Option<u64>) -> AdmissionCache<u64, u64> {
    let builder = AdmissionCache::builder().capacity(ENTRIES);
    match seed {
        Some(seed) => builder.seed(seed),
        None => builder,
    }
    .build()
    .expect("a valid configuration")
}

/// How a restore in [`cost`] hashes.
#[derive(Clone, Copy, PartialEq)]
enum Into {
    /// A cache with a random seed, adopting the saved one (`restore`).
    Adopting,
    /// A cache with a random seed, keeping it (`restore_rekeyed`).
    Rekeyed,
    /// A cache built with the saved cache's seed.
    SameSeed,
}

/// The saved cache's seed, for the restore into a cache built with it.
const SEED: u64 = 7;

fn cost() {
    let path = std::env::temp_dir().join(format!("cuckoo-gate-warm-restart-{}.bin", std::process::id()));
    let cache = big_cache(Some(SEED));
    (0..ENTRIES).for_each(|i| _ = cache.insert(key(i), key(i + ENTRIES)));
    let shards = cache.shards();
    println!("\n## 1M u64 -> u64 entries ({} held, {shards} shards)", cache.len());
    let ways = [Into::Adopting, Into::Rekeyed, Into::SameSeed];
    let (mut saves, mut restores, mut bytes, mut entries) = (Vec::new(), vec![Vec::new(); 3], 0, [0; 3]);
    let mut dropped = [0; 3];
    let (mut held, mut peaks) = (Vec::new(), Vec::new());
    for round in 0..ROUNDS {
        let stop = AtomicBool::new(false);
        std::thread::scope(|s| {
            for t in 0..2u64 {
                let (cache, stop) = (&cache, &stop);
                s.spawn(move || {
                    let mut rng = Rng(round as u64 * 2 + t + 1);
                    while !stop.load(Ordering::Relaxed) {
                        let i = rng.below(ENTRIES);
                        if rng.below(4) == 0 {
                            let _ = cache.insert(key(i), key(i + ENTRIES));
                        } else {
                            std::hint::black_box(cache.get(&key(i)));
                        }
                    }
                });
            }
            std::thread::sleep(Duration::from_millis(20));
            let mut file = BufWriter::new(File::create(&path).expect("a file in the temporary folder"));
            let saved = cache.save(&mut file).expect("the save writes");
            drop(file);
            stop.store(true, Ordering::Relaxed);
            saves.push(saved.duration.as_secs_f64() * 1e3);
            bytes = saved.bytes;
        });
        // The three ways in turn, starting each round from another.
        for i in 0..ways.len() {
            let w = (round + i) % ways.len();
            let restarted = big_cache(if ways[w] == Into::SameSeed { Some(SEED) } else { None });
            let base = NOW.load(Ordering::Relaxed);
            PEAK.store(base, Ordering::Relaxed);
            let mut file = BufReader::new(File::open(&path).expect("the file just written"));
            let restored = match ways[w] {
                Into::Rekeyed => restarted.restore_rekeyed(&mut file),
                _ => restarted.restore(&mut file),
            }
            .expect("the save restores");
            restores[w].push(restored.duration.as_secs_f64() * 1e3);
            (entries[w], dropped[w]) = (restored.entries, restored.dropped);
            drop(file);
            if ways[w] == Into::Adopting {
                let after = NOW.load(Ordering::Relaxed);
                held.push((after - base) as f64);
                peaks.push((PEAK.load(Ordering::Relaxed) - base) as f64);
            }
        }
    }
    let _ = std::fs::remove_file(&path);
    let mib = |b: f64| b / (1 << 20) as f64;
    let raw = entries[0] as f64 * 16.0;
    let (held, peak) = (median(held), median(peaks));
    println!("| | median of {ROUNDS} | spread |");
    println!("|---|---|---|");
    let spread = |v: &[f64]| {
        let (lo, hi) = v.iter().fold((f64::MAX, 0f64), |(lo, hi), &x| (lo.min(x), hi.max(x)));
        format!("{lo:.0}-{hi:.0} ms")
    };
    println!(
        "| save, 2 threads reading and writing | {:.0} ms | {} |",
        median(saves.clone()),
        spread(&saves)
    );
    let labels = ["another seed (adopts the saved one)", "another seed, re-keyed", "the saved cache's seed"];
    for (w, label) in labels.iter().enumerate() {
        println!(
            "| restore into a cache with {label}: {} entries, {} dropped | {:.0} ms | {} |",
            entries[w],
            dropped[w],
            median(restores[w].clone()),
            spread(&restores[w])
        );
    }
    println!(
        "| file | {:.1} MiB, {:.2}x the entries' raw {:.1} MiB, {:.1} bytes per entry | |",
        mib(bytes as f64),
        bytes as f64 / raw,
        mib(raw),
        bytes as f64 / entries[0] as f64
    );
    println!(
        "| restore's peak memory | {:.1} MiB: the restored cache's {:.1} MiB + {:.1} MiB ({:.2} of its {shards} shards) | |",
        mib(peak),
        mib(held),
        mib(peak - held),
        (peak - held) / (held / shards as f64)
    );
}

fn main() {
    let mut args = std::env::args().skip(1);
    let (mut traces, mut pct) = (Vec::new(), 5.0);
    while let Some(arg) = args.next() {
        let mut value = || args.next().unwrap_or_else(|| usage(&format!("{arg} needs a value")));
        match arg.as_str() {
            "--trace" => traces.push(PathBuf::from(value())),
            "--capacity-pct" => {
                pct = value().parse().unwrap_or_else(|_| usage("bad --capacity-pct"));
                if !(pct > 0.0 && pct <= 100.0) {
                    usage("--capacity-pct must be in (0, 100]");
                }
            }
            other => usage(&format!("unknown argument {other}")),
        }
    }
    if traces.is_empty() {
        hit_ratios("generated (Zipf 0.9 + one-hit wonders)", &generated_workload(1_000_000), pct);
    }
    for path in &traces {
        let (requests, _) = trace::read(path).unwrap_or_else(|e| usage(&e));
        if requests.len() < 10 {
            usage(&format!("{} has too few requests", path.display()));
        }
        hit_ratios(&path.display().to_string(), &requests, pct);
    }
    cost();
}
