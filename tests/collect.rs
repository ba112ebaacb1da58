//! Writes that hand their removals to the caller (`insert_collecting`,
//! `Entry::and_compute_collecting`), tracking without eviction (`track`), and a restore that
//! tells the listener of what it evicts: each removal reaches exactly one caller, the
//! weight stays within the capacity after every collecting write, and the listener hears
//! of none of what a caller collected.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::thread;

use cuckoo_gate::{Admission, AdmissionCache, AdmissionPolicy, Computed, Op, RemovalCause, Tracked};

type Told = Arc<Mutex<Vec<(u64, u32, RemovalCause)>>>;

/// A cache of sizes weighed by themselves, whose listener's reports land in the `Told`.
fn sized(capacity: u64, shards: usize, policy: AdmissionPolicy) -> (AdmissionCache<u64, u32>, Told) {
    let told: Told = Arc::default();
    let log = told.clone();
    let cache = AdmissionCache::builder()
        .capacity(capacity)
        .shards(shards)
        .admission(policy)
        .weigher(|_, size: &u32| *size)
        .eviction_listener(move |key, size, cause| log.lock().unwrap().push((key, size, cause)))
        .build()
        .unwrap();
    (cache, told)
}

#[test]
fn an_insert_hands_back_exactly_what_it_evicted() {
    for policy in [AdmissionPolicy::S3Fifo, AdmissionPolicy::Always] {
        let (cache, told) = sized(1_000, 1, policy);
        let mut held: HashMap<u64, u32> = HashMap::new();
        for key in 0..5_000u64 {
            let size = 1 + (key * 7919 % 97) as u32;
            let mut removed = Vec::new();
            let admission = cache.insert_collecting(key % 600, size, &mut removed);
            assert!(cache.weight() <= 1_000, "over capacity after an insert");
            for (gone, gone_size, cause) in removed {
                match cause {
                    RemovalCause::Evicted => assert_eq!(held.remove(&gone), Some(gone_size), "{policy:?}"),
                    RemovalCause::Replaced => assert_eq!(gone, key % 600),
                    other => panic!("unexpected {other:?}"),
                }
            }
            match admission {
                Admission::Admitted | Admission::Updated => {
                    held.insert(key % 600, size);
                }
                other => panic!("{policy:?}: {other:?}"),
            }
            // What the cache holds is exactly what was admitted and not handed back.
            if key % 500 == 0 {
                assert_eq!(held.len(), cache.len());
                assert!(held.iter().all(|(k, s)| cache.peek(k) == Some(*s)));
            }
        }
        assert!(told.lock().unwrap().is_empty(), "the listener heard of collected removals");
    }
}

#[test]
fn a_rejected_or_too_heavy_insert_hands_back_nothing() {
    let (cache, _) = sized(800, 8, AdmissionPolicy::SecondHit);
    let mut removed = Vec::new();
    assert_eq!(cache.insert_collecting(1, 10, &mut removed), Admission::Rejected);
    assert_eq!(cache.insert_collecting(2, 101, &mut removed), Admission::TooHeavy);
    assert!(removed.is_empty());
}

#[test]
fn a_compute_hands_back_what_it_pushed_out() {
    let (cache, told) = sized(100, 1, AdmissionPolicy::Always);
    for key in 0..10 {
        let _ = cache.insert(key, 10);
    }
    let mut removed = Vec::new();
    let computed = cache.entry(&0).and_compute_collecting(|size| Op::Put(size.unwrap() + 25), &mut removed);
    assert_eq!(computed, Computed::Updated);
    let evicted: u32 = removed.iter().filter(|r| r.2 == RemovalCause::Evicted).map(|r| r.1).sum();
    assert_eq!(removed.iter().filter(|r| r.2 == RemovalCause::Replaced).count(), 1);
    assert_eq!(evicted, 30, "three entries of 10 make room for 25 more");
    assert!(cache.weight() <= 100);
    assert_eq!(cache.peek(&0), Some(35));
    assert!(told.lock().unwrap().is_empty());
    // A compute too heavy for the shard removes the key, and hands back its old value.
    let mut removed = Vec::new();
    assert_eq!(cache.entry(&0).and_compute_collecting(|_| Op::Put(101), &mut removed), Computed::TooHeavy);
    assert_eq!(removed, [(0, 35, RemovalCause::Replaced)]);
}

