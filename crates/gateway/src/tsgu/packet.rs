//! MS-TSGU's HTTP transport packets (2.2.10), decoded strictly and within
//! bounds, and encoded for what a gateway sends.
//!
//! ```text
//! HTTP_PACKET_HEADER    packetType (u16 LE) | reserved (u16) | packetLength (u32 LE, whole packet)
//! HANDSHAKE_REQUEST   1  verMajor (u8) | verMinor (u8) | clientVersion (u16) | extendedAuth (u16)
//! HANDSHAKE_RESPONSE  2  errorCode (u32) | verMajor | verMinor | serverVersion (u16) | extendedAuth (u16)
//! TUNNEL_CREATE       4  capsFlags (u32) | fieldsPresent (u16) | reserved (u16)
//!                        [reauthTunnelContext (u64)] [PAA cookie: cb (u16) | UTF-16LE]
//! TUNNEL_RESPONSE     5  serverVersion (u16) | statusCode (u32) | fieldsPresent (u16) | reserved (u16)
//!                        [tunnelId (u32)] [capsFlags (u32)] [consent message: cb (u16) | UTF-16LE]
//! TUNNEL_AUTH         6  fieldsPresent (u16) | cbClientName (u16) | clientName (UTF-16LE)
//!                        [statement of health: cb (u16) | bytes]
//! TUNNEL_AUTH_RESPONSE 7 errorCode (u32) | fieldsPresent (u16) | reserved (u16)
//!                        [redirFlags (u32)] [idleTimeout (u32, minutes)] [SoH response: cb (u16) | bytes]
//! CHANNEL_CREATE      8  numResources (u8) | numAltResources (u8) | port (u16) | protocol (u16)
//!                        then numResources + numAltResources × (cb (u16) | UTF-16LE name)
//! CHANNEL_RESPONSE    9  errorCode (u32) | fieldsPresent (u16) | reserved (u16)
//!                        [channelId (u32)] [udpPort (u16)] [authnCookie: cb (u16) | bytes]
//! DATA              0xA  cbDataLen (u16) | data
//! KEEPALIVE         0xD  (header only)
//! CLOSE_CHANNEL    0x10  statusCode (u32)
//! CLOSE_CHANNEL_RESPONSE 0x11 statusCode (u32)
//! ```
//!
//! Every length is checked: a header's `packetLength` against the bound of
//! its type *before* any of the body is buffered ([`MAX_CONTROL_PACKET_BYTES`],
//! [`MAX_PACKET_BYTES`]), every field against what is left, and the fields
//! against `packetLength` exactly (no bytes left over). Types this gateway
//! does not speak (extended auth, service and reauth messages) and types
//! that do not exist are refused with a typed [`PacketError`]. Reserved
//! fields are ignored on receipt and sent as zero.
//!
//! [`Decoder`] takes the byte stream in pieces split anywhere (a WebSocket
//! frame, an HTTP chunk, a TLS record) and yields whole packets, never
//! holding more than one packet's bytes. No IO here.

use std::fmt;

/// HTTP_PACKET_HEADER: type, reserved, length.
pub const HEADER_BYTES: usize = 8;
/// DATA's fixed part after the header: `cbDataLen`.
pub const DATA_HEADER_BYTES: usize = HEADER_BYTES + 2;
/// The most payload one DATA packet carries (`cbDataLen` is a u16).
pub const MAX_DATA_PAYLOAD_BYTES: usize = u16::MAX as usize;
/// The longest packet of all: a full DATA packet. Nothing longer is buffered.
pub const MAX_PACKET_BYTES: usize = DATA_HEADER_BYTES + MAX_DATA_PAYLOAD_BYTES;
/// The longest control packet (anything but DATA). A PAA cookie of a few
/// kilobytes (a deskbroker ticket is at most 200 characters, 402 bytes in
/// UTF-16) and a channel create naming [`MAX_RESOURCES`] hosts fit easily.
pub const MAX_CONTROL_PACKET_BYTES: usize = 16 * 1024;
/// The most resources (and, apart, alternate resources) a channel create
/// may name: the bounds of MS-TSGU's RPC form (`[range(1, 50)]`, `[range(0, 3)]`).
pub const MAX_RESOURCES: usize = 50;
pub const MAX_ALTERNATE_RESOURCES: usize = 3;

pub const PKT_TYPE_HANDSHAKE_REQUEST: u16 = 0x1;
pub const PKT_TYPE_HANDSHAKE_RESPONSE: u16 = 0x2;
pub const PKT_TYPE_EXTENDED_AUTH_MSG: u16 = 0x3;
pub const PKT_TYPE_TUNNEL_CREATE: u16 = 0x4;
pub const PKT_TYPE_TUNNEL_RESPONSE: u16 = 0x5;
pub const PKT_TYPE_TUNNEL_AUTH: u16 = 0x6;
pub const PKT_TYPE_TUNNEL_AUTH_RESPONSE: u16 = 0x7;
pub const PKT_TYPE_CHANNEL_CREATE: u16 = 0x8;
pub const PKT_TYPE_CHANNEL_RESPONSE: u16 = 0x9;
pub const PKT_TYPE_DATA: u16 = 0xA;
pub const PKT_TYPE_SERVICE_MESSAGE: u16 = 0xB;
pub const PKT_TYPE_REAUTH_MESSAGE: u16 = 0xC;
pub const PKT_TYPE_KEEPALIVE: u16 = 0xD;
pub const PKT_TYPE_CLOSE_CHANNEL: u16 = 0x10;
pub const PKT_TYPE_CLOSE_CHANNEL_RESPONSE: u16 = 0x11;

