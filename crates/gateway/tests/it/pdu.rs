//! The first-PDU parser on bytes real clients sent, and on everything a
//! hostile or broken client could send instead (rule R6).

use std::time::Duration;

use gateway::pdu::{
    self, ConnectionRequest, HandshakeError, MAX_FIRST_PDU_BYTES, NegotiationRequest, PduError,
    Routing,
};
use tokio::io::AsyncWriteExt;

use crate::{build_pdu, fixture, fixtures};

fn parse_fixture(name: &str) -> ConnectionRequest {
    pdu::parse(&fixture(name)).unwrap_or_else(|e| panic!("{name}: {e}"))
}

const TLS_AND_HYBRID: Option<NegotiationRequest> = Some(NegotiationRequest {
    flags: 0,
    requested_protocols: 0x3, // PROTOCOL_SSL | PROTOCOL_HYBRID
});

#[test]
fn xfreerdp_user_cookie() {
    let r = parse_fixture("xfreerdp-2.11.7-user.bin");
    assert_eq!(r.routing, Some(Routing::User("alice".into())));
    assert_eq!(r.negotiation, TLS_AND_HYBRID);
    assert_eq!((r.dst_ref, r.src_ref, r.correlation_id), (0, 0, None));
}

#[test]
fn xfreerdp_load_balance_info_names_the_pool_and_no_user() {
    let r = parse_fixture("xfreerdp-2.11.7-loadbalanceinfo.bin");
    assert_eq!(r.routing, Some(Routing::Pool("farm".into())));
    assert_eq!(r.negotiation, TLS_AND_HYBRID);
}

#[test]
fn xfreerdp_standard_rdp_security_has_no_negotiation() {
    let r = parse_fixture("xfreerdp-2.11.7-sec-rdp-upn.bin");
    assert_eq!(r.routing, Some(Routing::User("bob@contoso.com".into())));
    assert_eq!(r.negotiation, None);
}

#[test]
fn xfreerdp_msts_redirection_cookie() {
    let r = parse_fixture("xfreerdp-2.11.7-msts-redirect.bin");
    assert_eq!(
        r.routing,
        Some(Routing::Redirect(gateway::pdu::RedirectToken::unsigned(
            "127.0.0.1:3389".parse().expect("addr")
        )))
    );
}

#[test]
fn rdesktop_user_cookie_with_and_without_negotiation() {
    let r = parse_fixture("rdesktop-1.9.0-user.bin");
    assert_eq!(r.routing, Some(Routing::User("alice".into())));
    assert_eq!(r.negotiation, TLS_AND_HYBRID);
    let r = parse_fixture("rdesktop-1.9.0-rdp4.bin");
    assert_eq!(r.routing, Some(Routing::User("alice".into())));
    assert_eq!(r.negotiation, None);
}

#[test]
fn mstsc_style_padded_token_and_correlation_info() {
    // mstsc pads the token to an even length with a space, offers
    // SSL | HYBRID | HYBRID_EX, and appends RDP_NEG_CORRELATION_INFO.
    let id = [0x11; 16];
    let bytes = build_pdu(
        Some(b"tsv://MS Terminal Services Plugin.1.pool7 "),
        Some((0x08, 0x0b)),
        Some(id),
    );
    let r = pdu::parse(&bytes).expect("parses");
    assert_eq!(r.routing, Some(Routing::Pool("pool7".into())));
    assert_eq!(
        r.negotiation,
        Some(NegotiationRequest {
            flags: 0x08,
            requested_protocols: 0x0b
        })
    );
    assert_eq!(r.correlation_id, Some(id));
}

#[test]
fn no_token_at_all() {
    let r = pdu::parse(&build_pdu(None, Some((0, 1)), None)).expect("parses");
    assert_eq!(r.routing, None);
    let r = pdu::parse(&build_pdu(None, None, None)).expect("the bare 11-byte request parses");
    assert_eq!((r.routing, r.negotiation), (None, None));
}

