//! The cache's loading methods, and the guard through which a leader owns its load.
//!
//! The protocol (who leads, who waits, what a failure gives the waiters) is in `load.rs`;
//! this module is the cache's side of it: the look in the cache before and after joining
//! a load, the store of the loaded value, the stale value a failed reload keeps, and the
//! guard whose `Drop` hands a load on when its leader ends without a value or an error (a
//! panic, a dropped future).

use std::borrow::Borrow;
use std::convert::Infallible;
use std::future::Future;
use std::hash::Hash;
use std::marker::PhantomData;
use std::ops::Deref;
use std::sync::Arc;

use super::load::{
    Failure, Joined, Load, Waited, COALESCED, FAILED, FAILURES_CACHED, FAILURES_SHARED, REFRESHED,
    REFRESH_FAILED, STALE_SERVED, STARTED,
};
use super::refresh::Reload;
use super::shard::{Begun, Looked, Write};
use super::AdmissionCache;

/// A leader's hold on its load: finishing stores the value and wakes the waiters, failing
/// gives them the error (or the old value); being dropped otherwise hands the load on.
/// `C` is how it holds the cache: borrowed by a caller, or owned by a reload that runs on
/// the spawner.
struct Leader<C, K, V>
where
    C: Deref<Target = AdmissionCache<K, V>>,
    K: Hash + Eq,
    V: Clone,
{
    cache: C,
    hash: u64,
    load: Arc<Load<V>>,
    /// Whether the load is registered with the key's shard (see `Shard::begin_load`).
    registered: bool,
    finished: bool,
    types: PhantomData<fn() -> (K, V)>,
}

/// The old value a load keeps, should its loader fail: a stale entry's (a reload), or
/// one in grace's.
struct Fallback<V> {
    value: V,
    refresh: bool,
}

/// What a caller does after a join or a wait.
enum Next<C, K, V, E>
where
    C: Deref<Target = AdmissionCache<K, V>>,
    K: Hash + Eq,
    V: Clone,
{
    /// Returns this.
    Done(Result<V, E>),
    /// Joins again.
    Again,
    /// Leads the load, with the old value to fall back on.
    Lead(Leader<C, K, V>, Option<Fallback<V>>),
}

impl<K: Hash + Eq, V: Clone> AdmissionCache<K, V> {
    /// The value of `key`; on a miss, `make()` computes it, and it is stored if the policy
    /// admits it. Of all callers that miss on the same key at the same time, one runs its
    /// `make` and the others wait for its value (parked: this call can block for as long
    /// as that `make` runs). No lock is held while `make` runs. A hit costs what a
    /// [`get`](Self::get) costs. The key is borrowed; a miss makes the owned key once.
    ///
    /// Every caller of one load gets its value, whether or not the policy stores it (under
    /// [`AdmissionPolicy::SecondHit`](super::AdmissionPolicy::SecondHit) a first sighting
    /// is not stored). A write to the key during the load (an [`insert`](Self::insert), a
    /// compute, a [`remove`](Self::remove)) stands: the loaded value is not stored. The
    /// value lives as the builder's [`expire_after`](super::AdmissionCacheBuilder::expire_after)
    /// closure, or its defaults, say. A stale entry (see
    /// [`refresh_after`](super::AdmissionCacheBuilder::refresh_after)) is returned at once
    /// while another caller reloads it; the caller that finds it stale first runs its `make`
    /// to reload it, and returns the new value. This caller, never the
    /// [`spawner`](super::AdmissionCacheBuilder::spawner): only
    /// [`try_get_or_refresh_with`](Self::try_get_or_refresh_with) and
    /// [`try_get_or_refresh_async`](Self::try_get_or_refresh_async) reload in the background.
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

    /// [`get_or_insert_with`](Self::get_or_insert_with) with a loader that can fail. A
    /// failure is the origin's answer to everyone who asked: its error goes to every caller
    /// waiting on the load, one origin call for all of them (a caller that comes after it
    /// loads anew, or, with [`failure_ttl`](super::AdmissionCacheBuilder::failure_ttl), gets
    /// the error at once while it is kept). The error is cloned for each waiter, hence
    /// `E: Clone`: an error that is not (`std::io::Error`) goes in an `Arc` at the call
    /// site. A waiter whose loader has another error type loads anew.
    ///
    /// If the key's entry was stale, or expired and in its
    /// [`grace`](super::AdmissionCacheBuilder::grace), a failed load returns the old value
    /// in place of the error (to every waiter too), and the old entry stays as it was.
    ///
    /// # Errors
    ///
    /// The error of the loader that ran for this caller: its own, or the one it waited for.
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
        E: Clone + Send + Sync + 'static,
    {
        let hash = self.hashing.hash(key);
        // The hit inline, as a `get`'s; the rest out of line.
        self.look(hash, key, Ok, |looked| self.load_with(key, hash, looked.stale(), make))
    }

