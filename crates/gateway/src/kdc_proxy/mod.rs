//! The KDC proxy (rule AD3, MS-KKDCP): `POST /KdcProxy` on the HTTPS
//! front relays Kerberos requests to the KDCs of the realms it is
//! configured for, so that clients outside the domain's network (mstsc
//! through `kdcproxyname`, MIT `kinit` through `kdc = https://…/KdcProxy`)
//! still get tickets. It is an endpoint of the front (`crate::https`),
//! routed here only when at least one realm is configured; without one,
//! `/KdcProxy` is refused as any unknown path is.
//!
//! One request, start to end:
//!
//! ```text
//! POST /KdcProxy, Content-Type: application/kerberos, Content-Length ≤ MAX_REQUEST_BYTES
//!   ─► counted against its source (MESSAGES_PER_SOURCE_PER_MINUTE)
//!   ─► the body read whole (each read ≤ the front's idle bound, all ≤ its setup deadline)
//!   ─► KDC-PROXY-MESSAGE decoded strictly (message.rs): a realm named, one AS-REQ or
//!      TGS-REQ for that realm
//!   ─► the realm must be configured ─► a slot among MAX_EXCHANGES
//!   ─► the realm's KDCs over TCP, in turn, each ≤ KDC_EXCHANGE_TIMEOUT (kdc.rs)
//!   ─► 200 application/kerberos: a KDC-PROXY-MESSAGE with the KDC's reply
//! ```
//!
//! **No open relay.** Where a message goes is decided by the configuration
//! alone: the realm a request names picks the KDCs, and a request that
//! names no realm, names one not configured, carries a message for another
//! realm than the one it names, or is not exactly one Kerberos request in
//! DER reaches no socket. A body over the bound is refused from its
//! `Content-Length`, unread. Each refusal is answered in the contract's
//! shape (`{"error":{"code","message"}}`) and the connection closed; an
//! answer from a KDC, even a Kerberos error, is relayed as it is.
//!
//! Every message is counted in `deskbroker_kdc_proxy_messages_total` by
//! its outcome.

mod kdc;
mod message;

use std::sync::Arc;
use std::time::Duration;

use api::{ErrorBody, ErrorCode, ErrorDetail};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::Semaphore;

pub use kdc::{KERBEROS_PORT, KdcAddress, KdcRealm, MAX_KDCS_PER_REALM};
pub use message::{MAX_REALM_BYTES, MessageError, ProxyRequest, decode, encode_reply};

use crate::door::Outcome;
use crate::https::{BoxIo, Exchange, Framing, Kept, Served, within};

/// The path clients post to (MS-KKDCP; Windows builds it from
/// `kdcproxyname`).
pub const PATH: &str = "/KdcProxy";
/// The largest request body taken. A Kerberos request is a few hundred
/// bytes; one with a large ticket (a TGS-REQ whose TGT carries a large
/// PAC) a few tens of KiB.
pub const MAX_REQUEST_BYTES: usize = 64 * 1024;
/// The largest reply taken from a KDC (a service ticket with a user's
/// PAC for thousands of groups stays well below).
pub const MAX_REPLY_BYTES: usize = 256 * 1024;
/// Connecting to one KDC.
pub const KDC_CONNECT_TIMEOUT: Duration = Duration::from_secs(3);
/// One KDC's whole exchange: connect, send, the whole reply; then the
/// realm's next KDC is tried.
pub const KDC_EXCHANGE_TIMEOUT: Duration = Duration::from_secs(10);
/// Exchanges with KDCs under way at once, over all clients; one more is
/// answered 503 at once.
pub const MAX_EXCHANGES: usize = 64;
/// Messages one source (`sources.rs`' key: an IPv4 address, or an IPv6
/// /64) may send per minute. A sign-in takes two or three, each
/// connection's service ticket one more.
pub const MESSAGES_PER_SOURCE_PER_MINUTE: u32 = 120;
/// Realms one proxy may serve.
pub const MAX_REALMS: usize = 64;

