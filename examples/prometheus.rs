//! Serves live metrics of an `AdmissionCache` and a `CuckooFilter` on
//! `http://127.0.0.1:PORT/metrics` while a generated workload runs.
//!
//! ```text
//! cargo run --release --example prometheus                       # port 9898, until Ctrl-C
//! cargo run --release --example prometheus -- --port 9100 --seconds 60 --quiesce-after 10
//! curl -s localhost:9898/metrics | grep cuckoo_gate_
//! ```
//!
//! `--quiesce-after S` stops the workload after S seconds, publishes once more and prints
//! the exact `len()` of the filter and the cache, so a check can compare them with what
//! `/metrics` serves (`.ci/check_metrics.sh` does).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use cuckoo_gate::{AdmissionCache, AdmissionPolicy, CuckooFilter};
use metrics_exporter_prometheus::PrometheusBuilder;

mod common;
use common::number_arg;

fn main() {
    let port = number_arg("--port").unwrap_or(9898);
    let Ok(port) = u16::try_from(port) else {
        eprintln!("prometheus: --port {port} is not a port");
        std::process::exit(2)
    };
    let run_for = number_arg("--seconds").map(Duration::from_secs);
    let quiesce_after = number_arg("--quiesce-after").map(Duration::from_secs);

    if let Err(e) = PrometheusBuilder::new().with_http_listener(([127, 0, 0, 1], port)).install() {
        eprintln!("prometheus: cannot serve on 127.0.0.1:{port}: {e}");
        std::process::exit(1);
    }
    let cache: Arc<AdmissionCache<u64, u64>> = Arc::new(
        AdmissionCache::builder()
            .capacity(10_000)
            .admission(AdmissionPolicy::SecondHit)
            .metrics_name("edge")
            .build()
            .expect("valid cache configuration"),
    );
    let filter = Arc::new(
        CuckooFilter::builder()
            .capacity(100_000)
            .metrics_name("visitors")
            .build()
            .expect("valid filter configuration"),
    );
    println!("serving http://127.0.0.1:{port}/metrics");

    let stop = Arc::new(AtomicBool::new(false));
    let workers: Vec<_> = (0..2u64)
        .map(|t| {
            let (cache, filter, stop) = (cache.clone(), filter.clone(), stop.clone());
            std::thread::spawn(move || {
                let mut x = t + 1;
                let mut i = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    // 70% of requests go to 20,000 hot keys, 30% to keys seen only once.
                    let key = if x % 10 < 7 { x % 20_000 } else { (t + 1) << 40 | i };
                    cache.get_or_insert_with(&key, || i);
                    // The filter holds a sliding window of recent keys, about 80% full.
                    let _ = filter.insert(&(t, i));
                    if i >= 40_000 {
                        filter.remove(&(t, i - 40_000));
                    }
                    i += 1;
                    if i % 1024 == 0 {
                        std::thread::sleep(Duration::from_micros(200));
                    }
                }
            })
        })
        .collect();

    let start = Instant::now();
    let mut workers = Some(workers);
    loop {
        cache.publish_metrics();
        filter.publish_metrics();
        let elapsed = start.elapsed();
        if quiesce_after.is_some_and(|q| elapsed >= q) {
            if let Some(workers) = workers.take() {
                stop.store(true, Ordering::Relaxed);
                for w in workers {
                    w.join().expect("worker panicked");
                }
                cache.publish_metrics();
                filter.publish_metrics();
                println!("quiesced filter_items={} cache_entries={}", filter.len(), cache.len());
            }
        }
        if run_for.is_some_and(|r| elapsed >= r) {
            break;
        }
        std::thread::sleep(Duration::from_millis(250));
    }
}
