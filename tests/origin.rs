//! An origin that fails or is slow: one origin call per failure however many callers wait
//! on it (threads and tasks), failures kept for a while, lifetimes from the loaded values,
//! stale entries served while one reload runs (a write during it wins, a failed one keeps
//! the old value), and stale values served on error through the grace period, never after.
//! Every wait is bounded: a test that would hang fails; the clock is moved by hand.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Barrier, Mutex};
use std::thread;
use std::time::Duration;

use cuckoo_gate::{AdmissionCache, AdmissionPolicy, Clock, Lifetime, ManualClock, Reload};

mod common;
use common::bounded;

const POLICIES: [AdmissionPolicy; 3] =
    [AdmissionPolicy::S3Fifo, AdmissionPolicy::SecondHit, AdmissionPolicy::Always];

fn secs(s: u64) -> Duration {
    Duration::from_secs(s)
}

#[test]
fn a_hundred_threads_on_a_failing_key_make_one_origin_call() {
    for policy in POLICIES {
        let cache: Arc<AdmissionCache<u64, u64>> =
            Arc::new(AdmissionCache::builder().capacity(1_000).admission(policy).build().unwrap());
        let calls = Arc::new(AtomicUsize::new(0));
        let got = bounded("threads", {
            let (cache, calls) = (cache.clone(), calls.clone());
            move || {
                let start = Arc::new(Barrier::new(100));
                let threads: Vec<_> = (0..100)
                    .map(|_| {
                        let (cache, calls, start) = (cache.clone(), calls.clone(), start.clone());
                        thread::spawn(move || {
                            start.wait();
                            cache.try_get_or_insert_with(&7, || {
                                calls.fetch_add(1, Ordering::SeqCst);
                                // A slow origin: it answers once the other callers wait.
                                while cache.stats().loads_waiting < 99 {
                                    thread::sleep(Duration::from_millis(1));
                                }
                                Err::<u64, &str>("origin down")
                            })
                        })
                    })
                    .collect();
                threads.into_iter().map(|t| t.join().unwrap()).collect::<Vec<_>>()
            }
        });
        assert_eq!(calls.load(Ordering::SeqCst), 1, "{policy:?}: one origin call");
        assert!(got.iter().all(|g| *g == Err("origin down")), "{policy:?}: {got:?}");
        let stats = cache.stats();
        assert_eq!((stats.loads, stats.load_failures, stats.failures_shared), (1, 1, 99), "{policy:?}");
        // Each caller missed; one load reached the origin.
        assert_eq!(stats.misses, 100, "{policy:?}");
        assert_eq!(cache.get(&7), None);
    }
}

#[test]
fn a_hundred_tasks_on_a_failing_key_make_one_origin_call() {
    let runtime =
        tokio::runtime::Builder::new_multi_thread().worker_threads(4).enable_time().build().unwrap();
    let cache: Arc<AdmissionCache<u64, u64>> =
        Arc::new(AdmissionCache::builder().capacity(1_000).build().unwrap());
    let calls = Arc::new(AtomicUsize::new(0));
    let got = runtime.block_on(async {
        let tasks: Vec<_> = (0..100)
            .map(|_| {
                let (cache, calls) = (cache.clone(), calls.clone());
                tokio::spawn(async move {
                    let origin = async {
                        calls.fetch_add(1, Ordering::SeqCst);
                        while cache.stats().loads_waiting < 99 {
                            tokio::time::sleep(Duration::from_millis(1)).await;
                        }
                        Err::<u64, Arc<std::io::Error>>(Arc::new(
                            std::io::ErrorKind::ConnectionRefused.into(),
                        ))
                    };
                    cache.try_get_or_insert_async(&8, origin).await
                })
            })
            .collect();
        let mut got = Vec::new();
        for task in tasks {
            got.push(tokio::time::timeout(common::BOUND, task).await.expect("hung").unwrap());
        }
        got
    });
    assert_eq!(calls.load(Ordering::SeqCst), 1);
    assert!(got.iter().all(|g| g.as_ref().is_err_and(|e| e.kind() == std::io::ErrorKind::ConnectionRefused)));
    assert_eq!(cache.stats().failures_shared, 99);
}

