//! Windows sign-in at the RD Gateway (rule AD2): HTTP `Negotiate`
//! (RFC 4559) with Kerberos, checked against the gateway's keytab, and
//! `NTLM`, checked by the domain through Samba's `ntlm_auth` ([`ntlm`]).
//!
//! A client that brings no connection ticket (its request carries no
//! `RDG-Auth-Scheme: PAA`, which every ticket client sends) and no
//! `Authorization` is answered `401` with `WWW-Authenticate: Negotiate`
//! (with a keytab) and `WWW-Authenticate: NTLM` (with NTLM domains).
//!
//! **Kerberos.** The client's next request carries `Authorization:
//! Negotiate <SPNEGO token>`, whose Kerberos AP-REQ is accepted here: the
//! ticket must be for the gateway's service principal `HTTP/<service
//! host>` (any realm) and decrypt with a key of the keytab, be within its
//! lifetime and the clock skew, and not be a replay. The signed-in user is
//! named `name@realm` in lower case (`alice@deskbroker.test` for
//! `alice@DESKBROKER.TEST`): Active Directory gives every account that
//! `userPrincipalName` by default, and the directory (AD1) looks a name
//! with an `@` up by it. An account whose UPN has another suffix is not
//! found there, so a pool's `entitledGroups` do not admit it (its
//! `entitledUsers` can).
//!
//! **NTLM** takes two round trips on one connection; the domain judges
//! the client's answer and the user gets the same name a Kerberos sign-in
//! of the account gets (see [`ntlm`]).
//!
//! **Why MIT's GSSAPI** (`libgssapi`, bindings to `libgssapi_krb5`): it is
//! the acceptor every Linux web server uses (Apache's mod_auth_gssapi,
//! nginx's spnego module), and it checks AP-REQs fully (keytab key and
//! version, ticket times, clock skew, a replay cache, SPNEGO). Its safe
//! Rust API names the acceptor's keytab only through the process's
//! `KRB5_KTNAME` (the call that names it per credential would need
//! `unsafe`, which this workspace forbids), so the binary sets that for
//! itself at start ([`KEYTAB_VARIABLE`]). The pure-Rust `sspi` crate has an acceptor
//! too, but takes one raw key rather than a keytab, and its server side is
//! young; `cross-krb5` is a wrapper over the same `libgssapi`. The cost:
//! building needs MIT's headers (`libkrb5-dev`) and libclang (bindgen),
//! and the binary links `libgssapi_krb5.so.2` (the Debian package gains
//! `libgssapi-krb5-2` through dpkg-shlibdeps).
//!
//! **Bounds.** A token is at most [`MAX_TOKEN_BYTES`] (the request head is
//! bounded anyway); each Kerberos acceptance runs on the blocking pool, at
//! most [`MAX_CONCURRENT_ACCEPTS`] at once, and at most
//! [`ntlm::MAX_HANDSHAKES`] NTLM handshakes hold a helper at once. Failed
//! sign-ins are counted per source and per user (the user a refused NTLM
//! answer claims) in one-minute windows: past [`MAX_FAILURES_PER_MINUTE`]
//! a source's or user's sign-ins are refused without being tried until
//! the minute ends (`429`), so a source cannot guess at a password or the
//! gateway's key, nor flood the domain with checks. The tables are bounded
//! ([`MAX_TRACKED`] keys a minute; past it, new keys are refused as
//! throttled, which only the sources making the table full can cause
//! within its minute).
//!
//! **Never logged**: tokens, or anything of the exchange; only the
//! outcome and, for a success, the user.

pub mod ntlm;

use std::collections::HashMap;
use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use base64::Engine as _;
use libgssapi::context::{SecurityContext, ServerCtx};
use libgssapi::credential::{Cred, CredUsage};
use libgssapi::oid::{GSS_MECH_KRB5, GSS_MECH_SPNEGO, OidSet};
use tokio::sync::Semaphore;

/// The largest `Negotiate` token taken, decoded (a Kerberos AP-REQ with
/// a large PAC is a few KiB; the request head's bound comes first).
pub const MAX_TOKEN_BYTES: usize = 6 * 1024;
/// The longest HTTP Basic credentials taken, decoded (a name and a
/// password).
pub const MAX_BASIC_BYTES: usize = 1024;
/// Sign-ins checked at once; more wait for a turn.
pub const MAX_CONCURRENT_ACCEPTS: usize = 16;
/// Failed sign-ins a source, or a user, may have in one minute; past it,
/// its sign-ins are refused untried until the minute ends.
pub const MAX_FAILURES_PER_MINUTE: u32 = 10;
/// Sources and users counted in one minute.
pub const MAX_TRACKED: usize = 10_000;

