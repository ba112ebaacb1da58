//! The concurrent cuckoo filter.
//!
//! * `hash.rs`: where a key goes (two buckets or windows, a fingerprint with a choice bit).
//! * `bucket.rs`: the two bucket shapes (4 slots, or overlapping windows of 2), and
//!   bit-parallel search of one bucket.
//! * `stripe.rs`: the seqlock stripes that writers lock and readers validate.
//! * `table.rs`: the packed atomic words and the optimistic pair read.
//! * `relocate.rs`: cuckoo path search and its backward execution.
//! * `ops.rs`: insert, remove and lookups on one table.
//! * `current.rs`: the pointer to the current table, and the retired ones.
//! * `builder.rs`: configuration and sizing.
//! * `snapshot.rs`: saving and restoring a filter (the format is in `crate::snapshot`).
//! * `grow.rs`: doubling the table when it is full, and the freeze it shares with snapshots.
//!
//! The concurrency protocol, in the order a reader meets it: `current.rs` (which table),
//! `table.rs` (`holds_either`: one stamp per lookup; `read_pair`: two buckets at one
//! instant), `stripe.rs` (the stamps they validate against, and the locks and freezing
//! writers use),
//! `relocate.rs` (moves that keep every entry visible), `grow.rs` (doubling).
//! `crate::broken` lists the deliberate breaks the loom models must catch.

/// Runs `$body` with `$t` bound to the table, whichever its word type (defined before the
/// modules so that they can use it too).
macro_rules! with_table {
    ($table:expr, $t:ident => $body:expr) => {
        match $table {
            AnyTable::Fixed10($t) => $body,
            AnyTable::Fixed13($t) => $body,
            AnyTable::Narrow($t) => $body,
            AnyTable::Wide($t) => $body,
            AnyTable::Windowed($t) => $body,
        }
    };
}

mod bucket;
mod builder;
mod current;
mod grow;
mod hash;
#[cfg(feature = "metrics")]
mod metrics;
mod ops;
mod relocate;
mod snapshot;
mod stripe;
mod table;

use std::fmt;
use std::hash::Hash;

use self::bucket::{Fixed, Windows};
use self::current::Current;
use self::hash::Geometry;
use self::ops::Refused;
use crate::error::{InsertBatchError, InsertError};
use crate::primitive::{AtomicU64, Mutex, Ordering};
use crate::snapshot::SnapshotError;

pub(crate) use self::bucket::{matches16, Buckets, Shape, SLOTS};
pub(crate) use self::builder::random_seed;
pub use self::builder::{FilterBuilder, DEFAULT_DOUBLINGS, DEFAULT_FALSE_POSITIVE_RATE};
pub use self::hash::Layout;
pub(crate) use self::hash::{Probe, MIX};
pub(crate) use self::relocate::Hop;
pub(crate) use self::stripe::Frozen;
pub(crate) use self::table::{Locked, Table};

/// One table, monomorphised for its bucket shape: buckets of 4 slots read into a `u64`
/// for lanes of up to 16 bits, into a `u128` for wider ones; windows of 2 slots. Buckets
/// of 10- and 13-bit lanes, those of the default false-positive rates of `SeenBefore`
/// (1%) and of the filter (0.1%), have their width compiled in ([`Fixed`]).
#[derive(Debug)]
// An explicit tag, where the default layout hides it in a niche of a field and decoding
// it costs every lookup a few instructions.
#[repr(u8)]
pub(crate) enum AnyTable {
    Fixed10(Table<Fixed<10>>),
    Fixed13(Table<Fixed<13>>),
    Narrow(Table<Buckets<u64>>),
    Wide(Table<Buckets<u128>>),
    Windowed(Table<Windows>),
}

impl AnyTable {
    /// An empty table of this shape, `Err` if its memory is refused.
    pub(crate) fn new(geometry: Geometry, stripes: usize) -> Result<Self, ()> {
        match Self::kind(geometry) {
            Kind::Fixed10 => Table::new(geometry, stripes).map(AnyTable::Fixed10),
            Kind::Fixed13 => Table::new(geometry, stripes).map(AnyTable::Fixed13),
            Kind::Narrow => Table::new(geometry, stripes).map(AnyTable::Narrow),
            Kind::Wide => Table::new(geometry, stripes).map(AnyTable::Wide),
            Kind::Windowed => Table::new(geometry, stripes).map(AnyTable::Windowed),
        }
    }

