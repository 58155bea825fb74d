//! Several broker processes on one PostgreSQL database: one **leader**
//! decides, the others **follow** and forward requests to it.
//!
//! Why a leader and not row locks: a placement is a decision over the
//! whole pool (the least loaded host, round robin, random draws, the
//! session limit), and the engine makes it in about a microsecond because
//! the pool lives in memory with its indexes. Deciding in the database
//! would mean locking the pool and reading back what other replicas
//! changed on every connect; deciding in memory on several replicas would
//! need a distributed lock per pool anyway. So exactly one replica holds
//! the engines: the one holding PostgreSQL's session-level advisory lock
//! (the *owner lock* of [`store::postgres`]). It writes through the very
//! connection that holds the lock, so a leader that lost its connection
//! can write nothing more: there is never a second writer. The others keep
//! trying for the lock, learn the leader's published address from the
//! database, and forward every API request to it — so any replica answers
//! any request, every rule holds across replicas by construction (there
//! is one engine), and a change made through one replica is seen by the
//! next request through any other (0 ms: there is nothing to propagate).
//!
//! Failures:
//! - The leader dies (`kill -9`): its connection closes, PostgreSQL frees
//!   the lock, a follower waiting on it takes it at once, loads the state
//!   and leads. Requests arriving meanwhile wait (up to [`LEADER_WAIT`])
//!   and are retried against the new leader. Nothing acknowledged is lost:
//!   every answer waited for its commit.
//! - The leader stops without dying (frozen, stalled, cut off from the
//!   database while its connection lingers): it stops renewing its
//!   *lease* ([`store::Lease`], `serve --leader-lease`). Once the lease has
//!   run out by the database's clock, a follower ends the leader's
//!   database session, which frees the lock, and takes over. The old
//!   leader can write nothing more: its connection is gone, and every
//!   batch is checked against its epoch in the same transaction. When it
//!   wakes, its own clock tells it the lease ran out before it answers
//!   anything; it steps down and follows. Requests forwarded to it
//!   meanwhile are retried against the new leader when repeating them is
//!   harmless.
//! - The database goes away: the leader's writer fails on its next write or
//!   idle ping ([`crate::writer::PING_INTERVAL`]). From then on it changes
//!   nothing, stops renewing its lease, and answers users who have a
//!   durable session from memory (see `Connector::connect`) until the lease
//!   runs out; every other request gets 503 at once. Meanwhile every
//!   replica keeps campaigning; when the database is back one of them
//!   wins, loads what is durable and leads, and the others follow it.
//!
//! One decider at a time: a leader may lose its database session without
//! knowing it yet (a database restart, a cut connection) and answer from
//! memory for as long as its lease runs. So the winner of an election
//! does not decide until the previous lease has run out — unless it sees
//! the previous leader is gone (nothing listens at its address) or says it
//! no longer leads (`Replica::stopped_leading`). A leader stopped
//! cleanly gives its lease up ([`store::Lease::release`]).

mod forward;

use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::extract::Request;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use store::{Campaign, Leader, Lease, PostgresStore, Store};
use tokio::sync::watch;
use tower::ServiceExt;

use crate::api::ApiError;
use crate::state::Broker;
use api::ErrorCode;
use forward::{dispatch, healthz, metrics, refused};

