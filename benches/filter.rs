//! Filter benchmarks against the peers a user would pick instead, all in the same run.
//!
//! ```text
//! cargo bench --bench filter                      # everything (about 20 minutes on 2 cores)
//! cargo bench --bench filter -- 'mixed'           # one group
//! cargo bench --bench filter -- 'n=1M/lookup'     # one size and operation
//! ```
//!
//! Groups are `filter/n={1M,10M}/{insert,lookup-present,lookup-absent,remove}` and
//! `mixed/n=1M`; each function is `<peer>/<threads>t`, on 1 and 2 threads, and on every
//! core as well when the machine has more than 2. Throughput is set in operations.
//!
//! * insert: an empty filter sized for n, filled with 0.9 n keys (the fill is timed, the
//!   allocation is not);
//! * lookup-present / lookup-absent: 1M lookups on a filter holding 0.9 n keys;
//! * remove: 1M of the 0.9 n keys removed (timed) and inserted back (not timed);
//! * mixed: 90% lookups (half of them for absent keys), 5% inserts of new keys and 5%
//!   removes of each thread's oldest key, on a filter kept 90% full; 1M operations.
//!
//! Peers (u64 keys; the cuckoo peers hash with ahash like cuckoo-gate, the faster choice
//! for them than their SipHash default):
//!
//! * `cuckoo-gate`: fixed-size (`max_capacity(n)`), ε = 0.1% (13-bit slots); also with its
//!   metrics registered (`cuckoo-gate+metrics`, n = 1M, 1 thread);
//! * `cuckoofilter-0.5`: single-threaded (`&mut self`), 8-bit fingerprints (ε ≈ 3%),
//!   power-of-two table; on more threads, behind a `parking_lot::RwLock`
//!   (`rwlock-cuckoofilter`), as a user would share it;
//! * `atomic-cuckoo-filter-0.3`: lock-free, 16-bit fingerprints (its nearest size to
//!   ε = 0.1%), power-of-two table;
//! * `fastbloom-0.17`: `AtomicBloomFilter` at ε = 0.1%, the speed and space reference; it
//!   cannot remove, so it sits out remove and mixed.

use std::cell::{OnceCell, RefCell};
use std::collections::VecDeque;
use std::hint::black_box;
use std::ops::Range;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use ahash::AHasher;
use criterion::measurement::WallTime;
use criterion::{criterion_group, criterion_main, BenchmarkGroup, Criterion, Throughput};
use crossbeam_utils::CachePadded;
use parking_lot::RwLock;

#[path = "../examples/common/mod.rs"]
mod common;
use common::key;

const ABSENT: u64 = 1 << 62;
const EPSILON: f64 = 0.001;
/// Lookups or removes per timed iteration.
const OPS: u64 = 1_000_000;

/// Work for one thread: the filter, the thread's index, and its slice of the operations.
type Work<'a, F> = &'a (dyn Fn(&F, usize, Range<u64>) + Sync);

