//! The packed table: buckets bit-packed into atomic words, guarded by seqlock stripes.
//!
//! Bucket `i` occupies bits `[i * 4s, (i + 1) * 4s)` of the word array, where `s` is the
//! slot width; a bucket may straddle a word boundary, so no bits are wasted for widths
//! such as 12 or 13. Buckets are grouped by [`GROUP`]: 16 buckets are exactly `s` words,
//! so a group never shares a word with another group, and a stripe is a set of whole
//! groups (`stripe = (i / 16) mod S`). Hence two writers holding different stripes never
//! write the same word, and a writer may update a slot with a plain load/modify/store.
//!
//! All words are atomics. Readers load them `Relaxed` inside a seqlock window (see
//! `stripe.rs`); writers store them `Release` while holding the stripe. Reading a bucket
//! loads two (rarely three) words starting at the bucket's first word; the array carries
//! two padding words so that the over-read never leaves it, and the bits read from a
//! neighbouring group are masked off.

use super::bucket::{Lanes, Word, SLOTS};
use super::hash::Geometry;
use super::stripe::{Frozen, Stripe};
use crate::primitive::{advise_huge_pages, fence, prefetch, release_pages, spin_hint, AtomicU64, Ordering};
use crate::snapshot::SnapshotError;

/// Buckets per stripe group: 16 buckets of 4 slots of `s` bits are exactly `s` words.
pub(crate) const GROUP: usize = 16;

/// Optimistic attempts before a reader takes the locks.
const OPTIMISTIC_TRIES: usize = if cfg!(cuckoo_gate_loom) { 2 } else { 16 };

/// The words after the last bucket that a bucket read may touch.
const PADDING_WORDS: usize = 2;

/// Counters summed over the stripes by [`Table::totals`].
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Totals {
    /// Stored fingerprints.
    pub(crate) items: usize,
    /// Fingerprints removed by `remove` and `clear`.
    pub(crate) removes: u64,
    /// Fingerprints moved by relocations.
    pub(crate) relocations: u64,
}

/// Buckets, stripes and the geometry that maps keys onto them.
#[derive(Debug)]
pub(crate) struct Table<W> {
    geometry: Geometry,
    lanes: Lanes<W>,
    words: Box<[AtomicU64]>,
    stripes: Box<[Stripe]>,
    stripe_mask: usize,
}

/// Bytes a table of this shape needs, or `None` on overflow.
pub(crate) fn table_bytes(geometry: Geometry, stripes: usize) -> Option<usize> {
    let words = word_count(geometry)?;
    words.checked_mul(8)?.checked_add(stripes.checked_mul(std::mem::size_of::<Stripe>())?)
}

/// Words a table of this shape holds, padding included, or `None` on overflow.
pub(crate) fn word_count(geometry: Geometry) -> Option<usize> {
    let bits = geometry.buckets().checked_mul(SLOTS * geometry.slot_bits() as usize)?;
    bits.div_ceil(64).checked_add(PADDING_WORDS)
}

impl<W: Word> Table<W> {
    /// An empty table; `Err` if the allocation is refused (the size is in `table_bytes`).
    /// `stripes` must be a power of two.
    pub(crate) fn new(geometry: Geometry, stripes: usize) -> Result<Self, ()> {
        debug_assert!(stripes.is_power_of_two());
        let words = word_count(geometry).ok_or(())?;
        let mut w = Vec::new();
        w.try_reserve_exact(words).map_err(|_| ())?;
        advise_huge_pages(w.spare_capacity_mut());
        w.extend((0..words).map(|_| AtomicU64::new(0)));
        let mut s = Vec::new();
        s.try_reserve_exact(stripes).map_err(|_| ())?;
        s.extend((0..stripes).map(|_| Stripe::new()));
        Ok(Table {
            geometry,
            lanes: Lanes::new(geometry.slot_bits()),
            words: w.into_boxed_slice(),
            stripes: s.into_boxed_slice(),
            stripe_mask: stripes - 1,
        })
    }

    pub(crate) fn geometry(&self) -> &Geometry {
        &self.geometry
    }

    pub(crate) fn lanes(&self) -> &Lanes<W> {
        &self.lanes
    }

    pub(crate) fn stripe_count(&self) -> usize {
        self.stripes.len()
    }

    /// Bytes held by the words and the stripes.
    pub(crate) fn memory_bytes(&self) -> usize {
        self.words.len() * std::mem::size_of::<AtomicU64>() + self.stripes_bytes()
    }

    /// Bytes held by the stripes.
    pub(crate) fn stripes_bytes(&self) -> usize {
        self.stripes.len() * std::mem::size_of::<Stripe>()
    }

