use super::*;
use proptest::prelude::*;

/// An AS-REQ for alice@EXAMPLE.TEST as MIT `kinit` 1.20 sends it over TCP
/// (its 4-byte length first), captured from a loopback listener.
const MIT_AS_REQ: &[u8] =
    include_bytes!("../../../tests/fixtures/kerberos/mit-kinit-1.20-as-req.bin");

fn as_req() -> Vec<u8> {
    MIT_AS_REQ.to_vec()
}

/// The same request as a TGS-REQ's envelope (`[APPLICATION 12]`,
/// msg-type 12): what the proxy reads of it is the same.
fn tgs_req() -> Vec<u8> {
    let mut m = as_req();
    assert_eq!(m[4], AS_REQ_TAG);
    m[4] = TGS_REQ_TAG;
    // msg-type [2] INTEGER 10 → 12 (`a2 03 02 01 0a`).
    let at = m.windows(5).position(|w| w == [0xa2, 3, 2, 1, 10]).unwrap();
    m[at + 4] = 12;
    m
}

/// DER, written out by hand (independently of the codec under test):
/// one tag, its length, its content.
fn tlv(tag: u8, content: &[u8]) -> Vec<u8> {
    let mut out = vec![tag];
    match content.len() {
        n if n < 0x80 => out.push(n as u8),
        n if n <= 0xff => out.extend([0x81, n as u8]),
        n => out.extend([0x82, (n >> 8) as u8, n as u8]),
    }
    out.extend_from_slice(content);
    out
}

/// A KDC-PROXY-MESSAGE carrying `message`, naming `realm` if any, with a
/// `dclocator-hint` if any.
fn proxy_message(message: &[u8], realm: Option<&str>, hint: Option<u8>) -> Vec<u8> {
    let mut fields = tlv(0xa0, &tlv(0x04, message));
    if let Some(realm) = realm {
        fields.extend(tlv(0xa1, &tlv(0x1b, realm.as_bytes())));
    }
    if let Some(hint) = hint {
        fields.extend(tlv(0xa2, &tlv(0x02, &[hint])));
    }
    tlv(0x30, &fields)
}

#[test]
fn a_real_as_req_is_read_with_its_realm() {
    let body = proxy_message(&as_req(), Some("EXAMPLE.TEST"), None);
    let request = decode(&body).expect("a valid request");
    assert_eq!(request.realm, "EXAMPLE.TEST");
    assert_eq!(request.message, as_req());
    // A hint changes nothing; the realm's case need not match the request's.
    let body = proxy_message(&as_req(), Some("example.test"), Some(0));
    assert_eq!(decode(&body).expect("valid").realm, "example.test");
}

#[test]
fn a_tgs_req_is_read_too() {
    let body = proxy_message(&tgs_req(), Some("EXAMPLE.TEST"), None);
    assert_eq!(decode(&body).expect("valid").message, tgs_req());
}

#[test]
fn a_request_without_a_realm_is_refused() {
    let body = proxy_message(&as_req(), None, None);
    assert_eq!(decode(&body), Err(MessageError::NoRealm));
}

#[test]
fn a_realm_other_than_the_requests_is_refused() {
    let body = proxy_message(&as_req(), Some("OTHER.TEST"), None);
    assert_eq!(
        decode(&body),
        Err(MessageError::RealmMismatch {
            outer: "OTHER.TEST".into(),
            inner: "EXAMPLE.TEST".into()
        })
    );
    for realm in ["", "EXAMPLE TEST", "EXAMPLE.TEST\n"] {
        let body = proxy_message(&as_req(), Some(realm), None);
        assert_eq!(decode(&body), Err(MessageError::BadRealm), "{realm:?}");
    }
    let long = "A".repeat(MAX_REALM_BYTES + 1);
    let body = proxy_message(&as_req(), Some(&long), None);
    assert_eq!(decode(&body), Err(MessageError::BadRealm));
}

