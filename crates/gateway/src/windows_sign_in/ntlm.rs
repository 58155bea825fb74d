//! NTLM sign-in at the RD Gateway (rule AD2), checked by the domain: each
//! handshake runs one Samba `ntlm_auth` (`--helper-protocol=squid-2.5-ntlmssp`,
//! the helper Squid and FreeRADIUS use), which asks the winbind of the
//! domain member it runs on, which asks a domain controller. The gateway
//! holds no password and no hash of any user: it passes the client's
//! messages along and reads the verdict.
//!
//! NTLM takes two round trips on one connection (RFC 4559 §4, MS-NLMP):
//! the client's NEGOTIATE message (type 1) is answered `401` with the
//! helper's CHALLENGE (type 2), and the client's AUTHENTICATE message (type
//! 3), on the same connection, is the helper's to judge: `AF DOMAIN\user`
//! signs the user in, anything else refuses.
//!
//! Windows also sends NTLM inside SPNEGO under `Negotiate` (what mstsc
//! does when it offers Kerberos but gets no ticket): those messages go to
//! the helper's `gss-spnego` protocol, which unwraps them and wraps its
//! answers, and whose last answer (the server's SPNEGO completion) goes
//! back to the client with the signed-in answer.
//!
//! **Bounds.** A handshake holds one helper process from its challenge to
//! its verdict, at most [`MAX_HANDSHAKES`] at once (more wait for a turn),
//! each answer of the helper bounded by [`HELPER_TIMEOUT`] and
//! [`MAX_HELPER_LINE`] bytes; the helper is killed when its handshake ends
//! however it ends (a client that leaves, a timeout). The messages are
//! checked to be NTLM messages of the expected type, at most
//! [`super::MAX_TOKEN_BYTES`], before the helper sees them.
//!
//! **Names.** The helper names the user `DOMAIN\name` in the domain's
//! NetBIOS name; the gateway places it as `name@dns-domain`, in lower case,
//! the name a Kerberos sign-in of the same account gets (so a user finds
//! their session again whichever way they signed in, S1), for the domains
//! it is given (`--gateway-ntlm-domain NETBIOS=dns.name`). A user of any
//! other domain (a trusted one) is refused.

use std::ffi::OsString;
use std::time::Duration;

use base64::Engine as _;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::process::{Child, ChildStdin, ChildStdout, Command};
use tokio::sync::OwnedSemaphorePermit;

use super::{MAX_TOKEN_BYTES, SignInError};

/// Handshakes in progress at once (each holds one helper process).
pub const MAX_HANDSHAKES: usize = 32;
/// How long the helper may take for one answer (it asks a domain
/// controller for the verdict).
pub const HELPER_TIMEOUT: Duration = Duration::from_secs(10);
/// The longest answer line read from the helper.
pub const MAX_HELPER_LINE: u64 = 8 * 1024;
/// The helper protocol spoken with `ntlm_auth` for plain NTLM messages.
pub const HELPER_PROTOCOL: &str = "--helper-protocol=squid-2.5-ntlmssp";
/// The helper protocol for NTLM wrapped in SPNEGO.
pub const SPNEGO_HELPER_PROTOCOL: &str = "--helper-protocol=gss-spnego";
/// The helper protocol that checks a user's password (HTTP Basic).
pub const BASIC_HELPER_PROTOCOL: &str = "--helper-protocol=squid-2.5-basic";

/// How the gateway checks NTLM: the helper and the domains whose users it
/// signs in.
#[derive(Clone, Debug)]
pub struct NtlmSettings {
    /// The helper program (Samba's `ntlm_auth`) and the arguments it is
    /// given before [`HELPER_PROTOCOL`].
    pub helper: Vec<OsString>,
    /// Each domain signed in: its NetBIOS name (upper case) and its DNS
    /// name (lower case), the suffix of its users' names.
    pub domains: Vec<(String, String)>,
}

impl NtlmSettings {
    /// `name@dns-domain` (lower case) for the helper's `DOMAIN\name`, when
    /// DOMAIN is one of [`NtlmSettings::domains`].
    pub fn user_name(&self, account: &str) -> Result<String, String> {
        let (domain, name) = account
            .split_once('\\')
            .ok_or_else(|| format!("the account {account:?} names no domain"))?;
        let dns = self
            .domains
            .iter()
            .find(|(netbios, _)| netbios.eq_ignore_ascii_case(domain))
            .map(|(_, dns)| dns)
            .ok_or_else(|| format!("the domain {domain:?} is not one this gateway signs in"))?;
        super::user_name(&format!("{name}@{dns}"))
            .ok_or_else(|| format!("the account {account:?} is not a user's name"))
    }
}

