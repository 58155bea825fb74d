//! MS-TSGU (the RD Gateway protocol) without IO: the packets a real client
//! sent, decoded; the gateway's state machine driven by them, its answers
//! compared with the ones that client accepted; and every refusal, of
//! bytes and of packets out of order.
//!
//! The fixtures in `tests/fixtures/tsgu/` were captured from Debian 12's
//! xfreerdp 2.11.7 (freerdp2-x11) by `tests/fixtures/tsgu/capture.py`, a
//! throwaway TLS listener on 127.0.0.1 that answered the handshake, the
//! tunnel, the tunnel auth and the channel create with the bytes in
//! [`CAPTURE_ANSWERS`], then sent a KEEPALIVE and a CLOSE_CHANNEL after
//! the first DATA packet; see `tests/fixtures/tsgu/README.md` for the
//! commands.

use gateway::tsgu::hresult::{self, *};
use gateway::tsgu::packet::{self, *};
use gateway::tsgu::server::{Action, Server, ServerConfig, State, StateError};
use gateway::tsgu::{Decoder, Packet, PacketError};

use crate::fixture_in;

/// The access token given with `/gat:` (shaped like a deskbroker ticket).
pub const TOKEN: &str = "dbt1:poolname:1893456000:AAAAAAAAAAAAAAAAAAAAAA:alice";

/// The capture listener's answers, byte for byte, in order: the handshake
/// response (PAA), the tunnel response (tunnel id 1, caps IDLE_TIMEOUT),
/// the tunnel auth response (redirection flags 0, idle timeout 0), the
/// channel response (channel id 1), and then a KEEPALIVE and a
/// CLOSE_CHANNEL (status 0). The client went on after each one.
pub const CAPTURE_ANSWERS: [&[u8]; 6] = [
    &[2, 0, 0, 0, 18, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 2, 0],
    &[
        5, 0, 0, 0, 26, 0, 0, 0, 0, 0, 0, 0, 0, 0, 3, 0, 0, 0, 1, 0, 0, 0, 2, 0, 0, 0,
    ],
    &[
        7, 0, 0, 0, 24, 0, 0, 0, 0, 0, 0, 0, 3, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    ],
    &[9, 0, 0, 0, 20, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0],
    &[0xD, 0, 0, 0, 8, 0, 0, 0],
    &[0x10, 0, 0, 0, 12, 0, 0, 0, 0, 0, 0, 0],
];

/// Every packet of a whole byte stream, decoded in one piece.
pub fn decode_all(mut bytes: &[u8]) -> Result<Vec<Packet>, PacketError> {
    let mut decoder = Decoder::new();
    let mut packets = Vec::new();
    while let Some(p) = decoder.decode(&mut bytes)? {
        packets.push(p);
    }
    assert!(bytes.is_empty(), "decode returned None with input left");
    Ok(packets)
}

/// What xfreerdp 2.11.7 sent, as packets.
fn xfreerdp_packets(transport: &str) -> Vec<Packet> {
    let stream = fixture_in("tsgu", &format!("xfreerdp-2.11.7-{transport}-stream.bin"));
    decode_all(&stream).unwrap_or_else(|e| panic!("{transport} stream: {e}"))
}

#[test]
fn xfreerdp_websocket_stream_decodes_to_the_whole_conversation() {
    let packets = xfreerdp_packets("websocket");
    assert_eq!(packets.len(), 7, "{packets:?}");
    assert_eq!(
        packets[0],
        Packet::HandshakeRequest(HandshakeRequest {
            version_major: 1,
            version_minor: 0,
            client_version: 0,
            extended_auth: HTTP_EXTENDED_AUTH_PAA,
        })
    );
    assert_eq!(
        packets[1],
        Packet::TunnelCreate(TunnelCreate {
            capabilities: HTTP_CAPABILITY_TYPE_QUAR_SOH
                | HTTP_CAPABILITY_MESSAGING_CONSENT_SIGN
                | HTTP_CAPABILITY_MESSAGING_SERVICE_MSG,
            reauth_context: None,
            paa_cookie: Some(TOKEN.into()),
        })
    );
    assert_eq!(
        packets[2],
        Packet::TunnelAuth(TunnelAuth {
            client_name: "capture".into(),
            statement_of_health: None,
        })
    );
    // The target is `/v:` verbatim, never resolved: the pool's name.
    assert_eq!(
        packets[3],
        Packet::ChannelCreate(ChannelCreate {
            resources: vec!["poolname".into()],
            alternate_resources: vec![],
            port: 3389,
            protocol: CHANNEL_PROTOCOL_RDP,
        })
    );
    // The first DATA is the client's X.224 Connection Request, which the
    // front door's parser reads (FreeRDP writes the user as `\alice`: an
    // empty domain).
    let Packet::Data(data) = &packets[4] else {
        panic!("not data: {:?}", packets[4]);
    };
    let request = gateway::pdu::parse(data).expect("an X.224 Connection Request");
    assert_eq!(
        request.routing,
        Some(gateway::pdu::Routing::User("\\alice".into()))
    );
    assert_eq!(packets[5], Packet::Keepalive);
    assert_eq!(
        packets[6],
        Packet::CloseChannelResponse { status_code: S_OK }
    );
}

