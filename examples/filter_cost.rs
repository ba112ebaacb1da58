//! Lookups and inserts of the filter in `bulk_insert_and_query`'s shape, for counting
//! instructions per operation (`benches/filter_cost.sh` runs it under callgrind and takes
//! differences).
//!
//! ```text
//! cargo run --release --example filter_cost -- OP N [windows]
//! ```
//!
//! The filter is fixed at capacity 1.46 × 200,000 and ε = 0.1% (13-bit slots), as
//! `bulk_insert_and_query 200000` builds it; with `windows`, in the windowed layout at the
//! same capacity and rate. OP is one of:
//!
//! * `absent`: fills it with 200,000 keys (65% load), then looks up N absent keys (N a
//!   multiple of 2^19, the keys made before the lookups);
//! * `batch`: the same fill, then N absent keys looked up through `contains_batch`;
//! * `present`: the same fill, then N lookups of the 20,000 keys inserted first, which
//!   went in while the table was under 7% full and so, but for the few a later
//!   relocation moved, sit in their first bucket;
//! * `insert`: fills it to 52.5% load, then inserts N keys more;
//! * `fill`: inserts keys into the empty filter up to N per mille of its slots, as the
//!   reference's benchmark fills its table (to 60% at N = 5M), and prints how many;
//! * `record`: a [`SeenBefore`] gate of 2^21 keys per generation holding 200,000, then N
//!   `check_and_record` calls of new keys (first sightings, N at most 2^20: the generation
//!   does not rotate);
//! * `seen`: the same gate, then N `check_and_record` calls of the 20,000 keys recorded
//!   first (seen before, in the current generation).
//!
//! The filter and the gate have fixed seeds, so that a count repeats exactly from run to
//! run (a random seed moves an insert's by several instructions). Setup is the same for
//! every N, so the difference in instructions between two values of
//! N is the cost of the added operations alone: for `insert`, N and 2N with 2N keys
//! reaching 62.5% load give the inserts from 57.5% to 62.5%; for `fill`, 0 and 600 give
//! the mean insert of a fill to 60%.

use cuckoo_gate::{CuckooFilter, Layout, SeenBefore};

mod common;
use common::key;

const FILL: u64 = 200_000;
const EARLY: u64 = 20_000;
const POOL: u64 = 1 << 19;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let layout = match args.get(2).map(String::as_str) {
        None => Some(Layout::Buckets),
        Some("windows") => Some(Layout::Windows),
        Some(_) => None,
    };
    let (op, n, layout) =
        match (args.first().map(String::as_str), args.get(1).and_then(|n| n.parse::<u64>().ok()), layout) {
            (Some(op @ ("record" | "seen")), Some(n), Some(Layout::Buckets)) if n <= 1 << 20 => {
                return gate(op, n);
            }
            (Some(op @ ("absent" | "batch" | "present" | "insert" | "fill")), Some(n), Some(layout)) => {
                (op.to_owned(), n, layout)
            }
            _ => {
                eprintln!("usage: filter_cost absent|batch|present|insert|fill N [windows] | record|seen N");
                std::process::exit(2)
            }
        };
    let capacity = FILL as usize * 146 / 100;
    let filter = CuckooFilter::builder()
        .false_positive_rate(0.001)
        .seed(1)
        .capacity(capacity)
        .max_capacity(capacity)
        .layout(layout)
        .build()
        .expect("valid configuration");
    let slots = filter.capacity() as u64;
    let (fill, pool) = match op.as_str() {
        "insert" => (slots * 525 / 1000, slots / 10),
        "fill" => (0, slots * 6 / 10),
        _ => (FILL, POOL),
    };
    let valid = match op.as_str() {
        "insert" => n <= slots / 10,
        "fill" => n <= 600,
        _ => n % POOL == 0,
    };
    if !valid {
        eprintln!(
            "{op}: N must be at most {} for insert, 600 for fill, a multiple of {POOL} else",
            slots / 10
        );
        std::process::exit(2)
    }
    (0..fill).for_each(|i| filter.insert(&key(i)).expect("sized to fit"));
    // The keys are made before the operations, the same pool for every N.
    let pool: Vec<u64> = match op.as_str() {
        "present" => (0..pool).map(|i| key(i % EARLY)).collect(),
        _ => (0..pool).map(|i| key(1 << 40 | i)).collect(),
    };
    let (found, n) = match op.as_str() {
        "insert" => (inserts(&filter, &pool[..n as usize]), n),
        "fill" => {
            let keys = &pool[..(slots * n / 1000) as usize];
            (inserts(&filter, keys), keys.len() as u64)
        }
        "batch" => (batch_lookups(&filter, n, &pool), n),
        _ => (lookups(&filter, n, &pool), n),
    };
    println!("{op}: {found} of {n} found; load {:.3}", filter.load_factor());
}

/// The `record` and `seen` operations on a gate (see the module docs).
fn gate(op: &str, n: u64) {
    let gate = SeenBefore::builder().capacity(1 << 21).seed(1).build().expect("valid configuration");
    (0..FILL).for_each(|i| gate.record(&key(i)));
    let keys: Vec<u64> = match op {
        "seen" => (0..n).map(|i| key(i % EARLY)).collect(),
        _ => (0..n).map(|i| key(1 << 40 | i)).collect(),
    };
    let seen = records(&gate, &keys);
    println!("{op}: {seen} of {n} found");
}

/// `check_and_record` of every key of `keys`; how many were seen before.
#[inline(never)]
fn records(gate: &SeenBefore, keys: &[u64]) -> u64 {
    keys.iter().filter(|k| gate.check_and_record(k)).count() as u64
}

/// Looks up `n` keys, going through `pool` as often as it takes (`n` a multiple of its
/// length), one `contains` per key as `bulk_insert_and_query` does; how many were found.
#[inline(never)]
fn lookups(filter: &CuckooFilter, n: u64, pool: &[u64]) -> u64 {
    let rounds = n as usize / pool.len();
    (0..rounds).map(|_| pool.iter().filter(|k| filter.contains(k)).count() as u64).sum()
}

/// [`lookups`] through `contains_batch`, the whole pool per call.
#[inline(never)]
fn batch_lookups(filter: &CuckooFilter, n: u64, pool: &[u64]) -> u64 {
    let mut found = vec![false; pool.len()];
    let rounds = n as usize / pool.len();
    (0..rounds)
        .map(|_| {
            filter.contains_batch(pool, &mut found);
            found.iter().filter(|&&f| f).count() as u64
        })
        .sum()
}

/// Inserts `keys`; how many went in.
#[inline(never)]
fn inserts(filter: &CuckooFilter, keys: &[u64]) -> u64 {
    keys.iter().filter(|&k| filter.insert(k).is_ok()).count() as u64
}
