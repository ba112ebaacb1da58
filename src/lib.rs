//! # cuckoo-gate
//!
//! A concurrent cuckoo filter with lock-free lookups ([`CuckooFilter`]), and the cache
//! admission machinery built on it: a "seen-before" gate ([`SeenBefore`]) and a sharded
//! cache ([`AdmissionCache`]) whose admission policy is S3-FIFO by default, or
//! `SecondHit`, which admits a key once the gate has seen it before. Web services and CDN
//! nodes use it to keep one-hit wonders out of their caches.
//!
//! ```
//! use cuckoo_gate::CuckooFilter;
//!
//! let filter = CuckooFilter::builder()
//!     .capacity(1_000_000)        // expected number of items
//!     .false_positive_rate(0.001) // 0.1%
//!     .build()?;
//! filter.insert(&"https://example.com/a.png")?;
//! assert!(filter.contains(&"https://example.com/a.png"));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! ## The algorithm
//!
//! A table of `B` buckets of 4 slots; each slot holds an `f`-bit fingerprint of a key plus
//! one *choice bit*, or 0 for empty. A key hashes (ahash, randomly seeded per filter) to a
//! first bucket `i1` (by multiply-shift range reduction, so `B` is any number, not a power
//! of two) and a fingerprint `fp`; its second bucket is `i2 = (i1 + 1 + off(fp)) mod B`.
//! The choice bit records which of the two a fingerprint sits in, so its other bucket can
//! be computed from the slot alone (Schmitz et al., "Smaller and More Flexible Cuckoo
//! Filters", 2025, section 3.1). Memory is therefore proportional to capacity for every
//! capacity, unlike the power-of-two tables of the original cuckoo filter (Fan et al.,
//! 2014), which can nearly double it.
//!
//! Slots are bit-packed across 64-bit atomic words with no padding (a 12-bit slot costs
//! 12 bits), and a bucket is searched bit-parallel: all four slots are compared to the
//! fingerprint with a handful of word operations.
//!
//! [`Layout::Windows`] replaces the buckets by overlapping *windows* of 2 slots (section
//! 3.2 of the same paper): a slot also records its offset in its window, a lookup
//! compares 4 slots instead of 8, and the fingerprint can be two bits shorter for the same
//! ε, one bit per item less in all. An entry can then also move to the other slot of its
//! own window. Windows never span a stripe group, and windowed filters do not grow.
//!
//! An insert takes a free slot in either bucket. When both are full it searches breadth-
//! first for a *cuckoo path* (a chain of fingerprints, each movable to its other bucket,
//! ending at a free slot) without moving anything, then moves the fingerprints from the
//! end of the path backwards, each copied to its destination before its source is cleared.
//! If no path exists within the search budget the filter doubles (see Growth), or, at its
//! `max_capacity`, the insert fails and nothing is lost.
//!
//! ## Growth
//!
//! By default a filter may double 4 times (to 16x its capacity); set
//! [`FilterBuilder::max_capacity`] to change that, or to the capacity for a fixed-size
//! filter. A doubling is a *split*: each entry keeps one hash bit per allowed doubling
//! (in a side array that only writers read), and bucket `j` of the old table becomes
//! buckets `2j` and `2j + 1` of the new one, the kept bit choosing. Lookups still read two
//! buckets of fingerprints as compact as a fixed-size filter's, and the false-positive
//! rate stays at ε however far the filter grows, at one side bit per slot per doubling
//! still allowed. The grower freezes the old table stripe by stripe (writers then wait for
//! the new table; readers keep reading the frozen one), splits it into the new table,
//! publishes it with an atomic pointer swap, and retires the old one: it stays allocated
//! while the filter lives (on Linux its pages go back to the OS), so a lookup that loaded
//! the old pointer reads valid memory, and it checks the pointer again after reading.
//!
//! ## Consistency model
//!
//! * Buckets are grouped into lock *stripes*, each with a version word used as a seqlock.
//!   Writers lock the (at most two) stripes they touch, in index order.
//! * Lookups take no lock and write no shared memory: they read one stamp, that of the
//!   key's fingerprint class (`fp mod stripes`), then the first bucket and, if it does not
//!   match, the second. A match is answered at once (a writer stored it; a read torn by a
//!   concurrent write can at worst add a false positive). A miss re-checks the one stamp
//!   and retries if a relocation of an entry of that class (or a `clear`) intervened:
//!   only a move can hide a present key, and every relocation marks its entry's class
//!   before and after the move, so inserts and removes never make a lookup retry. After
//!   16 failed tries the lookup locks both buckets' stripes, so it cannot starve.
//!   (`count` validates both buckets' stripe versions, which every write changes.)
//! * Every stored fingerprint is, at every instant, in one of its two buckets (or
//!   windows), and every move happens in one lock hold over its source and destination.
//!   Hence **a lookup for a key that was inserted and not removed never misses**,
//!   whatever runs concurrently. A miss is linearizable (a match may be a torn read's
//!   false positive); `len()` sums per-stripe counters and is not.
//! * `insert_unique` checks and inserts in one lock hold: of threads racing on one new
//!   key, exactly one is told it inserted. In the bucket layout the hold is of the first
//!   bucket's stripe alone when the key goes there: every write that could store, move
//!   or remove the key's entry in its second bucket holds that stripe too, so the look
//!   into the second bucket is exact for absence (a match there is checked again under
//!   both stripes).
//! * Across a doubling: every write completes either in the old table before its stripes
//!   freeze (and so is copied) or in the new table after it is published; a lookup reads
//!   whichever table it loaded, both hold every key present when it started, and a lookup
//!   whose table was retired while it read it (its pages may read as zero) reads again
//!   from the new one.
//! * A snapshot ([`CuckooFilter::snapshot`]) freezes the table as a doubling does, copies
//!   it and thaws it: it holds the contents of one instant, lookups never block, and
//!   writers pause for the copy (not the I/O).
//! * The only `unsafe` code is in `src/filter/current.rs` (following the table pointer,
//!   freeing the tables on drop), three unchecked accessors in `src/filter/table.rs`
//!   (`Table::word`: a bucket's words, read and written, in range by the table's padding;
//!   `Table::stripe_at` and `Table::stamp_of`: a stripe or a fingerprint class's stamp, in
//!   range by its mask),
//!   three hints in `src/primitive.rs` (the prefetch, used by lookups, `contains_batch`,
//!   inserts, `insert_batch` and the cache; the request for huge pages on Linux; the
//!   release of a retired table's pages), one SSE2 compare in
//!   `src/filter/bucket.rs` (the cache's ghosts search eight 16-bit lanes at once) and the
//!   cache shards' reader-writer lock in `src/cache/lock.rs` (handing out the shard under
//!   it, with the cell accessors it uses in `src/primitive.rs`); each block has its safety
//!   argument.
//!
//! These claims are model-checked with loom (`tests/loom.rs`, including deliberately
//! broken variants that loom must catch) and stress-tested (`tests/stress.rs`).
//!
//! ## The gate and the cache
//!
//! [`SeenBefore::check_and_record`] answers "seen before?" and records the key in one
//! atomic step (an `insert_unique` into the current generation). Two generations of
//! filters rotate after `capacity` recordings, so the gate's memory is bounded and keys
//! age out. [`AdmissionCache`] is a sharded cache (per shard: a hash table over a slab of
//! entries and two FIFO queues, behind a reader-writer lock whose readers take it with one
//! `fetch_add`) whose misses are offered to
//! an [`AdmissionPolicy`]: `S3Fifo` (the default: S3-FIFO, whose ghost queue is a
//! gate cut down for one shard, two generations of 16-bit fingerprints written under the
//! shard's lock; a hit only bumps a counter under the read lock; the shards share one
//! adaptive split between the queues), `S3FifoLfu` (S3-FIFO with a frequency sketch at
//! main's door: a returning ghost enters main only if it was asked for more often than
//! main's next victim, give or take a recency credit the climber learns; the sketch is
//! fed from misses on ghosts and from the entries' own counters, so a hit costs the
//! same), `SecondHit` (admit on
//! the second request, asking the shared gate) or `Always` (an exact LRU per shard). Each
//! operation hashes its key once, and the hash serves the shard, its table and the gate.
//!
//! [`AdmissionCache::get_or_insert_with`] and its fallible and async forms coalesce
//! loading: of the callers that miss on one key at a time, one runs its loader and the
//! others wait for its value (parked, or woken through their `Waker`); a loader that fails,
//! panics or is dropped hands the load to the longest waiter. Loads in flight live in a
//! map beside the shards, so a hit is a plain `get` (the states and their transitions are
//! tabulated in `src/cache/load.rs`).
//!
//! ## Snapshots
//!
//! [`CuckooFilter::snapshot`] and [`SeenBefore::snapshot`] write a versioned,
//! checksummed, little-endian image (format in the [`snapshot`] module); `restore` reads
//! it back on any machine whose build hashes the same, so a restarted CDN node keeps its
//! "seen-before" history. Restoring untrusted bytes returns a [`SnapshotError`], never
//! panics, and allocates only as the stream delivers data (`fuzz/` fuzzes it).
//!
//! ## Features and their costs
//!
//! What each feature costs in memory and time is tabulated in the README, section "What
//! each feature costs".
#![warn(missing_docs, unsafe_op_in_unsafe_fn, unreachable_pub)]
#![deny(unsafe_code)]

