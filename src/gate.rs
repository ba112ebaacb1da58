//! The seen-before gate: remembers which keys were recently seen, in two generations of
//! cuckoo filters, and answers "seen before?" while recording the key, atomically.
//!
//! A key is recorded in the *current* generation. After `capacity` new recordings into
//! it the gate rotates: the older generation is cleared and becomes the current one. So a
//! key is remembered for at least `capacity` new recordings after it was last recorded
//! (the generation that took over must fill before the key's is cleared), and memory
//! stays bounded at two filters (aging, as ristretto's and Caffeine's
//! doorkeepers do by resetting). A key found in the previous generation is copied into the
//! current one, so keys that keep coming back are never forgotten.
//!
//! Recordings are counted per thread, not in one counter that every thread would write
//! on every recording (a thread that owns its stripe counts without a locked
//! instruction). After about one new recording in [`CHECK_INTERVAL`] (chosen by the
//! key's hash) the recorder sums the counts; the filters have room for the few recordings
//! that land between two checks. (The filter's own size would not do: a relocation in
//! flight moves an item between the stripes it is summed over, so the sum can run ahead.)
//! Two threads that see the same full generation both ask to rotate, and the generation
//! counter lets only the first one do it.
//!
//! [`SeenBefore::forget`] removes a key (cuckoo deletion), which a cache uses to drop keys
//! it has admitted, so the gate holds only keys still waiting; [`SeenBefore::take`] asks
//! and forgets in one call.
//!
//! Atomicity: `check_and_record` runs under a shared lock that only rotation takes
//! exclusively, and records with [`CuckooFilter::insert_unique`]; of threads racing on one
//! new key, exactly one is told "first sighting".

use std::hash::Hash;
use std::io::{Read, Write};

use crate::broken;
use crate::error::BuildError;
use crate::filter::CuckooFilter;
use crate::hashing::Hashing;
use crate::primitive::{yield_now, RwLock, Tally};
use crate::snapshot::{Decoder, Encoder, Kind, SnapshotError};

/// How often, in new recordings, a recorder checks whether the current generation is full
/// (for capacities above a few thousand; smaller gates check on every recording).
const CHECK_INTERVAL: usize = 64;

/// Counters of new recordings (threads beyond this many share them).
const RECORDING_STRIPES: usize = 16;

/// Times a recording is retried when the current generation refuses it while far from
/// full, before the key is left unrecorded.
const MAX_REFUSALS: u32 = 64;

/// Keys a generation's filter is built for: the capacity, plus room for the recordings
/// that land between two checks (about `CHECK_INTERVAL` on average; the slack makes
/// running out before the check fires vanishingly rare, and harmless when it happens: a
/// full filter rotates at once).
fn filter_capacity(capacity: usize) -> usize {
    let between_checks = if check_mask(capacity) == 0 { 1 } else { 4 * CHECK_INTERVAL };
    capacity.saturating_add(capacity / 8).saturating_add(between_checks)
}

/// `hash & mask == 0` for about one hash in `CHECK_INTERVAL` (every hash for small gates,
/// where the slack would be a large share of the filter).
fn check_mask(capacity: usize) -> u64 {
    if capacity < 64 * CHECK_INTERVAL {
        0
    } else {
        CHECK_INTERVAL as u64 - 1
    }
}

/// What a recording answers (see [`SeenBefore::record_inner`]).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Step {
    /// Records, and answers nothing (`false`).
    Record,
    /// Records, and answers whether the key was seen before.
    Ask,
    /// As `Ask`, and forgets a key seen before instead of keeping it recorded.
    Admit,
}

/// Default false-positive rate of the gate: 1% of one-hit wonders slip through as "seen".
pub const DEFAULT_GATE_FALSE_POSITIVE_RATE: f64 = 0.01;