impl NtlmSettings {
    /// The account `DOMAIN\name` a user typed as `DOMAIN\name`,
    /// `name@dns-domain` or `name` alone (in the first of the
    /// [`NtlmSettings::domains`]), when the domain is one of them.
    pub fn account_of(&self, typed: &str) -> Result<String, String> {
        let plain = |s: &str| {
            !s.is_empty()
                && s.len() <= 256
                && !s
                    .chars()
                    .any(|c| c.is_control() || matches!(c, '/' | '\\' | '@' | ':'))
        };
        let (netbios, name) = if let Some((domain, name)) = typed.split_once('\\') {
            let netbios = self
                .domains
                .iter()
                .find(|(netbios, _)| netbios.eq_ignore_ascii_case(domain))
                .map(|(netbios, _)| netbios);
            (netbios, name)
        } else if let Some((name, dns)) = typed.rsplit_once('@') {
            let netbios = self
                .domains
                .iter()
                .find(|(_, d)| d.eq_ignore_ascii_case(dns))
                .map(|(netbios, _)| netbios);
            (netbios, name)
        } else {
            (self.domains.first().map(|(netbios, _)| netbios), typed)
        };
        let netbios =
            netbios.ok_or_else(|| format!("{typed:?} is not in a domain this gateway signs in"))?;
        if !plain(name) {
            return Err(format!("{typed:?} is not a user's name"));
        }
        Ok(format!(
            "{}\\{}",
            netbios.to_uppercase(),
            name.to_lowercase()
        ))
    }
}

/// The NTLM message types (MS-NLMP 2.2.1).
const NEGOTIATE: u32 = 1;
const AUTHENTICATE: u32 = 3;
const SIGNATURE: &[u8; 8] = b"NTLMSSP\0";

/// How a client's NTLM messages travel.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Wrapping {
    /// As they are (`Authorization: NTLM`, or under `Negotiate`).
    Plain,
    /// Inside SPNEGO tokens (`Negotiate`, Windows' fallback from Kerberos).
    Spnego,
}

/// Whether `token` (base64) carries an NTLM message, and how: plain, or
/// inside SPNEGO (an NTLM message's signature in a Kerberos token would
/// be an 8-byte coincidence in a few KiB).
pub fn wrapping(token: &str) -> Option<Wrapping> {
    let m = decode(token).ok()?;
    if m.starts_with(SIGNATURE) {
        Some(Wrapping::Plain)
    } else {
        inner(&m).map(|_| Wrapping::Spnego)
    }
}

/// The NTLM message in `m` (itself, or inside a SPNEGO token).
fn inner(m: &[u8]) -> Option<&[u8]> {
    let at = m.windows(SIGNATURE.len()).position(|w| w == SIGNATURE)?;
    Some(&m[at..])
}

/// The message in `token` (base64), checked to carry NTLM of type `kind`.
fn message(token: &str, kind: u32) -> Result<Vec<u8>, SignInError> {
    let refused = |why: &str| SignInError::Refused(why.to_string());
    let m = decode(token).map_err(|e| refused(&e))?;
    let Some(ntlm) = inner(&m).filter(|n| n.len() >= 12) else {
        return Err(refused("not an NTLM message"));
    };
    let found = u32::from_le_bytes([ntlm[8], ntlm[9], ntlm[10], ntlm[11]]);
    if found != kind {
        return Err(refused(&format!(
            "an NTLM message of type {found} where type {kind} belongs"
        )));
    }
    Ok(m)
}

fn decode(token: &str) -> Result<Vec<u8>, String> {
    let token = token.trim();
    if token.len() > MAX_TOKEN_BYTES * 4 / 3 + 4 {
        return Err("the NTLM message is too long".into());
    }
    let m = base64::engine::general_purpose::STANDARD
        .decode(token)
        .map_err(|_| "the NTLM message is not base64".to_string())?;
    if m.is_empty() || m.len() > MAX_TOKEN_BYTES {
        return Err("the NTLM message is empty or too long".into());
    }
    Ok(m)
}

