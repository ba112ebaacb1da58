//! Restore allocates in proportion to the bytes it is given: a counting allocator measures
//! the peak of each restore, crafted headers and random edits included. (A gate's restore
//! is two filters' and a header of counters.) Alone in its binary, so that no other test's
//! allocations are counted.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};

use cuckoo_gate::{AdmissionCache, AdmissionPolicy, CuckooFilter};
use proptest::prelude::*;

struct Counting;

static LIVE: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

// SAFETY: every call goes to the system allocator unchanged; the counters only observe.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let live = LIVE.fetch_add(layout.size(), Ordering::Relaxed) + layout.size();
        PEAK.fetch_max(live, Ordering::Relaxed);
        // SAFETY: the caller's contract, passed on.
        unsafe { System.alloc(layout) }
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        let live = LIVE.fetch_add(layout.size(), Ordering::Relaxed) + layout.size();
        PEAK.fetch_max(live, Ordering::Relaxed);
        // SAFETY: the caller's contract, passed on.
        unsafe { System.alloc_zeroed(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
        // SAFETY: the caller's contract, passed on.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

/// One measurement at a time (the test harness runs tests on several threads).
static MEASURING: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// The most a restore allocated at once, beyond what was live before, and whether it
/// succeeded.
fn peak_of(restore: impl FnOnce() -> bool) -> (usize, bool) {
    let _alone = MEASURING.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    let before = LIVE.load(Ordering::Relaxed);
    PEAK.store(before, Ordering::Relaxed);
    let ok = restore();
    (PEAK.load(Ordering::Relaxed) - before, ok)
}

/// What a restore of `n` bytes may allocate: the table its words describe (and its
/// extension bits, as many again), stripes for it, and a constant.
fn bound(n: usize) -> usize {
    16 * n + (1 << 20)
}

fn reseal(bytes: &mut [u8]) {
    let body = bytes.len() - 4;
    let crc = crc32fast::hash(&bytes[..body]);
    bytes[body..].copy_from_slice(&crc.to_le_bytes());
}

/// Offsets of a filter snapshot's two stripe counts (configured, and the table's).
const STRIPES: [usize; 2] = [52, 60];

fn filter_snapshot() -> Vec<u8> {
    let filter =
        CuckooFilter::builder().capacity(1).max_capacity(1 << 28).false_positive_rate(0.6).build().unwrap();
    let mut bytes = Vec::new();
    filter.snapshot(&mut bytes).unwrap();
    bytes
}

#[test]
fn a_crafted_stripe_count_allocates_nothing_big() {
    let mut bytes = filter_snapshot();
    for at in STRIPES {
        bytes[at..at + 8].copy_from_slice(&(1u64 << 25).to_le_bytes());
    }
    reseal(&mut bytes);
    let (peak, ok) = peak_of(|| CuckooFilter::restore(&mut bytes.as_slice()).is_ok());
    assert!(peak < 64 << 20, "{} bytes in, {peak} allocated (restored: {ok})", bytes.len());
    assert!(peak <= bound(bytes.len()), "{} bytes in, {peak} allocated", bytes.len());
}

proptest! {
    /// Any 8-byte header field set to anything, on snapshots of a small filter that may
    /// grow a long way: restore's peak stays within the bound for the bytes given.
    #[test]
    fn any_header_field_allocates_in_proportion(field in 0usize..12, value in any::<u64>(), shift in 0u32..64) {
        // Seed, hash check, ε, the four one-byte fields, B0, the stripe counts, the
        // counters and the word count (see the format table in the `snapshot` module).
        const FIELDS: [usize; 12] = [16, 24, 32, 40, 44, 52, 60, 68, 76, 84, 92, 100];
        let mut bytes = filter_snapshot();
        let at = FIELDS[field];
        bytes[at..at + 8].copy_from_slice(&(value >> shift).to_le_bytes());
        reseal(&mut bytes);
        let (peak, _) = peak_of(|| CuckooFilter::restore(&mut bytes.as_slice()).is_ok());
        prop_assert!(peak <= bound(bytes.len()), "field at {}: {} bytes in, {} allocated", at, bytes.len(), peak);
    }
}

/// A cache snapshot (an exact LRU of one shard, so without gate or ghosts) holding the
/// entries of `block`, `count` of them, with `len` as the block's length.
#[cfg(feature = "serde")]
fn cache_snapshot(count: u64, len: u64, block: &[u8]) -> Vec<u8> {
    let mut bytes = b"CKOOGATE".to_vec();
    bytes.extend_from_slice(&3u16.to_le_bytes()); // version
    bytes.extend_from_slice(&3u16.to_le_bytes()); // a cache
    bytes.push(0); // Always
    for field in [16u64, 1, 0, 0, 0] {
        // capacity, shards, hash check, wall clock, small-queue target
        bytes.extend_from_slice(&field.to_le_bytes());
    }
    bytes.push(0); // no split windows
    bytes.push(0); // no gate
    bytes.push(0); // no ghosts
    bytes.extend_from_slice(&count.to_le_bytes());
    bytes.extend_from_slice(&len.to_le_bytes());
    bytes.extend_from_slice(block);
    bytes.extend_from_slice(&count.to_le_bytes());
    bytes.extend_from_slice(&[0; 4]);
    reseal(&mut bytes);
    bytes
}

#[cfg(feature = "serde")]
#[test]
fn a_crafted_cache_snapshot_allocates_in_proportion_to_its_length() {
    let cache: AdmissionCache<String, u64> = AdmissionCache::builder().capacity(16).build().unwrap();
    // One entry, "k1" -> 7: the key's length and bytes, the value, the flags.
    let entry = [2, b'k', b'1', 7, 0];
    assert_eq!(cache.restore(&mut cache_snapshot(1, 5, &entry).as_slice()).unwrap().entries, 1);
    // A key of 2^40 bytes (its length a postcard varint), the rest of the block short.
    let mut huge_key = vec![0x80, 0x80, 0x80, 0x80, 0x80, 0x20];
    huge_key.extend_from_slice(b"k1");
    let crafted = [
        ("2^40 entries", cache_snapshot(1 << 40, 5, &entry)),
        ("a block of 2^40 bytes", cache_snapshot(1, 1 << 40, &entry)),
        ("a key of 2^40 bytes", cache_snapshot(1, huge_key.len() as u64, &huge_key)),
        ("2^40 entries in a block of 2^40 bytes", cache_snapshot(1 << 40, 1 << 40, &entry)),
    ];
    for (what, bytes) in crafted {
        let (peak, ok) = peak_of(|| cache.restore(&mut bytes.as_slice()).is_ok());
        assert!(!ok, "{what}: restored");
        assert!(peak <= bound(bytes.len()), "{what}: {} bytes in, {peak} allocated", bytes.len());
        assert!(cache.is_empty(), "{what}: an error left entries behind");
    }
    // S3-FIFO's split windows claiming 2^40 buckets, and ghosts claiming 2^40 words.
    let mut split = b"CKOOGATE".to_vec();
    split.extend_from_slice(&3u16.to_le_bytes());
    split.extend_from_slice(&3u16.to_le_bytes());
    split.push(2); // S3Fifo
    for field in [16u64, 1, 0, 0, 1] {
        split.extend_from_slice(&field.to_le_bytes());
    }
    let mut ghosts = split.clone();
    split.push(1); // split windows: rate, capacity, buckets, generation, recorded, rotations, kicks
    for field in [1u64, 8, 1 << 40, 0, 0, 0, 0] {
        split.extend_from_slice(&field.to_le_bytes());
    }
    split.extend_from_slice(&[0; 64]);
    ghosts.extend_from_slice(&[0, 0, 1]); // no split windows, no gate, ghosts:
    ghosts.extend_from_slice(&8u64.to_le_bytes()); // capacity
    ghosts.extend_from_slice(&(1u64 << 39).to_le_bytes()); // table size
    ghosts.push(0); // generation
    for field in [0u64, 0, 0, 1 << 40] {
        // recordings in both generations, rotations, words
        ghosts.extend_from_slice(&field.to_le_bytes());
    }
    ghosts.extend_from_slice(&[0; 64]);
    let s3fifo: cuckoo_gate::AdmissionCache<String, u64> =
        AdmissionCache::builder().capacity(16).build().unwrap();
    for (what, bytes) in [("split windows of 2^40 buckets", split), ("ghosts of 2^40 words", ghosts)] {
        let (peak, ok) = peak_of(|| s3fifo.restore(&mut bytes.as_slice()).is_ok());
        assert!(!ok, "{what}: restored");
        assert!(peak <= bound(bytes.len()), "{what}: {} bytes in, {peak} allocated", bytes.len());
    }
}

#[test]
fn a_weighed_cache_of_any_capacity_allocates_for_its_assumed_entries_only() {
    // A capacity in bytes says nothing of the entries: without estimated_entries the cache
    // sizes its ghosts for at most MAX_ASSUMED_ENTRIES, not for u64::MAX / 4096.
    for policy in [AdmissionPolicy::S3Fifo, AdmissionPolicy::Always] {
        let (peak, ok) = peak_of(|| {
            AdmissionCache::<u64, Vec<u8>>::builder()
                .capacity(u64::MAX)
                .admission(policy)
                .weigher(|_, value| value.len() as u32)
                .build()
                .is_ok()
        });
        assert!(ok, "{policy:?}: builds");
        assert!(peak < 16 << 20, "{policy:?}: {peak} bytes for a cache of u64::MAX bytes");
    }
}
