//! Configurations at the limits of what a builder accepts: each builds within bounded
//! memory or returns an error, and never aborts the process, even where the address space
//! is limited (as a container's memory limit would). Alone in its binary: it limits the
//! whole process's address space.
#![cfg(target_os = "linux")]

use cuckoo_gate::{AdmissionCache, AdmissionPolicy};

/// Resident bytes of this process.
fn resident() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").expect("/proc/self/status");
    let kib = status
        .lines()
        .find_map(|line| line.strip_prefix("VmRSS:"))
        .and_then(|rest| rest.split_whitespace().next().and_then(|kib| kib.parse::<u64>().ok()));
    kib.expect("a VmRSS line") * 1024
}

#[test]
fn the_most_shards_of_the_largest_cache_never_abort() {
    let limit = libc::rlimit { rlim_cur: 4 << 30, rlim_max: libc::RLIM_INFINITY };
    // SAFETY: setrlimit reads the struct it is given; lowering a soft limit is always
    // allowed.
    assert_eq!(unsafe { libc::setrlimit(libc::RLIMIT_AS, &limit) }, 0, "setrlimit");
    for policy in [AdmissionPolicy::Always, AdmissionPolicy::SecondHit, AdmissionPolicy::S3Fifo] {
        let before = resident();
        let built =
            AdmissionCache::<u64, u64>::builder().capacity(1 << 32).shards(65_536).admission(policy).build();
        match built {
            Ok(cache) => {
                let grown = resident().saturating_sub(before);
                assert!(grown < 1 << 30, "{policy:?}: an empty cache took {grown} bytes");
                let _ = cache.insert(1, 1);
                assert!(cache.len() <= 1);
            }
            Err(error) => println!("{policy:?}: {error}"),
        }
    }
}
