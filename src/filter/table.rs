//! The packed table: slots bit-packed into atomic words, guarded by seqlock stripes.
//!
//! Slot `j` occupies bits `[j * s, (j + 1) * s)` of the word array, where `s` is the slot
//! width; a bucket (4 slots, or a window of 2, see `bucket.rs`) may straddle a word
//! boundary, so no bits are wasted for widths such as 12 or 13. Slots are grouped by
//! [`GROUP_SLOTS`](super::bucket::GROUP_SLOTS): 64 slots are exactly `s` words, so a group never shares a word with
//! another group; no bucket spans two groups, and a stripe is a set of whole groups
//! (`stripe = group mod S`). Hence two writers holding different stripes never write the
//! same word, and a writer may update a slot with a plain load/modify/store.
//!
//! All words are atomics. Readers load them `Relaxed` inside a seqlock read section (see
//! `stripe.rs`); writers store them `Release` while holding the stripe. Reading a bucket
//! loads two (rarely three) words starting at the bucket's first word; the array carries
//! two padding words so that the over-read never leaves it, and the bits read from a
//! neighbouring group are masked off.
//!
//! # One stamp per lookup
//!
//! A lookup (`holds_either`) validates one stamp, not its two buckets' stripes: the
//! [`MoveStamp`] of its fingerprint's class (`fp mod S` for `S` stripes). Of all writes,
//! only a relocation can make a present key look absent: an insert or a remove changes
//! other slots than the key's entries (a lookup that misses a key being inserted, or
//! finds one being removed, is ordered before that write), and a word written beside the
//! key's slot keeps the key's bits, so a read torn by it still sees the key. A relocation
//! moves one entry, whose fingerprint it knows, so it marks that class's stamp around
//! the move; a lookup of any key with the same fingerprint class then retries. Inserts
//! and removes leave the stamps alone, so lookups do not retry for them, and a lookup
//! reads one stamp, both buckets, and the stamp again.
//!
//! Why not a geometry in which a key's two buckets share a stripe (so the stripe's
//! version would be the one stamp): a key's entries could then never leave their stripe,
//! so each stripe would be an independent cuckoo table, and the first refused insert
//! would come when the fullest one fills. Simulated with the filter's placement and path
//! search (random keys; load at the first refusal, seeds averaged): at 76,843 buckets
//! (`bulk_insert_and_query 200000`'s table) 0.9745 for one class, 0.9706 for 4, 0.9602
//! for 16, 0.8140 for 1024 (the default stripe count); at 264 buckets (1,000 items) 0.9773
//! for one, 0.9447 for 2; at 263,158 (1M items) 0.9727, 0.9664 for 16, 0.8921 for 1024.
//! Fingerprint classes leave the placement as it was.
//!
//! `count` (`read_pair`) still reads both buckets as of one instant, validated against
//! both stripes' versions, which every write changes.
//!
//! The slots hold lane values (fingerprint and choice bit, see `hash.rs`). A table that
//! may still double keeps each slot's unspent extension bits in a second array, `ext`,
//! packed the same way (`r` bits per slot, so a group is `r` words). Lookups never read
//! it: it is written and read only under the slot's stripe lock, or in a frozen table, so
//! its loads and stores are `Relaxed`, ordered by the lock.

use super::bucket::{Lanes, Shape, Windows, Word, SLOTS};
use super::hash::{Geometry, Layout, Probe};
use super::stripe::{Frozen, MoveStamp, Stripe};
use crate::broken;
use crate::primitive::{
    advise_huge_pages, fence, prefetch_at, release_pages, spin_hint, AtomicU64, HintFlag, Ordering,
};
use crate::snapshot::SnapshotError;

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
pub(crate) struct Table<S: Shape> {
    geometry: Geometry,
    lanes: Lanes<S>,
    words: Box<[AtomicU64]>,
    /// Unspent extension bits, `geometry.doublings_left()` per slot.
    ext: Box<[AtomicU64]>,
    /// A power of two of them.
    stripes: Box<[Stripe]>,
    /// `stripes.len() - 1`, also the mask of a fingerprint's class (see [`Table::stamp_of`]).
    stripe_mask: usize,
    /// One per fingerprint class (as many as stripes): the stamps lookups validate, which
    /// also count the relocations.
    stamps: Box<[MoveStamp]>,
    /// Relocations counted before this table (a predecessor's, or a snapshot's); those of
    /// this table are counted by its move stamps.
    relocations_carried: AtomicU64,
    /// Set when a full search for a cuckoo path failed and nothing has been removed since:
    /// the table is at its load threshold, and inserts search with a small budget (a
    /// refused insert then costs microseconds, not a full search). See `relocate.rs`.
    pub(crate) crowded: HintFlag,
}

