//! Behaviour of the admission gate and the cache: exact LRU, admission semantics, aging,
//! the check-and-record race, configuration errors, and a concurrent stress run.

use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Barrier};
use std::thread;

use cuckoo_gate::{Admission, AdmissionCache, AdmissionPolicy, BuildError, SeenBefore};

/// A textbook LRU: recency stamps in an ordered map. Returns the hit count of `trace`.
fn textbook_lru_hits(trace: &[u64], capacity: usize) -> (u64, Vec<bool>) {
    let mut stamp_of: HashMap<u64, u64> = HashMap::new();
    let mut by_stamp: BTreeMap<u64, u64> = BTreeMap::new();
    let (mut hits, mut pattern) = (0, Vec::with_capacity(trace.len()));
    for (now, &key) in trace.iter().enumerate() {
        let now = now as u64;
        let hit = if let Some(old) = stamp_of.insert(key, now) {
            by_stamp.remove(&old);
            true
        } else {
            if by_stamp.len() == capacity {
                let (_, victim) = by_stamp.pop_first().unwrap();
                stamp_of.remove(&victim);
            }
            false
        };
        by_stamp.insert(now, key);
        hits += u64::from(hit);
        pattern.push(hit);
    }
    (hits, pattern)
}

fn replay_hits(trace: &[u64], cache: &AdmissionCache<u64, u64>) -> Vec<bool> {
    trace
        .iter()
        .map(|&key| {
            let hit = cache.get(&key).is_some();
            if !hit {
                assert_eq!(cache.insert(key, key), Admission::Admitted);
            }
            hit
        })
        .collect()
}

fn generated_trace(n: usize) -> Vec<u64> {
    // A skewed stream: key = floor(1 / u^2) style, plus unique keys.
    let mut x = 0x2545_F491_4F6C_DD1Du64;
    (0..n)
        .map(|i| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            if i % 4 == 0 {
                1_000_000 + i as u64
            } else {
                (x % 1000) * (x % 1000) / 997
            }
        })
        .collect()
}

fn read_trace(path: &Path) -> Option<Vec<u64>> {
    let text = std::fs::read_to_string(path).ok()?;
    Some(text.lines().filter_map(|l| l.split_whitespace().next()?.parse().ok()).collect())
}

#[test]
fn one_shard_always_is_exactly_lru() {
    let mut traces = vec![("generated".to_string(), generated_trace(50_000))];
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/traces");
    for name in ["adaptsize_cdn", "cloudphysics_io", "cache2k_web07", "lirs_sprite"] {
        match read_trace(&dir.join(format!("{name}.keys"))) {
            Some(trace) => traces.push((name.to_string(), trace)),
            None => eprintln!("skipping {name}: ../shared/traces/{name}.keys not found"),
        }
    }
    for (name, trace) in traces {
        let mut distinct = trace.clone();
        distinct.sort_unstable();
        distinct.dedup();
        for capacity in [1, distinct.len() / 20, distinct.len() / 10] {
            let cache: AdmissionCache<u64, u64> = AdmissionCache::builder()
                .capacity(capacity as u64)
                .admission(AdmissionPolicy::Always)
                .shards(1)
                .build()
                .unwrap();
            let (expected_hits, expected) = textbook_lru_hits(&trace, capacity);
            let got = replay_hits(&trace, &cache);
            assert!(got == expected, "{name} at {capacity}: hit pattern differs from a textbook LRU");
            assert_eq!(cache.stats().hits, expected_hits);
            assert_eq!(cache.len(), capacity.min(distinct.len()));
        }
    }
}

/// libCacheSim 0.3.5's better hit ratio of W-TinyLFU and S3-FIFO on each shared trace, with
/// the cache at 1%, 5% and 10% of its distinct keys (`../shared/traces/README.md`).
const REFERENCE: [(&str, [f64; 3]); 5] = [
    ("adaptsize_cdn", [0.2643, 0.3522, 0.3747]),
    ("arc_p6", [0.0323, 0.0918, 0.1683]),
    ("cache2k_web07", [0.4375, 0.5425, 0.5822]),
    ("cloudphysics_io", [0.1695, 0.1870, 0.2447]),
    ("lirs_sprite", [0.2127, 0.6706, 0.8596]),
];

