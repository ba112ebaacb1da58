//! Hits through `get` and through the loaders, on caches without expiry, with a time to
//! live and with a time to idle; writes of new keys into a full cache; and a read-through
//! stream from a cold start: for counting instructions per call (`benches/hit_cost.sh`
//! runs it under callgrind and takes differences).
//!
//! ```text
//! cargo run --release --example hit_cost -- CALL N
//! ```
//!
//! CALL is one of [`CALLS`]: `get`, `get-or-insert` (`get_or_insert_with`),
//! `get-or-insert-async` (`get_or_insert_async` awaited in a loop inside one task, polled
//! once: a hit completes at once, as a handler's call does inside its task),
//! `get-or-insert-async-alone` (each call's future built and polled on its own, as a task
//! that makes only this call), each on a cache without expiry; `get-ttl` and
//! `get-or-insert-ttl` on a cache with a time to live of an hour; `get-or-insert-fresh`
//! with a time to live of an hour and a freshness of half of it (every hit tests its
//! entry's stale window); `get-tti` with a time to idle of an hour.
//!
//! Hits: fills a cache of 100k `u64` entries (default policy, capacity 200k, so that
//! every key stays), then looks up N resident keys, in a pseudo-random order, through the
//! call named. Writes: `insert`, `insert-ttl` (a time to live of an hour) and
//! `get-or-insert-miss` (`get_or_insert_with`, every call a miss) fill a cache of
//! capacity 100k with 100k keys, then write N new keys, each evicting one.
//! `quick-cache-insert` writes N new keys as `insert` does, into quick_cache 0.7's full
//! `sync::Cache::new(100_000)` (the peer, as a user builds it), to count the peer's write.
//! `read-through`: a cold cache of 100k entries (the default builder) serves the first N
//! of 1M requests drawn from Zipf 0.99 over 1M keys, a `get` and, on a miss, an `insert`
//! (about 3 in 4 hit). Setup is the same for every N, so the difference in instructions
//! between two values of N is the cost of the added calls alone.

use std::future::Future;
use std::hint::black_box;
use std::pin::pin;
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};
use std::time::Duration;

use cuckoo_gate::AdmissionCache;

const KEYS: u64 = 100_000;

/// Requests drawn for `read-through`, and the keys they are drawn from.
const STREAM: usize = 1_000_000;
const UNIVERSE: usize = 1_000_000;

/// The calls measured.
const CALLS: [&str; 13] = [
    "get",
    "get-or-insert",
    "get-or-insert-async",
    "get-or-insert-async-alone",
    "get-ttl",
    "get-or-insert-ttl",
    "get-or-insert-fresh",
    "get-tti",
    "insert",
    "insert-ttl",
    "get-or-insert-miss",
    "quick-cache-insert",
    "read-through",
];

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (call, n) = match (args.first().map(String::as_str), args.get(1).and_then(|n| n.parse::<u64>().ok()))
    {
        (Some(call), Some(n)) if CALLS.contains(&call) => (call.to_owned(), n),
        _ => {
            eprintln!("usage: hit_cost {} N", CALLS.join("|"));
            std::process::exit(2)
        }
    };
    if call == "read-through" {
        return read_through(n);
    }
    if call == "quick-cache-insert" {
        return quick_cache_writes(n);
    }
    let writes = matches!(call.as_str(), "insert" | "insert-ttl" | "get-or-insert-miss");
    let builder = AdmissionCache::builder().capacity(if writes { KEYS } else { 2 * KEYS }).seed(1);
    let hour = Duration::from_secs(3_600);
    let builder = match call.as_str() {
        "get-ttl" | "get-or-insert-ttl" | "insert-ttl" => builder.time_to_live(hour),
        "get-or-insert-fresh" => builder.time_to_live(hour).refresh_after(hour / 2),
        "get-tti" => builder.time_to_idle(hour),
        _ => builder,
    };
    let cache: AdmissionCache<u64, u64> = builder.build().unwrap();
    (0..KEYS).for_each(|k| _ = cache.insert(k, k));
    if writes {
        let stored = write_new(&cache, n, call == "get-or-insert-miss");
        println!("{call}: {n} new keys written, {stored} stored; {} held", cache.len());
        return;
    }
    let hits = if call == "get-or-insert-async" {
        async_hits(&cache, n)
    } else if call == "get-or-insert-async-alone" {
        lone_async_hits(&cache, n)
    } else {
        // Decided once, so that every call pays the same for the choice in the loop.
        hits(&cache, n, call.starts_with("get-or-insert"))
    };
    println!("{call}: {hits} hits of {n}");
    assert_eq!(hits, n, "a resident key missed");
}

/// Looks up `n` resident keys through `get_or_insert_with` if `loading`, else `get`; how
/// many were found. Out of line, so that its loop is the same whatever else `main` does.
#[inline(never)]
fn hits(cache: &AdmissionCache<u64, u64>, n: u64, loading: bool) -> u64 {
    let mut hits = 0u64;
    for key in keys(n) {
        let found = if loading { get_or_insert(cache, black_box(key)) } else { get(cache, black_box(key)) };
        hits += u64::from(found == Some(key));
    }
    hits
}