/// The `Content-Type` of every request and answer (MS-KKDCP 2.2.1).
const CONTENT_TYPE: &str = "application/kerberos";

/// The proxy's settings: the realms it serves and its bounds;
/// [`KdcProxyConfig::default`] serves none.
#[derive(Clone, Debug)]
pub struct KdcProxyConfig {
    realms: Vec<KdcRealm>,
    /// See [`MAX_REQUEST_BYTES`].
    pub max_request_bytes: usize,
    /// See [`MAX_REPLY_BYTES`].
    pub max_reply_bytes: usize,
    /// See [`KDC_CONNECT_TIMEOUT`].
    pub kdc_connect_timeout: Duration,
    /// See [`KDC_EXCHANGE_TIMEOUT`].
    pub kdc_exchange_timeout: Duration,
    /// See [`MAX_EXCHANGES`].
    pub max_exchanges: usize,
    /// See [`MESSAGES_PER_SOURCE_PER_MINUTE`].
    pub messages_per_source_per_minute: u32,
}

impl Default for KdcProxyConfig {
    fn default() -> KdcProxyConfig {
        KdcProxyConfig {
            realms: Vec::new(),
            max_request_bytes: MAX_REQUEST_BYTES,
            max_reply_bytes: MAX_REPLY_BYTES,
            kdc_connect_timeout: KDC_CONNECT_TIMEOUT,
            kdc_exchange_timeout: KDC_EXCHANGE_TIMEOUT,
            max_exchanges: MAX_EXCHANGES,
            messages_per_source_per_minute: MESSAGES_PER_SOURCE_PER_MINUTE,
        }
    }
}

impl KdcProxyConfig {
    /// The default bounds, serving `realms`: each named once (in any
    /// case), at most [`MAX_REALMS`].
    pub fn with_realms(realms: Vec<KdcRealm>) -> Result<KdcProxyConfig, String> {
        if realms.len() > MAX_REALMS {
            return Err(format!("at most {MAX_REALMS} realms"));
        }
        for (i, r) in realms.iter().enumerate() {
            if realms[..i]
                .iter()
                .any(|other| other.realm.eq_ignore_ascii_case(&r.realm))
            {
                return Err(format!("realm {} is configured twice", r.realm));
            }
        }
        Ok(KdcProxyConfig {
            realms,
            ..KdcProxyConfig::default()
        })
    }

    /// The realms served, in the order given.
    pub fn realms(&self) -> &[KdcRealm] {
        &self.realms
    }

    /// Whether `/KdcProxy` is served: at least one realm is configured.
    pub fn serves_any(&self) -> bool {
        !self.realms.is_empty()
    }

    /// The realm named `name` (in any case), if it is served.
    fn realm(&self, name: &str) -> Option<&KdcRealm> {
        self.realms
            .iter()
            .find(|r| r.realm.eq_ignore_ascii_case(name))
    }
}

/// What the proxy keeps across requests: its settings and the slots of
/// its exchanges.
pub(crate) struct KdcProxy {
    config: KdcProxyConfig,
    exchanges: Arc<Semaphore>,
}

impl KdcProxy {
    pub(crate) fn new(config: KdcProxyConfig) -> KdcProxy {
        KdcProxy {
            exchanges: Arc::new(Semaphore::new(config.max_exchanges)),
            config,
        }
    }
}

/// How a message ended, as the `outcome` label of
/// `deskbroker_kdc_proxy_messages_total`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum MessageOutcome {
    Relayed,
    BadRequest,
    UnknownRealm,
    TooLarge,
    SourceLimit,
    Busy,
    KdcUnreachable,
    ClientLeft,
}