    /// [`try_get_or_insert_with`](Self::try_get_or_insert_with) after its look found the
    /// key missing, or `stale` with this old value: join the load of `key` (of `hash`),
    /// and lead it or wait for it (a caller with a stale value does not wait).
    #[inline(never)]
    fn load_with<Q, E>(
        &self,
        key: &Q,
        hash: u64,
        stale: Option<V>,
        make: impl FnOnce() -> Result<V, E>,
    ) -> Result<V, E>
    where
        K: Borrow<Q>,
        Q: ?Sized + Hash + Eq + ToOwned<Owned = K>,
        E: Clone + Send + Sync + 'static,
    {
        let (leader, fallback) = loop {
            let (waited, load) = match self.join::<Q, E>(key, hash) {
                Joined::Failed(failure) => return self.kept_failure(failure, stale),
                Joined::Wait(load) => match stale {
                    Some(old) => return Ok(self.serve_stale(old)),
                    None => (self.loads.wait(hash, &load), load),
                },
                Joined::Lead(load) => (Waited::Lead, load),
            };
            match self.joined::<Q, E>(waited, key, hash, load, stale.is_some()) {
                Next::Done(result) => return result,
                Next::Again => continue,
                Next::Lead(leader, fallback) => break (leader, fallback),
            }
        };
        match make() {
            Ok(value) => Ok(leader.finish(value)),
            Err(error) => leader.fail(error, fallback),
        }
    }