#[test]
fn xfreerdp_sends_the_same_packets_over_both_transports() {
    assert_eq!(xfreerdp_packets("legacy"), xfreerdp_packets("websocket"));
}

#[test]
fn the_legacy_in_body_is_the_stream_in_http_chunks() {
    // FreeRDP 2 writes one chunk per packet, its size in upper-case hex.
    let body = fixture_in("tsgu", "xfreerdp-2.11.7-legacy-in-body.bin");
    let mut rest = &body[..];
    let mut unchunked = Vec::new();
    while !rest.is_empty() {
        let line_end = rest
            .windows(2)
            .position(|w| w == b"\r\n")
            .expect("size line");
        let size_hex = std::str::from_utf8(&rest[..line_end]).expect("ascii");
        assert_eq!(size_hex, size_hex.to_uppercase());
        let size = usize::from_str_radix(size_hex, 16).expect("hex size");
        rest = &rest[line_end + 2..];
        unchunked.extend_from_slice(&rest[..size]);
        assert_eq!(&rest[size..size + 2], b"\r\n");
        rest = &rest[size + 2..];
    }
    assert_eq!(
        unchunked,
        fixture_in("tsgu", "xfreerdp-2.11.7-legacy-stream.bin")
    );
}

#[test]
fn the_websocket_wire_is_the_stream_in_masked_binary_frames() {
    let wire = fixture_in("tsgu", "xfreerdp-2.11.7-websocket-wire.bin");
    let mut rest = &wire[..];
    let mut payloads = Vec::new();
    while rest.len() >= 2 {
        let (b0, b1) = (rest[0], rest[1]);
        assert_eq!(b1 & 0x80, 0x80, "client frames are masked");
        let (len, skip) = match b1 & 0x7F {
            126 => (usize::from(u16::from_be_bytes([rest[2], rest[3]])), 4),
            127 => panic!("no frame this long here"),
            n => (usize::from(n), 2),
        };
        let mask = &rest[skip..skip + 4];
        let data: Vec<u8> = rest[skip + 4..skip + 4 + len]
            .iter()
            .enumerate()
            .map(|(i, b)| b ^ mask[i % 4])
            .collect();
        if b0 & 0x0F == 0x2 {
            payloads.extend_from_slice(&data);
        }
        rest = &rest[skip + 4 + len..];
    }
    assert!(rest.is_empty());
    assert_eq!(
        payloads,
        fixture_in("tsgu", "xfreerdp-2.11.7-websocket-stream.bin")
    );
}

/// The capture listener's settings, as a [`ServerConfig`].
fn capture_config() -> ServerConfig {
    ServerConfig {
        idle_timeout_minutes: 0,
        redirection_flags: 0,
    }
}

fn bytes(p: &Packet) -> Vec<u8> {
    p.to_bytes().expect("encodes")
}

#[test]
fn the_state_machine_answers_xfreerdp_as_the_capture_did() {
    let mut packets = xfreerdp_packets("websocket").into_iter();
    let mut server = Server::new(capture_config());
    let mut next = |server: &mut Server| {
        let p = packets.next().expect("a packet");
        server.receive(p).expect("accepted")
    };
    let Action::Send(answer) = next(&mut server) else {
        panic!("handshake")
    };
    assert_eq!(bytes(&answer), CAPTURE_ANSWERS[0]);
    assert_eq!(
        next(&mut server),
        Action::CheckToken {
            token: TOKEN.into()
        }
    );
    assert_eq!(bytes(&server.accept_token(1).unwrap()), CAPTURE_ANSWERS[1]);
    let Action::Send(answer) = next(&mut server) else {
        panic!("tunnel auth")
    };
    assert_eq!(bytes(&answer), CAPTURE_ANSWERS[2]);
    assert_eq!(
        next(&mut server),
        Action::OpenChannel {
            resource: "poolname".into(),
            port: 3389
        }
    );
    assert_eq!(server.state(), State::OpeningChannel);
    assert_eq!(
        bytes(&server.accept_channel(1).unwrap()),
        CAPTURE_ANSWERS[3]
    );
    let Action::Relay(x224) = next(&mut server) else {
        panic!("data")
    };
    assert_eq!(x224[..4], [3, 0, 0, 44]);
    // The capture sent a keepalive, then closed; the client answered each.
    assert_eq!(bytes(&server.keepalive().unwrap()), CAPTURE_ANSWERS[4]);
    assert_eq!(bytes(&server.close(S_OK).unwrap()), CAPTURE_ANSWERS[5]);
    assert_eq!(next(&mut server), Action::Nothing);
    assert_eq!(next(&mut server), Action::Close { send: None });
    assert_eq!(server.state(), State::Closed);
    assert!(packets.next().is_none());
}

