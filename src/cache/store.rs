//! A shard's entries: a hash table of slot indices, a slab of entries, and two queues.
//!
//! Each entry stores its key's hash, so the table never hashes a key again (growing the
//! table rehashes stored hashes), and removal finds an entry's table slot by index, never
//! by comparing keys. The only user code this module runs is `K::eq`, in [`Store::find`],
//! before it changes anything: a panicking `Eq` leaves the store as it was.
//!
//! A queue is a ring of (slot, stamp) pairs, oldest at the tail. Entering a queue stamps
//! the entry afresh; a pair whose stamp no longer matches its slot's entry (the entry left,
//! or entered a queue again) is stale, and is skipped and dropped when it reaches the
//! tail. So taking an entry off the tail, the policies' common move, touches the ring and
//! that one entry, where a linked list would also touch its neighbours. A full ring sweeps
//! out its stale pairs, rather than grow, once they outnumber the live ones.

use std::borrow::Borrow;

use hashbrown::HashTable;

use super::expiry::{Deadlines, Expiry, Span};
use crate::primitive::{prefetch, AtomicU8, Ordering};

/// Which queue an entry is on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Queue {
    /// New entries on probation (S3-FIFO's small queue).
    Small = 0,
    /// Everything else.
    Main = 1,
}

pub(crate) struct Entry<K, V> {
    pub(crate) key: K,
    pub(crate) value: V,
    pub(crate) hash: u64,
    /// Requests since insertion or since eviction last passed the entry over, capped;
    /// readers raise it under the shard's read lock.
    pub(crate) freq: AtomicU8,
    queue: Queue,
    /// Matches the entry's one live pair in its queue's ring.
    stamp: u32,
}

#[derive(Default)]
struct Ring {
    /// `slot << 32 | stamp`, oldest first.
    pairs: Pairs,
    /// Live entries, and their total weight.
    live: usize,
    weight: u64,
}

/// A FIFO of pairs in a ring buffer of a power-of-two size, which doubles when full.
/// `start` and `end` are free-running counters (wrapping), the oldest pair at `start`
/// masked and the next free place at `end` masked.
#[derive(Default)]
struct Pairs {
    buf: Box<[u64]>,
    start: usize,
    end: usize,
}

impl Pairs {
    fn len(&self) -> usize {
        self.end.wrapping_sub(self.start)
    }

    /// Whether the next push must grow the buffer.
    #[inline]
    fn is_full(&self) -> bool {
        self.len() == self.buf.len()
    }

    /// The pair `ahead` places after the oldest, if there is one.
    #[cfg(test)]
    fn nth(&self, ahead: usize) -> Option<u64> {
        (ahead < self.len()).then(|| self.buf[self.start.wrapping_add(ahead) & (self.buf.len() - 1)])
    }

    #[inline]
    fn oldest(&self) -> Option<u64> {
        if self.start == self.end {
            return None;
        }
        self.hint(0)
    }

    /// The pair `ahead` places after the oldest, or past the newest an old value of the
    /// buffer (or nothing, in an empty one): a hint for prefetching, not a queue entry.
    #[inline]
    fn hint(&self, ahead: usize) -> Option<u64> {
        self.buf.get(self.start.wrapping_add(ahead) & self.buf.len().wrapping_sub(1)).copied()
    }

    #[inline]
    fn pop_oldest(&mut self) {
        debug_assert!(self.len() > 0);
        self.start = self.start.wrapping_add(1);
    }

    #[inline]
    fn push(&mut self, pair: u64) {
        if self.is_full() {
            self.grow();
        }
        let mask = self.buf.len() - 1;
        self.buf[self.end & mask] = pair;
        self.end = self.end.wrapping_add(1);
    }

    /// Moves the oldest pair to the newest end (in place: the length does not change).
    #[inline]
    fn rotate(&mut self) {
        if self.len() > 0 {
            let mask = self.buf.len() - 1;
            self.buf[self.end & mask] = self.buf[self.start & mask];
            self.start = self.start.wrapping_add(1);
            self.end = self.end.wrapping_add(1);
        }
    }

