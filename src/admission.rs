//! The seen-before gate: remembers which keys were recently seen, in two generations of
//! cuckoo filters, and answers "seen before?" while recording the key, atomically.
//!
//! A key is recorded in the *current* generation. After `capacity` recordings the gate
//! rotates: the older generation is cleared and becomes the current one, so a key is
//! remembered for between `capacity` and `2 * capacity` recordings after it was last seen,
//! and memory stays bounded at two filters of `capacity` items (aging, as ristretto's and
//! Caffeine's doorkeepers do by resetting). A key found in the previous generation is
//! copied into the current one, so keys that keep coming back are never forgotten.
//!
//! [`SeenBefore::forget`] removes a key (cuckoo deletion), which a cache uses to drop keys
//! it has admitted, so the gate holds only keys still waiting.
//!
//! Atomicity: `check_and_record` runs under a shared lock that only rotation takes
//! exclusively, and records with [`CuckooFilter::insert_unique`]; of threads racing on one
//! new key, exactly one is told "first sighting".

use std::hash::Hash;
use std::io::{Read, Write};

use crate::error::BuildError;
use crate::filter::CuckooFilter;
use crate::primitive::{AtomicU64, AtomicUsize, Ordering, RwLock};
use crate::snapshot::{Decoder, Encoder, Kind, SnapshotError};

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
    /// `generations[current & 1]` is current; the other is the previous generation.
    generations: RwLock<Generations>,
    /// Recordings into the current generation since the last rotation.
    recorded: AtomicUsize,
    capacity: usize,
    rotations: AtomicU64,
}

#[derive(Debug)]
struct Generations {
    filters: [CuckooFilter; 2],
    current: usize,
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
    pub fn capacity(mut self, keys: usize) -> Self {
        self.capacity = keys;
        self
    }

    /// Probability that a key never seen is answered "seen before".
    /// Default [`DEFAULT_GATE_FALSE_POSITIVE_RATE`].
    pub fn false_positive_rate(mut self, epsilon: f64) -> Self {
        self.false_positive_rate = epsilon;
        self
    }

    /// Fixes the hash seed (reproducible runs); random by default.
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
        let filter = |salt: u64| {
            let b = CuckooFilter::builder()
                .capacity(self.capacity)
                .max_capacity(self.capacity)
                .false_positive_rate(self.false_positive_rate);
            match self.seed {
                Some(seed) => b.seed(seed ^ salt).build(),
                None => b.build(),
            }
        };
        let filters = [filter(0)?, filter(0x9E37_79B9)?];
        Ok(SeenBefore {
            generations: RwLock::new(Generations { filters, current: 0 }),
            recorded: AtomicUsize::new(0),
            capacity: self.capacity,
            rotations: AtomicU64::new(0),
        })
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

    /// Answers whether `key` was seen before, and records it. `false` means first sighting
    /// (now recorded). Atomic: of threads racing on one new key, exactly one gets `false`.
    ///
    /// Lock behaviour: takes a shared lock (blocking only while a rotation runs, once per
    /// `capacity` recordings) and the key's stripe locks in the current generation.
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
        loop {
            {
                let generations = self.generations.read();
                let current = &generations.filters[generations.current];
                let previous = &generations.filters[generations.current ^ 1];
                let seen = previous.contains(key);
                match current.insert_unique(key) {
                    Ok(true) => {
                        if self.recorded.fetch_add(1, Ordering::Relaxed) + 1 == self.capacity {
                            drop(generations);
                            self.rotate();
                        }
                        return seen;
                    }
                    Ok(false) => return true,
                    // The current generation is full before `capacity` recordings (a burst
                    // of copies or an unlucky table): rotate and record again.
                    Err(_) => {}
                }
            }
            self.rotate();
        }
    }

    /// Records `key` as seen (once: a key already recorded is left as it is).
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
        self.check_and_record(key);
    }

    /// Whether `key` was seen, without recording it. Lock-free apart from the shared lock.
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
        let generations = self.generations.read();
        generations.filters.iter().any(|f| f.contains(key))
    }

    /// Forgets `key` (one recording of it in each generation). Call only for keys that
    /// were recorded: forgetting a key never seen may forget one that collides with it.
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
        let generations = self.generations.read();
        for filter in &generations.filters {
            filter.remove(key);
        }
    }

    /// Starts a new generation: clears the older one and makes it current.
    fn rotate(&self) {
        let mut generations = self.generations.write();
        let older = generations.current ^ 1;
        generations.filters[older].clear();
        generations.current = older;
        self.recorded.store(0, Ordering::Relaxed);
        self.rotations.fetch_add(1, Ordering::Relaxed);
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
        e.usize(self.recorded.load(Ordering::Relaxed).min(self.capacity - 1))?;
        e.u64(self.rotations.load(Ordering::Relaxed))?;
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
        let filters = [CuckooFilter::restore(&mut d)?, CuckooFilter::restore(&mut d)?];
        d.finish()?;
        if capacity == 0 || recorded >= capacity || current > 1 {
            return Err(SnapshotError::inconsistent("gate capacity, recordings or current generation"));
        }
        let built_for = |f: &CuckooFilter| {
            let stats = f.stats();
            stats.doublings_left == 0 && stats.doublings == 0 && f.is_sized_for(capacity)
        };
        if !filters.iter().all(built_for)
            || filters[0].false_positive_rate() != filters[1].false_positive_rate()
        {
            return Err(SnapshotError::inconsistent("gate filters not built for the gate's capacity"));
        }
        Ok(SeenBefore {
            generations: RwLock::new(Generations { filters, current: current.into() }),
            recorded: AtomicUsize::new(recorded),
            capacity,
            rotations: AtomicU64::new(rotations),
        })
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
            rotations: self.rotations.load(Ordering::Relaxed),
            memory_bytes: generations.filters.iter().map(CuckooFilter::memory_usage).sum(),
        }
    }
}
