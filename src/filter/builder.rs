//! [`FilterBuilder`]: validates a configuration and sizes the table.

use super::bucket::{GROUP_SLOTS, SLOTS};
use super::hash::{Geometry, Layout};
use super::stripe::{MoveStamp, Stripe};
use super::table::table_bytes;
use super::{AnyTable, CuckooFilter};
use crate::error::BuildError;

/// False-positive rate used by [`CuckooFilter::with_capacity`] and by a builder that is
/// not given one: 0.1%, which takes 13-bit slots.
pub const DEFAULT_FALSE_POSITIVE_RATE: f64 = 0.001;

/// The table is sized so that `capacity` items fill it to this load, in thousandths.
/// (2,4) cuckoo tables reach about 96–97% before the first failed insert; windowed tables
/// about 95–96% (their threshold is 96.5%, and the search gets less close to it).
pub(crate) const fn target_load_permille(layout: Layout) -> u128 {
    match layout {
        Layout::Buckets => 950,
        Layout::Windows => 945,
    }
}

/// Most stripes chosen by default: enough that writers on a few dozen cores rarely meet,
/// and few enough (32 KiB) that the stamps stay in cache.
pub(crate) const DEFAULT_MAX_STRIPES: usize = 1024;

/// Doublings allowed when no `max_capacity` is given (16 times the capacity), at one
/// bit per slot per doubling still allowed (fewer if a slot would exceed 32 bits).
pub const DEFAULT_DOUBLINGS: u32 = 4;

/// The default stripe count for a table of this shape: one per group, up to
/// [`DEFAULT_MAX_STRIPES`]. A windowed filter is chosen for its size, so its stripes take
/// at most 1/128 of its table (256 stripes for a million items at 1%).
pub(crate) fn default_stripes(geometry: Geometry) -> usize {
    let stripes = geometry.slots().div_ceil(GROUP_SLOTS).next_power_of_two().min(DEFAULT_MAX_STRIPES);
    match geometry.layout() {
        Layout::Buckets => stripes,
        Layout::Windows => {
            let table_bytes = geometry.slots().saturating_mul(geometry.slot_bits() as usize) / 8;
            let most = table_bytes / 128 / (std::mem::size_of::<Stripe>() + std::mem::size_of::<MoveStamp>());
            stripes.min(1 << most.max(1).ilog2())
        }
    }
}

/// Most stripes a filter whose largest table has `slots` slots may have: one per group of
/// that table (more would never be used), or [`DEFAULT_MAX_STRIPES`] if larger. The
/// builder and `restore` both hold to it, so every filter built can be restored.
pub(crate) fn max_stripes(slots: usize) -> usize {
    slots.div_ceil(GROUP_SLOTS).checked_next_power_of_two().unwrap_or(usize::MAX).max(DEFAULT_MAX_STRIPES)
}

/// Buckets (or windows) of a table built for `capacity` items (at least 2), or `None` if
/// the count overflows `usize`.
pub(crate) fn buckets_for(layout: Layout, capacity: usize) -> Option<usize> {
    let slots = (capacity as u128 * 1000).div_ceil(target_load_permille(layout));
    let buckets = match layout {
        Layout::Buckets => slots.div_ceil(SLOTS as u128),
        // Whole groups of 64 slots; a window is numbered by its first slot.
        Layout::Windows => slots.div_ceil(GROUP_SLOTS as u128) * GROUP_SLOTS as u128,
    };
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
    layout: Layout,
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
            layout: Layout::Buckets,
            #[cfg(feature = "metrics")]
            metrics_name: None,
        }
    }
}

impl FilterBuilder {
    /// Expected number of items (required, at least 1). The table gets enough slots to hold
    /// this many at 95% load (94.5% for [`Layout::Windows`]).
    ///
    /// # Examples
    ///
    /// ```
    /// let filter = cuckoo_gate::CuckooFilter::builder().capacity(10_000).build()?;
    /// assert!(filter.capacity() >= 10_000);
    /// # Ok::<(), cuckoo_gate::BuildError>(())
    /// ```
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
    ///
    /// # Examples
    ///
    /// ```
    /// let filter = cuckoo_gate::CuckooFilter::builder().capacity(1_000).false_positive_rate(0.01).build()?;
    /// assert_eq!(filter.false_positive_rate(), 0.01);
    /// assert!(filter.stats().estimated_false_positive_rate <= 0.01);
    /// # Ok::<(), cuckoo_gate::BuildError>(())
    /// ```
    pub fn false_positive_rate(mut self, epsilon: f64) -> Self {
        self.false_positive_rate = epsilon;
        self
    }

    /// Fixes the hash seed, making placement (and so false positives) reproducible. By
    /// default every filter draws a random seed, so nobody can precompute keys that collide.
    ///
    /// # Examples
    ///
    /// ```
    /// let build = || cuckoo_gate::CuckooFilter::builder().capacity(1_000).seed(7).build();
    /// let (a, b) = (build()?, build()?);
    /// a.insert("k")?;
    /// b.insert("k")?;
    /// assert!((0..100_000u32).all(|i| a.contains(&i) == b.contains(&i))); // same false positives
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn seed(mut self, seed: u64) -> Self {
        self.seed = Some(seed);
        self
    }

