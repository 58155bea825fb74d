//! The RD Gateway (MS-TSGU over HTTPS): RDP clients outside the
//! farm reach it through one HTTPS port, and the broker places each one at
//! the moment it opens its channel. It is an endpoint of the HTTPS front
//! (`crate::https`), which accepts, does TLS, reads the request head and
//! routes `RDG_OUT_DATA` and `RDG_IN_DATA` of [`GATEWAY_PATH`] here.
//!
//! One connection, start to end:
//!
//! ```text
//! the front: accept (≤ bounds.max_connections) ─► TLS ─► request head (≤ 8 KiB) ─► routed here
//!   ─► RDG_OUT_DATA + Upgrade: websocket ─► 101, WebSocket frames carry MS-TSGU packets
//!      (or RDG_OUT_DATA ─► 200 + seed, paired with RDG_IN_DATA's chunked body)
//!   ─► handshake (PAA) ─► tunnel create: the access token, a ticket (T3), read (not verified)
//!   ─► tunnel auth ─► channel create: the resource must be the ticket's pool
//!   ─► Placer::connect (the broker verifies the ticket, places or reconnects: S1;
//!      503 SessionHostStarting: held and asked again while the host boots, A8)
//!   ─► dial (≤ 3 s; R5: a new session on an unreachable host is ended, the next host tried)
//!   ─► channel response ─► Active ─► DATA relayed both ways, untouched ─► Disconnected
//! ```
//!
//! Everything up to the channel request is bounded by
//! [`GatewayConfig::setup_timeout`], and each step of it (the TLS
//! handshake, each read of a request head, the WebSocket upgrade, an OUT
//! channel's wait for its IN channel, each packet) by
//! `bounds.handshake_timeout` ([`SETUP_IDLE_TIMEOUT`]), so idle connections cannot hold
//! the gateway's slots (T4); the placement is bounded by the hold and the
//! dials. Every refusal is answered with the protocol's HRESULT in the
//! packet the client awaits (a tampered, expired or foreign token, and a
//! pool that is unknown or does not allow the front door, alike:
//! E_PROXY_COOKIE_AUTHENTICATION_ACCESS_DENIED, so a client without a
//! ticket cannot tell which pools exist; a resource other than the
//! ticket's pool: E_PROXY_RAP_ACCESSDENIED; no host:
//! E_PROXY_TS_CONNECTFAILED), and no refused connection ever reaches a host.
//!
//! Both HTTP transports: WebSocket (one connection), and the legacy pair,
//! `RDG_OUT_DATA` (answered 200 and a 10-byte seed, then the gateway's
//! packets unframed) and `RDG_IN_DATA` (the client's packets in a chunked
//! body; FreeRDP 2 first sends an empty request on the same connection),
//! matched by their `RDG-Connection-Id`: at most
//! [`GatewayConfig::max_waiting_out_channels`] OUT channels wait for theirs,
//! [`GatewayConfig::max_waiting_out_channels_per_source`] of one source
//! (so that a few sources cannot fill the table), each for at most the idle
//! timeout; one over either bound is answered 503.
//!
//! Sources are bounded as at the front door (`sources.rs`, the same
//! flags, the same keys: an IPv4 address, also IPv4-mapped, or an IPv6
//! /64): a connection over its source's bounds is closed by the front
//! before TLS, and a new session over its share per minute is refused at channel create
//! with E_PROXY_MAXCONNECTIONSREACHED.
//!
//! When the broker answers 503 `SessionHostStarting` (rule A8: the pool
//! starts a host for this user), the channel request is held, as the front
//! door holds a connection (`hold.rs`, the same bounds: per source and
//! [`crate::front_door::MAX_WAITING_CONNECTIONS`] in total, asked again
//! every [`crate::HOST_START_RETRY_INTERVAL`] for up to
//! [`crate::HOST_START_WAIT`]), then answered: the channel opens on the
//! started host, or is refused with E_PROXY_TS_CONNECTFAILED. The setup
//! timeout stops at the channel request; placing it is bounded by the hold
//! and by each dial. The client's tunnel is read while it is held, so a
//! client that leaves (or whose link breaks) ends the hold at once and
//! frees its waiting slot (outcome `client_left`); a packet it sends
//! meanwhile is kept and judged once the channel is answered.
//!
//! Sessions are left as at every door (`door/session.rs`, rules R4, S9):
//! the front keeps a table of the sessions its connections own (the
//! browsers' and the RD Gateway's), so a second tunnel of a session joins
//! it, and a reconnect to a session live elsewhere is relayed, its state
//! left alone.
//!
//! Windows sign-in (rule AD2, `crate::windows_sign_in`, `sign_in.rs`), on
//! a gateway with a keytab or NTLM domains: before its upgrade (or its
//! 200), a tunnel's `RDG_OUT_DATA` that is not a ticket client's
//! (`RDG-Auth-Scheme: PAA`) must sign in, with Kerberos (`Negotiate`) or
//! NTLM (two legs on the one connection), or is answered 401 with the
//! schemes taken; a refused one 401, a source or user over its failures
//! 429. A legacy `RDG_IN_DATA` may sign in too, and pairs only with an
//! `RDG_OUT_DATA` of the same user. The signed-in tunnel needs no access
//! token; its channel opens only a pool whose `gatewaySignIn` is
//! `TicketOrWindows`, and the broker places the user by the pool's
//! entitlements and the directory's groups. The sign-in is within the
//! setup timeout.
//!
//! The modules, one job each: `head` (what a request head asks of the
//! gateway, and the legacy chunked body), `link` (WebSocket or paired legacy channels), `tunnel`
//! (MS-TSGU setup, placement through the door path shared with the front
//! door, the session's states), `relay` (the channel's data), `sign_in`
//! (a request's Windows sign-in).

