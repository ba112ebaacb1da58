//! The admission and eviction policies: which misses a shard stores, where they go, and
//! which entry leaves when the shard is over its weight.

use super::ghost::Ghosts;
use super::store::{Queue, Store};
use crate::gate::SeenBefore;
use crate::primitive::Ordering;

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
    /// S3-FIFO (Yang et al., SOSP 2023). New keys enter a small FIFO holding a tenth of
    /// the capacity; a key requested twice more while there moves to the main FIFO when
    /// it reaches the tail, and one that was not leaves the cache and is remembered as a
    /// ghost. A miss on a ghost goes straight to main. The ghost queue is the gate's
    /// design cut down for one shard: two generations of 16-bit fingerprints, written
    /// under the shard's lock. Main evicts in CLOCK order, an entry getting one more
    /// round per request (up to three). One-hit wonders and scans pass through the small queue
    /// without displacing keys that were used twice. Hits only bump a counter, under the
    /// shard's read lock.
    #[default]
    S3Fifo,
}

/// Most requests an entry's counter remembers (two bits, as in S3-FIFO).
pub(crate) const MAX_FREQ: u8 = 3;

/// Requests an entry needs while in S3-FIFO's small queue to move to main when it reaches
/// the tail: two, the default of the authors' reference implementation (libCacheSim's
/// `S3FIFO`, "move-to-main-threshold=2"). One request is the first sighting's own
/// follow-up, often a burst; two show reuse.
const PROMOTE_AT: u8 = 2;

/// Share of a shard's capacity given to S3-FIFO's small queue, from the paper (which
/// found 10% best across its 6,594 traces, and robust between 5% and 20%).
const SMALL_SHARE: u64 = 10;

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
    /// S3-FIFO's small-queue target weight.
    small: u64,
    /// S3-FIFO's ghost queue.
    pub(crate) ghosts: Option<Ghosts>,
}

/// What eviction took out of a shard, kept to be dropped after the lock is released.
pub(crate) struct Evicted<K, V> {
    count: usize,
    first: Option<(K, V)>,
    more: Vec<(K, V)>,
}

impl<K, V> Evicted<K, V> {
    pub(crate) fn new() -> Self {
        Evicted { count: 0, first: None, more: Vec::new() }
    }

    #[inline]
    pub(crate) fn push(&mut self, entry: (K, V)) {
        self.count += 1;
        if !std::mem::needs_drop::<(K, V)>() {
            // Dropping it runs no code, user code least of all: nothing to keep.
            return;
        }
        match self.first {
            None => self.first = Some(entry),
            Some(_) => self.more.push(entry),
        }
    }

    pub(crate) fn count(&self) -> usize {
        self.count
    }
}

impl Policy {
    /// A shard's policy; under S3-FIFO its ghosts remember `ghosts` keys per generation.
    pub(crate) fn new(kind: AdmissionPolicy, capacity: u64, ghosts: usize) -> Self {
        let ghosts = (kind == AdmissionPolicy::S3Fifo).then(|| Ghosts::new(ghosts));
        Policy { kind, capacity, small: (capacity / SMALL_SHARE).max(1), ghosts }
    }

    /// Where a missed key goes, or `None` if it is kept out. Asks the gate (recording the
    /// key) or the ghosts (forgetting it), as the policy needs.
    #[inline]
    pub(crate) fn admit<K, V>(
        &mut self,
        store: &Store<K, V>,
        hash: u64,
        gate: Option<&SeenBefore>,
    ) -> Option<Queue> {
        match (self.kind, gate) {
            (AdmissionPolicy::SecondHit, Some(gate)) => {
                if gate.check_and_record_hash(hash) {
                    gate.take_hash(hash);
                    Some(Queue::Main)
                } else {
                    None
                }
            }
            (AdmissionPolicy::S3Fifo, _) => {
                let ghost = self.ghosts.as_mut().is_some_and(|ghosts| {
                    // A miss asks the ghosts and evicts from the small queue's tail: start
                    // both loads now, so that their cache misses overlap.
                    let place = ghosts.place(hash);
                    store.prefetch_tail(Queue::Small);
                    ghosts.take(place)
                });
                if ghost {
                    // A ghost: it left the small queue unused, and came back.
                    Some(Queue::Main)
                } else if store.total_weight() < self.capacity && store.weight(Queue::Small) >= self.small {
                    // Still filling up with the small queue at its share: new keys go to
                    // main rather than push out keys that have had no time to prove
                    // themselves (as libCacheSim's S3-FIFO does).
                    Some(Queue::Main)
                } else {
                    Some(Queue::Small)
                }
            }
            // Always; SecondHit always has its gate.
            _ => Some(Queue::Main),
        }
    }