/// How long one campaign waits on the owner lock before it looks up the
/// leader again: how stale a follower's idea of the leader can get.
pub const CAMPAIGN_WAIT: Duration = Duration::from_secs(1);
/// Pause after a failed campaign (no database), doubling up to
/// [`MAX_RETRY_PAUSE`].
pub const MIN_RETRY_PAUSE: Duration = Duration::from_millis(100);
pub const MAX_RETRY_PAUSE: Duration = Duration::from_secs(2);
/// How long a request waits for a leader (electing, or the leader
/// unreachable) before it is answered 503 `LeaderUnavailable` with
/// `Retry-After`: clients and load balancers do better to retry elsewhere
/// than to wait longer here.
pub const LEADER_WAIT: Duration = Duration::from_secs(5);
/// `serve --leader-lease`: how long a leader that renews nothing keeps the
/// lead. Renewed five times a lease, over a connection of its own.
pub const DEFAULT_LEADER_LEASE: Duration = Duration::from_secs(8);
/// A new leader asks its predecessor whether it still leads this often,
/// while the predecessor's lease runs (see `Replica::stopped_leading`),
/// waiting this long for each answer.
pub const PREDECESSOR_PROBE_INTERVAL: Duration = Duration::from_millis(200);
pub const PREDECESSOR_PROBE_TIMEOUT: Duration = Duration::from_secs(1);
/// How long a leader that stops cleanly tries to give its lease up.
pub const LEASE_RELEASE_TIMEOUT: Duration = Duration::from_secs(2);
/// How long to wait for the leader to answer a forwarded request.
pub const FORWARD_TIMEOUT: Duration = crate::api::REQUEST_TIMEOUT;
/// Idle connections kept to the leader.
pub const FORWARD_IDLE_CONNECTIONS: usize = 256;
/// How long an idle connection to the leader is kept: well under the
/// leader's `server::HEADER_READ_TIMEOUT`, after which the leader closes
/// it, so that a forwarded request is not sent on a connection the leader
/// is closing at that moment.
pub const FORWARD_IDLE_TIMEOUT: Duration = Duration::from_secs(5);
const _: () =
    assert!(FORWARD_IDLE_TIMEOUT.as_secs() < crate::server::HEADER_READ_TIMEOUT.as_secs());
/// Marks a request forwarded by a replica (its value: the sender's
/// address). A replica that is not the leader answers it with
/// [`NOT_LEADER_HEADER`] instead of forwarding it again.
pub const FORWARDED_HEADER: &str = "x-deskbroker-forwarded-by";
/// On a 503: the replica that answered is not the leader; ask again.
pub const NOT_LEADER_HEADER: &str = "x-deskbroker-not-leader";
/// The address of the client a follower forwards a request for, vouched
/// for by the follower: `ADDRESS;MAC`, the MAC an HMAC-SHA256 of the
/// address, the leader's epoch, the method and the path and query, under a
/// key derived from the admin token (which every replica shares and no
/// client holds). The leader throttles (rule T4) and audits (T5) the
/// request as coming from that address; without a valid MAC it takes
/// neither this header nor [`FORWARDED_HEADER`] into account, and no
/// handler ever sees them.
pub const CLIENT_HEADER: &str = "x-deskbroker-forwarded-for";

/// What a replica needs to run.
#[derive(Clone, Debug)]
pub struct ReplicaConfig {
    /// `postgres://…` of the shared database.
    pub database_url: String,
    /// How the other replicas reach this one's HTTP API
    /// (`http[s]://host:port`).
    pub advertise_url: String,
    /// Which certificates this replica accepts from the leader when it
    /// forwards over `https://` (the leader's advertised URL says which).
    pub leader_trust: api::Trust,
    /// What the broker is built with whenever this replica leads. Its
    /// portal (`serve --oidc-issuer`) is served by whichever replica leads
    /// (followers forward `/portal` like the API); its sessions are in the
    /// leader's memory, so a new leader signs everyone out.
    pub settings: crate::Settings,
    /// The redirection keys of this process's front door (rule R3), filled
    /// with the signing keys whenever this replica leads.
    pub redirect_keys: gateway::redirect::RedirectKeys,
    /// `serve --leader-lease` (rule L1).
    pub leader_lease: Duration,
}

/// What this replica is now.
#[derive(Clone)]
enum Role {
    /// No leader known yet: requests wait for one.
    Electing,
    /// This replica decides (its store may have failed meanwhile: then it
    /// answers reconnects from memory until its lease runs out).
    Leader(Arc<Leading>),
    /// Another replica decides.
    Follower(Arc<Leader>),
}

