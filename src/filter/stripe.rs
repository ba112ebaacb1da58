//! Lock stripes: one seqlock version word per group of buckets.
//!
//! A stripe's version is even while no writer holds it and odd while one does.
//!
//! * Writers: [`Stripe::lock`] swaps even → odd with `Acquire` (so the writer sees what the
//!   last holder wrote), every data store under the lock is a `Release` store, and
//!   [`Stripe::unlock`] stores odd + 1 with `Release`.
//! * Readers: [`Stripe::optimistic_read`] loads the version with `Acquire` (and gives up if
//!   it is odd), reads the data with `Relaxed` loads, and checks
//!   [`Stripe::unchanged_since`], which issues `fence(Acquire)` and re-loads the version
//!   (as crossbeam's `SeqLock::validate_read` does). A lookup that found its key skips the
//!   check: a value read was stored by a writer, so only "absent" needs the validation.
//!
//! Why that validates: if a reader's relaxed load returns a value that a writer stored,
//! that store is a `Release` store, so the reader's later acquire fence synchronises with
//! it; the writer's odd-making swap happened before the store, hence before the reader's
//! re-load of the version, which must then see the odd value or a later one and fail.
//! (crossbeam's `SeqLock` uses a `Release` fence after the swap instead of `Release`
//! stores; loom can model only `Acquire` fences, and on x86 a `Release` store is a plain
//! store, so this form costs nothing and can be model-checked.)
//!
//! # Freezing
//!
//! When the filter doubles, the grower locks each stripe of the old table in turn (waiting
//! for the writer holding it, if any) and unlocks it with the [`FROZEN`] bit set. A frozen
//! stripe is even, so optimistic readers keep reading it, and it never changes again, so
//! their validation always succeeds; [`Stripe::lock`] refuses it, telling the writer to
//! move to the new table. Once every stripe is frozen the old table is immutable.
//!
//! A snapshot freezes the same way, copies the immutable table, and then thaws every
//! stripe ([`Stripe::thaw`]). Writers that met a frozen stripe meanwhile wait on the
//! filter's growth lock, which the snapshot holds, and redo their operation on the same
//! table once it is released.
//!
//! Besides the version, each stripe keeps the counters that writers update while they hold
//! it (items stored in its buckets, relocations), so writers never contend on a global
//! counter; readers of the totals sum over the stripes. The counters wrap at 2^64 rather
//! than overflow (unreachable by counting, but a restored snapshot may start them anywhere).

use crate::primitive::{fence, AtomicU64, AtomicUsize, Backoff, Ordering};

/// Version bit marking a stripe of a retired table (see the module docs).
const FROZEN: u64 = 1 << 63;

/// [`Stripe::lock`] refused: the table is being replaced by a larger one, or copied by a
/// snapshot.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Frozen;

/// A version stamp taken by an optimistic reader.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Stamp(u64);

/// One lock stripe.
#[derive(Debug)]
pub(crate) struct Stripe {
    version: AtomicU64,
    /// Occupied slots in this stripe's buckets. Written only under the lock.
    items: AtomicUsize,
    /// Fingerprints moved out of this stripe's buckets. Written only under the lock.
    relocations: AtomicU64,
    /// Fingerprints removed from this stripe's buckets by `remove` or `clear`. With
    /// `items`, gives the monotonic insert count: inserts = items + removes. Written only
    /// under the lock.
    removes: AtomicU64,
}

impl Stripe {
    pub(crate) fn new() -> Self {
        Stripe {
            version: AtomicU64::new(0),
            items: AtomicUsize::new(0),
            relocations: AtomicU64::new(0),
            removes: AtomicU64::new(0),
        }
    }

    /// Starts an optimistic read: `None` while a writer holds the stripe.
    #[inline]
    pub(crate) fn optimistic_read(&self) -> Option<Stamp> {
        let version = self.version.load(Ordering::Acquire);
        (version & 1 == 0).then_some(Stamp(version))
    }

    /// Ends an optimistic read: whether no writer has held the stripe since `stamp` was
    /// taken. The fence orders the caller's data loads before the version's re-load.
    #[inline]
    pub(crate) fn unchanged_since(&self, stamp: Stamp) -> bool {
        fence(Ordering::Acquire);
        self.version.load(Ordering::Relaxed) == stamp.0
    }

