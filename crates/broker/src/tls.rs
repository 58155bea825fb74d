//! HTTPS for the broker's one listener (API, console, metrics alike):
//! the certificate and key (PEM files given with `serve --tls-cert
//! --tls-key`, or a self-signed pair generated once into the data
//! directory), re-read on SIGHUP without dropping open connections, and the
//! listener that runs each connection's TLS handshake.
//!
//! Why a certificate *resolver* rather than a new acceptor on reload: the
//! acceptor's configuration asks the resolver for the certificate at every
//! handshake, so swapping what the resolver holds changes what new
//! connections see, while connections already open keep the session keys
//! they negotiated and are never touched.
//!
//! Why the handshake runs inside the stream ([`Stream`]) rather than in
//! `accept`: axum accepts connections one after another; a client that
//! sends its ClientHello slowly would stall every other client if the
//! handshake ran in the accept loop. Here the handshake is driven by the
//! connection's own task, on its first read, bounded by
//! [`HANDSHAKE_TIMEOUT`].

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::{Arc, RwLock};
use std::task::{Context, Poll};
use std::time::Duration;

use api::Fingerprint;
use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpListener;
use tokio_rustls::TlsAcceptor;

use crate::listener::{LimitedListener, LimitedStream};
use crate::sync::RwLockExt;

/// Longest a client may take to finish its TLS handshake; past it the
/// connection is closed, so that silent connections cannot hold
/// [`crate::listener::MAX_CONNECTIONS`] slots.
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// File names of the self-signed pair in the data directory.
pub const SELF_SIGNED_CERT: &str = "tls-cert.pem";
/// How long a self-signed certificate the broker makes is valid: 825
/// days, the longest the browsers' CA rules ever allowed a server
/// certificate, so that a kept pair is neither valid forever nor a yearly
/// chore.
pub const SELF_SIGNED_VALIDITY: std::time::Duration =
    std::time::Duration::from_secs(825 * 24 * 3600);
/// A self-signed pair this close to its end is made anew at start.
pub const SELF_SIGNED_RENEW_BEFORE: std::time::Duration =
    std::time::Duration::from_secs(30 * 24 * 3600);
pub const SELF_SIGNED_KEY: &str = "tls-key.pem";

/// Why the certificate or key cannot be used; names the file.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    #[error("cannot read {path}: {detail}")]
    Read { path: PathBuf, detail: String },
    #[error("{path} holds no PEM certificate")]
    NoCertificate { path: PathBuf },
    #[error("the key {key} does not go with the certificate {cert}: {detail}")]
    Key {
        cert: PathBuf,
        key: PathBuf,
        detail: String,
    },
    #[error(
        "{path} has mode {mode:o}: every user of this machine may read the TLS private key. \
         Make it readable by this user only (chmod 600), or by a group of the service's \
         (chmod 640 with the group, as Debian's ssl-cert), and start again"
    )]
    KeyReadable { path: PathBuf, mode: u32 },
    #[error("cannot write {path}: {detail}")]
    Write { path: PathBuf, detail: String },
    #[error("cannot generate a self-signed certificate: {0}")]
    Generate(String),
    #[error("cannot set up TLS: {0}")]
    Setup(String),
}

/// The certificate in use, swapped whole on reload.
#[derive(Debug)]
struct Resolver(RwLock<Arc<CertifiedKey>>);

impl ResolvesServerCert for Resolver {
    fn resolve(&self, _hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(self.0.read_or_recover().clone())
    }
}

/// The broker's TLS: where its certificate comes from, the one in use, and
/// the acceptor every connection's handshake goes through.
pub struct Tls {
    cert_path: PathBuf,
    key_path: PathBuf,
    provider: Arc<CryptoProvider>,
    resolver: Arc<Resolver>,
    acceptor: TlsAcceptor,
}

impl std::fmt::Debug for Tls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tls")
            .field("cert", &self.cert_path)
            .field("fingerprint", &self.fingerprint())
            .finish()
    }
}

