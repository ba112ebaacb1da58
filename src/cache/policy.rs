//! The admission and eviction policies: which misses a shard stores, where they go, and
//! which entry leaves when the shard is over its weight.

use std::sync::Arc;

use crossbeam_utils::CachePadded;

use super::bloom::BloomGhosts;
use super::climber::{Climber, Hill, RESTART};
use super::ghost::Ghosts;
use super::listener::RemovalCause;
use super::sketch::Sketch;
use super::store::{Queue, Store};
use crate::error::BuildError;
use crate::gate::SeenBefore;
use crate::primitive::{AtomicU64, Mutex, Ordering};

/// Which misses become cache entries, and which entries leave first.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum AdmissionPolicy {
    /// Admit every key; evict the least recently used: a plain LRU cache. The gate plays
    /// no part. A hit reorders the shard's list, so it takes the shard's write lock:
    /// choose this for an exact LRU order, not for read throughput.
    Always,
    /// Admit a key only on its second request within the gate's memory. One-hit wonders
    /// never take a slot: the fewest cache writes, for caches on flash or disk, at the
    /// cost of the first hit on every key. Entries are evicted in CLOCK order (a FIFO
    /// that gives recently requested entries another round), and an evicted key is
    /// recorded in the gate so that it is admitted at once if it returns soon.
    SecondHit,
    /// S3-FIFO (Yang et al., SOSP 2023). New keys enter a small FIFO starting at a tenth
    /// of the capacity; a key requested twice more while there moves to the main FIFO
    /// when it reaches the tail, and one that was not leaves the cache and is remembered
    /// as a ghost. A miss on a ghost goes straight to main. The ghost queue is the gate's
    /// two rotating generations cut down for one shard: Bloom filters of 16 to 32 bits
    /// per key, written under the shard's lock. Main evicts in CLOCK order, an entry
    /// getting one more round per request (up to three). One-hit wonders and scans pass
    /// through the small queue without displacing keys that were used twice. The split
    /// between the queues adapts as ARC's does: a miss on a key the small queue evicted
    /// recently grows it, one on a key main evicted recently shrinks it. The shards share
    /// one split, each at its share of the capacity. How long the ghosts remember is
    /// learnt, shard by shard, by Caffeine's hill climber on the hit ratio: a loop a
    /// little longer than the cache, whose returning keys would push out of main those
    /// about to be asked for, shortens it. Hits only bump a counter, under the shard's
    /// read lock. Where frequency pays more than recency (a loop longer than the cache,
    /// scans through a stable hot set) [`S3FifoLfu`](Self::S3FifoLfu) does better.
    #[default]
    S3Fifo,
    /// S3-FIFO as [`S3Fifo`](Self::S3Fifo), with a frequency sketch at main's door: a key
    /// that returns while a ghost enters main only if it was asked for more often than
    /// main's next victim, give or take a credit for its recency, and otherwise goes to
    /// the small queue as a new key. The sketch is Caffeine's (TinyLFU's count-min of
    /// 4-bit counters, halved every ten times the capacity's increments, two bytes per
    /// entry); it counts returning ghosts, and banks the requests an entry's own counter
    /// holds when CLOCK passes over it or it leaves the small queue, so a hit costs what
    /// it costs under `S3Fifo`. The credit, from none (TinyLFU's rule: a tie keeps the
    /// victim) to more than a counter holds (S3-FIFO's: every returning ghost enters), is
    /// learnt shard by shard by the hill climber that sets the ghosts' reach, the two
    /// moved by turns. A loop longer than the cache, whose keys would each push out of
    /// main the next one asked for, then keeps main's keys.
    ///
    /// Against `S3Fifo` (`examples/replay --sweep --plot`, 63 cells of five real traces
    /// and three generated patterns, 0.5% to 20% of their keys): the scan-heavy `arc_p6`
    /// gains 0.7 to 1.9 points at 10% to 20%, `lirs_sprite` 1.0 to 2.8 at 0.5% to 2% (one
    /// shard), a loop through a cache of half and of 83% of it 24 and 13 points; a shift of
    /// the hot set loses 0.1 to 0.9 points, a loop through a cache of 95% of it 7, and the
    /// other real cells move by -0.3 to +0.2 points (mean over the cells +0.08 points on
    /// one shard, -0.01 on eight).
    S3FifoLfu,
}

impl AdmissionPolicy {
    /// Whether the policy is S3-FIFO, with or without its sketch.
    pub(crate) fn is_s3fifo(self) -> bool {
        matches!(self, AdmissionPolicy::S3Fifo | AdmissionPolicy::S3FifoLfu)
    }
}

/// Most requests an entry's counter remembers (two bits, as in S3-FIFO).
pub(crate) const MAX_FREQ: u8 = 3;

