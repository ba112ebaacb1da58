//! Single-threaded behaviour of the filter, including a property test against a multiset.

use std::collections::HashMap;

use proptest::prelude::*;

use super::*;
use crate::BuildError;

/// A fixed-size filter (so that inserts can fail).
fn filter(capacity: usize, eps: f64) -> CuckooFilter {
    layout_filter(Layout::Buckets, capacity, eps)
}

fn layout_filter(layout: Layout, capacity: usize, eps: f64) -> CuckooFilter {
    CuckooFilter::builder()
        .capacity(capacity)
        .max_capacity(capacity)
        .false_positive_rate(eps)
        .layout(layout)
        .seed(7)
        .build()
        .unwrap()
}

const LAYOUTS: [Layout; 2] = [Layout::Buckets, Layout::Windows];

#[test]
fn no_false_negatives_up_to_full() {
    let cases = [(1_000, 0.01), (10_000, 0.001), (5_000, 1e-6), (3_333, 0.2)];
    for (layout, &(n, eps)) in LAYOUTS.iter().flat_map(|&l| cases.iter().map(move |c| (l, c))) {
        let f = layout_filter(layout, n, eps);
        let mut stored = 0u64;
        for key in 0u64.. {
            if f.insert(&key).is_err() {
                break;
            }
            stored = key + 1;
        }
        assert!(f.load_factor() > 0.9, "{layout:?} n={n}: load {} at first failure", f.load_factor());
        // Every key the builder was sized for fits.
        assert!(stored >= n as u64, "{layout:?} n={n}: only {stored} stored");
        assert_eq!(f.len() as u64, stored);
        for key in 0..stored {
            assert!(f.contains(&key), "n={n}: lost key {key}");
        }
        assert_eq!(f.stats().failed_inserts, 1);
    }
}

#[test]
fn failed_insert_loses_nothing() {
    for layout in LAYOUTS {
        failed_insert_loses_nothing_in(layout);
    }
}

fn failed_insert_loses_nothing_in(layout: Layout) {
    let f = layout_filter(layout, 500, 0.01);
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
    // Two buckets of 4 hold 8 copies; two windows of 2 hold 4.
    for (layout, most) in [(Layout::Buckets, 8), (Layout::Windows, 4)] {
        let f = layout_filter(layout, 1_000, 0.001);
        for _ in 0..most {
            f.insert("same").unwrap();
        }
        assert_eq!(f.count("same"), most);
        assert_eq!(f.insert("same"), Err(InsertError::TooManyCopies));
        assert_eq!(f.count("same"), most);
        assert!(f.remove("same"));
        assert_eq!(f.count("same"), most - 1);
    }
}

/// A key stored in its second bucket is found there by `insert_unique` once its first
/// bucket has room again (the fast path, which stores into the first bucket, looks into
/// the second before it does).
#[test]
fn unique_insert_sees_the_key_in_its_second_bucket() {
    let f = filter(1_000, 0.001);
    let k = 1u64 << 40;
    let [first, _] = f.debug_buckets(&k);
    let crowd: Vec<u64> = (0..).filter(|c| f.debug_buckets(c)[0] == first).take(SLOTS).collect();
    crowd.iter().for_each(|c| f.insert(c).unwrap());
    assert_eq!(f.insert_unique(&k), Ok(true));
    assert!(f.remove(&crowd[0]));
    assert_eq!(f.insert_unique(&k), Ok(false));
    assert_eq!(f.count(&k), 1);
}

/// `insert_unique_then_look` answers as `insert_unique` and then `contains` on the other
/// filter do, whether it fuses them (two fixed-size filters alike) or not (a growable
/// filter, a smaller one).
#[test]
fn insert_unique_then_look_agrees_with_the_two_calls() {
    let fixed =
        |capacity| CuckooFilter::builder().capacity(capacity).max_capacity(capacity).seed(3).build().unwrap();
    let growable = CuckooFilter::builder().capacity(1_000).seed(3).build().unwrap();
    for other in [fixed(1_000), growable, fixed(500)] {
        let here = fixed(1_000);
        (0..300u64).for_each(|k| other.insert(&k).unwrap());
        (350..400u64).for_each(|k| here.insert(&k).unwrap());
        for k in 200..450u64 {
            let hash = here.hash(&k);
            let expected = (!here.contains(&k)).then(|| other.contains(&k));
            assert_eq!(here.insert_unique_then_look(hash, &other), Ok(expected), "key {k}");
            assert_eq!(here.count(&k), 1);
        }
    }
}

