//! Saving a cache's contents, and restoring them after a restart (feature `serde`).
//!
//! A save writes every live entry (and those in grace), shard by shard: each shard is
//! copied under its read lock, and encoded and written after it is released, so no lock
//! is held while the writer runs, and the memory a save takes beyond the cache is one
//! shard's copy. A reader of the file gets each shard as it was at one moment (its
//! entries, their order and their requests), the shards at moments a little apart; an
//! entry written while the save runs is in the file if its shard was copied after it.
//!
//! Keys and values go through serde, encoded with postcard (compact, varint integers, a
//! well-kept crate that `no_std` users share); the framing around them is the crate's
//! snapshot format (`src/snapshot.rs`: magic, version, kind, lengths, a CRC-32 of every
//! byte). After the header (kind 3):
//!
//! | bytes | field |
//! |---|---|
//! | 1 | policy: 0 `Always`, 1 `SecondHit`, 2 `S3Fifo`, 3 `S3FifoLfu` (from version 6) |
//! | 8 | capacity |
//! | 8 | shards |
//! | 8 | the cache's hash of the `u64` [`HASH_CHECK_KEY`]: filters hashed alike can be taken over |
//! | 8 | from version 5, the cache's hash seed (the hash above checks it) |
//! | 8 | wall-clock time of the save, in milliseconds since 1970 |
//! | 8 | S3-FIFO's small-queue target (0 under the other policies) |
//! | 1 + | 1 and S3-FIFO's recent evictions (sampling rate, then two ghost tables), or 0 |
//! | 1 + | 1 and a gate snapshot (`SecondHit`'s gate), or 0 |
//! | per shard | 1 and its ghosts and, from version 4, its climber, and from version 6 the credit's place (`f64` bits, -1 without a sketch) and the frequency sketch (`S3Fifo`, `S3FifoLfu`), or 0; the entry count (8); the block's length `L` (8); the block (`L`) |
//! | 8 | entries in all |
//! | 4 | CRC-32 |
//!
//! A block holds its shard's entries, each queue oldest first: the key and the value
//! (postcard), a byte of flags (on main, requests counted, weighed, timed), then in
//! postcard varints the weight if weighed, and if timed the milliseconds from the save
//! to the end of its grace (its deadline, if it has none), its stale window and its grace.
//!
//! A restore reads one block at a time (its memory grows only as the stream delivers
//! bytes) and hashes as the saved cache did: it adopts the saved seed (see `hashing.rs`),
//! so each entry goes back to the shard it was saved from, and the gate's and the ghosts'
//! filters, which remember hashes, are taken over when sized alike (the same capacity,
//! and for ghosts the same shard count; they are hints, otherwise dropped).
//! [`AdmissionCache::restore_rekeyed`] keeps the cache's own seed instead, and re-shards.
//! Each entry is put back newest last, with its requests and what is left of its
//! lifetime by the wall clock: so the time spent down counts. The cache may have another
//! capacity, shard count or policy: a smaller cache evicts by its policy as entries come
//! (S3-FIFO, given each block least requested first, keeps those requested most; an exact
//! LRU the most recent). Every entry of the file that the cache does not keep is told to
//! the listener: evicted (to make room, or too heavy for its shard) or expired (its grace
//! ended while the cache was down).

use std::hash::Hash;
use std::io::{self, Read, Write};
use std::time::{Duration, Instant};

use serde::de::DeserializeOwned;
use serde::Serialize;

use super::listener::{report, RemovalCause};
use super::policy::{Removed, SharedSplit};
use super::shard::{Exported, Left};
use super::{AdmissionCache, AdmissionPolicy, MAX_SHARDS};
use crate::filter::seeded_hasher;
use crate::gate::SeenBefore;
use crate::primitive::Ordering;
use crate::snapshot::{Decoder, Encoder, Kind, SnapshotError, HASH_CHECK_KEY};

/// What [`AdmissionCache::save`] wrote.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Saved {
    /// Entries written.
    pub entries: u64,
    /// Bytes written.
    pub bytes: u64,
    /// How long the save took.
    pub duration: Duration,
}

