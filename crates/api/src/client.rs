//! One async client of the broker's API for every program that talks to
//! it: the CLI (through [`Client::send`], which keeps answers as JSON so
//! fields a newer broker adds pass through), the agent ([`Client::register`],
//! [`Client::heartbeat`]), the stand-alone RDP front door
//! ([`Client::connect`], [`Client::set_session_state`], [`Client::logoff`],
//! [`Client::session_hosts`]) and the load generator.
//!
//! One timeout policy ([`REQUEST_TIMEOUT`], [`CONNECT_TIMEOUT`]), one bound
//! on what is read ([`MAX_ANSWER_BYTES`]), and one classification of every
//! failure ([`ClientError`], [`ClientError::is_retryable`]): no answer, the
//! API's own refusal, or an answer that is not the API's (a proxy's 404
//! page, say), each said the same way by every program.

use std::time::Duration;

use placement::SessionState;
use reqwest::{Method, StatusCode};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::error::ErrorCode;
use crate::tls::{Trust, tls_failure};
use crate::types::{
    ConnectInput, ConnectOutput, HeartbeatInput, HeartbeatOutput, Page, RegisterInput,
    RegisterOutput, SessionHostOutput, SessionOutput, SessionPatch, SignInRefusalInput,
};
use crate::url::BrokerUrl;

/// How long one request may take, connecting included. Every broker call
/// is one short transaction; a replica forwarding to a leader that is being
/// elected waits up to 10 s (`FORWARD_WAIT`), so this leaves room for that
/// and no more: an answer later than this means the broker is stuck.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(15);

/// How long establishing the TCP connection may take: a broker that does
/// not accept within this time is as good as down.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// The largest answer read. The longest answers are unpaged lists: a
/// 10,000-host pool's hosts are about 5 MB of JSON.
pub const MAX_ANSWER_BYTES: usize = 64 * 1024 * 1024;

/// Why a call did not succeed. Its text is one line that names the broker
/// or the API's code, so every program can print it as it is.
#[derive(Debug, Clone, thiserror::Error)]
pub enum ClientError {
    /// No connection: nothing listens there, or the name does not resolve.
    #[error(
        "cannot connect to the broker at {broker}: {detail} (is `deskbroker serve` running \
         there? set --broker or DESKBROKER_URL)"
    )]
    Connect { broker: String, detail: String },
    /// Connected, but the TLS handshake failed: the broker's certificate
    /// is not trusted (`--ca-cert`), its fingerprint is not the pinned one
    /// (`--tls-fingerprint`), or the broker does not speak TLS there.
    #[error("TLS with the broker at {broker} failed: {detail}")]
    Tls { broker: String, detail: String },
    /// Connected, but no complete answer within [`REQUEST_TIMEOUT`].
    #[error("the broker at {broker} did not answer within {} s", REQUEST_TIMEOUT.as_secs())]
    Timeout { broker: String },
    /// The connection broke before a complete answer.
    #[error("request to the broker at {broker} failed: {detail}")]
    Transport { broker: String, detail: String },
    /// The API refused, with one of the contract's codes.
    #[error("{code}: {message}")]
    Api {
        status: u16,
        code: ErrorCode,
        message: String,
    },
    /// An answer that is not the API's: an error without the contract's
    /// body (a proxy, a wrong URL), a success that does not parse, or one
    /// larger than [`MAX_ANSWER_BYTES`].
    #[error("{detail}")]
    Unexpected { status: u16, detail: String },
}

impl ClientError {
    /// True when the same request may succeed later unchanged: no answer,
    /// a failed TLS handshake (the broker's certificate may be replaced),
    /// or a status that says "not now" (5xx, 408, 429). A refusal (4xx) or
    /// an answer this client cannot read would be the same again.
    pub fn is_retryable(&self) -> bool {
        match self {
            ClientError::Connect { .. }
            | ClientError::Tls { .. }
            | ClientError::Timeout { .. }
            | ClientError::Transport { .. } => true,
            ClientError::Api { status, .. } | ClientError::Unexpected { status, .. } => {
                *status >= 500 || *status == 408 || *status == 429
            }
        }
    }

    /// The API's code, when the broker answered with one.
    pub fn code(&self) -> Option<ErrorCode> {
        match self {
            ClientError::Api { code, .. } => Some(*code),
            _ => None,
        }
    }

