//! A broker in the test's own process, on time the test moves (feature
//! `testing`): the way to prove a rule that depends on time in
//! milliseconds instead of waiting for it.
//!
//! [`Kit::open`] builds a [`Broker`] on a [`MemoryStore`] with
//! [`Clock::manual`] at [`T0`], starts its ticker as `serve` does, and
//! keeps the API's router to call in process (tower's `oneshot`: no
//! socket, no TLS), with the admin token [`ADMIN_TOKEN`]. It is meant for
//! `#[tokio::test(start_paused = true)]`: tokio's time is then paused too,
//! and [`Kit::advance`] moves both clocks together, so that a rule sees
//! the date move (the manual clock) and whatever the broker waits out
//! (its ticker, the writer's pauses) fires as it would (tokio's time).
//! While the test awaits, paused time jumps to the next timer only once
//! every task is idle, so nothing the broker does is cut short.
//! [`Kit::hold`] moves tokio's time alone: the broker's timers fire again
//! at one date, to see what it decides at exactly that millisecond.
//!
//! [`Kit::reopen`] is a restart: the broker is dropped without a word
//! (as `kill -9` would stop it) and a new one opened on the same storage
//! (the store's clones share it) and the same clock, so it loads exactly
//! what the first one made durable. Each broker reaches the storage
//! through a fence the restart closes: what the old one still had under
//! way in this process (a power driver's outcome, a write still queued)
//! can no longer change it, as nothing of a killed process can.
//!
//! Power drivers are real: a pool's `command` driver runs its command
//! (say one that appends `$DESKBROKER_ACTION $DESKBROKER_HOST` to a
//! file). A process runs on the wall clock, not on tokio's paused time,
//! so [`Kit::power_settled`] and [`Kit::until`] wait for it in real time
//! (polling, for at most [`PATIENCE`]) while holding tokio's time still:
//! a driver's timeout cannot fire early because the test jumped ahead.
//!
//! The helpers ([`Kit::create_pool`], [`Kit::register_host`],
//! [`Kit::heartbeat`], [`Kit::connect`], [`Kit::sessions`], …) are the
//! steps most rule tests start with, each through the API as a client
//! would take it, and each asserting that the broker accepted it.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::http::{HeaderMap, Request, header};
use serde_json::{Value, json};
use store::{
    AuditQuery, AuditRow, MemoryStore, Mutation, ScalingAction, ScalingActionQuery, Snapshot,
    Store, StoreError,
};
use tower::ServiceExt;

use crate::clock::Clock;
use crate::state::{Broker, Settings};

/// The date every kit starts at: 2026-12-01 00:00:00 UTC.
pub const T0: i64 = 1_796_083_200_000;
/// The admin token of every kit's broker.
pub const ADMIN_TOKEN: &str = "testkit-admin-token-0123456789abcdef";
/// Largest answer body read.
const MAX_ANSWER_BYTES: usize = 16 << 20;
/// The longest a kit waits, on the wall clock, for what runs outside
/// tokio's time (a power command's process).
pub const PATIENCE: Duration = Duration::from_secs(30);
/// How often such a wait looks again.
const REAL_POLL: Duration = Duration::from_millis(5);

/// A broker in process, its store, its clock and its API.
pub struct Kit {
    store: MemoryStore,
    /// Open while the current broker may write; closed by a restart.
    fence: Arc<AtomicBool>,
    settings: Settings,
    broker: Arc<Broker>,
    router: Router,
    ticker: tokio::task::JoinHandle<()>,
}

impl Drop for Kit {
    fn drop(&mut self) {
        self.ticker.abort();
    }
}

impl Kit {
    /// A broker with the default settings (no doors, no portal) on an
    /// empty store, at [`T0`].
    pub async fn open() -> Kit {
        Kit::open_with(|_| {}).await
    }

