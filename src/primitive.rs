//! The loom shim: the only module that names `std::sync::atomic`, `parking_lot` or `loom`.
//!
//! Everything else in the crate imports its atomics, fences, locks and spin hints from
//! here, so building with `RUSTFLAGS="--cfg cuckoo_gate_loom"` swaps every primitive for
//! loom's model-checked version at once. A crate-specific cfg is used instead of plain
//! `cfg(loom)` so that dependencies which also react to `cfg(loom)` are not switched.

#[cfg(not(cuckoo_gate_loom))]
mod imp {
    pub(crate) use std::sync::atomic::{fence, AtomicPtr, AtomicU64, AtomicU8, AtomicUsize, Ordering};

    /// The cell a lock hands out: `std`'s `UnsafeCell` (loom's, which checks every
    /// access, under loom).
    #[derive(Debug, Default)]
    pub(crate) struct LockCell<T>(std::cell::UnsafeCell<T>);

    impl<T> LockCell<T> {
        pub(crate) fn new(value: T) -> Self {
            LockCell(std::cell::UnsafeCell::new(value))
        }

        /// A shared access to the value, for a reader holding the lock.
        #[inline]
        pub(crate) fn shared(&self) -> SharedRef<T> {
            SharedRef(self.0.get())
        }

        /// An exclusive access to the value, for the writer holding the lock.
        #[inline]
        pub(crate) fn unique(&self) -> UniqueRef<T> {
            UniqueRef(self.0.get())
        }
    }

    /// See [`LockCell::shared`].
    pub(crate) struct SharedRef<T>(*const T);

    impl<T> SharedRef<T> {
        /// # Safety
        /// No [`UniqueRef`] of the same cell may be used while this one lives.
        #[inline]
        #[allow(unsafe_code)]
        pub(crate) unsafe fn get(&self) -> &T {
            // SAFETY: the pointer is the live cell's; the caller rules out a writer.
            unsafe { &*self.0 }
        }
    }

    /// See [`LockCell::unique`].
    pub(crate) struct UniqueRef<T>(*mut T);

    impl<T> UniqueRef<T> {
        /// # Safety
        /// No other access to the same cell may be used while this one lives.
        #[inline]
        #[allow(unsafe_code)]
        pub(crate) unsafe fn get(&self) -> &T {
            // SAFETY: the pointer is the live cell's; the caller rules out other accesses.
            unsafe { &*self.0 }
        }

        /// # Safety
        /// As [`UniqueRef::get`].
        #[inline]
        #[allow(unsafe_code)]
        pub(crate) unsafe fn get_mut(&mut self) -> &mut T {
            // SAFETY: the pointer is the live cell's; the caller rules out other accesses.
            unsafe { &mut *self.0 }
        }
    }

    /// This thread's number, for picking a counter stripe: unique among the threads alive,
    /// and small, as a number is handed out again once its thread has exited (so a process
    /// that spawns many short-lived threads does not run out of the first, owned stripes).
    /// `usize::MAX` while the thread is being torn down.
    #[inline]
    pub(crate) fn thread_stripe() -> usize {
        thread_local!(static STRIPE: Stripe = Stripe::claim());
        STRIPE.try_with(|stripe| stripe.0).unwrap_or(usize::MAX)
    }

    /// A thread's number, given back when the thread exits.
    struct Stripe(usize);

    /// Numbers handed out so far, and those given back (the smallest is handed out
    /// first, so that after a burst of threads the next ones own stripes again).
    type FreeNumbers = std::collections::BinaryHeap<std::cmp::Reverse<usize>>;
    static STRIPES: std::sync::Mutex<(usize, FreeNumbers)> = std::sync::Mutex::new((0, FreeNumbers::new()));

    impl Stripe {
        fn claim() -> Self {
            let mut stripes = STRIPES.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            let (next, free) = &mut *stripes;
            Stripe(free.pop().map_or_else(
                || {
                    *next += 1;
                    *next - 1
                },
                |std::cmp::Reverse(number)| number,
            ))
        }
    }