/// Requests an entry needs while in S3-FIFO's small queue to move to main when it reaches
/// the tail: two, the default of the authors' reference implementation (libCacheSim's
/// `S3FIFO`, "move-to-main-threshold=2"). One request is the first sighting's own
/// follow-up, often a burst; two show reuse.
const PROMOTE_AT: u8 = 2;

/// Share of the capacity S3-FIFO's small queue starts with, from the paper (which found
/// 10% best across its 6,594 traces, and robust between 5% and 20%).
const SMALL_SHARE: u64 = 10;

/// Neither queue shrinks below a hundredth of the whole cache's capacity (as in
/// libCacheSim's `S3FIFOd`, the S3-FIFO authors' adaptive variant); a shard takes its share
/// of that, and at least 1.
const MIN_SHARE: u64 = 100;

/// Evictions from each queue whose keys count as recent: a tenth of the entries, the
/// window of libCacheSim's `S3FIFOd`. Each queue's recent keys are two generations of a
/// twentieth each, so they never count a key that window would have forgotten.
const RECENT_SHARE: usize = 20;

/// Sampled keys a generation of recent keys holds at least. A larger cache tracks only a
/// sample of its keys (1 in a power of two, by hash) and moves the split by that many
/// times a sampled key's weight: the signal keeps its mean and the work per miss stays
/// bounded, whatever the cache's size.
const MIN_SAMPLED: usize = 64;

/// Most keys one sampled key stands for. The sample takes hash bits 40 and up (see
/// [`Split::new`]); this keeps it below bit 56, clear of the table's top 7 bits.
const MAX_RATE: usize = 1 << 16;

/// Keys S3-FIFO's ghosts remember by default in a cache of `entries` entries (at least
/// 1): the main queue's share, the size of the ghost queue in S3-FIFO's paper.
pub(crate) fn default_ghost_capacity(entries: usize) -> usize {
    (entries - entries / SMALL_SHARE as usize).max(1)
}

/// A shard's policy: where admitted keys go and what eviction takes.
pub(crate) struct Policy {
    pub(crate) kind: AdmissionPolicy,
    /// Most total weight held.
    pub(crate) capacity: u64,
    /// What S3-FIFO adds, under that policy.
    pub(crate) s3fifo: Option<S3Fifo>,
}

/// S3-FIFO's part of a shard: its ghost queue, and its share of the split between the
/// queues.
pub(crate) struct S3Fifo {
    pub(crate) ghosts: BloomGhosts,
    /// The split, shared with the other shards.
    pub(crate) split: Arc<SharedSplit>,
    /// This shard's share of the cache's capacity, in 2^-32ths: it scales the shared
    /// small-queue target to the shard.
    scale: u64,
    /// How long the ghosts remember (and, with a sketch, the credit), learnt from the
    /// shard's hit ratio.
    pub(crate) climber: Climber,
    /// The frequency sketch and the recency credit, under [`AdmissionPolicy::S3FifoLfu`]
    /// (boxed: a shard's slot stays a power of two in size).
    pub(crate) lfu: Option<Box<Lfu>>,
}

/// Most credit a returning ghost gets: one more than a counter holds, so that at full
/// credit every returning ghost enters main, as under plain S3-FIFO.
const MAX_CREDIT: f64 = 16.0;

/// The frequency part of [`AdmissionPolicy::S3FifoLfu`] in a shard.
pub(crate) struct Lfu {
    pub(crate) sketch: Sketch,
    /// Where the credit stands, from 0 to 1 of [`MAX_CREDIT`]: one climber's step
    /// (a sixteenth) is one request.
    pub(crate) lean: f64,
    /// The credit: requests a returning ghost's recency counts for against main's victim.
    credit: u8,
    /// The credit's hill. The climber's samples move the ghosts' reach and the credit by
    /// turns, so that each move is judged by a sample of its own.
    pub(crate) hill: Hill,
    /// Whether the next sample moves the credit.
    pub(crate) turn: bool,
    /// The last sample's hit ratio, whichever knob it moved.
    pub(crate) last: f64,
}

impl Lfu {
    /// A sketch for about `entries` entries, and the credit at its start: [`PROMOTE_AT`]
    /// requests, what S3-FIFO asks of a key in the small queue to move it to main (a
    /// returning ghost's recency counts as much as the requests that would have promoted
    /// it). The climber moves it from there.
    fn new(entries: usize) -> Result<Self, BuildError> {
        let mut lfu = Lfu {
            sketch: Sketch::new(entries)?,
            lean: 0.0,
            credit: 0,
            hill: Hill::new(),
            turn: false,
            last: 0.0,
        };
        lfu.set_lean(f64::from(PROMOTE_AT) / MAX_CREDIT);
        Ok(lfu)
    }