#[test]
fn the_capture_answers_decode_as_what_they_say() {
    let all: Vec<u8> = CAPTURE_ANSWERS.concat();
    let packets = decode_all(&all).expect("decodes");
    assert_eq!(
        packets[1],
        Packet::TunnelResponse(TunnelResponse {
            server_version: 0,
            status_code: S_OK,
            tunnel_id: Some(1),
            capabilities: Some(HTTP_CAPABILITY_IDLE_TIMEOUT),
            consent_message: None,
        })
    );
    assert_eq!(
        packets[3],
        Packet::ChannelResponse(ChannelResponse {
            error_code: S_OK,
            channel_id: Some(1),
            udp_port: None,
            authn_cookie: None,
        })
    );
}

// --- the state machine's refusals -------------------------------------------

fn handshake(extended_auth: u16) -> Packet {
    Packet::HandshakeRequest(HandshakeRequest {
        version_major: 1,
        version_minor: 0,
        client_version: 0,
        extended_auth,
    })
}

fn tunnel_create(token: Option<&str>) -> Packet {
    Packet::TunnelCreate(TunnelCreate {
        capabilities: 0,
        reauth_context: None,
        paa_cookie: token.map(str::to_string),
    })
}

fn tunnel_auth() -> Packet {
    Packet::TunnelAuth(TunnelAuth {
        client_name: "pc".into(),
        statement_of_health: None,
    })
}

fn channel_create(resource: &str, protocol: u16) -> Packet {
    Packet::ChannelCreate(ChannelCreate {
        resources: vec![resource.into()],
        alternate_resources: vec![],
        port: 3389,
        protocol,
    })
}

/// A server brought to `state` by a well-behaved client.
fn server_in(state: State) -> Server {
    let mut s = Server::new(ServerConfig::default());
    let steps: &[State] = &[
        State::Start,
        State::Handshaken,
        State::CheckingToken,
        State::TunnelCreated,
        State::Authorized,
        State::OpeningChannel,
        State::Open,
        State::Closing,
    ];
    for &at in steps {
        if s.state() == state {
            return s;
        }
        match at {
            State::Start => drop(s.receive(handshake(HTTP_EXTENDED_AUTH_PAA)).unwrap()),
            State::Handshaken => drop(s.receive(tunnel_create(Some(TOKEN))).unwrap()),
            State::CheckingToken => drop(s.accept_token(7).unwrap()),
            State::TunnelCreated => drop(s.receive(tunnel_auth()).unwrap()),
            State::Authorized => drop(s.receive(channel_create("pool", 3)).unwrap()),
            State::OpeningChannel => drop(s.accept_channel(9).unwrap()),
            State::Open => drop(s.close(0).unwrap()),
            _ => unreachable!(),
        }
    }
    assert_eq!(s.state(), state);
    s
}

/// The answer's HRESULT, and its packet type.
fn code_of(p: &Packet) -> (u16, u32) {
    let code = match p {
        Packet::HandshakeResponse(r) => r.error_code,
        Packet::TunnelResponse(r) => r.status_code,
        Packet::TunnelAuthResponse(r) => r.error_code,
        Packet::ChannelResponse(r) => r.error_code,
        other => panic!("not an answer: {other:?}"),
    };
    (p.packet_type(), code)
}

