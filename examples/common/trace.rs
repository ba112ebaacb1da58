//! Request streams for the replaying examples: trace files, and a generated workload.
#![allow(dead_code)]

use std::path::Path;

#[path = "rng.rs"]
pub mod rng;
use rng::Rng;

/// One request: the key and the object's size in bytes (1 when the trace has none).
#[derive(Clone, Copy)]
pub struct Request {
    pub key: u64,
    pub size: u32,
}

/// Reads a trace: one request per line, the key first, then optionally the size. Also
/// says whether the lines carry sizes.
pub fn read(path: &Path) -> Result<(Vec<Request>, bool), String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    let mut sized = false;
    let bad = |what: &str, line: &str| format!("bad {what} in {}: {line:?}", path.display());
    let requests = text
        .lines()
        .filter(|line| !line.trim().is_empty())
        .map(|line| {
            let mut fields = line.split_whitespace();
            let key = fields.next().and_then(|k| k.parse().ok()).ok_or_else(|| bad("key", line))?;
            let size = match fields.next() {
                Some(s) => {
                    sized = true;
                    s.parse::<u64>().map_err(|_| bad("size", line))?.clamp(1, u64::from(u32::MAX)) as u32
                }
                None => 1,
            };
            Ok(Request { key, size })
        })
        .collect::<Result<_, String>>()?;
    Ok((requests, sized))
}

/// Zipf(0.9) over 100,000 objects, with one request in three for a brand-new object
/// (size 1).
pub fn generated_workload(requests: usize) -> Vec<Request> {
    let objects = 100_000;
    let mut cumulative = Vec::with_capacity(objects);
    let mut total = 0.0;
    for rank in 1..=objects {
        total += 1.0 / (rank as f64).powf(0.9);
        cumulative.push(total);
    }
    let mut rng = Rng(42);
    let mut next_unique = 1u64 << 40;
    (0..requests)
        .map(|_| {
            let key = if rng.next_f64() < 1.0 / 3.0 {
                next_unique += 1;
                next_unique
            } else {
                let u = rng.next_f64() * total;
                cumulative.partition_point(|&c| c < u) as u64
            };
            Request { key, size: 1 }
        })
        .collect()
}

/// A generated request stream, and the cache sizes that show it (in % of its distinct
/// keys), if not the usual ones.
pub struct Pattern {
    pub name: &'static str,
    pub requests: Vec<Request>,
    pub sizes: Option<&'static [f64]>,
}

/// Zipf(`s`) ranks over `objects`, drawn by `rng`: a CDF table and a binary search.
fn zipf(objects: usize, s: f64) -> impl Fn(&mut Rng) -> u64 {
    let mut cumulative = Vec::with_capacity(objects);
    let mut total = 0.0;
    for rank in 1..=objects {
        total += 1.0 / (rank as f64).powf(s);
        cumulative.push(total);
    }
    move |rng: &mut Rng| {
        let u = rng.next_f64() * total;
        cumulative.partition_point(|&c| c < u) as u64
    }
}

/// The classic adversarial patterns, generated with fixed seeds (every object of size 1),
/// each with the cache sizes (in % of its distinct keys) that show it, if not the usual:
///
/// - `loop`: 10,000 keys requested in order, 50 times over, into caches of 50%, 83.3% (the
///   loop 1.2x the cache) and 95% of them. LRU and FIFO hit nothing in a cache smaller than
///   the loop; a policy that keeps a fixed part of it hits that part.
/// - `zipf+scans`: Zipf(0.9) over 100,000 keys, and after every 50,000 requests a scan of
///   20,000 keys never seen before (2x a cache of 10% of the Zipf keys).
/// - `phase-shift`: Zipf(0.9) over 100,000 keys for 500,000 requests, then over 100,000
///   other keys for 500,000 more: the hot set changes at once.
pub fn adversarial() -> Vec<Pattern> {
    let one = |key| Request { key, size: 1 };
    let looped = (0..50).flat_map(|_| 0..10_000u64).map(one).collect();
    let draw = zipf(100_000, 0.9);
    let mut rng = Rng(7);
    let mut fresh = 1u64 << 40;
    let mut scans = Vec::new();
    for i in 0..1_000_000 {
        scans.push(one(draw(&mut rng)));
        if i % 50_000 == 49_999 {
            scans.extend((0..20_000).map(|_| {
                fresh += 1;
                one(fresh)
            }));
        }
    }
    let mut rng = Rng(11);
    let shifted =
        (0..1_000_000u64).map(|i| one(draw(&mut rng) + if i < 500_000 { 0 } else { 1 << 32 })).collect();
    vec![
        Pattern { name: "loop", requests: looped, sizes: Some(&[50.0, 83.3, 95.0]) },
        Pattern { name: "zipf+scans", requests: scans, sizes: None },
        Pattern { name: "phase-shift", requests: shifted, sizes: None },
    ]
}

/// [`generated_workload`] with object sizes: 512 bytes times a power of two from 1 to 128,
/// the smaller sizes likelier, fixed per key.
pub fn generated_sized_workload(requests: usize) -> Vec<Request> {
    let mut trace = generated_workload(requests);
    for r in &mut trace {
        let draw = Rng(r.key).next_u64();
        r.size = 512 << (draw.trailing_zeros().min(7));
    }
    trace
}

/// Distinct objects, and their total size.
pub fn distinct(trace: &[Request]) -> (usize, u64) {
    let mut objects: Vec<(u64, u32)> = trace.iter().map(|r| (r.key, r.size)).collect();
    objects.sort_unstable();
    objects.dedup_by_key(|o| o.0);
    (objects.len(), objects.iter().map(|o| u64::from(o.1)).sum())
}
