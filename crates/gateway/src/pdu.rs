//! The client's first PDU: the X.224 Connection Request of MS-RDPBCGR
//! 2.2.1.1, the only bytes of an RDP connection the front door reads.
//!
//! ```text
//! TPKT (T.123 §8)      version=3 | reserved | length (u16 BE, whole PDU)
//! X.224 CR (X.224 §13.3)  LI (1 byte) | 0xE0 | dst-ref (2) | src-ref (2) | class (1)
//! routingToken / cookie   optional, one line ending in CR LF:
//!                           "Cookie: mstshash=<user>\r\n"
//!                           "Cookie: msts=<ip>.<port>.<reserved>\r\n"
//!                           "tsv://MS Terminal Services Plugin.1.<pool>\r\n"
//!                           "dbt1:<pool>:<expires>:<mac>:<user>\r\n"  (a ticket, api::ticket)
//! RDP_NEG_REQ             optional: type=0x01 | flags | length=8 (u16 LE) | requestedProtocols (u32 LE)
//! RDP_NEG_CORRELATION_INFO optional, after RDP_NEG_REQ: type=0x06 | flags | length=36 | id (16) | reserved (16)
//! ```
//!
//! The X.224 length indicator is one byte and counts every byte after
//! itself, so a Connection Request can never be longer than
//! [`MAX_FIRST_PDU_BYTES`]: the TPKT length is checked against that bound
//! before anything else is read (rule R6). The parser is pure and total:
//! every input either parses or yields a [`PduError`] whose
//! [`reason`](PduError::reason) labels the refusal in metrics.

use std::net::{Ipv4Addr, SocketAddrV4};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt};

/// TPKT header: version, reserved, length (T.123 §8).
pub const TPKT_HEADER_BYTES: usize = 4;
/// The only TPKT version there is.
pub const TPKT_VERSION: u8 = 3;
/// X.224 Class 0 Connection Request header: LI, code, dst-ref, src-ref, class.
pub const X224_CR_HEADER_BYTES: usize = 7;
/// The Connection Request TPDU code (upper nibble; the lower is the credit, 0 in class 0).
pub const X224_CONNECTION_REQUEST: u8 = 0xE0;
/// The largest X.224 length indicator (255 is reserved for extensions by X.224 §13.2.1).
pub const MAX_LENGTH_INDICATOR: u8 = 254;
/// The shortest first PDU: TPKT header and the fixed Connection Request.
pub const MIN_FIRST_PDU_BYTES: usize = TPKT_HEADER_BYTES + X224_CR_HEADER_BYTES;
/// The longest first PDU: the TPKT header, the length indicator byte, and
/// the at most 254 bytes it counts. Anything longer is refused before it is read.
pub const MAX_FIRST_PDU_BYTES: usize = TPKT_HEADER_BYTES + 1 + MAX_LENGTH_INDICATOR as usize;
/// How long a client has to send its whole first PDU (rule R6: a slow
/// client is refused without holding a connection slot for long).
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(5);

/// RDP_NEG_REQ: type TYPE_RDP_NEG_REQ and its fixed length.
pub const TYPE_RDP_NEG_REQ: u8 = 0x01;
pub const RDP_NEG_REQ_BYTES: usize = 8;
/// RDP_NEG_CORRELATION_INFO: type TYPE_RDP_CORRELATION_INFO and its fixed length.
pub const TYPE_RDP_CORRELATION_INFO: u8 = 0x06;
pub const RDP_CORRELATION_INFO_BYTES: usize = 36;

/// The X.224 Connection Confirm TPDU code (X.224 §13.4), class 0, credit 0.
pub const X224_CONNECTION_CONFIRM: u8 = 0xD0;
/// RDP_NEG_FAILURE (MS-RDPBCGR 2.2.1.2.2): type TYPE_RDP_NEG_FAILURE and its
/// fixed length.
pub const TYPE_RDP_NEG_FAILURE: u8 = 0x03;
pub const RDP_NEG_FAILURE_BYTES: usize = 8;
/// The whole refusal [`negotiation_failure`] writes: TPKT header, the fixed
/// Connection Confirm, RDP_NEG_FAILURE.
pub const NEGOTIATION_FAILURE_BYTES: usize =
    TPKT_HEADER_BYTES + X224_CR_HEADER_BYTES + RDP_NEG_FAILURE_BYTES;

