//! loom model checks of the filter's concurrency protocols.
//!
//! Run with:
//!
//! ```text
//! RUSTFLAGS="--cfg cuckoo_gate_loom" LOOM_MAX_PREEMPTIONS=3 cargo test --release --test loom
//! ```
//!
//! Each model also runs against a deliberately broken protocol and must then fail, which
//! shows that it can catch the bug it is about:
//!
//! ```text
//! RUSTFLAGS='--cfg cuckoo_gate_loom --cfg cuckoo_gate_broken="split_move"' ...
//! RUSTFLAGS='--cfg cuckoo_gate_loom --cfg cuckoo_gate_broken="skip_validation"' ...
//! RUSTFLAGS='--cfg cuckoo_gate_loom --cfg cuckoo_gate_broken="split_unique"' ...
//! ```
//!
//! Tables are tiny (3 buckets of 4 slots, one stripe) and keys are chosen by their
//! placement under a fixed seed, so each model sets up exactly the situation it checks.
//!
//! **Writers run on the model's main thread, readers on spawned ones.** loom 0.7's
//! partial-order reduction compares a store only with the *most recent* access to that
//! atomic; a writer that loads a word before storing it (every writer here does, under its
//! lock) hides an earlier load by another thread, so the schedule "reader first" is never
//! tried if the reader runs first in loom's initial schedule. A load is compared with the
//! last *store*, so when the writer runs first every read-after-write race is found and
//! loom backtracks to let the reader run before each store. [`model`] asserts that every
//! model explores more than one interleaving, so a model that checks nothing fails.
#![cfg(cuckoo_gate_loom)]

use cuckoo_gate::CuckooFilter;
use loom::sync::Arc;
use loom::thread;

const SEED: u64 = 0x1007;

/// A filter of 3 buckets (12 slots) with 9-bit fingerprints.
fn tiny() -> CuckooFilter {
    let f = CuckooFilter::builder().capacity(9).max_capacity(9).false_positive_rate(0.01).seed(SEED).build().unwrap();
    assert_eq!(f.capacity(), 12);
    f
}

/// The first key from `from` whose buckets satisfy `want`.
fn key_where(f: &CuckooFilter, from: u64, want: impl Fn([usize; 2]) -> bool) -> u64 {
    (from..).find(|k| want(f.debug_buckets(k))).unwrap()
}

/// Fills bucket `b` up to 4 entries with keys whose first bucket is `b`.
fn fill(f: &CuckooFilter, b: usize, from: u64, entries: usize) -> Vec<u64> {
    let mut keys = Vec::new();
    let mut next = from;
    while keys.len() < entries {
        let k = key_where(f, next, |[i1, _]| i1 == b);
        f.insert(&k).unwrap();
        keys.push(k);
        next = k + 1;
    }
    keys
}

/// A table where inserting `b` must relocate `a`: `a` sits in lane 0 of bucket `x`, `b`'s
/// buckets `x` and `z` are full, and `a`'s other bucket `y` has room.
fn relocation_setup() -> (CuckooFilter, u64, u64, Vec<u64>) {
    let f = tiny();
    let a = 1_000_000;
    let [x, y] = f.debug_buckets(&a);
    let z = 3 - x - y;
    f.insert(&a).unwrap();
    let b = key_where(&f, 2_000_000, |[i1, i2]| i1 == x && i2 == z);
    let mut others = fill(&f, x, 0, 3);
    others.extend(fill(&f, z, 10_000, 4));
    (f, a, b, others)
}

/// A table where inserting `b` must move `a` from its *second* bucket `y` back to its
/// first bucket `x`. A reader scans `x` then `y`, so it can miss `a` only if it sees `x`
/// before the copy and `y` after the clear: exactly what stamp validation must catch.
fn relocation_back_setup() -> (CuckooFilter, u64, u64, Vec<u64>) {
    let f = tiny();
    let a = 1_000_000;
    let [x, y] = f.debug_buckets(&a);
    let z = 3 - x - y;
    let mut others = fill(&f, x, 0, 4);
    f.insert(&a).unwrap(); // x is full: `a` goes to lane 0 of y
    assert!(f.remove(&others.pop().unwrap())); // room for `a` back in x
    let b = key_where(&f, 2_000_000, |[i1, i2]| i1 == y && i2 == z);
    others.extend(fill(&f, y, 10_000, 3));
    others.extend(fill(&f, z, 20_000, 4));
    (f, a, b, others)
}

/// Model 1: a reader looking up `a` while a writer inserts `b`, which moves `a` from its
/// first bucket to its second, always finds `a`.
#[test]
#[cfg_attr(cuckoo_gate_broken = "split_move", should_panic(expected = "lookup missed"))]
fn reader_finds_key_that_is_being_relocated() {
    model(|| reader_races_relocation(relocation_setup()));
}

