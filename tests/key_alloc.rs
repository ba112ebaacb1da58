//! A `String`-keyed cache asked with the `&str` a request handler holds: no allocation on
//! a hit, through `get` and through the loaders, and one allocation of the key per miss.
//! A counting allocator sees every allocation; alone in its binary, with one test, so that
//! nothing else allocates while it counts.

use std::alloc::{GlobalAlloc, Layout, System};
use std::future::Future;
use std::pin::pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};

use cuckoo_gate::{AdmissionCache, AdmissionPolicy};

struct Counting;

/// Allocations made, and those of exactly [`KEY_LEN`] bytes (a key's).
static ALLOCATIONS: AtomicUsize = AtomicUsize::new(0);
static KEY_ALLOCATIONS: AtomicUsize = AtomicUsize::new(0);

/// Keys' length: no other allocation of the cache's is this size.
const KEY_LEN: usize = 41;

// SAFETY: every call goes to the system allocator unchanged; the counters only observe.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        count(layout);
        // SAFETY: the caller's contract, passed on.
        unsafe { System.alloc(layout) }
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        count(layout);
        // SAFETY: the caller's contract, passed on.
        unsafe { System.alloc_zeroed(layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        count(Layout::from_size_align(new_size, layout.align()).unwrap());
        // SAFETY: the caller's contract, passed on.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: the caller's contract, passed on.
        unsafe { System.dealloc(ptr, layout) }
    }
}

fn count(layout: Layout) {
    ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
    if layout.size() == KEY_LEN {
        KEY_ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

/// (allocations, key allocations) that `work` made.
fn allocations(work: impl FnOnce()) -> (usize, usize) {
    let before = (ALLOCATIONS.load(Ordering::Relaxed), KEY_ALLOCATIONS.load(Ordering::Relaxed));
    work();
    (ALLOCATIONS.load(Ordering::Relaxed) - before.0, KEY_ALLOCATIONS.load(Ordering::Relaxed) - before.1)
}

/// A waker that does nothing (`Waker::noop` is newer than the crate's minimum Rust).
struct Noop;

impl Wake for Noop {
    fn wake(self: Arc<Self>) {}
}

/// Polls `future` once, with a waker that does nothing (a hit completes at the first poll).
fn poll_once<T>(future: impl Future<Output = T>, waker: &Waker) -> Option<T> {
    let mut cx = Context::from_waker(waker);
    match pin!(future).poll(&mut cx) {
        Poll::Ready(value) => Some(value),
        Poll::Pending => None,
    }
}

#[test]
fn hits_allocate_nothing_and_a_miss_allocates_its_key_once() {
    const KEYS: usize = 1_000;
    let waker = Waker::from(Arc::new(Noop));
    let paths: Vec<String> = (0..KEYS).map(|i| format!("/objects/{i:0>32}")).collect();
    assert!(paths.iter().all(|path| path.len() == KEY_LEN));
    for policy in [AdmissionPolicy::S3Fifo, AdmissionPolicy::SecondHit, AdmissionPolicy::Always] {
        let cache: AdmissionCache<String, u64> =
            AdmissionCache::builder().capacity(4 * KEYS as u64).admission(policy).seed(7).build().unwrap();
        // Misses through the loader: each makes its key once (a second sighting, under
        // SecondHit, so that every load is stored; the seed is fixed, so that no two of the
        // keys share a fingerprint in the gate, where admitting one would forget the other).
        if policy == AdmissionPolicy::SecondHit {
            paths.iter().for_each(|path| _ = cache.gate().unwrap().check_and_record(path));
        }
        let (_, keys) = allocations(|| {
            for (i, path) in paths.iter().enumerate() {
                assert_eq!(cache.get_or_insert_with(path.as_str(), || i as u64), i as u64);
            }
        });
        assert_eq!(keys, KEYS, "{policy:?}: key allocations for {KEYS} misses");
        assert_eq!(cache.len(), KEYS, "{policy:?}");
        let hits = || {
            for (i, path) in paths.iter().enumerate() {
                let path: &str = path;
                assert_eq!(cache.get(path), Some(i as u64));
                assert_eq!(cache.get_or_insert_with(path, || unreachable!("a hit")), i as u64);
                let fallible = cache.try_get_or_insert_with(path, || Err::<u64, ()>(()));
                assert_eq!(fallible, Ok(i as u64));
                let loaded =
                    poll_once(cache.get_or_insert_async(path, async { unreachable!("a hit") }), &waker);
                assert_eq!(loaded, Some(i as u64));
                let loaded =
                    poll_once(cache.try_get_or_insert_async(path, async { Err::<u64, ()>(()) }), &waker);
                assert_eq!(loaded, Some(Ok(i as u64)));
            }
        };
        // Under LRU a hit requeues its entry: the queue's ring grows to its working size
        // in the first rounds, and sweeps its stale places from then on.
        (0..3).for_each(|_| hits());
        let (all, _) = allocations(hits);
        assert_eq!(all, 0, "{policy:?}: allocations for {} hits", 5 * KEYS);
        // A miss through the async loader makes its key once too.
        let fresh = paths[0].replace("/objects/", "/elsewhere")[1..].to_owned();
        assert_eq!(fresh.len(), KEY_LEN);
        let (_, keys) = allocations(|| {
            assert_eq!(poll_once(cache.get_or_insert_async(fresh.as_str(), async { 7 }), &waker), Some(7));
        });
        assert_eq!(keys, 1, "{policy:?}: key allocations for an async miss");
    }
}
