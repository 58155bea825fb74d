//! The RDP front door (rules R1–R6): accepts RDP clients, reads their first
//! PDU, asks a [`Placer`] where each one goes, and relays the connection to
//! that host untouched.
//!
//! One connection, start to end:
//!
//! ```text
//! accept (≤ max_connections open) ─► read first PDU (≤ 259 bytes, ≤ 5 s) ─► pool, user
//!   ─► Placer::connect ─► dial host (≤ 3 s) ─┬─► forward PDU, Active, relay both ways ─► Disconnected / logoff
//!                 ▲                           └─► unreachable: new session → logoff, exclude host, try again (R5)
//!                 └────────────────────────────────  reconnect (S1) → close
//! ```
//!
//! When the broker answers 503 `SessionHostStarting` (rule A8: the pool
//! starts a host for this user), the connection is held, not closed: the
//! client has sent its first PDU and waits for the Connection Confirm, and
//! the same connect is asked again every [`HOST_START_RETRY_INTERVAL`] for
//! up to [`HOST_START_WAIT`]; then it is placed and relayed as usual, or
//! closed. A client that gives up meanwhile is let go (its connect is not
//! asked again). At most [`MAX_WAITING_CONNECTIONS`] connections wait at
//! once, and [`crate::sources::MAX_WAITING_PER_SOURCE`] per source.
//!
//! Each connection runs on its own task, so a slow or hostile client holds
//! one slot for at most the handshake timeout and disturbs no other (R6).
//! Every connection ends in one `outcome` in metrics; relayed ones in one
//! INFO line, refused ones in `deskbroker_rdp_refusals_total{reason}` and a
//! rate-limited line (`sources.rs`). A client refused after its first PDU
//! is told why before the close: an X.224 Connection Confirm with an RDP
//! Negotiation Failure whose code is one of [`pdu::failure`] (ticket
//! refused, access refused, unavailable), so it ends on a negotiation
//! failure instead of a closed transport.
//!
//! What the front door trusts (rules R2, R3, S9):
//!
//! - **Sources are bounded** (`sources.rs`): connections, handshakes not yet
//!   answered by a host, handshakes and new sessions per minute, per IP; a
//!   host that has not answered within [`HOST_ANSWER_TIMEOUT`] of the
//!   forwarded first PDU is given up.
//! - **A session needs evidence of a logon.** A session this front door
//!   made is kept (Disconnected) when its connection closes only if a logon
//!   can have begun: the connection went through the TLS handshake with the
//!   host, seen as at least [`LOGON_EVIDENCE_HOST_BYTES`] from the host (its
//!   Connection Confirm and TLS server flight with its certificate) and at
//!   least [`LOGON_EVIDENCE_CLIENT_BYTES`] from the client past its first
//!   PDU (its TLS handshake and what follows). Measured with xfreerdp 2.11
//!   against xrdp, closed as soon as xrdp logged the TLS connection: 2252
//!   bytes from the host, 1145 from the client. Without that evidence the
//!   session is ended (logoff): connections with invented `mstshash` names
//!   that close at once, or send junk the host refuses, leave nothing
//!   behind. A client that plays a real TLS handshake with the host does get
//!   a session, but the front door's marks never confirm a logon (only the
//!   host's agent does, S8): such a session lasts only while its connection
//!   does, and ends the pool's `pendingTimeoutSeconds` after it closes
//!   (S9). A connection is closed after [`IDLE_TIMEOUT_WITHOUT_LOGON`] with
//!   no byte either way until it shows that evidence, and after
//!   [`RELAY_IDLE_TIMEOUT`] once it has.
//! - **A connection changes only the sessions it owns.** It owns the session
//!   it made, and, when it carries a ticket (T3), a reconnect (S1) to a
//!   session that was Disconnected or that another connection of this front
//!   door already owns. A connection that names its user only by an
//!   `mstshash` cookie proves nothing about who it is (R2), so it never
//!   changes an existing session: it is relayed to the user's host, which
//!   authenticates the user, and the host's agent reports the session's
//!   state (S8). A ticketed reconnect to a
//!   session that is Active (or Pending) with no connection of this front
//!   door on it belongs to someone else's live connection: the client is
//!   relayed (S1 sends the user to their host, which authenticates them) but
//!   the session's state is never touched. An owned session is marked
//!   Disconnected (or ended, above) only when its last connection through
//!   this front door closes. (Each front door process keeps its own table:
//!   after a restart, a session left Active is ended by the host's agent or
//!   by the pool's S9 lifetimes.)
//! - **Redirection tokens must be the broker's** (`redirect.rs`), and a
//!   `tsv://` routing token or a ticket must name a pool with
//!   `allowFrontDoor: true` (the front door's own default pool needs no
//!   token).
//! - **Tickets are the broker's word** (rule T3, `api::ticket`): a ticket
//!   names its pool and user, and goes to the broker with the connect
//!   request, which places that user only if it signed the ticket for that
//!   pool and it has not expired; a pool with `requireConnectionTicket` is
//!   refused to connections without one before the broker is asked to
//!   place. The front door holds no key that mints tickets.

