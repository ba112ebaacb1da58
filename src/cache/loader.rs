//! The cache's loading methods, and the guard through which a leader owns its load.
//!
//! The protocol (who leads, who waits, what a failure hands on) is in `load.rs`; this
//! module is the cache's side of it: the look in the cache before and after joining a
//! load, the store of the loaded value, and the guard whose `Drop` hands a load on when
//! its leader ends without a value. An error, a panic and a dropped future all take that
//! one path.

use std::borrow::Borrow;
use std::convert::Infallible;
use std::future::Future;
use std::hash::Hash;
use std::sync::Arc;

use super::load::{Load, Waited, COALESCED, STARTED};
use super::shard::Write;
use super::AdmissionCache;

/// A leader's hold on its load: finishing stores the value and wakes the waiters; being
/// dropped unfinished hands the load on.
struct Leader<'a, K: Hash + Eq, V: Clone> {
    cache: &'a AdmissionCache<K, V>,
    hash: u64,
    load: Arc<Load<V>>,
    /// Whether the load is registered with the key's shard (see `Shard::begin_load`).
    registered: bool,
    finished: bool,
}

/// What joining a load gave: a value, or the lead.
enum Joined<'a, K: Hash + Eq, V: Clone> {
    Value(V),
    Lead(Leader<'a, K, V>),
}

impl<K: Hash + Eq, V: Clone> AdmissionCache<K, V> {
    /// The value of `key`; on a miss, `make()` computes it, and it is stored if the policy
    /// admits it. Of all callers that miss on the same key at the same time, one runs its
    /// `make` and the others wait for its value (parked: this call can block for as long
    /// as that `make` runs). No lock is held while `make` runs. A hit costs what a
    /// [`get`](Self::get) costs.
    ///
    /// Every caller of one load gets its value, whether or not the policy stores it (under
    /// [`AdmissionPolicy::SecondHit`](super::AdmissionPolicy::SecondHit) a first sighting
    /// is not stored). A key already present when the load finishes (an
    /// [`insert`](Self::insert) during the load) keeps its value; a key
    /// [removed](Self::remove) during the load does not get the loaded value.
    ///
    /// If `make` panics, the panic goes on in this call, and the load passes to the
    /// caller that has waited longest, which runs its own `make`. `make` must not load the
    /// same key from this cache: it would wait for itself.
    ///
    /// # Examples
    ///
    /// ```
    /// use cuckoo_gate::AdmissionCache;
    ///
    /// let cache: AdmissionCache<u64, &str> = AdmissionCache::builder().capacity(100).build()?;
    /// assert_eq!(cache.get_or_insert_with(&1, || "computed"), "computed");
    /// assert_eq!(cache.get_or_insert_with(&1, || unreachable!()), "computed");
    /// # Ok::<(), cuckoo_gate::BuildError>(())
    /// ```
    #[inline]
    pub fn get_or_insert_with<Q>(&self, key: &Q, make: impl FnOnce() -> V) -> V
    where
        K: Borrow<Q>,
        Q: ?Sized + Hash + Eq + ToOwned<Owned = K>,
    {
        match self.try_get_or_insert_with(key, || Ok::<V, Infallible>(make())) {
            Ok(value) => value,
            Err(never) => match never {},
        }
    }

    /// [`get_or_insert_with`](Self::get_or_insert_with) with a loader that can fail. An
    /// error is returned to the caller whose `make` returned it, and is never cached; the
    /// load then passes to the caller that has waited longest, which runs its own `make`
    /// (as if it had been first), and so on until one succeeds or no caller waits.
    ///
    /// # Errors
    ///
    /// The error of this caller's `make`, if it ran and failed.
    ///
    /// # Examples
    ///
    /// ```
    /// use cuckoo_gate::AdmissionCache;
    ///
    /// let cache: AdmissionCache<u64, u64> = AdmissionCache::builder().capacity(100).build()?;
    /// assert_eq!(cache.try_get_or_insert_with(&1, || Err("origin down")), Err("origin down"));
    /// assert_eq!(cache.try_get_or_insert_with(&1, || Ok::<_, &str>(10)), Ok(10));
    /// assert_eq!(cache.get(&1), Some(10));
    /// assert_eq!(cache.stats().load_failures, 1);
    /// # Ok::<(), cuckoo_gate::BuildError>(())
    /// ```
    #[inline]
    pub fn try_get_or_insert_with<Q, E>(&self, key: &Q, make: impl FnOnce() -> Result<V, E>) -> Result<V, E>
    where
        K: Borrow<Q>,
        Q: ?Sized + Hash + Eq + ToOwned<Owned = K>,
    {
        let hash = self.hasher.hash_one(key);
        // The hit inline, as a `get`'s; the miss out of line.
        match self.get_hashed(hash, key) {
            Some(value) => Ok(value),
            None => self.load_with(key, hash, make),
        }
    }

