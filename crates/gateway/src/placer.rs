//! Where the front door asks for decisions: a [`Placer`] places a user,
//! confirms or ends sessions, and finds a host by address. Two of them:
//! [`InProcess`] calls the broker in the same process (`deskbroker serve
//! --rdp-listen`), [`Http`] calls a broker over its HTTP API (a front door
//! on its own machine, `deskbroker gateway --broker URL`). The front door
//! never decides anything itself.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use placement::{Placement, SessionState};
use serde::Deserialize;

pub use broker::Connect;

/// How long one call to a remote broker may take before the connection
/// that waits for it is refused.
pub const BROKER_REQUEST_TIMEOUT: Duration = Duration::from_secs(10);

/// Why the broker gave no answer the front door can use.
#[derive(Clone, Debug, thiserror::Error)]
pub enum PlacerError {
    /// The broker refused, with one of the contract's codes
    /// (`NoSessionHostAvailable`, `HostPoolNotFound`, …).
    #[error("{code}: {message}")]
    Refused { code: String, message: String },
    /// The broker could not be asked, or answered something unreadable.
    #[error("the broker is unreachable: {0}")]
    Unreachable(String),
}

impl PlacerError {
    /// The contract's code, or `BrokerUnreachable`.
    pub fn code(&self) -> &str {
        match self {
            PlacerError::Refused { code, .. } => code,
            PlacerError::Unreachable(_) => "BrokerUnreachable",
        }
    }
}

impl From<broker::ApiError> for PlacerError {
    fn from(e: broker::ApiError) -> PlacerError {
        PlacerError::Refused {
            code: e.code.to_string(),
            message: e.message,
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
        request: &Connect,
    ) -> impl Future<Output = Result<Placement, PlacerError>> + Send;

    /// Marks a session Active (its host connection is up) or Disconnected
    /// (either side closed), rule R4.
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

    /// The host of `pool` registered with `address`, if any (rule R3).
    fn host_at(
        &self,
        pool: &str,
        address: &str,
    ) -> impl Future<Output = Result<Option<String>, PlacerError>> + Send;
}

/// The broker in this process.
#[derive(Clone)]
pub struct InProcess {
    broker: Arc<broker::Broker>,
}

impl InProcess {
    pub fn new(broker: Arc<broker::Broker>) -> InProcess {
        InProcess { broker }
    }
}

impl Placer for InProcess {
    async fn connect(&self, pool: &str, request: &Connect) -> Result<Placement, PlacerError> {
        Ok(self.broker.connect(pool, request).await?)
    }

    async fn set_session_state(
        &self,
        pool: &str,
        session_id: &str,
        state: SessionState,
    ) -> Result<(), PlacerError> {
        Ok(self
            .broker
            .set_session_state(pool, session_id, state)
            .await?)
    }

    async fn logoff(&self, pool: &str, session_id: &str) -> Result<(), PlacerError> {
        Ok(self.broker.logoff(pool, session_id).await?)
    }

    async fn host_at(&self, pool: &str, address: &str) -> Result<Option<String>, PlacerError> {
        Ok(self.broker.host_at(pool, address).await?)
    }
}

/// A broker reached over its HTTP API with a bearer token (the admin
/// token: the front door places users in every pool).
///
/// Pool names and session ids go into URL paths as they are: pool names
/// come from the parser, which only admits broker-valid names
/// (letters, digits, `.`, `-`, `_`), and session ids from the broker.
#[derive(Clone)]
pub struct Http {
    base_url: String,
    token: String,
    client: reqwest::Client,
}

impl Http {
    /// `base_url` is the broker's root, e.g. `http://10.0.0.2:8080`.
    pub fn new(base_url: &str, token: &str) -> Result<Http, PlacerError> {
        let client = reqwest::Client::builder()
            .timeout(BROKER_REQUEST_TIMEOUT)
            .build()
            .map_err(|e| PlacerError::Unreachable(format!("cannot build an HTTP client: {e}")))?;
        Ok(Http {
            base_url: base_url.trim_end_matches('/').to_string(),
            token: token.to_string(),
            client,
        })
    }

    fn url(&self, path: &str) -> String {
        format!("{}/api/v1{path}", self.base_url)
    }

    /// Sends a request; answers the body of a 2xx, or the broker's error.
    async fn send(&self, request: reqwest::RequestBuilder) -> Result<Vec<u8>, PlacerError> {
        let response = request
            .bearer_auth(&self.token)
            .send()
            .await
            .map_err(|e| PlacerError::Unreachable(e.to_string()))?;
        let status = response.status();
        let body = response
            .bytes()
            .await
            .map_err(|e| PlacerError::Unreachable(e.to_string()))?;
        if status.is_success() {
            return Ok(body.to_vec());
        }
        match serde_json::from_slice::<ErrorBody>(&body) {
            Ok(e) => Err(PlacerError::Refused {
                code: e.error.code,
                message: e.error.message,
            }),
            Err(_) => Err(PlacerError::Unreachable(format!(
                "the broker answered {status} without an error body"
            ))),
        }
    }
}

fn decode<T: serde::de::DeserializeOwned>(body: &[u8]) -> Result<T, PlacerError> {
    serde_json::from_slice(body)
        .map_err(|e| PlacerError::Unreachable(format!("unreadable answer from the broker: {e}")))
}

#[derive(Deserialize)]
struct ErrorBody {
    error: ErrorDetail,
}

#[derive(Deserialize)]
struct ErrorDetail {
    code: String,
    message: String,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct ConnectOutput {
    session_id: String,
    session_host: String,
    address: String,
    reconnect: bool,
    session_state: SessionState,
}

#[derive(Deserialize)]
struct HostList {
    value: Vec<HostOutput>,
}

#[derive(Deserialize)]
struct HostOutput {
    name: String,
    address: String,
}

impl Placer for Http {
    async fn connect(&self, pool: &str, request: &Connect) -> Result<Placement, PlacerError> {
        let mut body = serde_json::json!({ "user": request.user });
        if !request.requires.is_empty() {
            body["requires"] = serde_json::json!(request.requires);
        }
        if let Some(h) = &request.session_host {
            body["sessionHost"] = serde_json::json!(h);
        }
        // Rule R5's retries: the API must accept `exclude` for a remote
        // front door to pass over a host it could not reach.
        if !request.exclude.is_empty() {
            body["exclude"] = serde_json::json!(request.exclude);
        }
        let answer = self
            .send(
                self.client
                    .post(self.url(&format!("/hostPools/{pool}/connect")))
                    .json(&body),
            )
            .await?;
        let out: ConnectOutput = decode(&answer)?;
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
        self.send(
            self.client
                .patch(self.url(&format!("/hostPools/{pool}/userSessions/{session_id}")))
                .json(&serde_json::json!({ "sessionState": state })),
        )
        .await
        .map(drop)
    }

    async fn logoff(&self, pool: &str, session_id: &str) -> Result<(), PlacerError> {
        self.send(
            self.client
                .delete(self.url(&format!("/hostPools/{pool}/userSessions/{session_id}"))),
        )
        .await
        .map(drop)
    }

    async fn host_at(&self, pool: &str, address: &str) -> Result<Option<String>, PlacerError> {
        let answer = self
            .send(
                self.client
                    .get(self.url(&format!("/hostPools/{pool}/sessionHosts"))),
            )
            .await?;
        let hosts: HostList = decode(&answer)?;
        Ok(hosts
            .value
            .into_iter()
            .find(|h| h.address == address)
            .map(|h| h.name))
    }
}
