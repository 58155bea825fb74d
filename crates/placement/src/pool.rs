//! One host pool's state and every operation on it: the placement pipeline
//! (affinity → filter → rank → pick → reserve) and the bookkeeping that
//! keeps its indexes true.
//!
//! Derived state (session counts, host status, the indexes) is never given
//! from outside: it is rebuilt from hosts and sessions by [`Pool::restore`],
//! so what the store keeps and what the engine decides cannot drift apart.
//!
//! This file holds the pool's types, its construction and restore, and the
//! read-only accessors; the operations live in one file per seam:
//! `settings`, `hosts`, `sessions`, `placement` (and `picked`, the
//! caller-picked variant the simulator uses), and `index` (the bookkeeping
//! that keeps every index true). The containers have files of their own:
//! `host_table` (hosts by `seq`), `session_table` (sessions and their
//! users by slot), `open` (the open hosts ranked by session count).

use std::collections::{BTreeSet, HashMap};

use smallvec::SmallVec;

use crate::Error;
use crate::model::*;

mod chunked;
mod host_table;
mod hosts;
mod index;
mod open;
mod picked;
mod placement;
mod scaling;
mod session_table;
mod sessions;
mod settings;
mod slot_index;

use host_table::HostTable;
use index::Buckets;
use open::OpenHosts;
pub use picked::Candidates;
pub use scaling::HostPower;
use session_table::{SessionTable, Slot};
pub use sessions::{
    EndReason, EndedSession, HostLogoff, MAX_REPORTED_SESSIONS, MAX_UNTAKEN_HOST_LOGOFFS,
    Reconciled, RefusalReason, RefusedSession,
};

/// What an operation changed, for the caller to persist. Drained with
/// [`Pool::take_changes`] after every operation.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Change {
    /// The pool's settings.
    Config,
    /// The pool's counters (registration sequence, random draws).
    Counters,
    Host(String),
    HostRemoved(String),
    Session(String),
    /// A session ended: the session as it was, and why it ended.
    SessionEnded(EndedSession),
}

impl Change {
    /// The id and reason of an ended session; None for any other change.
    pub fn ended(&self) -> Option<(&str, EndReason)> {
        match self {
            Change::SessionEnded(e) => Some((&e.session.id, e.reason)),
            _ => None,
        }
    }
}

/// A connect request (rules S1, P7).
#[derive(Clone, Debug, Default)]
pub struct ConnectRequest<'a> {
    pub user: &'a str,
    /// Capabilities the session needs; hosts lacking one are filtered out.
    pub requires: &'a [String],
    /// In a `MultiplePersistent` pool, which of the user's hosts to use.
    pub session_host: Option<&'a str>,
}

/// The answer to a connect.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Placement {
    pub session_id: String,
    pub host: String,
    pub address: String,
    /// True when rule S1 sent the user back to an existing session.
    pub reconnect: bool,
    pub state: SessionState,
}

/// Whether an upsert made a new host or replaced one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Upsert {
    Created,
    Replaced,
}