/// A concurrent "seen before?" gate with generational aging.
///
/// # Examples
///
/// ```
/// use cuckoo_gate::SeenBefore;
///
/// let gate = SeenBefore::builder().capacity(100_000).build()?;
/// assert!(!gate.check_and_record(&"/video/1.mp4")); // first sighting, recorded now
/// assert!(gate.check_and_record(&"/video/1.mp4")); // seen before
/// # Ok::<(), cuckoo_gate::BuildError>(())
/// ```
#[derive(Debug)]
pub struct SeenBefore {
    generations: RwLock<Generations>,
    /// New recordings into the current generation, striped by thread (each thread adds
    /// to its own line, without a locked instruction; a check sums them). Reset by
    /// rotation, under the write lock.
    recorded: Tally<1>,
    /// The filters' hasher (both generations share one seed), so a key is hashed once; a
    /// cache's restore may replace it (see `hashing.rs`).
    hasher: Hashing,
    capacity: usize,
    check_mask: u64,
}

#[derive(Debug)]
struct Generations {
    /// `filters[current]` is current; the other is the previous generation.
    filters: [CuckooFilter; 2],
    current: usize,
    /// Rotations so far: names the current generation, so that a rotation asked for by
    /// a thread that saw a generation fill happens once, not once per such thread.
    rotations: u64,
}

/// Configures a [`SeenBefore`] gate. Made by [`SeenBefore::builder`].
#[derive(Clone, Debug)]
#[must_use]
pub struct SeenBeforeBuilder {
    capacity: usize,
    false_positive_rate: f64,
    seed: Option<u64>,
}

impl SeenBeforeBuilder {
    /// Recordings per generation (required, at least 1): how many distinct keys the gate
    /// remembers at least. Memory is two filters of this capacity.
    ///
    /// # Examples
    ///
    /// ```
    /// let gate = cuckoo_gate::SeenBefore::builder().capacity(10_000).build()?;
    /// assert_eq!(gate.stats().capacity, 10_000);
    /// # Ok::<(), cuckoo_gate::BuildError>(())
    /// ```
    pub fn capacity(mut self, keys: usize) -> Self {
        self.capacity = keys;
        self
    }

    /// Probability that a key never seen is answered "seen before".
    /// Default [`DEFAULT_GATE_FALSE_POSITIVE_RATE`].
    ///
    /// # Examples
    ///
    /// ```
    /// use cuckoo_gate::SeenBefore;
    ///
    /// let strict = SeenBefore::builder().capacity(10_000).false_positive_rate(0.001).build()?;
    /// let loose = SeenBefore::builder().capacity(10_000).false_positive_rate(0.05).build()?;
    /// assert!(strict.stats().memory_bytes > loose.stats().memory_bytes);
    /// # Ok::<(), cuckoo_gate::BuildError>(())
    /// ```
    pub fn false_positive_rate(mut self, epsilon: f64) -> Self {
        self.false_positive_rate = epsilon;
        self
    }

    /// Fixes the hash seed (reproducible runs); random by default.
    ///
    /// # Examples
    ///
    /// ```
    /// let build = || cuckoo_gate::SeenBefore::builder().capacity(100).seed(7).build();
    /// let (a, b) = (build()?, build()?);
    /// assert_eq!(a.hash("/index.html"), b.hash("/index.html"));
    /// # Ok::<(), cuckoo_gate::BuildError>(())
    /// ```
    pub fn seed(mut self, seed: u64) -> Self {
        self.seed = Some(seed);
        self
    }