#[test]
fn a_waiter_of_another_error_type_loads_anew() {
    let cache: Arc<AdmissionCache<u64, u64>> =
        Arc::new(AdmissionCache::builder().capacity(100).build().unwrap());
    let (leading, led) = std::sync::mpsc::channel::<()>();
    let (release, released) = std::sync::mpsc::channel::<()>();
    let leader = {
        let cache = cache.clone();
        thread::spawn(move || {
            cache.try_get_or_insert_with(&1, || {
                leading.send(()).unwrap();
                released.recv().unwrap();
                Err::<u64, &str>("down")
            })
        })
    };
    led.recv_timeout(common::BOUND).unwrap();
    let waiter = {
        let cache = cache.clone();
        thread::spawn(move || cache.get_or_insert_with(&1, || 10))
    };
    while cache.stats().loads_waiting < 1 {
        thread::yield_now();
    }
    release.send(()).unwrap();
    assert_eq!(bounded("leader", move || leader.join().unwrap()), Err("down"));
    assert_eq!(bounded("waiter", move || waiter.join().unwrap()), 10, "a loader that cannot fail loads");
    assert_eq!(cache.get(&1), Some(10));
}

fn with_clock<V: Clone>(
    build: impl FnOnce(cuckoo_gate::AdmissionCacheBuilder<u64, V>) -> cuckoo_gate::AdmissionCacheBuilder<u64, V>,
) -> (Arc<AdmissionCache<u64, V>>, ManualClock) {
    let (clock, hand) = Clock::manual();
    let cache = build(AdmissionCache::builder().capacity(100).clock(clock)).build().unwrap();
    (Arc::new(cache), hand)
}

#[test]
fn failures_are_kept_for_their_time_and_ended_by_a_write() {
    let (cache, hand) = with_clock::<u64>(|b| b.failure_ttl(secs(5)));
    let calls = AtomicUsize::new(0);
    let failing = || {
        calls.fetch_add(1, Ordering::SeqCst);
        Err::<u64, &str>("down")
    };
    assert_eq!(cache.try_get_or_insert_with(&1, failing), Err("down"));
    assert_eq!(cache.try_get_or_insert_with(&1, failing), Err("down"), "kept");
    assert_eq!(calls.load(Ordering::SeqCst), 1);
    assert_eq!((cache.get(&1), cache.stats().failures_cached, cache.stats().failures_kept), (None, 1, 1));
    hand.advance(secs(5));
    assert_eq!(cache.try_get_or_insert_with(&1, failing), Err("down"), "its time ended: loaded again");
    assert_eq!(calls.load(Ordering::SeqCst), 2);
    // A loader of another error type (here, none) loads at once.
    assert_eq!(cache.get_or_insert_with(&1, || 11), 11);
    assert_eq!(cache.stats().failures_kept, 0);
    // A write ends a kept failure: after a remove, and after an insert, the origin is asked.
    for (key, write) in [(2u64, 0), (3, 1)] {
        assert_eq!(cache.try_get_or_insert_with(&key, failing), Err("down"));
        match write {
            0 => assert_eq!(cache.remove(&key), None),
            _ => assert!(matches!(cache.insert(key, 30), cuckoo_gate::Admission::Admitted)),
        }
        cache.remove(&key);
        assert_eq!(cache.try_get_or_insert_with(&key, || Ok::<_, &str>(key)), Ok(key), "write {write}");
    }
    assert_eq!(cache.stats().failures_kept, 0);
}

#[cfg(feature = "serde")]
#[test]
fn a_clear_and_a_restore_end_kept_failures() {
    let (cache, _hand) = with_clock::<u64>(|b| b.failure_ttl(secs(5)));
    let mut saved = Vec::new();
    cache.save(&mut saved).unwrap();
    for end in ["clear", "restore"] {
        assert_eq!(cache.try_get_or_insert_with(&1, || Err::<u64, &str>("down")), Err("down"));
        assert_eq!(cache.stats().failures_kept, 1);
        match end {
            "clear" => cache.clear(),
            _ => _ = cache.restore(&mut saved.as_slice()).unwrap(),
        }
        assert_eq!(cache.stats().failures_kept, 0, "{end}");
        assert_eq!(
            cache.try_get_or_insert_with(&1, || Ok::<_, &str>(7)),
            Ok(7),
            "{end}: the origin is asked"
        );
        cache.remove(&1);
    }
}