/// A host pool: settings, hosts in query order, sessions, and the indexes
/// that make one placement cost O(log n).
#[derive(Clone, Debug)]
pub struct Pool {
    config: PoolConfig,
    /// The next registration sequence (query order, rule "query order").
    next_seq: u64,
    /// Seed and count of random draws: the caller derives each placement's
    /// randomness from them, so a restart continues the same sequence.
    random_seed: u64,
    random_draws: u64,
    /// Hosts by `seq`, iterated in query order, each with the slots of
    /// its sessions.
    hosts: HostTable,
    host_by_name: HashMap<String, u64>,
    /// Hosts by address, each list in query order (addresses need not be
    /// unique): a redirected connection names its host by address (rule
    /// R3), and the front door looks it up under the pool's lock, once per
    /// connection, where a scan of every host took O(hosts).
    hosts_by_address: HashMap<String, SmallVec<[u64; 1]>>,
    /// Sessions in a slab (`session_table.rs`), with their users and each
    /// session's host `seq`: every index below names a session by its
    /// slot, so no index compares or hashes an id, a host name or a user.
    sessions: SessionTable,
    /// User key → the hosts they own (personal pools), in query order.
    owners: HashMap<String, BTreeSet<u64>>,
    /// Capability → how many hosts offer it, for the fast path of `requires`.
    capability_hosts: HashMap<String, usize>,
    /// Hosts that allow new sessions and are available, ranked by
    /// `(sessions, seq)`: the limit is applied at query time as a prefix.
    open: OpenHosts,
    /// Personal pools: unassigned hosts that could take their first owner
    /// (empty in pooled pools, whose hosts never have one).
    open_unassigned: BTreeSet<u64>,
    /// Pending sessions as `(state_since_ms, slot)`, oldest first (rule
    /// S4). Sessions due at once end in `(time, id)` order (`tick`).
    pending: BTreeSet<(TimestampMs, Slot)>,
    /// Disconnected sessions as `(state_since_ms, slot)`, longest
    /// disconnected first (rule S9, `disconnectedTimeoutSeconds`).
    disconnected: BTreeSet<(TimestampMs, Slot)>,
    /// Disconnected sessions still awaiting their logon (rule S9), as
    /// `(state_since_ms, slot)`: each ends `pendingTimeoutSeconds` after it
    /// was disconnected unless its host confirms a logon first.
    unconfirmed_disconnected: BTreeSet<(TimestampMs, Slot)>,
    /// Every session as `(create_time_ms, slot)`, oldest first (rule S9,
    /// `maxSessionLifetimeSeconds`), kept only while the pool sets a
    /// lifetime (most do not, and it is a tree of every session, updated
    /// by every placement and logoff): `set_config` fills or empties it
    /// when the setting turns on or off.
    by_create_time: BTreeSet<(TimestampMs, Slot)>,
    /// Available hosts that have sent heartbeats, as `(last seen, seq)`,
    /// most silent first (rule S7).
    watched: BTreeSet<(TimestampMs, u64)>,
    /// When this engine started: silence is counted from here at the earliest.
    started_ms: TimestampMs,
    /// How many hosts' last heartbeat carried a custom load index (H3).
    custom_reporters: usize,
    /// The host the `LoadIndex` round robin served last (H5), 0 for none.
    last_served_seq: u64,
    /// The `LoadIndex` buckets' indexes, kept only while the pool uses it.
    buckets: Option<Buckets>,
    changes: Vec<Change>,
    /// Sessions the broker ended while their users may be logged on at
    /// their hosts, for the caller to tell those hosts (W5); bounded by
    /// [`sessions::MAX_UNTAKEN_HOST_LOGOFFS`].
    host_logoffs: std::collections::VecDeque<HostLogoff>,
    /// Rule A2: the algorithm of the phase in force while a scaling plan
    /// serves this pool (set by whoever evaluates the plan); None: the
    /// pool's own `loadBalancerType`. Not stored: it follows from the plan
    /// and the time, and is set again at the first evaluation.
    plan_algorithm: Option<LoadBalancerType>,
}

impl Pool {
    /// A new, empty pool. The settings must already be valid.
    pub fn new(config: PoolConfig, random_seed: u64, started_ms: TimestampMs) -> Pool {
        Pool {
            config,
            next_seq: 1,
            random_seed,
            random_draws: 0,
            hosts: HostTable::default(),
            host_by_name: HashMap::new(),
            hosts_by_address: HashMap::new(),
            sessions: SessionTable::default(),
            owners: HashMap::new(),
            capability_hosts: HashMap::new(),
            open: OpenHosts::default(),
            open_unassigned: BTreeSet::new(),
            pending: BTreeSet::new(),
            disconnected: BTreeSet::new(),
            unconfirmed_disconnected: BTreeSet::new(),
            by_create_time: BTreeSet::new(),
            watched: BTreeSet::new(),
            started_ms,
            custom_reporters: 0,
            last_served_seq: 0,
            buckets: None,
            changes: Vec::new(),
            host_logoffs: std::collections::VecDeque::new(),
            plan_algorithm: None,
        }
        .with_indexes_rebuilt()
    }

    /// Rebuilds a pool from what the store kept. Session counts, statuses
    /// and indexes are derived here; sessions on unknown hosts are skipped.
    pub fn restore(
        config: PoolConfig,
        counters: PoolCounters,
        hosts: Vec<Host>,
        sessions: Vec<Session>,
        started_ms: TimestampMs,
    ) -> Pool {
        let mut pool = Pool::new(config, counters.random_seed, started_ms);
        pool.random_draws = counters.random_draws;
        pool.last_served_seq = counters.last_served_seq;
        let mut max_seq = 0;
        for mut h in hosts {
            h.status = hosts::power_status(&h).unwrap_or(HostStatus::Available);
            h.sessions = 0;
            h.connecting_sessions = 0;
            h.disconnected_sessions = 0;
            h.logons_since_heartbeat = 0;
            max_seq = max_seq.max(h.seq);
            pool.insert_host(h);
        }
        pool.next_seq = counters.next_seq.max(max_seq + 1);
        for s in sessions {
            if pool.host_by_name.contains_key(&s.host) && !pool.sessions.contains(&s.id) {
                pool.insert_session(s, false);
            }
        }
        pool.changes.clear();
        pool.with_indexes_rebuilt()
    }

    pub fn config(&self) -> &PoolConfig {
        &self.config
    }

    pub fn name(&self) -> &str {
        &self.config.name
    }

