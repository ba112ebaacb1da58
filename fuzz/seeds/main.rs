//! Writes seed snapshots for the `restore` fuzz target into the folder given as argument:
//! empty, filled, grown and full filters at several widths, windowed filters, and gates.

use std::path::Path;

use cuckoo_gate::{CuckooFilter, Layout, SeenBefore};

fn main() -> std::io::Result<()> {
    let dir = std::env::args().nth(1).expect("usage: seeds <corpus folder>");
    let dir = Path::new(&dir);
    std::fs::create_dir_all(dir)?;
    let cases = [(0.1, 0, 8), (0.01, 6, 8), (0.001, 30, 64), (1e-5, 20, 32), (1e-8, 8, 8)];
    for (seed, (eps, keys, max)) in (0u64..).zip(cases) {
        let filter = CuckooFilter::builder().capacity(8).max_capacity(max).false_positive_rate(eps).seed(seed);
        let filter = filter.build().unwrap();
        (0..keys).for_each(|k: u64| drop(filter.insert(&k)));
        let mut bytes = Vec::new();
        filter.snapshot(&mut bytes)?;
        std::fs::write(dir.join(format!("filter-{seed}")), bytes)?;
    }
    for (eps, keys) in [(0.01, 40), (1e-6, 64)] {
        let filter = CuckooFilter::builder().capacity(60).false_positive_rate(eps).layout(Layout::Windows).seed(9);
        let filter = filter.build().unwrap();
        (0..keys).for_each(|k: u64| drop(filter.insert(&k)));
        let mut bytes = Vec::new();
        filter.snapshot(&mut bytes)?;
        std::fs::write(dir.join(format!("windows-{keys}")), bytes)?;
    }
    let gate = SeenBefore::builder().capacity(4).seed(1).build().unwrap();
    (0..6u64).for_each(|k| gate.record(&k));
    let mut bytes = Vec::new();
    gate.snapshot(&mut bytes)?;
    std::fs::write(dir.join("gate"), bytes)
}
