//! The adaptive split's windows of recent evictions (one for keys the small queue evicted,
//! one for main's, for the whole cache behind a mutex: see `policy.rs`): sampled keys kept
//! as 16-bit fingerprints in two generations of a small cuckoo filter.
//!
//! It is the seen-before gate's design (two generations that rotate after `capacity`
//! recordings, cuckoo deletion for "seen? and forget") cut down to what the split needs:
//! written only under the split's mutex, so it has no atomics, stripes or validation; it
//! never grows, never needs an exact size (the bucket count is a power of two, so an
//! alternate bucket is one XOR away); a cache's save writes it whole. Deletion removes exactly
//! the key's own fingerprint, so a miss moves the split once per eviction. (A shard's
//! ghosts, asked on every miss, trade that exactness for one cache line: `bloom.rs`.)
//!
//! A key is remembered for at least `capacity` later recordings, as the gate's keys are,
//! unless a generation fills before that: an insert that finds no room after
//! [`MAX_KICKS`] relocations rotates early and stores the homeless fingerprint in the
//! fresh generation. The false positive rate is at most 8 / 2^16 per generation.

use crate::error::BuildError;
use crate::filter::{matches16, MIX, SLOTS};
use crate::primitive::prefetch;
#[cfg(feature = "serde")]
use crate::snapshot::{Decoder, SnapshotError};

/// Bits per fingerprint, and per slot.
const FINGERPRINT_BITS: u32 = 16;

/// Relocations an insert tries before it rotates the generations early.
const MAX_KICKS: usize = 32;

/// Load a generation is sized for: its slots hold `capacity / LOAD` fingerprints.
const LOAD: f64 = 0.9;

pub(crate) struct Ghosts {
    /// Bucket `i` of both generations side by side (so that a lookup in both reads one
    /// cache line per bucket), each four 16-bit fingerprints (0: empty).
    buckets: Box<[[u64; 2]]>,
    current: usize,
    /// Recordings into the current generation.
    recorded: usize,
    /// Recordings a generation takes before the next one starts.
    capacity: usize,
    mask: usize,
    rotations: u64,
    /// Picks the slot an insert evicts when both buckets are full.
    kicks: usize,
}

/// Where a key's fingerprint may be.
#[derive(Clone, Copy)]
pub(crate) struct Place {
    fp: u16,
    i1: usize,
    i2: usize,
}

impl Ghosts {
    /// Ghosts for `capacity` recordings per generation; an error if their table does not
    /// fit in memory.
    pub(crate) fn new(capacity: usize) -> Result<Self, BuildError> {
        let too_large = || BuildError::CapacityTooLarge { capacity };
        // Past `usize::MAX` the cast saturates, and `checked_mul` below refuses it.
        let slots = (capacity.max(1) as f64 / LOAD).ceil() as usize;
        let buckets = slots.div_ceil(SLOTS).checked_next_power_of_two().ok_or_else(too_large)?.max(2);
        let bytes = buckets.checked_mul(size_of::<[u64; 2]>()).ok_or_else(too_large)?;
        let mut table = Vec::new();
        table.try_reserve_exact(buckets).map_err(|_| BuildError::OutOfMemory { bytes })?;
        table.resize(buckets, [0; 2]);
        Ok(Ghosts {
            buckets: table.into(),
            current: 0,
            recorded: 0,
            capacity: capacity.max(1),
            mask: buckets - 1,
            rotations: 0,
            kicks: 0,
        })
    }

    /// Where the key of `hash` may be, its buckets starting to load into the CPU cache.
    #[inline]
    pub(crate) fn place(&self, hash: u64) -> Place {
        let (fp, i1) = self.first(hash);
        let place = Place { fp, i1, i2: self.other(i1, fp) };
        prefetch(&self.buckets[place.i1]);
        prefetch(&self.buckets[place.i2]);
        place
    }

    /// The fingerprint and first bucket of the key of `hash`.
    #[inline]
    fn first(&self, hash: u64) -> (u16, usize) {
        // The shard and the cache's table use the low half and the top 7 bits; mixing
        // every bit keeps the ghost's buckets independent of both.
        let mixed = hash.wrapping_mul(MIX);
        ((mixed >> 48) as u16 | 1, (mixed >> 16) as usize & self.mask)
    }