/// Bytes a table of this shape needs, or `None` on overflow.
pub(crate) fn table_bytes(geometry: Geometry, stripes: usize) -> Option<usize> {
    let words = words_for(geometry, geometry.lane_bits(), PADDING_WORDS)?.checked_add(words_for(
        geometry,
        geometry.doublings_left(),
        0,
    )?)?;
    let per_stripe = std::mem::size_of::<Stripe>() + std::mem::size_of::<MoveStamp>();
    words.checked_mul(8)?.checked_add(stripes.checked_mul(per_stripe)?)
}

/// Words of a snapshot image of a table of this shape ([`Table::image`]: whole slots,
/// padding included), or `None` on overflow.
pub(crate) fn image_word_count(geometry: Geometry) -> Option<usize> {
    words_for(geometry, geometry.slot_bits(), PADDING_WORDS)
}

/// Words holding `bits` bits for every slot of `geometry`, plus `padding`.
fn words_for(geometry: Geometry, bits: u32, padding: usize) -> Option<usize> {
    let total = geometry.slots().checked_mul(bits as usize)?;
    total.div_ceil(64).checked_add(padding)
}

/// An empty array of `len` atomic words, `Err` if the allocation is refused.
fn atomic_words(len: usize) -> Result<Box<[AtomicU64]>, ()> {
    let mut w = Vec::new();
    w.try_reserve_exact(len).map_err(|_| ())?;
    advise_huge_pages(w.spare_capacity_mut());
    w.extend((0..len).map(|_| AtomicU64::new(0)));
    Ok(w.into_boxed_slice())
}

/// The `bits`-bit field (`1 <= bits <= 32`) at bit `at` of the words that `word(i)`
/// reads: of the atomic words of a table, or of a snapshot image.
fn field(at: usize, bits: u32, word: impl Fn(usize) -> u64) -> u64 {
    let (w, shift) = (at / 64, (at % 64) as u32);
    let mut value = word(w) >> shift;
    if shift + bits > 64 {
        value |= word(w + 1) << (64 - shift);
    }
    value & ((1 << bits) - 1)
}

/// Writes `value` into the `bits`-bit field (`1 <= bits <= 32`) at bit `at` of the words
/// that `word(i)` gives: of the table's lanes, or of its extension bits. The caller holds
/// the stripe of the field's words.
#[inline]
fn store_field<'w>(word: impl Fn(usize) -> &'w AtomicU64, at: usize, bits: u32, value: u64, order: Ordering) {
    let (w, shift) = (at / 64, (at % 64) as u32);
    let mask = (1u64 << bits) - 1;
    let first = word(w);
    first.store((first.load(Ordering::Relaxed) & !(mask << shift)) | (value << shift), order);
    if shift + bits > 64 {
        let (done, second) = (64 - shift, word(w + 1));
        second.store((second.load(Ordering::Relaxed) & !(mask >> done)) | (value >> done), order);
    }
}

/// ORs `value` (`bits` bits wide) into the zeroed field at bit `at` of `words`.
fn put_field(words: &mut [u64], at: usize, bits: u32, value: u64) {
    let (w, shift) = (at / 64, (at % 64) as u32);
    words[w] |= value << shift;
    if shift + bits > 64 {
        words[w + 1] |= value >> (64 - shift);
    }
}