/// Each case: the bytes and the reason it is refused with.
#[test]
fn malformed_first_pdus_are_refused_with_a_reason() {
    let good = fixture("xfreerdp-2.11.7-user.bin");
    let with = |i: usize, b: u8| {
        let mut v = good.clone();
        v[i] = b;
        v
    };
    let cases: Vec<(&str, Vec<u8>, &str)> = vec![
        ("empty", vec![], "truncated"),
        (
            "TLS ClientHello",
            vec![0x16, 3, 1, 0, 0xc8, 1, 0, 0, 0xc4],
            "tpkt_version",
        ),
        ("HTTP", b"GET / HTTP/1.1\r\n\r\n".to_vec(), "tpkt_version"),
        ("TPKT version 2", with(0, 2), "tpkt_version"),
        (
            "TPKT length 7",
            vec![3, 0, 0, 7, 2, 0xE0, 0],
            "tpkt_too_short",
        ),
        ("TPKT length 260", with(2, 1).tap(|v| v[3] = 4), "oversized"),
        (
            "TPKT length 65535",
            with(2, 0xff).tap(|v| v[3] = 0xff),
            "oversized",
        ),
        (
            "trailing byte",
            good.iter().copied().chain([0]).collect(),
            "tpkt_length_mismatch",
        ),
        ("LI too small", with(4, 0x25), "length_indicator_mismatch"),
        ("LI too large", with(4, 0x27), "length_indicator_mismatch"),
        (
            "Connection Confirm code",
            with(5, 0xD0),
            "not_connection_request",
        ),
        ("Data TPDU code", with(5, 0xF0), "not_connection_request"),
        ("class 4", with(10, 0x40), "not_class_0"),
        (
            "cookie without CR LF",
            with(0x21, b'x').tap(|v| v[0x22] = b'y'),
            "unterminated_token",
        ),
        ("NUL in cookie", with(0x1d, 0), "token_not_ascii"),
        ("UTF-8 in cookie", with(0x1d, 0xc3), "token_not_ascii"),
        (
            "unknown cookie",
            build_pdu(Some(b"Cookie: sessionid=1"), None, None),
            "unknown_token",
        ),
        (
            "lower-case cookie",
            build_pdu(Some(b"cookie: mstshash=alice"), None, None),
            "unknown_token",
        ),
        (
            "other routing token",
            build_pdu(Some(b"tsv://VMResource.1.x"), None, None),
            "unknown_token",
        ),
        (
            "empty line",
            build_pdu(Some(b""), None, None),
            "unknown_token",
        ),
        (
            "empty user",
            build_pdu(Some(b"Cookie: mstshash="), None, None),
            "empty_user",
        ),
        (
            "blank user",
            build_pdu(Some(b"Cookie: mstshash=  "), None, None),
            "empty_user",
        ),
        (
            "empty pool",
            build_pdu(Some(b"tsv://MS Terminal Services Plugin.1."), None, None),
            "invalid_pool",
        ),
        (
            "pool with a space",
            build_pdu(Some(b"tsv://MS Terminal Services Plugin.1.a b"), None, None),
            "invalid_pool",
        ),
        (
            "pool with a slash",
            build_pdu(
                Some(b"tsv://MS Terminal Services Plugin.1.../x"),
                None,
                None,
            ),
            "invalid_pool",
        ),
        (
            "msts without port",
            build_pdu(Some(b"Cookie: msts=16777343"), None, None),
            "invalid_redirect",
        ),
        (
            "msts not decimal",
            build_pdu(Some(b"Cookie: msts=0x7f.15629.0000"), None, None),
            "invalid_redirect",
        ),
        (
            "msts ip overflow",
            build_pdu(Some(b"Cookie: msts=4294967296.15629.0000"), None, None),
            "invalid_redirect",
        ),
        ("NEG_REQ length 9", with(0x25, 9), "invalid_negotiation"),
        (
            "NEG_REQ cut short",
            {
                let mut v = build_pdu(Some(b"Cookie: mstshash=a"), None, None);
                v.extend_from_slice(&[1, 0, 8]);
                fix_lengths(v)
            },
            "invalid_negotiation",
        ),
        ("NEG_RSP type", with(0x23, 0x02), "invalid_negotiation"),
        (
            "correlation without NEG_REQ",
            build_pdu(None, None, Some([1; 16])),
            "invalid_negotiation",
        ),
        (
            "correlation length 35",
            build_pdu(None, Some((8, 3)), Some([1; 16])).tap(|v| {
                let i = v.len() - 34;
                v[i] = 35;
            }),
            "invalid_correlation",
        ),
        (
            "correlation cut short",
            {
                let mut v = build_pdu(None, Some((8, 3)), None);
                v.extend_from_slice(&[6, 0, 36, 0, 1, 2]);
                fix_lengths(v)
            },
            "invalid_correlation",
        ),
        (
            "garbage after NEG_REQ",
            {
                let mut v = good.clone();
                v.extend_from_slice(b"xyz");
                fix_lengths(v)
            },
            "trailing_bytes",
        ),
        (
            "garbage after correlation",
            {
                let mut v = build_pdu(None, Some((8, 3)), Some([1; 16]));
                v.push(0);
                fix_lengths(v)
            },
            "trailing_bytes",
        ),
    ];
    for (what, bytes, reason) in cases {
        match pdu::parse(&bytes) {
            Ok(r) => panic!("{what}: accepted as {r:?}"),
            Err(e) => {
                assert_eq!(e.reason(), reason, "{what}: {e}");
                assert!(!e.to_string().is_empty());
            }
        }
    }
}

/// Sets the TPKT length and the length indicator to the buffer's size.
fn fix_lengths(mut v: Vec<u8>) -> Vec<u8> {
    let len = v.len();
    v[2..4].copy_from_slice(&(len as u16).to_be_bytes());
    v[4] = (len - 5) as u8;
    v
}

