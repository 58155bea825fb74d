//! The RDP front door's placer for a broker in this process (`deskbroker
//! serve --rdp-listen`): the front door (`gateway`) asks, the broker
//! decides, with the same code path as the HTTP API's `connect`. It lives
//! here, where the two meet, so that the front door itself links only the
//! contract (`api`) and a stand-alone front door carries no store or HTTP
//! server.

use std::sync::Arc;

use api::types::ConnectInput;
use gateway::{FrontDoorPolicy, Placer, PlacerError};
use placement::{Placement, SessionState};

use crate::error::BrokerError;
use crate::state::Broker;

/// The actor of the front door's placements in the audit log.
pub const FRONT_DOOR_ACTOR: &str = "front-door";

/// The broker in this process, as the front door's [`Placer`].
#[derive(Clone)]
pub struct InProcess {
    broker: Arc<Broker>,
}

impl InProcess {
    pub fn new(broker: Arc<Broker>) -> InProcess {
        InProcess { broker }
    }
}

/// A refusal, with the contract's code, as the front door reports it.
fn refused(e: BrokerError) -> PlacerError {
    PlacerError::Refused {
        code: e.code(),
        message: e.to_string(),
    }
}

/// A feed's refusal: what the broker could not do now (its store or
/// directory unreachable, its queue full) is unreachable for the gateway,
/// which answers 503; anything else is a refusal (404).
fn feed_refused(e: BrokerError) -> PlacerError {
    match e {
        BrokerError::StoreUnavailable(_)
        | BrokerError::Overloaded
        | BrokerError::DirectoryUnavailable(_) => PlacerError::Unreachable(e.to_string()),
        e => refused(e),
    }
}

impl Placer for InProcess {
    /// A new placement is recorded in the audit log (T5) with its session,
    /// in the placement's own batch, as the API's connects are; the actor
    /// is `front-door` (the user is in the entry's `after`). Refusals and
    /// reconnects are not: the front door's metrics and log count those,
    /// and anyone on the network can cause them.
    async fn connect(&self, pool: &str, request: &ConnectInput) -> Result<Placement, PlacerError> {
        let scope = crate::audit::Scope {
            entry: store::AuditEntry {
                time_ms: self.broker.now_ms(),
                actor: FRONT_DOOR_ACTOR.to_string(),
                action: format!("RDP connect {pool}"),
                target: format!("hostPools/{pool}"),
                host_pool: Some(pool.to_string()),
                before: None,
                after: None,
                outcome: 0,
                source: None,
                end_reason: None,
            },
            method: "POST".to_string(),
            resource: crate::audit::Resource::Connect {
                pool: pool.to_string(),
            },
            recorded: None,
        };
        let (placed, _) =
            crate::audit::with_scope(scope, self.broker.connector().connect(pool, request)).await;
        placed.map_err(refused)
    }

    async fn set_session_state(
        &self,
        pool: &str,
        session_id: &str,
        state: SessionState,
    ) -> Result<(), PlacerError> {
        self.broker
            .connector()
            .mark_relayed_session(pool, session_id, Some(state))
            .await
            .map_err(refused)
    }

    async fn logoff(&self, pool: &str, session_id: &str) -> Result<(), PlacerError> {
        self.broker
            .connector()
            .mark_relayed_session(pool, session_id, None)
            .await
            .map_err(refused)
    }

    /// The pool's settings as memory holds them, without waiting for the
    /// store: a setting that is not durable yet can only let through a
    /// connection whose placement (written after it, in order) then waits
    /// for it, or refuse one.
    async fn front_door_policy(&self, pool: &str) -> Result<FrontDoorPolicy, PlacerError> {
        self.broker
            .core()
            .peek(pool, |p| Ok(FrontDoorPolicy::of(p.config())))
            .map_err(refused)
    }

    async fn host_at(&self, pool: &str, address: &str) -> Result<Option<String>, PlacerError> {
        self.broker
            .connector()
            .host_at(pool, address)
            .await
            .map_err(refused)
    }

    /// Rule AD2: one audit entry per source, user, reason and minute (the
    /// refusals' fold), by the actor `rd-gateway`.
    async fn sign_in_refused(&self, source: std::net::IpAddr, user: Option<&str>, reason: &str) {
        let now = self.broker.now_ms();
        self.broker
            .audit()
            .sign_in_refused(now, "rd-gateway".into(), source, user, reason)
            .await;
    }

    async fn feed(&self, user: &str) -> Result<api::types::FeedOutput, PlacerError> {
        crate::feed::feed(&self.broker, user)
            .await
            .map_err(feed_refused)
    }

    async fn feed_file(
        &self,
        user: &str,
        pool: &str,
        alias: Option<&str>,
    ) -> Result<String, PlacerError> {
        crate::feed::feed_file(&self.broker, user, pool, alias)
            .await
            .map_err(feed_refused)
    }

    async fn feed_icon(
        &self,
        user: &str,
        pool: &str,
        alias: &str,
    ) -> Result<api::feed::icons::FeedIcons, PlacerError> {
        crate::feed::feed_icon(&self.broker, user, pool, alias)
            .await
            .map_err(feed_refused)
    }

    /// The broker's own clock (a test's manual clock governs the doors).
    fn now_unix_seconds(&self) -> u64 {
        self.broker.now_ms().max(0) as u64 / 1000
    }
}