/// Why a Windows sign-in was refused, as the audit log says it: a kind,
/// never the details (which vary per request and would defeat the log's
/// fold of refusals). A stand-alone gateway sends one of these to its
/// broker, which takes no other.
pub mod refusal {
    /// A Kerberos ticket for another service than the gateway's.
    pub const FOREIGN_TICKET: &str = "a ticket for another service";
    /// A token that is not base64, or too long.
    pub const MALFORMED_TOKEN: &str = "a malformed token";
    /// An NTLM sign-in the domain (or the gateway) refused.
    pub const NTLM_REFUSED: &str = "an NTLM sign-in refused";
    /// A Kerberos ticket the gateway's keytab did not accept.
    pub const KERBEROS_REFUSED: &str = "a Kerberos ticket refused";
    /// A password (HTTP Basic, at the workspace feed) the domain refused.
    pub const PASSWORD_REFUSED: &str = "a password refused";
    /// A signed-in user asking for a pool whose `gatewaySignIn` is `Ticket`.
    pub const TICKETS_ONLY_POOL: &str = "a pool that takes only tickets";
    /// Every reason.
    pub const ALL: &[&str] = &[
        FOREIGN_TICKET,
        MALFORMED_TOKEN,
        NTLM_REFUSED,
        KERBEROS_REFUSED,
        PASSWORD_REFUSED,
        TICKETS_ONLY_POOL,
    ];
}

/// How the gateway signs Windows clients in: Kerberos, NTLM, or both.
#[derive(Clone, Debug, Default)]
pub struct SignInSettings {
    /// Kerberos (`Negotiate`): `--gateway-keytab` and the service's name.
    pub kerberos: Option<KerberosSettings>,
    /// NTLM, checked by the domain (`--gateway-ntlm-domain`).
    pub ntlm: Option<ntlm::NtlmSettings>,
}

/// Kerberos at the gateway: `--gateway-keytab` and the service's host
/// name.
#[derive(Clone, Debug)]
pub struct KerberosSettings {
    /// The keytab holding the key of `HTTP/<service_host>`; readable by the
    /// gateway's user only.
    pub keytab: PathBuf,
    /// The host name clients reach the gateway by, which names its
    /// service principal `HTTP/<service_host>`.
    pub service_host: String,
}

/// A signed-in Windows user.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SignedIn {
    /// The name the user is placed under: `name@realm` in lower case.
    pub user: String,
    /// The token to send back (`WWW-Authenticate: Negotiate <reply>`), the
    /// gateway's proof of itself (mutual authentication), if any.
    pub reply: Option<String>,
}

/// Why a sign-in failed.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum SignInError {
    /// The token was not accepted (bad, expired, for another service, a
    /// replay, a wrong password, …): answered 401.
    #[error("{0}")]
    Refused(String),
    /// The sign-in could not be checked (the NTLM helper or the domain did
    /// not answer): answered 503, not counted as a failure.
    #[error("{0}")]
    Unavailable(String),
    /// The source or user failed too often this minute: answered 429.
    #[error("too many failed sign-ins from {0} this minute")]
    Throttled(String),
}

/// The gateway's Windows sign-in: its keytab, service, and the failures'
/// counts.
pub struct WindowsSignIn {
    settings: SignInSettings,
    turns: Arc<Semaphore>,
    handshakes: Arc<Semaphore>,
    failures: Mutex<Failures>,
}

#[derive(Default)]
struct Failures {
    /// When the current minute began.
    since: Option<Instant>,
    counts: HashMap<String, u32>,
}

impl std::fmt::Debug for WindowsSignIn {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WindowsSignIn")
            .field("settings", &self.settings)
            .finish()
    }
}