    #[cfg(feature = "serde")]
    /// Appends 1 and the sketch's part of a shard to `out`, for a cache's save
    /// (little-endian): the credit's place, its hill, whether it moves next, the last
    /// sample's hit ratio (`f64` bits, and a byte for the turn), then the sketch.
    pub(crate) fn save(&self, out: &mut Vec<u8>) {
        out.push(1);
        out.extend_from_slice(&self.lean.to_bits().to_le_bytes());
        self.hill.save(out);
        out.push(u8::from(self.turn));
        out.extend_from_slice(&self.last.to_bits().to_le_bytes());
        self.sketch.save(out);
    }

    #[cfg(feature = "serde")]
    /// Reads what [`Lfu::save`] wrote (or the 0 written without a sketch), and has `into`
    /// take it over if its sketch is sized as the saved one; an error if a field is out
    /// of range.
    pub(crate) fn restore<R: std::io::Read + ?Sized>(
        d: &mut crate::snapshot::Decoder<'_, R>,
        into: Option<&mut Lfu>,
    ) -> Result<(), crate::snapshot::SnapshotError> {
        let inconsistent = crate::snapshot::SnapshotError::inconsistent;
        match d.u8()? {
            0 => return Ok(()),
            1 => {}
            _ => return Err(inconsistent("cache sketch flag")),
        }
        let lean = f64::from_bits(d.u64()?);
        let hill = Hill::restore(d)?;
        let turn = match d.u8()? {
            0 => false,
            1 => true,
            _ => return Err(inconsistent("cache sketch turn")),
        };
        let last = f64::from_bits(d.u64()?);
        if !(0.0..=1.0).contains(&lean) || !(0.0..=1.0).contains(&last) {
            return Err(inconsistent("cache sketch credit"));
        }
        match into {
            Some(lfu) => {
                if lfu.sketch.restore(d, true)? {
                    (lfu.hill, lfu.turn, lfu.last) = (hill, turn, last);
                    lfu.set_lean(lean);
                }
            }
            None => _ = Sketch::new(1).expect("a sketch of one key").restore(d, false)?,
        }
        Ok(())
    }

    /// Sets where the credit stands (clamped to 0 to 1).
    pub(crate) fn set_lean(&mut self, lean: f64) {
        self.lean = if lean.is_nan() { 0.0 } else { lean.clamp(0.0, 1.0) };
        self.credit = (self.lean * MAX_CREDIT).round() as u8;
    }
}

/// S3-FIFO's split between its queues, one for the whole cache. The shards see the same
/// workload (keys go to shards by hash), so one target fed by all their evictions serves
/// each of them, and sampling the whole cache's keys rather than each shard's keeps the
/// work per miss as small with many small shards as with one large one.
pub(crate) struct SharedSplit {
    /// The recent evictions, taken under the lock by sampled keys only (every key in a
    /// cache of under about 2,560 entries). On its own cache lines: the fields below are
    /// read on every miss.
    recent: CachePadded<Mutex<Split>>,
    /// The small queue's target weight in the whole cache; written under `recent`'s lock,
    /// read by the shards without it (a target, so a stale read is harmless).
    small: AtomicU64,
    /// The whole cache's capacity.
    capacity: u64,
    /// [`Split::sample`], readable without the lock.
    sample: u64,
}

impl SharedSplit {
    /// The split of a cache of `capacity` weight in about `entries` entries; its small
    /// queue starts at [`SMALL_SHARE`] of the capacity.
    pub(crate) fn new(capacity: u64, entries: usize) -> Result<Self, BuildError> {
        let split = Split::new(entries)?;
        Ok(SharedSplit {
            sample: split.sample,
            recent: CachePadded::new(Mutex::new(split)),
            small: AtomicU64::new((capacity / SMALL_SHARE).max(1)),
            capacity,
        })
    }

    #[cfg(feature = "serde")]
    /// The small queue's target weight in the whole cache, and its capacity.
    pub(crate) fn target(&self) -> (u64, u64) {
        (self.small.load(Ordering::Relaxed), self.capacity)
    }

    #[cfg(feature = "serde")]
    /// Sets the small queue's target to `small` of `of`: a saved cache's, scaled to this
    /// one's capacity, within [`MIN_SHARE`] of either end.
    pub(crate) fn set_target(&self, small: u64, of: u64) {
        let floor = (self.capacity / MIN_SHARE).max(1);
        let scaled = (u128::from(small) * u128::from(self.capacity) / u128::from(of.max(1))) as u64;
        let _recent = self.recent.lock();
        self.small
            .store(scaled.clamp(floor, self.capacity.saturating_sub(floor).max(floor)), Ordering::Relaxed);
    }

    #[cfg(feature = "serde")]
    /// Appends the recent evictions to `out`, for a cache's save: the sampling rate, then
    /// the small queue's and main's ghosts.
    pub(crate) fn save_recent(&self, out: &mut Vec<u8>) {
        let recent = self.recent.lock();
        out.extend_from_slice(&recent.rate.to_le_bytes());
        recent.small.save(out);
        recent.main.save(out);
    }

