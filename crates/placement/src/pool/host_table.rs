//! A pool's hosts by query order (`seq`), in a two-level table: `seq / 64`
//! picks a page of 64 entries, `seq % 64` the entry, and each entry holds
//! the host itself and the slots of its sessions. The array of pages is
//! small (8 bytes per 64 registrations: 12.5 KiB at 100,000 hosts) and
//! stays in cache, so finding a host costs the one cache miss of its
//! entry, where a `BTreeMap<u64, Host>` walked five levels of nodes on a
//! pool of 100,000 hosts — on a random host (randomized BreadthFirst,
//! every logoff) each level a cache miss. Iteration is in query order.
//!
//! An entry keeps the host's session slots (so that a heartbeat's list is
//! reconciled in O(reported + the host's sessions), never O(pool)), the
//! first [`INLINE_SESSIONS`] of them inline, in the cache line before the
//! host's counters: a placement or a logoff on a host with that many
//! sessions or fewer reads the host and its sessions in adjacent lines,
//! with no allocation and no pointer to follow. Before, hosts were boxed
//! behind an array of pointers and the lists were a `Vec` per host in a
//! table of their own: on a random host, two dependent cache misses more,
//! and the lists' growth and shrinking churned the allocator's small
//! blocks with cold memory. Measured on 100,000 hosts, interleaved
//! (`benches/interleaved.rs`, three runs each, alternated): randomized ÷
//! classic BreadthFirst 1.19–1.24 with these pages; 1.14–1.23 with one
//! flat array of entries indexed by `seq` (rejected: every `seq` ever
//! registered would cost a whole entry); 1.27–1.33 with a dense array
//! behind a `seq` → entry array of 4-byte indexes (one dependent load
//! more, in an array too large to stay in cache); 1.27–1.34 with boxed
//! hosts.
//!
//! Memory: an entry is about 450 bytes; a page is freed when its last host
//! is removed (sequences are never reused, so a pool whose hosts come and
//! go moves on to new pages and frees the old ones), and a page holds up
//! to 63 empty entries beside its hosts. Plus a heap list for a host with
//! more than [`INLINE_SESSIONS`] sessions. The `LoadIndex` min-trees and
//! the open-host bitmaps are indexed by `seq`.

use std::ops::Index;

use smallvec::SmallVec;

use super::session_table::Slot;
use crate::model::Host;

/// Session slots kept in a host's entry before they spill to the heap:
/// what fills the entry's first 64-byte line.
pub(super) const INLINE_SESSIONS: usize = 14;

/// Entries per page.
const PAGE: usize = 64;

/// A host and its sessions' slots.
#[derive(Clone, Debug, Default)]
#[repr(C, align(64))]
struct Entry {
    /// The slots of the sessions on this host, in the order they were
    /// indexed.
    sessions: SmallVec<[Slot; INLINE_SESSIONS]>,
    /// None before the host is registered, after it is removed, and while
    /// `upsert_host` replaces it (its sessions stay).
    host: Option<Host>,
}

impl Entry {
    fn is_empty(&self) -> bool {
        self.host.is_none() && self.sessions.is_empty()
    }
}

#[derive(Clone, Debug)]
struct Page {
    entries: Box<[Entry; PAGE]>,
    /// Entries that hold a host or sessions.
    used: usize,
}

#[derive(Clone, Debug, Default)]
pub(super) struct HostTable {
    /// `pages[seq / PAGE]`, None where no entry of the page is used.
    pages: Vec<Option<Page>>,
    len: usize,
}

impl HostTable {
    pub(super) fn len(&self) -> usize {
        self.len
    }

    pub(super) fn is_empty(&self) -> bool {
        self.len == 0
    }

    fn entry(&self, seq: u64) -> Option<&Entry> {
        let page = self.pages.get(seq as usize / PAGE)?.as_ref()?;
        Some(&page.entries[seq as usize % PAGE])
    }

