//! Our side of the C++ reference's benchmark (efficient/cuckoofilter,
//! `benchmarks/bulk-insert-and-query.exe N`), in its table's shape: N random `u64` keys
//! generated before timing, inserted into a filter at the reference's footprint, then N
//! lookups at 0, 25, 50, 75 and 100% present keys, and the false-positive rate and bits
//! per item. Build and run the reference beside it on the same machine to compare.
//!
//! ```text
//! cargo run --release --example bulk_insert_and_query              # N = 5,000,000
//! cargo run --release --example bulk_insert_and_query -- 500000
//! cargo run --release --example bulk_insert_and_query -- 500000 --growable
//! cargo run --release --example bulk_insert_and_query -- --batch
//! ```
//!
//! The filter is fixed at capacity 1.46 N, ε = 0.1% (about 20 bits per item, as the
//! reference's `Cuckoo12`), or with `--growable` the default filter sized for N. Inserts
//! and lookups are one `insert` or `contains` per key, as the reference's `Add` and
//! `Contain`; with `--batch` they go through `insert_batch` and `contains_batch`, which
//! hash and prefetch a group of keys before touching any (the reference has no such
//! calls).

use std::hint::black_box;
use std::time::Instant;

use cuckoo_gate::CuckooFilter;

mod common;
use common::key;

fn main() {
    let n: usize = std::env::args().nth(1).and_then(|n| n.parse().ok()).unwrap_or(5_000_000);
    let growable = std::env::args().any(|a| a == "--growable");
    let batched = std::env::args().any(|a| a == "--batch");
    // Present keys are key(0..n), absent ones key(n..2n): one pool, as the reference's.
    let keys: Vec<u64> = (0..2 * n as u64).map(key).collect();
    let (present, absent) = keys.split_at(n);
    let builder = CuckooFilter::builder().false_positive_rate(0.001);
    let filter = match growable {
        true => builder.capacity(n).build(),
        false => builder.capacity(n * 146 / 100).max_capacity(n * 146 / 100).build(),
    }
    .expect("valid configuration");

    let t = Instant::now();
    if batched {
        filter.insert_batch(present).expect("sized to fit");
    } else {
        for k in present {
            filter.insert(k).expect("sized to fit");
        }
    }
    let adds = n as f64 / t.elapsed().as_secs_f64() / 1e6;

    let mut finds = Vec::new();
    let mut false_positives = 0;
    for percent in [0, 25, 50, 75, 100] {
        // Each lookup batch takes n keys, `percent` of them present, spread evenly.
        let batch: Vec<u64> =
            (0..n).map(|i| if (i % 100) < percent { present[i] } else { absent[i] }).collect();
        let mut hits = vec![false; n];
        let t = Instant::now();
        let found = if batched {
            filter.contains_batch(&batch, &mut hits);
            hits.iter().filter(|&&hit| hit).count()
        } else {
            batch.iter().filter(|k| filter.contains(k)).count()
        };
        finds.push(n as f64 / t.elapsed().as_secs_f64() / 1e6);
        let expected = (0..n).filter(|i| (i % 100) < percent).count();
        assert!(found >= expected, "no false negatives");
        if percent == 0 {
            false_positives = found;
        }
        black_box(found);
    }
    let bits = filter.memory_usage() as f64 * 8.0 / n as f64;
    let eps = false_positives as f64 / n as f64;
    println!(
        "{:>12} {:>8} {:>7} {:>7} {:>7} {:>7} {:>7} {:>9} {:>9} {:>9} {:>7}",
        "", "Million", "Find", "Find", "Find", "Find", "Find", "", "", "optimal", "wasted"
    );
    println!(
        "{:>12} {:>8} {:>7} {:>7} {:>7} {:>7} {:>7} {:>9} {:>9} {:>9} {:>7}",
        "", "adds/sec", "0%", "25%", "50%", "75%", "100%", "ε", "bits/item", "bits/item", "space"
    );
    let optimal = (1.0 / eps.max(f64::MIN_POSITIVE)).log2();
    println!(
        "{:>12} {adds:>8.2} {:>7.2} {:>7.2} {:>7.2} {:>7.2} {:>7.2} {:>8.3}% {bits:>9.2} {optimal:>9.2} {:>6.1}%",
        match (growable, batched) {
            (false, false) => "fixed 1.46N",
            (false, true) => "fixed, batch",
            (true, false) => "growable",
            (true, true) => "growable, batch",
        },
        finds[0],
        finds[1],
        finds[2],
        finds[3],
        finds[4],
        eps * 100.0,
        (bits / optimal - 1.0) * 100.0,
    );
}