#[test]
fn a_length_prefix_that_disagrees_is_refused() {
    let mut message = as_req();
    message[3] += 1;
    let body = proxy_message(&message, Some("EXAMPLE.TEST"), None);
    assert!(matches!(decode(&body), Err(MessageError::Length { .. })));
    // The reserved top bit.
    let mut message = as_req();
    message[0] = 0x80;
    let body = proxy_message(&message, Some("EXAMPLE.TEST"), None);
    assert!(matches!(decode(&body), Err(MessageError::Length { .. })));
    // A message with no room for a prefix, and one that is only a prefix.
    for message in [&[0u8, 0][..], &[0, 0, 0, 0]] {
        let body = proxy_message(message, Some("EXAMPLE.TEST"), None);
        assert!(decode(&body).is_err(), "{message:?}");
    }
}

#[test]
fn a_message_other_than_a_kdc_request_is_refused() {
    // An AP-REQ's tag ([APPLICATION 14]), with the AS-REQ's body.
    let mut message = as_req();
    message[4] = 0x6e;
    let body = proxy_message(&message, Some("EXAMPLE.TEST"), None);
    assert_eq!(decode(&body), Err(MessageError::NotKdcRequest));
    // Junk of the right length.
    let mut junk = vec![0, 0, 0, 8];
    junk.extend([0x6a, 6, 1, 2, 3, 4, 5, 6]);
    let body = proxy_message(&junk, Some("EXAMPLE.TEST"), None);
    assert_eq!(decode(&body), Err(MessageError::NotKdcRequest));
}

#[test]
fn a_body_read_two_ways_is_refused() {
    let body = proxy_message(&as_req(), Some("EXAMPLE.TEST"), None);
    // Trailing bytes.
    let mut trailing = body.clone();
    trailing.push(0);
    assert_eq!(decode(&trailing), Err(MessageError::NotDer));
    // A length in more bytes than it needs (BER, not DER).
    let mut long_form = vec![0x30, 0x82, 0x00, body[2]];
    assert_eq!(body[1], 0x81, "the body's length takes one byte after 0x81");
    long_form.extend_from_slice(&body[3..]);
    assert_eq!(decode(&long_form), Err(MessageError::NotDer));
    // Truncated, at every length.
    for n in 0..body.len() {
        assert!(decode(&body[..n]).is_err(), "{n} bytes");
    }
}

#[test]
fn a_reply_round_trips() {
    let reply = [0, 0, 0, 3, 0x7e, 1, 0];
    let body = encode_reply(&reply);
    let parsed = KdcProxyMessage::from_raw(&body).expect("DER");
    assert_eq!(parsed.kerb_message.0.0, reply);
    assert!(parsed.target_domain.0.is_none());
    // Written as the hand-made DER writes it.
    assert_eq!(body, tlv(0x30, &tlv(0xa0, &tlv(0x04, &reply))));
    // A large reply (a ticket with a large PAC) too.
    let big = vec![7u8; 70_000];
    let parsed = KdcProxyMessage::from_raw(&encode_reply(&big)).expect("DER");
    assert_eq!(parsed.kerb_message.0.0, big);
}

proptest! {
    /// Junk never panics, and is never taken for a request.
    #[test]
    fn junk_is_refused(bytes in proptest::collection::vec(any::<u8>(), 0..512)) {
        prop_assert!(decode(&bytes).is_err());
    }

    /// A valid body with any one byte changed is refused or read as a
    /// request for the realm it names, never a panic.
    #[test]
    fn a_changed_byte_never_panics(at in 0usize..220, to in any::<u8>()) {
        let mut body = proxy_message(&as_req(), Some("EXAMPLE.TEST"), None);
        let at = at % body.len();
        body[at] = to;
        if let Ok(request) = decode(&body) {
            prop_assert!(request.realm.eq_ignore_ascii_case("EXAMPLE.TEST"));
        }
    }

    /// Any message wrapped whole and any realm name come back out.
    #[test]
    fn wrapping_round_trips(reply in proptest::collection::vec(any::<u8>(), 0..3000)) {
        let parsed = KdcProxyMessage::from_raw(&encode_reply(&reply)).expect("DER");
        prop_assert_eq!(parsed.kerb_message.0.0, reply);
    }
}