/// The loop of `main` through `get_or_insert_async`, as a task runs it: one future that
/// awaits each call in turn, polled once (every call is a hit, so it completes at once).
#[inline(never)]
fn async_hits(cache: &AdmissionCache<u64, u64>, n: u64) -> u64 {
    let waker = Waker::from(Arc::new(Noop));
    let task = pin!(async {
        let mut hits = 0u64;
        for key in keys(n) {
            let key = black_box(key);
            let found =
                cache.get_or_insert_async(&key, async { unreachable!("every key is resident") }).await;
            hits += u64::from(found == key);
        }
        hits
    });
    match task.poll(&mut Context::from_waker(&waker)) {
        Poll::Ready(hits) => hits,
        Poll::Pending => unreachable!("a hit completes at its first poll"),
    }
}

/// The loop of `main` through `get_or_insert_async`, each future built and polled on its
/// own, as a task's first call is: the future's state, the context and the poll are paid
/// per hit.
#[inline(never)]
fn lone_async_hits(cache: &AdmissionCache<u64, u64>, n: u64) -> u64 {
    let waker = Waker::from(Arc::new(Noop));
    let mut hits = 0u64;
    for key in keys(n) {
        let found = get_or_insert_async(cache, black_box(key), &waker);
        hits += u64::from(found == Some(key));
    }
    hits
}

/// `quick-cache-insert`: `n` new keys written into a full quick_cache of [`KEYS`] entries,
/// each evicting one.
fn quick_cache_writes(n: u64) {
    let cache = quick_cache::sync::Cache::<u64, u64>::new(KEYS as usize);
    (0..KEYS).for_each(|k| cache.insert(k, k));
    (KEYS..KEYS + n).for_each(|key| quick_cache_insert(&cache, black_box(key)));
    println!("quick-cache-insert: {n} new keys written; {} held", cache.len());
}

/// `read-through`: the first `n` requests of the stream into a cold cache.
fn read_through(n: u64) {
    let stream = zipf_stream();
    let cache: AdmissionCache<u64, u64> = AdmissionCache::builder().capacity(KEYS).seed(1).build().unwrap();
    let n = (n as usize).min(STREAM);
    let hits = stream[..n].iter().filter(|&&key| read_through_one(&cache, black_box(key))).count();
    println!("read-through: {hits} hits of {n} ({:.3})", hits as f64 / n.max(1) as f64);
}

/// [`STREAM`] keys drawn from Zipf 0.99 over [`UNIVERSE`] keys (inverse CDF, xorshift),
/// spread over all 64 bits.
fn zipf_stream() -> Vec<u64> {
    let mut total = 0.0;
    let cdf: Vec<f64> = (1..=UNIVERSE)
        .map(|rank| {
            total += (rank as f64).powf(-0.99);
            total
        })
        .collect();
    let mut x = 0x2545_F491_4F6C_DD1Du64;
    (0..STREAM)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let u = (x >> 11) as f64 / (1u64 << 53) as f64 * total;
            let rank = cdf.partition_point(|&c| c < u) as u64;
            rank.wrapping_mul(0x9E37_79B9_7F4A_7C15)
        })
        .collect()
}

/// `n` resident keys in a pseudo-random order (xorshift), the same for every call.
fn keys(n: u64) -> impl Iterator<Item = u64> {
    let mut x = 0x9E37_79B9_7F4A_7C15u64;
    (0..n).map(move |_| {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x % KEYS
    })
}

/// A waker that does nothing: a hit completes at its first poll.
struct Noop;

impl Wake for Noop {
    fn wake(self: Arc<Self>) {}
}

// Each call in a function of its own, so that the loop around it (its registers and
// spills) is the same whatever the call inlines.

#[inline(never)]
fn get(cache: &AdmissionCache<u64, u64>, key: u64) -> Option<u64> {
    cache.get(&key)
}

#[inline(never)]
fn get_or_insert(cache: &AdmissionCache<u64, u64>, key: u64) -> Option<u64> {
    Some(cache.get_or_insert_with(&key, || unreachable!("every key is resident")))
}

#[inline(never)]
fn get_or_insert_async(cache: &AdmissionCache<u64, u64>, key: u64, waker: &Waker) -> Option<u64> {
    let load = pin!(cache.get_or_insert_async(&key, async { unreachable!("every key is resident") }));
    match load.poll(&mut Context::from_waker(waker)) {
        Poll::Ready(value) => Some(value),
        Poll::Pending => None,
    }
}

/// Writes `n` new keys, through `get_or_insert_with` if `loading`, else `insert`; how
/// many were stored. Decided once, so that each call's loop holds only its own call.
#[inline(never)]
fn write_new(cache: &AdmissionCache<u64, u64>, n: u64, loading: bool) -> usize {
    if loading {
        (KEYS..KEYS + n).filter(|&key| load(cache, black_box(key))).count()
    } else {
        (KEYS..KEYS + n).filter(|&key| insert(cache, black_box(key))).count()
    }
}

#[inline(never)]
fn insert(cache: &AdmissionCache<u64, u64>, key: u64) -> bool {
    cache.insert(key, key) == cuckoo_gate::Admission::Admitted
}

#[inline(never)]
fn quick_cache_insert(cache: &quick_cache::sync::Cache<u64, u64>, key: u64) {
    cache.insert(key, key);
}

#[inline(never)]
fn load(cache: &AdmissionCache<u64, u64>, key: u64) -> bool {
    cache.get_or_insert_with(&key, || key) == key
}

#[inline(never)]
fn read_through_one(cache: &AdmissionCache<u64, u64>, key: u64) -> bool {
    cache.get(&key).is_some() || {
        let _ = cache.insert(key, key);
        false
    }
}
