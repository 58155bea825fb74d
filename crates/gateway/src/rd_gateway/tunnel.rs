//! One tunnel from the handshake to its channel: MS-TSGU's setup, the
//! placement and dial through the door path shared with the front door,
//! the channel answered, and the session's states around the relay.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use tokio::net::TcpStream;

use super::link::Link;
use super::relay::relay;
use crate::door::{Client, Door, Outcome, RD_GATEWAY, Report, Session, logon_evidence, release};
use crate::https::Front;
use crate::placer::{ConnectInput, Placer, PlacerError};
use crate::sources::SourceGuard;
use crate::tsgu::hresult::{
    E_PROXY_COOKIE_AUTHENTICATION_ACCESS_DENIED, E_PROXY_INTERNALERROR,
    E_PROXY_MAXCONNECTIONSREACHED, E_PROXY_RAP_ACCESSDENIED, E_PROXY_TS_CONNECTFAILED,
};
use crate::tsgu::{Action, Decoder, Packet, Server};

/// The tunnel on its link: setup to the channel response, then the relay.
pub(super) async fn tunnel<P: Placer>(
    mut link: Link,
    deadline: Instant,
    front: &Front<P>,
    source: &SourceGuard,
    signed_in: Option<String>,
    report: &mut Report,
) -> Outcome {
    let placer = front.placer.as_ref();
    let tsgu = front.config.tsgu.clone();
    let mut tunnel = Tunnel {
        server: match signed_in {
            Some(_) => Server::signed_in(tsgu),
            None => Server::new(tsgu),
        },
        decoder: Decoder::new(),
        pending: VecDeque::new(),
    };
    let idle = front.config.bounds.handshake_timeout;
    let setup = setup(&mut link, &mut tunnel, idle, signed_in, report);
    let setup = tokio::time::timeout_at(deadline.into(), setup).await;
    let asked = match setup {
        Ok(Ok(asked)) => asked,
        Ok(Err(outcome)) => {
            link.close().await;
            return outcome;
        }
        Err(_) => return Outcome::Timeout,
    };
    // Past the setup timeout: a channel may be held while its host starts
    // (A8, bounded by the hold); every dial has its own timeout.
    let opened = open_channel(&mut link, &mut tunnel, asked, front, source, report).await;
    let (host, placed, pool) = match opened {
        Ok(opened) => opened,
        Err(outcome) => {
            link.close().await;
            return outcome;
        }
    };
    // The channel is open: no longer a handshake of its source's.
    source.answered();
    // Rules R4 and S9, as at every door.
    let session = Session::begin(
        &RD_GATEWAY,
        placer,
        &front.live,
        &pool,
        &placed,
        true,
        false,
        report,
    );
    let idle = front.config.bounds.idle();
    let outcome = session
        .relay(relay(link, host, &mut tunnel, idle, report))
        .await;
    session.end(logon_evidence(report, 0)).await;
    outcome
}

/// One tunnel's protocol state and undelivered packets.
pub(super) struct Tunnel {
    pub(super) server: Server,
    pub(super) decoder: Decoder,
    /// Packets decoded but not yet handled (a message may hold several).
    pub(super) pending: VecDeque<Packet>,
}

impl Tunnel {
    /// The client's next packet, reading as needed; `None` when the client
    /// has gone.
    pub(super) async fn next(&mut self, link: &mut Link) -> Result<Option<Packet>, String> {
        loop {
            if let Some(p) = self.pending.pop_front() {
                return Ok(Some(p));
            }
            let Some(bytes) = link.recv().await? else {
                return Ok(None);
            };
            let mut input = &bytes[..];
            while let Some(p) = self.decoder.decode(&mut input).map_err(|e| e.to_string())? {
                self.pending.push_back(p);
            }
        }
    }
}

pub(super) async fn send(link: &mut Link, packet: &Packet) -> Result<(), String> {
    let bytes = packet.to_bytes().map_err(|e| e.to_string())?;
    link.send(bytes).await
}

/// A channel request, with what signed its tunnel in.
struct ChannelAsked {
    resource: String,
    by: SignedInBy,
}

/// What signed a tunnel in: a ticket (its access token), or Windows
/// sign-in over HTTP (rule AD2) and the user it named.
enum SignedInBy {
    Ticket {
        ticket: api::ticket::Ticket,
        raw: String,
    },
    Windows {
        user: String,
    },
}

