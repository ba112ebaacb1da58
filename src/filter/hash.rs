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
//!
//! # Windows
//!
//! In the windowed layout ([`Layout::Windows`], Schmitz et al. section 3.2) the `B`
//! "buckets" are windows of 2 slots, and neighbouring windows share a slot. The placement
//! above is unchanged (`i1`, `D`, the choice bit), but a slot no longer tells which window
//! its entry belongs to, so the lane value gains an offset bit: `fp << 2 | choice << 1 |
//! offset`, the entry's position in its window. A lookup compares each of a window's two
//! lanes with its own offset, so a slot matches for one window only; over the four slots
//! of its two windows it compares against each of the four (choice, offset) pairs once.
//! Hence the false-positive rate is about `load / (2^f - 1)` with `f + 2` bits per slot,
//! against `4 load / (2^f - 1)` with `f + 1` bits for buckets of 4: one bit less per slot
//! at equal ε. Two windows of 2 reach a load of about 96.5% (Lehman and Panigrahy), close
//! to the 98% of two buckets of 4, when the two windows are independent. A fixed distance
//! `D(fp)` would map neighbouring windows (which share a slot) onto neighbouring windows
//! for every key with the same fingerprint, a correlation that costs load, the more the
//! shorter the fingerprint. So a windowed table is made of whole groups of 63 windows, and
//! the second window of a key in window `r` of group `g` is window `(a r + b) mod 63` of
//! group `g + G` (mod groups), with `G` in `[1, groups - 1]` and `b` drawn from the
//! fingerprint, and `a` a unit modulo 63 (not ±1) drawn from it too, so that neighbours
//! land apart and the map can be inverted. Windows cannot double by splitting (neighbouring
//! entries would collide in a child window), so windowed filters are fixed-size.

use super::bucket::{GROUP_SLOTS, SLOTS};

/// How a filter arranges its slots; chosen with
/// [`FilterBuilder::layout`](crate::FilterBuilder::layout).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Layout {
    /// Two candidate buckets of 4 slots per key (the classic (2,4) cuckoo filter). The
    /// default: it can double when full.
    #[default]
    Buckets,
    /// Two candidate windows of 2 slots per key, overlapping their neighbours (Schmitz et
    /// al., "Smaller and More Flexible Cuckoo Filters", section 3.2): about one bit per item
    /// smaller at the same false-positive rate. Fixed-size: it never doubles.
    Windows,
}

/// The filter's arithmetic: bucket count, fingerprint width and growth state.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Geometry {
    layout: Layout,
    base_buckets: usize,
    /// `base_buckets << level`.
    buckets: usize,
    /// Groups of 63 windows (windows only).
    groups: usize,
    level: u32,
    extension_bits: u32,
    fingerprint_bits: u32,
    /// `2^fingerprint_bits - 1`: a fingerprint is `1 + floor(lo32(h) * scale / 2^32)`.
    fingerprint_scale: u64,
    /// `base_buckets - 1`, the distances `D / 2^level` can take.
    distances: usize,
}

/// `2^bits - 1` (the shift taken modulo 64, for a geometry being checked).
fn scale(bits: u32) -> u64 {
    1u64.wrapping_shl(bits).wrapping_sub(1)
}

/// A key's two buckets and the slot values that stand for it in each.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Probe {
    /// First bucket.
    pub(crate) i1: usize,
    /// Second bucket.
    pub(crate) i2: usize,
    /// Lane value in the first bucket (choice bit 0, and offset 0 in a window).
    pub(crate) v1: u64,
    /// Lane value in the second bucket (choice bit 1).
    pub(crate) v2: u64,
    /// Extension bits not yet spent (the same in both buckets).
    pub(crate) ext: u64,
}

/// Widest slot: fingerprint, extension bits, choice bit (and offset bit) must fit in 32
/// bits.
pub(crate) const MAX_SLOT_BITS: u32 = 32;