    /// Builds the gate.
    ///
    /// # Errors
    ///
    /// As [`FilterBuilder::build`](crate::FilterBuilder::build): zero capacity, a
    /// false-positive rate outside (0, 1), or a size that does not fit in memory.
    ///
    /// # Examples
    ///
    /// ```
    /// use cuckoo_gate::{BuildError, SeenBefore};
    ///
    /// assert_eq!(SeenBefore::builder().build().unwrap_err(), BuildError::ZeroCapacity);
    /// assert!(SeenBefore::builder().capacity(10).false_positive_rate(0.01).seed(1).build().is_ok());
    /// ```
    pub fn build(self) -> Result<SeenBefore, BuildError> {
        if self.capacity == 0 {
            return Err(BuildError::ZeroCapacity);
        }
        let first = generation(self.capacity, self.false_positive_rate, self.seed)?;
        let second = generation(self.capacity, self.false_positive_rate, Some(first.seed()))?;
        Ok(SeenBefore::from_parts([first, second], 0, 0, self.capacity))
    }
}

/// An empty generation's filter for a gate of `capacity`.
fn generation(capacity: usize, epsilon: f64, seed: Option<u64>) -> Result<CuckooFilter, BuildError> {
    let keys = filter_capacity(capacity);
    let builder = CuckooFilter::builder().capacity(keys).max_capacity(keys).false_positive_rate(epsilon);
    match seed {
        Some(seed) => builder.seed(seed).build(),
        None => builder.build(),
    }
}

/// Counters of a [`SeenBefore`] gate.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct GateStats {
    /// Fingerprints held in both generations.
    pub len: usize,
    /// Recordings per generation.
    pub capacity: usize,
    /// Rotations so far.
    pub rotations: u64,
    /// Bytes held by the two filters.
    pub memory_bytes: usize,
}

impl SeenBefore {
    /// A builder; set at least [`SeenBeforeBuilder::capacity`].
    pub fn builder() -> SeenBeforeBuilder {
        SeenBeforeBuilder { capacity: 0, false_positive_rate: DEFAULT_GATE_FALSE_POSITIVE_RATE, seed: None }
    }

    fn from_parts(filters: [CuckooFilter; 2], current: usize, rotations: u64, capacity: usize) -> Self {
        SeenBefore {
            hasher: Hashing::new(filters[0].seed()),
            generations: RwLock::new(Generations { filters, current, rotations }),
            recorded: Tally::new(RECORDING_STRIPES),
            capacity,
            check_mask: check_mask(capacity),
        }
    }

    #[cfg(feature = "serde")]
    /// Takes over what `other`, a gate restored from a snapshot, remembers, if it hashes
    /// as this gate does and has its capacity: whether it did. For a cache's gate, whose
    /// hasher the cache's keys go by.
    pub(crate) fn adopt(&self, other: SeenBefore) -> bool {
        if other.capacity != self.capacity || other.seed() != self.seed() {
            return false;
        }
        let recorded = other.recordings();
        let mut generations = self.generations.write();
        *generations = other.generations.into_inner();
        self.recorded.reset(0, recorded as u64);
        true
    }

    #[cfg(feature = "serde")]
    /// Hashes by `seed` from now on, forgetting every key (what the gate remembers was
    /// hashed by the old seed). For a cache's gate, when a restore adopts the saved
    /// cache's seed: the caller holds every shard's write lock.
    pub(crate) fn rekey(&self, seed: u64) {
        if seed == self.seed() {
            return;
        }
        let mut generations = self.generations.write();
        let epsilon = generations.filters[0].false_positive_rate();
        let fresh = || generation(self.capacity, epsilon, Some(seed));
        match (fresh(), fresh()) {
            (Ok(first), Ok(second)) => generations.filters = [first, second],
            // Out of memory for new filters: the old ones, emptied, serve (their snapshots
            // name the old seed, so a later restore will not take them over).
            _ => generations.filters.iter().for_each(CuckooFilter::clear),
        }
        self.recorded.reset(0, 0);
        self.hasher.replace(seed);
    }

    /// The seed the gate hashes by.
    pub(crate) fn seed(&self) -> u64 {
        self.hasher.keys().seed()
    }

