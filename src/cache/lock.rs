//! The shards' reader-writer lock, whose readers take it with one `fetch_add`.
//!
//! On a skewed workload the shards of the hottest keys take most operations, so their lock
//! words are written from every core. A lock that takes readers with a compare-and-swap
//! (`parking_lot`'s) fails the swap whenever another core got there first, and backs off;
//! a `fetch_add` always succeeds, so a reader pays one transfer of the line (the design of
//! Linux's queued reader-writer lock, without the queue). A writer announces itself, so
//! that new readers step back and a stream of readers cannot starve it; waiters spin a
//! little, then yield. No poisoning: a panic under the lock releases it, and the shard's
//! code keeps its state whole across user code (see `shard.rs`).
//!
//! The lock also counts the cache's hits and misses, for free: a reader releases the lock
//! with one `fetch_add` that takes its hold off the low half of the state and adds one to
//! the top quarter (a hit) or the quarter below it (a miss), which count since the last
//! writer. Readers cannot count while a writer holds the lock, so the writer that takes it
//! moves both counts to `drained` and `drained_misses` in the same compare-and-swap. So
//! that a count never wraps where writes are rare, a reader whose release takes it past
//! [`DRAIN_AT`] takes the write lock once to drain it; until that is done every later
//! release of that count does the same, so a stalled reader delays the drain by at most
//! one count per thread.

use crate::broken;
use crate::primitive::{AtomicU64, Backoff, LockCell, Ordering, SharedRef, UniqueRef};

/// Held by a writer.
const WRITER: u64 = 1;
/// A writer waits: readers arriving step back.
const WAITING: u64 = 2;
/// One reader (the readers' count is the low half over this).
const READER: u64 = 4;
/// One miss (the misses' count is the third quarter).
const MISS: u64 = 1 << 32;
/// One hit (the hits' count is the top quarter).
const HIT: u64 = 1 << 48;
/// The low half: the writer's bits and the readers.
const HELD: u64 = MISS - 1;
/// A count's quarter, shifted down.
const COUNT: u64 = 0xFFFF;
/// Hits (or misses) counted in the state past which a reader drains: half a quarter's
/// range, so that a count has as much again before it could wrap (1 under loom, so that
/// the models reach it). A drain takes the write lock once per 32,768 requests of a shard.
const DRAIN_AT: u64 = if cfg!(cuckoo_gate_loom) { 1 } else { 1 << 15 };

/// A reader-writer lock for a shard. In this order (`repr(C)`): the value starts in the
/// state word's cache line (see `Store`'s layout).
#[repr(C)]
pub(crate) struct ShardLock<T> {
    state: AtomicU64,
    /// Hits moved out of the state; written only by the writer holding the lock.
    drained: AtomicU64,
    value: LockCell<T>,
    /// Misses moved out of the state, as `drained` (after the value: the state's line
    /// keeps the value's first fields).
    drained_misses: AtomicU64,
}

// SAFETY: the lock hands out `&T` to readers on any thread at once (hence `T: Sync`) and
// `&mut T` to one writer at a time, which may be on another thread than the last (hence
// `T: Send`); the protocol below keeps a writer apart from every other access.
#[allow(unsafe_code)]
unsafe impl<T: Send + Sync> Sync for ShardLock<T> {}
// SAFETY: moving the lock moves the value; no access outlives a borrow of the lock.
#[allow(unsafe_code)]
unsafe impl<T: Send> Send for ShardLock<T> {}

/// A reader's hold on a [`ShardLock`].
pub(crate) struct ReadGuard<'a, T> {
    lock: &'a ShardLock<T>,
    value: std::mem::ManuallyDrop<SharedRef<T>>,
}

/// The writer's hold on a [`ShardLock`].
pub(crate) struct WriteGuard<'a, T> {
    lock: &'a ShardLock<T>,
    value: std::mem::ManuallyDrop<UniqueRef<T>>,
}

impl<T> ShardLock<T> {
    pub(crate) fn new(value: T) -> Self {
        ShardLock {
            state: AtomicU64::new(0),
            drained: AtomicU64::new(0),
            value: LockCell::new(value),
            drained_misses: AtomicU64::new(0),
        }
    }

