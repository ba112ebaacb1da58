//! A Pingora CDN node over loopback, stock and with this crate's pieces: the seen-before
//! gate as its admission policy ([`SecondRequest`]), S3-FIFO as its eviction manager
//! ([`S3FifoManager`]), and both, against stock Pingora (its LRU manager, no admission)
//! and against the policy the gate approximates (an exact second request, unbounded memory).
//!
//! ```text
//! cargo run --release --features pingora --example pingora_cdn                  # built-in workload
//! cargo run --release --features pingora --example pingora_cdn -- --trace FILE  # key and size per line
//! ```
//!
//! Three parts on 127.0.0.1: an origin (axum) that answers `/o/KEY?size=SIZE` with SIZE
//! bytes, cacheable for an hour, and counts what it serves; one Pingora node
//! (pingora-proxy, `MemCache` storage) per configuration and cache size, each on its own
//! port; and a client (reqwest, 4 requests in flight, never two for one key: the second
//! waits, as behind a cache lock) that replays the workload through each node in turn and
//! times every request. The node's cache key is the path, `/o/KEY`: a trace's key is its
//! object, as in `examples/replay.rs` and every cache simulator, so a request whose size
//! differs from the one the node holds is a hit on the version held (objects change size in
//! real traces: 8.7% of `adaptsize_cdn`'s requests ask for a size other than their key's
//! first). A miss goes to the origin, so the hit ratios are 1 - origin requests / requests
//! and 1 - origin bytes / bytes requested. A storage write is an object Pingora finished
//! writing and handed to its eviction manager (`admit`). Last, it prints the objects
//! requested twice or more as a share of stock's writes: what a gate that wrote each of
//! them once, and nothing else, would write.
//!
//! The built-in workload: 50,000 requests, half for objects never requested again, half
//! Zipf(0.8) over 5,000 objects; sizes log-normal (median 8 KiB), 1 KiB to 1 MiB, fixed
//! per object. Storage holds 5% and 10% of the distinct objects' bytes. The example exits
//! with status 1 if, on the built-in workload, the gate's storage writes exceed 20% of
//! stock Pingora's or its object hit ratio is more than 1 point under stock's. Options:
//! `--requests N` (the first N of a trace, or N generated), `--seconds S` (each run stops
//! after S seconds; default 25), `--remembered M` (the gate remembers the first sightings
//! of M times as many objects as storage holds, at 0.1% false positives; default 4),
//! `--first-sight-scale C` (the gate writes a first sighting of SIZE bytes with
//! probability e^(-SIZE/C), AdaptSize's rule, decided in `response_cache_filter` from the
//! `Content-Length`; 0 defers every first sighting; default 64).

use std::collections::HashSet;
use std::net::{SocketAddr, TcpListener};
use std::num::NonZeroU64;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, LazyLock, Mutex};
use std::time::{Duration, Instant, SystemTime};

use async_trait::async_trait;
use axum::body::Bytes;
use axum::extract::Path as UrlPath;
use axum::http::{header, Uri};
use axum::routing::get;
use cuckoo_gate::pingora::{S3FifoManager, SecondRequest};
use cuckoo_gate::SeenBefore;
use pingora_cache::admission::{AdmissionPolicy, Decision};
use pingora_cache::eviction::{lru, CacheEntryKey, CacheEntryKeyRef, EvictionManager};
use pingora_cache::key::CacheHashKey;
use pingora_cache::{CacheKey, CacheMeta, MemCache, NoCacheReason, RespCacheable};
use pingora_core::server::Server;
use pingora_core::upstreams::peer::HttpPeer;
use pingora_http::ResponseHeader;
use pingora_proxy::{ProxyHttp, Session};

#[path = "common/trace.rs"]
mod trace;
use trace::rng::Rng;
use trace::Request;

const CONCURRENCY: usize = 4;
const BUILT_IN_REQUESTS: usize = 50_000;
const MAX_SIZE: usize = 1 << 20;
/// A first sighting the gate takes for a second is a write of a one-hit wonder: 0.1% keeps
/// those under a tenth of the writes the gate lets through, for 15% more gate memory than 1%.
const GATE_FALSE_POSITIVE_RATE: f64 = 0.001;
/// AdaptSize's `c` for first sightings (see `SecondRequest::first_sight_scale`): a first
/// sighting of `size` bytes is written with probability e^(-size/64), so those written are
/// mostly smaller than the response header stored beside them. Each is a write, most of
/// them one-hit wonders: on `adaptsize_cdn` this adds about a tenth to the gate's writes
/// (1.3 points of stock's), 128 about a fifth, 256 about two fifths.
const FIRST_SIGHT_SCALE: u64 = 64;

