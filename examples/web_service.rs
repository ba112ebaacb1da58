//! A web service that serves objects from a slow origin through an `AdmissionCache`: one
//! origin fetch per missing key however many requests ask for it at once, one per failure
//! however many wait on it, each object living as long as the origin's `max-age` says, and
//! stale objects served while they are fetched again.
//!
//! ```text
//! cargo run --release --example web_service                   # serve on 127.0.0.1:8080
//! curl localhost:8080/obj/42; curl localhost:8080/metrics
//! cargo run --release --example web_service -- --stampede 100  # the check below
//! cargo run --release --example web_service -- --failing       # the failing origin, beside moka
//! cargo run --release --example web_service -- --state cache.state  # a warm restart
//! ```
//!
//! `GET /obj/{id}` goes through [`AdmissionCache::try_get_or_refresh_async`] to an origin
//! that takes 20 ms, counts its calls, fails for a few ids (502) and gives each object a
//! `max-age` of 1 to 4 s; the cache serves an object `stale-while-revalidate` for half its
//! `max-age` more (reloading it on `tokio::spawn`) and `stale-if-error` for a minute, and
//! keeps an origin error for a second. `GET /metrics` serves the cache's series in
//! Prometheus' text format (`metrics-exporter-prometheus`).
//!
//! `--state FILE` restores the cache from `FILE` on start (if it is there: a file that does
//! not restore is reported and the service starts cold), and on SIGTERM or Ctrl-C stops
//! taking connections, lets the requests in flight finish (axum's graceful shutdown), and
//! saves the cache to `FILE` (written beside it and renamed over it, so a crash mid-save
//! leaves the last good file). Each object keeps what was left of its `max-age`, less the
//! time the service was down.
//!
//! `--stampede N` starts the service on a free loopback port, fires N concurrent HTTP
//! requests for one cold key over real TCP, and prints how many origin calls they made;
//! then the same with `moka::future::Cache::get_with` in front of the origin, for
//! comparison. It exits with status 1 unless the cache made exactly one origin call and
//! every response carried the object.
//!
//! `--failing` runs a warm load over loopback TCP: 64 connections, ids drawn from
//! Zipf(0.99) over 500 objects, 5 of which fail at the origin (ranks 3, 11, 42, 150 and
//! 420), each run at most 500,000 requests or 5 s, after a request for every id. The
//! service runs on this cache, then on `moka::future::Cache::try_get_with` with the same
//! per-object lifetimes (moka's `Expiry`), in alternating runs (`--runs R`, default 3);
//! it prints requests per second, the p99 of the failing ids and of the others, and the
//! origin calls of each run, and the medians.

use std::collections::HashSet;
use std::fs::File;
use std::io::{BufReader, BufWriter};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::routing::get;
use axum::Router;
use cuckoo_gate::{AdmissionCache, Lifetime};
use metrics_exporter_prometheus::{PrometheusBuilder, PrometheusHandle};

mod common;
use common::{median, number_arg, Rng};

/// What the origin serves: the body, and how long it may be cached.
#[derive(Clone, serde::Serialize, serde::Deserialize)]
struct Object {
    body: Arc<str>,
    max_age: Duration,
}

/// What the origin answers for an id it cannot serve.
#[derive(Clone, Debug)]
struct OriginError(Arc<str>);

/// The origin: slow, counting its calls, failing for some ids.
struct Origin {
    delay: Duration,
    calls: AtomicU64,
    failing: HashSet<u64>,
}

impl Origin {
    async fn fetch(&self, id: u64) -> Result<Object, OriginError> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        tokio::time::sleep(self.delay).await;
        if self.failing.contains(&id) {
            return Err(OriginError(format!("object {id} is unavailable\n").into()));
        }
        Ok(Object { body: format!("object {id}\n").into(), max_age: Duration::from_secs(1 + id % 4) })
    }
}

/// What stands in front of the origin.
enum Front {
    CuckooGate(Arc<AdmissionCache<u64, Object>>),
    Moka(moka::future::Cache<u64, Object>),
}

struct App {
    front: Front,
    origin: Origin,
    metrics: Option<PrometheusHandle>,
}

async fn object(State(app): State<Arc<App>>, Path(id): Path<u64>) -> (StatusCode, String) {
    let got = match &app.front {
        Front::CuckooGate(cache) => {
            let origin = app.clone();
            cache.try_get_or_refresh_async(&id, async move { origin.origin.fetch(id).await }).await
        }
        Front::Moka(cache) => cache.try_get_with(id, app.origin.fetch(id)).await.map_err(|e| (*e).clone()),
    };
    match got {
        Ok(object) => (StatusCode::OK, object.body.to_string()),
        Err(OriginError(message)) => (StatusCode::BAD_GATEWAY, message.to_string()),
    }
}

