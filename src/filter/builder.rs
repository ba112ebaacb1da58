//! [`FilterBuilder`]: validates a configuration and sizes the table.

use super::bucket::SLOTS;
use super::hash::{Geometry, MAX_FINGERPRINT_BITS, MAX_SLOT_BITS};
use super::table::{table_bytes, GROUP};
use super::{AnyTable, CuckooFilter};
use crate::error::BuildError;

/// False-positive rate used by [`CuckooFilter::with_capacity`] and by a builder that is
/// not given one: 0.1%, which takes 13-bit slots.
pub const DEFAULT_FALSE_POSITIVE_RATE: f64 = 0.001;

/// The table is sized so that `capacity` items fill it to this load; (2,4) cuckoo tables
/// reach about 96–97% before the first failed insert.
pub(crate) const TARGET_LOAD_PERCENT: u128 = 95;

/// Most stripes chosen by default: enough that writers on a few dozen cores rarely meet,
/// and few enough (32 KiB) that the stamps stay in cache.
pub(crate) const DEFAULT_MAX_STRIPES: usize = 1024;

/// Doublings allowed when no `max_capacity` is given (16 times the capacity), at one
/// bit per slot per doubling still allowed (fewer if a slot would exceed 32 bits).
pub const DEFAULT_DOUBLINGS: u32 = 4;

/// The default stripe count for a table of `buckets` buckets: one per group, up to
/// [`DEFAULT_MAX_STRIPES`].
pub(crate) fn default_stripes(buckets: usize) -> usize {
    buckets.div_ceil(GROUP).next_power_of_two().min(DEFAULT_MAX_STRIPES)
}

/// Most stripes a filter whose largest table has `buckets` buckets may have: one per group
/// of that table (more would never be used), or [`DEFAULT_MAX_STRIPES`] if larger. The
/// builder and `restore` both hold to it, so every filter built can be restored.
pub(crate) fn max_stripes(buckets: usize) -> usize {
    buckets.div_ceil(GROUP).checked_next_power_of_two().unwrap_or(usize::MAX).max(DEFAULT_MAX_STRIPES)
}

/// Buckets of a table built for `capacity` items (at least 2), or `None` if the count
/// overflows `usize`.
pub(crate) fn buckets_for(capacity: usize) -> Option<usize> {
    let buckets = (capacity as u128 * 100).div_ceil(SLOTS as u128 * TARGET_LOAD_PERCENT);
    usize::try_from(buckets.max(2)).ok()
}

/// Configures a [`CuckooFilter`]. Made by [`CuckooFilter::builder`].
///
/// # Examples
///
/// ```
/// use cuckoo_gate::CuckooFilter;
///
/// let filter = CuckooFilter::builder()
///     .capacity(100_000)
///     .false_positive_rate(0.01)
///     .seed(42)
///     .build()?;
/// assert!(filter.capacity() >= 100_000);
/// # Ok::<(), cuckoo_gate::BuildError>(())
/// ```
#[derive(Clone, Debug)]
#[must_use]
pub struct FilterBuilder {
    capacity: usize,
    max_capacity: Option<usize>,
    false_positive_rate: f64,
    seed: Option<u64>,
    stripes: Option<usize>,
    #[cfg(feature = "metrics")]
    metrics_name: Option<String>,
}

impl Default for FilterBuilder {
    fn default() -> Self {
        FilterBuilder {
            capacity: 0,
            max_capacity: None,
            false_positive_rate: DEFAULT_FALSE_POSITIVE_RATE,
            seed: None,
            stripes: None,
            #[cfg(feature = "metrics")]
            metrics_name: None,
        }
    }
}

impl FilterBuilder {
    /// Expected number of items (required, at least 1). The table gets enough slots to hold
    /// this many at 95% load.
    pub fn capacity(mut self, items: usize) -> Self {
        self.capacity = items;
        self
    }