/// The failure codes a door answers a refused connection with, in an
/// RDP_NEG_FAILURE. MS-RDPBCGR defines codes 1 to 6, and every one of them
/// names a security protocol the server wants or lacks (TLS required, TLS
/// not allowed, no certificate, inconsistent flags, CredSSP required,
/// TLS with user authentication required). None of them is why a door
/// refuses, and clients act on them: FreeRDP 3 and mstsc retry with the
/// protocol the code asks for, which the door would refuse again, and the
/// user would read a wrong cause. So the doors answer with codes of their
/// own, above the protocol's range: a client ends the connection on a code
/// it does not know (FreeRDP 2.11 logs `Unknown protocol security error
/// 1001` and ends with `ERRCONNECT_SECURITY_NEGO_CONNECT_FAILED`; FreeRDP 3
/// logs `Error: UNKNOWN [0x000003E9]` and ends the same way), and the number
/// it prints is in docs/gateway.md with what to do.
pub mod failure {
    /// The connection ticket was refused: expired, not signed by this
    /// broker, changed, or for another pool or user (and, so that a ticket
    /// reveals nothing about which pools exist, a ticket naming an unknown
    /// pool or one closed to the door). The user needs a new connection file.
    pub const TICKET_REFUSED: u32 = 1001;
    /// The connection was refused without a ticket, or for who the user is:
    /// no pool, an unknown pool or one closed to the door, a pool that
    /// admits only connection files, a user not entitled, a redirection
    /// token the broker did not sign. The user needs a connection file or
    /// access from the administrator.
    pub const ACCESS_REFUSED: u32 = 1002;
    /// No session host can take the connection now: no capacity, a host
    /// that did not start in time or could not be reached, the broker
    /// unreachable or busy, too many connections from this address. The
    /// user may try again later.
    pub const UNAVAILABLE: u32 = 1003;

    /// A short, fixed name for logs and metrics.
    pub fn name(code: u32) -> &'static str {
        match code {
            TICKET_REFUSED => "ticket_refused",
            ACCESS_REFUSED => "access_refused",
            UNAVAILABLE => "unavailable",
            _ => "other",
        }
    }
}

/// The cookie that names the user (MS-RDPBCGR 2.2.1.1, `cookie`).
pub const MSTSHASH_PREFIX: &[u8] = b"Cookie: mstshash=";
/// The routing token of a server redirection, naming a host by IPv4 address.
pub const MSTS_PREFIX: &[u8] = b"Cookie: msts=";
/// The routing token that RD Connection Broker uses for collections (rule R1).
pub const TSV_POOL_PREFIX: &[u8] = b"tsv://MS Terminal Services Plugin.1.";

/// A parsed X.224 Connection Request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConnectionRequest {
    /// X.224 destination reference (clients send 0; kept only for logs).
    pub dst_ref: u16,
    /// X.224 source reference.
    pub src_ref: u16,
    /// The routing token or cookie line, if any.
    pub routing: Option<Routing>,
    /// RDP_NEG_REQ, absent from RDP 4 clients (rdesktop -4) and Standard RDP Security.
    pub negotiation: Option<NegotiationRequest>,
    /// RDP_NEG_CORRELATION_INFO's correlation id (mstsc sends one).
    pub correlation_id: Option<[u8; 16]>,
}

/// What the line after the X.224 header says about where to go.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Routing {
    /// `Cookie: mstshash=<user>`: the user (rule R2).
    User(String),
    /// `tsv://MS Terminal Services Plugin.1.<pool>`: the pool (rule R1).
    Pool(String),
    /// `Cookie: msts=<ip>.<port>.<reserved>`: a host, by address (rule R3);
    /// honoured only when signed (`redirect.rs`).
    Redirect(RedirectToken),
    /// `dbt1:<pool>:…:<user>`: a connection ticket from a connection file
    /// (rule T3), read but not verified (the broker verifies it), with the
    /// line as the client sent it.
    Ticket {
        ticket: api::ticket::Ticket,
        raw: String,
    },
}

