//! S3-FIFO's ghost queue for one shard: the keys that left the small queue unused, kept in
//! two generations of a register-blocked Bloom filter (Putze, Sanders and Singler, 2007):
//! a key sets three bits of one 64-bit word, and word `i` of both generations sit side by
//! side, so a miss asks both generations with one load from one cache line, and a
//! recording writes one word.
//!
//! It is the seen-before gate's two generations, traded for speed where a wrong answer is
//! cheap: a ghost is a hint, and a false one only sends a key to the other queue. A
//! generation rotates after `reach` recordings, at most `capacity` (the shard's climber,
//! `climber.rs`, sets it), so a key is remembered for at least `reach` later recordings.
//! `take` forgets a key by clearing its bits, which may also forget a key sharing them
//! (about one take in seven does, at a full generation). At 16 to 32 bits per key (a
//! generation of `capacity / 4` words, rounded up to a power of two), 0.5% to 2% of
//! strangers are taken for ghosts. The shard writes it only under its write lock, so it
//! has no atomics.
//!
//! (The cuckoo filter of `ghost.rs` keeps the adaptive split's windows, which must count
//! each key once.)

use super::climber::STEP;
use crate::error::BuildError;
use crate::filter::MIX;
#[cfg(feature = "metrics")]
use crate::gate::GateStats;
#[cfg(feature = "serde")]
use crate::snapshot::{Decoder, SnapshotError};

/// Keys per 64-bit word a full generation holds on average.
const KEYS_PER_WORD: usize = 4;

pub(crate) struct BloomGhosts {
    /// Word `i` of both generations; empty until the first recording (an empty cache's
    /// memory does not grow with its capacity).
    words: Box<[[u64; 2]]>,
    /// Words the table takes once made; 0 if the allocator refused them then (the shard
    /// goes on without ghosts: they are hints).
    size: usize,
    current: usize,
    /// Recordings into the current generation, and into the previous one.
    recorded: usize,
    previous: usize,
    /// Recordings a generation takes at most, as the table is sized.
    capacity: usize,
    /// Recordings a generation takes before the next one starts: from a sixteenth of
    /// `capacity` (one climber's step) to all of it.
    reach: usize,
    mask: usize,
    rotations: u64,
}

/// Where a key's bits are: its word, and the bits set in it.
#[derive(Clone, Copy)]
struct Place {
    word: usize,
    bits: u64,
}

impl BloomGhosts {
    /// Ghosts for `capacity` recordings per generation, their table made at the first
    /// recording; an error if the allocator refuses its size now (asked and given back at
    /// once: untouched memory, so this costs no more than the question).
    pub(crate) fn new(capacity: usize) -> Result<Self, BuildError> {
        let too_large = || BuildError::CapacityTooLarge { capacity };
        let words =
            capacity.max(1).div_ceil(KEYS_PER_WORD).checked_next_power_of_two().ok_or_else(too_large)?.max(2);
        let bytes = words.checked_mul(size_of::<[u64; 2]>()).ok_or_else(too_large)?;
        let mut probe = Vec::<[u64; 2]>::new();
        probe.try_reserve_exact(words).map_err(|_| BuildError::OutOfMemory { bytes })?;
        drop(probe);
        Ok(BloomGhosts {
            words: Box::default(),
            size: words,
            current: 0,
            recorded: 0,
            previous: 0,
            capacity: capacity.max(1),
            reach: capacity.max(1),
            mask: words - 1,
            rotations: 0,
        })
    }

    /// Recordings the two generations hold (forgotten keys included), recordings per
    /// generation (the reach), rotations and bytes held, in the gate's terms.
    #[cfg(feature = "metrics")]
    pub(crate) fn stats(&self) -> GateStats {
        GateStats {
            len: self.recorded + self.previous,
            capacity: self.reach,
            rotations: self.rotations,
            memory_bytes: std::mem::size_of_val(&*self.words),
        }
    }

    /// Where the key of `hash` is.
    #[inline]
    fn locate(&self, hash: u64) -> Place {
        // The shard and the cache's table use the low half and the top 7 bits; mixing
        // every bit keeps the ghosts' words independent of both. The word takes bits 16
        // and up, the three bit numbers the top 18 (apart up to 2^30 words).
        let mixed = hash.wrapping_mul(MIX);
        let bits = 1 << (mixed >> 58) | 1 << (mixed >> 52 & 63) | 1 << (mixed >> 46 & 63);
        Place { word: (mixed >> 16) as usize & self.mask, bits }
    }

    /// Remembers the key of `hash`.
    #[inline(always)]
    pub(crate) fn record(&mut self, hash: u64) {
        if self.words.is_empty() && !self.make_table() {
            return;
        }
        let place = self.locate(hash);
        // `current` is 0 or 1; the mask lets the compiler see it, and drop the check.
        let current = self.current & 1;
        self.pair(place.word)[current] |= place.bits;
        self.recorded += 1;
        if self.recorded >= self.reach {
            self.rotate();
        }
    }

