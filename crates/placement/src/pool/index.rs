//! Index bookkeeping: every map and index a pool keeps beside its hosts and
//! sessions (open hosts by session count, unassigned hosts, owners,
//! capabilities, the `LoadIndex` buckets, load indexes), kept true around
//! each change of a host or a session and rebuilt from scratch after a
//! settings change or a restore.

use std::collections::BTreeSet;

use super::Pool;
use super::open::OpenHosts;
use super::session_table::{Entry, SessionTable, Slot};
use crate::load_index::{self, MinTree};
use crate::model::*;

/// Indexes of the `LoadIndex` algorithm over its eligible hosts (open,
/// below the limit, not refusing by H6).
#[derive(Clone, Debug, Default)]
pub(super) struct Buckets {
    /// Bucket-1 candidates (every standard capability, under the connecting
    /// threshold, known index) counted by index: the threshold raise reads
    /// the `minHostsInQueue`-th lowest index here.
    pub(super) first_indexes: IndexCounts,
    /// The same hosts' indexes by query order, for round robin.
    pub(super) first: MinTree,
    /// Bucket-2 candidates (lacking a standard capability) by query order.
    pub(super) second: MinTree,
    /// Every eligible host, in bucket-3 order: known index lowest first
    /// (unknown last), then fewest connecting sessions, then query order.
    pub(super) third: BTreeSet<(i32, u32, u64)>,
    /// `standard[seq]`: whether the host has every standard capability
    /// (bucket 1 rather than 2). A host's capabilities change only when
    /// `upsert_host` reinserts it, and the pool's only with its settings,
    /// which rebuild every index: both set this again
    /// ([`Pool::note_standard`]), so the reindex of every placement and
    /// logoff reads a flag instead of comparing the host's capability
    /// strings, cold on a large pool, with the pool's.
    standard: Vec<bool>,
}

/// How many hosts have each known load index (0 to
/// [`load_index::MAX`]): the k-th lowest index is a scan of at most 101
/// counters, and an update is one increment, where an ordered set of
/// `(index, seq)` moved keys around a random node.
#[derive(Clone, Debug)]
pub(super) struct IndexCounts {
    counts: [u32; load_index::MAX as usize + 1],
    len: usize,
}

impl Default for IndexCounts {
    fn default() -> IndexCounts {
        IndexCounts {
            counts: [0; load_index::MAX as usize + 1],
            len: 0,
        }
    }
}

impl IndexCounts {
    pub(super) fn len(&self) -> usize {
        self.len
    }

    /// `index` is a known index (H1–H3 never give more than the maximum).
    fn insert(&mut self, index: i32) {
        self.counts[index as usize] += 1;
        self.len += 1;
    }

    fn remove(&mut self, index: i32) {
        self.counts[index as usize] -= 1;
        self.len -= 1;
    }

    /// The `k`-th lowest index counted (1-based), if `k` are.
    pub(super) fn kth_lowest(&self, k: usize) -> Option<i32> {
        let mut seen = 0;
        for (index, &n) in self.counts.iter().enumerate() {
            seen += n as usize;
            if seen >= k {
                return Some(index as i32);
            }
        }
        None
    }
}

fn third_key(h: &Host) -> (i32, u32, u64) {
    let index = if h.load_index >= 0 {
        h.load_index
    } else {
        i32::MAX
    };
    (index, h.connecting_sessions, h.seq)
}

fn is_open(h: &Host) -> bool {
    h.spec.allow_new_session && h.status == HostStatus::Available
}

/// Where a host stands in its pool's indexes, as its state and the pool's
/// settings decide: what [`Pool::unindex`] takes out, [`Pool::reindex`]
/// puts in, and [`Pool::update_host`] moves.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Place {
    /// Its session count in `open`, while it is open.
    open: Option<u32>,
    /// In `open_unassigned` (open, in a personal pool, without an owner).
    unassigned: bool,
    /// Its load index in bucket 1 (`i32::MAX`: not there).
    first: i32,
    /// Its load index in bucket 2 (`i32::MAX`: not there).
    second: i32,
    /// Its key in bucket 3, while it may take a logon.
    third: Option<(i32, u32, u64)>,
}

impl Place {
    const NOWHERE: Place = Place {
        open: None,
        unassigned: false,
        first: i32::MAX,
        second: i32::MAX,
        third: None,
    };
}

