//! Bit-parallel search of one bucket, and the two shapes a bucket takes.
//!
//! A bucket is the run of consecutive slots a key may occupy: [`Shape::SLOTS`] slots of
//! `slot_bits` bits each, held in the low bits of a [`Word`] (the table reads it out of
//! the packed words, see `table.rs`). In the classic layout ([`Buckets`]) buckets are 4
//! disjoint slots; in the windowed layout ([`Windows`], Schmitz et al. section 3.2) they
//! are windows of 2 slots that overlap their neighbours, so an entry also stores its
//! offset in its window (see `hash.rs`). Slot value 0 means empty. To find every slot
//! equal to `v` (plus the lane's offset, in a window), XOR the bucket with `v` repeated in
//! every lane and look for zero lanes:
//!
//! ```text
//! x     = bucket ^ repeat(v)
//! zeros = !(((x & low) + low) | x) & high      low = repeat(high_bit - 1)
//! ```
//!
//! `(x & low) + low` sets a lane's high bit iff one of its low bits is set, and cannot
//! carry into the next lane; OR-ing `x` adds the lane's own high bit. So the result is
//! *exact* per lane (unlike the shorter `(x - repeat(1)) & !x & high`, which can flag a
//! lane above a true match through a borrow), and [`BitMask::count`] may be trusted.
//! [`Lanes::matches_scalar`] is the plain loop that the tests compare it against.
//!
//! The bucket type is a [`Word`]: `u64` when the bucket fits (slots of up to 16 bits, the
//! common case), `u128` for wider slots, so the common case pays no 128-bit arithmetic.

use std::fmt::Debug;
use std::marker::PhantomData;
use std::ops::{Add, BitAnd, BitOr, BitXor, Not, Shl, Shr};

/// Slots per bucket of the classic layout (the "4" of a (2,4) cuckoo filter).
pub(crate) const SLOTS: usize = 4;

/// Slots per stripe group: 64 slots of `s` bits are exactly `s` words, so a group never
/// shares a word with another (see `table.rs`).
pub(crate) const GROUP_SLOTS: usize = 64;

/// How a table arranges its slots into buckets.
pub(crate) trait Shape: Copy + Debug + Send + Sync + 'static {
    /// The integer a bucket is read into.
    type Word: Word;
    /// Slots per bucket.
    const SLOTS: usize;
    /// Whether buckets overlap (windows): an entry then stores its offset in its bucket.
    const WINDOWED: bool;
    /// Bucket numbers per group of [`GROUP_SLOTS`] slots; no bucket spans two groups.
    const PER_GROUP: usize;
    /// The lanes' masks when the slot width is known at compile time ([`Fixed`]); `None`
    /// when the table's [`Lanes`] carry them.
    const FIXED: Option<Masks> = None;
    /// The first slot of bucket `bucket`.
    fn first_slot(bucket: usize) -> usize;
}

/// Disjoint buckets of [`SLOTS`] slots, read into `W`.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Buckets<W>(PhantomData<W>);

impl<W: Word> Shape for Buckets<W> {
    type Word = W;
    const SLOTS: usize = SLOTS;
    const WINDOWED: bool = false;
    const PER_GROUP: usize = GROUP_SLOTS / SLOTS;
    #[inline]
    fn first_slot(bucket: usize) -> usize {
        bucket * SLOTS
    }
}

/// Disjoint buckets of [`SLOTS`] slots of `BITS` bits each (`2 <= BITS <= 16`), read into
/// a `u64`: [`Buckets`] with the slot width a constant, so that extracting and comparing
/// lanes takes shifts and masks by constants. The filter monomorphises the widths its
/// builders' default false-positive rates give (see `AnyTable`).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Fixed<const BITS: u32>;

impl<const BITS: u32> Shape for Fixed<BITS> {
    type Word = u64;
    const SLOTS: usize = SLOTS;
    const WINDOWED: bool = false;
    const PER_GROUP: usize = GROUP_SLOTS / SLOTS;
    const FIXED: Option<Masks> = Some(Masks::buckets(BITS));
    #[inline]
    fn first_slot(bucket: usize) -> usize {
        bucket * SLOTS
    }
}

