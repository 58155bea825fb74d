//! A pool's hosts by query order (`seq`): a table indexed by `seq`, so that
//! finding a host is one array access and one pointer, where a
//! `BTreeMap<u64, Host>` walked five levels of nodes on a pool of 100,000
//! hosts — on a random host (randomized BreadthFirst, every logoff) each
//! level a cache miss. Iteration is in query order, as before.
//!
//! Each slot also holds the slots of its host's sessions (so that a
//! heartbeat's list is reconciled in O(reported + the host's sessions),
//! never O(pool)), the first [`INLINE_SESSIONS`] of them inline: a slot is
//! one cache line, and a placement or a logoff on a host with that many
//! sessions or fewer reads its host pointer and its sessions in that one
//! line, with no allocation. Before, the lists were a `Vec` per host in a
//! table of their own: on a random host (randomized BreadthFirst, every
//! logoff) two more cache misses, and their growth and shrinking churned
//! the allocator's small blocks with cold memory.
//!
//! Memory: one slot (64 bytes) per registration the pool has made (a
//! removed host's slot stays empty; sequences are never reused), plus the
//! hosts, plus a heap list for a host with more than [`INLINE_SESSIONS`]
//! sessions. The `LoadIndex` min-trees and the open-host bitmaps are
//! indexed by `seq` the same way.

use std::ops::Index;

use smallvec::SmallVec;

use super::session_table::Slot;
use crate::model::Host;

/// Session slots kept in a host's table slot before they spill to the
/// heap: what fills its 64-byte line.
pub(super) const INLINE_SESSIONS: usize = 10;

/// A host and its sessions' slots.
#[derive(Clone, Debug, Default)]
#[repr(C, align(64))]
struct Entry {
    /// The slots of the sessions on this `seq`, in the order they were
    /// indexed.
    sessions: SmallVec<[Slot; INLINE_SESSIONS]>,
    host: Option<Host>,
}

#[derive(Clone, Debug, Default)]
pub(super) struct HostTable {
    /// `slots[seq]`: the host registered with that sequence, while it is in
    /// the pool, and its sessions.
    slots: Vec<Entry>,
    len: usize,
}

impl HostTable {
    pub(super) fn len(&self) -> usize {
        self.len
    }

    pub(super) fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub(super) fn get(&self, seq: &u64) -> Option<&Host> {
        self.slots.get(*seq as usize)?.host.as_ref()
    }

    pub(super) fn get_mut(&mut self, seq: &u64) -> Option<&mut Host> {
        self.slots.get_mut(*seq as usize)?.host.as_mut()
    }

    fn entry_mut(&mut self, seq: u64) -> &mut Entry {
        let i = seq as usize;
        if i >= self.slots.len() {
            self.slots.resize_with(i + 1, Entry::default);
        }
        &mut self.slots[i]
    }

    /// Puts `host` at `seq`, answering the host it replaces. The sessions
    /// recorded at `seq` stay.
    pub(super) fn insert(&mut self, seq: u64, host: Host) -> Option<Host> {
        let old = self.entry_mut(seq).host.replace(host);
        if old.is_none() {
            self.len += 1;
        }
        old
    }

    /// Takes the host at `seq` out; its sessions' slots stay until
    /// [`HostTable::forget_sessions`].
    pub(super) fn remove(&mut self, seq: &u64) -> Option<Host> {
        let old = self.slots.get_mut(*seq as usize)?.host.take();
        if old.is_some() {
            self.len -= 1;
        }
        old
    }

    /// The hosts in query order.
    pub(super) fn values(&self) -> impl Iterator<Item = &Host> {
        self.slots.iter().filter_map(|s| s.host.as_ref())
    }

    /// The hosts' sequences in query order.
    pub(super) fn keys(&self) -> impl Iterator<Item = u64> + '_ {
        self.values().map(|h| h.seq)
    }

    /// The slots of the sessions on `seq`.
    pub(super) fn sessions(&self, seq: u64) -> &[Slot] {
        self.slots
            .get(seq as usize)
            .map_or(&[], |e| e.sessions.as_slice())
    }

    /// Records a session on `seq`.
    pub(super) fn add_session(&mut self, seq: u64, slot: Slot) {
        self.entry_mut(seq).sessions.push(slot);
    }

    /// Forgets a session on `seq`, if it is recorded there.
    pub(super) fn remove_session(&mut self, seq: u64, slot: Slot) {
        if let Some(e) = self.slots.get_mut(seq as usize)
            && let Some(at) = e.sessions.iter().position(|&s| s == slot)
        {
            e.sessions.remove(at);
        }
    }

    /// Frees what `seq`'s session list holds (its host is removed and its
    /// sessions ended; the `seq` is never used again).
    pub(super) fn forget_sessions(&mut self, seq: u64) {
        if let Some(e) = self.slots.get_mut(seq as usize) {
            e.sessions = SmallVec::new();
        }
    }
}

impl Index<&u64> for HostTable {
    type Output = Host;

    fn index(&self, seq: &u64) -> &Host {
        self.get(seq).expect("host table: no host at this seq")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_slot_is_one_cache_line() {
        assert_eq!(std::mem::align_of::<Entry>(), 64);
    }
}
