//! Restore allocates in proportion to the bytes it is given: a counting allocator measures
//! the peak of each restore, crafted headers and random edits included. (A gate's restore
//! is two filters' and a header of counters.) Alone in its binary, so that no other test's
//! allocations are counted.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};

use cuckoo_gate::CuckooFilter;
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