/// Windows of 2 slots, one starting at every slot but the last of each group (so that no
/// window spans two groups, or two stripes). A window is numbered by its first slot, so a
/// windowed table of `s` slots has `s` window numbers, of which those `≡ 63 (mod 64)` are
/// unused.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Windows;

impl Shape for Windows {
    type Word = u64;
    const SLOTS: usize = 2;
    const WINDOWED: bool = true;
    const PER_GROUP: usize = GROUP_SLOTS;
    #[inline]
    fn first_slot(bucket: usize) -> usize {
        bucket
    }
}

impl Windows {
    /// The window an entry in slot `slot` with offset `offset` belongs to, if that window
    /// exists in a table of `slots` slots.
    pub(crate) fn window_of(slot: usize, offset: usize, slots: usize) -> Option<usize> {
        let start = slot.checked_sub(offset)?;
        (start % GROUP_SLOTS != GROUP_SLOTS - 1 && start < slots).then_some(start)
    }
}

/// An unsigned integer that holds one bucket.
pub(crate) trait Word:
    Copy
    + Debug
    + Eq
    + Send
    + Sync
    + 'static
    + Add<Output = Self>
    + BitAnd<Output = Self>
    + BitOr<Output = Self>
    + BitXor<Output = Self>
    + Not<Output = Self>
    + Shl<u32, Output = Self>
    + Shr<u32, Output = Self>
{
    /// Width in bits.
    const BITS: u32;
    /// Zero.
    const ZERO: Self;
    /// The value `v`, zero-extended.
    fn from_u64(v: u64) -> Self;
    /// The low 64 bits.
    fn low_u64(self) -> u64;
    /// Set bits.
    fn count_ones(self) -> u32;
    /// Trailing zero bits.
    fn trailing_zeros(self) -> u32;
    /// `self - other`, wrapping.
    fn wrapping_sub(self, other: Self) -> Self;
    /// The `bits` bits starting at bit `shift` of the little-endian word sequence
    /// `w0, w1, w2`; `w2` is loaded only if they reach it.
    fn extract(w0: u64, w1: u64, w2: impl FnOnce() -> u64, shift: u32, bits: u32) -> Self;
}

impl Word for u64 {
    const BITS: u32 = 64;
    const ZERO: Self = 0;
    #[inline]
    fn from_u64(v: u64) -> Self {
        v
    }
    #[inline]
    fn low_u64(self) -> u64 {
        self
    }
    #[inline]
    fn count_ones(self) -> u32 {
        u64::count_ones(self)
    }
    #[inline]
    fn trailing_zeros(self) -> u32 {
        u64::trailing_zeros(self)
    }
    #[inline]
    fn wrapping_sub(self, other: Self) -> Self {
        u64::wrapping_sub(self, other)
    }
    #[inline]
    fn extract(w0: u64, w1: u64, _w2: impl FnOnce() -> u64, shift: u32, _bits: u32) -> Self {
        ((w0 as u128 | (w1 as u128) << 64) >> shift) as u64
    }
}

impl Word for u128 {
    const BITS: u32 = 128;
    const ZERO: Self = 0;
    #[inline]
    fn from_u64(v: u64) -> Self {
        v as u128
    }
    #[inline]
    fn low_u64(self) -> u64 {
        self as u64
    }
    #[inline]
    fn count_ones(self) -> u32 {
        u128::count_ones(self)
    }
    #[inline]
    fn trailing_zeros(self) -> u32 {
        u128::trailing_zeros(self)
    }
    #[inline]
    fn wrapping_sub(self, other: Self) -> Self {
        u128::wrapping_sub(self, other)
    }
    #[inline]
    fn extract(w0: u64, w1: u64, w2: impl FnOnce() -> u64, shift: u32, bits: u32) -> Self {
        let mut value = (w0 as u128 | (w1 as u128) << 64) >> shift;
        if shift + bits > 128 {
            value |= (w2() as u128) << (128 - shift);
        }
        value
    }
}

/// The masks of one slot width over a bucket of 4 slots in a `u64`, computed when
/// compiled for a [`Fixed`] shape.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Masks {
    slot_bits: u32,
    ones: u64,
    highs: u64,
    lows: u64,
    bucket_mask: u64,
    slot_mask: u64,
    lane_of: u32,
}