impl<S: Shape> Table<S> {
    /// An empty table; `Err` if the allocation is refused (the size is in `table_bytes`).
    /// `stripes` must be a power of two.
    pub(crate) fn new(geometry: Geometry, stripes: usize) -> Result<Self, ()> {
        debug_assert!(stripes.is_power_of_two());
        debug_assert_eq!(S::WINDOWED, geometry.layout() == Layout::Windows);
        let words = atomic_words(words_for(geometry, geometry.lane_bits(), PADDING_WORDS).ok_or(())?)?;
        let ext = atomic_words(words_for(geometry, geometry.doublings_left(), 0).ok_or(())?)?;
        let mut s = Vec::new();
        s.try_reserve_exact(stripes).map_err(|_| ())?;
        s.extend((0..stripes).map(|_| Stripe::new()));
        let mut stamps = Vec::new();
        stamps.try_reserve_exact(stripes).map_err(|_| ())?;
        stamps.extend((0..stripes).map(|_| MoveStamp::new()));
        Ok(Table {
            geometry,
            lanes: Lanes::new(geometry.lane_bits()),
            words,
            ext,
            stripe_mask: stripes - 1,
            stripes: s.into_boxed_slice(),
            stamps: stamps.into_boxed_slice(),
            relocations_carried: AtomicU64::new(0),
            crowded: HintFlag::new(false),
        })
    }

    pub(crate) fn geometry(&self) -> &Geometry {
        &self.geometry
    }

    pub(crate) fn lanes(&self) -> &Lanes<S> {
        &self.lanes
    }

    /// Where the key with hash `hash` goes.
    #[inline]
    pub(crate) fn probe(&self, hash: u64) -> Probe {
        self.geometry.probe_as(hash, S::WINDOWED)
    }

    pub(crate) fn stripe_count(&self) -> usize {
        self.stripes.len()
    }

    /// Bytes held by the words and the stripes.
    pub(crate) fn memory_bytes(&self) -> usize {
        (self.words.len() + self.ext.len()) * std::mem::size_of::<AtomicU64>() + self.stripes_bytes()
    }

    /// Bytes held by the stripes and the move stamps.
    pub(crate) fn stripes_bytes(&self) -> usize {
        self.stripes.len() * std::mem::size_of::<Stripe>()
            + self.stamps.len() * std::mem::size_of::<MoveStamp>()
    }

    /// Releases the words of a table that a doubling retired (frozen, and no longer
    /// published): on Linux their pages go back to the OS and read as zero from then on.
    /// Returns the bytes the table still holds. Readers that may still read this table
    /// validate their reads against the table pointer (see `current.rs`); the `Release`
    /// fence here orders the swap before every word that reads zero. Under loom the
    /// release is modelled by storing zero into every word.
    pub(crate) fn release_pages(&self) -> usize {
        fence(Ordering::Release);
        if cfg!(cuckoo_gate_loom) {
            self.words.iter().chain(self.ext.iter()).for_each(|w| w.store(0, Ordering::Relaxed));
            return self.stripes_bytes();
        }
        let held = |words: &[AtomicU64]| if release_pages(words) { 0 } else { std::mem::size_of_val(words) };
        self.stripes_bytes() + held(&self.words) + held(&self.ext)
    }

    /// Stored fingerprints, summed over the stripes (a snapshot under concurrent writes).
    pub(crate) fn len(&self) -> usize {
        self.stripes.iter().map(Stripe::items).sum()
    }

    /// The stripes' counters, summed in one pass. Per stripe, removals are read before
    /// items, so an insert racing with this call can only raise `items + removes`.
    pub(crate) fn totals(&self) -> Totals {
        let carried =
            Totals { relocations: self.relocations_carried.load(Ordering::Relaxed), ..Totals::default() };
        let totals = self.stripes.iter().fold(carried, |mut t, stripe| {
            t.removes = t.removes.wrapping_add(stripe.removes());
            t.items += stripe.items();
            t
        });
        self.stamps.iter().fold(totals, |mut t, stamp| {
            t.relocations = t.relocations.wrapping_add(stamp.begun());
            t
        })
    }

    /// The stripe of `bucket`.
    #[inline]
    pub(crate) fn stripe(&self, bucket: usize) -> &Stripe {
        self.stripe_at(self.stripe_of(bucket))
    }

    /// Stripe number `stripe`, which [`Table::stripe_of`] gave.
    #[inline]
    #[allow(unsafe_code)]
    fn stripe_at(&self, stripe: usize) -> &Stripe {
        debug_assert!(stripe < self.stripes.len());
        // SAFETY: `stripe_of` masks with `stripe_mask`, which `Table::new` sets to
        // `stripes.len() - 1` for a power-of-two count that never changes: any `bucket`
        // gives an index in range.
        unsafe { self.stripes.get_unchecked(stripe) }
    }