    #[cold]
    fn grow(&mut self) {
        let mut buf = vec![0; (2 * self.buf.len()).max(16)].into_boxed_slice();
        let len = self.len();
        if len > 0 {
            // The pairs from `start` to the end of the buffer, then those that wrapped.
            let head = self.start & (self.buf.len() - 1);
            let first = len.min(self.buf.len() - head);
            buf[..first].copy_from_slice(&self.buf[head..head + first]);
            buf[first..len].copy_from_slice(&self.buf[..len - first]);
        }
        (self.buf, self.start, self.end) = (buf, 0, len);
    }

    /// Keeps the pairs `keep` accepts, in order.
    fn retain(&mut self, mut keep: impl FnMut(u64) -> bool) {
        let mask = self.buf.len().wrapping_sub(1);
        let mut kept = self.start;
        for i in 0..self.len() {
            let pair = self.buf[self.start.wrapping_add(i) & mask];
            if keep(pair) {
                self.buf[kept & mask] = pair;
                kept = kept.wrapping_add(1);
            }
        }
        self.end = kept;
    }
}

/// How far ahead of a queue's tail [`Store::tail`] prefetches.
const LOOKAHEAD: usize = 4;

/// In this order (`repr(C)`), so that a lookup reads the lines it read before expiry
/// existed: after the shard's lock word, the slab's pointer and length share its line,
/// and the table's mask and control pointer share the next with the deadlines' pointer,
/// which so lies apart from the queues' counters that every write changes.
#[repr(C)]
pub(crate) struct Store<K, V> {
    slots: Vec<Option<Entry<K, V>>>,
    free: Vec<u32>,
    /// Each slot's weight, in a weighted store; in an unweighted one every entry weighs 1,
    /// and entries stay small (32 bytes for `u64` keys and values).
    weights: Option<Vec<u32>>,
    table: HashTable<u32>,
    /// Each slot's deadline, once the store has held an entry with a lifetime (boxed: a
    /// lookup without expiry tests one word for null).
    deadlines: Option<Box<Deadlines>>,
    queues: [Ring; 2],
    next_stamp: u32,
    /// Entries the store expects to hold: its table is sized for them when it stores its
    /// first entry (a table that doubled would rehash every entry each time), its slots
    /// grow by doubling up to [`SIZED_AT`] entries, then straight to this many, so that a
    /// full store wastes no room and an empty one takes none.
    expected: usize,
}

/// Entries past which a store grows straight to the entries it expects.
const SIZED_AT: usize = 1024;

/// Most entries a store makes room for ahead of them.
const SIZED_UP_TO: usize = 1 << 16;

impl<K, V> Store<K, V> {
    /// A store with room for `entries`; `weighted` if its entries weigh other than 1.
    pub(crate) fn with_capacity(entries: usize, weighted: bool) -> Self {
        Store {
            table: HashTable::with_capacity(entries),
            slots: Vec::with_capacity(entries),
            weights: weighted.then(|| Vec::with_capacity(entries)),
            deadlines: None,
            free: Vec::new(),
            queues: [Ring::default(), Ring::default()],
            next_stamp: 0,
            expected: entries,
        }
    }

    /// An empty store that expects to hold about `entries` (see [`SIZED_AT`]; past
    /// [`SIZED_UP_TO`] it grows by doubling all along).
    pub(crate) fn expecting(entries: usize, weighted: bool) -> Self {
        Store { expected: entries.min(SIZED_UP_TO), ..Store::with_capacity(0, weighted) }
    }

    /// Room for one more slot in a full store of `len`: the table (which would otherwise
    /// rehash every entry at each doubling) sized for the entries expected at once, when
    /// the store first grows; the slots (and weights) doubled, or past [`SIZED_AT`] made the
    /// entries expected.
    #[cold]
    #[inline(never)]
    fn make_room(&mut self, len: usize) {
        if self.table.capacity() < self.expected {
            let slots = &self.slots;
            self.table.reserve(self.expected - self.table.len(), |&i| {
                slots[i as usize].as_ref().map_or(0, |e| e.hash)
            });
        }
        if len >= SIZED_AT && len < self.expected {
            let more = self.expected - len;
            self.slots.reserve_exact(more);
            if let Some(weights) = &mut self.weights {
                weights.reserve_exact(more);
            }
        } else {
            self.slots.reserve(1);
        }
    }