impl WindowsSignIn {
    /// Checks the settings: the keytab can be used as the acceptor's
    /// credential (it exists, is a keytab and MIT can read it), and the
    /// NTLM domains are names, so that a mistake stops the gateway at start
    /// rather than failing each sign-in.
    pub fn new(settings: SignInSettings) -> Result<WindowsSignIn, String> {
        if settings.kerberos.is_none() && settings.ntlm.is_none() {
            return Err("Windows sign-in needs a keytab or NTLM domains".into());
        }
        if let Some(kerberos) = &settings.kerberos {
            if !is_dns_name(&kerberos.service_host) {
                return Err(format!(
                    "the gateway's service host name {:?} is not a DNS name",
                    kerberos.service_host
                ));
            }
            acquire(&kerberos.keytab).map_err(|e| {
                format!(
                    "the gateway keytab {} cannot be used: {e}",
                    kerberos.keytab.display()
                )
            })?;
        }
        if let Some(ntlm) = &settings.ntlm {
            if ntlm.helper.is_empty() {
                return Err("NTLM sign-in needs its helper program (ntlm_auth)".into());
            }
            for (netbios, dns) in &ntlm.domains {
                let netbios_ok = !netbios.is_empty()
                    && netbios.len() <= 15
                    && netbios
                        .bytes()
                        .all(|b| b.is_ascii_alphanumeric() || b == b'-');
                if !netbios_ok || !is_dns_name(dns) {
                    return Err(format!(
                        "the NTLM domain {netbios}={dns} is not a NetBIOS name and a DNS name"
                    ));
                }
            }
            if ntlm.domains.is_empty() {
                return Err("NTLM sign-in needs at least one domain".into());
            }
        }
        Ok(WindowsSignIn {
            settings,
            turns: Arc::new(Semaphore::new(MAX_CONCURRENT_ACCEPTS)),
            handshakes: Arc::new(Semaphore::new(ntlm::MAX_HANDSHAKES)),
            failures: Mutex::new(Failures::default()),
        })
    }

    /// The service principal clients must ask a ticket for, with Kerberos.
    pub fn service_principal(&self) -> Option<String> {
        let kerberos = self.settings.kerberos.as_ref()?;
        Some(format!("HTTP/{}", kerberos.service_host))
    }

