//! A small HTTP client of the broker's API for the CLI: bearer token, a
//! bounded request time, and one mapping from every failure (broker not
//! reachable, API error body, unexpected answer) to an error that prints as
//! one clear line.
//!
//! Answers stay `serde_json::Value` so that fields the broker adds pass
//! through to the output untouched.

use std::fmt;
use std::time::Duration;

use anyhow::Context as _;
use reqwest::{Method, StatusCode, Url};
use serde_json::Value;

/// How long one request may take, connecting included, before the CLI gives
/// up. Every broker call is a short database transaction, so an answer that
/// takes longer means the broker is stuck or unreachable.
const REQUEST_TIMEOUT_SECONDS: u64 = 30;

/// How long establishing the TCP connection may take: a broker that does not
/// accept within this time is as good as down.
const CONNECT_TIMEOUT_SECONDS: u64 = 10;

/// An error answer of the API, `{"error": {"code": "…", "message": "…"}}`.
/// It prints as `Code: message`, so the binary's `error: ` prefix makes the
/// one line the contract asks for.
#[derive(Debug)]
pub struct ApiError {
    pub code: String,
    pub message: String,
}

impl fmt::Display for ApiError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.code, self.message)
    }
}

impl std::error::Error for ApiError {}

/// The broker's HTTP API, as seen by the CLI.
pub struct Client {
    http: reqwest::Client,
    /// The broker's base URL, e.g. `http://127.0.0.1:8080/`; API paths are
    /// appended to its path.
    base: Url,
    /// The admin token sent as `Authorization: Bearer …`, if one was found.
    token: Option<String>,
}

impl Client {
    /// Checks the broker URL once, up front, so a typo is reported before any
    /// request is made.
    pub fn new(broker: &str, token: Option<String>) -> anyhow::Result<Self> {
        if !broker.contains("://") {
            anyhow::bail!(
                "invalid broker URL {broker:?} (--broker / DESKBROKER_URL): \
                 write it as http://HOST:PORT, e.g. http://{broker}"
            );
        }
        let base = Url::parse(broker).with_context(|| {
            format!("invalid broker URL {broker:?} (--broker / DESKBROKER_URL)")
        })?;
        match base.scheme() {
            "http" => {}
            "https" => anyhow::bail!(
                "broker URL {broker}: this build of deskbroker speaks plain HTTP only; \
                 use http:// or put a TLS-terminating proxy in front of the broker"
            ),
            other => {
                anyhow::bail!("broker URL {broker}: unsupported scheme {other:?}, use http://")
            }
        }
        if base.cannot_be_a_base() || base.host().is_none() {
            anyhow::bail!(
                "invalid broker URL {broker:?}: it needs a host, e.g. http://127.0.0.1:8080"
            );
        }
        let http = reqwest::Client::builder()
            .timeout(Duration::from_secs(REQUEST_TIMEOUT_SECONDS))
            .connect_timeout(Duration::from_secs(CONNECT_TIMEOUT_SECONDS))
            .user_agent(concat!("deskbroker-cli/", env!("CARGO_PKG_VERSION")))
            .build()
            .context("cannot set up the HTTP client")?;
        Ok(Client { http, base, token })
    }

    /// The URL of `/api/v1/<segments…>`. Each segment is percent-encoded, so a
    /// name holding `/`, `?` or spaces cannot reach another route.
    fn url(&self, segments: &[&str], query: &[(&str, &str)]) -> Url {
        let mut url = self.base.clone();
        url.set_query(None);
        url.set_fragment(None);
        if let Ok(mut path) = url.path_segments_mut() {
            path.pop_if_empty().extend(["api", "v1"]).extend(segments);
        }
        if !query.is_empty() {
            url.query_pairs_mut().extend_pairs(query);
        }
        url
    }

    /// `GET`; answers the JSON body.
    pub async fn get(&self, segments: &[&str], query: &[(&str, &str)]) -> anyhow::Result<Value> {
        self.send(Method::GET, segments, query, None).await
    }