/// A reader looks up `a` while the main thread inserts `b`, which relocates `a`; then every
/// key is present and the count is exact.
fn reader_races_relocation((f, a, b, others): (CuckooFilter, u64, u64, Vec<u64>)) {
    let f = Arc::new(f);
    let reader = {
        let f = f.clone();
        thread::spawn(move || assert!(f.contains(&a), "lookup missed a key while it was relocated"))
    };
    f.insert(&b).unwrap();
    reader.join().unwrap();
    assert!(others.iter().chain([&a, &b]).all(|k| f.contains(k)));
    assert_eq!(f.len(), others.len() + 2);
}

/// Model 1b: the same when `a` moves from its second bucket back to its first; this is
/// the case that fails without stamp validation.
#[test]
#[cfg_attr(
    any(cuckoo_gate_broken = "split_move", cuckoo_gate_broken = "skip_validation"),
    should_panic(expected = "lookup missed")
)]
fn reader_finds_key_relocated_back_to_its_first_bucket() {
    model(|| reader_races_relocation(relocation_back_setup()));
}

/// Model 2: a reader looking up `a` while another key of the same bucket is removed.
#[test]
fn reader_finds_key_beside_a_remove() {
    model(|| {
        let f = tiny();
        let a = 1_000_000;
        let [x, _] = f.debug_buckets(&a);
        f.insert(&a).unwrap();
        let c = fill(&f, x, 0, 1)[0];
        let f = Arc::new(f);
        let reader = {
            let f = f.clone();
            thread::spawn(move || assert!(f.contains(&a), "lookup missed a key beside a remove"))
        };
        assert!(f.remove(&c));
        reader.join().unwrap();
        assert!(f.contains(&a));
        assert_eq!(f.len(), 1);
    });
}

/// Model 3: two inserts racing into full buckets (one of them must relocate): both are
/// present afterwards, nothing else is lost, and the count is exact.
#[test]
#[cfg_attr(cuckoo_gate_broken = "split_move", should_panic(expected = "lost"))]
fn racing_inserts_into_full_buckets() {
    model(|| {
        let (f, a, b, others) = relocation_setup();
        let [_, y] = f.debug_buckets(&a);
        let c = key_where(&f, 3_000_000, |[i1, _]| i1 == y);
        let f = Arc::new(f);
        let t = {
            let f = f.clone();
            thread::spawn(move || f.insert(&b).unwrap())
        };
        f.insert(&c).unwrap();
        t.join().unwrap();
        let all = others.iter().chain([&a, &b, &c]);
        assert!(all.into_iter().all(|k| f.contains(k)), "a key was lost");
        assert_eq!(f.len(), others.len() + 3);
    });
}

/// Model 4: `insert_unique` racing on one key: exactly one caller inserts, one copy stored.
#[test]
#[cfg_attr(cuckoo_gate_broken = "split_unique", should_panic(expected = "both or neither"))]
fn insert_unique_race_has_one_winner() {
    model(|| {
        let f = Arc::new(tiny());
        let t = {
            let f = f.clone();
            thread::spawn(move || f.insert_unique(&7u64).unwrap())
        };
        let here = f.insert_unique(&7u64).unwrap();
        let there = t.join().unwrap();
        assert!(here ^ there, "both or neither inserted: {here} {there}");
        assert_eq!(f.count(&7u64), 1);
    });
}

/// Model 5: `clear` and a re-insert racing with a lookup: the lookup ends, and the key
/// inserted after `clear` is present.
#[test]
fn reader_sees_key_reinserted_after_clear() {
    model(|| {
        let f = Arc::new(tiny());
        f.insert(&5u64).unwrap();
        let reader = {
            let f = f.clone();
            thread::spawn(move || f.contains(&5u64))
        };
        f.clear();
        f.insert(&5u64).unwrap();
        reader.join().unwrap();
        assert!(f.contains(&5u64));
        assert_eq!(f.len(), 1);
    });
}

/// Runs `body` under loom and checks that loom explored more than one interleaving.
fn model(body: impl Fn() + Sync + Send + 'static) {
    use std::sync::atomic::{AtomicUsize, Ordering};
    let runs = std::sync::Arc::new(AtomicUsize::new(0));
    let counter = runs.clone();
    loom::model(move || {
        counter.fetch_add(1, Ordering::Relaxed);
        body();
    });
    let runs = runs.load(Ordering::Relaxed);
    assert!(runs > 1, "loom explored only {runs} interleaving(s): the model checks nothing");
}

/// Model 6: the admission gate's check-and-record on one key from two threads: exactly
/// one first sighting.
#[test]
#[cfg_attr(cuckoo_gate_broken = "split_unique", should_panic(expected = "both or neither"))]
fn gate_check_and_record_race_has_one_first_sighting() {
    model(|| {
        let gate = Arc::new(cuckoo_gate::SeenBefore::builder().capacity(4).seed(SEED).build().unwrap());
        let other = {
            let gate = gate.clone();
            thread::spawn(move || gate.check_and_record(&9u64))
        };
        let here = gate.check_and_record(&9u64);
        let there = other.join().unwrap();
        assert!(here ^ there, "both or neither saw the key first: {here} {there}");
    });
}