mod head;
mod link;
mod relay;
pub(crate) mod sign_in;
mod tunnel;

use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::io::AsyncWriteExt;
use tokio::sync::oneshot;
use tokio_tungstenite::WebSocketStream;
use tokio_tungstenite::tungstenite::protocol::Role;

use crate::door::{Bounds, Outcome, Report};
use crate::https::{BoxIo, Exchange, Front, Served, answer_status, within};
use crate::placer::Placer;
use crate::sources::SourceGuard;
use crate::tsgu::ServerConfig;
use crate::windows_sign_in::WindowsSignIn;
use sign_in::with_reply;

pub use head::{BodyReader, InBody, MAX_CONNECTION_ID_BYTES, Request};
pub use link::Pairing;
use link::{Link, in_channel, websocket_config};
use tunnel::tunnel;

/// Connections open at once on the HTTPS front; at the limit it stops
/// accepting.
pub const MAX_CONNECTIONS: usize = 1024;
/// From accept to the channel response: TLS, the request head, the
/// tunnel's setup and the placement (the client waits for each answer).
pub const SETUP_TIMEOUT: Duration = Duration::from_secs(20);
/// How long the client may leave each step before its tunnel is up
/// without a word: the TLS handshake, each read of a request head, the
/// WebSocket upgrade, an OUT channel's wait for its IN channel, and each
/// packet up to the channel request. A genuine client answers each step at
/// once (mstsc and FreeRDP send the next request as soon as the answer
/// comes); a connection that says nothing is closed after this, well
/// within [`SETUP_TIMEOUT`], so an idle connection holds one of the
/// gateway's slots for seconds, and a source that keeps opening new ones
/// is held by its handshakes at once and per minute (`sources.rs`, T4).
pub const SETUP_IDLE_TIMEOUT: Duration = Duration::from_secs(5);
/// Legacy OUT channels waiting at once for their IN channel, over all
/// sources. Each is one of the gateway's connections as well.
pub const MAX_WAITING_OUT_CHANNELS: usize = 256;
/// Legacy OUT channels of one source waiting at once for their IN channel.
/// A genuine client's IN channel follows its OUT channel at once, so a
/// source rarely has more than one waiting; with 4, it takes 64 sources to
/// fill [`MAX_WAITING_OUT_CHANNELS`] (and each waits at most
/// [`SETUP_IDLE_TIMEOUT`]).
pub const MAX_WAITING_OUT_CHANNELS_PER_SOURCE: usize = 4;
/// The path every client asks for (MS-TSGU 2.2.3.1).
pub const GATEWAY_PATH: &str = "/remoteDesktopGateway/";

