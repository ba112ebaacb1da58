//! Warm restart, measured: snapshot a filter of 10M keys to a file while writers keep
//! inserting, restore it, and check that it answers as the original.
//!
//! ```text
//! cargo run --release --example snapshot             # 10M keys
//! cargo run --release --example snapshot -- --quick  # 1M keys
//! ```
//!
//! Reports snapshot and restore time (medians of 5), bytes per key, and the longest insert
//! latency a concurrent writer saw while snapshots ran against it, next to its longest
//! with no snapshot running (the pause a snapshot costs writers).

use std::fs::File;
use std::io::{BufReader, BufWriter, Write};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use cuckoo_gate::CuckooFilter;

mod common;
use common::{key, median};

/// The longest single insert of a writer that runs until `stop`, starting at key `first`.
fn writer_worst(filter: &CuckooFilter, first: u64, stop: &AtomicBool) -> Duration {
    let mut worst = Duration::ZERO;
    let mut i = first;
    while !stop.load(Ordering::Relaxed) {
        let start = Instant::now();
        filter.insert(&key(i)).expect("the filter has room");
        worst = worst.max(start.elapsed());
        i += 1;
    }
    worst
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let n: u64 = if std::env::args().any(|a| a == "--quick") { 1_000_000 } else { 10_000_000 };
    let filter =
        CuckooFilter::builder().capacity(n as usize * 2).max_capacity(n as usize * 2).seed(1).build()?;
    (0..n).try_for_each(|i| filter.insert(&key(i)))?;
    let path = std::env::temp_dir().join(format!("cuckoo-gate-snapshot-{}.bin", std::process::id()));

    let (mut saves, mut loads) = (Vec::new(), Vec::new());
    let mut restored = None;
    for _ in 0..5 {
        let start = Instant::now();
        let mut out = BufWriter::new(File::create(&path)?);
        filter.snapshot(&mut out)?;
        out.flush()?;
        saves.push(start.elapsed().as_secs_f64() * 1e3);
        let start = Instant::now();
        restored = Some(CuckooFilter::restore(&mut BufReader::new(File::open(&path)?))?);
        loads.push(start.elapsed().as_secs_f64() * 1e3);
    }
    let restored = restored.expect("five rounds ran");
    let bytes = std::fs::metadata(&path)?.len();
    std::fs::remove_file(&path)?;

    let present_ok = (0..n).all(|i| restored.contains(&key(i)));
    let absent_same = (n..n + 1_000_000).all(|i| restored.contains(&key(i)) == filter.contains(&key(i)));
    println!(
        "filter: {n} keys, ε = 0.1%, {:.1} MiB in memory",
        filter.memory_usage() as f64 / (1 << 20) as f64
    );
    println!(
        "snapshot to a file: {:.1} ms, restore: {:.1} ms (medians of 5); {bytes} bytes = {:.2} bytes per key",
        median(saves),
        median(loads),
        bytes as f64 / n as f64
    );
    println!("restored: every key present: {present_ok}; same answer for 1M absent keys: {absent_same}");

    // The pause: a writer's longest insert with no snapshot, then with snapshots running.
    let quiet = {
        let stop = AtomicBool::new(false);
        std::thread::scope(|s| {
            let writer = s.spawn(|| writer_worst(&filter, 1 << 40, &stop));
            std::thread::sleep(Duration::from_millis(500));
            stop.store(true, Ordering::Relaxed);
            writer.join().expect("writer")
        })
    };
    let during = {
        let stop = AtomicBool::new(false);
        std::thread::scope(|s| {
            let writer = s.spawn(|| writer_worst(&filter, 1 << 41, &stop));
            for _ in 0..5 {
                filter.snapshot(&mut std::io::sink()).expect("a sink does not fail");
            }
            stop.store(true, Ordering::Relaxed);
            writer.join().expect("writer")
        })
    };
    println!(
        "a concurrent writer's longest insert: {:.2} ms with 5 snapshots running, {:.2} ms in 0.5 s without",
        during.as_secs_f64() * 1e3,
        quiet.as_secs_f64() * 1e3
    );
    assert!(present_ok && absent_same, "the restored filter differs");
    Ok(())
}