#[test]
fn a_stale_value_replaced_by_its_reload_is_told_as_refreshed() {
    let told = Arc::new(std::sync::Mutex::new(Vec::new()));
    let (cache, hand) = with_clock::<u64>(|b| {
        let told = told.clone();
        b.refresh_after(secs(10))
            .time_to_live(secs(60))
            .eviction_listener(move |key, value, cause| told.lock().unwrap().push((key, value, cause)))
    });
    assert_eq!(cache.get_or_insert_with(&1, || 1), 1);
    hand.advance(secs(10));
    assert_eq!(cache.get_or_insert_with(&1, || 2), 2, "stale: reloaded by this caller");
    let _ = cache.insert(1, 3);
    assert_eq!(
        told.lock().unwrap().as_slice(),
        [(1, 1, cuckoo_gate::RemovalCause::Refreshed), (1, 2, cuckoo_gate::RemovalCause::Replaced)],
        "a fresh value replaced is told as replaced"
    );
}

#[test]
fn kept_failures_are_bounded() {
    let (cache, _hand) = with_clock::<u64>(|b| b.failure_ttl(secs(5)));
    for key in 0..1_000 {
        assert_eq!(cache.try_get_or_insert_with(&key, || Err::<u64, &str>("down")), Err("down"));
    }
    // A cache of 100 entries keeps at most max(100 / 8, 64) failures.
    let kept = cache.stats().failures_kept;
    assert!((1..=64).contains(&kept), "{kept} failures kept");
}

#[derive(Clone, Debug, PartialEq)]
struct Object {
    body: String,
    max_age: Duration,
}

fn object(id: u64) -> Object {
    Object { body: format!("object {id}"), max_age: secs(id) }
}

#[test]
fn loaded_values_live_as_the_origin_says() {
    let (cache, hand) =
        with_clock::<Object>(|b| b.expire_after(|_, object: &Object| Lifetime::ttl(object.max_age)));
    let runtime = tokio::runtime::Builder::new_current_thread().build().unwrap();
    assert_eq!(cache.get_or_insert_with(&5, || object(5)), object(5));
    assert_eq!(cache.try_get_or_insert_with(&10, || Ok::<_, ()>(object(10))), Ok(object(10)));
    runtime.block_on(async {
        assert_eq!(cache.get_or_insert_async(&15, async { object(15) }).await, object(15));
        assert_eq!(
            cache.try_get_or_insert_async(&20, async { Ok::<_, ()>(object(20)) }).await,
            Ok(object(20))
        );
    });
    for (advance, alive) in
        [(5, [false, true, true, true]), (5, [false, false, true, true]), (10, [false; 4])]
    {
        hand.advance(secs(advance));
        let held: Vec<bool> = [5, 10, 15, 20].iter().map(|id| cache.get(id).is_some()).collect();
        assert_eq!(held, alive);
    }
}

/// A spawner that keeps the reloads it is given, to run when the test says.
#[derive(Clone, Default)]
struct Held(Arc<Mutex<Vec<Reload>>>);

impl Held {
    fn spawner(&self) -> impl Fn(Reload) + Send + Sync + 'static {
        let held = self.0.clone();
        move |reload| held.lock().unwrap().push(reload)
    }

    fn run(&self) -> usize {
        let reloads = std::mem::take(&mut *self.0.lock().unwrap());
        let ran = reloads.len();
        reloads.into_iter().for_each(Reload::run);
        ran
    }
}

/// A cache of `String`s with a time to live of 60 s, fresh for 10, whose reloads `held`
/// keeps; key 1 holds "v1", now stale.
fn stale_cache(held: &Held) -> Arc<AdmissionCache<u64, String>> {
    let (cache, hand) =
        with_clock::<String>(|b| b.time_to_live(secs(60)).refresh_after(secs(10)).spawner(held.spawner()));
    assert_eq!(cache.try_get_or_refresh_with(&1, || Ok::<_, String>("v1".into())).as_deref(), Ok("v1"));
    hand.advance(secs(10));
    cache
}

