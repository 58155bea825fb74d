//! The one parser of a broker URL, as given with `--broker` or
//! `DESKBROKER_URL` to the CLI, the agent, the stand-alone front door and
//! the load generator: checked once, up front, with the same words
//! everywhere, so a typo is reported before any request is made.

use reqwest::Url;

/// A broker's base URL: `http[s]://HOST[:PORT][/PATH]`. API paths are
/// appended to its path, so a broker behind a path prefix works.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BrokerUrl(Url);

/// Why a text is not a broker URL; the message quotes the text and says
/// how to write it.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("invalid broker URL {0}")]
pub struct BrokerUrlError(String);

impl BrokerUrl {
    pub fn parse(text: &str) -> Result<BrokerUrl, BrokerUrlError> {
        let bad = |why: String| Err(BrokerUrlError(why));
        if !text.contains("://") {
            return bad(format!(
                "{text:?}: write it as http://HOST:PORT or https://HOST:PORT, e.g. https://{text}"
            ));
        }
        let url = match Url::parse(text) {
            Ok(url) => url,
            Err(e) => return bad(format!("{text:?}: {e}")),
        };
        match url.scheme() {
            "http" | "https" => {}
            other => {
                return bad(format!(
                    "{text}: unsupported scheme {other:?}, use https:// (or http://)"
                ));
            }
        }
        if url.cannot_be_a_base() || url.host().is_none() {
            return bad(format!(
                "{text:?}: it needs a host, e.g. http://127.0.0.1:8080"
            ));
        }
        if url.query().is_some() || url.fragment().is_some() {
            return bad(format!("{text:?}: a base URL takes no ?query or #fragment"));
        }
        Ok(BrokerUrl(url))
    }

    /// The URL of `/api/v1/<segments…>?<query>` under this base. Each
    /// segment is percent-encoded, so a name holding `/`, `?` or spaces
    /// cannot reach another route.
    pub fn api(&self, segments: &[&str], query: &[(&str, &str)]) -> Url {
        let mut url = self.0.clone();
        if let Ok(mut path) = url.path_segments_mut() {
            path.pop_if_empty().extend(["api", "v1"]).extend(segments);
        }
        if !query.is_empty() {
            url.query_pairs_mut().extend_pairs(query);
        }
        url
    }

    /// Whether requests to this broker cross the network in clear: an
    /// `http://` URL whose host is not this machine (a loopback address or
    /// `localhost`). Tokens, tickets and host credentials would be readable
    /// on the way.
    pub fn is_cleartext_remote(&self) -> bool {
        if self.0.scheme() != "http" {
            return false;
        }
        let Some(host) = self.0.host_str() else {
            return false;
        };
        let host = host.trim_start_matches('[').trim_end_matches(']');
        match host.parse::<std::net::IpAddr>() {
            Ok(ip) => !ip.is_loopback(),
            Err(_) => {
                let name = host.trim_end_matches('.').to_ascii_lowercase();
                name != "localhost" && !name.ends_with(".localhost")
            }
        }
    }

    /// The base URL as a URL.
    pub fn as_url(&self) -> &Url {
        &self.0
    }
}

/// Prints as the user wrote it, without a trailing slash.
impl std::fmt::Display for BrokerUrl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.0.as_str().trim_end_matches('/'))
    }
}

#[cfg(test)]
mod cleartext_tests {
    use super::*;

    #[test]
    fn only_http_to_another_machine_is_cleartext_remote() {
        for (text, remote) in [
            ("http://10.0.0.2:8080", true),
            ("http://broker.contoso.com", true),
            ("https://broker.contoso.com", false),
            ("http://127.0.0.1:8080", false),
            ("http://127.9.9.9:8080", false),
            ("http://[::1]:8080", false),
            ("http://localhost:8080", false),
            ("http://LocalHost.:8080", false),
        ] {
            let url = BrokerUrl::parse(text).expect(text);
            assert_eq!(url.is_cleartext_remote(), remote, "{text}");
        }
    }
}

impl std::str::FromStr for BrokerUrl {
    type Err = BrokerUrlError;
    fn from_str(s: &str) -> Result<BrokerUrl, BrokerUrlError> {
        BrokerUrl::parse(s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_encode_names_and_keep_a_base_path() {
        let plain = BrokerUrl::parse("http://127.0.0.1:8080").expect("valid");
        assert_eq!(
            plain
                .api(
                    &["hostPools", "a b/c?d", "userSessions"],
                    &[("user", "al@x.com")]
                )
                .as_str(),
            "http://127.0.0.1:8080/api/v1/hostPools/a%20b%2Fc%3Fd/userSessions?user=al%40x.com"
        );
        let prefixed = BrokerUrl::parse("http://broker.example:80/desk/").expect("valid");
        assert_eq!(
            prefixed.api(&["hostPools"], &[]).as_str(),
            "http://broker.example/desk/api/v1/hostPools"
        );
        assert_eq!(prefixed.to_string(), "http://broker.example/desk");
        let tls = BrokerUrl::parse("https://broker.example:8443").expect("https is accepted");
        assert_eq!(
            tls.api(&["hostPools"], &[]).as_str(),
            "https://broker.example:8443/api/v1/hostPools"
        );
    }

    #[test]
    fn bad_broker_urls_are_refused_with_a_way_to_write_them() {
        for (bad, says) in [
            ("127.0.0.1:8080", "write it as http://HOST:PORT"),
            ("ftp://x", "unsupported scheme"),
            ("not a url", "write it as"),
            ("http://", "empty host"),
            ("http://b:1/?x=1", "no ?query"),
            ("http://b:1/#f", "no ?query or #fragment"),
        ] {
            let e = BrokerUrl::parse(bad).expect_err(bad).to_string();
            assert!(e.contains(says), "{bad}: {e}");
        }
    }
}
