//! Signed connection tickets (rule T3): what a connection file fetched for
//! a named user carries in `loadbalanceinfo`, so that the RDP front door
//! places that user, in that pool, on the broker's word rather than on an
//! `mstshash` cookie anyone can write.
//!
//! An RDP client sends `loadbalanceinfo` as the routing token of its first
//! PDU, whose X.224 length indicator is one byte (rule R6), so a ticket is
//! one short line of printable ASCII:
//!
//! ```text
//! dbt1:<pool>:<expires>:<mac>:<user>
//! dbt1:<pool>/<host>:<expires>:<mac>:<user>
//!   pool     the pool's name (letters, digits, '.', '-', '_': never ':' or '/')
//!   host     a host-bound ticket's session host (rule AD4; a name as a pool's)
//!   expires  Unix seconds, decimal
//!   mac      the first 16 bytes of HMAC-SHA256(key, "deskbroker-ticket-v1\0<pool>\0<user>\0<expires>"),
//!            or for a host-bound ticket of HMAC-SHA256(key,
//!            "deskbroker-host-ticket-v1\0<pool>\0<host>\0<user>\0<expires>"),
//!            base64url without padding (22 characters)
//!   user     the user, percent-encoded where it is not printable ASCII or is '%' (last, so it may hold ':')
//! ```
//!
//! A host-bound ticket (a pool whose `connectionTarget` is `Host`) opens
//! its host only: the host is under the MAC, in a context of its own, so
//! neither removing it nor changing it leaves a valid ticket. Tickets
//! without a host keep their form and meaning.
//!
//! The largest first PDU is 259 bytes; its fixed parts (TPKT and X.224
//! headers, CR LF, the negotiation request, the 36-byte correlation info
//! mstsc adds, and the space mstsc may pad with) leave [`MAX_TICKET_BYTES`]
//! for the ticket: a 64-character user name with a pool name of up to 96.
//! The broker refuses to issue a ticket that would not fit.
//!
//! The key is derived from the broker's random signing secret, kept in its
//! store (`broker/src/keys.rs`), as the redirection key of the front door
//! is (another context, so neither signs for the other): every replica of
//! one database issues and verifies the same tickets, and nothing a person
//! chose can be guessed back from a ticket seen on the wire. Only the
//! broker verifies tickets (a stand-alone front door hands them to it
//! with the connect request), so a front door holds no secret that mints
//! them.

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use hmac::{KeyInit, Mac};
use percent_encoding::{AsciiSet, CONTROLS, percent_decode_str, utf8_percent_encode};
use sha2::Sha256;

/// How a ticket begins; no other routing token does.
pub const TICKET_PREFIX: &str = "dbt1:";
/// The longest ticket an RDP client's first PDU has room for: 259 bytes,
/// less 4 (TPKT) + 7 (X.224) + 2 (CR LF) + 8 (negotiation request) + 36
/// (correlation info) + 1 (padding to an even length) = 201, kept at 200.
pub const MAX_TICKET_BYTES: usize = 200;
/// Bytes of the HMAC kept (128 bits).
pub const TICKET_MAC_BYTES: usize = 16;
/// Seconds a ticket is still honoured after it expired, for clocks that
/// differ between the broker that issued it and the one that checks it.
pub const TICKET_LEEWAY_SECONDS: u64 = 2;
/// Domain separation of the MAC.
const MAC_CONTEXT: &[u8] = b"deskbroker-ticket-v1\0";
/// Domain separation of a host-bound ticket's MAC: no ticket of one kind
/// has the MAC of a ticket of the other.
const HOST_MAC_CONTEXT: &[u8] = b"deskbroker-host-ticket-v1\0";
/// What separates a host-bound ticket's pool from its host.
const HOST_SEPARATOR: char = '/';
/// What the derived key is for, mixed into its derivation.
const KEY_CONTEXT: &[u8] = b"deskbroker connection ticket key v1";

type HmacSha256 = hmac::Hmac<Sha256>;