    impl Drop for Stripe {
        fn drop(&mut self) {
            // The thread's last count happened before this; the mutex orders it before
            // the next owner's first.
            STRIPES
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .1
                .push(std::cmp::Reverse(self.0));
        }
    }

    /// Whether [`thread_stripe`] numbers are unique per thread (they are not under loom).
    pub(crate) const UNIQUE_STRIPES: bool = true;

    /// A mutual-exclusion lock (`parking_lot`'s: no poisoning, word-sized).
    #[derive(Debug, Default)]
    pub(crate) struct Mutex<T>(parking_lot::Mutex<T>);

    impl<T> Mutex<T> {
        pub(crate) fn new(value: T) -> Self {
            Mutex(parking_lot::Mutex::new(value))
        }

        pub(crate) fn lock(&self) -> impl std::ops::DerefMut<Target = T> + '_ {
            self.0.lock()
        }
    }

    /// A reader-writer lock for data read on every operation and written rarely:
    /// crossbeam's `ShardedLock`, whose readers lock one of several shards (picked per
    /// thread), so that readers on different cores do not write one shared counter. A
    /// writer locks every shard. A panic under the lock does not poison it for others.
    #[derive(Debug, Default)]
    pub(crate) struct RwLock<T>(crossbeam_utils::sync::ShardedLock<T>);

    impl<T> RwLock<T> {
        pub(crate) fn new(value: T) -> Self {
            RwLock(crossbeam_utils::sync::ShardedLock::new(value))
        }

        pub(crate) fn read(&self) -> impl std::ops::Deref<Target = T> + '_ {
            self.0.read().unwrap_or_else(std::sync::PoisonError::into_inner)
        }

        pub(crate) fn write(&self) -> impl std::ops::DerefMut<Target = T> + '_ {
            self.0.write().unwrap_or_else(std::sync::PoisonError::into_inner)
        }

        #[cfg(feature = "serde")]
        pub(crate) fn into_inner(self) -> T {
            self.0.into_inner().unwrap_or_else(std::sync::PoisonError::into_inner)
        }
    }

    /// Gives the processor to another thread.
    pub(crate) fn yield_now() {
        std::thread::yield_now();
    }

    /// Parking a thread that waits for another's load: a handle to wake it by, and the
    /// wait (which may also end spuriously).
    pub(crate) use std::thread::{current as current_thread, park, Thread};

    /// Whether a loom model has failed and is unwinding: never in a real build.
    #[inline]
    pub(crate) fn failed_model() -> bool {
        false
    }

    /// Tells the CPU we are in a spin loop.
    pub(crate) fn spin_hint() {
        core::hint::spin_loop();
    }
}

#[cfg(cuckoo_gate_loom)]
mod imp {
    pub(crate) use loom::sync::atomic::{fence, AtomicPtr, AtomicU64, AtomicU8, AtomicUsize, Ordering};

    /// loom's `UnsafeCell`, which fails the model on any access that races another.
    #[derive(Debug)]
    pub(crate) struct LockCell<T>(loom::cell::UnsafeCell<T>);

    impl<T> LockCell<T> {
        pub(crate) fn new(value: T) -> Self {
            LockCell(loom::cell::UnsafeCell::new(value))
        }

        pub(crate) fn shared(&self) -> SharedRef<T> {
            SharedRef(self.0.get())
        }

        pub(crate) fn unique(&self) -> UniqueRef<T> {
            UniqueRef(self.0.get_mut())
        }
    }

    /// A read access loom tracks while it lives.
    pub(crate) struct SharedRef<T>(loom::cell::ConstPtr<T>);

    impl<T> SharedRef<T> {
        #[allow(unsafe_code)]
        pub(crate) unsafe fn get(&self) -> &T {
            // SAFETY: as in the real build; loom checks it.
            unsafe { self.0.deref() }
        }
    }

    /// A write access loom tracks while it lives.
    pub(crate) struct UniqueRef<T>(loom::cell::MutPtr<T>);