    /// A table holding `image` read back from a snapshot (see [`Table::from_image`]).
    fn from_image(geometry: Geometry, stripes: usize, image: &[u64]) -> Result<Self, SnapshotError> {
        match Self::kind(geometry) {
            Kind::Fixed10 => Table::from_image(geometry, stripes, image).map(AnyTable::Fixed10),
            Kind::Fixed13 => Table::from_image(geometry, stripes, image).map(AnyTable::Fixed13),
            Kind::Narrow => Table::from_image(geometry, stripes, image).map(AnyTable::Narrow),
            Kind::Wide => Table::from_image(geometry, stripes, image).map(AnyTable::Wide),
            Kind::Windowed => Table::from_image(geometry, stripes, image).map(AnyTable::Windowed),
        }
    }

    /// Which variant holds a table of this geometry.
    fn kind(geometry: Geometry) -> Kind {
        match geometry.layout() {
            Layout::Windows => Kind::Windowed,
            Layout::Buckets if geometry.lane_bits() == 10 => Kind::Fixed10,
            Layout::Buckets if geometry.lane_bits() == 13 => Kind::Fixed13,
            Layout::Buckets if SLOTS as u32 * geometry.lane_bits() <= u64::BITS => Kind::Narrow,
            Layout::Buckets => Kind::Wide,
        }
    }

    fn geometry(&self) -> &Geometry {
        with_table!(self, t => t.geometry())
    }

    fn memory_bytes(&self) -> usize {
        with_table!(self, t => t.memory_bytes())
    }

    /// Gives the buckets' pages back to the OS (see `current.rs`); the bytes still held.
    fn release_pages(&self) -> usize {
        with_table!(self, t => t.release_pages())
    }
}

/// The variants of [`AnyTable`].
enum Kind {
    Fixed10,
    Fixed13,
    Narrow,
    Wide,
    Windowed,
}

impl From<Table<Buckets<u64>>> for AnyTable {
    fn from(table: Table<Buckets<u64>>) -> Self {
        AnyTable::Narrow(table)
    }
}

impl From<Table<Buckets<u128>>> for AnyTable {
    fn from(table: Table<Buckets<u128>>) -> Self {
        AnyTable::Wide(table)
    }
}

/// Keys per group in [`CuckooFilter::contains_batch`] and [`CuckooFilter::insert_batch`]:
/// enough loads in flight to cover a memory latency, few enough that the prefetched lines
/// are still cached when read.
pub const BATCH: usize = 16;

/// Groups of [`BATCH`] keys that [`CuckooFilter::contains_batch`] pipelines in one read of
/// the table.
const PIPELINED: usize = 64;

/// Runs `consume` on each of `groups` with what `prepare` made of it, preparing the next
/// group before consuming this one, so that the next group's prefetches overlap this
/// group's work; stops at `consume`'s first error. `buffers` hold what `prepare` makes.
#[inline(always)]
pub(crate) fn pipelined<G, B, E>(
    groups: impl Iterator<Item = G>,
    mut buffers: [B; 2],
    mut prepare: impl FnMut(&G, &mut B),
    mut consume: impl FnMut(G, &B) -> Result<(), E>,
) -> Result<(), E> {
    let mut groups = groups.peekable();
    if let Some(group) = groups.peek() {
        prepare(group, &mut buffers[0]);
    }
    // The buffers take turns by the group's parity (swapping them would copy both).
    let mut odd_turn = false;
    while let Some(group) = groups.next() {
        let [even, odd] = &mut buffers;
        let (current, next) = if odd_turn { (odd, even) } else { (even, odd) };
        if let Some(upcoming) = groups.peek() {
            prepare(upcoming, next);
        }
        consume(group, current)?;
        odd_turn = !odd_turn;
    }
    Ok(())
}

