//! The CLI's view of the broker's API: the contract's one client
//! (`api::Client`: its timeouts, its bound on answers, its one wording of
//! every failure), with answers kept as `serde_json::Value` so that fields
//! the broker adds pass through to the output untouched, and errors as
//! `anyhow` for the binary's one error line (an `Unauthorized` one is
//! explained by `Context::explain`, which knows where the token came from).

use api::BrokerUrl;
use reqwest::Method;
use serde_json::Value;

/// The broker's HTTP API, as seen by the CLI.
pub struct Client {
    api: api::Client,
}

impl Client {
    /// Checks the broker URL once, up front, so a typo is reported before any
    /// request is made.
    /// An `https://` broker's certificate is checked as `trust` says
    /// (`--ca-cert`, `--tls-fingerprint`).
    pub fn with_trust(
        broker: &str,
        token: Option<String>,
        trust: &api::Trust,
    ) -> anyhow::Result<Self> {
        let base = BrokerUrl::parse(broker)
            .map_err(|e| anyhow::anyhow!("{e} (--broker / DESKBROKER_URL)"))?;
        let api = api::Client::with_trust(
            base,
            concat!("deskbroker-cli/", env!("CARGO_PKG_VERSION")),
            trust,
        )?;
        let api = match token {
            Some(token) => api.with_token(token),
            None => api,
        };
        Ok(Client { api })
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
                api::client::shorten(&other.to_string())
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

    /// `POST` of an action without a body (`…/start`, `…/stop`), with a
    /// query string.
    pub async fn post_action(
        &self,
        segments: &[&str],
        query: &[(&str, &str)],
    ) -> anyhow::Result<Value> {
        self.send(Method::POST, segments, query, None).await
    }

    /// `DELETE`; the API answers 204, which gives `Value::Null`.
    pub async fn delete(&self, segments: &[&str], query: &[(&str, &str)]) -> anyhow::Result<Value> {
        self.send(Method::DELETE, segments, query, None).await
    }

    /// `GET` of a document that is not JSON (an `.rdp` file); answers its text.
    pub async fn get_text(
        &self,
        segments: &[&str],
        query: &[(&str, &str)],
    ) -> anyhow::Result<String> {
        self.api
            .get_text(segments, query)
            .await
            .map_err(anyhow::Error::from)
    }

    async fn send(
        &self,
        method: Method,
        segments: &[&str],
        query: &[(&str, &str)],
        body: Option<&Value>,
    ) -> anyhow::Result<Value> {
        self.api
            .send(method, segments, query, body)
            .await
            .map_err(anyhow::Error::from)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_broker_urls_are_refused_up_front_naming_the_flag() {
        for bad in ["127.0.0.1:8080", "ftp://x", "not a url"] {
            let e = Client::with_trust(bad, None, &api::Trust::system())
                .err()
                .expect(bad)
                .to_string();
            assert!(e.ends_with("(--broker / DESKBROKER_URL)"), "{bad}: {e}");
        }
    }

    #[tokio::test]
    async fn refused_connection_names_the_broker() {
        // Bound and never listening, held to the end of the test: connecting
        // is refused, and no other test can take the port meanwhile.
        let dead = tokio::net::TcpSocket::new_v4().expect("socket");
        dead.bind(([127, 0, 0, 1], 0).into()).expect("bind");
        let port = dead.local_addr().expect("addr").port();
        let broker = format!("http://127.0.0.1:{port}");
        let error = Client::with_trust(&broker, None, &api::Trust::system())
            .expect("valid URL")
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