    /// `GET` of a list; answers the `value` array of `{"value": [...]}`.
    pub async fn list(&self, segments: &[&str], query: &[(&str, &str)]) -> anyhow::Result<Value> {
        let answer = self.get(segments, query).await?;
        match answer {
            Value::Object(mut map) if map.get("value").is_some_and(Value::is_array) => {
                Ok(map.remove("value").unwrap_or_default())
            }
            other => anyhow::bail!(
                "the broker answered a list request without a \"value\" array: {}",
                shorten(&other.to_string())
            ),
        }
    }

    pub async fn put(&self, segments: &[&str], body: &Value) -> anyhow::Result<Value> {
        self.send(Method::PUT, segments, &[], Some(body)).await
    }

    pub async fn patch(&self, segments: &[&str], body: &Value) -> anyhow::Result<Value> {
        self.send(Method::PATCH, segments, &[], Some(body)).await
    }

    pub async fn post(&self, segments: &[&str], body: &Value) -> anyhow::Result<Value> {
        self.send(Method::POST, segments, &[], Some(body)).await
    }

    /// `DELETE`; the API answers 204, which gives `Value::Null`.
    pub async fn delete(&self, segments: &[&str], query: &[(&str, &str)]) -> anyhow::Result<Value> {
        self.send(Method::DELETE, segments, query, None).await
    }

    /// `GET` of a document that is not JSON (an `.rdp` file); answers its text.
    pub async fn get_text(&self, segments: &[&str]) -> anyhow::Result<String> {
        let (status, bytes) = self.exchange(Method::GET, segments, &[], None).await?;
        if status.is_success() {
            return Ok(String::from_utf8_lossy(&bytes).into_owned());
        }
        Err(self.api_error(status, &bytes).into())
    }

    /// Sends one request; answers the status and the body.
    async fn exchange(
        &self,
        method: Method,
        segments: &[&str],
        query: &[(&str, &str)],
        body: Option<&Value>,
    ) -> anyhow::Result<(StatusCode, Vec<u8>)> {
        let url = self.url(segments, query);
        tracing::debug!(%method, %url, "request");
        let mut request = self.http.request(method, url.clone());
        if let Some(token) = &self.token {
            request = request.bearer_auth(token);
        }
        if let Some(body) = body {
            request = request.json(body);
        }
        let response = request
            .send()
            .await
            .map_err(|err| self.transport_error(&err))?;
        let status = response.status();
        let bytes = response
            .bytes()
            .await
            .map_err(|err| self.transport_error(&err))?
            .to_vec();
        tracing::debug!(%status, bytes = bytes.len(), "response");
        Ok((status, bytes))
    }

    /// Sends one request and turns the answer into JSON or one error. An empty
    /// success body (204) is `Value::Null`.
    async fn send(
        &self,
        method: Method,
        segments: &[&str],
        query: &[(&str, &str)],
        body: Option<&Value>,
    ) -> anyhow::Result<Value> {
        let (status, bytes) = self.exchange(method, segments, query, body).await?;
        if status.is_success() {
            if bytes.iter().all(u8::is_ascii_whitespace) {
                return Ok(Value::Null);
            }
            return serde_json::from_slice(&bytes).with_context(|| {
                format!(
                    "the broker at {} answered {status} with a body that is not JSON: {}",
                    self.base_text(),
                    shorten(&String::from_utf8_lossy(&bytes))
                )
            });
        }
        Err(self.api_error(status, &bytes).into())
    }

    /// The API's error body, or, when a proxy or an unknown route answered
    /// without one, the status with the start of the body.
    fn api_error(&self, status: StatusCode, bytes: &[u8]) -> ApiError {
        let parsed: Option<(String, String)> = serde_json::from_slice::<Value>(bytes)
            .ok()
            .and_then(|body| {
                let error = body.get("error")?;
                let code = error.get("code")?.as_str()?.to_owned();
                let message = error
                    .get("message")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_owned();
                Some((code, message))
            });
        let (code, mut message) = parsed.unwrap_or_else(|| {
            let code = status
                .canonical_reason()
                .unwrap_or("HttpError")
                .replace([' ', '-'], "");
            let text = String::from_utf8_lossy(bytes);
            let text = text.trim();
            let message = if text.is_empty() {
                format!("HTTP {status} from the broker at {}", self.base_text())
            } else {
                format!("HTTP {status}: {}", shorten(text))
            };
            (code, message)
        });
        if status == StatusCode::UNAUTHORIZED && self.token.is_none() {
            message.push_str(" (no token given: use --token or DESKBROKER_TOKEN)");
        }
        ApiError {
            code,
            message: one_line(&message),
        }
    }