#[test]
fn refusals_carry_the_protocols_error_codes() {
    // (state, packet, the answer's type and HRESULT)
    let cases: Vec<(State, Packet, (u16, u32))> = vec![
        // Handshake: version 2, or no PAA offered (NTLM only, or nothing).
        (
            State::Start,
            Packet::HandshakeRequest(HandshakeRequest {
                version_major: 2,
                version_minor: 0,
                client_version: 0,
                extended_auth: HTTP_EXTENDED_AUTH_PAA,
            }),
            (PKT_TYPE_HANDSHAKE_RESPONSE, E_PROXY_CAPABILITYMISMATCH),
        ),
        (
            State::Start,
            handshake(HTTP_EXTENDED_AUTH_SSPI_NTLM),
            (
                PKT_TYPE_HANDSHAKE_RESPONSE,
                E_PROXY_UNSUPPORTED_AUTHENTICATION_METHOD,
            ),
        ),
        (
            State::Start,
            handshake(HTTP_EXTENDED_AUTH_NONE),
            (
                PKT_TYPE_HANDSHAKE_RESPONSE,
                E_PROXY_UNSUPPORTED_AUTHENTICATION_METHOD,
            ),
        ),
        // Tunnel create with no token, an empty one, or a reauth context.
        (
            State::Handshaken,
            tunnel_create(None),
            (PKT_TYPE_TUNNEL_RESPONSE, E_PROXY_COOKIE_BADPACKET),
        ),
        (
            State::Handshaken,
            tunnel_create(Some("")),
            (PKT_TYPE_TUNNEL_RESPONSE, E_PROXY_COOKIE_BADPACKET),
        ),
        (
            State::Handshaken,
            Packet::TunnelCreate(TunnelCreate {
                capabilities: 0,
                reauth_context: Some(5),
                paa_cookie: Some(TOKEN.into()),
            }),
            (PKT_TYPE_TUNNEL_RESPONSE, E_PROXY_CAPABILITYMISMATCH),
        ),
        // Channel create for another protocol, or naming nothing.
        (
            State::Authorized,
            channel_create("pool", 4),
            (PKT_TYPE_CHANNEL_RESPONSE, E_PROXY_CAPABILITYMISMATCH),
        ),
        (
            State::Authorized,
            channel_create("", 3),
            (PKT_TYPE_CHANNEL_RESPONSE, E_PROXY_RAP_ACCESSDENIED),
        ),
        // Out of order: each request answered in its own kind.
        (
            State::Handshaken,
            handshake(HTTP_EXTENDED_AUTH_PAA),
            (PKT_TYPE_HANDSHAKE_RESPONSE, E_PROXY_INTERNALERROR),
        ),
        (
            State::Start,
            tunnel_create(Some(TOKEN)),
            (PKT_TYPE_TUNNEL_RESPONSE, E_PROXY_INTERNALERROR),
        ),
        (
            State::Open,
            tunnel_create(Some(TOKEN)),
            (PKT_TYPE_TUNNEL_RESPONSE, E_PROXY_INTERNALERROR),
        ),
        (
            State::Handshaken,
            tunnel_auth(),
            (PKT_TYPE_TUNNEL_AUTH_RESPONSE, E_PROXY_INTERNALERROR),
        ),
        (
            State::CheckingToken,
            tunnel_auth(),
            (PKT_TYPE_TUNNEL_AUTH_RESPONSE, E_PROXY_INTERNALERROR),
        ),
        (
            State::TunnelCreated,
            channel_create("pool", 3),
            (PKT_TYPE_CHANNEL_RESPONSE, E_PROXY_INTERNALERROR),
        ),
        (
            State::OpeningChannel,
            channel_create("pool", 3),
            (PKT_TYPE_CHANNEL_RESPONSE, E_PROXY_INTERNALERROR),
        ),
    ];
    for (state, packet, want) in cases {
        let mut s = server_in(state);
        let label = format!("{packet:?} in {state:?}");
        let refusal = s.receive(packet).expect_err(&label);
        let reply = refusal.reply.as_ref().expect(&label);
        assert_eq!(code_of(reply), want, "{label}");
        assert_eq!(refusal.code, want.1, "{label}");
        assert!(hresult::failed(refusal.code), "{label}: severity bit");
        assert_eq!(s.state(), State::Closed, "{label}");
        // A closed tunnel takes nothing more.
        assert!(s.receive(Packet::Keepalive).is_err(), "{label}");
    }
}

#[test]
fn data_before_the_channel_is_open_is_refused_without_an_answer() {
    for state in [
        State::Start,
        State::Handshaken,
        State::CheckingToken,
        State::TunnelCreated,
        State::Authorized,
        State::OpeningChannel,
    ] {
        let mut s = server_in(state);
        let refusal = s.receive(Packet::Data(vec![1, 2, 3])).expect_err("refused");
        assert_eq!(
            (refusal.code, refusal.reply),
            (E_PROXY_INTERNALERROR, None),
            "{state:?}"
        );
        assert_eq!(s.state(), State::Closed);
    }
}