impl Layout {
    /// Bits a lane holds besides the fingerprint: the choice bit, and a window's offset.
    #[inline]
    pub(crate) fn tag_bits(self) -> u32 {
        match self {
            Layout::Buckets => 1,
            Layout::Windows => 2,
        }
    }

    /// Largest fingerprint width (a fixed-size filter's slot is the fingerprint and the tag).
    pub(crate) fn max_fingerprint_bits(self) -> u32 {
        MAX_SLOT_BITS - self.tag_bits()
    }

    /// Slot values a lookup compares a key's value with, at 100% load, divided by the
    /// values a fingerprint can take: 4 for two buckets of 4 (8 slots, and the choice bit
    /// halves the candidates), 1 for two windows of 2 (see the module docs).
    fn comparisons(self) -> f64 {
        match self {
            Layout::Buckets => SLOTS as f64,
            Layout::Windows => 1.0,
        }
    }
}

/// Fibonacci-hashing multiplier used to spread a fingerprint before range reduction.
pub(crate) const MIX: u64 = 0x9E37_79B9_7F4A_7C15;

/// Windows per group of 64 slots (see `bucket.rs`); a windowed table has whole groups,
/// and numbers a window by its first slot, `64 g + r` for position `r < 63` in group `g`.
pub(crate) const WINDOW_GROUP: usize = 63;

/// 32 of the 34 units modulo 63 other than ±1, each with its inverse (32, so that a
/// fingerprint picks one with a mask).
const UNITS: [(u8, u8); 32] = units();

const fn units() -> [(u8, u8); 32] {
    let mut units = [(0, 0); 32];
    let (mut a, mut found) = (2, 0);
    while found < 32 {
        if a % 3 != 0 && a % 7 != 0 {
            let mut inverse = 1;
            while a * inverse % 63 != 1 {
                inverse += 1;
            }
            units[found] = (a as u8, inverse as u8);
            found += 1;
        }
        a += 1;
    }
    units
}

/// Where a fingerprint's second window lies relative to its first: `groups` groups on
/// (cyclically), at position `a r + b` (mod 63) for position `r` in the first group.
#[derive(Clone, Copy)]
struct WindowMap {
    groups: usize,
    a: usize,
    a_inverse: usize,
    b: usize,
}

impl WindowMap {
    #[inline]
    fn forward(&self, window: usize, groups: usize) -> usize {
        self.forward_from(window / GROUP_SLOTS, window % GROUP_SLOTS, groups)
    }

    /// [`WindowMap::forward`] from the window's group and position in it.
    #[inline]
    fn forward_from(&self, group: usize, position: usize, groups: usize) -> usize {
        let group = group + self.groups;
        let group = if group >= groups { group - groups } else { group };
        group * GROUP_SLOTS + (self.a * position + self.b) % WINDOW_GROUP
    }

    #[inline]
    fn backward(&self, window: usize, groups: usize) -> usize {
        let (group, position) = (window / GROUP_SLOTS, window % GROUP_SLOTS);
        let group = if group >= self.groups { group - self.groups } else { group + groups - self.groups };
        group * GROUP_SLOTS + self.a_inverse * (position + WINDOW_GROUP - self.b) % WINDOW_GROUP
    }
}

#[inline]
fn fast_range(x: u64, n: usize) -> usize {
    ((x as u128 * n as u128) >> 64) as usize
}

impl Geometry {
    /// `buckets >= 2`, `fingerprint_bits >= 1`, and the slot (`fingerprint_bits +
    /// extension_bits + 1`) at most [`MAX_SLOT_BITS`]. `extension_bits` is the number of
    /// doublings the table may undergo.
    pub(crate) fn new(layout: Layout, buckets: usize, fingerprint_bits: u32, extension_bits: u32) -> Self {
        debug_assert!(buckets >= 2);
        debug_assert!(
            fingerprint_bits >= 1 && fingerprint_bits + extension_bits <= layout.max_fingerprint_bits()
        );
        debug_assert!(layout == Layout::Buckets || (extension_bits == 0 && buckets % GROUP_SLOTS == 0));
        let groups = Self::groups_of(layout, buckets);
        Geometry {
            layout,
            base_buckets: buckets,
            buckets,
            groups,
            level: 0,
            extension_bits,
            fingerprint_bits,
            fingerprint_scale: scale(fingerprint_bits),
            distances: buckets - 1,
        }
    }

