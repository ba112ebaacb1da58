//! Space and accuracy against the peers: bits per item and measured false-positive rate
//! for ε ∈ {1%, 0.1%, 0.01%} and n ∈ {1M, 5M, 10M}, every filter filled with exactly n keys.
//!
//! ```text
//! cargo run --release --example space_accuracy             # about 3 minutes
//! cargo run --release --example space_accuracy -- --quick  # n = 1M only
//! ```
//!
//! cuckoo-gate runs fixed-size in both layouts: buckets of 4 (the default layout) and
//! windows of 2.
//!
//! Peers: `atomic-cuckoo-filter` 0.3 at the smallest fingerprint size it offers (4, 8, 16
//! or 32 bits) whose rate `8 / 2^f` meets ε; `fastbloom` 0.17's `AtomicBloomFilter` sized
//! for (n, ε); `cuckoofilter` 0.5, whose fingerprints are always 8 bits (one row per n).
//! Memory counts each structure's table (and cuckoo-gate's lock stripes); false positives
//! are counted over 2M keys never inserted.

use ahash::AHasher;
use cuckoo_gate::{CuckooFilter, Layout};

mod common;
use common::key;

const ABSENT: u64 = 1 << 62;
const PROBES: u64 = 2_000_000;

/// Bits per item and measured false-positive rate of a filter holding keys `[0, n)`.
fn measure(n: u64, bytes: usize, contains: impl Fn(u64) -> bool) -> (f64, f64) {
    let false_positives = (0..PROBES).filter(|&i| contains(key(ABSENT + i))).count();
    (bytes as f64 * 8.0 / n as f64, false_positives as f64 / PROBES as f64)
}

fn row(eps: Option<f64>, n: u64, peer: &str, (bits, fpr): (f64, f64)) {
    let (target, ratio) = match eps {
        Some(e) => (format!("{e}"), format!("{:.2}", fpr / e)),
        None => ("—".into(), "—".into()),
    };
    println!("| {target} | {n} | {peer} | {bits:.2} | {fpr:.6} | {ratio} |");
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let sizes: &[u64] = if std::env::args().any(|a| a == "--quick") {
        &[1_000_000]
    } else {
        &[1_000_000, 5_000_000, 10_000_000]
    };
    println!("| target ε | n | filter | bits/item | measured FPR | FPR / ε |");
    println!("|---|---|---|---|---|---|");
    for &n in sizes {
        for eps in [0.01, 0.001, 0.0001] {
            for (name, layout) in [("cuckoo-gate", Layout::Buckets), ("cuckoo-gate windows", Layout::Windows)]
            {
                let ours = CuckooFilter::builder()
                    .capacity(n as usize)
                    .max_capacity(n as usize)
                    .false_positive_rate(eps)
                    .layout(layout)
                    .seed(1)
                    .build()?;
                (0..n).try_for_each(|i| ours.insert(&key(i)))?;
                row(Some(eps), n, name, measure(n, ours.memory_usage(), |k| ours.contains(&k)));
            }

            let bits =
                [4usize, 8, 16, 32].into_iter().find(|&f| 8.0 / (1u64 << f) as f64 <= eps).unwrap_or(32);
            let atomic = atomic_cuckoo_filter::CuckooFilterBuilder::<AHasher>::default()
                .capacity(n as usize)
                .fingerprint_size(bits)
                .build()?;
            let stored = (0..n).filter(|&i| atomic.insert(&key(i)).is_ok()).count();
            assert_eq!(stored as u64, n, "atomic-cuckoo-filter refused keys");
            let bytes = atomic.capacity() * bits / 8;
            row(
                Some(eps),
                n,
                &format!("atomic-cuckoo-filter 0.3 ({bits}-bit)"),
                measure(n, bytes, |k| atomic.contains(&k)),
            );
            drop(atomic);

            let bloom = fastbloom::AtomicBloomFilter::with_false_pos(eps).seed(&1).expected_items(n as usize);
            (0..n).for_each(|i| {
                bloom.insert(&key(i));
            });
            row(Some(eps), n, "fastbloom 0.17", measure(n, bloom.num_bits() / 8, |k| bloom.contains(&k)));
        }
        let mut plain = cuckoofilter::CuckooFilter::<AHasher>::with_capacity(n as usize);
        let stored = (0..n).filter(|&i| plain.add(&key(i)).is_ok()).count();
        assert_eq!(stored as u64, n, "cuckoofilter refused keys");
        row(None, n, "cuckoofilter 0.5 (8-bit)", measure(n, plain.memory_usage(), |k| plain.contains(&k)));
    }
    Ok(())
}
