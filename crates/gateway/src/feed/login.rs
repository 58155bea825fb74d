//! The feed's sign-in token, RD Web Access's "login-token exchange": a
//! client that signs in once at `/RDWeb/FeedLogin/WebFeedLogin.aspx`
//! (Kerberos, NTLM or a password, as the feed takes them) gets a cookie
//! that signs its next feed requests in for [`LOGIN_LIFETIME`] without
//! asking the domain again, which is what Windows' "RemoteApp and Desktop
//! Connections" and Windows App do when the address they subscribed to is
//! the login page (as an `_msradc` record may name it).
//!
//! The cookie is the user's name, its expiry and an HMAC-SHA-256 of both
//! under a key made at random when the gateway starts: it is forged by no
//! one, holds nothing secret, and is honoured by this gateway process only
//! (a restarted gateway, or another one, asks the client to sign in
//! again). It is `Secure`, `HttpOnly`, `SameSite=Strict` and for `/RDWeb/`
//! only.

use std::time::Duration;

use base64::Engine as _;
use hmac::{KeyInit, Mac};
use sha2::Sha256;

type HmacSha256 = hmac::Hmac<Sha256>;

/// The cookie's name: RD Web Access's, the one its clients keep.
pub const COOKIE: &str = ".ASPXAUTH";
/// How long a login token signs a client in: RD Web Access's default for
/// a private computer.
pub const LOGIN_LIFETIME: Duration = Duration::from_secs(4 * 3600);
/// The longest cookie value read.
const MAX_TOKEN_BYTES: usize = 1024;
/// What the MAC covers before the token's fields: no other token of the
/// product can pass for one.
const CONTEXT: &[u8] = b"deskbroker workspace feed login v1\n";

/// The gateway's key for login tokens, random at each start.
pub struct LoginKey([u8; 32]);

impl std::fmt::Debug for LoginKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("LoginKey(…)")
    }
}

impl Default for LoginKey {
    fn default() -> LoginKey {
        LoginKey::random()
    }
}

impl LoginKey {
    /// A new key from the operating system's random source (two version-4
    /// UUIDs, which `uuid` draws from `getrandom`).
    pub fn random() -> LoginKey {
        let mut key = [0u8; 32];
        key[..16].copy_from_slice(uuid::Uuid::new_v4().as_bytes());
        key[16..].copy_from_slice(uuid::Uuid::new_v4().as_bytes());
        LoginKey(key)
    }

    fn mac(&self, user: &str, expires: u64) -> [u8; 32] {
        let mut mac = HmacSha256::new_from_slice(&self.0).expect("HMAC takes keys of any length");
        mac.update(CONTEXT);
        mac.update(user.as_bytes());
        mac.update(b"\n");
        mac.update(expires.to_string().as_bytes());
        mac.finalize().into_bytes().into()
    }

    /// The token that signs `user` in until `now` + [`LOGIN_LIFETIME`]
    /// (seconds since the Unix epoch): `user` (base64url), the expiry and
    /// the MAC (hex), dot-separated, fit for a cookie's value.
    pub fn issue(&self, user: &str, now: u64) -> String {
        let expires = now + LOGIN_LIFETIME.as_secs();
        let name = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(user);
        format!("{name}.{expires}.{}", hex::encode(self.mac(user, expires)))
    }

    /// The user `token` signs in at `now`, if this key issued it and it
    /// has not expired; the MAC is compared in constant time.
    pub fn verify(&self, token: &str, now: u64) -> Option<String> {
        if token.len() > MAX_TOKEN_BYTES {
            return None;
        }
        let mut parts = token.split('.');
        let (name, expires, mac) = (parts.next()?, parts.next()?, parts.next()?);
        if parts.next().is_some() {
            return None;
        }
        let user = base64::engine::general_purpose::URL_SAFE_NO_PAD
            .decode(name)
            .ok()
            .and_then(|b| String::from_utf8(b).ok())?;
        let expires: u64 = expires.parse().ok()?;
        let given = hex::decode(mac).ok()?;
        let expected = self.mac(&user, expires);
        if given.len() != expected.len() {
            return None;
        }
        let differs = expected
            .iter()
            .zip(&given)
            .fold(0u8, |acc, (a, b)| acc | (a ^ b));
        (differs == 0 && now <= expires).then_some(user)
    }

    /// The `Set-Cookie` header line (without its CR LF) for `token`.
    pub fn set_cookie(token: &str) -> String {
        format!(
            "Set-Cookie: {COOKIE}={token}; Path=/RDWeb/; Max-Age={}; Secure; HttpOnly; \
             SameSite=Strict",
            LOGIN_LIFETIME.as_secs()
        )
    }
}

/// The login token a request's `Cookie` header carries, if any.
pub fn token_of(cookie_header: &str) -> Option<&str> {
    cookie_header.split(';').find_map(|pair| {
        let (name, value) = pair.trim().split_once('=')?;
        (name == COOKIE).then(|| value.trim().trim_matches('"'))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_token_signs_its_user_in_until_it_expires_and_no_one_else() {
        let key = LoginKey::random();
        let token = key.issue("alice@contoso.com", 1_000);
        assert_eq!(
            key.verify(&token, 1_000).as_deref(),
            Some("alice@contoso.com")
        );
        let last = 1_000 + LOGIN_LIFETIME.as_secs();
        assert!(key.verify(&token, last).is_some());
        assert_eq!(key.verify(&token, last + 1), None);
        // Another gateway's (or a restarted one's) key does not know it.
        assert_eq!(LoginKey::random().verify(&token, 1_000), None);
        // Changing the user or the expiry breaks the MAC.
        let (_, rest) = token.split_once('.').unwrap();
        let bob = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode("bob@contoso.com");
        assert_eq!(key.verify(&format!("{bob}.{rest}"), 1_000), None);
        let mut parts: Vec<&str> = token.split('.').collect();
        let later = (last + 3600).to_string();
        parts[1] = &later;
        assert_eq!(key.verify(&parts.join("."), 1_000), None);
        for junk in ["", "a.b", "a.b.c.d", &"x".repeat(2000), "YQ.1.zz"] {
            assert_eq!(key.verify(junk, 1_000), None, "{junk}");
        }
    }

    #[test]
    fn the_token_is_read_from_the_cookie_header() {
        assert_eq!(token_of("a=1; .ASPXAUTH=t.1.ab; b=2"), Some("t.1.ab"));
        assert_eq!(token_of(".ASPXAUTH=\"t\""), Some("t"));
        assert_eq!(token_of("x.ASPXAUTH=t"), None);
        assert_eq!(token_of("a=1"), None);
    }
}
