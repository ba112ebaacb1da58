//! Expiry, removal notifications and the collection API.
//!
//! A model with deadlines checks that no expired value is ever returned, under every
//! policy, weighted or not, with the clock moved by hand (no test sleeps): with lifetimes
//! from the builder, from each insert and from an `expire_after` closure, freshness and
//! grace; no value past its deadline from a `get`, and none past its deadline and grace
//! from a loader. A ledger of
//! listener calls checks that every value that entered the cache is reported exactly once
//! when it leaves, under two threads' churn.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::Duration;

use cuckoo_gate::{Admission, AdmissionCache, AdmissionPolicy, Clock, Lifetime, ManualClock, RemovalCause};
use proptest::prelude::*;

const KEYS: u8 = 40;

#[derive(Clone, Debug)]
enum Op {
    Get(u8),
    Peek(u8),
    Contains(u8),
    Insert(u8, u32),
    InsertWithTtl(u8, u32, u8),
    GetOrInsert(u8, u32),
    /// A fallible load: the value, or a failure.
    TryLoad(u8, u32, bool),
    Remove(u8),
    Advance(u8),
    Purge,
    Retain(u8),
    Clear,
}

#[derive(Clone, Debug)]
struct Config {
    policy: AdmissionPolicy,
    capacity: usize,
    shards: usize,
    weighted: bool,
    /// Seconds of the builder's time to live and time to idle, if any.
    ttl: Option<u8>,
    tti: Option<u8>,
    /// Seconds of the builder's freshness and grace, if any.
    fresh: Option<u8>,
    grace: Option<u8>,
    /// Whether an `expire_after` closure gives each value its lifetime ([`own_lifetime`]).
    per_entry: bool,
    seed: u64,
}

/// The lifetime the `expire_after` closure gives a value: its time to live, freshness and
/// grace, in seconds.
fn own_lifetime(value: u32) -> (u64, u64, u64) {
    (u64::from(value % 20 + 1), u64::from(value % 10), u64::from(value % 5))
}

fn config() -> impl Strategy<Value = Config> {
    let policy = prop_oneof![
        Just(AdmissionPolicy::Always),
        Just(AdmissionPolicy::SecondHit),
        Just(AdmissionPolicy::S3Fifo),
        Just(AdmissionPolicy::S3FifoLfu),
    ];
    let seconds = prop::option::of(1..20u8);
    let windows = (prop::option::of(0..20u8), prop::option::of(0..10u8), any::<bool>());
    (policy, 1..=30usize, 1..=3usize, any::<bool>(), seconds.clone(), seconds, windows, any::<u64>())
        .prop_map(|(policy, capacity, shards, weighted, ttl, tti, (fresh, grace, per_entry), seed)| Config {
            policy,
            capacity,
            shards: shards.min(capacity),
            weighted,
            ttl,
            tti,
            fresh,
            grace,
            per_entry,
            seed,
        })
}

fn op() -> impl Strategy<Value = Op> {
    let key = 0..KEYS;
    prop_oneof![
        6 => key.clone().prop_map(Op::Get),
        1 => key.clone().prop_map(Op::Peek),
        1 => key.clone().prop_map(Op::Contains),
        4 => (key.clone(), any::<u32>()).prop_map(|(k, v)| Op::Insert(k, v)),
        3 => (key.clone(), any::<u32>(), 0..30u8).prop_map(|(k, v, s)| Op::InsertWithTtl(k, v, s)),
        2 => (key.clone(), any::<u32>()).prop_map(|(k, v)| Op::GetOrInsert(k, v)),
        3 => (key.clone(), any::<u32>(), any::<bool>()).prop_map(|(k, v, f)| Op::TryLoad(k, v, f)),
        1 => key.prop_map(Op::Remove),
        3 => (0..8u8).prop_map(Op::Advance),
        1 => Just(Op::Purge),
        1 => (2..5u8).prop_map(Op::Retain),
        1 => Just(Op::Clear),
    ]
}

fn secs(s: u8) -> Duration {
    Duration::from_secs(u64::from(s))
}

