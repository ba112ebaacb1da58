//! Snapshot and restore: round trips (property test, grown filters, the gate), every
//! single-byte corruption and every truncation of small snapshots, each error variant, and
//! a snapshot taken while other threads write.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use cuckoo_gate::{CuckooFilter, Layout, SeenBefore, SnapshotError};
use proptest::prelude::*;

fn snapshot(filter: &CuckooFilter) -> Vec<u8> {
    let mut bytes = Vec::new();
    filter.snapshot(&mut bytes).unwrap();
    bytes
}

fn gate_snapshot(gate: &SeenBefore) -> Vec<u8> {
    let mut bytes = Vec::new();
    gate.snapshot(&mut bytes).unwrap();
    bytes
}

/// A filter that has doubled twice: capacity 8, grown past 24 items.
fn grown_filter() -> CuckooFilter {
    let filter = CuckooFilter::builder().capacity(8).max_capacity(64).seed(3).build().unwrap();
    for key in 0..28u64 {
        filter.insert(&key).unwrap();
    }
    assert!(filter.stats().doublings >= 2, "{:?}", filter.stats());
    filter
}

/// Replaces the trailing CRC so that a deliberately edited snapshot passes the checksum
/// and reaches the field checks.
fn reseal(bytes: &mut [u8]) {
    let body = bytes.len() - 4;
    let crc = crc32fast::hash(&bytes[..body]);
    bytes[body..].copy_from_slice(&crc.to_le_bytes());
}

// Offsets of filter snapshot fields (see the format table in the `snapshot` module).
const HASH_CHECK: usize = 24;
const FINGERPRINT_BITS: usize = 40;
const LAYOUT: usize = 43;
const ITEMS: usize = 68;
const WORD_COUNT: usize = 100;
const WORDS: usize = 108;

#[derive(Clone, Debug)]
enum Op {
    Insert(u16),
    Remove(u16),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![3 => any::<u16>().prop_map(Op::Insert), 1 => any::<u16>().prop_map(Op::Remove)]
}

proptest! {
    /// The restored filter answers as the original for every present key and for a sample
    /// of absent ones, has the same length and shape, snapshots to the same bytes, and
    /// keeps working (grows, removes) afterwards.
    #[test]
    fn round_trip_answers_identically(
        ops in prop::collection::vec(op(), 0..600),
        seed in any::<u64>(),
        growth in 0u32..4,
        eps in prop::sample::select(vec![0.1, 0.01, 0.001, 1e-6]),
        windows in any::<bool>(),
    ) {
        // Windowed filters are fixed-size.
        let (layout, growth) = if windows { (Layout::Windows, 0) } else { (Layout::Buckets, growth) };
        let filter = CuckooFilter::builder()
            .capacity(32)
            .max_capacity(32 << growth)
            .false_positive_rate(eps)
            .layout(layout)
            .seed(seed)
            .build()
            .unwrap();
        let mut model: HashMap<u16, usize> = HashMap::new();
        for op in ops {
            match op {
                Op::Insert(k) => {
                    if filter.insert(&k).is_ok() {
                        *model.entry(k).or_default() += 1;
                    }
                }
                Op::Remove(k) => {
                    if model.get(&k).copied().unwrap_or(0) > 0 {
                        prop_assert!(filter.remove(&k));
                        *model.get_mut(&k).unwrap() -= 1;
                    }
                }
            }
        }
        let bytes = snapshot(&filter);
        let restored = CuckooFilter::restore(&mut bytes.as_slice()).unwrap();
        prop_assert_eq!(restored.len(), filter.len());
        prop_assert_eq!(restored.stats(), filter.stats());
        for (k, &n) in &model {
            if n > 0 {
                prop_assert!(restored.contains(k), "lost {}", k);
            }
            prop_assert_eq!(restored.count(k), filter.count(k));
        }
        for absent in 1_000_000u64..1_002_000 {
            prop_assert_eq!(restored.contains(&absent), filter.contains(&absent));
        }
        prop_assert_eq!(snapshot(&restored), bytes);

        // It stays a working filter: growth and removal from where it left off.
        for (k, &n) in &model {
            for _ in 0..n {
                prop_assert!(restored.remove(k));
            }
        }
        prop_assert!(restored.is_empty());
        let limit = restored.capacity() as u64 * 2;
        let stored = (0..limit).take_while(|k| restored.insert(k).is_ok()).count() as u64;
        prop_assert!((0..stored).all(|k| restored.contains(&k)));
    }
}