    /// Rule A2: sets (or, with None, clears) the algorithm a scaling
    /// plan's phase puts in force. Only pooled pools follow it.
    pub fn set_plan_algorithm(&mut self, algorithm: Option<LoadBalancerType>) {
        self.plan_algorithm = algorithm;
    }

    /// Rule A2: the algorithm placements use now: the plan's phase's while
    /// a plan serves this pooled pool, else the pool's own.
    pub fn effective_load_balancer_type(&self) -> LoadBalancerType {
        match (self.config.host_pool_type, self.plan_algorithm) {
            (HostPoolType::Pooled, Some(a)) => a,
            _ => self.config.load_balancer_type,
        }
    }

    pub fn counters(&self) -> PoolCounters {
        PoolCounters {
            next_seq: self.next_seq,
            random_seed: self.random_seed,
            random_draws: self.random_draws,
            last_served_seq: self.last_served_seq,
        }
    }

    /// What every operation since the last call changed.
    pub fn take_changes(&mut self) -> Vec<Change> {
        std::mem::take(&mut self.changes)
    }

    /// What every operation since the last `take_changes` or
    /// `clear_changes` changed, left in place.
    pub fn changes(&self) -> &[Change] {
        &self.changes
    }

    /// Forgets the changes, keeping their buffer: a caller that persists
    /// nothing (the simulator, after every operation) allocates none.
    pub fn clear_changes(&mut self) {
        self.changes.clear();
    }

    /// Hosts in query order.
    pub fn hosts(&self) -> impl Iterator<Item = &Host> {
        self.hosts.values()
    }

    pub fn host_count(&self) -> usize {
        self.hosts.len()
    }

    pub fn host(&self, name: &str) -> Option<&Host> {
        self.host_by_name
            .get(name)
            .and_then(|seq| self.hosts.get(seq))
    }

    /// The first host in query order registered at `address` (rule R3).
    pub fn host_at(&self, address: &str) -> Option<&Host> {
        let seq = self.hosts_by_address.get(address)?.first()?;
        self.hosts.get(seq)
    }

    pub fn session(&self, id: &str) -> Option<&Session> {
        self.sessions.get(id)
    }

    /// Whether a session was adopted from its host's list and not yet
    /// confirmed (rule S8): S1 does not use it, and it is not stored.
    pub fn is_unconfirmed(&self, id: &str) -> bool {
        self.sessions
            .slot_of(id)
            .is_some_and(|s| self.sessions[s].unconfirmed)
    }

    /// The host named `name`, or `SessionHostNotFound` saying so.
    pub fn find_host(&self, name: &str) -> Result<&Host, Error> {
        self.seq_of(name).map(|seq| &self.hosts[&seq])
    }

    /// The session `id`, or `SessionNotFound` saying so.
    pub fn find_session(&self, id: &str) -> Result<&Session, Error> {
        self.find_slot(id).map(|s| &self.sessions[s].session)
    }

    /// The slot of the session `id`, or `SessionNotFound` saying so.
    fn find_slot(&self, id: &str) -> Result<Slot, Error> {
        self.sessions.slot_of(id).ok_or_else(|| {
            Error::SessionNotFound(format!(
                "session {id} is not in host pool {}",
                self.config.name
            ))
        })
    }

    pub fn session_count(&self) -> usize {
        self.sessions.len()
    }

    /// Every session, in no particular order.
    pub fn sessions(&self) -> impl Iterator<Item = &Session> {
        self.sessions.iter().map(|(_, e)| &e.session)
    }

    /// The sessions of one user (matched without regard to case).
    pub fn user_sessions(&self, user: &str) -> impl Iterator<Item = &Session> {
        self.sessions
            .user_sessions(user)
            .iter()
            .map(|&s| &self.sessions[s].session)
    }
}

/// What the store keeps of a pool besides its settings.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PoolCounters {
    pub next_seq: u64,
    pub random_seed: u64,
    pub random_draws: u64,
    /// The `LoadIndex` round robin's last host (0: none yet).
    #[serde(default)]
    pub last_served_seq: u64,
}

impl PoolCounters {
    /// The random value of the pool's next placement (B1): a pure function
    /// of the stored seed and count of draws, so that after a restart the
    /// next placement draws exactly what it would have drawn (rule S5:
    /// "decides exactly as it would have"), and the simulator draws what
    /// the broker would. The caller passes it to [`Pool::connect`]. The
    /// generator is placement's own (`random.rs`: xoshiro256++ seeded by
    /// SplitMix64), fixed by test vectors, so no dependency or platform
    /// can change what a stored seed draws.
    pub fn placement_random(&self) -> u64 {
        crate::random::placement_random(self.random_seed, self.random_draws)
    }
}
