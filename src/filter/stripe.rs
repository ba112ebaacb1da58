//! Lock stripes: one seqlock version word per group of buckets; and the move stamps that
//! lookups validate, one per class of fingerprints ([`MoveStamp`]).
//!
//! A stripe's version is even while no writer holds it and odd while one does.
//!
//! * Writers: [`Stripe::lock`] swaps even → odd with `Acquire` (so the writer sees what the
//!   last holder wrote), every data store under the lock is a `Release` store, and
//!   [`Stripe::unlock`] stores odd + 1 with `Release`.
//! * Readers (`count`): [`Stripe::optimistic_read`] loads the version with `Acquire` (and
//!   gives up if it is odd), reads the data with `Relaxed` loads, and checks
//!   [`Stripe::unchanged_since`], which issues `fence(Acquire)` and re-loads the version
//!   (as crossbeam's `SeqLock::validate_read` does). A lookup (`contains`) validates its
//!   fingerprint class's [`MoveStamp`] instead, in the same way, and skips the check when
//!   it found its key: a value read was stored by a writer, so only "absent" needs it.
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
//! it (items stored in its buckets, removals), so writers never contend on a global
//! counter; readers of the totals sum over the stripes. Relocations are counted by the
//! [`MoveStamp`]s, one per fingerprint class, in an array of their own: lookups read them,
//! and only relocations write them, so a lookup's stamp shares no cache line with the
//! words that inserts and removes write. The counters wrap at 2^64 rather
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

/// Bits of a [`MoveStamp`] counting what is in progress; the bits above count the
/// relocations begun.
const IN_PROGRESS_BITS: u32 = 20;

/// What [`MoveStamp::begin`] adds: one relocation begun, one thing in progress.
const MOVE_BEGUN: u64 = 1 << IN_PROGRESS_BITS | 1;

/// The stamp of one fingerprint class, which a lookup validates (see `table.rs`, "One
/// stamp per lookup"). Its low [`IN_PROGRESS_BITS`] count the relocations of the class's
/// entries in progress (and a `clear`), the bits above the relocations begun; only a
/// relocation or a `clear` changes it, never an insert or a remove.
///
/// Several relocations of one class may run at once (they hold different stripes), so the
/// stamp is a counter updated by read-modify-writes, not a lock. A reader's stamp is one
/// with nothing in progress; if it still reads the same after the reader's loads, no
/// relocation of the class began meanwhile, and none was in progress before. Why that
/// validates, for a relocation that moved an entry of the reader's key between its loads:
/// the reader read a slot that the relocation stored (a `Release` store after the stamp's
/// [`MoveStamp::begin`]) and then issued its acquire fence, so its re-load sees that begin
/// or a later value, whose count of relocations begun differs from its stamp's. If instead
/// its stamp was taken after the relocation's [`MoveStamp::end`] (a `Release`
/// read-modify-write, which every later one continues), its `Acquire` load synchronises
/// with it, and its loads see the relocation's stores.
///
/// A `clear` marks itself in progress and then done, which leaves the stamp as it was: a
/// reader that validates across a whole clear may answer "absent", which is true right
/// after the clear; one that overlaps only part of it sees it in progress and retries.
#[derive(Debug)]
pub(crate) struct MoveStamp(AtomicU64);

impl MoveStamp {
    pub(crate) fn new() -> Self {
        MoveStamp(AtomicU64::new(0))
    }

    /// Starts an optimistic read: `None` while a relocation of the class (or a `clear`)
    /// is in progress.
    #[inline]
    pub(crate) fn optimistic_read(&self) -> Option<Stamp> {
        let stamp = self.read();
        Self::settled(stamp).then_some(stamp)
    }

    /// Starts an optimistic read whose reader checks [`MoveStamp::settled`] later: a
    /// reader that finds its key needs no stamp, so it tests the stamp only on a miss.
    #[inline]
    pub(crate) fn read(&self) -> Stamp {
        Stamp(self.0.load(Ordering::Acquire))
    }

    /// Whether `stamp`, from [`MoveStamp::read`], can start an optimistic read: nothing of
    /// the class was in progress when it was taken.
    #[inline]
    pub(crate) fn settled(stamp: Stamp) -> bool {
        stamp.0 & ((1 << IN_PROGRESS_BITS) - 1) == 0
    }

    /// Ends an optimistic read: whether nothing of the class moved since `stamp` was
    /// taken. The fence orders the caller's data loads before the stamp's re-load.
    #[inline]
    pub(crate) fn unchanged_since(&self, stamp: Stamp) -> bool {
        fence(Ordering::Acquire);
        self.0.load(Ordering::Relaxed) == stamp.0
    }

    /// Marks a relocation of one of the class's entries as begun; the caller holds the
    /// stripes of both buckets, and its stores that follow are `Release` stores.
    #[inline]
    pub(crate) fn begin(&self) {
        self.0.fetch_add(MOVE_BEGUN, Ordering::Relaxed);
    }

    /// Marks the relocation begun by [`MoveStamp::begin`] as done.
    #[inline]
    pub(crate) fn end(&self) {
        self.0.fetch_sub(1, Ordering::Release);
    }

    /// Marks a `clear` (which holds every stripe) as in progress.
    pub(crate) fn hold(&self) {
        self.0.fetch_add(1, Ordering::Relaxed);
    }

    /// Marks the `clear` held by [`MoveStamp::hold`] as done.
    pub(crate) fn release(&self) {
        self.0.fetch_sub(1, Ordering::Release);
    }

    /// Relocations of the class's entries begun so far (wrapping at 2^44).
    pub(crate) fn begun(&self) -> u64 {
        self.0.load(Ordering::Relaxed) >> IN_PROGRESS_BITS
    }
}

/// One lock stripe.
#[derive(Debug)]
pub(crate) struct Stripe {
    version: AtomicU64,
    /// Occupied slots in this stripe's buckets. Written only under the lock.
    items: AtomicUsize,
    /// Fingerprints removed from this stripe's buckets by `remove` or `clear`. With
    /// `items`, gives the monotonic insert count: inserts = items + removes. Written only
    /// under the lock.
    removes: AtomicU64,
}

impl Stripe {
    pub(crate) fn new() -> Self {
        Stripe { version: AtomicU64::new(0), items: AtomicUsize::new(0), removes: AtomicU64::new(0) }
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
}
