//! Saving a cache and restoring it: entries, their order, requests and lifetimes come
//! back under every policy; a restore into another capacity, shard count or policy keeps
//! what fits and names to the listener every entry it drops; lifetimes that ended while
//! down are told as expired; a restore adopts the saved seed (hit for hit with the saved
//! cache, the gate's memory kept) or re-keys on request; writes racing a restore are kept
//! or named; a save while two threads churn restores only values the keys held;
//! corrupt input gets an error naming it, and leaves the cache empty and usable; 100,000
//! random edits of a valid file never panic.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::Duration;

use cuckoo_gate::{Admission, AdmissionCache, AdmissionPolicy, Clock, Lifetime, SnapshotError};

const POLICIES: [AdmissionPolicy; 4] = [
    AdmissionPolicy::S3FifoLfu,
    AdmissionPolicy::S3Fifo,
    AdmissionPolicy::SecondHit,
    AdmissionPolicy::Always,
];

fn secs(s: u64) -> Duration {
    Duration::from_secs(s)
}

fn saved<V: Clone + serde::Serialize + serde::de::DeserializeOwned>(
    cache: &AdmissionCache<u64, V>,
) -> Vec<u8> {
    let mut bytes = Vec::new();
    let saved = cache.save(&mut bytes).unwrap();
    assert_eq!(saved.bytes, bytes.len() as u64);
    bytes
}

/// A cache of `capacity` under `policy` that holds keys 0..n (each written twice, so that
/// `SecondHit` admits it).
fn filled(policy: AdmissionPolicy, capacity: u64, shards: usize, n: u64) -> AdmissionCache<u64, String> {
    let cache = AdmissionCache::builder()
        .capacity(capacity)
        .shards(shards)
        .admission(policy)
        .seed(3)
        .build()
        .unwrap();
    for key in 0..n {
        let _ = cache.insert(key, format!("v{key}"));
        let _ = cache.insert(key, format!("v{key}"));
    }
    cache
}

#[test]
fn every_entry_comes_back_under_every_policy() {
    for policy in POLICIES {
        let cache = filled(policy, 1_000, 4, 500);
        let before: Vec<_> = (0..500).map(|k| cache.peek(&k)).collect();
        assert!(before.iter().all(Option::is_some), "{policy:?}");
        let bytes = saved(&cache);
        for (other, shards) in [(policy, 4), (AdmissionPolicy::S3Fifo, 1), (AdmissionPolicy::Always, 7)] {
            let restored: AdmissionCache<u64, String> =
                AdmissionCache::builder().capacity(1_000).shards(shards).admission(other).build().unwrap();
            let report = restored.restore(&mut bytes.as_slice()).unwrap();
            assert_eq!(
                (report.entries, report.expired, report.dropped),
                (500, 0, 0),
                "{policy:?} -> {other:?}"
            );
            assert_eq!(report.bytes, bytes.len() as u64);
            let after: Vec<_> = (0..500).map(|k| restored.peek(&k)).collect();
            assert_eq!(after, before, "{policy:?} -> {other:?}");
            assert_eq!(restored.stats().restored_entries, 500);
        }
    }
}

#[test]
fn an_exact_lru_keeps_its_order() {
    let cache = filled(AdmissionPolicy::Always, 100, 1, 100);
    // Touch the even keys: they become the most recently used.
    (0..100).step_by(2).for_each(|k| _ = cache.get(&k));
    let restored: AdmissionCache<u64, String> =
        AdmissionCache::builder().capacity(50).shards(1).admission(AdmissionPolicy::Always).build().unwrap();
    let report = restored.restore(&mut saved(&cache).as_slice()).unwrap();
    assert_eq!((report.entries, report.dropped), (50, 50));
    assert!((0..100).step_by(2).all(|k| restored.peek(&k).is_some()), "the 50 most recently used stay");
}

#[test]
fn a_smaller_cache_keeps_the_entries_with_the_most_requests() {
    let cache = filled(AdmissionPolicy::S3Fifo, 1_000, 1, 1_000);
    for _ in 0..3 {
        (0..100).for_each(|k| _ = cache.get(&k));
    }
    let restored: AdmissionCache<u64, String> =
        AdmissionCache::builder().capacity(200).shards(1).build().unwrap();
    restored.restore(&mut saved(&cache).as_slice()).unwrap();
    let hot = (0..100).filter(|k| restored.peek(k).is_some()).count();
    assert!(hot >= 90, "{hot} of the 100 requested keys kept");
}

