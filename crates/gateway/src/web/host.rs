//! The broker's leg to the session host: the browser's X.224 Connection
//! Request passed on, the host's Connection Confirm read and judged, then
//! TLS with the host, whose certificate chain goes back to the browser.
//!
//! The host's certificate is not checked against any authority: session
//! hosts' RDP certificates are self-signed as a rule, and the broker knows
//! no pin for them. What is checked is that the host holds the private
//! key of the certificate it shows (the handshake's signatures, with
//! `api::tls::SignatureChecked`, the workspace's one custom verifier).
//! The chain goes to the browser, whose RDP client takes the host's
//! public key from it for CredSSP (NLA), as a direct client would from
//! its own TLS handshake.

use std::io;
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio_rustls::client::TlsStream;
use tokio_rustls::rustls;

use crate::pdu::{TPKT_HEADER_BYTES, TPKT_VERSION};

/// The longest Connection Confirm taken from a host (one is 19 bytes:
/// TPKT, the X.224 header and an 8-byte negotiation response); the X.224
/// length indicator is one byte, so no valid one is longer than this.
pub const MAX_CONFIRM_BYTES: usize = TPKT_HEADER_BYTES + 1 + 254;
/// The X.224 Connection Confirm TPDU code (upper nibble).
const X224_CONNECTION_CONFIRM: u8 = 0xD0;
/// TPKT and the fixed X.224 Connection Confirm header.
const CONFIRM_HEADER_BYTES: usize = TPKT_HEADER_BYTES + 7;
/// RDP_NEG_RSP and RDP_NEG_FAILURE (MS-RDPBCGR 2.2.1.2.1, 2.2.1.2.2).
const TYPE_RDP_NEG_RSP: u8 = 0x02;
const TYPE_RDP_NEG_FAILURE: u8 = 0x03;
const RDP_NEG_BYTES: usize = 8;

/// A host ready to carry the session's plaintext: its TLS stream, the
/// Connection Confirm it sent, and its certificate chain (DER, leaf first).
pub(super) struct Upgraded {
    pub tls: TlsStream<TcpStream>,
    pub confirm: Vec<u8>,
    pub chain: Vec<Vec<u8>>,
}

/// Why a host could not be used.
#[derive(Debug)]
pub(super) enum HostError {
    /// It did not answer, answered junk, or closed.
    Silent(String),
    /// It refused the negotiation (RDP_NEG_FAILURE), or chose Standard RDP
    /// Security, which has no TLS to terminate: its Connection Confirm.
    Negotiation(Vec<u8>),
    /// The TLS handshake failed (with the alert the host sent, if any).
    Tls(String, Option<u8>),
}

impl std::fmt::Display for HostError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            HostError::Silent(e) => write!(f, "{e}"),
            HostError::Negotiation(_) => write!(f, "the host refused the security negotiation"),
            HostError::Tls(e, _) => write!(f, "TLS with the host: {e}"),
        }
    }
}

/// The TLS client of the host leg: TLS 1.2 and 1.3 with ring, any
/// certificate whose key the host proves it holds (see the module's
/// documentation), no client certificate.
pub(super) fn connector() -> tokio_rustls::TlsConnector {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let verifier = api::tls::SignatureChecked::new(provider.clone(), |_, _, _, _, _| {
        Ok(rustls::client::danger::ServerCertVerified::assertion())
    });
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .expect("ring has TLS 1.2 and 1.3")
        .dangerous()
        .with_custom_certificate_verifier(verifier)
        .with_no_client_auth();
    tokio_rustls::TlsConnector::from(Arc::new(config))
}