    #[cfg(feature = "serde")]
    /// Reads what [`SharedSplit::save_recent`] wrote: the sampling rate and the ghosts.
    pub(crate) fn read_recent<R: std::io::Read + ?Sized>(
        d: &mut crate::snapshot::Decoder<'_, R>,
    ) -> Result<(u64, Ghosts, Ghosts), crate::snapshot::SnapshotError> {
        Ok((d.u64()?, Ghosts::restore(d)?, Ghosts::restore(d)?))
    }

    #[cfg(feature = "serde")]
    /// Takes over recent evictions [`SharedSplit::read_recent`] read, if they were
    /// sampled and sized as these are.
    pub(crate) fn adopt_recent(&self, (rate, small, main): (u64, Ghosts, Ghosts)) {
        let mut recent = self.recent.lock();
        if rate == recent.rate && recent.small.sized_as(&small) && recent.main.sized_as(&main) {
            (recent.small, recent.main) = (small, main);
        }
    }

    /// Whether the key of `hash` is in the sample.
    #[inline]
    fn tracks(&self, hash: u64) -> bool {
        hash & self.sample == 0
    }

    /// [`Split::adapt`], on the shared target.
    #[inline(never)]
    fn adapt(&self, hash: u64, ghost: bool, weight: u64) {
        let mut recent = self.recent.lock();
        let before = self.small.load(Ordering::Relaxed);
        let mut small = before;
        recent.adapt(hash, ghost, weight, &mut small, self.capacity);
        if small != before {
            self.small.store(small, Ordering::Relaxed);
        }
    }

    /// [`Split::record`], under the lock. Out of line: most keys are not sampled, and
    /// their path stays short.
    #[inline(never)]
    fn record_sampled(&self, hash: u64, queue: Queue) {
        self.recent.lock().record_sampled(hash, queue);
    }
}

/// The keys each of S3-FIFO's queues evicted recently. A miss on one of them would have
/// been a hit had that queue been a little larger: it moves the split between the queues
/// by the key's weight towards that queue, the rule of ARC (Megiddo and Modha, FAST
/// 2003) applied to S3-FIFO's queues as libCacheSim's `S3FIFOd` does.
struct Split {
    small: Ghosts,
    main: Ghosts,
    /// Keys are tracked if these bits of their hash are clear; 1 in `rate`.
    sample: u64,
    rate: u64,
}

impl Split {
    fn new(entries: usize) -> Result<Self, BuildError> {
        let window = entries / RECENT_SHARE;
        let rate = (window / MIN_SAMPLED).clamp(1, MAX_RATE);
        let rate = 1 << rate.ilog2();
        // Bits of the hash no table uses: the shard takes the low half's top bits, the
        // shard's table its low bits and top 7 bits.
        let sample = (rate as u64 - 1) << 40;
        Ok(Split {
            small: Ghosts::new(window / rate)?,
            main: Ghosts::new(window / rate)?,
            sample,
            rate: rate as u64,
        })
    }

    /// Whether the key of `hash` is in the sample.
    #[cfg(test)]
    fn tracks(&self, hash: u64) -> bool {
        hash & self.sample == 0
    }

    /// Remembers a sampled key evicted from `queue`.
    #[cfg(test)]
    fn record(&mut self, hash: u64, queue: Queue) {
        if self.tracks(hash) {
            self.record_sampled(hash, queue);
        }
    }

    #[inline]
    fn record_sampled(&mut self, hash: u64, queue: Queue) {
        match queue {
            Queue::Small => self.small.record(hash),
            Queue::Main => self.main.record(hash),
        }
    }

    /// Moves the small queue's target `small` (within [`MIN_SHARE`] of either end of
    /// `capacity`) if the missed key of `hash`, of `weight`, was evicted recently. Only a
    /// `ghost` can have left the small queue recently (the ghosts remember more of its
    /// evictions than its window does), and only a key that is not can have left main.
    #[inline]
    fn adapt(&mut self, hash: u64, ghost: bool, weight: u64, small: &mut u64, capacity: u64) {
        let (weight, floor) = (weight.saturating_mul(self.rate), (capacity / MIN_SHARE).max(1));
        if !ghost {
            if self.main.take(self.main.place(hash)) {
                *small = small.saturating_sub(weight).max(floor);
            }
        } else if self.small.take(self.small.place(hash)) {
            *small = small.saturating_add(weight).min(capacity.saturating_sub(floor).max(floor));
        }
    }
}

/// What left a shard, and why, kept to be told to the listener and dropped after the
/// lock is released. (Whoever removes an entry counts it in the shard's counters.)
pub(crate) struct Removed<K, V> {
    /// Whether to keep entries whose drop runs no code: a listener wants them.
    keep: bool,
    first: Option<(K, V, RemovalCause)>,
    more: Vec<(K, V, RemovalCause)>,
}

