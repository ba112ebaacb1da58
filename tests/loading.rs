//! Coalesced loading: one loader per key missing at a time, on threads and on tasks; what
//! the waiters get when the loader fails, panics or is dropped; and what `insert` and
//! `remove` during a load leave. Every wait is bounded: a test that would hang fails.

use std::future::Future;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::pin::pin;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{mpsc, Arc, Barrier};
use std::task::{Context, Poll, Wake, Waker};
use std::thread;
use std::time::Duration;

use cuckoo_gate::{AdmissionCache, AdmissionPolicy};

mod common;
use common::{bounded, BOUND};

const POLICIES: [AdmissionPolicy; 3] =
    [AdmissionPolicy::S3Fifo, AdmissionPolicy::SecondHit, AdmissionPolicy::Always];

fn cache(policy: AdmissionPolicy, capacity: usize) -> Arc<AdmissionCache<u64, u64>> {
    Arc::new(AdmissionCache::builder().capacity(capacity as u64).admission(policy).build().unwrap())
}

#[test]
fn a_hundred_threads_missing_on_one_key_run_one_loader() {
    for policy in POLICIES {
        let counts = bounded("threads", move || {
            let cache = cache(policy, 1_000);
            let calls = Arc::new(AtomicUsize::new(0));
            let start = Arc::new(Barrier::new(100));
            let threads: Vec<_> = (0..100)
                .map(|_| {
                    let (cache, calls, start) = (cache.clone(), calls.clone(), start.clone());
                    thread::spawn(move || {
                        start.wait();
                        cache.get_or_insert_with(&7, || {
                            calls.fetch_add(1, Ordering::SeqCst);
                            // A slow origin: it answers once the other callers wait.
                            while cache.stats().loads_waiting < 99 {
                                thread::sleep(Duration::from_millis(1));
                            }
                            70
                        })
                    })
                })
                .collect();
            let values: Vec<u64> = threads.into_iter().map(|t| t.join().unwrap()).collect();
            assert!(values.iter().all(|&v| v == 70), "{policy:?}: {values:?}");
            let stats = cache.stats();
            (calls.load(Ordering::SeqCst), stats.loads, stats.loads_coalesced + stats.hits)
        });
        assert_eq!(counts, (1, 1, 99), "{policy:?}: (loader calls, loads, callers served otherwise)");
    }
}

#[test]
fn a_hundred_tasks_missing_on_one_key_run_one_loader() {
    for policy in POLICIES {
        let runtime =
            tokio::runtime::Builder::new_multi_thread().worker_threads(4).enable_time().build().unwrap();
        let cache = cache(policy, 1_000);
        let calls = Arc::new(AtomicUsize::new(0));
        let values = runtime.block_on(async {
            let tasks: Vec<_> = (0..100)
                .map(|_| {
                    let (cache, calls) = (cache.clone(), calls.clone());
                    tokio::spawn(async move {
                        let origin = async {
                            calls.fetch_add(1, Ordering::SeqCst);
                            while cache.stats().loads_waiting < 99 {
                                tokio::time::sleep(Duration::from_millis(1)).await;
                            }
                            70
                        };
                        cache.get_or_insert_async(&7, origin).await
                    })
                })
                .collect();
            let mut values = Vec::new();
            for task in tasks {
                values.push(tokio::time::timeout(BOUND, task).await.expect("a task hung").unwrap());
            }
            values
        });
        assert!(values.iter().all(|&v| v == 70), "{policy:?}: {values:?}");
        assert_eq!(calls.load(Ordering::SeqCst), 1, "{policy:?}: loader calls");
    }
}

