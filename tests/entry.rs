//! The entry API and borrowed keys: atomic read-modify-writes under every policy and many
//! threads, each outcome of a compute, what a compute does to a load in flight and to the
//! listener, a panicking closure; and lookups by a borrowed form of the key (`&str` for a
//! `String` key, and a key type of the test's own with its own `Borrow`).

use std::borrow::Borrow;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::{mpsc, Arc, Mutex};
use std::thread;
use std::time::Duration;

use cuckoo_gate::{Admission, AdmissionCache, AdmissionPolicy, Computed, Op, RemovalCause};

const POLICIES: [AdmissionPolicy; 3] =
    [AdmissionPolicy::S3Fifo, AdmissionPolicy::SecondHit, AdmissionPolicy::Always];

#[test]
fn concurrent_upserts_count_exactly_under_every_policy() {
    const THREADS: u64 = 8;
    const PER_THREAD: u64 = 100_000;
    const KEYS: u64 = 100;
    for policy in POLICIES {
        let cache: Arc<AdmissionCache<u64, u64>> =
            Arc::new(AdmissionCache::builder().capacity(1_000).admission(policy).build().unwrap());
        let threads: Vec<_> = (0..THREADS)
            .map(|t| {
                let cache = cache.clone();
                thread::spawn(move || {
                    for i in 0..PER_THREAD {
                        let key = (i * 7 + t) % KEYS;
                        cache.entry(&key).and_upsert_with(|count| count.map_or(1, |n| n + 1));
                    }
                })
            })
            .collect();
        threads.into_iter().for_each(|t| t.join().unwrap());
        let total: u64 = (0..KEYS).map(|k| cache.peek(&k).unwrap_or(0)).sum();
        assert_eq!(total, THREADS * PER_THREAD, "{policy:?}: an update was lost");
        for key in 0..KEYS {
            let expected = (0..THREADS)
                .map(|t| (0..PER_THREAD).filter(|i| (i * 7 + t) % KEYS == key).count())
                .sum::<usize>();
            assert_eq!(cache.peek(&key), Some(expected as u64), "{policy:?}: key {key}");
        }
    }
}

#[test]
fn each_outcome_of_a_compute() {
    for policy in POLICIES {
        let told = Arc::new(Mutex::new(Vec::new()));
        let log = told.clone();
        let cache: AdmissionCache<String, u32> = AdmissionCache::builder()
            .capacity(100)
            .admission(policy)
            .eviction_listener(move |key, value, cause| log.lock().unwrap().push((key, value, cause)))
            .build()
            .unwrap();
        let entry = |f: &dyn Fn(Option<&u32>) -> Op<u32>| cache.entry("k").and_compute_with(f);
        assert_eq!(entry(&|old| Op::Put(old.map_or(1, |n| n + 1))), Computed::Inserted, "{policy:?}");
        assert_eq!(cache.get("k"), Some(1), "{policy:?}: stored whatever the policy");
        assert_eq!(entry(&|old| Op::Put(old.map_or(1, |n| n + 1))), Computed::Updated);
        assert_eq!(entry(&|_| Op::Keep), Computed::Unchanged);
        assert_eq!(cache.get("k"), Some(2));
        assert_eq!(entry(&|_| Op::Remove), Computed::Removed(2));
        assert_eq!(entry(&|_| Op::Remove), Computed::Unchanged, "an absent key");
        assert_eq!(
            entry(&|old| {
                assert_eq!(old, None);
                Op::Keep
            }),
            Computed::Unchanged
        );
        assert!(cache.is_empty());
        assert_eq!(
            *told.lock().unwrap(),
            [("k".to_owned(), 1, RemovalCause::Replaced), ("k".to_owned(), 2, RemovalCause::Removed)],
            "{policy:?}"
        );
        assert_eq!(cache.stats().admitted, 1);
    }
}

#[test]
fn a_compute_too_heavy_for_its_shard_stores_nothing() {
    let cache: AdmissionCache<u64, Vec<u8>> = AdmissionCache::builder()
        .capacity(100)
        .shards(1)
        .weigher(|_, value: &Vec<u8>| value.len() as u32)
        .build()
        .unwrap();
    assert_eq!(cache.entry(&1).and_compute_with(|_| Op::Put(vec![0; 10])), Computed::Inserted);
    assert_eq!(cache.weight(), 10);
    assert_eq!(cache.entry(&1).and_compute_with(|_| Op::Put(vec![0; 101])), Computed::TooHeavy);
    assert_eq!(cache.get(&1), None, "a present key leaves rather than keep a replaced value");
    assert_eq!(cache.entry(&2).and_compute_with(|_| Op::Put(vec![0; 101])), Computed::TooHeavy);
    assert!(cache.is_empty());
    assert_eq!(cache.entry(&3).and_upsert_with(|_| vec![1; 101]).len(), 101, "returned, not stored");
    assert_eq!(cache.weight(), 0);
}

#[test]
fn a_compute_keeps_its_stored_entry_and_evicts_others() {
    for policy in POLICIES {
        let cache: AdmissionCache<u64, u64> =
            AdmissionCache::builder().capacity(10).shards(1).admission(policy).build().unwrap();
        for key in 0..100 {
            cache.entry(&key).and_upsert_with(|_| key);
            assert_eq!(cache.peek(&key), Some(key), "{policy:?}: the computed key stays");
            assert!(cache.len() <= 10, "{policy:?}: held to the capacity");
        }
        assert_eq!(cache.stats().evictions, 90, "{policy:?}");
    }
}