    /// A geometry read from a snapshot: `None` unless it is one that [`Geometry::new`] and
    /// [`Geometry::doubled`] could have made, with the fully grown bucket count in `usize`.
    pub(crate) fn restored(
        layout: Layout,
        base_buckets: usize,
        fingerprint_bits: u32,
        extension_bits: u32,
        level: u32,
    ) -> Option<Self> {
        let valid = base_buckets >= 2
            && fingerprint_bits >= 1
            && fingerprint_bits + extension_bits <= layout.max_fingerprint_bits()
            && (layout == Layout::Buckets || extension_bits == 0)
            && level <= extension_bits
            && base_buckets.checked_mul(1usize.checked_shl(extension_bits)?)?.checked_mul(SLOTS).is_some()
            && (layout == Layout::Buckets || base_buckets % GROUP_SLOTS == 0);
        let groups = Self::groups_of(layout, base_buckets);
        let buckets = base_buckets.wrapping_shl(level); // exact when `valid`
        valid.then_some(Geometry {
            layout,
            base_buckets,
            buckets,
            groups,
            level,
            extension_bits,
            fingerprint_bits,
            fingerprint_scale: scale(fingerprint_bits),
            distances: base_buckets.wrapping_sub(1),
        })
    }

    fn groups_of(layout: Layout, buckets: usize) -> usize {
        match layout {
            Layout::Buckets => 0,
            Layout::Windows => buckets / GROUP_SLOTS,
        }
    }

    pub(crate) fn layout(&self) -> Layout {
        self.layout
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
        Geometry { level: self.level + 1, buckets: 2 * self.buckets, ..*self }
    }

    /// Smallest fingerprint width whose false-positive rate at full load is at most
    /// `epsilon` (`4 / (2^f - 1)` for buckets, `1 / (2^f - 1)` for windows). `None` if even
    /// the widest slot is not enough.
    pub(crate) fn fingerprint_bits_for(layout: Layout, epsilon: f64) -> Option<u32> {
        (1..=layout.max_fingerprint_bits()).find(|&f| Self::fpr_at(layout, f, 1.0) <= epsilon)
    }

    /// Expected false-positive rate of `f`-bit fingerprints at load `load`.
    pub(crate) fn fpr_at(layout: Layout, fingerprint_bits: u32, load: f64) -> f64 {
        layout.comparisons() * load / (2f64.powi(fingerprint_bits as i32) - 1.0)
    }

    /// Expected false-positive rate of this table at load `load`.
    pub(crate) fn false_positive_rate(&self, load: f64) -> f64 {
        Self::fpr_at(self.layout, self.fingerprint_bits, load)
    }

    /// Buckets (windows, in the windowed layout).
    pub(crate) fn buckets(&self) -> usize {
        self.buckets
    }

    /// Buckets, or windows (`63` per group of 64 slots).
    pub(crate) fn places(&self) -> usize {
        match self.layout {
            Layout::Buckets => self.buckets(),
            Layout::Windows => self.groups * WINDOW_GROUP,
        }
    }

    /// Slots: the most fingerprints the table can hold (`usize::MAX` if that overflows,
    /// which no allocation can satisfy).
    pub(crate) fn slots(&self) -> usize {
        match self.layout {
            Layout::Buckets => self.buckets().saturating_mul(SLOTS),
            Layout::Windows => self.buckets(),
        }
    }

    pub(crate) fn fingerprint_bits(&self) -> u32 {
        self.fingerprint_bits
    }