#[test]
fn eight_threads_requesting_the_same_ten_thousand_keys_load_each_once() {
    // Under the policies that store every load (a key loaded once is then a hit, or the
    // waiters of its load get it); the cache holds all the keys.
    for policy in [AdmissionPolicy::S3Fifo, AdmissionPolicy::Always] {
        let calls = bounded("threads", move || {
            let cache = cache(policy, 1 << 20);
            let calls = Arc::new(AtomicUsize::new(0));
            let start = Arc::new(Barrier::new(8));
            let threads: Vec<_> = (0..8u64)
                .map(|t| {
                    let (cache, calls, start) = (cache.clone(), calls.clone(), start.clone());
                    thread::spawn(move || {
                        start.wait();
                        // Every thread asks for every key, each in its own order.
                        for i in 0..10_000u64 {
                            let key = (i * (2 * t + 1) + t * 1_237) % 10_000;
                            let value = cache.get_or_insert_with(&key, || {
                                calls.fetch_add(1, Ordering::Relaxed);
                                key * 3
                            });
                            assert_eq!(value, key * 3);
                        }
                    })
                })
                .collect();
            threads.into_iter().for_each(|t| t.join().unwrap());
            assert_eq!(cache.stats().loads, 10_000);
            calls.load(Ordering::Relaxed)
        });
        assert_eq!(calls, 10_000, "{policy:?}: loader calls");
    }
}

#[test]
fn under_second_hit_every_waiter_gets_a_first_sighting_that_is_not_stored() {
    let cache = cache(AdmissionPolicy::SecondHit, 1_000);
    let (leading, led) = mpsc::channel::<()>();
    let (release, released) = mpsc::channel::<()>();
    let leader = {
        let cache = cache.clone();
        thread::spawn(move || {
            cache.get_or_insert_with(&5, || {
                leading.send(()).unwrap();
                released.recv().unwrap();
                50
            })
        })
    };
    led.recv_timeout(BOUND).unwrap();
    let waiters: Vec<_> = (0..4)
        .map(|_| {
            let cache = cache.clone();
            thread::spawn(move || cache.get_or_insert_with(&5, || unreachable!("the load is in flight")))
        })
        .collect();
    while cache.stats().loads_waiting < 4 {
        thread::yield_now();
    }
    release.send(()).unwrap();
    assert_eq!(bounded("leader", move || leader.join().unwrap()), 50);
    for waiter in waiters {
        assert_eq!(bounded("waiter", move || waiter.join().unwrap()), 50);
    }
    assert_eq!(cache.peek(&5), None, "a first sighting was stored");
    // The next miss is the second sighting: loaded again, and stored.
    assert_eq!(cache.get_or_insert_with(&5, || 51), 51);
    assert_eq!(cache.peek(&5), Some(51));
}

/// What a caller got.
type Got = Result<u64, String>;
type Shared = Arc<AdmissionCache<u64, u64>>;

/// Threads that miss on key 9 while the first caller's loader runs; `fail` makes that
/// loader fail (error or panic). Returns what each thread got, how many waiters ran their
/// own loader, and the cache.
fn waiters_after_a_failed_leader(fail: fn() -> Result<u64, &'static str>) -> (Vec<Got>, usize, Shared) {
    let cache = cache(AdmissionPolicy::S3Fifo, 1_000);
    let (leading, led) = mpsc::channel::<()>();
    let (release, released) = mpsc::channel::<()>();
    let leader = {
        let cache = cache.clone();
        thread::spawn(move || {
            let got = catch_unwind(AssertUnwindSafe(|| {
                cache.try_get_or_insert_with(&9, || {
                    leading.send(()).unwrap();
                    released.recv().unwrap();
                    fail()
                })
            }));
            match got {
                Ok(result) => result.map_err(str::to_owned),
                Err(_) => Err("panicked".to_owned()),
            }
        })
    };
    led.recv_timeout(BOUND).unwrap();
    let taken_over = Arc::new(AtomicUsize::new(0));
    let waiters: Vec<_> = (0..5u64)
        .map(|w| {
            let (cache, taken_over) = (cache.clone(), taken_over.clone());
            thread::spawn(move || {
                cache
                    .try_get_or_insert_with(&9, || {
                        taken_over.fetch_add(1, Ordering::SeqCst);
                        Ok::<_, &str>(100 + w)
                    })
                    .map_err(str::to_owned)
            })
        })
        .collect();
    while cache.stats().loads_waiting < 5 {
        thread::yield_now();
    }
    release.send(()).unwrap();
    let mut got = vec![bounded("leader", move || leader.join().unwrap())];
    for waiter in waiters {
        got.push(bounded("waiter", move || waiter.join().unwrap()));
    }
    let taken_over = taken_over.load(Ordering::SeqCst);
    (got, taken_over, cache)
}

