//! 100 threads, then 100 tokio tasks, ask for one key whose origin fails after 20 ms: how
//! many origin calls they make, how many errors they get, and when the last of them has
//! its answer (the failure is shared: one call, everyone answered in about one origin
//! latency).
//!
//! ```text
//! cargo run --release --example failing_key
//! ```

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use cuckoo_gate::AdmissionCache;

/// How long the origin takes to fail.
const ORIGIN: Duration = Duration::from_millis(20);
const CALLERS: usize = 100;

/// What the origin answers.
#[derive(Clone, Debug)]
struct Down;

fn report(label: &str, calls: u64, errors: usize, slowest: Duration) {
    println!(
        "{label:<7} {CALLERS} callers on a failing key: {calls} origin call(s), {errors} errors, the last answered after {:.1} ms ({:.2} origin latencies)",
        slowest.as_secs_f64() * 1e3,
        slowest.as_secs_f64() / ORIGIN.as_secs_f64()
    );
}

fn threads() {
    let cache: Arc<AdmissionCache<u64, u64>> =
        Arc::new(AdmissionCache::builder().capacity(1_000).build().unwrap());
    let calls = Arc::new(AtomicU64::new(0));
    let start = Arc::new(Barrier::new(CALLERS));
    let callers: Vec<_> = (0..CALLERS)
        .map(|_| {
            let (cache, calls, start) = (cache.clone(), calls.clone(), start.clone());
            std::thread::spawn(move || {
                start.wait();
                let asked = Instant::now();
                let got = cache.try_get_or_insert_with(&7, || {
                    calls.fetch_add(1, Ordering::SeqCst);
                    std::thread::sleep(ORIGIN);
                    Err::<u64, Down>(Down)
                });
                (got.is_err(), asked.elapsed())
            })
        })
        .collect();
    let answers: Vec<(bool, Duration)> = callers.into_iter().map(|t| t.join().unwrap()).collect();
    let errors = answers.iter().filter(|(error, _)| *error).count();
    let slowest = answers.iter().map(|&(_, took)| took).max().unwrap_or_default();
    report("threads", calls.load(Ordering::SeqCst), errors, slowest);
}

fn tasks() {
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_time().build().unwrap();
    let cache: Arc<AdmissionCache<u64, u64>> =
        Arc::new(AdmissionCache::builder().capacity(1_000).build().unwrap());
    let calls = Arc::new(AtomicU64::new(0));
    let answers: Vec<(bool, Duration)> = runtime.block_on(async {
        let callers: Vec<_> = (0..CALLERS)
            .map(|_| {
                let (cache, calls) = (cache.clone(), calls.clone());
                tokio::spawn(async move {
                    let asked = Instant::now();
                    let origin = async {
                        calls.fetch_add(1, Ordering::SeqCst);
                        tokio::time::sleep(ORIGIN).await;
                        Err::<u64, Down>(Down)
                    };
                    let got = cache.try_get_or_insert_async(&7, origin).await;
                    (got.is_err(), asked.elapsed())
                })
            })
            .collect();
        let mut answers = Vec::new();
        for caller in callers {
            answers.push(caller.await.unwrap());
        }
        answers
    });
    let errors = answers.iter().filter(|(error, _)| *error).count();
    let slowest = answers.iter().map(|&(_, took)| took).max().unwrap_or_default();
    report("tasks", calls.load(Ordering::SeqCst), errors, slowest);
}

fn main() {
    threads();
    tasks();
}
