//! Helpers shared by the examples that measure the filter (not every example uses both).
#![allow(dead_code)]

#[path = "rng.rs"]
mod rng;

use rng::{mix64, GOLDEN};

/// SplitMix64: distinct, well-spread u64 keys from a counter.
pub fn key(i: u64) -> u64 {
    mix64(i.wrapping_add(GOLDEN).wrapping_mul(GOLDEN))
}

/// The median of `v` (the upper one for an even length).
pub fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}