    /// The schemes a client is offered (`WWW-Authenticate`), in the order
    /// it should prefer them.
    pub fn schemes(&self) -> Vec<&'static str> {
        let mut schemes = Vec::new();
        if self.settings.kerberos.is_some() {
            schemes.push("Negotiate");
        }
        if self.settings.ntlm.is_some() {
            schemes.push("NTLM");
        }
        schemes
    }

    /// Whether NTLM sign-in is on.
    pub fn takes_ntlm(&self) -> bool {
        self.settings.ntlm.is_some()
    }

    /// The first leg of an NTLM sign-in from `source`: the client's
    /// NEGOTIATE message `token` (base64) gets a helper and a challenge.
    pub async fn ntlm_challenge(
        &self,
        source: IpAddr,
        token: &str,
    ) -> Result<(ntlm::Handshake, String), SignInError> {
        let Some(settings) = &self.settings.ntlm else {
            return Err(SignInError::Refused("NTLM is not taken here".into()));
        };
        if self.throttled(&source_key(source)) {
            return Err(SignInError::Throttled(source.to_string()));
        }
        let turn = self
            .handshakes
            .clone()
            .acquire_owned()
            .await
            .map_err(|_| SignInError::Unavailable("the gateway is stopping".into()))?;
        let result = ntlm::Handshake::start(settings, turn, token).await;
        if let Err(SignInError::Refused(_)) = &result {
            self.failed(&source_key(source));
        }
        result
    }

    /// The second leg: the client's AUTHENTICATE message `token` judged by
    /// the domain. A user (as the message claims it) or source over its
    /// failures is refused before the domain is asked.
    pub async fn ntlm_finish(
        &self,
        source: IpAddr,
        handshake: ntlm::Handshake,
        token: &str,
    ) -> Result<SignedIn, SignInError> {
        let Some(settings) = &self.settings.ntlm else {
            return Err(SignInError::Refused("NTLM is not taken here".into()));
        };
        let claimed = ntlm::claimed_account(token)
            .map(|account| settings.user_name(&account).unwrap_or(account));
        if self.throttled(&source_key(source)) {
            return Err(SignInError::Throttled(source.to_string()));
        }
        if let Some(user) = &claimed
            && self.throttled(&user_key(user))
        {
            return Err(SignInError::Throttled(user.clone()));
        }
        let result = match handshake.finish(token).await {
            Ok((account, reply)) => settings
                .user_name(&account)
                .map(|user| SignedIn { user, reply })
                .map_err(SignInError::Refused),
            Err(e) => Err(e),
        };
        if let Err(SignInError::Refused(_)) = &result {
            self.failed(&source_key(source));
            if let Some(user) = &claimed {
                self.failed(&user_key(user));
            }
        }
        result
    }

    /// Whether a user's password (HTTP Basic, over TLS) can be checked:
    /// the domain checks it through the NTLM helper.
    pub fn takes_basic(&self) -> bool {
        self.settings.ntlm.is_some()
    }

    /// Checks `Authorization: Basic <credentials>` (the part after the
    /// scheme) from `source`: the name (`DOMAIN\name`, `name@domain` or
    /// `name`) and password are the domain's to judge, as an NTLM answer
    /// is. A source or user over its failures is refused before the domain
    /// is asked. The password is never kept, logged or passed on.
    pub async fn basic(&self, source: IpAddr, credentials: &str) -> Result<SignedIn, SignInError> {
        let refused = |why: &str| SignInError::Refused(why.to_string());
        let Some(settings) = &self.settings.ntlm else {
            return Err(refused("passwords are not checked here"));
        };
        if self.throttled(&source_key(source)) {
            return Err(SignInError::Throttled(source.to_string()));
        }
        let Some((typed, password)) = basic_parts(credentials) else {
            self.failed(&source_key(source));
            return Err(refused(
                "Basic credentials that are not base64 of name:password",
            ));
        };
        let account = settings.account_of(&typed).map_err(|e| {
            self.failed(&source_key(source));
            SignInError::Refused(e)
        })?;
        let user = settings.user_name(&account).map_err(SignInError::Refused)?;
        if self.throttled(&user_key(&user)) {
            return Err(SignInError::Throttled(user));
        }
        if password.is_empty() || password.chars().any(char::is_control) {
            self.failed(&source_key(source));
            self.failed(&user_key(&user));
            return Err(refused("an empty password, or one with control characters"));
        }
        let turn = self
            .handshakes
            .clone()
            .acquire_owned()
            .await
            .map_err(|_| SignInError::Unavailable("the gateway is stopping".into()))?;
        match ntlm::Handshake::check_password(settings, turn, &account, &password).await {
            Ok(()) => Ok(SignedIn { user, reply: None }),
            Err(e) => {
                if let SignInError::Refused(_) = &e {
                    self.failed(&source_key(source));
                    self.failed(&user_key(&user));
                }
                Err(e)
            }
        }
    }

    /// The user HTTP Basic credentials name, by the gateway's naming (for
    /// the audit of a refusal; not proof of anything).
    pub fn basic_claimed_user(&self, credentials: &str) -> Option<String> {
        let settings = self.settings.ntlm.as_ref()?;
        let (typed, _) = basic_parts(credentials)?;
        settings.user_name(&settings.account_of(&typed).ok()?).ok()
    }

    /// The user an NTLM AUTHENTICATE message claims, by the gateway's
    /// naming (for the audit of a refusal; not proof of anything).
    pub fn ntlm_claimed_user(&self, token: &str) -> Option<String> {
        let settings = self.settings.ntlm.as_ref()?;
        let account = ntlm::claimed_account(token)?;
        Some(settings.user_name(&account).unwrap_or(account))
    }

    /// Checks `Authorization: Negotiate <token>` (the part after the
    /// scheme) from `source`.
    pub async fn accept(&self, source: IpAddr, token: &str) -> Result<SignedIn, SignInError> {
        let source_key = source_key(source);
        if self.throttled(&source_key) {
            return Err(SignInError::Throttled(source.to_string()));
        }
        let result = self.check(token).await;
        if let Err(SignInError::Refused(_)) = &result {
            self.failed(&source_key);
        }
        if let Ok(signed_in) = &result
            && self.throttled(&user_key(&signed_in.user))
        {
            return Err(SignInError::Throttled(signed_in.user.clone()));
        }
        result
    }

    /// Counts a refusal of a signed-in user (a pool that does not take
    /// Windows sign-in, a user the pool does not entitle) against the user.
    pub fn user_refused(&self, user: &str) {
        self.failed(&user_key(user));
    }

    async fn check(&self, token: &str) -> Result<SignedIn, SignInError> {
        let refused = |why: &str| SignInError::Refused(why.to_string());
        let token = token.trim();
        if token.len() > MAX_TOKEN_BYTES * 4 / 3 + 4 {
            return Err(refused("the Negotiate token is too long"));
        }
        let token = base64::engine::general_purpose::STANDARD
            .decode(token)
            .map_err(|_| refused("the Negotiate token is not base64"))?;
        if token.is_empty() || token.len() > MAX_TOKEN_BYTES {
            return Err(refused("the Negotiate token is empty or too long"));
        }
        let Some(kerberos) = &self.settings.kerberos else {
            return Err(refused("Kerberos is not taken here (no keytab)"));
        };
        let _turn = self
            .turns
            .clone()
            .acquire_owned()
            .await
            .map_err(|_| refused("the gateway is stopping"))?;
        let keytab = kerberos.keytab.clone();
        let host = kerberos.service_host.clone();
        tokio::task::spawn_blocking(move || accept_blocking(&keytab, &host, &token))
            .await
            .map_err(|_| refused("the sign-in check failed"))?
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Failures> {
        let mut f = self.failures.lock().unwrap_or_else(|e| e.into_inner());
        let now = Instant::now();
        if f.since
            .is_none_or(|s| now.duration_since(s).as_secs() >= 60)
        {
            f.since = Some(now);
            f.counts.clear();
        }
        f
    }

    fn throttled(&self, key: &str) -> bool {
        let f = self.lock();
        match f.counts.get(key) {
            Some(n) => *n >= MAX_FAILURES_PER_MINUTE,
            None => false,
        }
    }

    fn failed(&self, key: &str) {
        let mut f = self.lock();
        if let Some(n) = f.counts.get_mut(key) {
            *n = n.saturating_add(1);
        } else if f.counts.len() < MAX_TRACKED {
            f.counts.insert(key.to_string(), 1);
        }
    }
}