    pub(crate) fn len(&self) -> usize {
        self.table.len()
    }

    /// Total weight of the entries on `queue`.
    pub(crate) fn weight(&self, queue: Queue) -> u64 {
        self.queues[queue as usize].weight
    }

    /// Whether `queue` holds one live entry (the one [`Store::tail`] just returned).
    pub(crate) fn holds_one(&self, queue: Queue) -> bool {
        self.queues[queue as usize].live == 1
    }

    /// Total weight of all entries.
    pub(crate) fn total_weight(&self) -> u64 {
        self.queues[0].weight + self.queues[1].weight
    }

    /// The index of `key`'s entry.
    #[inline]
    pub(crate) fn find<Q: ?Sized + Eq>(&self, hash: u64, key: &Q) -> Option<u32>
    where
        K: Borrow<Q>,
    {
        let slots = &self.slots;
        self.table.find(hash, |&i| matches!(&slots[i as usize], Some(e) if e.key.borrow() == key)).copied()
    }

    /// The deadlines, if the store has held an entry with a lifetime.
    #[inline]
    pub(crate) fn deadlines(&self) -> Option<&Deadlines> {
        self.deadlines.as_deref()
    }

    /// Whether the entry at `index` expired at `now`.
    #[inline]
    pub(crate) fn expired(&self, index: u32, now: u64) -> bool {
        self.deadlines.as_ref().is_some_and(|deadlines| deadlines.expired(index, now))
    }

    /// Whether the entry at `index` expired at `now` and left its grace.
    #[inline]
    pub(crate) fn reclaimable(&self, index: u32, now: u64) -> bool {
        self.deadlines.as_ref().is_some_and(|deadlines| deadlines.reclaimable(index, now))
    }

    /// Gives the entry at `index`, written at `now`, its own lifetime `span` or else the
    /// cache's (and the cache's time to idle); the column is made (kept by `expiry`) the
    /// first time an entry gets a deadline at all. Inline for the common write, an entry
    /// given the cache's plain time to live in a column without windows.
    #[inline(always)]
    pub(crate) fn set_deadline(&mut self, index: u32, now: u64, span: Option<Span>, expiry: &Expiry) {
        if let (Some(deadlines), None) = (&mut self.deadlines, span) {
            if deadlines.put_plain(index, now) {
                return;
            }
        }
        self.set_span(index, now, span.unwrap_or(expiry.default), expiry);
    }

    /// [`Store::set_deadline`] for any lifetime, out of line.
    #[inline(never)]
    fn set_span(&mut self, index: u32, now: u64, span: Span, expiry: &Expiry) {
        match &mut self.deadlines {
            Some(deadlines) => {
                if deadlines.beyond(index) {
                    deadlines.fit(index, self.slots.capacity());
                }
                deadlines.set_span(index, now, span)
            }
            None if span.ttl == super::expiry::NEVER && !span.windowed() && expiry.tti == 0 => {}
            None => self.start_deadlines(index, now, span, expiry),
        }
    }

    /// [`Store::set_deadline`]'s first deadline: makes the column.
    #[cold]
    #[inline(never)]
    fn start_deadlines(&mut self, index: u32, now: u64, span: Span, expiry: &Expiry) {
        let mut deadlines = Deadlines::new(self.slots.len(), expiry);
        deadlines.set_span(index, now, span);
        self.deadlines = Some(Box::new(deadlines));
    }

    /// Whether a deadline in the column may have passed at `now`: whether a sweep may
    /// find anything.
    #[inline(always)]
    pub(crate) fn sweeping(&self, now: u64) -> bool {
        self.deadlines.as_ref().is_some_and(|deadlines| deadlines.sweeping(now))
    }

    /// An entry expired at `now`, found by looking at a few slots on from the last look.
    #[inline]
    pub(crate) fn next_expired(&mut self, now: u64) -> Option<u32> {
        let slots = &self.slots;
        let slot = self
            .deadlines
            .as_mut()?
            .next_expired(now, |slot| !matches!(slots.get(slot as usize), Some(Some(_))))?;
        debug_assert!(self.slots[slot as usize].is_some());
        Some(slot)
    }

