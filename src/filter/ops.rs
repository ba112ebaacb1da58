//! Key operations on one table: insert (making room by relocation), remove, lookups.
//!
//! Every write happens under [`Table::lock_pair`] of the buckets it changes, and a
//! check-then-act (`insert_unique`, `remove`) under the locks of every write that could
//! change its answer, so it is atomic; lookups go through
//! [`Table::holds_either`] (and `count` through [`Table::read_pair`]) and take no lock. A
//! write that meets a frozen stripe returns `Frozen` having changed nothing the key depends
//! on, and the filter repeats it once the doubling (or snapshot) that froze the table is
//! done.

use std::convert::Infallible;

use super::bucket::{Lanes, Shape};
use super::hash::Probe;
use super::relocate;
use super::stripe::Frozen;
use super::table::Table;
use super::{pipelined, BATCH};
use crate::broken;
use crate::primitive::Ordering;

/// Why an insert into one table did not happen.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Refused {
    /// No slot could be freed: the table must grow.
    Full,
    /// Both buckets hold the key's value in every slot.
    TooManyCopies,
    /// The table is frozen by a doubling or a snapshot.
    Frozen,
}

impl From<Frozen> for Refused {
    fn from(Frozen: Frozen) -> Self {
        Refused::Frozen
    }
}

/// Search-and-move attempts per insert before it reports [`Refused::Full`]. An attempt
/// is repeated only when another writer took the freed slot or changed the path.
const MAX_ATTEMPTS: usize = 8;

impl<S: Shape> Table<S> {
    /// Stores the key with hash `hash`; with `unique`, only if it is absent. `Ok(false)`
    /// means it was present and `unique` was set.
    #[inline]
    pub(crate) fn insert(&self, hash: u64, unique: bool) -> Result<bool, Refused> {
        if S::WINDOWED {
            return self.insert_probed(self.probe(hash), unique);
        }
        if unique {
            return self.insert_unique(self.probe(hash));
        }
        // Fast path: most inserts find room in the first bucket, and a plain insert needs
        // only that bucket's stripe (every writer of the bucket holds it). The second
        // bucket is worked out only if the first is full, as in a lookup.
        let (i1, fp, ext) = self.geometry().first_entry(hash);
        // Start loading the bucket (and the side bits a put writes) before taking the
        // lock, so that their cache misses overlap the lock's compare-and-swap.
        self.prefetch_bucket(i1);
        self.prefetch_ext(i1);
        {
            let locked = self.lock_pair(i1, i1)?;
            if let Some(lane) = self.lanes().empties(locked.bucket(i1)).lowest() {
                locked.put(i1, lane, fp << 1, ext);
                return Ok(true);
            }
        }
        let p = self.probe(hash);
        self.insert_in_pair(p.i1, p.i2, p.v1, p.ext, false)
    }

    /// Starts loading what an insert of the key with hash `hash` reads first: its first
    /// bucket (or window) and that bucket's extension bits.
    #[inline]
    pub(crate) fn prefetch_insert(&self, hash: u64) {
        let i1 = if S::WINDOWED { self.probe(hash).i1 } else { self.geometry().first_bucket(hash).0 };
        self.prefetch_bucket(i1);
        self.prefetch_ext(i1);
    }

    /// `insert_unique` in the bucket layout. Its fast path holds the first bucket's stripe
    /// alone: it looks for the key in the first bucket under that lock and in the second
    /// without the second's, and stores the key in the first when it is in neither and the
    /// first has room. The look into the second bucket is exact for absence: an entry
    /// that stands for the key there (choice bit 1) has the same two buckets, so every
    /// write that stores, moves or removes one holds the first bucket's stripe too, which
    /// this insert holds; and writers of the other slots of the second bucket's words store
    /// them whole, keeping such an entry's bits. So if the key's entry is there, every
    /// version of those words that the loads can see holds it. A match there (or a read
    /// torn into one) is checked again under both locks, as are full first buckets.
    #[inline]
    fn insert_unique(&self, p: Probe) -> Result<bool, Refused> {
        debug_assert!(!S::WINDOWED, "a window's entry can move within it under its own stripe");
        let lanes = self.lanes();
        self.prefetch_bucket(p.i1);
        self.prefetch_bucket(p.i2);
        self.prefetch_ext(p.i1);
        let early = broken::EARLY_SECOND_LOOK.then(|| self.load_bucket(p.i2));
        {
            let locked = self.lock_pair(p.i1, p.i1)?;
            let b1 = locked.bucket(p.i1);
            if lanes.holds(b1, p.v1) {
                return Ok(false);
            }
            if let Some(lane) = lanes.empties(b1).lowest() {
                if !lanes.holds(early.unwrap_or_else(|| self.load_bucket(p.i2)), p.v2) {
                    let (locked, lane) = if broken::SPLIT_UNIQUE {
                        broken::relock_first(self, locked, p.i1)?
                    } else {
                        (locked, lane)
                    };
                    locked.put(p.i1, lane, p.v1, p.ext);
                    return Ok(true);
                }
            }
        }
        self.insert_in_pair(p.i1, p.i2, p.v1, p.ext, true)
    }