#[test]
fn packets_only_a_gateway_sends_are_refused() {
    let gateway_only = [
        Packet::HandshakeResponse(HandshakeResponse {
            error_code: 0,
            version_major: 1,
            version_minor: 0,
            server_version: 0,
            extended_auth: 2,
        }),
        Packet::TunnelResponse(TunnelResponse {
            server_version: 0,
            status_code: 0,
            tunnel_id: None,
            capabilities: None,
            consent_message: None,
        }),
        Packet::ChannelResponse(ChannelResponse {
            error_code: 0,
            channel_id: Some(1),
            udp_port: None,
            authn_cookie: None,
        }),
    ];
    for packet in gateway_only {
        for state in [State::Start, State::Authorized, State::Open] {
            let mut s = server_in(state);
            let refusal = s.receive(packet.clone()).expect_err("refused");
            assert_eq!(refusal.code, E_PROXY_INTERNALERROR);
            assert_eq!(s.state(), State::Closed);
        }
    }
}

#[test]
fn keepalives_are_taken_from_the_handshake_on_and_never_before() {
    assert!(server_in(State::Start).receive(Packet::Keepalive).is_err());
    for state in [
        State::Handshaken,
        State::CheckingToken,
        State::TunnelCreated,
        State::Authorized,
        State::OpeningChannel,
        State::Open,
        State::Closing,
    ] {
        let mut s = server_in(state);
        assert_eq!(s.receive(Packet::Keepalive), Ok(Action::Nothing));
        assert_eq!(s.state(), state, "a keepalive changes nothing");
    }
}

#[test]
fn the_client_closing_an_open_channel_is_answered() {
    let mut s = server_in(State::Open);
    assert_eq!(
        s.receive(Packet::Data(b"rdp".to_vec())),
        Ok(Action::Relay(b"rdp".to_vec()))
    );
    assert_eq!(
        s.receive(Packet::CloseChannel { status_code: 0 }),
        Ok(Action::Close {
            send: Some(Packet::CloseChannelResponse { status_code: S_OK })
        })
    );
    assert_eq!(s.state(), State::Closed);
    // A close before the channel is open is out of order.
    let mut s = server_in(State::Authorized);
    assert!(s.receive(Packet::CloseChannel { status_code: 0 }).is_err());
    // As is a close response the gateway never asked for.
    let mut s = server_in(State::Open);
    assert!(
        s.receive(Packet::CloseChannelResponse { status_code: 0 })
            .is_err()
    );
}

#[test]
fn data_after_the_gateway_closed_is_dropped_until_the_client_answers() {
    let mut s = server_in(State::Closing);
    assert_eq!(s.receive(Packet::Data(vec![9])), Ok(Action::Nothing));
    assert_eq!(
        s.receive(Packet::CloseChannelResponse { status_code: 0 }),
        Ok(Action::Close { send: None })
    );
}

#[test]
fn a_refused_token_or_channel_ends_the_tunnel_with_that_code() {
    let mut s = server_in(State::CheckingToken);
    let answer = s
        .refuse_token(E_PROXY_COOKIE_AUTHENTICATION_ACCESS_DENIED)
        .unwrap();
    assert_eq!(
        code_of(&answer),
        (
            PKT_TYPE_TUNNEL_RESPONSE,
            E_PROXY_COOKIE_AUTHENTICATION_ACCESS_DENIED
        )
    );
    assert_eq!(s.state(), State::Closed);

    let mut s = server_in(State::OpeningChannel);
    let answer = s.refuse_channel(E_PROXY_TS_CONNECTFAILED).unwrap();
    assert_eq!(
        code_of(&answer),
        (PKT_TYPE_CHANNEL_RESPONSE, E_PROXY_TS_CONNECTFAILED)
    );
    assert_eq!(s.state(), State::Closed);
}

#[test]
fn decisions_out_of_turn_are_refused_and_change_nothing() {
    let mut s = server_in(State::Handshaken);
    assert_eq!(
        s.accept_token(1),
        Err(StateError {
            operation: "accept_token",
            state: State::Handshaken
        })
    );
    assert!(s.accept_channel(1).is_err());
    assert!(s.refuse_channel(E_PROXY_INTERNALERROR).is_err());
    assert!(s.close(0).is_err());
    assert!(s.keepalive().is_err());
    assert_eq!(s.state(), State::Handshaken);
    let mut s = server_in(State::OpeningChannel);
    assert!(s.accept_token(1).is_err());
    assert!(s.refuse_token(E_PROXY_INTERNALERROR).is_err());
    assert_eq!(s.state(), State::OpeningChannel);
}