#[test]
fn a_restored_cache_answers_as_the_saved_one_would_have() {
    // A skewed stream with one-hit wonders: after a save, the saved cache and one that
    // restored the save hit on exactly the same requests.
    let requests: Vec<u64> = (0..30_000u64)
        .map(|i| if i % 3 == 0 { 1 << 40 | i } else { mix(i) % 2_000 % (1 + mix(i >> 1) % 2_000) })
        .collect();
    // Both caches get random seeds, as a service's do: the restored one adopts the saved
    // one's, so that its entries, gate, ghosts and sketch are the saved cache's.
    for policy in POLICIES {
        let build = || {
            AdmissionCache::<u64, u64>::builder().capacity(300).shards(4).admission(policy).build().unwrap()
        };
        let replay = |cache: &AdmissionCache<u64, u64>, requests: &[u64]| -> Vec<bool> {
            let hit = |&key: &u64| {
                cache.get(&key).is_some() || {
                    let _ = cache.insert(key, key);
                    false
                }
            };
            requests.iter().map(hit).collect()
        };
        let saved = build();
        replay(&saved, &requests[..20_000]);
        let mut bytes = Vec::new();
        saved.save(&mut bytes).unwrap();
        let restored = build();
        restored.restore(&mut bytes.as_slice()).unwrap();
        let (hits, again) = (replay(&saved, &requests[20_000..]), replay(&restored, &requests[20_000..]));
        assert!(hits.iter().filter(|&&h| h).count() > 1_000, "{policy:?}: the stream hits");
        let first = hits.iter().zip(&again).position(|(a, b)| a != b);
        let n = hits.iter().zip(&again).filter(|(a, b)| a != b).count();
        assert!(
            hits == again,
            "{policy:?}: the restored cache hit on other requests: {n} from {first:?}; {} vs {}",
            hits.iter().filter(|&&h| h).count(),
            again.iter().filter(|&&h| h).count()
        );
    }
}

#[test]
fn lifetimes_count_the_time_spent_down() {
    let (clock, hand) = Clock::manual();
    let build = |clock: Clock| {
        AdmissionCache::<u64, u64>::builder()
            .capacity(100)
            .time_to_live(secs(100))
            .clock(clock)
            .build()
            .unwrap()
    };
    let cache = build(clock.clone());
    let _ = cache.insert(1, 1); // lives 100 s
    let _ = cache.insert_with_ttl(2, 2, secs(10));
    let _ = cache.insert_with_lifetime(3, 3, Lifetime::ttl(secs(10)).fresh_for(secs(5)).grace(secs(30)));
    let _ = cache.insert_with_lifetime(4, 4, Lifetime::forever());
    hand.advance(secs(5));
    let bytes = saved(&cache);
    hand.advance(secs(20)); // down for 20 s
    let restored = build(clock);
    let report = restored.restore(&mut bytes.as_slice()).unwrap();
    assert_eq!((report.entries, report.expired), (3, 1), "key 2's lifetime ended while down");
    assert_eq!(
        (restored.get(&1), restored.get(&2), restored.get(&3), restored.get(&4)),
        (Some(1), None, None, Some(4))
    );
    // Key 3 is in grace (10 s of life, 30 of grace, 25 s after its write).
    assert_eq!(restored.try_get_or_insert_with(&3, || Err::<u64, ()>(())), Ok(3), "in grace");
    hand.advance(secs(75));
    assert_eq!(
        (restored.get(&1), restored.get(&4)),
        (None, Some(4)),
        "key 1 lived its 100 s, down time included"
    );
    assert_eq!(restored.try_get_or_insert_with(&3, || Err::<u64, ()>(())), Err(()), "grace over");
}

#[test]
fn the_gates_memory_comes_back_whatever_the_seed() {
    let build = |seed| {
        AdmissionCache::<u64, u64>::builder()
            .capacity(100)
            .admission(AdmissionPolicy::SecondHit)
            .seed(seed)
            .build()
            .unwrap()
    };
    let cache = build(11);
    assert_eq!(cache.insert(1, 1), Admission::Rejected); // a first sighting, remembered
    let restored = build(12);
    restored.restore(&mut saved(&cache).as_slice()).unwrap();
    assert!(restored.gate().is_some_and(|gate| gate.contains(&1)), "the gate hashes as the cache does");
    assert_eq!(restored.insert(1, 1), Admission::Admitted, "seen before the restart");
    // Re-keyed, the gate starts afresh: its filters remember hashes by the old seed.
    let rekeyed = build(12);
    rekeyed.restore_rekeyed(&mut saved(&cache).as_slice()).unwrap();
    assert_eq!(rekeyed.insert(1, 1), Admission::Rejected, "a first sighting for a fresh seed");
}