impl Masks {
    /// The masks of slots of `bits` bits (`2 <= bits <= 16`) in buckets of [`SLOTS`].
    const fn buckets(bits: u32) -> Masks {
        assert!(bits >= 2 && bits * SLOTS as u32 <= u64::BITS);
        let (mut ones, mut lane) = (0u64, 0);
        while lane < SLOTS as u32 {
            ones |= 1 << (lane * bits);
            lane += 1;
        }
        let bucket_bits = SLOTS as u32 * bits;
        let bucket_mask = if bucket_bits == u64::BITS { !0 } else { !(!0 << bucket_bits) };
        let highs = ones << (bits - 1);
        Masks {
            slot_bits: bits,
            ones,
            highs,
            lows: bucket_mask & !highs,
            bucket_mask,
            slot_mask: (1 << bits) - 1,
            lane_of: (1u32 << 16).div_ceil(bits),
        }
    }
}

/// Precomputed masks for one slot width and bucket shape. For a [`Fixed`] shape the
/// accessors return its constants and the fields go unread.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Lanes<S: Shape> {
    slot_bits: u32,
    /// The lowest bit of every lane.
    ones: S::Word,
    /// Each lane's offset bit, set in the lanes past the first (windows only; buckets of 4
    /// never read it).
    offsets: S::Word,
    /// The highest bit of every lane.
    highs: S::Word,
    /// Every bit of every lane but the highest.
    lows: S::Word,
    /// All `S::SLOTS * slot_bits` bucket bits.
    bucket_mask: S::Word,
    /// All bits of one slot.
    slot_mask: u64,
    /// See [`BitMask`]'s field of the same name.
    lane_of: u32,
}

impl<S: Shape> Lanes<S> {
    /// Masks for slots of `slot_bits` bits; `2 <= slot_bits` and `S::SLOTS * slot_bits <=
    /// S::Word::BITS` (for a [`Fixed`] shape, its width).
    pub(crate) fn new(slot_bits: u32) -> Self {
        type W<S> = <S as Shape>::Word;
        debug_assert!(slot_bits >= 2 && S::SLOTS as u32 * slot_bits <= W::<S>::BITS);
        debug_assert!(S::FIXED.map_or(true, |fixed| fixed.slot_bits == slot_bits));
        let slot_mask = (1u64 << slot_bits) - 1;
        let (mut ones, mut offsets) = (W::<S>::ZERO, W::<S>::ZERO);
        for lane in 0..S::SLOTS as u32 {
            ones = ones | W::<S>::from_u64(1) << (lane * slot_bits);
            offsets = offsets | W::<S>::from_u64(Self::offset(lane as usize)) << (lane * slot_bits);
        }
        let highs = ones << (slot_bits - 1);
        let bucket_bits = S::SLOTS as u32 * slot_bits;
        let bucket_mask =
            if bucket_bits == W::<S>::BITS { !W::<S>::ZERO } else { !(!W::<S>::ZERO << bucket_bits) };
        let lane_of = (1u32 << 16).div_ceil(slot_bits);
        Lanes { slot_bits, ones, offsets, highs, lows: bucket_mask & !highs, bucket_mask, slot_mask, lane_of }
    }

    #[inline(always)]
    fn ones(&self) -> S::Word {
        S::FIXED.map_or(self.ones, |fixed| S::Word::from_u64(fixed.ones))
    }

    #[inline(always)]
    fn highs(&self) -> S::Word {
        S::FIXED.map_or(self.highs, |fixed| S::Word::from_u64(fixed.highs))
    }

    #[inline(always)]
    fn lows(&self) -> S::Word {
        S::FIXED.map_or(self.lows, |fixed| S::Word::from_u64(fixed.lows))
    }

    #[inline(always)]
    fn lane_of(&self) -> u32 {
        S::FIXED.map_or(self.lane_of, |fixed| fixed.lane_of)
    }

    /// What lane `lane` adds to an entry's value: its offset in a window, nothing in a
    /// bucket.
    #[inline]
    pub(crate) fn offset(lane: usize) -> u64 {
        if S::WINDOWED {
            lane as u64
        } else {
            0
        }
    }

