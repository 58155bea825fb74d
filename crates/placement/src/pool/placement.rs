//! Placing a user: affinity (S1), then filter, rank, pick and reserve —
//! pooled pools through `pipeline` (B1, B3, D1) or the `LoadIndex` buckets'
//! round robin (H5), personal pools by assignment (P7) — and the refusal
//! that says why nothing fits (S3).

use super::open::OpenHosts;
use super::{Change, ConnectRequest, Placement, Pool};
use crate::Error;
use crate::load_index::MinTree;
use crate::model::*;
use crate::pipeline::{self, FilterCounts, Ranked};

impl Pool {
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
                if self.effective_load_balancer_type() == LoadBalancerType::LoadIndex {
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

    /// Rule AD4: a connect that may land on session host `host` only (a
    /// host-bound connection ticket): the user's existing session there
    /// (S1), or a new session on `host` when it can take one now (every
    /// filter of a placement: available, not drained, below the limit, the
    /// capabilities, not refusing logons; in a personal pool, assigned to
    /// the user). A user whose session (S1) is on another host, a host that
    /// is gone or that cannot take them is refused: never another host.
    pub fn connect_on_host(
        &mut self,
        req: &ConnectRequest,
        host: &str,
        now_ms: TimestampMs,
        session_id: &str,
    ) -> Result<Placement, Error> {
        let seq = self.seq_of(host)?;
        if self.config.host_pool_type == HostPoolType::Personal {
            let req = ConnectRequest {
                session_host: Some(host),
                ..req.clone()
            };
            return self.connect_excluding(&req, &[], now_ms, 0, session_id);
        }
        if let Some(p) = self.check_connect(req, now_ms, session_id)? {
            if p.host != host {
                return Err(Error::SessionHostUnavailable(format!(
                    "{} has a session on session host {}, not on {host}",
                    req.user, p.host
                )));
            }
            return Ok(p);
        }
        let h = &self.hosts[&seq];
        let why = if !has_all(h, req.requires) {
            Some("lacks a capability the connection requires".to_string())
        } else if h.status != HostStatus::Available {
            Some(format!("is {:?}", h.status))
        } else if !h.spec.allow_new_session {
            Some("is in drain mode".to_string())
        } else if h.sessions >= self.config.max_session_limit {
            Some(format!(
                "is at the session limit ({})",
                self.config.max_session_limit
            ))
        } else if self.rejects(h) {
            Some("refuses new logons (its load index)".to_string())
        } else {
            None
        };
        if let Some(why) = why {
            return Err(Error::NoSessionHostAvailable(format!(
                "session host {host} {why}"
            )));
        }
        Ok(self.reserve(seq, req.user, session_id, now_ms))
    }

    /// What every connect does before a host is chosen, in this order: the
    /// request's fields are checked, the session id must be new, time is
    /// applied (`tick`: S4 expiry, S7 health); the user's unconfirmed
    /// sessions are dropped (S8); then, in a pooled pool, a
    /// `sessionHost` is refused and a user with a session is sent back to
    /// it (S1; the answer is that placement). Personal pools apply S1 in
    /// `pick_personal`, per host.
    pub(super) fn check_connect(
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
        if session_id.is_empty() || self.sessions.contains(session_id) {
            return Err(Error::Conflict(format!(
                "session id {session_id:?} is empty or already in use"
            )));
        }
        self.tick(now_ms);
        self.drop_unconfirmed(req.user);
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

    /// Rule T2: whether `user`, who says they are in `groups`, may get a new
    /// session here. A pool with no entitlements takes everyone; a user
    /// with a session (S1, `session_host` as for a connect) reconnects to it
    /// whatever the lists say, so removing an entitlement moves nobody (an
    /// operator logs that session off). Changes nothing.
    pub fn check_entitled(
        &self,
        user: &str,
        groups: &[String],
        session_host: Option<&str>,
    ) -> Result<(), Error> {
        let c = &self.config;
        if c.entitled_users.is_empty() && c.entitled_groups.is_empty() {
            return Ok(());
        }
        if groups.len() > MAX_ENTITLEMENTS {
            return Err(Error::InvalidParameter(format!(
                "groups: {} entries; at most {}",
                groups.len(),
                MAX_ENTITLEMENTS
            )));
        }
        let key = user_key(user);
        let listed = c.entitled_users.iter().any(|u| user_key(u) == key)
            || groups
                .iter()
                .any(|g| c.entitled_groups.iter().any(|e| e.eq_ignore_ascii_case(g)));
        if listed || self.existing_placement(user, session_host)?.is_some() {
            return Ok(());
        }
        Err(Error::NotEntitled(format!(
            "user {user} is not entitled to host pool {}: it takes new sessions only for the \
             users and groups its entitledUsers and entitledGroups name",
            c.name
        )))
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

    /// Rule S1: the user's existing session (on `only_host` if given). A
    /// session adopted from a host's list and not confirmed is never one
    /// (S8): a host cannot send a user to itself by listing them.
    fn reconnect(&self, user: &str, only_host: Option<u64>) -> Result<Option<Placement>, Error> {
        let mut found: Option<(&Host, &Session)> = None;
        for &slot in self.sessions.user_sessions(user) {
            let e = &self.sessions[slot];
            if e.unconfirmed || only_host.is_some_and(|o| o != e.host) {
                continue;
            }
            let h = &self.hosts[&e.host];
            if found.is_none_or(|(f, _)| h.seq < f.seq) {
                found = Some((h, &e.session));
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
        let lb = self.effective_load_balancer_type();
        let randomized = self.config.breadth_first_randomized;
        let view = self.eligible(requires, exclude);
        pipeline::pick(lb, randomized, &view, random).ok_or_else(|| self.refusal(requires, exclude))
    }

    /// The hosts a new session that `requires` these capabilities may go
    /// to, passing over `exclude` (S2, P4, H6), ranked by (sessions, query
    /// order): the prefix of the open index below the limit when every host
    /// fits and none refuses logons — O(log n) per access, nothing copied —
    /// else that prefix filtered, in O(n).
    pub(super) fn eligible(&self, requires: &[String], exclude: &[String]) -> View<'_> {
        let below_limit = self.open.count_below(self.config.max_session_limit);
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
    pub(super) fn refusal(&self, requires: &[String], exclude: &[String]) -> Error {
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
    pub(super) fn reserve(
        &mut self,
        seq: u64,
        user: &str,
        id: &str,
        now_ms: TimestampMs,
    ) -> Placement {
        // H7: one more logon the host's last metrics cannot show. Counted
        // before `insert_session`, whose reindex then corrects the index
        // (no index key depends on this count, so unindexing stays exact).
        self.hosts.prefetch(seq);
        let h = self.hosts.get_mut(&seq).expect("reserve: host exists");
        h.logons_since_heartbeat = h.logons_since_heartbeat.saturating_add(1);
        let h = &*h;
        let placement = Placement {
            session_id: id.to_string(),
            host: h.spec.name.clone(),
            address: h.spec.address.clone(),
            reconnect: false,
            state: SessionState::Pending,
        };
        self.insert_session_on(
            seq,
            Session {
                id: id.to_string(),
                host: placement.host.clone(),
                user: user.to_string(),
                state: SessionState::Pending,
                create_time_ms: now_ms,
                state_since_ms: now_ms,
                awaiting_logon: true,
            },
            false,
        );
        self.random_draws += 1;
        if self.config.load_balancer_type == LoadBalancerType::LoadIndex {
            self.last_served_seq = seq;
        }
        self.changes.push(Change::Session(id.to_string()));
        self.changes.push(Change::Counters);
        placement
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
        let raised = match b.first_indexes.len() {
            0 => configured,
            n => {
                let k = (storm.min_hosts_in_queue as usize).clamp(1, n);
                let kth = b.first_indexes.kth_lowest(k).expect("k <= n");
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
}

enum Chosen {
    Reconnect(Placement),
    Host(u64),
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
pub(super) struct OpenBelowLimit<'a> {
    open: &'a OpenHosts,
    len: usize,
}

/// The eligible hosts of a request, ranked ([`Pool::eligible`]).
pub(super) enum View<'a> {
    /// Every open host below the limit: a prefix of the pool's index.
    Prefix(OpenBelowLimit<'a>),
    /// Some hosts lack a required capability, are excluded or refuse
    /// logons (H6): the filtered `(sessions, seq)` list.
    Filtered(Vec<(u32, u64)>),
}

impl View<'_> {
    /// Whether the host keyed `(sessions, seq)` is in the view, in O(log n).
    pub(super) fn contains(&self, key: (u32, u64)) -> bool {
        match self {
            View::Prefix(v) => v.open.contains(key.0, key.1) && v.open.rank(key.0, key.1) < v.len,
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
        self.open.get(i).expect("index within the prefix")
    }
    fn count_below(&self, sessions: u32) -> usize {
        self.open.count_below(sessions).min(self.len)
    }
}