    impl<T> UniqueRef<T> {
        #[allow(unsafe_code)]
        pub(crate) unsafe fn get(&self) -> &T {
            // SAFETY: as in the real build; loom checks it.
            unsafe { &*self.0.deref() }
        }

        #[allow(unsafe_code)]
        pub(crate) unsafe fn get_mut(&mut self) -> &mut T {
            // SAFETY: as in the real build; loom checks it.
            unsafe { self.0.deref() }
        }
    }

    /// Every loom thread shares stripe 0 (still a correct, if contended, choice).
    pub(crate) fn thread_stripe() -> usize {
        0
    }

    /// Whether [`thread_stripe`] numbers are unique per thread (they are not under loom).
    pub(crate) const UNIQUE_STRIPES: bool = false;

    /// loom's mutex, with `parking_lot`'s signature (a poisoned lock is a failed model).
    #[derive(Debug)]
    pub(crate) struct Mutex<T>(loom::sync::Mutex<T>);

    impl<T> Mutex<T> {
        pub(crate) fn new(value: T) -> Self {
            Mutex(loom::sync::Mutex::new(value))
        }

        pub(crate) fn lock(&self) -> impl std::ops::DerefMut<Target = T> + '_ {
            self.0.lock().unwrap()
        }
    }

    /// loom's reader-writer lock, with `parking_lot`'s signature.
    #[derive(Debug)]
    pub(crate) struct RwLock<T>(loom::sync::RwLock<T>);

    impl<T> RwLock<T> {
        pub(crate) fn new(value: T) -> Self {
            RwLock(loom::sync::RwLock::new(value))
        }

        pub(crate) fn read(&self) -> impl std::ops::Deref<Target = T> + '_ {
            self.0.read().unwrap()
        }

        pub(crate) fn write(&self) -> impl std::ops::DerefMut<Target = T> + '_ {
            self.0.write().unwrap()
        }

        #[cfg(feature = "serde")]
        pub(crate) fn into_inner(self) -> T {
            self.0.into_inner().unwrap()
        }
    }

    /// Gives the processor to another thread (a loom scheduling point).
    pub(crate) fn yield_now() {
        loom::thread::yield_now();
    }

    /// loom's parking, so that the models see a waiter sleep and wake.
    pub(crate) use loom::thread::{current as current_thread, park, Thread};

    /// Whether a loom model has failed and is unwinding (a panic is a failed model): then
    /// destructors must not touch loom's primitives, or the process aborts.
    pub(crate) fn failed_model() -> bool {
        std::thread::panicking()
    }

    /// Under loom every spin must be a yield, or the model never ends.
    pub(crate) fn spin_hint() {
        loom::thread::yield_now();
    }
}

pub(crate) use imp::*;

/// An atomic for a `static`, which loom's cannot be: only for state outside the modelled
/// protocols (the expiry clock's ticker).
pub(crate) use std::sync::atomic::AtomicU64 as StaticAtomicU64;

/// A flag that is only a hint (no protocol's correctness reads it), kept out of loom's
/// models so that it adds no interleavings to them: the filter's "a full search just
/// failed here".
pub(crate) use std::sync::atomic::AtomicBool as HintFlag;

use crossbeam_utils::CachePadded;

/// Asks the CPU to start loading the cache line holding `value` (a hint: no effect on what
/// any load returns). A no-op under loom and on targets without a prefetch instruction.
#[inline(always)]
pub(crate) fn prefetch<T>(value: &T) {
    prefetch_at(std::slice::from_ref(value), 0);
}

/// Marks the branch that calls it as rarely taken, so that the compiler lays the other
/// out straight (`std::hint::cold_path`, on the crate's minimum Rust version).
#[cold]
#[inline]
pub(crate) fn cold_path() {}