    /// As [`Kit::open`], with `adjust` applied to the settings first (the
    /// admin token and the clock are the kit's; leave them).
    pub async fn open_with(adjust: impl FnOnce(&mut Settings)) -> Kit {
        let mut settings = Settings {
            clock: Clock::manual(T0),
            ..Settings::new(ADMIN_TOKEN)
        };
        adjust(&mut settings);
        let store = MemoryStore::new();
        let fence = Arc::new(AtomicBool::new(true));
        let (broker, router, ticker) = start(&store, &fence, &settings).await;
        Kit {
            store,
            fence,
            settings,
            broker,
            router,
            ticker,
        }
    }

    /// The broker (its services, its core).
    pub fn broker(&self) -> &Arc<Broker> {
        &self.broker
    }

    /// The clock every rule of the broker reads.
    pub fn clock(&self) -> &Clock {
        &self.settings.clock
    }

    /// Now, by the broker's clock (milliseconds since the Unix epoch).
    pub fn now_ms(&self) -> i64 {
        self.settings.clock.now_ms()
    }

    /// The storage (a clone: the same tables).
    pub fn store(&self) -> MemoryStore {
        self.store.clone()
    }

    /// The API's router, to drive with `oneshot` directly.
    pub fn router(&self) -> Router {
        self.router.clone()
    }

    /// Moves time on by `by`: the broker's clock and tokio's (paused)
    /// time together, a tick of the broker's ticker at most at a time, so
    /// that each tick sees the date it would have seen; then lets one more
    /// tick run at the final date (tokio's time then leads the clock by
    /// [`crate::TICK_INTERVAL`]: only the clock decides rules).
    pub async fn advance(&self, by: Duration) {
        let mut left = by;
        while !left.is_zero() {
            let step = left.min(crate::TICK_INTERVAL);
            self.settings.clock.advance(step);
            tokio::time::sleep(step).await;
            left -= step;
        }
        self.settle().await;
    }

    /// Lets the broker finish what it was doing and run one tick, without
    /// moving its clock.
    pub async fn settle(&self) {
        tokio::time::sleep(crate::TICK_INTERVAL).await;
    }

    /// Lets tokio's time run on by `by` while the broker's clock stands
    /// still, then settles: whatever the broker does on its timers (its
    /// ticker, the plans' evaluations every `--autoscale-interval`, a power
    /// driver's pause between attempts) runs again, all at the same date.
    /// So a test sees what the broker decides at exactly this millisecond.
    pub async fn hold(&self, by: Duration) {
        tokio::time::sleep(by).await;
        self.settle().await;
    }

    /// A restart on the same store: the broker stops without flushing
    /// anything (as under `kill -9`; what it acknowledged is already
    /// durable), and a new one loads what the store holds, on the same
    /// clock and settings.
    pub async fn reopen(&mut self) {
        self.ticker.abort();
        // Whatever the old broker still runs writes nothing from now on.
        self.fence.store(false, Ordering::SeqCst);
        self.fence = Arc::new(AtomicBool::new(true));
        let (broker, router, ticker) = start(&self.store, &self.fence, &self.settings).await;
        // The old broker's last references go with these: its writer ends
        // once its queue is empty.
        self.broker = broker;
        self.router = router;
        self.ticker = ticker;
        tokio::task::yield_now().await;
    }

    /// Calls the API as the admin: the answer's status and JSON body
    /// (`Null` when it has none or it is not JSON).
    pub async fn call(&self, method: &str, path: &str, body: Option<Value>) -> (u16, Value) {
        self.call_as(Some(ADMIN_TOKEN), method, path, body).await
    }

    /// Calls the API with `bearer` as the token (None: no
    /// `Authorization` header): the answer's status and JSON body (`Null`
    /// when it has none or it is not JSON).
    pub async fn call_as(
        &self,
        bearer: Option<&str>,
        method: &str,
        path: &str,
        body: Option<Value>,
    ) -> (u16, Value) {
        let (status, bytes) = self.request(bearer, method, path, body).await;
        (
            status,
            serde_json::from_slice(&bytes).unwrap_or(Value::Null),
        )
    }