/// HTTP_EXTENDED_AUTH (2.2.5.3.2): what the handshake offers.
pub const HTTP_EXTENDED_AUTH_NONE: u16 = 0x0;
pub const HTTP_EXTENDED_AUTH_SC: u16 = 0x1;
pub const HTTP_EXTENDED_AUTH_PAA: u16 = 0x2;
pub const HTTP_EXTENDED_AUTH_SSPI_NTLM: u16 = 0x4;

/// HTTP_TUNNEL_PACKET_FIELDS_PRESENT_FLAGS (2.2.5.3.6).
pub const HTTP_TUNNEL_PACKET_FIELD_PAA_COOKIE: u16 = 0x1;
pub const HTTP_TUNNEL_PACKET_FIELD_REAUTH: u16 = 0x2;
/// HTTP_TUNNEL_RESPONSE_FIELDS_PRESENT_FLAGS (2.2.5.3.8); SOH_REQ (0x4) is not spoken here.
pub const HTTP_TUNNEL_RESPONSE_FIELD_TUNNEL_ID: u16 = 0x1;
pub const HTTP_TUNNEL_RESPONSE_FIELD_CAPS: u16 = 0x2;
pub const HTTP_TUNNEL_RESPONSE_FIELD_CONSENT_MSG: u16 = 0x10;
/// HTTP_TUNNEL_AUTH_FIELDS_PRESENT_FLAGS (2.2.5.3.4).
pub const HTTP_TUNNEL_AUTH_FIELD_SOH: u16 = 0x1;
/// HTTP_TUNNEL_AUTH_RESPONSE_FIELDS_PRESENT_FLAGS (2.2.5.3.5).
pub const HTTP_TUNNEL_AUTH_RESPONSE_FIELD_REDIR_FLAGS: u16 = 0x1;
pub const HTTP_TUNNEL_AUTH_RESPONSE_FIELD_IDLE_TIMEOUT: u16 = 0x2;
pub const HTTP_TUNNEL_AUTH_RESPONSE_FIELD_SOH_RESPONSE: u16 = 0x4;
/// HTTP_CHANNEL_RESPONSE_FIELDS_PRESENT_FLAGS (2.2.5.3.1).
pub const HTTP_CHANNEL_RESPONSE_FIELD_CHANNELID: u16 = 0x1;
pub const HTTP_CHANNEL_RESPONSE_FIELD_AUTHNCOOKIE: u16 = 0x2;
pub const HTTP_CHANNEL_RESPONSE_FIELD_UDPPORT: u16 = 0x4;

/// HTTP_CAPABILITY_TYPE (2.2.5.3.9), the tunnel's capability flags.
pub const HTTP_CAPABILITY_TYPE_QUAR_SOH: u32 = 0x1;
pub const HTTP_CAPABILITY_IDLE_TIMEOUT: u32 = 0x2;
pub const HTTP_CAPABILITY_MESSAGING_CONSENT_SIGN: u32 = 0x4;
pub const HTTP_CAPABILITY_MESSAGING_SERVICE_MSG: u32 = 0x8;
pub const HTTP_CAPABILITY_REAUTH: u32 = 0x10;
pub const HTTP_CAPABILITY_UDP_TRANSPORT: u32 = 0x20;

/// HTTP_TUNNEL_REDIR flags of the tunnel auth response: device redirection
/// the gateway allows. `ENABLE_ALL` leaves it to the session host.
pub const HTTP_TUNNEL_REDIR_ENABLE_ALL: u32 = 0x8000_0000;
pub const HTTP_TUNNEL_REDIR_DISABLE_ALL: u32 = 0x4000_0000;

/// The only protocol a channel carries (`protocol` of channel create): RDP.
pub const CHANNEL_PROTOCOL_RDP: u16 = 3;

/// The client's handshake (2.2.10.10).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HandshakeRequest {
    pub version_major: u8,
    pub version_minor: u8,
    pub client_version: u16,
    /// HTTP_EXTENDED_AUTH_* bits the client offers.
    pub extended_auth: u16,
}

/// The gateway's answer to the handshake (2.2.10.11).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HandshakeResponse {
    pub error_code: u32,
    pub version_major: u8,
    pub version_minor: u8,
    pub server_version: u16,
    /// The HTTP_EXTENDED_AUTH_* method the gateway chose.
    pub extended_auth: u16,
}

/// Tunnel create (2.2.10.18): where a PAA client puts its access token.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TunnelCreate {
    /// HTTP_CAPABILITY_* flags of the client.
    pub capabilities: u32,
    /// A reauthentication's tunnel context (fieldsPresent REAUTH).
    pub reauth_context: Option<u64>,
    /// The pre-authenticated access token (fieldsPresent PAA_COOKIE), as
    /// sent: UTF-16LE, its terminating NUL removed.
    pub paa_cookie: Option<String>,
}

/// The gateway's answer to tunnel create (2.2.10.20).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TunnelResponse {
    pub server_version: u16,
    pub status_code: u32,
    pub tunnel_id: Option<u32>,
    /// HTTP_CAPABILITY_* flags of the gateway.
    pub capabilities: Option<u32>,
    /// A message the user must accept before going on.
    pub consent_message: Option<String>,
}