mod relay;

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Semaphore;

use crate::door::{
    Bounds, Client, Door, Live, Outcome, RDP, Report, Session, describe_metrics, dial,
    logon_evidence,
};
use crate::pdu::{self, Routing};
use crate::placer::{ConnectInput, Placer};
use crate::redirect::RedirectKeys;
use crate::sources::{self, SourceGuard, Sources};

use relay::{forward, relay};

/// Connections open at once (in handshake or relayed). At the limit the
/// front door stops accepting; the kernel's backlog holds the next ones.
pub const MAX_CONNECTIONS: usize = 4096;
/// How long dialling a session host may take before it counts as unreachable.
pub const HOST_CONNECT_TIMEOUT: Duration = Duration::from_secs(3);
/// Placements tried for one new connection when hosts are unreachable (R5).
pub const MAX_PLACEMENT_ATTEMPTS: usize = 3;
/// Pause after a failed `accept` (for example out of file descriptors),
/// so the loop does not spin.
pub const ACCEPT_ERROR_BACKOFF: Duration = Duration::from_millis(100);
/// Bytes one relayed direction reads at once. Measured against 8 KiB
/// (`tokio::io::copy`), 16 and 64 KiB with `deskbroker-devbench rdp`: 32 KiB
/// relays the most per CPU second (`docs/benchmarks.md`). Two buffers per
/// connection: at most 2 × 32 KiB × `MAX_CONNECTIONS` = 256 MiB.
pub const RELAY_BUFFER_BYTES: usize = 32 * 1024;
/// Prefix of the user name of a connection that names no user (R2).
pub const ANONYMOUS_USER_PREFIX: &str = "anonymous-";
/// How long a host may take to send its first byte after the first PDU was
/// forwarded (its X.224 Connection Confirm comes at once from a real RDP
/// host): past it the connection is closed and counts as unreachable.
pub const HOST_ANSWER_TIMEOUT: Duration = Duration::from_secs(10);
/// Rule S9's evidence of a logon: bytes the host must have sent (its TLS
/// server flight carries its certificate; see the module's documentation).
pub const LOGON_EVIDENCE_HOST_BYTES: u64 = 1024;
/// Rule S9's evidence of a logon: bytes the client must have sent past its
/// first PDU (its TLS handshake, then its MCS connection).
pub const LOGON_EVIDENCE_CLIENT_BYTES: u64 = 512;
/// How long a relayed connection that showed evidence of a logon may carry
/// no byte either way before it is closed (R4). An idle RDP session is not
/// silent for long: Windows hosts send clients that ask for it a periodic
/// heartbeat (MS-RDPBCGR's Server Heartbeat PDU, which mstsc asks for to
/// notice a dead network), and a desktop's clock or a screen lock changes the screen
/// well within an hour. A session silent for an hour is a forgotten or
/// dead connection; closing it leaves the session Disconnected, and an RDP
/// client that was still there reconnects by itself (S1).
pub const RELAY_IDLE_TIMEOUT: Duration = Duration::from_secs(60 * 60);
/// How long a relayed connection that has not shown evidence of a logon
/// (see `logon_evidence`) may carry no byte either way before it is
/// closed. A real client sends its TLS handshake at once; the longest
/// silence before the evidence is a person reading the client's prompt
/// about the host's certificate, which two minutes allows.
pub const IDLE_TIMEOUT_WITHOUT_LOGON: Duration = Duration::from_secs(2 * 60);

