//! Integration tests of the placement engine, one test binary for the crate.
//!
//! Every test goes through the public API (`Pool`, `PoolConfig`, `HostSpec`,
//! `ConnectRequest`), so the engine's internals can change freely. Rules are
//! cited by their number in docs/rules.md. The shared helpers
//! live here: [`World`] (a pool with a clock and session ids) and [`check`]
//! (one table row of a pooled placement: build the hosts, connect, compare).

use placement::{
    ConnectRequest, Error, HostMetrics, HostPoolType, HostSpec, LoadBalancerType,
    MAX_SESSION_LIMIT, Placement, Pool, PoolConfig, SessionState, TimestampMs,
};

mod address;
mod autoscale;
mod breadth;
mod changes;
mod depth;
mod end_reasons;
mod entitlement;
mod health;
mod lifecycle;
mod load_index;
mod personal;
mod picked;
mod power;
mod props;
mod quiet;
mod random;
mod reconcile;
mod reconnect;
mod reference;
mod refusal;
mod requires;
mod restore;
mod stale_index;
mod storm;
mod user_names;
mod validation;

/// When every test's engine starts (any fixed instant will do).
pub const T0: TimestampMs = 1_700_000_000_000;

/// The seed every test pool is made with; the engine only stores it.
pub const SEED: u64 = 7;

/// The pooled algorithms, with `breadthFirstRandomized` folded in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Alg {
    /// B1: BreadthFirst, randomized (the default).
    Breadth,
    /// B3: BreadthFirst with `breadthFirstRandomized: false`.
    Classic,
    /// D1.
    Depth,
    /// H1–H6: the Server Load Index with logon-storm buckets.
    Load,
}

impl Alg {
    pub fn apply(self, c: &mut PoolConfig) {
        match self {
            Alg::Breadth => {
                c.load_balancer_type = LoadBalancerType::BreadthFirst;
                c.breadth_first_randomized = true;
            }
            Alg::Classic => {
                c.load_balancer_type = LoadBalancerType::BreadthFirst;
                c.breadth_first_randomized = false;
            }
            Alg::Depth => c.load_balancer_type = LoadBalancerType::DepthFirst,
            Alg::Load => c.load_balancer_type = LoadBalancerType::LoadIndex,
        }
    }
}

/// A pool, the time it lives at, and a source of unique session ids and
/// user names. Time moves only when a test says so.
#[derive(Clone)]
pub struct World {
    pub pool: Pool,
    pub now_ms: TimestampMs,
    next_session: u64,
    next_user: u64,
}

pub fn rdp() -> Vec<String> {
    vec!["rdp".to_string()]
}

pub fn caps(list: &[&str]) -> Vec<String> {
    list.iter().map(|c| c.to_string()).collect()
}

impl World {
    pub fn new(config: PoolConfig) -> World {
        config.validate().expect("test pool settings are valid");
        World {
            pool: Pool::new(config, SEED, T0),
            now_ms: T0,
            next_session: 1,
            next_user: 1,
        }
    }

    /// A pooled pool with every default but the algorithm.
    pub fn pooled(alg: Alg) -> World {
        let mut c = PoolConfig::new("farm", HostPoolType::Pooled, LoadBalancerType::BreadthFirst);
        alg.apply(&mut c);
        World::new(c)
    }

    /// A pooled pool with the given hosts (no sessions), in query order.
    pub fn with_hosts(alg: Alg, names: &[&str]) -> World {
        let mut w = World::pooled(alg);
        for n in names {
            w.add_host(n);
        }
        w
    }

    pub fn add_host(&mut self, name: &str) {
        self.add_spec(host_spec(name, &[]));
    }

    pub fn add_spec(&mut self, spec: HostSpec) {
        self.pool
            .upsert_host(spec, self.now_ms)
            .expect("host registers");
    }

    /// Changes the pool's settings (rule P3: any time) and answers the warnings.
    pub fn configure(&mut self, f: impl FnOnce(&mut PoolConfig)) -> Vec<String> {
        let mut c = self.pool.config().clone();
        f(&mut c);
        self.pool.set_config(c).expect("settings are accepted")
    }

    pub fn set_limit(&mut self, limit: u32) {
        self.configure(|c| c.max_session_limit = limit);
    }

    pub fn set_alg(&mut self, alg: Alg) {
        self.configure(|c| alg.apply(c));
    }

