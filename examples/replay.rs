//! Replays a request stream through each admission policy and through the caches users
//! would pick instead (quick_cache, moka, TinyUFO), and prints hit ratio, cache writes and
//! throughput.
//!
//! ```text
//! cargo run --release --example replay                       # generated workload
//! cargo run --release --example replay -- --trace ../shared/traces/adaptsize_cdn.keys
//! cargo run --release --example replay -- --trace FILE --capacity-pct 5 --threads 2
//! cargo run --release --example replay -- --sweep ../shared/traces   # every trace, 1/5/10%
//! cargo run --release --example replay -- --sweep none                # the generated patterns only
//! cargo run --release --example replay -- --trace FILE --ttl  # objects with lifetimes
//! cargo run --release --example replay -- --sweep ../shared/traces --plot docs/figures
//! cargo run --release --example replay -- --sweep ../shared/traces --plot DIR --bounded
//! ```
//!
//! `--plot DIR` draws, for each trace (the generated workload without `--trace` or
//! `--sweep`), its hit ratio against the cache's size, from 0.5% to 20% of the distinct
//! keys, one line per cache, into `DIR/<trace>.svg` (and the byte hit ratio into
//! `DIR/<trace>-bytes.svg` for traces with sizes), on one thread and one shard (`--shards
//! S` for more). It then prints, over every figure's sizes (the cells), each cache's mean
//! hit ratio and the cells where it is more than 0.3 points under the best cache's; for each
//! of ours (the default `S3Fifo` and `S3FifoLfu`, S3-FIFO with a frequency sketch among
//! them) its mean against the best peer's mean and its worst cell against the best peer
//! (quick_cache, moka, TinyUFO) of that cell; and lists the default policy's cells.
//!
//! TinyUFO weighs entries in `u16`: weighted, it is given sizes and capacity in KiB.
//!
//! With `--ttl` each object gets a lifetime, drawn per key (fixed by a hash of the key) from
//! 0.2, 0.5, 1 and 2 seconds, as a CDN's `max-age` would give it, and is stored with
//! `insert_with_ttl` (moka: an `Expiry` returning the same lifetime; quick_cache and
//! TinyUFO have no expiry and sit this out). moka's clock cannot be set by hand, so the
//! replay runs in real time: one request every 10 µs, paced on the wall clock, single
//! threaded, for every cache alike.
//!
//! moka evicts in batches: an insert is logged, and the entries over its capacity leave
//! when its maintenance next runs, some writes later. As users run it, it holds more than
//! its capacity in between, which shows in a small cache: on lirs_sprite at 0.5% to 2% of
//! the keys (35 to 141 entries), `--bounded` lowers its hit ratio by 3 to 6 points.
//! `--bounded` runs moka's pending maintenance after each insert, so that every cache is
//! compared at the same number of entries (moka's label then says so).
//!
//! `--sweep DIR` replays every `.keys` file in `DIR` (none if `DIR` does not exist) and
//! then the classic adversarial patterns of `common/trace.rs`: a loop larger than the
//! cache, Zipf broken by scans, and a shift of the hot set.
//!
//! A request is a lookup; on a miss the object is offered to the cache (`insert`), which
//! stores it or not according to the policy. A hit is a request whose key was in the cache
//! before the request. The cache is sized in objects (a share of the distinct keys).
//! Traces whose lines carry a second column (the object's size in bytes) are replayed a
//! second time with caches weighted by size and sized in bytes (a share of the distinct
//! objects' bytes), reporting byte hit ratio and bytes written. The generated workload
//! (Zipf(0.9) over 100,000 objects, with one request in three for an object requested only
//! once) needs no files.
//!
//! With `--threads T` the trace is partitioned by key: each thread replays, in trace
//! order, the requests for the keys it owns, so every key sees exactly the request
//! sequence it has in the trace. The threads move through the trace in windows of
//! [`WINDOW`] requests, meeting at a barrier after each, so the interleaving between keys
//! stays within one window of the trace's (without it, one thread could run ahead and its
//! keys would have the cache to themselves). The cache then has 4 shards per thread; with
//! one thread it has one shard (one global order); `--shards S` sets it. Throughput includes the barrier waits.

use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Barrier;
use std::time::{Duration, Instant};

use cuckoo_gate::{Admission, AdmissionCache, AdmissionPolicy};