/// Tunnel auth (2.2.10.14).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TunnelAuth {
    /// The client machine's name (informative only: any client writes any name).
    pub client_name: String,
    /// A statement of health (NAP), if the client sent one.
    pub statement_of_health: Option<Vec<u8>>,
}

/// The gateway's answer to tunnel auth (2.2.10.16).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TunnelAuthResponse {
    pub error_code: u32,
    /// HTTP_TUNNEL_REDIR_* flags.
    pub redirection_flags: Option<u32>,
    /// Minutes of idleness after which the gateway may end the tunnel (0: never).
    pub idle_timeout_minutes: Option<u32>,
    pub soh_response: Option<Vec<u8>>,
}

/// Channel create (2.2.10.2): the resource the client wants to reach.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ChannelCreate {
    /// The resource names, verbatim as the client was given them (`/v:`,
    /// `full address`): never resolved by the client. At least one.
    pub resources: Vec<String>,
    pub alternate_resources: Vec<String>,
    pub port: u16,
    /// [`CHANNEL_PROTOCOL_RDP`] from every client there is.
    pub protocol: u16,
}

/// The gateway's answer to channel create (2.2.10.4).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ChannelResponse {
    pub error_code: u32,
    pub channel_id: Option<u32>,
    pub udp_port: Option<u16>,
    pub authn_cookie: Option<Vec<u8>>,
}

/// One MS-TSGU HTTP packet, in either direction.
#[derive(Clone, PartialEq, Eq)]
pub enum Packet {
    HandshakeRequest(HandshakeRequest),
    HandshakeResponse(HandshakeResponse),
    TunnelCreate(TunnelCreate),
    TunnelResponse(TunnelResponse),
    TunnelAuth(TunnelAuth),
    TunnelAuthResponse(TunnelAuthResponse),
    ChannelCreate(ChannelCreate),
    ChannelResponse(ChannelResponse),
    /// RDP bytes, relayed untouched.
    Data(Vec<u8>),
    Keepalive,
    CloseChannel {
        status_code: u32,
    },
    CloseChannelResponse {
        status_code: u32,
    },
}

impl fmt::Debug for Packet {
    /// Like the derived form, but DATA shows its length, not its bytes, and
    /// a PAA cookie shows its length only: logs never hold an access token.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Packet::HandshakeRequest(p) => p.fmt(f),
            Packet::HandshakeResponse(p) => p.fmt(f),
            Packet::TunnelCreate(p) => f
                .debug_struct("TunnelCreate")
                .field("capabilities", &p.capabilities)
                .field("reauth_context", &p.reauth_context)
                .field(
                    "paa_cookie_chars",
                    &p.paa_cookie.as_ref().map(|c| c.chars().count()),
                )
                .finish(),
            Packet::TunnelResponse(p) => p.fmt(f),
            Packet::TunnelAuth(p) => p.fmt(f),
            Packet::TunnelAuthResponse(p) => p.fmt(f),
            Packet::ChannelCreate(p) => p.fmt(f),
            Packet::ChannelResponse(p) => p.fmt(f),
            Packet::Data(d) => write!(f, "Data({} bytes)", d.len()),
            Packet::Keepalive => f.write_str("Keepalive"),
            Packet::CloseChannel { status_code } => {
                write!(f, "CloseChannel({status_code:#010x})")
            }
            Packet::CloseChannelResponse { status_code } => {
                write!(f, "CloseChannelResponse({status_code:#010x})")
            }
        }
    }
}

impl Packet {
    /// The packet's HTTP_PACKET_TYPE.
    pub fn packet_type(&self) -> u16 {
        match self {
            Packet::HandshakeRequest(_) => PKT_TYPE_HANDSHAKE_REQUEST,
            Packet::HandshakeResponse(_) => PKT_TYPE_HANDSHAKE_RESPONSE,
            Packet::TunnelCreate(_) => PKT_TYPE_TUNNEL_CREATE,
            Packet::TunnelResponse(_) => PKT_TYPE_TUNNEL_RESPONSE,
            Packet::TunnelAuth(_) => PKT_TYPE_TUNNEL_AUTH,
            Packet::TunnelAuthResponse(_) => PKT_TYPE_TUNNEL_AUTH_RESPONSE,
            Packet::ChannelCreate(_) => PKT_TYPE_CHANNEL_CREATE,
            Packet::ChannelResponse(_) => PKT_TYPE_CHANNEL_RESPONSE,
            Packet::Data(_) => PKT_TYPE_DATA,
            Packet::Keepalive => PKT_TYPE_KEEPALIVE,
            Packet::CloseChannel { .. } => PKT_TYPE_CLOSE_CHANNEL,
            Packet::CloseChannelResponse { .. } => PKT_TYPE_CLOSE_CHANNEL_RESPONSE,
        }
    }

