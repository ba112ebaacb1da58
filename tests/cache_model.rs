//! Random operations against a model. Whatever the policy, shard count, capacity and
//! weights, the cache returns only the value last stored for a key, keeps within its
//! capacity, holds what it says it admitted, and counts its hits and misses exactly; and
//! threads that each write their own keys see only their own last values.

use std::collections::HashMap;
use std::thread;

use cuckoo_gate::{Admission, AdmissionCache, AdmissionPolicy};
use proptest::prelude::*;

/// Keys drawn from `0..KEYS`, more than the largest cache holds, so that entries churn.
const KEYS: u8 = 48;

#[derive(Clone, Debug)]
enum Op {
    Get(u8),
    Insert(u8, u32),
    Remove(u8),
    GetOrInsert(u8, u32),
}

#[derive(Clone, Debug)]
struct Config {
    policy: AdmissionPolicy,
    capacity: usize,
    shards: usize,
    /// Entries weigh their value modulo 13 (0 counts as 1), or 1 each.
    weighted: bool,
    seed: u64,
}

fn config() -> impl Strategy<Value = Config> {
    let policy = prop_oneof![
        Just(AdmissionPolicy::Always),
        Just(AdmissionPolicy::SecondHit),
        Just(AdmissionPolicy::S3Fifo),
        Just(AdmissionPolicy::S3FifoLfu),
    ];
    (policy, 1..=40usize, 1..=4usize, any::<bool>(), any::<u64>()).prop_map(
        |(policy, capacity, shards, weighted, seed)| Config {
            policy,
            capacity,
            shards: shards.min(capacity),
            weighted,
            seed,
        },
    )
}

fn op() -> impl Strategy<Value = Op> {
    let key = 0..KEYS;
    prop_oneof![
        4 => key.clone().prop_map(Op::Get),
        4 => (key.clone(), any::<u32>()).prop_map(|(k, v)| Op::Insert(k, v)),
        1 => key.clone().prop_map(Op::Remove),
        2 => (key, any::<u32>()).prop_map(|(k, v)| Op::GetOrInsert(k, v)),
    ]
}

fn weight(value: u32) -> u32 {
    value % 13
}

fn build(config: &Config) -> AdmissionCache<u8, u32> {
    let builder = AdmissionCache::builder()
        .capacity(config.capacity as u64)
        .shards(config.shards)
        .admission(config.policy)
        .seed(config.seed);
    let builder = if config.weighted {
        builder.weigher(|_, &v| weight(v)).estimated_entries(config.capacity)
    } else {
        builder
    };
    builder.build().expect("a valid configuration")
}

/// Whether `found` is what the cache may return for a key whose last stored value is
/// `stored`: that value, or nothing (the key may have left).
fn stored_or_none(found: Option<u32>, stored: Option<&u32>) -> bool {
    found.is_none() || found == stored.copied()
}

/// `get`s made, and how many found their key.
#[derive(Default)]
struct Lookups {
    gets: u64,
    hits: u64,
}

impl Lookups {
    fn count(&mut self, hit: bool) {
        self.gets += 1;
        self.hits += u64::from(hit);
    }

    fn get(&mut self, cache: &AdmissionCache<u8, u32>, k: u8) -> Option<u32> {
        let found = cache.get(&k);
        self.count(found.is_some());
        found
    }
}