    /// `GET path` as the admin, asserting a 200: the body as text (a
    /// connection file, the metrics).
    pub async fn text(&self, path: &str) -> String {
        let (status, bytes) = self.request(Some(ADMIN_TOKEN), "GET", path, None).await;
        let text = String::from_utf8_lossy(&bytes).into_owned();
        assert_eq!(status, 200, "GET {path} answered {status}: {text}");
        text
    }

    /// Calls the API with `bearer` as the token: the answer's status and
    /// body as it came.
    pub async fn request(
        &self,
        bearer: Option<&str>,
        method: &str,
        path: &str,
        body: Option<Value>,
    ) -> (u16, Vec<u8>) {
        let (status, _, bytes) = self.exchange(None, bearer, method, path, body).await;
        (status, bytes)
    }

    /// Calls the API with `bearer` as the token: the answer's status,
    /// headers (a `Retry-After`, say) and JSON body (`Null` when it has
    /// none or it is not JSON).
    pub async fn call_with_headers(
        &self,
        bearer: Option<&str>,
        method: &str,
        path: &str,
        body: Option<Value>,
    ) -> (u16, HeaderMap, Value) {
        let (status, headers, bytes) = self.exchange(None, bearer, method, path, body).await;
        let v = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
        (status, headers, v)
    }

    /// Calls the API with `bearer` as the token from the client address
    /// `source`, as the listener hands a request on (what the audit log
    /// records as its source, and what the limits per source count): the
    /// answer's status and JSON body (`Null` when it has none or it is not
    /// JSON). The other calls come from no address, as in-process calls do.
    pub async fn call_from(
        &self,
        source: SocketAddr,
        bearer: Option<&str>,
        method: &str,
        path: &str,
        body: Option<Value>,
    ) -> (u16, Value) {
        let (status, _, bytes) = self
            .exchange(Some(source), bearer, method, path, body)
            .await;
        (
            status,
            serde_json::from_slice(&bytes).unwrap_or(Value::Null),
        )
    }

    /// One request through the router, from `source` if any: the answer's
    /// status, headers and body as it came.
    async fn exchange(
        &self,
        source: Option<SocketAddr>,
        bearer: Option<&str>,
        method: &str,
        path: &str,
        body: Option<Value>,
    ) -> (u16, HeaderMap, Vec<u8>) {
        let mut request = Request::builder().method(method).uri(path);
        if let Some(token) = bearer {
            request = request.header(header::AUTHORIZATION, format!("Bearer {token}"));
        }
        let request = match body {
            Some(v) => request
                .header(header::CONTENT_TYPE, "application/json")
                .body(Body::from(v.to_string())),
            None => request.body(Body::empty()),
        }
        .unwrap_or_else(|e| panic!("{method} {path}: not a request: {e}"));
        let mut request = request;
        if let Some(addr) = source {
            request
                .extensions_mut()
                .insert(axum::extract::ConnectInfo(addr));
        }
        let answer = self
            .router
            .clone()
            .oneshot(request)
            .await
            .unwrap_or_else(|e| match e {});
        let status = answer.status().as_u16();
        let headers = answer.headers().clone();
        let bytes = axum::body::to_bytes(answer.into_body(), MAX_ANSWER_BYTES)
            .await
            .unwrap_or_else(|e| panic!("{method} {path}: cannot read the answer: {e}"));
        (status, headers, bytes.to_vec())
    }

    /// Calls the API as the admin and asserts the answer's status;
    /// answers its body.
    pub async fn ok(&self, method: &str, path: &str, body: Option<Value>, status: u16) -> Value {
        let (got, v) = self.call(method, path, body).await;
        assert_eq!(got, status, "{method} {path} answered {got}: {v}");
        v
    }

    /// Creates pool `name` with `body` (its `PUT`), and answers it.
    pub async fn create_pool(&self, name: &str, body: Value) -> Value {
        self.ok("PUT", &format!("/api/v1/hostPools/{name}"), Some(body), 201)
            .await
    }