#[test]
fn a_panicking_compute_changes_nothing_and_releases_the_lock() {
    for policy in POLICIES {
        let cache: AdmissionCache<u64, u64> =
            AdmissionCache::builder().capacity(10).admission(policy).build().unwrap();
        cache.entry(&1).and_upsert_with(|_| 10);
        let panicked = catch_unwind(AssertUnwindSafe(|| {
            cache.entry(&1).and_upsert_with(|_| panic!("the caller's code"));
        }));
        assert!(panicked.is_err());
        assert_eq!(cache.get(&1), Some(10), "{policy:?}");
        cache.entry(&2).and_upsert_with(|_| 20);
        assert_eq!(cache.entry(&2).and_upsert_with(|n| n.unwrap() + 1), 21, "{policy:?}: usable");
    }
}

#[test]
fn a_compute_during_a_load_stands_and_the_load_still_serves_its_callers() {
    for policy in POLICIES {
        let cache: Arc<AdmissionCache<u64, u64>> =
            Arc::new(AdmissionCache::builder().capacity(100).admission(policy).build().unwrap());
        let (started, wait_started) = mpsc::channel();
        let (go, wait_go) = mpsc::channel::<()>();
        let loader = {
            let cache = cache.clone();
            thread::spawn(move || {
                cache.get_or_insert_with(&5, || {
                    started.send(()).unwrap();
                    wait_go.recv_timeout(Duration::from_secs(60)).unwrap();
                    50
                })
            })
        };
        wait_started.recv_timeout(Duration::from_secs(60)).unwrap();
        assert_eq!(
            cache.entry(&5).and_compute_with(|old| Op::Put(old.map_or(7, |n| n + 1))),
            Computed::Inserted
        );
        go.send(()).unwrap();
        assert_eq!(loader.join().unwrap(), 50, "{policy:?}: the load's caller gets its value");
        assert_eq!(cache.get(&5), Some(7), "{policy:?}: the compute's value stands");
    }
}

#[test]
fn string_keys_are_asked_with_str() {
    for policy in POLICIES {
        let cache: AdmissionCache<String, u32> =
            AdmissionCache::builder().capacity(100).admission(policy).build().unwrap();
        assert_eq!(cache.get_or_insert_with("/news", || 1), 1);
        // Under SecondHit the first sighting is loaded, not stored; the second is stored.
        assert_eq!(cache.get_or_insert_with("/news", || 1), 1);
        assert_eq!(cache.try_get_or_insert_with("/news", || Err::<u32, ()>(())), Ok(1), "{policy:?}");
        let second = cache.insert("/news".to_owned(), 2);
        assert!(matches!(second, Admission::Updated | Admission::Admitted), "{policy:?}");
        assert_eq!((cache.get("/news"), cache.peek("/news")), (Some(2), Some(2)));
        assert!(cache.contains_key("/news") && !cache.contains_key("/sport"));
        assert_eq!(cache.remove("/news"), Some(2));
        assert_eq!(cache.get("/news"), None);
    }
}

/// A key of the test's own, looked up by the `u64` it wraps: its `Hash` is the `u64`'s, as
/// `Borrow` requires.
#[derive(Clone, Debug, Hash, PartialEq, Eq)]
struct UserId(u64);

impl Borrow<u64> for UserId {
    fn borrow(&self) -> &u64 {
        &self.0
    }
}

#[test]
fn keys_are_asked_with_their_own_borrowed_form() {
    let cache: AdmissionCache<UserId, &str> =
        AdmissionCache::builder().capacity(100).admission(AdmissionPolicy::Always).build().unwrap();
    let _ = cache.insert(UserId(7), "ada");
    assert_eq!((cache.get(&7u64), cache.peek(&7u64)), (Some("ada"), Some("ada")));
    assert_eq!(cache.get(&UserId(7)), Some("ada"));
    assert!(cache.contains_key(&7u64) && !cache.contains_key(&8u64));
    assert_eq!(cache.get_or_insert_with(&UserId(8), || "grace"), "grace");
    assert_eq!(cache.get(&8u64), Some("grace"));
    assert_eq!(cache.remove(&7u64), Some("ada"));
    assert_eq!(cache.len(), 1);
}

#[test]
fn a_compute_finds_an_expired_key_absent_and_counts_it_once() {
    for policy in POLICIES {
        let (clock, hand) = cuckoo_gate::Clock::manual();
        let cache: AdmissionCache<u64, u64> = AdmissionCache::builder()
            .capacity(100)
            .admission(policy)
            .time_to_live(Duration::from_secs(1))
            .clock(clock)
            .build()
            .unwrap();
        cache.entry(&1).and_upsert_with(|_| 1);
        hand.advance(Duration::from_secs(1));
        let computed = cache.entry(&1).and_upsert_with(|old| {
            assert_eq!(old, None, "{policy:?}: an expired value is not handed to a compute");
            2
        });
        assert_eq!((computed, cache.get(&1)), (2, Some(2)));
        assert_eq!(cache.stats().expirations, 1, "{policy:?}");
        hand.advance(Duration::from_secs(1));
        assert_eq!(cache.entry(&1).and_compute_with(|_| Op::Keep), Computed::Unchanged);
        assert_eq!(cache.stats().expirations, 2, "{policy:?}");
    }
}
