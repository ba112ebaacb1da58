//! The filter's current table, behind an epoch-protected atomic pointer.
//!
//! Lookups and writers load the pointer and work on the table it names; a doubling builds
//! a new table and swaps it in. The old table may still be in use by threads that loaded
//! the pointer before the swap, so it is handed to `crossbeam-epoch`, which frees it once
//! every thread pinned at the time of the swap has unpinned. Readers therefore never
//! block and never touch freed memory.
//!
//! A table that can never be swapped out needs no pin: the table of a fixed-size filter,
//! and the last table of a growable one (published by the doubling that reached
//! `max_capacity`, after which no doubling can happen). [`Current`] keeps a *settled* flag
//! saying so; readers that see it set read the pointer without pinning. Pinning is not
//! free: it ends with a full memory barrier, which keeps one lookup's cache misses from
//! overlapping the next one's (lookups of a 26 MiB table ran 0.63x as fast pinned as not,
//! on the project's 2-core machine).
//!
//! Why the unpinned read is safe: the flag is set with a `Release` store after the final
//! table was swapped in, so a reader whose `Acquire` load sees it set then loads that
//! table's pointer (there is no later one), and that table lives as long as the filter.
//!
//! Under loom, retired tables are leaked instead of freed and marked as reclaimed when the
//! epoch would have freed them; every access checks the mark, so the models detect a use
//! after free without undefined behaviour.
//!
//! This is the crate's only module with `unsafe` code beyond two hardware hints in
//! `primitive.rs`: it dereferences the epoch-protected pointer and retires swapped-out
//! tables.
#![allow(unsafe_code)]

use super::Tables;
use crate::primitive::{epoch, AtomicBool, Ordering};

/// A table as published: what the pointer points to.
struct Published {
    tables: Tables,
    /// Set when the epoch reclaims the table (loom only: the table is leaked instead).
    #[cfg(cuckoo_gate_loom)]
    reclaimed: crate::primitive::AtomicBool,
}

impl Published {
    fn new(tables: Tables) -> Self {
        Published {
            tables,
            #[cfg(cuckoo_gate_loom)]
            reclaimed: crate::primitive::AtomicBool::new(false),
        }
    }

    /// Panics (loom only) if this table was reclaimed: the caller used freed memory.
    #[inline]
    fn check_live(&self) {
        #[cfg(cuckoo_gate_loom)]
        assert!(!self.reclaimed.load(Ordering::SeqCst), "use after free: a reclaimed table was read");
    }
}

/// The pointer to the current table.
pub(crate) struct Current {
    pointer: epoch::Atomic<Published>,
    /// Whether the filter was built to grow.
    replaceable: bool,
    /// Set once the table can never be replaced again (from the start for a fixed-size
    /// filter, after the last allowed doubling for a growable one): readers skip the pin.
    settled: AtomicBool,
}

impl Current {
    /// Publishes `tables`; `replaceable` is false for a filter that never grows.
    pub(crate) fn new(tables: Tables, replaceable: bool) -> Self {
        let settled = !replaceable || tables.geometry().doublings_left() == 0;
        Current {
            pointer: epoch::Atomic::new(Published::new(tables)),
            replaceable,
            settled: AtomicBool::new(settled),
        }
    }

    /// Whether the table can ever be replaced.
    pub(crate) fn replaceable(&self) -> bool {
        self.replaceable
    }

    /// Runs `f` on the current table. Lock-free.
    #[inline]
    pub(crate) fn read<R>(&self, f: impl FnOnce(&Tables) -> R) -> R {
        if !self.settled.load(Ordering::Acquire) {
            let guard = epoch::pin();
            let shared = self.pointer.load(Ordering::Acquire, &guard);
            // SAFETY: the pointer is never null (set in `new`, only ever swapped for a new
            // allocation), and a swapped-out table is freed through the epoch only after
            // every thread that was pinned when it was swapped out, this one included while
            // `guard` lives, has unpinned.
            let published = unsafe { shared.deref() };
            let result = f(&published.tables);
            published.check_live();
            result
        } else {
            // SAFETY: settled, so the pointer loaded is that of the last table (see the
            // module docs), which is never swapped out and lives until `self` is dropped,
            // which cannot happen while `&self` is borrowed.
            let published = unsafe { self.pointer.load(Ordering::Acquire, epoch::unprotected()).deref() };
            let result = f(&published.tables);
            published.check_live();
            result
        }
    }

    /// Lets `grow` build a replacement from the current table: if it returns `Ok(Some)`,
    /// that table is published (with a `Release` store, so its contents are visible to
    /// every thread that loads it) and the old one is retired. The caller must be the only
    /// thread replacing tables (the filter's growth lock), or two replacements could be
    /// built from the same table.
    pub(crate) fn replace<E>(
        &self,
        grow: impl FnOnce(&Tables) -> Result<Option<Tables>, E>,
    ) -> Result<(), E> {
        debug_assert!(self.replaceable);
        let guard = epoch::pin();
        let shared = self.pointer.load(Ordering::Acquire, &guard);
        // SAFETY: as in `read`: non-null, and pinned by `guard`.
        let published = unsafe { shared.deref() };
        let Some(tables) = grow(&published.tables)? else {
            return Ok(());
        };
        published.check_live();
        let last = tables.geometry().doublings_left() == 0;
        let old = self.pointer.swap(epoch::Owned::new(Published::new(tables)), Ordering::AcqRel, &guard);
        debug_assert_eq!(old, shared, "tables replaced concurrently");
        if last {
            // After the swap: a reader that sees the flag loads the last table's pointer.
            self.settled.store(true, Ordering::Release);
        }
        retire(&guard, old);
        guard.flush();
        Ok(())
    }
}

/// Hands a swapped-out table to the epoch, which frees it once no thread can be reading it.
#[cfg(not(cuckoo_gate_loom))]
fn retire(guard: &epoch::Guard, old: epoch::Shared<'_, Published>) {
    // SAFETY: `old` was just swapped out, so no thread can load it any more; the ones that
    // loaded it earlier are pinned, and the epoch runs the destructor after they unpin.
    unsafe { guard.defer_destroy(old) }
}

/// Under loom: leaks the swapped-out table and marks it reclaimed when the epoch would
/// have freed it (at once with the deliberately broken `eager_free`).
#[cfg(cuckoo_gate_loom)]
fn retire(guard: &epoch::Guard, old: epoch::Shared<'_, Published>) {
    let old = old.as_raw() as usize;
    let reclaim = move || {
        // SAFETY: under loom retired tables are leaked, so the pointer stays valid.
        let published = unsafe { &*(old as *const Published) };
        published.reclaimed.store(true, Ordering::SeqCst);
    };
    if cfg!(cuckoo_gate_broken = "eager_free") {
        // Deliberately wrong (for the loom suite): reclaim at once, while readers that
        // loaded the old pointer may still be reading it.
        reclaim();
    } else {
        // SAFETY: the closure only touches the leaked (never freed) table.
        unsafe { guard.defer_unchecked(reclaim) }
    }
}

impl Drop for Current {
    fn drop(&mut self) {
        // SAFETY: `&mut self`, so no other thread can load the pointer any more; earlier
        // tables were retired to the epoch and are not reachable from it.
        unsafe { drop(self.pointer.load(Ordering::Relaxed, epoch::unprotected()).into_owned()) }
    }
}

impl std::fmt::Debug for Current {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Current")
            .field("replaceable", &self.replaceable)
            .field("settled", &self.settled.load(Ordering::Relaxed))
            .finish_non_exhaustive()
    }
}