    /// Doublings so far.
    pub(crate) fn level(&self) -> u32 {
        self.level
    }

    /// Whether a key has the same buckets and lane values in a table of `other` (its
    /// extension bits aside): the same layout, bucket count, level and fingerprint width.
    #[inline]
    pub(crate) fn same_placement(&self, other: &Geometry) -> bool {
        self.buckets == other.buckets
            && self.level == other.level
            && self.fingerprint_bits == other.fingerprint_bits
            && self.layout == other.layout
    }

    /// Doublings this table may still undergo.
    pub(crate) fn doublings_left(&self) -> u32 {
        self.extension_bits - self.level
    }

    /// Bits per slot: the fingerprint, the extension bits not yet spent, and the tag
    /// (choice bit, and a window's offset bit). One fewer after each doubling.
    pub(crate) fn slot_bits(&self) -> u32 {
        self.lane_bits() + self.doublings_left()
    }

    /// Bits per lane of the table lookups read: the fingerprint and the tag.
    pub(crate) fn lane_bits(&self) -> u32 {
        self.fingerprint_bits + self.layout.tag_bits()
    }

    /// The key with hash `hash`.
    #[inline]
    pub(crate) fn probe(&self, hash: u64) -> Probe {
        self.probe_as(hash, self.layout == Layout::Windows)
    }

    /// [`Geometry::probe`] where the caller knows the layout when compiled: `windowed` is
    /// a constant at every call from a table, so the other layout's arithmetic is dropped.
    #[inline(always)]
    pub(crate) fn probe_as(&self, hash: u64, windowed: bool) -> Probe {
        if windowed {
            // `i1 = fast_range(hash, 63 G)`, as group and position: `hash * G` gives the
            // group and, in its low word, the fraction that gives the position.
            let t = hash as u128 * self.groups as u128;
            let (group, position) = ((t >> 64) as usize, fast_range(t as u64, WINDOW_GROUP));
            let fp = self.fingerprint(hash);
            let i1 = group * GROUP_SLOTS + position;
            let i2 = self.window_map(fp).forward_from(group, position, self.groups);
            return Probe { i1, i2, v1: fp << 2, v2: fp << 2 | 2, ext: 0 };
        }
        // `i1 = fast_range(hash, B 2^level)`: the base bucket's children after each doubling
        // are chosen by the next bits of the fraction, which also give the extension bits of
        // the doublings still to come.
        let (i1, fp, ext) = self.first_entry(hash);
        Probe { i1, i2: self.second_bucket(i1, fp), v1: fp << 1, v2: fp << 1 | 1, ext }
    }

    /// A key's first bucket, fingerprint and extension bits in the bucket layout: what an
    /// insert needs before it tries the first bucket.
    #[inline(always)]
    pub(crate) fn first_entry(&self, hash: u64) -> (usize, u64, u64) {
        let t = hash as u128 * self.buckets() as u128;
        let (i1, frac) = ((t >> 64) as usize, t as u64);
        let ext = frac >> (63 - self.doublings_left()) >> 1;
        (i1, self.fingerprint(hash), ext)
    }

    /// What a lookup of the key with hash `hash` reads: its first and second bucket (or
    /// window) and its lane value in the first (the second's adds the choice bit).
    #[inline(always)]
    pub(crate) fn lookup_place(&self, hash: u64, windowed: bool) -> (usize, usize, u64) {
        if windowed {
            let p = self.probe_as(hash, true);
            return (p.i1, p.i2, p.v1);
        }
        let (i1, fp) = self.first_bucket(hash);
        (i1, self.second_bucket(i1, fp), fp << 1)
    }

    /// A key's first bucket and fingerprint in the bucket layout: what a lookup needs
    /// before it reads the first bucket ([`Geometry::second_bucket`] gives the second).
    #[inline(always)]
    pub(crate) fn first_bucket(&self, hash: u64) -> (usize, u64) {
        debug_assert_eq!(self.layout, Layout::Buckets);
        (((hash as u128 * self.buckets() as u128) >> 64) as usize, self.fingerprint(hash))
    }