    /// Remembers the key of `hash`.
    #[inline(always)]
    pub(crate) fn record(&mut self, hash: u64) {
        let (fp, i1) = self.first(hash);
        // Most fingerprints fit their first bucket: the second is found only when needed.
        let homeless =
            if self.put(i1, fp) { None } else { self.insert(Place { fp, i1, i2: self.other(i1, fp) }) };
        if let Some(homeless) = homeless {
            self.rotate();
            // A fresh generation has room: its two buckets are empty.
            let _ = self.insert(homeless);
        }
        self.recorded += 1;
        if self.recorded >= self.capacity {
            self.rotate();
        }
    }

    /// Whether the key at `place` is remembered; forgets it (one copy in each generation
    /// that holds it).
    #[inline]
    pub(crate) fn take(&mut self, place: Place) -> bool {
        // The lanes of the generations where no copy has been forgotten yet.
        let mut sought = 0xFF;
        for i in [place.i1, place.i2] {
            let pair = &mut self.buckets[i];
            let found = matches16(*pair, place.fp) & sought;
            // Most misses find nothing: then the loop is skipped whole (written as a
            // filter, which compiles to fewer instructions than an early `continue`).
            for (g, bucket) in pair.iter_mut().enumerate().filter(|_| found != 0) {
                let lanes = found >> (SLOTS * g) & 0xF;
                if lanes != 0 {
                    *bucket &= !(u64::from(u16::MAX) << shift(lanes.trailing_zeros() as usize));
                    sought &= !(0xF << (SLOTS * g));
                }
            }
        }
        sought != 0xFF
    }

    /// The other bucket of fingerprint `fp` in bucket `i` (partial-key cuckoo hashing).
    #[inline]
    fn other(&self, i: usize, fp: u16) -> usize {
        i ^ ((u64::from(fp).wrapping_mul(0xC2B2_AE3D_27D4_EB4F) >> 32) as usize & self.mask)
    }

    /// Stores `place`'s fingerprint in the current generation, relocating others as
    /// needed; the fingerprint left homeless (and its buckets) if the generation has no
    /// room.
    #[inline(always)]
    fn insert(&mut self, place: Place) -> Option<Place> {
        if self.put(place.i1, place.fp) || self.put(place.i2, place.fp) {
            return None;
        }
        self.relocate(place)
    }

    /// Makes room for `place`'s fingerprint by moving others to their other buckets.
    #[cold]
    fn relocate(&mut self, place: Place) -> Option<Place> {
        let (mut i, mut fp, g) = (place.i1, place.fp, self.current);
        for _ in 0..MAX_KICKS {
            self.kicks = self.kicks.wrapping_add(1);
            let lane = self.kicks % SLOTS;
            let bucket = &mut self.buckets[i][g];
            let evicted = (*bucket >> shift(lane)) as u16;
            *bucket = *bucket & !(u64::from(u16::MAX) << shift(lane)) | u64::from(fp) << shift(lane);
            fp = evicted;
            i = self.other(i, fp);
            if self.put(i, fp) {
                return None;
            }
        }
        Some(Place { fp, i1: i, i2: self.other(i, fp) })
    }

    /// Stores `fp` in an empty slot of bucket `i` of the current generation, if any.
    #[inline]
    fn put(&mut self, i: usize, fp: u16) -> bool {
        let g = self.current;
        let empty = matches16(self.buckets[i], 0) >> (SLOTS * g) & 0xF;
        if empty != 0 {
            self.buckets[i][g] |= u64::from(fp) << shift(empty.trailing_zeros() as usize);
        }
        empty != 0
    }

    #[cfg(feature = "serde")]
    /// Appends the ghosts' state to `out`, for a cache's save (little-endian: capacity,
    /// bucket count, current generation, recordings in it, rotations, kicks, then the
    /// buckets' words).
    pub(crate) fn save(&self, out: &mut Vec<u8>) {
        let fields = [self.capacity, self.buckets.len(), self.current, self.recorded];
        for field in fields.map(|f| f as u64).into_iter().chain([self.rotations, self.kicks as u64]) {
            out.extend_from_slice(&field.to_le_bytes());
        }
        self.buckets.iter().flatten().for_each(|word| out.extend_from_slice(&word.to_le_bytes()));
    }