    /// The value of `key`; on a miss, the value `load` resolves to, stored if the policy
    /// admits it. Of all callers that miss on the same key at the same time, one awaits its
    /// `load` and the others wait for its value; the futures of the others are dropped
    /// unpolled. Needs no particular runtime (waiting tasks are woken through their
    /// `Waker`), holds no lock across an `.await`, and is `Send` when `K`, `V` and `load`
    /// are. A hit costs what a [`get`](Self::get) costs, and completes at the first poll.
    ///
    /// What the waiters get, what is stored and what a stale entry gives are as for
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
        let hash = self.hashing.hash(key);
        // The hit before any other future is made: it completes with no state but this.
        let stale = match self.look(hash, key, Ok, |looked| Err(looked.stale())) {
            Ok(value) => return value,
            Err(stale) => stale,
        };
        let load = async { Ok::<V, Infallible>(load.await) };
        match self.load_async(key, hash, stale, load).await {
            Ok(value) => value,
            Err(never) => match never {},
        }
    }

    /// [`get_or_insert_async`](Self::get_or_insert_async) with a loader that can fail; an
    /// error, and a stale or in-grace entry's old value, are handled as in
    /// [`try_get_or_insert_with`](Self::try_get_or_insert_with). A stale entry is reloaded
    /// by the caller that finds it, never on the
    /// [`spawner`](super::AdmissionCacheBuilder::spawner) (see
    /// [`try_get_or_refresh_async`](Self::try_get_or_refresh_async) for that).
    ///
    /// # Errors
    ///
    /// The error of the loader that ran for this caller: its own, or the one it waited for.
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
        E: Clone + Send + Sync + 'static,
    {
        let hash = self.hashing.hash(key);
        let stale = match self.look(hash, key, Ok, |looked| Err(looked.stale())) {
            Ok(value) => return Ok(value),
            Err(stale) => stale,
        };
        self.load_async(key, hash, stale, load).await
    }

    /// [`try_get_or_insert_async`](Self::try_get_or_insert_async) after its look found
    /// the key missing, or `stale`: as [`load_with`](Self::load_with).
    async fn load_async<Q, E>(
        &self,
        key: &Q,
        hash: u64,
        stale: Option<V>,
        load: impl Future<Output = Result<V, E>>,
    ) -> Result<V, E>
    where
        K: Borrow<Q>,
        Q: ?Sized + Hash + Eq + ToOwned<Owned = K>,
        E: Clone + Send + Sync + 'static,
    {
        let (leader, fallback) = loop {
            let (waited, joined) = match self.join::<Q, E>(key, hash) {
                Joined::Failed(failure) => return self.kept_failure(failure, stale),
                Joined::Wait(joined) => match stale {
                    Some(old) => return Ok(self.serve_stale(old)),
                    None => (self.loads.wait_async(hash, &joined).await, joined),
                },
                Joined::Lead(joined) => (Waited::Lead, joined),
            };
            match self.joined::<Q, E>(waited, key, hash, joined, stale.is_some()) {
                Next::Done(result) => return result,
                Next::Again => continue,
                Next::Lead(leader, fallback) => break (leader, fallback),
            }
        };
        match load.await {
            Ok(value) => Ok(leader.finish(value)),
            Err(error) => leader.fail(error, fallback),
        }
    }

    /// Joins the load of `key` (of `hash`): a kept failure counts if its error is an `E`.
    fn join<Q, E: 'static>(&self, key: &Q, hash: u64) -> Joined<V>
    where
        K: Borrow<Q>,
        Q: ?Sized + Hash + Eq + ToOwned<Owned = K>,
    {
        let now = if self.loads.keeps_failures() { self.expiry.clock.now() } else { 0 };
        self.loads.join(hash, key, Q::to_owned, now, |failure| failure.is::<E>())
    }

    /// A kept failure for a caller: its error, or the `stale` value the caller found.
    fn kept_failure<E: Clone + 'static>(&self, failure: Failure, stale: Option<V>) -> Result<V, E> {
        if let Some(old) = stale {
            return Ok(self.serve_stale(old));
        }
        self.loads.counts.add(FAILURES_CACHED);
        Err(failure.downcast_ref::<E>().expect("a kept failure is joined only by its own type").clone())
    }

    /// Counts `old`, a stale value, served.
    fn serve_stale(&self, old: V) -> V {
        self.loads.counts.add(STALE_SERVED);
        old
    }

    /// What a caller that joined `load` does next: returns the value or the error it
    /// waited for (an error of another type than its own, it loads anew); or, leading,
    /// looks for the key once more under its shard's write lock (a load that finished
    /// since this caller's look stored its value there) and finishes the load with what it
    /// finds, or registers the load with the shard and takes the lead (of a reload, if it
    /// looked to `refresh` a stale entry and found it still stale).
    fn joined<Q, E: Clone + 'static>(
        &self,
        waited: Waited,
        key: &Q,
        hash: u64,
        load: Arc<Load<V>>,
        refresh: bool,
    ) -> Next<&Self, K, V, E>
    where
        K: Borrow<Q>,
        Q: ?Sized + Hash + Eq,
    {
        match waited {
            Waited::Value => Next::Done(Ok(load.value().clone())),
            Waited::Failed(failure) => match failure.downcast_ref::<E>() {
                Some(error) => {
                    self.loads.counts.add(FAILURES_SHARED);
                    Next::Done(Err(error.clone()))
                }
                None => Next::Again,
            },
            Waited::Again => {
                self.loads.forget(hash, &load);
                Next::Again
            }
            Waited::Lead => match self.begin(self, hash, key, load, refresh) {
                Ok(value) => Next::Done(Ok(value)),
                Err((leader, fallback)) => Next::Lead(leader, fallback),
            },
        }
    }

    /// A leader's start, holding the cache as `cache`: the value found if the key is held
    /// (and fresh, unless `refresh`), or the lead, registered with the shard, and the old
    /// value to fall back on.
    #[allow(clippy::type_complexity)]
    fn begin<C, Q>(
        &self,
        cache: C,
        hash: u64,
        key: &Q,
        load: Arc<Load<V>>,
        refresh: bool,
    ) -> Result<V, (Leader<C, K, V>, Option<Fallback<V>>)>
    where
        C: Deref<Target = AdmissionCache<K, V>>,
        K: Borrow<Q>,
        Q: ?Sized + Hash + Eq,
    {
        let ticket = load.ticket();
        let mut leader = Leader { cache, hash, load, registered: false, finished: false, types: PhantomData };
        let begun = self.shard(hash).write().begin_load(hash, key, ticket, refresh);
        leader.registered = !matches!(begun, Begun::Live(_));
        let fallback = match begun {
            Begun::Live(value) => return Ok(leader.finish_found(value)),
            Begun::Stale(value) => {
                self.loads.counts.add(REFRESHED);
                Some(Fallback { value, refresh: true })
            }
            Begun::Grace(value) => Some(Fallback { value, refresh: false }),
            Begun::Absent => None,
        };
        self.loads.counts.add(STARTED);
        Err((leader, fallback))
    }
}