    /// The second bucket of a key whose first is `i1` and fingerprint `fp`, in the bucket
    /// layout.
    #[inline(always)]
    pub(crate) fn second_bucket(&self, i1: usize, fp: u64) -> usize {
        self.forward(i1, fp, false)
    }

    /// The fingerprint of the key with hash `hash`, in `[1, 2^fingerprint_bits - 1]`.
    #[inline(always)]
    fn fingerprint(&self, hash: u64) -> u64 {
        1 + (((hash as u32 as u64) * self.fingerprint_scale) >> 32)
    }

    /// `D(fp)`, in `[1, B - 1]`.
    #[inline(always)]
    fn distance(&self, fp: u64) -> usize {
        (1 + fast_range(fp.wrapping_mul(MIX), self.distances)) << self.level
    }

    /// The second bucket of a key in `bucket` with fingerprint `fp`.
    #[inline(always)]
    fn forward(&self, bucket: usize, fp: u64, windowed: bool) -> usize {
        if windowed {
            return self.window_map(fp).forward(bucket, self.groups);
        }
        let next = bucket + self.distance(fp);
        if next >= self.buckets() {
            next - self.buckets()
        } else {
            next
        }
    }

    /// The first bucket of a key in its second bucket `bucket` with fingerprint `fp`.
    #[inline(always)]
    fn backward(&self, bucket: usize, fp: u64, windowed: bool) -> usize {
        if windowed {
            return self.window_map(fp).backward(bucket, self.groups);
        }
        let d = self.distance(fp);
        if bucket >= d {
            bucket - d
        } else {
            bucket + self.buckets() - d
        }
    }

    #[inline(always)]
    fn window_map(&self, fp: u64) -> WindowMap {
        let mixed = fp.wrapping_mul(MIX);
        let groups = self.groups;
        // The group distance from the high bits, the rest from the low ones.
        let (a, a_inverse) = UNITS[mixed as usize % UNITS.len()];
        WindowMap {
            groups: 1 + fast_range(mixed, groups - 1),
            a: a as usize,
            a_inverse: a_inverse as usize,
            b: ((mixed >> 5) as u32 as usize * WINDOW_GROUP) >> 32,
        }
    }

    /// The other bucket of the entry with lane value `value` in lane `lane` of `bucket`,
    /// and its lane value there at offset 0 (in a window, the lane it lands in adds its
    /// offset).
    #[cfg(test)]
    pub(crate) fn other(&self, bucket: usize, lane: usize, value: u64) -> (usize, u64) {
        self.other_as(bucket, lane, value, self.layout == Layout::Windows)
    }

    /// [`Geometry::other`] where the caller knows the layout when compiled (see
    /// [`Geometry::probe_as`]).
    #[inline(always)]
    pub(crate) fn other_as(&self, bucket: usize, lane: usize, value: u64, windowed: bool) -> (usize, u64) {
        let tag_bits = 1 + windowed as u32;
        let choice = 1 << (tag_bits - 1);
        // In a window the entry's own window starts `offset` slots before its slot.
        let own = if windowed { bucket + lane - (value & 1) as usize } else { bucket };
        let fp = value >> tag_bits;
        let other = if value & choice == 0 {
            self.forward(own, fp, windowed)
        } else {
            self.backward(own, fp, windowed)
        };
        (other, (value ^ choice) & !(choice - 1))
    }

    /// The own window of the window entry with lane value `value` in lane `lane` of window
    /// `bucket`, and its lane value there at offset 0.
    #[inline]
    pub(crate) fn own(&self, bucket: usize, lane: usize, value: u64) -> (usize, u64) {
        debug_assert_eq!(self.layout, Layout::Windows);
        (bucket + lane - (value & 1) as usize, value & !1)
    }