    /// `insert_unique` of the key with hash `hash` and, if it was new here, whether
    /// `other` may hold it (`Some(found there)`; `None` if it was present here), with one
    /// probe for both; `None` if `other`'s geometry differs, so that the probe is not its.
    #[inline]
    pub(crate) fn insert_unique_then_look(
        &self,
        hash: u64,
        other: &Table<S>,
    ) -> Option<Result<Option<bool>, Refused>> {
        if S::WINDOWED || !self.geometry().same_placement(other.geometry()) {
            return None;
        }
        // Every bucket either table may read starts loading before the insert's lock,
        // whose fence would otherwise wait out each load in turn.
        let p = self.probe(hash);
        other.prefetch_bucket(p.i1);
        other.prefetch_bucket(p.i2);
        Some(match self.insert_unique(p) {
            Ok(true) => Ok(Some(other.contains_probe(p))),
            Ok(false) => Ok(None),
            Err(refused) => Err(refused),
        })
    }

    /// [`Table::insert`] for a key already probed in a windowed table.
    #[inline]
    fn insert_probed(&self, p: Probe, unique: bool) -> Result<bool, Refused> {
        let lanes = self.lanes();
        self.prefetch_bucket(p.i1);
        self.prefetch_bucket(p.i2);
        self.prefetch_ext(p.i1);
        if !unique {
            let locked = self.lock_pair(p.i1, p.i1)?;
            if let Some(lane) = lanes.empties(locked.bucket(p.i1)).lowest() {
                locked.put(p.i1, lane, p.v1 | Lanes::<S>::offset(lane), p.ext);
                return Ok(true);
            }
        }
        self.insert_in_pair(p.i1, p.i2, p.v1, p.ext, unique)
    }

    /// [`Table::insert`] past its fast path: both buckets under lock, and relocation when
    /// they are full. Out of line, so that the fast path carries none of its state; it
    /// takes the probe's parts (the second lane value adds the choice bit to the first), so
    /// that they pass in registers rather than through the caller's memory.
    #[inline(never)]
    fn insert_in_pair(&self, i1: usize, i2: usize, v1: u64, ext: u64, unique: bool) -> Result<bool, Refused> {
        let p = Probe { i1, i2, v1, v2: v1 | 1 << S::WINDOWED as u32, ext };
        let lanes = self.lanes();
        // A put into the second bucket, or a relocation out of it, writes its side bits.
        self.prefetch_bucket(p.i2);
        self.prefetch_ext(p.i2);
        for _ in 0..MAX_ATTEMPTS {
            {
                let locked = self.lock_pair(p.i1, p.i2)?;
                let (b1, b2) = (locked.bucket(p.i1), locked.bucket(p.i2));
                let (m1, m2) = (lanes.matches(b1, p.v1), lanes.matches(b2, p.v2));
                if unique && (m1.any() || m2.any()) {
                    return Ok(false);
                }
                let (locked, b1, b2) = if broken::SPLIT_UNIQUE && unique {
                    broken::relock(self, locked, p.i1, p.i2)?
                } else {
                    (locked, b1, b2)
                };
                if let Some(lane) = lanes.empties(b1).lowest() {
                    locked.put(p.i1, lane, p.v1 | Lanes::<S>::offset(lane), p.ext);
                    return Ok(true);
                }
                if let Some(lane) = lanes.empties(b2).lowest() {
                    locked.put(p.i2, lane, p.v2 | Lanes::<S>::offset(lane), p.ext);
                    return Ok(true);
                }
                if m1.count() + m2.count() == 2 * S::SLOTS {
                    return Err(Refused::TooManyCopies);
                }
            }
            // Both buckets are full: make room without holding their locks.
            match relocate::find_path(self, [p.i1, p.i2]) {
                // Made or not, look again: the freed slot may have been taken meanwhile.
                Some(path) => drop(relocate::execute(self, path.hops())?),
                None => break,
            }
        }
        Err(Refused::Full)
    }

