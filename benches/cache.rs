//! Cache benchmarks: `AdmissionCache` against `moka`, `quick_cache` and a
//! `Mutex<lru::LruCache>`, all in the same run.
//!
//! ```text
//! cargo bench --bench cache
//! ```
//!
//! Keys follow Zipf(0.99) over 1M objects; the caches hold 100k entries of `u64` values.
//! Each timed iteration is 1M operations split over the threads (1, 2, and every core
//! when the machine has more than 2):
//!
//! * `get-heavy`: `get`, and on a miss `insert` (a read-through cache);
//! * `mixed`: half `get`, half `insert` of the key drawn.
//!
//! `AdmissionCache` runs its default policy (S3-FIFO on the gate); moka runs TinyLFU
//! admission, quick_cache its CLOCK-PRO-like policy, lru plain LRU. Before timing, each
//! cache's hit ratio on one round is printed (share of `get`s that hit, one thread), since
//! a fast cache with a worse hit ratio is no win.

use std::sync::OnceLock;
use std::time::Duration;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};

#[path = "../examples/common/caches.rs"]
mod caches;
#[path = "../examples/common/mod.rs"]
mod common;
use caches::{peers, round, zipf_requests, OPS, WORKLOADS};

/// 4M requests (a warm-up quarter, then three timed rounds), made once.
fn requests() -> &'static [u64] {
    static REQUESTS: OnceLock<Vec<u64>> = OnceLock::new();
    REQUESTS.get_or_init(|| zipf_requests(4 * OPS))
}

fn caches(c: &mut Criterion) {
    let threads = common::thread_counts();
    let all = requests();
    for workload in WORKLOADS {
        let mut group = c.benchmark_group(format!("cache/{workload}"));
        group
            .throughput(Throughput::Elements(OPS as u64))
            .sample_size(10)
            .warm_up_time(Duration::from_secs(1));
        for &t in &threads {
            for (label, cache) in peers() {
                let cache = &*cache;
                // Warm the cache with the first quarter of the requests, then cycle through
                // the other three.
                round(cache, workload, &all[..OPS], t);
                if t == 1 {
                    let (_, hit_ratio) = round(cache, workload, &all[OPS..2 * OPS], 1);
                    println!("{workload} {label}: hit ratio {hit_ratio:.4}");
                }
                let mut n = 0;
                group.bench_function(format!("{label}/{t}t"), |b| {
                    b.iter_custom(|iters| {
                        (0..iters)
                            .map(|_| {
                                n = n % 3 + 1;
                                round(cache, workload, &all[n * OPS..(n + 1) * OPS], t).0
                            })
                            .sum()
                    })
                });
            }
        }
        group.finish();
    }
}

criterion_group!(benches, caches);
criterion_main!(benches);
