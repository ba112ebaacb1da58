//! The filter's current table, behind an atomic pointer. Tables stay allocated while the
//! filter lives, so a pointer once loaded is always safe to follow.
//!
//! Lookups load the pointer and read the table it names; a doubling builds a new table and
//! swaps it in. A thread that loaded the old pointer may still be reading the old table,
//! so the old table is never freed before the filter is: it is *retired*. Its stripes stay
//! frozen for good (a writer that reaches one waits for the growth and redoes its
//! operation on the new table), and on Linux the physical pages of its buckets go back to
//! the operating system (`madvise(MADV_DONTNEED)`), so a grown filter holds the memory of
//! its current table (and the small stripe arrays of the retired ones). Reading a released
//! page yields zeros, valid values for atomics but not the table's content, so a lookup
//! *validates*: after reading, it checks that the pointer still names the table it read,
//! and reads again from the new table if not, the way a seqlock reader re-checks its
//! stamp. The read path has no barrier and writes nothing shared (the fence is an
//! `Acquire` fence, free on x86), where an epoch pin per lookup would cost a full barrier
//! and a thread-local write.
//!
//! Why a validated read is right: the grower swaps the pointer (`Release`), then issues a
//! `Release` fence, then releases the old pages. A reader that saw any released (zeroed)
//! word saw a write ordered after that fence; its `Acquire` fence after the read then
//! orders the swap before its re-load of the pointer, which therefore differs. A reader
//! whose re-load still sees the old pointer read no released word, so it read the old
//! table's real content (frozen, or validated by its stripes for a miss), which holds every
//! key inserted before the reader began. Under loom, releasing the pages is modelled by
//! storing zero into every word after the fence.
//!
//! Writers need no validation: they lock stripes, and a retired table's stripes are
//! frozen, so a write either lands before the freeze (and is copied by the doubling) or
//! is refused and redone.
//!
//! This is the crate's only module with `unsafe` code beyond hardware and OS hints in
//! `primitive.rs` and one SIMD compare in `bucket.rs`: it follows the table pointer and
//! frees the tables on drop.
#![allow(unsafe_code)]

use std::ptr::NonNull;

use super::AnyTable;
use crate::broken;
use crate::primitive::{fence, AtomicPtr, Mutex, Ordering};

/// A retired table (allocated by `Box::into_raw`, freed by [`Current`]'s drop only), and
/// the bytes it still holds.
struct Owned(NonNull<AnyTable>, usize);

// SAFETY: `Owned` is an owning pointer to an `AnyTable`, which is `Send + Sync`; it is only
// dereferenced by `Current`, which hands out shared references while it lives.
unsafe impl Send for Owned {}

/// The pointer to the current table, and every table retired before it.
pub(crate) struct Current {
    pointer: AtomicPtr<AnyTable>,
    /// Whether the filter was built to grow (otherwise the pointer never changes).
    replaceable: bool,
    /// Tables swapped out by doublings, freed when the filter is dropped.
    retired: Mutex<Vec<Owned>>,
}

impl Current {
    /// Publishes `table`; `replaceable` is false for a filter that never grows.
    pub(crate) fn new(table: AnyTable, replaceable: bool) -> Self {
        Current {
            pointer: AtomicPtr::new(Box::into_raw(Box::new(table))),
            replaceable,
            retired: Mutex::new(Vec::new()),
        }
    }

    /// Whether the table can ever be replaced.
    pub(crate) fn replaceable(&self) -> bool {
        self.replaceable
    }

    /// Runs `f` on the current table and returns its result, running it again on the new
    /// table if a doubling retired the one it read meanwhile. For reads only: `f` may run
    /// more than once. Lock-free.
    #[inline]
    pub(crate) fn read<R>(&self, mut f: impl FnMut(&AnyTable) -> R) -> R {
        loop {
            let pointer = self.pointer.load(Ordering::Acquire);
            // SAFETY: the pointer is never null (set in `new` and `replace` from
            // `Box::into_raw`), and no table is freed before `self` is dropped, which
            // cannot happen while `&self` is borrowed.
            let result = f(unsafe { &*pointer });
            if !self.replaceable || broken::SKIP_TABLE_CHECK {
                // A fixed-size filter's table is never retired.
                return result;
            }
            fence(Ordering::Acquire);
            if self.pointer.load(Ordering::Relaxed) == pointer {
                return result;
            }
        }
    }

