//! How often a shard's keys were asked for again, approximately: Caffeine's
//! `FrequencySketch` (a count-min sketch of 4-bit counters, Einziger, Friedman and Manes,
//! "TinyLFU: A Highly Efficient Cache Admission Policy", ACM TOS 2017), consulted by
//! S3-FIFO where a returning ghost meets main's victim (`policy.rs`).
//!
//! A key has four counters, each in another 64-bit word of one 64-byte block (Caffeine
//! 3's layout: one cache line per key), and its estimate is the least of them. A counter
//! saturates at 15. Every counter is halved (TinyLFU's reset) at the end of each of the
//! shard's climber's samples, ten times the cache's size in requests (TinyLFU's and
//! Caffeine's period, counted in requests here as the sketch does not see every request),
//! so that the sketch forgets at the pace the cache turns over; it is cleared when the
//! hit ratio falls by the climber's restart threshold (the workload changed).
//!
//! It is fed where this crate already counts, so that a hit costs nothing more: a
//! returning ghost counts one request, and an entry's own request counter (raised by hits
//! under the shard's read lock) is banked, one request per CLOCK round it buys in main and
//! all of them when it is promoted out of the small queue. A key asked for once and
//! evicted unused is never counted: TinyLFU's doorkeeper plays that part there, S3-FIFO's
//! small queue and ghosts here. Sized at four counters (two bytes) per entry, rounded up
//! to a power of two, at least one block. The shard writes it only under its write lock,
//! so it has no atomics.

use crate::error::BuildError;
#[cfg(feature = "serde")]
use crate::snapshot::{Decoder, SnapshotError};

/// Counters per entry the table is sized for (16 bits: two bytes).
const COUNTERS_PER_ENTRY: usize = 4;

/// Words per block (a 64-byte cache line).
const BLOCK: usize = 8;

/// Every counter's top bit cleared, after a shift: halves 16 counters at once.
const HALF: u64 = 0x7777_7777_7777_7777;

/// Caffeine's odd multipliers (`FrequencySketch.spread` and `rehash`).
const SPREAD: u64 = 0x9e37_79b9_7f4a_7c15;
const REHASH: u64 = 0x31_8f97_a5c1_5f8d;

pub(crate) struct Sketch {
    /// The counters, 16 to a word; empty until the first increment (an empty cache's
    /// memory does not grow with its capacity).
    table: Box<[u64]>,
    /// Words the table takes once made.
    size: usize,
}

impl Sketch {
    /// A sketch for a shard of about `entries` entries; an error if the allocator refuses
    /// its size now (asked and given back at once, as the ghosts do).
    pub(crate) fn new(entries: usize) -> Result<Self, BuildError> {
        let size = entries
            .max(1)
            .saturating_mul(COUNTERS_PER_ENTRY)
            .div_ceil(16)
            .checked_next_power_of_two()
            .ok_or(BuildError::CapacityTooLarge { capacity: entries })?
            .max(BLOCK);
        let mut probe: Vec<u64> = Vec::new();
        probe
            .try_reserve_exact(size)
            .map_err(|_| BuildError::OutOfMemory { bytes: size.saturating_mul(8) })?;
        drop(probe);
        Ok(Sketch { table: Box::new([]), size })
    }

    /// Bytes the table takes once made.
    #[allow(dead_code)]
    pub(crate) fn memory_bytes(&self) -> usize {
        self.size * 8
    }

    /// The block of the key of `hash` (its first word) and the counters' hash.
    #[inline(always)]
    fn place(&self, hash: u64) -> (usize, u64) {
        let spread = hash.wrapping_mul(SPREAD);
        let block = ((spread >> 32) as usize & (self.size / BLOCK - 1)) * BLOCK;
        (block, spread.wrapping_mul(REHASH).rotate_left(17))
    }

    /// Word and shift of the key's `i`th counter (Caffeine: counter `h >> 1 & 15` of word
    /// `i * 2 + (h & 1)` of the block, `h` the counters' hash's `i`th byte).
    #[inline(always)]
    fn counter(block: usize, counters: u64, i: usize) -> (usize, u32) {
        let h = (counters >> (i * 8)) as usize;
        (block + i * 2 + (h & 1), ((h >> 1) & 15) as u32 * 4)
    }

    /// The key of `hash`'s estimate: the least of its counters (0 to 15).
    #[inline]
    pub(crate) fn frequency(&self, hash: u64) -> u8 {
        if self.table.is_empty() {
            return 0;
        }
        let (block, counters) = self.place(hash);
        (0..4)
            .map(|i| {
                let (word, shift) = Self::counter(block, counters, i);
                (self.table[word] >> shift & 15) as u8
            })
            .min()
            .unwrap_or(0)
    }

