//! Deliberately broken protocols, for the loom suite only.
//!
//! Each loom model in `tests/loom.rs` must fail when the protocol it checks is broken on
//! purpose: `.ci/run` builds the crate with `--cfg cuckoo_gate_broken="<name>"` and expects
//! the models named for that break to panic. Production code asks the constants below,
//! all `false` in a real build (so the compiler drops the broken paths), and the broken
//! steps that need more than a skipped check live here.

use crate::filter::{Frozen, Hop, Locked, Probe, Shape, Table};
use crate::primitive::{AtomicU64, Ordering};

/// A reader trusts its optimistic loads without re-checking the stripe stamps.
pub(crate) const SKIP_VALIDATION: bool = cfg!(cuckoo_gate_broken = "skip_validation");
/// A relocation marks its move on the stamp of another fingerprint class than its entry's,
/// the one that lookups of the moved key validate.
pub(crate) const STRAY_STAMP: bool = cfg!(cuckoo_gate_broken = "stray_stamp");
/// A relocation clears the source, unlocks, and only then writes the copy.
pub(crate) const SPLIT_MOVE: bool = cfg!(cuckoo_gate_broken = "split_move");
/// `insert_unique` checks and inserts under two separate lock holds.
pub(crate) const SPLIT_UNIQUE: bool = cfg!(cuckoo_gate_broken = "split_unique");
/// `insert_unique` looks into its key's second bucket before it takes the first bucket's
/// stripe, so a copy stored there meanwhile goes unseen.
pub(crate) const EARLY_SECOND_LOOK: bool = cfg!(cuckoo_gate_broken = "early_second_look");
/// A growable filter's reader does not check the table pointer after reading.
pub(crate) const SKIP_TABLE_CHECK: bool = cfg!(cuckoo_gate_broken = "skip_table_check");
/// A doubling copies the table without freezing it.
pub(crate) const SKIP_FREEZE: bool = cfg!(cuckoo_gate_broken = "skip_freeze");
/// A snapshot copies the table without freezing it.
pub(crate) const SNAPSHOT_UNFROZEN: bool = cfg!(cuckoo_gate_broken = "snapshot_unfrozen");
/// A remove skips the stripe lock (no stamp changes) and compacts the bucket.
pub(crate) const UNSTAMPED_REMOVE: bool = cfg!(cuckoo_gate_broken = "unstamped_remove");
/// Every thread that saw a gate generation fill rotates, not only the first.
pub(crate) const DOUBLE_ROTATION: bool = cfg!(cuckoo_gate_broken = "double_rotation");
/// A cache shard's reader goes in even while a writer holds the lock.
pub(crate) const READER_IGNORES_WRITER: bool = cfg!(cuckoo_gate_broken = "reader_ignores_writer");
/// A cache shard's reader drains the hits and misses counted in the lock's state without
/// taking the write lock.
pub(crate) const UNLOCKED_DRAIN: bool = cfg!(cuckoo_gate_broken = "unlocked_drain");
/// A cache load's waiter checks the load and registers its wake-up in two holds of the
/// load's lock, so the load can finish, waking nobody, in between.
pub(crate) const UNCHECKED_WAIT: bool = cfg!(cuckoo_gate_broken = "unchecked_wait");
/// A cache load whose leader failed closes without handing the load to a waiter or waking
/// any.
pub(crate) const FORGETFUL_HANDOFF: bool = cfg!(cuckoo_gate_broken = "forgetful_handoff");
/// A cache `remove` does not mark the key's load in flight, which then stores its value.
pub(crate) const REMOVE_IGNORES_LOAD: bool = cfg!(cuckoo_gate_broken = "remove_ignores_load");
/// A cache compute does not mark the key's load in flight, which then stores its value.
pub(crate) const COMPUTE_IGNORES_LOAD: bool = cfg!(cuckoo_gate_broken = "compute_ignores_load");
/// A cache compute reads the key's value and writes the new one in two lock holds.
pub(crate) const SPLIT_COMPUTE: bool = cfg!(cuckoo_gate_broken = "split_compute");
/// A cache load whose loader failed ends without waking its waiters.
pub(crate) const UNSHARED_FAILURE: bool = cfg!(cuckoo_gate_broken = "unshared_failure");
/// A cache insert does not mark the key's reload in flight, which then replaces its value.
pub(crate) const WRITE_IGNORES_RELOAD: bool = cfg!(cuckoo_gate_broken = "write_ignores_reload");
/// A cache insert stores its entry under the hash it computed before taking its shard's
/// lock, even when a restore replaced the hasher meanwhile.
pub(crate) const UNCHECKED_HASHER: bool = cfg!(cuckoo_gate_broken = "unchecked_hasher");