#[test]
fn a_thousand_callers_on_a_stale_entry_get_it_at_once_and_one_reload_runs() {
    let held = Held::default();
    let cache = stale_cache(&held);
    let calls = Arc::new(AtomicUsize::new(0));
    // The reload is held until every caller has returned: a caller that waited for it
    // would hang, and fail the test.
    let got = bounded("stale callers", {
        let (cache, calls) = (cache.clone(), calls.clone());
        move || {
            let start = Arc::new(Barrier::new(50));
            let threads: Vec<_> = (0..50)
                .map(|_| {
                    let (cache, calls, start) = (cache.clone(), calls.clone(), start.clone());
                    thread::spawn(move || {
                        start.wait();
                        (0..20)
                            .map(|_| {
                                let calls = calls.clone();
                                cache.try_get_or_refresh_with(&1, move || {
                                    calls.fetch_add(1, Ordering::SeqCst);
                                    Ok::<_, String>("v2".into())
                                })
                            })
                            .collect::<Vec<_>>()
                    })
                })
                .collect();
            threads.into_iter().flat_map(|t| t.join().unwrap()).collect::<Vec<_>>()
        }
    });
    assert_eq!(got.len(), 1_000);
    assert!(got.iter().all(|g| g.as_deref() == Ok("v1")), "every caller got the old value");
    assert_eq!(calls.load(Ordering::SeqCst), 0, "nothing ran the reload yet");
    let stats = cache.stats();
    assert_eq!((stats.refreshes, stats.stale_served), (1, 1_000));
    assert_eq!(held.run(), 1, "one reload");
    assert_eq!(calls.load(Ordering::SeqCst), 1);
    assert_eq!(cache.get(&1).as_deref(), Some("v2"), "the new value, once it landed");
    let fresh = cache.try_get_or_refresh_with(&1, || -> Result<String, String> { unreachable!("fresh") });
    assert_eq!(fresh.as_deref(), Ok("v2"));
}

#[test]
fn a_write_during_a_reload_wins() {
    for write in ["insert", "remove", "compute"] {
        let held = Held::default();
        let cache = stale_cache(&held);
        let reloaded = cache.try_get_or_refresh_with(&1, || Ok::<_, String>("reloaded".into()));
        assert_eq!(reloaded.as_deref(), Ok("v1"));
        match write {
            "insert" => assert!(matches!(cache.insert(1, "written".into()), cuckoo_gate::Admission::Updated)),
            "remove" => assert_eq!(cache.remove(&1).as_deref(), Some("v1")),
            _ => _ = cache.entry(&1).and_upsert_with(|_| "written".into()),
        }
        assert_eq!(held.run(), 1);
        let expected = if write == "remove" { None } else { Some("written") };
        assert_eq!(cache.get(&1).as_deref(), expected, "{write} during the reload");
    }
}

#[test]
fn a_failed_reload_keeps_the_old_value() {
    let held = Held::default();
    let cache = stale_cache(&held);
    let reloaded = cache.try_get_or_refresh_with(&1, || Err::<String, _>("down".to_string()));
    assert_eq!(reloaded.as_deref(), Ok("v1"));
    held.run();
    assert_eq!(cache.get(&1).as_deref(), Some("v1"));
    let stats = cache.stats();
    assert_eq!((stats.refreshes, stats.refresh_failures), (1, 1));
    // Still stale: the next caller starts the next reload.
    let again = cache.try_get_or_refresh_with(&1, || Ok::<_, String>("v2".into()));
    assert_eq!((again.as_deref(), held.run()), (Ok("v1"), 1));
    assert_eq!(cache.get(&1).as_deref(), Some("v2"));
}

