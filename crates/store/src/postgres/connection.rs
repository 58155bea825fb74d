//! Connecting: which URLs name a PostgreSQL database, opening the one
//! connection (over TLS when the URL's `sslmode` asks for it, with rustls
//! through tokio-postgres-rustls), and the session settings every store
//! connection needs (durable commits, server-side keepalives).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use api::tls::SignatureChecked;
use rustls::CertificateError;
use rustls::client::WebPkiServerVerifier;
use rustls::client::danger::{ServerCertVerified, ServerCertVerifier};
use rustls::pki_types::CertificateDer;
use rustls::pki_types::pem::PemObject;
use tokio_postgres::{Client, NoTls};

use super::error::reason;
use super::{CONNECT_TIMEOUT, PostgresError, SERVER_KEEPALIVE};
use crate::StoreError;

/// Whether `url` names a PostgreSQL database (the schemes this store takes).
pub fn is_postgres_url(url: &str) -> bool {
    url.starts_with("postgres://") || url.starts_with("postgresql://")
}

/// Parses `url`, connects and spawns the task that drives the connection.
pub(super) async fn open_connection(url: &str) -> Result<(Client, String), StoreError> {
    if !is_postgres_url(url) {
        return Err(
            PostgresError::Url("it must start with postgres:// or postgresql://".into()).into(),
        );
    }
    let (url, tls) = split_tls_params(url)?;
    let mut config: tokio_postgres::Config = url
        .parse()
        .map_err(|e: tokio_postgres::Error| PostgresError::Url(reason(&e)))?;
    if config.get_application_name().is_none() {
        config.application_name("deskbroker");
    }
    if config.get_connect_timeout().is_none() {
        config.connect_timeout(CONNECT_TIMEOUT);
    }
    let target = describe(&config);
    let failed = |e: tokio_postgres::Error| PostgresError::Connect {
        target: target.clone(),
        reason: reason(&e),
    };
    let driven = target.clone();
    let client = match tls.client_config()? {
        None => {
            let (client, connection) = config.connect(NoTls).await.map_err(failed)?;
            tokio::spawn(drive(connection, driven));
            client
        }
        Some(tls) => {
            let tls = tokio_postgres_rustls::MakeRustlsConnect::new(tls);
            let (client, connection) = config.connect(tls).await.map_err(failed)?;
            tokio::spawn(drive(connection, driven));
            client
        }
    };
    Ok((client, target))
}

/// Drives a connection until the client is dropped (cleanly) or the server
/// goes away; calls then fail with "connection closed".
async fn drive<S, T>(connection: tokio_postgres::Connection<S, T>, target: String)
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin,
    T: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin,
{
    if let Err(e) = connection.await {
        tracing::error!(database = %target, error = %reason(&e), "postgres connection lost");
    }
}