#[test]
fn a_grown_filter_round_trips_and_keeps_growing() {
    let filter = grown_filter();
    let restored = CuckooFilter::restore(&mut snapshot(&filter).as_slice()).unwrap();
    assert_eq!(restored.stats(), filter.stats());
    assert!((0..28u64).all(|k| restored.contains(&k)));
    // Up to its cap (8 -> 64 items), and then the cap's error with nothing lost.
    let stored = (28..200u64).take_while(|k| restored.insert(k).is_ok()).last().unwrap();
    assert!(stored >= 60, "stored up to {stored}");
    assert_eq!(restored.stats().doublings, 3);
    assert!((0..=stored).all(|k| restored.contains(&k)));
}

type Restore = dyn Fn(&[u8]) -> Result<(), SnapshotError>;

#[test]
fn every_flipped_byte_and_every_truncation_is_rejected() {
    let fixed = CuckooFilter::builder().capacity(10).max_capacity(10).seed(5).build().unwrap();
    (0..8u64).for_each(|k| fixed.insert(&k).unwrap());
    let gate = SeenBefore::builder().capacity(4).seed(9).build().unwrap();
    (0..6u64).for_each(|k| gate.record(&k));

    let restore_filter = |bytes: &[u8]| CuckooFilter::restore(&mut &bytes[..]).map(drop);
    let restore_gate = |bytes: &[u8]| SeenBefore::restore(&mut &bytes[..]).map(drop);
    let cases: [(&str, Vec<u8>, &Restore); 3] = [
        ("fixed filter", snapshot(&fixed), &restore_filter),
        ("grown filter", snapshot(&grown_filter()), &restore_filter),
        ("gate", gate_snapshot(&gate), &restore_gate),
    ];
    for (name, bytes, restore) in cases {
        assert!(restore(&bytes).is_ok(), "{name}: the intact snapshot");
        for at in 0..bytes.len() {
            for flip in (0..8).map(|bit| 1u8 << bit).chain([0xFF]) {
                let mut corrupt = bytes.clone();
                corrupt[at] ^= flip;
                assert!(restore(&corrupt).is_err(), "{name}: byte {at} ^ {flip:#04x} was accepted");
            }
        }
        for len in 0..bytes.len() {
            let err = restore(&bytes[..len]).unwrap_err();
            assert!(matches!(err, SnapshotError::Truncated), "{name}: cut at {len} gave {err}");
        }
    }
}

#[test]
fn each_kind_of_bad_input_gets_its_own_error() {
    let filter = grown_filter();
    let bytes = snapshot(&filter);
    let restore = |bytes: &[u8]| CuckooFilter::restore(&mut &bytes[..]).unwrap_err();

    assert!(matches!(restore(b"GIF89a......................"), SnapshotError::BadMagic));
    let mut future = bytes.clone();
    future[8] = 7;
    assert!(matches!(restore(&future), SnapshotError::UnsupportedVersion { found: 7, supported: 6 }));
    let gate = gate_snapshot(&SeenBefore::builder().capacity(4).build().unwrap());
    assert!(matches!(restore(&gate), SnapshotError::WrongKind { found: "SeenBefore", .. }));
    assert!(matches!(
        SeenBefore::restore(&mut bytes.as_slice()).unwrap_err(),
        SnapshotError::WrongKind { found: "CuckooFilter", expected: "SeenBefore" }
    ));
    let mut flipped = bytes.clone();
    flipped[WORDS] ^= 0x10;
    assert!(matches!(restore(&flipped), SnapshotError::ChecksumMismatch { .. }));

    // Edits that keep a valid checksum reach the field checks.
    let mut other_hasher = bytes.clone();
    other_hasher[HASH_CHECK] ^= 1;
    reseal(&mut other_hasher);
    assert!(matches!(restore(&other_hasher), SnapshotError::HasherMismatch));
    let mut wrong_count = bytes.clone();
    wrong_count[ITEMS] ^= 1;
    reseal(&mut wrong_count);
    assert!(matches!(restore(&wrong_count), SnapshotError::Inconsistent { .. }));
    let mut wrong_width = bytes.clone();
    wrong_width[FINGERPRINT_BITS] += 1;
    reseal(&mut wrong_width);
    assert!(matches!(restore(&wrong_width), SnapshotError::Inconsistent { .. }));
    // A slot holding a choice bit and nothing else: a zero fingerprint.
    let mut empty_fingerprint = bytes.clone();
    let [f, e, l] = [0, 1, 2].map(|i| u32::from(bytes[FINGERPRINT_BITS + i]));
    let slot_mask = (1u64 << (f + e - l + 1)) - 1;
    let first_word = u64::from_le_bytes(bytes[WORDS..WORDS + 8].try_into().unwrap());
    empty_fingerprint[WORDS..WORDS + 8].copy_from_slice(&((first_word & !slot_mask) | 1).to_le_bytes());
    reseal(&mut empty_fingerprint);
    assert!(matches!(restore(&empty_fingerprint), SnapshotError::Inconsistent { .. }));

    let failing = std::io::Error::other("disk on fire");
    let mut reader = std::io::Read::chain(&bytes[..20], FailingReader(Some(failing)));
    assert!(matches!(CuckooFilter::restore(&mut reader), Err(SnapshotError::Io(_))));
}

