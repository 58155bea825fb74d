//! The KDC proxy's messages (MS-KKDCP 2.2.2), read strictly and without
//! IO: a request is taken whole or refused, and nothing of a refused one
//! goes anywhere.
//!
//! ```text
//! KDC-PROXY-MESSAGE ::= SEQUENCE {
//!     kerb-message   [0] OCTET STRING,        -- the message as over TCP: 4-byte length, then it
//!     target-domain  [1] KERB-REALM OPTIONAL, -- the realm whose KDC is asked
//!     dclocator-hint [2] INTEGER OPTIONAL
//! }
//! ```
//!
//! The DER is `picky-krb`'s (`KdcProxyMessage`, and the Kerberos requests
//! inside). What this module adds is what a proxy must check before it
//! sends a byte: the body is exactly one message in DER (it encodes back to
//! the same bytes: no trailing bytes, no second reading of a length), the
//! realm is named, the length prefix agrees with the message, and the
//! message is a Kerberos request (AS-REQ or TGS-REQ) for that same realm,
//! so that a message for a realm the proxy does not serve is never handed
//! to a KDC of one it does.

use picky_asn1::wrapper::{ExplicitContextTag0, OctetStringAsn1, Optional};
use picky_krb::messages::{AsReq, KdcProxyMessage, KdcReq, TgsReq};

/// The DER tag of an AS-REQ (`[APPLICATION 10]`, constructed).
const AS_REQ_TAG: u8 = 0x6a;
/// The DER tag of a TGS-REQ (`[APPLICATION 12]`, constructed).
const TGS_REQ_TAG: u8 = 0x6c;
/// The length prefix of a Kerberos message over TCP (RFC 4120 7.2.2).
const PREFIX: usize = 4;
/// The longest realm name taken (RFC 4120 sets none; DNS names stop at 253).
pub const MAX_REALM_BYTES: usize = 255;

/// A request the proxy may relay: the realm it names, and the Kerberos
/// message as it goes to the KDC over TCP (with its length prefix).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProxyRequest {
    /// The `target-domain`, as sent.
    pub realm: String,
    /// The `kerb-message`: 4 bytes of length, then the AS-REQ or TGS-REQ.
    pub message: Vec<u8>,
}

/// Why a request body is refused.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum MessageError {
    #[error("the body is not a KDC-PROXY-MESSAGE in DER")]
    NotDer,
    #[error("the KDC-PROXY-MESSAGE names no realm (target-domain)")]
    NoRealm,
    #[error("the target-domain is not a realm name")]
    BadRealm,
    #[error("the kerb-message's length prefix says {said} bytes, {carried} follow")]
    Length { said: u64, carried: usize },
    #[error("the kerb-message is not a Kerberos AS-REQ or TGS-REQ")]
    NotKdcRequest,
    #[error("the Kerberos request is for realm {inner:?}, the target-domain is {outer:?}")]
    RealmMismatch { outer: String, inner: String },
}

/// Reads one request body: a KDC-PROXY-MESSAGE naming its realm and
/// carrying one AS-REQ or TGS-REQ for that realm (see the module's
/// documentation).
pub fn decode(body: &[u8]) -> Result<ProxyRequest, MessageError> {
    let parsed = KdcProxyMessage::from_raw(body).map_err(|_| MessageError::NotDer)?;
    // One reading only: the body is exactly the DER of what was parsed.
    if parsed.to_vec().ok().as_deref() != Some(body) {
        return Err(MessageError::NotDer);
    }
    let realm = parsed
        .target_domain
        .0
        .as_ref()
        .ok_or(MessageError::NoRealm)?;
    let realm = realm_text(realm.0.as_bytes()).ok_or(MessageError::BadRealm)?;
    let message = parsed.kerb_message.0.0;
    let carried = message.len().saturating_sub(PREFIX);
    let said = match message.get(..PREFIX) {
        Some(prefix) => u32::from_be_bytes(prefix.try_into().unwrap_or_default()),
        None => return Err(MessageError::NotKdcRequest),
    };
    // The top bit is reserved (RFC 4120 7.2.2): a client that sets it asks
    // for something no KDC here is told about.
    if u64::from(said) != carried as u64 || said & 0x8000_0000 != 0 {
        return Err(MessageError::Length {
            said: u64::from(said),
            carried,
        });
    }
    let inner = request_realm(&message[PREFIX..]).ok_or(MessageError::NotKdcRequest)?;
    if !inner.eq_ignore_ascii_case(&realm) {
        return Err(MessageError::RealmMismatch {
            outer: realm,
            inner,
        });
    }
    Ok(ProxyRequest { realm, message })
}

/// The body of the proxy's answer: a KDC-PROXY-MESSAGE carrying `reply`,
/// the KDC's TCP reply (its 4-byte length prefix and the message).
pub fn encode_reply(reply: &[u8]) -> Vec<u8> {
    let message = KdcProxyMessage {
        kerb_message: ExplicitContextTag0::from(OctetStringAsn1::from(reply.to_vec())),
        target_domain: Optional::from(None),
        dclocator_hint: Optional::from(None),
    };
    // An OCTET STRING in a SEQUENCE always encodes.
    message.to_vec().unwrap_or_default()
}

/// The realm of a Kerberos request (`req-body`'s `realm`), when `message`
/// is an AS-REQ or a TGS-REQ in DER.
fn request_realm(message: &[u8]) -> Option<String> {
    let request: KdcReq = match *message.first()? {
        AS_REQ_TAG => picky_asn1_der::from_bytes::<AsReq>(message).ok()?.0,
        TGS_REQ_TAG => picky_asn1_der::from_bytes::<TgsReq>(message).ok()?.0,
        _ => return None,
    };
    realm_text(request.req_body.0.realm.0.0.as_bytes())
}

/// `bytes` as a realm name: printable ASCII, no blanks, 1 to
/// [`MAX_REALM_BYTES`] bytes.
fn realm_text(bytes: &[u8]) -> Option<String> {
    let ok = !bytes.is_empty()
        && bytes.len() <= MAX_REALM_BYTES
        && bytes.iter().all(|b| b.is_ascii_graphic());
    ok.then(|| String::from_utf8_lossy(bytes).into_owned())
}

#[cfg(test)]
mod tests;