    /// A session id never used before in this world.
    pub fn session_id(&mut self) -> String {
        let id = format!("s{}", self.next_session);
        self.next_session += 1;
        id
    }

    /// A user name never used before in this world.
    pub fn fresh_user(&mut self) -> String {
        let u = format!("user{}@contoso.com", self.next_user);
        self.next_user += 1;
        u
    }

    pub fn connect(&mut self, user: &str, random: u64) -> Result<Placement, Error> {
        self.connect_req(
            &ConnectRequest {
                user,
                ..ConnectRequest::default()
            },
            random,
        )
    }

    pub fn connect_req(&mut self, req: &ConnectRequest, random: u64) -> Result<Placement, Error> {
        let id = self.session_id();
        self.pool.connect(req, self.now_ms, random, &id)
    }

    /// Confirms a session (S4) at the current time.
    pub fn set_state(&mut self, id: &str, state: SessionState) {
        self.pool
            .set_session_state(id, state, self.now_ms)
            .expect("session exists");
    }

    pub fn advance_ms(&mut self, ms: i64) {
        self.now_ms += ms;
    }

    /// Moves the clock and lets the engine see it (S4, S7).
    pub fn tick_after_ms(&mut self, ms: i64) {
        self.now_ms += ms;
        self.pool.tick(self.now_ms);
    }

    pub fn heartbeat(&mut self, host: &str) {
        self.pool
            .heartbeat(host, HostMetrics::default(), self.now_ms)
            .expect("host exists");
    }

    pub fn set_drained(&mut self, host: &str, drained: bool) {
        let mut spec = self.pool.host(host).expect("host exists").spec.clone();
        spec.allow_new_session = !drained;
        self.pool
            .upsert_host(spec, self.now_ms)
            .expect("host updates");
    }

    pub fn sessions_on(&self, host: &str) -> u32 {
        self.pool.host(host).expect("host exists").sessions
    }

    /// Session counts of every host, in query order.
    pub fn counts(&self) -> Vec<(String, u32)> {
        self.pool
            .hosts()
            .map(|h| (h.spec.name.clone(), h.sessions))
            .collect()
    }

    /// Puts `n` new `Active` sessions of fresh users on `host`, through
    /// ordinary connects: every other host is drained meanwhile, the limit
    /// lifted, and both put back afterwards.
    pub fn fill(&mut self, host: &str, n: u32) {
        self.place_on(host, n, SessionState::Active);
    }

    /// Puts `n` new sessions of fresh users on `host` and leaves them in
    /// `state` (`Pending` ones count as connecting sessions, H5/H6), through
    /// ordinary connects: every other host is drained meanwhile, the limit
    /// lifted and the algorithm set to classic BreadthFirst (so no `LoadIndex`
    /// threshold refuses them and the round robin's last served host stays
    /// what it was), and all of it put back afterwards. Answers the session ids.
    pub fn place_on(&mut self, host: &str, n: u32, state: SessionState) -> Vec<String> {
        let config = self.pool.config().clone();
        let others: Vec<(String, bool)> = self
            .pool
            .hosts()
            .filter(|h| h.spec.name != host)
            .map(|h| (h.spec.name.clone(), h.spec.allow_new_session))
            .collect();
        let own = self
            .pool
            .host(host)
            .expect("host exists")
            .spec
            .allow_new_session;
        for (o, _) in &others {
            self.set_drained(o, true);
        }
        self.set_drained(host, false);
        self.configure(|c| {
            c.max_session_limit = MAX_SESSION_LIMIT;
            Alg::Classic.apply(c);
        });
        let mut ids = Vec::new();
        for _ in 0..n {
            let user = self.fresh_user();
            let p = self
                .connect(&user, 0)
                .expect("the only open host takes the session");
            assert_eq!(p.host, host);
            if state != SessionState::Pending {
                self.set_state(&p.session_id, state);
            }
            ids.push(p.session_id);
        }
        for (o, allowed) in &others {
            self.set_drained(o, !allowed);
        }
        self.set_drained(host, !own);
        self.pool.set_config(config).expect("settings restored");
        self.pool.take_changes();
        ids
    }

    /// A heartbeat carrying `metrics` (H2, H3), at the current time.
    pub fn heartbeat_with(&mut self, host: &str, metrics: HostMetrics) -> Result<(), Error> {
        self.pool.heartbeat(host, metrics, self.now_ms)
    }