    /// Applies `f` to the entry of `seq` (made if `make`; else only if its
    /// page exists), keeping its page's count of used entries true and
    /// freeing the page when none is left.
    fn with_entry<R>(
        &mut self,
        seq: u64,
        make: bool,
        f: impl FnOnce(&mut Entry) -> R,
    ) -> Option<R> {
        let p = seq as usize / PAGE;
        if make {
            if p >= self.pages.len() {
                self.pages.resize_with(p + 1, || None);
            }
            self.pages[p].get_or_insert_with(|| Page {
                entries: vec![Entry::default(); PAGE]
                    .into_boxed_slice()
                    .try_into()
                    .expect("PAGE entries"),
                used: 0,
            });
        }
        let slot = self.pages.get_mut(p)?;
        let page = slot.as_mut()?;
        let e = &mut page.entries[seq as usize % PAGE];
        let was_empty = e.is_empty();
        let r = f(e);
        match (was_empty, e.is_empty()) {
            (true, false) => page.used += 1,
            (false, true) => {
                // Give back what a spilled list held.
                e.sessions = SmallVec::new();
                page.used -= 1;
                if page.used == 0 {
                    *slot = None;
                }
            }
            _ => {}
        }
        Some(r)
    }

    /// Loads, and drops, a field of each cache line of `seq`'s entry a
    /// placement on it reads (its session slots, the host's counters, its
    /// metrics, its spec), before any of them is used. On a large pool a
    /// randomly chosen host is cold; read as the placement goes, each line
    /// was a cache miss of its own, one after the other (three, seen with
    /// `perf annotate` on `benches/interleaved.rs`). Issued together, the
    /// misses overlap.
    pub(super) fn prefetch(&self, seq: u64) {
        if let Some(e) = self.entry(seq) {
            std::hint::black_box((
                e.sessions.len(),
                e.host.as_ref().map(|h| {
                    (
                        h.logons_since_heartbeat,
                        h.metrics.is_some(),
                        h.spec.allow_new_session,
                    )
                }),
            ));
        }
    }

    pub(super) fn get(&self, seq: &u64) -> Option<&Host> {
        self.entry(*seq)?.host.as_ref()
    }

    pub(super) fn get_mut(&mut self, seq: &u64) -> Option<&mut Host> {
        let page = self.pages.get_mut(*seq as usize / PAGE)?.as_mut()?;
        page.entries[*seq as usize % PAGE].host.as_mut()
    }

    /// Puts `host` at `seq`, answering the host it replaces. The sessions
    /// recorded at `seq` stay.
    pub(super) fn insert(&mut self, seq: u64, host: Host) -> Option<Host> {
        let old = self
            .with_entry(seq, true, |e| e.host.replace(host))
            .flatten();
        if old.is_none() {
            self.len += 1;
        }
        old
    }

    /// Takes the host at `seq` out; the sessions recorded there stay
    /// until they are removed (`upsert_host` puts the host back; a removed
    /// host's sessions are ended first).
    pub(super) fn remove(&mut self, seq: &u64) -> Option<Host> {
        let old = self.with_entry(*seq, false, |e| e.host.take()).flatten();
        if old.is_some() {
            self.len -= 1;
        }
        old
    }

    /// The hosts in query order.
    pub(super) fn values(&self) -> impl Iterator<Item = &Host> {
        self.pages
            .iter()
            .flatten()
            .flat_map(|page| page.entries.iter())
            .filter_map(|e| e.host.as_ref())
    }

