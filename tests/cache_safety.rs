//! What user code cannot break: panicking `Hash`, `Eq`, `Clone` and `Drop` of keys and
//! values, weights, and configurations at the edges; and the gate's memory under
//! concurrency.

use std::cell::Cell;
use std::collections::VecDeque;
use std::hash::{Hash, Hasher};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::thread;

use cuckoo_gate::{Admission, AdmissionCache, AdmissionPolicy, SeenBefore};

thread_local! {
    /// The id whose key's `Hash`, key's `Eq`, value's `Clone` or value's `Drop` panics on
    /// this thread (0: none).
    static HASH_PANICS: Cell<u64> = const { Cell::new(0) };
    static EQ_PANICS: Cell<u64> = const { Cell::new(0) };
    static CLONE_PANICS: Cell<u64> = const { Cell::new(0) };
    static DROP_PANICS: Cell<u64> = const { Cell::new(0) };
}

fn arm(which: &'static std::thread::LocalKey<Cell<u64>>, id: u64) {
    which.with(|c| c.set(id));
}

#[derive(Debug)]
struct Key(u64);

impl Hash for Key {
    fn hash<H: Hasher>(&self, state: &mut H) {
        assert_ne!(HASH_PANICS.with(Cell::get), self.0, "Hash panics");
        self.0.hash(state);
    }
}

impl PartialEq for Key {
    fn eq(&self, other: &Self) -> bool {
        let armed = EQ_PANICS.with(Cell::get);
        assert!(armed != self.0 && armed != other.0, "Eq panics");
        self.0 == other.0
    }
}

impl Eq for Key {}

#[derive(Debug, PartialEq)]
struct Value(u64);

impl Clone for Value {
    fn clone(&self) -> Self {
        assert_ne!(CLONE_PANICS.with(Cell::get), self.0, "Clone panics");
        Value(self.0)
    }
}

impl Drop for Value {
    fn drop(&mut self) {
        if DROP_PANICS.with(Cell::get) == self.0 && !thread::panicking() {
            DROP_PANICS.with(|c| c.set(0));
            panic!("Drop panics");
        }
    }
}

type Cache = AdmissionCache<Key, Value>;

fn cache(policy: AdmissionPolicy) -> Cache {
    AdmissionCache::builder().capacity(64).admission(policy).shards(2).seed(5).build().unwrap()
}

const POLICIES: [AdmissionPolicy; 4] = [
    AdmissionPolicy::Always,
    AdmissionPolicy::SecondHit,
    AdmissionPolicy::S3Fifo,
    AdmissionPolicy::S3FifoLfu,
];

/// Every key the cache answers for holds its own value, the cache is within its capacity,
/// and it still takes writes (no lock was left held).
fn assert_consistent(cache: &Cache) {
    let mut found = 0;
    for id in 1..=2_000 {
        if let Some(value) = cache.get(&Key(id)) {
            assert_eq!(value, Value(id), "key {id} answered with another key's value");
            found += 1;
        }
    }
    assert_eq!(found, cache.len());
    assert!(cache.len() as u64 <= cache.capacity());
    let _ = cache.insert(Key(5_000), Value(5_000));
    let _ = cache.insert(Key(5_000), Value(5_000));
    let stored = cache.get(&Key(5_000));
    assert_eq!(cache.remove(&Key(5_000)), stored);
}

fn fill(cache: &Cache, ids: std::ops::RangeInclusive<u64>) {
    for id in ids {
        for _ in 0..2 {
            let _ = cache.insert(Key(id), Value(id));
        }
    }
}

#[test]
fn a_key_whose_hash_panics_is_evicted_without_hashing_it() {
    for policy in POLICIES {
        let cache = cache(policy);
        fill(&cache, 1..=64);
        arm(&HASH_PANICS, 3);
        fill(&cache, 100..=400); // pushes key 3 out: eviction must not hash it
        arm(&HASH_PANICS, 0);
        assert_consistent(&cache);
    }
}

#[test]
fn panicking_hash_fails_only_its_own_call() {
    for policy in POLICIES {
        let cache = cache(policy);
        fill(&cache, 1..=50);
        arm(&HASH_PANICS, 7);
        assert!(catch_unwind(AssertUnwindSafe(|| cache.insert(Key(7), Value(7)))).is_err());
        assert!(catch_unwind(AssertUnwindSafe(|| cache.get(&Key(7)))).is_err());
        assert!(catch_unwind(AssertUnwindSafe(|| cache.remove(&Key(7)))).is_err());
        arm(&HASH_PANICS, 0);
        assert_consistent(&cache);
    }
}