/// The name and password of HTTP Basic credentials (base64 of
/// `name:password`, at most [`MAX_BASIC_BYTES`] decoded).
fn basic_parts(credentials: &str) -> Option<(String, String)> {
    let credentials = credentials.trim();
    if credentials.len() > MAX_BASIC_BYTES * 4 / 3 + 4 {
        return None;
    }
    let decoded = base64::engine::general_purpose::STANDARD
        .decode(credentials)
        .ok()
        .filter(|d| d.len() <= MAX_BASIC_BYTES)?;
    let decoded = String::from_utf8(decoded).ok()?;
    let (typed, password) = decoded.split_once(':')?;
    Some((typed.to_string(), password.to_string()))
}

fn source_key(source: IpAddr) -> String {
    format!("source {source}")
}

fn user_key(user: &str) -> String {
    format!("user {user}")
}

fn is_dns_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 253
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'.' || b == b'-')
}

/// The environment variable MIT Kerberos reads the acceptor's keytab from.
pub const KEYTAB_VARIABLE: &str = "KRB5_KTNAME";

/// What [`KEYTAB_VARIABLE`] must say for `keytab`: `FILE:` and the path,
/// so that a path is never read as another keytab type.
pub fn keytab_variable_value(keytab: &Path) -> std::ffi::OsString {
    let mut value = std::ffi::OsString::from("FILE:");
    value.push(keytab.as_os_str());
    value
}

/// The acceptor's credential: every key of the keytab (the principal is
/// checked after acceptance, so that the error says which was asked).
/// MIT takes the keytab from the process's environment, which the binary
/// sets when it starts (`deskbroker` starts itself again with it when
/// `--gateway-keytab` is given and the environment does not name it yet):
/// the environment is the process's, so it is checked, not assumed.
fn acquire(keytab: &Path) -> Result<Cred, String> {
    let wanted = keytab_variable_value(keytab);
    if std::env::var_os(KEYTAB_VARIABLE).as_ref() != Some(&wanted) {
        return Err(format!(
            "{KEYTAB_VARIABLE} must be {} in the gateway's environment",
            wanted.to_string_lossy()
        ));
    }
    std::fs::File::open(keytab).map_err(|e| e.to_string())?;
    // SPNEGO (what HTTP Negotiate carries) and Kerberos under it; which
    // mechanism a sign-in used is checked once it is accepted.
    let mut mechs = OidSet::new();
    for mech in [GSS_MECH_SPNEGO, GSS_MECH_KRB5] {
        mechs.add(mech).map_err(|e| e.to_string())?;
    }
    Cred::acquire(None, None, CredUsage::Accept, Some(&mechs)).map_err(|e| e.to_string())
}