/// What the benchmarks need of a filter. `remove` is `None` where the peer cannot remove.
trait Filter {
    fn insert(&self, key: u64) -> bool;
    fn contains(&self, key: u64) -> bool;
    fn remove(&self, key: u64) -> Option<bool>;
    /// Runs `work` over `0..ops` on `threads` threads and returns the wall time:
    /// [`spawned`] for filters that can be shared, [`inline`] for one that cannot.
    fn timed(&self, threads: usize, ops: u64, work: Work<'_, Self>) -> Duration;
}

/// One thread, no spawn: for the single-threaded peer.
fn inline<F: ?Sized>(f: &F, threads: usize, ops: u64, work: Work<'_, F>) -> Duration {
    assert_eq!(threads, 1, "this peer cannot be shared between threads");
    let start = Instant::now();
    work(f, 0, 0..ops);
    start.elapsed()
}

/// Thread `t` of `threads` takes the `t`-th slice of `0..ops`; one thread runs inline.
fn spawned<F: Sync + ?Sized>(f: &F, threads: usize, ops: u64, work: Work<'_, F>) -> Duration {
    if threads == 1 {
        return inline(f, 1, ops, work);
    }
    let slice = ops.div_ceil(threads as u64);
    let start = Instant::now();
    std::thread::scope(|s| {
        for t in 0..threads {
            let range = (t as u64 * slice)..((t as u64 + 1) * slice).min(ops);
            s.spawn(move || work(f, t, range));
        }
    });
    start.elapsed()
}

impl Filter for cuckoo_gate::CuckooFilter {
    fn insert(&self, key: u64) -> bool {
        cuckoo_gate::CuckooFilter::insert(self, &key).is_ok()
    }
    fn contains(&self, key: u64) -> bool {
        cuckoo_gate::CuckooFilter::contains(self, &key)
    }
    fn remove(&self, key: u64) -> Option<bool> {
        Some(cuckoo_gate::CuckooFilter::remove(self, &key))
    }
    fn timed(&self, threads: usize, ops: u64, work: Work<'_, Self>) -> Duration {
        spawned(self, threads, ops, work)
    }
}

type PlainCuckoo = cuckoofilter::CuckooFilter<AHasher>;

/// `cuckoofilter` on one thread (a `RefCell` costs a flag check, no lock).
impl Filter for RefCell<PlainCuckoo> {
    fn insert(&self, key: u64) -> bool {
        self.borrow_mut().add(&key).is_ok()
    }
    fn contains(&self, key: u64) -> bool {
        self.borrow().contains(&key)
    }
    fn remove(&self, key: u64) -> Option<bool> {
        Some(self.borrow_mut().delete(&key))
    }
    fn timed(&self, threads: usize, ops: u64, work: Work<'_, Self>) -> Duration {
        inline(self, threads, ops, work)
    }
}

impl Filter for RwLock<PlainCuckoo> {
    fn insert(&self, key: u64) -> bool {
        self.write().add(&key).is_ok()
    }
    fn contains(&self, key: u64) -> bool {
        self.read().contains(&key)
    }
    fn remove(&self, key: u64) -> Option<bool> {
        Some(self.write().delete(&key))
    }
    fn timed(&self, threads: usize, ops: u64, work: Work<'_, Self>) -> Duration {
        spawned(self, threads, ops, work)
    }
}

impl Filter for atomic_cuckoo_filter::CuckooFilter<AHasher> {
    fn insert(&self, key: u64) -> bool {
        atomic_cuckoo_filter::CuckooFilter::insert(self, &key).is_ok()
    }
    fn contains(&self, key: u64) -> bool {
        atomic_cuckoo_filter::CuckooFilter::contains(self, &key)
    }
    fn remove(&self, key: u64) -> Option<bool> {
        Some(atomic_cuckoo_filter::CuckooFilter::remove(self, &key))
    }
    fn timed(&self, threads: usize, ops: u64, work: Work<'_, Self>) -> Duration {
        spawned(self, threads, ops, work)
    }
}

impl Filter for fastbloom::AtomicBloomFilter {
    fn insert(&self, key: u64) -> bool {
        fastbloom::AtomicBloomFilter::insert(self, &key);
        true
    }
    fn contains(&self, key: u64) -> bool {
        fastbloom::AtomicBloomFilter::contains(self, &key)
    }
    fn remove(&self, _: u64) -> Option<bool> {
        None
    }
    fn timed(&self, threads: usize, ops: u64, work: Work<'_, Self>) -> Duration {
        spawned(self, threads, ops, work)
    }
}

/// Empty filters sized for `n`, by peer. The single-threaded `cuckoofilter` only runs on
/// one thread; its `RwLock` wrapper only on more.
fn gate(n: usize) -> cuckoo_gate::CuckooFilter {
    cuckoo_gate::CuckooFilter::builder()
        .capacity(n)
        .max_capacity(n)
        .false_positive_rate(EPSILON)
        .seed(1)
        .build()
        .unwrap()
}
/// cuckoo-gate with its metrics registered: lookups must cost the same (they record
/// nothing). Each filter gets a name of its own: one live filter holds a name.
fn gate_metrics(n: usize) -> cuckoo_gate::CuckooFilter {
    static BUILT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let name = format!("bench{}", BUILT.fetch_add(1, std::sync::atomic::Ordering::Relaxed));
    let builder =
        cuckoo_gate::CuckooFilter::builder().capacity(n).max_capacity(n).false_positive_rate(EPSILON);
    builder.seed(1).metrics_name(name).build().unwrap()
}
fn plain(n: usize) -> RefCell<PlainCuckoo> {
    RefCell::new(PlainCuckoo::with_capacity(n))
}
fn rwlock(n: usize) -> RwLock<PlainCuckoo> {
    RwLock::new(PlainCuckoo::with_capacity(n))
}
fn atomic(n: usize) -> atomic_cuckoo_filter::CuckooFilter<AHasher> {
    atomic_cuckoo_filter::CuckooFilterBuilder::<AHasher>::default()
        .capacity(n)
        .fingerprint_size(16)
        .build()
        .unwrap()
}
fn bloom(n: usize) -> fastbloom::AtomicBloomFilter {
    fastbloom::AtomicBloomFilter::with_false_pos(EPSILON).seed(&1).expected_items(n)
}

/// Fills `f` with the keys `[0, fill)`.
fn fill(f: &impl Filter, fill: u64) {
    for i in 0..fill {
        f.insert(key(i));
    }
}

/// A benchmark group of `elements` operations per iteration, 10 samples.
fn group(c: &mut Criterion, name: String, elements: u64) -> BenchmarkGroup<'_, WallTime> {
    let mut group = c.benchmark_group(name);
    group.throughput(Throughput::Elements(elements)).sample_size(10).warm_up_time(Duration::from_secs(1));
    group
}