/// What the URL asks of TLS, as libpq reads `sslmode` and `sslrootcert`.
#[derive(Debug, Clone, PartialEq, Eq)]
struct TlsParams {
    mode: SslMode,
    /// PEM roots to check the server's certificate against (default: the
    /// system's roots).
    root_cert: Option<PathBuf>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum SslMode {
    /// No `sslmode`, `disable`, `allow` or `prefer`: in clear, as before.
    Clear,
    /// `require`: encrypted; the certificate is checked only when
    /// `sslrootcert` is given (then as `verify-ca`), as libpq does.
    Require,
    /// `verify-ca`: encrypted, issued by a trusted root, any name.
    VerifyCa,
    /// `verify-full`: encrypted, trusted root, and the URL's host name.
    VerifyFull,
}

/// Takes `sslmode` and `sslrootcert` out of the URL's query (tokio-postgres
/// knows neither `verify-ca`/`verify-full` nor `sslrootcert`) and answers
/// the URL it can parse (`sslmode=require` when TLS is asked for) with
/// what was asked.
fn split_tls_params(url: &str) -> Result<(String, TlsParams), PostgresError> {
    let mut params = TlsParams {
        mode: SslMode::Clear,
        root_cert: None,
    };
    let Some((base, query)) = url.split_once('?') else {
        return Ok((url.to_string(), params));
    };
    let mut kept = Vec::new();
    for pair in query.split('&').filter(|p| !p.is_empty()) {
        let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
        match key {
            "sslmode" => {
                params.mode = match value {
                    "disable" | "allow" | "prefer" => SslMode::Clear,
                    "require" => SslMode::Require,
                    "verify-ca" => SslMode::VerifyCa,
                    "verify-full" => SslMode::VerifyFull,
                    other => {
                        return Err(PostgresError::Url(format!(
                            "sslmode={other} is not one of disable, allow, prefer, require, \
                             verify-ca, verify-full"
                        )));
                    }
                };
            }
            "sslrootcert" => {
                // `%XX` escapes decoded (a path in a URL query).
                let path = percent_encoding::percent_decode_str(value).decode_utf8_lossy();
                params.root_cert = Some(PathBuf::from(path.into_owned()));
            }
            _ => kept.push(pair),
        }
    }
    match params.mode {
        SslMode::Clear => kept.push("sslmode=disable"),
        _ => kept.push("sslmode=require"),
    }
    Ok((format!("{base}?{}", kept.join("&")), params))
}

impl TlsParams {
    /// The rustls configuration these parameters ask for; `None` in clear.
    fn client_config(&self) -> Result<Option<rustls::ClientConfig>, PostgresError> {
        if self.mode == SslMode::Clear {
            return Ok(None);
        }
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let tls_error = |e: String| PostgresError::Url(format!("TLS: {e}"));
        let builder = rustls::ClientConfig::builder_with_provider(provider.clone())
            .with_safe_default_protocol_versions()
            .map_err(|e| tls_error(e.to_string()))?;
        let verify = match (self.mode, &self.root_cert) {
            (SslMode::Require, None) => None,
            (SslMode::Require | SslMode::VerifyCa, _) => Some(false),
            (_, _) => Some(true),
        };
        let verifier: Arc<dyn ServerCertVerifier> = match verify {
            // `sslmode=require` without `sslrootcert`: libpq encrypts and
            // accepts any certificate (it protects against eavesdropping,
            // not against a man in the middle); the handshake's signatures
            // are still checked.
            None => SignatureChecked::new(provider.clone(), |_, _, _, _, _| {
                Ok(ServerCertVerified::assertion())
            }),
            Some(check_name) => {
                let roots = match &self.root_cert {
                    Some(path) => read_roots(path)?,
                    None => system_roots(),
                };
                let webpki =
                    WebPkiServerVerifier::builder_with_provider(Arc::new(roots), provider.clone())
                        .build()
                        .map_err(|e| tls_error(e.to_string()))?;
                if check_name {
                    webpki
                } else {
                    // `verify-ca`: the chain must lead to a trusted root;
                    // the name is not checked.
                    SignatureChecked::new(provider.clone(), move |end, chain, name, ocsp, now| {
                        match webpki.verify_server_cert(end, chain, name, ocsp, now) {
                            Err(rustls::Error::InvalidCertificate(
                                CertificateError::NotValidForName
                                | CertificateError::NotValidForNameContext { .. },
                            )) => Ok(ServerCertVerified::assertion()),
                            other => other,
                        }
                    })
                }
            }
        };
        Ok(Some(
            builder
                .dangerous()
                .with_custom_certificate_verifier(verifier)
                .with_no_client_auth(),
        ))
    }
}

/// The CA certificates in `sslrootcert`.
fn read_roots(path: &Path) -> Result<rustls::RootCertStore, PostgresError> {
    let bad = |e: String| PostgresError::Url(format!("sslrootcert {}: {e}", path.display()));
    let mut roots = rustls::RootCertStore::empty();
    for cert in CertificateDer::pem_file_iter(path).map_err(|e| bad(e.to_string()))? {
        roots
            .add(cert.map_err(|e| bad(e.to_string()))?)
            .map_err(|e| bad(e.to_string()))?;
    }
    if roots.is_empty() {
        return Err(bad("no PEM certificate in it".into()));
    }
    Ok(roots)
}

/// The system's roots (Debian's /etc/ssl/certs), as `verify-full` without
/// `sslrootcert` trusts.
fn system_roots() -> rustls::RootCertStore {
    let mut roots = rustls::RootCertStore::empty();
    for path in [
        "/etc/ssl/certs/ca-certificates.crt",
        "/etc/pki/tls/certs/ca-bundle.crt",
    ] {
        if let Ok(certs) = CertificateDer::pem_file_iter(path) {
            roots.add_parsable_certificates(certs.flatten());
            break;
        }
    }
    roots
}

/// `host:port/database` (first host), for messages and logs.
fn describe(config: &tokio_postgres::Config) -> String {
    let host = match config.get_hosts().first() {
        Some(tokio_postgres::config::Host::Tcp(h)) => h.clone(),
        #[cfg(unix)]
        Some(tokio_postgres::config::Host::Unix(p)) => p.display().to_string(),
        None => "localhost".into(),
    };
    let port = config.get_ports().first().copied().unwrap_or(5432);
    let db = config
        .get_dbname()
        .or(config.get_user())
        .unwrap_or("postgres");
    format!("{host}:{port}/{db}")
}

/// Makes sure a commit is durable when `COMMIT` returns, and asks the
/// server to notice a vanished broker quickly ([`SERVER_KEEPALIVE`]).
pub(super) async fn configure_session(client: &Client) -> Result<(), StoreError> {
    let (idle, interval, count) = SERVER_KEEPALIVE;
    client
        .batch_execute(&format!(
            "SET tcp_keepalives_idle = {idle}; SET tcp_keepalives_interval = {interval}; \
             SET tcp_keepalives_count = {count}"
        ))
        .await
        .map_err(|e| PostgresError::query("cannot set TCP keepalives", e))?;
    let row = client
        .query_one(
            "SELECT current_setting('synchronous_commit'), current_setting('fsync')",
            &[],
        )
        .await
        .map_err(|e| PostgresError::query("cannot read the durability settings", e))?;
    let synchronous_commit: &str = row.get(0);
    let fsync: &str = row.get(1);
    if synchronous_commit == "off" {
        tracing::warn!("synchronous_commit is off on the server: turned on for the broker");
        client
            .batch_execute("SET synchronous_commit = on")
            .await
            .map_err(|e| PostgresError::query("cannot turn synchronous_commit on", e))?;
    }
    if fsync == "off" {
        tracing::warn!(
            "the PostgreSQL server runs with fsync=off: a crash of its machine can lose \
             acknowledged placements"
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sslmode_and_sslrootcert_are_read_as_libpq_reads_them() {
        let (url, p) = split_tls_params("postgres://u@h/db").expect("plain");
        assert_eq!(url, "postgres://u@h/db");
        assert_eq!(p.mode, SslMode::Clear);
        let (url, p) = split_tls_params(
            "postgres://u@h/db?application_name=x&sslmode=verify-full&sslrootcert=/a%20b/ca.pem",
        )
        .expect("verify-full");
        assert_eq!(url, "postgres://u@h/db?application_name=x&sslmode=require");
        assert_eq!(p.mode, SslMode::VerifyFull);
        assert_eq!(p.root_cert, Some(PathBuf::from("/a b/ca.pem")));
        let (url, p) = split_tls_params("postgres://u@h/db?sslmode=prefer").expect("prefer");
        assert_eq!(url, "postgres://u@h/db?sslmode=disable");
        assert_eq!(p.mode, SslMode::Clear);
        let e = split_tls_params("postgres://h/db?sslmode=bogus").expect_err("bogus");
        assert!(e.to_string().contains("sslmode=bogus"), "{e}");
        let e = TlsParams {
            mode: SslMode::VerifyFull,
            root_cert: Some(PathBuf::from("/nonexistent/root.pem")),
        }
        .client_config()
        .expect_err("missing file");
        assert!(e.to_string().contains("/nonexistent/root.pem"), "{e}");
    }
}