impl MessageOutcome {
    fn as_str(self) -> &'static str {
        match self {
            MessageOutcome::Relayed => "relayed",
            MessageOutcome::BadRequest => "bad_request",
            MessageOutcome::UnknownRealm => "unknown_realm",
            MessageOutcome::TooLarge => "too_large",
            MessageOutcome::SourceLimit => "source_limit",
            MessageOutcome::Busy => "busy",
            MessageOutcome::KdcUnreachable => "kdc_unreachable",
            MessageOutcome::ClientLeft => "client_left",
        }
    }

    /// The contract's code a refusal is answered with.
    fn code(self) -> ErrorCode {
        match self {
            MessageOutcome::TooLarge => ErrorCode::PayloadTooLarge,
            MessageOutcome::SourceLimit => ErrorCode::TooManyRequests,
            MessageOutcome::Busy => ErrorCode::ServiceBusy,
            MessageOutcome::KdcUnreachable => ErrorCode::KdcUnavailable,
            _ => ErrorCode::InvalidParameter,
        }
    }
}

/// Describes the proxy's metrics to the installed recorder.
pub(crate) fn describe_metrics() {
    metrics::describe_counter!(
        "deskbroker_kdc_proxy_messages_total",
        "KDC proxy (/KdcProxy) messages by outcome: relayed, bad_request, unknown_realm, \
         too_large, source_limit, busy, kdc_unreachable, client_left."
    );
}

/// A refusal: its outcome and what the client is told.
struct Refusal(MessageOutcome, String);

/// One `POST /KdcProxy`, its head read by the front: the request relayed
/// to its realm's KDCs and their reply answered, or the request refused
/// (see the module's documentation).
pub(crate) async fn serve_request<P>(x: Exchange<'_, P>) -> Served {
    let Exchange {
        front,
        head,
        mut stream,
        rest,
        source,
        deadline,
        may_keep_alive,
        report,
        ..
    } = x;
    let proxy = &front.kdc;
    let idle = front.config.bounds.handshake_timeout;
    let relayed: Result<(Vec<u8>, Vec<u8>), Refusal> = async {
        let length = body_length(&head, &proxy.config)?;
        source
            .kdc_message(proxy.config.messages_per_source_per_minute)
            .map_err(|_| {
                Refusal(
                    MessageOutcome::SourceLimit,
                    format!(
                        "this address sent more than {} KDC proxy messages this minute",
                        proxy.config.messages_per_source_per_minute
                    ),
                )
            })?;
        let read = read_body(&mut stream, rest, length, idle);
        let (body, rest) = within(idle, deadline, "the request body", report, read)
            .await
            .map_err(|_| Refusal(MessageOutcome::ClientLeft, String::new()))?
            .map_err(|e| Refusal(MessageOutcome::ClientLeft, e))?;
        let request =
            decode(&body).map_err(|e| Refusal(MessageOutcome::BadRequest, e.to_string()))?;
        let realm = proxy.config.realm(&request.realm).ok_or_else(|| {
            Refusal(
                MessageOutcome::UnknownRealm,
                format!("realm {:?} is not served by this proxy", request.realm),
            )
        })?;
        let _slot = proxy.exchanges.clone().try_acquire_owned().map_err(|_| {
            Refusal(
                MessageOutcome::Busy,
                "the KDC proxy has all its exchanges under way; retry".into(),
            )
        })?;
        let bounds = kdc::ExchangeBounds {
            connect_timeout: proxy.config.kdc_connect_timeout,
            exchange_timeout: proxy.config.kdc_exchange_timeout,
            max_reply_bytes: proxy.config.max_reply_bytes,
        };
        let reply = kdc::exchange(realm, &request.message, bounds)
            .await
            .map_err(|e| {
                Refusal(
                    MessageOutcome::KdcUnreachable,
                    format!("no KDC of realm {} answered: {e}", realm.realm),
                )
            })?;
        Ok((encode_reply(&reply), rest))
    }
    .await;
    let (body, rest) = match relayed {
        Ok(relayed) => relayed,
        Err(Refusal(outcome, message)) => {
            count(outcome);
            report.detail = Some(format!("kdc proxy: {}: {message}", outcome.as_str()));
            if outcome != MessageOutcome::ClientLeft {
                answer_refusal(&mut stream, outcome.code(), &message, idle).await;
            }
            return Served::Closed(Outcome::KdcProxy);
        }
    };
    count(MessageOutcome::Relayed);
    let keep = may_keep_alive && head.keep_alive();
    let answer = format!(
        "HTTP/1.1 200 OK\r\nContent-Type: {CONTENT_TYPE}\r\nContent-Length: {}\r\n\
         Cache-Control: no-store\r\nConnection: {}\r\n\r\n",
        body.len(),
        if keep { "keep-alive" } else { "close" }
    );
    let mut bytes = answer.into_bytes();
    bytes.extend_from_slice(&body);
    let written = tokio::time::timeout(idle, stream.write_all(&bytes)).await;
    if !matches!(written, Ok(Ok(()))) || !keep {
        let _ = tokio::time::timeout(idle, stream.shutdown()).await;
        return Served::Closed(Outcome::KdcProxy);
    }
    Served::Kept(Kept {
        stream,
        rest,
        source,
        outcome: Outcome::KdcProxy,
    })
}