#[test]
fn tracking_stores_without_evicting_and_the_next_write_evicts() {
    let (cache, told) = sized(100, 1, AdmissionPolicy::S3Fifo);
    for key in 0..15 {
        assert_eq!(cache.track(key, 10), Tracked::Stored);
    }
    assert_eq!((cache.len(), cache.weight()), (15, 150), "tracking evicts nothing");
    assert_eq!(cache.stats().hits, 0);
    assert_eq!(cache.track(3, 99), Tracked::Held);
    assert_eq!(cache.peek(&3), Some(10), "a held key keeps its value");
    assert_eq!(cache.stats().hits, 1, "a held key is a hit");
    assert_eq!(cache.track(99, 101), Tracked::TooHeavy);
    assert!(told.lock().unwrap().is_empty());
    let mut removed = Vec::new();
    let _ = cache.insert_collecting(100, 10, &mut removed);
    assert!(cache.weight() <= 100);
    assert_eq!(removed.len(), 6);
    assert!(removed.iter().all(|r| r.2 == RemovalCause::Evicted && r.0 != 100));
    assert!(removed.iter().all(|r| cache.peek(&r.0).is_none()));
}

#[test]
fn threads_collecting_lose_no_eviction_and_share_none() {
    const THREADS: u64 = 4;
    const PER_THREAD: u64 = 20_000;
    let (cache, told) = sized(5_000, 4, AdmissionPolicy::S3Fifo);
    let cache = Arc::new(cache);
    let runs: Vec<_> = (0..THREADS)
        .map(|t| {
            let cache = cache.clone();
            thread::spawn(move || {
                let (mut admitted, mut evicted) = (Vec::new(), Vec::new());
                for i in 0..PER_THREAD {
                    // Each thread its own keys, so that a key's history is one thread's.
                    let key = (i * 31 % 3_000) * THREADS + t;
                    let mut removed = Vec::new();
                    if i % 3 == 0 {
                        if cache.track(key, 5) == Tracked::Stored {
                            admitted.push(key);
                        }
                    } else if cache.insert_collecting(key, 5, &mut removed) == Admission::Admitted {
                        admitted.push(key);
                    }
                    evicted.extend(removed.into_iter().filter(|r| r.2 == RemovalCause::Evicted).map(|r| r.0));
                }
                (admitted, evicted)
            })
        })
        .collect();
    let mut balance: HashMap<u64, i64> = HashMap::new();
    for run in runs {
        let (admitted, evicted) = run.join().unwrap();
        admitted.into_iter().for_each(|k| *balance.entry(k).or_default() += 1);
        evicted.into_iter().for_each(|k| *balance.entry(k).or_default() -= 1);
    }
    let held: HashSet<u64> = cache.iter().map(|(k, _)| k).collect();
    for (key, count) in balance {
        // Admitted once more than evicted if held now, as often otherwise: no eviction
        // lost, none handed to two callers.
        assert_eq!(count, i64::from(held.contains(&key)), "key {key}");
    }
    assert!(told.lock().unwrap().is_empty());
}

#[cfg(feature = "serde")]
#[test]
fn a_restore_tells_the_listener_of_what_it_evicts() {
    let (full, _) = sized(1_000, 4, AdmissionPolicy::S3Fifo);
    for key in 0..80 {
        let _ = full.insert(key, 10);
    }
    let mut file = Vec::new();
    full.save(&mut file).unwrap();
    let (smaller, told) = sized(500, 4, AdmissionPolicy::S3Fifo);
    let restored = smaller.restore(&mut file.as_slice()).unwrap();
    let told = told.lock().unwrap();
    let held: HashSet<u64> = smaller.iter().map(|(k, _)| k).collect();
    let named: HashSet<u64> = told.iter().filter(|t| t.2 == RemovalCause::Evicted).map(|t| t.0).collect();
    assert_eq!(held.len() as u64, restored.entries);
    // Every saved key is held or named, never both.
    let saved: Vec<u64> = full.iter().map(|(k, _)| k).collect();
    assert_eq!(saved.len() as u64, restored.entries + restored.dropped);
    assert!(restored.dropped > 0);
    assert!(saved.iter().all(|key| held.contains(key) != named.contains(key)));
}
