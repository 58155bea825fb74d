//! The two calls the agent makes to the broker: `POST /api/v1/register`
//! (with a registration token in the body, no Authorization header) and
//! `POST …/sessionHosts/{host}/heartbeat` (with the host credential as a
//! bearer token), with bounded request time and answer size, and one mapping
//! of every failure to "try again later" or "the broker said no".

use std::time::Duration;

use reqwest::{StatusCode, Url};
use serde::{Deserialize, Serialize};

use crate::config::HostPolicy;
use crate::sessions::ReportedSession;

/// How long one request may take, connecting included (the brief's bound:
/// a broker that does not answer in 10 s is treated as unreachable).
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);

/// The largest answer read: a host's JSON is well under 1 KiB.
const ANSWER_BYTES_MAX: usize = 256 * 1024;

/// Body of `POST /api/v1/register`.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RegisterRequest<'a> {
    pub token: &'a str,
    pub host_pool: &'a str,
    pub name: &'a str,
    pub address: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub capabilities: Option<&'a [String]>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub policy: Option<&'a HostPolicy>,
}

/// The answer to a registration.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Registered {
    pub host_credential: String,
    /// True for 201 (a new host), false for 200 (the broker already knew
    /// this name and kept its sessions).
    #[serde(skip)]
    pub created: bool,
}

/// Body of a heartbeat. Every field is optional; a metric the agent could
/// not read is left out, and `sessions` is left out when the sessions
/// probe failed (the broker would otherwise end every session).
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Heartbeat {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cpu_percent: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub memory_percent: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub disk_queue_length: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub disk_read_latency_ms: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub disk_write_latency_ms: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub custom_load_index: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sessions: Option<Vec<ReportedSession>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub policy: Option<HostPolicy>,
}

/// What the broker says about the host after a heartbeat (only what the
/// agent logs; other fields are ignored).
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HostAnswer {
    pub status: Option<String>,
    pub load_index: Option<i64>,
    pub sessions: Option<u64>,
}

/// Why a call did not succeed.
#[derive(Debug, thiserror::Error)]
pub enum CallError {
    /// No answer (refused, reset, timed out) or a server error: try again.
    #[error("broker unreachable: {0}")]
    Unreachable(String),
    /// The broker answered with a 5xx: it is up but cannot serve now.
    #[error("broker error {status}: {code}: {message}")]
    Server {
        status: u16,
        code: String,
        message: String,
    },
    /// The broker refused the request (4xx); repeating it unchanged would
    /// be refused again.
    #[error("{code}: {message} (HTTP {status})")]
    Rejected {
        status: u16,
        code: String,
        message: String,
    },
}

impl CallError {
    /// 401: the token or credential is not (or no longer) valid.
    pub fn is_unauthorized(&self) -> bool {
        matches!(self, CallError::Rejected { status: 401, .. })
    }
}

/// The broker's API as the agent uses it.
#[derive(Debug, Clone)]
pub struct BrokerClient {
    http: reqwest::Client,
    base: Url,
}

impl BrokerClient {
    pub fn new(base: Url) -> BrokerClient {
        let http = reqwest::Client::builder()
            .timeout(REQUEST_TIMEOUT)
            .connect_timeout(REQUEST_TIMEOUT)
            .user_agent(concat!("deskbroker-agent/", env!("CARGO_PKG_VERSION")))
            .build()
            // Only TLS or resolver setup can fail here, and this client has
            // neither; a panic would say the build itself is broken.
            .expect("building an HTTP client without TLS cannot fail");
        BrokerClient { http, base }
    }

    /// `base` + `/api/v1/` + the segments, each percent-encoded.
    fn url(&self, segments: &[&str]) -> Url {
        let mut url = self.base.clone();
        if let Ok(mut path) = url.path_segments_mut() {
            path.pop_if_empty().extend(["api", "v1"]).extend(segments);
        }
        url
    }

    /// Registers this host with a registration token.
    pub async fn register(&self, req: &RegisterRequest<'_>) -> Result<Registered, CallError> {
        let response = self
            .http
            .post(self.url(&["register"]))
            .json(req)
            .send()
            .await
            .map_err(transport_error)?;
        let status = response.status();
        let body = read_body(response).await?;
        check(status, &body)?;
        let mut registered: Registered = serde_json::from_slice(&body).map_err(|e| {
            CallError::Unreachable(format!(
                "the broker's answer to register is not what this agent expects: {e}"
            ))
        })?;
        registered.created = status == StatusCode::CREATED;
        Ok(registered)
    }

    /// Sends one heartbeat with the host credential.
    pub async fn heartbeat(
        &self,
        host_pool: &str,
        name: &str,
        credential: &str,
        heartbeat: &Heartbeat,
    ) -> Result<Option<HostAnswer>, CallError> {
        let url = self.url(&["hostPools", host_pool, "sessionHosts", name, "heartbeat"]);
        let response = self
            .http
            .post(url)
            .bearer_auth(credential)
            .json(heartbeat)
            .send()
            .await
            .map_err(transport_error)?;
        let status = response.status();
        let body = read_body(response).await?;
        check(status, &body)?;
        Ok(serde_json::from_slice(&body).ok())
    }
}