    /// Releases the words of a table that a doubling retired (frozen, and no longer
    /// published): on Linux their pages go back to the OS and read as zero from then on.
    /// Whether the pages were released. Readers that may still read this table validate
    /// their reads against the table pointer (see `current.rs`); the `Release` fence here
    /// orders the swap before every word that reads zero. Under loom the release is
    /// modelled by storing zero into every word.
    pub(crate) fn release_pages(&self) -> bool {
        fence(Ordering::Release);
        if cfg!(cuckoo_gate_loom) {
            self.words.iter().for_each(|w| w.store(0, Ordering::Relaxed));
            return true;
        }
        release_pages(&self.words)
    }

    /// Stored fingerprints, summed over the stripes (a snapshot under concurrent writes).
    pub(crate) fn len(&self) -> usize {
        self.stripes.iter().map(Stripe::items).sum()
    }

    /// The stripes' counters, summed in one pass. Per stripe, removals are read before
    /// items, so an insert racing with this call can only raise `items + removes`.
    pub(crate) fn totals(&self) -> Totals {
        self.stripes.iter().fold(Totals::default(), |mut t, stripe| {
            t.removes = t.removes.wrapping_add(stripe.removes());
            t.items += stripe.items();
            t.relocations = t.relocations.wrapping_add(stripe.relocations());
            t
        })
    }

    #[inline]
    fn stripe_of(&self, bucket: usize) -> usize {
        (bucket / GROUP) & self.stripe_mask
    }

    /// Loads bucket `bucket` with `Relaxed` loads: consistent only inside a validated
    /// optimistic read or under the bucket's stripe lock.
    #[inline]
    pub(crate) fn load_bucket(&self, bucket: usize) -> W {
        let bucket_bits = self.lanes.bucket_bits();
        let bit = bucket * bucket_bits as usize;
        let (w, shift) = (bit / 64, (bit % 64) as u32);
        let words = &self.words[w..w + PADDING_WORDS + 1];
        let (w0, w1) = (words[0].load(Ordering::Relaxed), words[1].load(Ordering::Relaxed));
        W::window(w0, w1, || words[2].load(Ordering::Relaxed), shift, bucket_bits) & self.lanes.bucket_mask()
    }

    /// Starts loading bucket `bucket` into the cache (see [`prefetch`]): its first word, and
    /// the next, which holds the rest of the bucket when it straddles a boundary.
    #[inline]
    pub(crate) fn prefetch_bucket(&self, bucket: usize) {
        let word = bucket * self.lanes.bucket_bits() as usize / 64;
        prefetch(&self.words[word]);
        prefetch(&self.words[word + 1]);
    }

    /// Reads buckets `i1` and `i2` as of one instant and applies `f` to them.
    ///
    /// Lock-free while writers leave the two stripes alone: stamps are taken, the buckets
    /// loaded, the stamps re-checked, and the read retried if a writer came between. After
    /// [`OPTIMISTIC_TRIES`] failed attempts the reader takes both locks, so it cannot starve.
    /// If the table is being frozen (for a doubling or a snapshot) the locks are refused;
    /// frozen stripes do not change, so the optimistic reads then succeed as soon as both
    /// stripes are frozen.
    #[inline]
    pub(crate) fn read_pair<R>(&self, i1: usize, i2: usize, f: impl FnOnce(W, W) -> R) -> R {
        let (a, b) = (&self.stripes[self.stripe_of(i1)], &self.stripes[self.stripe_of(i2)]);
        loop {
            for _ in 0..OPTIMISTIC_TRIES {
                if let (Some(sa), Some(sb)) = (a.optimistic_read(), b.optimistic_read()) {
                    let (b1, b2) = (self.load_bucket(i1), self.load_bucket(i2));
                    #[cfg(not(cuckoo_gate_broken = "skip_validation"))]
                    {
                        fence(Ordering::Acquire);
                        if a.unchanged_since(sa) && b.unchanged_since(sb) {
                            return f(b1, b2);
                        }
                    }
                    #[cfg(cuckoo_gate_broken = "skip_validation")]
                    {
                        let _ = (sa, sb);
                        return f(b1, b2);
                    }
                }
                spin_hint();
            }
            if let Ok(locked) = self.lock_pair(i1, i2) {
                return f(locked.bucket(i1), locked.bucket(i2));
            }
        }
    }

