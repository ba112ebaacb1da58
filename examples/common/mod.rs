//! Code shared by the examples and benches that measure (not every one uses all).
#![allow(dead_code)]

#[path = "rng.rs"]
mod rng;
#[allow(unused_imports)]
pub use rng::Rng;

use rng::{mix64, GOLDEN};

/// SplitMix64: distinct, well-spread u64 keys from a counter.
pub fn key(i: u64) -> u64 {
    mix64(i.wrapping_add(GOLDEN).wrapping_mul(GOLDEN))
}

/// The thread counts a measurement runs on: 1 and 2, and every core when there are more.
pub fn thread_counts() -> Vec<usize> {
    let cores = std::thread::available_parallelism().map_or(1, |c| c.get());
    if cores > 2 {
        vec![1, 2, cores]
    } else {
        vec![1, 2]
    }
}

/// The median of `v` (the upper one for an even length).
pub fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// The number after `--name` on the command line, if given; exits naming the flag when
/// what follows is not a number.
pub fn number_arg(name: &str) -> Option<u64> {
    let args: Vec<String> = std::env::args().collect();
    let at = args.iter().position(|a| a == name)?;
    match args.get(at + 1).and_then(|v| v.parse().ok()) {
        Some(v) => Some(v),
        None => {
            eprintln!("{name} needs a number");
            std::process::exit(2)
        }
    }
}