fn usage(problem: &str) -> ! {
    eprintln!("pingora_cdn: {problem}");
    eprintln!("usage: pingora_cdn [--trace FILE] [--requests N] [--seconds S] [--remembered M] [--first-sight-scale C]");
    std::process::exit(2)
}

/// The built-in workload (see the module doc).
fn built_in(requests: usize) -> Vec<Request> {
    let popular = 5_000;
    let mut cumulative = Vec::with_capacity(popular);
    let mut total = 0.0;
    for rank in 1..=popular {
        total += 1.0 / (rank as f64).powf(0.8);
        cumulative.push(total);
    }
    let mut rng = Rng(2026);
    let mut fresh = 1u64 << 40;
    (0..requests)
        .map(|_| {
            let key = if rng.next_f64() < 0.5 {
                fresh += 1;
                fresh
            } else {
                cumulative.partition_point(|&c| c < rng.next_f64() * total) as u64
            };
            Request { key, size: log_normal_size(key) }
        })
        .collect()
}

/// A size fixed per key: log-normal, median 8 KiB, sigma 1.4, within 1 KiB to 1 MiB.
fn log_normal_size(key: u64) -> u32 {
    let mut rng = Rng(key ^ 0x5EED);
    let (u1, u2) = (rng.next_f64().max(1e-12), rng.next_f64());
    let normal = (-2.0 * u1.ln()).sqrt() * (2.0 * std::f64::consts::PI * u2).cos();
    (8192.0 * (1.4 * normal).exp()).clamp(1024.0, MAX_SIZE as f64) as u32
}

// ---------------------------------------------------------------------------------------
// The origin.

static ORIGIN_REQUESTS: AtomicU64 = AtomicU64::new(0);
static ORIGIN_BYTES: AtomicU64 = AtomicU64::new(0);
/// Every body is a slice of this (bodies of one object are equal; the content is not read).
static BODY: LazyLock<Bytes> = LazyLock::new(|| Bytes::from(vec![b'x'; 4 << 20]));

/// `/o/KEY?size=SIZE`: SIZE bytes (the size is the version the client asks for; the cache
/// key is the path alone, so a node that holds another size of KEY serves it as a hit).
async fn object(UrlPath(_key): UrlPath<u64>, uri: Uri) -> impl axum::response::IntoResponse {
    let size =
        uri.query().and_then(|q| q.strip_prefix("size=")).and_then(|n| n.parse().ok()).unwrap_or(0usize);
    let size = size.min(BODY.len());
    ORIGIN_REQUESTS.fetch_add(1, Ordering::Relaxed);
    ORIGIN_BYTES.fetch_add(size as u64, Ordering::Relaxed);
    ([(header::CACHE_CONTROL, "public, max-age=3600")], BODY.slice(..size))
}

// ---------------------------------------------------------------------------------------
// The node.

/// An eviction manager that counts what storage wrote: each finished write is admitted.
struct Counted {
    inner: Box<dyn EvictionManager + Sync>,
    writes: AtomicU64,
    written: AtomicU64,
}

#[async_trait]
impl EvictionManager for Counted {
    fn total_size(&self) -> usize {
        self.inner.total_size()
    }
    fn total_items(&self) -> usize {
        self.inner.total_items()
    }
    fn evicted_size(&self) -> usize {
        self.inner.evicted_size()
    }
    fn evicted_items(&self) -> usize {
        self.inner.evicted_items()
    }
    fn admit(&self, item: CacheEntryKey, size: usize, fresh_until: SystemTime) -> Vec<CacheEntryKey> {
        self.writes.fetch_add(1, Ordering::Relaxed);
        self.written.fetch_add(size as u64, Ordering::Relaxed);
        self.inner.admit(item, size, fresh_until)
    }
    fn increment_weight(&self, item: &CacheEntryKey, delta: usize, max: Option<usize>) -> Vec<CacheEntryKey> {
        self.written.fetch_add(delta as u64, Ordering::Relaxed);
        self.inner.increment_weight(item, delta, max)
    }
    fn remove(&self, item: CacheEntryKeyRef<'_>) {
        self.inner.remove(item)
    }
    fn access(&self, item: &CacheEntryKey, size: usize, fresh_until: SystemTime) -> bool {
        self.inner.access(item, size, fresh_until)
    }
    fn peek(&self, item: &CacheEntryKey) -> bool {
        self.inner.peek(item)
    }
    async fn save(&self, dir: &str) -> pingora_core::Result<()> {
        self.inner.save(dir).await
    }
    async fn load(&self, dir: &str) -> pingora_core::Result<()> {
        self.inner.load(dir).await
    }
}