/// Version 2 snapshots (before windowed filters: the layout byte was reserved, 0) still
/// restore, and a version 2 snapshot cannot claim the windowed layout.
#[test]
fn version_2_snapshots_restore() {
    let filter = grown_filter();
    let mut bytes = snapshot(&filter);
    assert_eq!((bytes[8], bytes[LAYOUT]), (6, 0));
    bytes[8] = 2;
    reseal(&mut bytes);
    let restored = CuckooFilter::restore(&mut bytes.as_slice()).unwrap();
    assert_eq!(restored.stats(), filter.stats());
    assert!((0..28u64).all(|k| restored.contains(&k)));
    bytes[LAYOUT] = 1;
    reseal(&mut bytes);
    assert!(matches!(CuckooFilter::restore(&mut bytes.as_slice()), Err(SnapshotError::Inconsistent { .. })));
}

/// A windowed snapshot records its layout, and restoring refuses an unknown layout, a
/// window count that is not whole groups, and an entry whose offset names a window that
/// does not exist (the last slot of a group starts none).
#[test]
fn windowed_snapshots_are_checked() {
    let filter = CuckooFilter::builder()
        .capacity(100)
        .false_positive_rate(0.01)
        .layout(Layout::Windows)
        .seed(5)
        .build()
        .unwrap();
    (0..90u64).try_for_each(|k| filter.insert(&k)).unwrap();
    let bytes = snapshot(&filter);
    assert_eq!(bytes[LAYOUT], 1);
    let restored = CuckooFilter::restore(&mut bytes.as_slice()).unwrap();
    assert_eq!((restored.layout(), restored.stats()), (Layout::Windows, filter.stats()));
    assert!((0..90u64).all(|k| restored.contains(&k)));
    let restore = |bytes: &[u8]| CuckooFilter::restore(&mut &bytes[..]).unwrap_err();

    let mut unknown = bytes.clone();
    unknown[LAYOUT] = 2;
    reseal(&mut unknown);
    assert!(matches!(restore(&unknown), SnapshotError::Inconsistent { detail: "unknown layout" }));
    let mut partial_group = bytes.clone();
    partial_group[FINGERPRINT_BITS + 4] += 1; // 129 window numbers: not whole groups of 64
    reseal(&mut partial_group);
    assert!(matches!(restore(&partial_group), SnapshotError::Inconsistent { .. }));

    // Slot 63 (the last of the first group) with offset 0 would start a window there.
    let slot_bits = filter.stats().slot_bits as usize;
    let (bit, fingerprint) = (63 * slot_bits, 5u64 << 2);
    let mut stray = bytes.clone();
    let mut words: Vec<u64> =
        stray[WORDS..stray.len() - 4].chunks(8).map(|c| u64::from_le_bytes(c.try_into().unwrap())).collect();
    let mask = (1u128 << slot_bits) - 1;
    let pair = (words[bit / 64] as u128 | (words[bit / 64 + 1] as u128) << 64) & !(mask << (bit % 64));
    let pair = pair | (fingerprint as u128) << (bit % 64);
    (words[bit / 64], words[bit / 64 + 1]) = (pair as u64, (pair >> 64) as u64);
    for (chunk, word) in stray[WORDS..].chunks_mut(8).zip(&words) {
        chunk.copy_from_slice(&word.to_le_bytes());
    }
    reseal(&mut stray);
    assert!(matches!(
        restore(&stray),
        SnapshotError::Inconsistent { detail: "an entry that cannot sit in its bucket" }
    ));
}