/// [`SPLIT_MOVE`]: moves `hop`'s entry to slot `free` of `to` (lane value `moved`) in two
/// lock holds, so a reader between them finds the entry in neither bucket.
pub(crate) fn split_move<S: Shape>(
    table: &Table<S>,
    locked: Locked<'_, S>,
    hop: &Hop,
    to: usize,
    free: usize,
    moved: u64,
) -> Result<(), Frozen> {
    let ext = locked.ext(hop.bucket, hop.lane);
    locked.take(hop.bucket, hop.lane);
    drop(locked);
    table.lock_pair(to, to)?.put(to, free, moved, ext);
    Ok(())
}

/// The guard and the two buckets as [`relock`] reads them again.
type Relocked<'a, S> = (Locked<'a, S>, <S as Shape>::Word, <S as Shape>::Word);

/// [`SPLIT_UNIQUE`]: lets go of the locks between `insert_unique`'s check and its insert,
/// and takes them again, with the buckets as they are now.
pub(crate) fn relock<'a, S: Shape>(
    table: &'a Table<S>,
    locked: Locked<'a, S>,
    i1: usize,
    i2: usize,
) -> Result<Relocked<'a, S>, Frozen> {
    drop(locked);
    let locked = table.lock_pair(i1, i2)?;
    let (b1, b2) = (locked.bucket(i1), locked.bucket(i2));
    Ok((locked, b1, b2))
}

/// [`SPLIT_UNIQUE`] on `insert_unique`'s fast path: lets go of the first bucket's stripe
/// after the check and takes it again, with the bucket's first empty slot as it is now.
pub(crate) fn relock_first<'a, S: Shape>(
    table: &'a Table<S>,
    locked: Locked<'a, S>,
    i1: usize,
) -> Result<(Locked<'a, S>, usize), Frozen> {
    drop(locked);
    let locked = table.lock_pair(i1, i1)?;
    let lane = table.lanes().empties(locked.bucket(i1)).lowest().unwrap_or(0);
    Ok((locked, lane))
}

/// [`UNSTAMPED_REMOVE`]: removes the key of `p` without the stripe lock, so no stamp
/// changes, and keeps the bucket compact by moving its last entry into the hole, clearing
/// it first. A reader between the two stores misses the moved key, and its validation
/// cannot notice.
pub(crate) fn remove_unstamped<S: Shape>(table: &Table<S>, p: Probe) -> bool {
    let lanes = table.lanes();
    let found = [(p.i1, p.v1), (p.i2, p.v2)].into_iter().find_map(|(bucket, value)| {
        lanes.matches(table.load_bucket(bucket), value).lowest().map(|lane| (bucket, lane))
    });
    let Some((bucket, lane)) = found else { return false };
    let contents = table.load_bucket(bucket);
    let last = (0..S::SLOTS).rev().find(|&l| lanes.lane(contents, l) != 0).unwrap_or(lane);
    let (moved, ext) = (lanes.lane(contents, last), table.load_ext(S::first_slot(bucket) + last));
    table.store_lane(bucket, last, 0);
    if last != lane {
        table.store_lane(bucket, lane, moved);
        table.store_ext(S::first_slot(bucket) + lane, ext);
    }
    table.stripe(bucket).add_items(-1);
    true
}

/// [`UNLOCKED_DRAIN`]: moves the hits and misses counted in the top two quarters of a shard
/// lock's `state` to `drained` and `drained_misses` with a load and separate updates, so
/// two readers draining at once both move the same counts.
pub(crate) fn unlocked_drain(state: &AtomicU64, drained: &AtomicU64, drained_misses: &AtomicU64) {
    let now = state.load(Ordering::Relaxed);
    let (hits, misses) = (now >> 48, now >> 32 & 0xFFFF);
    drained.fetch_add(hits, Ordering::Relaxed);
    drained_misses.fetch_add(misses, Ordering::Relaxed);
    state.fetch_sub(hits << 48 | misses << 32, Ordering::Relaxed);
}
