//! Single-thread filter benchmarks, peers in the same run.
//!
//! ```text
//! cargo bench --bench filter
//! ```
//!
//! * `lookup`: positive and negative lookups at n = 1M on a fixed-size filter, with
//!   metrics registered and not (lookups record nothing, so the two must match), on a
//!   growable one (wider slots, an epoch pin per lookup), and on the `cuckoofilter` 0.5
//!   crate.
//! * `insert`: filling a filter sized for 1M keys to 95% of its slots.

use std::collections::hash_map::DefaultHasher;
use std::hint::black_box;

use criterion::{criterion_group, criterion_main, BatchSize, Criterion, Throughput};
use cuckoo_gate::CuckooFilter;

const N: usize = 1_000_000;
const ABSENT: u64 = 1 << 62;

/// SplitMix64: distinct, well-spread keys.
fn key(i: u64) -> u64 {
    let mut z = i.wrapping_add(0x9E37_79B9_7F4A_7C15).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// A filter holding keys `[0, N)`: fixed-size unless `growable` (the default allowance of
/// four doublings, which widens the slot and pins the epoch on every lookup).
fn filled(growable: bool, metrics: bool) -> CuckooFilter {
    let mut builder = CuckooFilter::builder().capacity(N).false_positive_rate(0.002).seed(1);
    if !growable {
        builder = builder.max_capacity(N);
    }
    if metrics {
        builder = builder.metrics_name("bench");
    }
    let f = builder.build().unwrap();
    for i in 0..N as u64 {
        f.insert(&key(i)).unwrap();
    }
    f
}

fn lookup(c: &mut Criterion) {
    let mut group = c.benchmark_group("lookup");
    group.throughput(Throughput::Elements(N as u64)).sample_size(10);
    for (label, growable, metrics) in [
        ("cuckoo-gate", false, false),
        ("cuckoo-gate+metrics", false, true),
        ("cuckoo-gate-growable", true, false),
    ] {
        let f = filled(growable, metrics);
        f.publish_metrics();
        group.bench_function(format!("{label}/present"), |b| {
            b.iter(|| (0..N as u64).filter(|&i| f.contains(&key(i))).count())
        });
        group.bench_function(format!("{label}/absent"), |b| {
            b.iter(|| (0..N as u64).filter(|&i| f.contains(&key(ABSENT + i))).count())
        });
    }
    let mut peer = cuckoofilter::CuckooFilter::<DefaultHasher>::with_capacity(N);
    for i in 0..N as u64 {
        let _ = peer.add(&key(i));
    }
    group.bench_function("cuckoofilter-0.5/present", |b| {
        b.iter(|| (0..N as u64).filter(|&i| peer.contains(&key(i))).count())
    });
    group.bench_function("cuckoofilter-0.5/absent", |b| {
        b.iter(|| (0..N as u64).filter(|&i| peer.contains(&key(ABSENT + i))).count())
    });
    group.finish();
}

fn insert(c: &mut Criterion) {
    let mut group = c.benchmark_group("insert");
    let fill = (N as f64 * 0.95) as u64;
    group.throughput(Throughput::Elements(fill)).sample_size(10);
    group.bench_function("cuckoo-gate", |b| {
        b.iter_batched(
            || {
                CuckooFilter::builder()
                    .capacity(N)
                    .max_capacity(N)
                    .false_positive_rate(0.002)
                    .build()
                    .unwrap()
            },
            |f| {
                for i in 0..fill {
                    black_box(f.insert(&key(i))).unwrap();
                }
                f
            },
            BatchSize::LargeInput,
        )
    });
    group.bench_function("cuckoofilter-0.5", |b| {
        b.iter_batched(
            || cuckoofilter::CuckooFilter::<DefaultHasher>::with_capacity(N),
            |mut f| {
                for i in 0..fill {
                    let _ = black_box(f.add(&key(i)));
                }
                f
            },
            BatchSize::LargeInput,
        )
    });
    group.finish();
}

criterion_group!(benches, lookup, insert);
criterion_main!(benches);