/// The [`Place`] of `h`; `standard` is its flag of [`Buckets::standard`]
/// in a `LoadIndex` pool, None in the others.
fn place(cfg: &PoolConfig, standard: Option<bool>, h: &Host) -> Place {
    let mut p = Place::NOWHERE;
    if !is_open(h) {
        return p;
    }
    p.open = Some(h.sessions);
    p.unassigned = cfg.host_pool_type == HostPoolType::Personal && h.spec.assigned_user.is_none();
    let Some(standard) = standard else {
        return p;
    };
    if h.sessions >= cfg.max_session_limit || rejects(cfg, h) {
        return p;
    }
    let connecting = cfg.logon_storm_settings.connecting_session_threshold;
    let under_connecting = connecting == 0 || h.connecting_sessions < connecting;
    p.third = Some(third_key(h));
    if h.load_index >= 0 && under_connecting {
        if standard {
            p.first = h.load_index;
        } else {
            p.second = h.load_index;
        }
    }
    p
}

impl Pool {
    /// Applies `f` to a host, keeping the indexes true around it: the
    /// host's load index is recomputed, and it moves in each index whose
    /// key `f` changed, and only in those. A heartbeat of a host that
    /// stays Available in a pool without `LoadIndex` buckets moves
    /// nothing; a placement moves it one count up in `open` and, with
    /// buckets, to its new key in each.
    pub(super) fn update_host<R>(&mut self, seq: u64, f: impl FnOnce(&mut Host) -> R) -> R {
        let before = self.place_of(seq);
        let any_custom = self.custom_reporters > 0;
        let h = self.hosts.get_mut(&seq).expect("update_host: host exists");
        let r = f(h);
        h.load_index = host_load_index(&self.config, any_custom, h);
        let after = self.place_of(seq);
        self.move_host(seq, before, after);
        r
    }

    fn place_of(&self, seq: u64) -> Place {
        let standard = self.buckets.as_ref().map(|b| b.standard[seq as usize]);
        place(&self.config, standard, &self.hosts[&seq])
    }

    /// Moves host `seq` from `from` to `to` in every index where they
    /// differ.
    fn move_host(&mut self, seq: u64, from: Place, to: Place) {
        if from.open != to.open {
            if let Some(sessions) = from.open {
                self.open.remove(sessions, seq);
            }
            if let Some(sessions) = to.open {
                self.open.insert(sessions, seq);
            }
        }
        if from.unassigned != to.unassigned {
            if to.unassigned {
                self.open_unassigned.insert(seq);
            } else {
                self.open_unassigned.remove(&seq);
            }
        }
        let Some(b) = self.buckets.as_mut() else {
            return;
        };
        if from.first != to.first {
            if from.first != i32::MAX {
                b.first_indexes.remove(from.first);
            }
            if to.first != i32::MAX {
                b.first_indexes.insert(to.first);
            }
            b.first.set(seq as usize, to.first);
        }
        if from.second != to.second {
            b.second.set(seq as usize, to.second);
        }
        if from.third != to.third {
            if let Some(key) = from.third {
                b.third.remove(&key);
            }
            if let Some(key) = to.third {
                b.third.insert(key);
            }
        }
    }

    /// Takes the host out of every index.
    fn unindex(&mut self, seq: u64) {
        let from = self.place_of(seq);
        self.move_host(seq, from, Place::NOWHERE);
    }

    /// Recomputes the load index of a host that is in no index and puts
    /// it in every index it belongs to.
    fn reindex(&mut self, seq: u64) {
        let any_custom = self.custom_reporters > 0;
        let h = self.hosts.get_mut(&seq).expect("reindex: host exists");
        h.load_index = host_load_index(&self.config, any_custom, h);
        let to = self.place_of(seq);
        self.move_host(seq, Place::NOWHERE, to);
    }

    /// Records whether the host has every standard capability
    /// ([`Buckets::standard`]).
    fn note_standard(&mut self, seq: u64) {
        let Some(b) = self.buckets.as_mut() else {
            return;
        };
        let h = &self.hosts[&seq];
        let i = seq as usize;
        if i >= b.standard.len() {
            b.standard.resize(i + 1, false);
        }
        b.standard[i] = self
            .config
            .standard_capabilities
            .iter()
            .all(|c| h.spec.capabilities.contains(c));
    }

    /// H6: a host of a `LoadIndex` pool at or over its load index or
    /// connecting session threshold refuses new logons (its own policy
    /// overrides the pool's values; 0 disables). The load index is the one
    /// H7 corrected (`load_index::compute_corrected` says why), so with
    /// `logonCost` a host refuses once its logons since the last heartbeat
    /// bring it to its threshold.
    pub(super) fn rejects(&self, h: &Host) -> bool {
        rejects(&self.config, h)
    }