/// [`prefetch`] of `items[index]`, without a bounds check: an index past the end is a
/// useless hint, never an error.
#[inline(always)]
#[allow(unsafe_code)]
pub(crate) fn prefetch_at<T>(items: &[T], index: usize) {
    let address = items.as_ptr().wrapping_add(index);
    #[cfg(all(target_arch = "x86_64", not(cuckoo_gate_loom)))]
    // SAFETY: `_mm_prefetch` needs SSE, which every x86_64 CPU has (it is in the target's
    // baseline). A prefetch never faults and never reads memory into a Rust value, so any
    // address is sound, in bounds or not.
    unsafe {
        use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        _mm_prefetch::<_MM_HINT_T0>(address.cast::<i8>());
    }
    #[cfg(not(all(target_arch = "x86_64", not(cuckoo_gate_loom))))]
    let _ = address;
}

/// Asks the kernel to back `words` with transparent huge pages where it can (Linux; a
/// no-op elsewhere and under loom). Call it on a fresh allocation before touching it, so
/// that the first touch faults in 2 MiB pages. A filter's buckets are read at random, so
/// with 4 KiB pages nearly every lookup in a table larger than the TLB's reach also walks
/// the page table; with 2 MiB pages a table of hundreds of MiB stays within it. Only the
/// whole 2 MiB pages inside the allocation are affected, and a refusal (huge pages
/// disabled, or `madvise` failing) changes nothing but speed.
#[allow(unsafe_code)]
pub(crate) fn advise_huge_pages<T>(words: &[T]) {
    #[cfg(all(target_os = "linux", not(cuckoo_gate_loom)))]
    {
        const HUGE: usize = 2 << 20;
        let (start, len) = (words.as_ptr() as usize, std::mem::size_of_val(words));
        let first = start.next_multiple_of(HUGE);
        let end = (start + len) / HUGE * HUGE;
        if end > first {
            // SAFETY: `[first, end)` lies inside `words`, a live allocation this process
            // owns, and is page-aligned. MADV_HUGEPAGE changes only how the kernel backs
            // those pages, never their contents or validity, so no Rust value is affected.
            // The result is ignored on purpose: a refusal leaves 4 KiB pages.
            let _ = unsafe { libc::madvise(first as *mut libc::c_void, end - first, libc::MADV_HUGEPAGE) };
        }
    }
    #[cfg(not(all(target_os = "linux", not(cuckoo_gate_loom))))]
    let _ = words;
}

/// Gives the physical pages wholly inside `words` back to the operating system (Linux;
/// elsewhere, and under loom or Miri, nothing happens and `false` is returned). The memory
/// stays mapped: a later load from it reads zero, a valid value for an atomic. For a
/// retired table, which threads that loaded its pointer may still read (see
/// `filter/current.rs`); the caller issues a `Release` fence first.
#[allow(unsafe_code)]
pub(crate) fn release_pages(words: &[AtomicU64]) -> bool {
    #[cfg(all(target_os = "linux", not(cuckoo_gate_loom), not(miri)))]
    {
        // SAFETY: `sysconf` has no preconditions.
        let page = match unsafe { libc::sysconf(libc::_SC_PAGESIZE) } {
            page if page > 0 => page as usize,
            _ => return false,
        };
        let (start, len) = (words.as_ptr() as usize, std::mem::size_of_val(words));
        let first = start.next_multiple_of(page);
        let end = (start + len) / page * page;
        if end > first {
            // SAFETY: `[first, end)` lies inside `words`, a live allocation this process
            // owns, and is page-aligned. MADV_DONTNEED on private anonymous memory keeps
            // the range mapped and makes its next reads return zeros; the range holds only
            // atomics, for which zero is a valid value and which other threads may change
            // at any time anyway, so no Rust value becomes invalid. The allocator's own
            // bookkeeping lies outside the allocation and is untouched.
            return unsafe { libc::madvise(first as *mut libc::c_void, end - first, libc::MADV_DONTNEED) }
                == 0;
        }
        false
    }
    #[cfg(not(all(target_os = "linux", not(cuckoo_gate_loom), not(miri))))]
    {
        let _ = words;
        false
    }
}