    /// Whether the key of `hash` is remembered; forgets it (in each generation that holds
    /// it).
    #[inline(always)]
    pub(crate) fn take(&mut self, hash: u64) -> bool {
        if self.words.is_empty() {
            return false;
        }
        let place = self.locate(hash);
        let mut found = false;
        for word in self.pair(place.word) {
            if *word & place.bits == place.bits {
                *word &= !place.bits;
                found = true;
            }
        }
        found
    }

    /// Word `word` of both generations, where `word` is a [`Place`]'s: the table must be
    /// made.
    #[inline(always)]
    #[allow(unsafe_code)]
    fn pair(&mut self, word: usize) -> &mut [u64; 2] {
        debug_assert!(word < self.words.len(), "a made table, and a word of it");
        // SAFETY: a place's word is masked by `mask`, `size - 1` for the power of two
        // `size`, and a made table holds `size` words (`make_table`; a restore takes a
        // saved table only of that size). The callers return early while it is not made.
        // The bounds check this saves is two instructions on every miss and eviction.
        unsafe { self.words.get_unchecked_mut(word) }
    }

    /// Recordings a generation may take at most.
    pub(crate) fn capacity(&self) -> usize {
        self.capacity
    }

    /// Moves the reach by `share` of the capacity, within a sixteenth of the capacity
    /// ([`STEP`]) and all of it.
    pub(crate) fn stretch(&mut self, share: f64) {
        let (capacity, by) = (self.capacity as f64, share * self.capacity as f64);
        let least = (capacity * STEP).ceil().max(1.0);
        self.reach = (self.reach as f64 + by).round().clamp(least, capacity) as usize;
    }

    #[cfg(feature = "serde")]
    /// Appends the ghosts' state to `out`, for a cache's save (little-endian: capacity,
    /// table size, current generation, recordings in it and in the previous one,
    /// rotations, the table's words, counted, and from version 4 the reach).
    pub(crate) fn save(&self, out: &mut Vec<u8>) {
        for field in [self.capacity as u64, self.size as u64] {
            out.extend_from_slice(&field.to_le_bytes());
        }
        out.push(self.current as u8);
        for field in [self.recorded as u64, self.previous as u64, self.rotations, 2 * self.words.len() as u64]
        {
            out.extend_from_slice(&field.to_le_bytes());
        }
        self.words.iter().flatten().for_each(|word| out.extend_from_slice(&word.to_le_bytes()));
        out.extend_from_slice(&(self.reach as u64).to_le_bytes());
    }

    #[cfg(feature = "serde")]
    /// Reads ghosts [`BloomGhosts::save`] wrote, and takes them over if they were sized
    /// as these are and `alike` (hashed alike); ghosts of another size (a cache of another
    /// capacity or shard count) are read and dropped: they are hints. Whether it took them.
    pub(crate) fn restore<R: std::io::Read + ?Sized>(
        &mut self,
        d: &mut Decoder<'_, R>,
        alike: bool,
    ) -> Result<bool, SnapshotError> {
        let (capacity, size) = (d.usize("ghost capacity")?, d.usize("ghost table size")?);
        let current = usize::from(d.u8()?);
        let (recorded, previous, rotations) =
            (d.usize("ghost recordings")?, d.usize("ghost recordings")?, d.u64()?);
        let count = d.usize("ghost words")?;
        let words = d.words(count)?;
        let reach = if d.version() >= 4 { d.usize("ghost reach")? } else { capacity };
        let made = size.checked_mul(2) == Some(words.len()) && size.is_power_of_two();
        if current > 1
            || recorded > capacity
            || previous > capacity
            || !(1..=capacity).contains(&reach)
            || !(words.is_empty() || made)
        {
            return Err(SnapshotError::inconsistent("cache ghosts"));
        }
        let taken = alike && capacity == self.capacity && size == self.size;
        if taken {
            self.words = words.chunks_exact(2).map(|pair| [pair[0], pair[1]]).collect();
            (self.current, self.recorded, self.previous, self.rotations, self.reach) =
                (current, recorded, previous, rotations, reach);
        }
        Ok(taken)
    }

    /// Makes the table, at the first recording; false if the allocator refuses it.
    #[cold]
    fn make_table(&mut self) -> bool {
        let mut table = Vec::new();
        if self.size == 0 || table.try_reserve_exact(self.size).is_err() {
            self.size = 0;
            return false;
        }
        table.resize(self.size, [0; 2]);
        self.words = table.into_boxed_slice();
        true
    }