/// What a listener was told: each key and why it left.
type Told = Arc<std::sync::Mutex<Vec<(u64, cuckoo_gate::RemovalCause)>>>;

/// A cache like `filled`'s with another seed, telling `told` of every entry that leaves it.
fn listened(capacity: u64, shards: usize, seed: u64, told: &Told) -> AdmissionCache<u64, String> {
    let told = told.clone();
    AdmissionCache::builder()
        .capacity(capacity)
        .shards(shards)
        .seed(seed)
        .eviction_listener(move |key, _, cause| told.lock().unwrap().push((key, cause)))
        .build()
        .unwrap()
}

#[test]
fn a_restore_names_every_entry_it_does_not_keep() {
    use cuckoo_gate::RemovalCause::{Cleared, Evicted};
    // A full cache of 64 shards into one built alike with another seed: adopting the saved
    // seed, nothing is dropped; re-keyed, the shards overfill and what they shed is named.
    let cache = filled(AdmissionPolicy::S3Fifo, 6_400, 64, 6_400);
    let held: Vec<u64> = (0..6_400).filter(|k| cache.peek(k).is_some()).collect();
    let n = held.len() as u64;
    assert!(n > 6_000, "nearly full: {n}");
    let bytes = saved(&cache);
    let told = Arc::new(std::sync::Mutex::new(Vec::new()));
    let alike = listened(6_400, 64, 99, &told);
    let _ = alike.insert(1 << 40, "before".into());
    let report = alike.restore(&mut bytes.as_slice()).unwrap();
    assert_eq!((report.entries, report.dropped, report.expired), (n, 0, 0));
    assert_eq!(told.lock().unwrap().as_slice(), [(1 << 40, Cleared)], "what it held is told as cleared");
    assert!(held.iter().all(|k| alike.peek(k).is_some()));

    for (capacity, shards, rekeyed) in [(6_400, 64, true), (1_000, 8, false), (1_000, 8, true)] {
        told.lock().unwrap().clear();
        let other = listened(capacity, shards, 99, &told);
        let report = if rekeyed {
            other.restore_rekeyed(&mut bytes.as_slice())
        } else {
            other.restore(&mut bytes.as_slice())
        };
        let report = report.unwrap();
        let evicted: Vec<u64> =
            told.lock().unwrap().iter().filter(|(_, c)| *c == Evicted).map(|&(k, _)| k).collect();
        assert!(report.dropped > 0, "{capacity}/{shards}: some entries do not fit");
        assert_eq!(report.dropped as usize, evicted.len(), "{capacity}/{shards}: each dropped entry is told");
        assert_eq!(report.entries + report.dropped, n, "{capacity}/{shards}: kept or told, none lost");
        assert!(evicted.iter().all(|k| other.peek(k).is_none()), "{capacity}/{shards}: those told are gone");
        assert_eq!(other.stats().evictions, report.dropped, "{capacity}/{shards}: counted as evictions");
    }
}

#[test]
fn lifetimes_that_ended_while_down_are_told_as_expired() {
    let (clock, hand) = Clock::manual();
    let told = Arc::new(std::sync::Mutex::new(Vec::new()));
    let build = |told: Option<Told>| {
        let builder = AdmissionCache::<u64, u64>::builder().capacity(100).clock(clock.clone());
        match told {
            Some(told) => {
                builder.eviction_listener(move |key, _, cause| told.lock().unwrap().push((key, cause)))
            }
            None => builder,
        }
        .build()
        .unwrap()
    };
    let cache = build(None);
    let _ = cache.insert_with_ttl(1, 1, secs(10));
    let _ = cache.insert(2, 2);
    let bytes = saved(&cache);
    hand.advance(secs(11));
    let restored = build(Some(told.clone()));
    let report = restored.restore(&mut bytes.as_slice()).unwrap();
    assert_eq!((report.entries, report.expired), (1, 1));
    assert_eq!(told.lock().unwrap().as_slice(), [(1, cuckoo_gate::RemovalCause::Expired)]);
}

