//! How a connection at any door ended: one [`Outcome`], counted under the
//! `outcome` label of its door's connections counter, and the doors'
//! metrics, described once.

use crate::placer::PlacerError;
use crate::redirect::RedirectRefusal;

/// How a connection ended, as the `outcome` label of its door's counter
/// (`deskbroker_rdp_connections_total`, `deskbroker_rdg_tunnels_total`,
/// `deskbroker_web_connections_total`). Each door ends in some of these.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Relayed to a host until one side closed.
    Relayed,
    /// A legacy `RDG_IN_DATA` channel, handed to its OUT channel (whose
    /// connection reports the tunnel).
    Paired,
    /// The RDP first PDU was junk, oversized, truncated or slow (R6).
    HandshakeFailed,
    /// Not a request of the door's (or TLS failed), or one refused as it
    /// stands.
    BadRequest,
    /// An MS-TSGU packet out of order, or bytes that are no packet.
    Protocol,
    /// A browser's request over its bound.
    TooLarge,
    /// The setup did not end within its bound.
    Timeout,
    /// The client left a step of its setup idle past the handshake bound.
    Idle,
    /// No routing token and no default pool (R1).
    NoPool,
    /// The broker refused the placement (no capacity, …), with the
    /// contract's code.
    Refused(api::ErrorCode),
    /// The host (or every host tried) could not be reached (R5).
    HostUnreachable,
    /// An msts cookie named no registered host (R3).
    UnknownRedirect,
    /// The broker did not answer.
    BrokerUnreachable,
    /// The pool named does not allow the front door (R3).
    PoolNotAllowed,
    /// The ticket's pool does not exist.
    UnknownPool,
    /// An msts token the broker did not issue, or expired (R3).
    RedirectRefused(RedirectRefusal),
    /// A per-source bound (new sessions per minute).
    SourceLimit,
    /// A pool with `requireConnectionTicket` reached without a ticket (T3).
    TicketRequired,
    /// The broker refused the ticket: forged, changed, expired, foreign (T3).
    TicketRefused,
    /// The RD Gateway's access token (a ticket) refused.
    TokenRefused,
    /// An RD Gateway channel asked for another resource than its ticket's
    /// pool.
    ResourceRefused,
    /// A ticket with its share of browser connections open already (or the
    /// table of tickets full).
    TicketLimit,
    /// A host was starting for the user (A8) and did not become available
    /// within the wait.
    HostStartTimeout,
    /// The client closed while a host was starting for it (or before its
    /// answer).
    ClientLeft,
    /// A host was starting, but no more connections may wait (per source,
    /// or `waiting_full` in total).
    WaitingLimit(&'static str),
    /// A legacy OUT channel over its bounds waiting for its IN channel.
    OutChannelLimit,
    /// The host refused the browser's security negotiation.
    NegotiationFailed,
    /// TLS with the host failed (the browser's door).
    HostTlsFailed,
    /// A browser's connection (`GET /web/rdp`) on the HTTPS front, which
    /// the browser's door counts by its own outcome.
    Web,
    /// The browser's page or one of its files, served.
    WebPage,
    /// Workspace feed requests (rule F4) of a signed-in connection,
    /// answered.
    Feed,
    /// KDC proxy requests (rule AD3), each counted by its own outcome in
    /// `deskbroker_kdc_proxy_messages_total`.
    KdcProxy,
    /// An RD Gateway request without a ticket or a sign-in, answered 401
    /// `Negotiate` (rule AD2): the client signs in on its next request.
    SignInChallenged,
    /// A Windows sign-in refused (a bad, expired or foreign Kerberos
    /// ticket): answered 401.
    SignInRefused,
    /// A source or user with too many failed sign-ins this minute:
    /// answered 429 untried.
    SignInThrottled,
    /// A Windows sign-in could not be checked (the NTLM helper or the
    /// domain did not answer): answered 503.
    SignInUnavailable,
    /// A Windows-signed-in tunnel asked for a pool whose `gatewaySignIn` is
    /// `Ticket`.
    WindowsSignInNotAllowed,
}

