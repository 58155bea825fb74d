//! Property tests of the MS-TSGU decoder and state machine, in the spirit
//! of the cargo-fuzz target `tsgu_stream` (`crates/gateway/fuzz`), run with
//! every `cargo test`: any split of a stream decodes to the same packets
//! as the whole, whatever encodes decodes back to itself, and no bytes and
//! no packet order ever panic or grow the decoder past its bound.

use gateway::tsgu::packet::{self, *};
use gateway::tsgu::server::{Action, Server, ServerConfig, State};
use gateway::tsgu::{Decoder, Packet, PacketError};
use proptest::prelude::*;

use crate::fixture_in;

/// Decodes `stream` fed in pieces cut at `cuts` (positions, taken modulo
/// the length): the packets, then the error that stopped the stream, if any.
fn decode_split(stream: &[u8], cuts: &[usize]) -> (Vec<Packet>, Option<PacketError>) {
    let mut points: Vec<usize> = cuts.iter().map(|c| c % (stream.len() + 1)).collect();
    points.push(0);
    points.push(stream.len());
    points.sort_unstable();
    let mut decoder = Decoder::new();
    let mut packets = Vec::new();
    for piece in points.windows(2) {
        let mut input = &stream[piece[0]..piece[1]];
        loop {
            match decoder.decode(&mut input) {
                Ok(Some(p)) => packets.push(p),
                Ok(None) => break,
                Err(e) => return (packets, Some(e)),
            }
            assert!(decoder.buffered() <= MAX_PACKET_BYTES);
        }
        assert!(input.is_empty(), "None with input left");
        assert!(decoder.buffered() <= MAX_PACKET_BYTES);
    }
    (packets, None)
}

fn golden_streams() -> [Vec<u8>; 2] {
    ["websocket", "legacy"].map(|t| fixture_in("tsgu", &format!("xfreerdp-2.11.7-{t}-stream.bin")))
}

/// Strings as clients and gateways write them: any text without NUL,
/// including characters outside the BMP (surrogate pairs in UTF-16).
fn text() -> impl Strategy<Value = String> {
    "[a-zA-Z0-9 ._:\\\\-\u{e9}\u{20ac}\u{1f600}]{0,24}"
}

fn blob() -> impl Strategy<Value = Vec<u8>> {
    proptest::collection::vec(any::<u8>(), 0..64)
}

/// Any packet that fits its length fields and bounds.
fn any_packet() -> impl Strategy<Value = Packet> {
    prop_oneof![
        (any::<u8>(), any::<u8>(), any::<u16>(), any::<u16>()).prop_map(|(a, b, c, d)| {
            Packet::HandshakeRequest(HandshakeRequest {
                version_major: a,
                version_minor: b,
                client_version: c,
                extended_auth: d,
            })
        }),
        (
            any::<u32>(),
            any::<u8>(),
            any::<u8>(),
            any::<u16>(),
            any::<u16>()
        )
            .prop_map(
                |(e, a, b, c, d)| Packet::HandshakeResponse(HandshakeResponse {
                    error_code: e,
                    version_major: a,
                    version_minor: b,
                    server_version: c,
                    extended_auth: d,
                })
            ),
        (
            any::<u32>(),
            any::<Option<u64>>(),
            proptest::option::of(text())
        )
            .prop_map(
                |(capabilities, reauth_context, paa_cookie)| Packet::TunnelCreate(TunnelCreate {
                    capabilities,
                    reauth_context,
                    paa_cookie,
                })
            ),
        (
            any::<u16>(),
            any::<u32>(),
            any::<Option<u32>>(),
            any::<Option<u32>>(),
            proptest::option::of(text())
        )
            .prop_map(
                |(v, s, id, caps, msg)| Packet::TunnelResponse(TunnelResponse {
                    server_version: v,
                    status_code: s,
                    tunnel_id: id,
                    capabilities: caps,
                    consent_message: msg,
                })
            ),
        (text(), proptest::option::of(blob())).prop_map(|(client_name, soh)| {
            Packet::TunnelAuth(TunnelAuth {
                client_name,
                statement_of_health: soh,
            })
        }),
        (
            any::<u32>(),
            any::<Option<u32>>(),
            any::<Option<u32>>(),
            proptest::option::of(blob())
        )
            .prop_map(
                |(e, r, i, s)| Packet::TunnelAuthResponse(TunnelAuthResponse {
                    error_code: e,
                    redirection_flags: r,
                    idle_timeout_minutes: i,
                    soh_response: s,
                })
            ),
        (
            proptest::collection::vec(text(), 1..4),
            proptest::collection::vec(text(), 0..=MAX_ALTERNATE_RESOURCES),
            any::<u16>(),
            any::<u16>()
        )
            .prop_map(|(resources, alternate_resources, port, protocol)| {
                Packet::ChannelCreate(ChannelCreate {
                    resources,
                    alternate_resources,
                    port,
                    protocol,
                })
            }),
        (
            any::<u32>(),
            any::<Option<u32>>(),
            any::<Option<u16>>(),
            proptest::option::of(blob())
        )
            .prop_map(
                |(e, id, port, cookie)| Packet::ChannelResponse(ChannelResponse {
                    error_code: e,
                    channel_id: id,
                    udp_port: port,
                    authn_cookie: cookie,
                })
            ),
        proptest::collection::vec(any::<u8>(), 0..300).prop_map(Packet::Data),
        Just(Packet::Keepalive),
        any::<u32>().prop_map(|status_code| Packet::CloseChannel { status_code }),
        any::<u32>().prop_map(|status_code| Packet::CloseChannelResponse { status_code }),
    ]
}