/// A concurrent cuckoo filter: an approximate set of keys with deletion.
///
/// `contains` never misses a key that was inserted and not removed (no false negatives),
/// and reports an absent key as present with probability about the configured
/// false-positive rate. Every method takes `&self`; the filter is `Send + Sync` and is
/// meant to be shared, e.g. in an `Arc`.
///
/// Locking behaviour: lookups (`contains`, `count`) are lock-free and never block a
/// writer. `contains` reads one stamp, the key's two buckets, and the stamp again, and
/// retries only while a relocation moves an entry of its fingerprint's class (inserts and
/// removes do not disturb it); `count` retries while a writer changes one of its buckets.
/// After 16 tries either takes the two stripe locks, so it cannot starve. Writers (`insert`, `insert_unique`,
/// `remove`) lock the stripes of the buckets they touch, at most two at a time;
/// `clear` locks every stripe.
///
/// Remove only keys that were inserted: removing an absent key that happens to share a
/// fingerprint and bucket with a present one removes that one (as in every cuckoo filter).
///
/// # Examples
///
/// ```
/// use cuckoo_gate::CuckooFilter;
///
/// let filter = CuckooFilter::builder().capacity(1_000).false_positive_rate(0.001).build()?;
/// filter.insert("apple")?;
/// assert!(filter.contains("apple"));
/// assert_eq!(filter.insert_unique("apple")?, false);
/// assert!(filter.remove("apple"));
/// assert!(!filter.contains("apple"));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct CuckooFilter {
    current: Current,
    /// Held by the thread doubling the table; writers that meet a frozen stripe wait on it.
    growth: Mutex<()>,
    /// The stripe count chosen in the builder, if any (kept across doublings).
    stripes: Option<usize>,
    hasher: ahash::RandomState,
    seed: u64,
    false_positive_rate: f64,
    failed_inserts: AtomicU64,
    #[cfg(feature = "metrics")]
    metrics: Option<metrics::FilterMetrics>,
}

/// A snapshot of a filter's counters and shape, from [`CuckooFilter::stats`].
#[derive(Clone, Copy, Debug, PartialEq)]
#[non_exhaustive]
pub struct FilterStats {
    /// Stored fingerprints.
    pub len: usize,
    /// Slots (the most fingerprints the table can hold).
    pub capacity: usize,
    /// `len / capacity`.
    pub load_factor: f64,
    /// Bytes of table and stripes.
    pub memory_bytes: usize,
    /// Fingerprint width.
    pub fingerprint_bits: u32,
    /// Slot width: the fingerprint, one bit per doubling still allowed, and the choice bit
    /// (and a window's offset bit).
    pub slot_bits: u32,
    /// Buckets of 4 slots, or windows of 2.
    pub buckets: usize,
    /// How the slots are arranged.
    pub layout: Layout,
    /// Lock stripes.
    pub stripes: usize,
    /// Successful inserts so far (monotonic).
    pub inserts: u64,
    /// Fingerprints removed so far, by `remove` or `clear` (monotonic).
    pub removes: u64,
    /// Fingerprints moved between their two buckets to make room.
    pub relocations: u64,
    /// Times the filter has doubled.
    pub doublings: u32,
    /// Times it may still double before inserts fail with
    /// [`InsertError::MaxCapacityReached`].
    pub doublings_left: u32,
    /// Inserts that returned an error.
    pub failed_inserts: u64,
    /// Expected false-positive rate at the current load.
    pub estimated_false_positive_rate: f64,
}

/// The hasher of every filter, gate and cache built with `seed` (ahash 0.8, seeds derived
/// from `seed`; snapshots record this derivation).
pub(crate) fn seeded_hasher(seed: u64) -> ahash::RandomState {
    ahash::RandomState::with_seeds(
        seed,
        seed ^ 0x243F_6A88_85A3_08D3,
        seed ^ 0x1319_8A2E_0370_7344,
        seed ^ 0xA409_3822_299F_31D0,
    )
}

impl CuckooFilter {
    /// A builder; set at least [`FilterBuilder::capacity`].
    ///
    /// # Examples
    ///
    /// ```
    /// let filter = cuckoo_gate::CuckooFilter::builder().capacity(10).build()?;
    /// assert!(filter.is_empty());
    /// # Ok::<(), cuckoo_gate::BuildError>(())
    /// ```
    pub fn builder() -> FilterBuilder {
        FilterBuilder::default()
    }

    /// A filter for about `capacity` items at the default false-positive rate
    /// ([`DEFAULT_FALSE_POSITIVE_RATE`], 0.1%), which may double [`DEFAULT_DOUBLINGS`]
    /// times. A capacity of 0 is taken as 1.
    ///
    /// # Panics
    ///
    /// If the table does not fit in memory, like `Vec::with_capacity`. Use
    /// [`CuckooFilter::builder`] to get a [`BuildError`](crate::BuildError) instead.
    ///
    /// # Examples
    ///
    /// ```
    /// let filter = cuckoo_gate::CuckooFilter::with_capacity(10_000);
    /// assert!(filter.capacity() >= 10_000);
    /// ```
    pub fn with_capacity(capacity: usize) -> Self {
        match Self::builder().capacity(capacity.max(1)).build() {
            Ok(filter) => filter,
            Err(e) => panic!("CuckooFilter::with_capacity({capacity}): {e}"),
        }
    }