    /// How the table arranges its slots. [`Layout::Buckets`] (the default) can double;
    /// [`Layout::Windows`] is fixed-size and about one bit per item smaller at the same
    /// false-positive rate (12 bits per slot at the default 0.1%, against 13), for about
    /// 20% more instructions per lookup and slower inserts near full (`cargo run --release
    /// --example space_accuracy` and `filter_report -- --throughput` measure both). A
    /// windowed filter holds at least `capacity` items, then reports
    /// [`InsertError::Full`](crate::InsertError::Full); a `max_capacity` above twice the
    /// capacity is an error, as it cannot grow.
    ///
    /// # Examples
    ///
    /// ```
    /// use cuckoo_gate::{CuckooFilter, Layout};
    ///
    /// let windows = CuckooFilter::builder().capacity(100_000).layout(Layout::Windows).build()?;
    /// let buckets = CuckooFilter::builder().capacity(100_000).max_capacity(100_000).build()?;
    /// assert!(windows.memory_usage() < buckets.memory_usage());
    /// (0..100_000u32).try_for_each(|i| windows.insert(&i))?;
    /// assert!((0..100_000u32).all(|i| windows.contains(&i)));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn layout(mut self, layout: Layout) -> Self {
        self.layout = layout;
        self
    }

    /// Number of lock stripes, a power of two, at most 1024 or one per 64 slots of the
    /// largest table the filter may grow to, whichever is more. By default up to 1024,
    /// fewer for tables too small to use them. More stripes let more writers proceed at
    /// once; a stripe costs 32 bytes.
    ///
    /// # Examples
    ///
    /// ```
    /// use cuckoo_gate::{BuildError, CuckooFilter};
    ///
    /// let filter = CuckooFilter::builder().capacity(100_000).stripes(2048).build()?;
    /// assert_eq!(filter.stats().stripes, 2048);
    /// let odd = CuckooFilter::builder().capacity(100_000).stripes(1000).build();
    /// assert!(matches!(odd, Err(BuildError::InvalidStripes { .. })));
    /// # Ok::<(), BuildError>(())
    /// ```
    pub fn stripes(mut self, stripes: usize) -> Self {
        self.stripes = Some(stripes);
        self
    }

    /// Publishes this filter's metrics (feature `metrics`) under the label
    /// `name="<name>"`, each time [`CuckooFilter::publish_metrics`] is called, to the
    /// recorder installed then. One live filter holds a name at a time
    /// ([`BuildError::MetricsNameTaken`](crate::BuildError::MetricsNameTaken) otherwise).
    ///
    /// # Examples
    ///
    /// ```
    /// let recorder = metrics_util::debugging::DebuggingRecorder::new(); // or a Prometheus exporter
    /// let filter = cuckoo_gate::CuckooFilter::builder().capacity(100).metrics_name("visitors").build()?;
    /// metrics::with_local_recorder(&recorder, || filter.publish_metrics());
    /// assert_eq!(recorder.snapshotter().snapshot().into_vec().len(), 11); // the filter's series
    /// # Ok::<(), cuckoo_gate::BuildError>(())
    /// ```
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
    /// a stripe count that is not a power of two or more than the table can use, room to
    /// grow for a windowed filter, or a `metrics_name` a live filter publishes under.
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
        let layout = self.layout;
        let fingerprint_bits =
            Geometry::fingerprint_bits_for(layout, eps).ok_or(BuildError::FalsePositiveRateTooSmall {
                requested: eps,
                smallest: Geometry::fpr_at(layout, layout.max_fingerprint_bits(), 1.0),
            })?;
        if self.capacity == 0 {
            return Err(BuildError::ZeroCapacity);
        }
        let too_large = BuildError::CapacityTooLarge { capacity: self.capacity };
        let buckets = buckets_for(layout, self.capacity).ok_or(too_large.clone())?;
        let stripes = match self.stripes {
            Some(s) if s.is_power_of_two() => Some(s),
            Some(s) => return Err(BuildError::InvalidStripes { stripes: s, most: None }),
            None => None,
        };
        let most = layout.max_fingerprint_bits() - fingerprint_bits;
        // Whether a table of this many doublings could be addressed at all.
        let fits = |doublings: u32| {
            let geometry = Geometry::new(layout, buckets, fingerprint_bits, doublings);
            (0..doublings)
                .try_fold(geometry, |g, _| g.buckets().checked_mul(2).map(|_| g.doubled()))
                .and_then(|largest| {
                    let stripes = stripes.unwrap_or_else(|| default_stripes(largest));
                    table_bytes(largest, stripes).filter(|&bytes| bytes <= isize::MAX as usize)
                })
        };
        let doublings = match self.max_capacity {
            Some(max) if max < self.capacity => {
                return Err(BuildError::MaxCapacityBelowCapacity {
                    capacity: self.capacity,
                    max_capacity: max,
                });
            }
            Some(max) if layout == Layout::Windows && max / self.capacity >= 2 => {
                return Err(BuildError::WindowsCannotGrow { capacity: self.capacity, max_capacity: max });
            }
            None | Some(_) if layout == Layout::Windows => {
                fits(0).ok_or(too_large.clone())?;
                0
            }
            None => (0..=DEFAULT_DOUBLINGS.min(most)).rev().find(|&d| fits(d).is_some()).unwrap_or(0),
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
        let geometry = Geometry::new(layout, buckets, fingerprint_bits, doublings);
        if let Some(s) = stripes {
            let most = max_stripes(geometry.slots() << doublings);
            if s > most {
                return Err(BuildError::InvalidStripes { stripes: s, most: Some(most) });
            }
        }
        let initial_stripes = stripes.unwrap_or_else(|| default_stripes(geometry));
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
            filter.metrics = Some(super::metrics::FilterMetrics::new(name)?);
        }
        Ok(filter)
    }
}

/// A seed from ahash's per-process random source and a per-call counter.
pub(crate) fn random_seed() -> u64 {
    ahash::RandomState::new().hash_one(0x5eed_u64)
}
