//! Saving a filter to bytes and restoring it (the format is in `crate::snapshot`).
//!
//! A snapshot is consistent: it holds exactly the filter's contents at one instant, even
//! while other threads write. It takes the growth lock (so no doubling runs), freezes the
//! table stripe by stripe as a doubling does (waiting for the writer of each stripe to
//! finish), copies the words, and thaws the stripes. Readers never block: a frozen stripe
//! is stable and even, so lookups keep succeeding optimistically. Writers that meet a
//! frozen stripe wait for the growth lock and redo their operation afterwards, so they
//! pause for the copy (`examples/snapshot.rs` measures the pause), not for the encoding
//! and the I/O, which run after the thaw.

use std::io::{Read, Write};

use super::builder::max_stripes;
use super::hash::{Geometry, Layout};
use super::table::{image_word_count, Totals};
use super::{AnyTable, CuckooFilter};
use crate::broken;
use crate::primitive::Ordering;
use crate::snapshot::{Decoder, Encoder, Kind, SnapshotError, HASH_CHECK_KEY};

/// The hasher identity written to snapshots: ahash 0.8's `RandomState::with_seeds`, with
/// the seeds derived from the filter's seed as in `CuckooFilter::from_parts`.
const AHASH_SEEDED: u32 = 1;

/// The table as one snapshot saw it.
struct Image {
    geometry: Geometry,
    stripes: usize,
    totals: Totals,
    words: Vec<u64>,
}

impl CuckooFilter {
    /// Writes a snapshot of the filter to `writer`; [`CuckooFilter::restore`] reads it back.
    ///
    /// The snapshot holds the filter's contents at one instant, also while other threads
    /// write. Lookups never block meanwhile; writers pause while the table is copied to
    /// memory (a copy the size of [`memory_usage`](Self::memory_usage), freed on return),
    /// and not while it is written out. A doubling waits for the snapshot, and the reverse.
    /// The format is little-endian and documented in the [`snapshot`](crate::snapshot) module;
    /// metrics registrations are not part of it.
    ///
    /// # Errors
    ///
    /// Whatever `writer` returns.
    ///
    /// # Examples
    ///
    /// ```
    /// use cuckoo_gate::CuckooFilter;
    ///
    /// let filter = CuckooFilter::with_capacity(1_000);
    /// filter.insert("warm key").unwrap();
    /// let mut bytes = Vec::new();
    /// filter.snapshot(&mut bytes)?;
    ///
    /// let restored = CuckooFilter::restore(&mut bytes.as_slice()).unwrap();
    /// assert!(restored.contains("warm key"));
    /// assert_eq!(restored.len(), 1);
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn snapshot<W: Write + ?Sized>(&self, writer: &mut W) -> std::io::Result<()> {
        let image = self.image();
        let geometry = image.geometry;
        let mut e = Encoder::new(writer, Kind::Filter)?;
        e.u32(AHASH_SEEDED)?;
        e.u64(self.seed)?;
        e.u64(self.hash(&HASH_CHECK_KEY))?;
        e.f64(self.false_positive_rate)?;
        // Each at most 32: see `Geometry::new`.
        e.u8(geometry.fingerprint_bits() as u8)?;
        e.u8(geometry.extension_bits() as u8)?;
        e.u8(geometry.level() as u8)?;
        e.u8(match geometry.layout() {
            Layout::Buckets => 0,
            Layout::Windows => 1,
        })?;
        e.usize(geometry.base_buckets())?;
        e.usize(self.stripes.unwrap_or(0))?;
        e.usize(image.stripes)?;
        e.usize(image.totals.items)?;
        e.u64(image.totals.removes)?;
        e.u64(image.totals.relocations)?;
        e.u64(self.failed_inserts.load(Ordering::Relaxed))?;
        e.usize(image.words.len())?;
        e.words(&image.words)?;
        e.finish()
    }

    /// Copies the current table at one instant: freezes it under the growth lock, copies,
    /// thaws (see the module docs).
    fn image(&self) -> Image {
        let _no_doubling = self.growth.lock();
        self.current.with(|tables| {
            with_table!(tables, t => {
                let freeze = !broken::SNAPSHOT_UNFROZEN;
                if freeze {
                    t.freeze();
                }
                let image = Image {
                    geometry: *t.geometry(),
                    stripes: t.stripe_count(),
                    totals: t.totals(),
                    words: t.image(),
                };
                if freeze {
                    t.thaw();
                }
                image
            })
        })
    }

