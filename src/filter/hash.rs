//! Where a key goes: its two candidate buckets and the value stored for it.
//!
//! A key is hashed once to 64 bits `h` (ahash, seeded per filter). From `h`:
//!
//! * first bucket `i1 = floor(h * B / 2^64)` ("fast range"), so any bucket count `B >= 2`
//!   works and memory stays proportional to the capacity;
//! * fingerprint `fp = 1 + floor(lo32(h) * (2^f - 1) / 2^32)`, never 0 (0 marks an empty slot);
//! * second bucket `i2 = (i1 + D(fp)) mod B` with `D(fp) = 1 + floor(mix(fp) * (B - 1) / 2^64)`
//!   in `[1, B - 1]`, so `i2 != i1` (Schmitz et al. 2025, section 3.1).
//!
//! The stored slot value is `fp << 1 | choice`, where the choice bit says whether the entry
//! sits in its first (0) or second (1) bucket. From a slot alone its other bucket is
//! `x + D` (choice 0) or `x - D` (choice 1), so relocation needs no key. A lookup compares
//! `fp << 1` against bucket `i1` and `fp << 1 | 1` against `i2`; the choice bit is part of
//! the match, which halves the false-positive rate: with load `a`,
//! `FPR ~= 4 a / (2^f - 1)` for `f` fingerprint bits, the same as a classic `(f + 1)`-bit
//! cuckoo filter but with no power-of-two bucket count.

use super::bucket::SLOTS;

/// The filter's arithmetic: bucket count and fingerprint width.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Geometry {
    buckets: usize,
    fingerprint_bits: u32,
}

/// A key's two buckets and the slot values that stand for it in each.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Probe {
    /// First bucket.
    pub(crate) i1: usize,
    /// Second bucket.
    pub(crate) i2: usize,
    /// Slot value in the first bucket (`fp << 1`); `v1 | 1` is the value in the second.
    pub(crate) v1: u64,
}

impl Probe {
    /// Slot value in the second bucket.
    #[inline]
    pub(crate) fn v2(&self) -> u64 {
        self.v1 | 1
    }
}

/// Largest fingerprint width: a slot (fingerprint + choice bit) must fit in 32 bits.
pub(crate) const MAX_FINGERPRINT_BITS: u32 = 31;

/// Fibonacci-hashing multiplier used to spread a fingerprint before range reduction.
const MIX: u64 = 0x9E37_79B9_7F4A_7C15;

#[inline]
fn fast_range(x: u64, n: usize) -> usize {
    ((x as u128 * n as u128) >> 64) as usize
}

impl Geometry {
    /// `buckets >= 2`, `1 <= fingerprint_bits <= MAX_FINGERPRINT_BITS`.
    pub(crate) fn new(buckets: usize, fingerprint_bits: u32) -> Self {
        debug_assert!(buckets >= 2);
        debug_assert!((1..=MAX_FINGERPRINT_BITS).contains(&fingerprint_bits));
        Geometry { buckets, fingerprint_bits }
    }

    /// Smallest fingerprint width whose false-positive rate at full load is at most
    /// `epsilon`: `4 / (2^f - 1) <= epsilon`. `None` if even 31 bits are not enough.
    pub(crate) fn fingerprint_bits_for(epsilon: f64) -> Option<u32> {
        (1..=MAX_FINGERPRINT_BITS).find(|&f| Self::fpr_at(f, 1.0) <= epsilon)
    }

    /// Expected false-positive rate of `f`-bit fingerprints at load `load`.
    pub(crate) fn fpr_at(fingerprint_bits: u32, load: f64) -> f64 {
        (2 * SLOTS) as f64 / 2.0 * load / ((1u64 << fingerprint_bits) - 1) as f64
    }

    pub(crate) fn buckets(&self) -> usize {
        self.buckets
    }

    pub(crate) fn fingerprint_bits(&self) -> u32 {
        self.fingerprint_bits
    }

    /// Bits per slot: the fingerprint and the choice bit.
    pub(crate) fn slot_bits(&self) -> u32 {
        self.fingerprint_bits + 1
    }

    /// The key with hash `hash`.
    #[inline]
    pub(crate) fn probe(&self, hash: u64) -> Probe {
        let i1 = fast_range(hash, self.buckets);
        let fp_range = (1u64 << self.fingerprint_bits) - 1;
        let fp = 1 + (((hash as u32 as u64) * fp_range) >> 32);
        let i2 = self.forward(i1, fp);
        Probe { i1, i2, v1: fp << 1 }
    }

    /// `D(fp)`, in `[1, B - 1]`.
    #[inline]
    fn distance(&self, fp: u64) -> usize {
        1 + fast_range(fp.wrapping_mul(MIX), self.buckets - 1)
    }

    #[inline]
    fn forward(&self, bucket: usize, fp: u64) -> usize {
        let next = bucket + self.distance(fp);
        if next >= self.buckets {
            next - self.buckets
        } else {
            next
        }
    }

    /// The other bucket of the entry stored as `value` in `bucket`, and the value it must
    /// be stored as there.
    #[inline]
    pub(crate) fn other(&self, bucket: usize, value: u64) -> (usize, u64) {
        let fp = value >> 1;
        let other = if value & 1 == 0 {
            self.forward(bucket, fp)
        } else {
            let d = self.distance(fp);
            if bucket >= d {
                bucket - d
            } else {
                bucket + self.buckets - d
            }
        };
        (other, value ^ 1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn fingerprint_width_follows_epsilon() {
        assert_eq!(Geometry::fingerprint_bits_for(0.01), Some(9));
        assert_eq!(Geometry::fingerprint_bits_for(0.002), Some(11));
        assert_eq!(Geometry::fingerprint_bits_for(0.001), Some(12));
        assert_eq!(Geometry::fingerprint_bits_for(0.0001), Some(16));
        assert_eq!(Geometry::fingerprint_bits_for(1e-12), None);
    }

    proptest! {
        #[test]
        fn other_bucket_round_trips(buckets in 2usize..1 << 40, fbits in 1u32..=MAX_FINGERPRINT_BITS, hash in any::<u64>()) {
            let g = Geometry::new(buckets, fbits);
            let p = g.probe(hash);
            prop_assert!(p.i1 < buckets && p.i2 < buckets);
            prop_assert_ne!(p.i1, p.i2);
            prop_assert!(p.v1 >> 1 >= 1 && p.v1 >> 1 < 1 << fbits);
            prop_assert_eq!(g.other(p.i1, p.v1), (p.i2, p.v2()));
            prop_assert_eq!(g.other(p.i2, p.v2()), (p.i1, p.v1));
        }
    }
}
