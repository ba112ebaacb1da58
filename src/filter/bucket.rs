//! Bit-parallel search of one bucket.
//!
//! A bucket is [`SLOTS`] slots of `slot_bits` bits each, held in the low bits of a
//! `u128` (the table reads it out of the packed words, see `table.rs`). Slot value 0
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

/// Slots per bucket (the "4" of a (2,4) cuckoo filter).
pub(crate) const SLOTS: usize = 4;

/// Precomputed masks for one slot width.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Lanes {
    slot_bits: u32,
    /// The lowest bit of every lane.
    ones: u128,
    /// The highest bit of every lane.
    highs: u128,
    /// Every bit of every lane but the highest.
    lows: u128,
    /// All `SLOTS * slot_bits` bucket bits.
    bucket_mask: u128,
    /// All bits of one slot.
    slot_mask: u64,
}

impl Lanes {
    /// Masks for slots of `slot_bits` bits; `2 <= slot_bits <= 32`.
    pub(crate) fn new(slot_bits: u32) -> Self {
        debug_assert!((2..=32).contains(&slot_bits));
        let slot_mask = (1u64 << slot_bits) - 1;
        let mut ones = 0u128;
        for lane in 0..SLOTS as u32 {
            ones |= 1u128 << (lane * slot_bits);
        }
        let highs = ones << (slot_bits - 1);
        let bucket_bits = SLOTS as u32 * slot_bits;
        let bucket_mask = if bucket_bits == 128 { u128::MAX } else { (1u128 << bucket_bits) - 1 };
        Lanes { slot_bits, ones, highs, lows: bucket_mask & !highs, bucket_mask, slot_mask }
    }

    /// Bits per slot.
    pub(crate) fn slot_bits(&self) -> u32 {
        self.slot_bits
    }

    /// Bits per bucket.
    pub(crate) fn bucket_bits(&self) -> u32 {
        self.slot_bits * SLOTS as u32
    }

    /// Mask of the bucket's bits within a `u128`.
    pub(crate) fn bucket_mask(&self) -> u128 {
        self.bucket_mask
    }

    /// Mask of one slot's bits.
    pub(crate) fn slot_mask(&self) -> u64 {
        self.slot_mask
    }

    /// Lanes of `bucket` equal to `value`.
    #[inline]
    pub(crate) fn matches(&self, bucket: u128, value: u64) -> BitMask {
        self.zero_lanes(bucket ^ (value as u128).wrapping_mul(self.ones))
    }

    /// Empty lanes of `bucket`.
    #[inline]
    pub(crate) fn empties(&self, bucket: u128) -> BitMask {
        self.zero_lanes(bucket)
    }

    #[inline]
    fn zero_lanes(&self, x: u128) -> BitMask {
        BitMask { bits: !(((x & self.lows) + self.lows) | x) & self.highs, slot_bits: self.slot_bits }
    }

    /// The value held in `lane`.
    #[inline]
    pub(crate) fn lane(&self, bucket: u128, lane: usize) -> u64 {
        (bucket >> (lane as u32 * self.slot_bits)) as u64 & self.slot_mask
    }

    /// The reference: lanes equal to `value`, one at a time.
    #[cfg(test)]
    pub(crate) fn matches_scalar(&self, bucket: u128, value: u64) -> BitMask {
        let mut bits = 0;
        for lane in 0..SLOTS {
            if self.lane(bucket, lane) == value {
                bits |= 1u128 << (lane as u32 * self.slot_bits + self.slot_bits - 1);
            }
        }
        BitMask { bits, slot_bits: self.slot_bits }
    }
}

/// A set of lanes: the high bit of each selected lane.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct BitMask {
    bits: u128,
    slot_bits: u32,
}

impl BitMask {
    /// Whether any lane is selected.
    #[inline]
    pub(crate) fn any(self) -> bool {
        self.bits != 0
    }

    /// How many lanes are selected.
    #[inline]
    pub(crate) fn count(self) -> usize {
        self.bits.count_ones() as usize
    }

    /// The lowest selected lane.
    #[inline]
    pub(crate) fn lowest(self) -> Option<usize> {
        (self.bits != 0).then(|| (self.bits.trailing_zeros() / self.slot_bits) as usize)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn pack(lanes: &Lanes, values: [u64; SLOTS]) -> u128 {
        values
            .iter()
            .enumerate()
            .fold(0, |b, (i, &v)| b | ((v & lanes.slot_mask()) as u128) << (i as u32 * lanes.slot_bits()))
    }

    #[test]
    fn finds_each_lane() {
        for bits in 2..=32 {
            let lanes = Lanes::new(bits);
            let top = lanes.slot_mask();
            let bucket = pack(&lanes, [0, top, 1, top]);
            assert_eq!(lanes.matches(bucket, top).count(), 2, "bits {bits}");
            assert_eq!(lanes.matches(bucket, top).lowest(), Some(1));
            assert_eq!(lanes.empties(bucket).lowest(), Some(0));
            assert_eq!(lanes.matches(bucket, 1).lowest(), Some(2));
            assert!(!lanes.matches(bucket, 2).any() || bits == 1);
            assert_eq!(lanes.lane(bucket, 3), top);
        }
    }

    #[test]
    fn no_borrow_false_match_above_a_true_match() {
        // The short trick would flag lane 1 here: lane 0 matches, lane 1 differs by one.
        let lanes = Lanes::new(12);
        let bucket = pack(&lanes, [5, 4, 0, 0]);
        assert_eq!(lanes.matches(bucket, 5).count(), 1);
    }

    proptest! {
        #[test]
        fn swar_equals_scalar(bits in 2u32..=32, raw in any::<[u64; SLOTS]>(), pick in 0usize..5, other in any::<u64>()) {
            let lanes = Lanes::new(bits);
            let bucket = pack(&lanes, raw);
            let value = if pick < SLOTS { raw[pick] & lanes.slot_mask() } else { other & lanes.slot_mask() };
            prop_assert_eq!(lanes.matches(bucket, value), lanes.matches_scalar(bucket, value));
            prop_assert_eq!(lanes.empties(bucket), lanes.matches_scalar(bucket, 0));
        }
    }
}