    /// The packet's name, for logs and metrics labels.
    pub fn name(&self) -> &'static str {
        type_name(self.packet_type())
    }

    /// Appends the packet's wire form to `out`. Refuses (and appends
    /// nothing) what its length fields cannot say or what the decoder's
    /// bounds would refuse, so whatever encodes also decodes.
    pub fn encode(&self, out: &mut Vec<u8>) -> Result<(), EncodeError> {
        let start = out.len();
        let r = self.encode_inner(out, start);
        if r.is_err() {
            out.truncate(start);
        }
        r
    }

    /// The packet's wire form.
    pub fn to_bytes(&self) -> Result<Vec<u8>, EncodeError> {
        let mut out = Vec::new();
        self.encode(&mut out)?;
        Ok(out)
    }

    fn encode_inner(&self, out: &mut Vec<u8>, start: usize) -> Result<(), EncodeError> {
        out.extend_from_slice(&self.packet_type().to_le_bytes());
        out.extend_from_slice(&[0, 0]);
        out.extend_from_slice(&[0, 0, 0, 0]); // length, written last
        match self {
            Packet::HandshakeRequest(p) => {
                out.extend_from_slice(&[p.version_major, p.version_minor]);
                put_u16(out, p.client_version);
                put_u16(out, p.extended_auth);
            }
            Packet::HandshakeResponse(p) => {
                put_u32(out, p.error_code);
                out.extend_from_slice(&[p.version_major, p.version_minor]);
                put_u16(out, p.server_version);
                put_u16(out, p.extended_auth);
            }
            Packet::TunnelCreate(p) => {
                let fields = flag(p.reauth_context.is_some(), HTTP_TUNNEL_PACKET_FIELD_REAUTH)
                    | flag(p.paa_cookie.is_some(), HTTP_TUNNEL_PACKET_FIELD_PAA_COOKIE);
                put_u32(out, p.capabilities);
                put_u16(out, fields);
                put_u16(out, 0);
                if let Some(context) = p.reauth_context {
                    out.extend_from_slice(&context.to_le_bytes());
                }
                if let Some(cookie) = &p.paa_cookie {
                    put_string(out, cookie, "PAA cookie")?;
                }
            }
            Packet::TunnelResponse(p) => {
                let fields = flag(p.tunnel_id.is_some(), HTTP_TUNNEL_RESPONSE_FIELD_TUNNEL_ID)
                    | flag(p.capabilities.is_some(), HTTP_TUNNEL_RESPONSE_FIELD_CAPS)
                    | flag(
                        p.consent_message.is_some(),
                        HTTP_TUNNEL_RESPONSE_FIELD_CONSENT_MSG,
                    );
                put_u16(out, p.server_version);
                put_u32(out, p.status_code);
                put_u16(out, fields);
                put_u16(out, 0);
                if let Some(id) = p.tunnel_id {
                    put_u32(out, id);
                }
                if let Some(caps) = p.capabilities {
                    put_u32(out, caps);
                }
                if let Some(message) = &p.consent_message {
                    put_string(out, message, "consent message")?;
                }
            }
            Packet::TunnelAuth(p) => {
                put_u16(
                    out,
                    flag(p.statement_of_health.is_some(), HTTP_TUNNEL_AUTH_FIELD_SOH),
                );
                put_string(out, &p.client_name, "client name")?;
                if let Some(soh) = &p.statement_of_health {
                    put_blob(out, soh, "statement of health")?;
                }
            }
            Packet::TunnelAuthResponse(p) => {
                let fields = flag(
                    p.redirection_flags.is_some(),
                    HTTP_TUNNEL_AUTH_RESPONSE_FIELD_REDIR_FLAGS,
                ) | flag(
                    p.idle_timeout_minutes.is_some(),
                    HTTP_TUNNEL_AUTH_RESPONSE_FIELD_IDLE_TIMEOUT,
                ) | flag(
                    p.soh_response.is_some(),
                    HTTP_TUNNEL_AUTH_RESPONSE_FIELD_SOH_RESPONSE,
                );
                put_u32(out, p.error_code);
                put_u16(out, fields);
                put_u16(out, 0);
                if let Some(flags) = p.redirection_flags {
                    put_u32(out, flags);
                }
                if let Some(minutes) = p.idle_timeout_minutes {
                    put_u32(out, minutes);
                }
                if let Some(soh) = &p.soh_response {
                    put_blob(out, soh, "SoH response")?;
                }
            }
            Packet::ChannelCreate(p) => {
                if p.resources.is_empty() || p.resources.len() > MAX_RESOURCES {
                    return Err(EncodeError::TooLong("resources"));
                }
                if p.alternate_resources.len() > MAX_ALTERNATE_RESOURCES {
                    return Err(EncodeError::TooLong("alternate resources"));
                }
                // Both counts were just bounded by 50 and 3.
                out.push(p.resources.len() as u8);
                out.push(p.alternate_resources.len() as u8);
                put_u16(out, p.port);
                put_u16(out, p.protocol);
                for name in p.resources.iter().chain(&p.alternate_resources) {
                    put_string(out, name, "resource name")?;
                }
            }
            Packet::ChannelResponse(p) => {
                let fields = flag(
                    p.channel_id.is_some(),
                    HTTP_CHANNEL_RESPONSE_FIELD_CHANNELID,
                ) | flag(p.udp_port.is_some(), HTTP_CHANNEL_RESPONSE_FIELD_UDPPORT)
                    | flag(
                        p.authn_cookie.is_some(),
                        HTTP_CHANNEL_RESPONSE_FIELD_AUTHNCOOKIE,
                    );
                put_u32(out, p.error_code);
                put_u16(out, fields);
                put_u16(out, 0);
                if let Some(id) = p.channel_id {
                    put_u32(out, id);
                }
                if let Some(port) = p.udp_port {
                    put_u16(out, port);
                }
                if let Some(cookie) = &p.authn_cookie {
                    put_blob(out, cookie, "authn cookie")?;
                }
            }
            Packet::Data(data) => put_blob(out, data, "data")?,
            Packet::Keepalive => {}
            Packet::CloseChannel { status_code } | Packet::CloseChannelResponse { status_code } => {
                put_u32(out, *status_code)
            }
        }
        let length = out.len() - start;
        if length > max_packet_bytes(self.packet_type()) {
            return Err(EncodeError::TooLong("packet"));
        }
        // Bounded just above by MAX_PACKET_BYTES, far below u32::MAX.
        out[start + 4..start + 8].copy_from_slice(&(length as u32).to_le_bytes());
        Ok(())
    }
}