impl<K, V> AdmissionCache<K, V>
where
    K: Hash + Eq + Send + Sync + 'static,
    V: Clone + Send + Sync + 'static,
{
    /// [`try_get_or_insert_with`](Self::try_get_or_insert_with) that reloads a stale entry
    /// in the background: with a [`spawner`](super::AdmissionCacheBuilder::spawner), a
    /// caller that finds the key's entry stale gets the old value at once, and the first
    /// such caller hands `make` to the spawner as a [`Reload`]; no caller waits for it.
    /// Hence `make` is `Send + 'static`, and the cache is in an `Arc`, which the reload
    /// holds while it runs. Without a spawner it is `try_get_or_insert_with`. A miss, and
    /// an entry in grace, are loaded as there.
    ///
    /// # Errors
    ///
    /// As [`try_get_or_insert_with`](Self::try_get_or_insert_with).
    ///
    /// # Examples
    ///
    /// ```
    /// use std::sync::Arc;
    /// use std::time::Duration;
    /// use cuckoo_gate::{AdmissionCache, Clock};
    ///
    /// let (clock, hand) = Clock::manual();
    /// let cache: Arc<AdmissionCache<u64, String>> = Arc::new(
    ///     AdmissionCache::builder()
    ///         .capacity(100)
    ///         .time_to_live(Duration::from_secs(60))
    ///         .refresh_after(Duration::from_secs(10))
    ///         .spawner(|reload| reload.run()) // here, on the caller's thread: a pool's, in a service
    ///         .clock(clock)
    ///         .build()?,
    /// );
    /// let fetch = |n: u32| move || Ok::<_, String>(format!("v{n}"));
    /// assert_eq!(cache.try_get_or_refresh_with(&1, fetch(1))?, "v1");
    /// hand.advance(Duration::from_secs(10)); // stale
    /// assert_eq!(cache.try_get_or_refresh_with(&1, fetch(2))?, "v1"); // the old value, at once
    /// assert_eq!(cache.get(&1).as_deref(), Some("v2")); // the reload has landed
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn try_get_or_refresh_with<Q, E>(
        self: &Arc<Self>,
        key: &Q,
        make: impl FnOnce() -> Result<V, E> + Send + 'static,
    ) -> Result<V, E>
    where
        K: Borrow<Q>,
        Q: ?Sized + Hash + Eq + ToOwned<Owned = K>,
        E: Clone + Send + Sync + 'static,
    {
        let hash = self.hashing.hash(key);
        self.look(hash, key, Ok, |looked| match looked {
            Looked::Stale(old) if self.spawner.is_some() => {
                Ok(self.refresh_in_background(key, hash, old, async move { make() }))
            }
            looked => self.load_with(key, hash, looked.stale(), make),
        })
    }

    /// [`try_get_or_insert_async`](Self::try_get_or_insert_async) that reloads a stale
    /// entry in the background, as [`try_get_or_refresh_with`](Self::try_get_or_refresh_with)
    /// does: with a [`spawner`](super::AdmissionCacheBuilder::spawner) (`tokio::spawn`, say),
    /// a caller that finds the key's entry stale gets the old value at once, and `load`
    /// runs on the spawner. Without one it is `try_get_or_insert_async`.
    ///
    /// # Errors
    ///
    /// As [`try_get_or_insert_with`](Self::try_get_or_insert_with).
    ///
    /// # Examples
    ///
    /// ```
    /// use std::sync::Arc;
    /// use std::time::Duration;
    /// use cuckoo_gate::AdmissionCache;
    ///
    /// # let runtime = tokio::runtime::Builder::new_multi_thread().enable_time().build().unwrap();
    /// # runtime.block_on(async {
    /// let cache: Arc<AdmissionCache<u64, String>> = Arc::new(
    ///     AdmissionCache::builder()
    ///         .capacity(100)
    ///         .time_to_live(Duration::from_secs(60))
    ///         .refresh_after(Duration::from_secs(10))
    ///         .spawner(|reload| drop(tokio::spawn(reload)))
    ///         .build()
    ///         .unwrap(),
    /// );
    /// let object = cache.try_get_or_refresh_async(&7, async { Ok::<_, String>("v1".to_string()) }).await;
    /// assert_eq!(object.as_deref(), Ok("v1"));
    /// # });
    /// ```
    pub async fn try_get_or_refresh_async<Q, E>(
        self: &Arc<Self>,
        key: &Q,
        load: impl Future<Output = Result<V, E>> + Send + 'static,
    ) -> Result<V, E>
    where
        K: Borrow<Q>,
        Q: ?Sized + Hash + Eq + ToOwned<Owned = K>,
        E: Clone + Send + Sync + 'static,
    {
        let hash = self.hashing.hash(key);
        let stale = match self.look(hash, key, Ok, Err) {
            Ok(value) => return Ok(value),
            Err(Looked::Stale(old)) if self.spawner.is_some() => {
                return Ok(self.refresh_in_background(key, hash, old, load));
            }
            Err(looked) => looked.stale(),
        };
        self.load_async(key, hash, stale, load).await
    }

    /// A caller found `key`'s entry stale, its value `old`: starts a reload of it on the
    /// spawner, unless one is in flight, and returns `old`.
    fn refresh_in_background<Q, E>(
        self: &Arc<Self>,
        key: &Q,
        hash: u64,
        old: V,
        load: impl Future<Output = Result<V, E>> + Send + 'static,
    ) -> V
    where
        K: Borrow<Q>,
        Q: ?Sized + Hash + Eq + ToOwned<Owned = K>,
        E: Clone + Send + Sync + 'static,
    {
        // A kept failure is no answer to a caller that holds a live value.
        let Joined::Lead(joined) = self.loads.join(hash, key, Q::to_owned, 0, |_| false) else {
            return self.serve_stale(old);
        };
        let (leader, fallback) = match self.begin(self.clone(), hash, key, joined, true) {
            // Reloaded since this caller looked.
            Ok(value) => return value,
            Err(lead) => lead,
        };
        let reload = async move {
            match load.await {
                Ok(value) => drop(leader.finish(value)),
                Err(error) => drop(leader.fail(error, fallback)),
            }
        };
        if let Some(spawn) = &self.spawner {
            spawn(Reload::new(reload));
        }
        self.serve_stale(old)
    }
}