impl<K, V> Removed<K, V> {
    /// Nothing yet; `keep` if a listener is to be told.
    pub(crate) fn new(keep: bool) -> Self {
        Removed { keep, first: None, more: Vec::new() }
    }

    #[inline]
    pub(crate) fn push(&mut self, (key, value): (K, V), cause: RemovalCause) {
        if !self.keep && !std::mem::needs_drop::<(K, V)>() {
            // Dropping it runs no code, user code least of all, and no one is told.
            return;
        }
        match self.first {
            None => self.first = Some((key, value, cause)),
            Some(_) => self.more.push((key, value, cause)),
        }
    }
}

impl<K, V> IntoIterator for Removed<K, V> {
    type Item = (K, V, RemovalCause);
    type IntoIter = std::iter::Chain<std::option::IntoIter<Self::Item>, std::vec::IntoIter<Self::Item>>;

    fn into_iter(self) -> Self::IntoIter {
        self.first.into_iter().chain(self.more)
    }
}

impl Policy {
    /// A shard's policy for `capacity` weight; under S3-FIFO its ghosts remember `ghosts`
    /// keys per generation and it takes its part of `split`. An error if S3-FIFO's tables
    /// do not fit in memory.
    pub(crate) fn new(
        kind: AdmissionPolicy,
        capacity: u64,
        entries: usize,
        ghosts: usize,
        split: Option<Arc<SharedSplit>>,
    ) -> Result<Self, BuildError> {
        debug_assert!(!kind.is_s3fifo() || split.is_some(), "S3-FIFO needs its split");
        let s3fifo = match split {
            Some(split) if kind.is_s3fifo() => {
                let lfu = kind == AdmissionPolicy::S3FifoLfu;
                let whole = split.capacity.max(1);
                debug_assert!(capacity <= whole, "a shard holds part of the cache");
                let ghosts = BloomGhosts::new(ghosts)?;
                Some(S3Fifo {
                    climber: Climber::new(0, ghosts.capacity()),
                    lfu: if lfu { Some(Box::new(Lfu::new(entries)?)) } else { None },
                    ghosts,
                    split,
                    scale: ((u128::from(capacity) << 32) / u128::from(whole)) as u64,
                })
            }
            _ => None,
        };
        Ok(Policy { kind, capacity, s3fifo })
    }

    /// Where a missed key of `weight` goes, or `None` if it is kept out. Asks the gate
    /// (recording the key) or the ghosts (forgetting it), as the policy needs; under
    /// S3-FIFO the miss, with `hits` the shard's lock's count, feeds the climber.
    #[inline(always)]
    pub(crate) fn admit<K, V>(
        &mut self,
        store: &mut Store<K, V>,
        hash: u64,
        weight: u32,
        gate: Option<&SeenBefore>,
        hits: u64,
    ) -> Option<Queue> {
        match (&mut self.s3fifo, gate) {
            (Some(s3fifo), _) => {
                if let Some(rate) = s3fifo.climber.miss(hits) {
                    s3fifo.sample_end(rate);
                }
                s3fifo.admit(store, hash, weight, self.capacity)
            }
            (None, Some(gate)) if self.kind == AdmissionPolicy::SecondHit => {
                gate.admit_hash(hash).then_some(Queue::Main)
            }
            // Always; SecondHit always has its gate.
            _ => Some(Queue::Main),
        }
    }

    /// Where a key stored by name (a compute, not subject to admission) goes: where S3-FIFO
    /// puts a missed key, or main.
    #[inline]
    pub(crate) fn place<K, V>(&mut self, store: &mut Store<K, V>, hash: u64, weight: u32) -> Queue {
        match &mut self.s3fifo {
            Some(s3fifo) => s3fifo.admit(store, hash, weight, self.capacity).unwrap_or(Queue::Main),
            None => Queue::Main,
        }
    }