// --- the decoder's refusals ---------------------------------------------------

fn header(packet_type: u16, length: u32) -> Vec<u8> {
    let mut h = packet_type.to_le_bytes().to_vec();
    h.extend_from_slice(&[0, 0]);
    h.extend_from_slice(&length.to_le_bytes());
    h
}

/// A packet with a correct header around `body`.
fn raw(packet_type: u16, body: &[u8]) -> Vec<u8> {
    let mut p = header(packet_type, (HEADER_BYTES + body.len()) as u32);
    p.extend_from_slice(body);
    p
}

fn utf16z(s: &str) -> Vec<u8> {
    let units: Vec<u16> = s.encode_utf16().chain([0]).collect();
    let mut out = ((units.len() * 2) as u16).to_le_bytes().to_vec();
    for u in units {
        out.extend_from_slice(&u.to_le_bytes());
    }
    out
}

#[test]
fn a_hostile_length_is_refused_from_the_header_alone() {
    // Only the 8 header bytes are given: the decoder does not wait for a
    // body it would refuse anyway.
    for (packet_type, length) in [
        (
            PKT_TYPE_TUNNEL_CREATE,
            (MAX_CONTROL_PACKET_BYTES + 1) as u32,
        ),
        (PKT_TYPE_DATA, (MAX_PACKET_BYTES + 1) as u32),
        (PKT_TYPE_CHANNEL_CREATE, u32::MAX),
    ] {
        let mut d = Decoder::new();
        let h = header(packet_type, length);
        let e = d.decode(&mut &h[..]).expect_err("refused");
        assert!(matches!(e, PacketError::TooLong { .. }), "{e}");
        assert_eq!(e.reason(), "too_long");
    }
    let mut d = Decoder::new();
    let e = d.decode(&mut &header(PKT_TYPE_DATA, 7)[..]).unwrap_err();
    assert_eq!(e, PacketError::LengthBelowHeader { length: 7 });
}

#[test]
fn unknown_and_unsupported_types_are_refused() {
    for (t, want) in [
        (0x0000, PacketError::UnknownType(0)),
        (0x000E, PacketError::UnknownType(0xE)),
        (0x0012, PacketError::UnknownType(0x12)),
        (0xFFFF, PacketError::UnknownType(0xFFFF)),
        (
            PKT_TYPE_EXTENDED_AUTH_MSG,
            PacketError::Unsupported("EXTENDED_AUTH_MSG"),
        ),
        (
            PKT_TYPE_SERVICE_MESSAGE,
            PacketError::Unsupported("SERVICE_MESSAGE"),
        ),
        (
            PKT_TYPE_REAUTH_MESSAGE,
            PacketError::Unsupported("REAUTH_MESSAGE"),
        ),
    ] {
        assert_eq!(decode_all(&raw(t, &[])), Err(want), "type {t:#x}");
    }
}