impl<C, K, V> Leader<C, K, V>
where
    C: Deref<Target = AdmissionCache<K, V>>,
    K: Hash + Eq,
    V: Clone,
{
    /// Stores the loaded `value` (see [`Load`]'s table) and hands it to the waiters.
    fn finish(mut self, value: V) -> V {
        let (hash, ticket) = (self.hash, self.load.ticket());
        let cache = &*self.cache;
        let mut leftovers = cache.leftovers();
        // The key moves from the map into the cache in one hold of the map's stripe, so
        // that a caller that misses meanwhile finds the load. The weigher, the lifetime,
        // the key's hash and the clone run first: if one panics, the load is still in the
        // map, to be handed on.
        let stored = cache.loads.with_slot(hash, &self.load, |slot| {
            let key = &slot.get().key;
            let (weight, span) = (cache.weigh(key, &value), cache.span_of(key, &value));
            // The hasher the load's hash is by, unless a restore replaced it since (then the
            // value is not stored, as after a clear).
            let keys = cache.hashing.keys();
            let current = keys.hash(key) == hash;
            let stored = value.clone();
            let (slot, _) = slot.remove();
            leftovers.unkept = Some((slot.key, stored));
            let write = Write {
                hash,
                weight,
                span,
                gate: cache.gate.as_ref(),
                expiry: &cache.expiry,
                load: Some(ticket),
                keys,
            };
            if current {
                let _ = cache.insert_loaded(&write, &mut leftovers);
            }
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

    /// Ends the load with its loader's `error`: the waiters get the old value of the
    /// `fallback`, if any (which this caller returns, and the cache keeps), or the error.
    fn fail<E: Clone + Send + Sync + 'static>(
        mut self,
        error: E,
        fallback: Option<Fallback<V>>,
    ) -> Result<V, E> {
        let (cache, hash) = (&*self.cache, self.hash);
        let _ = cache.shard(hash).write().end_load(hash, self.load.ticket());
        (self.registered, self.finished) = (false, true);
        let Some(Fallback { value, refresh }) = fallback else {
            cache.loads.fail(hash, &self.load, Arc::new(error.clone()), cache.expiry.clock.now());
            return Err(error);
        };
        let counts = &cache.loads.counts;
        counts.add(if refresh { REFRESH_FAILED } else { FAILED });
        counts.add(STALE_SERVED);
        cache.loads.forget(hash, &self.load);
        if Arc::strong_count(&self.load) == 1 {
            return Ok(value);
        }
        cache.loads.publish(&self.load, value);
        Ok(self.load.value().clone())
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

impl<C, K, V> Drop for Leader<C, K, V>
where
    C: Deref<Target = AdmissionCache<K, V>>,
    K: Hash + Eq,
    V: Clone,
{
    fn drop(&mut self) {
        if !self.finished && !crate::primitive::failed_model() {
            if self.registered {
                let _ = self.cache.shard(self.hash).write().end_load(self.hash, self.load.ticket());
            }
            self.cache.loads.abandon(self.hash, &self.load);
        }
    }
}
