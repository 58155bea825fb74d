//! One host pool's state and every operation on it: the placement pipeline
//! (affinity → filter → rank → pick → reserve) and the bookkeeping that
//! keeps its indexes true.
//!
//! Derived state (session counts, host status, the indexes) is never given
//! from outside: it is rebuilt from hosts and sessions by [`Pool::restore`],
//! so what the store keeps and what the engine decides cannot drift apart.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use crate::Error;
use crate::load_index::{self, MinTree};
use crate::model::*;
use crate::pipeline::{self, FilterCounts, Ranked};

mod picked;
pub use picked::Candidates;

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
    SessionEnded(String),
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
    hosts: BTreeMap<u64, Host>,
    host_by_name: HashMap<String, u64>,
    sessions: HashMap<String, Session>,
    /// User key → that user's session ids.
    user_sessions: HashMap<String, Vec<String>>,
    /// User key → the hosts they own (personal pools), in query order.
    owners: HashMap<String, BTreeSet<u64>>,
    /// Capability → how many hosts offer it, for the fast path of `requires`.
    capability_hosts: HashMap<String, usize>,
    /// Hosts that allow new sessions and are available, as
    /// `(sessions, seq)`: the limit is applied at query time as a prefix.
    open: indexset::BTreeSet<(u32, u64)>,
    /// Personal pools: unassigned hosts that could take their first owner.
    open_unassigned: BTreeSet<u64>,
    /// Pending sessions as `(state_since_ms, id)`, oldest first (rule S4).
    pending: BTreeSet<(TimestampMs, String)>,
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
}

