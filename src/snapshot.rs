//! Snapshots: the byte format shared by [`CuckooFilter::snapshot`] and
//! [`SeenBefore::snapshot`], and the checked reader and writer that produce it.
//!
//! # Format (version 6)
//!
//! Every integer is little-endian. A snapshot starts with a 12-byte header:
//!
//! | bytes | field |
//! |---|---|
//! | 8 | magic `CKOOGATE` |
//! | 2 | format version, 6 (2 to 5 are read too) |
//! | 2 | kind: 1 = `CuckooFilter`, 2 = `SeenBefore` |
//!
//! A **filter** snapshot continues with:
//!
//! | bytes | field |
//! |---|---|
//! | 4 | hasher identity: 1 = ahash 0.8 `RandomState::with_seeds`, seeds derived from the seed |
//! | 8 | hash seed |
//! | 8 | hash check: the filter's hash of the `u64` [`HASH_CHECK_KEY`] |
//! | 8 | false-positive rate ε (`f64` bits) |
//! | 1 | fingerprint bits `f` |
//! | 1 | extension bits `E` (doublings allowed when built) |
//! | 1 | level `L` (doublings done) |
//! | 1 | layout: 0 = buckets of 4, 1 = windows of 2 (version 2: always 0) |
//! | 8 | buckets (windows) when built, `B0` (the table has `B0 * 2^L`) |
//! | 8 | stripes set in the builder, 0 for the default |
//! | 8 | stripes of the table |
//! | 8 | stored fingerprints |
//! | 8 | removals so far |
//! | 8 | relocations so far |
//! | 8 | failed inserts so far |
//! | 8 | word count `W` |
//! | 8 W | the table's words: slot `j` is bits `[j * s, (j + 1) * s)` of the little-endian bit string they form, `s = f + E - L + 1` for buckets (spent extension bits are not stored), `f + 2` for windows; followed by two zero words |
//! | 4 | CRC-32 (IEEE) of every byte before it, header included |
//!
//! A **gate** snapshot continues with the gate's capacity (8), recordings in the current
//! generation (8), rotations (8) and the current generation's index (1), then its two
//! filters as two complete filter snapshots, then a CRC-32 of every byte before it.
//!
//! A **cache** snapshot (kind 3, `AdmissionCache::save`, feature `serde`) is laid out in
//! `src/cache/persist.rs`: its entries go through serde, encoded with postcard, inside
//! this framing.
//!
//! The hash check makes the hasher identity exact: ahash computes different hashes on
//! builds with and without AES instructions, so a snapshot restores only where the same
//! seed gives the same hash, and [`SnapshotError::HasherMismatch`] says so otherwise.
//!
//! # Reading untrusted bytes
//!
//! Restoring checks every field before it is used, reads the table in chunks (so a
//! corrupt word count can make it read at most what the stream holds, never allocate
//! what it claims), verifies the checksum, and then checks the table itself: padding bits
//! zero, no slot with a zero fingerprint, and the fingerprint count as stated. Any failure is a
//! [`SnapshotError`] naming it; nothing panics.
//!
//! [`CuckooFilter::snapshot`]: crate::CuckooFilter::snapshot
//! [`SeenBefore::snapshot`]: crate::SeenBefore::snapshot

use std::fmt;
use std::io::{self, Read, Write};

/// First bytes of every snapshot.
pub const MAGIC: [u8; 8] = *b"CKOOGATE";

/// The format version written. Version 6 adds, to a saved cache under S3-FIFO, each
/// shard's frequency sketch and the credit's place and climber (policy 3, `S3FifoLfu`);
/// version 5 adds, to a saved cache, its hash seed (a
/// restore hashes as the saved cache did); version 4 adds, to a saved cache under S3-FIFO, each
/// shard's ghost reach and climber (version 3's give the ghosts their full reach and a new
/// climber); version 3 adds the layout byte (windowed filters); version 2, where that byte
/// is always 0, is read too. Version 1 (which kept a grown filter's spent extension bits)
/// is not read.
pub const VERSION: u16 = 6;

/// The oldest format version read.
pub const OLDEST_VERSION: u16 = 2;

/// The key whose hash a filter snapshot records, to check the hasher on restore.
pub const HASH_CHECK_KEY: u64 = 0x5EED_C0DE_CAFE_F00D;

/// Bytes read per chunk of a table, bounding what a corrupt length can make us allocate
/// ahead of the data.
const CHUNK_BYTES: usize = 1 << 16;

/// What a snapshot holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    Filter = 1,
    Gate = 2,
    #[cfg(feature = "serde")]
    Cache = 3,
}