    /// The 64-bit hash the gate stores `key` by: what the `*_hash` methods take.
    ///
    /// # Examples
    ///
    /// ```
    /// let gate = cuckoo_gate::SeenBefore::builder().capacity(100).build()?;
    /// gate.record("k");
    /// assert!(gate.contains_hash(gate.hash("k")));
    /// # Ok::<(), cuckoo_gate::BuildError>(())
    /// ```
    #[inline]
    pub fn hash<T: Hash + ?Sized>(&self, key: &T) -> u64 {
        self.hasher.hash(key)
    }

    /// Answers whether `key` was seen before, and records it. `false` means first sighting
    /// (now recorded). Atomic: of threads racing on one new key, exactly one gets `false`.
    ///
    /// Lock behaviour: takes a shared lock (blocking only while a rotation runs, once per
    /// `capacity` recordings) and the key's stripe locks in the current generation. A
    /// recording that finds the generation full runs the rotation: it takes the lock
    /// exclusively, waiting for the calls in progress, and clears the older generation.
    ///
    /// # Examples
    ///
    /// ```
    /// use cuckoo_gate::SeenBefore;
    /// use std::sync::Arc;
    ///
    /// let gate = Arc::new(SeenBefore::builder().capacity(1_000).build()?);
    /// let racers: Vec<_> = (0..4)
    ///     .map(|_| {
    ///         let gate = gate.clone();
    ///         std::thread::spawn(move || gate.check_and_record("new"))
    ///     })
    ///     .collect();
    /// let first_sightings = racers.into_iter().map(|t| t.join().unwrap()).filter(|seen| !seen).count();
    /// assert_eq!(first_sightings, 1);
    /// # Ok::<(), cuckoo_gate::BuildError>(())
    /// ```
    pub fn check_and_record<T: Hash + ?Sized>(&self, key: &T) -> bool {
        self.check_and_record_hash(self.hash(key))
    }

    /// [`check_and_record`](Self::check_and_record) for a key already hashed: `hash` is
    /// [`hash`](Self::hash) of the key, or any well-mixed 64-bit hash of it (such as a
    /// cache's own), used the same way for the key every time.
    pub fn check_and_record_hash(&self, hash: u64) -> bool {
        self.record_inner(hash, Step::Ask)
    }

    /// [`check_and_record_hash`](Self::check_and_record_hash), and a key seen before is
    /// forgotten (as [`take_hash`](Self::take_hash) forgets it) in the same hold of the
    /// gate's lock: a cache's admission, which forgets the keys it admits.
    pub(crate) fn admit_hash(&self, hash: u64) -> bool {
        self.record_inner(hash, Step::Admit)
    }

    /// Records `hash` in the current generation and answers as `step` asks.
    fn record_inner(&self, hash: u64, step: Step) -> bool {
        let ask = step != Step::Record;
        let mut refusals = 0;
        loop {
            let full = {
                let generations = self.generations.read();
                let current = &generations.filters[generations.current];
                let previous = &generations.filters[generations.current ^ 1];
                // The previous generation is asked only about a key new to the current
                // one: a key found there was seen, wherever else it is.
                let recorded = if ask {
                    current.insert_unique_then_look(hash, previous)
                } else {
                    current.insert_unique_hashed(hash).map(|new| new.then_some(false))
                };
                match recorded {
                    // In the previous generation only, and copied into the current one:
                    // forgotten in both, so the copy is not counted.
                    Ok(Some(true)) if step == Step::Admit => {
                        current.remove_hashed(hash);
                        previous.remove_hashed(hash);
                        return true;
                    }
                    Ok(None) if step == Step::Admit => {
                        current.remove_hashed(hash);
                        if previous.contains_hashed(hash) {
                            previous.remove_hashed(hash);
                        }
                        return true;
                    }
                    Ok(Some(seen)) => {
                        self.recorded.add(0);
                        let check = hash.rotate_left(32) & self.check_mask == 0;
                        if check && self.recordings() >= self.capacity {
                            let rotations = generations.rotations;
                            drop(generations);
                            self.rotate(rotations);
                        }
                        return seen;
                    }
                    Ok(None) => return true,
                    // Full before the check saw it (rare, see `filter_capacity`): rotate
                    // and record again.
                    Err(_) if self.recordings() >= self.capacity => generations.rotations,
                    // Refused below capacity: writers relocating in the key's buckets at
                    // that moment can make the search give up, so try again. A key still
                    // refused sits in buckets crowded by keys that collide on purpose:
                    // it is left unrecorded rather than forget a generation early.
                    Err(_) => {
                        refusals += 1;
                        if refusals == MAX_REFUSALS {
                            let seen = ask && previous.contains_hashed(hash);
                            if seen && step == Step::Admit {
                                previous.remove_hashed(hash);
                            }
                            return seen;
                        }
                        drop(generations);
                        yield_now();
                        continue;
                    }
                }
            };
            self.rotate(full);
        }
    }