#[test]
fn an_error_goes_to_its_loader_and_every_waiter() {
    let (got, taken_over, cache) = waiters_after_a_failed_leader(|| Err("origin down"));
    assert!(got.iter().all(|g| *g == Err("origin down".to_owned())), "{got:?}");
    assert_eq!(taken_over, 0, "one origin call for all");
    let stats = cache.stats();
    assert_eq!((stats.loads, stats.load_failures, stats.failures_shared), (1, 1, 5));
    assert_eq!(cache.peek(&9), None);
    // A caller after the failure loads anew.
    assert_eq!(cache.try_get_or_insert_with(&9, || Ok::<_, &str>(90)), Ok(90));
}

#[test]
fn a_panicking_loader_fails_only_its_caller_and_one_waiter_loads_instead() {
    let (got, taken_over, cache) = waiters_after_a_failed_leader(|| panic!("loader panics"));
    assert_eq!(got[0], Err("panicked".to_owned()));
    let value = got[1].clone().unwrap();
    assert!(got[1..].iter().all(|g| *g == Ok(value)), "{got:?}");
    assert_eq!(taken_over, 1, "one waiter takes the load over");
    let stats = cache.stats();
    assert_eq!((stats.loads, stats.load_failures, stats.failures_shared), (2, 1, 0));
    assert_eq!(cache.peek(&9), Some(value), "the value taken over is stored");
}

#[test]
fn a_failed_load_with_no_waiter_leaves_nothing_behind() {
    let cache = cache(AdmissionPolicy::S3Fifo, 100);
    assert_eq!(cache.try_get_or_insert_with(&1, || Err::<u64, _>("no")), Err("no"));
    let _ = catch_unwind(AssertUnwindSafe(|| cache.get_or_insert_with(&1, || panic!("loader panics"))));
    // A later caller leads at once (a load left behind would make it wait forever).
    let cache2 = cache.clone();
    assert_eq!(bounded("next load", move || cache2.get_or_insert_with(&1, || 11)), 11);
    assert_eq!(cache.get(&1), Some(11));
    assert_eq!(cache.stats().load_failures, 2);
}

/// A waker that counts its wakes.
#[derive(Default)]
struct Counted(AtomicU64);