/// A ticket as read from a routing token, not yet verified.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Ticket {
    pub pool: String,
    /// Rule AD4: the one session host a host-bound ticket opens.
    pub host: Option<String>,
    pub user: String,
    pub expires_unix_seconds: u64,
    mac: [u8; TICKET_MAC_BYTES],
}

/// Why a ticket was refused. The message says what is wrong without
/// helping a forger (a wrong MAC and a foreign broker's are one case).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum TicketRefusal {
    #[error("the connection ticket is malformed")]
    Malformed,
    #[error("the connection ticket is not signed by this broker, or was changed")]
    BadSignature,
    #[error("the connection ticket expired")]
    Expired,
    #[error("the connection ticket is for host pool {0}")]
    OtherPool(String),
    #[error("the connection ticket is for another user")]
    OtherUser,
    /// Rule AD4: a host-bound ticket presented for another host, or whose
    /// host can no longer take its user.
    #[error(
        "the connection ticket opens session host {host} only, {why}: fetch the connection \
         file again"
    )]
    OtherHost { host: String, why: String },
}

impl TicketRefusal {
    /// As a metrics label.
    pub fn reason(&self) -> &'static str {
        match self {
            TicketRefusal::Malformed => "malformed_ticket",
            TicketRefusal::BadSignature => "forged_ticket",
            TicketRefusal::Expired => "expired_ticket",
            TicketRefusal::OtherPool(_) => "foreign_ticket",
            TicketRefusal::OtherUser => "foreign_ticket",
            TicketRefusal::OtherHost { .. } => "other_host_ticket",
        }
    }
}

/// Why no ticket could be issued.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum IssueError {
    #[error(
        "a connection ticket for this user in this host pool would be {0} bytes; an RDP \
         client's first PDU has room for {MAX_TICKET_BYTES} (shorten the pool, session host \
         or user name)"
    )]
    TooLong(usize),
}

/// The key that signs and checks tickets.
#[derive(Clone)]
pub struct TicketKey([u8; 32]);

impl std::fmt::Debug for TicketKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("TicketKey(…)")
    }
}

impl TicketKey {
    /// The key of every broker that knows `secret` (its signing secret).
    pub fn derive(secret: &str) -> TicketKey {
        let mut mac =
            HmacSha256::new_from_slice(secret.as_bytes()).expect("HMAC takes keys of any length");
        mac.update(KEY_CONTEXT);
        TicketKey(mac.finalize().into_bytes().into())
    }

    fn mac(
        &self,
        pool: &str,
        host: Option<&str>,
        user: &str,
        expires: u64,
    ) -> [u8; TICKET_MAC_BYTES] {
        let mut mac = HmacSha256::new_from_slice(&self.0).expect("HMAC takes keys of any length");
        mac.update(if host.is_some() {
            HOST_MAC_CONTEXT
        } else {
            MAC_CONTEXT
        });
        mac.update(pool.as_bytes());
        mac.update(b"\0");
        if let Some(host) = host {
            mac.update(host.as_bytes());
            mac.update(b"\0");
        }
        mac.update(user.as_bytes());
        mac.update(b"\0");
        mac.update(expires.to_string().as_bytes());
        let full: [u8; 32] = mac.finalize().into_bytes().into();
        let mut out = [0; TICKET_MAC_BYTES];
        out.copy_from_slice(&full[..TICKET_MAC_BYTES]);
        out
    }

    /// The ticket that lets `user` into `pool` until `expires_unix_seconds`.
    pub fn issue(
        &self,
        pool: &str,
        user: &str,
        expires_unix_seconds: u64,
    ) -> Result<String, IssueError> {
        self.issue_bound(pool, None, user, expires_unix_seconds)
    }