    /// Whether the lane value `value` could have been stored by this table: a non-zero
    /// fingerprint (for restoring untrusted snapshots; every such value is valid in any
    /// bucket, as the spent extension bits are no longer stored; a window's offset is
    /// checked where the slot is known).
    pub(crate) fn holds(&self, value: u64) -> bool {
        value >> self.layout.tag_bits() != 0
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
        let bits = |layout, eps| Geometry::fingerprint_bits_for(layout, eps);
        assert_eq!(bits(Layout::Buckets, 0.01), Some(9));
        assert_eq!(bits(Layout::Buckets, 0.002), Some(11));
        assert_eq!(bits(Layout::Buckets, 0.001), Some(12));
        assert_eq!(bits(Layout::Buckets, 0.0001), Some(16));
        assert_eq!(bits(Layout::Buckets, 1e-12), None);
        // Windows compare a quarter as many values: two bits less, for one more tag bit.
        assert_eq!(bits(Layout::Windows, 0.01), Some(7));
        assert_eq!(bits(Layout::Windows, 0.001), Some(10));
        assert_eq!(bits(Layout::Windows, 0.0001), Some(14));
        assert_eq!(bits(Layout::Windows, 1e-12), None);
    }

    #[test]
    fn units_are_inverse_pairs() {
        assert!(UNITS.iter().all(|&(a, inverse)| a as usize * inverse as usize % 63 == 1 && a > 1 && a < 62));
    }

    #[test]
    fn a_fixed_geometry_ignores_growth_state() {
        let g = Geometry::new(Layout::Buckets, 1000, 12, 0);
        assert_eq!(g.slot_bits(), 13);
        assert_eq!(g.doublings_left(), 0);
        assert_eq!(g.false_positive_rate(1.0), Geometry::fpr_at(Layout::Buckets, 12, 1.0));
        let w = Geometry::new(Layout::Windows, 64 * 16, 10, 0);
        assert_eq!((w.slot_bits(), w.slots()), (12, 64 * 16));
    }

    proptest! {
        /// A window entry's other window, from any lane it sits in, is the key's other
        /// window, and moving it back gives the first.
        #[test]
        fn other_window_round_trips(groups in 1usize..1 << 34, fbits in 1u32..=30, hash in any::<u64>(), lanes in any::<[bool; 2]>()) {
            let slots = groups * GROUP_SLOTS;
            let g = Geometry::new(Layout::Windows, slots, fbits, 0);
            let p = g.probe(hash);
            prop_assert!(p.i1 < slots && p.i2 < slots);
            prop_assert!(p.i1 % GROUP_SLOTS < WINDOW_GROUP && p.i2 % GROUP_SLOTS < WINDOW_GROUP);
            // Different groups, unless there is only one.
            prop_assert!(groups == 1 || p.i1 / GROUP_SLOTS != p.i2 / GROUP_SLOTS);
            prop_assert!(p.v1 & 3 == 0 && p.v2 == p.v1 | 2);
            let [l1, l2] = lanes.map(usize::from);
            // The entry in lane l of its window holds `v | l`; read from the window
            // starting at its own slot, it is in lane 0.
            prop_assert_eq!(g.other(p.i1, l1, p.v1 | l1 as u64), (p.i2, p.v2));
            prop_assert_eq!(g.other(p.i1 + l1, 0, p.v1 | l1 as u64), (p.i2, p.v2));
            prop_assert_eq!(g.other(p.i2, l2, p.v2 | l2 as u64), (p.i1, p.v1));
        }

        /// Neighbouring windows with one fingerprint have second windows that are not
        /// neighbours (the map's multiplier is not ±1).
        #[test]
        fn neighbours_land_apart(groups in 2usize..1 << 20, fbits in 1u32..=30, hash in any::<u64>()) {
            let g = Geometry::new(Layout::Windows, groups * GROUP_SLOTS, fbits, 0);
            let p = g.probe(hash);
            let fp = p.v1 >> 2;
            if p.i1 % GROUP_SLOTS < WINDOW_GROUP - 1 {
                let next = g.forward(p.i1 + 1, fp, true);
                prop_assert!(next.abs_diff(p.i2) > 1);
            }
        }
    }