/// Benchmarks one peer in the groups of size `n`, on each of `threads`.
fn single_size<F: Filter>(
    c: &mut Criterion,
    label: &str,
    n: usize,
    make: &dyn Fn(usize) -> F,
    threads: &[usize],
) {
    let stored = n as u64 * 9 / 10;
    let size = if n >= 1_000_000 { format!("{}M", n / 1_000_000) } else { n.to_string() };
    let name = |op: &str| format!("filter/n={size}/{op}");
    let bench = |g: &mut BenchmarkGroup<'_, WallTime>, t: usize, run: &dyn Fn(usize) -> Duration| {
        g.bench_function(format!("{label}/{t}t"), |b| {
            b.iter_custom(|iters| (0..iters).map(|_| run(t)).sum())
        });
    };

    let mut g = group(c, name("insert"), stored);
    for &t in threads {
        bench(&mut g, t, &|t| {
            let f = make(n);
            f.timed(t, stored, &|f, _, range| {
                range.for_each(|i| {
                    black_box(f.insert(key(i)));
                })
            })
        });
    }
    g.finish();

    // Filled on first use, so that a run filtered to other benchmarks skips the fill.
    let filled = OnceCell::new();
    let filled = || {
        filled.get_or_init(|| {
            let f = make(n);
            fill(&f, stored);
            f
        })
    };
    let spread = |i: u64| (i * 7_919) % stored; // lookups all over the table
    for (op, first) in [("lookup-present", 0), ("lookup-absent", ABSENT)] {
        let mut g = group(c, name(op), OPS);
        for &t in threads {
            bench(&mut g, t, &|t| {
                filled().timed(t, OPS, &|f, _, range| {
                    black_box(range.filter(|&i| f.contains(key(first + spread(i)))).count());
                })
            });
        }
        g.finish();
    }
    if make(16).remove(key(0)).is_some() {
        let mut g = group(c, name("remove"), OPS);
        for &t in threads {
            bench(&mut g, t, &|t| {
                let f = filled();
                let removed = f.timed(t, OPS, &|f, _, range| {
                    range.for_each(|i| {
                        black_box(f.remove(key(i)));
                    })
                });
                (0..OPS).for_each(|i| {
                    f.insert(key(i));
                });
                removed
            });
        }
        g.finish();
    }
}