    /// Bits per slot.
    #[inline(always)]
    pub(crate) fn slot_bits(&self) -> u32 {
        S::FIXED.map_or(self.slot_bits, |fixed| fixed.slot_bits)
    }

    /// Bits per bucket.
    #[inline(always)]
    pub(crate) fn bucket_bits(&self) -> u32 {
        self.slot_bits() * S::SLOTS as u32
    }

    /// Mask of the bucket's bits within a word.
    #[inline(always)]
    pub(crate) fn bucket_mask(&self) -> S::Word {
        S::FIXED.map_or(self.bucket_mask, |fixed| S::Word::from_u64(fixed.bucket_mask))
    }

    /// Mask of one slot's bits.
    #[inline(always)]
    pub(crate) fn slot_mask(&self) -> u64 {
        S::FIXED.map_or(self.slot_mask, |fixed| fixed.slot_mask)
    }

    /// `value` in every lane, plus each lane's offset: one multiply by the lanes' low bits
    /// for a 64-bit word (no carries: `value` fits a lane), a shift-or ladder for a wider
    /// one (no wide multiply).
    #[inline]
    pub(crate) fn repeat(&self, value: u64) -> S::Word {
        let all = if S::Word::BITS == 64 {
            S::Word::from_u64(value.wrapping_mul(self.ones().low_u64()))
        } else {
            let v = S::Word::from_u64(value);
            let two = v | v << self.slot_bits();
            match S::SLOTS {
                2 => two,
                _ => two | two << (2 * self.slot_bits()),
            }
        };
        if S::WINDOWED {
            all | self.offsets
        } else {
            all
        }
    }

    /// Lanes of `bucket` holding `value` (with the lane's offset added).
    #[inline]
    pub(crate) fn matches(&self, bucket: S::Word, value: u64) -> BitMask<S::Word> {
        self.zero_lanes(bucket ^ self.repeat(value))
    }

    /// Whether a lane of `bucket` holds `value` (with the lane's offset added):
    /// [`Lanes::matches`]`(..).any()` in fewer steps. The short zero test, `(x - ones) &
    /// !x & highs`, may flag a lane above a true zero through a borrow, but is zero only
    /// when no lane is: exact for whether any lane is.
    #[inline]
    pub(crate) fn holds(&self, bucket: S::Word, value: u64) -> bool {
        let x = bucket ^ self.repeat(value);
        x.wrapping_sub(self.ones()) & !x & self.highs() != S::Word::ZERO
    }

    /// Whether a lane of `b1` holds `v1` or a lane of `b2` holds `v2`: [`Lanes::holds`] of
    /// both in one zero test.
    #[inline]
    pub(crate) fn holds_in_either(&self, b1: S::Word, v1: u64, b2: S::Word, v2: u64) -> bool {
        let (x1, x2) = (b1 ^ self.repeat(v1), b2 ^ self.repeat(v2));
        let ones = self.ones();
        (x1.wrapping_sub(ones) & !x1 | x2.wrapping_sub(ones) & !x2) & self.highs() != S::Word::ZERO
    }

    /// Empty lanes of `bucket`.
    #[inline]
    pub(crate) fn empties(&self, bucket: S::Word) -> BitMask<S::Word> {
        self.zero_lanes(bucket)
    }

    #[inline]
    fn zero_lanes(&self, x: S::Word) -> BitMask<S::Word> {
        let lows = self.lows();
        BitMask { bits: !(((x & lows) + lows) | x) & self.highs(), lane_of: self.lane_of() }
    }

    /// The value held in `lane`.
    #[inline]
    pub(crate) fn lane(&self, bucket: S::Word, lane: usize) -> u64 {
        (bucket >> (lane as u32 * self.slot_bits())).low_u64() & self.slot_mask()
    }

    /// The reference: lanes holding `value` (plus the lane's offset), one at a time.
    #[cfg(test)]
    pub(crate) fn matches_scalar(&self, bucket: S::Word, value: u64) -> BitMask<S::Word> {
        let mut bits = S::Word::ZERO;
        for lane in 0..S::SLOTS {
            if self.lane(bucket, lane) == value | Self::offset(lane) {
                bits = bits | S::Word::from_u64(1) << (lane as u32 * self.slot_bits() + self.slot_bits() - 1);
            }
        }
        BitMask { bits, lane_of: self.lane_of() }
    }
}