/// The account an AUTHENTICATE message claims, `DOMAIN\name` (what the
/// client sent, not yet proven): the key failed sign-ins are counted by
/// per user, so that a user being guessed at is throttled before the
/// domain is asked.
pub fn claimed_account(token: &str) -> Option<String> {
    let whole = message(token, AUTHENTICATE).ok()?;
    let m = inner(&whole)?;
    // MS-NLMP 2.2.1.3: DomainNameFields at 28, UserNameFields at 36, each
    // a length (u16), a maximum length (u16) and an offset (u32); the
    // strings are UTF-16LE when NEGOTIATE_UNICODE (0x1) is in the flags at
    // 60, which every current client sets.
    let field = |at: usize| -> Option<String> {
        let len = u16::from_le_bytes(m.get(at..at + 2)?.try_into().ok()?) as usize;
        let offset = u32::from_le_bytes(m.get(at + 4..at + 8)?.try_into().ok()?) as usize;
        let bytes = m.get(offset..offset.checked_add(len)?)?;
        let flags = u32::from_le_bytes(m.get(60..64)?.try_into().ok()?);
        if flags & 1 == 1 {
            let units: Vec<u16> = bytes
                .chunks_exact(2)
                .map(|c| u16::from_le_bytes([c[0], c[1]]))
                .collect();
            String::from_utf16(&units).ok()
        } else {
            Some(bytes.iter().map(|&b| b as char).collect())
        }
    };
    let (domain, user) = (field(28)?, field(36)?);
    if user.is_empty() || user.chars().any(char::is_control) || domain.chars().any(char::is_control)
    {
        return None;
    }
    Some(format!(
        "{}\\{}",
        domain.to_uppercase(),
        user.to_lowercase()
    ))
}

/// One NTLM handshake in progress: its helper, between the challenge and
/// the verdict. Dropping it kills the helper.
pub struct Handshake {
    wrapping: Wrapping,
    helper: Child,
    input: ChildStdin,
    output: BufReader<ChildStdout>,
    _turn: OwnedSemaphorePermit,
}

impl std::fmt::Debug for Handshake {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Handshake").finish_non_exhaustive()
    }
}

impl Handshake {
    /// Starts a helper for the client's NEGOTIATE message `token` (base64)
    /// and returns the handshake with the CHALLENGE to send (base64).
    pub(super) async fn start(
        settings: &NtlmSettings,
        turn: OwnedSemaphorePermit,
        token: &str,
    ) -> Result<(Handshake, String), SignInError> {
        message(token, NEGOTIATE)?;
        let wrapping = wrapping(token).unwrap_or(Wrapping::Plain);
        let protocol = match wrapping {
            Wrapping::Plain => HELPER_PROTOCOL,
            Wrapping::Spnego => SPNEGO_HELPER_PROTOCOL,
        };
        let mut handshake = Handshake::spawn(settings, turn, protocol, wrapping)?;
        let answer = handshake.ask(&format!("YR {}", token.trim())).await?;
        // `TT <challenge>` (the SPNEGO protocol may add a word after it).
        let mut words = answer.split(' ');
        match (words.next(), words.next()) {
            (Some("TT"), Some(challenge)) if decode(challenge).is_ok() => {
                Ok((handshake, challenge.to_string()))
            }
            _ => Err(SignInError::Refused(format!(
                "the NTLM helper gave no challenge: {}",
                verdict_reason(&answer)
            ))),
        }
    }

    /// Checks a password the client sent in the clear (HTTP Basic, over
    /// TLS only) for `account` (`DOMAIN\name`, DOMAIN one of the
    /// settings'): the helper's `squid-2.5-basic` protocol asks the domain,
    /// as for an NTLM answer. Neither ever reaches a log.
    pub(super) async fn check_password(
        settings: &NtlmSettings,
        turn: OwnedSemaphorePermit,
        account: &str,
        password: &str,
    ) -> Result<(), SignInError> {
        let mut helper = Handshake::spawn(settings, turn, BASIC_HELPER_PROTOCOL, Wrapping::Plain)?;
        // The protocol's fields are URL-encoded (RFC 1738), so that a space
        // or a line end in a password cannot end its field or its line.
        let encode = |s: &str| {
            percent_encoding::utf8_percent_encode(s, percent_encoding::NON_ALPHANUMERIC).to_string()
        };
        let answer = helper
            .ask(&format!("{} {}", encode(account), encode(password)))
            .await?;
        let _ = helper.helper.start_kill();
        match answer.split(' ').next() {
            Some("OK") => Ok(()),
            _ => Err(SignInError::Refused(format!(
                "the domain refused the password: {}",
                verdict_reason(&answer)
            ))),
        }
    }

