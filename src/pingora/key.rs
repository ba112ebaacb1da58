//! The identity of an entry the eviction manager tracks, in a form this crate can save.
//!
//! Pingora's `CacheEntryKey` serializes untagged (a key alone, or a key and an id, told
//! apart by trying each shape), which a self-describing format such as MessagePack reads
//! back but postcard, which the cache's save uses, cannot. [`Identity`] holds the same
//! fields in a plain struct, and converts both ways without loss.

use pingora_cache::eviction::{CacheEntryId, CacheEntryKey, CacheEntryKeyRef};
use pingora_cache::key::{CompactCacheKey, HashBinary};
use serde::{Deserialize, Serialize};

/// A `CacheEntryKey`'s fields: equal exactly when the entries are (a key-only identity
/// never equals an identified one).
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub(crate) struct Identity {
    primary: HashBinary,
    variance: Option<HashBinary>,
    user_tag: Box<str>,
    id: Option<u64>,
}

impl From<CacheEntryKeyRef<'_>> for Identity {
    fn from(entry: CacheEntryKeyRef<'_>) -> Self {
        let key = entry.key();
        Identity {
            primary: key.primary,
            variance: key.variance.as_deref().copied(),
            user_tag: key.user_tag.clone(),
            id: entry.entry_id().map(CacheEntryId::get),
        }
    }
}

impl From<&CacheEntryKey> for Identity {
    fn from(entry: &CacheEntryKey) -> Self {
        CacheEntryKeyRef::from(entry).into()
    }
}

impl From<Identity> for CacheEntryKey {
    fn from(identity: Identity) -> Self {
        let key = CompactCacheKey {
            primary: identity.primary,
            variance: identity.variance.map(Box::new),
            user_tag: identity.user_tag,
        };
        CacheEntryKey::from_entry_id(key, identity.id.map(CacheEntryId::new))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pingora_cache::CacheKey;

    #[test]
    fn converts_both_ways_and_through_postcard() {
        let mut varied = CacheKey::new("/a", "tag");
        varied.set_variance_key([7; 16]);
        for key in [CacheKey::new("/a", "").to_compact(), varied.to_compact()] {
            for entry in
                [CacheEntryKey::key_only(key.clone()), CacheEntryKey::identified(key, CacheEntryId::new(9))]
            {
                let identity = Identity::from(&entry);
                let bytes = postcard::to_stdvec(&identity).unwrap();
                let back: Identity = postcard::from_bytes(&bytes).unwrap();
                assert_eq!(CacheEntryKey::from(back), entry);
            }
        }
    }
}