    pub(crate) fn from_parts(
        table: AnyTable,
        stripes: Option<usize>,
        false_positive_rate: f64,
        seed: u64,
    ) -> Self {
        let hasher = seeded_hasher(seed);
        let growable = table.geometry().doublings_left() > 0;
        CuckooFilter {
            current: Current::new(table, growable),
            growth: Mutex::new(()),
            stripes,
            hasher,
            seed,
            false_positive_rate,
            failed_inserts: AtomicU64::new(0),
            #[cfg(feature = "metrics")]
            metrics: None,
        }
    }

    /// The 64-bit hash this filter places `key` by; the `*_hashed` methods take it.
    #[inline]
    pub(crate) fn hash<T: Hash + ?Sized>(&self, key: &T) -> u64 {
        self.hasher.hash_one(key)
    }

    /// Adds `key`. Inserting a key again stores another copy (up to 8 in all, 4 in a
    /// windowed filter).
    ///
    /// Blocks while another writer holds one of the key's stripes (or a stripe on the
    /// relocation path). When no slot can be freed and the filter is at least half full,
    /// it doubles (see [`FilterBuilder::max_capacity`]); the insert that triggers a
    /// doubling does the work, in time proportional to the items stored, and other writers
    /// wait for it meanwhile.
    ///
    /// # Errors
    ///
    /// When no slot can be freed: [`InsertError::Crowded`] below half full (copies of one
    /// key, or colliding keys: a doubling would not help), else [`InsertError::Full`] for a
    /// fixed-size filter, [`InsertError::MaxCapacityReached`] for one that has grown to its
    /// limit, [`InsertError::OutOfMemory`] if the doubled table cannot be allocated.
    /// [`InsertError::TooManyCopies`] when the key already has 8 copies (4 in a windowed
    /// filter). In every case
    /// nothing stored is lost.
    ///
    /// Placement follows the seed: anyone who knows it (a fixed seed, or one read from a
    /// snapshot, where it is stored in plain bytes) can choose keys that collide, and fill
    /// a bucket pair with a handful of them. Keep the seed secret where keys come from
    /// untrusted parties.
    ///
    /// # Examples
    ///
    /// ```
    /// let filter = cuckoo_gate::CuckooFilter::with_capacity(100);
    /// filter.insert(&42u64)?;
    /// assert!(filter.contains(&42u64));
    /// # Ok::<(), cuckoo_gate::InsertError>(())
    /// ```
    pub fn insert<T: Hash + ?Sized>(&self, key: &T) -> Result<(), InsertError> {
        self.insert_hash(self.hash(key), false).map(drop)
    }

    /// Inserts every key of `keys`, in order, as [`insert`](Self::insert) does each; faster
    /// when the filter is much larger than the CPU cache: keys are taken in groups of
    /// [`BATCH`], and the first buckets of the next group are hashed and prefetched while
    /// this group is written, so that their memory loads overlap instead of queueing.
    ///
    /// # Errors
    ///
    /// The first key that cannot be inserted stops the batch: [`InsertBatchError`] names
    /// its position and [`insert`](Self::insert)'s error for it. The keys before it are
    /// inserted, it and the keys after it are not; nothing stored is lost.
    ///
    /// # Examples
    ///
    /// ```
    /// let filter = cuckoo_gate::CuckooFilter::with_capacity(1_000);
    /// let keys: Vec<u64> = (0..100).collect();
    /// filter.insert_batch(&keys)?;
    /// assert!(keys.iter().all(|k| filter.contains(k)));
    /// # Ok::<(), cuckoo_gate::InsertBatchError>(())
    /// ```
    pub fn insert_batch<T: Hash>(&self, keys: &[T]) -> Result<(), InsertBatchError> {
        // Hashes a group and starts loading its first buckets. A prefetch into a table
        // that a doubling retires meanwhile is harmless.
        let prefetch = |keys: &[T], hashes: &mut [u64; BATCH]| {
            for (hash, key) in hashes.iter_mut().zip(keys) {
                *hash = self.hash(key);
            }
            let hashes = &hashes[..keys.len()];
            self.current
                .with(|table| with_table!(table, t => hashes.iter().for_each(|&h| t.prefetch_insert(h))));
        };
        pipelined(
            keys.chunks(BATCH).enumerate(),
            [[0; BATCH]; 2],
            |&(_, keys), hashes| prefetch(keys, hashes),
            |(group, keys), hashes| {
                for (i, &hash) in hashes[..keys.len()].iter().enumerate() {
                    self.insert_hash(hash, false)
                        .map_err(|error| InsertBatchError { index: group * BATCH + i, error })?;
                }
                Ok(())
            },
        )
    }

