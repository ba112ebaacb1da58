//! Doubling the table when an insert finds no room.
//!
//! When an insert finds no room, the filter doubles (up to its `max_capacity`) by *split
//! doubling* (see `hash.rs`): the new table has twice the buckets, every entry of old
//! bucket `j` goes to bucket `2j` or `2j + 1` according to one of the extension bits it
//! keeps (in a side array only writers read), and keeps the others. Lookups still probe
//! two buckets of a table as compact as a fixed-size filter's, and the false-positive rate
//! never exceeds the configured one, at one side bit per slot per doubling still allowed.
//!
//! Why not the alternatives (by arithmetic): a chain of sub-filters, each twice the last
//! with a one bit longer fingerprint, probes every level, so after four doublings a
//! negative lookup reads ten buckets instead of two, and it holds 1 + 2 + 4 + 8 + 16 = 31
//! units of table for 16 units of items (about 1.9x the memory of a right-sized filter,
//! against 1.3x here at ε = 0.1%). Moving a fingerprint bit into the index instead
//! (InfiniFilter) keeps the slot narrow but doubles the false-positive rate at every
//! doubling (16x after four, where here it stays at ε).
//!
//! The protocol, with one thread growing at a time under the growth lock:
//!
//! 1. allocate the doubled table (a refusal leaves the filter unchanged);
//! 2. freeze the old table stripe by stripe: lock each (waiting for its writer) and unlock
//!    it with the frozen bit set. Writers that meet a frozen stripe drop what they hold,
//!    wait for the growth lock and start over on the new table; readers keep reading the
//!    old table, which never changes again and holds every key;
//! 3. split the frozen table into the new one, which no other thread can see yet;
//! 4. publish the new table (a `Release` swap) and retire the old one (kept allocated,
//!    its pages released; lookups that read it re-check the pointer and read again).
//!
//! A key inserted before the freeze is in the old table and so in the new one; a key
//! inserted after it went into the new table, after its publication. A lookup that loaded
//! the old pointer answers from the old table's state at some point during its run, as a
//! lookup must.

use super::stripe::Frozen;
use super::{builder, table, AnyTable, CuckooFilter};
use crate::broken;
use crate::error::InsertError;

impl CuckooFilter {
    /// Runs a write on the current table, repeating it on the doubled table if it met a
    /// frozen stripe (a write that meets one has changed nothing the key depends on).
    pub(super) fn write<R>(&self, mut op: impl FnMut(&AnyTable) -> Result<R, Frozen>) -> R {
        loop {
            match self.current.with(&mut op) {
                Ok(result) => return result,
                Err(Frozen) => self.wait_for_growth(),
            }
        }
    }

    /// Waits until the doubling in progress is published. A frozen stripe is seen only
    /// after the grower took the growth lock, and the grower publishes before releasing it.
    pub(super) fn wait_for_growth(&self) {
        drop(self.growth.lock());
    }

    /// Doubles the table if it is still at `level` (another thread may have doubled it
    /// since this thread found it full).
    pub(super) fn grow(&self, level: u32) -> Result<(), InsertError> {
        let _growing = self.growth.lock();
        self.current.replace(|old| {
            let geometry = *old.geometry();
            if geometry.level() != level {
                return Ok(None);
            }
            if geometry.doublings_left() == 0 {
                return Err(InsertError::MaxCapacityReached { capacity: geometry.slots() });
            }
            let stripes = self.stripes.unwrap_or_else(|| builder::default_stripes(geometry.doubled()));
            let oom = || InsertError::OutOfMemory {
                bytes: table::table_bytes(geometry.doubled(), stripes).unwrap_or(usize::MAX),
            };
            // Allocated before the old table is frozen, so that a refusal leaves the
            // filter as it was.
            let new = AnyTable::new(geometry.doubled(), stripes).map_err(|()| oom())?;
            with_table!(old, t => {
                if !broken::SKIP_FREEZE {
                    t.freeze();
                }
                with_table!(&new, n => t.split_into(n));
            });
            Ok(Some(new))
        })
    }
}