#[test]
fn async_reloads_run_on_the_spawner() {
    let runtime =
        tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_time().build().unwrap();
    let (clock, hand) = Clock::manual();
    let (landed, lands) = tokio::sync::oneshot::channel::<()>();
    let landed = Mutex::new(Some(landed));
    let cache: Arc<AdmissionCache<u64, String>> = Arc::new(
        AdmissionCache::builder()
            .capacity(100)
            .time_to_live(secs(60))
            .refresh_after(secs(10))
            .clock(clock)
            .spawner({
                let handle = runtime.handle().clone();
                move |reload| drop(handle.spawn(reload))
            })
            .build()
            .unwrap(),
    );
    runtime.block_on(async {
        let first = cache.try_get_or_refresh_async(&1, async { Ok::<_, String>("v1".to_string()) }).await;
        assert_eq!(first.as_deref(), Ok("v1"));
        hand.advance(secs(10));
        let origin = async move {
            let _ = landed.lock().unwrap().take().map(|landed| landed.send(()));
            Ok::<_, String>("v2".to_string())
        };
        let stale = cache.try_get_or_refresh_async(&1, origin).await;
        assert_eq!(stale.as_deref(), Ok("v1"), "the stale value, at once");
        tokio::time::timeout(common::BOUND, lands).await.expect("the reload ran").unwrap();
        for _ in 0..1_000 {
            if cache.get(&1).as_deref() == Some("v2") {
                return;
            }
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        panic!("the reload did not land");
    });
}

#[test]
fn without_a_spawner_the_first_stale_caller_reloads_and_the_others_get_the_old_value() {
    let (cache, hand) = with_clock::<u64>(|b| b.time_to_live(secs(60)).refresh_after(secs(10)));
    assert_eq!(cache.get_or_insert_with(&1, || 1), 1);
    hand.advance(secs(10));
    let (leading, led) = std::sync::mpsc::channel::<()>();
    let (release, released) = std::sync::mpsc::channel::<()>();
    let reloader = {
        let cache = cache.clone();
        thread::spawn(move || {
            cache.get_or_insert_with(&1, || {
                leading.send(()).unwrap();
                released.recv().unwrap();
                2
            })
        })
    };
    led.recv_timeout(common::BOUND).unwrap();
    for _ in 0..10 {
        let cache = cache.clone();
        let other =
            bounded("a stale caller", move || cache.get_or_insert_with(&1, || unreachable!("one reload")));
        assert_eq!(other, 1, "the old value, without waiting");
    }
    release.send(()).unwrap();
    assert_eq!(
        bounded("the reloader", move || reloader.join().unwrap()),
        2,
        "it pays, and gets the new value"
    );
    assert_eq!(cache.get(&1), Some(2));
    assert_eq!(cache.stats().stale_served, 10);
}

#[test]
fn stale_values_are_served_on_error_through_the_grace_period_and_never_after() {
    for policy in POLICIES {
        let (cache, hand) = with_clock::<u64>(|b| b.admission(policy).time_to_live(secs(10)).grace(secs(20)));
        let _ = cache.insert(1, 1);
        let _ = cache.insert(1, 1); // stored under SecondHit too
        let fail = || Err::<u64, &str>("down");
        hand.advance(secs(10));
        assert_eq!(cache.get(&1), None, "{policy:?}: expired");
        assert_eq!((cache.peek(&1), cache.iter().count()), (None, 0));
        assert_eq!(cache.try_get_or_insert_with(&1, fail), Ok(1), "{policy:?}: in grace");
        hand.advance(secs(19));
        assert_eq!(cache.try_get_or_insert_with(&1, fail), Ok(1), "{policy:?}: still in grace");
        cache.purge_expired();
        assert_eq!(cache.try_get_or_insert_with(&1, fail), Ok(1), "{policy:?}: purge keeps grace");
        hand.advance(secs(1));
        assert_eq!(cache.try_get_or_insert_with(&1, fail), Err("down"), "{policy:?}: never after");
        // A load that succeeds in grace replaces the old value.
        let _ = cache.insert(2, 2);
        let _ = cache.insert(2, 2);
        hand.advance(secs(15));
        assert_eq!(cache.try_get_or_insert_with(&2, || Ok::<_, &str>(22)), Ok(22), "{policy:?}");
        assert_eq!(cache.get(&2), Some(22), "{policy:?}");
        let stats = cache.stats();
        assert_eq!((stats.hits, stats.stale_served), (1, 3), "{policy:?}: grace serves are no hits");
    }
}

#[test]
fn entries_in_grace_are_evicted_before_live_ones() {
    let (cache, hand) = with_clock::<u64>(|b| {
        b.admission(AdmissionPolicy::Always).shards(1).time_to_live(secs(10)).grace(secs(60))
    });
    for key in 0..100 {
        let _ = cache.insert_with_lifetime(key, key, Lifetime::ttl(secs(1)).grace(secs(60)));
    }
    hand.advance(secs(2));
    for key in 100..200 {
        let _ = cache.insert(key, key);
    }
    assert!((100..200).all(|key| cache.get(&key).is_some()), "every live entry stays");
}
