//! How a client of the broker trusts its HTTPS certificate, the same way in
//! every program (`--ca-cert`, `--tls-fingerprint`): the system's roots by
//! default; a private CA's certificate instead of them; or the SHA-256 of a
//! self-signed certificate, pinned (what `deskbroker serve` prints when it
//! generates one). The rustls configuration is built here, once, with the
//! ring provider, and handed to reqwest by [`crate::Client`].

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{CertificateError, DigitallySignedStruct, SignatureScheme};
use sha2::{Digest, Sha256};

/// Makes ring the process's default rustls provider, once; later calls do
/// nothing. reqwest (built with `rustls-no-provider`, to avoid a second
/// crypto library) panics when it builds a client without a preconfigured
/// TLS configuration and no default provider: [`crate::Client`] always
/// passes its own, and this covers every other `reqwest::Client` of the
/// process (tests' plain HTTP clients among them). The binary calls it at
/// start.
pub fn install_default_provider() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        // Err only when another provider was installed first: keep it.
        let _ = rustls::crypto::ring::default_provider().install_default();
    });
}

/// The SHA-256 of a certificate's DER encoding, as `openssl x509
/// -fingerprint -sha256` prints it (`AB:CD:…`, upper case).
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Fingerprint([u8; 32]);

/// Why a text is not a SHA-256 fingerprint.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error(
    "invalid --tls-fingerprint {0:?}: give the certificate's SHA-256 as 64 hex digits, \
     with or without colons (as `deskbroker serve` prints it)"
)]
pub struct FingerprintError(String);

impl Fingerprint {
    /// The fingerprint of a DER-encoded certificate.
    pub fn of(der: &[u8]) -> Fingerprint {
        Fingerprint(Sha256::digest(der).into())
    }

    /// Reads 64 hex digits, in any case, with or without `:` between bytes
    /// and an optional `sha256:` / `SHA256=` prefix (as tools print it).
    pub fn parse(text: &str) -> Result<Fingerprint, FingerprintError> {
        let bad = || FingerprintError(text.to_string());
        let trimmed = text.trim();
        let lower = trimmed.to_ascii_lowercase();
        let body = ["sha256:", "sha256=", "sha256 fingerprint="]
            .iter()
            .find_map(|p| lower.strip_prefix(p))
            .unwrap_or(&lower);
        let digits: Vec<u8> = body.bytes().filter(|b| *b != b':').collect();
        let mut bytes = [0u8; 32];
        hex::decode_to_slice(digits, &mut bytes).map_err(|_| bad())?;
        Ok(Fingerprint(bytes))
    }
}

impl fmt::Display for Fingerprint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, b) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str(":")?;
            }
            write!(f, "{b:02X}")?;
        }
        Ok(())
    }
}

impl fmt::Debug for Fingerprint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Fingerprint({self})")
    }
}

impl std::str::FromStr for Fingerprint {
    type Err = FingerprintError;
    fn from_str(s: &str) -> Result<Fingerprint, FingerprintError> {
        Fingerprint::parse(s)
    }
}

/// Which certificates a client accepts from the broker.
#[derive(Clone, Debug, Default)]
pub struct Trust(Kind);

#[derive(Clone, Debug, Default)]
enum Kind {
    /// The operating system's roots (a certificate from a public CA, or
    /// one the machine's administrator installed).
    #[default]
    System,
    /// Only certificates issued by these CAs (`--ca-cert`), for the host
    /// name in the URL.
    Roots(Vec<CertificateDer<'static>>),
    /// Exactly one certificate, whatever it names (`--tls-fingerprint`).
    Pinned(Fingerprint),
    /// Exactly the certificate whose fingerprint the function answers at
    /// each handshake: a broker calling its own API (its in-process front
    /// door), which follows its certificate across SIGHUP reloads.
    Live(Live),
}

/// A fingerprint read anew at each handshake.
#[derive(Clone)]
struct Live(Arc<dyn Fn() -> Fingerprint + Send + Sync>);

impl fmt::Debug for Live {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Live({})", (self.0)())
    }
}

/// Why the trust flags cannot be used; names the flag and the file.
#[derive(Debug, thiserror::Error)]
pub enum TrustError {
    #[error("cannot read --ca-cert {path}: {detail}")]
    CaCert { path: PathBuf, detail: String },
    #[error(transparent)]
    Fingerprint(#[from] FingerprintError),
    #[error("give --ca-cert or --tls-fingerprint, not both")]
    Both,
    #[error("cannot set up TLS: {0}")]
    Setup(String),
}

impl Trust {
    /// The operating system's roots.
    pub fn system() -> Trust {
        Trust(Kind::System)
    }

    /// Only this fingerprint.
    pub fn pinned(fingerprint: Fingerprint) -> Trust {
        Trust(Kind::Pinned(fingerprint))
    }