async fn metrics(State(app): State<Arc<App>>) -> String {
    if let Front::CuckooGate(cache) = &app.front {
        cache.publish_metrics();
    }
    app.metrics.as_ref().map_or_else(String::new, PrometheusHandle::render)
}

/// The ids the origin fails for, among the `--failing` run's 500.
const FAILING: [u64; 5] = [3, 11, 42, 150, 420];

fn app(front: Front, metrics: Option<PrometheusHandle>) -> Arc<App> {
    let origin = Origin { delay: ORIGIN_DELAY, calls: AtomicU64::new(0), failing: FAILING.into() };
    Arc::new(App { front, origin, metrics })
}

/// How long the origin takes.
const ORIGIN_DELAY: Duration = Duration::from_millis(20);

/// The cache in front of the origin: each object lives its `max-age`, is served stale half
/// as long again while it is fetched anew, and for a minute more if the origin fails.
fn cuckoo_gate_front(metrics_name: Option<&str>) -> Front {
    let builder = AdmissionCache::builder()
        .capacity(10_000)
        .expire_after(|_, object: &Object| {
            Lifetime::http(object.max_age, object.max_age / 2, Duration::from_secs(60))
        })
        .failure_ttl(Duration::from_secs(1))
        .spawner(|reload| drop(tokio::spawn(reload)));
    let builder = match metrics_name {
        Some(name) => builder.metrics_name(name),
        None => builder,
    };
    Front::CuckooGate(Arc::new(builder.build().expect("a valid cache configuration")))
}

/// moka with the same per-object lifetimes (`Expiry::expire_after_create`).
fn moka_front() -> Front {
    struct MaxAge;
    impl moka::Expiry<u64, Object> for MaxAge {
        fn expire_after_create(&self, _: &u64, object: &Object, _: std::time::Instant) -> Option<Duration> {
            Some(object.max_age)
        }
    }
    Front::Moka(moka::future::Cache::builder().max_capacity(10_000).expire_after(MaxAge).build())
}

/// Serves `app` on `addr` until the process ends; returns the address bound.
async fn serve(app: Arc<App>, addr: SocketAddr) -> std::io::Result<SocketAddr> {
    let router =
        Router::new().route("/obj/{id}", get(object)).route("/metrics", get(metrics)).with_state(app);
    let listener = tokio::net::TcpListener::bind(addr).await?;
    let bound = listener.local_addr()?;
    tokio::spawn(async move { axum::serve(listener, router).await });
    Ok(bound)
}

/// `n` concurrent requests for one cold key, printed: the origin calls they made, and the
/// responses that carried the object.
async fn stampede(label: &str, front: Front, metrics: Option<PrometheusHandle>, n: usize) -> (u64, usize) {
    let app = app(front, metrics);
    let addr = serve(app.clone(), ([127, 0, 0, 1], 0).into()).await.expect("bind a loopback port");
    let client = reqwest::Client::builder().pool_max_idle_per_host(n).build().expect("an HTTP client");
    let url = format!("http://{addr}/obj/7");
    let start = Instant::now();
    let requests: Vec<_> = (0..n)
        .map(|_| {
            let (client, url) = (client.clone(), url.clone());
            tokio::spawn(async move { client.get(url).send().await?.error_for_status()?.text().await })
        })
        .collect();
    let mut ok = 0;
    for request in requests {
        match request.await.expect("a request task panicked") {
            Ok(body) if body == "object 7\n" => ok += 1,
            Ok(body) => eprintln!("{label}: wrong body {body:?}"),
            Err(e) => eprintln!("{label}: request failed: {e}"),
        }
    }
    let calls = app.origin.calls.load(Ordering::SeqCst);
    println!(
        "{label:<12} {n} concurrent requests for one cold key over TCP: {calls} origin call(s), {ok} objects served, {:.1} ms",
        start.elapsed().as_secs_f64() * 1e3
    );
    if app.metrics.is_some() {
        if let Ok(scrape) = client.get(format!("http://{addr}/metrics")).send().await {
            let text = scrape.text().await.unwrap_or_default();
            for line in text.lines().filter(|l| l.starts_with("cuckoo_gate_cache_load")) {
                println!("{:<12} /metrics: {line}", "");
            }
        }
    }
    (calls, ok)
}

/// Objects the `--failing` load draws from.
const OBJECTS: u64 = 500;
/// Connections of the `--failing` load.
const CONNECTIONS: usize = 64;
/// Most requests, and most time, of one `--failing` run.
const MOST_REQUESTS: usize = 500_000;
const MOST_TIME: Duration = Duration::from_secs(5);

/// One `--failing` run's figures.
struct Run {
    per_second: f64,
    p99_failing: Duration,
    p99_others: Duration,
    origin_calls: u64,
}

