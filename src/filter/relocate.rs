//! Making room when both of a key's buckets are full: find a cuckoo path, then move.
//!
//! The search is a breadth-first walk over slots (libcuckoo's "BFS path search") that
//! reads buckets without locks and moves nothing. Its nodes are slots; a slot's children
//! are the slots of the bucket its entry could move to. It stops at the first entry whose
//! other bucket has a free slot, or when its node budget is spent. Breadth-first finds
//! the shortest path, so few stripes are locked afterwards.
//!
//! The path is then executed from its end backwards, one hop at a time: lock the two
//! stripes of the hop, check that the source slot still holds what the search saw and
//! that the destination still has a free slot, write the copy, clear the source, unlock.
//! Every stored fingerprint is at every instant in one of its two buckets, and a reader
//! whose window overlaps a hop sees a stamp change and retries. A stale hop ends the
//! attempt early; whatever was already moved stays valid, nothing is ever dropped.

use super::bucket::SLOTS;
use super::table::Table;

/// Search budget: slots examined per attempt (each costs one bucket read).
pub(crate) const SEARCH_BUDGET: usize = 2048;

/// One move of a path: the entry `value` in slot `lane` of `bucket` goes to its other bucket.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Hop {
    pub(crate) bucket: usize,
    pub(crate) lane: usize,
    pub(crate) value: u64,
}

#[derive(Clone, Copy)]
struct Node {
    hop: Hop,
    parent: Option<u32>,
}

/// A path that frees a slot in one of `roots`, ordered from a root outwards; empty if a
/// root already has a free slot. `None` if the budget runs out first.
pub(crate) fn find_path(table: &Table, roots: [usize; 2], budget: usize) -> Option<Vec<Hop>> {
    let lanes = table.lanes();
    let geometry = table.geometry();
    let mut nodes: Vec<Node> = Vec::with_capacity(64);
    for bucket in roots {
        let contents = table.load_bucket(bucket);
        if lanes.empties(contents).any() {
            return Some(Vec::new());
        }
        for lane in 0..SLOTS {
            let hop = Hop { bucket, lane, value: lanes.lane(contents, lane) };
            nodes.push(Node { hop, parent: None });
        }
    }
    let mut next = 0;
    while next < nodes.len() {
        let hop = nodes[next].hop;
        let (other, _) = geometry.other(hop.bucket, hop.value);
        let contents = table.load_bucket(other);
        if lanes.empties(contents).any() {
            return Some(path_to(&nodes, next));
        }
        if nodes.len() + SLOTS <= budget {
            for lane in 0..SLOTS {
                let child = Hop { bucket: other, lane, value: lanes.lane(contents, lane) };
                nodes.push(Node { hop: child, parent: Some(next as u32) });
            }
        }
        next += 1;
    }
    None
}

fn path_to(nodes: &[Node], mut at: usize) -> Vec<Hop> {
    let mut path = Vec::new();
    loop {
        path.push(nodes[at].hop);
        match nodes[at].parent {
            Some(parent) => at = parent as usize,
            None => break,
        }
    }
    path.reverse();
    path
}

/// Executes `path` from its end backwards. Returns whether every hop was made; on `false`
/// a concurrent writer changed a bucket on the path and the caller searches again.
pub(crate) fn execute(table: &Table, path: &[Hop]) -> bool {
    let lanes = table.lanes();
    for hop in path.iter().rev() {
        let (to, moved) = table.geometry().other(hop.bucket, hop.value);
        let locked = table.lock_pair(hop.bucket, to);
        if lanes.lane(locked.bucket(hop.bucket), hop.lane) != hop.value {
            return false;
        }
        let Some(free) = lanes.empties(locked.bucket(to)).lowest() else {
            return false;
        };
        #[cfg(not(cuckoo_gate_broken = "split_move"))]
        locked.relocate(hop.bucket, hop.lane, to, free, moved);
        #[cfg(cuckoo_gate_broken = "split_move")]
        {
            // Deliberately wrong (for the loom suite): clear the source, unlock, and only
            // then write the copy, so a reader can see the entry in neither bucket.
            locked.take(hop.bucket, hop.lane);
            drop(locked);
            let locked = table.lock_pair(to, to);
            locked.put(to, free, moved);
        }
    }
    true
}