    /// [`try_get_or_insert_with`](Self::try_get_or_insert_with) after its miss: join the
    /// load of `key` (of `hash`), and lead it or wait for it.
    #[inline(never)]
    fn load_with<Q, E>(&self, key: &Q, hash: u64, make: impl FnOnce() -> Result<V, E>) -> Result<V, E>
    where
        K: Borrow<Q>,
        Q: ?Sized + Hash + Eq + ToOwned<Owned = K>,
    {
        let leader = loop {
            let (load, lead) = self.loads.join(hash, key, Q::to_owned);
            let waited = if lead { Waited::Lead } else { self.loads.wait(hash, &load) };
            match self.joined(waited, key, hash, load) {
                Some(Joined::Value(value)) => return Ok(value),
                Some(Joined::Lead(leader)) => break leader,
                None => continue,
            }
        };
        let value = make()?;
        Ok(leader.finish(value))
    }

    /// The value of `key`; on a miss, the value `load` resolves to, stored if the policy
    /// admits it. Of all callers that miss on the same key at the same time, one awaits its
    /// `load` and the others wait for its value; the futures of the others are dropped
    /// unpolled. Needs no particular runtime (waiting tasks are woken through their
    /// `Waker`), holds no lock across an `.await`, and is `Send` when `K`, `V` and `load`
    /// are. A hit costs what a [`get`](Self::get) costs, and completes at the first poll.
    ///
    /// What the waiters get, and what is stored, is as for
    /// [`get_or_insert_with`](Self::get_or_insert_with). If this future is dropped while it
    /// loads (a client gone, a timeout), the load passes to the caller that has waited
    /// longest, which awaits its own `load`; a waiter that is dropped leaves the others
    /// undisturbed. A `load` that is never driven to completion, by a leader that is
    /// neither polled nor dropped, holds up its waiters for as long.
    ///
    /// # Examples
    ///
    /// ```
    /// use cuckoo_gate::AdmissionCache;
    ///
    /// let cache: AdmissionCache<u64, String> = AdmissionCache::builder().capacity(100).build()?;
    /// # let runtime = tokio::runtime::Builder::new_current_thread().build().unwrap();
    /// # runtime.block_on(async {
    /// let value = cache.get_or_insert_async(&1, async { "fetched".to_string() }).await;
    /// assert_eq!(value, "fetched");
    /// assert_eq!(cache.get_or_insert_async(&1, async { unreachable!() }).await, "fetched");
    /// # });
    /// # Ok::<(), cuckoo_gate::BuildError>(())
    /// ```
    pub async fn get_or_insert_async<Q>(&self, key: &Q, load: impl Future<Output = V>) -> V
    where
        K: Borrow<Q>,
        Q: ?Sized + Hash + Eq + ToOwned<Owned = K>,
    {
        let hash = self.hasher.hash_one(key);
        // The hit before any other future is made: it completes with no state but this.
        if let Some(value) = self.get_hashed(hash, key) {
            return value;
        }
        let load = async { Ok::<V, Infallible>(load.await) };
        match self.load_async(key, hash, load).await {
            Ok(value) => value,
            Err(never) => match never {},
        }
    }

    /// [`get_or_insert_async`](Self::get_or_insert_async) with a loader that can fail; an
    /// error is handled as in [`try_get_or_insert_with`](Self::try_get_or_insert_with).
    ///
    /// # Errors
    ///
    /// The error `load` resolved to, if this caller awaited it.
    ///
    /// # Examples
    ///
    /// ```
    /// use cuckoo_gate::AdmissionCache;
    ///
    /// let cache: AdmissionCache<u64, u64> = AdmissionCache::builder().capacity(100).build()?;
    /// # let runtime = tokio::runtime::Builder::new_current_thread().build().unwrap();
    /// # runtime.block_on(async {
    /// let failed = cache.try_get_or_insert_async(&1, async { Err("origin down") }).await;
    /// assert_eq!(failed, Err("origin down"));
    /// assert_eq!(cache.try_get_or_insert_async(&1, async { Ok::<_, &str>(10) }).await, Ok(10));
    /// # });
    /// # Ok::<(), cuckoo_gate::BuildError>(())
    /// ```
    pub async fn try_get_or_insert_async<Q, E>(
        &self,
        key: &Q,
        load: impl Future<Output = Result<V, E>>,
    ) -> Result<V, E>
    where
        K: Borrow<Q>,
        Q: ?Sized + Hash + Eq + ToOwned<Owned = K>,
    {
        let hash = self.hasher.hash_one(key);
        if let Some(value) = self.get_hashed(hash, key) {
            return Ok(value);
        }
        self.load_async(key, hash, load).await
    }

