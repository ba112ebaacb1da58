//! An exact LRU list: a hash map from key to slot, and a doubly linked list threaded
//! through a slab of slots by index. `get`, `insert`, `remove` and eviction are O(1), and
//! entries are never allocated one by one.

use std::collections::HashMap;
use std::hash::Hash;

const NIL: u32 = u32::MAX;

struct Slot<K, V> {
    key: K,
    value: V,
    /// Toward the most recently used end.
    prev: u32,
    /// Toward the least recently used end.
    next: u32,
}

/// A bounded LRU list. Not thread-safe: a shard wraps it in a lock.
pub(crate) struct Lru<K, V> {
    map: HashMap<K, u32, ahash::RandomState>,
    /// `None` for a free slot (listed in `free`).
    slots: Vec<Option<Slot<K, V>>>,
    free: Vec<u32>,
    /// Most recently used.
    head: u32,
    /// Least recently used.
    tail: u32,
    capacity: usize,
}

impl<K: Hash + Eq + Clone, V> Lru<K, V> {
    /// An empty list holding at most `capacity` entries (`capacity < u32::MAX`).
    pub(crate) fn new(capacity: usize) -> Self {
        debug_assert!(capacity < NIL as usize);
        Lru {
            map: HashMap::with_capacity_and_hasher(capacity.min(1 << 16), ahash::RandomState::new()),
            slots: Vec::new(),
            free: Vec::new(),
            head: NIL,
            tail: NIL,
            capacity,
        }
    }

    pub(crate) fn len(&self) -> usize {
        self.map.len()
    }

    pub(crate) fn is_full(&self) -> bool {
        self.map.len() >= self.capacity
    }

    fn slot(&mut self, index: u32) -> &mut Slot<K, V> {
        self.slots[index as usize].as_mut().expect("linked slot is occupied")
    }

    /// The value of `key`, made most recently used.
    pub(crate) fn get(&mut self, key: &K) -> Option<&V> {
        let index = *self.map.get(key)?;
        self.unlink(index);
        self.push_front(index);
        Some(&self.slot(index).value)
    }

    /// Replaces the value of a present `key` (making it most recently used); `Err(value)`
    /// if it is absent.
    pub(crate) fn update(&mut self, key: &K, value: V) -> Result<(), V> {
        let Some(&index) = self.map.get(key) else { return Err(value) };
        self.unlink(index);
        self.push_front(index);
        self.slot(index).value = value;
        Ok(())
    }

    /// Inserts an absent `key` as most recently used, first evicting the least recently
    /// used entry if the list is full; returns the evicted entry. With capacity 0 the new
    /// entry itself is returned.
    pub(crate) fn insert(&mut self, key: K, value: V) -> Option<(K, V)> {
        debug_assert!(!self.map.contains_key(&key));
        if self.capacity == 0 {
            return Some((key, value));
        }
        let evicted = if self.is_full() { self.pop_lru() } else { None };
        let slot = Some(Slot { key: key.clone(), value, prev: NIL, next: NIL });
        let index = match self.free.pop() {
            Some(index) => {
                self.slots[index as usize] = slot;
                index
            }
            None => {
                self.slots.push(slot);
                (self.slots.len() - 1) as u32
            }
        };
        self.map.insert(key, index);
        self.push_front(index);
        evicted
    }

    /// Removes `key`, returning its value.
    pub(crate) fn remove(&mut self, key: &K) -> Option<V> {
        let index = self.map.remove(key)?;
        Some(self.release(index).1)
    }

    /// Removes and returns the least recently used entry.
    pub(crate) fn pop_lru(&mut self) -> Option<(K, V)> {
        if self.tail == NIL {
            return None;
        }
        let (key, value) = self.release(self.tail);
        self.map.remove(&key);
        Some((key, value))
    }

    /// Unlinks slot `index` and frees it, returning its contents.
    fn release(&mut self, index: u32) -> (K, V) {
        self.unlink(index);
        self.free.push(index);
        let slot = self.slots[index as usize].take().expect("linked slot is occupied");
        (slot.key, slot.value)
    }

    fn unlink(&mut self, index: u32) {
        let (prev, next) = {
            let slot = self.slot(index);
            (slot.prev, slot.next)
        };
        match prev {
            NIL => self.head = next,
            p => self.slot(p).next = next,
        }
        match next {
            NIL => self.tail = prev,
            n => self.slot(n).prev = prev,
        }
    }

    fn push_front(&mut self, index: u32) {
        let old_head = self.head;
        {
            let slot = self.slot(index);
            slot.prev = NIL;
            slot.next = old_head;
        }
        match old_head {
            NIL => self.tail = index,
            h => self.slot(h).prev = index,
        }
        self.head = index;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::VecDeque;

    proptest! {
        /// Against a textbook LRU kept as a queue of keys, most recent at the front.
        #[test]
        fn matches_a_textbook_lru(capacity in 0usize..8, ops in prop::collection::vec((0u8..3, 0u8..12), 0..300)) {
            let mut lru = Lru::new(capacity);
            let mut model: VecDeque<(u8, u32)> = VecDeque::new();
            for (i, (op, key)) in ops.into_iter().enumerate() {
                let value = i as u32;
                match op {
                    0 => {
                        let expect = model.iter().position(|&(k, _)| k == key).map(|p| {
                            let e = model.remove(p).unwrap();
                            model.push_front(e);
                            e.1
                        });
                        prop_assert_eq!(lru.get(&key).copied(), expect);
                    }
                    1 => {
                        if let Some(p) = model.iter().position(|&(k, _)| k == key) {
                            model.remove(p);
                            model.push_front((key, value));
                            prop_assert!(lru.update(&key, value).is_ok());
                        } else {
                            let evicted = lru.insert(key, value);
                            model.push_front((key, value));
                            let expect = if model.len() > capacity { model.pop_back() } else { None };
                            prop_assert_eq!(evicted, expect);
                        }
                    }
                    _ => {
                        let expect = model.iter().position(|&(k, _)| k == key).map(|p| model.remove(p).unwrap().1);
                        prop_assert_eq!(lru.remove(&key), expect);
                    }
                }
                prop_assert_eq!(lru.len(), model.len());
            }
        }
    }
}
