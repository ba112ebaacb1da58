//! The concurrent cuckoo filter.
//!
//! * `hash.rs`: where a key goes (two buckets, a fingerprint with a choice bit).
//! * `bucket.rs`: bit-parallel search of one bucket.
//! * `stripe.rs`: the seqlock stripes that writers lock and readers validate.
//! * `table.rs`: the packed atomic words and the optimistic pair read.
//! * `relocate.rs`: cuckoo path search and its backward execution.
//! * `ops.rs`: insert, remove and lookups on one table.
//! * `builder.rs`: configuration and sizing.

mod bucket;
mod builder;
mod hash;
mod ops;
mod relocate;
mod stripe;
mod table;

use std::fmt;
use std::hash::Hash;

use self::bucket::SLOTS;
use self::hash::{Geometry, Probe};
use self::table::Table;
use crate::error::InsertError;
use crate::primitive::{AtomicU64, Ordering};

pub use self::builder::{FilterBuilder, DEFAULT_FALSE_POSITIVE_RATE};

/// The table, monomorphised for its bucket word: `u64` buckets for slots of up to 16 bits,
/// `u128` for wider ones.
#[derive(Debug)]
pub(crate) enum Tables {
    Narrow(Table<u64>),
    Wide(Table<u128>),
}

/// Runs `$body` with `$t` bound to the table, whichever its word type.
macro_rules! with_table {
    ($tables:expr, $t:ident => $body:expr) => {
        match $tables {
            Tables::Narrow($t) => $body,
            Tables::Wide($t) => $body,
        }
    };
}

impl Tables {
    /// An empty table of this shape, `Err` if its memory is refused.
    pub(crate) fn new(geometry: Geometry, stripes: usize) -> Result<Self, ()> {
        if SLOTS as u32 * geometry.slot_bits() <= u64::BITS {
            Table::new(geometry, stripes).map(Tables::Narrow)
        } else {
            Table::new(geometry, stripes).map(Tables::Wide)
        }
    }

    fn geometry(&self) -> &Geometry {
        with_table!(self, t => t.geometry())
    }
}