#[test]
fn writes_racing_a_restore_are_kept_or_named() {
    // A writer inserts fresh keys while the cache restores a file saved with another seed.
    // Every key it wrote is then held, or was told to the listener: none is stored under
    // the old seed's hash, where no one would find it.
    use cuckoo_gate::RemovalCause::{Cleared, Evicted};
    let bytes = saved(&filled(AdmissionPolicy::S3Fifo, 4_000, 16, 2_000));
    for round in 0..20u64 {
        let told = Arc::new(std::sync::Mutex::new(Vec::new()));
        let cache = Arc::new(listened(4_000, 16, round, &told));
        let done = Arc::new(AtomicBool::new(false));
        let writer = {
            let (cache, done) = (cache.clone(), done.clone());
            thread::spawn(move || {
                let mut written = Vec::new();
                for key in (1u64 << 40).. {
                    let _ = cache.insert(key, "w".into());
                    written.push(key);
                    if done.load(Ordering::Relaxed) && written.len() > 1_000 {
                        return written;
                    }
                }
                unreachable!()
            })
        };
        cache.restore(&mut bytes.as_slice()).unwrap();
        done.store(true, Ordering::Relaxed);
        let written = writer.join().unwrap();
        let told: std::collections::HashSet<u64> = told
            .lock()
            .unwrap()
            .iter()
            .filter(|(_, cause)| matches!(cause, Cleared | Evicted))
            .map(|&(key, _)| key)
            .collect();
        let lost: Vec<_> = written.iter().filter(|k| cache.peek(k).is_none() && !told.contains(k)).collect();
        assert!(lost.is_empty(), "round {round}: {} written keys neither held nor told", lost.len());
        assert!((0..2_000).all(|k| cache.peek(&k).is_some() || told.contains(&k)));
        assert!(cache.len() <= 4_000);
    }
}

#[test]
fn a_save_while_two_threads_churn_restores_values_the_keys_held() {
    for policy in POLICIES {
        let (clock, hand) = Clock::manual();
        let cache: Arc<AdmissionCache<u64, u64>> = Arc::new(
            AdmissionCache::builder()
                .capacity(2_000)
                .admission(policy)
                .time_to_live(secs(10))
                .clock(clock.clone())
                .build()
                .unwrap(),
        );
        // A key's value is always key * 1_000 + a version: a value restored must be one
        // its key held.
        // Each written twice, so that SecondHit admits it.
        for key in (0..5_000u64).flat_map(|key| [key, key]) {
            let _ = cache.insert_with_ttl(key, key * 1_000, if key % 2 == 0 { secs(1) } else { secs(100) });
        }
        hand.advance(secs(1)); // the even keys expired
        let (stop, started) = (Arc::new(AtomicBool::new(false)), Arc::new(AtomicUsize::new(0)));
        let churn: Vec<_> = (0..2u64)
            .map(|t| {
                let (cache, stop, started) = (cache.clone(), stop.clone(), started.clone());
                thread::spawn(move || {
                    let mut version = 1;
                    started.fetch_add(1, Ordering::Relaxed);
                    while !stop.load(Ordering::Relaxed) {
                        for key in (t..5_000).step_by(7) {
                            if key % 2 == 1 {
                                let _ = cache.insert(key, key * 1_000 + version % 1_000);
                            }
                            let _ = cache.get(&(key + 1));
                        }
                        version += 1;
                    }
                })
            })
            .collect();
        while started.load(Ordering::Relaxed) < 2 {
            thread::yield_now();
        }
        let mut bytes = Vec::new();
        for _ in 0..3 {
            bytes.clear();
            cache.save(&mut bytes).unwrap();
        }
        stop.store(true, Ordering::Relaxed);
        churn.into_iter().for_each(|t| t.join().unwrap());
        let restored: AdmissionCache<u64, u64> =
            AdmissionCache::builder().capacity(2_000).admission(policy).clock(clock).build().unwrap();
        let report = restored.restore(&mut bytes.as_slice()).unwrap();
        assert!(report.entries > 0, "{policy:?}");
        for (key, value) in restored.iter() {
            assert_eq!(value / 1_000, key, "{policy:?}: key {key} got {value}");
            assert!(key % 2 == 1, "{policy:?}: key {key} had expired before the save");
        }
    }
}