/// How long a connection is held while a host starts for it (rule A8).
/// RDP clients wait for the X.224 Connection Confirm far longer than a
/// machine takes to boot: neither mstsc nor xfreerdp (2.x, 3.x) puts a
/// timeout of its own on that read, so the wait is bounded by TCP (no
/// keepalive is sent by either side in between, and a NAT on the way may
/// drop an idle flow after some minutes) and by the user's patience. Five
/// minutes covers a cloud VM's deallocated start and its agent's first
/// heartbeat, and stays under common NAT idle timeouts (5 min and more).
pub const HOST_START_WAIT: Duration = Duration::from_secs(5 * 60);
/// How often a held connection asks the broker again (its `Retry-After`
/// is for clients of the API; the front door asks more often, so the user
/// waits at most this long past the host's first heartbeat).
pub const HOST_START_RETRY_INTERVAL: Duration = Duration::from_secs(3);
/// Connections held at once, over all sources, while hosts start for
/// them. Each holds a connection slot and a task, and asks the broker
/// every [`HOST_START_RETRY_INTERVAL`]: 512 cost at most ~170 connects a
/// second. Beyond it a connection is closed as refused.
pub const MAX_WAITING_CONNECTIONS: usize = 512;

/// The front door's settings; [`Config::new`] gives the named defaults.
#[derive(Clone, Debug)]
pub struct Config {
    /// The pool of connections without a pool routing token (R1); none
    /// means such connections are refused.
    pub default_pool: Option<String>,
    /// The bounds every door shares (`handshake_timeout` bounds the first
    /// PDU).
    pub bounds: Bounds,
    /// The keys of the broker's redirection tokens (R3); none: every msts
    /// token is refused.
    pub redirect_keys: RedirectKeys,
}

impl Config {
    pub fn new(default_pool: Option<String>) -> Config {
        Config {
            default_pool,
            bounds: Bounds::default(),
            redirect_keys: RedirectKeys::default(),
        }
    }
}

/// Accepts RDP clients on `listener` until `shutdown` resolves. Then it
/// stops accepting and returns; connections being relayed are not waited for.
pub async fn serve<P: Placer>(
    listener: TcpListener,
    placer: Arc<P>,
    config: Config,
    shutdown: impl Future<Output = ()>,
) {
    describe_metrics();
    let shared = Arc::new(Shared {
        sources: Sources::new(config.bounds.source_limits),
        live: Live::default(),
        waiting: Arc::new(Semaphore::new(config.bounds.max_waiting_connections)),
    });
    let config = Arc::new(config);
    let slots = Arc::new(Semaphore::new(config.bounds.max_connections));
    tokio::pin!(shutdown);
    // A connection over its source's bounds is closed at once, before any
    // byte is read: no task, no host.
    while let Some(sources::Admitted {
        stream,
        peer,
        permit,
        source,
    }) = sources::accept(
        &listener,
        &slots,
        &shared.sources,
        shutdown.as_mut(),
        "deskbroker_rdp_connections_total",
        "rdp front door",
    )
    .await
    {
        let placer = placer.clone();
        let config = config.clone();
        let shared = shared.clone();
        tokio::spawn(async move {
            let _permit = permit;
            handle(stream, peer, placer.as_ref(), &config, &shared, source).await;
        });
    }
    tracing::info!("rdp front door stopped accepting");
}

/// What every connection of one front door shares.
struct Shared {
    sources: Arc<Sources>,
    /// The sessions its connections own.
    live: Live,
    /// Connections that may still be held while a host starts (A8).
    waiting: Arc<Semaphore>,
}