    #[cfg(feature = "serde")]
    /// Reads ghosts [`Ghosts::save`] wrote; an error if they are not ghosts it could
    /// have written.
    pub(crate) fn restore<R: std::io::Read + ?Sized>(d: &mut Decoder<'_, R>) -> Result<Self, SnapshotError> {
        let bad = || SnapshotError::inconsistent("the split's ghosts");
        let (capacity, buckets) = (d.usize("split ghost capacity")?, d.usize("split ghost buckets")?);
        let (current, recorded) = (d.usize("split ghost generation")?, d.usize("split ghost recordings")?);
        let (rotations, kicks) = (d.u64()?, d.u64()?);
        let words =
            buckets.checked_mul(2).filter(|_| buckets.is_power_of_two() && buckets >= 2).ok_or_else(bad)?;
        let words = d.words(words)?;
        if capacity == 0 || current > 1 || recorded > capacity {
            return Err(bad());
        }
        Ok(Ghosts {
            buckets: words.chunks_exact(2).map(|pair| [pair[0], pair[1]]).collect(),
            current,
            recorded,
            capacity,
            mask: buckets - 1,
            rotations,
            kicks: kicks as usize,
        })
    }

    #[cfg(feature = "serde")]
    /// Whether `other` was sized as these are.
    pub(crate) fn sized_as(&self, other: &Ghosts) -> bool {
        (self.capacity, self.buckets.len()) == (other.capacity, other.buckets.len())
    }

    /// Clears the older generation and makes it the current one.
    #[cold]
    fn rotate(&mut self) {
        self.current ^= 1;
        let g = self.current;
        self.buckets.iter_mut().for_each(|b| b[g] = 0);
        self.recorded = 0;
        self.rotations += 1;
    }
}

/// Where slot `lane` starts in a bucket.
#[inline]
fn shift(lane: usize) -> u32 {
    FINGERPRINT_BITS * lane as u32
}

#[cfg(test)]
mod tests {
    use super::Ghosts;

    fn hash(k: u64) -> u64 {
        crate::filter::seeded_hasher(7).hash_one(k)
    }

    #[test]
    fn remembers_a_key_for_capacity_recordings_then_forgets_it() {
        let mut ghosts = Ghosts::new(1_000).unwrap();
        ghosts.record(hash(0));
        (1..1_000).for_each(|k| ghosts.record(hash(k)));
        assert!(ghosts.take(ghosts.place(hash(0))), "forgotten within `capacity` recordings");
        assert!(!ghosts.take(ghosts.place(hash(0))), "take forgets");
        ghosts.record(hash(0));
        (1_000..3_000).for_each(|k| ghosts.record(hash(k)));
        assert!(!ghosts.take(ghosts.place(hash(0))), "remembered after two rotations");
    }

    #[test]
    fn every_key_of_a_generation_is_found() {
        let mut ghosts = Ghosts::new(10_000).unwrap();
        (0..10_000).for_each(|k| ghosts.record(hash(k)));
        assert_eq!(ghosts.rotations, 1);
        assert!((0..10_000).all(|k| ghosts.take(ghosts.place(hash(k)))));
        let strangers = (10_000..110_000).filter(|&k| ghosts.take(ghosts.place(hash(k)))).count();
        assert!(strangers < 100, "{strangers} false positives in 100,000");
    }

    #[test]
    fn a_full_generation_rotates_early_and_loses_nothing() {
        let mut ghosts = Ghosts::new(64).unwrap();
        ghosts.capacity = 10_000; // only a full table rotates
        (0..200).for_each(|k| ghosts.record(hash(k)));
        assert_eq!(ghosts.rotations, 1, "128 slots hold fewer than 200 keys, 256 more");
        assert!(
            (0..200).all(|k| ghosts.take(ghosts.place(hash(k)))),
            "a key was lost, or its fingerprint misplaced"
        );
    }

    #[test]
    fn copies_that_fill_their_buckets_rotate_early_and_are_kept() {
        let mut ghosts = Ghosts::new(1_000).unwrap();
        // Nine copies of one key: its two buckets hold eight.
        (0..9).for_each(|_| ghosts.record(hash(1)));
        assert_eq!(ghosts.rotations, 1, "the ninth copy started a generation");
        // `take` forgets one copy per generation: eight calls for 8 + 1 copies.
        assert!((0..8).all(|_| ghosts.take(ghosts.place(hash(1)))), "a copy was lost");
        assert!(!ghosts.take(ghosts.place(hash(1))));
    }
}