mod broken;
mod cache;
mod error;
mod filter;
#[cfg(feature = "foyer")]
pub mod foyer;
mod gate;
mod hashing;
#[cfg(feature = "metrics")]
mod metrics;
#[cfg(feature = "pingora")]
pub mod pingora;
mod primitive;
#[cfg(any(feature = "foyer", feature = "pingora"))]
mod sightings;
pub mod snapshot;

pub use cache::{
    Admission, AdmissionCache, AdmissionCacheBuilder, AdmissionPolicy, CacheStats, Clock, Computed, Entry,
    Lifetime, ManualClock, Op, Reload, RemovalCause, Tracked, ASSUMED_MEAN_WEIGHT, DEFAULT_GATE_MULTIPLIER,
    MAX_ASSUMED_ENTRIES, MAX_SHARDS,
};
#[cfg(feature = "serde")]
pub use cache::{Restored, Saved};
pub use error::{BuildError, InsertBatchError, InsertError};
pub use filter::{
    CuckooFilter, FilterBuilder, FilterStats, Layout, BATCH, DEFAULT_DOUBLINGS, DEFAULT_FALSE_POSITIVE_RATE,
};
pub use gate::{GateStats, SeenBefore, SeenBeforeBuilder, DEFAULT_GATE_FALSE_POSITIVE_RATE};
pub use snapshot::SnapshotError;

/// The README's examples, compiled and run as doc tests.
#[doc = include_str!("../README.md")]
#[cfg(doctest)]
pub struct ReadmeDoctests;