/// The engine of a leading replica and what runs with it.
struct Leading {
    broker: Arc<Broker>,
    router: Router,
    ticker: tokio::task::AbortHandle,
    lease: Arc<Lease>,
    lease_keeper: tokio::task::AbortHandle,
}

impl Leading {
    /// Whether this replica may answer as the leader now: while its lease
    /// holds, by its own clock. Its store lost, it answers reconnects from
    /// memory until then, and no longer: another replica may lead once the
    /// lease has run out, and a reconnect answered from memory after that
    /// could send a user who was logged off meanwhile to a second host.
    fn may_answer(&self) -> bool {
        self.lease.is_valid()
    }

    /// Answers `req` with this replica's own engine, unless the lease ran
    /// out while it was being answered (the process froze half-way, say):
    /// the answer may then be stale, and another replica may have decided
    /// otherwise meanwhile, so it is not given. A write it made was
    /// committed under this replica's epoch or not at all: the outcome is
    /// unknown to the client, as after any lost connection.
    async fn answer(&self, req: Request) -> Response {
        let answer = self.handle(req).await;
        if self.lease.is_valid() {
            return answer;
        }
        ApiError::new(
            ErrorCode::LeaderLost,
            "this replica's lease ran out while it answered; another replica may lead now \
             and the outcome is unknown: check before retrying",
        )
        .into_response()
    }

    /// Answers `req` with this replica's own engine.
    async fn handle(&self, req: Request) -> Response {
        self.router
            .clone()
            .oneshot(req)
            .await
            .unwrap_or_else(|e| match e {})
    }
}

impl Drop for Leading {
    fn drop(&mut self) {
        self.ticker.abort();
        self.lease_keeper.abort();
    }
}

/// One broker process among replicas sharing a PostgreSQL database.
pub struct Replica {
    config: ReplicaConfig,
    role: watch::Sender<Role>,
    http: reqwest::Client,
    /// Vouches for the client address of a forwarded request, and checks
    /// the vouching of the requests forwarded here.
    forwarding: forward::ForwardingKey,
}

impl Replica {
    fn new(config: ReplicaConfig) -> Result<Arc<Replica>, String> {
        crate::telemetry::init();
        let tls = config
            .leader_trust
            .client_config()
            .map_err(|e| format!("cannot build the forwarding client: {e}"))?;
        let http = reqwest::Client::builder()
            .tls_backend_preconfigured(tls)
            // The leader's answer is relayed as it is: a redirect (the
            // portal's, to the identity provider) goes to the client, not
            // followed here.
            .redirect(reqwest::redirect::Policy::none())
            .connect_timeout(Duration::from_secs(2))
            .timeout(FORWARD_TIMEOUT)
            .pool_max_idle_per_host(FORWARD_IDLE_CONNECTIONS)
            .pool_idle_timeout(FORWARD_IDLE_TIMEOUT)
            .tcp_nodelay(true)
            .build()
            .map_err(|e| format!("cannot build the forwarding client: {e}"))?;
        let forwarding = forward::ForwardingKey::of(&config.settings.admin_token);
        Ok(Arc::new(Replica {
            config,
            role: watch::Sender::new(Role::Electing),
            http,
            forwarding,
        }))
    }

    /// Starts a replica: one campaign, whose errors (a wrong URL, no
    /// server, no access) are reported instead of retried, so that a
    /// misconfigured replica stops at once. Then it leads or follows;
    /// [`serve`] keeps campaigning.
    pub async fn start(config: ReplicaConfig) -> Result<Arc<Replica>, String> {
        let replica = Replica::new(config)?;
        match PostgresStore::campaign(
            &replica.config.database_url,
            &replica.config.advertise_url,
            CAMPAIGN_WAIT,
            replica.config.leader_lease,
        )
        .await
        .map_err(|e| e.to_string())?
        {
            Campaign::Won { store, lease } => replica.lead(store, lease).await?,
            Campaign::Lost {
                leader: Some(leader),
                ..
            } => replica.follow(leader),
            Campaign::Lost { leader: None, .. } => {}
        }
        Ok(replica)
    }