    #[cfg(feature = "serde")]
    /// The indices of the entries on `queue`, oldest first (the order eviction takes).
    pub(crate) fn in_order(&self, queue: Queue) -> impl Iterator<Item = u32> + '_ {
        let pairs = &self.queues[queue as usize].pairs;
        let mask = pairs.buf.len().wrapping_sub(1);
        (0..pairs.len()).filter_map(move |i| {
            let pair = pairs.buf[pairs.start.wrapping_add(i) & mask];
            let (index, stamp) = ((pair >> 32) as u32, pair as u32);
            matches!(&self.slots[index as usize], Some(e) if e.stamp == stamp && e.queue == queue)
                .then_some(index)
        })
    }

    /// The indices of the entries held.
    pub(crate) fn indices(&self) -> impl Iterator<Item = u32> + '_ {
        self.slots.iter().enumerate().filter(|(_, slot)| slot.is_some()).map(|(i, _)| i as u32)
    }

    /// Takes out every entry, leaving the store empty.
    pub(crate) fn into_entries(self) -> impl Iterator<Item = (K, V)> {
        self.slots.into_iter().flatten().map(|entry| (entry.key, entry.value))
    }

    /// An empty store of the same kind.
    pub(crate) fn emptied(&self) -> Self {
        Store::expecting(self.expected, self.weights.is_some())
    }

    /// The entry of `key`; [`Store::index_of`] gives its index.
    #[inline]
    pub(crate) fn find_entry<Q: ?Sized + Eq>(&self, hash: u64, key: &Q) -> Option<&Entry<K, V>>
    where
        K: Borrow<Q>,
    {
        let slots = &self.slots;
        let mut found = None;
        self.table.find(hash, |&i| match &slots[i as usize] {
            Some(e) if e.key.borrow() == key => {
                found = Some(e);
                true
            }
            _ => false,
        });
        found
    }

    /// The index of `entry`, one of this store's, from its address: so that a lookup
    /// that finds an entry need not keep its index in a register in case it needs it.
    #[inline]
    pub(crate) fn index_of(&self, entry: &Entry<K, V>) -> u32 {
        // The entry lies within its slot, which starts at a multiple of the slot's size.
        let offset = entry as *const Entry<K, V> as usize - self.slots.as_ptr() as usize;
        (offset / std::mem::size_of::<Option<Entry<K, V>>>()) as u32
    }

    /// The entry at `index` (which `find` or `tail` returned).
    #[inline]
    pub(crate) fn entry(&self, index: u32) -> &Entry<K, V> {
        self.slots[index as usize].as_ref().expect("indices handed out name occupied slots")
    }

    #[inline]
    pub(crate) fn entry_mut(&mut self, index: u32) -> &mut Entry<K, V> {
        self.slots[index as usize].as_mut().expect("indices handed out name occupied slots")
    }

    /// The oldest entry on `queue` (dropping stale pairs found on the way).
    #[inline]
    pub(crate) fn tail(&mut self, queue: Queue) -> Option<u32> {
        let ring = &mut self.queues[queue as usize];
        while let Some(pair) = ring.pairs.oldest() {
            let (index, stamp) = ((pair >> 32) as u32, pair as u32);
            match &self.slots[index as usize] {
                Some(e) if e.stamp == stamp && e.queue == queue => {
                    // Eviction often passes over this entry to the next ones: start
                    // loading one a few places on, so that its cache miss overlaps.
                    let next = ring.pairs.hint(LOOKAHEAD);
                    self.prefetch_pair(next);
                    return Some(index);
                }
                _ => ring.pairs.pop_oldest(),
            }
        }
        None
    }

    /// Starts loading the slot a queue's `pair` names, if any.
    #[inline]
    fn prefetch_pair(&self, pair: Option<u64>) {
        if let Some(slot) = pair.and_then(|pair| self.slots.get((pair >> 32) as usize)) {
            prefetch(slot);
        }
    }

    /// Stores an entry for a key that is absent, at the head of `queue`.
    #[inline(always)]
    pub(crate) fn insert(&mut self, key: K, value: V, hash: u64, weight: u32, queue: Queue) -> u32 {
        let stamp = self.new_stamp();
        let entry = Entry { key, value, hash, freq: AtomicU8::new(0), queue, stamp };
        let index = match self.free.pop() {
            Some(index) => {
                self.slots[index as usize] = Some(entry);
                index
            }
            None => {
                let len = self.slots.len();
                if len == self.slots.capacity() {
                    self.make_room(len);
                }
                self.slots.push(Some(entry));
                len as u32
            }
        };
        if let Some(deadlines) = &mut self.deadlines {
            deadlines.reset(index);
        }
        match &mut self.weights {
            Some(weights) if weights.len() > index as usize => weights[index as usize] = weight,
            Some(weights) => weights.push(weight),
            None => debug_assert_eq!(weight, 1, "an unweighted store holds entries of weight 1"),
        }
        let slots = &self.slots;
        self.table.insert_unique(hash, index, |&i| slots[i as usize].as_ref().map_or(0, |e| e.hash));
        self.join(index, queue, stamp, u64::from(weight));
        index
    }

    /// Removes the entry at `index`, returning it.
    #[inline(always)]
    pub(crate) fn remove(&mut self, index: u32) -> Entry<K, V> {
        self.take_out(index, false)
    }

    /// Removes the oldest entry of a queue, which [`Store::tail`] just returned.
    #[inline(always)]
    pub(crate) fn remove_tail(&mut self, index: u32) -> Entry<K, V> {
        self.take_out(index, true)
    }

    /// Removes the entry at `index`, the oldest of its queue if `tail`.
    #[inline(always)]
    fn take_out(&mut self, index: u32, tail: bool) -> Entry<K, V> {
        let entry = self.slots[index as usize].take().expect("indices handed out name occupied slots");
        self.leave(index, entry.queue, entry.stamp, u64::from(self.weight_of(index)), tail);
        if let Ok(slot) = self.table.find_entry(entry.hash, |&i| i == index) {
            slot.remove();
        }
        self.free.push(index);
        entry
    }

    /// Moves the entry at `index` to the head of `queue`.
    #[inline]
    pub(crate) fn requeue(&mut self, index: u32, queue: Queue) {
        let (stamp, weight) = (self.new_stamp(), u64::from(self.weight_of(index)));
        let entry = self.entry_mut(index);
        let (old_queue, old_stamp) = (entry.queue, entry.stamp);
        (entry.queue, entry.stamp) = (queue, stamp);
        self.leave(index, old_queue, old_stamp, weight, false);
        self.join(index, queue, stamp, weight);
    }

    /// Moves the oldest entry of `queue`, which [`Store::tail`] just returned, to the
    /// queue's head: CLOCK's second chance. Its pair stays the live one, stamp and all.
    #[inline]
    pub(crate) fn rotate(&mut self, queue: Queue) {
        self.queues[queue as usize].pairs.rotate();
    }

    /// The weight of the entry at `index`.
    #[inline]
    pub(crate) fn weight_of(&self, index: u32) -> u32 {
        self.weights.as_ref().map_or(1, |weights| weights[index as usize])
    }

    /// Sets the weight of the entry at `index` (in a weighted store).
    pub(crate) fn reweigh(&mut self, index: u32, weight: u32) {
        let (queue, old) = (self.entry(index).queue, self.weight_of(index));
        if let Some(weights) = &mut self.weights {
            weights[index as usize] = weight;
            let list = &mut self.queues[queue as usize];
            list.weight = list.weight - u64::from(old) + u64::from(weight);
        }
    }

    /// A stamp no entry holds yet.
    #[inline(always)]
    fn new_stamp(&mut self) -> u32 {
        let stamp = self.next_stamp;
        self.next_stamp = stamp.wrapping_add(1);
        stamp
    }

    /// Puts the entry at `index`, already given `queue` and `stamp`, at the head of
    /// `queue`.
    #[inline(always)]
    fn join(&mut self, index: u32, queue: Queue, stamp: u32, weight: u64) {
        let ring = &mut self.queues[queue as usize];
        if ring.pairs.is_full() && ring.pairs.len() > 2 * ring.live + 32 {
            // Full, and more stale pairs than live ones: drop them rather than grow.
            self.sweep(queue);
        }
        let ring = &mut self.queues[queue as usize];
        ring.pairs.push(u64::from(index) << 32 | u64::from(stamp));
        ring.live += 1;
        ring.weight += weight;
    }

    /// Takes the entry at `index`, which was on `queue` with `stamp` (at its `tail`, if
    /// so), off that queue's count (its pair goes stale, and a new stamp marks its next
    /// place).
    #[inline(always)]
    fn leave(&mut self, index: u32, queue: Queue, stamp: u32, weight: u64, tail: bool) {
        let ring = &mut self.queues[queue as usize];
        ring.live -= 1;
        ring.weight -= weight;
        let pair = u64::from(index) << 32 | u64::from(stamp);
        debug_assert!(!tail || ring.pairs.oldest() == Some(pair), "the tail's pair is the oldest");
        if tail || ring.pairs.oldest() == Some(pair) {
            ring.pairs.pop_oldest();
        }
    }

    /// Drops the stale pairs of `queue`. Stamps are 32 bits: a pair is swept or popped
    /// long before 2^32 later stamps could make it match again.
    #[cold]
    fn sweep(&mut self, queue: Queue) {
        let slots = &self.slots;
        self.queues[queue as usize].pairs.retain(|pair| {
            let (index, stamp) = ((pair >> 32) as u32, pair as u32);
            matches!(&slots[index as usize], Some(e) if e.stamp == stamp && e.queue == queue)
        });
    }
}

