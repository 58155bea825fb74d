//! The browser's one request (RDCleanPath, as IronRDP's web client sends
//! it): read whole within its bounds, decoded with `ironrdp-rdcleanpath`,
//! and checked before anything is asked of the broker or sent to a host.

use std::time::Duration;

use futures_util::StreamExt;
use ironrdp_rdcleanpath::{DetectionResult, RDCleanPathMessage, RDCleanPathPdu};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio_tungstenite::WebSocketStream;
use tokio_tungstenite::tungstenite::Message;

use super::Outcome;
use crate::pdu;

/// What the browser asked for, checked: the ticket (read, not verified:
/// the broker verifies it when asked to place), the X.224 Connection
/// Request to pass to the host, and the destination it named (for the log
/// only: the broker decides where the user goes).
#[derive(Debug)]
pub(super) struct Asked {
    pub ticket: api::ticket::Ticket,
    pub raw_ticket: String,
    /// The ticket's MAC as written (base64url, canonical): one ticket,
    /// however its other fields are spelled.
    pub signature: String,
    pub x224: Vec<u8>,
    pub destination: String,
}

/// A request refused before the broker is asked: the HTTP status the
/// RDCleanPath error carries (none when nothing can be answered), how the
/// connection ended, and why.
#[derive(Debug)]
pub(super) struct Refused {
    pub status: Option<u16>,
    pub outcome: Outcome,
    pub detail: String,
}

impl Refused {
    fn new(status: u16, outcome: Outcome, detail: impl Into<String>) -> Refused {
        Refused {
            status: Some(status),
            outcome,
            detail: detail.into(),
        }
    }

    fn bad(detail: impl Into<String>) -> Refused {
        Refused::new(400, Outcome::BadRequest, detail)
    }
}

/// Reads the request: one binary message (IronRDP's web client sends it
/// whole, in one) of at most `max_bytes`, within `timeout`.
pub(super) async fn read<S>(
    ws: &mut WebSocketStream<S>,
    timeout: Duration,
    max_bytes: usize,
) -> Result<Asked, Refused>
where
    S: AsyncRead + AsyncWrite + Unpin,
{
    let bytes = match tokio::time::timeout(timeout, message(ws)).await {
        Ok(read) => read?,
        Err(_) => {
            return Err(Refused {
                status: None,
                outcome: Outcome::Timeout,
                detail: format!("no request within {timeout:?}"),
            });
        }
    };
    if bytes.len() > max_bytes {
        return Err(Refused::new(
            413,
            Outcome::TooLarge,
            format!("a request of {} bytes (at most {max_bytes})", bytes.len()),
        ));
    }
    match RDCleanPathPdu::detect(&bytes) {
        DetectionResult::Detected { total_length, .. } if bytes.len() == total_length => {
            check(&bytes)
        }
        _ => Err(Refused::bad(
            "not one whole RDCleanPath request of a version this server speaks",
        )),
    }
}

/// The client's first data message.
async fn message<S>(ws: &mut WebSocketStream<S>) -> Result<Vec<u8>, Refused>
where
    S: AsyncRead + AsyncWrite + Unpin,
{
    loop {
        match ws.next().await {
            None | Some(Ok(Message::Close(_))) => {
                return Err(Refused {
                    status: None,
                    outcome: Outcome::ClientLeft,
                    detail: "the client closed before its request".into(),
                });
            }
            Some(Err(e)) => {
                return Err(Refused {
                    status: None,
                    outcome: Outcome::BadRequest,
                    detail: format!("websocket: {e}"),
                });
            }
            Some(Ok(Message::Binary(b))) => return Ok(b.to_vec()),
            Some(Ok(Message::Text(_))) => {
                return Err(Refused::bad("a text message; RDCleanPath is binary"));
            }
            // Pings are answered by the library; pongs carry nothing.
            Some(Ok(_)) => {}
        }
    }
}

/// Decodes and checks a whole request.
fn check(bytes: &[u8]) -> Result<Asked, Refused> {
    let pdu = RDCleanPathPdu::from_der(bytes)
        .map_err(|e| Refused::bad(format!("RDCleanPath request: {e}")))?;
    if pdu.version != ironrdp_rdcleanpath::VERSION_1 {
        return Err(Refused::bad(format!(
            "RDCleanPath version {}; this server speaks {}",
            pdu.version,
            ironrdp_rdcleanpath::VERSION_1
        )));
    }
    if pdu.destination.is_some() && pdu.proxy_auth.is_none() {
        return Err(Refused::new(
            401,
            Outcome::TicketRefused,
            "no connection ticket (proxy_auth)",
        ));
    }
    let message = pdu
        .into_message()
        .map_err(|e| Refused::bad(e.to_string()))?;
    let RDCleanPathMessage::Request {
        destination,
        proxy_auth,
        preconnection_blob,
        x224_connection_request,
        // A credential for the host: never used, never passed on.
        server_auth: _,
    } = message
    else {
        return Err(Refused::bad(
            "not a connection request (VM connect requests are not served)",
        ));
    };
    if preconnection_blob.is_some() {
        return Err(Refused::bad(
            "a preconnection blob (session hosts take none)",
        ));
    }
    let x224 = x224_connection_request.as_bytes().to_vec();
    let request = pdu::parse(&x224)
        .map_err(|e| Refused::bad(format!("the X.224 Connection Request: {e}")))?;
    // The broker does TLS with the host: a client that asks only for
    // Standard RDP Security would be refused by the protocol anyway, after
    // a host was bothered.
    let requested = request.negotiation.map_or(0, |n| n.requested_protocols);
    if requested == 0 {
        return Err(Refused::bad(
            "the X.224 Connection Request asks for no TLS-based security protocol",
        ));
    }
    let ticket = api::ticket::Ticket::parse(&proxy_auth).map_err(|e| {
        Refused::new(
            403,
            Outcome::TicketRefused,
            format!("connection ticket: {e}"),
        )
    })?;
    // `dbt1:<pool>:<expires>:<mac>:<user>`, as the parse just checked.
    let signature = proxy_auth.split(':').nth(3).unwrap_or_default().to_string();
    Ok(Asked {
        ticket,
        signature,
        raw_ticket: proxy_auth,
        x224,
        destination,
    })
}