/// An msts redirection token as the client sent it: the address, and the
/// broker's signature when the token has one (`redirect.rs` checks it).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RedirectToken {
    pub addr: SocketAddrV4,
    pub signed: Option<RedirectSignature>,
}

impl RedirectToken {
    /// The plain form (`<ip>.<port>.0000`), as any client can write it.
    pub fn unsigned(addr: SocketAddrV4) -> RedirectToken {
        RedirectToken { addr, signed: None }
    }
}

/// The signed form's two extra parts: `<expires>.<mac>`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RedirectSignature {
    pub expires_unix_seconds: u64,
    pub mac: [u8; crate::redirect::REDIRECT_MAC_BYTES],
}

/// RDP_NEG_REQ (MS-RDPBCGR 2.2.1.1.1).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NegotiationRequest {
    pub flags: u8,
    /// PROTOCOL_SSL 0x1, PROTOCOL_HYBRID 0x2, PROTOCOL_RDSTLS 0x4,
    /// PROTOCOL_HYBRID_EX 0x8, …; passed to the host untouched.
    pub requested_protocols: u32,
}

/// Why a first PDU was refused. Each one has a short [`reason`](Self::reason)
/// for the `reason` label of `deskbroker_rdp_handshake_failures_total`.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum PduError {
    #[error("truncated: {needed} bytes needed, {got} present")]
    Truncated { needed: usize, got: usize },
    #[error("not TPKT: version {0}, expected 3")]
    TpktVersion(u8),
    #[error("TPKT length {0} is shorter than a Connection Request ({MIN_FIRST_PDU_BYTES} bytes)")]
    TpktTooShort(usize),
    #[error(
        "TPKT length {0} is longer than any Connection Request can be \
         ({MAX_FIRST_PDU_BYTES} bytes: the X.224 length indicator is one byte)"
    )]
    Oversized(usize),
    #[error("the TPKT length says {tpkt} bytes but {got} were given")]
    TpktLengthMismatch { tpkt: usize, got: usize },
    #[error("X.224 length indicator {li} does not match the TPKT length {tpkt}")]
    LengthIndicatorMismatch { li: u8, tpkt: usize },
    #[error("not an X.224 Connection Request: TPDU code {0:#04x}")]
    NotConnectionRequest(u8),
    #[error("X.224 class {0} requested; RDP uses class 0")]
    NotClass0(u8),
    #[error("the routing token or cookie has no CR LF terminator")]
    UnterminatedToken,
    #[error("the routing token or cookie has a byte that is not printable ASCII: {0:#04x}")]
    TokenNotAscii(u8),
    #[error("unknown routing token or cookie: {0:?}")]
    UnknownToken(String),
    #[error("the mstshash cookie names no user")]
    EmptyUser,
    #[error("the routing token names an invalid pool: {0:?}")]
    InvalidPool(String),
    #[error("malformed msts redirection cookie: {0:?}")]
    InvalidRedirect(String),
    #[error("malformed connection ticket")]
    InvalidTicket,
    #[error("malformed RDP_NEG_REQ: {0}")]
    InvalidNegotiation(&'static str),
    #[error("malformed RDP_NEG_CORRELATION_INFO: {0}")]
    InvalidCorrelation(&'static str),
    #[error("{0} unexpected bytes after the negotiation data")]
    TrailingBytes(usize),
}

impl PduError {
    /// A short, fixed label for metrics.
    pub fn reason(&self) -> &'static str {
        match self {
            PduError::Truncated { .. } => "truncated",
            PduError::TpktVersion(_) => "tpkt_version",
            PduError::TpktTooShort(_) => "tpkt_too_short",
            PduError::Oversized(_) => "oversized",
            PduError::TpktLengthMismatch { .. } => "tpkt_length_mismatch",
            PduError::LengthIndicatorMismatch { .. } => "length_indicator_mismatch",
            PduError::NotConnectionRequest(_) => "not_connection_request",
            PduError::NotClass0(_) => "not_class_0",
            PduError::UnterminatedToken => "unterminated_token",
            PduError::TokenNotAscii(_) => "token_not_ascii",
            PduError::UnknownToken(_) => "unknown_token",
            PduError::EmptyUser => "empty_user",
            PduError::InvalidPool(_) => "invalid_pool",
            PduError::InvalidRedirect(_) => "invalid_redirect",
            PduError::InvalidTicket => "invalid_ticket",
            PduError::InvalidNegotiation(_) => "invalid_negotiation",
            PduError::InvalidCorrelation(_) => "invalid_correlation",
            PduError::TrailingBytes(_) => "trailing_bytes",
        }
    }
}