    /// This replica's engine and lease, while it leads.
    fn leading(&self) -> Option<Arc<Leading>> {
        match &*self.role.borrow() {
            Role::Leader(l) => Some(l.clone()),
            _ => None,
        }
    }

    /// `leader`, `follower` or `electing`, for logs and `/healthz`.
    pub fn role_name(&self) -> &'static str {
        match &*self.role.borrow() {
            Role::Electing => "electing",
            Role::Leader(_) => "leader",
            Role::Follower(_) => "follower",
        }
    }

    /// Campaigns for the owner lock for as long as the process runs:
    /// leads when it wins, follows the winner otherwise, and campaigns
    /// again when its own store fails.
    pub async fn run_elections(self: Arc<Replica>) {
        let mut pause = MIN_RETRY_PAUSE;
        let mut last_error: Option<String> = None;
        // How long the next campaign waits on the lock: less when the
        // leader's lease runs out sooner, so that it is replaced on time.
        let mut wait = CAMPAIGN_WAIT;
        loop {
            // A working leader stays one until its store fails or it loses
            // its lease.
            if let Some(leading) = self.leading() {
                if leading.broker.core().writer().failure().is_none() {
                    tokio::select! {
                        reason = leading.broker.core().writer().failed() => {
                            // The lease must not outlive the store: renewed
                            // over a connection of its own, it would keep a
                            // leader that can write nothing in place for
                            // ever. Left to run out, it hands the lead over.
                            leading.lease_keeper.abort();
                            tracing::warn!(
                                error = %reason,
                                lease_left_ms = leading.lease.left().as_millis(),
                                "lost the store: answering reconnects from memory until the lease runs out, and campaigning again"
                            );
                        }
                        _ = leading.lease.lost() => {}
                    }
                }
                if !leading.may_answer() {
                    self.step_down(&leading);
                }
            }
            let campaign = PostgresStore::campaign(
                &self.config.database_url,
                &self.config.advertise_url,
                wait,
                self.config.leader_lease,
            )
            .await;
            wait = match &campaign {
                Ok(Campaign::Lost {
                    lease_left: Some(left),
                    ..
                }) => (*left + Duration::from_millis(10)).min(CAMPAIGN_WAIT),
                _ => CAMPAIGN_WAIT,
            };
            let result = match campaign {
                Ok(Campaign::Won { store, lease }) => self.lead(store, lease).await,
                // Our own address: the lock is still held by the session of
                // a store of ours that failed and is closing (or whose lease
                // runs out now, and which the next campaign ends). Look
                // again.
                Ok(Campaign::Lost {
                    leader: Some(leader),
                    ..
                }) if leader.url == self.config.advertise_url => {
                    if let Some(leading) = self.leading()
                        && !leading.may_answer()
                    {
                        self.step_down(&leading);
                    }
                    Ok(())
                }
                Ok(Campaign::Lost {
                    leader: Some(leader),
                    ..
                }) => {
                    self.follow(leader);
                    Ok(())
                }
                // The lock is held but no address is published yet (a
                // leader between the two), or an expired leader's session
                // is ending: no leader to forward to; look again.
                Ok(Campaign::Lost { leader: None, .. }) => {
                    self.role.send_if_modified(|role| match role {
                        Role::Follower(_) => {
                            *role = Role::Electing;
                            true
                        }
                        _ => false,
                    });
                    Ok(())
                }
                Err(e) => Err(e.to_string()),
            };
            match result {
                Ok(()) => {
                    pause = MIN_RETRY_PAUSE;
                    if last_error.take().is_some() {
                        tracing::info!(role = self.role_name(), "the database is reachable again");
                    }
                }
                Err(e) => {
                    if last_error.as_deref() != Some(&e) {
                        tracing::warn!(error = %e, role = self.role_name(), "campaign failed; retrying");
                        last_error = Some(e);
                    }
                    tokio::time::sleep(pause).await;
                    pause = (pause * 2).min(MAX_RETRY_PAUSE);
                }
            }
        }
    }

    /// Stops deciding: the lease of `leading` is lost, so another replica
    /// may lead. Requests wait for the next campaign to find the leader.
    fn step_down(&self, leading: &Arc<Leading>) {
        let stepped = self.role.send_if_modified(|role| match role {
            Role::Leader(l) if Arc::ptr_eq(l, leading) => {
                *role = Role::Electing;
                true
            }
            _ => false,
        });
        if stepped {
            tracing::warn!(
                epoch = leading.lease.epoch(),
                "stepping down: this replica's lease is lost; following whoever leads now"
            );
            metrics::counter!("deskbroker_replica_step_downs_total").increment(1);
        }
    }

    /// Won: keeps the lease, loads what is durable and starts deciding.
    async fn lead(&self, store: PostgresStore, lease: Arc<Lease>) -> Result<(), String> {
        // Renewed from now on, whatever loading takes; not while the
        // writer is stuck on a call (see `stuck_writer`).
        let engine: Arc<std::sync::OnceLock<Arc<Broker>>> = Arc::default();
        let lease_keeper = tokio::spawn({
            let (lease, engine) = (lease.clone(), engine.clone());
            let bound = self.config.leader_lease / 2;
            async move {
                lease
                    .keep_while(|| stuck_writer(engine.get()?, bound))
                    .await
            }
        })
        .abort_handle();
        let store: Arc<dyn Store> = Arc::new(store);
        let snapshot = store.load().await.map_err(|e| {
            lease_keeper.abort();
            format!("cannot load the store: {e}")
        })?;
        // The previous leader may answer from memory until its lease runs
        // out (see `Lease::predecessor_gone`); loading overlapped with it.
        // Unless it is this very process, whose old engine the new one
        // replaces at once below: it could write nothing meanwhile, so the
        // two agree on every session.
        let predecessor_left = lease.predecessor_left();
        let ours = self
            .leading()
            .is_some_and(|l| Some(l.lease.epoch()) == lease.predecessor_epoch());
        if !predecessor_left.is_zero() && !ours {
            tracing::info!(
                wait_ms = predecessor_left.as_millis(),
                epoch = lease.epoch(),
                previous = lease.predecessor_url().unwrap_or_default(),
                "elected: the previous leader's lease still runs; deciding once it has run out or that leader says it no longer leads"
            );
            tokio::select! {
                () = lease.predecessor_gone() => {}
                () = self.stopped_leading(&lease) => {
                    tracing::info!(
                        previous = lease.predecessor_url().unwrap_or_default(),
                        "the previous leader no longer leads: deciding now"
                    );
                }
                lost = lease.lost() => {
                    lease_keeper.abort();
                    return Err(format!("lost the lease while waiting for the previous one: {lost:?}"));
                }
            }
        }
        let broker = Arc::new(Broker::new(store, snapshot, self.config.settings.clone()));
        let _ = engine.set(broker.clone());
        if let Err(e) = broker.save_new_signing_key().await {
            lease_keeper.abort();
            return Err(format!("cannot keep the signing key: {e}"));
        }
        broker
            .keys()
            .share_redirect_keys(&self.config.redirect_keys);
        let router = crate::api::router(broker.clone());
        let ticker = crate::spawn_ticker(broker.clone()).abort_handle();
        let epoch = lease.epoch();
        self.role.send_replace(Role::Leader(Arc::new(Leading {
            broker,
            router,
            ticker,
            lease,
            lease_keeper,
        })));
        tracing::info!(advertise = %self.config.advertise_url, epoch, "leading: this replica decides");
        metrics::counter!("deskbroker_replica_elections_won_total").increment(1);
        Ok(())
    }

    /// Resolves once the previous leader of `lease` can be seen not to lead
    /// any more: nothing listens at its address (its process is gone, and
    /// with it its memory), or its `/healthz` says it does not lead under
    /// that epoch (it stepped down, or another process answers there). A
    /// leader that does not answer at all (frozen, or cut off from here)
    /// may still answer its clients: this never resolves for it.
    async fn stopped_leading(&self, lease: &Lease) {
        let (Some(url), Some(epoch)) = (lease.predecessor_url(), lease.predecessor_epoch()) else {
            return std::future::pending().await;
        };
        loop {
            let probe = self
                .http
                .get(format!("{url}/healthz"))
                .timeout(PREDECESSOR_PROBE_TIMEOUT)
                .send()
                .await;
            let stopped = match probe {
                Err(e) => refused(&e),
                Ok(answer) => match answer.json::<api::types::Health>().await {
                    Ok(h) => h.role != "leader" || h.epoch != Some(epoch),
                    Err(_) => false,
                },
            };
            if stopped {
                return;
            }
            tokio::time::sleep(PREDECESSOR_PROBE_INTERVAL).await;
        }
    }

    fn follow(&self, leader: Leader) {
        let mut was_leading = false;
        let changed = self.role.send_if_modified(|role| match role {
            Role::Follower(current) if **current == leader => false,
            _ => {
                was_leading = matches!(role, Role::Leader(_));
                *role = Role::Follower(Arc::new(leader.clone()));
                true
            }
        });
        if was_leading {
            tracing::warn!(leader = %leader.url, epoch = leader.epoch, "stepping down: another replica leads now");
            metrics::counter!("deskbroker_replica_step_downs_total").increment(1);
        } else if changed {
            tracing::info!(leader = %leader.url, epoch = leader.epoch, "following");
        }
    }

    /// The HTTP service of a replica: `/healthz` and `/metrics` of this
    /// process, everything else decided by the leader.
    pub fn router(self: &Arc<Replica>) -> Router {
        Router::new()
            .route("/healthz", get(healthz))
            .route("/metrics", get(metrics))
            .fallback(dispatch)
            .with_state(self.clone())
    }
}