    /// Shared access; waits while a writer holds the lock or waits for it.
    #[inline]
    pub(crate) fn read(&self) -> ReadGuard<'_, T> {
        let state = self.state.fetch_add(READER, Ordering::Acquire);
        if state & (WRITER | WAITING) != 0 && !broken::READER_IGNORES_WRITER {
            self.read_slow();
        }
        ReadGuard { lock: self, value: std::mem::ManuallyDrop::new(self.value.shared()) }
    }

    /// Steps back (the count it added comes off), waits for the writers, and tries again.
    #[cold]
    #[inline(never)]
    fn read_slow(&self) {
        loop {
            self.state.fetch_sub(READER, Ordering::Relaxed);
            let mut backoff = Backoff::new();
            while self.state.load(Ordering::Relaxed) & (WRITER | WAITING) != 0 {
                backoff.snooze();
            }
            if self.state.fetch_add(READER, Ordering::Acquire) & (WRITER | WAITING) == 0 {
                return;
            }
        }
    }

    /// Exclusive access; waits for the readers and any other writer.
    #[inline]
    pub(crate) fn write(&self) -> WriteGuard<'_, T> {
        let state = self.state.load(Ordering::Relaxed);
        let taken = if state & HELD == 0
            && self.state.compare_exchange(state, WRITER, Ordering::Acquire, Ordering::Relaxed).is_ok()
        {
            state
        } else {
            self.write_slow()
        };
        // The swap cleared the hits and misses counted since the last writer; none can be
        // counted while this writer holds the lock.
        if taken > HELD {
            self.add_drained(taken >> 48, taken >> 32 & COUNT);
        }
        WriteGuard { lock: self, value: std::mem::ManuallyDrop::new(self.value.unique()) }
    }

    /// Announces itself (new readers step back), then takes the lock once the readers
    /// inside have left, returning the state it replaced. Taking it clears the
    /// announcement; other waiting writers make theirs again.
    #[cold]
    #[inline(never)]
    fn write_slow(&self) -> u64 {
        let mut backoff = Backoff::new();
        loop {
            let state = self.state.load(Ordering::Relaxed);
            if state & HELD & !WAITING == 0 {
                if self
                    .state
                    .compare_exchange_weak(state, WRITER, Ordering::Acquire, Ordering::Relaxed)
                    .is_ok()
                {
                    return state;
                }
            } else if state & WAITING == 0 {
                self.state.fetch_or(WAITING, Ordering::Relaxed);
            }
            backoff.snooze();
        }
    }

    /// Adds `hits` to `drained` and `misses` to `drained_misses`; only the writer holding
    /// the lock calls it.
    #[inline]
    fn add_drained(&self, hits: u64, misses: u64) {
        self.drained.store(self.drained.load(Ordering::Relaxed) + hits, Ordering::Relaxed);
        self.drained_misses.store(self.drained_misses.load(Ordering::Relaxed) + misses, Ordering::Relaxed);
    }

    /// Moves the hits and misses counted in the state to `drained` and `drained_misses`,
    /// as [`ReadGuard::release_hit`] and [`ReadGuard::release_miss`] ask.
    #[cold]
    #[inline(never)]
    pub(crate) fn drain_hits(&self) {
        if broken::UNLOCKED_DRAIN {
            return broken::unlocked_drain(&self.state, &self.drained, &self.drained_misses);
        }
        drop(self.write());
    }
}

impl<T> std::ops::Deref for ReadGuard<'_, T> {
    type Target = T;

    #[inline]
    #[allow(unsafe_code)]
    fn deref(&self) -> &T {
        // SAFETY: this reader is counted in the state with no writer holding the lock, and
        // no writer takes it until the count is zero, so no `&mut T` exists meanwhile.
        unsafe { self.value.get() }
    }
}