#[test]
fn panicking_eq_leaves_the_cache_as_it_was() {
    for policy in POLICIES {
        let cache = cache(policy);
        fill(&cache, 1..=200);
        let before = cache.len();
        for id in [150, 199, 200, 300] {
            arm(&EQ_PANICS, id);
            // Each call may panic (if it compares against key `id`) or not; either way
            // nothing is half done.
            let _ = catch_unwind(AssertUnwindSafe(|| cache.get(&Key(id))));
            let _ = catch_unwind(AssertUnwindSafe(|| cache.insert(Key(id), Value(id))));
            let _ = catch_unwind(AssertUnwindSafe(|| cache.remove(&Key(id))));
            arm(&EQ_PANICS, 0);
            assert_consistent(&cache);
        }
        assert!(cache.len() <= before + 1);
    }
}

#[test]
fn panicking_clone_on_a_hit_releases_the_lock() {
    for policy in POLICIES {
        let cache = cache(policy);
        fill(&cache, 1..=20);
        let stored = (1..=20).find(|&id| cache.get(&Key(id)).is_some()).expect("something is stored");
        arm(&CLONE_PANICS, stored);
        assert!(catch_unwind(AssertUnwindSafe(|| cache.get(&Key(stored)))).is_err());
        arm(&CLONE_PANICS, 0);
        assert_consistent(&cache); // takes write locks: none was left held
    }
}

#[test]
fn panicking_drop_during_eviction_loses_nothing_else() {
    for policy in POLICIES {
        let cache = cache(policy);
        fill(&cache, 1..=64);
        let stored = (1..=64).find(|&id| cache.get(&Key(id)).is_some()).expect("something is stored");
        arm(&DROP_PANICS, stored);
        let panicked = (1_000..20_000).any(|new| {
            catch_unwind(AssertUnwindSafe(|| {
                let _ = cache.insert(Key(new), Value(new));
                let _ = cache.insert(Key(new), Value(new));
            }))
            .is_err()
        });
        arm(&DROP_PANICS, 0);
        assert!(panicked, "{policy:?}: the armed value was never evicted");
        assert_eq!(cache.get(&Key(stored)), None, "{policy:?}: the evicted key is gone");
        assert_consistent(&cache);
    }
}

thread_local! {
    /// The cache a [`Reentrant`] key calls back into when it is dropped.
    static REENTER: std::cell::RefCell<Option<Arc<AdmissionCache<Reentrant, u64>>>> =
        const { std::cell::RefCell::new(None) };
}

/// A key whose `Drop` calls back into the cache: if the cache dropped it under a shard
/// lock, that call would deadlock.
#[derive(Clone, Debug, Hash, PartialEq, Eq)]
struct Reentrant(u64);

impl Drop for Reentrant {
    fn drop(&mut self) {
        if self.0 != 0 {
            REENTER.with(|cache| {
                if let Some(cache) = &*cache.borrow() {
                    cache.get(&Reentrant(0));
                    cache.len();
                }
            });
        }
    }
}

#[test]
fn keys_and_values_are_dropped_outside_the_lock() {
    for policy in POLICIES {
        let (done, finished) = std::sync::mpsc::channel();
        thread::spawn(move || {
            // One shard, so that a call back from any key meets the lock it was dropped
            // under, if it was.
            let cache =
                Arc::new(AdmissionCache::builder().capacity(16).admission(policy).shards(1).build().unwrap());
            REENTER.with(|slot| *slot.borrow_mut() = Some(Arc::clone(&cache)));
            for id in 1..=200 {
                // Admitted or refused, then an update (the offered key is dropped), and
                // evictions all along.
                let _ = cache.insert(Reentrant(id), id);
                let _ = cache.insert(Reentrant(id), id + 1);
                cache.get_or_insert_with(&Reentrant(id / 3), || id);
                cache.remove(&Reentrant(id / 2));
            }
            REENTER.with(|slot| slot.borrow_mut().take());
            done.send(()).unwrap();
        });
        let waited = finished.recv_timeout(std::time::Duration::from_secs(30));
        assert!(waited.is_ok(), "{policy:?}: a key's Drop ran under the shard lock (deadlock)");
    }
}

#[test]
fn a_tiny_shard_stores_what_it_admits() {
    // One entry per shard: what `insert` calls admitted must be there.
    let cache: AdmissionCache<u64, u64> = AdmissionCache::builder().capacity(8).shards(8).build().unwrap();
    for key in 0..1_000u64 {
        if cache.insert(key, key) == Admission::Admitted {
            assert_eq!(cache.get(&key), Some(key), "admitted, then not stored");
        }
    }
    assert!(cache.len() <= 8);
}

