//! Where the front door asks for decisions: a [`Placer`] places a user,
//! confirms or ends sessions, and finds a host by address. Two of them: the
//! broker in the same process (`deskbroker serve --rdp-listen`; that placer
//! is `broker::front_door::InProcess`, where the two meet, so this crate
//! links no broker), and [`Http`], a broker over its HTTP API through the
//! contract's client (a front door on its own machine, `deskbroker gateway
//! --broker URL`). The front door never decides anything itself.

use std::future::Future;

use base64::Engine as _;

use api::types::ConnectOutput;
use api::{BrokerUrl, Client, ClientError, ErrorCode};
use placement::{Placement, SessionState};

pub use api::types::ConnectInput;

/// Why the broker gave no answer the front door can use.
#[derive(Clone, Debug, thiserror::Error)]
pub enum PlacerError {
    /// The broker refused, with one of the contract's codes
    /// (`NoSessionHostAvailable`, `HostPoolNotFound`, …).
    #[error("{code}: {message}")]
    Refused { code: ErrorCode, message: String },
    /// The broker could not be asked, or answered something that is not the
    /// API's.
    #[error("the broker is unreachable: {0}")]
    Unreachable(String),
}

impl PlacerError {
    /// The contract's code, or `BrokerUnreachable` (a label of the front
    /// door's own, for logs and metrics).
    pub fn code(&self) -> &str {
        match self {
            PlacerError::Refused { code, .. } => code.as_str(),
            PlacerError::Unreachable(_) => "BrokerUnreachable",
        }
    }
}

/// The client's one classification: the API's refusal is a refusal;
/// anything else (no answer, an answer that is not the API's) means the
/// broker could not be asked.
impl From<ClientError> for PlacerError {
    fn from(e: ClientError) -> PlacerError {
        match e {
            ClientError::Api { code, message, .. } => PlacerError::Refused { code, message },
            other => PlacerError::Unreachable(other.to_string()),
        }
    }
}

/// A pool's settings that decide who the front door may place there.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FrontDoorPolicy {
    /// `allowFrontDoor` (R3): clients may name the pool with a `tsv://`
    /// routing token or a ticket.
    pub allowed: bool,
    /// `requireConnectionTicket` (T3): only tickets place users here.
    pub require_ticket: bool,
    /// `gatewaySignIn: TicketOrWindows` (AD2): the RD Gateway may place a
    /// client signed in with Windows (Kerberos) here, without a ticket.
    pub windows_sign_in: bool,
}

impl FrontDoorPolicy {
    pub fn of(config: &placement::PoolConfig) -> FrontDoorPolicy {
        FrontDoorPolicy {
            allowed: config.allow_front_door,
            require_ticket: config.require_connection_ticket,
            windows_sign_in: config.gateway_sign_in == placement::GatewaySignIn::TicketOrWindows,
        }
    }
}

/// The broker operations the front door needs (rules S1–S4 via R1–R5).
/// Futures are `Send` so that each connection can run on its own task.
pub trait Placer: Send + Sync + 'static {
    /// Places `request.user` in `pool` (a reconnect when rule S1 applies),
    /// passing over the hosts in `request.exclude`.
    fn connect(
        &self,
        pool: &str,
        request: &ConnectInput,
    ) -> impl Future<Output = Result<Placement, PlacerError>> + Send;

    /// Marks a session Active (its host connection is up) or Disconnected
    /// (either side closed), rule R4. It may answer before the mark is
    /// durable (the broker in this process does: the front door's marks
    /// are relaxed changes, never worth holding a connection for).
    fn set_session_state(
        &self,
        pool: &str,
        session_id: &str,
        state: SessionState,
    ) -> impl Future<Output = Result<(), PlacerError>> + Send;

    /// Ends a session: an unreachable host's new Pending session (R5), or
    /// an anonymous session whose connection closed (R2).
    fn logoff(
        &self,
        pool: &str,
        session_id: &str,
    ) -> impl Future<Output = Result<(), PlacerError>> + Send;

    /// What the pool allows through a front door (its `allowFrontDoor` and
    /// `requireConnectionTicket` settings, rules R3 and T3).
    fn front_door_policy(
        &self,
        pool: &str,
    ) -> impl Future<Output = Result<FrontDoorPolicy, PlacerError>> + Send;

    /// The host of `pool` registered with `address`, if any (rule R3).
    fn host_at(
        &self,
        pool: &str,
        address: &str,
    ) -> impl Future<Output = Result<Option<String>, PlacerError>> + Send;

    /// Records a refused Windows sign-in at the RD Gateway (rule AD2) in
    /// the audit log: from `source`, of `user` when the refusal names one,
    /// for `reason` (never a token). The broker folds them into one entry
    /// per source, user and reason a minute.
    fn sign_in_refused(
        &self,
        source: std::net::IpAddr,
        user: Option<&str>,
        reason: &str,
    ) -> impl Future<Output = ()> + Send;

    /// What `user`'s workspace feed lists (rule F4): the desktops and
    /// applications they are given whose files open without a ticket,
    /// and the feed's `LastUpdated`. A placer that serves no feed (the
    /// test placers) refuses with `NotFound`.
    fn feed(
        &self,
        user: &str,
    ) -> impl Future<Output = Result<api::types::FeedOutput, PlacerError>> + Send {
        let _ = user;
        async { Err(no_feed()) }
    }

    /// The `.rdp` file the feed names for `pool`'s desktop (`alias` None)
    /// or its application `alias`: no ticket inside, so that it keeps
    /// working while the client caches it. Refused (`NotEntitled`) unless
    /// `user` is given that resource.
    fn feed_file(
        &self,
        user: &str,
        pool: &str,
        alias: Option<&str>,
    ) -> impl Future<Output = Result<String, PlacerError>> + Send {
        let _ = (user, pool, alias);
        async { Err(no_feed()) }
    }

    /// The icons the feed names for application `alias` of `pool`,
    /// refused (`NotEntitled`) unless `user` is given it.
    fn feed_icon(
        &self,
        user: &str,
        pool: &str,
        alias: &str,
    ) -> impl Future<Output = Result<api::feed::icons::FeedIcons, PlacerError>> + Send {
        let _ = (user, pool, alias);
        async { Err(no_feed()) }
    }

    /// Now, in whole seconds since the Unix epoch, by the broker's clock:
    /// what the doors check the lifetimes of redirection tokens against
    /// (R3), so that the clock that governs the broker governs them too.
    fn now_unix_seconds(&self) -> u64;
}