    /// Takes the stripe's write lock, spinning and then yielding while another writer has
    /// it. Every successful `lock` must be paired with one [`Stripe::unlock`].
    ///
    /// `Err(Frozen)` if the stripe is frozen (or becomes frozen while this waits): its table
    /// is being retired or copied, and the caller must wait for the growth lock and retry.
    #[inline]
    pub(crate) fn lock(&self) -> Result<(), Frozen> {
        if self.try_lock()? {
            return Ok(());
        }
        self.lock_contended()
    }

    /// One attempt at [`Stripe::lock`]: `Ok(false)` if a writer holds the stripe or took it
    /// first.
    #[inline]
    fn try_lock(&self) -> Result<bool, Frozen> {
        let version = self.version.load(Ordering::Relaxed);
        if version & (FROZEN | 1) == 0 {
            Ok(self
                .version
                .compare_exchange(version, version + 1, Ordering::Acquire, Ordering::Relaxed)
                .is_ok())
        } else if version & FROZEN != 0 {
            Err(Frozen)
        } else {
            Ok(false)
        }
    }

    /// [`Stripe::lock`] once its first attempt failed: waits out the writer, out of line so
    /// that the uncontended path carries none of the backoff's state.
    #[cold]
    #[inline(never)]
    fn lock_contended(&self) -> Result<(), Frozen> {
        let mut backoff = Backoff::new();
        while !self.try_lock()? {
            backoff.snooze();
        }
        Ok(())
    }

    /// Locks the stripe (waiting for its writer) and unlocks it frozen: no writer can take
    /// it again, and readers see a stable even version. Called by the grower or a
    /// snapshot, which hold the filter's growth lock.
    pub(crate) fn freeze(&self) {
        let locked = self.lock();
        debug_assert!(locked.is_ok(), "a stripe frozen twice");
        let version = self.version.load(Ordering::Relaxed);
        self.version.store((version + 1) | FROZEN, Ordering::Release);
    }

    /// Undoes [`Stripe::freeze`] (a snapshot is done copying): writers may lock the stripe
    /// again. The version stays even and moves on, so no reader's stamp is fooled.
    pub(crate) fn thaw(&self) {
        let version = self.version.load(Ordering::Relaxed);
        debug_assert!(version & FROZEN != 0, "thaw of a stripe that is not frozen");
        self.version.store(version & !FROZEN, Ordering::Release);
    }

    /// Releases the write lock taken by [`Stripe::lock`].
    #[inline]
    pub(crate) fn unlock(&self) {
        let version = self.version.load(Ordering::Relaxed);
        debug_assert!(version & 1 == 1, "unlock of a stripe that is not locked");
        self.version.store(version + 1, Ordering::Release);
    }

    /// Adds `delta` (two's complement) to the item count; the caller holds the lock.
    #[inline]
    pub(crate) fn add_items(&self, delta: isize) {
        let items = self.items.load(Ordering::Relaxed);
        self.items.store(items.wrapping_add_signed(delta), Ordering::Relaxed);
    }

    /// Counts `n` relocations; the caller holds the lock (or the table is not yet shared).
    #[inline]
    pub(crate) fn add_relocations(&self, n: u64) {
        let relocations = self.relocations.load(Ordering::Relaxed);
        self.relocations.store(relocations.wrapping_add(n), Ordering::Relaxed);
    }

    /// Counts `n` removals; the caller holds the lock.
    #[inline]
    pub(crate) fn add_removes(&self, n: u64) {
        let removes = self.removes.load(Ordering::Relaxed);
        self.removes.store(removes.wrapping_add(n), Ordering::Relaxed);
    }

    /// Empties the item count into the removal count (for `clear`); the caller holds the lock.
    pub(crate) fn reset_items(&self) {
        self.add_removes(self.items() as u64);
        self.items.store(0, Ordering::Relaxed);
    }

    #[inline]
    pub(crate) fn removes(&self) -> u64 {
        self.removes.load(Ordering::Relaxed)
    }

    #[inline]
    pub(crate) fn items(&self) -> usize {
        self.items.load(Ordering::Relaxed)
    }

    #[inline]
    pub(crate) fn relocations(&self) -> u64 {
        self.relocations.load(Ordering::Relaxed)
    }
}