/// Runs `ops` against the cache and a model of it: for each key, the one value the cache
/// may return (the last stored, unless removed or refused since).
fn check(config: &Config, ops: &[Op]) -> Result<(), TestCaseError> {
    let cache = build(config);
    let mut model: HashMap<u8, u32> = HashMap::new();
    let mut lookups = Lookups::default();
    // The lightest and heaviest a shard's share of the capacity can be.
    let (light, heavy) = (config.capacity / config.shards, config.capacity.div_ceil(config.shards));
    for op in ops {
        match *op {
            Op::Get(k) => {
                let found = lookups.get(&cache, k);
                prop_assert!(stored_or_none(found, model.get(&k)), "{op:?} gave {found:?}");
            }
            Op::Insert(k, v) => {
                let admission = cache.insert(k, v);
                let w = if config.weighted { weight(v).max(1) as usize } else { 1 };
                match admission {
                    Admission::Admitted => {
                        model.insert(k, v);
                        prop_assert_eq!(lookups.get(&cache, k), Some(v), "an admitted key is held");
                    }
                    Admission::Updated => {
                        prop_assert!(model.contains_key(&k), "{op:?}: updated a key never stored");
                        model.insert(k, v);
                        prop_assert_eq!(
                            lookups.get(&cache, k),
                            Some(v),
                            "an updated key holds its new value"
                        );
                    }
                    Admission::Rejected => {
                        prop_assert_eq!(
                            config.policy,
                            AdmissionPolicy::SecondHit,
                            "only SecondHit refuses keys"
                        );
                        model.remove(&k);
                    }
                    Admission::TooHeavy => {
                        prop_assert!(w > light, "{op:?}: weight {w} fits every shard ({light})");
                        model.remove(&k);
                        prop_assert_eq!(lookups.get(&cache, k), None, "a key too heavy to keep is gone");
                    }
                    other => prop_assert!(false, "unexpected {other:?}"),
                }
                prop_assert!(w <= heavy || admission == Admission::TooHeavy, "{op:?}: {admission:?}");
            }
            Op::Remove(k) => {
                let removed = cache.remove(&k);
                prop_assert!(stored_or_none(removed, model.get(&k)), "{op:?} gave {removed:?}");
                model.remove(&k);
                prop_assert_eq!(lookups.get(&cache, k), None, "a removed key is gone");
            }
            Op::GetOrInsert(k, v) => {
                let mut computed = false;
                let got = cache.get_or_insert_with(&k, || {
                    computed = true;
                    v
                });
                lookups.count(!computed);
                if computed {
                    // The cache holds `v` now, or nothing.
                    prop_assert_eq!(got, v);
                    model.insert(k, v);
                } else {
                    prop_assert_eq!(
                        Some(got),
                        model.get(&k).copied(),
                        "{:?}: a hit returns the stored value",
                        op
                    );
                }
            }
        }
        let (len, total) = (cache.len() as u64, cache.weight());
        prop_assert!(total <= config.capacity as u64, "weight {total} over capacity {}", config.capacity);
        if !config.weighted {
            prop_assert_eq!(len, total, "unweighted entries weigh 1");
        }
        prop_assert!(len <= model.len() as u64, "{len} entries held, {} ever stored", model.len());
    }
    let stats = cache.stats();
    prop_assert_eq!((stats.hits, stats.misses), (lookups.hits, lookups.gets - lookups.hits));
    for k in 0..KEYS {
        let found = cache.get(&k);
        prop_assert!(stored_or_none(found, model.get(&k)), "key {k} holds {found:?}");
    }
    Ok(())
}

proptest! {
    // Cheap cases (a few hundred operations on a tiny cache): many of them.
    #![proptest_config(ProptestConfig::with_cases(2048))]

    #[test]
    fn the_cache_agrees_with_its_model(config in config(), ops in prop::collection::vec(op(), 1..300)) {
        check(&config, &ops)?;
    }
}

/// Four threads share a small cache; each writes only its own keys (so its model of them is
/// exact, whatever the others do: they can only make its keys leave) and reads everyone's.
/// A value carries its key in its top half, so a value found under another key shows.
#[test]
fn threads_that_own_their_keys_see_only_their_own_last_values() {
    const THREADS: u16 = 4;
    let policies = [
        AdmissionPolicy::Always,
        AdmissionPolicy::SecondHit,
        AdmissionPolicy::S3Fifo,
        AdmissionPolicy::S3FifoLfu,
    ];
    for (policy, weighted) in policies.into_iter().flat_map(|p| [(p, false), (p, true)]) {
        let builder = AdmissionCache::<u16, u32>::builder().capacity(64).shards(4).admission(policy);
        let cache = if weighted {
            builder.weigher(|_, &v| (v & 7) + 1).estimated_entries(16).build()
        } else {
            builder.build()
        }
        .unwrap();
        thread::scope(|s| {
            for t in 0..THREADS {
                let cache = &cache;
                s.spawn(move || {
                    let mut model: HashMap<u16, u32> = HashMap::new();
                    let mut x = u64::from(t) + 1;
                    for n in 0..40_000u32 {
                        x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                        let any = (x >> 40) as u16 % 256;
                        let own = any - any % THREADS + t;
                        let value = u32::from(own) << 16 | n & 0xFFFF;
                        let context = || format!("{policy:?}, weighted: {weighted}, thread {t}, key {own}");
                        match (x >> 20) % 8 {
                            0..=2 => {
                                if let Some(v) = cache.get(&any) {
                                    assert_eq!(v >> 16, u32::from(any), "{}: another key's value", context());
                                }
                            }
                            3 => {
                                let found = cache.get(&own);
                                assert!(stored_or_none(found, model.get(&own)), "{}", context());
                            }
                            4 | 5 => match cache.insert(own, value) {
                                Admission::Admitted | Admission::Updated => {
                                    model.insert(own, value);
                                }
                                _ => {
                                    model.remove(&own);
                                }
                            },
                            6 => {
                                let removed = cache.remove(&own);
                                assert!(stored_or_none(removed, model.get(&own)), "{}", context());
                                model.remove(&own);
                            }
                            _ => {
                                let stored = model.get(&own).copied();
                                let got = cache.get_or_insert_with(&own, || value);
                                assert!(got == value || Some(got) == stored, "{}", context());
                                model.insert(own, got);
                            }
                        }
                    }
                });
            }
        });
        assert!(cache.weight() <= 64, "{policy:?}, weighted: {weighted}");
    }
}