    #[inline]
    fn stripe_of(&self, bucket: usize) -> usize {
        (bucket / S::PER_GROUP) & self.stripe_mask
    }

    /// The move stamp of the entries with lane value `value` (whichever their choice bit
    /// and offset): the stamp of their fingerprint's class.
    #[inline]
    #[allow(unsafe_code)]
    pub(crate) fn stamp_of(&self, value: u64) -> &MoveStamp {
        let class = (value >> (1 + S::WINDOWED as u32)) as usize & self.stripe_mask;
        debug_assert!(class < self.stamps.len());
        // SAFETY: `class` is masked with `stripe_mask`, which `Table::new` sets to
        // `stamps.len() - 1` (as many stamps as stripes, a power of two) and never changes.
        unsafe { self.stamps.get_unchecked(class) }
    }

    /// Loads bucket `bucket` with `Relaxed` loads: consistent only inside a validated
    /// optimistic read or under the bucket's stripe lock.
    ///
    /// `bucket` must be one of the table's buckets (below its geometry's count), as every
    /// index a [`Probe`](super::hash::Probe), a relocation or a scan makes is.
    #[inline]
    #[allow(unsafe_code)]
    pub(crate) fn load_bucket(&self, bucket: usize) -> S::Word {
        let bucket_bits = self.lanes.bucket_bits();
        let bit = S::first_slot(bucket) * self.lanes.slot_bits() as usize;
        let (w, shift) = (bit / 64, (bit % 64) as u32);
        debug_assert!(w + PADDING_WORDS < self.words.len(), "bucket {bucket} is past the table");
        // A bucket's first word is within the words of the table's slots, so for a bucket
        // of the table (the contract above) all three words are (see `Table::word`).
        let word = |i: usize| self.word(w + i).load(Ordering::Relaxed);
        S::Word::extract(word(0), word(1), || word(2), shift, bucket_bits) & self.lanes.bucket_mask()
    }

    /// Word `w`: one of a bucket's words (its first, or one of the `PADDING_WORDS` after).
    #[inline]
    #[allow(unsafe_code)]
    fn word(&self, w: usize) -> &AtomicU64 {
        debug_assert!(w < self.words.len(), "word {w} is past the table");
        // SAFETY: every caller passes a word of a bucket of the table, at most
        // `PADDING_WORDS` past its first, and `Table::new` gives the table
        // `PADDING_WORDS` words past its slots' (`words_for`).
        unsafe { self.words.get_unchecked(w) }
    }

    /// Starts loading bucket `bucket` into the cache (see [`prefetch_at`]): its first word, and
    /// the next, which holds the rest of the bucket when it straddles a boundary.
    #[inline]
    pub(crate) fn prefetch_bucket(&self, bucket: usize) {
        let word = self.first_word(bucket);
        prefetch_at(&self.words, word);
        prefetch_at(&self.words, word + 1);
    }

    /// The word holding the first bit of bucket `bucket`.
    #[inline]
    fn first_word(&self, bucket: usize) -> usize {
        S::first_slot(bucket) * self.lanes.slot_bits() as usize / 64
    }

    /// Starts loading the extension bits of bucket `bucket` (nothing in a table that
    /// cannot double). Its 4 fields lie within one cache line.
    #[inline]
    pub(crate) fn prefetch_ext(&self, bucket: usize) {
        if let bits @ 1.. = self.geometry.doublings_left() {
            prefetch_at(&self.ext, S::first_slot(bucket) * bits as usize / 64);
        }
    }

    /// Buckets `i1` and `i2` as of one instant.
    ///
    /// Lock-free while writers leave the two stripes alone: stamps are taken, the buckets
    /// loaded, the stamps re-checked, and the read retried if a writer came between. After
    /// [`OPTIMISTIC_TRIES`] failed attempts the reader takes both locks, so it cannot starve.
    /// If the table is being frozen (for a doubling or a snapshot) the locks are refused;
    /// frozen stripes do not change, so the optimistic reads then succeed as soon as both
    /// stripes are frozen.
    #[inline]
    pub(crate) fn read_pair(&self, i1: usize, i2: usize) -> (S::Word, S::Word) {
        match self.try_read_pair(i1, i2) {
            Some(buckets) => buckets,
            None => self.read_pair_contended(i1, i2),
        }
    }

