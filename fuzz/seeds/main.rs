//! Writes seed snapshots for the fuzz targets into the corpus folder given as argument:
//! for `restore` (in `restore/`) empty, filled, grown and full filters at several widths,
//! windowed filters, and gates; for `restore_cache` (in `restore_cache/`) caches of each
//! policy, with lifetimes, weights and ghosts.

use std::path::Path;
use std::time::Duration;

use cuckoo_gate::{AdmissionCache, AdmissionPolicy, Clock, CuckooFilter, Layout, SeenBefore};

fn main() -> std::io::Result<()> {
    let corpus = std::env::args().nth(1).expect("usage: seeds <corpus folder>");
    caches(&Path::new(&corpus).join("restore_cache"))?;
    let dir = Path::new(&corpus).join("restore");
    let dir = dir.as_path();
    std::fs::create_dir_all(dir)?;
    let cases = [(0.1, 0, 8), (0.01, 6, 8), (0.001, 30, 64), (1e-5, 20, 32), (1e-8, 8, 8)];
    for (seed, (eps, keys, max)) in (0u64..).zip(cases) {
        let filter = CuckooFilter::builder().capacity(8).max_capacity(max).false_positive_rate(eps).seed(seed);
        let filter = filter.build().unwrap();
        (0..keys).for_each(|k: u64| drop(filter.insert(&k)));
        let mut bytes = Vec::new();
        filter.snapshot(&mut bytes)?;
        std::fs::write(dir.join(format!("filter-{seed}")), bytes)?;
    }
    for (eps, keys) in [(0.01, 40), (1e-6, 64)] {
        let filter = CuckooFilter::builder().capacity(60).false_positive_rate(eps).layout(Layout::Windows).seed(9);
        let filter = filter.build().unwrap();
        (0..keys).for_each(|k: u64| drop(filter.insert(&k)));
        let mut bytes = Vec::new();
        filter.snapshot(&mut bytes)?;
        std::fs::write(dir.join(format!("windows-{keys}")), bytes)?;
    }
    let gate = SeenBefore::builder().capacity(4).seed(1).build().unwrap();
    (0..6u64).for_each(|k| gate.record(&k));
    let mut bytes = Vec::new();
    gate.snapshot(&mut bytes)?;
    std::fs::write(dir.join("gate"), bytes)
}

/// Small caches of each policy, as the `restore_cache` target restores them: on a clock
/// that stands still, some entries timed, some weighed, some requested again.
fn caches(dir: &Path) -> std::io::Result<()> {
    std::fs::create_dir_all(dir)?;
    for (i, policy) in [AdmissionPolicy::S3Fifo, AdmissionPolicy::SecondHit, AdmissionPolicy::Always].into_iter().enumerate() {
        let (clock, _hand) = Clock::manual();
        let builder = AdmissionCache::builder().capacity(16).shards(2).admission(policy).seed(7).clock(clock);
        let cache: AdmissionCache<u64, String> = builder.weigher(|_, v: &String| v.len().max(1) as u32).build().unwrap();
        for k in 0..40u64 {
            let value = "v".repeat((k % 3) as usize);
            match k % 4 {
                0 => drop(cache.insert_with_ttl(k % 24, value, Duration::from_millis(1500 + k))),
                _ => drop(cache.insert(k % 24, value)),
            }
            drop(cache.get(&(k / 2)));
        }
        let mut bytes = Vec::new();
        cache.save(&mut bytes)?;
        std::fs::write(dir.join(format!("cache-{i}")), bytes)?;
    }
    Ok(())
}