    /// Records `key` as seen (once: a key already recorded is left as it is).
    ///
    /// Lock behaviour: as [`check_and_record`](Self::check_and_record)'s.
    ///
    /// # Examples
    ///
    /// ```
    /// let gate = cuckoo_gate::SeenBefore::builder().capacity(100).build()?;
    /// gate.record("evicted-key");
    /// assert!(gate.check_and_record("evicted-key"));
    /// # Ok::<(), cuckoo_gate::BuildError>(())
    /// ```
    pub fn record<T: Hash + ?Sized>(&self, key: &T) {
        self.record_inner(self.hash(key), Step::Record);
    }

    /// [`record`](Self::record) for a key already hashed (see
    /// [`check_and_record_hash`](Self::check_and_record_hash)).
    pub fn record_hash(&self, hash: u64) {
        self.record_inner(hash, Step::Record);
    }

    /// Whether `key` was seen, without recording it.
    ///
    /// Lock behaviour: takes the gate's shared lock, which waits only while a rotation holds
    /// it or is taking it (never for other readers); then looks in both generations without
    /// locks, as [`CuckooFilter::contains`] does.
    ///
    /// # Examples
    ///
    /// ```
    /// let gate = cuckoo_gate::SeenBefore::builder().capacity(100).build()?;
    /// assert!(!gate.contains("k"));
    /// gate.record("k");
    /// assert!(gate.contains("k"));
    /// # Ok::<(), cuckoo_gate::BuildError>(())
    /// ```
    pub fn contains<T: Hash + ?Sized>(&self, key: &T) -> bool {
        self.contains_hash(self.hash(key))
    }

    /// [`contains`](Self::contains) for a key already hashed.
    pub fn contains_hash(&self, hash: u64) -> bool {
        let generations = self.generations.read();
        generations.filters.iter().any(|f| f.contains_hashed(hash))
    }

    /// Forgets `key` (one recording of it in each generation). Call only for keys that
    /// were recorded: forgetting a key never seen may forget one that collides with it.
    ///
    /// Lock behaviour: takes the gate's shared lock (as [`contains`](Self::contains) does)
    /// and, in each generation that may hold the key, the key's stripe locks to remove it.
    ///
    /// # Examples
    ///
    /// ```
    /// let gate = cuckoo_gate::SeenBefore::builder().capacity(100).build()?;
    /// gate.record("k");
    /// gate.forget("k");
    /// assert!(!gate.contains("k"));
    /// # Ok::<(), cuckoo_gate::BuildError>(())
    /// ```
    pub fn forget<T: Hash + ?Sized>(&self, key: &T) {
        self.take_hash(self.hash(key));
    }