/// Bits in the padding after the last bucket are refused, also where the buckets end on a
/// word boundary (16-bit slots make 64-bit buckets). Found by the fuzzer: such a snapshot
/// was accepted, and its padding bits did not survive the next snapshot.
#[test]
fn bits_in_the_padding_are_rejected() {
    let filter =
        CuckooFilter::builder().capacity(8).max_capacity(8).false_positive_rate(2e-4).build().unwrap();
    assert_eq!(filter.stats().slot_bits, 16);
    filter.insert(&1u64).unwrap();
    let bytes = snapshot(&filter);
    let words = u64::from_le_bytes(bytes[WORD_COUNT..WORD_COUNT + 8].try_into().unwrap()) as usize;
    for padding in [words - 2, words - 1] {
        let mut padded = bytes.clone();
        padded[WORDS + 8 * padding] |= 1;
        reseal(&mut padded);
        let restored = CuckooFilter::restore(&mut padded.as_slice());
        assert!(matches!(restored, Err(SnapshotError::Inconsistent { .. })), "padding word {padding}");
    }
}

struct FailingReader(Option<std::io::Error>);

impl std::io::Read for FailingReader {
    fn read(&mut self, _: &mut [u8]) -> std::io::Result<usize> {
        Err(self.0.take().unwrap_or_else(|| std::io::Error::other("again")))
    }
}

/// A header claiming a table of 2^40 buckets, followed by nothing: restoring reads until
/// the stream ends and fails, without allocating what the header claims.
#[test]
fn a_huge_length_field_allocates_nothing_big() {
    let bytes = snapshot(&CuckooFilter::builder().capacity(8).max_capacity(8).seed(1).build().unwrap());
    let mut header = bytes[..WORDS].to_vec();
    let buckets: u64 = 1 << 40;
    header[44..52].copy_from_slice(&buckets.to_le_bytes()); // B0
    let slot_bits = 12 + 1; // ε = 0.1%, fixed-size
    let words = (buckets * 4 * slot_bits).div_ceil(64) + 2;
    header[WORD_COUNT..WORDS].copy_from_slice(&words.to_le_bytes());
    header.extend_from_slice(&[0; 4096]);
    assert!(matches!(CuckooFilter::restore(&mut header.as_slice()), Err(SnapshotError::Truncated)));
}

#[test]
fn snapshots_follow_each_other_in_one_stream() {
    let (a, b) = (grown_filter(), CuckooFilter::with_capacity(100));
    b.insert("b").unwrap();
    let mut stream = snapshot(&a);
    stream.extend(snapshot(&b));
    let mut reader = stream.as_slice();
    assert_eq!(CuckooFilter::restore(&mut reader).unwrap().len(), a.len());
    assert!(CuckooFilter::restore(&mut reader).unwrap().contains("b"));
    assert!(reader.is_empty());
}

/// A snapshot may carry any rotation count, the largest included: the next rotation wraps
/// it rather than overflow (found by the fuzzer, which builds with overflow checks).
#[test]
fn a_gate_restored_at_the_last_rotation_count_keeps_rotating() {
    let gate = SeenBefore::builder().capacity(4).seed(4).build().unwrap();
    let mut bytes = gate_snapshot(&gate);
    // The gate's fields follow the header: capacity, recordings, rotations (u64 each).
    let capacity = (0..32).find(|&i| bytes[i..i + 8] == 4u64.to_le_bytes()).unwrap();
    let rotations = capacity + 16;
    assert_eq!(bytes[rotations..rotations + 8], 0u64.to_le_bytes());
    bytes[rotations..rotations + 8].copy_from_slice(&u64::MAX.to_le_bytes());
    reseal(&mut bytes);
    let restored = SeenBefore::restore(&mut bytes.as_slice()).unwrap();
    assert_eq!(restored.stats().rotations, u64::MAX);
    (0..4u64).for_each(|k| restored.record(&k));
    assert_eq!(restored.stats().rotations, 0, "the count wrapped");
    assert!(restored.contains(&3), "the gate still remembers");
}