    /// The HTTP status, when there was an answer.
    pub fn status(&self) -> Option<u16> {
        match self {
            ClientError::Api { status, .. } | ClientError::Unexpected { status, .. } => {
                Some(*status)
            }
            _ => None,
        }
    }
}

/// The broker's API, with an optional bearer token.
#[derive(Clone, Debug)]
pub struct Client {
    http: reqwest::Client,
    base: BrokerUrl,
    token: Option<String>,
}

impl Client {
    /// A client of the broker at `base`, without a token, trusting the
    /// system's roots for an `https://` broker. `user_agent` names the
    /// program, e.g. `deskbroker-cli/0.1.0`.
    pub fn new(base: BrokerUrl, user_agent: &str) -> Result<Client, ClientError> {
        Client::with_trust(base, user_agent, &Trust::system())
    }

    /// A client of the broker at `base` that accepts the certificates
    /// `trust` says (`--ca-cert`, `--tls-fingerprint`).
    pub fn with_trust(
        base: BrokerUrl,
        user_agent: &str,
        trust: &Trust,
    ) -> Result<Client, ClientError> {
        let tls = trust.client_config().map_err(|e| ClientError::Tls {
            broker: base.to_string(),
            detail: e.to_string(),
        })?;
        if base.is_cleartext_remote() {
            tracing::warn!(
                broker = %base,
                "the broker is reached over plain http:// on another machine: tokens, tickets \
                 and host credentials cross the network readable by anyone on the way; use \
                 https:// (a broker listening on another address than loopback serves TLS \
                 unless started with --insecure-http)"
            );
        }
        let http = reqwest::Client::builder()
            .tls_backend_preconfigured(tls)
            .timeout(REQUEST_TIMEOUT)
            .connect_timeout(CONNECT_TIMEOUT)
            .user_agent(user_agent)
            .build()
            .map_err(|e| ClientError::Transport {
                broker: base.to_string(),
                detail: format!("cannot set up the HTTP client: {}", root_cause(&e)),
            })?;
        Ok(Client {
            http,
            base,
            token: None,
        })
    }

    /// The same client (sharing its connections) with `token` as the bearer.
    pub fn with_token(&self, token: impl Into<String>) -> Client {
        Client {
            token: Some(token.into()),
            ..self.clone()
        }
    }

    /// The broker this client talks to.
    pub fn base(&self) -> &BrokerUrl {
        &self.base
    }

    /// Whether requests carry a bearer token.
    pub fn has_token(&self) -> bool {
        self.token.is_some()
    }

    // ---- pass-through (the CLI) ------------------------------------------

    /// Sends one request to `/api/v1/<segments…>` and answers its JSON body
    /// (`Value::Null` for an empty one, as a 204 has).
    pub async fn send(
        &self,
        method: Method,
        segments: &[&str],
        query: &[(&str, &str)],
        body: Option<&Value>,
    ) -> Result<Value, ClientError> {
        let bytes = self.call(method, segments, query, body).await?;
        if bytes.iter().all(u8::is_ascii_whitespace) {
            return Ok(Value::Null);
        }
        self.decode(&bytes)
    }

    /// `GET` of a document that is not JSON (an `.rdp` file); answers its text.
    pub async fn get_text(
        &self,
        segments: &[&str],
        query: &[(&str, &str)],
    ) -> Result<String, ClientError> {
        let bytes = self.call(Method::GET, segments, query, None::<&()>).await?;
        Ok(String::from_utf8_lossy(&bytes).into_owned())
    }

    // ---- typed calls -------------------------------------------------------

    /// Places a user (rules S1–S4): `POST …/hostPools/{pool}/connect`.
    pub async fn connect(
        &self,
        pool: &str,
        input: &ConnectInput,
    ) -> Result<ConnectOutput, ClientError> {
        let bytes = self
            .call(
                Method::POST,
                &["hostPools", pool, "connect"],
                &[],
                Some(input),
            )
            .await?;
        self.decode(&bytes)
    }

    /// Registers a host with a registration token (in the body; no bearer):
    /// answers the host and its new credential, and whether the host is new
    /// (201) rather than re-registered (200).
    pub async fn register(
        &self,
        input: &RegisterInput,
    ) -> Result<(RegisterOutput, bool), ClientError> {
        let (status, bytes) = self
            .exchange(Method::POST, &["register"], &[], Some(input))
            .await?;
        let bytes = self.check(status, bytes)?;
        Ok((self.decode(&bytes)?, status == StatusCode::CREATED))
    }

