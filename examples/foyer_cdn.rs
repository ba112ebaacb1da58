//! A CDN node on foyer's hybrid cache, with and without the seen-before gate in front of
//! its disk tier: disk bytes written, hit ratios and requests per second.
//!
//! ```text
//! cargo run --release --features foyer --example foyer_cdn     # adaptsize_cdn, or generated
//! cargo run --release --features foyer --example foyer_cdn -- --trace FILE
//! ```
//!
//! Each request is a `get`; on a miss the object (a value of its size in bytes) is
//! inserted. The memory tier holds 1% of the distinct objects' bytes and the disk tier
//! (a directory under the system's temporary directory, removed afterwards) 10%, in 4 MiB
//! blocks; foyer writes an entry to disk when memory evicts it (its default policy). The
//! gate, [`SecondSighting`], lets an entry onto disk the second time it is offered within
//! its memory of as many keys as the disk holds objects of the mean size. Without
//! `--trace` the example replays `../shared/traces/adaptsize_cdn.keys` (key and size per
//! line) if it is there, and otherwise a generated workload (Zipf 0.9 with one-hit
//! wonders, sizes from 512 bytes to 64 KiB).

use std::path::PathBuf;
use std::time::Instant;

use cuckoo_gate::foyer::SecondSighting;
use cuckoo_gate::SeenBefore;
use foyer::{
    BlockEngineConfig, DeviceBuilder, FsDeviceBuilder, HybridCache, HybridCacheBuilder, StorageFilter,
};

#[path = "common/trace.rs"]
mod trace;
use trace::Request;

const SHARED_TRACE: &str = "../shared/traces/adaptsize_cdn.keys";
const BLOCK: usize = 4 << 20;

fn usage(problem: &str) -> ! {
    eprintln!("foyer_cdn: {problem}");
    eprintln!("usage: foyer_cdn [--trace FILE]");
    std::process::exit(2)
}

/// What one replay measured.
struct Outcome {
    requests: usize,
    memory_hits: usize,
    disk_hits: usize,
    disk_bytes_written: usize,
    seconds: f64,
}

impl Outcome {
    fn hit_ratio(&self) -> f64 {
        (self.memory_hits + self.disk_hits) as f64 / self.requests as f64
    }

    /// Disk hits per request that missed memory.
    fn disk_hit_ratio(&self) -> f64 {
        self.disk_hits as f64 / (self.requests - self.memory_hits) as f64
    }
}

async fn replay(trace: &[Request], memory: usize, disk: usize, gate: Option<SecondSighting>) -> Outcome {
    let dir = std::env::temp_dir().join(format!("cuckoo-gate-foyer-cdn-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let device = FsDeviceBuilder::new(&dir)
        .with_capacity(disk)
        .build()
        .expect("a disk device in the temporary directory");
    let filter = gate.into_iter().fold(StorageFilter::new(), |f, gate| f.with_condition(gate));
    let cache: HybridCache<u64, Vec<u8>> = HybridCacheBuilder::new()
        .with_name("cdn")
        .memory(memory)
        .with_weighter(|_: &u64, v: &Vec<u8>| v.len())
        .storage()
        .with_engine_config(
            BlockEngineConfig::new(device).with_block_size(BLOCK).with_admission_filter(filter),
        )
        .build()
        .await
        .expect("a hybrid cache");
    let start = Instant::now();
    let (mut memory_hits, mut disk_hits) = (0, 0);
    for r in trace {
        let in_memory = cache.memory().contains(&r.key);
        match cache.get(&r.key).await {
            Ok(Some(_)) if in_memory => memory_hits += 1,
            Ok(Some(_)) => disk_hits += 1,
            Ok(None) => drop(cache.insert(r.key, vec![0; r.size as usize])),
            Err(e) => usage(&format!("foyer: {e}")),
        }
    }
    cache.storage().wait().await;
    let seconds = start.elapsed().as_secs_f64();
    let disk_bytes_written = cache.statistics().disk_write_bytes();
    cache.close().await.expect("the cache closes");
    drop(cache);
    let _ = std::fs::remove_dir_all(&dir);
    Outcome { requests: trace.len(), memory_hits, disk_hits, disk_bytes_written, seconds }
}

fn main() {
    let mut args = std::env::args().skip(1);
    let path = match (args.next().as_deref(), args.next()) {
        (None, _) => Some(PathBuf::from(SHARED_TRACE)).filter(|p| p.exists()),
        (Some("--trace"), Some(file)) => Some(PathBuf::from(file)),
        _ => usage("bad arguments"),
    };
    let (name, trace) = match &path {
        Some(path) => match trace::read(path) {
            Ok((trace, true)) => (path.display().to_string(), trace),
            Ok((_, false)) => usage(&format!("{} has no sizes (a second column)", path.display())),
            Err(e) => usage(&e),
        },
        None => (
            "generated (Zipf 0.9 + one-hit wonders, sized)".to_owned(),
            trace::generated_sized_workload(300_000),
        ),
    };
    if trace.is_empty() {
        usage(&format!("{name} is empty"));
    }
    let (objects, bytes) = trace::distinct(&trace);
    let bytes = bytes as usize;
    let memory = (bytes / 100).max(1 << 20);
    let disk = (bytes / 10).next_multiple_of(BLOCK).max(8 * BLOCK);
    let gate_keys = (disk / (bytes / objects).max(1)).max(1024);
    println!(
        "{name}: {} requests, {objects} objects, {:.1} MiB",
        trace.len(),
        bytes as f64 / (1 << 20) as f64
    );
    println!(
        "memory tier {:.1} MiB, disk tier {:.0} MiB, gate remembers {gate_keys} keys\n",
        memory as f64 / (1 << 20) as f64,
        disk as f64 / (1 << 20) as f64
    );

    let runtime =
        tokio::runtime::Builder::new_current_thread().enable_all().build().expect("a tokio runtime");
    let plain = runtime.block_on(replay(&trace, memory, disk, None));
    let gate = SecondSighting::new(SeenBefore::builder().capacity(gate_keys).build().expect("a gate"));
    let gated = runtime.block_on(replay(&trace, memory, disk, Some(gate.clone())));

    println!("| disk admission | disk MiB written | disk hit ratio | total hit ratio | requests/s |");
    println!("|---|---|---|---|---|");
    for (label, o) in [("all (foyer's default)", &plain), ("second sighting (cuckoo-gate)", &gated)] {
        println!(
            "| {label} | {:.1} | {:.4} | {:.4} | {:.0} |",
            o.disk_bytes_written as f64 / (1 << 20) as f64,
            o.disk_hit_ratio(),
            o.hit_ratio(),
            o.requests as f64 / o.seconds
        );
    }
    let stats = gate.stats();
    println!(
        "\nwith the gate: {:.1}% fewer disk bytes written, total hit ratio {:+.2} points; gate admitted {}, rejected {}",
        100.0 * (1.0 - gated.disk_bytes_written as f64 / plain.disk_bytes_written.max(1) as f64),
        100.0 * (gated.hit_ratio() - plain.hit_ratio()),
        stats.admitted,
        stats.rejected
    );
}