/// A concurrent cuckoo filter: an approximate set of keys with deletion.
///
/// `contains` never misses a key that was inserted and not removed (no false negatives),
/// and reports an absent key as present with probability about the configured
/// false-positive rate. Every method takes `&self`; the filter is `Send + Sync` and is
/// meant to be shared, e.g. in an `Arc`.
///
/// Locking behaviour: lookups (`contains`, `count`) are lock-free and never block a
/// writer; they retry while a writer changes one of their buckets, and after 16 tries take
/// the two stripe locks, so they cannot starve. Writers (`insert`, `insert_unique`,
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
    tables: Tables,
    hasher: ahash::RandomState,
    seed: u64,
    false_positive_rate: f64,
    failed_inserts: AtomicU64,
    #[cfg(feature = "metrics")]
    metrics: Option<crate::metrics::FilterMetrics>,
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
    /// Fingerprint width (the slot holds one more bit, the choice bit).
    pub fingerprint_bits: u32,
    /// Buckets of 4 slots.
    pub buckets: usize,
    /// Lock stripes.
    pub stripes: usize,
    /// Successful inserts so far (monotonic).
    pub inserts: u64,
    /// Fingerprints removed so far, by `remove` or `clear` (monotonic).
    pub removes: u64,
    /// Fingerprints moved between their two buckets to make room.
    pub relocations: u64,
    /// Inserts that returned an error.
    pub failed_inserts: u64,
    /// Expected false-positive rate at the current load.
    pub estimated_false_positive_rate: f64,
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
    /// ([`DEFAULT_FALSE_POSITIVE_RATE`], 0.1%). A capacity of 0 is taken as 1.
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

    pub(crate) fn from_parts(tables: Tables, false_positive_rate: f64, seed: u64) -> Self {
        let hasher = ahash::RandomState::with_seeds(
            seed,
            seed ^ 0x243F_6A88_85A3_08D3,
            seed ^ 0x1319_8A2E_0370_7344,
            seed ^ 0xA409_3822_299F_31D0,
        );
        CuckooFilter {
            tables,
            hasher,
            seed,
            false_positive_rate,
            failed_inserts: AtomicU64::new(0),
            #[cfg(feature = "metrics")]
            metrics: None,
        }
    }

    #[inline]
    fn probe<T: Hash + ?Sized>(&self, key: &T) -> Probe {
        self.tables.geometry().probe(self.hasher.hash_one(key))
    }

    /// Adds `key`. Inserting a key again stores another copy (up to 8 in all).
    ///
    /// Blocks while another writer holds one of the key's stripes (or a stripe on the
    /// relocation path).
    ///
    /// # Errors
    ///
    /// [`InsertError::Full`] when no slot can be freed; [`InsertError::TooManyCopies`] when
    /// the key already has 8 copies. In both cases nothing stored is lost.
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
        self.insert_probe(self.probe(key), false).map(drop)
    }

    /// Adds `key` unless it is already present. Returns `true` if it was added now, `false`
    /// if it was present (or a false positive said so). The check and the insert are one
    /// atomic step under the key's stripe locks: of threads racing on one new key, exactly
    /// one gets `true`.
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
        self.insert_probe(self.probe(key), true)
    }

    fn insert_probe(&self, p: Probe, unique: bool) -> Result<bool, InsertError> {
        let result = with_table!(&self.tables, t => t.insert(p, unique));
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
        let p = self.probe(key);
        with_table!(&self.tables, t => t.contains(p))
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
        let p = self.probe(key);
        with_table!(&self.tables, t => t.count(p))
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
        let p = self.probe(key);
        with_table!(&self.tables, t => t.remove(p))
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
        with_table!(&self.tables, t => t.len())
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
        self.tables.geometry().buckets() * SLOTS
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

    /// Bytes held by the table and its lock stripes.
    ///
    /// # Examples
    ///
    /// ```
    /// let filter = cuckoo_gate::CuckooFilter::builder().capacity(1_000).build()?;
    /// # drop(filter);
    /// // 13-bit slots at the default 0.1%: about 13.7 bits per item at the sized capacity.
    /// let filter = cuckoo_gate::CuckooFilter::with_capacity(1_000_000);
    /// let bits_per_item = filter.memory_usage() as f64 * 8.0 / 1_000_000.0;
    /// assert!(bits_per_item < 14.0, "{bits_per_item}");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn memory_usage(&self) -> usize {
        with_table!(&self.tables, t => t.memory_bytes())
    }

    /// The false-positive rate this filter was built for.
    pub fn false_positive_rate(&self) -> f64 {
        self.false_positive_rate
    }

    /// Fingerprint width in bits (a slot holds one more, the choice bit).
    pub fn fingerprint_bits(&self) -> u32 {
        self.tables.geometry().fingerprint_bits()
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
        with_table!(&self.tables, t => t.clear());
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
        // One pass over the stripes. A racing remove can make `inserts` lag by the removes
        // in flight (see `Table::totals`); exact when quiet.
        let totals = with_table!(&self.tables, t => t.totals());
        let (len, removes) = (totals.items, totals.removes);
        let capacity = self.capacity();
        let load_factor = len as f64 / capacity as f64;
        FilterStats {
            len,
            inserts: len as u64 + removes,
            removes,
            capacity,
            load_factor,
            memory_bytes: self.memory_usage(),
            fingerprint_bits: self.fingerprint_bits(),
            buckets: self.tables.geometry().buckets(),
            stripes: with_table!(&self.tables, t => t.stripe_count()),
            relocations: totals.relocations,
            failed_inserts: self.failed_inserts.load(Ordering::Relaxed),
            estimated_false_positive_rate: Geometry::fpr_at(self.fingerprint_bits(), load_factor),
        }
    }

    /// Publishes [`stats`](Self::stats) to the metrics registered with
    /// [`FilterBuilder::metrics_name`] (feature `metrics`); does nothing without a name.
    /// Costs one pass over the stripes; call it periodically, not per operation.
    ///
    /// # Examples
    ///
    /// ```
    /// let filter = cuckoo_gate::CuckooFilter::builder().capacity(100).metrics_name("sessions").build()?;
    /// filter.insert("k").unwrap();
    /// filter.publish_metrics(); // sets cuckoo_gate_filter_items{name="sessions"} to 1
    /// # Ok::<(), cuckoo_gate::BuildError>(())
    /// ```
    #[cfg(feature = "metrics")]
    pub fn publish_metrics(&self) {
        if let Some(metrics) = &self.metrics {
            metrics.publish(&self.stats());
        }
    }

    /// The two candidate buckets of `key`. For tests and models that need to know where a
    /// key lives; not part of the stable API.
    #[doc(hidden)]
    pub fn debug_buckets<T: Hash + ?Sized>(&self, key: &T) -> [usize; 2] {
        let p = self.probe(key);
        [p.i1, p.i2]
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