impl<K, V> Entry<K, V> {
    pub(crate) fn queue(&self) -> Queue {
        self.queue
    }

    /// Counts a request, up to `max`. A plain load and store: a racing reader's increment
    /// may be lost, which only makes the count a little lower. Hot entries already at
    /// `max` are not written at all, so their cache line stays shared between cores.
    #[inline]
    pub(crate) fn touch(&self, max: u8) {
        let freq = self.freq.load(Ordering::Relaxed);
        if freq < max {
            self.freq.store(freq + 1, Ordering::Relaxed);
        }
    }
}

#[cfg(all(test, not(cuckoo_gate_loom)))]
mod tests {
    use super::{Entry, Pairs, Queue, Store};

    #[test]
    fn pairs_keep_fifo_order_across_wraps_growth_and_retain() {
        let (mut pairs, mut model) = (Pairs::default(), std::collections::VecDeque::new());
        for i in 0..1_000u64 {
            // Pops lag pushes, so the ring wraps many times and grows while wrapped.
            pairs.push(i);
            model.push_back(i);
            if i % 3 == 0 {
                assert_eq!(pairs.oldest(), model.front().copied());
                pairs.pop_oldest();
                model.pop_front();
            }
            if i % 97 == 0 {
                pairs.retain(|p| p % 5 != 0);
                model.retain(|p| p % 5 != 0);
            }
            assert_eq!(pairs.len(), model.len());
            assert_eq!(pairs.nth(7), model.get(7).copied());
            if i % 11 == 0 {
                pairs.rotate();
                model.rotate_left(model.len().min(1));
            }
        }
        while let Some(pair) = pairs.oldest() {
            assert_eq!(Some(pair), model.pop_front());
            pairs.pop_oldest();
        }
        assert!(model.is_empty());
    }