    /// [`try_get_or_insert_async`](Self::try_get_or_insert_async) after its miss: join the
    /// load of `key` (of `hash`), and lead it or wait for it.
    async fn load_async<Q, E>(
        &self,
        key: &Q,
        hash: u64,
        load: impl Future<Output = Result<V, E>>,
    ) -> Result<V, E>
    where
        K: Borrow<Q>,
        Q: ?Sized + Hash + Eq + ToOwned<Owned = K>,
    {
        let leader = loop {
            let (joined, lead) = self.loads.join(hash, key, Q::to_owned);
            let waited = if lead { Waited::Lead } else { self.loads.wait_async(hash, &joined).await };
            match self.joined(waited, key, hash, joined) {
                Some(Joined::Value(value)) => return Ok(value),
                Some(Joined::Lead(leader)) => break leader,
                None => continue,
            }
        };
        let value = load.await?;
        Ok(leader.finish(value))
    }

    /// What a caller that joined `load` does next: returns the value it waited for; or,
    /// leading, looks for the key once more under its shard's write lock (a load that
    /// finished since this caller's miss stored its value there) and finishes the load
    /// with what it finds, or registers the load with the shard and takes the lead; or
    /// `None` to join again.
    fn joined<Q>(&self, waited: Waited, key: &Q, hash: u64, load: Arc<Load<V>>) -> Option<Joined<'_, K, V>>
    where
        K: Borrow<Q>,
        Q: ?Sized + Hash + Eq + ToOwned<Owned = K>,
    {
        match waited {
            Waited::Value => Some(Joined::Value(load.value().clone())),
            Waited::Again => {
                self.loads.forget(hash, &load);
                None
            }
            Waited::Lead => {
                let ticket = load.ticket();
                let mut leader = Leader { cache: self, hash, load, registered: false, finished: false };
                let found = self.shard(hash).write().begin_load(hash, key, ticket);
                Some(match found {
                    Some(found) => Joined::Value(leader.finish_found(found)),
                    None => {
                        leader.registered = true;
                        self.loads.counts.add(STARTED);
                        Joined::Lead(leader)
                    }
                })
            }
        }
    }
}

impl<K: Hash + Eq, V: Clone> Leader<'_, K, V> {
    /// Stores the loaded `value` (see [`Load`]'s table) and hands it to the waiters.
    fn finish(mut self, value: V) -> V {
        let (cache, hash, ticket) = (self.cache, self.hash, self.load.ticket());
        let mut leftovers = cache.leftovers();
        // The key moves from the map into the cache in one hold of the map's stripe, so
        // that a caller that misses meanwhile finds the load. The weigher and the clone
        // run first: if one panics, the load is still in the map, to be handed on.
        let stored = cache.loads.with_slot(hash, &self.load, |slot| {
            let weight = cache.weigh(&slot.get().key, &value);
            let stored = value.clone();
            let (slot, _) = slot.remove();
            leftovers.unkept = Some((slot.key, stored));
            let write = Write {
                hash,
                weight,
                lifetime: None,
                gate: cache.gate.as_ref(),
                expiry: &cache.expiry,
                load: Some(ticket),
            };
            let _ = cache.shard(hash).write().insert(&write, &mut leftovers);
        });
        (self.registered, self.finished) = (false, true);
        // Out of the map, the load can gain no caller: if none holds it, none waits.
        if stored.is_some() && Arc::strong_count(&self.load) == 1 {
            cache.report(leftovers);
            return value;
        }
        cache.loads.publish(&self.load, value);
        cache.report(leftovers);
        self.load.value().clone()
    }

    /// Finishes the load with `found`, the value already in the cache (another caller's
    /// load stored it: this caller is served by that load).
    fn finish_found(mut self, found: V) -> V {
        self.cache.loads.counts.add(COALESCED);
        self.cache.loads.forget(self.hash, &self.load);
        self.finished = true;
        if Arc::strong_count(&self.load) == 1 {
            return found;
        }
        self.cache.loads.publish(&self.load, found);
        self.load.value().clone()
    }
}

impl<K: Hash + Eq, V: Clone> Drop for Leader<'_, K, V> {
    fn drop(&mut self) {
        if !self.finished && !crate::primitive::failed_model() {
            if self.registered {
                let _ = self.cache.shard(self.hash).write().end_load(self.hash, self.load.ticket());
            }
            self.cache.loads.abandon(self.hash, &self.load);
        }
    }
}
