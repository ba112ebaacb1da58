//! Hits through `get` and through `get_or_insert_with`, for counting instructions per hit
//! (`benches/hit_cost.sh` runs it under callgrind and takes differences).
//!
//! ```text
//! cargo run --release --example hit_cost -- get 1000000
//! cargo run --release --example hit_cost -- get-or-insert 1000000
//! ```
//!
//! Fills a cache of 100k `u64` entries (default policy, capacity 200k, so that every key
//! stays), then looks up N resident keys, in a pseudo-random order, through the call
//! named. Setup is the same for both calls and every N, so the difference in instructions
//! between two values of N is the cost of the added hits alone.

use std::hint::black_box;

use cuckoo_gate::AdmissionCache;

const KEYS: u64 = 100_000;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (call, n) = match (args.first().map(String::as_str), args.get(1).and_then(|n| n.parse::<u64>().ok()))
    {
        (Some(call @ ("get" | "get-or-insert")), Some(n)) => (call.to_owned(), n),
        _ => {
            eprintln!("usage: hit_cost get|get-or-insert N");
            std::process::exit(2)
        }
    };
    let cache: AdmissionCache<u64, u64> =
        AdmissionCache::builder().capacity(2 * KEYS as usize).seed(1).build().unwrap();
    (0..KEYS).for_each(|k| _ = cache.insert(k, k));
    let mut hits = 0u64;
    let mut x = 0x9E37_79B9_7F4A_7C15u64;
    for _ in 0..n {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let key = x % KEYS;
        let found = match call.as_str() {
            "get" => black_box(cache.get(black_box(&key))),
            _ => Some(black_box(
                cache.get_or_insert_with(black_box(key), || unreachable!("every key is resident")),
            )),
        };
        hits += u64::from(found == Some(key));
    }
    println!("{call}: {hits} hits of {n}");
    assert_eq!(hits, n, "a resident key missed");
}