/// `insert_batch` inserts as `insert` does, key by key, and stops at the first key that
/// does not fit, naming it: the keys before it are in, the rest are not.
#[test]
fn insert_batch_stops_at_the_first_refusal() {
    for layout in [Layout::Buckets, Layout::Windows] {
        let f = layout_filter(layout, 1_000, 0.01);
        let keys: Vec<u64> = (0..f.capacity() as u64 * 2).collect();
        let error = f.insert_batch(&keys).unwrap_err();
        assert_eq!(error.error, InsertError::Full);
        assert_eq!(f.len(), error.index, "{layout:?}: the keys before the refused one, and no other");
        assert!(keys[..error.index].iter().all(|k| f.contains(k)), "{layout:?}");
    }
    let growable = CuckooFilter::builder().capacity(100).seed(4).build().unwrap();
    let keys: Vec<u64> = (0..1_000).collect();
    assert_eq!(growable.insert_batch(&keys), Ok(()));
    assert!(keys.iter().all(|k| growable.contains(k)) && growable.len() == 1_000);
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
    assert!(matches!(b().stripes(3).build(), Err(BuildError::InvalidStripes { stripes: 3, most: None })));
    assert!(matches!(b().stripes(0).build(), Err(BuildError::InvalidStripes { stripes: 0, .. })));
    // More stripes than the largest table could use: refused, not 512 MiB of stripes.
    assert_eq!(
        b().stripes(1 << 24).build().unwrap_err(),
        BuildError::InvalidStripes { stripes: 1 << 24, most: Some(1024) }
    );
    assert!(b().stripes(1024).build().is_ok());
    let msg = b().false_positive_rate(0.0).build().unwrap_err().to_string();
    assert!(msg.contains("between 0 and 1"), "{msg}");
    // Windowed filters are fixed-size, and as hard to overflow.
    let w = || b().layout(Layout::Windows);
    assert_eq!(
        w().max_capacity(20).build().unwrap_err(),
        BuildError::WindowsCannotGrow { capacity: 10, max_capacity: 20 }
    );
    assert_eq!(w().max_capacity(19).build().unwrap().stats().doublings_left, 0);
    assert!(matches!(
        CuckooFilter::builder().capacity(usize::MAX).layout(Layout::Windows).build(),
        Err(BuildError::CapacityTooLarge { .. })
    ));
    assert!(matches!(
        CuckooFilter::builder().capacity(usize::MAX / 64).layout(Layout::Windows).build(),
        Err(BuildError::CapacityTooLarge { .. } | BuildError::OutOfMemory { .. })
    ));
    assert!(matches!(
        w().false_positive_rate(1e-12).build(),
        Err(BuildError::FalsePositiveRateTooSmall { .. })
    ));
    assert_eq!(
        b().max_capacity(9).build().unwrap_err(),
        BuildError::MaxCapacityBelowCapacity { capacity: 10, max_capacity: 9 }
    );
    assert_eq!(
        b().false_positive_rate(0.001).max_capacity(usize::MAX).build().unwrap_err(),
        BuildError::TooManyDoublings { doublings: 60, most: 19 }
    );
    assert_eq!(
        CuckooFilter::builder()
            .capacity(1 << 40)
            .max_capacity(1 << 62)
            .false_positive_rate(0.01)
            .build()
            .unwrap_err(),
        BuildError::CapacityTooLarge { capacity: 1 << 62 }
    );
    // The default growth shrinks to what fits in a 32-bit slot.
    assert_eq!(b().false_positive_rate(2e-9).build().unwrap().stats().doublings_left, 0);
    assert_eq!(b().false_positive_rate(1e-8).build().unwrap().stats().doublings_left, 2);
    // Otherwise the default, whatever the fingerprint width.
    assert_eq!(b().build().unwrap().stats().doublings_left, crate::DEFAULT_DOUBLINGS);
    assert_eq!(
        b().false_positive_rate(0.01).build().unwrap().stats().doublings_left,
        crate::DEFAULT_DOUBLINGS
    );
    assert_eq!(
        b().false_positive_rate(1e-5).build().unwrap().stats().doublings_left,
        crate::DEFAULT_DOUBLINGS
    );
}