/// Appends DATA packets carrying `payload` to `out`, split into packets of
/// at most [`MAX_DATA_PAYLOAD_BYTES`]; nothing for an empty payload.
pub fn encode_data(payload: &[u8], out: &mut Vec<u8>) {
    for piece in payload.chunks(MAX_DATA_PAYLOAD_BYTES) {
        // piece.len() <= u16::MAX, so the lengths below cannot overflow.
        let length = (DATA_HEADER_BYTES + piece.len()) as u32;
        out.reserve(DATA_HEADER_BYTES + piece.len());
        put_u16(out, PKT_TYPE_DATA);
        put_u16(out, 0);
        put_u32(out, length);
        put_u16(out, piece.len() as u16);
        out.extend_from_slice(piece);
    }
}

/// Why a packet could not be encoded.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum EncodeError {
    #[error("{0} is too long for its length field or the packet bound")]
    TooLong(&'static str),
}

/// Why bytes are not a packet this gateway accepts.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum PacketError {
    #[error("packet length {length} is shorter than the {HEADER_BYTES}-byte header")]
    LengthBelowHeader { length: u32 },
    #[error("{packet} announces {length} bytes, more than its bound of {max}")]
    TooLong {
        packet: &'static str,
        length: u32,
        max: usize,
    },
    #[error("packet length {length} does not match the {actual} bytes given")]
    LengthMismatch { length: u32, actual: usize },
    #[error("unknown packet type {0:#06x}")]
    UnknownType(u16),
    #[error("{0} packets are not supported by this gateway")]
    Unsupported(&'static str),
    #[error("{packet}: {field} runs past the end of the packet")]
    Truncated {
        packet: &'static str,
        field: &'static str,
    },
    #[error("{packet}: {count} bytes after the last field")]
    TrailingBytes { packet: &'static str, count: usize },
    #[error("{packet}: unknown fieldsPresent bits {bits:#06x}")]
    UnknownFields { packet: &'static str, bits: u16 },
    #[error("{packet}: {field} is not a UTF-16LE string")]
    BadString {
        packet: &'static str,
        field: &'static str,
    },
    #[error("{packet}: {field} is {value}, out of range")]
    OutOfRange {
        packet: &'static str,
        field: &'static str,
        value: u32,
    },
}

impl PacketError {
    /// A short, fixed label of the refusal, for metrics.
    pub fn reason(&self) -> &'static str {
        match self {
            PacketError::LengthBelowHeader { .. } => "length_below_header",
            PacketError::TooLong { .. } => "too_long",
            PacketError::LengthMismatch { .. } => "length_mismatch",
            PacketError::UnknownType(_) => "unknown_type",
            PacketError::Unsupported(_) => "unsupported_type",
            PacketError::Truncated { .. } => "truncated",
            PacketError::TrailingBytes { .. } => "trailing_bytes",
            PacketError::UnknownFields { .. } => "unknown_fields",
            PacketError::BadString { .. } => "bad_string",
            PacketError::OutOfRange { .. } => "out_of_range",
        }
    }
}

/// The name of a packet type (`"unknown"` for what MS-TSGU does not define).
pub fn type_name(packet_type: u16) -> &'static str {
    match packet_type {
        PKT_TYPE_HANDSHAKE_REQUEST => "HANDSHAKE_REQUEST",
        PKT_TYPE_HANDSHAKE_RESPONSE => "HANDSHAKE_RESPONSE",
        PKT_TYPE_EXTENDED_AUTH_MSG => "EXTENDED_AUTH_MSG",
        PKT_TYPE_TUNNEL_CREATE => "TUNNEL_CREATE",
        PKT_TYPE_TUNNEL_RESPONSE => "TUNNEL_RESPONSE",
        PKT_TYPE_TUNNEL_AUTH => "TUNNEL_AUTH",
        PKT_TYPE_TUNNEL_AUTH_RESPONSE => "TUNNEL_AUTH_RESPONSE",
        PKT_TYPE_CHANNEL_CREATE => "CHANNEL_CREATE",
        PKT_TYPE_CHANNEL_RESPONSE => "CHANNEL_RESPONSE",
        PKT_TYPE_DATA => "DATA",
        PKT_TYPE_SERVICE_MESSAGE => "SERVICE_MESSAGE",
        PKT_TYPE_REAUTH_MESSAGE => "REAUTH_MESSAGE",
        PKT_TYPE_KEEPALIVE => "KEEPALIVE",
        PKT_TYPE_CLOSE_CHANNEL => "CLOSE_CHANNEL",
        PKT_TYPE_CLOSE_CHANNEL_RESPONSE => "CLOSE_CHANNEL_RESPONSE",
        _ => "unknown",
    }
}

/// The most bytes a packet of this type may announce.
fn max_packet_bytes(packet_type: u16) -> usize {
    if packet_type == PKT_TYPE_DATA {
        MAX_PACKET_BYTES
    } else {
        MAX_CONTROL_PACKET_BYTES
    }
}