fn build(config: &Config, clock: Clock) -> AdmissionCache<u8, u32> {
    let mut builder = AdmissionCache::builder()
        .capacity(config.capacity as u64)
        .shards(config.shards)
        .admission(config.policy)
        .seed(config.seed)
        .clock(clock);
    if let Some(ttl) = config.ttl {
        builder = builder.time_to_live(secs(ttl));
    }
    if let Some(tti) = config.tti {
        builder = builder.time_to_idle(secs(tti));
    }
    if let Some(fresh) = config.fresh {
        builder = builder.refresh_after(secs(fresh));
    }
    if let Some(grace) = config.grace {
        builder = builder.grace(secs(grace));
    }
    if config.per_entry {
        builder = builder.expire_after(|_, &value| {
            let (ttl, fresh, grace) = own_lifetime(value);
            let secs = Duration::from_secs;
            Lifetime::ttl(secs(ttl)).fresh_for(secs(fresh)).grace(secs(grace))
        });
    }
    if config.weighted {
        builder = builder.weigher(|_, &v| v % 7).estimated_entries(config.capacity);
    }
    builder.build().expect("a valid configuration")
}

/// A stored value and its lifetime, in seconds on the manual clock.
#[derive(Clone, Copy, Debug)]
struct Stored {
    value: u32,
    /// When its time to live ends (the entry's own, or the builder's).
    cap: Option<u64>,
    /// When it stops being fresh, if before its time to live ends.
    fresh_until: Option<u64>,
    /// When its grace ends (its time to live's end, without grace).
    grace_end: Option<u64>,
    /// Last write or hit, for time to idle.
    used: u64,
}

struct Model {
    entries: HashMap<u8, Stored>,
    now: u64,
    tti: Option<u64>,
    ttl: Option<u64>,
    fresh: Option<u64>,
    grace: Option<u64>,
    per_entry: bool,
}

impl Model {
    /// The value a lookup may return for `k`: the last stored, if it has not expired.
    fn live(&self, k: u8) -> Option<u32> {
        let stored = self.entries.get(&k)?;
        let capped = stored.cap.is_some_and(|cap| cap <= self.now);
        let idle = self.tti.is_some_and(|tti| stored.used + tti <= self.now);
        (!capped && !idle).then_some(stored.value)
    }

    /// The value a loader may return for `k` without loading: the last stored, if fresh.
    fn fresh(&self, k: u8) -> Option<u32> {
        let stored = self.entries.get(&k)?;
        self.live(k).filter(|_| stored.fresh_until.map_or(true, |until| self.now < until))
    }

    /// The value a loader whose load failed may return for `k`: the last stored, if its
    /// grace has not ended.
    fn in_grace(&self, k: u8) -> Option<u32> {
        let stored = self.entries.get(&k)?;
        let idle = self.tti.is_some_and(|tti| stored.used + tti <= self.now);
        let ended = stored.grace_end.is_some_and(|end| end <= self.now);
        (!idle && !ended).then_some(stored.value)
    }

    /// Stores `value` for `k`, with `ttl` of its own if given (an insert's).
    fn store(&mut self, k: u8, value: u32, ttl: Option<u64>) {
        let (ttl, fresh, grace) = match (ttl, self.per_entry) {
            (Some(ttl), _) => (Some(ttl), self.fresh, self.grace),
            (None, true) => {
                let (ttl, fresh, grace) = own_lifetime(value);
                (Some(ttl), Some(fresh), Some(grace))
            }
            (None, false) => (self.ttl, self.fresh, self.grace),
        };
        let cap = ttl.map(|ttl| self.now + ttl);
        // Under time to idle an entry has no stale window and no grace.
        let windowed = self.tti.is_none();
        let fresh_until = fresh.filter(|_| windowed).map(|fresh| self.now + fresh);
        let grace_end = cap.map(|cap| cap + grace.filter(|_| windowed).unwrap_or(0));
        self.entries.insert(k, Stored { value, cap, fresh_until, grace_end, used: self.now });
    }

    fn hit(&mut self, k: u8) {
        if let Some(stored) = self.entries.get_mut(&k) {
            stored.used = self.now;
        }
    }
}

