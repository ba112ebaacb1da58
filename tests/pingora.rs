//! Conformance of `cuckoo_gate::pingora` to Pingora's traits, one test per promise in
//! their doc comments (`pingora_cache::eviction::EvictionManager`,
//! `pingora_cache::admission::AdmissionPolicy`), and the save and load round trip.

use std::collections::{HashMap, HashSet};
use std::num::NonZeroU64;
use std::path::PathBuf;
use std::sync::Arc;
use std::thread;
use std::time::SystemTime;

use cuckoo_gate::pingora::{S3FifoManager, SecondRequest, SAVE_FILE};
use cuckoo_gate::SeenBefore;
use pingora_cache::admission::{AdmissionPolicy, Decision};
use pingora_cache::eviction::{CacheEntryId, CacheEntryKey, CacheEntryKeyRef, EvictionManager};
use pingora_cache::CacheKey;

fn key(i: u64) -> CacheEntryKey {
    CacheEntryKey::key_only(CacheKey::new(format!("/object/{i}"), "").to_compact())
}

fn identified(i: u64, id: u64) -> CacheEntryKey {
    CacheEntryKey::identified(CacheKey::new(format!("/object/{i}"), "").to_compact(), CacheEntryId::new(id))
}

fn size_of(i: u64) -> usize {
    100 + (i.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 52) as usize
}

fn now() -> SystemTime {
    SystemTime::now()
}

fn manager(limit: usize, shards: usize, seed: u64) -> S3FifoManager {
    S3FifoManager::builder(limit)
        .shards(shards)
        .estimated_entries(limit / 2_000 + 1)
        .seed(seed)
        .build()
        .unwrap()
}

fn block_on<F: std::future::Future>(future: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(future)
}