/// The settings of the HTTPS front and the doors on it (the gateway's,
/// the browser's); [`GatewayConfig::default`] gives the named defaults.
#[derive(Clone, Debug)]
pub struct GatewayConfig {
    /// The bounds every door shares, as at the front door, except: at most
    /// [`MAX_CONNECTIONS`] connections (a legacy tunnel is two), and
    /// `handshake_timeout` is [`SETUP_IDLE_TIMEOUT`], the bound on each
    /// step of the setup (the front's TLS and request heads included). The
    /// browser's door on the front works under the same bounds.
    pub bounds: Bounds,
    /// See [`SETUP_TIMEOUT`].
    pub setup_timeout: Duration,
    /// See [`MAX_WAITING_OUT_CHANNELS`].
    pub max_waiting_out_channels: usize,
    /// See [`MAX_WAITING_OUT_CHANNELS_PER_SOURCE`].
    pub max_waiting_out_channels_per_source: usize,
    /// What the protocol tells every client (idle timeout, redirection).
    pub tsgu: ServerConfig,
    /// The KDC proxy on the same listener (`POST /KdcProxy`, rule AD3):
    /// served only when it names a realm.
    pub kdc_proxy: crate::kdc_proxy::KdcProxyConfig,
    /// Windows sign-in (rule AD2; `--gateway-keytab`): clients without a
    /// ticket are challenged with `Negotiate`. None: tickets only.
    pub windows_sign_in: Option<Arc<WindowsSignIn>>,
}

impl Default for GatewayConfig {
    fn default() -> GatewayConfig {
        GatewayConfig {
            bounds: Bounds {
                max_connections: MAX_CONNECTIONS,
                handshake_timeout: SETUP_IDLE_TIMEOUT,
                ..Bounds::default()
            },
            setup_timeout: SETUP_TIMEOUT,
            max_waiting_out_channels: MAX_WAITING_OUT_CHANNELS,
            max_waiting_out_channels_per_source: MAX_WAITING_OUT_CHANNELS_PER_SOURCE,
            tsgu: ServerConfig::default(),
            kdc_proxy: crate::kdc_proxy::KdcProxyConfig::default(),
            windows_sign_in: None,
        }
    }
}

/// One RD Gateway request, its head read by the front: a tunnel on a
/// WebSocket, or one of a legacy pair of channels (the OUT channel's task
/// runs the tunnel once its IN channel comes).
pub(crate) async fn serve_request<P: Placer>(x: Exchange<'_, P>) -> Served {
    let first = match Request::of(&x.head) {
        Ok(request) => request,
        Err(e) => return x.refuse(e).await,
    };
    let Exchange {
        front,
        mut stream,
        rest,
        source,
        deadline,
        report,
        head,
        ..
    } = x;
    let idle = front.config.bounds.handshake_timeout;
    // Rule AD2: a tunnel's OUT side (or its WebSocket) without a ticket
    // signs in with Windows first; a legacy IN channel may sign in too
    // (FreeRDP's NTLM does), and then must be its OUT channel's user.
    let (signed_in, request, rest) = match &front.config.windows_sign_in {
        Some(windows) => {
            let optional = matches!(first, Request::In { .. });
            let placer = front.placer.as_ref();
            let limits = (deadline, idle);
            let signed = sign_in::sign_in(
                windows,
                placer,
                (head, rest),
                &mut stream,
                &source,
                limits,
                optional,
                report,
            );
            let signed = match tokio::time::timeout_at(deadline.into(), signed).await {
                Ok(Ok(signed)) => signed,
                Ok(Err(outcome)) => return Served::Closed(outcome),
                Err(_) => return Served::Closed(Outcome::Timeout),
            };
            // An NTLM sign-in's second request is the one that goes on.
            match Request::of(&signed.head) {
                Ok(request) if request.same_kind(&first) => {
                    (signed.signed_in, request, signed.rest)
                }
                Ok(_) => {
                    answer_status(&mut stream, "400 Bad Request").await;
                    report.detail = Some("the signed-in request is not the first's".into());
                    return Served::Closed(Outcome::BadRequest);
                }
                Err(e) => {
                    answer_status(&mut stream, "400 Bad Request").await;
                    report.detail = Some(e.to_string());
                    return Served::Closed(Outcome::BadRequest);
                }
            }
        }
        None => (None, first, rest),
    };
    let reply = signed_in.as_ref().and_then(|s| s.reply.clone());
    let user = signed_in.map(|s| s.user);
    let link = match request {
        Request::WebSocket { key } => {
            let limits = (deadline, idle);
            match websocket(stream, rest, &key, reply.as_deref(), limits, report).await {
                Ok(link) => link,
                Err(outcome) => return Served::Closed(outcome),
            }
        }
        Request::In {
            connection_id,
            body,
        } => {
            let pairing = &front.pairing;
            let (limits, id) = ((deadline, idle), (connection_id, user));
            let paired = in_channel(stream, rest, id, body, limits, pairing, source, report);
            return Served::Closed(paired.await);
        }
        Request::Out { connection_id } => {
            let out = out_channel(
                stream,
                (&connection_id, user.as_deref()),
                reply.as_deref(),
                deadline,
                front,
                &source,
                report,
            );
            match out.await {
                Ok(link) => link,
                Err(outcome) => return Served::Closed(outcome),
            }
        }
    };
    Served::Closed(tunnel(link, deadline, front, &source, user, report).await)
}

