//! Bit-parallel search of one bucket.
//!
//! A bucket is [`SLOTS`] slots of `slot_bits` bits each, held in the low bits of a
//! [`Word`] (the table reads it out of the packed words, see `table.rs`). Slot value 0
//! means empty. To find every slot equal to `v`, XOR the bucket with `v` repeated in
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
use std::ops::{Add, BitAnd, BitOr, BitXor, Not, Shl, Shr};

/// Slots per bucket (the "4" of a (2,4) cuckoo filter).
pub(crate) const SLOTS: usize = 4;

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
    fn extract(w0: u64, w1: u64, w2: impl FnOnce() -> u64, shift: u32, bits: u32) -> Self {
        let mut value = (w0 as u128 | (w1 as u128) << 64) >> shift;
        if shift + bits > 128 {
            value |= (w2() as u128) << (128 - shift);
        }
        value
    }
}

/// Precomputed masks for one slot width.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Lanes<W> {
    slot_bits: u32,
    /// The highest bit of every lane.
    highs: W,
    /// Every bit of every lane but the highest.
    lows: W,
    /// All `SLOTS * slot_bits` bucket bits.
    bucket_mask: W,
    /// All bits of one slot.
    slot_mask: u64,
    /// See [`BitMask`]'s field of the same name.
    lane_of: u32,
}

impl<W: Word> Lanes<W> {
    /// Masks for slots of `slot_bits` bits; `2 <= slot_bits` and `4 * slot_bits <= W::BITS`.
    pub(crate) fn new(slot_bits: u32) -> Self {
        debug_assert!(slot_bits >= 2 && SLOTS as u32 * slot_bits <= W::BITS);
        let slot_mask = (1u64 << slot_bits) - 1;
        let mut ones = W::ZERO;
        for lane in 0..SLOTS as u32 {
            ones = ones | W::from_u64(1) << (lane * slot_bits);
        }
        let highs = ones << (slot_bits - 1);
        let bucket_bits = SLOTS as u32 * slot_bits;
        let bucket_mask = if bucket_bits == W::BITS { !W::ZERO } else { !(!W::ZERO << bucket_bits) };
        let lane_of = (1u32 << 16).div_ceil(slot_bits);
        Lanes { slot_bits, highs, lows: bucket_mask & !highs, bucket_mask, slot_mask, lane_of }
    }

    /// Bits per slot.
    pub(crate) fn slot_bits(&self) -> u32 {
        self.slot_bits
    }

    /// Bits per bucket.
    pub(crate) fn bucket_bits(&self) -> u32 {
        self.slot_bits * SLOTS as u32
    }

    /// Mask of the bucket's bits within a word.
    pub(crate) fn bucket_mask(&self) -> W {
        self.bucket_mask
    }

    /// Mask of one slot's bits.
    #[cfg(test)]
    pub(crate) fn slot_mask(&self) -> u64 {
        self.slot_mask
    }

    /// `value` in every lane (a shift-or ladder: no wide multiply).
    #[inline]
    pub(crate) fn repeat(&self, value: u64) -> W {
        let v = W::from_u64(value);
        let two = v | v << self.slot_bits;
        two | two << (2 * self.slot_bits)
    }

    /// Lanes of `bucket` equal to `value`.
    #[inline]
    pub(crate) fn matches(&self, bucket: W, value: u64) -> BitMask<W> {
        self.zero_lanes(bucket ^ self.repeat(value))
    }

    /// Empty lanes of `bucket`.
    #[inline]
    pub(crate) fn empties(&self, bucket: W) -> BitMask<W> {
        self.zero_lanes(bucket)
    }

    #[inline]
    fn zero_lanes(&self, x: W) -> BitMask<W> {
        BitMask { bits: !(((x & self.lows) + self.lows) | x) & self.highs, lane_of: self.lane_of }
    }

    /// The value held in `lane`.
    #[inline]
    pub(crate) fn lane(&self, bucket: W, lane: usize) -> u64 {
        (bucket >> (lane as u32 * self.slot_bits)).low_u64() & self.slot_mask
    }

    /// The reference: lanes equal to `value`, one at a time.
    #[cfg(test)]
    pub(crate) fn matches_scalar(&self, bucket: W, value: u64) -> BitMask<W> {
        let mut bits = W::ZERO;
        for lane in 0..SLOTS {
            if self.lane(bucket, lane) == value {
                bits = bits | W::from_u64(1) << (lane as u32 * self.slot_bits + self.slot_bits - 1);
            }
        }
        BitMask { bits, lane_of: self.lane_of }
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

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn pack<W: Word>(lanes: &Lanes<W>, values: [u64; SLOTS]) -> W {
        values.iter().enumerate().fold(W::ZERO, |b, (i, &v)| {
            b | W::from_u64(v & lanes.slot_mask()) << (i as u32 * lanes.slot_bits())
        })
    }

    fn finds_each_lane<W: Word>(max_bits: u32) {
        for bits in 2..=max_bits {
            let lanes = Lanes::<W>::new(bits);
            let top = lanes.slot_mask();
            let bucket = pack(&lanes, [0, top, 1, top]);
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

    /// `lowest` divides by the slot width with a multiply: check every width and every
    /// non-empty set of lanes against the plain division.
    fn lowest_is_exact<W: Word>(max_bits: u32) {
        for bits in 2..=max_bits {
            let lanes = Lanes::<W>::new(bits);
            for set in 1u32..1 << SLOTS {
                let values = std::array::from_fn(|lane| if set >> lane & 1 == 1 { 1 } else { 2 });
                let expected = set.trailing_zeros() as usize;
                assert_eq!(lanes.matches(pack(&lanes, values), 1).lowest(), Some(expected), "bits {bits}");
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
        let lanes = Lanes::<u64>::new(12);
        let bucket = pack(&lanes, [5, 4, 0, 0]);
        assert_eq!(lanes.matches(bucket, 5).count(), 1);
    }

    proptest! {
        #[test]
        fn swar_equals_scalar(bits in 2u32..=32, raw in any::<[u64; SLOTS]>(), pick in 0usize..5, other in any::<u64>()) {
            fn check<W: Word>(bits: u32, raw: [u64; SLOTS], pick: usize, other: u64) -> Result<(), TestCaseError> {
                let lanes = Lanes::<W>::new(bits);
                let bucket = pack(&lanes, raw);
                let value = if pick < SLOTS { raw[pick] & lanes.slot_mask() } else { other & lanes.slot_mask() };
                prop_assert_eq!(lanes.matches(bucket, value), lanes.matches_scalar(bucket, value));
                let listed: Vec<usize> = lanes.matches(bucket, value).lanes().collect();
                let equal: Vec<usize> = (0..SLOTS).filter(|&l| lanes.lane(bucket, l) == value).collect();
                prop_assert_eq!(listed, equal);
                prop_assert_eq!(lanes.empties(bucket), lanes.matches_scalar(bucket, 0));
                Ok(())
            }
            if bits <= 16 { check::<u64>(bits, raw, pick, other)?; }
            check::<u128>(bits, raw, pick, other)?;
        }
    }
}