    /// Whether bucket `i1` holds the lane value `v1` or bucket `i2` holds `v2`, where
    /// `second()` gives `(i2, v2)`: asked for (once on the lock-free path) only if the first
    /// bucket does not match. Lock-free.
    ///
    /// One stamp per lookup: the key's fingerprint class's [`MoveStamp`] (see the module
    /// docs), taken before the first bucket is read and validated once, after the second.
    /// Only "neither" needs the validation: a match is returned as soon as it is read (a
    /// writer stored that value, so a key that maps to it was present when it was read; a
    /// read torn by a concurrent write can at worst make up a false positive). Present keys
    /// thus skip the validation (and the test of whether the stamp was taken while a
    /// relocation of the class was in progress), and the second bucket is worked out and
    /// read only if the first did not match.
    #[inline(always)]
    pub(crate) fn holds_either(&self, i1: usize, v1: u64, second: impl Fn() -> (usize, u64)) -> bool {
        let stamp = self.stamp_of(v1);
        let taken = stamp.read();
        if self.lanes.holds(self.load_bucket(i1), v1) {
            return true;
        }
        let (i2, v2) = second();
        if MoveStamp::settled(taken) {
            if self.lanes.holds(self.load_bucket(i2), v2) {
                return true;
            }
            if stamp.unchanged_since(taken) || broken::SKIP_VALIDATION {
                return false;
            }
        }
        self.holds_either_contended(i1, v1, i2, v2)
    }

    /// [`Table::holds_either`] for a key whose second bucket is worked out (and both
    /// prefetched, as `contains_batch` does): both buckets are read after the stamp and
    /// tested in one step, and a miss is validated once.
    #[inline(always)]
    pub(crate) fn holds_in_both(&self, i1: usize, v1: u64, i2: usize, v2: u64) -> bool {
        let stamp = self.stamp_of(v1);
        let taken = stamp.read();
        if self.lanes.holds_in_either(self.load_bucket(i1), v1, self.load_bucket(i2), v2) {
            return true;
        }
        if MoveStamp::settled(taken) && (stamp.unchanged_since(taken) || broken::SKIP_VALIDATION) {
            return false;
        }
        self.holds_either_contended(i1, v1, i2, v2)
    }

    /// [`Table::holds_either`] after its first attempt failed: retries, then reads both
    /// buckets under their stripes' locks (every relocation holds both of its buckets'),
    /// so it cannot starve. Out of line, so that the lock-free path carries none of it.
    #[cold]
    #[inline(never)]
    fn holds_either_contended(&self, i1: usize, v1: u64, i2: usize, v2: u64) -> bool {
        let stamp = self.stamp_of(v1);
        let mut tries = 1;
        loop {
            while tries < OPTIMISTIC_TRIES {
                spin_hint();
                if let Some(taken) = stamp.optimistic_read() {
                    let found = self.lanes.holds(self.load_bucket(i1), v1)
                        || self.lanes.holds(self.load_bucket(i2), v2);
                    if found || stamp.unchanged_since(taken) || broken::SKIP_VALIDATION {
                        return found;
                    }
                }
                tries += 1;
            }
            // A frozen table refuses the locks, but no entry moves in it, so the
            // optimistic reads then succeed.
            if let Ok(locked) = self.lock_pair(i1, i2) {
                return self.lanes.holds(locked.bucket(i1), v1) || self.lanes.holds(locked.bucket(i2), v2);
            }
            tries = 0;
        }
    }

    /// One optimistic read of buckets `i1` and `i2`: `None` if a writer held or took
    /// either stripe meanwhile.
    #[inline]
    fn try_read_pair(&self, i1: usize, i2: usize) -> Option<(S::Word, S::Word)> {
        let (a, b) = (self.stripe(i1), self.stripe(i2));
        let (sa, sb) = (a.optimistic_read()?, b.optimistic_read()?);
        let (b1, b2) = (self.load_bucket(i1), self.load_bucket(i2));
        let valid = (a.unchanged_since(sa) && b.unchanged_since(sb)) || broken::SKIP_VALIDATION;
        valid.then_some((b1, b2))
    }