#[test]
fn s3fifo_meets_its_floors_on_every_shared_trace() {
    // At least LRU's hits, and within a point of the better reference policy.
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/traces");
    for (name, best) in REFERENCE {
        let Some(trace) = read_trace(&dir.join(format!("{name}.keys"))) else {
            eprintln!("skipping {name}: ../shared/traces/{name}.keys not found");
            continue;
        };
        let objects = trace.iter().collect::<std::collections::HashSet<_>>().len();
        for (percent, best) in [1, 5, 10].into_iter().zip(best) {
            let capacity = (objects * percent / 100).max(10);
            let lru = textbook_lru_hits(&trace, capacity).0;
            let cache =
                AdmissionCache::builder().capacity(capacity as u64).shards(1).seed(7).build().unwrap();
            let hits = replay_hits(&trace, &cache).iter().filter(|&&hit| hit).count() as u64;
            assert!(hits >= lru, "{name} at {percent}%: S3Fifo {hits} hits, LRU {lru}");
            let ratio = hits as f64 / trace.len() as f64;
            assert!(ratio >= best - 0.01, "{name} at {percent}%: S3Fifo {ratio:.4}, reference {best}");
        }
    }
}

#[test]
fn second_hit_rejects_first_sightings() {
    let cache: AdmissionCache<u64, String> =
        AdmissionCache::builder().capacity(100).admission(AdmissionPolicy::SecondHit).build().unwrap();
    assert_eq!(cache.insert(1, "a".into()), Admission::Rejected);
    assert_eq!(cache.get(&1), None);
    assert_eq!(cache.insert(1, "a".into()), Admission::Admitted);
    assert_eq!(cache.get(&1).as_deref(), Some("a"));
    assert_eq!(cache.insert(1, "b".into()), Admission::Updated);
    assert_eq!(cache.remove(&1).as_deref(), Some("b"));
    let stats = cache.stats();
    assert_eq!((stats.hits, stats.misses, stats.admitted, stats.rejected), (1, 1, 1, 1));
}

#[test]
fn get_or_insert_with_computes_only_on_a_miss() {
    let cache: AdmissionCache<u64, u64> =
        AdmissionCache::builder().capacity(10).admission(AdmissionPolicy::SecondHit).build().unwrap();
    let calls = AtomicUsize::new(0);
    let make = || {
        calls.fetch_add(1, Ordering::Relaxed);
        42
    };
    assert_eq!(cache.get_or_insert_with(&7, make), 42); // rejected: computed, not stored
    assert_eq!(cache.get_or_insert_with(&7, make), 42); // admitted now
    assert_eq!(cache.get_or_insert_with(&7, make), 42); // a hit
    assert_eq!(calls.load(Ordering::Relaxed), 2);
}

#[test]
fn evicted_keys_return_without_waiting() {
    let cache: AdmissionCache<u64, u64> = AdmissionCache::builder()
        .capacity(2)
        .admission(AdmissionPolicy::SecondHit)
        .shards(1)
        .build()
        .unwrap();
    for key in [1, 1, 2, 2, 3, 3] {
        let _ = cache.insert(key, key);
    }
    assert_eq!(cache.get(&1), None, "1 was evicted");
    // The gate kept the evicted key as a ghost: it is admitted on its next request.
    assert_eq!(cache.insert(1, 1), Admission::Admitted);
}