fn scratch_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("cuckoo_gate_pingora_{name}_{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

/// "Return one or more items to evict. The sizes of these items are deducted from the total
/// size already": admit returns exactly what left, and the total stays within the limit.
#[test]
fn admit_returns_exactly_the_entries_it_evicted() {
    let m = manager(200_000, 4, 1);
    let mut model: HashMap<CacheEntryKey, usize> = HashMap::new();
    let mut new_entries = 0;
    for step in 0..20_000u64 {
        let i = (step * 7_919) % 3_000;
        let (item, size) = (key(i), size_of(i + step % 3));
        let evicted = m.admit(item.clone(), size, now());
        new_entries += usize::from(model.insert(item.clone(), size).is_none());
        for gone in &evicted {
            assert!(model.remove(gone).is_some(), "evicted {gone} was not tracked");
            assert!(!m.peek(gone), "evicted {gone} is still tracked");
        }
        assert!(m.total_size() <= 200_000, "over the limit");
        if step % 1_000 == 0 {
            assert_eq!(m.total_items(), model.len());
            assert_eq!(m.total_size(), model.values().sum::<usize>());
            assert!(model.keys().all(|k| m.peek(k)));
        }
    }
    assert!(m.evicted_items() > 0);
    assert_eq!(m.evicted_items() + m.total_items(), new_entries, "every new entry is tracked or was evicted");
}

/// "If the item is already admitted, A. update its freshness; B. if the new size is larger
/// than the existing one, Some(_) might be returned for the caller to evict."
#[test]
fn admitting_again_takes_the_new_size() {
    let m = manager(1_000, 1, 1);
    for i in 0..4 {
        assert!(m.admit(key(i), 200, now()).is_empty());
    }
    assert!(m.admit(key(0), 200, now()).is_empty());
    assert_eq!((m.total_items(), m.total_size()), (4, 800));
    let evicted = m.admit(key(0), 500, now());
    assert_eq!(evicted.len(), 1, "300 more bytes push one entry of 200 out");
    assert!(!evicted.contains(&key(0)));
    assert_eq!(m.total_size(), 900);
}

/// Objects heavier than a shard holds are not kept: admit hands them back to be purged.
#[test]
fn an_object_heavier_than_a_shard_is_handed_back() {
    let m = manager(8_000, 8, 1);
    assert_eq!(m.max_object_size(), 1_000);
    assert!(m.admit(key(1), 1_000, now()).is_empty());
    assert_eq!(m.admit(key(2), 1_001, now()), [key(2)]);
    assert!(!m.peek(&key(2)));
    assert_eq!((m.evicted_items(), m.evicted_size()), (1, 1_001));
    assert_eq!(m.total_size(), 1_000);
}

/// "Implementations must require the complete identity to match the originally admitted
/// entry; a key-only identity must not match an identified entry with the same logical key."
#[test]
fn remove_and_peek_match_the_exact_identity() {
    let m = manager(100_000, 1, 1);
    assert!(m.admit(identified(1, 7), 100, now()).is_empty());
    assert!(m.admit(key(2), 100, now()).is_empty());
    assert!(m.peek(&identified(1, 7)));
    assert!(!m.peek(&key(1)), "a key-only identity matched an identified entry");
    assert!(!m.peek(&identified(1, 8)), "another entry id matched");
    assert!(!m.peek(&identified(2, 7)), "an identified identity matched a key-only entry");
    let k1 = key(1);
    m.remove(CacheEntryKeyRef::from(&k1));
    m.remove(CacheEntryKeyRef::from(&identified(1, 8)));
    assert!(m.peek(&identified(1, 7)));
    assert_eq!(m.total_items(), 2);
    m.remove(CacheEntryKeyRef::from(&identified(1, 7)));
    assert!(!m.peek(&identified(1, 7)));
    assert_eq!((m.total_items(), m.total_size()), (1, 100), "the size of the item is deducted");
}

/// Two entries of one key with different ids are two entries (Pingora's own test).
#[test]
fn identified_entries_are_distinct() {
    let m = manager(1, 1, 1);
    assert!(m.admit(identified(1, 1), 1, now()).is_empty());
    assert_eq!(m.admit(identified(1, 2), 1, now()), [identified(1, 1)]);
    assert!(m.peek(&identified(1, 2)));
}

/// "Adjust an item's weight upwards by a delta. If the item is not already admitted, track
/// it with the delta as its initial weight, capped by `max_weight`, and floored to 1. [...]
/// This hint will not shrink an item whose current weight already exceeds `max_weight`."
#[test]
fn increment_weight_grows_caps_and_floors() {
    let m = manager(10_000, 1, 1);
    assert!(m.increment_weight(&key(1), 0, None).is_empty());
    assert_eq!(m.total_size(), 1, "floored to 1");
    assert!(m.increment_weight(&key(2), 500, Some(300)).is_empty());
    assert_eq!(m.total_size(), 301, "capped by max_weight");
    assert!(m.increment_weight(&key(2), 500, Some(400)).is_empty());
    assert_eq!(m.total_size(), 401, "grown up to max_weight");
    assert!(m.increment_weight(&key(2), 500, Some(100)).is_empty());
    assert_eq!(m.total_size(), 401, "the hint does not shrink");
    assert!(m.increment_weight(&key(2), 99, None).is_empty());
    assert_eq!(m.total_size(), 500);
    for i in 3..12 {
        assert!(m.admit(key(i), 1_000, now()).is_empty() || i > 11);
    }
    let before = m.total_items();
    let evicted = m.increment_weight(&key(2), 1_000, None);
    assert!(!evicted.is_empty(), "growing past the limit evicts");
    assert!(!evicted.contains(&key(2)));
    assert_eq!(m.total_items(), before - evicted.len());
    assert!(m.total_size() <= 10_000);
}

/// Growing past what a shard holds: the entry is no longer tracked, and handed back.
#[test]
fn increment_weight_past_a_shard_hands_the_entry_back() {
    let m = manager(1_000, 1, 1);
    assert!(m.admit(key(1), 600, now()).is_empty());
    assert_eq!(m.increment_weight(&key(1), 600, None), [key(1)]);
    assert!(!m.peek(&key(1)));
    assert_eq!(m.total_size(), 0);
}

/// "If the item is not tracked by this EvictionManager, track it but no eviction will happen."
#[test]
fn access_tracks_without_evicting() {
    let m = manager(1_000, 1, 1);
    for i in 0..20 {
        assert!(!m.access(&key(i), 100, now()), "untracked");
    }
    assert_eq!((m.total_items(), m.total_size()), (20, 2_000), "no eviction");
    assert!(m.access(&key(3), 100, now()), "tracked");
    let evicted = m.admit(key(100), 100, now());
    assert_eq!(evicted.len(), 11, "the next admit evicts down to the limit");
    assert!(m.total_size() <= 1_000);
    assert!(evicted.iter().all(|k| !m.peek(k)));
}

/// "This function should have no side-effect on the asset itself."
#[test]
fn peek_has_no_side_effect() {
    let m = manager(1_000, 1, 1);
    assert!(!m.peek(&key(1)));
    assert_eq!(m.total_items(), 0, "peek tracked nothing");
    assert!(m.admit(key(1), 100, now()).is_empty());
    let hits = m.stats().hits;
    assert!(m.peek(&key(1)));
    assert_eq!(m.stats().hits, hits, "peek counted a request");
}

/// "these trait methods require &self [...] concurrency should be handled the
/// implementations internally": threads admitting, accessing and growing entries lose no
/// eviction and are told of none twice.
#[test]
fn threads_lose_no_eviction_and_double_report_none() {
    const THREADS: u64 = 4;
    const STEPS: u64 = 15_000;
    let m = Arc::new(manager(300_000, 4, 1));
    let runs: Vec<_> = (0..THREADS)
        .map(|t| {
            let m = m.clone();
            thread::spawn(move || {
                let (mut tracked, mut evicted) = (Vec::new(), Vec::new());
                for step in 0..STEPS {
                    // Each thread has keys of its own, so a key's history is one thread's.
                    let i = ((step * 7_919) % 2_000) * THREADS + t;
                    let item = key(i);
                    match step % 5 {
                        0 => {
                            if !m.peek(&item) && !m.access(&item, size_of(i), now()) {
                                tracked.push(item);
                            }
                        }
                        1 if m.peek(&item) => evicted.extend(m.increment_weight(&item, 10, Some(4_000))),
                        _ => {
                            let was = m.peek(&item);
                            let out = m.admit(item.clone(), size_of(i), now());
                            if !was {
                                tracked.push(item.clone());
                            }
                            evicted.extend(out);
                        }
                    }
                }
                (tracked, evicted)
            })
        })
        .collect();
    let mut balance: HashMap<CacheEntryKey, i64> = HashMap::new();
    for run in runs {
        let (tracked, evicted) = run.join().unwrap();
        tracked.into_iter().for_each(|k| *balance.entry(k).or_default() += 1);
        evicted.into_iter().for_each(|k| *balance.entry(k).or_default() -= 1);
    }
    let mut held = 0;
    for (item, count) in balance {
        let now_held = m.peek(&item);
        held += usize::from(now_held);
        assert_eq!(count, i64::from(now_held), "{item}: tracked and evicted don't balance");
    }
    assert_eq!(held, m.total_items());
    assert!(m.total_size() <= 300_000 + 4 * 5_000, "within the limit, but for untracked accesses");
    assert!(m.evicted_items() > 1_000);
}

/// "Serialize to save the state of this eviction manager to disk" and "The counterpart of
/// save()": into a manager built alike, whatever its seed, every entry comes back; into a
/// smaller one, every entry comes back or is named to be purged; none is both.
#[test]
fn save_and_load_restore_every_entry_or_name_it() {
    let dir = scratch_dir("roundtrip");
    let path = dir.to_str().unwrap();
    let before = manager(400_000, 4, 1);
    let mut saved = HashSet::new();
    for i in 0..3_000u64 {
        let item = if i % 3 == 0 { identified(i, i * 31) } else { key(i) };
        let evicted = before.admit(item.clone(), size_of(i), now());
        saved.insert(item);
        evicted.iter().for_each(|k| assert!(saved.remove(k)));
        if i % 4 == 0 && !before.access(&key(i), size_of(i), now()) {
            saved.insert(key(i)); // tracked by the access
        }
    }
    let saved: HashSet<CacheEntryKey> = saved.into_iter().filter(|k| before.peek(k)).collect();
    block_on(before.save(path)).unwrap();
    assert!(dir.join(SAVE_FILE).exists());

    for (limit, seed) in [(400_000, 1), (400_000, 2), (150_000, 3)] {
        let after = manager(limit, 4, seed);
        block_on(after.load(path)).unwrap();
        let named: HashSet<CacheEntryKey> = after.take_unkept().into_iter().collect();
        for item in &saved {
            assert!(
                after.peek(item) != named.contains(item),
                "{item}: kept {}, named {}",
                after.peek(item),
                named.contains(item)
            );
        }
        assert!(named.iter().all(|k| saved.contains(k)), "named an entry never saved");
        assert!(after.total_size() <= limit);
        if limit == 400_000 {
            // The load adopts the saved seed: every entry comes back, whatever the seed.
            assert!(named.is_empty(), "seed {seed}: the same limit restores every entry");
            assert_eq!(after.total_size(), before.total_size());
        }
        if limit < 400_000 {
            assert!(!named.is_empty());
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// The entries a load could not keep are handed to Pingora with the next admit, once.
#[test]
fn a_load_hands_what_it_dropped_to_the_next_admit() {
    let dir = scratch_dir("next_admit");
    let path = dir.to_str().unwrap();
    let before = manager(100_000, 1, 1);
    for i in 0..50 {
        assert!(before.admit(key(i), 1_000, now()).is_empty());
    }
    block_on(before.save(path)).unwrap();
    let after = manager(20_000, 1, 1);
    block_on(after.load(path)).unwrap();
    let handed = after.admit(key(1_000), 1_000, now());
    assert!(handed.len() >= 30, "{} handed out", handed.len());
    assert!(handed.iter().all(|k| !after.peek(k)));
    assert!(after.admit(key(1_001), 1, now()).len() <= 1, "handed out once");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn load_without_a_save_is_empty_and_a_corrupt_one_fails() {
    let dir = scratch_dir("corrupt");
    let path = dir.to_str().unwrap();
    let m = manager(1_000, 1, 1);
    block_on(m.load(path)).unwrap();
    assert_eq!(m.total_items(), 0);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join(SAVE_FILE), b"not a save").unwrap();
    assert!(block_on(m.load(path)).is_err());
    assert_eq!(m.total_items(), 0);
    let _ = std::fs::remove_dir_all(&dir);
}

/// Under the gate, an entry admitted on its key's first sighting is handed straight back.
#[test]
fn the_gated_manager_hands_back_first_sightings() {
    let m = S3FifoManager::builder(100_000).shards(1).second_hit().build().unwrap();
    assert_eq!(m.admit(key(1), 100, now()), [key(1)]);
    assert!(m.admit(key(1), 100, now()).is_empty());
    assert!(m.peek(&key(1)));
}

/// "Observe an absent key and return a Decision for this request": Defer on a first
/// sighting, Ready after, keyed by what Pingora caches by.
#[test]
fn second_request_defers_first_sightings_by_the_combined_hash() {
    let policy = SecondRequest::new(SeenBefore::builder().capacity(10_000).build().unwrap());
    let plain = CacheKey::new("/a", "user-1");
    assert_eq!(policy.observe(&plain), Decision::Defer { observed: 1 });
    assert_eq!(policy.observe(&plain), Decision::Ready { observed: 2 });
    // The user tag is not part of what storage keys by; a variance is.
    assert!(!policy.observe(&CacheKey::new("/a", "user-2")).is_deferred());
    let mut varied = CacheKey::new("/a", "user-1");
    varied.set_variance_key([3; 16]);
    assert!(policy.observe(&varied).is_deferred());
    assert!(!policy.observe(&varied).is_deferred());
    let mut overridden = CacheKey::new("/b", "");
    overridden.set_primary_bin_override(pingora_cache::key::CacheHashKey::primary_bin(&plain));
    assert!(!policy.observe(&overridden).is_deferred(), "a primary-bin override is the key it names");
    let stats = policy.stats();
    assert_eq!((stats.deferred, stats.ready), (2, 4));
}

/// With a first-sight scale, `observe` leaves a first sighting to the node (`Ready`,
/// `observed: 1`), and `admit_response` writes it by its size: always at size 0, never
/// when e^(-size/c) rounds to 0 or the size is unknown; a key seen before always; what
/// the policy did not observe (no decision) always; a deferral never.
#[test]
fn first_sightings_are_written_by_their_size() {
    let scale = NonZeroU64::new(256).unwrap();
    let policy =
        SecondRequest::new(SeenBefore::builder().capacity(10_000).build().unwrap()).first_sight_scale(scale);
    assert_eq!(policy.scale(), Some(scale));
    let (small, large, chunked) =
        (CacheKey::new("/small", ""), CacheKey::new("/large", ""), CacheKey::new("/c", ""));
    let first = policy.observe(&small);
    assert_eq!(first, Decision::Ready { observed: 1 });
    assert!(policy.admit_response(&small, Some(first), Some(0)));
    let first = policy.observe(&large);
    assert_eq!(first, Decision::Ready { observed: 1 });
    assert!(!policy.admit_response(&large, Some(first), Some(1 << 30)));
    let second = policy.observe(&large);
    assert_eq!(second, Decision::Ready { observed: 2 });
    assert!(policy.admit_response(&large, Some(second), Some(1 << 30)));
    let first = policy.observe(&chunked);
    assert!(!policy.admit_response(&chunked, Some(first), None), "a first sighting of unknown size");
    assert!(policy.admit_response(&chunked, None, None), "not observed: a revalidation");
    assert!(!policy.admit_response(&chunked, Some(Decision::Defer { observed: 1 }), Some(0)));
    let stats = policy.stats();
    assert_eq!((stats.ready, stats.deferred, stats.small), (1, 3, 1));

    // Without a scale, first sightings are deferred at lookup, as before.
    let plain = SecondRequest::new(SeenBefore::builder().capacity(10_000).build().unwrap());
    assert_eq!(plain.scale(), None);
    let first = plain.observe(&small);
    assert_eq!(first, Decision::Defer { observed: 1 });
    assert!(!plain.admit_response(&small, Some(first), Some(0)));
    assert!(
        !plain.admit_response(&small, Some(Decision::Ready { observed: 1 }), Some(0)),
        "no scale: no size rule"
    );
}

/// AdaptSize's rule: of many first sightings of `size` bytes, a share of about
/// e^(-size/c) is written; a key gets the same answer each time within a process, and a
/// larger size is written no more often than a smaller one for the same key.
#[test]
fn the_first_sight_draw_follows_adaptsize() {
    const KEYS: usize = 20_000;
    let c = 1_000u64;
    let policy = SecondRequest::new(SeenBefore::builder().capacity(1_000).build().unwrap())
        .first_sight_scale(NonZeroU64::new(c).unwrap());
    let first = Some(Decision::Ready { observed: 1 });
    let keys: Vec<CacheKey> = (0..KEYS).map(|i| CacheKey::new(format!("/draw/{i}"), "")).collect();
    for size in [c / 2, c, 2 * c, 4 * c] {
        let written = keys.iter().filter(|k| policy.admit_response(k, first, Some(size))).count();
        let expected = (-(size as f64) / c as f64).exp();
        let share = written as f64 / KEYS as f64;
        assert!(
            (share - expected).abs() < 0.02,
            "size {size}: {share:.4} written, e^(-size/c) = {expected:.4}"
        );
    }
    for k in keys.iter().take(1_000) {
        let at = |size| policy.admit_response(k, first, Some(size));
        assert_eq!(at(c), at(c), "one answer per key");
        assert!(at(c) || !at(2 * c), "monotone in the size");
    }
}

#[test]
fn second_request_remembers_across_a_snapshot() {
    let policy = SecondRequest::new(SeenBefore::builder().capacity(10_000).build().unwrap());
    let keys: Vec<CacheKey> = (0..1_000).map(|i| CacheKey::new(format!("/k/{i}"), "")).collect();
    // First sightings, but for the gate's false positives (1%).
    assert!(keys.iter().filter(|k| policy.observe(k).is_deferred()).count() >= 970);
    let mut file = Vec::new();
    policy.snapshot(&mut file).unwrap();
    let restarted = SecondRequest::restore(&mut file.as_slice()).unwrap();
    assert!(keys.iter().all(|k| !restarted.observe(k).is_deferred()));
}

/// The gate remembering 1M keys takes under a tenth of an exact second-hit map of their
/// 16-byte hashes (hashbrown's table: a power of two of buckets, at most 7/8 full, an
/// entry and a control byte each).
#[test]
fn the_gate_takes_under_a_tenth_of_an_exact_map() {
    use pingora_cache::key::HashBinary;
    const KEYS: usize = 1_000_000;
    let policy = SecondRequest::new(SeenBefore::builder().capacity(KEYS).build().unwrap());
    let mut exact: HashMap<HashBinary, u32> = HashMap::new();
    for i in 0..KEYS as u64 {
        let mut bin = [0u8; 16];
        bin[..8].copy_from_slice(&(i.wrapping_mul(0x9E37_79B9_7F4A_7C15)).to_le_bytes());
        bin[8..].copy_from_slice(&i.to_le_bytes());
        policy.admit_bin(&bin);
        *exact.entry(bin).or_default() += 1;
    }
    let buckets = (exact.capacity() * 8 / 7).next_power_of_two();
    let exact_bytes = buckets * (std::mem::size_of::<(HashBinary, u32)>() + 1);
    let gate_bytes = policy.gate().stats().memory_bytes;
    assert!(gate_bytes * 10 <= exact_bytes, "gate {gate_bytes} bytes, exact map {exact_bytes}");
    assert_eq!(policy.stats().deferred, KEYS as u64 - policy.stats().ready);
    assert!(policy.stats().ready < KEYS as u64 / 50, "1% false positives at most, about");
}