#[test]
fn corrupt_input_gets_an_error_and_leaves_the_cache_empty_and_usable() {
    let cache = filled(AdmissionPolicy::S3Fifo, 1_000, 4, 300);
    let bytes = saved(&cache);
    let restored: AdmissionCache<u64, String> = AdmissionCache::builder().capacity(1_000).build().unwrap();
    let truncated = restored.restore(&mut &bytes[..bytes.len() - 5]).unwrap_err();
    assert!(matches!(truncated, SnapshotError::Truncated), "{truncated}");
    assert!(restored.is_empty());
    let mut flipped = bytes.clone();
    let at = flipped.len() / 2;
    flipped[at] ^= 0x40;
    let corrupt = restored.restore(&mut flipped.as_slice()).unwrap_err();
    assert!(
        matches!(corrupt, SnapshotError::ChecksumMismatch { .. } | SnapshotError::Inconsistent { .. }),
        "{corrupt}"
    );
    assert!(restored.is_empty());
    let filter = cuckoo_gate::CuckooFilter::with_capacity(10);
    let mut other = Vec::new();
    filter.snapshot(&mut other).unwrap();
    let wrong = restored.restore(&mut other.as_slice()).unwrap_err();
    assert!(wrong.to_string().contains("CuckooFilter"), "{wrong}");
    // Still usable, and a good file still restores.
    let _ = restored.insert(1, "one".into());
    assert_eq!(restored.restore(&mut bytes.as_slice()).unwrap().entries, 300);
    assert_eq!(restored.get(&1).as_deref(), Some("v1"));
}

/// SplitMix64, for reproducible edits.
fn mix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

#[test]
fn random_edits_of_a_valid_file_never_panic() {
    let (clock, _hand) = Clock::manual();
    let cache: AdmissionCache<String, Vec<u8>> = AdmissionCache::builder()
        .capacity(64)
        .shards(2)
        .time_to_live(secs(60))
        .clock(clock.clone())
        .build()
        .unwrap();
    for key in 0..40u64 {
        let _ = cache.insert(format!("k{key}"), vec![key as u8; (key % 9) as usize]);
    }
    let mut bytes = Vec::new();
    cache.save(&mut bytes).unwrap();
    let restored: AdmissionCache<String, Vec<u8>> =
        AdmissionCache::builder().capacity(64).clock(clock).build().unwrap();
    let mut state = 1u64;
    for round in 0..100_000u64 {
        let mut edited = bytes.clone();
        state = mix(state ^ round);
        match state % 4 {
            0 => {
                let at = (mix(state) % edited.len() as u64) as usize;
                edited[at] ^= 1 << (state >> 60 & 7);
            }
            1 => edited.truncate((mix(state) % edited.len() as u64) as usize),
            2 => {
                let at = (mix(state) % edited.len() as u64) as usize;
                edited[at] = (state >> 32) as u8;
            }
            _ => {
                let at = (mix(state) % edited.len() as u64) as usize;
                edited.insert(at, (state >> 40) as u8);
            }
        }
        if restored.restore(&mut edited.as_slice()).is_err() {
            assert!(restored.is_empty(), "round {round}: an error left entries behind");
        }
    }
}

#[test]
fn a_version_5_save_restores_under_either_s3fifo() {
    // tests/data/cache_v5.snapshot: saved by the format before the sketch (version 5) from a
    // default (then S3-FIFO) cache of 200 entries in 2 shards, seed 5, holding 200 of the
    // keys 0..500 (their sum 49,695), each valued three times its key.
    let bytes = include_bytes!("data/cache_v5.snapshot");
    assert_eq!((bytes[8], bytes[12]), (5, 2), "version 5, S3-FIFO");
    for policy in [AdmissionPolicy::S3FifoLfu, AdmissionPolicy::S3Fifo] {
        let cache: AdmissionCache<u64, u64> =
            AdmissionCache::builder().capacity(200).shards(2).admission(policy).build().unwrap();
        let report = cache.restore(&mut bytes.as_slice()).unwrap();
        assert_eq!((report.entries, report.dropped), (200, 0), "{policy:?}");
        let held: Vec<u64> = (0..500).filter(|k| cache.peek(k) == Some(k * 3)).collect();
        assert_eq!((held.len(), held.iter().sum::<u64>()), (200, 49_695), "{policy:?}");
        // The restored cache goes on: its sketch starts empty, and a loop over the keys hits.
        let hits = (0..2_000u64).filter(|i| {
            let k = i * 2_654_435_761 % 500;
            cache.get(&k).is_some() || {
                let _ = cache.insert(k, k * 3);
                false
            }
        });
        assert!(hits.count() > 500, "{policy:?}");
    }
}