/// Why reading the first PDU from a socket failed.
#[derive(Debug, thiserror::Error)]
pub enum HandshakeError {
    #[error(transparent)]
    Pdu(#[from] PduError),
    #[error("no complete first PDU within {0:?}")]
    Timeout(Duration),
    #[error("the client closed the connection after {got} bytes of its first PDU")]
    Closed { got: usize },
    #[error("reading the first PDU: {0}")]
    Io(#[source] std::io::Error),
}

impl HandshakeError {
    /// A short, fixed label for metrics.
    pub fn reason(&self) -> &'static str {
        match self {
            HandshakeError::Pdu(e) => e.reason(),
            HandshakeError::Timeout(_) => "timeout",
            HandshakeError::Closed { .. } => "closed",
            HandshakeError::Io(_) => "io",
        }
    }
}

/// Checks a TPKT header and answers the length of the whole PDU it
/// announces, so that a reader knows how much more to read — and never
/// reads more than [`MAX_FIRST_PDU_BYTES`].
pub fn first_pdu_length(header: &[u8; TPKT_HEADER_BYTES]) -> Result<usize, PduError> {
    if header[0] != TPKT_VERSION {
        return Err(PduError::TpktVersion(header[0]));
    }
    // header[1] is reserved: ignored, as FreeRDP and Windows do.
    let length = usize::from(u16::from_be_bytes([header[2], header[3]]));
    if length < MIN_FIRST_PDU_BYTES {
        return Err(PduError::TpktTooShort(length));
    }
    if length > MAX_FIRST_PDU_BYTES {
        return Err(PduError::Oversized(length));
    }
    Ok(length)
}

/// Parses one whole first PDU: `bytes` must be exactly the PDU, as long as
/// its TPKT header says.
pub fn parse(bytes: &[u8]) -> Result<ConnectionRequest, PduError> {
    let Some(header) = bytes.first_chunk::<TPKT_HEADER_BYTES>() else {
        return Err(PduError::Truncated {
            needed: TPKT_HEADER_BYTES,
            got: bytes.len(),
        });
    };
    let tpkt = first_pdu_length(header)?;
    if bytes.len() < tpkt {
        return Err(PduError::Truncated {
            needed: tpkt,
            got: bytes.len(),
        });
    }
    if bytes.len() > tpkt {
        return Err(PduError::TpktLengthMismatch {
            tpkt,
            got: bytes.len(),
        });
    }
    // tpkt >= MIN_FIRST_PDU_BYTES, so the fixed header is there.
    let x224 = &bytes[TPKT_HEADER_BYTES..];
    let li = x224[0];
    if usize::from(li) + 1 != x224.len() || li > MAX_LENGTH_INDICATOR {
        return Err(PduError::LengthIndicatorMismatch { li, tpkt });
    }
    if x224[1] != X224_CONNECTION_REQUEST {
        return Err(PduError::NotConnectionRequest(x224[1]));
    }
    let dst_ref = u16::from_be_bytes([x224[2], x224[3]]);
    let src_ref = u16::from_be_bytes([x224[4], x224[5]]);
    let class = x224[6] >> 4;
    if class != 0 {
        return Err(PduError::NotClass0(class));
    }
    let mut rest = &x224[X224_CR_HEADER_BYTES..];

    let routing = match rest.first() {
        // Nothing, or binary negotiation data: no routing line.
        None | Some(&TYPE_RDP_NEG_REQ) | Some(&TYPE_RDP_CORRELATION_INFO) => None,
        Some(_) => {
            let (line, after) = token_line(rest)?;
            rest = after;
            Some(routing(line)?)
        }
    };

    let mut negotiation = None;
    let mut correlation_id = None;
    if let Some(&kind) = rest.first() {
        if kind != TYPE_RDP_NEG_REQ {
            return Err(PduError::InvalidNegotiation(
                "type is not TYPE_RDP_NEG_REQ (0x01)",
            ));
        }
        let Some(neg) = rest.first_chunk::<RDP_NEG_REQ_BYTES>() else {
            return Err(PduError::InvalidNegotiation("shorter than 8 bytes"));
        };
        if usize::from(u16::from_le_bytes([neg[2], neg[3]])) != RDP_NEG_REQ_BYTES {
            return Err(PduError::InvalidNegotiation("length is not 8"));
        }
        negotiation = Some(NegotiationRequest {
            flags: neg[1],
            requested_protocols: u32::from_le_bytes([neg[4], neg[5], neg[6], neg[7]]),
        });
        rest = &rest[RDP_NEG_REQ_BYTES..];
        if let Some(&kind) = rest.first() {
            if kind != TYPE_RDP_CORRELATION_INFO {
                return Err(PduError::TrailingBytes(rest.len()));
            }
            let Some(info) = rest.first_chunk::<RDP_CORRELATION_INFO_BYTES>() else {
                return Err(PduError::InvalidCorrelation("shorter than 36 bytes"));
            };
            if usize::from(u16::from_le_bytes([info[2], info[3]])) != RDP_CORRELATION_INFO_BYTES {
                return Err(PduError::InvalidCorrelation("length is not 36"));
            }
            let mut id = [0u8; 16];
            id.copy_from_slice(&info[4..20]);
            correlation_id = Some(id);
            rest = &rest[RDP_CORRELATION_INFO_BYTES..];
        }
    }
    if !rest.is_empty() {
        return Err(PduError::TrailingBytes(rest.len()));
    }
    Ok(ConnectionRequest {
        dst_ref,
        src_ref,
        routing,
        negotiation,
        correlation_id,
    })
}

/// Splits off one printable-ASCII line ending in CR LF; answers the line
/// without its terminator and the bytes after it.
fn token_line(bytes: &[u8]) -> Result<(&str, &[u8]), PduError> {
    let Some(end) = bytes.windows(2).position(|w| w == b"\r\n") else {
        return Err(PduError::UnterminatedToken);
    };
    let line = &bytes[..end];
    if let Some(&bad) = line.iter().find(|b| !(0x20..=0x7e).contains(*b)) {
        return Err(PduError::TokenNotAscii(bad));
    }
    // Printable ASCII is valid UTF-8.
    let text = std::str::from_utf8(line).map_err(|_| PduError::TokenNotAscii(0))?;
    Ok((text, &bytes[end + 2..]))
}

/// Interprets the routing line. Clients pad it with a space to an even
/// length (IMsRdpClientAdvancedSettings::LoadBalanceInfo), so trailing
/// spaces are not part of the value.
fn routing(line: &str) -> Result<Routing, PduError> {
    let bytes = line.as_bytes();
    if let Some(user) = strip(bytes, MSTSHASH_PREFIX, line) {
        let user = user.trim_end_matches(' ');
        if user.is_empty() {
            return Err(PduError::EmptyUser);
        }
        return Ok(Routing::User(user.to_string()));
    }
    if let Some(value) = strip(bytes, MSTS_PREFIX, line) {
        return msts(value.trim_end_matches(' ')).map(Routing::Redirect);
    }
    if api::ticket::Ticket::looks_like(line) {
        let raw = line.trim_end_matches(' ');
        let ticket = api::ticket::Ticket::parse(raw).map_err(|_| PduError::InvalidTicket)?;
        return Ok(Routing::Ticket {
            ticket,
            raw: raw.to_string(),
        });
    }
    if let Some(pool) = strip(bytes, TSV_POOL_PREFIX, line) {
        let pool = pool.trim_end_matches(' ');
        if !valid_pool_name(pool) {
            return Err(PduError::InvalidPool(pool.to_string()));
        }
        return Ok(Routing::Pool(pool.to_string()));
    }
    Err(PduError::UnknownToken(line.to_string()))
}

fn strip<'a>(bytes: &[u8], prefix: &[u8], line: &'a str) -> Option<&'a str> {
    // The prefixes are ASCII, so the split is on a char boundary.
    bytes.starts_with(prefix).then(|| &line[prefix.len()..])
}