#[test]
fn every_field_is_checked_against_the_packet_length() {
    let name = utf16z("pool");
    let mut channel = vec![1, 0, 0x3D, 0x0D, 3, 0];
    channel.extend_from_slice(&name);
    let cases: Vec<(Vec<u8>, &str)> = vec![
        // Short fixed parts.
        (
            raw(PKT_TYPE_HANDSHAKE_REQUEST, &[1, 0, 0, 0, 2]),
            "truncated",
        ),
        (raw(PKT_TYPE_CLOSE_CHANNEL, &[0, 0]), "truncated"),
        // A string longer than what is left.
        (
            raw(PKT_TYPE_CHANNEL_CREATE, &channel[..channel.len() - 1]),
            "truncated",
        ),
        // One byte too many.
        (
            raw(PKT_TYPE_HANDSHAKE_REQUEST, &[1, 0, 0, 0, 2, 0, 0]),
            "trailing_bytes",
        ),
        (raw(PKT_TYPE_KEEPALIVE, &[0]), "trailing_bytes"),
        (
            {
                let mut c = channel.clone();
                c.push(0);
                raw(PKT_TYPE_CHANNEL_CREATE, &c)
            },
            "trailing_bytes",
        ),
        // DATA whose cbDataLen disagrees with the packet length.
        (raw(PKT_TYPE_DATA, &[3, 0, 1, 2]), "truncated"),
        (raw(PKT_TYPE_DATA, &[1, 0, 1, 2]), "trailing_bytes"),
        // fieldsPresent bits MS-TSGU does not define (or this gateway does not speak).
        (
            raw(PKT_TYPE_TUNNEL_CREATE, &[0, 0, 0, 0, 4, 0, 0, 0]),
            "unknown_fields",
        ),
        (raw(PKT_TYPE_TUNNEL_AUTH, &[2, 0, 0, 0]), "unknown_fields"),
        (
            raw(PKT_TYPE_TUNNEL_RESPONSE, &[0, 0, 0, 0, 0, 0, 4, 0, 0, 0]),
            "unknown_fields",
        ),
        // Strings: odd byte count, a NUL inside, an unpaired surrogate.
        (
            raw(PKT_TYPE_TUNNEL_AUTH, &[0, 0, 3, 0, b'a', 0, 0]),
            "bad_string",
        ),
        (
            raw(PKT_TYPE_TUNNEL_AUTH, &[0, 0, 6, 0, b'a', 0, 0, 0, b'b', 0]),
            "bad_string",
        ),
        (
            raw(PKT_TYPE_TUNNEL_AUTH, &[0, 0, 2, 0, 0x00, 0xD8]),
            "bad_string",
        ),
        // No resource, or more than MS-TSGU allows.
        (
            raw(PKT_TYPE_CHANNEL_CREATE, &[0, 0, 0x3D, 0x0D, 3, 0]),
            "out_of_range",
        ),
        (
            raw(PKT_TYPE_CHANNEL_CREATE, &[51, 0, 0x3D, 0x0D, 3, 0]),
            "out_of_range",
        ),
        (
            raw(PKT_TYPE_CHANNEL_CREATE, &[1, 4, 0x3D, 0x0D, 3, 0]),
            "out_of_range",
        ),
    ];
    for (bytes, reason) in cases {
        let e = decode_all(&bytes).expect_err(reason);
        assert_eq!(e.reason(), reason, "{bytes:02x?}: {e}");
        assert_eq!(
            packet::decode_packet(&bytes).map_err(|e| e.reason()),
            Err(reason)
        );
    }
    // The well-formed one, for contrast.
    assert!(decode_all(&raw(PKT_TYPE_CHANNEL_CREATE, &channel)).is_ok());
}

#[test]
fn a_string_without_its_nul_and_an_empty_one_are_read() {
    // The NUL terminator is what clients send; a string without it reads the same.
    let p = decode_all(&raw(PKT_TYPE_TUNNEL_AUTH, &[0, 0, 4, 0, b'p', 0, b'c', 0])).unwrap();
    assert_eq!(
        p,
        [Packet::TunnelAuth(TunnelAuth {
            client_name: "pc".into(),
            statement_of_health: None
        })]
    );
    let p = decode_all(&raw(PKT_TYPE_TUNNEL_AUTH, &[0, 0, 0, 0])).unwrap();
    assert_eq!(
        p,
        [Packet::TunnelAuth(TunnelAuth {
            client_name: String::new(),
            statement_of_health: None
        })]
    );
}

#[test]
fn decode_packet_takes_exactly_one_packet() {
    let mut two = raw(PKT_TYPE_KEEPALIVE, &[]);
    two.extend_from_slice(&raw(PKT_TYPE_KEEPALIVE, &[]));
    assert_eq!(
        packet::decode_packet(&two),
        Err(PacketError::LengthMismatch {
            length: 8,
            actual: 16
        })
    );
    assert_eq!(
        packet::decode_packet(&two[..7]).map_err(|e| e.reason()),
        Err("truncated")
    );
    assert_eq!(packet::decode_packet(&two[..8]), Ok(Packet::Keepalive));
}

#[test]
fn after_an_error_the_decoder_refuses_everything() {
    let mut d = Decoder::new();
    let bad = raw(0xE, &[]);
    let first = d.decode(&mut &bad[..]).unwrap_err();
    let good = raw(PKT_TYPE_KEEPALIVE, &[]);
    assert_eq!(d.decode(&mut &good[..]), Err(first));
    assert_eq!(d.buffered(), 0);
}