    /// Starts one helper speaking `protocol`.
    fn spawn(
        settings: &NtlmSettings,
        turn: OwnedSemaphorePermit,
        protocol: &str,
        wrapping: Wrapping,
    ) -> Result<Handshake, SignInError> {
        let unavailable = |e: String| {
            SignInError::Unavailable(format!("the NTLM helper could not be started: {e}"))
        };
        let (program, args) = settings
            .helper
            .split_first()
            .ok_or_else(|| unavailable("no helper is configured".into()))?;
        // The helper gets no environment of the gateway's (its keytab's
        // name, its settings): only what its command line says.
        let mut helper = Command::new(program)
            .args(args)
            .arg(protocol)
            .env_clear()
            .env("PATH", "/usr/sbin:/usr/bin:/sbin:/bin")
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .map_err(|e| unavailable(e.to_string()))?;
        let (Some(input), Some(output)) = (helper.stdin.take(), helper.stdout.take()) else {
            return Err(unavailable("its pipes".into()));
        };
        Ok(Handshake {
            wrapping,
            helper,
            input,
            output: BufReader::new(output),
            _turn: turn,
        })
    }

    /// The verdict on the client's AUTHENTICATE message `token` (base64):
    /// the account, `DOMAIN\name`, and (inside SPNEGO) the last token to
    /// send back.
    pub(super) async fn finish(
        mut self,
        token: &str,
    ) -> Result<(String, Option<String>), SignInError> {
        message(token, AUTHENTICATE)?;
        let answer = self.ask(&format!("KK {}", token.trim())).await?;
        let _ = self.helper.start_kill();
        let mut words = answer.splitn(3, ' ');
        match (self.wrapping, words.next(), words.next(), words.next()) {
            (Wrapping::Plain, Some("AF"), Some(account), None) => Ok((account.to_string(), None)),
            (Wrapping::Spnego, Some("AF"), Some(reply), Some(account)) if decode(reply).is_ok() => {
                Ok((account.trim().to_string(), Some(reply.to_string())))
            }
            _ => Err(SignInError::Refused(format!(
                "the domain refused the NTLM sign-in: {}",
                verdict_reason(&answer)
            ))),
        }
    }

    /// One line to the helper and its one-line answer, bounded.
    async fn ask(&mut self, line: &str) -> Result<String, SignInError> {
        let unavailable =
            |e: String| SignInError::Unavailable(format!("the NTLM helper failed: {e}"));
        let exchange = async {
            self.input
                .write_all(format!("{line}\n").as_bytes())
                .await
                .map_err(|e| unavailable(e.to_string()))?;
            self.input
                .flush()
                .await
                .map_err(|e| unavailable(e.to_string()))?;
            let mut answer = String::new();
            let read = (&mut self.output)
                .take(MAX_HELPER_LINE)
                .read_line(&mut answer)
                .await
                .map_err(|e| unavailable(e.to_string()))?;
            if read == 0 || !answer.ends_with('\n') {
                return Err(unavailable("it closed or said too much".into()));
            }
            Ok(answer.trim_end().to_string())
        };
        tokio::time::timeout(HELPER_TIMEOUT, exchange)
            .await
            .map_err(|_| unavailable("no answer in time".into()))?
    }
}

