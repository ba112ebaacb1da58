//! Single-threaded behaviour of the filter, including a property test against a multiset.

use std::collections::HashMap;

use proptest::prelude::*;

use super::*;
use crate::BuildError;

fn filter(capacity: usize, eps: f64) -> CuckooFilter {
    CuckooFilter::builder().capacity(capacity).false_positive_rate(eps).seed(7).build().unwrap()
}

#[test]
fn no_false_negatives_up_to_full() {
    for &(n, eps) in &[(1_000, 0.01), (10_000, 0.001), (5_000, 1e-6), (3_333, 0.2)] {
        let f = filter(n, eps);
        let mut stored = 0u64;
        for key in 0u64.. {
            if f.insert(&key).is_err() {
                break;
            }
            stored = key + 1;
        }
        assert!(f.load_factor() > 0.9, "n={n}: load {} at first failure", f.load_factor());
        assert_eq!(f.len() as u64, stored);
        for key in 0..stored {
            assert!(f.contains(&key), "n={n}: lost key {key}");
        }
        assert_eq!(f.stats().failed_inserts, 1);
    }
}

#[test]
fn failed_insert_loses_nothing() {
    let f = filter(500, 0.01);
    let mut keys = Vec::new();
    let mut failures = 0;
    for key in 0u64..2_000 {
        match f.insert(&key) {
            Ok(()) => keys.push(key),
            Err(InsertError::Full) => failures += 1,
            Err(e) => panic!("unexpected {e}"),
        }
    }
    assert!(failures > 0);
    assert_eq!(f.len(), keys.len());
    assert!(keys.iter().all(|k| f.contains(k)));
    for k in &keys {
        assert!(f.remove(k));
    }
    assert!(f.is_empty());
}

#[test]
fn ninth_copy_is_refused() {
    let f = filter(1_000, 0.001);
    for _ in 0..8 {
        f.insert("same").unwrap();
    }
    assert_eq!(f.count("same"), 8);
    assert_eq!(f.insert("same"), Err(InsertError::TooManyCopies));
    assert_eq!(f.count("same"), 8);
    assert!(f.remove("same"));
    assert_eq!(f.count("same"), 7);
}

#[test]
fn unique_insert_and_clear() {
    let f = filter(100, 0.001);
    assert_eq!(f.insert_unique(&1u32), Ok(true));
    assert_eq!(f.insert_unique(&1u32), Ok(false));
    assert_eq!(f.len(), 1);
    f.clear();
    assert!(f.is_empty());
    assert!(!f.contains(&1u32));
    assert_eq!(f.insert_unique(&1u32), Ok(true));
}

#[test]
fn sizes_memory_to_capacity() {
    // Not a power of two: memory stays proportional to the capacity.
    for n in [1_000_000usize, 3_000_000, 5_000_000] {
        let f = filter(n, 0.002);
        assert_eq!(f.fingerprint_bits(), 11);
        let bits_per_item = f.memory_usage() as f64 * 8.0 / n as f64;
        assert!(bits_per_item < 12.9, "n={n}: {bits_per_item} bits/item");
    }
}

#[test]
fn bad_configuration_is_an_error() {
    let b = || CuckooFilter::builder().capacity(10);
    for eps in [0.0, 1.0, -0.5, 2.0, f64::NAN, f64::INFINITY] {
        assert!(matches!(
            b().false_positive_rate(eps).build(),
            Err(BuildError::InvalidFalsePositiveRate { .. })
        ));
    }
    assert!(matches!(
        b().false_positive_rate(1e-12).build(),
        Err(BuildError::FalsePositiveRateTooSmall { .. })
    ));
    assert_eq!(CuckooFilter::builder().build().unwrap_err(), BuildError::ZeroCapacity);
    assert!(matches!(
        CuckooFilter::builder().capacity(usize::MAX).build(),
        Err(BuildError::CapacityTooLarge { .. })
    ));
    assert!(matches!(
        CuckooFilter::builder().capacity(usize::MAX / 64).build(),
        Err(BuildError::CapacityTooLarge { .. } | BuildError::OutOfMemory { .. })
    ));
    assert!(matches!(b().stripes(3).build(), Err(BuildError::InvalidStripes { stripes: 3 })));
    assert!(matches!(b().stripes(0).build(), Err(BuildError::InvalidStripes { stripes: 0 })));
    let msg = b().false_positive_rate(0.0).build().unwrap_err().to_string();
    assert!(msg.contains("between 0 and 1"), "{msg}");
}