    /// Evicts until the shard holds at most its capacity, sparing `spare` (an entry just
    /// stored) while anything else can go.
    #[inline]
    pub(crate) fn evict<K, V>(
        &mut self,
        store: &mut Store<K, V>,
        spare: Option<u32>,
        gate: Option<&SeenBefore>,
        out: &mut Evicted<K, V>,
    ) {
        while store.total_weight() > self.capacity {
            let victim = match self.kind {
                AdmissionPolicy::Always => store.tail(Queue::Main).filter(|&v| Some(v) != spare),
                AdmissionPolicy::SecondHit => self.clock(store, spare),
                AdmissionPolicy::S3Fifo => self
                    .small_tail(store, spare, false)
                    .or_else(|| self.clock(store, spare))
                    // Main held nothing else: empty the small queue, then look again.
                    .or_else(|| self.small_tail(store, spare, true))
                    .or_else(|| self.clock(store, spare)),
            };
            // Nothing else left: the spared entry outweighs the rest of the shard.
            let Some(victim) = victim.or(spare) else { break };
            let entry = store.remove(victim);
            match (gate, &mut self.ghosts) {
                // SecondHit remembers every evicted key, to readmit it at once.
                (Some(gate), _) => gate.record_hash(entry.hash),
                // S3-FIFO's ghosts: keys that left the small queue unused.
                (_, Some(ghosts)) if entry.queue() == Queue::Small => ghosts.record(entry.hash),
                _ => {}
            }
            out.push((entry.key, entry.value));
        }
    }

    /// S3-FIFO's small queue, while it is over its share (or main is empty), or always
    /// with `force`: takes entries off its tail, moving those requested [`PROMOTE_AT`]
    /// times since they entered to main, until one that was not is found (the victim).
    #[inline(always)]
    fn small_tail<K, V>(&self, store: &mut Store<K, V>, spare: Option<u32>, force: bool) -> Option<u32> {
        let over = |store: &Store<K, V>| {
            force || store.weight(Queue::Small) > self.small || store.weight(Queue::Main) == 0
        };
        while over(store) {
            let tail = store.tail(Queue::Small).filter(|&t| Some(t) != spare)?;
            let freq = store.entry(tail).freq.load(Ordering::Relaxed);
            if freq < PROMOTE_AT {
                return Some(tail);
            }
            store.entry(tail).freq.store(0, Ordering::Relaxed);
            store.requeue(tail, Queue::Main);
        }
        None
    }

    /// CLOCK over the main queue: an entry at the tail with requests left gets another
    /// round for one of them; the first without is the victim. `None` if main holds
    /// nothing but `spare`.
    #[inline]
    fn clock<K, V>(&self, store: &mut Store<K, V>, spare: Option<u32>) -> Option<u32> {
        // Each pass over an entry lowers its count, so this ends within MAX_FREQ + 1
        // passes over the queue.
        while let Some(tail) = store.tail(Queue::Main) {
            let entry = store.entry(tail);
            let freq = entry.freq.load(Ordering::Relaxed);
            if Some(tail) == spare {
                if store.weight(Queue::Main) == u64::from(entry.weight) {
                    return None;
                }
            } else if freq == 0 {
                return Some(tail);
            }
            entry.freq.store(freq.saturating_sub(1), Ordering::Relaxed);
            store.requeue(tail, Queue::Main);
        }
        None
    }
}