#[test]
fn the_gate_round_trips_with_its_aging_state() {
    let gate = SeenBefore::builder().capacity(100).seed(4).build().unwrap();
    for k in 0..250u64 {
        gate.record(&k);
    }
    let restored = SeenBefore::restore(&mut gate_snapshot(&gate).as_slice()).unwrap();
    assert_eq!(restored.stats(), gate.stats());
    for k in 0..300u64 {
        assert_eq!(restored.contains(&k), gate.contains(&k), "key {k}");
    }
    // The remembered window (the last 100..200 recordings) survived the restart...
    assert!((150..250u64).all(|k| restored.check_and_record(&k)));
    // ...and aging goes on from where it was: 50 more new keys finish the generation.
    let rotations = restored.stats().rotations;
    (1_000..1_050u64).for_each(|k| restored.record(&k));
    assert_eq!(restored.stats().rotations, rotations + 1);
}

/// Writers insert and remove throughout (doubling the filter twice); every key inserted
/// before a snapshot began and never removed is in the restored filter, and its insert
/// count is one the filter had while the snapshot ran. Readers keep finding their keys.
#[test]
fn a_snapshot_under_concurrent_writes_loses_nothing() {
    let filter = CuckooFilter::builder().capacity(40_000).max_capacity(160_000).seed(8).build().unwrap();
    let permanent = 0..20_000u64;
    permanent.clone().for_each(|k| filter.insert(&k).unwrap());
    let stop = AtomicBool::new(false);
    let (reads, writers_done) = (AtomicU64::new(0), AtomicU64::new(0));
    let snapshots = std::thread::scope(|s| {
        for w in 0..2u64 {
            let (filter, done) = (&filter, &writers_done);
            s.spawn(move || {
                let first = 1_000_000 * (w + 1);
                for k in first..first + 60_000 {
                    filter.insert(&k).unwrap();
                    if k % 3 == 0 {
                        assert!(filter.remove(&k));
                    }
                }
                done.fetch_add(1, Ordering::Relaxed);
            });
        }
        let (filter, stop, reads, permanent) = (&filter, &stop, &reads, permanent.clone());
        s.spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                for k in permanent.clone().step_by(97) {
                    assert!(filter.contains(&k), "reader missed {k}");
                }
                reads.fetch_add(1, Ordering::Relaxed);
            }
        });
        let mut snapshots = Vec::new();
        while writers_done.load(Ordering::Relaxed) < 2 || snapshots.len() < 10 {
            let before = filter.stats().inserts;
            let bytes = snapshot(filter);
            snapshots.push((before as usize, bytes, filter.stats().inserts as usize));
        }
        stop.store(true, Ordering::Relaxed);
        snapshots
    });
    assert_eq!(filter.stats().doublings, 2);
    for (inserts_before, bytes, inserts_after) in snapshots {
        let restored = CuckooFilter::restore(&mut bytes.as_slice()).unwrap();
        assert!(permanent.clone().all(|k| restored.contains(&k)));
        let inserts = restored.stats().inserts as usize;
        assert!(
            (inserts_before..=inserts_after).contains(&inserts),
            "{inserts_before} <= {inserts} <= {inserts_after}"
        );
    }
}

/// Whatever stripe count the builder accepts, `restore` accepts too.
#[test]
fn every_stripe_count_the_builder_accepts_restores() {
    for (capacity, max) in [(10, 10), (10, 160), (100_000, 100_000), (1_000, 16_000)] {
        for shift in 0..=20 {
            let built =
                CuckooFilter::builder().capacity(capacity).max_capacity(max).stripes(1 << shift).build();
            if let Ok(filter) = built {
                filter.insert(&1u64).unwrap();
                let restored = CuckooFilter::restore(&mut snapshot(&filter).as_slice());
                assert!(restored.is_ok(), "{capacity}..{max} with {} stripes: {restored:?}", 1 << shift);
            }
        }
    }
}

/// A filter restored after growing to its `max_capacity` reports that limit when full,
/// as the original does.
#[test]
fn a_restored_fully_grown_filter_reports_its_limit() {
    let filter = CuckooFilter::builder().capacity(8).max_capacity(32).seed(5).build().unwrap();
    let full = |f: &CuckooFilter| (0u64..).map(|k| f.insert(&k)).find_map(Result::err).unwrap();
    let original = full(&filter);
    assert!(matches!(original, cuckoo_gate::InsertError::MaxCapacityReached { .. }), "{original:?}");
    let restored = CuckooFilter::restore(&mut snapshot(&filter).as_slice()).unwrap();
    assert_eq!(full(&restored), original);
}