/// From the handshake to the channel request, or the outcome of a refusal
/// (answered).
/// Each packet must come within `idle` of the previous answer.
async fn setup(
    ws: &mut Link,
    tunnel: &mut Tunnel,
    idle: Duration,
    signed_in: Option<String>,
    report: &mut Report,
) -> Result<ChannelAsked, Outcome> {
    let mut ticket: Option<(api::ticket::Ticket, String)> = None;
    loop {
        let packet = match tokio::time::timeout(idle, tunnel.next(ws)).await {
            Ok(Ok(Some(p))) => p,
            Ok(Ok(None)) => {
                report.detail = Some("the client left during setup".into());
                return Err(Outcome::Protocol);
            }
            Ok(Err(e)) => {
                report.detail = Some(e);
                return Err(Outcome::Protocol);
            }
            Err(_) => {
                report.detail = Some(format!(
                    "no packet for {} s during the tunnel's setup ({:?})",
                    idle.as_secs_f32(),
                    tunnel.server.state()
                ));
                return Err(Outcome::Idle);
            }
        };
        let action = match tunnel.server.receive(packet) {
            Ok(a) => a,
            Err(refusal) => {
                if let Some(reply) = &refusal.reply {
                    let _ = send(ws, reply).await;
                }
                report.detail = Some(refusal.to_string());
                return Err(Outcome::Protocol);
            }
        };
        match action {
            Action::Send(p) => send(ws, &p).await.map_err(|e| fail(report, e))?,
            Action::Nothing => {}
            Action::Relay(_) | Action::Close { .. } => {
                report.detail = Some("closed during setup".into());
                return Err(Outcome::Protocol);
            }
            Action::CheckToken { token } => match api::ticket::Ticket::parse(&token) {
                // Read here, verified by the broker at placement (T3): the
                // gateway holds no key that mints tickets.
                Ok(t) => {
                    report.user = Some(t.user.clone());
                    report.pool = Some(t.pool.clone());
                    ticket = Some((t, token));
                    let answer = tunnel
                        .server
                        .accept_token(1)
                        .map_err(|e| fail(report, e.to_string()))?;
                    send(ws, &answer).await.map_err(|e| fail(report, e))?;
                }
                Err(e) => {
                    let answer = tunnel
                        .server
                        .refuse_token(E_PROXY_COOKIE_AUTHENTICATION_ACCESS_DENIED)
                        .map_err(|e| fail(report, e.to_string()))?;
                    let _ = send(ws, &answer).await;
                    report.detail = Some(format!("access token: {e}"));
                    return Err(Outcome::TokenRefused);
                }
            },
            Action::OpenChannel { resource, .. } => {
                // A ticket, when the client sent one, decides (it names its
                // pool and user); otherwise the Windows sign-in.
                let by = match (ticket.take(), &signed_in) {
                    (Some((ticket, raw)), _) => SignedInBy::Ticket { ticket, raw },
                    (None, Some(user)) => SignedInBy::Windows { user: user.clone() },
                    (None, None) => return Err(fail(report, "channel without a token".into())),
                };
                return Ok(ChannelAsked { resource, by });
            }
        }
    }
}

fn fail(report: &mut Report, detail: String) -> Outcome {
    report.detail = Some(detail);
    Outcome::Protocol
}