#[test]
fn growth_loses_nothing_and_keeps_the_false_positive_rate() {
    let f = CuckooFilter::builder()
        .capacity(2_000)
        .max_capacity(32_000)
        .false_positive_rate(0.01)
        .seed(3)
        .build()
        .unwrap();
    let initial = f.capacity();
    let n = 30_000u64;
    for key in 0..n {
        f.insert(&key).unwrap();
        if key % 997 == 0 {
            assert!((0..=key).step_by(13).all(|k| f.contains(&k)), "lost a key by {key}");
        }
    }
    let stats = f.stats();
    assert_eq!((stats.doublings, stats.doublings_left), (4, 0));
    assert_eq!(f.capacity(), 16 * initial);
    assert_eq!(f.len() as u64, n);
    assert!((0..n).all(|k| f.contains(&k)));
    assert_eq!(stats.failed_inserts, 0);
    // 9-bit fingerprints and 4 extension bits, all spent: the rate is that of a fixed
    // filter with 9-bit fingerprints at this load.
    let queries = 200_000u64;
    let fp = (n..n + queries).filter(|k| f.contains(k)).count() as f64 / queries as f64;
    assert!(fp <= 0.01 * 1.1, "false-positive rate {fp} after growth");
    assert!(stats.estimated_false_positive_rate <= 0.01);
    // Removes and unique inserts work on the grown table.
    assert!((0..n).step_by(2).all(|k| f.remove(&k)));
    assert_eq!(f.len() as u64, n / 2);
    assert!((1..n).step_by(2).all(|k| f.contains(&k)));
    assert_eq!(f.insert_unique(&1u64), Ok(false));
    f.clear();
    assert!(f.is_empty() && !f.contains(&1u64));
}

#[test]
fn growth_stops_at_max_capacity_and_loses_nothing() {
    let f = CuckooFilter::builder()
        .capacity(1_000)
        .max_capacity(4_000)
        .false_positive_rate(0.001)
        .seed(5)
        .build()
        .unwrap();
    let mut stored = Vec::new();
    let err = loop {
        let key = stored.len() as u64;
        match f.insert(&key) {
            Ok(()) => stored.push(key),
            Err(e) => break e,
        }
    };
    assert_eq!(err, InsertError::MaxCapacityReached { capacity: f.capacity() });
    assert_eq!(f.stats().doublings, 2);
    assert!(f.load_factor() > 0.9, "stopped at load {}", f.load_factor());
    assert!(stored.iter().all(|k| f.contains(k)));
    assert_eq!(f.len(), stored.len());
    assert!(err.to_string().contains("max_capacity"));
}

#[test]
fn a_fixed_size_filter_reports_full() {
    let f = filter(100, 0.01);
    assert_eq!(f.stats().doublings_left, 0);
    assert_eq!((0..1_000u32).try_for_each(|k| f.insert(&k)), Err(InsertError::Full));
}

#[test]
fn tiny_tables_work() {
    let f = CuckooFilter::builder().capacity(1).max_capacity(1).stripes(1).seed(1).build().unwrap();
    assert_eq!(f.capacity(), 8);
    let mut n = 0;
    while f.insert(&n).is_ok() {
        n += 1;
    }
    assert!(n >= 6, "only {n} fit in 8 slots");
    assert!((0..n).all(|k| f.contains(&k)));
}