    /// The host's Server Load Index as the pool shows it (H1–H3).
    pub fn load_index(&self, host: &str) -> i32 {
        self.pool.host(host).expect("host exists").load_index
    }

    /// Every host's Server Load Index, in query order.
    pub fn load_indexes(&self) -> Vec<(String, i32)> {
        self.pool
            .hosts()
            .map(|h| (h.spec.name.clone(), h.load_index))
            .collect()
    }

    /// The host's connecting (Pending) sessions.
    pub fn connecting(&self, host: &str) -> u32 {
        self.pool
            .host(host)
            .expect("host exists")
            .connecting_sessions
    }

    /// `n` connects of fresh users; answers the host each one was placed on
    /// (every connect must succeed).
    pub fn connect_fresh(&mut self, n: usize) -> Vec<String> {
        (0..n)
            .map(|_| {
                let user = self.fresh_user();
                let p = self.connect(&user, 0).expect("a host takes the session");
                assert!(!p.reconnect, "a fresh user is not a reconnect");
                p.host
            })
            .collect()
    }

    /// Makes hosts `Unavailable` (S7): they heartbeat now, then nobody hears
    /// from them for the pool's heartbeat timeout. Hosts that never sent a
    /// heartbeat stay `Available`; hosts that did and are not listed here
    /// must not exist (they would go silent too).
    pub fn make_unavailable(&mut self, hosts: &[&str]) {
        for h in hosts {
            self.heartbeat(h);
        }
        let timeout_ms = i64::from(self.pool.config().heartbeat_timeout_seconds) * 1000;
        self.tick_after_ms(timeout_ms);
    }

    /// Rule S6, checked from the outside: every host's session count and
    /// connecting count match the sessions on it, and no user holds two
    /// sessions in a pooled pool.
    pub fn assert_consistent(&self) {
        assert_consistent(&self.pool);
    }
}

pub fn assert_consistent(pool: &Pool) {
    for h in pool.hosts() {
        let on: Vec<_> = pool.sessions().filter(|s| s.host == h.spec.name).collect();
        assert_eq!(
            h.sessions as usize,
            on.len(),
            "session count of {}",
            h.spec.name
        );
        let pending = on
            .iter()
            .filter(|s| s.state == SessionState::Pending)
            .count();
        assert_eq!(
            h.connecting_sessions as usize, pending,
            "connecting sessions of {}",
            h.spec.name
        );
        let disconnected = on
            .iter()
            .filter(|s| s.state == SessionState::Disconnected)
            .count();
        assert_eq!(
            h.disconnected_sessions as usize, disconnected,
            "disconnected sessions of {}",
            h.spec.name
        );
    }
    for h in pool.hosts() {
        let first = pool
            .hosts()
            .find(|o| o.spec.address == h.spec.address)
            .map(|o| &o.spec.name);
        assert_eq!(
            pool.host_at(&h.spec.address).map(|o| &o.spec.name),
            first,
            "the host at {} (rule R3)",
            h.spec.address
        );
    }
    let on_known_host = pool
        .sessions()
        .filter(|s| pool.host(&s.host).is_some())
        .count();
    assert_eq!(
        on_known_host,
        pool.session_count(),
        "every session is on a host"
    );
    if pool.config().host_pool_type == HostPoolType::Pooled {
        let mut users: Vec<String> = pool
            .sessions()
            .map(|s| placement::user_key(&s.user))
            .collect();
        users.sort();
        let n = users.len();
        users.dedup();
        assert_eq!(users.len(), n, "a user holds two sessions in a pooled pool");
    }
}

/// A host at `name.farm.local:3389` offering `rdp` plus `extra`.
pub fn host_spec(name: &str, extra: &[&str]) -> HostSpec {
    let mut spec = HostSpec::new(name, &format!("{name}.farm.local:3389"));
    spec.capabilities
        .extend(extra.iter().map(|c| c.to_string()));
    spec
}