    /// Counts `n` requests of the key of `hash` (each counter saturating at 15). Makes the
    /// table at the first increment, and counts nothing if the allocator refuses it (the
    /// sketch is a hint).
    #[inline]
    pub(crate) fn add(&mut self, hash: u64, n: u8) {
        if self.table.is_empty() && !self.make() {
            return;
        }
        let (block, counters) = self.place(hash);
        for i in 0..4 {
            let (word, shift) = Self::counter(block, counters, i);
            let value = self.table[word] >> shift & 15;
            let raised = (value + u64::from(n)).min(15);
            self.table[word] += (raised - value) << shift;
        }
    }

    /// Makes the table; false if the allocator refuses it.
    #[cold]
    #[inline(never)]
    fn make(&mut self) -> bool {
        let mut table = Vec::new();
        if table.try_reserve_exact(self.size).is_err() {
            return false;
        }
        table.resize(self.size, 0);
        self.table = table.into_boxed_slice();
        true
    }

    /// TinyLFU's reset: every counter halved.
    #[cold]
    #[inline(never)]
    pub(crate) fn reset(&mut self) {
        self.table.iter_mut().for_each(|word| *word = (*word >> 1) & HALF);
    }

    /// Forgets every count.
    #[cold]
    pub(crate) fn clear(&mut self) {
        self.table.iter_mut().for_each(|word| *word = 0);
    }

    #[cfg(feature = "serde")]
    /// Appends the sketch to `out`, for a cache's save (little-endian): its size in words,
    /// the count of words that follow (0 if never made), and those words.
    pub(crate) fn save(&self, out: &mut Vec<u8>) {
        for field in [self.size as u64, self.table.len() as u64] {
            out.extend_from_slice(&field.to_le_bytes());
        }
        self.table.iter().for_each(|word| out.extend_from_slice(&word.to_le_bytes()));
    }

    #[cfg(feature = "serde")]
    /// Reads a sketch [`Sketch::save`] wrote, and takes it over if it was sized as this
    /// one is and `alike` (hashed alike); another's is read and dropped (a hint). Whether
    /// it took it.
    pub(crate) fn restore<R: std::io::Read + ?Sized>(
        &mut self,
        d: &mut Decoder<'_, R>,
        alike: bool,
    ) -> Result<bool, SnapshotError> {
        let (size, count) = (d.usize("sketch size")?, d.usize("sketch words")?);
        let words = d.words(count)?;
        if !(words.is_empty() || words.len() == size) || !size.is_power_of_two() || size < BLOCK {
            return Err(SnapshotError::inconsistent("cache sketch"));
        }
        let taken = alike && size == self.size;
        if taken {
            self.table = words.into_boxed_slice();
        }
        Ok(taken)
    }
}

#[cfg(all(test, not(cuckoo_gate_loom)))]
mod tests {
    use super::Sketch;

    fn hash(k: u64) -> u64 {
        crate::filter::seeded_hasher(3).hash_one(k)
    }

    #[test]
    fn it_counts_each_key_within_a_little_and_saturates() {
        let mut sketch = Sketch::new(1_000).unwrap();
        assert_eq!(sketch.memory_bytes(), 256 * 8, "four counters (two bytes) per entry, rounded up");
        assert_eq!(sketch.frequency(hash(1)), 0, "empty");
        for k in 0..500 {
            sketch.add(hash(k), (k % 4) as u8);
        }
        let exact = (0..500).filter(|&k| sketch.frequency(hash(k)) == (k % 4) as u8).count();
        assert!(exact >= 450, "{exact} of 500 estimates exact");
        assert!((0..500).all(|k| sketch.frequency(hash(k)) >= (k % 4) as u8), "never under");
        sketch.add(hash(1), 20);
        assert_eq!(sketch.frequency(hash(1)), 15);
    }

    #[test]
    fn a_reset_halves_every_counter_and_a_clear_forgets() {
        let mut sketch = Sketch::new(100).unwrap();
        for k in 0..50 {
            sketch.add(hash(k), 9);
        }
        sketch.add(hash(1), 6);
        sketch.reset();
        assert_eq!(sketch.frequency(hash(1)), 7, "15 halved, rounded down");
        assert!((2..50).all(|k| sketch.frequency(hash(k)) >= 4), "9 halved, or more where shared");
        sketch.clear();
        assert!((0..50).all(|k| sketch.frequency(hash(k)) == 0));
    }
}