#[test]
fn tiny_tables_work() {
    let f = CuckooFilter::builder().capacity(1).stripes(1).seed(1).build().unwrap();
    assert_eq!(f.capacity(), 8);
    let mut n = 0;
    while f.insert(&n).is_ok() {
        n += 1;
    }
    assert!(n >= 6, "only {n} fit in 8 slots");
    assert!((0..n).all(|k| f.contains(&k)));
}

#[test]
fn counts_inserts_and_removes() {
    let f = filter(100, 0.01);
    for k in 0..10u32 {
        f.insert(&k).unwrap();
    }
    assert!(f.remove(&3u32));
    assert!(!f.remove(&1000u32) || f.len() == 8);
    f.clear();
    let s = f.stats();
    assert_eq!((s.len, s.inserts, s.removes), (0, 10, 10));
}

#[test]
fn distinct_seeds_by_default() {
    assert_ne!(CuckooFilter::with_capacity(10).seed(), CuckooFilter::with_capacity(10).seed());
}

#[derive(Clone, Debug)]
enum Op {
    Insert(u16),
    InsertUnique(u16),
    Remove(u16),
    Contains(u16),
    Count(u16),
}

fn op() -> impl Strategy<Value = Op> {
    // A small key space makes repeats, copies and removals of present keys common.
    let key = 0u16..200;
    prop_oneof![
        3 => key.clone().prop_map(Op::Insert),
        2 => key.clone().prop_map(Op::InsertUnique),
        2 => key.clone().prop_map(Op::Remove),
        2 => key.clone().prop_map(Op::Contains),
        1 => key.prop_map(Op::Count),
    ]
}

proptest! {
    /// Against a multiset: present keys are always found, counts never undercount, and
    /// with 31-bit fingerprints (collisions ~1e-9) the filter behaves exactly like the model.
    #[test]
    fn behaves_like_a_multiset(ops in prop::collection::vec(op(), 1..400), seed in any::<u64>(), exact in any::<bool>()) {
        let eps = if exact { 2e-9 } else { 0.05 };
        let f = CuckooFilter::builder().capacity(64).false_positive_rate(eps).seed(seed).build().unwrap();
        let mut model: HashMap<u16, usize> = HashMap::new();
        for op in ops {
            match op {
                Op::Insert(k) => match f.insert(&k) {
                    Ok(()) => *model.entry(k).or_default() += 1,
                    Err(InsertError::Full | InsertError::TooManyCopies) => {}
                },
                Op::InsertUnique(k) => {
                    if let Ok(inserted) = f.insert_unique(&k) {
                        let held = model.get(&k).copied().unwrap_or(0);
                        if exact { prop_assert_eq!(inserted, held == 0); }
                        prop_assert!(!(inserted && held > 0), "inserted a present key");
                        if inserted { *model.entry(k).or_default() += 1; }
                    }
                }
                Op::Remove(k) => {
                    let held = model.get(&k).copied().unwrap_or(0);
                    if held > 0 {
                        prop_assert!(f.remove(&k));
                        *model.get_mut(&k).unwrap() -= 1;
                    } else if exact {
                        prop_assert!(!f.remove(&k));
                    }
                }
                Op::Contains(k) => {
                    let held = model.get(&k).copied().unwrap_or(0);
                    if held > 0 || exact { prop_assert_eq!(f.contains(&k), held > 0); }
                }
                Op::Count(k) => {
                    let held = model.get(&k).copied().unwrap_or(0);
                    if exact { prop_assert_eq!(f.count(&k), held); } else { prop_assert!(f.count(&k) >= held); }
                }
            }
            prop_assert_eq!(f.len(), model.values().sum::<usize>());
        }
        for (k, &held) in &model {
            prop_assert!(f.count(k) >= held);
        }
    }
}