/// Read-through over a loop of twice the capacity's keys, `passes` times over: the hit
/// ratio of the last fifth of the passes.
fn loop_hit_ratio(cache: &AdmissionCache<u64, u64>, keys: u64, passes: u64) -> f64 {
    let mut hits = 0;
    for pass in 0..passes {
        for key in 0..keys {
            match cache.get(&key) {
                Some(_) if pass >= passes - passes / 5 => hits += 1,
                Some(_) => {}
                None => {
                    let _ = cache.insert(key, key);
                }
            }
        }
    }
    hits as f64 / (keys * (passes / 5)) as f64
}

#[test]
fn s3fifo_learns_to_keep_part_of_a_loop_longer_than_the_cache() {
    // LRU hits nothing here, and S3-FIFO with ghosts that remember the whole loop little
    // (under 0.25): each returning key goes to main and pushes out one about to be asked
    // for. The climber shortens the ghosts' reach until main keeps half the loop.
    let cache: AdmissionCache<u64, u64> =
        AdmissionCache::builder().capacity(1_000).shards(1).build().unwrap();
    let ratio = loop_hit_ratio(&cache, 2_000, 200);
    assert!(ratio > 0.4, "{ratio}");
}

#[test]
fn s3fifo_keeps_reused_keys_through_a_scan_and_readmits_ghosts() {
    let cache: AdmissionCache<u64, u64> = AdmissionCache::builder().capacity(100).shards(1).build().unwrap();
    assert_eq!(cache.policy(), AdmissionPolicy::S3Fifo, "the default policy");
    for key in 0..100 {
        assert_eq!(cache.insert(key, key), Admission::Admitted);
    }
    // Requested twice more while new: it moves to main when it reaches the small tail.
    assert_eq!(cache.get(&1), Some(1));
    assert_eq!(cache.get(&1), Some(1));
    for key in 1_000..1_300 {
        let _ = cache.insert(key, key); // a scan of 300 new keys through a 100-entry cache
    }
    assert_eq!(cache.get(&1), Some(1), "a reused key is not pushed out by a scan");
    assert_eq!(cache.get(&1_000), None, "a scanned key left unused");
    // A key that left the small queue unused is a ghost: asked again, it goes to main,
    // where the next scan does not reach it before its requests run out (in the small
    // queue, with one request, the scan would push it out).
    let _ = cache.insert(1_250, 1_250);
    assert_eq!(cache.get(&1_250), Some(1_250));
    for key in 2_000..2_050 {
        let _ = cache.insert(key, key);
    }
    assert_eq!(cache.get(&1_250), Some(1_250));
    assert!(cache.len() <= 100);
}

#[test]
fn gate_forgets_after_two_generations() {
    let gate = SeenBefore::builder().capacity(8).seed(3).build().unwrap();
    assert!(!gate.check_and_record("old"));
    assert!(gate.check_and_record("old"));
    for i in 0..16u32 {
        gate.check_and_record(&i);
    }
    assert!(gate.stats().rotations >= 2);
    assert!(!gate.contains("old"));
    assert!(!gate.check_and_record("old"), "aged out, so a first sighting again");
    gate.forget("old");
    assert!(!gate.contains("old"));
}

#[test]
fn gate_race_has_exactly_one_first_sighting() {
    let gate = Arc::new(SeenBefore::builder().capacity(200_000).false_positive_rate(1e-6).build().unwrap());
    let threads = 4;
    let keys = 20_000u64;
    let start = Arc::new(Barrier::new(threads));
    let firsts: usize = (0..threads)
        .map(|_| {
            let (gate, start) = (gate.clone(), start.clone());
            thread::spawn(move || {
                start.wait();
                (0..keys).filter(|k| !gate.check_and_record(k)).count()
            })
        })
        .collect::<Vec<_>>()
        .into_iter()
        .map(|t| t.join().unwrap())
        .sum();
    assert_eq!(firsts as u64, keys);
}

