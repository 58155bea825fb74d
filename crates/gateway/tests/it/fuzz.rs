//! Property tests in the spirit of the cargo-fuzz target
//! (`crates/gateway/fuzz`), run with every `cargo test`: random bytes and
//! mutated real first PDUs never panic the parser, whatever parses fits
//! the bounds, reading from a socket agrees with parsing, and every PDU a
//! client could build parses back to what was put in.

use std::time::Duration;

use gateway::pdu::{self, MAX_FIRST_PDU_BYTES, NegotiationRequest, Routing};
use proptest::prelude::*;

use crate::{build_pdu, fixtures};

/// What must hold for any input at all.
fn check_any(bytes: &[u8]) -> Result<(), TestCaseError> {
    if pdu::parse(bytes).is_ok() {
        prop_assert!(bytes.len() <= MAX_FIRST_PDU_BYTES);
        prop_assert_eq!(
            usize::from(u16::from_be_bytes([bytes[2], bytes[3]])),
            bytes.len()
        );
        prop_assert_eq!(usize::from(bytes[4]) + 5, bytes.len());
    }
    // The socket reader takes exactly the announced PDU and agrees with parse.
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .expect("runtime");
    let read = runtime.block_on(async {
        let mut reader = bytes;
        pdu::read_first_pdu(&mut reader, Duration::from_secs(1)).await
    });
    if let Ok((taken, request)) = read {
        prop_assert!(bytes.starts_with(&taken));
        prop_assert_eq!(pdu::parse(&taken), Ok(request));
    }
    Ok(())
}

#[derive(Clone, Debug)]
enum Mutation {
    Set(usize, u8),
    Insert(usize, u8),
    Remove(usize),
    Truncate(usize),
    /// Keeps the TPKT length and the length indicator consistent with the
    /// new size, so the mutation reaches the deeper fields.
    FixLengths,
}

fn mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        4 => (any::<usize>(), any::<u8>()).prop_map(|(i, b)| Mutation::Set(i, b)),
        2 => (any::<usize>(), any::<u8>()).prop_map(|(i, b)| Mutation::Insert(i, b)),
        2 => any::<usize>().prop_map(Mutation::Remove),
        1 => any::<usize>().prop_map(Mutation::Truncate),
        3 => Just(Mutation::FixLengths),
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
        Mutation::FixLengths if n >= 5 => {
            let len = n.min(usize::from(u16::MAX)) as u16;
            bytes[2..4].copy_from_slice(&len.to_be_bytes());
            bytes[4] = (n - 5).min(255) as u8;
        }
        _ => {}
    }
}

/// A pool name as the broker admits them.
fn pool_name() -> impl Strategy<Value = String> {
    "[a-zA-Z0-9][a-zA-Z0-9._-]{0,40}"
}

/// A user as clients send them: printable ASCII, not ending in a space.
fn user_name() -> impl Strategy<Value = String> {
    "[!-~][ -~]{0,60}[!-~]|[!-~]"
}

#[derive(Clone, Debug)]
enum Line {
    User(String),
    Pool(String),
    Redirect(std::net::SocketAddrV4),
}

fn line() -> impl Strategy<Value = Option<(Line, bool)>> {
    let l = prop_oneof![
        user_name().prop_map(Line::User),
        pool_name().prop_map(Line::Pool),
        (any::<[u8; 4]>(), 1u16..)
            .prop_map(|(ip, port)| Line::Redirect(std::net::SocketAddrV4::new(ip.into(), port))),
    ];
    // The bool: pad with a space, as mstsc does to reach an even length.
    proptest::option::of((l, any::<bool>()))
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]

    #[test]
    fn random_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..400)) {
        check_any(&bytes)?;
    }

    #[test]
    fn random_bytes_behind_a_valid_header_never_panic(
        body in proptest::collection::vec(any::<u8>(), 6..254)
    ) {
        // Valid TPKT and length indicator, so the fuzz reaches the fields.
        let mut bytes = vec![3, 0, 0, 0, body.len() as u8, 0xE0, 0, 0, 0, 0, 0];
        bytes.extend_from_slice(&body[6..]);
        let len = bytes.len() as u16;
        bytes[2..4].copy_from_slice(&len.to_be_bytes());
        bytes[4] = (bytes.len() - 5) as u8;
        check_any(&bytes)?;
    }

    #[test]
    fn mutated_fixtures_never_panic(
        which in any::<usize>(),
        mutations in proptest::collection::vec(mutation(), 1..8),
    ) {
        let all = fixtures();
        let (_, mut bytes) = all[which % all.len()].clone();
        for m in &mutations {
            apply(&mut bytes, m);
        }
        check_any(&bytes)?;
    }

    #[test]
    fn whatever_a_client_builds_parses_back(
        line in line(),
        neg in proptest::option::of((any::<u8>(), any::<u32>())),
        correlation in proptest::option::of(any::<[u8; 16]>()),
    ) {
        let text = line.as_ref().map(|(l, pad)| {
            let mut t = match l {
                Line::User(u) => format!("Cookie: mstshash={u}"),
                Line::Pool(p) => format!("tsv://MS Terminal Services Plugin.1.{p}"),
                Line::Redirect(a) => pdu::msts_cookie(*a),
            };
            if *pad {
                t.push(' ');
            }
            t
        });
        let correlation = if neg.is_some() { correlation } else { None };
        let bytes = build_pdu(text.as_deref().map(str::as_bytes), neg, correlation);
        prop_assume!(bytes.len() <= MAX_FIRST_PDU_BYTES);
        let r = pdu::parse(&bytes);
        prop_assert!(r.is_ok(), "{:?} refused: {:?}", text, r);
        let r = r.expect("checked");
        let want = line.map(|(l, _)| match l {
            Line::User(u) => Routing::User(u),
            Line::Pool(p) => Routing::Pool(p),
            Line::Redirect(a) => Routing::Redirect(pdu::RedirectToken::unsigned(a)),
        });
        prop_assert_eq!(r.routing, want);
        prop_assert_eq!(
            r.negotiation,
            neg.map(|(flags, requested_protocols)| NegotiationRequest { flags, requested_protocols })
        );
        prop_assert_eq!(r.correlation_id, correlation);
    }
}