/// What must hold for any bytes at all.
fn check_any(bytes: &[u8], cuts: &[usize]) -> Result<(), TestCaseError> {
    // Split or whole, the same packets and the same error.
    prop_assert_eq!(decode_split(bytes, cuts), decode_split(bytes, &[]));
    // What decode_packet accepts is a packet whose own encoding reads back
    // the same (reserved fields and a missing NUL are not kept, so the
    // bytes may differ; the packet may not).
    if let Ok(p) = packet::decode_packet(bytes) {
        let again = p
            .to_bytes()
            .map_err(|e| TestCaseError::fail(e.to_string()))?;
        prop_assert_eq!(packet::decode_packet(&again), Ok(p));
    }
    Ok(())
}

#[derive(Clone, Debug)]
enum Mutation {
    Set(usize, u8),
    Insert(usize, u8),
    Remove(usize),
    Truncate(usize),
}

fn mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        4 => (any::<usize>(), any::<u8>()).prop_map(|(i, b)| Mutation::Set(i, b)),
        2 => (any::<usize>(), any::<u8>()).prop_map(|(i, b)| Mutation::Insert(i, b)),
        2 => any::<usize>().prop_map(Mutation::Remove),
        1 => any::<usize>().prop_map(Mutation::Truncate),
    ]
}