    /// Recomputes every derived index from scratch (after a settings change,
    /// a restore, or a change of custom reporters).
    pub(super) fn rebuild_indexes(&mut self) {
        self.open = OpenHosts::default();
        self.open_unassigned.clear();
        self.buckets =
            (self.config.load_balancer_type == LoadBalancerType::LoadIndex).then(Buckets::default);
        let seqs: Vec<u64> = self.hosts.keys().collect();
        for seq in seqs {
            self.note_standard(seq);
            self.reindex(seq);
        }
    }

    pub(super) fn with_indexes_rebuilt(mut self) -> Pool {
        self.rebuild_indexes();
        self
    }

    pub(super) fn insert_host(&mut self, h: Host) {
        let seq = h.seq;
        self.custom_reporters += usize::from(reports_custom(&h));
        self.host_by_name.insert(h.spec.name.clone(), seq);
        let at_address = self
            .hosts_by_address
            .entry(h.spec.address.clone())
            .or_default();
        let i = at_address.partition_point(|&s| s < seq);
        at_address.insert(i, seq);
        for c in &h.spec.capabilities {
            *self.capability_hosts.entry(c.clone()).or_default() += 1;
        }
        if let Some(u) = &h.spec.assigned_user {
            self.owners.entry(user_key(u)).or_default().insert(seq);
        }
        let watch = super::hosts::watched_for_silence(&h);
        self.hosts.insert(seq, h);
        self.note_standard(seq);
        self.reindex(seq);
        if watch {
            self.watched.insert(self.watch_key(seq));
        }
    }

    /// Takes a host out of every map and index; its sessions stay.
    pub(super) fn remove_host_entry(&mut self, seq: u64) -> Host {
        self.unindex(seq);
        self.watched.remove(&self.watch_key(seq));
        let h = self
            .hosts
            .remove(&seq)
            .expect("remove_host_entry: host exists");
        self.custom_reporters -= usize::from(reports_custom(&h));
        self.host_by_name.remove(&h.spec.name);
        if let Some(at_address) = self.hosts_by_address.get_mut(&h.spec.address) {
            at_address.retain(|s| *s != seq);
            if at_address.is_empty() {
                self.hosts_by_address.remove(&h.spec.address);
            }
        }
        for c in &h.spec.capabilities {
            if let Some(n) = self.capability_hosts.get_mut(c) {
                *n -= 1;
                if *n == 0 {
                    self.capability_hosts.remove(c);
                }
            }
        }
        if let Some(u) = &h.spec.assigned_user {
            let key = user_key(u);
            if let Some(o) = self.owners.get_mut(&key) {
                o.remove(&seq);
                if o.is_empty() {
                    self.owners.remove(&key);
                }
            }
        }
        h
    }

    /// Adds a session on the host its `host` names (a restore, an
    /// adoption); answers its slot.
    pub(super) fn insert_session(&mut self, s: Session, unconfirmed: bool) -> Slot {
        let seq = self.host_by_name[&s.host];
        self.insert_session_on(seq, s, unconfirmed)
    }

    /// [`Pool::insert_session`] when the caller knows the host's `seq`
    /// (a placement does): no look-up of the host by name.
    pub(super) fn insert_session_on(&mut self, seq: u64, s: Session, unconfirmed: bool) -> Slot {
        let slot = self.sessions.insert(s, seq, unconfirmed);
        self.index_session(slot);
        slot
    }

    /// Takes a session out of every index and the table.
    pub(super) fn remove_session_entry(&mut self, slot: Slot) -> Entry {
        self.unindex_session(slot);
        self.sessions.remove(slot)
    }

    /// Counts the session in `slot` on its host and puts it in every index
    /// of sessions: by state and time, its user's list, its host's list.
    pub(super) fn index_session(&mut self, slot: Slot) {
        let e = &self.sessions[slot];
        let seq = e.host;
        let s = &e.session;
        let (state, since, created) = (s.state, s.state_since_ms, s.create_time_ms);
        let awaiting = s.awaiting_logon;
        let pending = state == SessionState::Pending;
        let disconnected = state == SessionState::Disconnected;
        self.update_host(seq, |h| {
            h.sessions += 1;
            if pending {
                h.connecting_sessions += 1;
            }
            if disconnected {
                h.disconnected_sessions += 1;
            }
        });
        if pending {
            self.pending.insert((since, slot));
        }
        if disconnected {
            self.disconnected.insert((since, slot));
            if awaiting {
                self.unconfirmed_disconnected.insert((since, slot));
            }
        }
        if self.config.max_session_lifetime_seconds > 0 {
            self.by_create_time.insert((created, slot));
        }
        self.sessions.index_user(slot);
        self.hosts.add_session(seq, slot);
    }