impl Tls {
    /// TLS with the PEM certificate chain (leaf first) and private key in
    /// these files; both are read again by [`Tls::reload`].
    pub fn from_files(cert_path: &Path, key_path: &Path) -> Result<Tls, TlsError> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let key = load(&provider, cert_path, key_path)?;
        record_expiry(cert_path, &key);
        let resolver = Arc::new(Resolver(RwLock::new(Arc::new(key))));
        let mut config = rustls::ServerConfig::builder_with_provider(provider.clone())
            .with_safe_default_protocol_versions()
            .map_err(|e| TlsError::Setup(e.to_string()))?
            .with_no_client_auth()
            .with_cert_resolver(resolver.clone());
        // The broker speaks HTTP/1.1 only.
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        Ok(Tls {
            cert_path: cert_path.to_path_buf(),
            key_path: key_path.to_path_buf(),
            provider,
            resolver,
            acceptor: TlsAcceptor::from(Arc::new(config)),
        })
    }

    /// TLS with the self-signed pair kept in `data_dir`, generated there on
    /// first use for `names` (host names and IP addresses) and reused
    /// afterwards, so that its fingerprint stays what clients pinned.
    /// The certificate is valid for [`SELF_SIGNED_VALIDITY`] from an hour
    /// before it was made (for clocks a little behind); a pair within
    /// [`SELF_SIGNED_RENEW_BEFORE`] of its end is generated anew at start
    /// (with a new fingerprint, which the broker prints). Answers whether
    /// it was generated now.
    pub fn self_signed(data_dir: &Path, names: &[String]) -> Result<(Tls, bool), TlsError> {
        let cert_path = data_dir.join(SELF_SIGNED_CERT);
        let key_path = data_dir.join(SELF_SIGNED_KEY);
        let ageing = std::fs::metadata(&cert_path)
            .and_then(|m| m.modified())
            .ok()
            .and_then(|made| made.elapsed().ok())
            .is_some_and(|age| age + SELF_SIGNED_RENEW_BEFORE >= SELF_SIGNED_VALIDITY);
        let generated = !cert_path.exists() || !key_path.exists() || ageing;
        if generated {
            let mut params = rcgen::CertificateParams::new(names.to_vec())
                .map_err(|e| TlsError::Generate(e.to_string()))?;
            let now = time::OffsetDateTime::now_utc();
            params.not_before = now - time::Duration::hours(1);
            params.not_after = now + SELF_SIGNED_VALIDITY;
            let signing_key =
                rcgen::KeyPair::generate().map_err(|e| TlsError::Generate(e.to_string()))?;
            let cert = params
                .self_signed(&signing_key)
                .map_err(|e| TlsError::Generate(e.to_string()))?;
            let pair = rcgen::CertifiedKey { cert, signing_key };
            // The key first (0600), then the certificate: a crash between
            // the two leaves no certificate, so the next start generates
            // the pair again.
            write_file(
                &key_path,
                pair.signing_key.serialize_pem().as_bytes(),
                0o600,
            )?;
            write_file(&cert_path, pair.cert.pem().as_bytes(), 0o644)?;
        }
        Ok((Tls::from_files(&cert_path, &key_path)?, generated))
    }

    /// The acceptor every handshake goes through, for another listener
    /// with the same certificate (the RD Gateway's): it follows reloads,
    /// since it asks the resolver at each handshake.
    pub fn acceptor(&self) -> TlsAcceptor {
        self.acceptor.clone()
    }

    /// The SHA-256 fingerprint of the leaf certificate in use.
    pub fn fingerprint(&self) -> Fingerprint {
        let key = self.resolver.0.read_or_recover();
        Fingerprint::of(key.end_entity_cert().map(|c| c.as_ref()).unwrap_or(&[]))
    }

    /// Reads the certificate and key files again and serves them to new
    /// connections; open connections keep theirs. On any error the
    /// certificate in use stays, and the error says why.
    pub fn reload(&self) -> Result<Fingerprint, TlsError> {
        let key = load(&self.provider, &self.cert_path, &self.key_path)?;
        record_expiry(&self.cert_path, &key);
        *self.resolver.0.write_or_recover() = Arc::new(key);
        Ok(self.fingerprint())
    }

    /// Reloads on every SIGHUP, until the process ends. The signal handler
    /// is installed before this returns, so a SIGHUP sent once the broker
    /// has said it listens never kills it.
    pub fn reload_on_sighup(self: &Arc<Tls>) -> std::io::Result<tokio::task::JoinHandle<()>> {
        let mut hangups = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup())?;
        let tls = self.clone();
        Ok(tokio::spawn(async move {
            while hangups.recv().await.is_some() {
                match tls.reload() {
                    Ok(fingerprint) => {
                        tracing::info!(%fingerprint, cert = %tls.cert_path.display(), "TLS certificate reloaded");
                        eprintln!("TLS certificate reloaded: SHA-256 fingerprint {fingerprint}");
                    }
                    Err(e) => {
                        tracing::error!(error = %e, "TLS reload failed; the certificate in use stays");
                        eprintln!("TLS reload failed, the certificate in use stays: {e}");
                    }
                }
            }
        }))
    }
}

