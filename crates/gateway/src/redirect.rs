//! Redirection tokens the broker issued (rule R3): a `Cookie: msts=…`
//! routing token sends a client straight to a host by address, so the
//! front door honours one only when it carries the broker's signature and
//! has not expired. Anything else (the plain `<ip>.<port>.0000` form any
//! client can write, a wrong or truncated signature, an expired token) is
//! refused before any host is dialled.
//!
//! The signed form keeps the cookie's shape, with two parts added:
//!
//! ```text
//! Cookie: msts=<ip>.<port>.<expires>.<mac>
//!   ip, port  as MS-RDPBCGR encodes them (see pdu.rs)
//!   expires   Unix seconds, decimal
//!   mac       the first 16 bytes of HMAC-SHA256(key, "deskbroker-msts-v1:<ip>.<port>.<expires>"), 32 lowercase hex digits
//! ```
//!
//! The key is derived from a random secret (`RedirectKey::derive`): the
//! broker's own signing key, which it makes once and keeps in its store,
//! so a front door of the broker's process and every replica of one
//! database verify alike (a stand-alone front door derives its key from
//! its own credential, a random secret too). Never from anything a person
//! chose: tokens travel in clear, and each would be an offline test of a
//! guess of the secret. The front door holds the keys in a shared
//! [`RedirectKeys`], which the broker refills when it loads or rotates its
//! keys; a token signed by any key still held is honoured.

use std::net::SocketAddrV4;
use std::time::Duration;

use hmac::{KeyInit, Mac};
use sha2::Sha256;

/// How long an issued redirection token is honoured. A server redirection
/// is followed at once by the client, so a short life is enough and a
/// captured token is soon worthless.
pub const REDIRECT_TOKEN_LIFETIME: Duration = Duration::from_secs(120);
/// Bytes of HMAC-SHA256 kept in a token (128 bits: forging one by chance is
/// out of reach, and the cookie stays well inside the 254-byte first PDU).
pub const REDIRECT_MAC_BYTES: usize = 16;
/// Domain separation: the key signs nothing else with this prefix.
const MAC_CONTEXT: &str = "deskbroker-msts-v1:";
/// What the derived key is for, mixed into its derivation.
const KEY_CONTEXT: &[u8] = b"deskbroker rdp redirection key v1";

type HmacSha256 = hmac::Hmac<Sha256>;

/// The key that signs and checks redirection tokens.
#[derive(Clone)]
pub struct RedirectKey([u8; 32]);

impl std::fmt::Debug for RedirectKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("RedirectKey(…)")
    }
}

/// Why a redirection token was refused, as a metrics label and a message.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum RedirectRefusal {
    /// The plain form anyone can write.
    #[error("the msts redirection token is not signed by this broker")]
    Unsigned,
    #[error("the msts redirection token's signature is wrong")]
    BadSignature,
    #[error("the msts redirection token has expired")]
    Expired,
    /// This front door was given no key, so it honours no token.
    #[error("this front door honours no msts redirection tokens")]
    NoKey,
}

impl RedirectRefusal {
    pub fn reason(self) -> &'static str {
        match self {
            RedirectRefusal::Unsigned => "unsigned_redirect",
            RedirectRefusal::BadSignature => "forged_redirect",
            RedirectRefusal::Expired => "expired_redirect",
            RedirectRefusal::NoKey => "redirect_not_enabled",
        }
    }
}

/// The keys a front door honours redirection tokens of, shared with
/// whoever refreshes them (the broker, when it loads or rotates its signing
/// keys). Cloning shares the set. Empty: every token is refused.
#[derive(Clone, Debug, Default)]
pub struct RedirectKeys(std::sync::Arc<std::sync::RwLock<Vec<RedirectKey>>>);

impl RedirectKeys {
    /// A set of one key.
    pub fn of(key: RedirectKey) -> RedirectKeys {
        let keys = RedirectKeys::default();
        keys.set(vec![key]);
        keys
    }