/// Reads and checks a header: the packet's type and its length. Refuses
/// unknown and unsupported types and lengths out of the type's bounds, so
/// a hostile length is refused before any of its body is awaited.
pub fn read_header(header: &[u8; HEADER_BYTES]) -> Result<(u16, usize), PacketError> {
    let packet_type = u16::from_le_bytes([header[0], header[1]]);
    let length = u32::from_le_bytes([header[4], header[5], header[6], header[7]]);
    match packet_type {
        PKT_TYPE_EXTENDED_AUTH_MSG | PKT_TYPE_SERVICE_MESSAGE | PKT_TYPE_REAUTH_MESSAGE => {
            return Err(PacketError::Unsupported(type_name(packet_type)));
        }
        t if type_name(t) == "unknown" => return Err(PacketError::UnknownType(t)),
        _ => {}
    }
    if (length as usize) < HEADER_BYTES {
        return Err(PacketError::LengthBelowHeader { length });
    }
    let max = max_packet_bytes(packet_type);
    if length as usize > max {
        return Err(PacketError::TooLong {
            packet: type_name(packet_type),
            length,
            max,
        });
    }
    Ok((packet_type, length as usize))
}

/// Decodes exactly one whole packet: `bytes` is its header and body, no
/// more and no less.
pub fn decode_packet(bytes: &[u8]) -> Result<Packet, PacketError> {
    let Some(header) = bytes.first_chunk::<HEADER_BYTES>() else {
        return Err(PacketError::Truncated {
            packet: "packet",
            field: "header",
        });
    };
    let (packet_type, length) = read_header(header)?;
    if length != bytes.len() {
        return Err(PacketError::LengthMismatch {
            length: length as u32,
            actual: bytes.len(),
        });
    }
    decode_body(packet_type, &bytes[HEADER_BYTES..])
}

fn decode_body(packet_type: u16, body: &[u8]) -> Result<Packet, PacketError> {
    let mut r = Reader {
        packet: type_name(packet_type),
        rest: body,
    };
    let packet = match packet_type {
        PKT_TYPE_HANDSHAKE_REQUEST => Packet::HandshakeRequest(HandshakeRequest {
            version_major: r.u8("verMajor")?,
            version_minor: r.u8("verMinor")?,
            client_version: r.u16("clientVersion")?,
            extended_auth: r.u16("extendedAuth")?,
        }),
        PKT_TYPE_HANDSHAKE_RESPONSE => Packet::HandshakeResponse(HandshakeResponse {
            error_code: r.u32("errorCode")?,
            version_major: r.u8("verMajor")?,
            version_minor: r.u8("verMinor")?,
            server_version: r.u16("serverVersion")?,
            extended_auth: r.u16("extendedAuth")?,
        }),
        PKT_TYPE_TUNNEL_CREATE => {
            let capabilities = r.u32("capsFlags")?;
            let fields =
                r.fields(HTTP_TUNNEL_PACKET_FIELD_PAA_COOKIE | HTTP_TUNNEL_PACKET_FIELD_REAUTH)?;
            r.u16("reserved")?;
            let reauth_context = if fields & HTTP_TUNNEL_PACKET_FIELD_REAUTH != 0 {
                Some(r.u64("reauthTunnelContext")?)
            } else {
                None
            };
            let paa_cookie = if fields & HTTP_TUNNEL_PACKET_FIELD_PAA_COOKIE != 0 {
                Some(r.string("PAA cookie")?)
            } else {
                None
            };
            Packet::TunnelCreate(TunnelCreate {
                capabilities,
                reauth_context,
                paa_cookie,
            })
        }
        PKT_TYPE_TUNNEL_RESPONSE => {
            let server_version = r.u16("serverVersion")?;
            let status_code = r.u32("statusCode")?;
            let fields = r.fields(
                HTTP_TUNNEL_RESPONSE_FIELD_TUNNEL_ID
                    | HTTP_TUNNEL_RESPONSE_FIELD_CAPS
                    | HTTP_TUNNEL_RESPONSE_FIELD_CONSENT_MSG,
            )?;
            r.u16("reserved")?;
            Packet::TunnelResponse(TunnelResponse {
                server_version,
                status_code,
                tunnel_id: r.optional(fields, HTTP_TUNNEL_RESPONSE_FIELD_TUNNEL_ID, |r| {
                    r.u32("tunnelId")
                })?,
                capabilities: r.optional(fields, HTTP_TUNNEL_RESPONSE_FIELD_CAPS, |r| {
                    r.u32("capsFlags")
                })?,
                consent_message: r.optional(
                    fields,
                    HTTP_TUNNEL_RESPONSE_FIELD_CONSENT_MSG,
                    |r| r.string("consent message"),
                )?,
            })
        }
        PKT_TYPE_TUNNEL_AUTH => {
            let fields = r.fields(HTTP_TUNNEL_AUTH_FIELD_SOH)?;
            let client_name = r.string("client name")?;
            Packet::TunnelAuth(TunnelAuth {
                client_name,
                statement_of_health: r.optional(fields, HTTP_TUNNEL_AUTH_FIELD_SOH, |r| {
                    r.blob("statement of health")
                })?,
            })
        }
        PKT_TYPE_TUNNEL_AUTH_RESPONSE => {
            let error_code = r.u32("errorCode")?;
            let fields = r.fields(
                HTTP_TUNNEL_AUTH_RESPONSE_FIELD_REDIR_FLAGS
                    | HTTP_TUNNEL_AUTH_RESPONSE_FIELD_IDLE_TIMEOUT
                    | HTTP_TUNNEL_AUTH_RESPONSE_FIELD_SOH_RESPONSE,
            )?;
            r.u16("reserved")?;
            Packet::TunnelAuthResponse(TunnelAuthResponse {
                error_code,
                redirection_flags: r.optional(
                    fields,
                    HTTP_TUNNEL_AUTH_RESPONSE_FIELD_REDIR_FLAGS,
                    |r| r.u32("redirFlags"),
                )?,
                idle_timeout_minutes: r.optional(
                    fields,
                    HTTP_TUNNEL_AUTH_RESPONSE_FIELD_IDLE_TIMEOUT,
                    |r| r.u32("idleTimeout"),
                )?,
                soh_response: r.optional(
                    fields,
                    HTTP_TUNNEL_AUTH_RESPONSE_FIELD_SOH_RESPONSE,
                    |r| r.blob("SoH response"),
                )?,
            })
        }
        PKT_TYPE_CHANNEL_CREATE => {
            let count = r.u8("numResources")?;
            let alternates = r.u8("numAltResources")?;
            if count == 0 || usize::from(count) > MAX_RESOURCES {
                return Err(r.out_of_range("numResources", count.into()));
            }
            if usize::from(alternates) > MAX_ALTERNATE_RESOURCES {
                return Err(r.out_of_range("numAltResources", alternates.into()));
            }
            let port = r.u16("port")?;
            let protocol = r.u16("protocol")?;
            let mut resources = Vec::with_capacity(count.into());
            for _ in 0..count {
                resources.push(r.string("resource name")?);
            }
            let mut alternate_resources = Vec::with_capacity(alternates.into());
            for _ in 0..alternates {
                alternate_resources.push(r.string("alternate resource name")?);
            }
            Packet::ChannelCreate(ChannelCreate {
                resources,
                alternate_resources,
                port,
                protocol,
            })
        }
        PKT_TYPE_CHANNEL_RESPONSE => {
            let error_code = r.u32("errorCode")?;
            let fields = r.fields(
                HTTP_CHANNEL_RESPONSE_FIELD_CHANNELID
                    | HTTP_CHANNEL_RESPONSE_FIELD_UDPPORT
                    | HTTP_CHANNEL_RESPONSE_FIELD_AUTHNCOOKIE,
            )?;
            r.u16("reserved")?;
            Packet::ChannelResponse(ChannelResponse {
                error_code,
                channel_id: r.optional(fields, HTTP_CHANNEL_RESPONSE_FIELD_CHANNELID, |r| {
                    r.u32("channelId")
                })?,
                udp_port: r.optional(fields, HTTP_CHANNEL_RESPONSE_FIELD_UDPPORT, |r| {
                    r.u16("udpPort")
                })?,
                authn_cookie: r.optional(fields, HTTP_CHANNEL_RESPONSE_FIELD_AUTHNCOOKIE, |r| {
                    r.blob("authn cookie")
                })?,
            })
        }
        PKT_TYPE_DATA => Packet::Data(r.blob("data")?),
        PKT_TYPE_KEEPALIVE => Packet::Keepalive,
        PKT_TYPE_CLOSE_CHANNEL => Packet::CloseChannel {
            status_code: r.u32("statusCode")?,
        },
        PKT_TYPE_CLOSE_CHANNEL_RESPONSE => Packet::CloseChannelResponse {
            status_code: r.u32("statusCode")?,
        },
        // read_header refused every other type.
        other => return Err(PacketError::UnknownType(other)),
    };
    if !r.rest.is_empty() {
        return Err(PacketError::TrailingBytes {
            packet: r.packet,
            count: r.rest.len(),
        });
    }
    Ok(packet)
}