/// Sets `deskbroker_tls_certificate_expiry_timestamp_seconds` for the
/// certificate read from `path`: when its leaf stops being valid, in Unix
/// seconds, so that an alert fires weeks before clients start refusing it.
fn record_expiry(path: &Path, key: &CertifiedKey) {
    use x509_cert::der::Decode;
    let not_after = key
        .end_entity_cert()
        .ok()
        .and_then(|leaf| x509_cert::Certificate::from_der(leaf.as_ref()).ok())
        .map(|c| c.tbs_certificate.validity.not_after.to_unix_duration());
    // The listeners' certificates are read before anything else is
    // measured: the recorder must be there to keep this.
    crate::telemetry::init();
    match not_after {
        Some(end) => metrics::gauge!(
            "deskbroker_tls_certificate_expiry_timestamp_seconds",
            "certificate" => path.display().to_string()
        )
        .set(end.as_secs_f64()),
        // rustls took the certificate; a validity it cannot show is only
        // a gauge missing.
        None => tracing::warn!(cert = %path.display(), "cannot read the certificate's validity"),
    }
}

/// A private key file every user may read is refused: whoever can read it
/// can pose as this server. Readable by a group is allowed (Debian gives
/// services their keys through the `ssl-cert` group).
fn check_key_mode(key_path: &Path) -> Result<(), TlsError> {
    use std::os::unix::fs::PermissionsExt;
    let meta = std::fs::metadata(key_path).map_err(|e| TlsError::Read {
        path: key_path.to_path_buf(),
        detail: e.to_string(),
    })?;
    let mode = meta.permissions().mode() & 0o777;
    if mode & 0o004 != 0 {
        return Err(TlsError::KeyReadable {
            path: key_path.to_path_buf(),
            mode,
        });
    }
    Ok(())
}

/// Reads a certificate chain and its key, and checks they go together.
fn load(
    provider: &CryptoProvider,
    cert_path: &Path,
    key_path: &Path,
) -> Result<CertifiedKey, TlsError> {
    let read = |path: &Path, e: &dyn std::fmt::Display| TlsError::Read {
        path: path.to_path_buf(),
        detail: e.to_string(),
    };
    let certs = CertificateDer::pem_file_iter(cert_path)
        .map_err(|e| read(cert_path, &e))?
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| read(cert_path, &e))?;
    if certs.is_empty() {
        return Err(TlsError::NoCertificate {
            path: cert_path.to_path_buf(),
        });
    }
    check_key_mode(key_path)?;
    let key = PrivateKeyDer::from_pem_file(key_path).map_err(|e| read(key_path, &e))?;
    CertifiedKey::from_der(certs, key, provider).map_err(|e| TlsError::Key {
        cert: cert_path.to_path_buf(),
        key: key_path.to_path_buf(),
        detail: e.to_string(),
    })
}