    /// The ticket that lets `user` into `pool` until
    /// `expires_unix_seconds`, on session host `host` only when one is
    /// given (rule AD4).
    pub fn issue_bound(
        &self,
        pool: &str,
        host: Option<&str>,
        user: &str,
        expires_unix_seconds: u64,
    ) -> Result<String, IssueError> {
        let mac = self.mac(pool, host, user, expires_unix_seconds);
        let target = match host {
            Some(host) => format!("{pool}{HOST_SEPARATOR}{host}"),
            None => pool.to_string(),
        };
        let ticket = format!(
            "{TICKET_PREFIX}{target}:{expires_unix_seconds}:{}:{}",
            base64url(&mac),
            percent_encode(user)
        );
        if ticket.len() > MAX_TICKET_BYTES {
            return Err(IssueError::TooLong(ticket.len()));
        }
        Ok(ticket)
    }

    /// Checks `ticket` for `pool` at `now_unix_seconds`: signed with this
    /// key, unchanged, not expired (give or take [`TICKET_LEEWAY_SECONDS`]),
    /// for that pool. Answers the user it admits. The MAC is compared in
    /// constant time.
    pub fn verify(
        &self,
        ticket: &Ticket,
        pool: &str,
        now_unix_seconds: u64,
    ) -> Result<String, TicketRefusal> {
        let expected = self.mac(
            &ticket.pool,
            ticket.host.as_deref(),
            &ticket.user,
            ticket.expires_unix_seconds,
        );
        let differs = expected
            .iter()
            .zip(ticket.mac.iter())
            .fold(0u8, |acc, (a, b)| acc | (a ^ b));
        if differs != 0 {
            return Err(TicketRefusal::BadSignature);
        }
        if ticket.pool != pool {
            return Err(TicketRefusal::OtherPool(ticket.pool.clone()));
        }
        if ticket
            .expires_unix_seconds
            .saturating_add(TICKET_LEEWAY_SECONDS)
            < now_unix_seconds
        {
            return Err(TicketRefusal::Expired);
        }
        Ok(ticket.user.clone())
    }
}

impl Ticket {
    /// Whether a routing token is meant as a ticket (then it must parse).
    pub fn looks_like(token: &str) -> bool {
        token.starts_with(TICKET_PREFIX)
    }

    /// Reads a ticket (trailing spaces, which clients pad with, ignored).
    /// Nothing is verified here but its shape.
    pub fn parse(token: &str) -> Result<Ticket, TicketRefusal> {
        let token = token.trim_end_matches(' ');
        if token.len() > MAX_TICKET_BYTES {
            return Err(TicketRefusal::Malformed);
        }
        let rest = token
            .strip_prefix(TICKET_PREFIX)
            .ok_or(TicketRefusal::Malformed)?;
        let mut parts = rest.splitn(4, ':');
        let (Some(pool), Some(expires), Some(mac), Some(user)) =
            (parts.next(), parts.next(), parts.next(), parts.next())
        else {
            return Err(TicketRefusal::Malformed);
        };
        let (pool, host) = match pool.split_once(HOST_SEPARATOR) {
            Some((pool, host)) => (pool, Some(host)),
            None => (pool, None),
        };
        if placement::validate_name("pool", pool).is_err()
            || host.is_some_and(|h| placement::validate_name("host", h).is_err())
        {
            return Err(TicketRefusal::Malformed);
        }
        let expires_unix_seconds = (!expires.is_empty()
            && expires.len() <= 20
            && expires.bytes().all(|b| b.is_ascii_digit()))
        .then(|| expires.parse::<u64>().ok())
        .flatten()
        .ok_or(TicketRefusal::Malformed)?;
        let mac = unbase64url(mac).ok_or(TicketRefusal::Malformed)?;
        let user = percent_decode(user).ok_or(TicketRefusal::Malformed)?;
        if user.is_empty() {
            return Err(TicketRefusal::Malformed);
        }
        Ok(Ticket {
            pool: pool.to_string(),
            host: host.map(str::to_string),
            user,
            expires_unix_seconds,
            mac,
        })
    }
}

/// What a user name keeps as it is in a ticket: printable ASCII but `%`
/// (control characters and every non-ASCII byte are always encoded).
const USER_ESCAPES: &AsciiSet = &CONTROLS.add(b'%');