#[test]
fn default_shards_follow_the_cores_and_keep_256_entries_each() {
    let shards = |builder: cuckoo_gate::AdmissionCacheBuilder<u64, u64>| {
        let debug = format!("{:?}", builder.build().unwrap());
        let count =
            debug.split("shards: ").nth(1).and_then(|rest| rest.split(|c: char| !c.is_ascii_digit()).next());
        count.and_then(|n| n.parse::<usize>().ok()).expect("the cache's Debug names its shards")
    };
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    assert_eq!(shards(AdmissionCache::builder().capacity(100)), 1, "a small cache is one shard");
    assert_eq!(shards(AdmissionCache::builder().capacity(1_000)), 3.min(16 * cores));
    let entries = |n: usize| AdmissionCache::builder().capacity(n as u64);
    assert_eq!(shards(entries(256 * 16 * cores)), 16 * cores);
    assert_eq!(shards(entries(256 * 16 * cores - 1)), 16 * cores - 1);
    assert_eq!(shards(entries(256 * 20 * cores)), 16 * cores, "16 per core at most");
    // Weighted: sized by the estimated entries, not the total weight.
    let weighted =
        AdmissionCache::builder().capacity(1 << 30).weigher(|_, _| 1 << 20).estimated_entries(1_024);
    assert_eq!(shards(weighted), 4.min(16 * cores));
    assert_eq!(shards(AdmissionCache::builder().capacity(1 << 20).shards(5)), 5, "as asked");
}

#[test]
fn bad_configuration_is_an_error() {
    let err = |b: cuckoo_gate::AdmissionCacheBuilder<u64, u64>| b.build().unwrap_err();
    assert_eq!(err(AdmissionCache::<u64, u64>::builder()), BuildError::ZeroCapacity);
    assert!(matches!(
        err(AdmissionCache::<u64, u64>::builder().capacity(10).shards(0)),
        BuildError::InvalidShards { .. }
    ));
    assert!(matches!(
        err(AdmissionCache::<u64, u64>::builder().capacity(10).shards(11)),
        BuildError::InvalidShards { .. }
    ));
    // Far more shards than memory allows: an error, not an allocation abort.
    assert!(matches!(
        err(AdmissionCache::<u64, u64>::builder().capacity((1 << 32) - 2).shards((1 << 32) - 2)),
        BuildError::InvalidShards { .. }
    ));
    // A weigher needs no estimate: it is a hint.
    assert!(AdmissionCache::<u64, u64>::builder().capacity(10).weigher(|_, _| 1).build().is_ok());
    assert_eq!(
        err(AdmissionCache::<u64, u64>::builder().capacity(10).gate_capacity(0)),
        BuildError::ZeroSetting { setting: "gate_capacity" }
    );
    assert_eq!(
        err(AdmissionCache::<u64, u64>::builder().capacity(10).estimated_entries(0)),
        BuildError::ZeroSetting { setting: "estimated_entries" }
    );
    let always = AdmissionCache::<u64, u64>::builder().capacity(10).admission(AdmissionPolicy::Always);
    assert!(always.gate_capacity(0).build().is_ok(), "no gate under Always: the setting is unused");
    // Ghosts or estimated entries too many to allocate: an error naming the setting, not
    // an abort.
    for policy in [AdmissionPolicy::S3Fifo, AdmissionPolicy::SecondHit] {
        let builder = AdmissionCache::<u64, u64>::builder().capacity(10).admission(policy);
        let too_large = err(builder.clone().gate_capacity(usize::MAX));
        assert!(
            matches!(too_large, BuildError::AdmissionTooLarge { setting: "gate_capacity", .. }),
            "{too_large}"
        );
        assert!(too_large.to_string().contains(".gate_capacity"), "{too_large}");
        let refused = err(builder.clone().gate_capacity(1 << 50));
        assert!(
            matches!(refused, BuildError::AdmissionTooLarge { setting: "gate_capacity", bytes: Some(_) }),
            "{refused}"
        );
        let estimated = err(builder.estimated_entries(1 << 50));
        assert!(matches!(estimated, BuildError::AdmissionTooLarge { setting: "estimated_entries", .. }));
    }
    assert!(matches!(
        err(AdmissionCache::<u64, u64>::builder()
            .capacity(10)
            .weigher(|_, _| 1)
            .estimated_entries(usize::MAX)),
        BuildError::AdmissionTooLarge { setting: "estimated_entries", .. }
    ));
    // Rates are printed as written, not as 300 digits.
    let tiny = SeenBefore::builder().capacity(10).false_positive_rate(1e-300).build().unwrap_err();
    assert!(tiny.to_string().contains("1e-300"), "{tiny}");
    assert!(SeenBefore::builder().build().is_err());
    assert!(SeenBefore::builder().capacity(10).false_positive_rate(f64::NAN).build().is_err());
}