impl<T> ReadGuard<'_, T> {
    /// Releases the hold, counting a hit. `true` if the hits counted in the state have
    /// passed [`DRAIN_AT`]: the caller then calls [`ShardLock::drain_hits`].
    #[inline]
    #[must_use]
    pub(crate) fn release_hit(self) -> bool {
        self.release_counting(HIT) >> 48 >= DRAIN_AT
    }

    /// Releases the hold, counting a miss; `true` as for [`release_hit`](Self::release_hit),
    /// for the misses.
    #[inline]
    #[must_use]
    pub(crate) fn release_miss(self) -> bool {
        self.release_counting(MISS) >> 32 & COUNT >= DRAIN_AT
    }

    /// Releases the hold, adding `one` (a hit or a miss) to the state in the same
    /// `fetch_add`; the state before.
    #[inline(always)]
    #[allow(unsafe_code)]
    fn release_counting(self, one: u64) -> u64 {
        let mut this = std::mem::ManuallyDrop::new(self);
        // SAFETY: dropped once, here, and not used after; `this` is never dropped, so the
        // hold is released once, below, and not again by `Drop`.
        unsafe { std::mem::ManuallyDrop::drop(&mut this.value) };
        this.lock.state.fetch_add(one.wrapping_sub(READER), Ordering::Release)
    }

    /// Hits counted by this lock: drained, and in the state. Exact while this hold keeps
    /// writers out (the count in the state only grows meanwhile).
    pub(crate) fn hits(&self) -> u64 {
        self.lock.drained.load(Ordering::Relaxed) + (self.lock.state.load(Ordering::Relaxed) >> 48)
    }

    /// Misses counted by this lock, as [`hits`](Self::hits).
    pub(crate) fn misses(&self) -> u64 {
        self.lock.drained_misses.load(Ordering::Relaxed)
            + (self.lock.state.load(Ordering::Relaxed) >> 32 & COUNT)
    }
}

impl<T> WriteGuard<'_, T> {
    /// Hits counted by this lock: all drained while a writer holds it.
    #[inline]
    pub(crate) fn hits(&self) -> u64 {
        self.lock.drained.load(Ordering::Relaxed)
    }

    /// Counts a hit found under the write lock.
    pub(crate) fn count_hit(&self) {
        self.lock.add_drained(1, 0);
    }

    /// Counts a miss found under the write lock.
    pub(crate) fn count_miss(&self) {
        self.lock.add_drained(0, 1);
    }
}

impl<T> Drop for ReadGuard<'_, T> {
    #[inline]
    #[allow(unsafe_code)]
    fn drop(&mut self) {
        // SAFETY: dropped once, here, and not used after (it ends loom's access record
        // before the lock is released).
        unsafe { std::mem::ManuallyDrop::drop(&mut self.value) };
        self.lock.state.fetch_sub(READER, Ordering::Release);
    }
}

impl<T> std::ops::Deref for WriteGuard<'_, T> {
    type Target = T;

    #[inline]
    #[allow(unsafe_code)]
    fn deref(&self) -> &T {
        // SAFETY: the writer holds the lock alone (`WRITER` set by its swap from a state
        // with no readers and no writer), and `&self` rules out a `&mut T` through this
        // guard while the returned borrow lives.
        unsafe { self.value.get() }
    }
}

impl<T> std::ops::DerefMut for WriteGuard<'_, T> {
    #[inline]
    #[allow(unsafe_code)]
    fn deref_mut(&mut self) -> &mut T {
        // SAFETY: the writer holds the lock alone, and `&mut self` makes this the only
        // borrow through the guard.
        unsafe { self.value.get_mut() }
    }
}

impl<T> Drop for WriteGuard<'_, T> {
    #[inline]
    #[allow(unsafe_code)]
    fn drop(&mut self) {
        // SAFETY: dropped once, here, and not used after.
        unsafe { std::mem::ManuallyDrop::drop(&mut self.value) };
        self.lock.state.fetch_and(!WRITER, Ordering::Release);
    }
}

#[cfg(all(test, not(cuckoo_gate_loom)))]
mod tests {
    use super::{Ordering, ShardLock, DRAIN_AT, HIT, MISS};

    #[test]
    fn readers_share_and_a_writer_excludes() {
        let lock = ShardLock::new(1);
        {
            let (a, b) = (lock.read(), lock.read());
            assert_eq!(*a + *b, 2);
            assert_eq!(lock.state.load(Ordering::Relaxed), 2 * super::READER);
        }
        *lock.write() += 1;
        assert_eq!(*lock.read(), 2);
        assert_eq!(lock.state.load(Ordering::Relaxed), 0, "every hold released");
    }

    #[test]
    fn hits_are_counted_in_the_state_and_drained_by_writers() {
        let lock = ShardLock::new(0);
        assert!(!lock.read().release_hit());
        assert!(!lock.read().release_hit());
        assert_eq!(lock.state.load(Ordering::Relaxed), 2 * HIT, "two hits, no hold");
        assert_eq!(lock.read().hits(), 2);
        drop(lock.write());
        assert_eq!(lock.state.load(Ordering::Relaxed), 0, "the writer took the count");
        assert_eq!(lock.read().hits(), 2);
        lock.write().count_hit();
        assert_eq!(lock.read().hits(), 3);
    }