    #[test]
    fn pairs_survive_their_counters_wrapping() {
        let mut pairs = Pairs::default();
        (0..10).for_each(|p| pairs.push(p));
        // Counters just short of wrapping (as after 2^64 pushes, or 2^32 on 32 bits), and
        // still a multiple of the buffer's size apart from where they were.
        let shift = 0usize.wrapping_sub(16);
        (pairs.start, pairs.end) = (pairs.start.wrapping_add(shift), pairs.end.wrapping_add(shift));
        (10..16).for_each(|p| pairs.push(p)); // `end` wraps to 0
        let order = |pairs: &Pairs| (0..pairs.len()).map(|i| pairs.nth(i).unwrap()).collect::<Vec<_>>();
        assert_eq!(order(&pairs), Vec::from_iter(0..16));
        pairs.rotate();
        pairs.retain(|p| p != 5);
        assert_eq!(order(&pairs), [1, 2, 3, 4, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 0]);
        (16..30).for_each(|p| pairs.push(p));
        assert_eq!((pairs.len(), pairs.oldest()), (29, Some(1)));
    }

    #[test]
    fn stale_pairs_are_swept_before_the_ring_grows() {
        let mut store = Store::with_capacity(16, false);
        let indices: Vec<u32> = (0..10u64).map(|k| store.insert(k, k, k, 1, Queue::Main)).collect();
        // Requeues behind the five oldest leave stale pairs that never reach the tail.
        for round in 0..10_000 {
            store.requeue(indices[5 + round % 5], Queue::Main);
        }
        let ring = &store.queues[Queue::Main as usize];
        assert_eq!(ring.live, 10);
        assert!(ring.pairs.buf.len() <= 64, "{} places for 10 live pairs", ring.pairs.buf.len());
        // The sweeps kept the order.
        let mut order = Vec::new();
        while let Some(tail) = store.tail(Queue::Main) {
            order.push(store.remove_tail(tail).key);
        }
        assert_eq!(order, [0, 1, 2, 3, 4, 5, 6, 7, 8, 9]);
    }

