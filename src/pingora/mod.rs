//! The gate and the cache inside [Pingora]'s HTTP cache (cargo feature `pingora`).
//!
//! Two pieces, one per Pingora trait:
//!
//! * [`SecondRequest`] is Pingora's admission policy
//!   (`pingora_cache::admission::AdmissionPolicy`) on a [`SeenBefore`](crate::SeenBefore)
//!   gate: a storage miss is written only the second time its key is seen, so most
//!   one-hit wonders never reach storage. **For flash or disk storage**, where each
//!   write costs endurance and bandwidth: it cuts writes by most of a CDN trace's
//!   one-hit wonders at a few bytes per remembered key. Each object then loses its first
//!   hit, so the byte hit ratio can dip. With a
//!   [`first_sight_scale`](SecondRequest::first_sight_scale), small objects are written
//!   on first sight by AdaptSize's rule, decided in `ProxyHttp::response_cache_filter`
//!   once the size is known ([`SecondRequest::admit_response`]).
//! * [`S3FifoManager`] is Pingora's eviction manager (`EvictionManager`) on this crate's
//!   S3-FIFO cache: new objects wait in a small queue and only those requested again
//!   move to the main one, so one-hit wonders leave first, without losing anyone's first
//!   hit. **For memory storage** (`MemCache`), in place of Pingora's LRU managers: a
//!   higher object and byte hit ratio at the same limit.
//!
//! Both at once suit flash: the gate keeps first sightings off the device, and S3-FIFO
//! evicts among what was written.
//!
//! ```
//! use std::sync::LazyLock;
//! use cuckoo_gate::pingora::{S3FifoManager, SecondRequest};
//! use cuckoo_gate::SeenBefore;
//!
//! static ADMISSION: LazyLock<SecondRequest> =
//!     LazyLock::new(|| SecondRequest::new(SeenBefore::builder().capacity(1_000_000).build().expect("a gate")));
//! static EVICTION: LazyLock<S3FifoManager> =
//!     LazyLock::new(|| S3FifoManager::builder(1 << 30).estimated_entries(100_000).build().expect("a manager"));
//!
//! // In `ProxyHttp::request_cache_filter`:
//! // session.cache.enable(&*STORAGE, Some(&*EVICTION), None, None, None);
//! // session.cache.set_admission_policy(&*ADMISSION);
//! # let _ = (&*ADMISSION, &*EVICTION);
//! ```
//!
//! `pingora-cache` 0.9 needs Rust 1.85; its `pingora-core` builds zlib-ng (with cmake) and
//! zstd (with a C compiler). `examples/pingora_cdn.rs` runs both pieces in a Pingora node
//! over loopback and measures them against stock Pingora.
//!
//! [Pingora]: https://github.com/cloudflare/pingora

mod admission;
mod eviction;
mod key;

pub use self::admission::{SecondRequest, SecondRequestStats};
pub use self::eviction::{S3FifoManager, S3FifoManagerBuilder, SAVE_FILE};