    /// Whether `key` was seen, forgetting it if so: [`contains`](Self::contains) and
    /// [`forget`](Self::forget) as one call (a ghost lookup that consumes the ghost).
    ///
    /// Lock behaviour: as [`forget`](Self::forget)'s.
    ///
    /// # Examples
    ///
    /// ```
    /// let gate = cuckoo_gate::SeenBefore::builder().capacity(100).build()?;
    /// gate.record("k");
    /// assert!(gate.take("k"));
    /// assert!(!gate.take("k"));
    /// # Ok::<(), cuckoo_gate::BuildError>(())
    /// ```
    pub fn take<T: Hash + ?Sized>(&self, key: &T) -> bool {
        self.take_hash(self.hash(key))
    }

    /// [`take`](Self::take) for a key already hashed.
    pub fn take_hash(&self, hash: u64) -> bool {
        let generations = self.generations.read();
        let mut seen = false;
        for filter in &generations.filters {
            // Most keys asked about are absent: a lock-free lookup rules them out before
            // a locked remove.
            seen |= filter.contains_hashed(hash) && filter.remove_hashed(hash);
        }
        seen
    }

    /// New recordings into the current generation (a lower bound while recordings run:
    /// they are summed without a lock, and none is ever counted twice).
    fn recordings(&self) -> usize {
        self.recorded.sum(0) as usize
    }

    /// Starts a new generation, unless one was started since `rotations` was read: clears
    /// the older generation and makes it current.
    fn rotate(&self, rotations: u64) {
        let mut generations = self.generations.write();
        if generations.rotations != rotations && !broken::DOUBLE_ROTATION {
            return;
        }
        let older = generations.current ^ 1;
        generations.filters[older].clear();
        self.recorded.reset(0, 0);
        generations.current = older;
        // Compared for equality only; a restored snapshot may carry any count.
        generations.rotations = generations.rotations.wrapping_add(1);
    }

    /// Writes a snapshot of the gate (both generations and the aging state) to `writer`;
    /// [`SeenBefore::restore`] reads it back. The format is the filter's (see
    /// [`CuckooFilter::snapshot`]), twice, after the gate's own fields.
    ///
    /// Consistency: each generation is snapshotted at one instant, as a filter is, and no
    /// rotation runs meanwhile, so every key recorded before the call is in the snapshot.
    /// `contains` and `check_and_record` keep running (recordings pause while each
    /// generation is copied to memory), except behind a rotation that waits for the
    /// snapshot to finish.
    ///
    /// # Errors
    ///
    /// Whatever `writer` returns.
    ///
    /// # Examples
    ///
    /// ```
    /// use cuckoo_gate::SeenBefore;
    ///
    /// let gate = SeenBefore::builder().capacity(1_000).build().unwrap();
    /// gate.record("/index.html");
    /// let mut bytes = Vec::new();
    /// gate.snapshot(&mut bytes)?;
    ///
    /// let restarted = SeenBefore::restore(&mut bytes.as_slice()).unwrap();
    /// assert!(restarted.check_and_record("/index.html")); // remembered across the restart
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn snapshot<W: Write + ?Sized>(&self, writer: &mut W) -> std::io::Result<()> {
        let generations = self.generations.read();
        let mut e = Encoder::new(writer, Kind::Gate)?;
        e.usize(self.capacity)?;
        // At `capacity` a rotation is due (and waits for this read lock): restore the gate
        // one recording short of it, so its next recording rotates.
        e.usize(self.recordings().min(self.capacity - 1))?;
        e.u64(generations.rotations)?;
        e.u8(generations.current as u8)?;
        for filter in &generations.filters {
            filter.snapshot(&mut e)?;
        }
        e.finish()
    }