impl Wake for Counted {
    fn wake(self: Arc<Self>) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

fn poll_once<F: Future>(future: std::pin::Pin<&mut F>, waker: &Arc<Counted>) -> Poll<F::Output> {
    let waker = Waker::from(waker.clone());
    future.poll(&mut Context::from_waker(&waker))
}

#[test]
fn a_dropped_loading_future_hands_the_load_on_past_a_dropped_waiter() {
    // Polled by hand, so that every step happens in a known order.
    let cache = cache(AdmissionPolicy::S3Fifo, 100);
    let (a, b, c) =
        (Arc::new(Counted::default()), Arc::new(Counted::default()), Arc::new(Counted::default()));
    let mut leader = Box::pin(cache.get_or_insert_async(&3, std::future::pending()));
    assert!(poll_once(leader.as_mut(), &a).is_pending(), "the leader awaits its origin");
    let mut first = Box::pin(cache.get_or_insert_async(&3, async { 31 }));
    let mut second = pin!(cache.get_or_insert_async(&3, async { 32 }));
    assert!(poll_once(first.as_mut(), &b).is_pending());
    assert!(poll_once(second.as_mut(), &c).is_pending());
    assert_eq!(cache.stats().loads, 1);

    // The client of the leader goes away: the longest waiter is handed the load.
    drop(leader);
    assert_eq!((b.0.load(Ordering::SeqCst), c.0.load(Ordering::SeqCst)), (1, 0));
    // Its client goes away too before it runs: the load goes on to the next waiter.
    drop(first);
    assert_eq!(c.0.load(Ordering::SeqCst), 1);
    assert_eq!(poll_once(second.as_mut(), &c), Poll::Ready(32));
    assert_eq!(cache.get(&3), Some(32));
    let stats = cache.stats();
    assert_eq!((stats.loads, stats.load_failures), (2, 1));
}

#[test]
fn a_dropped_waiter_does_not_disturb_the_others() {
    let cache = cache(AdmissionPolicy::S3Fifo, 100);
    let (a, b, c) =
        (Arc::new(Counted::default()), Arc::new(Counted::default()), Arc::new(Counted::default()));
    let (send, origin) = futures_channel();
    let mut leader = Box::pin(cache.get_or_insert_async(&4, origin));
    assert!(poll_once(leader.as_mut(), &a).is_pending());
    let mut dropped = Box::pin(cache.get_or_insert_async(&4, async { unreachable!() }));
    let mut kept = Box::pin(cache.get_or_insert_async(&4, async { unreachable!() }));
    assert!(poll_once(dropped.as_mut(), &b).is_pending());
    assert!(poll_once(kept.as_mut(), &c).is_pending());
    drop(dropped);
    send(40);
    assert_eq!(poll_once(leader.as_mut(), &a), Poll::Ready(40));
    assert_eq!(c.0.load(Ordering::SeqCst), 1, "the waiter left was woken");
    assert_eq!(poll_once(kept.as_mut(), &c), Poll::Ready(40));
    assert_eq!(b.0.load(Ordering::SeqCst), 0);
    assert_eq!(cache.stats().loads_coalesced, 1);
}

/// A one-shot origin: the future resolves once the sender is called.
fn futures_channel() -> (impl FnOnce(u64), impl Future<Output = u64>) {
    let (send, receive) = tokio::sync::oneshot::channel();
    (move |v| send.send(v).unwrap(), async move { receive.await.unwrap() })
}

#[test]
fn a_timed_out_leader_hands_the_load_to_a_waiting_task() {
    let runtime =
        tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_time().build().unwrap();
    let cache = cache(AdmissionPolicy::S3Fifo, 100);
    let got = runtime.block_on(async {
        let stuck = {
            let cache = cache.clone();
            // The origin never answers; the caller gives up after 50 ms (`select!`-style).
            tokio::spawn(async move {
                tokio::time::timeout(
                    Duration::from_millis(50),
                    cache.get_or_insert_async(&8, std::future::pending()),
                )
                .await
            })
        };
        tokio::time::sleep(Duration::from_millis(10)).await;
        let waiter = {
            let cache = cache.clone();
            tokio::spawn(async move { cache.get_or_insert_async(&8, async { 80 }).await })
        };
        assert!(stuck.await.unwrap().is_err(), "the stuck leader timed out");
        tokio::time::timeout(BOUND, waiter).await.expect("the waiter hung").unwrap()
    });
    assert_eq!(got, 80);
    assert_eq!(cache.get(&8), Some(80));
}

#[test]
fn an_insert_during_a_load_keeps_its_value() {
    for policy in POLICIES {
        let cache = cache(policy, 100);
        let _ = cache.insert(2, 0); // under SecondHit the gate has now seen key 2
        cache.remove(&2);
        let loaded = cache.get_or_insert_with(&2, || {
            let _ = cache.insert(2, 20); // another caller's insert, during the load
            21
        });
        assert_eq!(loaded, 21, "{policy:?}: the loader's callers get the loaded value");
        let stored = cache.get(&2);
        assert!(
            stored == Some(20) || (policy == AdmissionPolicy::SecondHit && stored.is_none()),
            "{policy:?}"
        );
    }
}

#[test]
fn a_remove_during_a_load_keeps_the_loaded_value_out() {
    for policy in POLICIES {
        let cache = cache(policy, 100);
        let loaded = cache.get_or_insert_with(&6, || {
            cache.remove(&6); // the origin changed and the key was invalidated, during the load
            60
        });
        assert_eq!(loaded, 60);
        assert_eq!(cache.get(&6), None, "{policy:?}: a value loaded before the remove was stored");
        // A load that starts after the remove stores as usual.
        cache.get_or_insert_with(&6, || 61);
        cache.get_or_insert_with(&6, || 61);
        assert_eq!(cache.get(&6), Some(61), "{policy:?}");
    }
}

#[test]
fn loading_futures_are_send() {
    fn send<T: Send>(_: &T) {}
    let cache = cache(AdmissionPolicy::S3Fifo, 100);
    let future = cache.get_or_insert_async(&1, async { 1 });
    send(&future);
    let future = cache.try_get_or_insert_async(&1, async { Ok::<u64, String>(1) });
    send(&future);
}