    /// Only the certificate whose fingerprint `current` answers when a
    /// connection is made (a process trusting the certificate it serves,
    /// which SIGHUP may replace).
    pub fn pinned_live(current: impl Fn() -> Fingerprint + Send + Sync + 'static) -> Trust {
        Trust(Kind::Live(Live(Arc::new(current))))
    }

    /// The CA certificates in the PEM file at `path`.
    pub fn ca_file(path: &Path) -> Result<Trust, TrustError> {
        let fail = |detail: String| TrustError::CaCert {
            path: path.to_path_buf(),
            detail,
        };
        let certs = CertificateDer::pem_file_iter(path)
            .map_err(|e| fail(e.to_string()))?
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| fail(e.to_string()))?;
        if certs.is_empty() {
            return Err(fail("no PEM certificate in it".into()));
        }
        Ok(Trust(Kind::Roots(certs)))
    }

    /// From the flags every program takes: `--ca-cert FILE`,
    /// `--tls-fingerprint SHA256`, at most one of them.
    pub fn from_flags(
        ca_cert: Option<&Path>,
        fingerprint: Option<&str>,
    ) -> Result<Trust, TrustError> {
        let fingerprint = fingerprint.filter(|f| !f.trim().is_empty());
        match (ca_cert, fingerprint) {
            (Some(_), Some(_)) => Err(TrustError::Both),
            (Some(path), None) => Trust::ca_file(path),
            (None, Some(f)) => Ok(Trust::pinned(Fingerprint::parse(f)?)),
            (None, None) => Ok(Trust::system()),
        }
    }

    /// The rustls client configuration for this trust (ring provider,
    /// TLS 1.2 and 1.3, HTTP/1.1 only as the broker speaks it).
    pub fn client_config(&self) -> Result<rustls::ClientConfig, TrustError> {
        install_default_provider();
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let builder = rustls::ClientConfig::builder_with_provider(provider.clone())
            .with_safe_default_protocol_versions()
            .map_err(|e| TrustError::Setup(e.to_string()))?;
        let verifier: Arc<dyn ServerCertVerifier> = match &self.0 {
            Kind::System => Arc::new(
                rustls_platform_verifier::Verifier::new(provider)
                    .map_err(|e| TrustError::Setup(e.to_string()))?,
            ),
            Kind::Roots(certs) => {
                let mut roots = rustls::RootCertStore::empty();
                for cert in certs {
                    roots
                        .add(cert.clone())
                        .map_err(|e| TrustError::Setup(format!("--ca-cert: {e}")))?;
                }
                rustls::client::WebPkiServerVerifier::builder_with_provider(
                    Arc::new(roots),
                    provider,
                )
                .build()
                .map_err(|e| TrustError::Setup(format!("--ca-cert: {e}")))?
            }
            Kind::Pinned(fingerprint) => {
                let fingerprint = *fingerprint;
                pinned(Live(Arc::new(move || fingerprint)), provider)
            }
            Kind::Live(live) => pinned(live.clone(), provider),
        };
        let mut config = builder
            .dangerous()
            .with_custom_certificate_verifier(verifier)
            .with_no_client_auth();
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        Ok(config)
    }
}

/// Accepts the one certificate whose SHA-256 is pinned, whatever name or
/// issuer it has (a self-signed certificate has no CA to check), and still
/// checks that the server holds its private key: the handshake's signature
/// is verified against the pinned certificate's public key, so a recorded
/// copy of the certificate is of no use to anyone else.
fn pinned(fingerprint: Live, provider: Arc<CryptoProvider>) -> Arc<SignatureChecked> {
    SignatureChecked::new(provider, move |end_entity, _, _, _, _| {
        let got = Fingerprint::of(end_entity);
        let want = (fingerprint.0)();
        if got == want {
            Ok(ServerCertVerified::assertion())
        } else {
            Err(rustls::Error::InvalidCertificate(CertificateError::Other(
                rustls::OtherError(Arc::new(FingerprintMismatch { got, want })),
            )))
        }
    })
}