    proptest! {
        #[test]
        fn other_bucket_round_trips_and_a_lookup_probes_alike(buckets in 2usize..1 << 40, fbits in 1u32..=31, ext in 0u32..8, level in 0u32..8, hash in any::<u64>()) {
            let (fbits, ext) = (fbits.min(Layout::Buckets.max_fingerprint_bits() - ext), ext);
            let mut g = Geometry::new(Layout::Buckets, buckets, fbits.max(1), ext);
            for _ in 0..level.min(ext) {
                g = g.doubled();
            }
            let p = g.probe(hash);
            prop_assert!(p.i1 < g.buckets() && p.i2 < g.buckets());
            prop_assert_ne!(p.i1, p.i2);
            prop_assert!(p.v1 >> 1 >= 1 && p.v1 >> 1 < 1 << fbits.max(1));
            prop_assert!(p.v1 < 1 << g.lane_bits() && p.ext < 1 << g.doublings_left());
            prop_assert_eq!(g.other(p.i1, 3, p.v1), (p.i2, p.v2));
            prop_assert_eq!(g.other(p.i2, 0, p.v2), (p.i1, p.v1));
            // A lookup's two halves name the probe's buckets and values.
            let (i1, fp) = g.first_bucket(hash);
            prop_assert_eq!((i1, fp << 1, g.second_bucket(i1, fp), fp << 1 | 1), (p.i1, p.v1, p.i2, p.v2));
            prop_assert_eq!(g.lookup_place(hash, false), (p.i1, p.i2, p.v1));
            // And an insert's first half names the probe's first bucket and extension bits.
            prop_assert_eq!(g.first_entry(hash), (p.i1, p.v1 >> 1, p.ext));
        }

        /// A grown table places keys where the base bucket and the next bits of the
        /// fraction put them (the form snapshots of grown filters were written with).
        #[test]
        fn grown_placement_extends_the_base_one(buckets in 2usize..1 << 40, ext in 1u32..8, level in 0u32..8, hash in any::<u64>()) {
            let mut g = Geometry::new(Layout::Buckets, buckets, 12, ext);
            for _ in 0..level % (ext + 1) {
                g = g.doubled();
            }
            let t = hash as u128 * buckets as u128;
            let (base, frac) = ((t >> 64) as usize, t as u64);
            let p = g.probe(hash);
            let children = if g.level() == 0 { 0 } else { (frac >> (64 - g.level())) as usize };
            prop_assert_eq!(p.i1, base << g.level() | children);
            prop_assert_eq!(p.ext, (frac >> (64 - ext)) & ((1 << g.doublings_left()) - 1));
        }

        /// The split-doubling identity: after a doubling, both of a key's buckets are the
        /// children (`2j + e`) of its old ones, its lane values stay, and its extension bits
        /// lose the spent one.
        #[test]
        fn doubling_splits_both_buckets(buckets in 2usize..1 << 30, fbits in 1u32..=20, ext in 1u32..8, level in 0u32..8, hash in any::<u64>()) {
            let mut g = Geometry::new(Layout::Buckets, buckets, fbits, ext);
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
            let mut g = Geometry::new(Layout::Buckets, buckets, fbits, ext);
            for _ in 0..level % (ext + 1) {
                g = g.doubled();
            }
            let p = g.probe(hash);
            prop_assert!(g.holds(p.v1) && g.holds(p.v2));
            prop_assert_eq!(Geometry::restored(Layout::Buckets, buckets, fbits, ext, g.level()), Some(g));
            prop_assert!(!g.holds(1) && !g.holds(0));
        }
    }
}