#[test]
fn weights_bound_the_total() {
    // Several seeds: which entry is oldest when an update overfills the shard (seed 0
    // once left the updated entry alone in the small queue, and evicted it) depends on
    // the hashes.
    for (policy, seed) in POLICIES.into_iter().flat_map(|p| (0..8).map(move |s| (p, s))) {
        let cache: AdmissionCache<u64, Vec<u8>> = AdmissionCache::builder()
            .capacity(10_000)
            .weigher(|_, v: &Vec<u8>| v.len() as u32)
            .estimated_entries(100)
            .admission(policy)
            .shards(1)
            .seed(seed)
            .build()
            .unwrap();
        let mut x = 7u64;
        for _ in 0..20_000 {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            let key = (x >> 33) % 500;
            let size = 1 + (x >> 50) as usize % 900;
            let admission = cache.insert(key, vec![key as u8; size]);
            if admission == Admission::Admitted || admission == Admission::Updated {
                let got = cache.get(&key).map(|v| (v.len(), v[0]));
                assert_eq!(got, Some((size, key as u8)), "{policy:?}, seed {seed}: {admission:?}, then gone");
            }
            assert!(cache.weight() <= 10_000, "{policy:?}, seed {seed}: over its weight");
        }
        assert_eq!(cache.insert(1, vec![0; 10_001]), Admission::TooHeavy);
        assert_eq!(cache.get(&1), None, "a key whose new value is too heavy leaves");
    }
}

/// 8 threads record fresh keys; each checks that its oldest key recorded fewer than
/// `capacity` recordings ago (less the recordings still in flight) is remembered.
fn gate_remembers_under_concurrency(capacity: usize, per_thread: u64) {
    let gate = Arc::new(SeenBefore::builder().capacity(capacity).build().unwrap());
    let recorded = Arc::new(AtomicU64::new(0));
    let threads = 8u64;
    let margin = 2 * threads;
    let handles: Vec<_> = (0..threads)
        .map(|t| {
            let (gate, recorded) = (gate.clone(), recorded.clone());
            thread::spawn(move || {
                let mut recent: VecDeque<(u64, u64)> = VecDeque::new();
                for i in 0..per_thread {
                    let key = t << 40 | i;
                    // Counted from before the recording: a thread may sleep between its
                    // recording and its count while others record.
                    recent.push_back((key, recorded.load(Ordering::SeqCst)));
                    gate.record(&key);
                    recorded.fetch_add(1, Ordering::SeqCst);
                    let Some(&(oldest, at)) = recent.front() else { continue };
                    // Counted again after the check, for the same reason.
                    let remembered = gate.contains(&oldest);
                    let since = recorded.load(Ordering::SeqCst) - at;
                    assert!(
                        remembered || since + margin >= capacity as u64,
                        "forgotten after {since} recordings (capacity {capacity})"
                    );
                    let now = recorded.load(Ordering::SeqCst);
                    while recent.front().is_some_and(|&(_, at)| now - at + margin >= capacity as u64) {
                        recent.pop_front();
                    }
                }
            })
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
    let total = threads * per_thread;
    let rotations = gate.stats().rotations;
    assert!(
        rotations <= total / capacity as u64,
        "{rotations} rotations for {total} recordings at {capacity}"
    );
    assert!(rotations + 2 >= total / (capacity as u64 * 2), "{rotations} rotations: the gate stopped aging");
}

#[test]
fn gate_remembers_on_one_thread() {
    let gate = SeenBefore::builder().capacity(1_000).build().unwrap();
    for i in 0..20_000u64 {
        gate.record(&i);
        assert!(gate.contains(&i), "{i} forgotten at once");
        if i >= 999 {
            assert!(gate.contains(&(i - 999)), "{} forgotten after 999 recordings", i - 999);
        }
    }
}

#[test]
fn gate_remembers_a_small_capacity_under_8_threads() {
    gate_remembers_under_concurrency(1_000, 50_000);
}

#[test]
fn gate_remembers_a_large_capacity_under_8_threads() {
    gate_remembers_under_concurrency(100_000, 100_000);
}

#[test]
fn gate_rotates_once_per_generation_under_8_threads() {
    for capacity in [1_000usize, 100_000] {
        let gate = Arc::new(SeenBefore::builder().capacity(capacity).build().unwrap());
        let per_thread = 200_000u64;
        let handles: Vec<_> = (0..8u64)
            .map(|t| {
                let gate = gate.clone();
                thread::spawn(move || (0..per_thread).for_each(|i| gate.record(&(t << 40 | i))))
            })
            .collect();
        handles.into_iter().for_each(|h| h.join().unwrap());
        let total = 8 * per_thread;
        let rotations = gate.stats().rotations;
        // A generation rotates once it holds `capacity` keys; a second thread that saw
        // the same full generation must not rotate again.
        assert!(
            rotations <= total / capacity as u64,
            "{rotations} rotations for {total} recordings at {capacity}"
        );
        assert!(rotations >= total / (capacity as u64 * 2), "{rotations} rotations: the gate stopped aging");
    }
}

thread_local! {
    /// The cache a [`Colliding`] key calls back into when it is dropped.
    static COLLIDING: std::cell::RefCell<Option<Arc<AdmissionCache<Colliding, u64>>>> =
        const { std::cell::RefCell::new(None) };
}

/// A key that hashes like every other (so that a lookup compares it with each key held),
/// whose `Eq` panics when key 99 is compared, and whose `Drop` calls back into the cache.
#[derive(Clone, Debug)]
struct Colliding(u64);

impl std::hash::Hash for Colliding {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        state.write_u8(0);
    }
}

impl PartialEq for Colliding {
    fn eq(&self, other: &Self) -> bool {
        assert!(self.0 != 99 && other.0 != 99, "Eq refuses key 99");
        self.0 == other.0
    }
}

impl Eq for Colliding {}

impl Drop for Colliding {
    fn drop(&mut self) {
        COLLIDING.with(|cache| {
            if let Some(cache) = &*cache.borrow() {
                cache.len();
            }
        });
    }
}

/// A panicking `Eq` during an insert: the key and value offered are dropped after the
/// shard's lock is released (a `Drop` that calls the cache would otherwise deadlock).
#[test]
fn a_panicking_eq_in_insert_drops_the_offer_outside_the_lock() {
    for policy in POLICIES {
        let (done, finished) = std::sync::mpsc::channel();
        thread::spawn(move || {
            let cache = Arc::new(
                AdmissionCache::builder()
                    .capacity(16)
                    .admission(policy)
                    .shards(1)
                    .gate_capacity(64)
                    .build()
                    .unwrap(),
            );
            COLLIDING.with(|slot| *slot.borrow_mut() = Some(Arc::clone(&cache)));
            // Stored, so that key 99 is compared with it (under SecondHit, on the second
            // sighting).
            let _ = cache.insert(Colliding(1), 1);
            let _ = cache.insert(Colliding(1), 1);
            for _ in 0..2 {
                let panicked = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                    cache.insert(Colliding(99), 99)
                }));
                assert!(panicked.is_err(), "{policy:?}: Eq was not asked");
            }
            assert_eq!(cache.get(&Colliding(1)), Some(1), "{policy:?}: the cache goes on");
            COLLIDING.with(|slot| slot.borrow_mut().take());
            done.send(()).unwrap();
        });
        let waited = finished.recv_timeout(std::time::Duration::from_secs(10));
        assert!(waited.is_ok(), "{policy:?}: an offered key was dropped under the shard lock (deadlock)");
    }
}

