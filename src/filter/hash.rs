//! Where a key goes: its two candidate buckets and the value stored for it.
//!
//! A key is hashed once to 64 bits `h` (ahash, seeded per filter). The table was built
//! with `B0` buckets and has doubled `L` times since (`B = B0 * 2^L`). From `h`:
//!
//! * `t = h * B0` as a 128-bit product: `t >> 64` is the first bucket in the original
//!   table ("fast range", so any `B0 >= 2` works and memory stays proportional to the
//!   capacity), and the top bits of `t`'s low word are the *extension bits*
//!   `e1 e2 ... eE`, the next binary digits of `h * B0 / 2^64`;
//! * first bucket `i1 = floor(h * B / 2^64)`, which is the original first bucket followed
//!   by `e1 .. eL`;
//! * fingerprint `fp = 1 + floor(lo32(h) * (2^f - 1) / 2^32)`, never 0 (0 marks an empty
//!   slot);
//! * second bucket `i2 = (i1 + D) mod B` with `D = 2^L * (1 + floor(mix(fp) * (B0 - 1) /
//!   2^64))`, so `i2 != i1` (Schmitz et al. 2025, section 3.1, scaled by `2^L`).
//!
//! An entry is stored in two parts. The *lane value* `fp << 1 | choice`, in the table the
//! lookups read, holds the fingerprint and a choice bit saying whether the entry sits in
//! its first (0) or second (1) bucket; from a slot alone its other bucket is `x + D`
//! (choice 0) or `x - D` (choice 1), so relocation needs no key. The *extension* `r =
//! E - L` bits (`e(L+1) .. eE`, the doublings left) sit in a side array that only writers
//! read (see `table.rs`). A lookup compares the lane value (`choice` 0 in `i1`, 1 in
//! `i2`); the choice bit is part of the match, which halves the false-positive rate.
//!
//! # Split doubling
//!
//! Doubling the table maps bucket `j` to `2j + e(L+1)` for every entry in it, whichever
//! its choice bit: `i1' = 2 i1 + e` by the definition of `i1`, and since `D' = 2D` and
//! `B' = 2B`, `i2' = (i1' + D') mod B' = 2 i2 + e` as well. So a doubling is a pure
//! split, with no relocation and no overflow (a new bucket receives entries from one old
//! bucket only). The extension bit it spends is implied by where the entry sits from then
//! on (it is the low bit of both its buckets), so the doubled table keeps the lane value
//! and one fewer extension bit. Lookups compare `f` bits plus the choice bit at every
//! level, as a fixed-size filter does, so the lanes they read are as narrow as a fixed-size
//! filter's; a filter that may double `E` times pays `E - L` side bits per slot at level
//! `L`, which only inserts, removals and doublings touch.
//!
//! After `L` doublings an entry's two buckets agree in their low `L` bits, so the table
//! is `2^L` independent cuckoo tables of `B0` buckets each, interleaved; each still
//! reaches the usual ~96% load when `B0` is not tiny.

use super::bucket::SLOTS;

/// The filter's arithmetic: bucket count, fingerprint width and growth state.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Geometry {
    base_buckets: usize,
    level: u32,
    extension_bits: u32,
    fingerprint_bits: u32,
}

/// A key's two buckets and the slot values that stand for it in each.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Probe {
    /// First bucket.
    pub(crate) i1: usize,
    /// Second bucket.
    pub(crate) i2: usize,
    /// Lane value in the first bucket (choice bit 0); `v1 | 1` is the value in the second.
    pub(crate) v1: u64,
    /// Extension bits not yet spent (the same in both buckets).
    pub(crate) ext: u64,
}

impl Probe {
    /// Slot value in the second bucket.
    #[inline]
    pub(crate) fn v2(&self) -> u64 {
        self.v1 | 1
    }
}

/// Widest slot: fingerprint, extension bits and choice bit must fit in 32 bits.
pub(crate) const MAX_SLOT_BITS: u32 = 32;

/// Largest fingerprint width (a fixed-size filter, whose slot is the fingerprint and the
/// choice bit).
pub(crate) const MAX_FINGERPRINT_BITS: u32 = MAX_SLOT_BITS - 1;

/// Fibonacci-hashing multiplier used to spread a fingerprint before range reduction.
const MIX: u64 = 0x9E37_79B9_7F4A_7C15;

