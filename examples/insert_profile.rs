//! Instruction-count profile of the single-thread fast paths (for callgrind).
fn key(i: u64) -> u64 {
    let mut z = i.wrapping_add(0x9E37_79B9_7F4A_7C15).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}
#[inline(never)]
fn inserts(f: &cuckoo_gate::CuckooFilter, n: u64) {
    for i in 0..n {
        f.insert(&key(i)).unwrap();
    }
}
#[inline(never)]
fn lookups(f: &cuckoo_gate::CuckooFilter, n: u64) -> usize {
    (0..n).filter(|&i| f.contains(&key(i))).count()
}
fn main() {
    let n = 100_000u64;
    let f = cuckoo_gate::CuckooFilter::builder()
        .capacity(2 * n as usize)
        .false_positive_rate(0.002)
        .build()
        .unwrap();
    inserts(&f, n);
    assert_eq!(lookups(&f, n), n as usize);
}