fn transport_error(e: reqwest::Error) -> CallError {
    // reqwest's Display stops at "error sending request"; the cause
    // (connection refused, timed out) is in the source chain.
    let mut text = e.to_string();
    let mut source = std::error::Error::source(&e);
    while let Some(s) = source {
        text.push_str(": ");
        text.push_str(&s.to_string());
        source = s.source();
    }
    CallError::Unreachable(text)
}

/// Reads the answer, at most [`ANSWER_BYTES_MAX`].
async fn read_body(mut response: reqwest::Response) -> Result<Vec<u8>, CallError> {
    let mut body = Vec::new();
    while let Some(chunk) = response.chunk().await.map_err(transport_error)? {
        if body.len() + chunk.len() > ANSWER_BYTES_MAX {
            return Err(CallError::Unreachable(format!(
                "the broker's answer is larger than {ANSWER_BYTES_MAX} bytes"
            )));
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body)
}

/// Turns a non-2xx answer into an error with the API's code and message.
fn check(status: StatusCode, body: &[u8]) -> Result<(), CallError> {
    if status.is_success() {
        return Ok(());
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
    let (code, message) = match serde_json::from_slice::<ErrorBody>(body) {
        Ok(b) => (b.error.code, b.error.message),
        Err(_) => {
            let text = String::from_utf8_lossy(body);
            let text: String = text.trim().chars().take(200).collect();
            let reason = status.canonical_reason().unwrap_or("error").to_string();
            (
                reason,
                if text.is_empty() {
                    "(no message)".into()
                } else {
                    text
                },
            )
        }
    };
    let status = status.as_u16();
    if (400..500).contains(&status) && status != 408 && status != 429 {
        Err(CallError::Rejected {
            status,
            code,
            message,
        })
    } else {
        Err(CallError::Server {
            status,
            code,
            message,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sessions::SessionState;

    #[test]
    fn urls_keep_the_base_path_and_encode_names() {
        let c = BrokerClient::new(Url::parse("http://b:1/deskbroker/").unwrap());
        assert_eq!(
            c.url(&["hostPools", "my pool", "sessionHosts", "h/7", "heartbeat"])
                .as_str(),
            "http://b:1/deskbroker/api/v1/hostPools/my%20pool/sessionHosts/h%2F7/heartbeat"
        );
        let c = BrokerClient::new(Url::parse("http://b:1").unwrap());
        assert_eq!(c.url(&["register"]).as_str(), "http://b:1/api/v1/register");
    }

    #[test]
    fn heartbeat_json_leaves_out_what_is_unknown() {
        let hb = Heartbeat {
            cpu_percent: Some(37.5),
            sessions: Some(vec![ReportedSession {
                user: "alice@contoso.com".into(),
                state: SessionState::Active,
            }]),
            policy: Some(HostPolicy {
                load_index_threshold: Some(80),
                connecting_session_threshold: None,
            }),
            ..Heartbeat::default()
        };
        assert_eq!(
            serde_json::to_string(&hb).unwrap(),
            r#"{"cpuPercent":37.5,"sessions":[{"user":"alice@contoso.com","state":"Active"}],"policy":{"loadIndexThreshold":80}}"#
        );
        assert_eq!(serde_json::to_string(&Heartbeat::default()).unwrap(), "{}");
    }

    #[test]
    fn register_json_has_the_contract_names() {
        let caps = vec!["rdp".to_string()];
        let req = RegisterRequest {
            token: "t",
            host_pool: "farm",
            name: "h7",
            address: "10.0.0.7:3389",
            capabilities: Some(&caps),
            policy: None,
        };
        assert_eq!(
            serde_json::to_string(&req).unwrap(),
            r#"{"token":"t","hostPool":"farm","name":"h7","address":"10.0.0.7:3389","capabilities":["rdp"]}"#
        );
    }

    #[test]
    fn error_answers_keep_the_code_and_message() {
        let body =
            br#"{"error":{"code":"Unauthorized","message":"the registration token has expired"}}"#;
        let err = check(StatusCode::UNAUTHORIZED, body).unwrap_err();
        assert!(err.is_unauthorized());
        assert_eq!(
            err.to_string(),
            "Unauthorized: the registration token has expired (HTTP 401)"
        );

        let err = check(StatusCode::FORBIDDEN, b"").unwrap_err();
        assert_eq!(err.to_string(), "Forbidden: (no message) (HTTP 403)");

        let err = check(StatusCode::SERVICE_UNAVAILABLE, b"store down").unwrap_err();
        assert!(
            matches!(err, CallError::Server { status: 503, .. }),
            "{err}"
        );
        let err = check(StatusCode::TOO_MANY_REQUESTS, b"").unwrap_err();
        assert!(
            matches!(err, CallError::Server { status: 429, .. }),
            "{err}"
        );
    }
}