    /// [`Table::read_pair`] after its first attempt failed, out of line so that the
    /// lock-free path carries none of the retry's state.
    #[cold]
    #[inline(never)]
    fn read_pair_contended(&self, i1: usize, i2: usize) -> (S::Word, S::Word) {
        let mut tries = 1;
        loop {
            while tries < OPTIMISTIC_TRIES {
                spin_hint();
                if let Some(buckets) = self.try_read_pair(i1, i2) {
                    return buckets;
                }
                tries += 1;
            }
            if let Ok(locked) = self.lock_pair(i1, i2) {
                return (locked.bucket(i1), locked.bucket(i2));
            }
            tries = 0;
        }
    }

    /// Locks the stripes of buckets `i1` and `i2` (once if they share one), lowest index
    /// first so that two writers can never wait on each other. Blocks while another writer
    /// holds either stripe. `Err(Frozen)`, holding nothing, if the table is frozen.
    #[inline]
    pub(crate) fn lock_pair(&self, i1: usize, i2: usize) -> Result<Locked<'_, S>, Frozen> {
        let (x, y) = (self.stripe_of(i1), self.stripe_of(i2));
        let (first, second) = (x.min(y), x.max(y));
        self.stripe_at(first).lock()?;
        if second != first {
            if let Err(frozen) = self.stripe_at(second).lock() {
                self.stripe_at(first).unlock();
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
        // Zeroing moves no entry, but lookups validate only relocations: every class's
        // stamp marks the clear in progress meanwhile, so that a lookup overlapping part
        // of it retries (see `MoveStamp`).
        self.stamps.iter().for_each(MoveStamp::hold);
        for word in self.words.iter() {
            word.store(0, Ordering::Release);
        }
        self.stamps.iter().for_each(MoveStamp::release);
        for word in self.ext.iter() {
            word.store(0, Ordering::Relaxed);
        }
        self.crowded.store(false, Ordering::Relaxed);
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

    /// The table as a snapshot stores it: each slot's whole value (see [`stored`]), packed
    /// like the lanes into [`image_word_count`] words. Consistent while the table is frozen.
    pub(crate) fn image(&self) -> Vec<u64> {
        if self.ext.is_empty() {
            return self.words.iter().map(|word| word.load(Ordering::Relaxed)).collect();
        }
        let (bits, ext_bits) = (self.geometry.slot_bits(), self.geometry.doublings_left());
        let mut image = vec![0; image_word_count(self.geometry).expect("the table exists")];
        for bucket in 0..self.geometry.buckets() {
            let contents = self.load_bucket(bucket);
            for lane in 0..S::SLOTS {
                let value = self.lanes.lane(contents, lane);
                let slot = S::first_slot(bucket) + lane;
                put_field(
                    &mut image,
                    slot * bits as usize,
                    bits,
                    stored(value, self.load_ext(slot), ext_bits),
                );
            }
        }
        image
    }

    /// A table holding `image`, as [`Table::image`] gave it (read back from a snapshot),
    /// with `stripes` stripes, which count their items afresh. Checks that a table of this
    /// geometry could have written it: the count, zero bits after the last slot, and
    /// every entry valid where it sits ([`Geometry::holds`], and a window's offset).
    pub(crate) fn from_image(
        geometry: Geometry,
        stripes: usize,
        image: &[u64],
    ) -> Result<Self, SnapshotError> {
        let used_bits = geometry.slots() * geometry.slot_bits() as usize;
        let (full, rest) = (used_bits / 64, (used_bits % 64) as u32);
        if image_word_count(geometry) != Some(image.len()) {
            return Err(SnapshotError::inconsistent("word count does not match the geometry"));
        }
        let (tail_in_use, padding) = match rest {
            0 => (0, full),
            _ => (image[full] >> rest, full + 1),
        };
        if tail_in_use != 0 || image[padding..].iter().any(|&w| w != 0) {
            return Err(SnapshotError::inconsistent("bits set after the last bucket"));
        }
        let bytes = table_bytes(geometry, stripes).unwrap_or(usize::MAX);
        let table = Table::new(geometry, stripes).map_err(|()| SnapshotError::OutOfMemory { bytes })?;
        let (bits, ext_bits) = (geometry.slot_bits(), geometry.doublings_left());
        for slot in 0..geometry.slots() {
            let whole = field(slot * bits as usize, bits, |i| image[i]);
            if whole != 0 {
                let (value, ext) = (lane_value(whole, ext_bits), whole >> 1 & ((1 << ext_bits) - 1));
                let place = Self::place(geometry, slot, value).filter(|_| geometry.holds(value));
                let Some((bucket, lane)) = place else {
                    return Err(SnapshotError::inconsistent("an entry that cannot sit in its bucket"));
                };
                table.store_lane(bucket, lane, value);
                table.store_ext(slot, ext);
                table.stripes[table.stripe_of(bucket)].add_items(1);
            }
        }
        Ok(table)
    }

    /// The bucket and lane of the entry `value` in slot `slot`: a window's entry says by
    /// its offset which of the two windows over the slot is its own. `None` if that
    /// window does not exist.
    fn place(geometry: Geometry, slot: usize, value: u64) -> Option<(usize, usize)> {
        if S::WINDOWED {
            let offset = (value & 1) as usize;
            Windows::window_of(slot, offset, geometry.buckets()).map(|window| (window, offset))
        } else {
            Some((slot / SLOTS, slot % SLOTS))
        }
    }

    /// Fills the empty table `new` (this table doubled, not yet visible to any other
    /// thread, with slots one bit narrower) with this frozen table's entries: each bucket
    /// splits into its two children (see `hash.rs`), so nothing is relocated and nothing
    /// can overflow. The counters carry over (removals and relocations in the new table's
    /// first stripe).
    pub(crate) fn split_into<N: Shape>(&self, new: &Table<N>) {
        debug_assert!(!S::WINDOWED && !N::WINDOWED);
        debug_assert_eq!(new.geometry, self.geometry.doubled());
        for bucket in 0..self.geometry.buckets() {
            let mut next_lane = [0usize; 2];
            let contents = self.load_bucket(bucket);
            for lane in 0..SLOTS {
                let value = self.lanes.lane(contents, lane);
                if value != 0 {
                    let (child, ext) =
                        self.geometry.split(bucket, self.load_ext(S::first_slot(bucket) + lane));
                    let child_lane = next_lane[child & 1];
                    new.store_lane(child, child_lane, value);
                    new.store_ext(N::first_slot(child) + child_lane, ext);
                    next_lane[child & 1] += 1;
                    new.stripes[new.stripe_of(child)].add_items(1);
                }
            }
        }
        new.carry_counters(self.totals());
    }

    /// Carries the removals and relocations of `totals` (a predecessor's, or a snapshot's)
    /// over: the removals into this table's first stripe, the relocations as those counted
    /// before this table. The table is new and not yet shared.
    pub(crate) fn carry_counters(&self, totals: Totals) {
        self.stripes[0].add_removes(totals.removes);
        self.relocations_carried.store(totals.relocations, Ordering::Relaxed);
    }

    /// Writes the lane value `value` into slot `lane` of `bucket`. The caller holds the
    /// bucket's stripe.
    ///
    /// `bucket` must be one of the table's buckets, as for [`Table::load_bucket`]: the
    /// slot's one or two words are then its bucket's.
    #[inline]
    pub(crate) fn store_lane(&self, bucket: usize, lane: usize, value: u64) {
        debug_assert!(lane < S::SLOTS);
        let slot_bits = self.lanes.slot_bits();
        let at = (S::first_slot(bucket) + lane) * slot_bits as usize;
        store_field(|w| self.word(w), at, slot_bits, value, Ordering::Release);
    }

    /// The extension bits of slot `slot`, 0 in a table that
    /// cannot double. The caller holds the slot's stripe, or the table is frozen.
    pub(crate) fn load_ext(&self, slot: usize) -> u64 {
        match self.geometry.doublings_left() {
            0 => 0,
            bits => field(slot * bits as usize, bits, |i| self.ext[i].load(Ordering::Relaxed)),
        }
    }

    /// Writes the extension bits of slot `slot`. The caller holds the slot's stripe.
    pub(crate) fn store_ext(&self, slot: usize, ext: u64) {
        if let bits @ 1.. = self.geometry.doublings_left() {
            store_field(|w| &self.ext[w], slot * bits as usize, bits, ext, Ordering::Relaxed);
        }
    }
}

/// A slot's whole value, as snapshots store it: `(fp << r | ext) << 1 | choice` for the
/// lane value `fp << 1 | choice` and `r` extension bits `ext`.
fn stored(value: u64, ext: u64, ext_bits: u32) -> u64 {
    if value == 0 {
        return 0;
    }
    (value >> 1 << ext_bits | ext) << 1 | (value & 1)
}

/// The lane value of the whole value `whole` (see [`stored`]).
fn lane_value(whole: u64, ext_bits: u32) -> u64 {
    whole >> (1 + ext_bits) << 1 | (whole & 1)
}

/// Proof that the stripes of one or two buckets are locked; every write goes through it.
/// Dropping it unlocks.
pub(crate) struct Locked<'a, S: Shape> {
    table: &'a Table<S>,
    first: usize,
    second: usize,
}

impl<S: Shape> Locked<'_, S> {
    fn holds(&self, bucket: usize) -> bool {
        let stripe = self.table.stripe_of(bucket);
        stripe == self.first || stripe == self.second
    }