/// Sends `x224` to `host`, reads its Connection Confirm (calling
/// `answered` as soon as it has come), and does TLS with it; each step
/// within `timeout`.
pub(super) async fn upgrade(
    mut host: TcpStream,
    x224: &[u8],
    timeout: Duration,
    tls: &tokio_rustls::TlsConnector,
    answered: impl FnOnce(),
) -> Result<Upgraded, HostError> {
    let silent = |e: io::Error| HostError::Silent(e.to_string());
    let exchange = async {
        host.write_all(x224).await?;
        read_confirm(&mut host).await
    };
    let confirm = tokio::time::timeout(timeout, exchange)
        .await
        .map_err(|_| HostError::Silent(format!("no Connection Confirm within {timeout:?}")))?
        .map_err(silent)?;
    answered();
    if !selects_tls(&confirm).map_err(HostError::Silent)? {
        return Err(HostError::Negotiation(confirm));
    }
    // No name: the host is reached by its address, and RDP hosts need no
    // SNI. Its address is what the certificate is shown for.
    let ip = host.peer_addr().map_err(silent)?.ip();
    let name = rustls::pki_types::ServerName::IpAddress(ip.into());
    let tls = tokio::time::timeout(timeout, tls.connect(name, host))
        .await
        .map_err(|_| HostError::Tls(format!("no handshake within {timeout:?}"), None))?
        .map_err(|e| {
            let alert = e
                .get_ref()
                .and_then(|inner| inner.downcast_ref::<rustls::Error>())
                .and_then(|r| match r {
                    rustls::Error::AlertReceived(a) => Some(u8::from(*a)),
                    _ => None,
                });
            HostError::Tls(e.to_string(), alert)
        })?;
    let chain: Vec<Vec<u8>> = tls
        .get_ref()
        .1
        .peer_certificates()
        .unwrap_or_default()
        .iter()
        .map(|c| c.to_vec())
        .collect();
    if chain.is_empty() {
        return Err(HostError::Tls(
            "the host showed no certificate".into(),
            None,
        ));
    }
    Ok(Upgraded {
        tls,
        confirm,
        chain,
    })
}

/// Reads one TPKT packet of at most [`MAX_CONFIRM_BYTES`].
async fn read_confirm(host: &mut TcpStream) -> io::Result<Vec<u8>> {
    let mut header = [0u8; TPKT_HEADER_BYTES];
    host.read_exact(&mut header).await?;
    let length = usize::from(u16::from_be_bytes([header[2], header[3]]));
    if header[0] != TPKT_VERSION || !(CONFIRM_HEADER_BYTES..=MAX_CONFIRM_BYTES).contains(&length) {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("not a Connection Confirm: TPKT {header:02x?}"),
        ));
    }
    let mut confirm = vec![0u8; length];
    confirm[..TPKT_HEADER_BYTES].copy_from_slice(&header);
    host.read_exact(&mut confirm[TPKT_HEADER_BYTES..]).await?;
    Ok(confirm)
}

/// Whether a Connection Confirm selects a TLS-based protocol (SSL, HYBRID,
/// RDSTLS, HYBRID_EX, …: every protocol but Standard RDP Security begins
/// with TLS); `Err` when it is no Connection Confirm at all.
pub fn selects_tls(confirm: &[u8]) -> Result<bool, String> {
    let junk = || format!("not a Connection Confirm: {confirm:02x?}");
    if confirm.len() < CONFIRM_HEADER_BYTES
        || usize::from(confirm[4]) != confirm.len() - TPKT_HEADER_BYTES - 1
        || confirm[5] & 0xF0 != X224_CONNECTION_CONFIRM
    {
        return Err(junk());
    }
    let negotiation = &confirm[CONFIRM_HEADER_BYTES..];
    if negotiation.is_empty() {
        // No negotiation: Standard RDP Security.
        return Ok(false);
    }
    if negotiation.len() < RDP_NEG_BYTES {
        return Err(junk());
    }
    match negotiation[0] {
        TYPE_RDP_NEG_RSP => {
            let selected = u32::from_le_bytes([
                negotiation[4],
                negotiation[5],
                negotiation[6],
                negotiation[7],
            ]);
            Ok(selected != 0)
        }
        TYPE_RDP_NEG_FAILURE => Ok(false),
        _ => Err(junk()),
    }
}