/// Pool names as the broker accepts them (`placement::validate_name`):
/// 1 to 253 letters, digits, `.`, `-`, `_`, starting with a letter or digit.
fn valid_pool_name(name: &str) -> bool {
    placement::validate_name("pool", name).is_ok()
}

/// `<ip>.<port>.<reserved>`: the IPv4 address's four bytes in network
/// order read as a little-endian u32, in decimal; the port's two bytes in
/// network order read as a little-endian u16, in decimal; then optional
/// reserved digits (`0000`). 172.31.249.216:3389 is `3640205228.15629.0000`.
/// The broker's signed form (`redirect.rs`) puts `<expires>.<mac>` in place
/// of the reserved digits: decimal Unix seconds, then 32 lowercase hex digits.
fn msts(value: &str) -> Result<RedirectToken, PduError> {
    let bad = || PduError::InvalidRedirect(value.to_string());
    let parts: Vec<&str> = value.split('.').collect();
    if parts.len() != 3 && parts.len() != 4 {
        return Err(bad());
    }
    let ip = decimal::<u32>(parts[0]).ok_or_else(bad)?;
    let port = decimal::<u16>(parts[1]).ok_or_else(bad)?;
    let port = port.swap_bytes();
    if port == 0 {
        return Err(bad());
    }
    let addr = SocketAddrV4::new(Ipv4Addr::from(ip.to_le_bytes()), port);
    if parts.len() == 3 {
        if !parts[2].bytes().all(|b| b.is_ascii_digit()) {
            return Err(bad());
        }
        return Ok(RedirectToken::unsigned(addr));
    }
    let expires_unix_seconds = decimal::<u64>(parts[2]).ok_or_else(bad)?;
    // Lower case only, as the broker writes it: one MAC, one spelling.
    if parts[3].bytes().any(|b| b.is_ascii_uppercase()) {
        return Err(bad());
    }
    let mut mac = [0u8; crate::redirect::REDIRECT_MAC_BYTES];
    hex::decode_to_slice(parts[3], &mut mac).map_err(|_| bad())?;
    Ok(RedirectToken {
        addr,
        signed: Some(RedirectSignature {
            expires_unix_seconds,
            mac,
        }),
    })
}