    /// Reads a filter written by [`CuckooFilter::snapshot`], which answers every lookup as
    /// the snapshotted filter did and keeps its configuration (false-positive rate, seed,
    /// growth allowance and the doublings done) and counters. Reads exactly the snapshot's
    /// bytes, so several snapshots can follow each other in one stream.
    ///
    /// Untrusted input is safe: memory is allocated only as the stream delivers the table,
    /// and the result is checked as the [`snapshot`](crate::snapshot) module describes. The restored table
    /// and the bytes read are both held briefly, so restoring takes about twice the
    /// filter's memory at its peak.
    ///
    /// # Errors
    ///
    /// A [`SnapshotError`] saying what is wrong: the stream failed or ended early, the
    /// bytes are not a filter snapshot of a supported version, the checksum or a field is
    /// wrong, this build hashes differently, or the allocator refused the table.
    ///
    /// # Examples
    ///
    /// ```
    /// use cuckoo_gate::{CuckooFilter, SnapshotError};
    ///
    /// let filter = CuckooFilter::builder().capacity(100).seed(7).build()?;
    /// filter.insert(&42u64)?;
    /// let mut bytes = Vec::new();
    /// filter.snapshot(&mut bytes)?;
    ///
    /// bytes[40] ^= 1; // one flipped bit
    /// assert!(CuckooFilter::restore(&mut bytes.as_slice()).is_err());
    /// bytes[40] ^= 1;
    /// let restored = CuckooFilter::restore(&mut bytes.as_slice())?;
    /// assert!(restored.contains(&42u64));
    /// assert_eq!(restored.seed(), 7);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn restore<R: Read + ?Sized>(reader: &mut R) -> Result<CuckooFilter, SnapshotError> {
        let mut d = Decoder::new(reader, Kind::Filter)?;
        let hasher = d.u32()?;
        let seed = d.u64()?;
        let hash_check = d.u64()?;
        let false_positive_rate = d.f64()?;
        let (fingerprint_bits, extension_bits, level) = (d.u8()?, d.u8()?, d.u8()?);
        let layout = match (d.u8()?, d.version()) {
            (0, _) => Some(Layout::Buckets),
            (1, 3..) => Some(Layout::Windows),
            _ => None,
        };
        let base_buckets = d.usize("bucket count")?;
        let configured_stripes = d.usize("stripe count")?;
        let stripes = d.usize("stripe count")?;
        let items = d.usize("fingerprint count")?;
        let totals = Totals { items, removes: d.u64()?, relocations: d.u64()? };
        let failed_inserts = d.u64()?;
        let words = d.usize("word count")?;
        // What must hold before the table is read: its size follows from the geometry.
        let layout = layout.ok_or(SnapshotError::inconsistent("unknown layout"))?;
        let geometry = Geometry::restored(
            layout,
            base_buckets,
            fingerprint_bits.into(),
            extension_bits.into(),
            level.into(),
        )
        .ok_or(SnapshotError::inconsistent("impossible table geometry"))?;
        if image_word_count(geometry) != Some(words) {
            return Err(SnapshotError::inconsistent("word count does not match the geometry"));
        }
        let words = d.words(words)?;
        d.finish()?;

        // The checksum holds: what remains is a snapshot this crate could not have written.
        if hasher != AHASH_SEEDED {
            return Err(SnapshotError::HasherMismatch);
        }
        if !(false_positive_rate > 0.0 && false_positive_rate < 1.0)
            || Geometry::fingerprint_bits_for(layout, false_positive_rate)
                != Some(geometry.fingerprint_bits())
        {
            return Err(SnapshotError::inconsistent(
                "false-positive rate does not match the fingerprint width",
            ));
        }
        // The builder's bound (so a corrupt count cannot allocate much either).
        let largest = geometry.slots().checked_shl(geometry.doublings_left()).unwrap_or(usize::MAX);
        if !stripes.is_power_of_two() || stripes > max_stripes(largest) {
            return Err(SnapshotError::inconsistent("stripe count"));
        }
        if configured_stripes != 0 && configured_stripes != stripes {
            return Err(SnapshotError::inconsistent("configured stripe count differs from the table's"));
        }
        // A stripe count is a choice of concurrency, not part of the contents: the table is
        // restored with at most as many as its own size would get (the snapshot's count
        // stays the one its growth asks for), so that a few bytes of header cannot make
        // restore allocate more than the table they describe.
        let tables = AnyTable::from_image(geometry, stripes.min(max_stripes(geometry.slots())), &words)?;
        drop(words);
        with_table!(&tables, t => t.carry_counters(totals));
        let filter = CuckooFilter::from_parts(
            tables,
            (configured_stripes != 0).then_some(configured_stripes),
            false_positive_rate,
            seed,
        );
        if filter.hash(&HASH_CHECK_KEY) != hash_check {
            return Err(SnapshotError::HasherMismatch);
        }
        if filter.len() != totals.items {
            return Err(SnapshotError::inconsistent("fingerprint count differs from the table's"));
        }
        filter.failed_inserts.store(failed_inserts, Ordering::Relaxed);
        Ok(filter)
    }
}
