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

use crate::broken;
use crate::primitive::{AtomicUsize, Backoff, LockCell, Ordering, SharedRef, UniqueRef};

/// Held by a writer.
const WRITER: usize = 1;
/// A writer waits: readers arriving step back.
const WAITING: usize = 2;
/// One reader (the readers' count is the state over this).
const READER: usize = 4;

/// A reader-writer lock for a shard.
pub(crate) struct ShardLock<T> {
    state: AtomicUsize,
    value: LockCell<T>,
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
        ShardLock { state: AtomicUsize::new(0), value: LockCell::new(value) }
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
        if self.state.compare_exchange(0, WRITER, Ordering::Acquire, Ordering::Relaxed).is_err() {
            self.write_slow();
        }
        WriteGuard { lock: self, value: std::mem::ManuallyDrop::new(self.value.unique()) }
    }

    /// Announces itself (new readers step back), then takes the lock once the readers
    /// inside have left. Taking it clears the announcement; other waiting writers make
    /// theirs again.
    #[cold]
    #[inline(never)]
    fn write_slow(&self) {
        let mut backoff = Backoff::new();
        loop {
            let state = self.state.load(Ordering::Relaxed);
            if state & !WAITING == 0 {
                if self
                    .state
                    .compare_exchange_weak(state, WRITER, Ordering::Acquire, Ordering::Relaxed)
                    .is_ok()
                {
                    return;
                }
            } else if state & WAITING == 0 {
                self.state.fetch_or(WAITING, Ordering::Relaxed);
            }
            backoff.snooze();
        }
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
    use super::ShardLock;

    #[test]
    fn readers_share_and_a_writer_excludes() {
        let lock = ShardLock::new(1);
        {
            let (a, b) = (lock.read(), lock.read());
            assert_eq!(*a + *b, 2);
            assert_eq!(lock.state.load(super::Ordering::Relaxed), 2 * super::READER);
        }
        *lock.write() += 1;
        assert_eq!(*lock.read(), 2);
        assert_eq!(lock.state.load(super::Ordering::Relaxed), 0, "every hold released");
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