fn check(config: &Config, ops: &[Op]) -> Result<(), TestCaseError> {
    let (clock, hand) = Clock::manual();
    let cache = build(config, clock);
    let mut model = Model {
        entries: HashMap::new(),
        now: 0,
        tti: config.tti.map(u64::from),
        ttl: config.ttl.map(u64::from),
        fresh: config.fresh.map(u64::from),
        grace: config.grace.map(u64::from),
        per_entry: config.per_entry,
    };
    for op in ops {
        match *op {
            Op::Get(k) => {
                let found = cache.get(&k);
                prop_assert!(
                    found.is_none() || found == model.live(k),
                    "{op:?} gave {found:?}, model {:?}",
                    model.live(k)
                );
                if found.is_some() {
                    model.hit(k);
                }
            }
            Op::Peek(k) => {
                let found = cache.peek(&k);
                prop_assert!(found.is_none() || found == model.live(k), "{op:?} gave {found:?}");
            }
            Op::Contains(k) => {
                prop_assert!(!cache.contains_key(&k) || model.live(k).is_some(), "{op:?}: expired key held");
            }
            Op::Insert(k, v) | Op::InsertWithTtl(k, v, _) => {
                let ttl = match *op {
                    Op::InsertWithTtl(_, _, s) => Some(s),
                    _ => None,
                };
                let admission = match ttl {
                    Some(s) => cache.insert_with_ttl(k, v, secs(s)),
                    None => cache.insert(k, v),
                };
                match admission {
                    Admission::Admitted | Admission::Updated => model.store(k, v, ttl.map(u64::from)),
                    _ => {
                        model.entries.remove(&k);
                    }
                }
            }
            Op::GetOrInsert(k, v) => {
                let mut loaded = false;
                let got = cache.get_or_insert_with(&k, || {
                    loaded = true;
                    v
                });
                if loaded {
                    prop_assert_eq!(got, v);
                    model.store(k, v, None);
                } else {
                    prop_assert_eq!(Some(got), model.fresh(k), "{:?}: a hit returns a fresh value", op);
                    model.hit(k);
                }
            }
            Op::TryLoad(k, v, fail) => {
                let mut loaded = false;
                let got = cache.try_get_or_insert_with(&k, || {
                    loaded = true;
                    if fail {
                        Err(())
                    } else {
                        Ok(v)
                    }
                });
                match (loaded, fail, got) {
                    (false, _, got) => {
                        prop_assert_eq!(got.ok(), model.fresh(k), "{:?}: a hit returns a fresh value", op);
                        model.hit(k);
                    }
                    (true, false, got) => {
                        prop_assert_eq!(got, Ok(v));
                        model.store(k, v, None);
                    }
                    (true, true, Ok(old)) => {
                        prop_assert_eq!(
                            Some(old),
                            model.in_grace(k),
                            "{:?}: an old value past its grace",
                            op
                        );
                    }
                    (true, true, Err(())) => {}
                }
            }
            Op::Remove(k) => {
                let removed = cache.remove(&k);
                prop_assert!(removed.is_none() || removed == model.live(k), "{op:?} gave {removed:?}");
                model.entries.remove(&k);
            }
            Op::Advance(s) => {
                hand.advance(secs(s));
                model.now += u64::from(s);
            }
            Op::Purge => {
                cache.purge_expired();
                for k in 0..KEYS {
                    // Purge keeps entries in grace.
                    if model.in_grace(k).is_none() {
                        model.entries.remove(&k);
                    }
                }
                prop_assert!(
                    cache.iter().all(|(k, v)| model.live(k) == Some(v)),
                    "purge kept an expired entry"
                );
            }
            Op::Retain(m) => {
                cache.retain(|&k, _| k % m != 0);
                model.entries.retain(|&k, _| k % m != 0);
            }
            Op::Clear => {
                cache.clear();
                model.entries.clear();
                prop_assert!(cache.is_empty());
            }
        }
        for (k, v) in cache.iter() {
            prop_assert_eq!(Some(v), model.live(k), "iter yielded key {} after {:?}", k, op);
        }
        prop_assert!(cache.weight() <= config.capacity as u64);
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1024))]

    #[test]
    fn no_expired_value_is_ever_returned(config in config(), ops in prop::collection::vec(op(), 1..200)) {
        check(&config, &ops)?;
    }
}

/// Listener calls: every value reported, with its cause.
type Ledger = Arc<Mutex<Vec<(u64, u64, RemovalCause)>>>;

fn ledgered(capacity: usize, policy: AdmissionPolicy, clock: Clock) -> (AdmissionCache<u64, u64>, Ledger) {
    let ledger = Ledger::default();
    let log = ledger.clone();
    let cache = AdmissionCache::builder()
        .capacity(capacity as u64)
        .admission(policy)
        .shards(4)
        .time_to_live(Duration::from_secs(50))
        .clock(clock)
        .eviction_listener(move |key, value, cause| log.lock().unwrap().push((key, value, cause)))
        .build()
        .unwrap();
    (cache, ledger)
}