/// What a helper's refusal says, for the log: its code (`NA`, `BH`) and
/// any NT status it names, never the tokens it carries.
fn verdict_reason(answer: &str) -> String {
    let mut words = answer.split_whitespace();
    let code = words.next().unwrap_or("no answer");
    let status: Vec<&str> = words.filter(|w| w.starts_with("NT_STATUS_")).collect();
    let mut reason: String = std::iter::once(code)
        .chain(status)
        .collect::<Vec<_>>()
        .join(" ");
    reason.retain(|c| !c.is_control());
    reason.truncate(200);
    reason
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings() -> NtlmSettings {
        NtlmSettings {
            helper: vec!["ntlm_auth".into()],
            domains: vec![("CONTOSO".into(), "contoso.com".into())],
        }
    }

    #[test]
    fn a_refusal_is_logged_by_its_code_and_status_never_its_tokens() {
        assert_eq!(
            verdict_reason("NA oQcwBaADCgEC NT_STATUS_WRONG_PASSWORD"),
            "NA NT_STATUS_WRONG_PASSWORD"
        );
        assert_eq!(verdict_reason("TT TlRMTVNTUAACAAAA *"), "TT");
        assert_eq!(verdict_reason(""), "no answer");
    }

    #[test]
    fn accounts_of_the_given_domains_become_upn_like_names() {
        let s = settings();
        assert_eq!(s.user_name("CONTOSO\\Alice").unwrap(), "alice@contoso.com");
        assert_eq!(s.user_name("contoso\\bob").unwrap(), "bob@contoso.com");
        assert!(
            s.user_name("FABRIKAM\\alice")
                .unwrap_err()
                .contains("FABRIKAM")
        );
        assert!(s.user_name("alice").is_err());
        assert!(s.user_name("CONTOSO\\").is_err());
        assert!(s.user_name("CONTOSO\\a/b").is_err());
    }

    #[test]
    fn a_typed_name_finds_its_domain_or_is_refused() {
        let s = settings();
        for typed in [
            "CONTOSO\\Alice",
            "contoso\\alice",
            "alice@Contoso.com",
            "Alice",
        ] {
            assert_eq!(s.account_of(typed).unwrap(), "CONTOSO\\alice", "{typed}");
        }
        for typed in [
            "FABRIKAM\\alice",
            "alice@fabrikam.com",
            "",
            "CONTOSO\\",
            "@contoso.com",
            "a:b",
            "a/b",
            "CONTOSO\\a\\b",
            "al\nice",
        ] {
            assert!(s.account_of(typed).is_err(), "{typed:?}");
        }
    }

    /// An AUTHENTICATE message naming `domain\user` (UTF-16), with empty
    /// responses: enough for [`claimed_account`], nothing for a DC.
    fn authenticate(domain: &str, user: &str) -> String {
        let utf16 = |s: &str| -> Vec<u8> { s.encode_utf16().flat_map(u16::to_le_bytes).collect() };
        let (d, u) = (utf16(domain), utf16(user));
        let mut m = Vec::new();
        m.extend_from_slice(SIGNATURE);
        m.extend_from_slice(&AUTHENTICATE.to_le_bytes());
        let field = |m: &mut Vec<u8>, len: usize, offset: usize| {
            m.extend_from_slice(&(len as u16).to_le_bytes());
            m.extend_from_slice(&(len as u16).to_le_bytes());
            m.extend_from_slice(&(offset as u32).to_le_bytes());
        };
        field(&mut m, 0, 64); // LM response
        field(&mut m, 0, 64); // NT response
        field(&mut m, d.len(), 64);
        field(&mut m, u.len(), 64 + d.len());
        field(&mut m, 0, 64); // workstation
        field(&mut m, 0, 64); // session key
        m.extend_from_slice(&1u32.to_le_bytes()); // NEGOTIATE_UNICODE
        m.extend_from_slice(&d);
        m.extend_from_slice(&u);
        base64::engine::general_purpose::STANDARD.encode(m)
    }

    #[test]
    fn the_claimed_account_is_read_from_an_authenticate_message() {
        assert_eq!(
            claimed_account(&authenticate("contoso", "Alice")).as_deref(),
            Some("CONTOSO\\alice")
        );
        // Not type 3, not NTLM, not base64, or fields out of the message.
        let negotiate = base64::engine::general_purpose::STANDARD
            .encode([&SIGNATURE[..], &NEGOTIATE.to_le_bytes()[..], &[0u8; 52]].concat());
        assert_eq!(claimed_account(&negotiate), None);
        assert_eq!(claimed_account("YWJj"), None);
        assert_eq!(claimed_account("not base64!"), None);
        let mut short = base64::engine::general_purpose::STANDARD
            .decode(authenticate("contoso", "alice"))
            .unwrap();
        short.truncate(70);
        let short = base64::engine::general_purpose::STANDARD.encode(short);
        assert_eq!(claimed_account(&short), None);
    }

    #[test]
    fn only_ntlm_messages_of_the_expected_type_reach_the_helper() {
        let authenticate = authenticate("contoso", "alice");
        assert_eq!(wrapping(&authenticate), Some(Wrapping::Plain));
        assert!(message(&authenticate, AUTHENTICATE).is_ok());
        let e = message(&authenticate, NEGOTIATE).unwrap_err();
        assert!(e.to_string().contains("type 3"), "{e}");
        // A SPNEGO token with a Kerberos mechanism: no NTLM.
        assert_eq!(wrapping("YIIBhgYGKwYBBQUCoIIBejCCAXY="), None);
        // Samba's SPNEGO NegTokenInit around an NTLM NEGOTIATE message.
        let spnego = "YEgGBisGAQUFAqA+MDygDjAMBgorBgEEAYI3AgIKoioEKE5UTE1TU1AAAQAAAAWCCGIAAAAAKAAAAAAAAAAoAAAABgEAAAAAAA8=";
        assert_eq!(wrapping(spnego), Some(Wrapping::Spnego));
        assert!(message(spnego, NEGOTIATE).is_ok());
        let long = "A".repeat(MAX_TOKEN_BYTES * 2);
        assert!(message(&long, NEGOTIATE).is_err());
    }
}