/// What [`AdmissionCache::restore`] read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Restored {
    /// Entries held now.
    pub entries: u64,
    /// Entries whose lifetime (and grace) ended while the cache was down: not kept, and
    /// told to the listener as [`Expired`](super::RemovalCause::Expired).
    pub expired: u64,
    /// Entries evicted by the restore (a smaller cache, or a shard overfilled by another
    /// hash seed), or too heavy for their shard: told to the listener as
    /// [`Evicted`](super::RemovalCause::Evicted).
    pub dropped: u64,
    /// Bytes read.
    pub bytes: u64,
    /// How long the restore took.
    pub duration: Duration,
}

/// Flags of an entry in a block.
const MAIN: u8 = 1;
const WEIGHED: u8 = 1 << 1;
const TIMED: u8 = 1 << 2;
/// The requests counted, in bits 3 and 4.
const FREQ_SHIFT: u8 = 3;

/// Ticks (2^-32 s) in milliseconds, rounded down or up; and milliseconds in ticks,
/// rounded up (by less than a tick), so that milliseconds restored and saved again are
/// the same milliseconds.
fn millis(ticks: u64, round_up: bool) -> u64 {
    let scaled = u128::from(ticks) * 1000;
    let up = if round_up { (1 << 32) - 1 } else { 0 };
    ((scaled + up) >> 32) as u64
}

fn ticks(millis: u64) -> u64 {
    ((u128::from(millis) << 32).div_ceil(1000)).min(u128::from(u64::MAX)) as u64
}

/// Counts the bytes that pass.
struct Counted<'a, T: ?Sized> {
    inner: &'a mut T,
    bytes: u64,
}

impl<W: Write + ?Sized> Write for Counted<'_, W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.bytes += n as u64;
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
}

impl<R: Read + ?Sized> Read for Counted<'_, R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.bytes += n as u64;
        Ok(n)
    }
}

/// Appends `value` to `block` in postcard.
fn put<T: Serialize + ?Sized>(value: &T, block: &mut Vec<u8>) -> io::Result<()> {
    *block = postcard::to_extend(value, std::mem::take(block)).map_err(|e| {
        io::Error::new(io::ErrorKind::InvalidData, format!("a key or value could not be encoded: {e}"))
    })?;
    Ok(())
}

/// Appends an entry a save copied to its shard's block.
fn encode<K: Serialize, V: Serialize>(copy: &Exported<K, V>, block: &mut Vec<u8>) -> io::Result<()> {
    put(&copy.key, block)?;
    put(&copy.value, block)?;
    let mut flags = copy.freq.min(3) << FREQ_SHIFT;
    flags |= if copy.main { MAIN } else { 0 };
    flags |= if copy.weight != 1 { WEIGHED } else { 0 };
    flags |= if copy.lifetime.is_some() { TIMED } else { 0 };
    block.push(flags);
    if copy.weight != 1 {
        put(&copy.weight, block)?;
    }
    if let Some(Left { grace_end, window, grace }) = copy.lifetime {
        // Rounded so that the deadline and the grace's end restored are never later
        // than they were: the grace's end down, the grace up, the stale window down.
        put(&millis(grace_end, false), block)?;
        put(&millis(window, false), block)?;
        put(&millis(grace, true), block)?;
    }
    Ok(())
}

/// Takes a `T` off the front of `bytes`.
fn take<'a, T: DeserializeOwned>(
    bytes: &'a [u8],
    what: &'static str,
) -> Result<(T, &'a [u8]), SnapshotError> {
    postcard::take_from_bytes(bytes).map_err(|_| SnapshotError::inconsistent(what))
}

/// Reads `len` bytes of a block into `block`, a chunk at a time: memory grows only as
/// the stream delivers them.
fn read_block<R: Read + ?Sized>(
    d: &mut Decoder<'_, R>,
    len: usize,
    block: &mut Vec<u8>,
) -> Result<(), SnapshotError> {
    const CHUNK: usize = 1 << 16;
    block.clear();
    while block.len() < len {
        let (start, n) = (block.len(), (len - block.len()).min(CHUNK));
        block.try_reserve(n).map_err(|_| SnapshotError::OutOfMemory { bytes: len })?;
        block.resize(start + n, 0);
        d.read_exact(&mut block[start..])?;
    }
    Ok(())
}