    /// Bucket `bucket`, which this guard locks.
    #[inline]
    pub(crate) fn bucket(&self, bucket: usize) -> S::Word {
        debug_assert!(self.holds(bucket));
        self.table.load_bucket(bucket)
    }

    /// The extension bits of slot `lane` of `bucket`, which this guard locks.
    pub(crate) fn ext(&self, bucket: usize, lane: usize) -> u64 {
        debug_assert!(self.holds(bucket));
        self.table.load_ext(S::first_slot(bucket) + lane)
    }

    /// Stores the entry with lane value `value` and extension bits `ext` in the empty slot
    /// `lane` of `bucket`.
    #[inline(always)]
    pub(crate) fn put(&self, bucket: usize, lane: usize, value: u64, ext: u64) {
        debug_assert!(self.holds(bucket));
        debug_assert_eq!(self.table.lanes.lane(self.table.load_bucket(bucket), lane), 0);
        // Tested here as well as in `store_ext`, so that a table that cannot double skips
        // the call: `store_ext` inlined (its store out of line) measured more per insert
        // (`filter_cost.sh`: the fill 152.8 instructions against 150.8).
        if self.table.geometry.doublings_left() != 0 {
            self.table.store_ext(S::first_slot(bucket) + lane, ext);
        }
        self.table.store_lane(bucket, lane, value);
        self.table.stripe(bucket).add_items(1);
    }