/// `RDG_OUT_DATA` with `Upgrade: websocket`: answers the upgrade, and the
/// tunnel's packets travel in its frames.
async fn websocket(
    mut stream: BoxIo,
    rest: Vec<u8>,
    key: &str,
    reply: Option<&str>,
    (deadline, idle): (Instant, Duration),
    report: &mut Report,
) -> Result<Link, Outcome> {
    let response = with_reply(crate::https::switching_protocols(key), reply);
    let step = "the WebSocket upgrade";
    let upgrade = within(
        idle,
        deadline,
        step,
        report,
        stream.write_all(response.as_bytes()),
    );
    if let Err(e) = upgrade.await? {
        report.detail = Some(e.to_string());
        return Err(Outcome::BadRequest);
    }
    let config = Some(websocket_config());
    let ws = WebSocketStream::from_partially_read(stream, rest, Role::Server, config).await;
    Ok(Link::Ws(Box::new(ws)))
}

/// Legacy `RDG_OUT_DATA`: waits (bounded) for its `RDG_IN_DATA`, and the
/// pair is the tunnel's link.
async fn out_channel<P>(
    mut stream: BoxIo,
    (connection_id, user): (&str, Option<&str>),
    reply: Option<&str>,
    deadline: Instant,
    front: &Front<P>,
    source: &SourceGuard,
    report: &mut Report,
) -> Result<Link, Outcome> {
    let (pairing, idle) = (&front.pairing, front.config.bounds.handshake_timeout);
    let (tx, rx) = oneshot::channel();
    let number = match pairing.register(connection_id, source.key(), user, tx, &front.config) {
        Ok(number) => number,
        Err(why) => {
            answer_status(&mut stream, "503 Service Unavailable").await;
            report.detail = Some(why.into());
            return Err(Outcome::OutChannelLimit);
        }
    };
    // 200 and a seed of 10 random bytes, no length (MS-TSGU 3.3.5.1; what
    // FreeRDP 2 reads), then packets unframed.
    let seed = uuid::Uuid::new_v4();
    let mut answer = with_reply("HTTP/1.1 200 OK\r\n\r\n".into(), reply).into_bytes();
    answer.extend_from_slice(&seed.as_bytes()[..10]);
    let paired = async {
        stream.write_all(&answer).await.map_err(|e| e.to_string())?;
        rx.await
            .map_err(|_| "the IN channel never came".to_string())
    };
    let step = "waiting for the RDG_IN_DATA of this RDG_OUT_DATA";
    let paired = within(idle, deadline, step, report, paired).await;
    pairing.cancel(connection_id, number);
    let half = match paired? {
        Ok(half) => half,
        Err(e) => {
            report.detail = Some(e);
            return Err(Outcome::BadRequest);
        }
    };
    Ok(Link::Legacy {
        out: stream,
        input: half.stream,
        body: BodyReader::new(half.body),
        buf: half.rest,
        _in_source: half.source,
    })
}