/// Why a snapshot could not be restored.
///
/// # Examples
///
/// ```
/// use cuckoo_gate::{CuckooFilter, SnapshotError};
///
/// let filter = CuckooFilter::with_capacity(100);
/// let mut bytes = Vec::new();
/// filter.snapshot(&mut bytes)?;
/// bytes.truncate(bytes.len() - 1);
/// assert!(matches!(CuckooFilter::restore(&mut bytes.as_slice()), Err(SnapshotError::Truncated)));
/// # Ok::<(), std::io::Error>(())
/// ```
#[derive(Debug)]
#[non_exhaustive]
pub enum SnapshotError {
    /// Reading the stream failed.
    Io(io::Error),
    /// The stream ended inside the snapshot.
    Truncated,
    /// The stream does not start with a cuckoo-gate snapshot's magic bytes.
    BadMagic,
    /// The snapshot was written by a format version this build does not read.
    UnsupportedVersion {
        /// The version in the snapshot.
        found: u16,
        /// The version this build reads.
        supported: u16,
    },
    /// The snapshot holds another kind of structure (a gate given to
    /// `CuckooFilter::restore`, or the reverse).
    WrongKind {
        /// What the snapshot holds.
        found: &'static str,
        /// What the caller restores.
        expected: &'static str,
    },
    /// The checksum does not match the bytes: the snapshot is corrupt.
    ChecksumMismatch {
        /// The checksum in the snapshot.
        stored: u32,
        /// The checksum of the bytes read.
        computed: u32,
    },
    /// A field is out of range or contradicts another: the snapshot is corrupt, or was
    /// not written by this crate.
    Inconsistent {
        /// Which field or check failed.
        detail: &'static str,
    },
    /// This build hashes keys differently from the one that wrote the snapshot (another
    /// hasher, or ahash built with other CPU features), so lookups would miss.
    HasherMismatch,
    /// The allocator refused the memory for the restored table.
    OutOfMemory {
        /// Bytes that were asked for.
        bytes: usize,
    },
}

impl SnapshotError {
    pub(crate) fn inconsistent(detail: &'static str) -> Self {
        SnapshotError::Inconsistent { detail }
    }
}

impl fmt::Display for SnapshotError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SnapshotError::Io(e) => write!(f, "reading the snapshot failed: {e}"),
            SnapshotError::Truncated => f.write_str("the snapshot ends early; it was cut short when copied or written"),
            SnapshotError::BadMagic => f.write_str("not a cuckoo-gate snapshot (wrong magic bytes)"),
            SnapshotError::UnsupportedVersion { found, supported } => write!(
                f,
                "snapshot format version {found}, but this build reads versions {OLDEST_VERSION} to {supported}; restore it with the version of cuckoo-gate that wrote it"
            ),
            SnapshotError::WrongKind { found, expected } => {
                write!(f, "the snapshot holds a {found}; restore it with {found}::restore, not as a {expected}")
            }
            SnapshotError::ChecksumMismatch { stored, computed } => write!(
                f,
                "snapshot checksum mismatch (stored {stored:#010x}, computed {computed:#010x}): the bytes are corrupt"
            ),
            SnapshotError::Inconsistent { detail } => write!(f, "the snapshot is corrupt: {detail}"),
            SnapshotError::HasherMismatch => f.write_str(
                "this build hashes keys differently from the one that wrote the snapshot (another ahash build or CPU features); rebuild the filter from its keys",
            ),
            SnapshotError::OutOfMemory { bytes } => {
                write!(f, "could not allocate {bytes} bytes for the restored table")
            }
        }
    }
}

impl std::error::Error for SnapshotError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            SnapshotError::Io(e) => Some(e),
            _ => None,
        }
    }
}

impl From<io::Error> for SnapshotError {
    fn from(e: io::Error) -> Self {
        if e.kind() == io::ErrorKind::UnexpectedEof {
            SnapshotError::Truncated
        } else {
            SnapshotError::Io(e)
        }
    }
}

fn kind_name(kind: u16) -> &'static str {
    match kind {
        1 => "CuckooFilter",
        2 => "SeenBefore",
        3 => "AdmissionCache",
        _ => "structure of unknown kind",
    }
}

/// Writes a snapshot, summing a CRC-32 of every byte; [`Encoder::finish`] appends it.
/// Usable as a `Write`, so that a gate's encoder sums its filters' snapshots too.
pub(crate) struct Encoder<'a, W: Write + ?Sized> {
    inner: &'a mut W,
    crc: crc32fast::Hasher,
}

impl<'a, W: Write + ?Sized> Encoder<'a, W> {
    /// Starts a snapshot of `kind`: writes the header.
    pub(crate) fn new(inner: &'a mut W, kind: Kind) -> io::Result<Self> {
        let mut encoder = Encoder { inner, crc: crc32fast::Hasher::new() };
        encoder.write_all(&MAGIC)?;
        encoder.u16(VERSION)?;
        encoder.u16(kind as u16)?;
        Ok(encoder)
    }

    pub(crate) fn u8(&mut self, v: u8) -> io::Result<()> {
        self.write_all(&[v])
    }

    pub(crate) fn u16(&mut self, v: u16) -> io::Result<()> {
        self.write_all(&v.to_le_bytes())
    }

    pub(crate) fn u32(&mut self, v: u32) -> io::Result<()> {
        self.write_all(&v.to_le_bytes())
    }

    pub(crate) fn u64(&mut self, v: u64) -> io::Result<()> {
        self.write_all(&v.to_le_bytes())
    }