/// The refusal of a placer that serves no workspace feed.
fn no_feed() -> PlacerError {
    PlacerError::Refused {
        code: ErrorCode::NotFound,
        message: "this broker serves no workspace feed".into(),
    }
}

/// The system's time of day in seconds since the Unix epoch (0 if it
/// reads before it).
pub fn system_unix_seconds() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

/// A broker reached over its HTTP API with a bearer token (the admin
/// token: the front door places users in every pool), through the
/// contract's client and its timeouts.
#[derive(Clone)]
pub struct Http {
    client: Client,
}

impl Http {
    /// `broker` is the broker's root, e.g. `http://10.0.0.2:8080`.
    pub fn new(broker: BrokerUrl, token: &str) -> Result<Http, PlacerError> {
        Http::with_trust(broker, token, &api::Trust::system())
    }

    /// The same, accepting the certificates `trust` says from an
    /// `https://` broker (`--ca-cert`, `--tls-fingerprint`).
    pub fn with_trust(
        broker: BrokerUrl,
        token: &str,
        trust: &api::Trust,
    ) -> Result<Http, PlacerError> {
        let client = Client::with_trust(
            broker,
            concat!("deskbroker-gateway/", env!("CARGO_PKG_VERSION")),
            trust,
        )?
        .with_token(token);
        Ok(Http { client })
    }
}

impl Placer for Http {
    async fn connect(&self, pool: &str, request: &ConnectInput) -> Result<Placement, PlacerError> {
        let out: ConnectOutput = self.client.connect(pool, request).await?;
        Ok(Placement {
            session_id: out.session_id,
            host: out.session_host,
            address: out.address,
            reconnect: out.reconnect,
            state: out.session_state,
        })
    }

    async fn set_session_state(
        &self,
        pool: &str,
        session_id: &str,
        state: SessionState,
    ) -> Result<(), PlacerError> {
        self.client
            .set_session_state(pool, session_id, state)
            .await?;
        Ok(())
    }

    async fn logoff(&self, pool: &str, session_id: &str) -> Result<(), PlacerError> {
        Ok(self.client.logoff(pool, session_id).await?)
    }

    async fn front_door_policy(&self, pool: &str) -> Result<FrontDoorPolicy, PlacerError> {
        let text = self.client.get_text(&["hostPools", pool], &[]).await?;
        let out: api::types::HostPoolOutput = serde_json::from_str(&text)
            .map_err(|e| PlacerError::Unreachable(format!("host pool {pool}: {e}")))?;
        Ok(FrontDoorPolicy::of(&out.config))
    }

    /// A stand-alone gateway's refused sign-ins go to the broker's audit
    /// log, as its credential (`POST /api/v1/auditLog/signInRefusals`),
    /// and to its own log; a broker that does not take the report leaves
    /// only the latter.
    async fn sign_in_refused(&self, source: std::net::IpAddr, user: Option<&str>, reason: &str) {
        tracing::warn!(%source, user = user.unwrap_or("-"), reason, "rd gateway: Windows sign-in refused");
        let input = api::types::SignInRefusalInput {
            source: source.to_string(),
            // A claimed name the broker would refuse is reported as none.
            user: user
                .filter(|u| placement::validate_user("user", u).is_ok())
                .map(str::to_string),
            reason: reason.to_string(),
        };
        if let Err(e) = self.client.sign_in_refused(&input).await {
            tracing::warn!(error = %e, "rd gateway: the broker did not take a refused sign-in for its audit log");
        }
    }

    /// A broker reached over HTTP keeps the time of day of its machine;
    /// this one's is the system's.
    fn now_unix_seconds(&self) -> u64 {
        system_unix_seconds()
    }

    async fn feed(&self, user: &str) -> Result<api::types::FeedOutput, PlacerError> {
        Ok(self.client.feed(user).await?)
    }

    async fn feed_file(
        &self,
        user: &str,
        pool: &str,
        alias: Option<&str>,
    ) -> Result<String, PlacerError> {
        Ok(self.client.feed_file(user, pool, alias).await?)
    }

    async fn feed_icon(
        &self,
        user: &str,
        pool: &str,
        alias: &str,
    ) -> Result<api::feed::icons::FeedIcons, PlacerError> {
        let out = self.client.feed_icon(user, pool, alias).await?;
        let decode = |field: &str, text: &str| {
            base64::engine::general_purpose::STANDARD
                .decode(text)
                .map_err(|e| PlacerError::Unreachable(format!("the icon's {field}: {e}")))
        };
        Ok(api::feed::icons::FeedIcons {
            ico: decode("ico", &out.ico)?,
            png_32: decode("png32", &out.png32)?,
        })
    }

    async fn host_at(&self, pool: &str, address: &str) -> Result<Option<String>, PlacerError> {
        let hosts = self.client.session_hosts(pool).await?;
        Ok(hosts
            .into_iter()
            .find(|h| h.address == address)
            .map(|h| h.name))
    }
}