    /// Evicts until the shard holds at most its capacity, sparing `spare` (an entry just
    /// stored) while anything else can go. An entry expired at `now` that eviction comes
    /// to leaves first, whatever its requests, and is not remembered as evicted. How many
    /// entries it evicted, and how many of those it came to had expired.
    #[inline(always)]
    pub(crate) fn evict<K, V>(
        &mut self,
        store: &mut Store<K, V>,
        spare: Option<u32>,
        gate: Option<&SeenBefore>,
        now: u64,
        out: &mut Removed<K, V>,
    ) -> (u64, u64) {
        let (mut evicted, mut expired) = (0, 0);
        while store.total_weight() > self.capacity {
            let victim = match (&mut self.s3fifo, self.kind) {
                // Written out rather than chained with `Option::or_else`, whose closures
                // the compiler may leave as calls on this path.
                (Some(s3fifo), _) => {
                    let small = s3fifo.small();
                    let mut sketch = s3fifo.lfu.as_mut().map(|lfu| &mut lfu.sketch);
                    match S3Fifo::small_tail(small, store, spare, false, now, &mut sketch) {
                        Some(victim) => Some(victim),
                        None => match clock(store, spare, now, &mut sketch) {
                            Some(victim) => Some(victim),
                            // Main held nothing else: empty the small queue, then look again.
                            None => match S3Fifo::small_tail(small, store, spare, true, now, &mut sketch) {
                                Some(victim) => Some(victim),
                                None => clock(store, spare, now, &mut sketch),
                            },
                        },
                    }
                }
                (None, AdmissionPolicy::Always) => store.tail(Queue::Main).filter(|&v| Some(v) != spare),
                (None, _) => clock(store, spare, now, &mut None),
            };
            let (lapsed, entry) = match (victim, spare) {
                (Some(victim), _) => (store.expired(victim, now), store.remove_tail(victim)),
                // Nothing else left: the spared entry outweighs the rest of the shard.
                (None, Some(spare)) => (false, store.remove(spare)),
                (None, None) => break,
            };
            if lapsed {
                out.push((entry.key, entry.value), RemovalCause::Expired);
                expired += 1;
                continue;
            }
            match (gate, &mut self.s3fifo) {
                // SecondHit remembers every evicted key, to readmit it at once.
                (Some(gate), _) => gate.record_hash(entry.hash),
                (_, Some(s3fifo)) => s3fifo.evicted(entry.hash, entry.queue()),
                _ => {}
            }
            out.push((entry.key, entry.value), RemovalCause::Evicted);
            evicted += 1;
        }
        (evicted, expired)
    }
}

impl S3Fifo {
    /// The end of one of the climber's samples, of hit ratio `rate`: the move it makes to
    /// the ghosts' reach or, every other sample under [`AdmissionPolicy::S3FifoLfu`], to
    /// the credit; and the sketch's reset (TinyLFU halves its counters every ten times
    /// the cache's size in requests, the length of the climber's sample), or its clearing
    /// if the hit ratio fell by the climber's restart threshold.
    #[cold]
    #[inline(never)]
    fn sample_end(&mut self, rate: f64) {
        let Some(lfu) = &mut self.lfu else {
            self.ghosts.stretch(self.climber.reach(rate));
            return;
        };
        if lfu.turn {
            let share = lfu.hill.climb(rate);
            lfu.set_lean(lfu.lean + share);
        } else {
            self.ghosts.stretch(self.climber.reach(rate));
        }
        lfu.turn = !lfu.turn;
        // The workload changed (the hit ratio fell by the climber's restart threshold):
        // what the sketch counted was of the one before, and would hold its keys in main
        // against the new one's. (A rise as large is the policy's own doing, the credit
        // finding its place, and keeps what the sketch learnt.)
        if lfu.last - rate >= RESTART {
            lfu.sketch.clear();
        } else {
            lfu.sketch.reset();
        }
        lfu.last = rate;
    }

    /// The small queue's target weight in this shard: its share of the shared target,
    /// rounded up (so at least 1, and exactly that target in a cache of one shard).
    #[inline]
    fn small(&self) -> u64 {
        let whole = self.split.small.load(Ordering::Relaxed);
        ((u128::from(whole) * u128::from(self.scale) + u128::from(u32::MAX)) >> 32) as u64
    }

    /// Where a missed key of `weight` goes, in a shard of `capacity` weight. Asks the
    /// ghosts (forgetting the key).
    #[inline(always)]
    fn admit<K, V>(
        &mut self,
        store: &mut Store<K, V>,
        hash: u64,
        weight: u32,
        capacity: u64,
    ) -> Option<Queue> {
        let ghost = self.ghosts.take(hash);
        if self.split.tracks(hash) {
            self.split.adapt(hash, ghost, u64::from(weight));
        }
        if ghost {
            // A ghost: it left the small queue unused, and came back.
            match self.lfu.is_some() {
                true => self.contest(store, hash, weight, capacity),
                false => Some(Queue::Main),
            }
        } else if store.total_weight() < capacity && store.weight(Queue::Small) >= self.small() {
            // Still filling up with the small queue at its share: new keys go to main
            // rather than push out keys that have had no time to prove themselves (as
            // libCacheSim's S3-FIFO does).
            Some(Queue::Main)
        } else {
            Some(Queue::Small)
        }
    }