    /// Clears the older generation and makes it the current one.
    #[cold]
    fn rotate(&mut self) {
        self.current ^= 1;
        let g = self.current;
        self.words.iter_mut().for_each(|pair| pair[g] = 0);
        (self.previous, self.recorded) = (self.recorded, 0);
        self.rotations += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::BloomGhosts;

    fn hash(k: u64) -> u64 {
        crate::filter::seeded_hasher(7).hash_one(k)
    }

    fn take(ghosts: &mut BloomGhosts, k: u64) -> bool {
        ghosts.take(hash(k))
    }

    #[test]
    fn remembers_a_key_for_capacity_recordings_then_forgets_it() {
        let mut ghosts = BloomGhosts::new(1_000).unwrap();
        ghosts.record(hash(0));
        (1..1_000).for_each(|k| ghosts.record(hash(k)));
        assert!(take(&mut ghosts, 0), "forgotten within `capacity` recordings");
        assert!(!take(&mut ghosts, 0), "take forgets");
        ghosts.record(hash(0));
        (1_000..3_000).for_each(|k| ghosts.record(hash(k)));
        assert_eq!(ghosts.rotations, 3);
        assert!(!take(&mut ghosts, 0), "remembered after two rotations");
    }

    #[test]
    fn a_shorter_reach_rotates_sooner_within_a_sixteenth_and_all_of_the_capacity() {
        let mut ghosts = BloomGhosts::new(1_600).unwrap();
        ghosts.stretch(-0.5);
        assert_eq!(ghosts.reach, 800);
        (0..800).for_each(|k| ghosts.record(hash(k)));
        assert_eq!(ghosts.rotations, 1, "a generation of the reach");
        ghosts.stretch(-2.0);
        assert_eq!(ghosts.reach, 100, "a sixteenth at least");
        ghosts.stretch(5.0);
        assert_eq!(ghosts.reach, 1_600, "the capacity at most");
    }

    /// Whether the key `k` is remembered, asked without forgetting it.
    fn holds(ghosts: &BloomGhosts, k: u64) -> bool {
        let place = ghosts.locate(hash(k));
        ghosts.words[place.word].iter().any(|&word| word & place.bits == place.bits)
    }

    #[test]
    fn every_key_of_two_generations_is_found_and_few_strangers() {
        let mut ghosts = BloomGhosts::new(10_000).unwrap();
        // A full generation, and one short of full.
        (0..19_999).for_each(|k| ghosts.record(hash(k)));
        assert_eq!(ghosts.rotations, 1);
        assert!((0..19_999).all(|k| holds(&ghosts, k)), "a recorded key was lost");
        let strangers = (100_000..200_000).filter(|&k| holds(&ghosts, k)).count();
        assert!(strangers < 2_000, "{strangers} false positives in 100,000");
    }

    #[test]
    fn taking_a_key_forgets_few_others() {
        let mut ghosts = BloomGhosts::new(10_000).unwrap();
        (0..10_000).for_each(|k| ghosts.record(hash(k)));
        let found = (0..10_000).filter(|&k| take(&mut ghosts, k)).count();
        // Each take clears bits that other keys of its word may share: at a full
        // generation, about one take in seven forgets another key.
        assert!(found > 8_000, "{found} of 10,000 ghosts found when each is taken in turn");
    }

    /// `pair` indexes the table without a bounds check: every place lies in a made
    /// table, whatever its size, before and after a rotation (Miri runs this too).
    #[test]
    fn every_place_is_a_word_of_the_table() {
        for capacity in [1, 8, 9, 100] {
            let mut ghosts = BloomGhosts::new(capacity).unwrap();
            assert!(!take(&mut ghosts, 0), "nothing is remembered before the table is made");
            for k in 0..64 {
                ghosts.record(hash(k));
                assert!(ghosts.locate(hash(k)).word < ghosts.words.len());
                assert!(take(&mut ghosts, k), "capacity {capacity}: key {k} just recorded");
            }
            assert!(ghosts.rotations > 0 || capacity > 64);
        }
    }

    #[test]
    fn sizes_that_do_not_fit_are_errors_and_the_table_waits_for_a_recording() {
        assert!(matches!(
            BloomGhosts::new(usize::MAX),
            Err(crate::error::BuildError::CapacityTooLarge { .. })
        ));
        assert!(matches!(BloomGhosts::new(1 << 50), Err(crate::error::BuildError::OutOfMemory { .. })));
        let mut ghosts = BloomGhosts::new(1 << 20).unwrap();
        assert!(ghosts.words.is_empty(), "not made before the first recording");
        assert!(!take(&mut ghosts, 1));
        let mut small = BloomGhosts::new(100).unwrap();
        small.record(hash(1));
        assert_eq!(small.words.len(), 32);
        assert!(take(&mut small, 1));
    }
}
