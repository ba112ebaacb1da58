//! Fuzzes `AdmissionCache::restore` with arbitrary bytes, into a cache of each policy.
//!
//! Each input is tried as it is and with a valid CRC-32 appended, so that inputs reach
//! the checks behind the checksum. Restoring must never panic (nor allocate what a corrupt
//! length or count claims). On an error the cache must be empty and usable; on success it
//! must hold what it says, save again, and restore from that save to the same entries.
//!
//! Run (needs a nightly toolchain and `cargo install cargo-fuzz`), or `fuzz/run.sh 60
//! restore_cache` on the stable toolchain:
//!
//! ```text
//! cargo +nightly fuzz run restore_cache -- -max_len=8192 -rss_limit_mb=1024
//! ```
#![no_main]

use cuckoo_gate::{AdmissionCache, AdmissionPolicy, Clock};
use libfuzzer_sys::fuzz_target;

type Cache = AdmissionCache<u64, String>;

/// A cache on a clock that stands still, so that a save and a restore of it agree.
fn cache(policy: AdmissionPolicy) -> Cache {
    let (clock, _hand) = Clock::manual();
    let builder = AdmissionCache::builder().capacity(64).shards(4).admission(policy).seed(7);
    builder.clock(clock).build().unwrap()
}

fuzz_target!(|data: &[u8]| {
    let mut sealed = data.to_vec();
    sealed.extend_from_slice(&crc32fast::hash(data).to_le_bytes());
    for bytes in [data, &sealed[..]] {
        for policy in
            [AdmissionPolicy::S3FifoLfu, AdmissionPolicy::S3Fifo, AdmissionPolicy::SecondHit, AdmissionPolicy::Always]
        {
            let cache = cache(policy);
            match cache.restore(&mut &bytes[..]) {
                Ok(restored) => {
                    assert_eq!(restored.entries, cache.len() as u64);
                    let mut again = Vec::new();
                    let saved = cache.save(&mut again).unwrap();
                    assert_eq!(saved.entries, restored.entries);
                    let other = self::cache(policy);
                    let twice = other.restore(&mut &again[..]).unwrap();
                    assert_eq!(twice.entries + twice.expired + twice.dropped, restored.entries);
                    for (key, value) in other.iter() {
                        assert_eq!(cache.get(&key), Some(value));
                    }
                }
                Err(_) => assert!(cache.is_empty()),
            }
            let _ = cache.insert(1, "one".to_string());
            let _ = cache.insert(1, "one".to_string());
            assert!(cache.len() <= 64);
        }
    }
});