trait Tap: Sized {
    fn tap(self, f: impl FnOnce(&mut Self)) -> Self;
}

impl Tap for Vec<u8> {
    fn tap(mut self, f: impl FnOnce(&mut Self)) -> Self {
        f(&mut self);
        self
    }
}

#[test]
fn every_truncation_of_every_fixture_is_refused() {
    for (name, bytes) in fixtures() {
        for cut in 0..bytes.len() {
            let e = pdu::parse(&bytes[..cut]).expect_err(&format!("{name} cut at {cut}"));
            assert_eq!(e.reason(), "truncated", "{name} cut at {cut}: {e}");
        }
    }
}

#[test]
fn the_longest_possible_pdu_parses_and_one_byte_more_does_not() {
    // 259 bytes: a cookie line that fills the length indicator's 254 bytes.
    let user = "u".repeat(254 - 6 - "Cookie: mstshash=".len() - 2);
    let line = format!("Cookie: mstshash={user}");
    let bytes = build_pdu(Some(line.as_bytes()), None, None);
    assert_eq!(bytes.len(), MAX_FIRST_PDU_BYTES);
    assert_eq!(
        pdu::parse(&bytes).expect("parses").routing,
        Some(Routing::User(user))
    );
    let mut longer = bytes.clone();
    longer.insert(20, b'u');
    let len = longer.len() as u16;
    longer[2..4].copy_from_slice(&len.to_be_bytes());
    assert_eq!(pdu::parse(&longer), Err(PduError::Oversized(260)));
}

// From a socket.

#[tokio::test]
async fn reads_exactly_the_first_pdu_and_leaves_the_rest() {
    let first = fixture("xfreerdp-2.11.7-user.bin");
    let mut stream: Vec<u8> = first.clone();
    stream.extend_from_slice(b"\x16\x03\x01 TLS follows");
    let mut reader = stream.as_slice();
    let (bytes, r) = pdu::read_first_pdu(&mut reader, Duration::from_secs(1))
        .await
        .expect("reads");
    assert_eq!(bytes, first);
    assert_eq!(r.routing, Some(Routing::User("alice".into())));
    assert_eq!(reader, b"\x16\x03\x01 TLS follows");
}

#[tokio::test(start_paused = true)]
async fn a_slow_client_times_out() {
    let (mut client, mut server) = tokio::io::duplex(1024);
    let first = fixture("xfreerdp-2.11.7-user.bin");
    client.write_all(&first[..20]).await.expect("write");
    // The client never sends the rest and never closes.
    let e = pdu::read_first_pdu(&mut server, pdu::HANDSHAKE_TIMEOUT)
        .await
        .expect_err("times out");
    assert!(matches!(e, HandshakeError::Timeout(_)), "{e}");
    assert_eq!(e.reason(), "timeout");
    drop(client);
}

#[tokio::test(start_paused = true)]
async fn a_trickling_client_still_times_out() {
    // One byte a second: each read makes progress, the whole does not finish.
    let (mut client, mut server) = tokio::io::duplex(1024);
    let first = fixture("xfreerdp-2.11.7-user.bin");
    tokio::spawn(async move {
        for b in first {
            if client.write_all(&[b]).await.is_err() {
                return;
            }
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
    });
    let e = pdu::read_first_pdu(&mut server, pdu::HANDSHAKE_TIMEOUT)
        .await
        .expect_err("times out");
    assert_eq!(e.reason(), "timeout", "{e}");
}

#[tokio::test(start_paused = true)]
async fn an_oversized_length_is_refused_before_the_body_is_read() {
    let (mut client, mut server) = tokio::io::duplex(1024);
    // A header announcing 64 KiB, then silence: refused at once, not after the timeout.
    client.write_all(&[3, 0, 0xff, 0xff]).await.expect("write");
    let started = tokio::time::Instant::now();
    let e = pdu::read_first_pdu(&mut server, pdu::HANDSHAKE_TIMEOUT)
        .await
        .expect_err("refused");
    assert_eq!(e.reason(), "oversized", "{e}");
    assert!(started.elapsed() < pdu::HANDSHAKE_TIMEOUT);
    drop(client);
}

#[tokio::test]
async fn a_client_that_closes_early_is_refused() {
    let first = fixture("rdesktop-1.9.0-user.bin");
    for cut in [0, 3, 4, 11, first.len() - 1] {
        let mut reader = &first[..cut];
        let e = pdu::read_first_pdu(&mut reader, Duration::from_secs(1))
            .await
            .expect_err("refused");
        assert!(
            matches!(e, HandshakeError::Closed { got } if got == cut),
            "cut {cut}: {e}"
        );
        assert_eq!(e.reason(), "closed");
    }
}