/// Channel create: places the ticket's user in the ticket's pool (the
/// resource must name it; for a host-bound ticket, the ticket's host, which
/// the broker checks) and dials the host, trying the next one when a
/// new session's host cannot be reached (R5); answers the client either way.
async fn open_channel<P>(
    ws: &mut Link,
    tunnel: &mut Tunnel,
    asked: ChannelAsked,
    front: &Front<P>,
    source: &SourceGuard,
    report: &mut Report,
) -> Result<(TcpStream, placement::Placement, String), Outcome>
where
    P: Placer,
{
    let (placer, config) = (front.placer.as_ref(), &front.config);
    let ChannelAsked { resource, by } = asked;
    let refuse = async |ws: &mut Link, tunnel: &mut Tunnel, code: u32| {
        if let Ok(answer) = tunnel.server.refuse_channel(code) {
            let _ = send(ws, &answer).await;
        }
    };
    let (pool, user, raw, host_bound) = match by {
        SignedInBy::Ticket { ticket, raw } => {
            let host_bound = ticket.host.is_some();
            (ticket.pool, ticket.user, Some(raw), host_bound)
        }
        // Rule AD2: the pool is the tunnel's target, as a ticket's is.
        SignedInBy::Windows { user } => (resource.clone(), user, None, false),
    };
    let windows = raw.is_none();
    // A host-bound ticket (rule AD4) names its host as the target: the
    // broker judges whether the target names that host, and the host is
    // dialled at the address the broker knows, never at the target.
    if !host_bound && !resource.eq_ignore_ascii_case(&pool) {
        report.detail = Some(format!(
            "resource {resource:?} is not the ticket's pool {pool}"
        ));
        refuse(ws, tunnel, E_PROXY_RAP_ACCESSDENIED).await;
        return Err(Outcome::ResourceRefused);
    }
    // A pool that does not allow the front door is refused as an unknown
    // pool is, and both as a ticket the broker refuses: the gateway cannot
    // tell a genuine ticket from a forged one, so a client without one
    // must not learn which pools exist (the log and the outcome say which).
    match placer.front_door_policy(&pool).await {
        // Rule AD2: a pool takes Windows sign-in only when it says so.
        Ok(policy) if policy.allowed && windows && !policy.windows_sign_in => {
            report.detail = Some(format!(
                "host pool {pool} takes only connection tickets at the RD Gateway \
                 (gatewaySignIn is Ticket), not a Windows sign-in"
            ));
            if let Some(sign_in) = &config.windows_sign_in {
                sign_in.user_refused(&user);
            }
            let reason = crate::windows_sign_in::refusal::TICKETS_ONLY_POOL;
            placer
                .sign_in_refused(source.key(), Some(&user), reason)
                .await;
            refuse(ws, tunnel, E_PROXY_RAP_ACCESSDENIED).await;
            return Err(Outcome::WindowsSignInNotAllowed);
        }
        Ok(policy) if policy.allowed => {}
        Ok(_) => {
            report.detail = Some(format!("host pool {pool} does not allow the front door"));
            refuse(ws, tunnel, E_PROXY_COOKIE_AUTHENTICATION_ACCESS_DENIED).await;
            return Err(Outcome::PoolNotAllowed);
        }
        Err(e) => {
            report.detail = Some(e.to_string());
            let (code, outcome) = placer_refusal(&e);
            refuse(ws, tunnel, code).await;
            return Err(outcome);
        }
    }
    report.user = Some(user.clone());
    report.pool = Some(pool.clone());
    // Without a ticket the broker decides the user's entitlement itself,
    // from the directory's groups (AD1).
    let request = ConnectInput {
        user,
        ticket: raw,
        target: host_bound.then_some(resource),
        ..ConnectInput::default()
    };
    let door = Door::new(
        &RD_GATEWAY,
        placer,
        &pool,
        &config.bounds,
        &front.waiting,
        source,
    );
    let client = &mut Held {
        link: &mut *ws,
        tunnel: &mut *tunnel,
    };
    let (code, outcome) = match door.place_and_dial(request, client, report).await {
        Ok((host, placed)) => {
            let answer = tunnel
                .server
                .accept_channel(1)
                .map_err(|e| fail(report, e.to_string()))?;
            if let Err(e) = send(ws, &answer).await {
                report.detail = Some(e);
                if !placed.reconnect {
                    release(placer, "rd gateway", &pool, &placed.session_id).await;
                }
                return Err(Outcome::Protocol);
            }
            return Ok((host, placed, pool));
        }
        Err(no_host) => match gateway_outcome(no_host.outcome()) {
            Outcome::ClientLeft => return Err(Outcome::ClientLeft),
            outcome => (hresult(outcome), outcome),
        },
    };
    // A signed-in user the pool does not entitle counts against the user's
    // share of failures (rule AD2), so that one account cannot probe pool
    // after pool without bound.
    if windows
        && outcome == Outcome::Refused(api::ErrorCode::NotEntitled)
        && let (Some(sign_in), Some(user)) = (&config.windows_sign_in, &report.user)
    {
        sign_in.user_refused(user);
    }
    refuse(ws, tunnel, code).await;
    Err(outcome)
}

/// A tunnel's client while its channel is held: its next packet is read
/// (and kept, to be judged once the channel is answered); the tunnel's end
/// or a broken link means it has gone.
struct Held<'a> {
    link: &'a mut Link,
    tunnel: &'a mut Tunnel,
}

impl Client for Held<'_> {
    async fn gone(&mut self) -> bool {
        match self.tunnel.next(self.link).await {
            Ok(Some(packet)) => {
                self.tunnel.pending.push_front(packet);
                false
            }
            Ok(None) | Err(_) => true,
        }
    }
}

/// The HRESULT and outcome of a placer's refusal.
fn placer_refusal(e: &PlacerError) -> (u32, Outcome) {
    let outcome = gateway_outcome(Outcome::of_refusal(e));
    (hresult(outcome), outcome)
}

/// The gateway's name for a refused ticket: its access token's.
fn gateway_outcome(outcome: Outcome) -> Outcome {
    match outcome {
        Outcome::TicketRefused => Outcome::TokenRefused,
        outcome => outcome,
    }
}

/// The HRESULT a channel request that ended in `outcome` is refused with.
/// A refused ticket and an unknown pool are answered alike (see
/// `open_channel`).
fn hresult(outcome: Outcome) -> u32 {
    match outcome {
        Outcome::TokenRefused | Outcome::UnknownPool | Outcome::PoolNotAllowed => {
            E_PROXY_COOKIE_AUTHENTICATION_ACCESS_DENIED
        }
        Outcome::BrokerUnreachable => E_PROXY_INTERNALERROR,
        Outcome::WaitingLimit(_) | Outcome::SourceLimit => E_PROXY_MAXCONNECTIONSREACHED,
        Outcome::ResourceRefused => E_PROXY_RAP_ACCESSDENIED,
        _ => E_PROXY_TS_CONNECTFAILED,
    }
}