    /// Adds `key` unless it is already present. Returns `true` if it was added now, `false`
    /// if it was present (or a false positive said so). The check and the insert are one
    /// atomic step under the key's stripe locks (in the bucket layout, only the first
    /// bucket's when the key goes there): of threads racing on one new key, exactly one
    /// gets `true`.
    ///
    /// # Errors
    ///
    /// [`InsertError::Full`] as for [`insert`](Self::insert).
    ///
    /// # Examples
    ///
    /// ```
    /// let filter = cuckoo_gate::CuckooFilter::with_capacity(100);
    /// assert_eq!(filter.insert_unique("k")?, true);
    /// assert_eq!(filter.insert_unique("k")?, false);
    /// assert_eq!(filter.count("k"), 1);
    /// # Ok::<(), cuckoo_gate::InsertError>(())
    /// ```
    pub fn insert_unique<T: Hash + ?Sized>(&self, key: &T) -> Result<bool, InsertError> {
        self.insert_unique_hashed(self.hash(key))
    }

    /// [`insert_unique`](Self::insert_unique) for a key already hashed to `hash`.
    pub(crate) fn insert_unique_hashed(&self, hash: u64) -> Result<bool, InsertError> {
        self.insert_hash(hash, true)
    }

    /// [`insert_unique`](Self::insert_unique) of a key already hashed and, if it was new
    /// here, whether `other` may hold it: `Some(found there)`, or `None` if it was present
    /// here (a gate's step, `other` its previous generation). One probe serves both when
    /// the two filters are fixed-size with the same geometry, as a gate's generations
    /// are; otherwise it is the two calls.
    #[inline]
    pub(crate) fn insert_unique_then_look(
        &self,
        hash: u64,
        other: &CuckooFilter,
    ) -> Result<Option<bool>, InsertError> {
        // Tables of fixed-size filters are never replaced, so `with` (run once) serves a
        // read of `other` too.
        let fixed = !self.current.replaceable() && !other.current.replaceable();
        let fused = fixed.then(|| {
            self.current.with(|mine| {
                other.current.with(|theirs| match (mine, theirs) {
                    (AnyTable::Fixed10(a), AnyTable::Fixed10(b)) => a.insert_unique_then_look(hash, b),
                    (AnyTable::Fixed13(a), AnyTable::Fixed13(b)) => a.insert_unique_then_look(hash, b),
                    (AnyTable::Narrow(a), AnyTable::Narrow(b)) => a.insert_unique_then_look(hash, b),
                    (AnyTable::Wide(a), AnyTable::Wide(b)) => a.insert_unique_then_look(hash, b),
                    _ => None,
                })
            })
        });
        match fused.flatten() {
            Some(Ok(found)) => Ok(found),
            // Refused (having changed nothing), or not fused: the two calls, which wait
            // out a snapshot's freeze.
            _ => Ok(self.insert_unique_hashed(hash)?.then(|| other.contains_hashed(hash))),
        }
    }

    #[inline]
    fn insert_hash(&self, hash: u64, unique: bool) -> Result<bool, InsertError> {
        match self.try_insert(hash, unique) {
            Ok(inserted) => Ok(inserted),
            Err(refusal) => self.insert_refused(hash, unique, refusal),
        }
    }

    /// One attempt at an insert into the current table; a refusal comes with that table's
    /// geometry, which says whether to grow.
    #[inline]
    fn try_insert(&self, hash: u64, unique: bool) -> Result<bool, (Refused, Geometry)> {
        self.current
            .with(|table| with_table!(table, t => t.insert(hash, unique)).map_err(|r| (r, *table.geometry())))
    }