/// 16 bytes as 22 base64url characters, no padding.
fn base64url(bytes: &[u8; TICKET_MAC_BYTES]) -> String {
    URL_SAFE_NO_PAD.encode(bytes)
}

/// The inverse of [`base64url`]: exactly 16 bytes, canonical (the decoder
/// refuses unused bits that are not zero), or None.
fn unbase64url(text: &str) -> Option<[u8; TICKET_MAC_BYTES]> {
    URL_SAFE_NO_PAD.decode(text).ok()?.try_into().ok()
}

fn percent_encode(user: &str) -> String {
    utf8_percent_encode(user, USER_ESCAPES).to_string()
}

/// The inverse of [`percent_encode`]: None unless `text` is exactly how
/// [`percent_encode`] writes some user name (so one user has one ticket
/// form) without control characters.
fn percent_decode(text: &str) -> Option<String> {
    let user = percent_decode_str(text).decode_utf8().ok()?.into_owned();
    (percent_encode(&user) == text && !user.chars().any(char::is_control)).then_some(user)
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOW: u64 = 1_800_000_000;

    fn key() -> TicketKey {
        TicketKey::derive("an admin token of at least 32 characters")
    }

    #[test]
    fn an_issued_ticket_admits_its_user_to_its_pool() {
        let t = key()
            .issue("farm-1", "alice@contoso.com", NOW + 300)
            .unwrap();
        assert!(t.starts_with("dbt1:farm-1:"), "{t}");
        let parsed = Ticket::parse(&t).unwrap();
        assert_eq!(parsed.pool, "farm-1");
        assert_eq!(
            key().verify(&parsed, "farm-1", NOW).unwrap(),
            "alice@contoso.com"
        );
        // Padding with a space (mstsc) changes nothing.
        let padded = Ticket::parse(&format!("{t} ")).unwrap();
        assert_eq!(padded, parsed);
    }

    #[test]
    fn users_with_colons_percent_signs_and_non_ascii_letters_round_trip() {
        for user in ["CONTOSO\\bob", "a:b:c", "100%", "jörg@例え.jp"] {
            let t = key().issue("p", user, NOW + 60).unwrap();
            assert!(t.bytes().all(|b| (0x20..=0x7e).contains(&b)), "{t}");
            let parsed = Ticket::parse(&t).unwrap();
            assert_eq!(key().verify(&parsed, "p", NOW).unwrap(), user);
        }
    }

    #[test]
    fn a_64_character_user_fits_with_a_96_character_pool_and_longer_ones_are_refused() {
        let user = "u".repeat(64);
        let pool = "p".repeat(96);
        let t = key().issue(&pool, &user, NOW).unwrap();
        assert!(t.len() <= MAX_TICKET_BYTES, "{}", t.len());
        let long = "p".repeat(97);
        assert_eq!(
            key().issue(&long, &user, NOW),
            Err(IssueError::TooLong(MAX_TICKET_BYTES + 1))
        );
    }

    #[test]
    fn tampered_foreign_and_expired_tickets_are_refused() {
        let t = key().issue("farm-1", "alice", NOW + 300).unwrap();
        let parsed = Ticket::parse(&t).unwrap();
        // Another user, another pool or another expiry: the MAC no longer fits.
        for forged in [
            t.replace(":alice", ":mallory"),
            t.replace("farm-1", "farm-2"),
            t.replace(&format!(":{}:", NOW + 300), &format!(":{}:", NOW + 9999)),
        ] {
            let f = Ticket::parse(&forged).unwrap();
            assert_eq!(
                key().verify(&f, &f.pool.clone(), NOW),
                Err(TicketRefusal::BadSignature),
                "{forged}"
            );
        }
        // Signed by another broker.
        let other = TicketKey::derive("another broker's admin token ......");
        assert_eq!(
            other.verify(&parsed, "farm-1", NOW),
            Err(TicketRefusal::BadSignature)
        );
        // Honest, but presented for another pool.
        assert_eq!(
            key().verify(&parsed, "farm-2", NOW),
            Err(TicketRefusal::OtherPool("farm-1".into()))
        );
        // Expired: 2 s of leeway, not 3.
        assert!(key().verify(&parsed, "farm-1", NOW + 302).is_ok());
        assert_eq!(
            key().verify(&parsed, "farm-1", NOW + 303),
            Err(TicketRefusal::Expired)
        );
    }

    #[test]
    fn a_host_bound_ticket_names_its_host_under_the_signature() {
        let t = key()
            .issue_bound("farm-1", Some("sh-7"), "alice", NOW + 300)
            .unwrap();
        assert!(t.starts_with("dbt1:farm-1/sh-7:"), "{t}");
        let parsed = Ticket::parse(&t).unwrap();
        assert_eq!(
            (parsed.pool.as_str(), parsed.host.as_deref()),
            ("farm-1", Some("sh-7"))
        );
        assert_eq!(key().verify(&parsed, "farm-1", NOW).unwrap(), "alice");
        // Another host, or no host at all: the MAC no longer fits.
        for forged in [t.replace("/sh-7:", "/sh-8:"), t.replace("/sh-7:", ":")] {
            let f = Ticket::parse(&forged).unwrap();
            assert_eq!(
                key().verify(&f, "farm-1", NOW),
                Err(TicketRefusal::BadSignature),
                "{forged}"
            );
        }
        // An unbound ticket given a host does not verify either.
        let unbound = key().issue("farm-1", "alice", NOW + 300).unwrap();
        let f = Ticket::parse(&unbound.replacen("farm-1:", "farm-1/sh-7:", 1)).unwrap();
        assert_eq!(
            key().verify(&f, "farm-1", NOW),
            Err(TicketRefusal::BadSignature)
        );
        assert_eq!(Ticket::parse(&unbound).unwrap().host, None);
        // The host counts towards the length a first PDU has room for.
        let user = "u".repeat(64);
        assert!(matches!(
            key().issue_bound(&"p".repeat(90), Some("host-0001"), &user, NOW),
            Err(IssueError::TooLong(_))
        ));
    }

    #[test]
    fn malformed_tickets_are_refused_before_any_mac_is_computed() {
        let good = key().issue("p", "alice", NOW).unwrap();
        let mac = good.split(':').nth(3).unwrap().to_string();
        for bad in [
            "dbt1:".to_string(),
            "dbt1:p:1:".to_string(),
            format!("dbt1:p:1:{mac}:"),
            format!("dbt1:p:x:{mac}:alice"),
            format!("dbt1:p:99999999999999999999999:{mac}:alice"),
            format!("dbt1:p:1:{}:alice", &mac[..21]),
            format!("dbt1:p:1:{mac}=:alice"),
            format!("dbt1:-p:1:{mac}:alice"),
            format!("dbt1:p/:1:{mac}:alice"),
            format!("dbt1:p/h/i:1:{mac}:alice"),
            format!("dbt1:/h:1:{mac}:alice"),
            format!("dbt1:p:1:{mac}:a%0Ab"),
            format!("dbt1:p:1:{mac}:a%zz"),
            format!("dbt1:p:1:{mac}:a%F"),
            format!("dbt1:p:1:{mac}:{}", "u".repeat(MAX_TICKET_BYTES)),
            "tsv://MS Terminal Services Plugin.1.p".to_string(),
        ] {
            assert_eq!(Ticket::parse(&bad), Err(TicketRefusal::Malformed), "{bad}");
        }
    }

    #[test]
    fn base64url_round_trips_and_is_canonical() {
        for seed in 0u8..=255 {
            let bytes: [u8; 16] =
                std::array::from_fn(|i| seed.wrapping_mul(31).wrapping_add(i as u8 * 17));
            let text = base64url(&bytes);
            assert_eq!(text.len(), 22);
            assert_eq!(unbase64url(&text), Some(bytes));
        }
        // The last character carries 2 bits of data and 4 unused ones.
        let text = base64url(&[0; 16]);
        let mut non_canonical = text[..21].to_string();
        non_canonical.push('B');
        assert_eq!(unbase64url(&non_canonical), None);
    }
}