/// What a [`SignatureChecked`] verifier decides about the server's
/// certificate: its arguments are those of
/// [`ServerCertVerifier::verify_server_cert`] (the end entity, the
/// intermediates, the name asked for, the OCSP response, the time).
type CertCheck = dyn Fn(
        &CertificateDer<'_>,
        &[CertificateDer<'_>],
        &ServerName<'_>,
        &[u8],
        UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error>
    + Send
    + Sync;

/// A certificate verifier whose decision on the certificate is its own
/// function's (a pinned fingerprint, a chain whose name is not checked,
/// anything), and which always verifies the handshake's signatures with the
/// provider's algorithms: whatever certificate it accepts, the server must
/// hold that certificate's private key. The one custom verifier of the
/// workspace: the clients' `--tls-fingerprint` and the PostgreSQL store's
/// `sslmode=require` and `verify-ca` use it.
pub struct SignatureChecked {
    check: Box<CertCheck>,
    provider: Arc<CryptoProvider>,
}

impl SignatureChecked {
    /// A verifier that accepts what `check` accepts, with `provider`'s
    /// signature algorithms.
    pub fn new(
        provider: Arc<CryptoProvider>,
        check: impl Fn(
            &CertificateDer<'_>,
            &[CertificateDer<'_>],
            &ServerName<'_>,
            &[u8],
            UnixTime,
        ) -> Result<ServerCertVerified, rustls::Error>
        + Send
        + Sync
        + 'static,
    ) -> Arc<SignatureChecked> {
        Arc::new(SignatureChecked {
            check: Box::new(check),
            provider,
        })
    }
}

impl fmt::Debug for SignatureChecked {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SignatureChecked").finish_non_exhaustive()
    }
}

/// A pinned fingerprint that does not match, said with both values.
#[derive(Debug, thiserror::Error)]
#[error(
    "the broker's certificate has SHA-256 fingerprint {got}, not the pinned {want} \
     (--tls-fingerprint): refused"
)]
pub struct FingerprintMismatch {
    pub got: Fingerprint,
    pub want: Fingerprint,
}

impl ServerCertVerifier for SignatureChecked {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        (self.check)(end_entity, intermediates, server_name, ocsp_response, now)
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.provider
            .signature_verification_algorithms
            .supported_schemes()
    }
}

/// The TLS failure inside a transport error, if that is what it was: the
/// rustls error (a certificate refused, a handshake failed), said in words.
pub fn tls_failure(err: &(dyn std::error::Error + 'static)) -> Option<String> {
    let mut cause = Some(err);
    while let Some(e) = cause {
        if let Some(tls) = e.downcast_ref::<rustls::Error>() {
            return Some(match tls {
                rustls::Error::InvalidCertificate(CertificateError::Other(other)) => {
                    format!("invalid peer certificate: {}", other.0)
                }
                other => other.to_string(),
            });
        }
        // An io::Error's source() skips the error it wraps: look inside.
        if let Some(io) = e.downcast_ref::<std::io::Error>()
            && let Some(inner) = io.get_ref()
            && let Some(found) = tls_failure(inner)
        {
            return Some(found);
        }
        cause = e.source();
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fingerprints_read_as_tools_print_them() {
        let f = Fingerprint::of(b"certificate");
        let printed = f.to_string();
        assert_eq!(printed.len(), 32 * 3 - 1);
        for text in [
            printed.clone(),
            printed.replace(':', ""),
            printed.to_lowercase(),
            format!("sha256:{printed}"),
            format!("SHA256 Fingerprint={printed}"),
        ] {
            assert_eq!(Fingerprint::parse(&text), Ok(f), "{text}");
        }
        for bad in [
            "",
            "abc",
            &printed[..printed.len() - 1],
            &printed.replace('A', "G"),
        ] {
            if bad == printed {
                continue;
            }
            assert!(Fingerprint::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn a_live_pin_follows_the_certificate_it_is_told_of() {
        let (a, b) = (b"certificate a".as_slice(), b"certificate b".as_slice());
        let current = Arc::new(std::sync::Mutex::new(Fingerprint::of(a)));
        let reader = current.clone();
        let verifier = pinned(
            Live(Arc::new(move || *reader.lock().unwrap())),
            Arc::new(rustls::crypto::ring::default_provider()),
        );
        let name = ServerName::try_from("localhost").unwrap();
        let check = |der: &[u8]| {
            verifier
                .verify_server_cert(&CertificateDer::from(der), &[], &name, &[], UnixTime::now())
                .is_ok()
        };
        assert!(check(a) && !check(b));
        *current.lock().unwrap() = Fingerprint::of(b);
        assert!(check(b) && !check(a));
        let e = verifier
            .verify_server_cert(&CertificateDer::from(a), &[], &name, &[], UnixTime::now())
            .expect_err("a");
        assert!(tls_failure(&e).unwrap().contains("not the pinned"), "{e}");
    }

    #[test]
    fn both_trust_flags_are_refused_and_a_missing_ca_file_is_named() {
        let f = Fingerprint::of(b"x").to_string();
        assert!(matches!(
            Trust::from_flags(Some(Path::new("/x")), Some(&f)),
            Err(TrustError::Both)
        ));
        let e = Trust::from_flags(Some(Path::new("/nonexistent/ca.pem")), None)
            .expect_err("missing")
            .to_string();
        assert!(e.contains("/nonexistent/ca.pem"), "{e}");
        assert!(Trust::from_flags(None, Some("zz")).is_err());
        assert!(Trust::from_flags(None, None).is_ok());
    }
}