/// Two threads' churn of inserts (some with their own lifetimes), removes, retains and
/// clock moves; then a clear. Values are unique, so the ledger must hold each value
/// that was stored exactly once, and its counts per cause must match the cache's.
#[test]
fn every_entry_that_leaves_is_reported_once() {
    // Entries that expired, and entries evicted, over the three policies (under SecondHit
    // a run may evict none: few keys are seen twice).
    let mut exercised = (0, 0);
    for policy in [AdmissionPolicy::S3Fifo, AdmissionPolicy::SecondHit, AdmissionPolicy::Always] {
        let (clock, hand) = Clock::manual();
        let (cache, ledger) = ledgered(500, policy, clock);
        let next = AtomicU64::new(1);
        let (stored, removed) = thread::scope(|s| {
            let workers: Vec<_> = (0..2u64)
                .map(|t| {
                    let (cache, next, hand) = (&cache, &next, &hand);
                    s.spawn(move || churn(t, cache, next, hand))
                })
                .collect();
            workers.into_iter().map(|w| w.join().unwrap()).fold((Vec::new(), 0), |(mut all, n), (mine, r)| {
                all.extend(mine);
                (all, n + r)
            })
        });
        let stats = cache.stats();
        let before_clear = ledger.lock().unwrap().len();
        let left = cache.len();
        cache.clear();
        let ledger = ledger.lock().unwrap();
        assert_eq!(ledger.len(), before_clear + left, "{policy:?}: a clear reports what was held");
        let mut reported: Vec<u64> = ledger.iter().map(|&(_, value, _)| value).collect();
        reported.sort_unstable();
        let mut expected = stored;
        expected.sort_unstable();
        assert_eq!(reported, expected, "{policy:?}: each stored value reported once");
        let count = |cause| ledger.iter().filter(|&&(_, _, c)| c == cause).count() as u64;
        assert_eq!(count(RemovalCause::Evicted), stats.evictions, "{policy:?}");
        assert_eq!(count(RemovalCause::Expired), stats.expirations, "{policy:?}");
        assert_eq!(count(RemovalCause::Removed), removed, "{policy:?}");
        assert_eq!(count(RemovalCause::Cleared), left as u64, "{policy:?}");
        exercised.0 += count(RemovalCause::Expired);
        exercised.1 += count(RemovalCause::Evicted);
        assert!(
            ledger.iter().all(|&(key, value, _)| value % 1_000 == key % 1_000),
            "a value travels with its key"
        );
    }
    assert!(exercised.0 > 0 && exercised.1 > 0, "expiry and eviction both exercised: {exercised:?}");
}

/// One thread's share of the churn: the values it stored, and how many entries its
/// removes and retains took out.
fn churn(t: u64, cache: &AdmissionCache<u64, u64>, next: &AtomicU64, hand: &ManualClock) -> (Vec<u64>, u64) {
    let (mut stored, mut removed) = (Vec::new(), 0);
    for i in 0..20_000u64 {
        let key = (i * 7 + t * 13) % 1_000;
        // Unique, and equal to the key modulo 1,000.
        let value = next.fetch_add(1, Ordering::Relaxed) * 1_000 + key;
        match i % 10 {
            0..=5 => {
                let admission = if i % 3 == 0 {
                    cache.insert_with_ttl(key, value, Duration::from_secs(i % 20))
                } else {
                    cache.insert(key, value)
                };
                if matches!(admission, Admission::Admitted | Admission::Updated) {
                    stored.push(value);
                }
            }
            6 | 7 => {
                cache.get(&key);
            }
            8 => removed += u64::from(cache.remove(&key).is_some()),
            _ if i % 1_000 == 9 && t == 0 => {
                let before = Arc::new(AtomicU64::new(0));
                let count = before.clone();
                cache.retain(move |&k, _| {
                    let drop_it = k % 97 == 0;
                    count.fetch_add(u64::from(drop_it), Ordering::Relaxed);
                    !drop_it
                });
                removed += before.load(Ordering::Relaxed);
            }
            _ => hand.advance(Duration::from_millis(300)),
        }
    }
    (stored, removed)
}

