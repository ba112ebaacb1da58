//! A cache's (and its gate's) hasher, which a restore replaces with the saved cache's.
//!
//! Every operation hashes its key once, and the hash stands for the key everywhere: the
//! shard, the shard's table, the gate and the ghosts. A restore that hashes as the saved
//! cache did can therefore put each entry back in its own shard and take over the gate's
//! and the ghosts' filters, which remember hashes, not keys. So the hasher is behind an
//! atomic pointer that a restore swaps.
//!
//! The protocol. A hasher replaced stays allocated while the cache lives (a reader may
//! still hash with it), so a pointer once loaded is always safe to follow. The pointer is
//! swapped only while every shard's write lock is held, and every write that stores an
//! entry checks, under its shard's lock, that the hasher it hashed by is still the
//! current one: a write hashed by the old hasher and locked after the swap hashes again
//! (a load's store is dropped, as a clear drops it). A read hashed by the old hasher looks
//! in the wrong place and misses, as it would have just before the restore. The cost on
//! the hit path is one load of the pointer.
#![allow(unsafe_code)]

use std::hash::Hash;
use std::ptr::NonNull;

use crate::filter::seeded_hasher;
use crate::primitive::{AtomicPtr, Mutex, Ordering};

/// One hasher: the seed it is derived from, and ahash's keys.
#[derive(Debug)]
pub(crate) struct Keys {
    seed: u64,
    hasher: ahash::RandomState,
}

impl Keys {
    /// The seed this hasher is derived from (see [`seeded_hasher`]).
    pub(crate) fn seed(&self) -> u64 {
        self.seed
    }

    /// The hash of `key`.
    #[inline(always)]
    pub(crate) fn hash<T: Hash + ?Sized>(&self, key: &T) -> u64 {
        self.hasher.hash_one(key)
    }
}

/// A replaced hasher (allocated by `Box::into_raw`, freed by [`Hashing`]'s drop only).
struct Owned(NonNull<Keys>);

// SAFETY: `Owned` is an owning pointer to a `Keys`, which is `Send + Sync`; it is only
// dereferenced through `Hashing`, which hands out shared references while it lives.
unsafe impl Send for Owned {}

/// The current hasher, and those it replaced.
pub(crate) struct Hashing {
    current: AtomicPtr<Keys>,
    /// Every hasher this cache has had, the current one included: freed with the cache.
    all: Mutex<Vec<Owned>>,
}

impl Hashing {
    /// Hashing by `seed`.
    pub(crate) fn new(seed: u64) -> Self {
        let keys = Self::allocate(seed);
        Hashing { current: AtomicPtr::new(keys.0.as_ptr()), all: Mutex::new(vec![keys]) }
    }

    fn allocate(seed: u64) -> Owned {
        let keys = Box::new(Keys { seed, hasher: seeded_hasher(seed) });
        Owned(NonNull::from(Box::leak(keys)))
    }

    /// The current hasher. A write keeps it, to check under its shard's lock that it is
    /// still current ([`is_current`](Self::is_current)).
    #[inline(always)]
    pub(crate) fn keys(&self) -> &Keys {
        // SAFETY: the pointer is never null (set from a leaked `Box` in `new` and
        // `replace`), and no hasher is freed before `self` is dropped, which cannot happen
        // while `&self` is borrowed.
        unsafe { &*self.current.load(Ordering::Acquire) }
    }

    /// The hash of `key` by the current hasher.
    #[inline(always)]
    pub(crate) fn hash<T: Hash + ?Sized>(&self, key: &T) -> u64 {
        self.keys().hash(key)
    }

    /// Whether `keys` is the current hasher. Exact only under a shard's lock: the hasher is
    /// replaced under every shard's write lock.
    #[inline(always)]
    pub(crate) fn is_current(&self, keys: &Keys) -> bool {
        std::ptr::eq(self.current.load(Ordering::Relaxed), keys)
    }

    #[cfg(feature = "serde")]
    /// Hashes by `seed` from now on. The caller holds every shard's write lock, and
    /// empties the shards before it releases them.
    pub(crate) fn replace(&self, seed: u64) {
        if self.keys().seed == seed {
            return;
        }
        let mut all = self.all.lock();
        let keys = Self::allocate(seed);
        self.current.store(keys.0.as_ptr(), Ordering::Release);
        all.push(keys);
    }
}

impl std::fmt::Debug for Hashing {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Not the seed: it is what keeps keys crafted to collide from colliding.
        f.debug_struct("Hashing").finish_non_exhaustive()
    }
}

impl Drop for Hashing {
    fn drop(&mut self) {
        for Owned(keys) in self.all.lock().drain(..) {
            // SAFETY: each was leaked from a `Box` by `allocate`, is in `all` once, and no
            // reference to it outlives `self`.
            drop(unsafe { Box::from_raw(keys.as_ptr()) });
        }
    }
}

#[cfg(all(test, feature = "serde", not(cuckoo_gate_loom)))]
mod tests {
    use super::*;

    #[test]
    fn a_replaced_hasher_stays_readable_and_is_no_longer_current() {
        let hashing = Hashing::new(1);
        let old = hashing.keys();
        let before = old.hash(&42u64);
        hashing.replace(2);
        assert!(!hashing.is_current(old));
        assert_eq!(old.hash(&42u64), before);
        assert_eq!(hashing.keys().seed(), 2);
        assert_eq!(hashing.hash(&42u64), seeded_hasher(2).hash_one(42u64));
        hashing.replace(2);
        assert!(hashing.is_current(hashing.keys()));
    }
}