/// The policy the gate approximates, for comparison: an exact second request with
/// unbounded memory. Every key ever asked for is kept (`combined_bin()`, 16 bytes); a key's
/// first request is deferred, every later one written.
#[derive(Default)]
struct ExactSecond(Mutex<HashSet<[u8; 16]>>);

impl AdmissionPolicy for ExactSecond {
    fn observe(&self, key: &CacheKey) -> Decision {
        match self.0.lock().unwrap().insert(key.combined_bin()) {
            true => Decision::Defer { observed: 1 },
            false => Decision::Ready { observed: 2 },
        }
    }
}

/// An admission policy of a node: the gate, or the exact policy it approximates.
#[derive(Clone, Copy)]
enum Admission {
    Gate(&'static SecondRequest),
    Exact(&'static ExactSecond),
}

impl Admission {
    fn policy(self) -> &'static dyn AdmissionPolicy {
        match self {
            Admission::Gate(gate) => gate,
            Admission::Exact(exact) => exact,
        }
    }

    /// Bytes the policy holds: the gate's filters, or the exact set's table (16 bytes and
    /// a control byte per slot).
    fn memory(self) -> usize {
        match self {
            Admission::Gate(gate) => gate.gate().stats().memory_bytes,
            Admission::Exact(exact) => exact.0.lock().unwrap().capacity() * 17,
        }
    }
}

/// One node: its storage, eviction manager and admission policy. Pingora takes them as
/// `&'static`; a service would hold each in a `static` (`LazyLock`), the example makes one
/// set per configuration and cache size, and leaks them.
struct Node {
    origin: SocketAddr,
    storage: &'static MemCache,
    eviction: &'static Counted,
    admission: Option<Admission>,
}

#[async_trait]
impl ProxyHttp for Node {
    type CTX = ();

    fn new_ctx(&self) {}

    async fn upstream_peer(&self, _: &mut Session, _: &mut ()) -> pingora_core::Result<Box<HttpPeer>> {
        Ok(Box::new(HttpPeer::new(self.origin, false, String::new())))
    }

    fn request_cache_filter(&self, session: &mut Session, _: &mut ()) -> pingora_core::Result<()> {
        session.cache.enable(self.storage, Some(self.eviction), None, None, None);
        if let Some(admission) = self.admission {
            session.cache.set_admission_policy(admission.policy());
        }
        Ok(())
    }

    fn cache_key_callback(&self, session: &Session, _: &mut ()) -> pingora_core::Result<CacheKey> {
        Ok(CacheKey::new(session.req_header().uri.path().as_bytes().to_vec(), ""))
    }

    fn response_cache_filter(
        &self,
        session: &Session,
        response: &ResponseHeader,
        _: &mut (),
    ) -> pingora_core::Result<RespCacheable> {
        let decision = session.cache.admission_decision();
        let admitted = match (self.admission, session.cache.maybe_cache_key()) {
            // A first sighting is written or not by its size (AdaptSize's rule), now known.
            (Some(Admission::Gate(gate)), Some(key)) => {
                let size =
                    response.headers.get(header::CONTENT_LENGTH).and_then(|v| v.to_str().ok()?.parse().ok());
                gate.admit_response(key, decision, size)
            }
            (Some(Admission::Exact(_)), _) => !matches!(decision, Some(Decision::Defer { .. })),
            _ => true,
        };
        if !admitted {
            return Ok(RespCacheable::Uncacheable(NoCacheReason::Deferred));
        }
        let now = SystemTime::now();
        let meta = CacheMeta::new(now + Duration::from_secs(3_600), now, 0, 0, response.clone());
        Ok(RespCacheable::Cacheable(meta))
    }
}

// ---------------------------------------------------------------------------------------
// The configurations and the runs.

#[derive(Clone, Copy, PartialEq, Eq)]
enum Config {
    Stock,
    Gate,
    S3Fifo,
    Both,
    Exact,
}

impl Config {
    const ALL: [Config; 5] = [Config::Stock, Config::Gate, Config::S3Fifo, Config::Both, Config::Exact];