    /// Locks the stripes of buckets `i1` and `i2` (once if they share one), lowest index
    /// first so that two writers can never wait on each other. Blocks while another writer
    /// holds either stripe. `Err(Frozen)`, holding nothing, if the table is frozen.
    pub(crate) fn lock_pair(&self, i1: usize, i2: usize) -> Result<Locked<'_, W>, Frozen> {
        let (x, y) = (self.stripe_of(i1), self.stripe_of(i2));
        let (first, second) = (x.min(y), x.max(y));
        self.stripes[first].lock()?;
        if second != first {
            if let Err(frozen) = self.stripes[second].lock() {
                self.stripes[first].unlock();
                return Err(frozen);
            }
        }
        Ok(Locked { table: self, first, second })
    }

    /// Locks every stripe in index order, then zeroes the table. Blocks until every writer
    /// in progress is done; optimistic readers overlapping it retry. `Err(Frozen)`,
    /// having changed nothing, if the table is frozen.
    pub(crate) fn clear(&self) -> Result<(), Frozen> {
        for (locked, stripe) in self.stripes.iter().enumerate() {
            if let Err(frozen) = stripe.lock() {
                self.stripes[..locked].iter().for_each(Stripe::unlock);
                return Err(frozen);
            }
        }
        for word in self.words.iter() {
            word.store(0, Ordering::Release);
        }
        for stripe in self.stripes.iter() {
            stripe.reset_items();
            stripe.unlock();
        }
        Ok(())
    }

    /// Freezes every stripe, in index order, waiting for the writer holding each. Afterwards
    /// no writer can change the table, and readers keep reading it lock-free.
    pub(crate) fn freeze(&self) {
        self.stripes.iter().for_each(Stripe::freeze);
    }

    /// Lets writers in again after [`Table::freeze`] (a snapshot has copied the table).
    pub(crate) fn thaw(&self) {
        self.stripes.iter().for_each(Stripe::thaw);
    }

    /// The words, padding included: a consistent copy while the table is frozen.
    pub(crate) fn copy_words(&self) -> Vec<u64> {
        self.words.iter().map(|word| word.load(Ordering::Relaxed)).collect()
    }

    /// A table holding `words`, as [`Table::copy_words`] gave them (read back from a
    /// snapshot), with `stripes` stripes, which count their items afresh. Checks that a
    /// table of this geometry could have written them: the count, zero bits after the last
    /// bucket, and every entry valid where it sits ([`Geometry::holds`]).
    pub(crate) fn from_words(
        geometry: Geometry,
        stripes: usize,
        words: &[u64],
    ) -> Result<Self, SnapshotError> {
        let used_bits = geometry.buckets() * SLOTS * geometry.slot_bits() as usize;
        let (full, rest) = (used_bits / 64, (used_bits % 64) as u32);
        if word_count(geometry) != Some(words.len()) {
            return Err(SnapshotError::inconsistent("word count does not match the geometry"));
        }
        let tail_in_use = if rest == 0 { 0 } else { words[full] >> rest };
        if tail_in_use != 0 || words[full + 1..].iter().any(|&w| w != 0) {
            return Err(SnapshotError::inconsistent("bits set after the last bucket"));
        }
        let bytes = table_bytes(geometry, stripes).unwrap_or(usize::MAX);
        let table = Table::new(geometry, stripes).map_err(|()| SnapshotError::OutOfMemory { bytes })?;
        for (word, &value) in table.words.iter().zip(words) {
            word.store(value, Ordering::Relaxed);
        }
        for bucket in 0..geometry.buckets() {
            let contents = table.load_bucket(bucket);
            for lane in 0..SLOTS {
                let value = table.lanes.lane(contents, lane);
                if value != 0 {
                    if !geometry.holds(value) {
                        return Err(SnapshotError::inconsistent("an entry that cannot sit in its bucket"));
                    }
                    table.stripes[table.stripe_of(bucket)].add_items(1);
                }
            }
        }
        Ok(table)
    }

    /// Fills the empty table `new` (this table doubled, not yet visible to any other
    /// thread, with slots one bit narrower) with this frozen table's entries: each bucket
    /// splits into its two children (see `hash.rs`), so nothing is relocated and nothing
    /// can overflow. The counters carry over (removals and relocations in the new table's
    /// first stripe).
    pub(crate) fn split_into<N: Word>(&self, new: &Table<N>) {
        debug_assert_eq!(new.geometry, self.geometry.doubled());
        for bucket in 0..self.geometry.buckets() {
            let mut next_lane = [0usize; 2];
            let contents = self.load_bucket(bucket);
            for lane in 0..SLOTS {
                let value = self.lanes.lane(contents, lane);
                if value != 0 {
                    let (child, value) = self.geometry.split(bucket, value);
                    new.store_lane(child, next_lane[child & 1], value);
                    next_lane[child & 1] += 1;
                    new.stripes[new.stripe_of(child)].add_items(1);
                }
            }
        }
        new.carry_counters(self.totals());
    }

    /// Adds the removals and relocations of `totals` (a predecessor's, or a snapshot's) to
    /// this table's first stripe. The table is not yet shared.
    pub(crate) fn carry_counters(&self, totals: Totals) {
        self.stripes[0].add_removes(totals.removes);
        self.stripes[0].add_relocations(totals.relocations);
    }

    /// Writes `value` into slot `lane` of `bucket`. The caller holds the bucket's stripe.
    fn store_lane(&self, bucket: usize, lane: usize, value: u64) {
        let slot_bits = self.lanes.slot_bits();
        let bit = bucket * self.lanes.bucket_bits() as usize + lane * slot_bits as usize;
        let (w, shift) = (bit / 64, (bit % 64) as u32);
        let mask = self.lanes.slot_mask();
        let word = &self.words[w];
        let old = word.load(Ordering::Relaxed);
        word.store((old & !(mask << shift)) | (value << shift), Ordering::Release);
        if shift + slot_bits > 64 {
            let done = 64 - shift;
            let word = &self.words[w + 1];
            let old = word.load(Ordering::Relaxed);
            word.store((old & !(mask >> done)) | (value >> done), Ordering::Release);
        }
    }
}

