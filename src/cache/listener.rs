//! Removal notifications: why an entry left, and the listener told of it.
//!
//! Shards collect what leaves them, with its cause, in `Leftovers`; the cache calls the
//! listener once the shard's lock is released, never under it.

use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe};
use std::sync::Arc;

/// Why an entry left an [`AdmissionCache`](super::AdmissionCache), as told to its
/// [`eviction_listener`](super::AdmissionCacheBuilder::eviction_listener).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum RemovalCause {
    /// The policy evicted it to make room.
    Evicted,
    /// Its lifetime ended ([`time_to_live`](super::AdmissionCacheBuilder::time_to_live),
    /// [`time_to_idle`](super::AdmissionCacheBuilder::time_to_idle),
    /// [`expire_after`](super::AdmissionCacheBuilder::expire_after),
    /// [`insert_with_ttl`](super::AdmissionCache::insert_with_ttl) or
    /// [`insert_with_lifetime`](super::AdmissionCache::insert_with_lifetime)), and with it
    /// any grace; or it ended while the cache was down, and a restore did not keep it. A
    /// stale value replaced by its reload is [`Refreshed`](Self::Refreshed).
    Expired,
    /// [`remove`](super::AdmissionCache::remove) or
    /// [`retain`](super::AdmissionCache::retain) took it out.
    Removed,
    /// An insert replaced its value (the key stays, with the new value; the listener gets
    /// the old one).
    Replaced,
    /// As [`Replaced`](Self::Replaced), of a value past its freshness (stale, see
    /// [`refresh_after`](super::AdmissionCacheBuilder::refresh_after)): its reload, or an
    /// insert, replaced it. The key stays, with the new value. Under stale-while-revalidate
    /// an entry's lifetime ends this way rather than as [`Expired`](Self::Expired): count
    /// both to count expiries.
    Refreshed,
    /// [`clear`](super::AdmissionCache::clear) took it out.
    Cleared,
}

pub(crate) type Listener<K, V> = Arc<dyn Fn(K, V, RemovalCause) + Send + Sync>;

/// Tells `listener` of each of `removed` (or just drops them, without one). A panic in the
/// listener (or in a key's or value's `Drop`) does not stop the others from being told;
/// the first such panic goes on once all are done.
#[inline]
pub(crate) fn report<K, V>(
    listener: Option<&Listener<K, V>>,
    removed: impl IntoIterator<Item = (K, V, RemovalCause)>,
) {
    if let Some(listener) = listener {
        tell(listener, removed);
    }
}

/// [`report`] to a listener.
fn tell<K, V>(listener: &Listener<K, V>, removed: impl IntoIterator<Item = (K, V, RemovalCause)>) {
    let mut panic = None;
    for (key, value, cause) in removed {
        if let Err(payload) = catch_unwind(AssertUnwindSafe(|| listener(key, value, cause))) {
            panic.get_or_insert(payload);
        }
    }
    if let Some(payload) = panic {
        resume_unwind(payload);
    }
}