    fn name(self) -> &'static str {
        match self {
            Config::Stock => "stock (LRU)",
            Config::Gate => "gate + LRU",
            Config::S3Fifo => "S3-FIFO",
            Config::Both => "gate + S3-FIFO",
            Config::Exact => "exact second request + LRU",
        }
    }
}

struct Planned {
    config: Config,
    percent: u64,
    port: u16,
    eviction: &'static Counted,
    admission: Option<Admission>,
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).map(|a| a.port()).expect("a free port")
}

fn plan(
    config: Config,
    percent: u64,
    limit: usize,
    objects: usize,
    remembered: usize,
    scale: u64,
) -> Planned {
    let eviction: Box<dyn EvictionManager + Sync> = match config {
        Config::Stock | Config::Gate | Config::Exact => {
            Box::new(lru::Manager::<16>::with_capacity(limit, objects))
        }
        Config::S3Fifo | Config::Both => {
            Box::new(S3FifoManager::builder(limit).estimated_entries(objects).build().expect("a manager"))
        }
    };
    let eviction = Box::leak(Box::new(Counted {
        inner: eviction,
        writes: AtomicU64::new(0),
        written: AtomicU64::new(0),
    }));
    // The gate remembers the first sightings of `remembered` times as many objects as
    // storage holds (in each of its two generations).
    let gate = || {
        SeenBefore::builder()
            .capacity((objects * remembered).max(1_024))
            .false_positive_rate(GATE_FALSE_POSITIVE_RATE)
            .build()
            .expect("a gate")
    };
    let admission = match config {
        Config::Gate | Config::Both => {
            let policy = SecondRequest::new(gate());
            let policy = match NonZeroU64::new(scale) {
                Some(scale) => policy.first_sight_scale(scale),
                None => policy,
            };
            Some(Admission::Gate(Box::leak(Box::new(policy))))
        }
        Config::Exact => Some(Admission::Exact(Box::leak(Box::default()))),
        _ => None,
    };
    Planned { config, percent, port: free_port(), eviction, admission }
}

struct Outcome {
    requests: u64,
    bytes: u64,
    origin_requests: u64,
    origin_bytes: u64,
    seconds: f64,
    p99_ms: f64,
    stopped_early: bool,
    failed: u64,
}

/// Replays `workload` through the node on `port`, `CONCURRENCY` requests in flight.
async fn replay(
    client: &reqwest::Client,
    port: u16,
    workload: Arc<Vec<Request>>,
    budget: Duration,
) -> Outcome {
    let (origin_requests, origin_bytes) =
        (ORIGIN_REQUESTS.load(Ordering::Relaxed), ORIGIN_BYTES.load(Ordering::Relaxed));
    let next = Arc::new(AtomicUsize::new(0));
    // Keys in flight: a request waits while one for its key is in flight, so that no two
    // misses write one key at once (MemCache, Pingora's test storage, panics when an
    // eviction's purge removes a writer's temporary object under another writer).
    let in_flight: Arc<Mutex<HashSet<u64>>> = Arc::default();
    let start = Instant::now();
    let tasks: Vec<_> = (0..CONCURRENCY)
        .map(|_| {
            let (client, workload, next, in_flight) =
                (client.clone(), workload.clone(), next.clone(), in_flight.clone());
            tokio::spawn(async move {
                let (mut latencies, mut bytes, mut failed) = (Vec::new(), 0u64, 0u64);
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    if i >= workload.len() || start.elapsed() > budget {
                        return (latencies, bytes, failed);
                    }
                    let Request { key, size } = workload[i];
                    while !in_flight.lock().unwrap().insert(key) {
                        tokio::time::sleep(Duration::from_micros(50)).await;
                    }
                    let url = format!("http://127.0.0.1:{port}/o/{key}?size={size}");
                    let sent = Instant::now();
                    let response = client.get(&url).send().await.and_then(|r| r.error_for_status());
                    let body = match response {
                        Ok(response) => response.bytes().await,
                        Err(e) => Err(e),
                    };
                    in_flight.lock().unwrap().remove(&key);
                    match body {
                        // A hit may serve an earlier size of the key (a trace's object
                        // can change size); the request counts the size it asked for.
                        Ok(body) if !body.is_empty() => {
                            latencies.push(sent.elapsed());
                            bytes += u64::from(size);
                        }
                        Ok(_) => panic!("GET {url}: an empty body"),
                        Err(e) => {
                            eprintln!("pingora_cdn: GET {url}: {e}");
                            failed += 1;
                        }
                    }
                }
            })
        })
        .collect();
    let (mut latencies, mut bytes, mut failed) = (Vec::new(), 0, 0);
    for task in tasks {
        let (l, b, f) = task.await.expect("a client task");
        latencies.extend(l);
        bytes += b;
        failed += f;
    }
    let seconds = start.elapsed().as_secs_f64();
    latencies.sort_unstable();
    let p99 = latencies.get(latencies.len() * 99 / 100).copied().unwrap_or_default();
    Outcome {
        requests: latencies.len() as u64,
        bytes,
        origin_requests: ORIGIN_REQUESTS.load(Ordering::Relaxed) - origin_requests,
        origin_bytes: ORIGIN_BYTES.load(Ordering::Relaxed) - origin_bytes,
        seconds,
        p99_ms: p99.as_secs_f64() * 1e3,
        stopped_early: latencies.len() as u64 + failed < workload.len() as u64,
        failed,
    }
}