thread_local! {
    /// The cache an [`Iterated`] key calls back into when it is dropped.
    static ITERATED: std::cell::RefCell<Option<Arc<AdmissionCache<Iterated, u64>>>> =
        const { std::cell::RefCell::new(None) };
}

/// A key whose `Clone` panics for key 7, and whose `Drop` calls back into the cache.
#[derive(Debug, Hash, PartialEq, Eq)]
struct Iterated(u64);

impl Clone for Iterated {
    fn clone(&self) -> Self {
        assert!(self.0 != 7, "Clone refuses key 7");
        Iterated(self.0)
    }
}

impl Drop for Iterated {
    fn drop(&mut self) {
        thread_local!(static INSIDE: Cell<bool> = const { Cell::new(false) });
        if INSIDE.with(|inside| inside.replace(true)) {
            return; // the key the call below drops
        }
        ITERATED.with(|cache| {
            if let Some(cache) = &*cache.borrow() {
                // A write: it would wait for a read lock this thread held.
                cache.remove(&Iterated(500));
            }
        });
        INSIDE.with(|inside| inside.set(false));
    }
}

/// A `Clone` that panics while `iter` copies a shard out: the copies made so far are
/// dropped after the shard's lock is released.
#[test]
fn a_panicking_clone_in_iter_drops_its_copies_outside_the_lock() {
    let (done, finished) = std::sync::mpsc::channel();
    thread::spawn(move || {
        let cache = Arc::new(
            AdmissionCache::builder()
                .capacity(64)
                .admission(AdmissionPolicy::Always)
                .shards(1)
                .build()
                .unwrap(),
        );
        for id in 0..20 {
            assert_eq!(cache.insert(Iterated(id), id), Admission::Admitted);
        }
        ITERATED.with(|slot| *slot.borrow_mut() = Some(Arc::clone(&cache)));
        let panicked = catch_unwind(AssertUnwindSafe(|| cache.iter().count()));
        assert!(panicked.is_err(), "Clone was not asked for key 7");
        ITERATED.with(|slot| slot.borrow_mut().take());
        assert!(cache.len() >= 20);
        done.send(()).unwrap();
    });
    let waited = finished.recv_timeout(std::time::Duration::from_secs(10));
    assert!(waited.is_ok(), "a copy was dropped under the shard lock (deadlock)");
}