    #[test]
    fn a_lookup_reads_two_lines_of_its_shard() {
        use std::mem::offset_of;
        // The store starts 16 bytes into its shard's 128-byte slot (after the lock's
        // state and drained count): the slab's vector shares the state's line, and the
        // table and the deadlines' pointer the next, apart from the queues.
        type S = Store<u64, u64>;
        let at = |offset: usize| 16 + offset;
        assert!(at(offset_of!(S, slots)) + size_of::<Vec<Option<Entry<u64, u64>>>>() <= 64);
        assert!(at(offset_of!(S, table)) >= 64);
        assert!(at(offset_of!(S, deadlines)) + 8 <= 128);
        assert!(at(offset_of!(S, queues)) >= 128);
    }

    #[test]
    fn a_slot_s_new_entry_never_inherits_the_deadline_of_the_one_that_left() {
        use super::super::expiry::{Clock, Expiry, Lifetime};
        let expiry = Expiry::new(Clock::manual().0, Lifetime::forever(), None, true);
        let short = Some(Lifetime::ttl(std::time::Duration::from_secs(1)).span());
        let later = 10 << 32;
        let mut store = Store::with_capacity(4, false);
        let a = store.insert(1u64, 1u64, 7, 1, Queue::Small);
        store.set_deadline(a, 1, short, &expiry);
        assert!(store.expired(a, later));
        store.remove(a);
        let b = store.insert(2u64, 2u64, 8, 1, Queue::Small);
        assert_eq!(a, b, "the slot is taken again");
        assert!(!store.expired(b, later), "before any sweep");
        // A free slot's passed deadline: the sweep clears it rather than hand it out.
        store.set_deadline(b, 1, short, &expiry);
        store.remove(b);
        assert!(store.sweeping(later));
        assert_eq!((0..4).find_map(|_| store.next_expired(later)), None);
        assert!(!store.sweeping(later), "the bound rose past the cleared deadline");
        let c = store.insert(3u64, 3u64, 9, 1, Queue::Small);
        assert!(!store.expired(c, later));
    }

    #[test]
    fn unweighted_entries_stay_small_and_weigh_one() {
        assert_eq!(size_of::<Option<Entry<u64, u64>>>(), 32);
        let mut store = Store::with_capacity(4, false);
        let index = store.insert(1u64, 1u64, 7, 1, Queue::Small);
        assert_eq!((store.weight_of(index), store.total_weight()), (1, 1));
        let mut weighted = Store::with_capacity(4, true);
        let index = weighted.insert(1u64, 1u64, 7, 5, Queue::Small);
        weighted.reweigh(index, 9);
        assert_eq!((weighted.weight_of(index), weighted.total_weight()), (9, 9));
        weighted.remove(index);
        // A reused slot takes its new entry's weight.
        let index = weighted.insert(2u64, 2u64, 8, 3, Queue::Main);
        assert_eq!((weighted.weight_of(index), weighted.weight(Queue::Main)), (3, 3));
    }
}