    /// One heartbeat of `host`, with this client's token (the host
    /// credential): the host as the broker sees it and the entries of the
    /// list it refused (S8). Too frequent heartbeats are refused 429
    /// `TooManyRequests`, which [`ClientError::is_retryable`] says to retry.
    pub async fn heartbeat(
        &self,
        pool: &str,
        host: &str,
        input: &HeartbeatInput,
    ) -> Result<HeartbeatOutput, ClientError> {
        let segments = ["hostPools", pool, "sessionHosts", host, "heartbeat"];
        let bytes = self.call(Method::POST, &segments, &[], Some(input)).await?;
        self.decode(&bytes)
    }

    /// Marks a session Active or Disconnected (rule S4).
    pub async fn set_session_state(
        &self,
        pool: &str,
        id: &str,
        state: SessionState,
    ) -> Result<SessionOutput, ClientError> {
        let patch = SessionPatch {
            session_state: state,
        };
        let segments = ["hostPools", pool, "userSessions", id];
        let bytes = self
            .call(Method::PATCH, &segments, &[], Some(&patch))
            .await?;
        self.decode(&bytes)
    }

    /// Logs a session off.
    pub async fn logoff(&self, pool: &str, id: &str) -> Result<(), ClientError> {
        let segments = ["hostPools", pool, "userSessions", id];
        self.call(Method::DELETE, &segments, &[], None::<&()>)
            .await
            .map(drop)
    }

    /// Reports a refused Windows sign-in at a stand-alone RD Gateway, for
    /// the broker's audit log (rule AD2).
    pub async fn sign_in_refused(&self, input: &SignInRefusalInput) -> Result<(), ClientError> {
        let segments = ["auditLog", "signInRefusals"];
        self.call(Method::POST, &segments, &[], Some(input))
            .await
            .map(drop)
    }

    /// What a user's workspace feed lists (rule F4): `GET
    /// …/users/{name}/feed`.
    pub async fn feed(&self, user: &str) -> Result<crate::types::FeedOutput, ClientError> {
        let bytes = self
            .call(Method::GET, &["users", user, "feed"], &[], None::<&()>)
            .await?;
        self.decode(&bytes)
    }

    /// The ticketless `.rdp` file a user's feed names for a pool's desktop
    /// (`alias` None) or one of its applications: `GET
    /// …/users/{name}/feed/{pool}/rdpFile` or
    /// `…/feed/{pool}/applications/{alias}/rdpFile`.
    pub async fn feed_file(
        &self,
        user: &str,
        pool: &str,
        alias: Option<&str>,
    ) -> Result<String, ClientError> {
        match alias {
            None => {
                self.get_text(&["users", user, "feed", pool, "rdpFile"], &[])
                    .await
            }
            Some(alias) => {
                let segments = [
                    "users",
                    user,
                    "feed",
                    pool,
                    "applications",
                    alias,
                    "rdpFile",
                ];
                self.get_text(&segments, &[]).await
            }
        }
    }

    /// An application's icons as a user's feed serves them: `GET
    /// …/users/{name}/feed/{pool}/applications/{alias}/icon`.
    pub async fn feed_icon(
        &self,
        user: &str,
        pool: &str,
        alias: &str,
    ) -> Result<crate::types::FeedIconOutput, ClientError> {
        let segments = ["users", user, "feed", pool, "applications", alias, "icon"];
        let bytes = self.call(Method::GET, &segments, &[], None::<&()>).await?;
        self.decode(&bytes)
    }

    /// Every session host of a pool, in query order.
    pub async fn session_hosts(&self, pool: &str) -> Result<Vec<SessionHostOutput>, ClientError> {
        let segments = ["hostPools", pool, "sessionHosts"];
        let bytes = self.call(Method::GET, &segments, &[], None::<&()>).await?;
        let page: Page<SessionHostOutput> = self.decode(&bytes)?;
        Ok(page.value)
    }

    // ---- the one way a request is made -------------------------------------

    /// Sends a request and answers the body of a 2xx, or the error.
    async fn call<B: Serialize + ?Sized>(
        &self,
        method: Method,
        segments: &[&str],
        query: &[(&str, &str)],
        body: Option<&B>,
    ) -> Result<Vec<u8>, ClientError> {
        let (status, bytes) = self.exchange(method, segments, query, body).await?;
        self.check(status, bytes)
    }

