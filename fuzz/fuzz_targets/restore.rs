//! Fuzzes `CuckooFilter::restore` and `SeenBefore::restore` with arbitrary bytes.
//!
//! Each input is tried as it is and with a valid CRC-32 appended, so that inputs reach
//! the field and table checks behind the checksum. Restoring must never panic (nor
//! allocate what a corrupt length claims); whatever it accepts must be a working filter
//! that snapshots back to exactly the bytes it was restored from, or, if they hold a
//! header of an older format version (read, and written back in the current one), to
//! bytes that restore to the same filter and snapshot to themselves.
//!
//! Run (needs a nightly toolchain and `cargo install cargo-fuzz`):
//!
//! ```text
//! cargo +nightly fuzz run restore -- -max_len=4096 -rss_limit_mb=512
//! ```
#![no_main]

use cuckoo_gate::snapshot::{MAGIC, VERSION};
use cuckoo_gate::{CuckooFilter, SeenBefore};
use libfuzzer_sys::fuzz_target;

/// Whether `bytes` hold a snapshot header of a format version older than the current one.
fn older(bytes: &[u8]) -> bool {
    bytes.windows(10).any(|w| w[..8] == MAGIC && u16::from_le_bytes([w[8], w[9]]) < VERSION)
}

/// `again`, the snapshot of what `bytes` restored to, holds exactly those bytes, or they
/// were of an older version and `again` is a fixed point of restore and snapshot.
fn check_round_trip(bytes: &[u8], again: &[u8], resnapshot: impl Fn(&[u8]) -> Vec<u8>, what: &str) {
    if again[..] != bytes[..again.len().min(bytes.len())] || again.len() > bytes.len() {
        assert!(older(bytes), "a {what} snapshot did not round-trip");
        assert_eq!(resnapshot(again), again, "an upgraded {what} snapshot did not round-trip");
    }
}

fuzz_target!(|data: &[u8]| {
    let mut sealed = data.to_vec();
    sealed.extend_from_slice(&crc32fast::hash(data).to_le_bytes());
    for bytes in [data, &sealed[..]] {
        if let Ok(filter) = CuckooFilter::restore(&mut &bytes[..]) {
            let mut again = Vec::new();
            filter.snapshot(&mut again).unwrap();
            let resnapshot = |bytes: &[u8]| {
                let restored = CuckooFilter::restore(&mut &bytes[..]).unwrap();
                assert_eq!(restored.stats(), filter.stats());
                let mut again = Vec::new();
                restored.snapshot(&mut again).unwrap();
                again
            };
            check_round_trip(bytes, &again, resnapshot, "filter");
            if filter.insert(&1u64).is_ok() {
                assert!(filter.contains(&1u64));
                assert!(filter.remove(&1u64));
            }
        }
        if let Ok(gate) = SeenBefore::restore(&mut &bytes[..]) {
            let mut again = Vec::new();
            gate.snapshot(&mut again).unwrap();
            let resnapshot = |bytes: &[u8]| {
                let restored = SeenBefore::restore(&mut &bytes[..]).unwrap();
                let mut again = Vec::new();
                restored.snapshot(&mut again).unwrap();
                again
            };
            check_round_trip(bytes, &again, resnapshot, "gate");
            gate.record(&1u64);
            assert!(gate.contains(&1u64));
        }
    }
});