/// One thread's state in the mixed workload: its live keys, oldest first, and its next
/// new key.
struct Churn {
    live: VecDeque<u64>,
    next: u64,
    rng: u64,
}

/// The mixed workload on `threads` threads over a filter kept 90% full.
fn mixed<F: Filter>(c: &mut Criterion, label: &str, make: &dyn Fn(usize) -> F, threads: &[usize]) {
    let n = 1_000_000usize;
    let stored = n as u64 * 9 / 10;
    let mut group = group(c, "mixed/n=1M".into(), OPS);
    for &t in threads {
        // Made on first use (criterion calls the routine once per sample), so that a run
        // filtered to other benchmarks skips it.
        let state = OnceCell::new();
        group.bench_function(format!("{label}/{t}t"), |b| {
            let (f, churn) = state.get_or_init(|| {
                let f = make(n);
                fill(&f, stored);
                // Thread `i` owns the keys `≡ i (mod t)` and new keys from its own range.
                // Padded: the threads update their state on every operation, and must not
                // share a cache line while doing so.
                let churn: Vec<CachePadded<Mutex<Churn>>> = (0..t as u64)
                    .map(|i| {
                        let live = (0..stored).filter(|k| k % t as u64 == i).collect();
                        CachePadded::new(Mutex::new(Churn { live, next: (i + 1) << 40, rng: i + 1 }))
                    })
                    .collect();
                (f, churn)
            });
            b.iter_custom(|iters| {
                (0..iters)
                    .map(|_| {
                        f.timed(t, OPS, &|f, thread, range| {
                            let mut state = churn[thread].lock().unwrap();
                            let Churn { live, next, rng } = &mut *state;
                            let mut hits = 0usize;
                            for _ in range {
                                *rng = key(*rng);
                                match *rng % 100 {
                                    0..45 => hits += usize::from(f.contains(key(*rng % stored))),
                                    45..90 => hits += usize::from(f.contains(key(ABSENT + *rng % stored))),
                                    90..95 => {
                                        if f.insert(key(*next)) {
                                            live.push_back(*next);
                                        }
                                        *next += 1;
                                    }
                                    _ => {
                                        if let Some(old) = live.pop_front() {
                                            black_box(f.remove(key(old)));
                                        }
                                    }
                                }
                            }
                            black_box(hits);
                        })
                    })
                    .sum()
            })
        });
    }
    group.finish();
}

fn filters(c: &mut Criterion) {
    let threads = common::thread_counts();
    let many = &threads[1..];
    for n in [1_000_000, 10_000_000] {
        single_size(c, "cuckoo-gate", n, &gate, &threads);
        single_size(c, "atomic-cuckoo-filter-0.3", n, &atomic, &threads);
        single_size(c, "fastbloom-0.17", n, &bloom, &threads);
        single_size(c, "rwlock-cuckoofilter-0.5", n, &rwlock, many);
        single_size(c, "cuckoofilter-0.5", n, &plain, &[1]);
    }
    single_size(c, "cuckoo-gate+metrics", 1_000_000, &gate_metrics, &[1]);
    mixed(c, "cuckoo-gate", &gate, &threads);
    mixed(c, "atomic-cuckoo-filter-0.3", &atomic, &threads);
    mixed(c, "rwlock-cuckoofilter-0.5", &rwlock, many);
    mixed(c, "cuckoofilter-0.5", &plain, &[1]);
}

criterion_group!(benches, filters);
criterion_main!(benches);
