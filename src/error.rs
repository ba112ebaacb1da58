//! Error values. Every error says what happened and what to change.

use std::fmt;

/// Why a builder refused its configuration.
///
/// # Examples
///
/// ```
/// let err = cuckoo_gate::CuckooFilter::builder().capacity(0).build().unwrap_err();
/// assert!(err.to_string().contains(".capacity(n)"));
/// ```
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub enum BuildError {
    /// The false-positive rate is not a number strictly between 0 and 1.
    InvalidFalsePositiveRate {
        /// The value given.
        requested: f64,
    },
    /// The false-positive rate is below what 31-bit fingerprints can deliver.
    FalsePositiveRateTooSmall {
        /// The value given.
        requested: f64,
        /// The smallest supported value.
        smallest: f64,
    },
    /// The capacity is zero (or was never set).
    ZeroCapacity,
    /// The capacity is so large that the table's size overflows the address space.
    CapacityTooLarge {
        /// The value given.
        capacity: usize,
    },
    /// The allocator refused the table's memory.
    OutOfMemory {
        /// Bytes that were asked for.
        bytes: usize,
    },
    /// The stripe count is zero, not a power of two, or more than the table can use.
    InvalidStripes {
        /// The value given.
        stripes: usize,
        /// The most allowed, when that was the problem.
        most: Option<usize>,
    },
    /// The shard count is zero or larger than the cache capacity.
    InvalidShards {
        /// The value given.
        shards: usize,
        /// The cache capacity.
        capacity: u64,
    },
    /// A setting that must be at least 1 was given 0.
    ZeroSetting {
        /// The builder method that was given 0.
        setting: &'static str,
    },
    /// A cache's gate or ghosts, sized from `setting`, are too large to allocate (or to
    /// address).
    AdmissionTooLarge {
        /// The setting they were sized from.
        setting: &'static str,
        /// Bytes the allocator refused, if it was asked.
        bytes: Option<usize>,
    },
    /// The maximum capacity is below the capacity.
    MaxCapacityBelowCapacity {
        /// The capacity given.
        capacity: usize,
        /// The maximum capacity given.
        max_capacity: usize,
    },
    /// Growth from the capacity to the maximum capacity needs more doublings than a slot
    /// has room for: each allowed doubling costs one bit per slot, and a slot (fingerprint,
    /// growth bits and choice bit) holds at most 32.
    TooManyDoublings {
        /// Doublings from the capacity to the maximum capacity.
        doublings: u32,
        /// The most this false-positive rate allows.
        most: u32,
    },
    /// A windowed filter ([`Layout::Windows`](crate::Layout::Windows)) was given a maximum
    /// capacity above its capacity: windowed filters are fixed-size.
    WindowsCannotGrow {
        /// The capacity given.
        capacity: usize,
        /// The maximum capacity given.
        max_capacity: usize,
    },
    /// Another live filter, cache or admission condition publishes its metrics under this
    /// `metrics_name` (the name is free again once that one is dropped).
    MetricsNameTaken {
        /// The name given.
        name: String,
    },
}

impl fmt::Display for BuildError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BuildError::InvalidFalsePositiveRate { requested } => write!(
                f,
                "false-positive rate {} is not strictly between 0 and 1; pass e.g. 0.001 for 0.1%",
                Rate(*requested)
            ),
            BuildError::FalsePositiveRateTooSmall { requested, smallest } => write!(
                f,
                "false-positive rate {} is below the smallest supported rate {smallest:e}; \
                 raise it, or check the key exactly after a positive answer",
                Rate(*requested)
            ),
            BuildError::ZeroCapacity => {
                write!(f, "capacity is zero; set the expected number of items with .capacity(n), n >= 1")
            }
            BuildError::CapacityTooLarge { capacity } => write!(
                f,
                "capacity {capacity} needs a table larger than the address space; lower it, or raise the false-positive rate"
            ),
            BuildError::OutOfMemory { bytes } => write!(
                f,
                "could not allocate {bytes} bytes for the table; lower the capacity or raise the false-positive rate"
            ),
            BuildError::InvalidStripes { stripes, most: None } => {
                write!(f, "stripe count {stripes} is not a power of two >= 1; pass e.g. 1024")
            }
            BuildError::InvalidStripes { stripes, most: Some(most) } => write!(
                f,
                "stripe count {stripes} is more than this filter can use; pass a power of two up to {most}"
            ),
            BuildError::InvalidShards { shards, capacity } => write!(
                f,
                "{shards} shards for a capacity of {capacity}; use between 1 and the capacity, at most 65536 (1 = one global order)"
            ),
            BuildError::ZeroSetting { setting } => write!(f, ".{setting}(0): it must be at least 1"),
            BuildError::AdmissionTooLarge { setting, bytes: Some(bytes) } => write!(
                f,
                "the cache's gate or ghosts, sized from .{setting}, need {bytes} bytes, which the allocator refused; \
                 lower .{setting} or set a smaller .gate_capacity(n)"
            ),
            BuildError::AdmissionTooLarge { setting, bytes: None } => write!(
                f,
                "the cache's gate or ghosts, sized from .{setting}, would be larger than the address space; \
                 lower .{setting} or set a smaller .gate_capacity(n)"
            ),
            BuildError::MaxCapacityBelowCapacity { capacity, max_capacity } => write!(
                f,
                "max_capacity {max_capacity} is below capacity {capacity}; set .max_capacity(n) to at least the capacity"
            ),
            BuildError::TooManyDoublings { doublings, most } => write!(
                f,
                "growing to max_capacity takes {doublings} doublings but at most {most} fit in a slot at this false-positive rate; \
                 raise .capacity(n), lower .max_capacity(n) or raise .false_positive_rate(e)"
            ),
            BuildError::WindowsCannotGrow { capacity, max_capacity } => write!(
                f,
                "a windowed filter cannot grow, but max_capacity {max_capacity} is above capacity {capacity}; \
                 size it with .capacity({max_capacity}), or use Layout::Buckets to grow"
            ),
            BuildError::MetricsNameTaken { name } => write!(
                f,
                "metrics name {name:?} is in use by another live instance, whose series this one would overwrite; pick another name"
            ),
        }
    }
}