fn apply(bytes: &mut Vec<u8>, m: &Mutation) {
    let n = bytes.len();
    match *m {
        Mutation::Set(i, b) if n > 0 => bytes[i % n] = b,
        Mutation::Insert(i, b) => bytes.insert(i % (n + 1), b),
        Mutation::Remove(i) if n > 0 => {
            bytes.remove(i % n);
        }
        Mutation::Truncate(i) => bytes.truncate(i % (n + 1)),
        _ => {}
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 1000, ..ProptestConfig::default() })]

    #[test]
    fn golden_streams_decode_the_same_split_anywhere(
        cuts in proptest::collection::vec(any::<usize>(), 0..40)
    ) {
        for stream in golden_streams() {
            let (whole, error) = decode_split(&stream, &[]);
            prop_assert_eq!(error, None);
            prop_assert_eq!(whole.len(), 7);
            prop_assert_eq!(decode_split(&stream, &cuts), (whole, None));
        }
    }

    #[test]
    fn golden_streams_decode_the_same_one_byte_at_a_time(_x in Just(())) {
        for stream in golden_streams() {
            let every: Vec<usize> = (0..stream.len()).collect();
            prop_assert_eq!(decode_split(&stream, &every), decode_split(&stream, &[]));
        }
    }

    #[test]
    fn whatever_encodes_decodes_back(
        packets in proptest::collection::vec(any_packet(), 1..8),
        cuts in proptest::collection::vec(any::<usize>(), 0..20),
    ) {
        let mut stream = Vec::new();
        for p in &packets {
            let before = stream.len();
            p.encode(&mut stream).map_err(|e| TestCaseError::fail(e.to_string()))?;
            prop_assert_eq!(packet::decode_packet(&stream[before..]), Ok(p.clone()));
        }
        prop_assert_eq!(decode_split(&stream, &cuts), (packets, None));
    }

    #[test]
    fn random_bytes_never_panic(
        bytes in proptest::collection::vec(any::<u8>(), 0..400),
        cuts in proptest::collection::vec(any::<usize>(), 0..10),
    ) {
        check_any(&bytes, &cuts)?;
    }

    #[test]
    fn random_bodies_behind_a_valid_header_never_panic(
        packet_type in prop::sample::select(vec![
            PKT_TYPE_HANDSHAKE_REQUEST, PKT_TYPE_HANDSHAKE_RESPONSE, PKT_TYPE_TUNNEL_CREATE,
            PKT_TYPE_TUNNEL_RESPONSE, PKT_TYPE_TUNNEL_AUTH, PKT_TYPE_TUNNEL_AUTH_RESPONSE,
            PKT_TYPE_CHANNEL_CREATE, PKT_TYPE_CHANNEL_RESPONSE, PKT_TYPE_DATA,
            PKT_TYPE_KEEPALIVE, PKT_TYPE_CLOSE_CHANNEL, PKT_TYPE_CLOSE_CHANNEL_RESPONSE,
        ]),
        body in proptest::collection::vec(any::<u8>(), 0..120),
        cuts in proptest::collection::vec(any::<usize>(), 0..10),
    ) {
        // A correct header, so the fuzz reaches the fields.
        let mut bytes = packet_type.to_le_bytes().to_vec();
        bytes.extend_from_slice(&[0, 0]);
        bytes.extend_from_slice(&((HEADER_BYTES + body.len()) as u32).to_le_bytes());
        bytes.extend_from_slice(&body);
        check_any(&bytes, &cuts)?;
    }

    #[test]
    fn mutated_golden_streams_never_panic(
        which in any::<bool>(),
        mutations in proptest::collection::vec(mutation(), 1..8),
        cuts in proptest::collection::vec(any::<usize>(), 0..10),
    ) {
        let [websocket, legacy] = golden_streams();
        let mut bytes = if which { websocket } else { legacy };
        for m in &mutations {
            apply(&mut bytes, m);
        }
        check_any(&bytes, &cuts)?;
    }

    #[test]
    fn no_packet_order_panics_the_state_machine(
        packets in proptest::collection::vec(any_packet(), 0..12),
        decisions in proptest::collection::vec(any::<bool>(), 12),
    ) {
        let mut server = Server::new(ServerConfig::default());
        for (p, accept) in packets.into_iter().zip(decisions) {
            let was = server.state();
            let is_data = matches!(p, Packet::Data(_));
            match server.receive(p) {
                Ok(Action::CheckToken { .. }) => {
                    let answer = if accept {
                        server.accept_token(1)
                    } else {
                        server.refuse_token(gateway::tsgu::hresult::E_PROXY_COOKIE_AUTHENTICATION_ACCESS_DENIED)
                    };
                    prop_assert!(answer.is_ok());
                }
                Ok(Action::OpenChannel { resource, .. }) => {
                    prop_assert!(!resource.is_empty());
                    prop_assert!(server.accept_channel(1).is_ok());
                }
                Ok(Action::Relay(_)) => prop_assert_eq!(was, State::Open),
                Ok(Action::Send(answer) | Action::Close { send: Some(answer) }) => {
                    prop_assert!(answer.to_bytes().is_ok(), "{:?}", answer);
                }
                Ok(_) => {}
                Err(refusal) => {
                    prop_assert!(gateway::tsgu::hresult::failed(refusal.code));
                    if let Some(reply) = &refusal.reply {
                        prop_assert!(reply.to_bytes().is_ok(), "{:?}", reply);
                    }
                    prop_assert_eq!(server.state(), State::Closed);
                    // Only an open channel relays.
                    prop_assert!(!(is_data && was == State::Open));
                }
            }
        }
        // A closed tunnel refuses everything.
        if server.state() == State::Closed {
            prop_assert!(server.receive(Packet::Keepalive).is_err());
        }
    }
}
