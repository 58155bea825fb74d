//! A pool's hosts by query order (`seq`): a table indexed by `seq`, so that
//! finding a host is one array access and one pointer, where a
//! `BTreeMap<u64, Host>` walked five levels of nodes on a pool of 100,000
//! hosts — on a random host (randomized BreadthFirst, every logoff) each
//! level a cache miss. Iteration is in query order, as before.
//!
//! Memory: one pointer per registration the pool has made (a removed
//! host's slot stays empty; sequences are never reused), plus the hosts.
//! The `LoadIndex` min-trees and the open-host bitmaps are indexed by
//! `seq` the same way.

use std::ops::Index;

use crate::model::Host;

#[derive(Clone, Debug, Default)]
pub(super) struct HostTable {
    /// `slots[seq]`: the host registered with that sequence, while it is in
    /// the pool. Boxed so that an empty slot costs a pointer, not a host.
    slots: Vec<Option<Box<Host>>>,
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
        self.slots.get(*seq as usize)?.as_deref()
    }

    pub(super) fn get_mut(&mut self, seq: &u64) -> Option<&mut Host> {
        self.slots.get_mut(*seq as usize)?.as_deref_mut()
    }

    /// Puts `host` at `seq`, answering the host it replaces.
    pub(super) fn insert(&mut self, seq: u64, host: Host) -> Option<Host> {
        let i = seq as usize;
        if i >= self.slots.len() {
            self.slots.resize_with(i + 1, || None);
        }
        let old = self.slots[i].replace(Box::new(host)).map(|b| *b);
        if old.is_none() {
            self.len += 1;
        }
        old
    }

    pub(super) fn remove(&mut self, seq: &u64) -> Option<Host> {
        let old = self.slots.get_mut(*seq as usize)?.take().map(|b| *b);
        if old.is_some() {
            self.len -= 1;
        }
        old
    }

    /// The hosts in query order.
    pub(super) fn values(&self) -> impl Iterator<Item = &Host> {
        self.slots.iter().filter_map(|s| s.as_deref())
    }

    /// The hosts' sequences in query order.
    pub(super) fn keys(&self) -> impl Iterator<Item = u64> + '_ {
        self.values().map(|h| h.seq)
    }
}

impl Index<&u64> for HostTable {
    type Output = Host;

    fn index(&self, seq: &u64) -> &Host {
        self.get(seq).expect("host table: no host at this seq")
    }
}