#[test]
fn encoding_refuses_what_its_fields_cannot_hold() {
    let long = "x".repeat(40_000);
    let before = vec![0xAA];
    let mut out = before.clone();
    let too_long = Packet::TunnelAuth(TunnelAuth {
        client_name: long,
        statement_of_health: None,
    });
    assert!(too_long.encode(&mut out).is_err());
    assert_eq!(out, before, "nothing half-written");
    // Within its u16 length but over the control-packet bound.
    let over_bound = Packet::TunnelAuth(TunnelAuth {
        client_name: "x".repeat(MAX_CONTROL_PACKET_BYTES / 2),
        statement_of_health: None,
    });
    assert!(over_bound.to_bytes().is_err());
    assert!(
        Packet::Data(vec![0; MAX_DATA_PAYLOAD_BYTES + 1])
            .to_bytes()
            .is_err()
    );
    assert!(
        Packet::TunnelAuth(TunnelAuth {
            client_name: "a\0b".into(),
            statement_of_health: None
        })
        .to_bytes()
        .is_err()
    );
    assert!(
        Packet::ChannelCreate(ChannelCreate {
            resources: vec![],
            alternate_resources: vec![],
            port: 1,
            protocol: 3
        })
        .to_bytes()
        .is_err()
    );
}

#[test]
fn encode_data_splits_long_payloads_into_full_packets() {
    let payload: Vec<u8> = (0..MAX_DATA_PAYLOAD_BYTES * 2 + 5)
        .map(|i| (i % 251) as u8)
        .collect();
    let mut out = Vec::new();
    packet::encode_data(&payload, &mut out);
    let packets = decode_all(&out).unwrap();
    let sizes: Vec<usize> = packets
        .iter()
        .map(|p| match p {
            Packet::Data(d) => d.len(),
            other => panic!("{other:?}"),
        })
        .collect();
    assert_eq!(sizes, [MAX_DATA_PAYLOAD_BYTES, MAX_DATA_PAYLOAD_BYTES, 5]);
    let joined: Vec<u8> = packets
        .into_iter()
        .flat_map(|p| match p {
            Packet::Data(d) => d,
            _ => unreachable!(),
        })
        .collect();
    assert_eq!(joined, payload);
    let mut empty = Vec::new();
    packet::encode_data(&[], &mut empty);
    assert!(empty.is_empty());
}

#[test]
fn debug_output_never_shows_the_access_token() {
    let p = tunnel_create(Some(TOKEN));
    let shown = format!("{p:?}");
    assert!(!shown.contains("AAAA"), "{shown}");
    assert!(
        shown.contains(&TOKEN.chars().count().to_string()),
        "{shown}"
    );
}

/// Rule AD2: a tunnel whose client signed in over HTTP needs no access
/// token; one it sends anyway is checked as any other's. A tunnel that did
/// not sign in still needs one.
#[test]
fn a_tunnel_signed_in_over_http_goes_without_an_access_token() {
    let mut s = Server::signed_in(ServerConfig::default());
    let Action::Send(Packet::HandshakeResponse(r)) = s.receive(handshake(0)).unwrap() else {
        panic!("a handshake response")
    };
    assert_eq!((r.error_code, r.extended_auth), (S_OK, 0));
    let Action::Send(answer) = s.receive(tunnel_create(None)).unwrap() else {
        panic!("a tunnel response")
    };
    assert_eq!(code_of(&answer), (PKT_TYPE_TUNNEL_RESPONSE, S_OK));
    assert_eq!(s.state(), State::TunnelCreated);
    assert!(matches!(
        s.receive(tunnel_auth()).unwrap(),
        Action::Send(Packet::TunnelAuthResponse(_))
    ));
    assert!(matches!(
        s.receive(channel_create("pool", 3)).unwrap(),
        Action::OpenChannel { .. }
    ));

    // Signed in, with a token as well: the token is checked.
    let mut s = Server::signed_in(ServerConfig::default());
    s.receive(handshake(HTTP_EXTENDED_AUTH_PAA)).unwrap();
    assert_eq!(
        s.receive(tunnel_create(Some(TOKEN))).unwrap(),
        Action::CheckToken {
            token: TOKEN.into()
        }
    );

    // Not signed in: no token offered is refused, as before.
    let mut s = Server::new(ServerConfig::default());
    let refusal = s.receive(handshake(0)).unwrap_err();
    assert_eq!(refusal.code, E_PROXY_UNSUPPORTED_AUTHENTICATION_METHOD);
    let mut s = Server::new(ServerConfig::default());
    s.receive(handshake(HTTP_EXTENDED_AUTH_PAA)).unwrap();
    let refusal = s.receive(tunnel_create(None)).unwrap_err();
    assert_eq!(refusal.code, E_PROXY_COOKIE_BADPACKET);
}