#[inline]
fn fast_range(x: u64, n: usize) -> usize {
    ((x as u128 * n as u128) >> 64) as usize
}

impl Geometry {
    /// `buckets >= 2`, `fingerprint_bits >= 1`, and the slot (`fingerprint_bits +
    /// extension_bits + 1`) at most [`MAX_SLOT_BITS`]. `extension_bits` is the number of
    /// doublings the table may undergo.
    pub(crate) fn new(buckets: usize, fingerprint_bits: u32, extension_bits: u32) -> Self {
        debug_assert!(buckets >= 2);
        debug_assert!(fingerprint_bits >= 1 && fingerprint_bits + extension_bits < MAX_SLOT_BITS);
        Geometry { base_buckets: buckets, level: 0, extension_bits, fingerprint_bits }
    }

    /// A geometry read from a snapshot: `None` unless it is one that [`Geometry::new`] and
    /// [`Geometry::doubled`] could have made, with the fully grown bucket count in `usize`.
    pub(crate) fn restored(
        base_buckets: usize,
        fingerprint_bits: u32,
        extension_bits: u32,
        level: u32,
    ) -> Option<Self> {
        let valid = base_buckets >= 2
            && fingerprint_bits >= 1
            && fingerprint_bits + extension_bits < MAX_SLOT_BITS
            && level <= extension_bits
            && base_buckets.checked_mul(1usize.checked_shl(extension_bits)?).is_some();
        valid.then_some(Geometry { base_buckets, level, extension_bits, fingerprint_bits })
    }

    /// Buckets when built, before any doubling.
    pub(crate) fn base_buckets(&self) -> usize {
        self.base_buckets
    }

    /// Doublings allowed when built (one extension bit per slot each).
    pub(crate) fn extension_bits(&self) -> u32 {
        self.extension_bits
    }