impl Outcome {
    /// The refusal's reason label, or none for a connection that was served
    /// (or failed for reasons that are not the client's).
    fn refusal(self, handshake: Option<&'static str>) -> Option<&'static str> {
        match self {
            Outcome::HandshakeFailed => Some(handshake.unwrap_or("handshake_failed")),
            Outcome::NoPool => Some("no_pool"),
            Outcome::Refused(_) => Some("refused"),
            Outcome::UnknownRedirect => Some("unknown_redirect"),
            Outcome::PoolNotAllowed => Some("pool_not_allowed"),
            Outcome::RedirectRefused(r) => Some(r.reason()),
            Outcome::SourceLimit => Some("source_session_rate"),
            Outcome::TicketRequired => Some("ticket_required"),
            Outcome::TicketRefused => Some("ticket_refused"),
            Outcome::WaitingLimit(reason) => Some(reason),
            _ => None,
        }
    }

    /// The RDP_NEG_FAILURE code a refused client is told ([`pdu::failure`]),
    /// or none for a connection that was served or whose client left.
    ///
    /// Told apart only as far as the client may know: whatever names a pool
    /// that does not exist, or one closed to the front door, is answered as
    /// the neighbouring refusal is (a ticket's as a refused ticket, the
    /// others as access refused), so no answer says which pools exist.
    fn failure_code(self, ticketed: bool) -> Option<u32> {
        use api::ErrorCode as E;
        use pdu::failure::{ACCESS_REFUSED, TICKET_REFUSED, UNAVAILABLE};
        let refused_access = if ticketed {
            TICKET_REFUSED
        } else {
            ACCESS_REFUSED
        };
        Some(match self {
            Outcome::Relayed
            | Outcome::ClientLeft
            | Outcome::HandshakeFailed
            | Outcome::Paired
            | Outcome::Web
            | Outcome::WebPage => return None,
            Outcome::TicketRefused => TICKET_REFUSED,
            Outcome::PoolNotAllowed => refused_access,
            Outcome::NoPool
            | Outcome::TicketRequired
            | Outcome::UnknownRedirect
            | Outcome::RedirectRefused(_) => ACCESS_REFUSED,
            Outcome::Refused(code) => match code {
                E::HostPoolNotFound => refused_access,
                E::NoSessionHostAvailable
                | E::SessionHostUnavailable
                | E::SessionHostStarting
                | E::StoreUnavailable
                | E::ServiceBusy
                | E::LeaderUnavailable
                | E::LeaderTimeout
                | E::LeaderLost
                | E::TooManyRequests
                | E::InternalError
                // The door's own credential refused: nothing the user did.
                | E::Unauthorized
                | E::Forbidden => UNAVAILABLE,
                _ => ACCESS_REFUSED,
            },
            _ => UNAVAILABLE,
        })
    }
}

/// Counts the connection in the open-connections gauge while it lives.
struct OpenGauge;

impl OpenGauge {
    fn new() -> OpenGauge {
        metrics::gauge!("deskbroker_rdp_open_connections").increment(1.0);
        OpenGauge
    }
}

impl Drop for OpenGauge {
    fn drop(&mut self) {
        metrics::gauge!("deskbroker_rdp_open_connections").decrement(1.0);
    }
}

async fn handle<P: Placer>(
    client: TcpStream,
    peer: SocketAddr,
    placer: &P,
    config: &Config,
    shared: &Shared,
    source: SourceGuard,
) {
    let _open = OpenGauge::new();
    let started = Instant::now();
    let mut report = Report::default();
    let outcome = connection(client, placer, config, shared, &source, &mut report).await;
    drop(source);
    let duration = started.elapsed();
    metrics::counter!("deskbroker_rdp_connections_total", "outcome" => outcome.as_str())
        .increment(1);
    metrics::histogram!("deskbroker_rdp_connection_seconds").record(duration);
    if let Some(reason) = outcome.refusal(report.handshake_reason) {
        // Junk and refused connections: counted, and logged rate-limited.
        sources::refused(reason, peer, report.detail.as_deref().unwrap_or(""));
        return;
    }
    report.log("rdp connection", peer, outcome.as_str(), duration);
}

/// Runs one connection to its end and says how it ended: reads its first
/// PDU, admits it (or answers its refusal), relays it.
async fn connection<P: Placer>(
    mut client: TcpStream,
    placer: &P,
    config: &Config,
    shared: &Shared,
    source: &SourceGuard,
    report: &mut Report,
) -> Outcome {
    let (first_pdu, request) = match read_first_pdu(&mut client, config, report).await {
        Ok(read) => read,
        Err(outcome) => return outcome,
    };
    let _ = client.set_nodelay(true);
    match admit(&client, &request, placer, config, shared, source, report).await {
        Ok(Admitted::Redirect(mut host)) => match forward(&mut host, &first_pdu, report).await {
            Ok(()) => relay(client, host, config, source, report).await,
            Err(outcome) => outcome,
        },
        Ok(Admitted::Placed(placed)) => {
            let cx = (placer, config, shared, source);
            serve_placed(client, placed, &first_pdu, cx, report).await
        }
        Err(outcome) => {
            let ticketed = matches!(request.routing, Some(Routing::Ticket { .. }));
            answer_refusal(&mut client, &request, outcome, ticketed, report).await;
            outcome
        }
    }
}

/// The client's first PDU (R6), or the refusal of a junk, oversized,
/// truncated or slow one.
async fn read_first_pdu(
    client: &mut TcpStream,
    config: &Config,
    report: &mut Report,
) -> Result<(Vec<u8>, pdu::ConnectionRequest), Outcome> {
    pdu::read_first_pdu(client, config.bounds.handshake_timeout)
        .await
        .map_err(|e| {
            metrics::counter!("deskbroker_rdp_handshake_failures_total", "reason" => e.reason())
                .increment(1);
            report.handshake_reason = Some(e.reason());
            report.detail = Some(e.to_string());
            Outcome::HandshakeFailed
        })
}

/// Where an admitted connection goes.
enum Admitted {
    /// Straight to the host a redirection token names (R3).
    Redirect(TcpStream),
    /// To the host the broker placed the user on.
    Placed(Placed),
}

/// A placed connection: its dialled host and what the placement said.
struct Placed {
    host: TcpStream,
    placement: placement::Placement,
    pool: String,
    anonymous: bool,
    ticketed: bool,
}

/// Decides where the connection goes, up to a dialled host, or why it
/// is refused. The client is only watched (a held client may leave); it
/// is answered by the caller.
async fn admit<P: Placer>(
    client: &TcpStream,
    request: &pdu::ConnectionRequest,
    placer: &P,
    config: &Config,
    shared: &Shared,
    source: &SourceGuard,
    report: &mut Report,
) -> Result<Admitted, Outcome> {
    let (pool, user, ticket) = match named(request, placer, config, report)? {
        Named::Redirect(addr, pool) => {
            let host = redirect(addr, &pool, placer, config, report).await?;
            return Ok(Admitted::Redirect(host));
        }
        Named::Pool { pool, user, ticket } => (pool, user, ticket),
    };
    allowed(&pool, ticket.is_some(), placer, config, report).await?;
    let anonymous = user.is_none();
    // Only a ticket (T3) says who the client is; a cookie is a claim (R2).
    let ticketed = ticket.is_some();
    let user = user.unwrap_or_else(|| format!("{ANONYMOUS_USER_PREFIX}{}", uuid::Uuid::new_v4()));
    report.user = Some(user.clone());
    let request = ConnectInput {
        user,
        ticket,
        ..ConnectInput::default()
    };
    let door = Door::new(&RDP, placer, &pool, &config.bounds, &shared.waiting, source);
    match door
        .place_and_dial(request, &mut Peer(client), report)
        .await
    {
        Ok((host, placement)) => Ok(Admitted::Placed(Placed {
            host,
            placement,
            pool,
            anonymous,
            ticketed,
        })),
        // The front door counts an unknown pool as any other refusal.
        Err(no_host) => Err(match no_host.outcome() {
            Outcome::UnknownPool => Outcome::Refused(api::ErrorCode::HostPoolNotFound),
            outcome => outcome,
        }),
    }
}

/// What the first PDU's routing names.
enum Named {
    /// A verified redirection token (R3): its host's address, looked up
    /// in the pool.
    Redirect(std::net::SocketAddrV4, String),
    /// A pool, the user it names (none: anonymous) and its ticket (T3).
    Pool {
        pool: String,
        user: Option<String>,
        ticket: Option<String>,
    },
}

/// Reads the routing of the first PDU (R1, R3, T3): a pool and maybe a
/// user and ticket, or a redirection token the broker signed.
fn named<P: Placer>(
    request: &pdu::ConnectionRequest,
    placer: &P,
    config: &Config,
    report: &mut Report,
) -> Result<Named, Outcome> {
    let mut ticket = None;
    let (pool, user) = match &request.routing {
        Some(Routing::Pool(pool)) => (Some(pool.clone()), None),
        Some(Routing::User(user)) => (config.default_pool.clone(), Some(user.clone())),
        // Rule T3: the ticket names its pool and user; the broker checks
        // its signature when asked to place.
        Some(Routing::Ticket { ticket: t, raw }) => {
            ticket = Some(raw.clone());
            (Some(t.pool.clone()), Some(t.user.clone()))
        }
        Some(Routing::Redirect(token)) => {
            // Rule R3: only the broker's own tokens, unexpired by its clock.
            let addr = config
                .redirect_keys
                .verify(token, placer.now_unix_seconds())
                .map_err(|refusal| {
                    report.detail = Some(format!("{}: {refusal}", token.addr));
                    Outcome::RedirectRefused(refusal)
                })?;
            // A redirection cookie names no pool: it is looked up in the
            // default pool, the only one such a client can have come from.
            let Some(pool) = config.default_pool.clone() else {
                report.detail = Some(format!("redirect to {addr} without a default pool"));
                return Err(Outcome::NoPool);
            };
            report.pool = Some(pool.clone());
            return Ok(Named::Redirect(addr, pool));
        }
        None => (config.default_pool.clone(), None),
    };
    let Some(pool) = pool else {
        report.detail = Some("no routing token and no --rdp-default-pool".into());
        return Err(Outcome::NoPool);
    };
    report.pool = Some(pool.clone());
    report.user = user.clone();
    Ok(Named::Pool { pool, user, ticket })
}

/// Rules R3 and T3: what the pool lets through a front door. A routing
/// token or ticket names only pools that allow it (the operator's own
/// default pool needs no token); a pool that requires a ticket is reached
/// only with one.
async fn allowed<P: Placer>(
    pool: &str,
    ticketed: bool,
    placer: &P,
    config: &Config,
    report: &mut Report,
) -> Result<(), Outcome> {
    let policy = placer.front_door_policy(pool).await.map_err(|e| {
        report.detail = Some(e.to_string());
        match e {
            crate::PlacerError::Refused { code, .. } => Outcome::Refused(code),
            crate::PlacerError::Unreachable(_) => Outcome::BrokerUnreachable,
        }
    })?;
    if !policy.allowed && config.default_pool.as_deref() != Some(pool) {
        report.detail = Some(format!(
            "host pool {pool} does not allow the front door (allowFrontDoor: false)"
        ));
        return Err(Outcome::PoolNotAllowed);
    }
    if policy.require_ticket && !ticketed {
        report.detail = Some(format!(
            "host pool {pool} places users only on a connection ticket (requireConnectionTicket)"
        ));
        return Err(Outcome::TicketRequired);
    }
    Ok(())
}

/// Relays a placed connection, its session left as rule R4 says (the
/// door's shared `Session`): the first PDU forwarded, then both ways
/// while the session is marked Active.
async fn serve_placed<P: Placer>(
    client: TcpStream,
    placed: Placed,
    first_pdu: &[u8],
    (placer, config, shared, source): (&P, &Config, &Shared, &SourceGuard),
    report: &mut Report,
) -> Outcome {
    let Placed {
        mut host,
        placement,
        pool,
        anonymous,
        ticketed,
    } = placed;
    let session = Session::begin(
        &RDP,
        placer,
        &shared.live,
        &pool,
        &placement,
        ticketed,
        anonymous,
        report,
    );
    let outcome = match forward(&mut host, first_pdu, report).await {
        Ok(()) => {
            session
                .relay(relay(client, host, config, source, report))
                .await
        }
        Err(outcome) => outcome,
    };
    session.end(logon_evidence(report, first_pdu.len())).await;
    outcome
}

/// How long writing a refusal's answer may take. It is 19 bytes, which the
/// kernel takes at once; the bound is for a client that reads nothing and
/// has a full receive window (it sent only its first PDU, so it cannot).
pub const REFUSAL_ANSWER_TIMEOUT: Duration = Duration::from_secs(2);

/// Tells a refused client why, when RDP has a way to (see
/// [`pdu::failure`]): an RDP Negotiation Failure in an X.224 Connection
/// Confirm, then an orderly close.
async fn answer_refusal(
    client: &mut TcpStream,
    request: &pdu::ConnectionRequest,
    outcome: Outcome,
    ticketed: bool,
    report: &mut Report,
) {
    use tokio::io::AsyncWriteExt;
    let Some(code) = outcome.failure_code(ticketed) else {
        return;
    };
    let answer = pdu::negotiation_failure(request, code);
    let write = async {
        client.write_all(&answer).await?;
        client.shutdown().await
    };
    let answered = matches!(
        tokio::time::timeout(REFUSAL_ANSWER_TIMEOUT, write).await,
        Ok(Ok(()))
    );
    if answered {
        let told = format!(
            "client told RDP_NEG_FAILURE {code} ({})",
            pdu::failure::name(code)
        );
        report.detail = Some(match report.detail.take() {
            Some(detail) => format!("{detail}; {told}"),
            None => told,
        });
    }
}

/// The front door's client while it is held: gone once it closes.
struct Peer<'a>(&'a TcpStream);