#[test]
fn concurrent_use_keeps_consistent_stats() {
    for policy in [AdmissionPolicy::Always, AdmissionPolicy::SecondHit, AdmissionPolicy::S3Fifo] {
        let cache: Arc<AdmissionCache<u64, u64>> =
            Arc::new(AdmissionCache::builder().capacity(1_000).admission(policy).shards(8).build().unwrap());
        let per_thread: Vec<[u64; 4]> = (0..4u64)
            .map(|t| {
                let cache = cache.clone();
                thread::spawn(move || {
                    let mut counts = [0u64; 4]; // gets, admitted, rejected, updated
                    let mut x = t + 1;
                    for _ in 0..100_000 {
                        x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                        let key = (x >> 33) % 5_000;
                        match (x >> 20) % 10 {
                            0..=5 => {
                                counts[0] += 1;
                                if let Some(v) = cache.get(&key) {
                                    assert_eq!(v, key, "a value stored under another key");
                                }
                            }
                            6..=8 => match cache.insert(key, key) {
                                Admission::Admitted => counts[1] += 1,
                                Admission::Rejected => counts[2] += 1,
                                Admission::Updated => counts[3] += 1,
                                other => panic!("{other:?} for an unweighted entry"),
                            },
                            _ => {
                                if let Some(v) = cache.remove(&key) {
                                    assert_eq!(v, key);
                                }
                            }
                        }
                    }
                    counts
                })
            })
            .collect::<Vec<_>>()
            .into_iter()
            .map(|t| t.join().unwrap())
            .collect();
        let total = |i: usize| per_thread.iter().map(|c| c[i]).sum::<u64>();
        let stats = cache.stats();
        assert_eq!(stats.hits + stats.misses, total(0), "{policy:?}");
        assert_eq!(stats.admitted, total(1), "{policy:?}");
        assert_eq!(stats.rejected, total(2), "{policy:?}");
        assert!(cache.len() as u64 <= cache.capacity());
    }
}

#[test]
fn public_types_are_send_and_sync() {
    fn send_sync<T: Send + Sync>() {}
    send_sync::<cuckoo_gate::CuckooFilter>();
    send_sync::<SeenBefore>();
    send_sync::<AdmissionCache<u64, String>>();
}

#[test]
fn s3fifo_lfu_keeps_main_through_a_loop_a_little_longer_than_the_cache() {
    // A loop of 1,200 keys through 1,000 entries: under S3-FIFO each returning ghost goes
    // to main and pushes out a key about to be asked for; with the sketch a returning
    // ghost asked for no more often than main's victim does not (once the climber has
    // taken the credit down), and main's keys hit on every pass.
    let ratio = |policy| {
        let cache: AdmissionCache<u64, u64> =
            AdmissionCache::builder().capacity(1_000).shards(1).admission(policy).build().unwrap();
        loop_hit_ratio(&cache, 1_200, 400)
    };
    let (lfu, plain) = (ratio(AdmissionPolicy::S3FifoLfu), ratio(AdmissionPolicy::S3Fifo));
    assert!(lfu > 0.7 && lfu > plain + 0.05, "S3FifoLfu {lfu}, S3Fifo {plain}");
}
