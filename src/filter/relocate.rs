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
//! whose read overlaps a hop sees a stamp change and retries. A stale hop ends the
//! attempt early; whatever was already moved stays valid, nothing is ever dropped.

use super::bucket::{Word, SLOTS};
use super::stripe::Frozen;
use super::table::Table;
use crate::broken;

/// Search budget: slots examined per attempt (each costs one bucket read).
pub(crate) const SEARCH_BUDGET: usize = 2048;

/// Longest path searched. With 8 roots and 4 children per slot, a budget of 2048 is spent
/// by depth 5, so this bound only matters for larger budgets.
const MAX_PATH: usize = 8;

/// One move of a path: the entry `value` in slot `lane` of `bucket` goes to its other bucket.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Hop {
    pub(crate) bucket: usize,
    pub(crate) lane: usize,
    pub(crate) value: u64,
}

/// A cuckoo path, ordered from a root bucket outwards. Fixed-size, so the common short
/// paths cost no allocation.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Path {
    hops: [Hop; MAX_PATH],
    len: usize,
}

impl Path {
    const EMPTY: Path = Path { hops: [Hop { bucket: 0, lane: 0, value: 0 }; MAX_PATH], len: 0 };

    pub(crate) fn hops(&self) -> &[Hop] {
        &self.hops[..self.len]
    }
}

#[derive(Clone, Copy)]
struct Node {
    hop: Hop,
    parent: Option<u32>,
    depth: u8,
}

/// A path that frees a slot in one of `roots`; empty if a root already has a free slot.
/// `None` if the budget runs out first.
///
/// One-hop paths (the vast majority below 95% load) are found before any allocation; the
/// breadth-first queue is built only when they all fail.
pub(crate) fn find_path<W: Word>(table: &Table<W>, roots: [usize; 2], budget: usize) -> Option<Path> {
    let lanes = table.lanes();
    let geometry = table.geometry();
    let contents = roots.map(|bucket| table.load_bucket(bucket));
    if contents.iter().any(|&c| lanes.empties(c).any()) {
        return Some(Path::EMPTY);
    }
    for (&bucket, &contents) in roots.iter().zip(&contents) {
        for lane in 0..SLOTS {
            let hop = Hop { bucket, lane, value: lanes.lane(contents, lane) };
            let (other, _) = geometry.other(bucket, hop.value);
            if lanes.empties(table.load_bucket(other)).any() {
                let mut path = Path::EMPTY;
                path.hops[0] = hop;
                path.len = 1;
                return Some(path);
            }
        }
    }

    let mut nodes: Vec<Node> = Vec::with_capacity(256.min(budget));
    for (&bucket, &contents) in roots.iter().zip(&contents) {
        for lane in 0..SLOTS {
            let hop = Hop { bucket, lane, value: lanes.lane(contents, lane) };
            nodes.push(Node { hop, parent: None, depth: 1 });
        }
    }
    let mut next = 0;
    while next < nodes.len() {
        let Node { hop, depth, .. } = nodes[next];
        let (other, _) = geometry.other(hop.bucket, hop.value);
        let contents = table.load_bucket(other);
        if lanes.empties(contents).any() {
            return Some(path_to(&nodes, next));
        }
        if nodes.len() + SLOTS <= budget && (depth as usize) < MAX_PATH {
            for lane in 0..SLOTS {
                let child = Hop { bucket: other, lane, value: lanes.lane(contents, lane) };
                // Start loading the bucket this child would move to, which the search
                // reads when the child's turn comes.
                table.prefetch_bucket(geometry.other(other, child.value).0);
                nodes.push(Node { hop: child, parent: Some(next as u32), depth: depth + 1 });
            }
        }
        next += 1;
    }
    None
}

fn path_to(nodes: &[Node], mut at: usize) -> Path {
    let mut path = Path::EMPTY;
    path.len = nodes[at].depth as usize;
    for slot in (0..path.len).rev() {
        path.hops[slot] = nodes[at].hop;
        at = nodes[at].parent.map_or(0, |p| p as usize);
    }
    path
}

/// Executes `path` from its end backwards. Returns whether every hop was made; on `false`
/// a concurrent writer changed a bucket on the path and the caller searches again.
/// `Err(Frozen)` if the table is frozen (the hops made so far stay valid).
pub(crate) fn execute<W: Word>(table: &Table<W>, path: &Path) -> Result<bool, Frozen> {
    let lanes = table.lanes();
    for hop in path.hops() {
        table.prefetch_ext(hop.bucket);
        table.prefetch_ext(table.geometry().other(hop.bucket, hop.value).0);
    }
    for hop in path.hops().iter().rev() {
        let (to, moved) = table.geometry().other(hop.bucket, hop.value);
        let locked = table.lock_pair(hop.bucket, to)?;
        if lanes.lane(locked.bucket(hop.bucket), hop.lane) != hop.value {
            return Ok(false);
        }
        let Some(free) = lanes.empties(locked.bucket(to)).lowest() else {
            return Ok(false);
        };
        if broken::SPLIT_MOVE {
            broken::split_move(table, locked, hop, to, free, moved)?;
        } else {
            locked.relocate(hop.bucket, hop.lane, to, free, moved);
        }
    }
    Ok(true)
}