/// Indexes of the `LoadIndex` algorithm over its eligible hosts (open,
/// below the limit, not refusing by H6).
#[derive(Clone, Debug, Default)]
struct Buckets {
    /// Bucket-1 candidates (every standard capability, under the connecting
    /// threshold, known index) as `(index, seq)`: the threshold raise reads
    /// the `minHostsInQueue`-th lowest index here.
    first_sorted: indexset::BTreeSet<(i32, u64)>,
    /// The same hosts' indexes by query order, for round robin.
    first: MinTree,
    /// Bucket-2 candidates (lacking a standard capability) by query order.
    second: MinTree,
    /// Every eligible host, in bucket-3 order: known index lowest first
    /// (unknown last), then fewest connecting sessions, then query order.
    third: BTreeSet<(i32, u32, u64)>,
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

/// What decides a host's place in the indexes a pool without `LoadIndex`
/// buckets keeps: `open` (`(sessions, seq)` while open) and
/// `open_unassigned` (open and without an owner).
fn open_key(h: &Host) -> (u32, bool, bool) {
    (h.sessions, is_open(h), h.spec.assigned_user.is_none())
}

impl Pool {
    /// A new, empty pool. The settings must already be valid.
    pub fn new(config: PoolConfig, random_seed: u64, started_ms: TimestampMs) -> Pool {
        Pool {
            config,
            next_seq: 1,
            random_seed,
            random_draws: 0,
            hosts: BTreeMap::new(),
            host_by_name: HashMap::new(),
            sessions: HashMap::new(),
            user_sessions: HashMap::new(),
            owners: HashMap::new(),
            capability_hosts: HashMap::new(),
            open: indexset::BTreeSet::new(),
            open_unassigned: BTreeSet::new(),
            pending: BTreeSet::new(),
            watched: BTreeSet::new(),
            started_ms,
            custom_reporters: 0,
            last_served_seq: 0,
            buckets: None,
            changes: Vec::new(),
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
            h.status = HostStatus::Available;
            h.sessions = 0;
            h.connecting_sessions = 0;
            h.logons_since_heartbeat = 0;
            max_seq = max_seq.max(h.seq);
            pool.insert_host(h);
        }
        pool.next_seq = counters.next_seq.max(max_seq + 1);
        for s in sessions {
            if pool.host_by_name.contains_key(&s.host) {
                pool.insert_session(s);
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

    pub fn session(&self, id: &str) -> Option<&Session> {
        self.sessions.get(id)
    }

    /// The host named `name`, or `SessionHostNotFound` saying so.
    pub fn find_host(&self, name: &str) -> Result<&Host, Error> {
        self.seq_of(name).map(|seq| &self.hosts[&seq])
    }

    /// The session `id`, or `SessionNotFound` saying so.
    pub fn find_session(&self, id: &str) -> Result<&Session, Error> {
        self.sessions.get(id).ok_or_else(|| {
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
        self.sessions.values()
    }

    /// The sessions of one user (matched without regard to case).
    pub fn user_sessions(&self, user: &str) -> impl Iterator<Item = &Session> {
        self.user_sessions
            .get(&user_key(user))
            .into_iter()
            .flatten()
            .filter_map(|id| self.sessions.get(id))
    }

    // ---- settings ------------------------------------------------------

    /// Replaces the pool's settings (rule P3: applies to the next placement;
    /// existing sessions never move). Answers the warnings of rule P5.
    pub fn set_config(&mut self, config: PoolConfig) -> Result<Vec<String>, Error> {
        let warnings = config.validate()?;
        if config.name != self.config.name {
            return Err(Error::InvalidParameter(
                "name: a host pool cannot be renamed".into(),
            ));
        }
        if config.host_pool_type != self.config.host_pool_type && !self.hosts.is_empty() {
            return Err(Error::Conflict(format!(
                "hostPoolType: host pool {} has session hosts; remove them before changing \
                 it from {:?} to {:?}",
                self.config.name, self.config.host_pool_type, config.host_pool_type
            )));
        }
        if config.load_balancer_type == LoadBalancerType::Persistent
            && self.config.load_balancer_type == LoadBalancerType::MultiplePersistent
            && let Some((user, _)) = self.owners.iter().find(|(_, hosts)| hosts.len() > 1)
        {
            return Err(Error::Conflict(format!(
                "loadBalancerType: user {user} owns several session hosts, which a \
                 Persistent pool does not allow"
            )));
        }
        self.config = config;
        // Limits, thresholds, factors or the algorithm may have changed:
        // every derived index is recomputed (settings change rarely).
        self.rebuild_indexes();
        self.changes.push(Change::Config);
        Ok(warnings)
    }

    // ---- hosts -----------------------------------------------------------

    /// Registers a host, or replaces its settings keeping its place in query
    /// order and its sessions.
    pub fn upsert_host(&mut self, spec: HostSpec, now_ms: TimestampMs) -> Result<Upsert, Error> {
        spec.validate()?;
        let pooled = self.config.host_pool_type == HostPoolType::Pooled;
        if pooled && spec.assigned_user.is_some() {
            return Err(Error::InvalidParameter(
                "assignedUser: only session hosts of Personal host pools have an owner".into(),
            ));
        }
        let existing = self.host_by_name.get(&spec.name).copied();
        let old_owner = existing.and_then(|seq| self.hosts[&seq].spec.assigned_user.clone());
        let new_owner = spec.assigned_user.clone();
        if old_owner.as_deref().map(user_key) != new_owner.as_deref().map(user_key) {
            self.check_assignment(
                &spec.name,
                existing,
                old_owner.as_deref(),
                new_owner.as_deref(),
            )?;
        }
        match existing {
            Some(seq) => {
                let old = self.remove_host_entry(seq);
                let mut h = old;
                h.spec = spec;
                self.insert_host(h);
                self.changes
                    .push(Change::Host(self.hosts[&seq].spec.name.clone()));
                Ok(Upsert::Replaced)
            }
            None => {
                let seq = self.next_seq;
                self.next_seq += 1;
                let name = spec.name.clone();
                self.insert_host(Host {
                    seq,
                    spec,
                    registered_at_ms: now_ms,
                    last_heartbeat_ms: None,
                    metrics: None,
                    status: HostStatus::Available,
                    sessions: 0,
                    connecting_sessions: 0,
                    load_index: load_index::UNKNOWN,
                    logons_since_heartbeat: 0,
                });
                self.changes.push(Change::Host(name));
                self.changes.push(Change::Counters);
                Ok(Upsert::Created)
            }
        }
    }

    /// Rule P7: a host has one owner; a `Persistent` user owns one host; an
    /// owner with sessions on the host cannot be taken away.
    fn check_assignment(
        &self,
        host: &str,
        existing: Option<u64>,
        old: Option<&str>,
        new: Option<&str>,
    ) -> Result<(), Error> {
        if let Some(old) = old {
            let has_sessions = existing.is_some_and(|seq| self.hosts[&seq].sessions > 0);
            match new {
                Some(_) => {
                    return Err(Error::Conflict(format!(
                        "assignedUser: session host {host} is already assigned to {old}; \
                         unassign it first"
                    )));
                }
                None if has_sessions => {
                    return Err(Error::Conflict(format!(
                        "assignedUser: {old} has a session on session host {host}; log it \
                         off before unassigning the host"
                    )));
                }
                None => {}
            }
        }
        if let Some(new) = new
            && self.config.load_balancer_type == LoadBalancerType::Persistent
            && let Some(owned) = self.owners.get(&user_key(new))
            && let Some(other) = owned.iter().next()
        {
            return Err(Error::Conflict(format!(
                "assignedUser: {new} already has session host {} and a Persistent pool gives \
                 a user one host; use MultiplePersistent for several",
                self.hosts[other].spec.name
            )));
        }
        Ok(())
    }

    /// Removes a host. With sessions it is a conflict unless `force`, which
    /// ends them.
    pub fn remove_host(&mut self, name: &str, force: bool) -> Result<(), Error> {
        let seq = self.seq_of(name)?;
        let sessions = self.hosts[&seq].sessions;
        if sessions > 0 && !force {
            return Err(Error::Conflict(format!(
                "session host {name} has {sessions} session(s); log them off or remove it \
                 with force"
            )));
        }
        if sessions > 0 {
            let ids: Vec<String> = self
                .sessions
                .values()
                .filter(|s| s.host == name)
                .map(|s| s.id.clone())
                .collect();
            for id in ids {
                self.end_session(&id);
            }
        }
        let reported_before = self.custom_reporters > 0;
        self.remove_host_entry(seq);
        if reported_before != (self.custom_reporters > 0) {
            // H3: the last custom reporter is gone: every host is -1 again.
            self.rebuild_indexes();
        }
        self.changes.push(Change::HostRemoved(name.to_string()));
        Ok(())
    }

    fn seq_of(&self, name: &str) -> Result<u64, Error> {
        self.host_by_name.get(name).copied().ok_or_else(|| {
            Error::SessionHostNotFound(format!(
                "session host {name} is not in host pool {}",
                self.config.name
            ))
        })
    }

    /// Rule S7: a heartbeat makes the host `Available` and replaces its metrics.
    pub fn heartbeat(
        &mut self,
        name: &str,
        metrics: HostMetrics,
        now_ms: TimestampMs,
    ) -> Result<(), Error> {
        metrics.validate()?;
        let seq = self.seq_of(name)?;
        let started_ms = self.started_ms;
        let reported_before = self.custom_reporters > 0;
        let is = metrics.custom_load_index.is_some();
        // One look-up of the host does it all. Its load index is recomputed
        // in `update_host` with the custom reporters counted before this
        // heartbeat: right unless the count crosses zero, and then every
        // index is rebuilt below.
        let (was, seen_before, seen) = self.update_host(seq, |h| {
            let was = reports_custom(h);
            let seen_before = watch_key(h, started_ms);
            h.last_heartbeat_ms = Some(now_ms);
            h.metrics = Some(metrics);
            h.logons_since_heartbeat = 0;
            if h.status == HostStatus::Unavailable {
                h.status = HostStatus::Available;
            }
            (was, seen_before, watch_key(h, started_ms))
        });
        self.custom_reporters = self.custom_reporters + usize::from(is) - usize::from(was);
        self.watched.remove(&seen_before);
        self.watched.insert(seen);
        if reported_before != (self.custom_reporters > 0) {
            // H3: the first or last custom reporter changes every other
            // host's index (25 or -1).
            self.rebuild_indexes();
        }
        self.changes.push(Change::Host(name.to_string()));
        Ok(())
    }

    fn watch_key(&self, seq: u64) -> (TimestampMs, u64) {
        watch_key(&self.hosts[&seq], self.started_ms)
    }

    /// Applies the passing of time: Pending sessions older than the pool's
    /// `pendingTimeoutSeconds` end (S4); hosts silent for
    /// `heartbeatTimeoutSeconds` become `Unavailable` (S7). Costs O(1) when
    /// nothing is due, so every connect calls it first.
    pub fn tick(&mut self, now_ms: TimestampMs) {
        let pending_ms = i64::from(self.config.pending_timeout_seconds) * 1000;
        while let Some((since, id)) = self.pending.first() {
            if since + pending_ms > now_ms {
                break;
            }
            let id = id.clone();
            self.end_session(&id);
        }
        let silence_ms = i64::from(self.config.heartbeat_timeout_seconds) * 1000;
        while let Some(&(seen, seq)) = self.watched.first() {
            if seen + silence_ms > now_ms {
                break;
            }
            self.watched.remove(&(seen, seq));
            self.update_host(seq, |h| h.status = HostStatus::Unavailable);
            // Status is derived, not stored: nothing to persist.
        }
    }

    // ---- sessions --------------------------------------------------------

    /// Sets a session `Active` or `Disconnected` (rule S4).
    pub fn set_session_state(
        &mut self,
        id: &str,
        state: SessionState,
        now_ms: TimestampMs,
    ) -> Result<(), Error> {
        if state == SessionState::Pending {
            return Err(Error::InvalidParameter(
                "sessionState: a session can be set Active or Disconnected, not Pending".into(),
            ));
        }
        let s = self.find_session(id)?;
        if s.state == state {
            return Ok(());
        }
        let s = self.remove_session_entry(id);
        self.insert_session(Session {
            state,
            state_since_ms: now_ms,
            ..s
        });
        self.changes.push(Change::Session(id.to_string()));
        Ok(())
    }

    /// Reconciles the broker's sessions on `host` with the host's own full
    /// list (from its agent). The host is the authority on what runs on it:
    /// - a session it reports that the broker did not place is adopted (it
    ///   counts, and its user gets affinity, S1), with an id from `new_id`;
    /// - a Pending session it reports Active becomes Active; a state it
    ///   reports (Active, Disconnected) is taken;
    /// - an Active or Disconnected session it no longer reports has ended
    ///   (logoff); a Pending one is kept until the host shows it or it
    ///   expires (S4), since a logon in progress may not be visible yet.
    ///
    /// Users the host reports twice count once.
    pub fn reconcile(
        &mut self,
        host: &str,
        reported: &[(String, SessionState)],
        now_ms: TimestampMs,
        new_id: &mut dyn FnMut() -> String,
    ) -> Result<(), Error> {
        for (user, _) in reported {
            validate_user("sessions.user", user)?;
        }
        self.find_host(host)?;
        let mut on_host: HashMap<String, String> = self
            .sessions
            .values()
            .filter(|s| s.host == host)
            .map(|s| (user_key(&s.user), s.id.clone()))
            .collect();
        let mut seen = BTreeSet::new();
        for (user, state) in reported {
            let key = user_key(user);
            if !seen.insert(key.clone()) {
                continue;
            }
            match on_host.remove(&key) {
                Some(id) => {
                    let current = self.sessions[&id].state;
                    // The host never turns a session back into Pending.
                    if *state != current && *state != SessionState::Pending {
                        self.set_session_state(&id, *state, now_ms)?;
                    }
                }
                None => {
                    let id = new_id();
                    if id.is_empty() || self.sessions.contains_key(&id) {
                        return Err(Error::Conflict(format!(
                            "session id {id:?} is empty or already in use"
                        )));
                    }
                    self.insert_session(Session {
                        id: id.clone(),
                        host: host.to_string(),
                        user: user.clone(),
                        state: *state,
                        create_time_ms: now_ms,
                        state_since_ms: now_ms,
                    });
                    self.changes.push(Change::Session(id));
                }
            }
        }
        for (_, id) in on_host {
            if self.sessions[&id].state != SessionState::Pending {
                self.end_session(&id);
            }
        }
        Ok(())
    }

    /// Ends a session (logoff).
    pub fn logoff(&mut self, id: &str) -> Result<(), Error> {
        self.find_session(id)?;
        self.end_session(id);
        Ok(())
    }

    fn end_session(&mut self, id: &str) {
        self.remove_session_entry(id);
        self.changes.push(Change::SessionEnded(id.to_string()));
    }

    // ---- placement -------------------------------------------------------

    /// Places a user: affinity (S1), then filter, rank, pick and reserve.
    /// `random` is this placement's randomness (B1); `session_id` names the
    /// session if one is made.
    pub fn connect(
        &mut self,
        req: &ConnectRequest,
        now_ms: TimestampMs,
        random: u64,
        session_id: &str,
    ) -> Result<Placement, Error> {
        self.connect_excluding(req, &[], now_ms, random, session_id)
    }

    /// [`Pool::connect`] that passes over the hosts named in `exclude` for a
    /// new session (the RDP front door's retry after a host could not be
    /// reached, rule R5). A reconnect is never sent elsewhere.
    pub fn connect_excluding(
        &mut self,
        req: &ConnectRequest,
        exclude: &[String],
        now_ms: TimestampMs,
        random: u64,
        session_id: &str,
    ) -> Result<Placement, Error> {
        if let Some(p) = self.check_connect(req, now_ms, session_id)? {
            return Ok(p);
        }
        let seq = match self.config.host_pool_type {
            HostPoolType::Pooled => {
                if self.config.load_balancer_type == LoadBalancerType::LoadIndex {
                    self.pick_load_index(req.requires, exclude)?
                } else {
                    self.pick_pooled(req.requires, exclude, random)?
                }
            }
            HostPoolType::Personal => match self.pick_personal(req)? {
                Chosen::Reconnect(p) => return Ok(p),
                Chosen::Host(seq) => seq,
            },
        };
        Ok(self.reserve(seq, req.user, session_id, now_ms))
    }

    /// What every connect does before a host is chosen, in this order: the
    /// request's fields are checked, the session id must be new, time is
    /// applied (`tick`: S4 expiry, S7 health); then, in a pooled pool, a
    /// `sessionHost` is refused and a user with a session is sent back to
    /// it (S1; the answer is that placement). Personal pools apply S1 in
    /// `pick_personal`, per host.
    fn check_connect(
        &mut self,
        req: &ConnectRequest,
        now_ms: TimestampMs,
        session_id: &str,
    ) -> Result<Option<Placement>, Error> {
        validate_user("user", req.user)?;
        validate_capabilities("requires", req.requires)?;
        if let Some(h) = req.session_host {
            validate_name("sessionHost", h)?;
        }
        if session_id.is_empty() || self.sessions.contains_key(session_id) {
            return Err(Error::Conflict(format!(
                "session id {session_id:?} is empty or already in use"
            )));
        }
        self.tick(now_ms);
        if self.config.host_pool_type != HostPoolType::Pooled {
            return Ok(None);
        }
        if req.session_host.is_some() {
            return Err(Error::InvalidParameter(
                "sessionHost: only Personal host pools let a user choose a host".into(),
            ));
        }
        self.reconnect(req.user, None)
    }

    /// Rule S1 alone, changing nothing: where a connect of `user` (to
    /// `session_host`, in a personal pool) would send them back to their
    /// existing session, if they have one. The broker answers reconnects
    /// from this while its store is unreachable.
    pub fn existing_placement(
        &self,
        user: &str,
        session_host: Option<&str>,
    ) -> Result<Option<Placement>, Error> {
        let only_host = session_host.map(|h| self.seq_of(h)).transpose()?;
        self.reconnect(user, only_host)
    }

    /// Rule S1: the user's existing session (on `only_host` if given).
    fn reconnect(&self, user: &str, only_host: Option<u64>) -> Result<Option<Placement>, Error> {
        let Some(ids) = self.user_sessions.get(&user_key(user)) else {
            return Ok(None);
        };
        let mut found: Option<(&Host, &Session)> = None;
        for id in ids {
            let s = &self.sessions[id];
            let seq = self.host_by_name[&s.host];
            if only_host.is_some_and(|o| o != seq) {
                continue;
            }
            let h = &self.hosts[&seq];
            if found.is_none_or(|(f, _)| h.seq < f.seq) {
                found = Some((h, s));
            }
        }
        let Some((h, s)) = found else {
            return Ok(None);
        };
        if h.status != HostStatus::Available {
            return Err(Error::SessionHostUnavailable(format!(
                "{user} has a session on session host {}, which is {:?}; the session is kept \
                 there and no second session is opened",
                h.spec.name, h.status
            )));
        }
        Ok(Some(Placement {
            session_id: s.id.clone(),
            host: h.spec.name.clone(),
            address: h.spec.address.clone(),
            reconnect: true,
            state: s.state,
        }))
    }

    /// Filter, rank and pick in a pooled pool.
    fn pick_pooled(
        &self,
        requires: &[String],
        exclude: &[String],
        random: u64,
    ) -> Result<u64, Error> {
        let lb = self.config.load_balancer_type;
        let randomized = self.config.breadth_first_randomized;
        let view = self.eligible(requires, exclude);
        pipeline::pick(lb, randomized, &view, random).ok_or_else(|| self.refusal(requires, exclude))
    }

    /// The hosts a new session that `requires` these capabilities may go
    /// to, passing over `exclude` (S2, P4, H6), ranked by (sessions, query
    /// order): the prefix of the open index below the limit when every host
    /// fits and none refuses logons — O(log n) per access, nothing copied —
    /// else that prefix filtered, in O(n).
    fn eligible(&self, requires: &[String], exclude: &[String]) -> View<'_> {
        let below_limit = self.open.rank(&(self.config.max_session_limit, 0));
        let everyone_has = exclude.is_empty()
            && requires
                .iter()
                .all(|c| self.capability_hosts.get(c).copied().unwrap_or(0) == self.hosts.len());
        if everyone_has && !self.any_rejecting(below_limit) {
            return View::Prefix(OpenBelowLimit {
                open: &self.open,
                len: below_limit,
            });
        }
        View::Filtered(
            self.open
                .iter()
                .take(below_limit)
                .filter(|(_, seq)| {
                    let h = &self.hosts[seq];
                    fits(h, requires, exclude) && !self.rejects(h)
                })
                .copied()
                .collect(),
        )
    }

    /// Whether some open host below the limit refuses logons (H6), in
    /// O(log n): a `LoadIndex` pool's bucket 3 holds exactly the open hosts
    /// below the limit that do not refuse.
    fn any_rejecting(&self, below_limit: usize) -> bool {
        self.buckets
            .as_ref()
            .is_some_and(|b| b.third.len() < below_limit)
    }

    /// Rule S3: why nothing fits, counted over every host (a refusal is
    /// rare, so the scan is fine).
    fn refusal(&self, requires: &[String], exclude: &[String]) -> Error {
        let limit = self.config.max_session_limit;
        let mut c = FilterCounts {
            hosts: self.hosts.len(),
            ..FilterCounts::default()
        };
        for h in self.hosts.values() {
            if !has_all(h, requires) {
                c.lacking_capability += 1;
            } else if exclude.contains(&h.spec.name) {
                c.excluded += 1;
            } else if h.status != HostStatus::Available {
                c.unavailable += 1;
            } else if !h.spec.allow_new_session {
                c.drained += 1;
            } else if h.sessions >= limit {
                c.at_limit += 1;
            } else if self.rejects(h) {
                c.rejecting += 1;
            }
        }
        Error::NoSessionHostAvailable(pipeline::explain_refusal(&c, limit, requires))
    }

    /// Rule P7 in a personal pool.
    fn pick_personal(&mut self, req: &ConnectRequest) -> Result<Chosen, Error> {
        let user = req.user;
        let key = user_key(user);
        let owned = self.owners.get(&key);
        let target = match req.session_host {
            Some(name) => {
                let seq = self.seq_of(name)?;
                if !owned.is_some_and(|o| o.contains(&seq)) {
                    return Err(Error::NoPersonalDesktopAssigned(format!(
                        "session host {name} is not assigned to {user}"
                    )));
                }
                Some(seq)
            }
            None => {
                if let Some(p) = self.reconnect(user, None)? {
                    return Ok(Chosen::Reconnect(p));
                }
                owned.and_then(|o| o.first().copied())
            }
        };
        if let Some(seq) = target {
            if let Some(p) = self.reconnect(user, Some(seq))? {
                return Ok(Chosen::Reconnect(p));
            }
            let h = &self.hosts[&seq];
            if h.status != HostStatus::Available {
                return Err(Error::SessionHostUnavailable(format!(
                    "{user}'s session host {} is {:?}",
                    h.spec.name, h.status
                )));
            }
            if !h.spec.allow_new_session {
                return Err(Error::NoSessionHostAvailable(format!(
                    "{user}'s session host {} is in drain mode: allow new sessions on it",
                    h.spec.name
                )));
            }
            return Ok(Chosen::Host(seq));
        }
        if self.config.personal_desktop_assignment_type
            == Some(PersonalDesktopAssignmentType::Direct)
        {
            return Err(Error::NoPersonalDesktopAssigned(format!(
                "no session host of host pool {} is assigned to {user}: an administrator \
                 must assign one",
                self.config.name
            )));
        }
        let Some(&seq) = self.open_unassigned.first() else {
            return Err(Error::NoSessionHostAvailable(format!(
                "host pool {} has no unassigned session host that is available and not in \
                 drain mode: add session hosts",
                self.config.name
            )));
        };
        // Automatic assignment: the user keeps this host after logoff.
        self.update_host(seq, |h| h.spec.assigned_user = Some(user.to_string()));
        self.owners.entry(key).or_default().insert(seq);
        self.changes
            .push(Change::Host(self.hosts[&seq].spec.name.clone()));
        Ok(Chosen::Host(seq))
    }

    /// Rule S4: the Pending session counts at once.
    fn reserve(&mut self, seq: u64, user: &str, id: &str, now_ms: TimestampMs) -> Placement {
        // H7: one more logon the host's last metrics cannot show. Counted
        // before `insert_session`, whose reindex then corrects the index
        // (no index key depends on this count, so unindexing stays exact).
        let h = self.hosts.get_mut(&seq).expect("reserve: host exists");
        h.logons_since_heartbeat = h.logons_since_heartbeat.saturating_add(1);
        let h = &self.hosts[&seq];
        let placement = Placement {
            session_id: id.to_string(),
            host: h.spec.name.clone(),
            address: h.spec.address.clone(),
            reconnect: false,
            state: SessionState::Pending,
        };
        self.insert_session(Session {
            id: id.to_string(),
            host: h.spec.name.clone(),
            user: user.to_string(),
            state: SessionState::Pending,
            create_time_ms: now_ms,
            state_since_ms: now_ms,
        });
        self.random_draws += 1;
        if self.config.load_balancer_type == LoadBalancerType::LoadIndex {
            self.last_served_seq = seq;
        }
        self.changes.push(Change::Session(id.to_string()));
        self.changes.push(Change::Counters);
        placement
    }

    // ---- index bookkeeping ---------------------------------------------

    /// Applies `f` to a host, keeping the indexes true around it.
    ///
    /// The `LoadIndex` buckets are keyed by what almost any change moves
    /// (load index, connecting sessions), so with buckets the host leaves
    /// every index before `f` and rejoins after. Without them the only
    /// index keys are [`open_key`]'s inputs: when `f` leaves those as they
    /// were (a heartbeat of a host that stays Available, say), the host
    /// keeps its place and only its load index is recomputed (shown, not
    /// used to place). Every host sends a heartbeat every 30 s, so this is
    /// most of the engine's work between placements.
    fn update_host<R>(&mut self, seq: u64, f: impl FnOnce(&mut Host) -> R) -> R {
        if self.buckets.is_some() {
            self.unindex(seq);
            let r = f(self.hosts.get_mut(&seq).expect("update_host: host exists"));
            self.reindex(seq);
            return r;
        }
        let any_custom = self.custom_reporters > 0;
        let h = self.hosts.get_mut(&seq).expect("update_host: host exists");
        let before = open_key(h);
        let r = f(h);
        if open_key(h) == before {
            h.load_index = host_load_index(&self.config, any_custom, h);
            return r;
        }
        // What `unindex` removes, by the keys the host had before `f`.
        let (sessions, was_open, _) = before;
        if was_open {
            self.open.remove(&(sessions, seq));
            self.open_unassigned.remove(&seq);
        }
        self.reindex(seq);
        r
    }

    fn unindex(&mut self, seq: u64) {
        let h = &self.hosts[&seq];
        self.open.remove(&(h.sessions, seq));
        self.open_unassigned.remove(&seq);
        if let Some(b) = &mut self.buckets {
            b.first_sorted.remove(&(h.load_index, seq));
            b.first.set(seq as usize, i32::MAX);
            b.second.set(seq as usize, i32::MAX);
            b.third.remove(&third_key(h));
        }
    }

    /// Recomputes the host's load index and puts it back in every index it
    /// belongs to.
    fn reindex(&mut self, seq: u64) {
        self.refresh_load_index(seq);
        let cfg = &self.config;
        let h = &self.hosts[&seq];
        if !is_open(h) {
            return;
        }
        self.open.insert((h.sessions, seq));
        if h.spec.assigned_user.is_none() {
            self.open_unassigned.insert(seq);
        }
        if self.buckets.is_none() || h.sessions >= cfg.max_session_limit || self.rejects(h) {
            return;
        }
        let connecting = cfg.logon_storm_settings.connecting_session_threshold;
        let under_connecting = connecting == 0 || h.connecting_sessions < connecting;
        let standard = cfg
            .standard_capabilities
            .iter()
            .all(|c| h.spec.capabilities.contains(c));
        let key = third_key(h);
        let index = h.load_index;
        let b = self.buckets.as_mut().expect("checked above");
        b.third.insert(key);
        if index >= 0 && under_connecting {
            if standard {
                b.first_sorted.insert((index, seq));
                b.first.set(seq as usize, index);
            } else {
                b.second.set(seq as usize, index);
            }
        }
    }

    /// Recomputes the host's load index.
    fn refresh_load_index(&mut self, seq: u64) {
        let any_custom = self.custom_reporters > 0;
        let h = self
            .hosts
            .get_mut(&seq)
            .expect("refresh_load_index: host exists");
        h.load_index = host_load_index(&self.config, any_custom, h);
    }

    /// H6: a host of a `LoadIndex` pool at or over its load index or
    /// connecting session threshold refuses new logons (its own policy
    /// overrides the pool's values; 0 disables). The load index is the one
    /// H7 corrected (`load_index::compute_corrected` says why), so with
    /// `logonCost` a host refuses once its logons since the last heartbeat
    /// bring it to its threshold.
    fn rejects(&self, h: &Host) -> bool {
        if self.config.load_balancer_type != LoadBalancerType::LoadIndex {
            return false;
        }
        let s = &self.config.load_index_settings;
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

    /// Recomputes every derived index from scratch (after a settings change,
    /// a restore, or a change of custom reporters).
    fn rebuild_indexes(&mut self) {
        self.open = indexset::BTreeSet::new();
        self.open_unassigned.clear();
        self.buckets =
            (self.config.load_balancer_type == LoadBalancerType::LoadIndex).then(Buckets::default);
        let seqs: Vec<u64> = self.hosts.keys().copied().collect();
        for seq in seqs {
            self.reindex(seq);
        }
    }

    fn with_indexes_rebuilt(mut self) -> Pool {
        self.rebuild_indexes();
        self
    }

    /// H5: logon-storm buckets, round robin inside the chosen one.
    fn pick_load_index(&self, requires: &[String], exclude: &[String]) -> Result<u64, Error> {
        let b = self
            .buckets
            .as_ref()
            .expect("a LoadIndex pool keeps its buckets");
        let storm = &self.config.logon_storm_settings;
        let configured = if storm.load_index_threshold == 0 {
            i32::MAX
        } else {
            storm.load_index_threshold as i32
        };
        // Raise the threshold until minHostsInQueue hosts qualify (or no
        // host is left to add): the k-th lowest index, plus one.
        let raised = match b.first_sorted.len() {
            0 => configured,
            n => {
                let k = (storm.min_hosts_in_queue as usize).clamp(1, n);
                let kth = b.first_sorted.get_index(k - 1).expect("k <= n").0;
                configured.max(kth.saturating_add(1))
            }
        };
        let fits = |seq: usize| fits(&self.hosts[&(seq as u64)], requires, exclude);
        let start = self.last_served_seq as usize + 1;
        let found = round_robin(&b.first, start, raised, fits)
            .or_else(|| round_robin(&b.second, start, configured, fits))
            .map(|seq| seq as u64)
            .or_else(|| {
                b.third
                    .iter()
                    .map(|&(_, _, seq)| seq)
                    .find(|&seq| fits(seq as usize))
            });
        found.ok_or_else(|| self.refusal(requires, exclude))
    }

    fn insert_host(&mut self, h: Host) {
        let seq = h.seq;
        self.custom_reporters += usize::from(reports_custom(&h));
        self.host_by_name.insert(h.spec.name.clone(), seq);
        for c in &h.spec.capabilities {
            *self.capability_hosts.entry(c.clone()).or_default() += 1;
        }
        if let Some(u) = &h.spec.assigned_user {
            self.owners.entry(user_key(u)).or_default().insert(seq);
        }
        let watch = h.last_heartbeat_ms.is_some() && h.status == HostStatus::Available;
        self.hosts.insert(seq, h);
        self.reindex(seq);
        if watch {
            self.watched.insert(self.watch_key(seq));
        }
    }

    /// Takes a host out of every map and index; its sessions stay.
    fn remove_host_entry(&mut self, seq: u64) -> Host {
        self.unindex(seq);
        self.watched.remove(&self.watch_key(seq));
        let h = self
            .hosts
            .remove(&seq)
            .expect("remove_host_entry: host exists");
        self.custom_reporters -= usize::from(reports_custom(&h));
        self.host_by_name.remove(&h.spec.name);
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

    fn insert_session(&mut self, s: Session) {
        let seq = self.host_by_name[&s.host];
        let pending = s.state == SessionState::Pending;
        self.update_host(seq, |h| {
            h.sessions += 1;
            if pending {
                h.connecting_sessions += 1;
            }
        });
        if pending {
            self.pending.insert((s.state_since_ms, s.id.clone()));
        }
        self.user_sessions
            .entry(user_key(&s.user))
            .or_default()
            .push(s.id.clone());
        self.sessions.insert(s.id.clone(), s);
    }

    fn remove_session_entry(&mut self, id: &str) -> Session {
        let s = self
            .sessions
            .remove(id)
            .expect("remove_session_entry: session exists");
        let pending = s.state == SessionState::Pending;
        if pending {
            self.pending.remove(&(s.state_since_ms, s.id.clone()));
        }
        let key = user_key(&s.user);
        if let Some(ids) = self.user_sessions.get_mut(&key) {
            ids.retain(|i| i != id);
            if ids.is_empty() {
                self.user_sessions.remove(&key);
            }
        }
        if let Some(&seq) = self.host_by_name.get(&s.host) {
            self.update_host(seq, |h| {
                h.sessions -= 1;
                if pending {
                    h.connecting_sessions -= 1;
                }
            });
        }
        s
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

enum Chosen {
    Reconnect(Placement),
    Host(u64),
}

/// Where a host stands in the watch for silence (S7): its last heartbeat,
/// or the engine's start if that is later.
fn watch_key(h: &Host, started_ms: TimestampMs) -> (TimestampMs, u64) {
    let seen = h
        .last_heartbeat_ms
        .unwrap_or(TimestampMs::MIN)
        .max(started_ms);
    (seen, h.seq)
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

fn reports_custom(h: &Host) -> bool {
    h.metrics
        .as_ref()
        .is_some_and(|m| m.custom_load_index.is_some())
}

/// The first position of `tree` from `start` on, wrapping around to the
/// start, whose value is below `below` and that `fits`.
fn round_robin(
    tree: &MinTree,
    start: usize,
    below: i32,
    fits: impl Fn(usize) -> bool,
) -> Option<usize> {
    let mut from = start;
    while let Some(p) = tree.first_below(from, below) {
        if fits(p) {
            return Some(p);
        }
        from = p + 1;
    }
    let mut from = 0;
    while let Some(p) = tree.first_below(from, below) {
        if p >= start {
            return None;
        }
        if fits(p) {
            return Some(p);
        }
        from = p + 1;
    }
    None
}

/// The host offers every required capability and is not excluded.
fn fits(h: &Host, requires: &[String], exclude: &[String]) -> bool {
    has_all(h, requires) && !exclude.contains(&h.spec.name)
}

fn has_all(h: &Host, requires: &[String]) -> bool {
    requires.iter().all(|c| h.spec.capabilities.contains(c))
}

/// The open hosts below the session limit: a prefix of the index.
struct OpenBelowLimit<'a> {
    open: &'a indexset::BTreeSet<(u32, u64)>,
    len: usize,
}

/// The eligible hosts of a request, ranked ([`Pool::eligible`]).
enum View<'a> {
    /// Every open host below the limit: a prefix of the pool's index.
    Prefix(OpenBelowLimit<'a>),
    /// Some hosts lack a required capability, are excluded or refuse
    /// logons (H6): the filtered `(sessions, seq)` list.
    Filtered(Vec<(u32, u64)>),
}

impl View<'_> {
    /// Whether the host keyed `(sessions, seq)` is in the view, in O(log n).
    fn contains(&self, key: (u32, u64)) -> bool {
        match self {
            View::Prefix(v) => v.open.contains(&key) && v.open.rank(&key) < v.len,
            View::Filtered(v) => v.binary_search(&key).is_ok(),
        }
    }
}

impl Ranked for View<'_> {
    fn len(&self) -> usize {
        match self {
            View::Prefix(v) => v.len(),
            View::Filtered(v) => v.len(),
        }
    }
    fn get(&self, i: usize) -> (u32, u64) {
        match self {
            View::Prefix(v) => v.get(i),
            View::Filtered(v) => v[i],
        }
    }
    fn count_below(&self, sessions: u32) -> usize {
        match self {
            View::Prefix(v) => v.count_below(sessions),
            View::Filtered(v) => v.as_slice().count_below(sessions),
        }
    }
}

impl Ranked for OpenBelowLimit<'_> {
    fn len(&self) -> usize {
        self.len
    }
    fn get(&self, i: usize) -> (u32, u64) {
        *self.open.get_index(i).expect("index within the prefix")
    }
    fn count_below(&self, sessions: u32) -> usize {
        self.open.rank(&(sessions, 0)).min(self.len)
    }
}