/// Reads fields off a packet's body, every read checked against what is left.
struct Reader<'a> {
    packet: &'static str,
    rest: &'a [u8],
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize, field: &'static str) -> Result<&'a [u8], PacketError> {
        if self.rest.len() < n {
            return Err(PacketError::Truncated {
                packet: self.packet,
                field,
            });
        }
        let (taken, rest) = self.rest.split_at(n);
        self.rest = rest;
        Ok(taken)
    }

    fn array<const N: usize>(&mut self, field: &'static str) -> Result<[u8; N], PacketError> {
        let bytes = self.take(N, field)?;
        let mut array = [0; N];
        array.copy_from_slice(bytes);
        Ok(array)
    }

    fn u8(&mut self, field: &'static str) -> Result<u8, PacketError> {
        Ok(self.array::<1>(field)?[0])
    }

    fn u16(&mut self, field: &'static str) -> Result<u16, PacketError> {
        Ok(u16::from_le_bytes(self.array(field)?))
    }

    fn u32(&mut self, field: &'static str) -> Result<u32, PacketError> {
        Ok(u32::from_le_bytes(self.array(field)?))
    }

    fn u64(&mut self, field: &'static str) -> Result<u64, PacketError> {
        Ok(u64::from_le_bytes(self.array(field)?))
    }

    /// fieldsPresent, refusing bits outside `known`.
    fn fields(&mut self, known: u16) -> Result<u16, PacketError> {
        let bits = self.u16("fieldsPresent")?;
        if bits & !known != 0 {
            return Err(PacketError::UnknownFields {
                packet: self.packet,
                bits: bits & !known,
            });
        }
        Ok(bits)
    }

    fn optional<T>(
        &mut self,
        fields: u16,
        bit: u16,
        read: impl FnOnce(&mut Self) -> Result<T, PacketError>,
    ) -> Result<Option<T>, PacketError> {
        if fields & bit != 0 {
            read(self).map(Some)
        } else {
            Ok(None)
        }
    }

    /// A u16 byte count and that many bytes.
    fn blob(&mut self, field: &'static str) -> Result<Vec<u8>, PacketError> {
        let n = self.u16(field)?;
        Ok(self.take(n.into(), field)?.to_vec())
    }

    /// A u16 byte count and that many bytes of UTF-16LE, with at most one
    /// terminating NUL (removed) and no other NUL.
    fn string(&mut self, field: &'static str) -> Result<String, PacketError> {
        let n = self.u16(field)?;
        let bytes = self.take(n.into(), field)?;
        let bad = || PacketError::BadString {
            packet: self.packet,
            field,
        };
        if bytes.len() % 2 != 0 {
            return Err(bad());
        }
        let mut units: Vec<u16> = bytes
            .chunks_exact(2)
            .map(|c| u16::from_le_bytes([c[0], c[1]]))
            .collect();
        if units.last() == Some(&0) {
            units.pop();
        }
        if units.contains(&0) {
            return Err(bad());
        }
        String::from_utf16(&units).map_err(|_| bad())
    }

    fn out_of_range(&self, field: &'static str, value: u32) -> PacketError {
        PacketError::OutOfRange {
            packet: self.packet,
            field,
            value,
        }
    }
}