#[test]
fn a_panicking_listener_fails_only_its_call() {
    let told = Arc::new(AtomicU64::new(0));
    let count = told.clone();
    let cache: AdmissionCache<u64, u64> = AdmissionCache::builder()
        .capacity(10)
        .shards(1)
        .admission(AdmissionPolicy::Always)
        .eviction_listener(move |key, _, _| {
            count.fetch_add(1, Ordering::Relaxed);
            assert!(key != 3, "listener refuses key 3");
        })
        .build()
        .unwrap();
    (0..10).for_each(|k| assert_eq!(cache.insert(k, k), Admission::Admitted));
    let failed = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| cache.retain(|&k, _| k >= 5)));
    assert!(failed.is_err(), "the retain that reported key 3 panics");
    assert_eq!(told.load(Ordering::Relaxed), 5, "the other four were still reported");
    assert_eq!(cache.len(), 5);
    assert_eq!(cache.insert(20, 20), Admission::Admitted, "the cache goes on");
    cache.clear();
    assert_eq!(told.load(Ordering::Relaxed), 11);
}

#[test]
fn a_panicking_retain_keeps_what_it_removed_reported() {
    let (clock, _hand) = Clock::manual();
    let (cache, ledger) = ledgered(100, AdmissionPolicy::Always, clock);
    (0..50).for_each(|k| assert_eq!(cache.insert(k, k), Admission::Admitted));
    let mut judged = 0;
    let failed = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        cache.retain(|_, _| {
            judged += 1;
            assert!(judged < 10, "the predicate gives up");
            false
        })
    }));
    assert!(failed.is_err());
    let removed = ledger.lock().unwrap().len();
    assert_eq!(removed, 9, "nine judged and removed before the panic");
    assert_eq!(cache.len(), 50 - removed);
    assert_eq!(cache.iter().count(), cache.len());
}

#[test]
fn expired_entries_are_reclaimed_by_writes_and_purge() {
    let (clock, hand) = Clock::manual();
    let cache: AdmissionCache<u64, u64> = AdmissionCache::builder()
        .capacity(10_000)
        .shards(2)
        .time_to_live(Duration::from_secs(10))
        .clock(clock)
        .build()
        .unwrap();
    (0..5_000).for_each(|k| {
        let _ = cache.insert(k, k);
    });
    hand.advance(Duration::from_secs(10));
    assert_eq!(cache.get(&1), None, "expired: a miss");
    assert_eq!(cache.stats().misses, 1);
    // Writes of other keys sweep a few slots each.
    (10_000..12_500).for_each(|k| {
        let _ = cache.insert(k, k);
    });
    let reclaimed = cache.stats().expirations;
    assert!(reclaimed >= 4_000, "writes reclaimed {reclaimed} of 5,000 expired entries");
    cache.purge_expired();
    assert_eq!(cache.stats().expirations, 5_000);
    assert_eq!(cache.len(), 2_500);
    // Re-inserting an expired key stores it afresh.
    assert_eq!(cache.insert(1, 2), Admission::Admitted);
    assert_eq!(cache.get(&1), Some(2));
}

#[test]
fn expired_entries_make_room_before_live_ones() {
    let (clock, hand) = Clock::manual();
    let cache: AdmissionCache<u64, u64> =
        AdmissionCache::builder().capacity(100).shards(1).clock(clock).build().unwrap();
    for k in 0..100 {
        let _ =
            if k % 2 == 0 { cache.insert_with_ttl(k, k, Duration::from_secs(1)) } else { cache.insert(k, k) };
        cache.get(&k); // every entry used once more: CLOCK would pass over each
    }
    hand.advance(Duration::from_secs(1));
    for k in 100..150 {
        let _ = cache.insert(k, k);
    }
    let stats = cache.stats();
    assert_eq!((stats.expirations, stats.evictions), (50, 0), "the 50 expired entries made the room");
    assert!((0..100).filter(|k| k % 2 == 1).all(|k| cache.contains_key(&k)));
}

#[test]
fn loading_after_expiry_loads_again() {
    let (clock, hand) = Clock::manual();
    let cache: AdmissionCache<u64, u64> = AdmissionCache::builder()
        .capacity(100)
        .time_to_live(Duration::from_secs(5))
        .clock(clock)
        .build()
        .unwrap();
    assert_eq!(cache.get_or_insert_with(&1, || 10), 10);
    hand.advance(Duration::from_secs(4));
    assert_eq!(cache.get_or_insert_with(&1, || 11), 10);
    hand.advance(Duration::from_secs(1));
    assert_eq!(cache.get_or_insert_with(&1, || 12), 12, "expired: the loader runs again");
    assert_eq!(cache.stats().loads, 2);
}