impl Outcome {
    /// The `outcome` label.
    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Relayed => "relayed",
            Outcome::Paired => "paired",
            Outcome::HandshakeFailed => "handshake_failed",
            Outcome::BadRequest => "bad_request",
            Outcome::Protocol => "protocol",
            Outcome::TooLarge => "too_large",
            Outcome::Timeout => "timeout",
            Outcome::Idle => "idle",
            Outcome::NoPool => "no_pool",
            Outcome::Refused(_) => "refused",
            Outcome::HostUnreachable => "host_unreachable",
            Outcome::UnknownRedirect => "unknown_redirect",
            Outcome::BrokerUnreachable => "broker_unreachable",
            Outcome::PoolNotAllowed => "pool_not_allowed",
            Outcome::UnknownPool => "unknown_pool",
            Outcome::RedirectRefused(_) => "redirect_refused",
            Outcome::SourceLimit => "source_limit",
            Outcome::TicketRequired => "ticket_required",
            Outcome::TicketRefused => "ticket_refused",
            Outcome::TokenRefused => "token_refused",
            Outcome::ResourceRefused => "resource_refused",
            Outcome::TicketLimit => "ticket_limit",
            Outcome::HostStartTimeout => "host_start_timeout",
            Outcome::ClientLeft => "client_left",
            Outcome::WaitingLimit(_) => "waiting_limit",
            Outcome::OutChannelLimit => "out_channel_limit",
            Outcome::NegotiationFailed => "negotiation_failed",
            Outcome::HostTlsFailed => "host_tls_failed",
            Outcome::Web => "web",
            Outcome::WebPage => "web_page",
            Outcome::Feed => "feed",
            Outcome::KdcProxy => "kdc_proxy",
            Outcome::SignInChallenged => "sign_in_challenged",
            Outcome::SignInRefused => "sign_in_refused",
            Outcome::SignInThrottled => "sign_in_throttled",
            Outcome::SignInUnavailable => "sign_in_unavailable",
            Outcome::WindowsSignInNotAllowed => "windows_sign_in_not_allowed",
        }
    }

    /// The outcome of a broker's refusal: a refused ticket, an unknown
    /// pool, another refusal with its code, or no answer.
    pub(crate) fn of_refusal(e: &PlacerError) -> Outcome {
        use api::ErrorCode as E;
        match e {
            PlacerError::Refused {
                code: E::InvalidConnectionTicket,
                ..
            } => Outcome::TicketRefused,
            PlacerError::Refused {
                code: E::HostPoolNotFound,
                ..
            } => Outcome::UnknownPool,
            PlacerError::Refused { code, .. } => Outcome::Refused(*code),
            PlacerError::Unreachable(_) => Outcome::BrokerUnreachable,
        }
    }
}

/// Describes every door's metrics to the installed recorder (each door's
/// `serve` does; describing twice is harmless).
pub fn describe_metrics() {
    describe_front_door();
    describe_rd_gateway();
    describe_web();
    crate::kdc_proxy::describe_metrics();
}

fn describe_front_door() {
    metrics::describe_counter!(
        "deskbroker_rdp_connections_total",
        "RDP front door connections by outcome: relayed, handshake_failed, no_pool, refused, \
         pool_not_allowed, redirect_refused, host_unreachable, unknown_redirect, \
         broker_unreachable, ticket_required, ticket_refused, host_start_timeout, \
         client_left, waiting_limit."
    );
    metrics::describe_counter!(
        "deskbroker_rdp_refusals_total",
        "RDP connections refused, by reason: per-source bounds (source_connections, \
         source_handshakes, source_handshake_rate, source_session_rate, source_table_full), \
         unsigned_redirect, forged_redirect, expired_redirect, redirect_not_enabled, \
         pool_not_allowed, handshake_failed, no_pool, refused, unknown_redirect, \
         ticket_required, ticket_refused, source_waiting, waiting_full."
    );
    metrics::describe_counter!(
        "deskbroker_rdp_sessions_without_logon_total",
        "Sessions the front door ended when their connection closed without evidence \
         of a logon (rule S9)."
    );
    metrics::describe_counter!(
        "deskbroker_rdp_handshake_failures_total",
        "First PDUs refused, by reason (truncated, oversized, timeout, unknown_token, …)."
    );
    metrics::describe_counter!(
        "deskbroker_rdp_bytes_total",
        "Bytes relayed, by direction: client_to_host or host_to_client."
    );
    metrics::describe_gauge!(
        "deskbroker_rdp_waiting_connections",
        "RDP front door connections held now while a session host starts for them (rule A8)."
    );
    metrics::describe_gauge!(
        "deskbroker_rdp_open_connections",
        "RDP front door connections open now (in handshake or relayed)."
    );
    metrics::describe_histogram!(
        "deskbroker_rdp_connection_seconds",
        "How long RDP front door connections lasted, from accept to close."
    );
}

fn describe_rd_gateway() {
    metrics::describe_counter!(
        "deskbroker_rdg_tunnels_total",
        "RD Gateway connections by outcome: relayed, paired (a legacy IN channel), bad_request, protocol, token_refused, \
         resource_refused, pool_not_allowed, unknown_pool, refused, host_unreachable, broker_unreachable, timeout, idle, \
         source_limit, host_start_timeout, waiting_limit, out_channel_limit, client_left, \
         sign_in_challenged, sign_in_refused, sign_in_throttled, sign_in_unavailable, \
         windows_sign_in_not_allowed, \
         web (a browser's /web/rdp connection: see deskbroker_web_connections_total), \
         web_page, kdc_proxy (see deskbroker_kdc_proxy_messages_total)."
    );
    metrics::describe_gauge!(
        "deskbroker_rdg_waiting_channels",
        "RD Gateway channel requests held while a session host starts (rule A8)."
    );
    metrics::describe_counter!(
        "deskbroker_rdg_bytes_total",
        "Bytes relayed by the RD Gateway, by direction: client_to_host or host_to_client."
    );
}

fn describe_web() {
    metrics::describe_counter!(
        "deskbroker_web_connections_total",
        "Browser (/web/rdp) connections by outcome: relayed, bad_request, too_large, timeout, \
         client_left, ticket_refused, ticket_limit, pool_not_allowed, unknown_pool, refused, source_limit, \
         waiting_limit, host_start_timeout, broker_unreachable, host_unreachable, \
         negotiation_failed, host_tls_failed."
    );
    metrics::describe_counter!(
        "deskbroker_web_bytes_total",
        "Plaintext bytes relayed for browsers, by direction: client_to_host or host_to_client."
    );
    metrics::describe_gauge!(
        "deskbroker_web_waiting_connections",
        "Browser connections held now while a session host starts for them (rule A8)."
    );
}
