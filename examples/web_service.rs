//! A web service that serves objects from a slow origin through an `AdmissionCache`, with
//! one origin fetch per missing key however many requests ask for it at once.
//!
//! ```text
//! cargo run --release --example web_service                   # serve on 127.0.0.1:8080
//! curl localhost:8080/obj/42; curl localhost:8080/metrics
//! cargo run --release --example web_service -- --stampede 100  # the check below
//! ```
//!
//! `GET /obj/{id}` goes through [`AdmissionCache::get_or_insert_async`] to an origin that
//! takes 20 ms and counts its calls; `GET /metrics` serves the cache's series in
//! Prometheus' text format (`metrics-exporter-prometheus`).
//!
//! `--stampede N` starts the service on a free loopback port, fires N concurrent HTTP
//! requests for one cold key over real TCP, and prints how many origin calls they made;
//! then the same with `moka::future::Cache::get_with` in front of the origin, for
//! comparison. It exits with status 1 unless the cache made exactly one origin call and
//! every response carried the object.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::extract::{Path, State};
use axum::routing::get;
use axum::Router;
use cuckoo_gate::AdmissionCache;
use metrics_exporter_prometheus::{PrometheusBuilder, PrometheusHandle};

mod common;
use common::number_arg;

/// The origin: slow, and counting its calls.
struct Origin {
    delay: Duration,
    calls: AtomicU64,
}

impl Origin {
    async fn fetch(&self, id: u64) -> Arc<str> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        tokio::time::sleep(self.delay).await;
        format!("object {id}\n").into()
    }
}

/// What stands in front of the origin.
enum Front {
    CuckooGate(Box<AdmissionCache<u64, Arc<str>>>),
    Moka(moka::future::Cache<u64, Arc<str>>),
}

struct App {
    front: Front,
    origin: Origin,
    metrics: Option<PrometheusHandle>,
}

async fn object(State(app): State<Arc<App>>, Path(id): Path<u64>) -> String {
    let value = match &app.front {
        Front::CuckooGate(cache) => cache.get_or_insert_async(&id, app.origin.fetch(id)).await,
        Front::Moka(cache) => cache.get_with(id, app.origin.fetch(id)).await,
    };
    value.to_string()
}

async fn metrics(State(app): State<Arc<App>>) -> String {
    if let Front::CuckooGate(cache) = &app.front {
        cache.publish_metrics();
    }
    app.metrics.as_ref().map_or_else(String::new, PrometheusHandle::render)
}

fn app(front: Front, metrics: Option<PrometheusHandle>) -> Arc<App> {
    let origin = Origin { delay: Duration::from_millis(20), calls: AtomicU64::new(0) };
    Arc::new(App { front, origin, metrics })
}

fn cuckoo_gate_front() -> Front {
    let cache = AdmissionCache::builder().capacity(10_000).metrics_name("web").build();
    Front::CuckooGate(Box::new(cache.expect("a valid cache configuration")))
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

#[tokio::main]
async fn main() {
    let handle = match PrometheusBuilder::new().install_recorder() {
        Ok(handle) => handle,
        Err(e) => {
            eprintln!("web_service: cannot install the metrics recorder: {e}");
            std::process::exit(1)
        }
    };
    if let Some(n) = number_arg("--stampede") {
        let n = n as usize;
        let bounded = Duration::from_secs(60);
        let ours =
            tokio::time::timeout(bounded, stampede("cuckoo-gate", cuckoo_gate_front(), Some(handle), n));
        let ours = ours.await.expect("the stampede hung");
        let moka = Front::Moka(moka::future::Cache::new(10_000));
        let theirs = tokio::time::timeout(bounded, stampede("moka-0.12", moka, None, n));
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
    match serve(app(cuckoo_gate_front(), Some(handle)), ([127, 0, 0, 1], port).into()).await {
        Ok(addr) => println!("serving http://{addr}/obj/{{id}} and http://{addr}/metrics"),
        Err(e) => {
            eprintln!("web_service: cannot serve on 127.0.0.1:{port}: {e}");
            std::process::exit(1)
        }
    }
    let _ = tokio::signal::ctrl_c().await;
}