fn flag(present: bool, bit: u16) -> u16 {
    if present { bit } else { 0 }
}

fn put_u16(out: &mut Vec<u8>, v: u16) {
    out.extend_from_slice(&v.to_le_bytes());
}

fn put_u32(out: &mut Vec<u8>, v: u32) {
    out.extend_from_slice(&v.to_le_bytes());
}

fn put_blob(out: &mut Vec<u8>, bytes: &[u8], field: &'static str) -> Result<(), EncodeError> {
    let n = u16::try_from(bytes.len()).map_err(|_| EncodeError::TooLong(field))?;
    put_u16(out, n);
    out.extend_from_slice(bytes);
    Ok(())
}

/// UTF-16LE with a terminating NUL, as clients and gateways write strings.
/// A string holding a NUL cannot be written (it would not read back).
fn put_string(out: &mut Vec<u8>, s: &str, field: &'static str) -> Result<(), EncodeError> {
    if s.contains('\0') {
        return Err(EncodeError::TooLong(field));
    }
    let units: Vec<u16> = s.encode_utf16().chain([0]).collect();
    let n = units
        .len()
        .checked_mul(2)
        .and_then(|n| u16::try_from(n).ok())
        .ok_or(EncodeError::TooLong(field))?;
    put_u16(out, n);
    for unit in units {
        put_u16(out, unit);
    }
    Ok(())
}

/// Splits a byte stream into packets, whatever pieces it arrives in.
///
/// Holds at most one packet's bytes ([`MAX_PACKET_BYTES`]): a header is
/// checked as soon as its 8 bytes are in, so a length beyond the type's
/// bound is refused before its body is awaited. After an error the stream
/// cannot be resynchronised: every later call returns the same error.
#[derive(Debug, Default)]
pub struct Decoder {
    /// The bytes of the packet being assembled (empty between packets).
    buf: Vec<u8>,
    /// The current packet's type and length, once its header is in.
    header: Option<(u16, usize)>,
    failed: Option<PacketError>,
}

impl Decoder {
    pub fn new() -> Decoder {
        Decoder::default()
    }

    /// Takes bytes from the front of `input` and returns the next whole
    /// packet, or `None` once `input` is used up with no packet complete
    /// (the bytes taken are kept for the next call). Call it until it
    /// returns `None` to drain a piece of the stream.
    pub fn decode(&mut self, input: &mut &[u8]) -> Result<Option<Packet>, PacketError> {
        if let Some(e) = &self.failed {
            return Err(e.clone());
        }
        let r = self.decode_inner(input);
        if let Err(e) = &r {
            self.failed = Some(e.clone());
            self.buf = Vec::new();
        }
        r
    }

    fn decode_inner(&mut self, input: &mut &[u8]) -> Result<Option<Packet>, PacketError> {
        // The whole packet is in the input: decode it in place, no copy.
        if self.buf.is_empty()
            && let Some(header) = input.first_chunk::<HEADER_BYTES>()
        {
            let (packet_type, length) = read_header(header)?;
            if input.len() >= length {
                let packet = decode_body(packet_type, &input[HEADER_BYTES..length])?;
                *input = &input[length..];
                return Ok(Some(packet));
            }
        }
        if self.header.is_none() {
            self.fill(input, HEADER_BYTES);
            let Some(header) = self.buf.first_chunk::<HEADER_BYTES>() else {
                return Ok(None);
            };
            self.header = Some(read_header(header)?);
        }
        let Some((packet_type, length)) = self.header else {
            return Ok(None);
        };
        self.fill(input, length);
        if self.buf.len() < length {
            return Ok(None);
        }
        let packet = decode_body(packet_type, &self.buf[HEADER_BYTES..length]);
        self.buf.clear();
        self.header = None;
        packet.map(Some)
    }

    /// Moves bytes from `input` into the buffer until it holds `want`.
    fn fill(&mut self, input: &mut &[u8], want: usize) {
        let n = want.saturating_sub(self.buf.len()).min(input.len());
        self.buf.extend_from_slice(&input[..n]);
        *input = &input[n..];
    }

    /// Bytes of an incomplete packet held (0 between packets).
    pub fn buffered(&self) -> usize {
        self.buf.len()
    }
}