    #[test]
    fn misses_are_counted_beside_the_hits_and_drained_with_them() {
        let lock = ShardLock::new(0);
        assert!(!lock.read().release_miss());
        assert!(!lock.read().release_hit());
        assert!(!lock.read().release_miss());
        assert_eq!(lock.state.load(Ordering::Relaxed), HIT + 2 * MISS, "a hit and two misses, no hold");
        assert_eq!((lock.read().hits(), lock.read().misses()), (1, 2));
        drop(lock.write());
        assert_eq!(lock.state.load(Ordering::Relaxed), 0, "the writer took both counts");
        lock.write().count_miss();
        assert_eq!((lock.read().hits(), lock.read().misses()), (1, 3));
        // The miss that passes the mark asks for a drain, and the hits' count is untouched.
        lock.state.store(DRAIN_AT << 32, Ordering::Relaxed);
        assert!(lock.read().release_miss());
        assert!(!lock.read().release_hit());
        lock.drain_hits();
        assert_eq!(lock.state.load(Ordering::Relaxed), 0);
        assert_eq!((lock.read().hits(), lock.read().misses()), (2, DRAIN_AT + 4));
    }

    #[test]
    fn the_hit_that_passes_the_mark_asks_for_a_drain() {
        let lock = ShardLock::new(0);
        lock.state.store((DRAIN_AT - 1) << 48, Ordering::Relaxed);
        assert!(!lock.read().release_hit(), "the count reached the mark");
        assert!(lock.read().release_hit(), "the count passed the mark");
        assert!(lock.read().release_hit(), "until it is drained, every hit asks");
        assert_eq!(lock.read().hits(), DRAIN_AT + 2);
        lock.drain_hits();
        assert_eq!(lock.state.load(Ordering::Relaxed), 0);
        assert_eq!((lock.read().hits(), lock.drained.load(Ordering::Relaxed)), (DRAIN_AT + 2, DRAIN_AT + 2));
        assert!(!lock.read().release_hit());
    }

    #[test]
    fn racing_readers_and_writers_count_every_hit() {
        let (threads, rounds) = if cfg!(miri) { (3, 20) } else { (4, 20_000) };
        let lock = ShardLock::new(0u64);
        std::thread::scope(|s| {
            for t in 0..threads {
                let lock = &lock;
                s.spawn(move || {
                    for i in 0..rounds {
                        if (i + t) % 8 == 0 {
                            *lock.write() += 1;
                        } else if lock.read().release_hit() {
                            lock.drain_hits();
                        }
                    }
                });
            }
        });
        let writes: u64 = (0..threads).map(|t| (0..rounds).filter(|i| (i + t) % 8 == 0).count() as u64).sum();
        let held = lock.read();
        assert_eq!((*held, held.hits()), (writes, threads as u64 * rounds as u64 - writes));
    }

    #[test]
    fn a_panic_under_the_lock_releases_it() {
        let lock = ShardLock::new(0);
        let caught = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            let mut value = lock.write();
            *value = 1;
            panic!("user code");
        }));
        assert!(caught.is_err());
        assert_eq!(*lock.read(), 1);
        *lock.write() = 2;
        assert_eq!(*lock.read(), 2);
    }

    #[test]
    fn writers_and_readers_never_see_a_half_done_write() {
        let (threads, rounds) = if cfg!(miri) { (3, 20) } else { (4, 20_000) };
        let lock = ShardLock::new((0u64, 0u64));
        std::thread::scope(|s| {
            for t in 0..threads {
                let lock = &lock;
                s.spawn(move || {
                    for i in 0..rounds {
                        if (i + t) % 4 == 0 {
                            let mut pair = lock.write();
                            pair.0 += 1;
                            std::hint::black_box(&mut *pair);
                            pair.1 += 1;
                        } else {
                            let pair = lock.read();
                            assert_eq!(pair.0, pair.1, "a reader saw a write half done");
                        }
                    }
                });
            }
        });
        let writes = (0..threads).map(|t| (0..rounds).filter(|i| (i + t) % 4 == 0).count() as u64).sum();
        assert_eq!(*lock.read(), (writes, writes), "a write was lost");
    }
}

#[cfg(all(test, not(cuckoo_gate_loom)))]
mod layout_tests {
    #[test]
    fn the_value_follows_the_two_counters() {
        // `Store`'s layout counts on its first field starting 16 bytes into the line.
        assert_eq!(std::mem::offset_of!(super::ShardLock<crate::cache::shard::Shard<u64, u64>>, value), 16);
    }
}