    /// The same filter after one more doubling (`level < extension_bits`, and the doubled
    /// bucket count fits in `usize`: the builder checks both for the largest level).
    pub(crate) fn doubled(&self) -> Self {
        debug_assert!(self.level < self.extension_bits);
        Geometry { level: self.level + 1, ..*self }
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

    /// Expected false-positive rate of this table at load `load`.
    pub(crate) fn false_positive_rate(&self, load: f64) -> f64 {
        (2 * SLOTS) as f64 / 2.0 * load / (2f64.powi(self.fingerprint_bits as i32) - 1.0)
    }

    pub(crate) fn buckets(&self) -> usize {
        self.base_buckets << self.level
    }

    pub(crate) fn fingerprint_bits(&self) -> u32 {
        self.fingerprint_bits
    }

    /// Doublings so far.
    pub(crate) fn level(&self) -> u32 {
        self.level
    }

    /// Doublings this table may still undergo.
    pub(crate) fn doublings_left(&self) -> u32 {
        self.extension_bits - self.level
    }

    /// Bits per slot: the fingerprint, the extension bits not yet spent, and the choice
    /// bit. One fewer after each doubling.
    pub(crate) fn slot_bits(&self) -> u32 {
        self.lane_bits() + self.doublings_left()
    }

    /// Bits per lane of the table lookups read: the fingerprint and the choice bit.
    pub(crate) fn lane_bits(&self) -> u32 {
        self.fingerprint_bits + 1
    }

    /// The key with hash `hash`.
    #[inline]
    pub(crate) fn probe(&self, hash: u64) -> Probe {
        let t = hash as u128 * self.base_buckets as u128;
        let (base, frac) = ((t >> 64) as usize, t as u64);
        let i1 =
            if self.level == 0 { base } else { (base << self.level) | (frac >> (64 - self.level)) as usize };
        let left = self.doublings_left();
        let ext = if left == 0 { 0 } else { (frac >> (64 - self.extension_bits)) & ((1 << left) - 1) };
        let fp_range = (1u64 << self.fingerprint_bits) - 1;
        let fp = 1 + (((hash as u32 as u64) * fp_range) >> 32);
        let i2 = self.forward(i1, fp);
        Probe { i1, i2, v1: fp << 1, ext }
    }

    /// `D(fp)`, in `[1, B - 1]`.
    #[inline]
    fn distance(&self, fp: u64) -> usize {
        (1 + fast_range(fp.wrapping_mul(MIX), self.base_buckets - 1)) << self.level
    }

    #[inline]
    fn forward(&self, bucket: usize, fp: u64) -> usize {
        let next = bucket + self.distance(fp);
        if next >= self.buckets() {
            next - self.buckets()
        } else {
            next
        }
    }

    /// The other bucket of the entry with lane value `value` in `bucket`, and its lane
    /// value there.
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
                bucket + self.buckets() - d
            }
        };
        (other, value ^ 1)
    }

    /// Whether the lane value `value` could have been stored by this table: a non-zero
    /// fingerprint (for restoring untrusted snapshots; every such value is valid in any
    /// bucket, as the spent extension bits are no longer stored).
    pub(crate) fn holds(&self, value: u64) -> bool {
        value >> 1 != 0
    }

    /// Where the entry with extension bits `ext` in `bucket` goes when this table doubles,
    /// and its extension bits there (without the one the doubling spends; the lane value
    /// stays). Needs `doublings_left() > 0`.
    #[inline]
    pub(crate) fn split(&self, bucket: usize, ext: u64) -> (usize, u64) {
        debug_assert!(self.doublings_left() > 0);
        let spent = self.doublings_left() - 1;
        (2 * bucket + (ext >> spent & 1) as usize, ext & ((1 << spent) - 1))
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

    #[test]
    fn a_fixed_geometry_ignores_growth_state() {
        let g = Geometry::new(1000, 12, 0);
        assert_eq!(g.slot_bits(), 13);
        assert_eq!(g.doublings_left(), 0);
        assert_eq!(g.false_positive_rate(1.0), Geometry::fpr_at(12, 1.0));
    }

    proptest! {
        #[test]
        fn other_bucket_round_trips(buckets in 2usize..1 << 40, fbits in 1u32..=MAX_FINGERPRINT_BITS, ext in 0u32..8, level in 0u32..8, hash in any::<u64>()) {
            let (fbits, ext) = (fbits.min(MAX_FINGERPRINT_BITS - ext), ext);
            let mut g = Geometry::new(buckets, fbits.max(1), ext);
            for _ in 0..level.min(ext) {
                g = g.doubled();
            }
            let p = g.probe(hash);
            prop_assert!(p.i1 < g.buckets() && p.i2 < g.buckets());
            prop_assert_ne!(p.i1, p.i2);
            prop_assert!(p.v1 >> 1 >= 1 && p.v1 >> 1 < 1 << fbits.max(1));
            prop_assert!(p.v1 < 1 << g.lane_bits() && p.ext < 1 << g.doublings_left());
            prop_assert_eq!(g.other(p.i1, p.v1), (p.i2, p.v2()));
            prop_assert_eq!(g.other(p.i2, p.v2()), (p.i1, p.v1));
        }

        /// The split-doubling identity: after a doubling, both of a key's buckets are the
        /// children (`2j + e`) of its old ones, its lane values stay, and its extension bits
        /// lose the spent one.
        #[test]
        fn doubling_splits_both_buckets(buckets in 2usize..1 << 30, fbits in 1u32..=20, ext in 1u32..8, level in 0u32..8, hash in any::<u64>()) {
            let mut g = Geometry::new(buckets, fbits, ext);
            for _ in 0..level % ext {
                g = g.doubled();
            }
            let (before, after) = (g.probe(hash), g.doubled().probe(hash));
            prop_assert_eq!(g.split(before.i1, before.ext), (after.i1, after.ext));
            prop_assert_eq!(g.split(before.i2, before.ext), (after.i2, after.ext));
            prop_assert_eq!(before.v1, after.v1);
            prop_assert_eq!(g.doubled().slot_bits(), g.slot_bits() - 1);
            prop_assert_eq!(g.doubled().buckets(), 2 * g.buckets());
        }

        /// Snapshot validation accepts every real entry and rejects a zero fingerprint.
        #[test]
        fn holds_accepts_real_entries(buckets in 2usize..1 << 30, fbits in 1u32..=20, ext in 1u32..8, level in 0u32..8, hash in any::<u64>()) {
            let mut g = Geometry::new(buckets, fbits, ext);
            for _ in 0..level % (ext + 1) {
                g = g.doubled();
            }
            let p = g.probe(hash);
            prop_assert!(g.holds(p.v1) && g.holds(p.v2()));
            prop_assert_eq!(Geometry::restored(buckets, fbits, ext, g.level()), Some(g));
            prop_assert!(!g.holds(1) && !g.holds(0));
        }
    }
}