    /// Undoes [`Pool::index_session`]; the session stays in its slot.
    pub(super) fn unindex_session(&mut self, slot: Slot) {
        let e = &self.sessions[slot];
        let seq = e.host;
        let s = &e.session;
        let (state, since, created) = (s.state, s.state_since_ms, s.create_time_ms);
        let awaiting = s.awaiting_logon;
        let pending = state == SessionState::Pending;
        let disconnected = state == SessionState::Disconnected;
        if pending {
            self.pending.remove(&(since, slot));
        }
        if disconnected {
            self.disconnected.remove(&(since, slot));
            if awaiting {
                self.unconfirmed_disconnected.remove(&(since, slot));
            }
        }
        if self.config.max_session_lifetime_seconds > 0 {
            self.by_create_time.remove(&(created, slot));
        }
        self.sessions.unindex_user(slot);
        self.hosts.remove_session(seq, slot);
        if self.hosts.get(&seq).is_some() {
            self.update_host(seq, |h| {
                h.sessions -= 1;
                if pending {
                    h.connecting_sessions -= 1;
                }
                if disconnected {
                    h.disconnected_sessions -= 1;
                }
            });
        }
    }

    /// The slots of the host `seq`'s sessions.
    pub(super) fn host_session_slots(&self, seq: u64) -> &[Slot] {
        self.hosts.sessions(seq)
    }
}

/// The slots of the prefix of `set` whose time `is_due`, in `(time, id)`
/// order: sessions due in the same millisecond end in the order of their
/// ids, as when these sets were keyed by id, so a tick records its changes
/// in the same order. Allocates nothing when nothing is due.
pub(super) fn due(
    sessions: &SessionTable,
    set: &BTreeSet<(TimestampMs, Slot)>,
    is_due: impl Fn(TimestampMs) -> bool,
) -> Vec<Slot> {
    let mut due: Vec<(TimestampMs, &str, Slot)> = set
        .iter()
        .take_while(|(t, _)| is_due(*t))
        .map(|&(t, slot)| (t, sessions[slot].session.id.as_str(), slot))
        .collect();
    due.sort_unstable();
    due.into_iter().map(|(_, _, slot)| slot).collect()
}

/// [`Pool::rejects`], over the pool's settings alone.
fn rejects(cfg: &PoolConfig, h: &Host) -> bool {
    if cfg.load_balancer_type != LoadBalancerType::LoadIndex {
        return false;
    }
    let s = &cfg.load_index_settings;
    let index_max = h
        .spec
        .policy
        .load_index_threshold
        .unwrap_or(s.load_index_threshold);
    let connecting_max = h
        .spec
        .policy
        .connecting_session_threshold
        .unwrap_or(s.connecting_session_threshold);
    (index_max > 0 && h.load_index >= index_max as i32)
        || (connecting_max > 0 && h.connecting_sessions >= connecting_max)
}

/// A host's load index (H1–H3), with H7's correction: the logons the host
/// runs or was given since its last heartbeat, each counted once — the
/// larger of its connecting sessions and the logons placed since — times
/// the pool's `logonCost`.
fn host_load_index(cfg: &PoolConfig, any_custom: bool, h: &Host) -> i32 {
    let correction = cfg
        .logon_storm_settings
        .logon_cost
        .saturating_mul(h.logons_since_heartbeat.max(h.connecting_sessions))
        .min(100) as i32;
    load_index::compute_corrected(
        &cfg.load_index_settings,
        cfg.max_session_limit,
        h.sessions,
        h.metrics.as_ref(),
        any_custom,
        correction,
    )
}

pub(super) fn reports_custom(h: &Host) -> bool {
    h.metrics
        .as_ref()
        .is_some_and(|m| m.custom_load_index.is_some())
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::IndexCounts;

    proptest! {
        /// The k-th lowest counted index is the k-th of the sorted indexes
        /// (what the ordered set of `(index, seq)` it replaces answered).
        #[test]
        fn kth_lowest_agrees_with_sorting(
            indexes in proptest::collection::vec(0i32..=100, 0..200),
            removed in proptest::collection::vec(any::<proptest::sample::Index>(), 0..50),
        ) {
            let mut counts = IndexCounts::default();
            let mut sorted = indexes.clone();
            for &i in &indexes {
                counts.insert(i);
            }
            for r in removed {
                if sorted.is_empty() {
                    break;
                }
                let i = sorted.remove(r.index(sorted.len()));
                counts.remove(i);
            }
            sorted.sort_unstable();
            prop_assert_eq!(counts.len(), sorted.len());
            for k in 1..=sorted.len() {
                prop_assert_eq!(counts.kth_lowest(k), Some(sorted[k - 1]));
            }
            prop_assert_eq!(counts.kth_lowest(sorted.len() + 1), None);
        }
    }
}
