//! Making room when both of a key's buckets are full: find a cuckoo path, then move.
//!
//! The search is a breadth-first walk over slots (libcuckoo's "BFS path search") that
//! reads buckets without locks and moves nothing. Its nodes are slots; a slot's children
//! are the slots of the bucket its entry could move to. In the windowed layout an entry
//! may also move to the other slot of its own window (the one its offset names, which may
//! be a neighbour of the window the search read it through), as in linear probing. It
//! stops at the first entry whose other bucket has a free slot, or when its node budget is
//! spent. Breadth-first finds the shortest path, so few stripes are locked afterwards.
//!
//! The path is then executed from its end backwards, one hop at a time: lock the two
//! stripes of the hop, check that the source slot still holds what the search saw and
//! that the destination still has a free slot, write the copy, clear the source, unlock.
//! Every stored fingerprint is at every instant in one of its two buckets, and a reader
//! whose read overlaps a hop sees a stamp change and retries. A stale hop ends the
//! attempt early; whatever was already moved stays valid, nothing is ever dropped.
//!
//! Windows offer fewer moves per slot than buckets (up to 4 per window pair against 8 per
//! bucket pair), and neighbouring windows overlap, so near their load threshold the paths
//! are longer and the search meets the same window from several parents. In a windowed
//! table the search expands each window once and gets a larger budget.

use super::bucket::{Lanes, Shape};
use super::hash::MIX;
use super::stripe::Frozen;
use super::table::Table;
use crate::broken;
use crate::primitive::Ordering;

/// Search budget: slots examined per attempt (each costs one bucket read), and the
/// longest path searched. With 8 roots and 4 children per slot, a budget of 2048 is spent
/// by depth 5, so the depth bound matters only for windows, where a search near the load
/// threshold needs paths of up to a dozen hops. A `crowded` table (a full search failed,
/// and nothing was removed since: it is at its load threshold) searches with a sixteenth:
/// the paths that remain are short ones a removal or a lucky key leaves, and a refused
/// insert stays cheap.
fn budget<S: Shape>(crowded: bool) -> (usize, usize) {
    let (nodes, depth) = if S::WINDOWED { (16_384, MAX_PATH) } else { (2048, 8) };
    if crowded {
        (nodes / CROWDED_SHARE, depth)
    } else {
        (nodes, depth)
    }
}

/// The share of the budget a crowded table searches with.
const CROWDED_SHARE: usize = 16;

/// Longest path searched in any layout.
const MAX_PATH: usize = 16;

/// Entries of a windowed search's record of expanded windows (`2^12`, for the hash's top
/// 12 bits).
const EXPANDED: usize = 1 << 12;

/// One move of a path: the entry `value` in slot `lane` of `bucket` goes to a free slot of
/// bucket `to`, where its lane value is `moved` (plus the slot's offset, in a window).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Hop {
    pub(crate) bucket: usize,
    pub(crate) lane: usize,
    pub(crate) value: u64,
    pub(crate) to: usize,
    pub(crate) moved: u64,
}

/// A cuckoo path, ordered from a root bucket outwards. Fixed-size, so the common short
/// paths cost no allocation.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Path {
    hops: [Hop; MAX_PATH],
    len: usize,
}