/// A set of lanes: the high bit of each selected lane.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct BitMask<W> {
    bits: W,
    /// `ceil(2^16 / slot_bits)`: multiplying a lane's bit position by it and shifting
    /// right by 16 divides by `slot_bits`, exactly for the small positions of a bucket
    /// (see [`BitMask::lowest`]), without a hardware divide.
    lane_of: u32,
}

impl<W: Word> BitMask<W> {
    /// Whether any lane is selected.
    #[inline]
    pub(crate) fn any(self) -> bool {
        self.bits != W::ZERO
    }

    /// How many lanes are selected.
    #[inline]
    pub(crate) fn count(self) -> usize {
        self.bits.count_ones() as usize
    }

    /// The lowest selected lane.
    #[inline]
    pub(crate) fn lowest(self) -> Option<usize> {
        // The lowest selected lane L has its high bit at t = L·s + s - 1, and t / s = L.
        // With r = 2^16/s + δ (0 ≤ δ < 1): t·r = 2^16·L + 2^16·(s - 1)/s + t·δ, where
        // t·δ < 4·32 < 2^16/s (s ≤ 32), so t·r lies in [2^16·L, 2^16·(L + 1)).
        self.any().then(|| ((self.bits.trailing_zeros() * self.lane_of) >> 16) as usize)
    }

    /// The selected lanes, lowest first.
    pub(crate) fn lanes(self) -> impl Iterator<Item = usize> {
        let mut rest = self;
        std::iter::from_fn(move || {
            let lane = rest.lowest()?;
            rest.bits = rest.bits & !(W::from_u64(1) << rest.bits.trailing_zeros());
            Some(lane)
        })
    }
}

/// The lanes of two buckets of four 16-bit slots that hold `value`: bit `4 g + lane` for
/// lane `lane` of `pair[g]`. The cache's ghosts keep both generations of a bucket side by
/// side and search them with this: on x86_64 one SSE2 compare of all eight lanes, in
/// place of [`Lanes::matches`] on each word.
#[inline(always)]
pub(crate) fn matches16(pair: [u64; 2], value: u16) -> u32 {
    #[cfg(target_arch = "x86_64")]
    return matches16_sse2(pair, value);
    #[cfg(not(target_arch = "x86_64"))]
    return matches16_swar(pair, value);
}

#[cfg(target_arch = "x86_64")]
#[inline(always)]
#[allow(unsafe_code)]
fn matches16_sse2(pair: [u64; 2], value: u16) -> u32 {
    use std::arch::x86_64::{
        _mm_cmpeq_epi16, _mm_movemask_epi8, _mm_packs_epi16, _mm_set1_epi16, _mm_set_epi64x,
        _mm_setzero_si128,
    };
    // SAFETY: these intrinsics need SSE2, which every x86_64 CPU has (it is in the
    // target's baseline); they compute on registers only and touch no memory.
    unsafe {
        let lanes = _mm_set_epi64x(pair[1] as i64, pair[0] as i64);
        // Equal lanes become 0xFFFF; packing to bytes (saturating, so 0xFF or 0) gives
        // one mask bit per lane, lane `i` of the pair at bit `i`.
        let equal = _mm_cmpeq_epi16(lanes, _mm_set1_epi16(value as i16));
        _mm_movemask_epi8(_mm_packs_epi16(equal, _mm_setzero_si128())) as u32
    }
}