    /// A failure before any HTTP answer, said in words that name the broker.
    fn transport_error(&self, err: &reqwest::Error) -> anyhow::Error {
        let broker = self.base_text();
        if err.is_timeout() {
            anyhow::anyhow!(
                "the broker at {broker} did not answer within {REQUEST_TIMEOUT_SECONDS} s"
            )
        } else if err.is_connect() {
            anyhow::anyhow!(
                "cannot connect to the broker at {broker}: {} (is `deskbroker serve` \
                 running? set --broker or DESKBROKER_URL)",
                root_cause(err)
            )
        } else {
            anyhow::anyhow!(
                "request to the broker at {broker} failed: {}",
                root_cause(err)
            )
        }
    }

    /// The broker URL as the user gave it, without a trailing slash.
    fn base_text(&self) -> String {
        self.base.as_str().trim_end_matches('/').to_owned()
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
fn shorten(text: &str) -> String {
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

fn one_line(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn client(base: &str) -> Client {
        Client::new(base, None).expect("valid URL")
    }

    #[test]
    fn urls_encode_names_and_keep_a_base_path() {
        let plain = client("http://127.0.0.1:8080");
        assert_eq!(
            plain
                .url(
                    &["hostPools", "a b/c?d", "userSessions"],
                    &[("user", "al@x.com")]
                )
                .as_str(),
            "http://127.0.0.1:8080/api/v1/hostPools/a%20b%2Fc%3Fd/userSessions?user=al%40x.com"
        );
        let prefixed = client("http://broker.example:80/desk/");
        assert_eq!(
            prefixed.url(&["hostPools"], &[]).as_str(),
            "http://broker.example/desk/api/v1/hostPools"
        );
    }

    #[test]
    fn bad_broker_urls_are_refused_up_front() {
        for bad in [
            "127.0.0.1:8080",
            "https://broker:443",
            "ftp://x",
            "not a url",
        ] {
            assert!(Client::new(bad, None).is_err(), "{bad} was accepted");
        }
    }

    #[test]
    fn api_error_bodies_become_one_line() {
        let c = client("http://127.0.0.1:8080");
        let error = c.api_error(
            StatusCode::NOT_FOUND,
            br#"{"error":{"code":"HostPoolNotFound","message":"host pool p9\nwas not found"}}"#,
        );
        assert_eq!(
            error.to_string(),
            "HostPoolNotFound: host pool p9 was not found"
        );

        let bare = c.api_error(StatusCode::METHOD_NOT_ALLOWED, b"");
        assert_eq!(
            bare.to_string(),
            "MethodNotAllowed: HTTP 405 Method Not Allowed from the broker at http://127.0.0.1:8080"
        );
    }

    #[test]
    fn unauthorized_without_token_says_how_to_give_one() {
        let c = client("http://127.0.0.1:8080");
        let error = c.api_error(
            StatusCode::UNAUTHORIZED,
            br#"{"error":{"code":"Unauthorized","message":"missing bearer token"}}"#,
        );
        assert!(
            error
                .to_string()
                .starts_with("Unauthorized: missing bearer token (no token given")
        );
    }

    #[tokio::test]
    async fn refused_connection_names_the_broker() {
        // Bind then drop a listener to get a local port that nothing serves.
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|listener| listener.local_addr())
            .expect("free port")
            .port();
        let broker = format!("http://127.0.0.1:{port}");
        let error = client(&broker)
            .get(&["hostPools"], &[])
            .await
            .expect_err("nothing listens there");
        let text = format!("{error:#}");
        assert!(
            text.starts_with(&format!("cannot connect to the broker at {broker}: ")),
            "{text}"
        );
        assert!(!text.contains('\n'), "{text}");
    }
}