    /// Changes settings of pool `name` (its `PATCH`), and answers it.
    pub async fn patch_pool(&self, name: &str, body: Value) -> Value {
        self.ok(
            "PATCH",
            &format!("/api/v1/hostPools/{name}"),
            Some(body),
            200,
        )
        .await
    }

    /// Calls the API as the admin and asserts a refusal: `status` with the
    /// error `code`; answers the body.
    pub async fn refused(
        &self,
        method: &str,
        path: &str,
        body: Option<Value>,
        status: u16,
        code: &str,
    ) -> Value {
        let (got, v) = self.call(method, path, body).await;
        assert_eq!(
            (got, v["error"]["code"].as_str()),
            (status, Some(code)),
            "{method} {path}: {v}"
        );
        v
    }

    /// Creates the pooled pool `name`, `lb` balanced with `limit` sessions
    /// a host, and `hosts` hosts h1… at 10.0.0.1:3389… (added by the
    /// admin, no agents).
    pub async fn pool_with_hosts(&self, name: &str, lb: &str, limit: u32, hosts: usize) {
        self.create_pool(
            name,
            json!({"hostPoolType": "Pooled", "loadBalancerType": lb, "maxSessionLimit": limit}),
        )
        .await;
        for i in 1..=hosts {
            self.ok(
                "PUT",
                &format!("/api/v1/hostPools/{name}/sessionHosts/h{i}"),
                Some(json!({"address": format!("10.0.0.{i}:3389")})),
                201,
            )
            .await;
        }
    }

    /// A new registration token for `pool`, living `expires_in_seconds`.
    pub async fn registration_token(&self, pool: &str, expires_in_seconds: u64) -> String {
        let v = self
            .ok(
                "POST",
                &format!("/api/v1/hostPools/{pool}/registrationToken"),
                Some(json!({ "expiresInSeconds": expires_in_seconds })),
                200,
            )
            .await;
        v["token"].as_str().expect("a token").to_string()
    }

    /// Registers session host `host` at `address` in `pool` with a
    /// registration token of its own, as an agent does; answers the host's
    /// credential.
    pub async fn register_host(&self, pool: &str, host: &str, address: &str) -> String {
        let token = self.registration_token(pool, 3600).await;
        let (status, v) = self
            .call_as(
                None,
                "POST",
                "/api/v1/register",
                Some(json!({"token": token, "name": host, "address": address})),
            )
            .await;
        assert!(
            status == 201 || status == 200,
            "registering {pool}/{host} answered {status}: {v}"
        );
        v["hostCredential"]
            .as_str()
            .expect("a host credential")
            .to_string()
    }

    /// A heartbeat of `pool`/`host` with its credential and `body` (its
    /// metrics, sessions): the answer's status and body.
    pub async fn heartbeat(
        &self,
        pool: &str,
        host: &str,
        credential: &str,
        body: Value,
    ) -> (u16, Value) {
        self.call_as(
            Some(credential),
            "POST",
            &format!("/api/v1/hostPools/{pool}/sessionHosts/{host}/heartbeat"),
            Some(body),
        )
        .await
    }

    /// Connects `user` to `pool` as the admin; answers the placement.
    pub async fn connect(&self, pool: &str, user: &str) -> Value {
        self.ok(
            "POST",
            &format!("/api/v1/hostPools/{pool}/connect"),
            Some(json!({ "user": user })),
            200,
        )
        .await
    }

    /// Sets the state of session `id` of `pool` (`Active`, `Disconnected`).
    pub async fn set_state(&self, pool: &str, id: &str, state: &str) -> Value {
        self.ok(
            "PATCH",
            &format!("/api/v1/hostPools/{pool}/userSessions/{id}"),
            Some(json!({ "sessionState": state })),
            200,
        )
        .await
    }