    /// [`insert_hash`](Self::insert_hash) after the current table refused it: waits for a
    /// doubling, grows, or reports why it cannot, and retries. Out of line, so that the
    /// insert that succeeds at once carries none of it.
    #[cold]
    #[inline(never)]
    fn insert_refused(
        &self,
        hash: u64,
        unique: bool,
        mut refusal: (Refused, Geometry),
    ) -> Result<bool, InsertError> {
        let result = loop {
            match refusal {
                (Refused::TooManyCopies, _) => break Err(InsertError::TooManyCopies),
                (Refused::Frozen, _) => self.wait_for_growth(),
                // Random keys fill a table to about 96% before an insert fails; a failure
                // below half is crowding, which a doubling would not relieve.
                (Refused::Full, geometry) if 2 * self.len() < geometry.slots() => {
                    break Err(InsertError::Crowded)
                }
                (Refused::Full, geometry) if geometry.doublings_left() == 0 && geometry.level() > 0 => {
                    break Err(InsertError::MaxCapacityReached { capacity: geometry.slots() })
                }
                (Refused::Full, _) if !self.current.replaceable() => break Err(InsertError::Full),
                (Refused::Full, geometry) => {
                    if let Err(e) = self.grow(geometry.level()) {
                        break Err(e);
                    }
                }
            }
            refusal = match self.try_insert(hash, unique) {
                Ok(inserted) => break Ok(inserted),
                Err(refusal) => refusal,
            };
        };
        if result.is_err() {
            self.failed_inserts.fetch_add(1, Ordering::Relaxed);
        }
        result
    }

    /// Whether `key` may be present: always `true` for a key inserted and not removed;
    /// `true` for an absent key with probability about the false-positive rate.
    ///
    /// Lock-free (see the type's locking behaviour).
    ///
    /// # Examples
    ///
    /// ```
    /// let filter = cuckoo_gate::CuckooFilter::with_capacity(100);
    /// assert!(!filter.contains("never inserted"));
    /// ```
    #[inline]
    pub fn contains<T: Hash + ?Sized>(&self, key: &T) -> bool {
        self.contains_hashed(self.hash(key))
    }

    /// [`contains`](Self::contains) for a key already hashed to `hash`.
    #[inline]
    pub(crate) fn contains_hashed(&self, hash: u64) -> bool {
        self.current.read(|table| with_table!(table, t => t.contains(hash)))
    }

    /// Looks up every key of `keys`: `found[i] = self.contains(&keys[i])`. Faster than
    /// one `contains` per key when the filter is much larger than the CPU cache: keys are
    /// taken in groups of [`BATCH`], and the buckets of the next group are hashed and
    /// prefetched while this group's are read, so the memory loads overlap instead of
    /// queueing.
    /// Lock-free, with the same guarantees as `contains` for each key.
    ///
    /// # Panics
    ///
    /// If `found` and `keys` differ in length.
    ///
    /// # Examples
    ///
    /// ```
    /// let filter = cuckoo_gate::CuckooFilter::with_capacity(1_000);
    /// filter.insert(&2u64)?;
    /// let mut found = [false; 3];
    /// filter.contains_batch(&[1u64, 2, 3], &mut found);
    /// assert_eq!(found, [false, true, false]);
    /// # Ok::<(), cuckoo_gate::InsertError>(())
    /// ```
    pub fn contains_batch<T: Hash>(&self, keys: &[T], found: &mut [bool]) {
        assert_eq!(keys.len(), found.len(), "contains_batch: `found` must have one slot per key");
        // Whole groups per table read (a read that a doubling retires is done again).
        let keys_per_read = BATCH * PIPELINED;
        for (keys, found) in keys.chunks(keys_per_read).zip(found.chunks_mut(keys_per_read)) {
            self.current
                .read(|table| with_table!(table, t => t.contains_each(keys, |k| self.hash(k), found)));
        }
    }

    /// How many copies of `key` are stored (an upper bound: copies of colliding keys count
    /// too). Lock-free.
    ///
    /// # Examples
    ///
    /// ```
    /// let filter = cuckoo_gate::CuckooFilter::with_capacity(100);
    /// filter.insert("k")?;
    /// filter.insert("k")?;
    /// assert_eq!(filter.count("k"), 2);
    /// # Ok::<(), cuckoo_gate::InsertError>(())
    /// ```
    pub fn count<T: Hash + ?Sized>(&self, key: &T) -> usize {
        let hash = self.hash(key);
        self.current.read(|table| with_table!(table, t => t.count(t.probe(hash))))
    }