    /// Where a returning ghost goes under [`AdmissionPolicy::S3FifoLfu`]: counted, then
    /// to main if main has room or will not give up an entry for it, or if it was asked
    /// for more often than main's victim less the credit; otherwise to the small queue,
    /// as a new key. The victim is the entry CLOCK would take next: the hand moves past
    /// the entries with requests left now (as the eviction would), banking them.
    #[cold]
    #[inline(never)]
    fn contest<K, V>(
        &mut self,
        store: &mut Store<K, V>,
        hash: u64,
        weight: u32,
        capacity: u64,
    ) -> Option<Queue> {
        let small = self.small();
        let Some(lfu) = &mut self.lfu else { return Some(Queue::Main) };
        lfu.sketch.add(hash, 1);
        // Main gives up an entry only once the shard is full and the small queue within
        // its share (otherwise the eviction takes from the small queue).
        if store.total_weight() + u64::from(weight) <= capacity || store.weight(Queue::Small) > small {
            return Some(Queue::Main);
        }
        let Some(victim) = clock_hand(store, &mut lfu.sketch) else { return Some(Queue::Main) };
        let candidate = lfu.sketch.frequency(hash).saturating_add(lfu.credit);
        if candidate > lfu.sketch.frequency(store.entry(victim).hash) {
            Some(Queue::Main)
        } else {
            Some(Queue::Small)
        }
    }

    /// Remembers the key of `hash`, just evicted from `queue`: as a ghost if it left the
    /// small queue unused, and in the split's windows if sampled.
    #[inline(always)]
    fn evicted(&mut self, hash: u64, queue: Queue) {
        if queue == Queue::Small {
            self.ghosts.record(hash);
        }
        if self.split.tracks(hash) {
            self.split.record_sampled(hash, queue);
        }
    }

    /// S3-FIFO's small queue, while it is over its share (or main is empty), or always
    /// with `force`: takes entries off its tail, moving those requested [`PROMOTE_AT`]
    /// times since they entered to main, until one that was not is found (the victim).
    /// `None` if the queue holds nothing but `spare`.
    #[inline(always)]
    fn small_tail<K, V>(
        small: u64,
        store: &mut Store<K, V>,
        spare: Option<u32>,
        force: bool,
        now: u64,
        sketch: &mut Option<&mut Sketch>,
    ) -> Option<u32> {
        let over = |store: &Store<K, V>| {
            force || store.weight(Queue::Small) > small || store.weight(Queue::Main) == 0
        };
        while over(store) {
            let tail = store.tail(Queue::Small)?;
            let entry = store.entry(tail);
            let freq = entry.freq.load(Ordering::Relaxed);
            if Some(tail) != spare && store.expired(tail, now) {
                return Some(tail);
            } else if freq >= PROMOTE_AT {
                if let Some(sketch) = sketch {
                    sketch.add(entry.hash, freq);
                }
                entry.freq.store(0, Ordering::Relaxed);
                store.requeue(tail, Queue::Main);
            } else if Some(tail) != spare {
                return Some(tail);
            } else if store.holds_one(Queue::Small) {
                return None;
            } else {
                // The entry just stored is the oldest: it goes to the head, as new.
                store.rotate(Queue::Small);
            }
        }
        None
    }
}

/// CLOCK over the main queue: an entry at the tail with requests left gets another
/// round for one of them; the first without, or expired at `now`, is the victim. `None`
/// if main holds nothing but `spare`.
#[inline(always)]
fn clock<K, V>(
    store: &mut Store<K, V>,
    spare: Option<u32>,
    now: u64,
    sketch: &mut Option<&mut Sketch>,
) -> Option<u32> {
    // Each pass over an entry lowers its count, so this ends within MAX_FREQ + 1
    // passes over the queue.
    while let Some(tail) = store.tail(Queue::Main) {
        let entry = store.entry(tail);
        let freq = entry.freq.load(Ordering::Relaxed);
        if Some(tail) == spare {
            if store.holds_one(Queue::Main) {
                return None;
            }
        } else if freq == 0 || store.expired(tail, now) {
            return Some(tail);
        }
        if let (Some(sketch), true) = (sketch.as_deref_mut(), freq > 0) {
            sketch.add(entry.hash, 1);
        }
        entry.freq.store(freq.saturating_sub(1), Ordering::Relaxed);
        store.rotate(Queue::Main);
    }
    None
}