/// Writes a file whole (temporary file, fsync, rename) with `mode`.
fn write_file(path: &Path, bytes: &[u8], mode: u32) -> Result<(), TlsError> {
    use std::io::Write;
    let tmp = path.with_extension("pem.tmp");
    let written = (|| -> std::io::Result<()> {
        match std::fs::remove_file(&tmp) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(e),
            _ => {}
        }
        let mut options = std::fs::OpenOptions::new();
        options.write(true).create_new(true);
        std::os::unix::fs::OpenOptionsExt::mode(&mut options, mode);
        let mut f = options.open(&tmp)?;
        f.write_all(bytes)?;
        f.sync_all()?;
        std::fs::rename(&tmp, path)
    })();
    written.map_err(|e| TlsError::Write {
        path: path.to_path_buf(),
        detail: e.to_string(),
    })
}

/// What [`crate::serve`] listens on: a TCP listener, with TLS or without.
/// A bare `TcpListener` converts into a plain-HTTP one.
pub struct Listening {
    inner: LimitedListener,
    tls: Option<Arc<Tls>>,
}

impl Listening {
    /// HTTPS on `tcp` with `tls`.
    pub fn tls(tcp: TcpListener, tls: Arc<Tls>) -> Listening {
        Listening {
            inner: LimitedListener::new(tcp),
            tls: Some(tls),
        }
    }
}

impl From<TcpListener> for Listening {
    fn from(tcp: TcpListener) -> Listening {
        Listening {
            inner: LimitedListener::new(tcp),
            tls: None,
        }
    }
}

impl axum::serve::Listener for Listening {
    type Io = Stream;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (Stream, SocketAddr) {
        let (stream, addr) = axum::serve::Listener::accept(&mut self.inner).await;
        let stream = match &self.tls {
            None => Stream::Plain(stream),
            Some(tls) => Stream::Handshake(
                Box::new(tls.acceptor.accept(stream)),
                Box::pin(tokio::time::sleep(HANDSHAKE_TIMEOUT)),
            ),
        };
        (stream, addr)
    }

    fn local_addr(&self) -> std::io::Result<SocketAddr> {
        axum::serve::Listener::local_addr(&self.inner)
    }
}

/// One client connection: plain, or TLS (handshaking, then established).
pub enum Stream {
    Plain(LimitedStream),
    Handshake(
        Box<tokio_rustls::Accept<LimitedStream>>,
        Pin<Box<tokio::time::Sleep>>,
    ),
    Tls(Box<tokio_rustls::server::TlsStream<LimitedStream>>),
    /// The handshake failed; the connection is being closed.
    Failed,
}

impl Stream {
    /// Drives the handshake, if one is under way; ready once the stream
    /// is plain or established.
    fn poll_handshake(&mut self, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        let Stream::Handshake(accept, deadline) = self else {
            return match self {
                Stream::Failed => Poll::Ready(Err(std::io::Error::new(
                    std::io::ErrorKind::NotConnected,
                    "TLS handshake failed",
                ))),
                _ => Poll::Ready(Ok(())),
            };
        };
        match Pin::new(accept.as_mut()).poll(cx) {
            Poll::Ready(Ok(tls)) => {
                *self = Stream::Tls(Box::new(tls));
                Poll::Ready(Ok(()))
            }
            Poll::Ready(Err(e)) => {
                tracing::debug!(error = %e, "TLS handshake failed");
                *self = Stream::Failed;
                Poll::Ready(Err(e))
            }
            Poll::Pending => match deadline.as_mut().poll(cx) {
                Poll::Ready(()) => {
                    *self = Stream::Failed;
                    Poll::Ready(Err(std::io::Error::new(
                        std::io::ErrorKind::TimedOut,
                        "TLS handshake timed out",
                    )))
                }
                Poll::Pending => Poll::Pending,
            },
        }
    }
}