/// [`matches16`] without SIMD: the bit-parallel search of each word, its lanes' high bits
/// (bits 15, 31, 47 and 63) gathered into four bits by one multiplication.
#[cfg_attr(target_arch = "x86_64", allow(dead_code))]
#[inline(always)]
fn matches16_swar(pair: [u64; 2], value: u16) -> u32 {
    let lanes = Lanes::<Buckets<u64>>::new(16);
    let gather = |word: u64| {
        let highs = lanes.matches(word, u64::from(value)).bits >> 15;
        // Lane i's bit sits at 16 i; the product puts it at 48 + i, and every other
        // partial product lands below bit 48 or above bit 63.
        (highs.wrapping_mul(0x0001_0002_0004_0008) >> 48) as u32
    };
    gather(pair[0]) | gather(pair[1]) << SLOTS
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn pack<S: Shape>(lanes: &Lanes<S>, values: &[u64]) -> S::Word {
        values.iter().enumerate().fold(S::Word::ZERO, |b, (i, &v)| {
            b | S::Word::from_u64(v & lanes.slot_mask()) << (i as u32 * lanes.slot_bits())
        })
    }

    fn finds_each_lane<W: Word>(max_bits: u32) {
        for bits in 2..=max_bits {
            let lanes = Lanes::<Buckets<W>>::new(bits);
            let top = lanes.slot_mask();
            let bucket = pack(&lanes, &[0, top, 1, top]);
            assert_eq!(lanes.matches(bucket, top).count(), 2, "bits {bits}");
            assert_eq!(lanes.matches(bucket, top).lowest(), Some(1));
            assert_eq!(lanes.empties(bucket).lowest(), Some(0));
            assert_eq!(lanes.matches(bucket, 1).lowest(), Some(2));
            assert!(!lanes.matches(bucket, 2).any());
            assert_eq!(lanes.lane(bucket, 3), top);
        }
    }

    #[test]
    fn finds_each_lane_narrow_and_wide() {
        finds_each_lane::<u64>(16);
        finds_each_lane::<u128>(32);
    }

    #[test]
    fn a_window_lane_matches_only_with_its_offset() {
        for bits in 3..=32 {
            let lanes = Lanes::<Windows>::new(bits);
            // Lane 0 holds value 6 at offset 0, lane 1 holds 6 | 1: both are the entry 6.
            assert_eq!(lanes.matches(pack(&lanes, &[6, 7]), 6).count(), 2, "bits {bits}");
            // 6 in lane 1 is an entry of the next window (offset 0 there), not a match.
            assert_eq!(lanes.matches(pack(&lanes, &[0, 6]), 6).count(), 0);
            assert_eq!(lanes.matches(pack(&lanes, &[0, 7]), 6).lowest(), Some(1));
            assert_eq!(lanes.empties(pack(&lanes, &[0, 7])).lowest(), Some(0));
        }
    }

    #[test]
    fn windows_tile_each_group_without_crossing_it() {
        let slots = 3 * GROUP_SLOTS;
        let mut covered = vec![0; slots];
        for w in (0..slots).filter(|w| w % GROUP_SLOTS != GROUP_SLOTS - 1) {
            let first = Windows::first_slot(w);
            assert_eq!(first / GROUP_SLOTS, (first + 1) / GROUP_SLOTS, "window {w} spans two groups");
            for offset in 0..2 {
                covered[first + offset] += 1;
                assert_eq!(Windows::window_of(first + offset, offset, slots), Some(w));
            }
        }
        assert!(covered.iter().all(|&c| c >= 1));
        assert_eq!(Windows::window_of(GROUP_SLOTS - 1, 0, slots), None);
        assert_eq!(Windows::window_of(GROUP_SLOTS, 1, slots), None);
        assert_eq!(Windows::window_of(0, 1, slots), None);
        assert_eq!(Windows::window_of(slots - 1, 0, slots), None);
    }

    /// `lowest` divides by the slot width with a multiply: check every width and every
    /// non-empty set of lanes against the plain division.
    fn lowest_is_exact<W: Word>(max_bits: u32) {
        for bits in 2..=max_bits {
            let lanes = Lanes::<Buckets<W>>::new(bits);
            for set in 1u32..1 << SLOTS {
                let values: Vec<u64> =
                    (0..SLOTS).map(|lane| if set >> lane & 1 == 1 { 1 } else { 2 }).collect();
                let expected = set.trailing_zeros() as usize;
                assert_eq!(lanes.matches(pack(&lanes, &values), 1).lowest(), Some(expected), "bits {bits}");
            }
        }
    }

    #[test]
    fn lowest_lane_for_every_width() {
        lowest_is_exact::<u64>(16);
        lowest_is_exact::<u128>(32);
    }

    #[test]
    fn no_borrow_false_match_above_a_true_match() {
        // The short trick would flag lane 1 here: lane 0 matches, lane 1 differs by one.
        let lanes = Lanes::<Buckets<u64>>::new(12);
        let bucket = pack(&lanes, &[5, 4, 0, 0]);
        assert_eq!(lanes.matches(bucket, 5).count(), 1);
    }

    fn check<S: Shape>(bits: u32, raw: &[u64], pick: usize, other: u64) -> Result<(), TestCaseError> {
        let lanes = Lanes::<S>::new(bits);
        let raw = &raw[..S::SLOTS];
        let bucket = pack(&lanes, raw);
        // A value without the offset bit, as lookups search for (windows: even values).
        let base = |v: u64| v & lanes.slot_mask() & !Lanes::<S>::offset(1);
        let value = if pick < S::SLOTS { base(raw[pick]) } else { base(other) };
        prop_assert_eq!(lanes.matches(bucket, value), lanes.matches_scalar(bucket, value));
        prop_assert_eq!(lanes.holds(bucket, value), lanes.matches(bucket, value).any());
        let listed: Vec<usize> = lanes.matches(bucket, value).lanes().collect();
        let equal: Vec<usize> =
            (0..S::SLOTS).filter(|&l| lanes.lane(bucket, l) == value | Lanes::<S>::offset(l)).collect();
        prop_assert_eq!(listed, equal);
        prop_assert_eq!(
            lanes.empties(bucket).lanes().collect::<Vec<_>>(),
            (0..S::SLOTS).filter(|&l| lanes.lane(bucket, l) == 0).collect::<Vec<_>>()
        );
        Ok(())
    }

    proptest! {
        #[test]
        fn swar_equals_scalar(bits in 2u32..=32, raw in any::<[u64; SLOTS]>(), pick in 0usize..5, other in any::<u64>()) {
            if bits <= 16 { check::<Buckets<u64>>(bits, &raw, pick, other)?; }
            check::<Buckets<u128>>(bits, &raw, pick, other)?;
            check::<Windows>(bits, &raw, pick, other)?;
        }
    }

    /// A fixed width's compiled-in masks give what the runtime masks of that width give.
    fn fixed_agrees<const BITS: u32>(
        raw: [u64; SLOTS],
        pick: usize,
        other: u64,
    ) -> Result<(), TestCaseError> {
        let (fixed, runtime) = (Lanes::<Fixed<BITS>>::new(BITS), Lanes::<Buckets<u64>>::new(BITS));
        let bucket = pack(&runtime, &raw);
        let value = if pick < SLOTS { bucket >> (pick as u32 * BITS) } else { other } & runtime.slot_mask();
        prop_assert_eq!(
            fixed.matches(bucket, value).lanes().collect::<Vec<_>>(),
            runtime.matches(bucket, value).lanes().collect::<Vec<_>>()
        );
        prop_assert_eq!(fixed.holds(bucket, value), runtime.holds(bucket, value));
        prop_assert_eq!(fixed.empties(bucket).lowest(), runtime.empties(bucket).lowest());
        prop_assert_eq!(fixed.bucket_mask(), runtime.bucket_mask());
        for lane in 0..SLOTS {
            prop_assert_eq!(fixed.lane(bucket, lane), runtime.lane(bucket, lane));
        }
        check::<Fixed<BITS>>(BITS, &raw, pick, other)
    }

    proptest! {
        #[test]
        fn fixed_widths_agree_with_runtime_widths(raw in any::<[u64; SLOTS]>(), pick in 0usize..5, other in any::<u64>()) {
            fixed_agrees::<10>(raw, pick, other)?;
            fixed_agrees::<13>(raw, pick, other)?;
        }
    }

    proptest! {
        #[test]
        fn matches16_agrees_with_a_plain_loop(
            lanes in prop::array::uniform8(prop_oneof![Just(0u16), Just(7), any::<u16>()]),
            value in prop_oneof![Just(0u16), Just(7), any::<u16>()],
        ) {
            let word = |g: usize| (0..SLOTS).fold(0u64, |w, i| w | u64::from(lanes[g * SLOTS + i]) << (16 * i));
            let pair = [word(0), word(1)];
            let expected = (0..2 * SLOTS).fold(0, |m, i| m | u32::from(lanes[i] == value) << i);
            prop_assert_eq!(matches16(pair, value), expected);
            prop_assert_eq!(matches16_swar(pair, value), expected);
        }
    }
}