#[test]
fn clear_stops_a_load_in_flight_from_storing() {
    let cache: AdmissionCache<u64, u64> = AdmissionCache::builder().capacity(100).build().unwrap();
    let value = cache.get_or_insert_with(&1, || {
        cache.clear();
        7
    });
    assert_eq!(value, 7, "the caller gets its value");
    assert_eq!(cache.get(&1), None, "but it is not stored after the clear");
}

/// An object of an eighth of the capacity fits under the default shard count, whatever
/// the machine's core count.
#[test]
fn an_eighth_of_the_capacity_fits_by_default() {
    let capacity: usize = 32 << 20;
    let cache: AdmissionCache<u64, Vec<u8>> = AdmissionCache::builder()
        .capacity(capacity as u64)
        .weigher(|_, value: &Vec<u8>| value.len() as u32)
        .estimated_entries(100_000)
        .admission(AdmissionPolicy::Always)
        .build()
        .unwrap();
    assert_eq!(cache.insert(1, vec![0; capacity / 8]), Admission::Admitted);
    assert_eq!(cache.insert(2, vec![0; capacity / 8 + capacity / 4]), Admission::TooHeavy);
    assert_eq!(cache.weight(), (capacity / 8) as u64);
}

#[test]
fn clear_and_retain_race_inserts_to_a_consistent_end() {
    let (clock, _hand) = Clock::manual();
    let (cache, ledger) = ledgered(2_000, AdmissionPolicy::S3Fifo, clock);
    let next = AtomicU64::new(1);
    let stored = Mutex::new(Vec::new());
    thread::scope(|s| {
        s.spawn(|| {
            for i in 0..20_000u64 {
                let key = i % 3_000;
                let value = next.fetch_add(1, Ordering::Relaxed) * 1_000 + key % 1_000;
                if matches!(cache.insert(key, value), Admission::Admitted | Admission::Updated) {
                    stored.lock().unwrap().push(value);
                }
            }
        });
        s.spawn(|| {
            for round in 0..200 {
                if round % 2 == 0 {
                    cache.clear();
                } else {
                    cache.retain(|&k, _| k % 2 == 0);
                }
                thread::yield_now();
            }
        });
    });
    let held: Vec<(u64, u64)> = cache.iter().collect();
    assert_eq!(held.len(), cache.len());
    assert!(held.iter().all(|&(k, v)| v % 1_000 == k % 1_000));
    cache.clear();
    let mut reported: Vec<u64> = ledger.lock().unwrap().iter().map(|&(_, v, _)| v).collect();
    reported.sort_unstable();
    let mut stored = stored.into_inner().unwrap();
    stored.sort_unstable();
    assert_eq!(reported, stored, "every stored value reported once, whatever the interleaving");
}

/// A manual clock moved to the end of its range expires what has a lifetime, and nothing
/// that has none.
#[test]
fn a_clock_at_the_end_of_time_expires_only_what_has_a_lifetime() {
    for policy in [AdmissionPolicy::S3Fifo, AdmissionPolicy::SecondHit, AdmissionPolicy::Always] {
        let (clock, hand) = Clock::manual();
        let told = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let log = told.clone();
        let cache: AdmissionCache<u64, u64> = AdmissionCache::builder()
            .capacity(100)
            .admission(policy)
            .clock(clock)
            .eviction_listener(move |key, _, cause| log.lock().unwrap().push((key, cause)))
            .build()
            .unwrap();
        for _ in 0..2 {
            let _ = cache.insert(1, 1);
            let _ = cache.insert_with_ttl(2, 2, Duration::MAX);
            let _ = cache.insert_with_ttl(3, 3, Duration::from_secs(1));
        }
        for _ in 0..3 {
            hand.advance(Duration::MAX);
        }
        assert_eq!((cache.get(&1), cache.get(&2), cache.get(&3)), (Some(1), Some(2), None), "{policy:?}");
        cache.purge_expired();
        assert_eq!(cache.len(), 2, "{policy:?}");
        let expired: Vec<_> = told
            .lock()
            .unwrap()
            .iter()
            .filter(|(_, cause)| *cause == RemovalCause::Expired)
            .cloned()
            .collect();
        assert_eq!(expired, [(3, RemovalCause::Expired)], "{policy:?}");
    }
}