impl Client for Peer<'_> {
    fn gone(&mut self) -> impl Future<Output = bool> + Send + '_ {
        closed(self.0)
    }
}

/// Resolves when the client has closed (true) or sent bytes (false),
/// without consuming them.
async fn closed(client: &TcpStream) -> bool {
    let mut byte = [0u8; 1];
    !matches!(client.peek(&mut byte).await, Ok(n) if n > 0)
}

/// Rule R3: straight to the registered host at `addr` (whose token the
/// broker signed), or refused. The session on that host is the host's (and
/// its agent's) to report.
async fn redirect<P: Placer>(
    addr: std::net::SocketAddrV4,
    pool: &str,
    placer: &P,
    config: &Config,
    report: &mut Report,
) -> Result<TcpStream, Outcome> {
    let address = addr.to_string();
    match placer.host_at(pool, &address).await {
        Ok(Some(host)) => report.host = Some(host),
        Ok(None) => {
            report.detail = Some(format!("no host of {pool} is registered at {address}"));
            return Err(Outcome::UnknownRedirect);
        }
        Err(e) => {
            report.detail = Some(e.to_string());
            return Err(Outcome::BrokerUnreachable);
        }
    }
    dial(&address, config.bounds.host_connect_timeout)
        .await
        .map_err(|e| {
            report.detail = Some(format!("{address}: {e}"));
            Outcome::HostUnreachable
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use api::ErrorCode as E;
    use pdu::failure::{ACCESS_REFUSED, TICKET_REFUSED, UNAVAILABLE};

    #[test]
    fn a_refusal_tells_only_what_the_client_may_know() {
        // A ticket that names an unknown pool, or one closed to the front
        // door, is answered as any refused ticket is …
        for outcome in [
            Outcome::TicketRefused,
            Outcome::PoolNotAllowed,
            Outcome::Refused(E::HostPoolNotFound),
        ] {
            assert_eq!(
                outcome.failure_code(true),
                Some(TICKET_REFUSED),
                "{outcome:?}"
            );
        }
        // … and without a ticket, an unknown pool as a closed one, or one
        // that requires a ticket.
        for outcome in [
            Outcome::PoolNotAllowed,
            Outcome::Refused(E::HostPoolNotFound),
            Outcome::TicketRequired,
            Outcome::NoPool,
            Outcome::Refused(E::NotEntitled),
        ] {
            assert_eq!(
                outcome.failure_code(false),
                Some(ACCESS_REFUSED),
                "{outcome:?}"
            );
        }
        // What the user can wait out.
        for outcome in [
            Outcome::Refused(E::NoSessionHostAvailable),
            Outcome::Refused(E::ServiceBusy),
            Outcome::HostStartTimeout,
            Outcome::HostUnreachable,
            Outcome::BrokerUnreachable,
            Outcome::SourceLimit,
            Outcome::WaitingLimit("waiting_full"),
        ] {
            assert_eq!(outcome.failure_code(true), Some(UNAVAILABLE), "{outcome:?}");
        }
        // Served, gone, or never a Connection Request: nothing to tell.
        for outcome in [
            Outcome::Relayed,
            Outcome::ClientLeft,
            Outcome::HandshakeFailed,
        ] {
            assert_eq!(outcome.failure_code(true), None, "{outcome:?}");
        }
    }
}