/// One acceptance, on a blocking thread: MIT reads the keytab and the
/// replay cache.
fn accept_blocking(keytab: &Path, host: &str, token: &[u8]) -> Result<SignedIn, SignInError> {
    let refused = |why: String| SignInError::Refused(why);
    let cred = acquire(keytab).map_err(|e| refused(format!("the keytab: {e}")))?;
    let mut ctx = ServerCtx::new(Some(cred));
    let reply = ctx
        .step(token, None)
        .map_err(|e| refused(format!("the Kerberos ticket was refused: {e}")))?;
    if !ctx.is_complete() {
        // Kerberos completes in one leg; a mechanism wanting more is not
        // one this gateway takes.
        return Err(refused(
            "the sign-in needs more than one leg (not Kerberos)".into(),
        ));
    }
    let info = ctx
        .info()
        .map_err(|e| refused(format!("the signed-in context: {e}")))?;
    if info.mechanism != GSS_MECH_KRB5 {
        return Err(refused("the sign-in is not Kerberos".into()));
    }
    if info
        .flags
        .contains(libgssapi::context::CtxFlags::GSS_C_ANON_FLAG)
    {
        return Err(refused("an anonymous sign-in".into()));
    }
    let target = display(&info.target_name)?;
    let wanted = format!("HTTP/{host}@");
    let matches = target.len() > wanted.len()
        && target.as_bytes()[..wanted.len()].eq_ignore_ascii_case(wanted.as_bytes());
    if !matches {
        return Err(refused(format!(
            "the ticket is for {target}, not for HTTP/{host}"
        )));
    }
    let principal = display(&info.source_name)?;
    let user = user_name(&principal)
        .ok_or_else(|| refused(format!("the principal {principal:?} is not a user's")))?;
    Ok(SignedIn {
        user,
        reply: reply.map(|b| base64::engine::general_purpose::STANDARD.encode(&*b)),
    })
}

fn display(name: &libgssapi::name::Name) -> Result<String, SignInError> {
    let buf = name
        .display_name()
        .map_err(|e| SignInError::Refused(format!("a name: {e}")))?;
    String::from_utf8(buf.to_vec())
        .map_err(|_| SignInError::Refused("a name that is not UTF-8".into()))
}

/// `name@REALM` (a user's principal: one component) as `name@realm`.
pub fn user_name(principal: &str) -> Option<String> {
    let (name, realm) = principal.rsplit_once('@')?;
    let plain = |s: &str| {
        !s.is_empty()
            && s.len() <= 256
            && !s
                .chars()
                .any(|c| c.is_control() || matches!(c, '/' | '\\' | '@'))
    };
    if !plain(name) || !plain(realm) || realm.eq_ignore_ascii_case("WELLKNOWN:ANONYMOUS") {
        return None;
    }
    // Windows account names are case-insensitive: one case, so that one
    // account is one user whatever case it was typed in.
    Some(format!("{}@{}", name.to_lowercase(), realm.to_lowercase()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn principals_become_upn_like_names() {
        assert_eq!(
            user_name("alice@DESKBROKER.TEST").as_deref(),
            Some("alice@deskbroker.test")
        );
        assert_eq!(
            user_name("Alice@DESKBROKER.TEST").as_deref(),
            Some("alice@deskbroker.test")
        );
        assert_eq!(user_name("HTTP/gw.example@EXAMPLE"), None);
        assert_eq!(user_name("WELLKNOWN/ANONYMOUS@WELLKNOWN:ANONYMOUS"), None);
        assert_eq!(user_name("alice"), None);
        assert_eq!(user_name("@REALM"), None);
    }

    #[test]
    fn a_missing_keytab_stops_the_gateway_at_start() {
        let e = WindowsSignIn::new(SignInSettings {
            kerberos: Some(KerberosSettings {
                keytab: "/nonexistent/gateway.keytab".into(),
                service_host: "gw.example".into(),
            }),
            ntlm: None,
        })
        .unwrap_err();
        assert!(e.contains("/nonexistent/gateway.keytab"), "{e}");
    }
}