    /// Replaces the set (the signing key first).
    pub fn set(&self, keys: Vec<RedirectKey>) {
        *self.0.write().unwrap_or_else(|p| p.into_inner()) = keys;
    }

    /// Whether the set has no key.
    pub fn is_empty(&self) -> bool {
        self.0.read().unwrap_or_else(|p| p.into_inner()).is_empty()
    }

    /// [`RedirectKey::verify`] with each key held: the first that signed
    /// `token` decides whether it is still valid.
    pub fn verify(
        &self,
        token: &crate::pdu::RedirectToken,
        now_unix_seconds: u64,
    ) -> Result<SocketAddrV4, RedirectRefusal> {
        let keys = self.0.read().unwrap_or_else(|p| p.into_inner());
        let mut outcome = Err(RedirectRefusal::NoKey);
        for key in keys.iter() {
            outcome = key.verify(token, now_unix_seconds);
            if outcome != Err(RedirectRefusal::BadSignature) {
                break;
            }
        }
        outcome
    }
}

impl RedirectKey {
    /// The key of every front door that knows `secret` (a random secret:
    /// the broker's signing key, or a stand-alone front door's credential).
    pub fn derive(secret: &str) -> RedirectKey {
        let mut mac =
            HmacSha256::new_from_slice(secret.as_bytes()).expect("HMAC takes keys of any length");
        mac.update(KEY_CONTEXT);
        RedirectKey(mac.finalize().into_bytes().into())
    }

    fn mac(&self, addr: SocketAddrV4, expires_unix_seconds: u64) -> [u8; REDIRECT_MAC_BYTES] {
        let mut mac = HmacSha256::new_from_slice(&self.0).expect("HMAC takes keys of any length");
        let (ip, port) = crate::pdu::msts_parts(addr);
        mac.update(format!("{MAC_CONTEXT}{ip}.{port}.{expires_unix_seconds}").as_bytes());
        let full: [u8; 32] = mac.finalize().into_bytes().into();
        let mut out = [0; REDIRECT_MAC_BYTES];
        out.copy_from_slice(&full[..REDIRECT_MAC_BYTES]);
        out
    }

    /// The routing-token line (`Cookie: msts=…`) that sends a client to
    /// `addr` until `now_unix_seconds` + [`REDIRECT_TOKEN_LIFETIME`].
    pub fn issue(&self, addr: SocketAddrV4, now_unix_seconds: u64) -> String {
        let expires = now_unix_seconds + REDIRECT_TOKEN_LIFETIME.as_secs();
        self.issue_until(addr, expires)
    }

    /// The routing-token line for `addr`, honoured until `expires_unix_seconds`.
    pub fn issue_until(&self, addr: SocketAddrV4, expires_unix_seconds: u64) -> String {
        let (ip, port) = crate::pdu::msts_parts(addr);
        let mac = hex::encode(self.mac(addr, expires_unix_seconds));
        format!("Cookie: msts={ip}.{port}.{expires_unix_seconds}.{mac}")
    }

    /// The address `token` sends the client to, if this key signed it and it
    /// has not expired at `now_unix_seconds`. The comparison of the MAC is
    /// in constant time.
    pub fn verify(
        &self,
        token: &crate::pdu::RedirectToken,
        now_unix_seconds: u64,
    ) -> Result<SocketAddrV4, RedirectRefusal> {
        let Some(signed) = &token.signed else {
            return Err(RedirectRefusal::Unsigned);
        };
        let expected = self.mac(token.addr, signed.expires_unix_seconds);
        let differs = expected
            .iter()
            .zip(signed.mac.iter())
            .fold(0u8, |acc, (a, b)| acc | (a ^ b));
        if differs != 0 {
            return Err(RedirectRefusal::BadSignature);
        }
        if signed.expires_unix_seconds < now_unix_seconds {
            return Err(RedirectRefusal::Expired);
        }
        Ok(token.addr)
    }
}