#[cfg(cuckoo_gate_broken = "unstamped_remove")]
impl<W: Word> Table<W> {
    /// Deliberately wrong (for the loom suite): a remove that skips the stripe lock, so no
    /// stamp changes, and keeps the bucket compact by moving its last entry into the hole,
    /// clearing it first. A reader between the two stores misses the moved key, and its
    /// validation cannot notice.
    pub(crate) fn remove_unstamped(&self, bucket: usize, lane: usize) {
        let contents = self.load_bucket(bucket);
        let last = (0..SLOTS).rev().find(|&l| self.lanes.lane(contents, l) != 0).unwrap_or(lane);
        let moved = self.lanes.lane(contents, last);
        self.store_lane(bucket, last, 0);
        if last != lane {
            self.store_lane(bucket, lane, moved);
        }
        self.stripes[self.stripe_of(bucket)].add_items(-1);
    }
}

/// Proof that the stripes of one or two buckets are locked; every write goes through it.
/// Dropping it unlocks.
pub(crate) struct Locked<'a, W: Word> {
    table: &'a Table<W>,
    first: usize,
    second: usize,
}

impl<W: Word> Locked<'_, W> {
    fn holds(&self, bucket: usize) -> bool {
        let stripe = self.table.stripe_of(bucket);
        stripe == self.first || stripe == self.second
    }

    /// Bucket `bucket`, which this guard locks.
    #[inline]
    pub(crate) fn bucket(&self, bucket: usize) -> W {
        debug_assert!(self.holds(bucket));
        self.table.load_bucket(bucket)
    }

    /// Stores `value` in the empty slot `lane` of `bucket`.
    pub(crate) fn put(&self, bucket: usize, lane: usize, value: u64) {
        debug_assert!(self.holds(bucket));
        debug_assert_eq!(self.table.lanes.lane(self.table.load_bucket(bucket), lane), 0);
        self.table.store_lane(bucket, lane, value);
        self.table.stripes[self.table.stripe_of(bucket)].add_items(1);
    }

    /// Empties the occupied slot `lane` of `bucket`.
    pub(crate) fn take(&self, bucket: usize, lane: usize) {
        debug_assert!(self.holds(bucket));
        debug_assert_ne!(self.table.lanes.lane(self.table.load_bucket(bucket), lane), 0);
        self.table.store_lane(bucket, lane, 0);
        self.table.stripes[self.table.stripe_of(bucket)].add_items(-1);
    }

    /// Empties the occupied slot `lane` of `bucket` for a `remove`, and counts it.
    pub(crate) fn remove(&self, bucket: usize, lane: usize) {
        self.take(bucket, lane);
        self.table.stripes[self.table.stripe_of(bucket)].add_removes(1);
    }

    /// Moves the entry in slot `from_lane` of `from` (stored as `value`) to the empty slot
    /// `to_lane` of `to`, where it is stored as `moved`: the copy is written before the
    /// source is cleared.
    pub(crate) fn relocate(&self, from: usize, from_lane: usize, to: usize, to_lane: usize, moved: u64) {
        self.put(to, to_lane, moved);
        self.take(from, from_lane);
        self.table.stripes[self.table.stripe_of(from)].add_relocations(1);
    }
}

impl<W: Word> Drop for Locked<'_, W> {
    fn drop(&mut self) {
        if self.second != self.first {
            self.table.stripes[self.second].unlock();
        }
        self.table.stripes[self.first].unlock();
    }
}