/// `n` ids from Zipf(0.99) over [`OBJECTS`], by inverse transform sampling.
fn zipf_ids(n: usize, seed: u64) -> Vec<u64> {
    let weights: Vec<f64> = (1..=OBJECTS).map(|rank| 1.0 / (rank as f64).powf(0.99)).collect();
    let total: f64 = weights.iter().sum();
    let cdf: Vec<f64> =
        weights.iter().scan(0.0, |acc, w| Some(*acc + w / total).inspect(|&c| *acc = c)).collect();
    let mut rng = Rng(seed);
    (0..n).map(|_| cdf.partition_point(|&c| c < rng.next_f64()).min(OBJECTS as usize - 1) as u64).collect()
}

/// The p99 of `latencies`.
fn p99(mut latencies: Vec<Duration>) -> Duration {
    latencies.sort_unstable();
    latencies.get(latencies.len().saturating_sub(1) * 99 / 100).copied().unwrap_or_default()
}

/// One `--failing` run against `front`: warms it with every id, then sends the load.
async fn failing_run(front: Front, ids: Arc<Vec<u64>>) -> Run {
    let app = app(front, None);
    let addr = serve(app.clone(), ([127, 0, 0, 1], 0).into()).await.expect("bind a loopback port");
    let client =
        reqwest::Client::builder().pool_max_idle_per_host(CONNECTIONS).build().expect("an HTTP client");
    let next = Arc::new(AtomicUsize::new(0));
    let send = |ids: Arc<Vec<u64>>, bound: Instant| {
        let (client, next) = (client.clone(), next.clone());
        tokio::spawn(async move {
            let mut seen = Vec::new();
            while Instant::now() < bound {
                let Some(&id) = ids.get(next.fetch_add(1, Ordering::Relaxed)) else { break };
                let start = Instant::now();
                let answered = client.get(format!("http://{addr}/obj/{id}")).send().await;
                if let Ok(response) = answered {
                    let _ = response.bytes().await;
                }
                seen.push((FAILING.contains(&id), start.elapsed()));
            }
            seen
        })
    };
    // Warm: every id once.
    let every: Arc<Vec<u64>> = Arc::new((0..OBJECTS).collect());
    let warm: Vec<_> = (0..CONNECTIONS).map(|_| send(every.clone(), Instant::now() + MOST_TIME)).collect();
    for task in warm {
        task.await.expect("a client task panicked");
    }
    let calls_before = app.origin.calls.load(Ordering::SeqCst);
    next.store(0, Ordering::Relaxed);
    let start = Instant::now();
    let load: Vec<_> = (0..CONNECTIONS).map(|_| send(ids.clone(), start + MOST_TIME)).collect();
    let (mut failing, mut others) = (Vec::new(), Vec::new());
    for task in load {
        for (is_failing, latency) in task.await.expect("a client task panicked") {
            if is_failing { &mut failing } else { &mut others }.push(latency);
        }
    }
    let elapsed = start.elapsed();
    let requests = failing.len() + others.len();
    Run {
        per_second: requests as f64 / elapsed.as_secs_f64(),
        p99_failing: p99(failing),
        p99_others: p99(others),
        origin_calls: app.origin.calls.load(Ordering::SeqCst) - calls_before,
    }
}

/// `--failing`: alternating runs of the load on both fronts, printed with their medians.
async fn failing(runs: usize) {
    println!(
        "{CONNECTIONS} connections, Zipf(0.99) over {OBJECTS} objects (ids {FAILING:?} fail at the origin), \
         origin {} ms, up to {MOST_REQUESTS} requests or {} s per run",
        ORIGIN_DELAY.as_millis(),
        MOST_TIME.as_secs()
    );
    let mut results: [Vec<Run>; 2] = [Vec::new(), Vec::new()];
    let labels = ["cuckoo-gate", "moka-0.12"];
    for run in 0..runs {
        let ids = Arc::new(zipf_ids(MOST_REQUESTS, 0x0F41 + run as u64));
        for (i, label) in labels.iter().enumerate() {
            let front = if i == 0 { cuckoo_gate_front(None) } else { moka_front() };
            let figures = failing_run(front, ids.clone()).await;
            println!(
                "run {run} {label:<12} {:>8.0} requests/s, p99 failing ids {:>7.1} ms, p99 others {:>6.1} ms, {} origin calls",
                figures.per_second,
                figures.p99_failing.as_secs_f64() * 1e3,
                figures.p99_others.as_secs_f64() * 1e3,
                figures.origin_calls
            );
            results[i].push(figures);
        }
    }
    println!("| | requests/s | failing ids' p99 (ms) | other ids' p99 (ms) | origin calls |");
    println!("|---|---|---|---|---|");
    for (label, runs) in labels.iter().zip(&results) {
        let of = |f: fn(&Run) -> f64| median(runs.iter().map(f).collect());
        println!(
            "| {label} | {:.0} | {:.1} | {:.1} | {:.0} |",
            of(|r| r.per_second),
            of(|r| r.p99_failing.as_secs_f64() * 1e3),
            of(|r| r.p99_others.as_secs_f64() * 1e3),
            of(|r| r.origin_calls as f64)
        );
    }
}

