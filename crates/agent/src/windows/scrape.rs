//! One scrape of one exporter's `/metrics` (rule W1): at most
//! [`MAX_CONCURRENT_SCRAPES`] at once over the whole agent, each under its
//! host's timeout (sent to the exporter as
//! `X-Prometheus-Scrape-Timeout-Seconds`, so it can give up in time too),
//! its answer read to at most [`BODY_BYTES_MAX`] and parsed within
//! [`exposition::LIMITS`]. The exporter is reached over HTTPS with the
//! trust configured for it (a private CA or a pinned certificate, the same
//! [`api::Trust`] the agent uses for the broker) and basic auth when
//! configured; plain HTTP works, with a warning at start.
//!
//! windows_exporter never redirects, so a redirect is not followed: it is
//! a failed scrape that gives its status alone. An exporter (or whoever
//! answers in its place) cannot send the agent to another address and
//! have what is there read back.
//!
//! A [`ScrapeError`] says what went wrong in the agent's own words (fixed
//! descriptions, HTTP statuses, line numbers and bounds): the broker keeps
//! it as the host's `scrapeError`, which every reader of the pool sees, so
//! no text of the exporter's answer is in it. What the answer or the
//! connection said is in [`ScrapeError::detail`], for the agent's log.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::Semaphore;

use super::config::{Exporter, WindowsHost};
use super::report;
use crate::config::TlsConfig;
use crate::exposition::{self, Sample};

/// Rule W1: scrapes in flight at once, over every host of the agent.
pub const MAX_CONCURRENT_SCRAPES: usize = 32;

/// Rule W1: the most one answer may hold.
pub const BODY_BYTES_MAX: usize = 4 * 1024 * 1024;

/// The password file may hold a password and a newline, not a book.
const PASSWORD_FILE_BYTES_MAX: u64 = 4096;

/// Why a scrape gave nothing, in the agent's own words (see the module's
/// documentation); [`ScrapeError::detail`] has more, for the log.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ScrapeError {
    #[error("no answer within {0:?}")]
    Timeout(Duration),
    #[error("cannot reach the exporter: {what}")]
    Transport {
        /// A fixed description, or the standard one of an I/O error's kind.
        what: String,
        /// The innermost error's own text, for the log.
        detail: String,
    },
    #[error("the exporter answered HTTP {status}{hint}")]
    Status { status: u16, hint: &'static str },
    #[error(
        "the exporter answered HTTP {0}: redirected, not followed (windows_exporter never \
         redirects: check metrics_url)"
    )]
    Redirected(u16),
    #[error("the answer is larger than {BODY_BYTES_MAX} bytes")]
    TooLarge,
    #[error("the answer is not UTF-8 text")]
    NotText,
    #[error("the answer is not the Prometheus text format: {0}")]
    Garbage(#[from] exposition::ParseError),
}

impl ScrapeError {
    /// What the connection or the answer said, beyond the error's own
    /// words: untrusted text, for the agent's log only.
    pub fn detail(&self) -> Option<&str> {
        match self {
            ScrapeError::Transport { detail, .. } => Some(detail),
            ScrapeError::Garbage(e) => e.detail(),
            _ => None,
        }
    }

    fn transport(e: &reqwest::Error) -> ScrapeError {
        ScrapeError::Transport {
            what: transport_what(e),
            detail: root_cause(e),
        }
    }
}

/// A setting the scraper cannot start with.
#[derive(Debug, thiserror::Error)]
pub enum SetupError {
    #[error("host {host}: cannot read password_file {path}: {detail}")]
    Password {
        host: String,
        path: String,
        detail: String,
    },
    #[error("host {host}: {detail}")]
    Tls { host: String, detail: String },
}

/// How one host is scraped, ready to use.
#[derive(Clone)]
pub struct Target {
    http: reqwest::Client,
    exporter: Exporter,
    /// User name and password, read from the password file at start.
    auth: Option<(String, String)>,
    permits: Arc<Semaphore>,
}

impl std::fmt::Debug for Target {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Target")
            .field("url", &self.exporter.url.as_str())
            .finish_non_exhaustive()
    }
}

/// Builds the targets of every host: one HTTP client per distinct trust
/// (hosts sharing a CA share connections' configuration), one password
/// read per host, one semaphore for all.
pub fn targets(hosts: &[WindowsHost]) -> Result<Vec<Target>, SetupError> {
    let permits = Arc::new(Semaphore::new(MAX_CONCURRENT_SCRAPES));
    let mut clients: HashMap<
        (Option<std::path::PathBuf>, Option<api::Fingerprint>),
        reqwest::Client,
    > = HashMap::new();
    let mut out = Vec::with_capacity(hosts.len());
    for host in hosts {
        let e = &host.exporter;
        let key = (e.tls.ca_cert.clone(), e.tls.fingerprint);
        let http = match clients.get(&key) {
            Some(c) => c.clone(),
            None => {
                let c = client(&e.tls).map_err(|detail| SetupError::Tls {
                    host: host.name.clone(),
                    detail,
                })?;
                clients.insert(key, c.clone());
                c
            }
        };
        let auth = match &e.basic_auth {
            None => None,
            Some((user, path)) => Some((user.clone(), read_password(&host.name, path)?)),
        };
        if e.url.scheme() == "http" {
            tracing::warn!(
                host = %host.name,
                url = %e.url,
                "the exporter is reached over plain http://: its answers (user names, \
                 sessions) and any basic-auth password cross the network readable by anyone \
                 on the way; configure TLS in its web config and use https://"
            );
        }
        out.push(Target {
            http,
            exporter: e.clone(),
            auth,
            permits: permits.clone(),
        });
    }
    Ok(out)
}

