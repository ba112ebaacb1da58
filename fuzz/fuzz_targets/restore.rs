//! Fuzzes `CuckooFilter::restore` and `SeenBefore::restore` with arbitrary bytes.
//!
//! Each input is tried as it is and with a valid CRC-32 appended, so that inputs reach
//! the field and table checks behind the checksum. Restoring must never panic (nor
//! allocate what a corrupt length claims); whatever it accepts must be a working filter
//! that snapshots back to exactly the bytes it was restored from.
//!
//! Run (needs a nightly toolchain and `cargo install cargo-fuzz`):
//!
//! ```text
//! cargo +nightly fuzz run restore -- -max_len=4096 -rss_limit_mb=512
//! ```
#![no_main]

use cuckoo_gate::{CuckooFilter, SeenBefore};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let mut sealed = data.to_vec();
    sealed.extend_from_slice(&crc32fast::hash(data).to_le_bytes());
    for bytes in [data, &sealed[..]] {
        if let Ok(filter) = CuckooFilter::restore(&mut &bytes[..]) {
            let mut again = Vec::new();
            filter.snapshot(&mut again).unwrap();
            assert_eq!(again[..], bytes[..again.len()], "a filter snapshot did not round-trip");
            if filter.insert(&1u64).is_ok() {
                assert!(filter.contains(&1u64));
                assert!(filter.remove(&1u64));
            }
        }
        if let Ok(gate) = SeenBefore::restore(&mut &bytes[..]) {
            let mut again = Vec::new();
            gate.snapshot(&mut again).unwrap();
            assert_eq!(again[..], bytes[..again.len()], "a gate snapshot did not round-trip");
            gate.record(&1u64);
            assert!(gate.contains(&1u64));
        }
    }
});