/// Why a leader must not renew its lease: its writer has been stuck on one
/// call to the store for `bound` (half a lease) or longer. A connection
/// whose packets stopped passing fails only at the commit timeout, far past
/// the lease, while the lease keeper's own fresh connection may work; a
/// leader that cannot write must hand over all the same.
fn stuck_writer(broker: &Broker, bound: Duration) -> Option<String> {
    let stuck = broker.core().writer().stuck_for();
    (stuck >= bound).then(|| {
        format!(
            "the store has not answered a write for {} ms",
            stuck.as_millis()
        )
    })
}

/// Serves a replica on `listener` until `shutdown` resolves; then finishes
/// in-flight requests (for up to [`crate::server::SHUTDOWN_GRACE`]) and, if it leads, flushes its store (closing the
/// connection then hands the lock to a follower).
pub async fn serve(
    replica: Arc<Replica>,
    listener: impl Into<crate::tls::Listening>,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> Result<(), String> {
    let elections = tokio::spawn(replica.clone().run_elections());
    let app = replica.router();
    let served = crate::server::serve(listener.into(), app, shutdown)
        .await
        .map_err(|e| format!("server: {e}"));
    elections.abort();
    if let Some(leading) = replica.leading() {
        if leading.broker.core().writer().failure().is_none() {
            leading
                .broker
                .core()
                .writer()
                .flush()
                .await
                .map_err(|e| e.to_string())?;
        }
        // Nothing more is answered here: give the lease up, so that the
        // next leader need not wait for it to run out.
        leading.lease_keeper.abort();
        match leading.lease.release(LEASE_RELEASE_TIMEOUT).await {
            Ok(()) => tracing::info!(epoch = leading.lease.epoch(), "gave up the lead"),
            Err(e) => {
                tracing::warn!(error = %e, "could not give up the lease: the next leader waits for it to run out")
            }
        }
    }
    served
}