fn count(outcome: MessageOutcome) {
    metrics::counter!("deskbroker_kdc_proxy_messages_total", "outcome" => outcome.as_str())
        .increment(1);
}

/// The body's length, from a head that may be relayed: `application/
/// kerberos`, a `Content-Length` from 1 to the bound. A body over the
/// bound is refused here, unread.
fn body_length(head: &crate::https::Head, config: &KdcProxyConfig) -> Result<usize, Refusal> {
    let bad = |message: &str| Err(Refusal(MessageOutcome::BadRequest, message.into()));
    let content_type = head.header("Content-Type").unwrap_or_default();
    let media_type = content_type.split(';').next().unwrap_or_default().trim();
    if !media_type.eq_ignore_ascii_case(CONTENT_TYPE) {
        return bad("a KDC proxy message is sent as Content-Type: application/kerberos");
    }
    match head.framing {
        Framing::Length(0) | Framing::None => bad("a KDC proxy request carries a message"),
        Framing::Chunked => bad("a KDC proxy message is sent with a Content-Length"),
        Framing::Length(n) if n > config.max_request_bytes as u64 => Err(Refusal(
            MessageOutcome::TooLarge,
            format!(
                "a KDC proxy message is at most {} bytes",
                config.max_request_bytes
            ),
        )),
        Framing::Length(n) => Ok(n as usize),
    }
}

/// Reads a body of `length` bytes after those read with the head
/// (`rest`), each read within `idle`: the body, and the bytes after it
/// (the connection's next request).
async fn read_body(
    stream: &mut BoxIo,
    mut rest: Vec<u8>,
    length: usize,
    idle: Duration,
) -> Result<(Vec<u8>, Vec<u8>), String> {
    while rest.len() < length {
        let mut chunk = vec![0u8; (length - rest.len()).min(16 * 1024)];
        let n = tokio::time::timeout(idle, stream.read(&mut chunk))
            .await
            .map_err(|_| format!("no byte of the body for {} s", idle.as_secs_f32()))?
            .map_err(|e| format!("reading the body: {e}"))?;
        if n == 0 {
            return Err("closed before the body ended".into());
        }
        rest.extend_from_slice(&chunk[..n]);
    }
    let after = rest.split_off(length);
    Ok((rest, after))
}

/// Answers a refused request with `code`'s status and the contract's
/// error body, and closes.
async fn answer_refusal(stream: &mut BoxIo, code: ErrorCode, message: &str, idle: Duration) {
    let body = serde_json::to_vec(&ErrorBody {
        error: ErrorDetail {
            code,
            message: message.to_string(),
        },
    })
    .unwrap_or_default();
    let status = code.status();
    let reason = match status {
        400 => "Bad Request",
        413 => "Content Too Large",
        429 => "Too Many Requests",
        502 => "Bad Gateway",
        503 => "Service Unavailable",
        _ => "Error",
    };
    let mut answer = format!(
        "HTTP/1.1 {status} {reason}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\
         Connection: close\r\n\r\n",
        body.len()
    )
    .into_bytes();
    answer.extend_from_slice(&body);
    let _ = tokio::time::timeout(idle, async {
        let _ = stream.write_all(&answer).await;
        let _ = stream.shutdown().await;
    })
    .await;
}