    /// Reads a gate written by [`SeenBefore::snapshot`]: it remembers what the snapshotted
    /// gate remembered, and ages from where it was.
    ///
    /// # Errors
    ///
    /// As [`CuckooFilter::restore`], and [`SnapshotError::Inconsistent`] if the gate's
    /// fields contradict its filters.
    ///
    /// # Examples
    ///
    /// ```
    /// use cuckoo_gate::{SeenBefore, SnapshotError};
    ///
    /// let err = SeenBefore::restore(&mut &b"not a snapshot"[..]).unwrap_err();
    /// assert!(matches!(err, SnapshotError::BadMagic));
    /// ```
    pub fn restore<R: Read + ?Sized>(reader: &mut R) -> Result<SeenBefore, SnapshotError> {
        let mut d = Decoder::new(reader, Kind::Gate)?;
        let capacity = d.usize("gate capacity")?;
        let recorded = d.usize("recordings")?;
        let rotations = d.u64()?;
        let current = d.u8()?;
        let mut filters = [CuckooFilter::restore(&mut d)?, CuckooFilter::restore(&mut d)?];
        d.finish()?;
        if capacity == 0 || recorded >= capacity || current > 1 {
            return Err(SnapshotError::inconsistent("gate capacity, recordings or current generation"));
        }
        let current = usize::from(current);
        // Gates written before 0.2 sized their filters for the capacity exactly and seeded
        // the generations apart.
        let built_for = |f: &CuckooFilter| {
            let stats = f.stats();
            stats.doublings_left == 0
                && stats.doublings == 0
                && (f.is_sized_for(filter_capacity(capacity)) || f.is_sized_for(capacity))
        };
        let epsilon = filters[0].false_positive_rate();
        if !filters.iter().all(built_for) || epsilon != filters[1].false_positive_rate() {
            return Err(SnapshotError::inconsistent("gate filters not built for the gate's capacity"));
        }
        if filters[0].seed() != filters[1].seed() {
            // Such a gate hashed each generation its own way; this one hashes a key once.
            // Keep the current generation and start the previous one afresh, seeded alike.
            let fresh = generation(capacity, epsilon, Some(filters[current].seed()))
                .map_err(|_| SnapshotError::inconsistent("gate filters not built for the gate's capacity"))?;
            filters[current ^ 1] = fresh;
        }
        let gate = SeenBefore::from_parts(filters, current, rotations, capacity);
        gate.recorded.reset(0, recorded as u64);
        Ok(gate)
    }

    /// Counters and size.
    ///
    /// # Examples
    ///
    /// ```
    /// let gate = cuckoo_gate::SeenBefore::builder().capacity(2).build()?;
    /// for k in 0..5u32 {
    ///     gate.record(&k);
    /// }
    /// assert!(gate.stats().rotations >= 2);
    /// # Ok::<(), cuckoo_gate::BuildError>(())
    /// ```
    pub fn stats(&self) -> GateStats {
        let generations = self.generations.read();
        GateStats {
            len: generations.filters.iter().map(CuckooFilter::len).sum(),
            capacity: self.capacity,
            rotations: generations.rotations,
            memory_bytes: generations.filters.iter().map(CuckooFilter::memory_usage).sum(),
        }
    }
}

#[cfg(all(test, not(cuckoo_gate_loom)))]
mod tests {
    use super::SeenBefore;

    /// A cache's admission: a first sighting is recorded; a second is admitted and the key
    /// forgotten, in whichever generations held it, so that the next is a first sighting
    /// again and nothing is left behind.
    #[test]
    fn admission_forgets_what_it_admits() {
        let gate = SeenBefore::builder().capacity(1_000).seed(5).build().unwrap();
        let [a, b, c] = [1u64, 2, 3].map(|k| gate.hash(&k));
        assert!(!gate.admit_hash(a));
        assert!(gate.admit_hash(a));
        assert!(!gate.contains_hash(a));
        assert!(!gate.admit_hash(a));
        // `b` in the previous generation only, `c` in both.
        gate.record_hash(b);
        gate.record_hash(c);
        let rotations = gate.generations.read().rotations;
        gate.rotate(rotations);
        gate.record_hash(c);
        assert!(gate.admit_hash(b) && gate.admit_hash(c));
        assert!(!gate.contains_hash(b) && !gate.contains_hash(c));
        assert_eq!(gate.stats().len, 1, "only `a`'s last first sighting is held");
    }
}