    /// Connects `user` to `pool` and sets the session's state: answers
    /// its id.
    pub async fn place(&self, pool: &str, user: &str, state: &str) -> String {
        let placed = self.connect(pool, user).await;
        let id = placed["sessionId"]
            .as_str()
            .expect("a session id")
            .to_string();
        self.set_state(pool, &id, state).await;
        id
    }

    /// Every session of `pool`, as the API lists them.
    pub async fn sessions(&self, pool: &str) -> Vec<Value> {
        let v = self
            .ok(
                "GET",
                &format!("/api/v1/hostPools/{pool}/userSessions"),
                None,
                200,
            )
            .await;
        v["value"].as_array().cloned().unwrap_or_default()
    }

    /// The users with a session in `pool` and their states, sorted.
    pub async fn states(&self, pool: &str) -> Vec<(String, String)> {
        let mut v: Vec<(String, String)> = self
            .sessions(pool)
            .await
            .iter()
            .map(|s| {
                (
                    s["userPrincipalName"].as_str().unwrap_or("").to_string(),
                    s["sessionState"].as_str().unwrap_or("").to_string(),
                )
            })
            .collect();
        v.sort();
        v
    }

    /// Session host `host` of `pool`, as the API shows it.
    pub async fn host(&self, pool: &str, host: &str) -> Value {
        self.ok(
            "GET",
            &format!("/api/v1/hostPools/{pool}/sessionHosts/{host}"),
            None,
            200,
        )
        .await
    }

    /// The power state of `host` in `pool`, as the API shows it.
    pub async fn power_state(&self, pool: &str, host: &str) -> String {
        let h = self.host(pool, host).await;
        h["powerState"].as_str().unwrap_or_default().to_string()
    }

    /// The record of `pool`'s power and scaling actions, newest first.
    pub async fn scaling_actions(&self, pool: &str) -> Vec<Value> {
        let v = self
            .ok(
                "GET",
                &format!("/api/v1/hostPools/{pool}/scalingActions"),
                None,
                200,
            )
            .await;
        v["value"].as_array().cloned().unwrap_or_default()
    }

    /// Waits until no action of `pool` is `Pending` (its drivers have
    /// answered and the outcomes are durable), on the wall clock for at
    /// most [`PATIENCE`], holding tokio's time still meanwhile; answers
    /// the record, newest first.
    pub async fn power_settled(&self, pool: &str) -> Vec<Value> {
        let deadline = std::time::Instant::now() + PATIENCE;
        loop {
            let actions = self.scaling_actions(pool).await;
            if actions.iter().all(|a| a["outcome"] != "Pending") {
                return actions;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "actions of {pool} stayed Pending for {PATIENCE:?}: {actions:?}"
            );
            real_pause().await;
        }
    }

    /// As [`Kit::power_settled`], for drivers that also wait on tokio's
    /// time (a retry's pause, a command's timeout): whenever a few polls
    /// found an action still Pending, time moves on by `step` (clock and
    /// tokio's together), then the kit looks again.
    pub async fn power_settled_over_time(&self, pool: &str, step: Duration) -> Vec<Value> {
        self.power_settled_stepping(pool, step, true).await
    }

    /// As [`Kit::power_settled_over_time`], with the broker's clock
    /// standing still: tokio's time moves on by `step` ([`Kit::hold`]), so
    /// a driver's pauses between attempts pass, and every outcome is
    /// recorded at the date the action began.
    pub async fn power_settled_holding_clock(&self, pool: &str, step: Duration) -> Vec<Value> {
        self.power_settled_stepping(pool, step, false).await
    }