use std::future::Future;

impl AsyncRead for Stream {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let this = self.get_mut();
        std::task::ready!(this.poll_handshake(cx))?;
        match this {
            Stream::Plain(s) => Pin::new(s).poll_read(cx, buf),
            Stream::Tls(s) => Pin::new(s.as_mut()).poll_read(cx, buf),
            Stream::Handshake(..) | Stream::Failed => unreachable!("handshake polled above"),
        }
    }
}

impl AsyncWrite for Stream {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        let this = self.get_mut();
        std::task::ready!(this.poll_handshake(cx))?;
        match this {
            Stream::Plain(s) => Pin::new(s).poll_write(cx, buf),
            Stream::Tls(s) => Pin::new(s.as_mut()).poll_write(cx, buf),
            Stream::Handshake(..) | Stream::Failed => unreachable!("handshake polled above"),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_flush(cx),
            Stream::Tls(s) => Pin::new(s.as_mut()).poll_flush(cx),
            Stream::Handshake(..) | Stream::Failed => Poll::Ready(Ok(())),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_shutdown(cx),
            Stream::Tls(s) => Pin::new(s.as_mut()).poll_shutdown(cx),
            Stream::Handshake(..) | Stream::Failed => Poll::Ready(Ok(())),
        }
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        let this = self.get_mut();
        std::task::ready!(this.poll_handshake(cx))?;
        match this {
            Stream::Plain(s) => Pin::new(s).poll_write_vectored(cx, bufs),
            Stream::Tls(s) => Pin::new(s.as_mut()).poll_write_vectored(cx, bufs),
            Stream::Handshake(..) | Stream::Failed => unreachable!("handshake polled above"),
        }
    }

    fn is_write_vectored(&self) -> bool {
        match self {
            Stream::Plain(s) => s.is_write_vectored(),
            Stream::Tls(s) => s.is_write_vectored(),
            Stream::Handshake(..) | Stream::Failed => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_self_signed_pair_is_generated_once_and_reused() {
        let dir = tempfile::tempdir().expect("tempdir");
        let names = vec!["localhost".to_string(), "127.0.0.1".to_string()];
        let (first, generated) = Tls::self_signed(dir.path(), &names).expect("generate");
        assert!(generated);
        let (again, generated) = Tls::self_signed(dir.path(), &names).expect("reuse");
        assert!(!generated);
        assert_eq!(first.fingerprint(), again.fingerprint());
        let mode = std::os::unix::fs::PermissionsExt::mode(
            &std::fs::metadata(dir.path().join(SELF_SIGNED_KEY))
                .expect("key")
                .permissions(),
        );
        assert_eq!(mode & 0o077, 0, "the key is readable by its owner only");

        // Valid from about now for SELF_SIGNED_VALIDITY, not for ever
        // (as `openssl x509` reads it).
        let dates = std::process::Command::new("openssl")
            .args(["x509", "-noout", "-dates", "-in"])
            .arg(dir.path().join(SELF_SIGNED_CERT))
            .output()
            .expect("openssl runs");
        let dates = String::from_utf8_lossy(&dates.stdout).to_string();
        let year = |field: &str| -> i32 {
            let line = dates
                .lines()
                .find(|l| l.starts_with(field))
                .expect("a date");
            line.split_whitespace()
                .rev()
                .nth(1)
                .and_then(|y| y.parse().ok())
                .expect("a year")
        };
        let this_year = time::OffsetDateTime::now_utc().year();
        assert!(
            (this_year - 1..=this_year).contains(&year("notBefore")),
            "{dates}"
        );
        assert!(
            (this_year + 2..=this_year + 3).contains(&year("notAfter")),
            "{dates}"
        );

        // A pair near its end is made anew at start.
        let ageing =
            std::time::SystemTime::now() - (SELF_SIGNED_VALIDITY - SELF_SIGNED_RENEW_BEFORE);
        std::fs::File::options()
            .write(true)
            .open(dir.path().join(SELF_SIGNED_CERT))
            .and_then(|f| f.set_modified(ageing))
            .expect("age the certificate");
        let (renewed, generated) = Tls::self_signed(dir.path(), &names).expect("renew");
        assert!(generated);
        assert_ne!(renewed.fingerprint(), first.fingerprint());
    }

    #[test]
    fn a_bad_reload_keeps_the_certificate_in_use() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (tls, _) = Tls::self_signed(dir.path(), &["localhost".into()]).expect("generate");
        let before = tls.fingerprint();
        std::fs::write(dir.path().join(SELF_SIGNED_CERT), "not a certificate").expect("write");
        let e = tls.reload().expect_err("garbage is refused").to_string();
        assert!(e.contains(SELF_SIGNED_CERT), "{e}");
        assert_eq!(tls.fingerprint(), before);
        // A key that belongs to another certificate is refused too.
        let other = tempfile::tempdir().expect("tempdir");
        let _ = Tls::self_signed(other.path(), &["localhost".into()]).expect("generate");
        std::fs::copy(
            other.path().join(SELF_SIGNED_CERT),
            dir.path().join(SELF_SIGNED_CERT),
        )
        .expect("copy");
        let e = tls.reload().expect_err("mismatched key").to_string();
        assert!(e.contains("does not go with"), "{e}");
        assert_eq!(tls.fingerprint(), before);
    }

    #[test]
    fn a_key_every_user_may_read_is_refused_at_start_and_on_reload() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().expect("tempdir");
        let (tls, _) = Tls::self_signed(dir.path(), &["localhost".into()]).expect("generate");
        let cert = dir.path().join(SELF_SIGNED_CERT);
        let key = dir.path().join(SELF_SIGNED_KEY);
        let chmod = |mode| {
            std::fs::set_permissions(&key, std::fs::Permissions::from_mode(mode)).expect("chmod")
        };
        // A group of the service's may read it (Debian's ssl-cert).
        chmod(0o640);
        Tls::from_files(&cert, &key).expect("0640 is taken");
        chmod(0o644);
        let e = Tls::from_files(&cert, &key)
            .expect_err("0644 is refused")
            .to_string();
        assert!(e.contains(SELF_SIGNED_KEY) && e.contains("644"), "{e}");
        let before = tls.fingerprint();
        let e = tls
            .reload()
            .expect_err("0644 is refused on reload")
            .to_string();
        assert!(e.contains("every user"), "{e}");
        assert_eq!(tls.fingerprint(), before);
    }

    #[test]
    fn the_expiry_gauge_shows_the_leafs_end() {
        let dir = tempfile::tempdir().expect("tempdir");
        let _ = Tls::self_signed(dir.path(), &["localhost".into()]).expect("generate");
        let cert = dir.path().join(SELF_SIGNED_CERT).display().to_string();
        let metrics = crate::telemetry::render();
        let line = metrics
            .lines()
            .find(|l| {
                l.starts_with("deskbroker_tls_certificate_expiry_timestamp_seconds")
                    && l.contains(&cert)
            })
            .unwrap_or_else(|| panic!("no expiry for {cert} in {metrics}"));
        let end: f64 = line
            .rsplit(' ')
            .next()
            .and_then(|v| v.parse().ok())
            .expect("a value");
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .expect("clock")
            .as_secs_f64();
        let validity = SELF_SIGNED_VALIDITY.as_secs_f64();
        // Made now for SELF_SIGNED_VALIDITY (give or take the test's run).
        assert!(
            (end - now - validity).abs() < 3600.0,
            "ends {end}, now {now}: {line}"
        );
    }
}