/// An address as the msts cookie writes it: (ip, port) in decimal.
pub fn msts_parts(addr: SocketAddrV4) -> (u32, u16) {
    (
        u32::from_le_bytes(addr.ip().octets()),
        addr.port().swap_bytes(),
    )
}

/// Plain decimal digits only (no sign, no spaces), within the type's range.
fn decimal<T: std::str::FromStr>(s: &str) -> Option<T> {
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    s.parse().ok()
}

/// The msts cookie value for a host address, the inverse of what
/// [`parse`] reads (for tests and for building redirection tokens).
pub fn msts_cookie(addr: SocketAddrV4) -> String {
    let (ip, port) = msts_parts(addr);
    format!("Cookie: msts={ip}.{port}.0000")
}

/// The answer that refuses `request`: an X.224 Connection Confirm
/// (MS-RDPBCGR 2.2.1.2) whose negotiation data is an RDP_NEG_FAILURE
/// with `failure_code`, so the client ends with a negotiation failure that
/// names the code instead of a closed transport. A client that sent no
/// RDP_NEG_REQ gets it too, as a Windows server that requires TLS answers
/// such a client with SSL_REQUIRED_BY_SERVER: FreeRDP 2.11, after its
/// CredSSP and TLS attempts were refused, retries once more asking for
/// Standard RDP Security with no RDP_NEG_REQ, and only a failure on that
/// last attempt makes it end on the negotiation failure rather than a
/// transport failure.
pub fn negotiation_failure(
    request: &ConnectionRequest,
    failure_code: u32,
) -> [u8; NEGOTIATION_FAILURE_BYTES] {
    let mut pdu = [0u8; NEGOTIATION_FAILURE_BYTES];
    pdu[0] = TPKT_VERSION;
    pdu[2..4].copy_from_slice(&(NEGOTIATION_FAILURE_BYTES as u16).to_be_bytes());
    // The length indicator counts every byte after itself.
    pdu[4] = (NEGOTIATION_FAILURE_BYTES - TPKT_HEADER_BYTES - 1) as u8;
    pdu[5] = X224_CONNECTION_CONFIRM;
    // X.224 §13.4: the confirm's destination reference is the request's
    // source reference; the source reference is this side's (unused by RDP).
    pdu[6..8].copy_from_slice(&request.src_ref.to_be_bytes());
    // pdu[8..10] source reference 0, pdu[10] class 0.
    let neg = &mut pdu[TPKT_HEADER_BYTES + X224_CR_HEADER_BYTES..];
    neg[0] = TYPE_RDP_NEG_FAILURE;
    // neg[1]: flags, none defined.
    neg[2..4].copy_from_slice(&(RDP_NEG_FAILURE_BYTES as u16).to_le_bytes());
    neg[4..8].copy_from_slice(&failure_code.to_le_bytes());
    pdu
}