/// Event counters striped by thread. Threads numbered below the stripe count (numbers are
/// reused once their thread exits) each own a stripe and count with a plain load and
/// store, as no other thread writes it; any further threads share atomic stripes. So
/// counting costs no locked instruction and shares no written cache line, and no count is
/// lost.
#[derive(Debug)]
pub(crate) struct Tally<const N: usize> {
    owned: Box<[CachePadded<[AtomicU64; N]>]>,
    shared: Box<[CachePadded<[AtomicU64; N]>]>,
}

impl<const N: usize> Tally<N> {
    /// Counters with `stripes` owned and `stripes` shared stripes (a power of two).
    pub(crate) fn new(stripes: usize) -> Self {
        let zeros =
            |n: usize| (0..n).map(|_| CachePadded::new(std::array::from_fn(|_| AtomicU64::new(0)))).collect();
        Tally { owned: zeros(if UNIQUE_STRIPES { stripes } else { 0 }), shared: zeros(stripes) }
    }

    /// Adds one to counter `counter`.
    #[inline]
    pub(crate) fn add(&self, counter: usize) {
        let thread = thread_stripe();
        match self.owned.get(thread) {
            Some(own) => {
                // Only this thread writes its own stripe: a load and a store lose nothing.
                let count = &own[counter];
                count.store(count.load(Ordering::Relaxed) + 1, Ordering::Relaxed);
            }
            None => {
                self.shared[thread & (self.shared.len() - 1)][counter].fetch_add(1, Ordering::Relaxed);
            }
        }
    }

    /// Sets counter `counter`'s total to `value`. A count added meanwhile may be lost: the
    /// caller keeps every adder out (the gate holds its write lock, its adders its read
    /// lock).
    pub(crate) fn reset(&self, counter: usize, value: u64) {
        self.owned
            .iter()
            .chain(self.shared.iter())
            .for_each(|stripe| stripe[counter].store(0, Ordering::Relaxed));
        self.shared[0][counter].store(value, Ordering::Relaxed);
    }

    /// Counter `counter`'s total.
    pub(crate) fn sum(&self, counter: usize) -> u64 {
        self.owned
            .iter()
            .chain(self.shared.iter())
            .map(|stripe| stripe[counter].load(Ordering::Relaxed))
            .sum()
    }
}

/// Exponential backoff for spin loops: a few rounds of spin hints, then yields.
pub(crate) struct Backoff {
    step: u32,
}

impl Backoff {
    const SPIN_LIMIT: u32 = 6;

    pub(crate) fn new() -> Self {
        Backoff { step: 0 }
    }

    /// Waits a little longer each call.
    pub(crate) fn snooze(&mut self) {
        if self.step <= Self::SPIN_LIMIT {
            for _ in 0..1u32 << self.step {
                spin_hint();
            }
            self.step += 1;
        } else {
            yield_now();
        }
    }
}

#[cfg(all(test, not(cuckoo_gate_loom)))]
mod tests {
    use super::{thread_stripe, Tally};

    #[test]
    fn a_tally_loses_no_count_with_more_threads_than_stripes() {
        let tally = Tally::<2>::new(2);
        std::thread::scope(|s| {
            for _ in 0..8 {
                s.spawn(|| (0..10_000).for_each(|i| tally.add(i % 2)));
            }
        });
        assert_eq!((tally.sum(0), tally.sum(1)), (40_000, 40_000));
    }

    #[test]
    fn threads_that_exit_give_their_stripe_back_with_its_counts() {
        let tally = Tally::<1>::new(4);
        let mut highest = 0;
        for _ in 0..1_000 {
            // One at a time: each may take a number an earlier one gave back.
            let stripe = std::thread::scope(|s| {
                s.spawn(|| {
                    (0..10).for_each(|_| tally.add(0));
                    thread_stripe()
                })
                .join()
                .unwrap()
            });
            highest = highest.max(stripe);
        }
        // Without reuse the last thread alone would be numbered 1,000 or more.
        assert!(highest < 1_000, "thread numbers are not reused: {highest}");
        assert_eq!(tally.sum(0), 10_000);
    }
}