impl std::error::Error for BuildError {}

/// A false-positive rate as a person would write it: plain between 0.0001 and 1, in
/// scientific notation beyond (so that 1e-300 is not 300 digits).
struct Rate(f64);

impl fmt::Display for Rate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if (1e-4..=1.0).contains(&self.0.abs()) || self.0 == 0.0 || !self.0.is_finite() {
            write!(f, "{}", self.0)
        } else {
            write!(f, "{:e}", self.0)
        }
    }
}

/// Why an insert did not store its key. In every case the filter is unchanged apart from
/// relocations, which move fingerprints between their two buckets and lose nothing.
///
/// # Examples
///
/// ```
/// use cuckoo_gate::{CuckooFilter, InsertError};
///
/// let filter = CuckooFilter::builder().capacity(100).build()?;
/// for _ in 0..8 {
///     filter.insert("hot")?;
/// }
/// assert_eq!(filter.insert("hot"), Err(InsertError::TooManyCopies));
/// assert_eq!(filter.count("hot"), 8); // nothing lost
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum InsertError {
    /// No free slot could be made within the relocation search budget and the filter is
    /// fixed-size (its `max_capacity` is its capacity): it is (nearly) full. Build a larger
    /// filter or allow growth with `max_capacity`.
    Full,
    /// The filter is full and has already doubled up to its `max_capacity`.
    MaxCapacityReached {
        /// The capacity (slots) the filter has grown to.
        capacity: usize,
    },
    /// The filter is full and the allocator refused the memory for doubling it.
    OutOfMemory {
        /// Bytes that were asked for.
        bytes: usize,
    },
    /// Both of the key's buckets are full of copies of its fingerprint: the same key (or
    /// one indistinguishable from it) was inserted 8 times already (4 times, in a windowed
    /// filter). Remove a copy first, or use `insert_unique`.
    TooManyCopies,
    /// No slot could be freed for the key although the filter is less than half full: its
    /// two buckets, and every bucket a fingerprint in them could move to, are full, which
    /// at that load means copies of one key (or keys chosen to collide, which a fixed or
    /// leaked seed makes possible) rather than a full table. The filter does not double
    /// for this (a doubling keeps all copies of a key in one bucket pair, so it would not
    /// help); nothing was stored and nothing lost. Remove copies, or use `insert_unique`.
    Crowded,
}

impl fmt::Display for InsertError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            InsertError::Full => f.write_str(
                "cuckoo filter is full: no relocation path within the search budget; build a larger filter or set max_capacity",
            ),
            InsertError::MaxCapacityReached { capacity } => write!(
                f,
                "cuckoo filter is full at its max_capacity ({capacity} slots); build it with a larger .max_capacity(n)"
            ),
            InsertError::OutOfMemory { bytes } => {
                write!(f, "cuckoo filter is full and doubling it needs {bytes} bytes, which the allocator refused")
            }
            InsertError::TooManyCopies => f.write_str(
                "key's two buckets already hold copies of its fingerprint in every slot (8, or 4 in windows); remove one first or use insert_unique",
            ),
            InsertError::Crowded => f.write_str(
                "no room in the key's buckets although the filter is less than half full: too many copies of one key, \
                 or keys colliding on purpose (keep the seed secret); remove copies or use insert_unique",
            ),
        }
    }
}

impl std::error::Error for InsertError {}

/// Why [`CuckooFilter::insert_batch`](crate::CuckooFilter::insert_batch) stopped: the key
/// at `index` could not be inserted. The keys before it are in the filter, it and those
/// after it are not.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct InsertBatchError {
    /// The position in the batch of the key that was not inserted.
    pub index: usize,
    /// Why, as [`CuckooFilter::insert`](crate::CuckooFilter::insert) reports it.
    pub error: InsertError,
}

impl fmt::Display for InsertBatchError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "key {} of the batch was not inserted (nor those after it): {}", self.index, self.error)
    }
}

impl std::error::Error for InsertBatchError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&self.error)
    }
}