/// Reads exactly the first PDU from `reader` within `timeout` and parses
/// it. Answers the raw bytes too: they are forwarded to the host byte for
/// byte (rule R4). An oversized TPKT length is refused after its 4-byte
/// header, without reading the rest.
pub async fn read_first_pdu<R: AsyncRead + Unpin>(
    reader: &mut R,
    timeout: Duration,
) -> Result<(Vec<u8>, ConnectionRequest), HandshakeError> {
    match tokio::time::timeout(timeout, read_whole(reader)).await {
        Ok(r) => r,
        Err(_) => Err(HandshakeError::Timeout(timeout)),
    }
}

async fn read_whole<R: AsyncRead + Unpin>(
    reader: &mut R,
) -> Result<(Vec<u8>, ConnectionRequest), HandshakeError> {
    let mut buf = [0u8; MAX_FIRST_PDU_BYTES];
    fill(reader, &mut buf[..TPKT_HEADER_BYTES], 0).await?;
    let header: [u8; TPKT_HEADER_BYTES] = [buf[0], buf[1], buf[2], buf[3]];
    let length = first_pdu_length(&header)?;
    fill(
        reader,
        &mut buf[TPKT_HEADER_BYTES..length],
        TPKT_HEADER_BYTES,
    )
    .await?;
    let bytes = buf[..length].to_vec();
    let request = parse(&bytes)?;
    Ok((bytes, request))
}