    /// Runs `f` once on the table current at the call. For writers, whose stripe locks
    /// refuse a retired table, and for the grower and snapshots, which hold the growth
    /// lock (no table is retired meanwhile).
    #[inline]
    pub(crate) fn with<R>(&self, f: impl FnOnce(&AnyTable) -> R) -> R {
        // SAFETY: as in `read`.
        f(unsafe { &*self.pointer.load(Ordering::Acquire) })
    }

    /// Lets `grow` build a replacement from the current table: if it returns `Ok(Some)`,
    /// that table is published (with a `Release` store, so its contents are visible to
    /// every thread that loads it) and the old one is retired. The caller must be the only
    /// thread replacing tables (the filter's growth lock), and `grow` must leave the old
    /// table frozen.
    pub(crate) fn replace<E>(
        &self,
        grow: impl FnOnce(&AnyTable) -> Result<Option<AnyTable>, E>,
    ) -> Result<(), E> {
        debug_assert!(self.replaceable);
        let old = self.pointer.load(Ordering::Acquire);
        // SAFETY: as in `read`.
        let Some(table) = grow(unsafe { &*old })? else {
            return Ok(());
        };
        self.pointer.store(Box::into_raw(Box::new(table)), Ordering::Release);
        // SAFETY: as in `read`; `old` is retired below, not freed.
        let old_table = unsafe { &*old };
        let retained = old_table.release_pages();
        // `old` came from `Box::into_raw`, so it is not null.
        self.retired.lock().push(Owned(NonNull::new(old).expect("a published table is not null"), retained));
        Ok(())
    }

    /// Bytes still held by retired tables (their stripes, and their buckets where the
    /// pages could not be released).
    pub(crate) fn retired_bytes(&self) -> usize {
        self.retired.lock().iter().map(|t| t.1).sum()
    }
}

impl Drop for Current {
    fn drop(&mut self) {
        let current = self.pointer.load(Ordering::Relaxed);
        let retired = std::mem::take(&mut *self.retired.lock());
        // SAFETY: `&mut self`, so no other thread can be reading any table; each pointer
        // came from `Box::into_raw` and is freed exactly once here.
        unsafe {
            drop(Box::from_raw(current));
            for table in retired {
                drop(Box::from_raw(table.0.as_ptr()));
            }
        }
    }
}

impl std::fmt::Debug for Current {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Current").field("replaceable", &self.replaceable).finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use crate::CuckooFilter;

    /// Small enough for Miri: three doublings retire three tables, which lookups keep
    /// following; dropping the filter frees every table once.
    #[test]
    fn retired_tables_stay_readable_and_are_freed_once() {
        let f = CuckooFilter::builder().capacity(8).max_capacity(64).seed(1).build().unwrap();
        for k in 0..48u64 {
            f.insert(&k).unwrap();
            assert!((0..=k).all(|j| f.contains(&j)), "lost a key after inserting {k}");
        }
        assert_eq!(f.stats().doublings, 3);
        assert!(f.memory_usage() > 0);
    }

    /// A reader thread keeps finding its keys while the main thread's inserts double the
    /// table under it (under Miri: no data race, no use of freed memory).
    #[test]
    fn a_reader_follows_the_table_across_doublings() {
        let f = CuckooFilter::builder().capacity(8).max_capacity(64).seed(2).build().unwrap();
        (0..6u64).for_each(|k| f.insert(&k).unwrap());
        std::thread::scope(|s| {
            let reader = s.spawn(|| (0..40).all(|_| (0..6u64).all(|k| f.contains(&k))));
            (100..140u64).for_each(|k| f.insert(&k).unwrap());
            assert!(reader.join().unwrap(), "a lookup missed a key across a doubling");
        });
        assert!(f.stats().doublings >= 2);
    }
}
