//! Memory per entry: each cache, in a process of its own, takes 2M distinct `u64 -> u64`
//! inserts at a capacity of 1M entries; the growth of the process's resident memory
//! (`VmRSS` in `/proc/self/status`, Linux), divided by the entries held, is its cost per entry, tables,
//! queues and policy state included. `cuckoo-gate+ttl` has a time to live, `+fresh` a
//! freshness beside it (a stale window per entry), `+grace` a grace too. `cuckoo-gate+lfu`
//! runs `AdmissionPolicy::S3FifoLfu`, each key asked for twice after its insert, so that
//! entries are promoted and the frequency sketch is made and written.
//!
//! ```text
//! cargo run --release --example memory
//! ```

use std::process::Command;
use std::time::Duration;

use cuckoo_gate::AdmissionCache;

const CAPACITY: usize = 1_000_000;
const INSERTS: u64 = 2_000_000;

const CACHES: [&str; 8] = [
    "cuckoo-gate",
    "cuckoo-gate+lfu",
    "cuckoo-gate+ttl",
    "cuckoo-gate+ttl+fresh",
    "cuckoo-gate+ttl+fresh+grace",
    "quick_cache-0.7",
    "moka-0.12",
    "TinyUFO-0.9",
];

/// Resident bytes of this process.
fn resident() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").expect("Linux's /proc/self/status");
    let kib = status
        .lines()
        .find_map(|line| line.strip_prefix("VmRSS:"))
        .and_then(|rest| rest.split_whitespace().next().and_then(|kib| kib.parse::<u64>().ok()));
    kib.expect("a VmRSS line, in kB") * 1024
}

/// Fills `name` and returns (bytes resident added, entries held).
fn measure(name: &str) -> (u64, u64) {
    let before = resident();
    let keys = 0..INSERTS;
    match name {
        "cuckoo-gate+lfu" => {
            let cache = AdmissionCache::<u64, u64>::builder()
                .capacity(CAPACITY as u64)
                .admission(cuckoo_gate::AdmissionPolicy::S3FifoLfu)
                .build()
                .unwrap();
            keys.for_each(|k| {
                _ = cache.insert(k, k);
                _ = cache.get(&k);
                _ = cache.get(&k);
            });
            (resident() - before, cache.len() as u64)
        }
        "cuckoo-gate" | "cuckoo-gate+ttl" | "cuckoo-gate+ttl+fresh" | "cuckoo-gate+ttl+fresh+grace" => {
            let builder = AdmissionCache::<u64, u64>::builder().capacity(CAPACITY as u64);
            let hour = Duration::from_secs(3_600);
            let builder = match name {
                "cuckoo-gate+ttl" => builder.time_to_live(hour),
                "cuckoo-gate+ttl+fresh" => builder.time_to_live(hour).refresh_after(hour / 2),
                "cuckoo-gate+ttl+fresh+grace" => {
                    builder.time_to_live(hour).refresh_after(hour / 2).grace(hour)
                }
                _ => builder,
            };
            let cache = builder.build().unwrap();
            keys.for_each(|k| _ = cache.insert(k, k));
            (resident() - before, cache.len() as u64)
        }
        "quick_cache-0.7" => {
            let cache = quick_cache::sync::Cache::<u64, u64>::new(CAPACITY);
            keys.for_each(|k| cache.insert(k, k));
            (resident() - before, cache.len() as u64)
        }
        "moka-0.12" => {
            let cache = moka::sync::Cache::<u64, u64>::new(CAPACITY as u64);
            keys.for_each(|k| cache.insert(k, k));
            cache.run_pending_tasks();
            (resident() - before, cache.entry_count())
        }
        "TinyUFO-0.9" => {
            let cache = tinyufo::TinyUfo::<u64, u64>::new(CAPACITY, CAPACITY);
            keys.for_each(|k| _ = cache.put(k, k, 1));
            let grown = resident() - before;
            (grown, (0..INSERTS).filter(|k| cache.get(k).is_some()).count() as u64)
        }
        other => panic!("unknown cache {other}"),
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if let [_, flag, name] = args.as_slice() {
        if flag == "--one" {
            let (bytes, entries) = measure(name);
            println!("{bytes} {entries}");
            return;
        }
    }
    println!(
        "{INSERTS} distinct u64 -> u64 inserts, capacity {CAPACITY}; resident memory added per entry held"
    );
    println!("| cache | entries held | MiB | bytes per entry |");
    println!("|---|---|---|---|");
    for name in CACHES {
        let out = Command::new(&args[0]).args(["--one", name]).output().expect("run this example again");
        let text = String::from_utf8_lossy(&out.stdout);
        let figures: Vec<u64> = text.split_whitespace().filter_map(|n| n.parse().ok()).collect();
        match figures.as_slice() {
            [bytes, entries] if *entries > 0 => println!(
                "| {name} | {entries} | {:.1} | {:.1} |",
                *bytes as f64 / (1 << 20) as f64,
                *bytes as f64 / *entries as f64
            ),
            _ => println!("| {name} | failed: {} | | |", String::from_utf8_lossy(&out.stderr).trim()),
        }
    }
}