    /// Whether the key with hash `hash` may be present. Lock-free. In the bucket layout
    /// the second bucket is worked out only if the first does not match, so a key in its
    /// first bucket pays nothing for the second. The trade: the second bucket is no longer
    /// prefetched before the first is read, and in a table larger than the CPU cache an
    /// absent key's lookup is about a tenth slower (see docs/performance.md).
    #[inline]
    pub(crate) fn contains(&self, hash: u64) -> bool {
        if S::WINDOWED {
            return self.contains_probe(self.probe(hash));
        }
        let g = self.geometry();
        let (i1, fp) = g.first_bucket(hash);
        self.holds_either(i1, fp << 1, || (g.second_bucket(i1, fp), fp << 1 | 1))
    }

    /// [`Table::contains`] of each of `keys`, hashed by `hash`, into `found`, in groups of
    /// [`BATCH`] keys, pipelined: the next group's buckets are worked out and prefetched
    /// before this group's are read, so that their memory loads overlap this group's work
    /// instead of queueing.
    #[inline]
    pub(crate) fn contains_each<K>(&self, keys: &[K], hash: impl Fn(&K) -> u64, found: &mut [bool]) {
        let place = |keys: &[K], places: &mut [(usize, usize, u64); BATCH]| {
            for (place, key) in places.iter_mut().zip(keys) {
                let (i1, i2, v1) = self.geometry().lookup_place(hash(key), S::WINDOWED);
                self.prefetch_bucket(i1);
                self.prefetch_bucket(i2);
                *place = (i1, i2, v1);
            }
        };
        // The choice bit, which the second bucket's (or window's) lane value adds.
        let second = 1 << S::WINDOWED as u32;
        let groups = keys.chunks(BATCH).zip(found.chunks_mut(BATCH));
        // `let Ok(()) = ...` would need Rust 1.82 (empty patterns); the crate builds on 1.80.
        if let Err(never) = pipelined::<_, _, Infallible>(
            groups,
            [[(0, 0, 0); BATCH]; 2],
            |(keys, _), places| place(keys, places),
            |(_, found), places| {
                for (found, &(i1, i2, v1)) in found.iter_mut().zip(places) {
                    *found = self.holds_in_both(i1, v1, i2, v1 | second);
                }
                Ok(())
            },
        ) {
            match never {}
        }
    }

    /// [`Table::contains`] for a key already probed.
    #[inline]
    pub(crate) fn contains_probe(&self, p: Probe) -> bool {
        self.holds_either(p.i1, p.v1, || (p.i2, p.v2))
    }

    /// Copies of the key of `p` (or of keys indistinguishable from it). Lock-free.
    pub(crate) fn count(&self, p: Probe) -> usize {
        let (b1, b2) = self.read_pair(p.i1, p.i2);
        self.lanes().matches(b1, p.v1).count() + self.lanes().matches(b2, p.v2).count()
    }

    /// Removes one copy of the key of `p`; whether one was found.
    pub(crate) fn remove(&self, p: Probe) -> Result<bool, Frozen> {
        let lanes = self.lanes();
        if broken::UNSTAMPED_REMOVE {
            return Ok(broken::remove_unstamped(self, p));
        }
        let locked = self.lock_pair(p.i1, p.i2)?;
        for (bucket, value) in [(p.i1, p.v1), (p.i2, p.v2)] {
            // The extension bits must match too: removing another key's entry would leave
            // this key's, which the next doubling could send to the wrong bucket.
            let exact =
                lanes.matches(locked.bucket(bucket), value).lanes().find(|&l| locked.ext(bucket, l) == p.ext);
            if let Some(lane) = exact {
                locked.remove(bucket, lane);
                // Room again: the next insert that needs a path searches in full.
                if self.crowded.load(Ordering::Relaxed) {
                    self.crowded.store(false, Ordering::Relaxed);
                }
                return Ok(true);
            }
        }
        Ok(false)
    }
}