/// What a table row expects of a connect.
#[derive(Clone, Copy, Debug)]
pub enum Want {
    /// A new session on this host.
    Host(&'static str),
    /// `NoSessionHostAvailable` with exactly this message (rule S3).
    Refused(&'static str),
}

/// One table row of a pooled placement for a user with no session.
#[derive(Clone, Copy, Debug)]
pub struct Case {
    pub name: &'static str,
    /// Hosts in query order, as `name:sessions` with optional flags:
    /// `:drained` (allowNewSession false), `:down` (Unavailable, S7) and
    /// `:+cap` (offers `cap` besides `rdp`). For example `"a:3 b:5:drained c:0:+gpu"`.
    pub hosts: &'static str,
    pub alg: Alg,
    pub limit: u32,
    pub requires: &'static [&'static str],
    pub random: u64,
    pub want: Want,
}

impl Case {
    /// The defaults rows start from: classic BreadthFirst, no limit,
    /// nothing required, random 0.
    pub const DEFAULT: Case = Case {
        name: "",
        hosts: "",
        alg: Alg::Classic,
        limit: MAX_SESSION_LIMIT,
        requires: &[],
        random: 0,
        want: Want::Host("?"),
    };
}

/// Builds the pool a row describes, through the public API only.
pub fn build(alg: Alg, limit: u32, hosts: &str) -> World {
    let mut w = World::pooled(Alg::Classic);
    let mut fills = Vec::new();
    let mut drained = Vec::new();
    let mut down = Vec::new();
    for token in hosts.split_whitespace() {
        let mut parts = token.split(':');
        let name = parts.next().expect("host name");
        let sessions: u32 = parts
            .next()
            .and_then(|s| s.parse().ok())
            .unwrap_or_else(|| panic!("{token}: want name:sessions"));
        let mut extra = Vec::new();
        for flag in parts {
            match flag {
                "drained" => drained.push(name),
                "down" => down.push(name),
                f if f.starts_with('+') => extra.push(&f[1..]),
                f => panic!("{token}: unknown flag {f}"),
            }
        }
        w.add_spec(host_spec(name, &extra));
        fills.push((name, sessions));
    }
    for (name, n) in fills {
        w.fill(name, n);
    }
    for name in drained {
        w.set_drained(name, true);
    }
    if !down.is_empty() {
        w.make_unavailable(&down);
    }
    w.configure(|c| {
        alg.apply(c);
        c.max_session_limit = limit;
    });
    w.pool.take_changes();
    w
}

/// Runs one table row: a new user connects, and the outcome must be the row's.
pub fn check(case: &Case) {
    let mut w = build(case.alg, case.limit, case.hosts);
    let before = w.counts();
    let requires = caps(case.requires);
    let got = w.connect_req(
        &ConnectRequest {
            user: "newcomer@contoso.com",
            requires: &requires,
            session_host: None,
        },
        case.random,
    );
    let ctx = format!(
        "case {:?} (hosts {:?}, counts before {before:?})",
        case.name, case.hosts
    );
    match (case.want, got) {
        (Want::Host(h), Ok(p)) => {
            assert_eq!(p.host, h, "{ctx}");
            assert!(!p.reconnect, "{ctx}: a new user is not a reconnect");
            assert_eq!(p.state, SessionState::Pending, "{ctx}: S4");
            // S4: the Pending session counts at once.
            let want_before = before.iter().find(|(n, _)| n == h).unwrap().1;
            assert_eq!(w.sessions_on(h), want_before + 1, "{ctx}: S4");
            // S6: a placement never takes a host over the limit.
            assert!(w.sessions_on(h) <= case.limit, "{ctx}: S6");
        }
        (Want::Refused(msg), Err(e)) => {
            assert_eq!(e, Error::NoSessionHostAvailable(msg.to_string()), "{ctx}");
            assert_eq!(w.counts(), before, "{ctx}: a refusal changes nothing");
        }
        (want, got) => panic!("{ctx}: want {want:?}, got {got:?}"),
    }
    w.assert_consistent();
}

/// Runs a whole table.
pub fn check_all(cases: &[Case]) {
    for case in cases {
        check(case);
    }
}

/// Metrics with only a CPU percentage (H2).
pub fn cpu(percent: f64) -> HostMetrics {
    HostMetrics {
        cpu_percent: Some(percent),
        ..HostMetrics::default()
    }
}

/// Metrics with only a custom load index (H3).
pub fn custom(value: i64) -> HostMetrics {
    HostMetrics {
        custom_load_index: Some(value),
        ..HostMetrics::default()
    }
}

/// The random value that `pipeline::uniform_below(r, k)` maps to index `i`
/// (the smallest such value): `ceil(i * 2^64 / k)`.
pub fn random_for(i: usize, k: usize) -> u64 {
    let v = ((i as u128) << 64).div_ceil(k as u128);
    u64::try_from(v).expect("i < k")
}