impl<K, V> AdmissionCache<K, V>
where
    K: Hash + Eq + Clone + Serialize + DeserializeOwned,
    V: Clone + Serialize + DeserializeOwned,
{
    /// Writes every live entry (and those in grace) to `writer`: keys and values, their
    /// weights, their places in the eviction order and their requests, what is left of
    /// their lifetimes, freshness and grace by the wall clock, and the gate's or the
    /// ghosts' filters; a [`restore`](Self::restore) after a restart puts them back.
    /// Other threads read and write meanwhile: each shard is copied under its read lock
    /// and written after it is released, so a reader of the file gets each shard as it
    /// was at one moment, the shards at moments a little apart. Give it a buffered writer:
    /// the save flushes it when done.
    ///
    /// # Errors
    ///
    /// The writer's, and `InvalidData` for a key or value serde cannot encode.
    ///
    /// # Examples
    ///
    /// ```
    /// use cuckoo_gate::AdmissionCache;
    ///
    /// let cache: AdmissionCache<String, u64> = AdmissionCache::builder().capacity(100).build()?;
    /// let _ = cache.insert("/news".to_string(), 7);
    /// let mut file = Vec::new(); // a `BufWriter<File>` in a service
    /// let saved = cache.save(&mut file)?;
    /// assert_eq!((saved.entries, saved.bytes), (1, file.len() as u64));
    ///
    /// let restarted: AdmissionCache<String, u64> = AdmissionCache::builder().capacity(100).build()?;
    /// assert_eq!(restarted.restore(&mut file.as_slice())?.entries, 1);
    /// assert_eq!(restarted.get("/news"), Some(7));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn save<W: Write + ?Sized>(&self, writer: &mut W) -> io::Result<Saved> {
        let start = Instant::now();
        let mut counted = Counted { inner: writer, bytes: 0 };
        let mut e = Encoder::new(&mut counted, Kind::Cache)?;
        e.u8(match self.policy {
            AdmissionPolicy::Always => 0,
            AdmissionPolicy::SecondHit => 1,
            AdmissionPolicy::S3Fifo => 2,
            AdmissionPolicy::S3FifoLfu => 3,
        })?;
        e.u64(self.capacity)?;
        e.usize(self.shards.len())?;
        let keys = self.hashing.keys();
        e.u64(keys.hash(&HASH_CHECK_KEY))?;
        e.u64(keys.seed())?;
        e.u64(self.expiry.clock.wall_millis())?;
        let (small, recent) = match self.shards[0].read().split() {
            Some(split) => {
                let mut recent = Vec::new();
                split.save_recent(&mut recent);
                (split.target().0, Some(recent))
            }
            None => (0, None),
        };
        e.u64(small)?;
        match recent {
            Some(recent) => {
                e.u8(1)?;
                e.write_all(&recent)?;
            }
            None => e.u8(0)?,
        }
        match &self.gate {
            Some(gate) => {
                e.u8(1)?;
                gate.snapshot(&mut e)?;
            }
            None => e.u8(0)?,
        }
        let (mut entries, mut copies, mut block) = (0, Vec::new(), Vec::new());
        for shard in self.shards.iter() {
            let ghosts = {
                let held = shard.read();
                held.export(&self.expiry, &mut copies);
                held.save_ghosts(held.hits())
            };
            match ghosts {
                Some(ghosts) => {
                    e.u8(1)?;
                    e.write_all(&ghosts)?;
                }
                None => e.u8(0)?,
            }
            block.clear();
            copies.iter().try_for_each(|copy| encode(copy, &mut block))?;
            e.usize(copies.len())?;
            e.usize(block.len())?;
            e.write_all(&block)?;
            entries += copies.len() as u64;
            // The copies drop here, no lock held.
            copies.clear();
        }
        e.u64(entries)?;
        e.finish()?;
        // A buffered writer's last bytes reach the file here, and a failure is an error
        // (a `BufWriter` dropped unflushed would lose it).
        counted.flush()?;
        let saved = Saved { entries, bytes: counted.bytes, duration: start.elapsed() };
        self.persisted.saved(&saved);
        Ok(saved)
    }

    /// Replaces the cache's contents with what [`save`](Self::save) wrote: the entries,
    /// each put back in its key's shard with its place in the eviction order, its requests,
    /// and what is left of its lifetime by the wall clock. The cache adopts the saved
    /// cache's hash seed, whatever it was built with: each entry goes back to the shard it
    /// was saved from, and the gate's and the ghosts' filters (which remember hashes) are
    /// taken over when sized alike; [`restore_rekeyed`](Self::restore_rekeyed) keeps this
    /// cache's seed instead. This cache may have another capacity, shard count or policy
    /// than the one saved: a smaller one evicts by its policy as the entries come
    /// (S3-FIFO, given them least requested first, keeps those requested most; an exact
    /// LRU the most recent).
    ///
    /// Nothing is dropped unnamed: what the cache held before is told to the listener as
    /// [`Cleared`](super::RemovalCause::Cleared); an entry of the file whose lifetime and
    /// grace ended while the cache was down as [`Expired`](super::RemovalCause::Expired)
    /// (counted in [`Restored::expired`]); one the cache cannot keep, evicted to make room
    /// or too heavy for its shard, as [`Evicted`](super::RemovalCause::Evicted) (counted in
    /// [`Restored::dropped`]). An integration whose entries live elsewhere too (a disk
    /// store) purges those. Other threads may use the cache meanwhile: a write that races
    /// the restore is kept or cleared, never lost unnamed.
    ///
    /// A saved file carries the hash seed, which is what keeps keys crafted to collide
    /// from colliding: keep it as private as the cache's contents (see the README's
    /// section on security).
    ///
    /// The bytes are untrusted: every length is checked against the input before memory is
    /// given to it (a restore allocates in proportion to the bytes read, one shard's block
    /// at a time), and the checksum at the end is checked before the gate's filters are
    /// taken over. Keys and values go through serde: a type whose `Deserialize` allocates
    /// ahead of its input can allocate more (serde's sequences preallocate at most 1 MiB).
    ///
    /// # Errors
    ///
    /// A [`SnapshotError`] saying what is wrong; the cache is then empty, and usable.
    ///
    /// # Examples
    ///
    /// ```
    /// use cuckoo_gate::{AdmissionCache, SnapshotError};
    ///
    /// let cache: AdmissionCache<u64, u64> = AdmissionCache::builder().capacity(100).build()?;
    /// let mut file = Vec::new();
    /// cache.save(&mut file)?;
    /// file[20] ^= 1; // corrupt it
    /// assert!(matches!(cache.restore(&mut file.as_slice()), Err(SnapshotError::ChecksumMismatch { .. })));
    /// assert!(cache.is_empty());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn restore<R: Read + ?Sized>(&self, reader: &mut R) -> Result<Restored, SnapshotError> {
        self.restore_hashing(reader, true)
    }

    /// As [`restore`](Self::restore), but the cache keeps its own hasher rather than adopt
    /// the saved cache's: for a service that wants a fresh seed at each start (say, after
    /// the file may have been read by someone else). Every key is hashed anew, so the
    /// entries move to other shards: it is slower, a full cache re-sharded may overfill
    /// some shards (what they cannot hold is evicted, told to the listener and counted in
    /// [`Restored::dropped`]), and the gate's and the ghosts' filters, which remember
    /// hashes rather than keys, start empty.
    ///
    /// # Errors
    ///
    /// As [`restore`](Self::restore).
    ///
    /// # Examples
    ///
    /// ```
    /// use cuckoo_gate::AdmissionCache;
    ///
    /// let cache: AdmissionCache<u64, u64> = AdmissionCache::builder().capacity(100).build()?;
    /// let _ = cache.insert(1, 1);
    /// let mut file = Vec::new();
    /// cache.save(&mut file)?;
    /// let restarted: AdmissionCache<u64, u64> = AdmissionCache::builder().capacity(100).build()?;
    /// assert_eq!(restarted.restore_rekeyed(&mut file.as_slice())?.entries, 1);
    /// assert_eq!(restarted.get(&1), Some(1));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn restore_rekeyed<R: Read + ?Sized>(&self, reader: &mut R) -> Result<Restored, SnapshotError> {
        self.restore_hashing(reader, false)
    }

    /// [`restore`](Self::restore), adopting the saved cache's hasher if `adopt`.
    fn restore_hashing<R: Read + ?Sized>(
        &self,
        reader: &mut R,
        adopt: bool,
    ) -> Result<Restored, SnapshotError> {
        let start = Instant::now();
        self.clear();
        let mut counted = Counted { inner: reader, bytes: 0 };
        match self.restore_from(&mut counted, adopt) {
            Ok(mut restored) => {
                (restored.bytes, restored.duration) = (counted.bytes, start.elapsed());
                self.persisted.restored(&restored);
                Ok(restored)
            }
            Err(e) => {
                self.empty_silently();
                Err(e)
            }
        }
    }

    /// [`restore`](Self::restore)'s reading and putting back.
    fn restore_from<R: Read + ?Sized>(&self, reader: &mut R, adopt: bool) -> Result<Restored, SnapshotError> {
        let inconsistent = SnapshotError::inconsistent;
        let mut d = Decoder::new(reader, Kind::Cache)?;
        let policy = d.u8()?;
        let capacity = d.u64()?;
        let shards = d.usize("cache shard count")?;
        if policy > 3
            || (policy == 3 && d.version() < 6)
            || capacity == 0
            || shards == 0
            || shards > MAX_SHARDS
        {
            return Err(inconsistent("cache policy, capacity or shard count"));
        }
        let check = d.u64()?;
        if d.version() >= 5 {
            let seed = d.u64()?;
            if seeded_hasher(seed).hash_one(HASH_CHECK_KEY) != check {
                return Err(inconsistent("cache hash seed"));
            }
            if adopt {
                self.rekey(seed);
            }
        }
        let alike = check == self.hashing.hash(&HASH_CHECK_KEY);
        let elapsed = self.expiry.clock.wall_millis().saturating_sub(d.u64()?);
        let small = d.u64()?;
        let recent = match d.u8()? {
            0 => None,
            1 => Some(SharedSplit::read_recent(&mut d)?),
            _ => return Err(inconsistent("cache split flag")),
        };
        let gate = match d.u8()? {
            0 => None,
            1 => Some(SeenBefore::restore(&mut d)?),
            _ => return Err(inconsistent("cache gate flag")),
        };
        let same_shards = alike && shards == self.shards.len();
        // Into a smaller S3-FIFO cache, each block's entries come least requested first, so
        // that those evicted to make room are those the policy would give up first.
        let by_requests = self.policy.is_s3fifo() && self.capacity < capacity;
        let mut entries = Vec::new();
        let (mut total, mut expired, mut dropped, mut block) = (0u64, 0, 0u64, Vec::new());
        for i in 0..shards {
            match d.u8()? {
                0 => {}
                1 => {
                    let target = if same_shards { i } else { 0 };
                    let mut held = self.shards[target].write();
                    let hits = held.hits();
                    held.restore_ghosts(&mut d, same_shards, hits)?;
                }
                _ => return Err(inconsistent("cache ghosts flag")),
            }
            let count = d.u64()?;
            let len = d.usize("cache block length")?;
            let mut removed = Removed::new(self.listener.is_some());
            read_block(&mut d, len, &mut block)?;
            let mut rest = block.as_slice();
            for _ in 0..count {
                let (key, after) = take::<K>(rest, "a key")?;
                let (value, after) = take::<V>(after, "a value")?;
                let (flags, mut after) = take::<u8>(after, "an entry's flags")?;
                let mut weight = 1;
                if flags & WEIGHED != 0 {
                    (weight, after) = take::<u32>(after, "an entry's weight")?;
                }
                let mut lifetime = None;
                if flags & TIMED != 0 {
                    let (grace_end, more) = take::<u64>(after, "an entry's lifetime")?;
                    let (window, more) = take::<u64>(more, "an entry's stale window")?;
                    let (grace, more) = take::<u64>(more, "an entry's grace")?;
                    after = more;
                    lifetime = grace_end.checked_sub(elapsed).filter(|&left| left > 0).map(|left| Left {
                        grace_end: ticks(left),
                        window: ticks(window),
                        grace: ticks(grace),
                    });
                }
                (rest, total) = (after, total + 1);
                if flags & TIMED != 0 && lifetime.is_none() {
                    // Its lifetime and grace ended while the cache was down.
                    expired += 1;
                    removed.push((key, value), RemovalCause::Expired);
                    continue;
                }
                // Weighed again by this cache's weigher: the weight written is its own.
                let _ = weight;
                let (main, freq) = (flags & MAIN != 0, (flags >> FREQ_SHIFT) & 3);
                let entry = Exported { key, value, weight: 1, main, freq, lifetime };
                if by_requests {
                    entries.push(entry);
                } else {
                    dropped += self.put_back(entry, &mut removed);
                }
            }
            if !rest.is_empty() {
                return Err(inconsistent("bytes past a block's entries"));
            }
            entries.sort_by_key(|entry| entry.freq);
            dropped += entries.drain(..).map(|entry| self.put_back(entry, &mut removed)).sum::<u64>();
            // What the block could not keep is told to the listener now, no lock held.
            self.report_removed(std::mem::replace(&mut removed, Removed::new(self.listener.is_some())));
        }
        if d.u64()? != total {
            return Err(inconsistent("cache entry count"));
        }
        d.finish()?;
        if let (Some(gate), Some(own)) = (gate, &self.gate) {
            own.adopt(gate);
        }
        if (policy == 2 || policy == 3) && small > 0 && capacity == self.capacity {
            self.shards[0].read().set_split_target(small, capacity);
        }
        if let (Some(recent), Some(split), true) = (recent, self.shards[0].read().split(), alike) {
            split.adopt_recent(recent);
        }
        Ok(Restored { entries: self.len() as u64, expired, dropped, bytes: 0, duration: Duration::ZERO })
    }

    /// Hashes by `seed` from now on (the gate too), emptying every shard in the same hold
    /// of all their write locks: an entry written since the restore's clear, hashed by the
    /// old hasher, would be found by no one (see `hashing.rs`). What it empties is told to
    /// the listener as cleared.
    fn rekey(&self, seed: u64) {
        if self.hashing.keys().seed() == seed {
            return;
        }
        let mut held: Vec<_> = self.shards.iter().map(|shard| shard.write()).collect();
        self.hashing.replace(seed);
        if let Some(gate) = &self.gate {
            gate.rekey(seed);
        }
        let emptied: Vec<_> = held.iter_mut().map(|shard| shard.clear()).collect();
        drop(held);
        let cleared = emptied.into_iter().flat_map(|store| store.into_entries());
        report(self.listener.as_ref(), cleared.map(|(key, value)| (key, value, RemovalCause::Cleared)));
    }

    /// Puts back one entry of a save in its key's shard (weighed first, no lock held);
    /// what it evicts, and the entry itself if too heavy for the shard, go to `removed`.
    /// Puts back an entry a save copied (see [`Shard::import`]); how many entries of the
    /// file that evicted (the entry itself, if too heavy for its shard).
    fn put_back(&self, entry: Exported<K, V>, removed: &mut Removed<K, V>) -> u64 {
        let hash = self.hashing.hash(&entry.key);
        let weight = self.weigh(&entry.key, &entry.value);
        let now = self.expiry.clock.now();
        let held = Exported { weight, ..entry };
        self.shard(hash).write().import(held, hash, weight, now, &self.expiry, self.gate.as_ref(), removed)
    }

    /// Empties every shard, telling no one: what a failed restore put back.
    fn empty_silently(&self) {
        for shard in self.shards.iter() {
            let held = shard.write().clear();
            drop(held);
        }
    }
}

impl super::Persisted {
    fn saved(&self, saved: &Saved) {
        self.saved_bytes.fetch_add(saved.bytes, Ordering::Relaxed);
        self.last_save_nanos.store(saved.duration.as_nanos() as u64, Ordering::Relaxed);
    }

    fn restored(&self, restored: &Restored) {
        self.restored_bytes.fetch_add(restored.bytes, Ordering::Relaxed);
        self.restored_entries.fetch_add(restored.entries, Ordering::Relaxed);
        self.restore_expired.fetch_add(restored.expired, Ordering::Relaxed);
        self.restore_dropped.fetch_add(restored.dropped, Ordering::Relaxed);
        self.last_restore_nanos.store(restored.duration.as_nanos() as u64, Ordering::Relaxed);
    }
}
