//! Hits through `get` and through `get_or_insert_with`, and through `get` on a cache whose
//! entries have a time to live (or a time to idle), for counting instructions per hit
//! (`benches/hit_cost.sh` runs it under callgrind and takes differences).
//!
//! ```text
//! cargo run --release --example hit_cost -- get 1000000
//! cargo run --release --example hit_cost -- get-or-insert 1000000
//! cargo run --release --example hit_cost -- get-ttl 1000000
//! cargo run --release --example hit_cost -- get-tti 1000000
//! ```
//!
//! Fills a cache of 100k `u64` entries (default policy, capacity 200k, so that every key
//! stays), then looks up N resident keys, in a pseudo-random order, through the call
//! named. Setup is the same for both calls and every N, so the difference in instructions
//! between two values of N is the cost of the added hits alone.

use std::hint::black_box;
use std::time::Duration;

use cuckoo_gate::AdmissionCache;

const KEYS: u64 = 100_000;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (call, n) = match (args.first().map(String::as_str), args.get(1).and_then(|n| n.parse::<u64>().ok()))
    {
        (Some(call @ ("get" | "get-or-insert" | "get-ttl" | "get-tti")), Some(n)) => (call.to_owned(), n),
        _ => {
            eprintln!("usage: hit_cost get|get-or-insert|get-ttl|get-tti N");
            std::process::exit(2)
        }
    };
    let builder = AdmissionCache::builder().capacity(2 * KEYS).seed(1);
    let hour = Duration::from_secs(3_600);
    let builder = match call.as_str() {
        "get-ttl" => builder.time_to_live(hour),
        "get-tti" => builder.time_to_idle(hour),
        _ => builder,
    };
    let cache: AdmissionCache<u64, u64> = builder.build().unwrap();
    (0..KEYS).for_each(|k| _ = cache.insert(k, k));
    // Decided once, so that every call pays the same for the choice in the loop.
    let loading = call == "get-or-insert";
    let mut hits = 0u64;
    let mut x = 0x9E37_79B9_7F4A_7C15u64;
    for _ in 0..n {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let key = x % KEYS;
        let found = if loading { get_or_insert(&cache, black_box(key)) } else { get(&cache, black_box(key)) };
        hits += u64::from(found == Some(key));
    }
    println!("{call}: {hits} hits of {n}");
    assert_eq!(hits, n, "a resident key missed");
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