    /// The most items the filter may grow to. When an insert finds no room the filter
    /// doubles, as long as the doubled capacity stays within `items`; past that, inserts
    /// fail with [`InsertError::MaxCapacityReached`](crate::InsertError::MaxCapacityReached).
    ///
    /// The filter may double `floor(log2(items / capacity))` times, and each doubling still
    /// allowed costs one bit per slot (it keeps the false-positive rate at ε however far
    /// the filter grows; a doubling spends its bit, so a fully grown filter has the slots
    /// of a fixed-size one). These bits sit apart from the fingerprints, where only writers
    /// read them, so lookups read a table as compact as a fixed-size filter's. By default
    /// the filter may double [`DEFAULT_DOUBLINGS`] times (16x the capacity), fewer if a slot
    /// would exceed 32 bits.
    ///
    /// What the ability to grow costs before the filter grows:
    /// `cargo run --release --example growth_tax` measures it (figures in
    /// `docs/performance.md`).
    ///
    /// For a fixed-size filter, which pays nothing for growth, set `max_capacity` to the
    /// capacity.
    ///
    /// # Examples
    ///
    /// ```
    /// use cuckoo_gate::{CuckooFilter, InsertError};
    ///
    /// let fixed = CuckooFilter::builder().capacity(100).max_capacity(100).build()?;
    /// let outcome = (0..1_000u32).try_for_each(|i| fixed.insert(&i));
    /// assert_eq!(outcome, Err(InsertError::Full));
    ///
    /// let growing = CuckooFilter::builder().capacity(100).max_capacity(400).build()?;
    /// (0..300u32).try_for_each(|i| growing.insert(&i))?;
    /// assert!((0..300u32).all(|i| growing.contains(&i)));
    /// assert_eq!(growing.stats().doublings, 2);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn max_capacity(mut self, items: usize) -> Self {
        self.max_capacity = Some(items);
        self
    }

    /// Target false-positive rate ε, strictly between 0 and 1 and at least about 1.9e-9
    /// (31-bit fingerprints). Default [`DEFAULT_FALSE_POSITIVE_RATE`]. The slot width is the
    /// smallest that meets ε even at 100% load.
    pub fn false_positive_rate(mut self, epsilon: f64) -> Self {
        self.false_positive_rate = epsilon;
        self
    }

    /// Fixes the hash seed, making placement (and so false positives) reproducible. By
    /// default every filter draws a random seed, so nobody can precompute keys that collide.
    pub fn seed(mut self, seed: u64) -> Self {
        self.seed = Some(seed);
        self
    }

    /// Number of lock stripes, a power of two, at most 1024 or one per 16 buckets of the
    /// largest table the filter may grow to, whichever is more. By default up to 1024,
    /// fewer for tables too small to use them. More stripes let more writers proceed at
    /// once; a stripe costs 32 bytes.
    pub fn stripes(mut self, stripes: usize) -> Self {
        self.stripes = Some(stripes);
        self
    }

    /// Registers this filter's metrics (feature `metrics`) under the label
    /// `name="<name>"`; publish them with [`CuckooFilter::publish_metrics`].
    #[cfg(feature = "metrics")]
    pub fn metrics_name(mut self, name: impl Into<String>) -> Self {
        self.metrics_name = Some(name.into());
        self
    }

    /// Builds the filter.
    ///
    /// # Errors
    ///
    /// A [`BuildError`] naming the setting to change: ε outside (0, 1) or below the
    /// smallest supported value, zero capacity, a table too large to address or allocate,
    /// or a stripe count that is not a power of two or more than the table can use.
    ///
    /// # Examples
    ///
    /// ```
    /// use cuckoo_gate::{BuildError, CuckooFilter};
    ///
    /// let bad = CuckooFilter::builder().capacity(10).false_positive_rate(1.5).build();
    /// assert!(matches!(bad, Err(BuildError::InvalidFalsePositiveRate { .. })));
    /// assert_eq!(CuckooFilter::builder().build().unwrap_err(), BuildError::ZeroCapacity);
    /// ```
    pub fn build(self) -> Result<CuckooFilter, BuildError> {
        let eps = self.false_positive_rate;
        if !(eps > 0.0 && eps < 1.0) {
            return Err(BuildError::InvalidFalsePositiveRate { requested: eps });
        }
        let fingerprint_bits =
            Geometry::fingerprint_bits_for(eps).ok_or(BuildError::FalsePositiveRateTooSmall {
                requested: eps,
                smallest: Geometry::fpr_at(MAX_FINGERPRINT_BITS, 1.0),
            })?;
        if self.capacity == 0 {
            return Err(BuildError::ZeroCapacity);
        }
        let too_large = BuildError::CapacityTooLarge { capacity: self.capacity };
        let buckets = buckets_for(self.capacity).ok_or(too_large.clone())?;
        let stripes = match self.stripes {
            Some(s) if s.is_power_of_two() => Some(s),
            Some(s) => return Err(BuildError::InvalidStripes { stripes: s, most: None }),
            None => None,
        };
        let most = MAX_SLOT_BITS - 1 - fingerprint_bits;
        // Whether a table of this many doublings could be addressed at all.
        let fits = |doublings: u32| {
            let geometry = Geometry::new(buckets, fingerprint_bits, doublings);
            (0..doublings)
                .try_fold(geometry, |g, _| g.buckets().checked_mul(2).map(|_| g.doubled()))
                .and_then(|largest| {
                    let stripes = stripes.unwrap_or_else(|| default_stripes(largest.buckets()));
                    table_bytes(largest, stripes).filter(|&bytes| bytes <= isize::MAX as usize)
                })
        };
        let doublings = match self.max_capacity {
            None => (0..=DEFAULT_DOUBLINGS.min(most)).rev().find(|&d| fits(d).is_some()).unwrap_or(0),
            Some(max) if max < self.capacity => {
                return Err(BuildError::MaxCapacityBelowCapacity {
                    capacity: self.capacity,
                    max_capacity: max,
                });
            }
            Some(max) => {
                let doublings = (max / self.capacity).ilog2();
                if doublings > most {
                    return Err(BuildError::TooManyDoublings { doublings, most });
                }
                if fits(doublings).is_none() {
                    return Err(BuildError::CapacityTooLarge { capacity: max });
                }
                doublings
            }
        };
        let geometry = Geometry::new(buckets, fingerprint_bits, doublings);
        if let Some(s) = stripes {
            let most = max_stripes(buckets << doublings);
            if s > most {
                return Err(BuildError::InvalidStripes { stripes: s, most: Some(most) });
            }
        }
        let initial_stripes = stripes.unwrap_or_else(|| default_stripes(buckets));
        let bytes = table_bytes(geometry, initial_stripes).ok_or(too_large.clone())?;
        if bytes > isize::MAX as usize {
            return Err(too_large);
        }
        let tables =
            AnyTable::new(geometry, initial_stripes).map_err(|()| BuildError::OutOfMemory { bytes })?;
        let seed = self.seed.unwrap_or_else(random_seed);
        #[allow(unused_mut)]
        let mut filter = CuckooFilter::from_parts(tables, stripes, eps, seed);
        #[cfg(feature = "metrics")]
        if let Some(name) = &self.metrics_name {
            filter.metrics = Some(super::metrics::FilterMetrics::new(name));
        }
        Ok(filter)
    }
}

/// A seed from ahash's per-process random source and a per-call counter.
pub(crate) fn random_seed() -> u64 {
    ahash::RandomState::new().hash_one(0x5eed_u64)
}