#[test]
fn tiny_windowed_tables_work() {
    // Filled to the last window, whose reads reach into the table's padding words.
    let f = CuckooFilter::builder().capacity(16).layout(Layout::Windows).stripes(1).seed(1).build().unwrap();
    let mut n = 0u64;
    while f.insert(&n).is_ok() {
        n += 1;
    }
    assert!(n as usize >= f.capacity() / 2, "only {n} fit in {} slots", f.capacity());
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

#[test]
fn contains_batch_agrees_with_contains() {
    // Narrow (13-bit) and wide (23-bit) slots, fixed-size and grown, batches of every
    // length around the group size.
    let cases = [(0.001, 20_000), (0.001, 80_000), (1e-6, 20_000), (1e-6, 80_000), (0.001, 0)];
    for (eps, max) in cases {
        // `max` 0: a windowed filter.
        let layout = if max == 0 { Layout::Windows } else { Layout::Buckets };
        let f = CuckooFilter::builder()
            .capacity(20_000)
            .max_capacity(max.max(20_000))
            .false_positive_rate(eps)
            .layout(layout)
            .seed(3)
            .build()
            .unwrap();
        let stored = if max > 20_000 { 60_000u64 } else { 18_000 };
        (0..stored).for_each(|k| f.insert(&k).unwrap());
        let keys: Vec<u64> = (0..stored + 20_000).rev().collect();
        for len in [0, 1, BATCH - 1, BATCH, BATCH + 1, keys.len()] {
            let mut found = vec![false; len];
            f.contains_batch(&keys[..len], &mut found);
            for (k, found) in keys[..len].iter().zip(found) {
                assert_eq!(found, f.contains(k), "key {k}, eps {eps}, max {max}");
                assert!(found || *k >= stored, "batch missed key {k}");
            }
        }
    }
}

proptest! {
    /// Against a multiset: present keys are always found, counts never undercount, and
    /// with 31-bit fingerprints (collisions ~1e-9) the filter behaves exactly like the model.
    #[test]
    fn behaves_like_a_multiset(ops in prop::collection::vec(op(), 1..400), seed in any::<u64>(), exact in any::<bool>(), windows in any::<bool>()) {
        let eps = if exact { 2e-9 } else { 0.05 };
        let layout = if windows { Layout::Windows } else { Layout::Buckets };
        let f = CuckooFilter::builder().capacity(64).false_positive_rate(eps).layout(layout).seed(seed).build().unwrap();
        let mut model: HashMap<u16, usize> = HashMap::new();
        for op in ops {
            match op {
                Op::Insert(k) => match f.insert(&k) {
                    Ok(()) => *model.entry(k).or_default() += 1,
                    Err(e) => prop_assert!(!matches!(e, InsertError::OutOfMemory { .. }), "{e}"),
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

/// Copies of a few keys fill their bucket pairs at a load far below a full table: the
/// filter refuses them with `Crowded` instead of doubling (a doubling keeps every copy of
/// a key in one bucket pair), and keeps every copy it stored.
#[test]
fn duplicates_do_not_force_growth() {
    let f = CuckooFilter::builder().capacity(100_000).build().unwrap();
    let memory = f.memory_usage();
    let mut stored = std::collections::HashMap::new();
    for k in 0..500u64 {
        for _ in 0..8 {
            match f.insert(&k) {
                Ok(()) => *stored.entry(k).or_insert(0) += 1,
                Err(InsertError::Crowded | InsertError::TooManyCopies) => {}
                Err(e) => panic!("copies of {k}: {e}"),
            }
        }
    }
    let stats = f.stats();
    assert_eq!(stats.doublings, 0, "copies forced a doubling");
    assert_eq!(f.memory_usage(), memory);
    for (k, copies) in stored {
        assert!(f.count(&k) >= copies, "lost a copy of {k}");
    }
}

/// Distinct keys chosen (with a known seed) to share one bucket pair: the ninth finds no
/// room at a load of under 1%, and is refused without a doubling.
#[test]
fn crafted_collisions_do_not_force_growth() {
    let f = CuckooFilter::builder().capacity(1_000).seed(7).build().unwrap();
    let target = f.debug_buckets(&0u64);
    let crafted: Vec<u64> = (0u64..).filter(|k| f.debug_buckets(k) == target).take(9).collect();
    for k in &crafted[..8] {
        f.insert(k).unwrap();
    }
    assert_eq!(f.insert(&crafted[8]), Err(InsertError::Crowded));
    assert_eq!(f.stats().doublings, 0);
    assert!(crafted[..8].iter().all(|k| f.contains(k)), "a crafted key was lost");
}

/// Two keys whose entries differ only in their extension bits (same buckets, same
/// fingerprint): removing the second must remove its own entry, not the first key's,
/// or the first key's bucket after the next doubling is decided by the wrong bits.
#[test]
fn remove_takes_the_entry_with_the_keys_extension_bits() {
    let f = CuckooFilter::builder().capacity(1_000).seed(7).build().unwrap();
    let g = f.geometry();
    let h1 = 0x1234_5678_9abc_def0u64;
    let p1 = g.probe(h1);
    let split = |p: super::hash::Probe| g.split(p.i1, p.ext).0;
    // The other half of bucket i1 (the first extension bit differs), with the same low
    // half, which the fingerprint comes from.
    let buckets = g.buckets() as u128;
    let frac = (h1 as u128 * buckets) as u64;
    let other_half = if frac >> 63 == 0 { 3 << 62 } else { 1 << 62 };
    let h2 = ((((p1.i1 as u128) << 64 | other_half) / buckets) as u64 & !0xffff_ffff) | (h1 & 0xffff_ffff);
    let p2 = g.probe(h2);
    assert_eq!((p2.i1, p2.i2, p2.v1), (p1.i1, p1.i2, p1.v1));
    assert_ne!(split(p1), split(p2), "the two keys must part at the next doubling");
    f.insert_hash(h1, false).unwrap();
    f.insert_hash(h2, false).unwrap();
    assert!(f.remove_hashed(h2));
    f.grow(0).unwrap();
    assert_eq!(f.stats().doublings, 1);
    assert!(f.contains_hashed(h1), "the first key was lost");
}

#[test]
fn a_full_table_searches_briefly_until_a_key_leaves() {
    let crowded = |f: &CuckooFilter| {
        f.current.read(|table| with_table!(table, t => t.crowded.load(crate::primitive::Ordering::Relaxed)))
    };
    for layout in LAYOUTS {
        let f = layout_filter(layout, 2_000, 0.001);
        let mut key = 0u64;
        while f.insert(&key).is_ok() {
            key += 1;
        }
        assert!(crowded(&f), "{layout:?}: a full search failed");
        let refused = (key..key + 100).filter(|k| f.insert(k).is_err()).count();
        assert!(refused > 50, "{layout:?}: {refused} of 100 refused at the threshold");
        assert!(f.remove(&0u64));
        assert!(!crowded(&f), "{layout:?}: a removal makes room");
        assert!(f.insert(&0u64).is_ok(), "{layout:?}: the room is found");
        assert!((0..key).all(|k| f.contains(&k)), "{layout:?}: nothing lost");
    }
}

/// Relocations are counted by the fingerprint classes' move stamps: a fill to a doubling
/// counts some, a doubling and a snapshot carry them over, and `clear` (which marks every
/// stamp while it zeroes the table) adds none.
#[test]
fn relocations_are_counted_across_doubling_clear_and_snapshot() {
    let f = CuckooFilter::builder().capacity(1_000).max_capacity(4_000).seed(3).build().unwrap();
    let mut key = 0u64;
    while f.stats().doublings == 0 {
        f.insert(&key).unwrap();
        key += 1;
    }
    let moved = f.stats().relocations;
    assert!(moved > 0, "a fill to a doubling relocates");
    f.clear();
    assert_eq!((f.stats().relocations, f.len()), (moved, 0));
    let mut bytes = Vec::new();
    f.snapshot(&mut bytes).unwrap();
    assert_eq!(CuckooFilter::restore(&mut bytes.as_slice()).unwrap().stats().relocations, moved);
}