#[tokio::main]
async fn main() {
    let handle = match PrometheusBuilder::new().install_recorder() {
        Ok(handle) => handle,
        Err(e) => {
            eprintln!("web_service: cannot install the metrics recorder: {e}");
            std::process::exit(1)
        }
    };
    if std::env::args().any(|arg| arg == "--failing") {
        let runs = number_arg("--runs").unwrap_or(3).max(1) as usize;
        return failing(runs).await;
    }
    if let Some(n) = number_arg("--stampede") {
        let n = n as usize;
        let bounded = Duration::from_secs(60);
        let ours = stampede("cuckoo-gate", cuckoo_gate_front(Some("web")), Some(handle), n);
        let ours = tokio::time::timeout(bounded, ours).await.expect("the stampede hung");
        let theirs = tokio::time::timeout(bounded, stampede("moka-0.12", moka_front(), None, n));
        theirs.await.expect("the stampede hung");
        if ours != (1, n) {
            eprintln!("web_service: expected 1 origin call and {n} objects, got {ours:?}");
            std::process::exit(1);
        }
        return;
    }
    let port = number_arg("--port").unwrap_or(8080);
    let Ok(port) = u16::try_from(port) else {
        eprintln!("web_service: --port {port} is not a port");
        std::process::exit(2)
    };
    let args: Vec<String> = std::env::args().collect();
    let state = match args.iter().position(|a| a == "--state") {
        Some(at) => match args.get(at + 1) {
            Some(path) => Some(PathBuf::from(path)),
            None => {
                eprintln!("web_service: --state needs a file");
                std::process::exit(2)
            }
        },
        None => None,
    };
    if let Err(e) = run(handle, port, state).await {
        eprintln!("web_service: {e}");
        std::process::exit(1)
    }
}

/// Serves on `port` until SIGTERM or Ctrl-C: restores the cache from `state` first and
/// saves it there last, when given.
async fn run(handle: PrometheusHandle, port: u16, state: Option<PathBuf>) -> std::io::Result<()> {
    let app = app(cuckoo_gate_front(Some("web")), Some(handle));
    let Front::CuckooGate(cache) = &app.front else { unreachable!("the service runs on cuckoo-gate") };
    let cache = cache.clone();
    if let Some(path) = &state {
        match File::open(path) {
            Ok(file) => match cache.restore(&mut BufReader::new(file)) {
                Ok(r) => println!(
                    "restored {} objects from {} in {:.1?} ({} had expired while down)",
                    r.entries,
                    path.display(),
                    r.duration,
                    r.expired
                ),
                Err(e) => eprintln!("web_service: {} not restored, starting cold: {e}", path.display()),
            },
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                println!("no {} yet: starting cold", path.display());
            }
            Err(e) => eprintln!("web_service: cannot open {}, starting cold: {e}", path.display()),
        }
    }
    let router =
        Router::new().route("/obj/{id}", get(object)).route("/metrics", get(metrics)).with_state(app);
    let listener = tokio::net::TcpListener::bind(SocketAddr::from(([127, 0, 0, 1], port)))
        .await
        .map_err(|e| std::io::Error::new(e.kind(), format!("cannot serve on 127.0.0.1:{port}: {e}")))?;
    let addr = listener.local_addr()?;
    println!("serving http://{addr}/obj/{{id}} and http://{addr}/metrics");
    axum::serve(listener, router).with_graceful_shutdown(shutdown()).await?;
    if let Some(path) = &state {
        // Written beside the file and renamed over it: a crash mid-save keeps the last one.
        let partial = path.with_extension("partial");
        let mut file = BufWriter::new(File::create(&partial)?);
        let saved = cache.save(&mut file)?;
        file.into_inner().map_err(|e| e.into_error())?.sync_all()?;
        std::fs::rename(&partial, path)?;
        println!("saved {} objects to {} in {:.1?}", saved.entries, path.display(), saved.duration);
    }
    Ok(())
}

/// Resolves at the first SIGTERM or Ctrl-C.
async fn shutdown() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut signal) => drop(signal.recv().await),
            Err(_) => std::future::pending().await,
        }
    };
    #[cfg(not(unix))]
    let terminate = std::future::pending::<()>();
    tokio::select! {
        () = ctrl_c => {}
        () = terminate => {}
    }
}