/// The entry [`clock`] would take next from main, the hand moved past entries with
/// requests left (each banked in `sketch` for the round it buys). `None` if main is empty.
fn clock_hand<K, V>(store: &mut Store<K, V>, sketch: &mut Sketch) -> Option<u32> {
    while let Some(tail) = store.tail(Queue::Main) {
        let entry = store.entry(tail);
        let freq = entry.freq.load(Ordering::Relaxed);
        if freq == 0 {
            return Some(tail);
        }
        sketch.add(entry.hash, 1);
        entry.freq.store(freq - 1, Ordering::Relaxed);
        store.rotate(Queue::Main);
    }
    None
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::{AdmissionPolicy, Ordering, Policy, Queue, SharedSplit, Split};

    /// Hashes every split tracks, whatever its sampling rate.
    fn hash(k: u64) -> u64 {
        crate::filter::seeded_hasher(5).hash_one(k) & !(u64::MAX << 40)
    }

    #[test]
    fn misses_on_recent_evictions_move_the_split_towards_their_queue() {
        let (capacity, mut small) = (1_000, 100);
        let mut split = Split::new(1_000).unwrap();
        assert_eq!(split.rate, 1, "a window of 50 keys is not sampled");
        split.record(hash(1), Queue::Small);
        split.record(hash(2), Queue::Main);
        split.adapt(hash(1), true, 3, &mut small, capacity);
        assert_eq!(small, 103, "a ghost the small queue evicted recently grows it by its weight");
        split.adapt(hash(1), true, 3, &mut small, capacity);
        assert_eq!(small, 103, "counted once");
        split.adapt(hash(2), false, 1, &mut small, capacity);
        assert_eq!(small, 102, "a key main evicted recently shrinks the small queue");
        split.adapt(hash(3), false, 1, &mut small, capacity);
        assert_eq!(small, 102, "a key neither queue evicted recently moves nothing");
    }

    #[test]
    fn the_split_leaves_each_queue_a_hundredth() {
        let (capacity, mut small) = (1_000, 100);
        let mut split = Split::new(1_000).unwrap();
        for k in 0..40 {
            split.record(hash(k), Queue::Main);
            split.adapt(hash(k), false, 5, &mut small, capacity);
        }
        assert_eq!(small, 10);
        for k in 100..140 {
            split.record(hash(k), Queue::Small);
            split.adapt(hash(k), true, 50, &mut small, capacity);
        }
        assert_eq!(small, 990);
    }

    #[test]
    fn large_caches_sample_their_keys_and_scale_the_step() {
        let mut split = Split::new(1_000_000).unwrap();
        assert_eq!(split.rate, 512, "windows of 50,000 keys, at least 64 of them sampled");
        let tracked =
            (0..100_000).filter(|&k| split.tracks(crate::filter::seeded_hasher(5).hash_one(k))).count();
        assert!((150..250).contains(&tracked), "{tracked} of 100,000 keys tracked, about 195 expected");
        let (capacity, mut small) = (1_000_000, 100_000);
        split.record(hash(1), Queue::Small);
        split.adapt(hash(1), true, 1, &mut small, capacity);
        assert_eq!(small, 100_512, "a sampled key stands for `rate` keys");
    }

    #[test]
    fn huge_caches_cap_the_sampling_rate() {
        let mut split = Split::new((20 * 64) << 20).unwrap();
        assert_eq!(split.rate, 1 << 16, "the sample stays within hash bits 40 to 55");
        let (capacity, mut small) = (u64::MAX, 1 << 40);
        split.record(hash(1), Queue::Small);
        split.adapt(hash(1), true, u64::from(u32::MAX), &mut small, capacity);
        assert_eq!(small, (1 << 40) + (u64::from(u32::MAX) << 16), "the heaviest step fits");
    }

    #[test]
    fn shards_share_one_split_each_at_its_share() {
        let split = Arc::new(SharedSplit::new(1_000, 1_000).unwrap());
        let shard = |capacity| {
            let policy = Policy::new(AdmissionPolicy::S3Fifo, capacity, 16, 16, Some(split.clone())).unwrap();
            policy.s3fifo.expect("S3-FIFO's part")
        };
        let (small, large) = (shard(250), shard(750));
        assert_eq!((small.small(), large.small()), (25, 75), "a tenth of each shard to start");
        split.recent.lock().record(hash(1), Queue::Small);
        split.adapt(hash(1), true, 100);
        assert_eq!((small.small(), large.small()), (50, 150), "a miss in either shard moves both");
        let whole = shard(1_000);
        assert_eq!(whole.small(), 200, "one shard takes the shared target exactly");
    }

    #[test]
    fn concurrent_shards_lose_no_step_of_the_split() {
        // Four shards' misses at once, each on a key its shard evicted from the small
        // queue just before: every step must count. The windows hold 4,096 sampled keys
        // (at the largest sampling rate), so a thread descheduled between its record and
        // its miss still finds its key.
        let capacity = 1 << 40;
        let split = Arc::new(SharedSplit::new(capacity, 20 << 28).unwrap());
        let rate = split.recent.lock().rate;
        assert_eq!(rate, 1 << 16);
        let start = split.small.load(Ordering::Relaxed);
        std::thread::scope(|s| {
            for t in 0..4u64 {
                let split = &split;
                s.spawn(move || {
                    for k in (t * 1_000..).take(1_000) {
                        split.record_sampled(hash(k), Queue::Small);
                        split.adapt(hash(k), true, 1);
                    }
                });
            }
        });
        assert_eq!(split.small.load(Ordering::Relaxed), start + 4_000 * rate);
    }
}