impl Path {
    const EMPTY: Path =
        Path { hops: [Hop { bucket: 0, lane: 0, value: 0, to: 0, moved: 0 }; MAX_PATH], len: 0 };

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

/// The moves open to the entry in lane `lane` of `bucket`, whose contents are `contents`:
/// to its other bucket, and in a window also to the other slot of its own window, when
/// that window is not `bucket` (the search read it through a neighbour). The first
/// `count` of the returned moves are open.
#[inline]
fn moves<S: Shape>(table: &Table<S>, bucket: usize, contents: S::Word, lane: usize) -> ([Hop; 2], usize) {
    let value = table.lanes().lane(contents, lane);
    let geometry = table.geometry();
    let (to, moved) = geometry.other_as(bucket, lane, value, S::WINDOWED);
    let other = Hop { bucket, lane, value, to, moved };
    if S::WINDOWED {
        let (to, moved) = geometry.own(bucket, lane, value);
        if to != bucket {
            return ([other, Hop { to, moved, ..other }], 2);
        }
    }
    ([other, other], 1)
}

/// A path that frees a slot in one of `roots`; empty if a root already has a free slot.
/// `None` if the budget runs out first.
///
/// One-hop paths (the vast majority below 95% load) are found before any allocation; the
/// breadth-first queue is built only when they all fail.
pub(crate) fn find_path<S: Shape>(table: &Table<S>, roots: [usize; 2]) -> Option<Path> {
    let crowded = table.crowded.load(Ordering::Relaxed);
    let (budget, max_path) = budget::<S>(crowded);
    let lanes = table.lanes();
    let contents = roots.map(|bucket| table.load_bucket(bucket));
    if contents.iter().any(|&c| lanes.empties(c).any()) {
        return Some(Path::EMPTY);
    }
    for (&bucket, &contents) in roots.iter().zip(&contents) {
        for lane in 0..S::SLOTS {
            let (hops, count) = moves(table, bucket, contents, lane);
            for &hop in &hops[..count] {
                // If this move is the path, it writes the side bits of its destination:
                // their cache miss then overlaps this read's.
                table.prefetch_ext(hop.to);
                if lanes.empties(table.load_bucket(hop.to)).any() {
                    let mut path = Path::EMPTY;
                    path.hops[0] = hop;
                    path.len = 1;
                    return Some(path);
                }
            }
        }
    }

    let mut nodes: Vec<Node> = Vec::with_capacity(256.min(budget));
    for (&bucket, &contents) in roots.iter().zip(&contents) {
        for lane in 0..S::SLOTS {
            let (hops, count) = moves(table, bucket, contents, lane);
            nodes.extend(hops[..count].iter().map(|&hop| Node { hop, parent: None, depth: 1 }));
        }
    }
    let mut next = 0;
    // Windows expanded so far, in a direct-mapped record: a window whose entry another
    // overwrote may be expanded again, which costs budget, never a path.
    let mut expanded = if S::WINDOWED { vec![usize::MAX; EXPANDED] } else { Vec::new() };
    while next < nodes.len() {
        let Node { hop, depth, .. } = nodes[next];
        let contents = table.load_bucket(hop.to);
        if lanes.empties(contents).any() {
            return Some(path_to(&nodes, next));
        }
        let fresh = !S::WINDOWED || {
            let seen = &mut expanded[((hop.to as u64).wrapping_mul(MIX) >> 52) as usize];
            std::mem::replace(seen, hop.to) != hop.to
        };
        if fresh && nodes.len() + 2 * S::SLOTS <= budget && (depth as usize) < max_path {
            for lane in 0..S::SLOTS {
                let (children, count) = moves(table, hop.to, contents, lane);
                for &child in &children[..count] {
                    // Start loading the bucket this child would move to, which the search
                    // reads when the child's turn comes.
                    table.prefetch_bucket(child.to);
                    nodes.push(Node { hop: child, parent: Some(next as u32), depth: depth + 1 });
                }
            }
        }
        next += 1;
    }
    if !crowded {
        table.crowded.store(true, Ordering::Relaxed);
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
pub(crate) fn execute<S: Shape>(table: &Table<S>, path: &[Hop]) -> Result<bool, Frozen> {
    let lanes = table.lanes();
    for hop in path {
        table.prefetch_ext(hop.bucket);
        table.prefetch_ext(hop.to);
    }
    for hop in path.iter().rev() {
        let (to, moved) = (hop.to, hop.moved);
        let locked = table.lock_pair(hop.bucket, to)?;
        if lanes.lane(locked.bucket(hop.bucket), hop.lane) != hop.value {
            return Ok(false);
        }
        let Some(free) = lanes.empties(locked.bucket(to)).lowest() else {
            return Ok(false);
        };
        let moved = moved | Lanes::<S>::offset(free);
        if broken::SPLIT_MOVE {
            broken::split_move(table, locked, hop, to, free, moved)?;
        } else {
            locked.relocate(hop.bucket, hop.lane, to, free, moved);
        }
    }
    Ok(true)
}