#[path = "common/trace.rs"]
mod trace;
use trace::{distinct, generated_workload, Request};

/// Requests per window of a multi-thread replay.
const WINDOW: usize = 4096;

struct Args {
    trace: Option<PathBuf>,
    sweep: Option<PathBuf>,
    capacity_pct: f64,
    threads: usize,
    ttl: bool,
    plot: Option<PathBuf>,
    shards: Option<usize>,
}

/// `--bounded`: moka runs its pending maintenance after each insert.
static BOUNDED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Inserts into moka, then runs its pending maintenance under `--bounded`.
fn moka_insert(cache: &moka::sync::Cache<u64, u32>, key: u64, size: u32) {
    cache.insert(key, size);
    if BOUNDED.load(Ordering::Relaxed) {
        cache.run_pending_tasks();
    }
}

/// The label a cache's figures are shown under: moka's says when it is bounded.
fn shown(label: &'static str) -> &'static str {
    match label {
        "moka 0.12" if BOUNDED.load(Ordering::Relaxed) => "moka 0.12 (bounded)",
        label => label,
    }
}

fn usage(problem: &str) -> ! {
    eprintln!("replay: {problem}");
    eprintln!(
        "usage: replay [--trace FILE | --sweep DIR] [--capacity-pct P] [--threads T | --ttl | --plot OUT] [--shards S] [--bounded]"
    );
    std::process::exit(2)
}

fn parse_args() -> Args {
    let mut args = Args {
        trace: None,
        sweep: None,
        capacity_pct: 5.0,
        threads: 1,
        ttl: false,
        plot: None,
        shards: None,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let mut value = || it.next().unwrap_or_else(|| usage(&format!("{flag} needs a value")));
        match flag.as_str() {
            "--trace" => args.trace = Some(value().into()),
            "--sweep" => args.sweep = Some(value().into()),
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
            "--ttl" => args.ttl = true,
            "--plot" => args.plot = Some(value().into()),
            "--bounded" => BOUNDED.store(true, Ordering::Relaxed),
            "--shards" => {
                let shards = value().parse().unwrap_or_else(|_| usage("bad --shards"));
                if shards == 0 {
                    usage("--shards must be at least 1");
                }
                args.shards = Some(shards);
            }
            "-h" | "--help" => usage("help"),
            other => usage(&format!("unknown argument {other}")),
        }
    }
    if (args.ttl || args.plot.is_some()) && args.threads > 1 {
        usage("--ttl and --plot replay on one thread");
    }
    if args.ttl && args.plot.is_some() {
        usage("--plot draws replays without lifetimes");
    }
    args
}

/// What a replay needs of a cache: a lookup, and an offer that says whether it stored.
trait Replayed: Sync {
    fn get(&self, key: u64) -> bool;
    /// `None` when the cache does not say whether it stored the object.
    fn offer(&self, key: u64, size: u32) -> Option<bool>;
}

impl Replayed for AdmissionCache<u64, u32> {
    fn get(&self, key: u64) -> bool {
        AdmissionCache::get(self, &key).is_some()
    }
    fn offer(&self, key: u64, size: u32) -> Option<bool> {
        Some(self.insert(key, size) == Admission::Admitted)
    }
}

/// Weighs an object by its size, or 1 if `.0` is false.
#[derive(Clone)]
struct SizeWeighter(bool);

impl quick_cache::Weighter<u64, u32> for SizeWeighter {
    fn weight(&self, _: &u64, size: &u32) -> u64 {
        if self.0 {
            u64::from(*size)
        } else {
            1
        }
    }
}

type QuickCache = quick_cache::sync::Cache<u64, u32, SizeWeighter>;

impl Replayed for QuickCache {
    fn get(&self, key: u64) -> bool {
        QuickCache::get(self, &key).is_some()
    }
    fn offer(&self, key: u64, size: u32) -> Option<bool> {
        self.insert(key, size);
        Some(true) // quick_cache stores every insert (its ghost queue only places it)
    }
}

impl Replayed for moka::sync::Cache<u64, u32> {
    fn get(&self, key: u64) -> bool {
        moka::sync::Cache::get(self, &key).is_some()
    }
    fn offer(&self, key: u64, size: u32) -> Option<bool> {
        moka_insert(self, key, size);
        None // TinyLFU may refuse it later; moka does not tell
    }
}

/// TinyUFO's weight for an object of `size` bytes, in KiB (it weighs in `u16`).
fn kib(size: u32) -> u16 {
    size.div_ceil(1024).clamp(1, u32::from(u16::MAX)) as u16
}

/// TinyUFO, weighing by size in KiB if `.1`.
struct TinyUfo(tinyufo::TinyUfo<u64, u32>, bool);

impl Replayed for TinyUfo {
    fn get(&self, key: u64) -> bool {
        self.0.get(&key).is_some()
    }
    fn offer(&self, key: u64, size: u32) -> Option<bool> {
        self.0.put(key, size, if self.1 { kib(size) } else { 1 });
        None // TinyLFU may refuse it; put does not tell
    }
}

/// The caches compared, each made for a capacity (objects, or bytes when `weighted`),
/// the expected number of objects held, and the shard count.
type Maker = fn(u64, usize, usize, bool) -> Box<dyn Replayed>;

fn ours(
    policy: AdmissionPolicy,
    capacity: u64,
    entries: usize,
    shards: usize,
    weighted: bool,
) -> Box<dyn Replayed> {
    let mut b = AdmissionCache::<u64, u32>::builder()
        .capacity(capacity)
        .admission(policy)
        .shards(shards.min(capacity as usize))
        .seed(7);
    if weighted {
        b = b.weigher(|_, size| *size).estimated_entries(entries.max(1));
    }
    Box::new(b.build().expect("replay's cache configuration is valid"))
}

const CACHES: [(&str, Maker); 7] = [
    ("LRU (Always)", |c, e, s, w| ours(AdmissionPolicy::Always, c, e, s, w)),
    ("SecondHit", |c, e, s, w| ours(AdmissionPolicy::SecondHit, c, e, s, w)),
    ("S3Fifo (default)", |c, e, s, w| ours(AdmissionPolicy::S3Fifo, c, e, s, w)),
    ("S3FifoLfu", |c, e, s, w| ours(AdmissionPolicy::S3FifoLfu, c, e, s, w)),
    ("quick_cache 0.7", |c, e, s, w| {
        let options = quick_cache::OptionsBuilder::new()
            .estimated_items_capacity(e.max(1))
            .weight_capacity(c)
            .shards(s.next_power_of_two())
            .build()
            .expect("valid quick_cache options");
        Box::new(QuickCache::with_options(options, SizeWeighter(w), Default::default(), Default::default()))
    }),
    ("moka 0.12", |c, _, _, w| {
        let mut b = moka::sync::Cache::builder().max_capacity(c);
        if w {
            b = b.weigher(|_, size: &u32| *size);
        }
        Box::new(b.build())
    }),
    ("TinyUFO 0.9", |c, e, _, w| {
        let limit = if w { c.div_ceil(1024) } else { c };
        Box::new(TinyUfo(tinyufo::TinyUfo::new(limit as usize, e.max(1)), w))
    }),
];

#[derive(Default)]
struct Outcome {
    hits: u64,
    hit_bytes: u64,
    writes: Option<u64>,
    written_bytes: Option<u64>,
    ops_per_sec: f64,
}

fn replay(trace: &[Request], parts: &[Vec<u32>], cache: &dyn Replayed, progress: bool) -> Outcome {
    let (hits, hit_bytes) = (AtomicU64::new(0), AtomicU64::new(0));
    let (writes, written_bytes, unknown) = (AtomicU64::new(0), AtomicU64::new(0), AtomicU64::new(0));
    let done = AtomicU64::new(0);
    let barrier = Barrier::new(parts.len());
    let windows = trace.len().div_ceil(WINDOW);
    let start = Instant::now();
    std::thread::scope(|s| {
        for part in parts {
            let (hits, hit_bytes, writes, written_bytes, unknown, done, barrier) =
                (&hits, &hit_bytes, &writes, &written_bytes, &unknown, &done, &barrier);
            s.spawn(move || {
                let (mut h, mut hb, mut w, mut wb, mut u) = (0, 0, 0, 0, 0);
                let mut next = 0;
                for (i, &r) in part.iter().enumerate() {
                    // Wait for the others at each window boundary this request crosses.
                    while next < windows && r as usize >= next * WINDOW {
                        if parts.len() > 1 {
                            barrier.wait();
                        }
                        next += 1;
                    }
                    let Request { key, size } = trace[r as usize];
                    if cache.get(key) {
                        h += 1;
                        hb += u64::from(size);
                    } else {
                        match cache.offer(key, size) {
                            Some(true) => {
                                w += 1;
                                wb += u64::from(size);
                            }
                            Some(false) => {}
                            None => u += 1,
                        }
                    }
                    if progress && i % 65_536 == 65_535 {
                        let total = done.fetch_add(65_536, Ordering::Relaxed) + 65_536;
                        eprint!("\r  {:>3}% ", total * 100 / trace.len() as u64);
                    }
                }
                // Pass the remaining barriers, so the other threads are not left waiting.
                if parts.len() > 1 {
                    (next..windows).for_each(|_| {
                        barrier.wait();
                    });
                }
                hits.fetch_add(h, Ordering::Relaxed);
                hit_bytes.fetch_add(hb, Ordering::Relaxed);
                writes.fetch_add(w, Ordering::Relaxed);
                written_bytes.fetch_add(wb, Ordering::Relaxed);
                unknown.fetch_add(u, Ordering::Relaxed);
            });
        }
    });
    let elapsed = start.elapsed().as_secs_f64();
    if progress {
        eprint!("\r       \r");
    }
    let known = unknown.into_inner() == 0;
    Outcome {
        hits: hits.into_inner(),
        hit_bytes: hit_bytes.into_inner(),
        writes: known.then(|| writes.load(Ordering::Relaxed)),
        written_bytes: known.then(|| written_bytes.load(Ordering::Relaxed)),
        ops_per_sec: trace.len() as f64 / elapsed,
    }
}

/// Request indices for each thread: thread `t` owns the keys that hash to `t`.
fn partition(trace: &[Request], threads: usize) -> Vec<Vec<u32>> {
    let mut parts = vec![Vec::new(); threads];
    for (i, r) in trace.iter().enumerate() {
        let owner = (r.key.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 32) as usize % threads;
        parts[owner].push(i as u32);
    }
    parts
}

fn report(name: &str, trace: &[Request], pct: f64, threads: usize, shards: Option<usize>, weighted: bool) {
    let (objects, bytes) = distinct(trace);
    let shards = shards.unwrap_or(if threads == 1 { 1 } else { threads * 4 });
    let (capacity, entries) = if weighted {
        let capacity = ((bytes as f64 * pct / 100.0) as u64).max(1);
        (capacity, (objects as f64 * pct / 100.0) as usize)
    } else {
        let capacity = ((objects as f64 * pct / 100.0) as u64).max(10);
        (capacity, capacity as usize)
    };
    let unit = if weighted { "bytes" } else { "entries" };
    println!(
        "## {name}: {} requests, {objects} objects, cache of {capacity} {unit} ({pct}%), {threads} thread(s), {shards} shard(s)",
        trace.len()
    );
    let (ratio, written) =
        if weighted { ("byte hit ratio", "bytes written") } else { ("hit ratio", "writes") };
    println!("| cache | {ratio} | {written} | saved vs LRU | Mops/s |");
    println!("|---|---|---|---|---|");
    let parts = partition(trace, threads);
    let progress = trace.len() >= 2_000_000 && std::io::stderr().is_terminal();
    let total_bytes: u64 = trace.iter().map(|r| u64::from(r.size)).sum();
    let mut lru_written = None;
    for (label, make) in CACHES {
        let cache = make(capacity, entries, shards, weighted);
        let o = replay(trace, &parts, &*cache, progress);
        let (hit, written) = if weighted {
            (o.hit_bytes as f64 / total_bytes as f64, o.written_bytes)
        } else {
            (o.hits as f64 / trace.len() as f64, o.writes)
        };
        let base = *lru_written.get_or_insert(written.unwrap_or(0));
        let (written, saved) = match written {
            Some(w) => (w.to_string(), format!("{:.1}%", 100.0 * (1.0 - w as f64 / base as f64))),
            None => ("n/a".into(), "n/a".into()),
        };
        println!("| {} | {hit:.4} | {written} | {saved} | {:.2} |", shown(label), o.ops_per_sec / 1e6);
        std::io::stdout().flush().ok();
    }
    println!();
}

/// The lifetime of `key` under `--ttl`: 0.2, 0.5, 1 or 2 s, by a hash of the key.
fn lifetime(key: u64) -> Duration {
    const LIFETIMES_MS: [u64; 4] = [200, 500, 1_000, 2_000];
    Duration::from_millis(LIFETIMES_MS[(key.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 62) as usize])
}

/// Real time between requests under `--ttl`.
const PACE: Duration = Duration::from_micros(10);

/// What a `--ttl` replay needs of a cache: a lookup, and an offer with a lifetime.
trait Timed {
    fn get(&self, key: u64) -> bool;
    fn offer(&self, key: u64, size: u32, ttl: Duration) -> Option<bool>;
}

impl Timed for AdmissionCache<u64, u32> {
    fn get(&self, key: u64) -> bool {
        AdmissionCache::get(self, &key).is_some()
    }
    fn offer(&self, key: u64, size: u32, ttl: Duration) -> Option<bool> {
        Some(self.insert_with_ttl(key, size, ttl) == Admission::Admitted)
    }
}

/// moka's per-entry lifetime: [`lifetime`] of the key, from each write.
struct PerKey;

impl moka::Expiry<u64, u32> for PerKey {
    fn expire_after_create(&self, key: &u64, _: &u32, _: std::time::Instant) -> Option<Duration> {
        Some(lifetime(*key))
    }
    fn expire_after_update(
        &self,
        key: &u64,
        _: &u32,
        _: std::time::Instant,
        _: Option<Duration>,
    ) -> Option<Duration> {
        Some(lifetime(*key))
    }
}

impl Timed for moka::sync::Cache<u64, u32> {
    fn get(&self, key: u64) -> bool {
        moka::sync::Cache::get(self, &key).is_some()
    }
    fn offer(&self, key: u64, size: u32, _: Duration) -> Option<bool> {
        // Every insert is written to moka's table; TinyLFU may evict it at the next
        // maintenance, after the write.
        moka_insert(self, key, size);
        Some(true)
    }
}

/// Replays `trace` with lifetimes, one request per [`PACE`] of real time.
fn replay_timed(trace: &[Request], cache: &dyn Timed) -> Outcome {
    let mut o = Outcome { writes: Some(0), written_bytes: Some(0), ..Outcome::default() };
    let start = Instant::now();
    for (i, &Request { key, size }) in trace.iter().enumerate() {
        if i % 64 == 0 {
            let due = PACE * i as u32;
            while start.elapsed() < due {
                std::hint::spin_loop();
            }
        }
        if cache.get(key) {
            o.hits += 1;
            o.hit_bytes += u64::from(size);
            continue;
        }
        match cache.offer(key, size, lifetime(key)) {
            Some(stored) => {
                o.writes = o.writes.map(|w| w + u64::from(stored));
                o.written_bytes = o.written_bytes.map(|w| w + if stored { u64::from(size) } else { 0 });
            }
            None => (o.writes, o.written_bytes) = (None, None),
        }
    }
    o.ops_per_sec = trace.len() as f64 / start.elapsed().as_secs_f64();
    o
}

/// The `--ttl` table: our policies and moka, on one thread, with lifetimes.
fn report_ttl(name: &str, trace: &[Request], pct: f64, weighted: bool) {
    let (objects, bytes) = distinct(trace);
    let capacity = if weighted {
        ((bytes as f64 * pct / 100.0) as u64).max(1)
    } else {
        ((objects as f64 * pct / 100.0) as u64).max(10)
    };
    let entries = (objects as f64 * pct / 100.0).max(1.0) as usize;
    let unit = if weighted { "bytes" } else { "entries" };
    println!(
        "## {name} with lifetimes of 0.2 to 2 s, one request per 10 us: {} requests, {objects} objects, cache of {capacity} {unit} ({pct}%)",
        trace.len()
    );
    let (ratio, written) =
        if weighted { ("byte hit ratio", "bytes written") } else { ("hit ratio", "writes") };
    println!("| cache | {ratio} | {written} |");
    println!("|---|---|---|");
    let total_bytes: u64 = trace.iter().map(|r| u64::from(r.size)).sum();
    let mut caches: Vec<(&str, Box<dyn Timed>)> = Vec::new();
    for (label, policy) in [
        ("LRU (Always)", AdmissionPolicy::Always),
        ("SecondHit", AdmissionPolicy::SecondHit),
        ("S3Fifo (default)", AdmissionPolicy::S3Fifo),
        ("S3FifoLfu", AdmissionPolicy::S3FifoLfu),
    ] {
        let mut b =
            AdmissionCache::<u64, u32>::builder().capacity(capacity).admission(policy).shards(1).seed(7);
        if weighted {
            b = b.weigher(|_, size| *size).estimated_entries(entries);
        }
        caches.push((label, Box::new(b.build().expect("replay's cache configuration is valid"))));
    }
    let mut moka = moka::sync::Cache::builder().max_capacity(capacity).expire_after(PerKey);
    if weighted {
        moka = moka.weigher(|_, size: &u32| *size);
    }
    caches.push(("moka 0.12", Box::new(moka.build())));
    for (label, cache) in caches {
        let o = replay_timed(trace, &*cache);
        let (hit, written) = if weighted {
            (o.hit_bytes as f64 / total_bytes as f64, o.written_bytes)
        } else {
            (o.hits as f64 / trace.len() as f64, o.writes)
        };
        let written = written.map_or("n/a".into(), |w| w.to_string());
        println!("| {} | {hit:.4} | {written} |", shown(label));
        std::io::stdout().flush().ok();
    }
    println!();
}

/// Cache sizes a plot spans, in percent of the distinct keys (or bytes).
const PLOT_SIZES: [f64; 7] = [0.5, 1.0, 2.0, 5.0, 10.0, 15.0, 20.0];

/// Hit ratio (byte hit ratio if `weighted`) of every cache at every size of
/// [`PLOT_SIZES`]: one line of points per cache.
fn curves(trace: &[Request], shards: usize, weighted: bool) -> Vec<(&'static str, Vec<(f64, f64)>)> {
    let (objects, bytes) = distinct(trace);
    let total_bytes: u64 = trace.iter().map(|r| u64::from(r.size)).sum();
    let parts = partition(trace, 1);
    CACHES
        .iter()
        .map(|&(label, make)| {
            let points = PLOT_SIZES
                .iter()
                .map(|&pct| {
                    let entries = ((objects as f64 * pct / 100.0) as usize).max(10);
                    let capacity =
                        if weighted { ((bytes as f64 * pct / 100.0) as u64).max(1) } else { entries as u64 };
                    let o = replay(trace, &parts, &*make(capacity, entries, shards, weighted), false);
                    let hit = if weighted {
                        o.hit_bytes as f64 / total_bytes as f64
                    } else {
                        o.hits as f64 / trace.len() as f64
                    };
                    (pct, hit)
                })
                .collect();
            (shown(label), points)
        })
        .collect()
}

/// Draws `curves` of the trace `name` into `path`, an SVG.
fn plot(
    path: &std::path::Path,
    name: &str,
    weighted: bool,
    curves: &[(&str, Vec<(f64, f64)>)],
) -> Result<(), String> {
    use plotters::prelude::*;
    let hits = || curves.iter().flat_map(|(_, points)| points.iter().map(|&(_, hit)| hit));
    let (low, top) = (hits().fold(1.0, f64::min), hits().fold(0.0, f64::max));
    // Ours first, in dark tones (the default, S3-FIFO, in black and thicker; S3-FIFO with
    // its sketch in dark green); the peers in colours.
    const COLOURS: [RGBColor; 7] = [
        RGBColor(200, 60, 60),
        RGBColor(120, 120, 120),
        RGBColor(0, 0, 0),
        RGBColor(40, 120, 60),
        RGBColor(30, 110, 220),
        RGBColor(230, 140, 20),
        RGBColor(150, 60, 190),
    ];
    let root = SVGBackend::new(path, (800, 500)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| e.to_string())?;
    let what = if weighted { "byte hit ratio" } else { "hit ratio" };
    let mut chart = ChartBuilder::on(&root)
        .caption(format!("{name}: {what} by cache size"), ("sans-serif", 22))
        .margin(15)
        .x_label_area_size(45)
        .y_label_area_size(60)
        .build_cartesian_2d(
            (PLOT_SIZES[0]..PLOT_SIZES[PLOT_SIZES.len() - 1]).log_scale(),
            (low - 0.05 * (top - low)).max(0.0)..(top + 0.05 * (top - low)).min(1.0),
        )
        .map_err(|e| e.to_string())?;
    chart
        .configure_mesh()
        .light_line_style(TRANSPARENT)
        .x_labels(PLOT_SIZES.len())
        .x_desc(if weighted {
            "cache size, % of the distinct objects' bytes"
        } else {
            "cache size, % of the distinct keys"
        })
        .y_desc(what)
        .x_label_formatter(&|x| format!("{x}%"))
        .draw()
        .map_err(|e| e.to_string())?;
    for (i, (label, points)) in curves.iter().enumerate() {
        let color = COLOURS[i % COLOURS.len()].to_rgba();
        let style = ShapeStyle { color, filled: true, stroke_width: if i == 2 { 3 } else { 2 } };
        chart
            .draw_series(LineSeries::new(points.iter().copied(), style))
            .map_err(|e| e.to_string())?
            .label(*label)
            .legend(move |(x, y)| PathElement::new([(x, y), (x + 20, y)], style));
        chart.draw_series(points.iter().map(|&p| Circle::new(p, 3, style))).map_err(|e| e.to_string())?;
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperLeft)
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .draw()
        .map_err(|e| e.to_string())?;
    root.present().map_err(|e| e.to_string())
}

/// `--plot`: one figure per trace (and per trace with sizes, one of bytes), then a summary
/// of every cell (a figure's size): each cache's mean hit ratio, the cells where it is
/// more than [`NEAR`] under the best cache's, and those of the default policy.
fn plot_all(dir: &std::path::Path, traces: &[(String, Vec<Request>, bool)], shards: usize) {
    std::fs::create_dir_all(dir).unwrap_or_else(|e| usage(&format!("cannot create {}: {e}", dir.display())));
    // (figure, size, each cache's hit ratio in CACHES' order)
    let mut cells: Vec<(String, f64, Vec<f64>)> = Vec::new();
    for (name, trace, sized) in traces {
        let stem = match std::path::Path::new(name).file_stem() {
            Some(stem) if !name.starts_with("generated") => stem.to_string_lossy().into_owned(),
            _ => "generated".to_owned(),
        };
        for weighted in [false, true] {
            if weighted && !sized {
                continue;
            }
            let figure = format!("{stem}{}", if weighted { "-bytes" } else { "" });
            let file = dir.join(format!("{figure}.svg"));
            let lines = curves(trace, shards, weighted);
            plot(&file, &stem, weighted, &lines)
                .unwrap_or_else(|e| usage(&format!("cannot draw {}: {e}", file.display())));
            println!("{}", file.display());
            for (label, points) in &lines {
                let cells: Vec<String> =
                    points.iter().map(|(pct, hit)| format!("{pct}%: {hit:.4}")).collect();
                println!("  {label}: {}", cells.join(", "));
            }
            for (i, &pct) in PLOT_SIZES.iter().enumerate() {
                cells.push((figure.clone(), pct, lines.iter().map(|(_, points)| points[i].1).collect()));
            }
        }
    }
    summarise(&cells, shards);
}

/// Hit ratios within this of the best cache's count as level with it (0.3 points).
const NEAR: f64 = 0.003;

/// `--plot`'s summary of `cells`, replayed with `shards` shards.
fn summarise(cells: &[(String, f64, Vec<f64>)], shards: usize) {
    if cells.is_empty() {
        return;
    }
    // The best cache of a cell (the first, if tied), and its hit ratio.
    let top = |hits: &[f64]| {
        hits.iter().copied().enumerate().fold((0, 0.0), |t, (i, h)| if h > t.1 { (i, h) } else { t })
    };
    let best = |hits: &[f64]| top(hits).1;
    println!();
    println!(
        "## {} cells, {shards} shard(s): mean hit ratio, cells more than 0.3 points under the best",
        cells.len()
    );
    println!("| cache | mean | cells under the best |");
    println!("|---|---|---|");
    for (i, (label, _)) in CACHES.iter().enumerate() {
        let mean = cells.iter().map(|(_, _, hits)| hits[i]).sum::<f64>() / cells.len() as f64;
        let under = cells.iter().filter(|(_, _, hits)| hits[i] < best(hits) - NEAR).count();
        println!("| {} | {mean:.4} | {under} |", shown(label));
    }
    let ours =
        CACHES.iter().position(|(label, _)| label.ends_with("(default)")).expect("the default is replayed");
    // The peers: the caches users would pick instead (after ours in CACHES).
    let peers =
        CACHES.iter().position(|(label, _)| label.starts_with("quick_cache")).expect("peers are replayed");
    let peer = |hits: &[f64]| hits[peers..].iter().copied().fold(0.0, f64::max);
    let peer_means: Vec<f64> = (peers..CACHES.len())
        .map(|i| cells.iter().map(|(_, _, hits)| hits[i]).sum::<f64>() / cells.len() as f64)
        .collect();
    let best_peer_mean = peer_means.iter().copied().fold(0.0, f64::max);
    println!();
    println!("Against the best peer in each cell (quick_cache, moka, TinyUFO):");
    for (i, (label, _)) in CACHES.iter().enumerate().take(peers) {
        let diffs: Vec<f64> = cells.iter().map(|(_, _, hits)| hits[i] - peer(hits)).collect();
        let (worst, at) =
            diffs.iter().zip(cells).fold(
                (f64::MAX, ""),
                |w, (&d, (figure, _, _))| {
                    if d < w.0 {
                        (d, figure.as_str())
                    } else {
                        w
                    }
                },
            );
        let mean = cells.iter().map(|(_, _, hits)| hits[i]).sum::<f64>() / cells.len() as f64;
        println!(
            "  {label}: mean {:+.2} points over the best peer's mean, worst cell {:+.2} ({at}), {} cells more than 0.5 under",
            100.0 * (mean - best_peer_mean),
            100.0 * worst,
            diffs.iter().filter(|&&d| d < -0.005).count()
        );
    }
    println!();
    println!("The default's cells more than 0.3 points under the best:");
    for (figure, pct, hits) in cells.iter().filter(|(_, _, hits)| hits[ours] < best(hits) - NEAR) {
        let (at, _) = top(hits);
        println!(
            "  {figure} {pct}%: {:.4}, {:+.2} points under {} ({:.4})",
            hits[ours],
            100.0 * (hits[ours] - hits[at]),
            shown(CACHES[at].0),
            hits[at]
        );
    }
}

fn main() {
    let args = parse_args();
    let mut own_sizes: Vec<(String, &[f64])> = Vec::new();
    let traces: Vec<(String, Vec<Request>, bool)> = if let Some(dir) = &args.sweep {
        let entries = match std::fs::read_dir(dir) {
            Ok(entries) => entries.filter_map(|e| e.ok().map(|e| e.path())).collect(),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Vec::new(),
            Err(e) => usage(&format!("cannot read {}: {e}", dir.display())),
        };
        let mut files: Vec<_> =
            entries.into_iter().filter(|p| p.extension().is_some_and(|x| x == "keys")).collect();
        files.sort();
        let mut traces: Vec<_> = files
            .iter()
            .map(|f| {
                let (trace, sized) = trace::read(f).unwrap_or_else(|e| usage(&e));
                (f.file_name().unwrap().to_string_lossy().into_owned(), trace, sized)
            })
            .collect();
        for pattern in trace::adversarial() {
            if let Some(sizes) = pattern.sizes {
                own_sizes.push((pattern.name.to_string(), sizes));
            }
            traces.push((pattern.name.to_string(), pattern.requests, false));
        }
        traces
    } else {
        match &args.trace {
            Some(path) => {
                let (trace, sized) = trace::read(path).unwrap_or_else(|e| usage(&e));
                vec![(path.display().to_string(), trace, sized)]
            }
            None => {
                vec![("generated (Zipf 0.9 + one-hit wonders)".into(), generated_workload(3_000_000), false)]
            }
        }
    };
    if let Some(dir) = &args.plot {
        plot_all(dir, &traces, args.shards.unwrap_or(1));
        return;
    }
    let sizes: &[f64] = if args.sweep.is_some() { &[1.0, 5.0, 10.0] } else { &[args.capacity_pct] };
    for (name, trace, sized) in &traces {
        if trace.is_empty() {
            usage(&format!("{name} is empty"));
        }
        let sizes = own_sizes.iter().find(|(own, _)| own == name).map_or(sizes, |(_, sizes)| *sizes);
        for &pct in sizes {
            if args.ttl {
                report_ttl(name, trace, pct, false);
                if *sized {
                    report_ttl(name, trace, pct, true);
                }
                continue;
            }
            report(name, trace, pct, args.threads, args.shards, false);
            if *sized {
                report(name, trace, pct, args.threads, args.shards, true);
            }
        }
    }
}