fn client(tls: &TlsConfig) -> Result<reqwest::Client, String> {
    let trust = tls.trust().map_err(|e| e.to_string())?;
    let config = trust.client_config().map_err(|e| e.to_string())?;
    reqwest::Client::builder()
        .tls_backend_preconfigured(config)
        .user_agent(concat!("deskbroker-agent/", env!("CARGO_PKG_VERSION")))
        // windows_exporter never redirects: one that does is not followed.
        .redirect(reqwest::redirect::Policy::none())
        // Many exporters, one connection each at most between scrapes.
        .pool_max_idle_per_host(1)
        .build()
        .map_err(|e| format!("cannot set up the HTTP client: {e}"))
}

fn read_password(host: &str, path: &std::path::Path) -> Result<String, SetupError> {
    use std::io::Read as _;
    let fail = |detail: String| SetupError::Password {
        host: host.to_string(),
        path: path.display().to_string(),
        detail,
    };
    let mut text = String::new();
    std::fs::File::open(path)
        .map_err(|e| fail(e.to_string()))?
        .take(PASSWORD_FILE_BYTES_MAX)
        .read_to_string(&mut text)
        .map_err(|e| fail(e.to_string()))?;
    let password = text.trim_end_matches(['\r', '\n']).to_string();
    if password.is_empty() {
        return Err(fail("it is empty".into()));
    }
    Ok(password)
}

impl Target {
    /// The exporter's URL, for log lines.
    pub fn url(&self) -> &str {
        self.exporter.url.as_str()
    }

    /// Scrapes once: waits for one of the shared permits, then fetches and
    /// parses under the host's timeout. Only the series [`report`] uses
    /// are kept.
    pub async fn scrape(&self) -> Result<Vec<Sample>, ScrapeError> {
        let _permit = self
            .permits
            .acquire()
            .await
            .map_err(|_| ScrapeError::Transport {
                what: "the agent is stopping".into(),
                detail: String::new(),
            })?;
        let timeout = self.exporter.timeout;
        let body = tokio::time::timeout(timeout, self.fetch())
            .await
            .map_err(|_| ScrapeError::Timeout(timeout))??;
        // Parsing is CPU work on at most 4 MiB: done here, in this host's
        // task, it never holds up another host's I/O for long.
        let text = std::str::from_utf8(&body).map_err(|_| ScrapeError::NotText)?;
        Ok(exposition::parse(
            text,
            &exposition::LIMITS,
            report::wanted,
        )?)
    }

    async fn fetch(&self) -> Result<Vec<u8>, ScrapeError> {
        let mut request = self
            .http
            .get(self.exporter.url.clone())
            .header(reqwest::header::ACCEPT, "text/plain;version=0.0.4")
            .header(
                "X-Prometheus-Scrape-Timeout-Seconds",
                format!("{}", self.exporter.timeout.as_secs_f64()),
            );
        if let Some((user, password)) = &self.auth {
            request = request.basic_auth(user, Some(password));
        }
        let mut response = request
            .send()
            .await
            .map_err(|e| ScrapeError::transport(&e))?;
        let status = response.status();
        if status.is_redirection() {
            // Its Location is neither followed nor repeated.
            return Err(ScrapeError::Redirected(status.as_u16()));
        }
        if status != reqwest::StatusCode::OK {
            let hint = match status.as_u16() {
                401 | 403 => ": check username and password_file against the exporter's web config",
                404 => ": check the path of metrics_url (usually /metrics)",
                _ => "",
            };
            return Err(ScrapeError::Status {
                status: status.as_u16(),
                hint,
            });
        }
        if response
            .content_length()
            .is_some_and(|n| n > BODY_BYTES_MAX as u64)
        {
            return Err(ScrapeError::TooLarge);
        }
        let mut body = Vec::new();
        while let Some(chunk) = response
            .chunk()
            .await
            .map_err(|e| ScrapeError::transport(&e))?
        {
            if body.len() + chunk.len() > BODY_BYTES_MAX {
                return Err(ScrapeError::TooLarge);
            }
            body.extend_from_slice(&chunk);
        }
        Ok(body)
    }
}

/// What went wrong with the connection, in words that are the agent's
/// (or the standard library's for an I/O error's kind), never text the
/// other side sent: a certificate's names or an HTTP parser's excerpt
/// stay in the log's detail.
fn transport_what(e: &reqwest::Error) -> String {
    let mut io_kind = None;
    let mut cause: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(c) = cause {
        if let Some(io) = c.downcast_ref::<std::io::Error>() {
            io_kind = Some(io.kind());
        }
        cause = c.source();
    }
    match io_kind {
        // rustls's refusal of the certificate, or of a peer that does not
        // speak TLS, comes as invalid data while connecting.
        Some(std::io::ErrorKind::InvalidData) if e.is_connect() => {
            "the TLS handshake failed: the exporter's certificate is not the one trusted for \
             it (ca_cert or tls_fingerprint), or it does not speak TLS"
                .into()
        }
        Some(kind) => kind.to_string(),
        None if e.is_timeout() => "the connection timed out".into(),
        None if e.is_connect() => "cannot connect".into(),
        None if e.is_body() => "the answer broke off".into(),
        None => "the HTTP exchange failed".into(),
    }
}

/// The innermost error's text, for the log: reqwest's outer ones only say
/// "error sending request".
fn root_cause(e: &(dyn std::error::Error + 'static)) -> String {
    let mut cause = e;
    while let Some(next) = cause.source() {
        cause = next;
    }
    cause.to_string()
}