    /// The hosts' sequences in query order.
    pub(super) fn keys(&self) -> impl Iterator<Item = u64> + '_ {
        self.values().map(|h| h.seq)
    }

    /// The slots of the sessions on `seq`.
    pub(super) fn sessions(&self, seq: u64) -> &[Slot] {
        self.entry(seq).map_or(&[], |e| e.sessions.as_slice())
    }

    /// Records a session on `seq`.
    pub(super) fn add_session(&mut self, seq: u64, slot: Slot) {
        self.with_entry(seq, true, |e| e.sessions.push(slot));
    }

    /// Forgets a session on `seq`, if it is recorded there.
    pub(super) fn remove_session(&mut self, seq: u64, slot: Slot) {
        self.with_entry(seq, false, |e| {
            if let Some(at) = e.sessions.iter().position(|&s| s == slot) {
                e.sessions.remove(at);
            }
        });
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
    use crate::model::HostSpec;

    fn host(seq: u64) -> Host {
        let mut p = crate::Pool::new(
            crate::PoolConfig::new(
                "p",
                crate::HostPoolType::Pooled,
                crate::LoadBalancerType::BreadthFirst,
            ),
            1,
            0,
        );
        p.upsert_host(HostSpec::new("h", "10.0.0.1:3389"), 0)
            .expect("valid host");
        let mut h = p.hosts().next().expect("one host").clone();
        h.seq = seq;
        h
    }

    #[test]
    fn the_session_slots_share_the_first_line() {
        assert_eq!(std::mem::align_of::<Entry>(), 64);
        assert_eq!(std::mem::offset_of!(Entry, host), 64);
    }

    /// What a placement reads of a host lies in the host's first lines:
    /// counters and optional times in the first, metrics next, the spec's
    /// name, address and drain after them (see `Host`).
    #[test]
    fn a_placement_reads_the_first_lines_of_a_host() {
        use std::mem::offset_of;
        assert!(offset_of!(Host, start_requested_ms) + 16 <= 64);
        assert!(offset_of!(Host, logons_since_heartbeat) < 64);
        assert_eq!(offset_of!(Host, metrics), 64);
        let spec = offset_of!(Host, spec);
        assert!(spec + offset_of!(crate::model::HostSpec, allow_new_session) < 4 * 64);
        assert!(spec + offset_of!(crate::model::HostSpec, address) < 4 * 64);
    }

    fn pages(t: &HostTable) -> usize {
        t.pages.iter().flatten().count()
    }

    /// A page is freed with its last host, so a pool whose hosts come and
    /// go keeps the pages of the hosts it has.
    #[test]
    fn pages_are_freed_and_replacement_keeps_sessions() {
        let mut t = HostTable::default();
        for seq in 0..1_000 {
            t.insert(seq, host(seq));
            t.add_session(seq, seq as Slot);
            if seq >= 10 {
                let gone = seq - 10;
                t.remove_session(gone, gone as Slot);
                assert!(t.remove(&gone).is_some());
            }
        }
        assert_eq!(t.len(), 10);
        assert_eq!(
            t.keys().collect::<Vec<_>>(),
            (990..1_000).collect::<Vec<_>>()
        );
        assert!(pages(&t) <= 2, "{} pages for 10 hosts", pages(&t));
        for seq in 990..1_000 {
            assert_eq!(t.sessions(seq), &[seq as Slot]);
            t.remove_session(seq, seq as Slot);
            t.remove(&seq);
        }
        assert!(t.is_empty());
        assert_eq!(pages(&t), 0);

        // upsert_host: remove and insert at the same seq keeps the sessions.
        t.insert(100, host(100));
        t.add_session(100, 7);
        t.add_session(100, 8);
        let old = t.remove(&100).expect("present");
        assert_eq!(t.sessions(100), &[7, 8]);
        t.insert(100, old);
        assert_eq!(t.sessions(100), &[7, 8]);
        assert_eq!(t.keys().collect::<Vec<_>>(), vec![100]);

        // Removal after its sessions ended frees the entry for the next host.
        t.remove_session(100, 7);
        t.remove_session(100, 8);
        t.remove(&100);
        assert_eq!(pages(&t), 0);
        t.insert(101, host(101));
        assert_eq!(t[&101].seq, 101);
        assert!(t.get(&100).is_none());
        assert!(t.sessions(100).is_empty());
    }
}