/// Objects `workload` requests twice or more: the ones a cache can hit at all.
fn reusable_objects(workload: &[Request]) -> usize {
    let mut keys: Vec<u64> = workload.iter().map(|r| r.key).collect();
    keys.sort_unstable();
    keys.chunk_by(|a, b| a == b).filter(|run| run.len() > 1).count()
}

async fn wait_for(port: u16) {
    for _ in 0..500 {
        if tokio::net::TcpStream::connect(("127.0.0.1", port)).await.is_ok() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("nothing listens on port {port}");
}

fn main() {
    let (mut trace, mut requests, mut seconds, mut remembered) = (None, None, 25u64, 4usize);
    let mut scale = FIRST_SIGHT_SCALE;
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        let mut value = |name: &str| args.next().unwrap_or_else(|| usage(&format!("{name} needs a value")));
        match arg.as_str() {
            "--trace" => trace = Some(PathBuf::from(value("--trace"))),
            "--requests" => {
                requests = Some(value("--requests").parse().unwrap_or_else(|_| usage("bad --requests")))
            }
            "--seconds" => seconds = value("--seconds").parse().unwrap_or_else(|_| usage("bad --seconds")),
            "--first-sight-scale" => {
                scale =
                    value("--first-sight-scale").parse().unwrap_or_else(|_| usage("bad --first-sight-scale"))
            }
            "--remembered" => {
                remembered = value("--remembered").parse().unwrap_or_else(|_| usage("bad --remembered"))
            }
            other => usage(&format!("unknown argument {other}")),
        }
    }
    let built_in_run = trace.is_none();
    let (name, workload) = match &trace {
        Some(path) => {
            let (mut requests_read, sized) = trace::read(path).unwrap_or_else(|e| usage(&e));
            if !sized {
                usage("the trace has no sizes (key and size per line)");
            }
            for r in &mut requests_read {
                r.size = r.size.min(MAX_SIZE as u32 * 4);
            }
            if let Some(n) = requests {
                requests_read.truncate(n);
            }
            (path.display().to_string(), requests_read)
        }
        None => ("built-in".to_string(), built_in(requests.unwrap_or(BUILT_IN_REQUESTS))),
    };
    let (objects, distinct_bytes) = trace::distinct(&workload);
    let reusable = reusable_objects(&workload);
    let total_bytes: u64 = workload.iter().map(|r| u64::from(r.size)).sum();
    let mean = distinct_bytes as f64 / objects.max(1) as f64;
    println!(
        "workload {name}: {} requests, {objects} objects, {:.1} MB distinct, {:.1} MB requested",
        workload.len(),
        distinct_bytes as f64 / 1e6,
        total_bytes as f64 / 1e6
    );

    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a runtime");
    let origin_port = free_port();
    let origin = SocketAddr::from(([127, 0, 0, 1], origin_port));
    rt.spawn(async move {
        let app = axum::Router::new().route("/o/{key}", get(object));
        let listener = tokio::net::TcpListener::bind(origin).await.expect("the origin's port");
        axum::serve(listener, app).await.expect("the origin");
    });

    let mut plans = Vec::new();
    for percent in [5, 10] {
        let limit = (distinct_bytes * percent / 100) as usize;
        let held = ((limit as f64 / mean) as usize).max(16);
        plans.extend(
            Config::ALL.into_iter().map(|config| plan(config, percent, limit, held, remembered, scale)),
        );
    }
    let mut server = Server::new(None).expect("a Pingora server");
    server.bootstrap();
    for planned in &plans {
        let node = Node {
            origin,
            storage: Box::leak(Box::new(MemCache::new())),
            eviction: planned.eviction,
            admission: planned.admission,
        };
        let mut service = pingora_proxy::http_proxy_service(&server.configuration, node);
        service.add_tcp(&format!("127.0.0.1:{}", planned.port));
        server.add_service(service);
    }
    std::thread::spawn(move || server.run_forever());

    let client = reqwest::Client::builder().pool_max_idle_per_host(CONCURRENCY).build().expect("a client");
    let workload = Arc::new(workload);
    let budget = Duration::from_secs(seconds);
    println!(
        "\n| storage | config | object hit | byte hit | storage writes | MB written | origin requests | origin MB | requests/s | p99 ms | policy memory |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|---|");
    let mut failed = Vec::new();
    // Each size's stock run (it runs first): its size, object hit ratio and writes.
    let mut stocks: Vec<(u64, f64, u64)> = Vec::new();
    for planned in &plans {
        rt.block_on(wait_for(origin_port));
        rt.block_on(wait_for(planned.port));
        let outcome = rt.block_on(replay(&client, planned.port, workload.clone(), budget));
        let object_hit = 1.0 - outcome.origin_requests as f64 / outcome.requests.max(1) as f64;
        let byte_hit = 1.0 - outcome.origin_bytes as f64 / outcome.bytes.max(1) as f64;
        let writes = planned.eviction.writes.load(Ordering::Relaxed);
        let written = planned.eviction.written.load(Ordering::Relaxed);
        let memory =
            planned.admission.map_or("-".to_string(), |a| format!("{:.0} KB", a.memory() as f64 / 1e3));
        println!(
            "| {}% | {} | {:.4} | {:.4} | {} | {:.1} | {} | {:.1} | {:.0} | {:.2} | {}{} |",
            planned.percent,
            planned.config.name(),
            object_hit,
            byte_hit,
            writes,
            written as f64 / 1e6,
            outcome.origin_requests,
            outcome.origin_bytes as f64 / 1e6,
            outcome.requests as f64 / outcome.seconds,
            outcome.p99_ms,
            memory,
            if outcome.stopped_early { " (stopped at the time limit)" } else { "" },
        );
        if outcome.failed > 0 {
            failed.push(format!(
                "{}% {}: {} requests failed",
                planned.percent,
                planned.config.name(),
                outcome.failed
            ));
        }
        match planned.config {
            Config::Stock => stocks.push((planned.percent, object_hit, writes)),
            Config::Gate if built_in_run => {
                let &(_, stock_hit, stock_writes) = stocks.last().expect("stock runs first");
                if writes as f64 > 0.2 * stock_writes as f64 {
                    failed.push(format!(
                        "{}%: the gate wrote {writes}, over 20% of stock's {stock_writes}",
                        planned.percent
                    ));
                }
                if object_hit < stock_hit - 0.01 {
                    failed.push(format!(
                        "{}%: the gate's object hit ratio {object_hit:.4} is over 1 point under stock's {stock_hit:.4}",
                        planned.percent
                    ));
                }
                if outcome.stopped_early {
                    failed.push(format!("{}%: the gate's run stopped at the time limit", planned.percent));
                }
            }
            _ => {}
        }
    }
    // A floor under any second-hit gate's writes: one per object that is asked for again.
    for (percent, _, writes) in stocks {
        println!(
            "{percent}%: {reusable} objects are requested twice or more, {:.1}% of stock's storage writes",
            100.0 * reusable as f64 / writes.max(1) as f64
        );
    }
    if failed.is_empty() {
        std::process::exit(0);
    }
    failed.iter().for_each(|f| eprintln!("pingora_cdn: {f}"));
    std::process::exit(1);
}