    /// Empties the occupied slot `lane` of `bucket`.
    pub(crate) fn take(&self, bucket: usize, lane: usize) {
        debug_assert!(self.holds(bucket));
        debug_assert_ne!(self.table.lanes.lane(self.table.load_bucket(bucket), lane), 0);
        // The extension bits of an empty slot are never read, so they stay.
        self.table.store_lane(bucket, lane, 0);
        self.table.stripe(bucket).add_items(-1);
    }

    /// Empties the occupied slot `lane` of `bucket` for a `remove`, and counts it.
    pub(crate) fn remove(&self, bucket: usize, lane: usize) {
        self.take(bucket, lane);
        self.table.stripe(bucket).add_removes(1);
    }

    /// Moves the entry in slot `from_lane` of `from` to the empty slot `to_lane` of `to`,
    /// where its lane value is `moved`: the copy is written before the source is cleared.
    /// The entry's fingerprint class's move stamp marks the move (see [`MoveStamp`]), so
    /// that a lookup of its key that reads the source after the clear and the destination
    /// before the copy cannot validate.
    pub(crate) fn relocate(&self, from: usize, from_lane: usize, to: usize, to_lane: usize, moved: u64) {
        let stamp = self.table.stamp_of(if broken::STRAY_STAMP {
            moved ^ 1 << (1 + S::WINDOWED as u32)
        } else {
            moved
        });
        stamp.begin();
        self.put(to, to_lane, moved, self.ext(from, from_lane));
        self.take(from, from_lane);
        stamp.end();
    }
}

impl<S: Shape> Drop for Locked<'_, S> {
    fn drop(&mut self) {
        if self.second != self.first {
            self.table.stripe_at(self.second).unlock();
        }
        self.table.stripe_at(self.first).unlock();
    }
}