    /// Removes one copy of `key`; returns whether one was found. Blocks while another writer
    /// holds one of the key's stripes.
    ///
    /// # Examples
    ///
    /// ```
    /// let filter = cuckoo_gate::CuckooFilter::with_capacity(100);
    /// filter.insert("k")?;
    /// assert!(filter.remove("k"));
    /// assert!(!filter.remove("k"));
    /// # Ok::<(), cuckoo_gate::InsertError>(())
    /// ```
    pub fn remove<T: Hash + ?Sized>(&self, key: &T) -> bool {
        self.remove_hashed(self.hash(key))
    }

    /// [`remove`](Self::remove) for a key already hashed to `hash`.
    pub(crate) fn remove_hashed(&self, hash: u64) -> bool {
        self.write(|table| with_table!(table, t => t.remove(t.probe(hash))))
    }

    /// Stored fingerprints (copies count). Sums per-stripe counters without locking, so
    /// under concurrent writes it is a recent value, not an instant's.
    ///
    /// # Examples
    ///
    /// ```
    /// let filter = cuckoo_gate::CuckooFilter::builder().capacity(1_000).build()?;
    /// filter.insert("a")?;
    /// filter.insert("a")?;
    /// assert_eq!(filter.len(), 2);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn len(&self) -> usize {
        self.current.read(|table| with_table!(table, t => t.len()))
    }

    /// Whether nothing is stored.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Slots in the table: the most fingerprints it can hold. Inserts start to fail at
    /// about 96% of this.
    ///
    /// # Examples
    ///
    /// ```
    /// let filter = cuckoo_gate::CuckooFilter::builder().capacity(1_000).build()?;
    /// assert!(filter.capacity() >= 1_000);
    /// assert_eq!(filter.capacity() % 4, 0);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn capacity(&self) -> usize {
        self.geometry().slots()
    }

    /// The table's layout (see [`FilterBuilder::layout`]).
    pub fn layout(&self) -> Layout {
        self.geometry().layout()
    }

    /// `len() / capacity()`, in [0, 1].
    ///
    /// # Examples
    ///
    /// ```
    /// let filter = cuckoo_gate::CuckooFilter::builder().capacity(1_000).build()?;
    /// filter.insert("a")?;
    /// assert_eq!(filter.load_factor(), 1.0 / filter.capacity() as f64);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn load_factor(&self) -> f64 {
        self.len() as f64 / self.capacity() as f64
    }

    /// Bytes held by the current table and its lock stripes, and what retired tables still
    /// hold (after a doubling the old table stays allocated while the filter lives, its
    /// pages handed back to the OS on Linux: then only its stripes count).
    ///
    /// # Examples
    ///
    /// ```
    /// use cuckoo_gate::CuckooFilter;
    ///
    /// // 13-bit slots at the default 0.1%: about 13.7 bits per item at the sized capacity...
    /// let fixed = CuckooFilter::builder().capacity(1_000_000).max_capacity(1_000_000).build()?;
    /// let bits_per_item = fixed.memory_usage() as f64 * 8.0 / 1_000_000.0;
    /// assert!(bits_per_item < 14.0, "{bits_per_item}");
    /// // ...and 4 side bits more per slot for the default growth allowance (16x).
    /// let growable = CuckooFilter::with_capacity(1_000_000);
    /// let bits_per_item = growable.memory_usage() as f64 * 8.0 / 1_000_000.0;
    /// assert!(bits_per_item < 18.5, "{bits_per_item}");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn memory_usage(&self) -> usize {
        self.current.read(AnyTable::memory_bytes) + self.current.retired_bytes()
    }

    /// The false-positive rate this filter was built for.
    pub fn false_positive_rate(&self) -> f64 {
        self.false_positive_rate
    }

    /// Fingerprint width in bits (a slot holds one more, the choice bit).
    pub fn fingerprint_bits(&self) -> u32 {
        self.geometry().fingerprint_bits()
    }

    /// The hash seed, fixed by [`FilterBuilder::seed`] or drawn at random.
    pub fn seed(&self) -> u64 {
        self.seed
    }

    /// Removes everything. Locks every stripe (blocking until writers in progress finish);
    /// lookups overlapping it retry and then see the empty filter.
    ///
    /// # Examples
    ///
    /// ```
    /// let filter = cuckoo_gate::CuckooFilter::with_capacity(100);
    /// filter.insert("k")?;
    /// filter.clear();
    /// assert!(filter.is_empty() && !filter.contains("k"));
    /// # Ok::<(), cuckoo_gate::InsertError>(())
    /// ```
    pub fn clear(&self) {
        self.write(|table| with_table!(table, t => t.clear()));
    }

    /// Counters and shape.
    ///
    /// # Examples
    ///
    /// ```
    /// let filter = cuckoo_gate::CuckooFilter::builder().capacity(1000).false_positive_rate(0.01).build()?;
    /// let stats = filter.stats();
    /// assert_eq!(stats.fingerprint_bits, 9);
    /// assert_eq!(stats.capacity, stats.buckets * 4);
    /// # Ok::<(), cuckoo_gate::BuildError>(())
    /// ```
    pub fn stats(&self) -> FilterStats {
        // One pass over the stripes of the current table. A racing remove can make
        // `inserts` lag by the removes in flight (see `Table::totals`); exact when quiet.
        let (totals, geometry, stripes, memory_bytes) = self.current.read(|table| {
            let totals = with_table!(table, t => t.totals());
            (totals, *table.geometry(), with_table!(table, t => t.stripe_count()), table.memory_bytes())
        });
        let (len, removes) = (totals.items, totals.removes);
        let capacity = geometry.slots();
        let load_factor = len as f64 / capacity as f64;
        FilterStats {
            len,
            inserts: (len as u64).wrapping_add(removes),
            removes,
            capacity,
            load_factor,
            memory_bytes,
            fingerprint_bits: geometry.fingerprint_bits(),
            slot_bits: geometry.slot_bits(),
            buckets: geometry.places(),
            layout: geometry.layout(),
            stripes,
            relocations: totals.relocations,
            doublings: geometry.level(),
            doublings_left: geometry.doublings_left(),
            failed_inserts: self.failed_inserts.load(Ordering::Relaxed),
            estimated_false_positive_rate: geometry.false_positive_rate(load_factor),
        }
    }

    /// Publishes [`stats`](Self::stats) to the metrics registered with
    /// [`FilterBuilder::metrics_name`] (feature `metrics`); does nothing without a name.
    /// Costs one pass over the stripes; call it periodically, not per operation.
    ///
    /// # Examples
    ///
    /// ```
    /// let filter = cuckoo_gate::CuckooFilter::builder().capacity(100).metrics_name("visitors").build()?;
    /// filter.insert("k").unwrap();
    /// filter.publish_metrics(); // sets cuckoo_gate_filter_items{name="visitors"} to 1
    /// # Ok::<(), cuckoo_gate::BuildError>(())
    /// ```
    #[cfg(feature = "metrics")]
    pub fn publish_metrics(&self) {
        if let Some(metrics) = &self.metrics {
            metrics.publish(&self.stats());
        }
    }

    /// The two candidate buckets (or windows) of `key`. For tests and models that need to
    /// know where a key lives; not part of the stable API.
    #[doc(hidden)]
    pub fn debug_buckets<T: Hash + ?Sized>(&self, key: &T) -> [usize; 2] {
        let p = self.geometry().probe(self.hash(key));
        [p.i1, p.i2]
    }

    /// The first slot of bucket (or window) `bucket`; not part of the stable API.
    #[doc(hidden)]
    pub fn debug_first_slot(&self, bucket: usize) -> usize {
        match self.layout() {
            Layout::Buckets => Buckets::<u64>::first_slot(bucket),
            Layout::Windows => Windows::first_slot(bucket),
        }
    }

    /// Whether this filter's table, before any doubling, is the one the builder sizes for
    /// `capacity` items (for checking a restored gate).
    pub(crate) fn is_sized_for(&self, capacity: usize) -> bool {
        Some(self.geometry().base_buckets()) == builder::buckets_for(Layout::Buckets, capacity)
    }

    /// The current table's geometry.
    fn geometry(&self) -> Geometry {
        self.current.read(|table| *table.geometry())
    }
}

impl fmt::Debug for CuckooFilter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CuckooFilter")
            .field("len", &self.len())
            .field("capacity", &self.capacity())
            .field("fingerprint_bits", &self.fingerprint_bits())
            .field("false_positive_rate", &self.false_positive_rate)
            .finish_non_exhaustive()
    }
}

#[cfg(all(test, not(cuckoo_gate_loom)))]
mod tests;