    /// Sends a request; answers the status and at most [`MAX_ANSWER_BYTES`]
    /// of the body.
    async fn exchange<B: Serialize + ?Sized>(
        &self,
        method: Method,
        segments: &[&str],
        query: &[(&str, &str)],
        body: Option<&B>,
    ) -> Result<(StatusCode, Vec<u8>), ClientError> {
        let url = self.base.api(segments, query);
        tracing::debug!(%method, %url, "request");
        let mut request = self.http.request(method, url);
        if let Some(token) = &self.token {
            request = request.bearer_auth(token);
        }
        if let Some(body) = body {
            request = request.json(body);
        }
        let mut response = request.send().await.map_err(|e| self.transport(&e))?;
        let status = response.status();
        let mut bytes = Vec::new();
        while let Some(chunk) = response.chunk().await.map_err(|e| self.transport(&e))? {
            if bytes.len() + chunk.len() > MAX_ANSWER_BYTES {
                return Err(ClientError::Unexpected {
                    status: status.as_u16(),
                    detail: format!(
                        "the broker at {} answered more than {} MiB; refused",
                        self.base,
                        MAX_ANSWER_BYTES / (1024 * 1024)
                    ),
                });
            }
            bytes.extend_from_slice(&chunk);
        }
        tracing::debug!(%status, bytes = bytes.len(), "response");
        Ok((status, bytes))
    }

    /// A 2xx answers its body; anything else is the API's error, or an
    /// answer that is not the API's.
    fn check(&self, status: StatusCode, bytes: Vec<u8>) -> Result<Vec<u8>, ClientError> {
        if status.is_success() {
            return Ok(bytes);
        }
        // Read the code as text first: a code this client does not know is
        // not the contract's, and is said as such rather than guessed at.
        #[derive(serde::Deserialize)]
        struct Loose {
            error: LooseDetail,
        }
        #[derive(serde::Deserialize)]
        struct LooseDetail {
            code: String,
            #[serde(default)]
            message: String,
        }
        if let Ok(body) = serde_json::from_slice::<Loose>(&bytes)
            && let Some(code) = ErrorCode::parse(&body.error.code)
        {
            return Err(ClientError::Api {
                status: status.as_u16(),
                code,
                message: one_line(&body.error.message),
            });
        }
        let text = shorten(&String::from_utf8_lossy(&bytes));
        let reason = status.canonical_reason().unwrap_or("");
        let mut detail = format!(
            "HTTP {} {reason} from {}, which is not an answer of the deskbroker API \
             (is that the broker's address?)",
            status.as_u16(),
            self.base,
        );
        if !text.is_empty() {
            detail.push_str(": ");
            detail.push_str(&text);
        }
        Err(ClientError::Unexpected {
            status: status.as_u16(),
            detail,
        })
    }

    /// Parses a 2xx body.
    fn decode<T: DeserializeOwned>(&self, bytes: &[u8]) -> Result<T, ClientError> {
        serde_json::from_slice(bytes).map_err(|e| ClientError::Unexpected {
            status: 200,
            detail: format!(
                "the broker at {} answered something this client cannot read ({e}): {}",
                self.base,
                shorten(&String::from_utf8_lossy(bytes))
            ),
        })
    }

    /// A failure before a complete answer, said in words that name the broker.
    fn transport(&self, e: &reqwest::Error) -> ClientError {
        let broker = self.base.to_string();
        if e.is_timeout() {
            ClientError::Timeout { broker }
        } else if let Some(detail) = tls_failure(e) {
            ClientError::Tls { broker, detail }
        } else if e.is_connect() {
            ClientError::Connect {
                broker,
                detail: root_cause(e),
            }
        } else {
            ClientError::Transport {
                broker,
                detail: root_cause(e),
            }
        }
    }
}

/// The innermost cause of a transport error, e.g. "Connection refused (os
/// error 111)", which says more than reqwest's outer "error sending request".
fn root_cause(err: &(dyn std::error::Error + 'static)) -> String {
    let mut cause = err;
    while let Some(next) = cause.source() {
        cause = next;
    }
    one_line(&cause.to_string())
}

/// At most 200 characters, on one line: enough to recognise a body, short
/// enough for an error line.
pub fn shorten(text: &str) -> String {
    const LIMIT_CHARS: usize = 200;
    let text = one_line(text);
    if text.chars().count() <= LIMIT_CHARS {
        text
    } else {
        let mut short: String = text.chars().take(LIMIT_CHARS).collect();
        short.push('…');
        short
    }
}

/// Folds every run of white space, newlines included, into one space.
pub fn one_line(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}