    /// Waits until no action of `pool` is `Pending`, moving tokio's time
    /// on by `step` whenever a few polls found one, and the clock with it
    /// when `with_clock`.
    async fn power_settled_stepping(
        &self,
        pool: &str,
        step: Duration,
        with_clock: bool,
    ) -> Vec<Value> {
        let deadline = std::time::Instant::now() + PATIENCE;
        loop {
            for _ in 0..4 {
                let actions = self.scaling_actions(pool).await;
                if actions.iter().all(|a| a["outcome"] != "Pending") {
                    return actions;
                }
                real_pause().await;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "actions of {pool} stayed Pending for {PATIENCE:?}: {:?}",
                self.scaling_actions(pool).await
            );
            if with_clock {
                self.advance(step).await;
            } else {
                self.hold(step).await;
            }
        }
    }

    /// A new API credential `name` with `role` (`admin`, `operator`,
    /// `reader`) over `pools` (none: every pool); answers its token.
    pub async fn credential(&self, name: &str, role: &str, pools: &[&str]) -> String {
        let v = self
            .ok(
                "POST",
                "/api/v1/credentials",
                Some(json!({"name": name, "role": role, "hostPools": pools})),
                201,
            )
            .await;
        v["token"].as_str().expect("a token").to_string()
    }

    /// Waits until `check` holds (what a power command wrote, say), on
    /// the wall clock for at most [`PATIENCE`], holding tokio's time still
    /// meanwhile; panics naming `what` otherwise.
    pub async fn until(&self, what: &str, mut check: impl FnMut() -> bool) {
        let deadline = std::time::Instant::now() + PATIENCE;
        while !check() {
            assert!(
                std::time::Instant::now() < deadline,
                "{what}: not within {PATIENCE:?}"
            );
            real_pause().await;
        }
    }
}

/// Opens a broker on `store` behind `fence` with `settings`, its router
/// and its ticker.
async fn start(
    store: &MemoryStore,
    fence: &Arc<AtomicBool>,
    settings: &Settings,
) -> (Arc<Broker>, Router, tokio::task::JoinHandle<()>) {
    let fenced = Fenced {
        store: store.clone(),
        open: fence.clone(),
    };
    let broker = crate::open(Arc::new(fenced), settings.clone())
        .await
        .unwrap_or_else(|e| panic!("the broker did not open on the memory store: {e}"));
    let router = crate::api::router(broker.clone());
    let ticker = crate::spawn_ticker(broker.clone());
    (broker, router, ticker)
}

/// Waits [`REAL_POLL`] of the wall clock with tokio's paused time held
/// still (a blocking task keeps it from jumping ahead), while the
/// broker's tasks go on.
async fn real_pause() {
    let _ = tokio::task::spawn_blocking(|| std::thread::sleep(REAL_POLL)).await;
}

/// The kit's storage as one broker sees it: the shared tables while its
/// fence is open; once a restart closed it, every call fails, as the
/// calls of a killed process never arrive.
struct Fenced {
    store: MemoryStore,
    open: Arc<AtomicBool>,
}

impl Fenced {
    fn check(&self) -> Result<(), StoreError> {
        if self.open.load(Ordering::SeqCst) {
            Ok(())
        } else {
            Err(StoreError::Task(
                "this broker was stopped by a restart of the test kit".into(),
            ))
        }
    }
}

#[async_trait::async_trait]
impl Store for Fenced {
    async fn load(&self) -> Result<Snapshot, StoreError> {
        self.check()?;
        self.store.load().await
    }

    async fn apply(&self, batch: Arc<[Mutation]>) -> Result<(), StoreError> {
        self.check()?;
        self.store.apply(batch).await
    }

    async fn apply_relaxed(&self, batch: Arc<[Mutation]>) -> Result<(), StoreError> {
        self.check()?;
        self.store.apply_relaxed(batch).await
    }

    async fn ping(&self) -> Result<(), StoreError> {
        self.check()
    }

    async fn audit(&self, query: AuditQuery) -> Result<Vec<AuditRow>, StoreError> {
        self.check()?;
        self.store.audit(query).await
    }

    async fn scaling_actions(
        &self,
        query: ScalingActionQuery,
    ) -> Result<Vec<ScalingAction>, StoreError> {
        self.check()?;
        self.store.scaling_actions(query).await
    }
}