/// `read_exact` that tells how far it got when the peer closes.
async fn fill<R: AsyncRead + Unpin>(
    reader: &mut R,
    buf: &mut [u8],
    already: usize,
) -> Result<(), HandshakeError> {
    let mut filled = 0;
    while filled < buf.len() {
        match reader.read(&mut buf[filled..]).await {
            Ok(0) => {
                return Err(HandshakeError::Closed {
                    got: already + filled,
                });
            }
            Ok(n) => filled += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(HandshakeError::Io(e)),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn msts_matches_the_documented_example() {
        // IMsRdpClientAdvancedSettings::LoadBalanceInfo: 172.31.249.216:3389.
        let token = msts("3640205228.15629.0000").expect("parses");
        let addr = token.addr;
        assert_eq!(addr, "172.31.249.216:3389".parse().expect("addr"));
        assert_eq!(token.signed, None);
        assert_eq!(msts_cookie(addr), "Cookie: msts=3640205228.15629.0000");
        // The reserved digits are optional, the last dot is not.
        assert_eq!(msts("3640205228.15629.").expect("parses"), token);
        assert!(msts("3640205228.15629").is_err());
        assert!(msts("4294967296.15629.0000").is_err(), "u32 overflow");
        assert!(msts("1.65536.0000").is_err(), "u16 overflow");
        assert!(msts("+1.15629.0000").is_err());
        assert!(msts("1.15629.00x0").is_err());
        // The signed form: expiry, then exactly 32 lowercase hex digits.
        let mac = "00112233445566778899aabbccddeeff";
        let signed = msts(&format!("3640205228.15629.1700000000.{mac}")).expect("parses");
        assert_eq!(signed.addr, addr);
        let sig = signed.signed.expect("signed");
        assert_eq!(sig.expires_unix_seconds, 1_700_000_000);
        assert_eq!(sig.mac[..2], [0x00, 0x11]);
        assert_eq!(sig.mac[15], 0xff);
        assert!(msts(&format!("3640205228.15629.1700000000.{}", &mac[1..])).is_err());
        assert!(
            msts(&format!(
                "3640205228.15629.1700000000.{}",
                mac.to_uppercase()
            ))
            .is_err()
        );
        assert!(msts(&format!("3640205228.15629.-1.{mac}")).is_err());
        assert!(msts(&format!("3640205228.15629.1.{mac}.0")).is_err());
        assert!(msts("1.0.0000").is_err(), "port 0");
    }

    #[test]
    fn length_bound_is_what_one_length_byte_allows() {
        assert_eq!(MAX_FIRST_PDU_BYTES, 259);
        assert_eq!(first_pdu_length(&[3, 0, 1, 3]), Ok(259));
        assert_eq!(
            first_pdu_length(&[3, 0, 1, 4]),
            Err(PduError::Oversized(260))
        );
        assert_eq!(
            first_pdu_length(&[3, 0, 0, 10]),
            Err(PduError::TpktTooShort(10))
        );
        assert_eq!(
            first_pdu_length(&[0x16, 3, 1, 0]),
            Err(PduError::TpktVersion(0x16))
        );
    }

    #[test]
    fn a_negotiation_failure_is_a_connection_confirm_with_rdp_neg_failure() {
        // mstsc's request: cookie, RDP_NEG_REQ asking for TLS and CredSSP.
        let mut cr = vec![3, 0, 0, 0, 0, 0xE0, 0, 0, 0x12, 0x34, 0];
        cr.extend_from_slice(b"Cookie: mstshash=alice\r\n");
        cr.extend_from_slice(&[TYPE_RDP_NEG_REQ, 0, 8, 0, 3, 0, 0, 0]);
        let len = cr.len();
        cr[2..4].copy_from_slice(&(len as u16).to_be_bytes());
        cr[4] = (len - 5) as u8;
        let request = parse(&cr).expect("parses");
        let answer = negotiation_failure(&request, failure::TICKET_REFUSED);
        assert_eq!(
            answer,
            [
                3, 0, 0, 19, // TPKT, 19 bytes in all
                14, 0xD0, 0x12, 0x34, 0, 0, 0, // X.224 CC, dst-ref = the CR's src-ref
                3, 0, 8, 0, // RDP_NEG_FAILURE, flags 0, length 8
                0xE9, 0x03, 0, 0, // 1001, little-endian
            ]
        );
    }

    #[test]
    fn the_routing_token_parses_back_to_the_pool() {
        let token = crate::routing_token("farm-1");
        let mut pdu = vec![3, 0, 0, 0, 0, 0xE0, 0, 0, 0, 0, 0];
        pdu.extend_from_slice(token.as_bytes());
        pdu.extend_from_slice(b"\r\n");
        let len = pdu.len();
        pdu[2..4].copy_from_slice(&(len as u16).to_be_bytes());
        pdu[4] = (len - 5) as u8;
        let parsed = crate::pdu::parse(&pdu).expect("parses");
        assert_eq!(
            parsed.routing,
            Some(crate::pdu::Routing::Pool("farm-1".into()))
        );
    }
}