    /// A length or count (`usize` is at most 64 bits on every supported target).
    pub(crate) fn usize(&mut self, v: usize) -> io::Result<()> {
        self.u64(v as u64)
    }

    pub(crate) fn f64(&mut self, v: f64) -> io::Result<()> {
        self.u64(v.to_bits())
    }

    /// The words, in chunks.
    pub(crate) fn words(&mut self, words: &[u64]) -> io::Result<()> {
        let mut buffer = Vec::with_capacity(CHUNK_BYTES.min(words.len() * 8));
        for chunk in words.chunks(CHUNK_BYTES / 8) {
            buffer.clear();
            chunk.iter().for_each(|w| buffer.extend_from_slice(&w.to_le_bytes()));
            self.write_all(&buffer)?;
        }
        Ok(())
    }

    /// Appends the checksum of everything written.
    pub(crate) fn finish(self) -> io::Result<()> {
        self.inner.write_all(&self.crc.finalize().to_le_bytes())
    }
}

impl<W: Write + ?Sized> Write for Encoder<'_, W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.crc.update(&buf[..n]);
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
}

/// Reads a snapshot, summing a CRC-32 of every byte; [`Decoder::finish`] checks it.
/// Usable as a `Read`, so that a gate's decoder sums its filters' snapshots too.
pub(crate) struct Decoder<'a, R: Read + ?Sized> {
    inner: &'a mut R,
    crc: crc32fast::Hasher,
    version: u16,
}

impl<'a, R: Read + ?Sized> Decoder<'a, R> {
    /// The format version of the snapshot being read.
    pub(crate) fn version(&self) -> u16 {
        self.version
    }

    /// Starts reading a snapshot of `kind`: checks the header.
    pub(crate) fn new(inner: &'a mut R, kind: Kind) -> Result<Self, SnapshotError> {
        let mut decoder = Decoder { inner, crc: crc32fast::Hasher::new(), version: VERSION };
        if decoder.array::<8>()? != MAGIC {
            return Err(SnapshotError::BadMagic);
        }
        let version = decoder.u16()?;
        decoder.version = version;
        if !(OLDEST_VERSION..=VERSION).contains(&version) {
            return Err(SnapshotError::UnsupportedVersion { found: version, supported: VERSION });
        }
        let found = decoder.u16()?;
        if found != kind as u16 {
            return Err(SnapshotError::WrongKind {
                found: kind_name(found),
                expected: kind_name(kind as u16),
            });
        }
        Ok(decoder)
    }

    fn array<const N: usize>(&mut self) -> Result<[u8; N], SnapshotError> {
        let mut bytes = [0; N];
        self.read_exact(&mut bytes)?;
        Ok(bytes)
    }

    pub(crate) fn u8(&mut self) -> Result<u8, SnapshotError> {
        Ok(self.array::<1>()?[0])
    }

    pub(crate) fn u16(&mut self) -> Result<u16, SnapshotError> {
        Ok(u16::from_le_bytes(self.array()?))
    }

    pub(crate) fn u32(&mut self) -> Result<u32, SnapshotError> {
        Ok(u32::from_le_bytes(self.array()?))
    }

    pub(crate) fn u64(&mut self) -> Result<u64, SnapshotError> {
        Ok(u64::from_le_bytes(self.array()?))
    }

    /// A length or count, which must fit in `usize`.
    pub(crate) fn usize(&mut self, field: &'static str) -> Result<usize, SnapshotError> {
        usize::try_from(self.u64()?).map_err(|_| SnapshotError::inconsistent(field))
    }

    pub(crate) fn f64(&mut self) -> Result<f64, SnapshotError> {
        Ok(f64::from_bits(self.u64()?))
    }

    /// `count` words, read chunk by chunk: memory grows only as the stream delivers them.
    pub(crate) fn words(&mut self, count: usize) -> Result<Vec<u64>, SnapshotError> {
        let mut words = Vec::new();
        let mut buffer = vec![0u8; CHUNK_BYTES];
        while words.len() < count {
            let n = (count - words.len()).min(CHUNK_BYTES / 8);
            words
                .try_reserve(n)
                .map_err(|_| SnapshotError::OutOfMemory { bytes: count.saturating_mul(8) })?;
            let chunk = &mut buffer[..n * 8];
            self.read_exact(chunk)?;
            words.extend(chunk.chunks_exact(8).map(|b| {
                let mut word = [0; 8];
                word.copy_from_slice(b);
                u64::from_le_bytes(word)
            }));
        }
        Ok(words)
    }

    /// Reads the stored checksum and compares it with that of everything read before.
    pub(crate) fn finish(self) -> Result<(), SnapshotError> {
        let computed = self.crc.finalize();
        let mut stored = [0; 4];
        self.inner.read_exact(&mut stored)?;
        let stored = u32::from_le_bytes(stored);
        if stored == computed {
            Ok(())
        } else {
            Err(SnapshotError::ChecksumMismatch { stored, computed })
        }
    }
}

impl<R: Read + ?Sized> Read for Decoder<'_, R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.crc.update(&buf[..n]);
        Ok(n)
    }
}
