//! The user portal's sign-in: OpenID Connect's authorization
//! code flow with PKCE, a nonce and a state, against the identity provider
//! of `serve --oidc-issuer`, and the server-side sessions it leads to. The
//! HTTP side (pages, cookies, the `.rdp` downloads) is `api/portal.rs`.
//!
//! What the broker trusts: only an ID token whose signature verifies with
//! a key the issuer publishes (its discovery document's JWKS, fetched over
//! HTTPS — or plain HTTP to a loopback issuer, for tests and a provider on
//! the same machine), whose issuer and audience are ours, which has not
//! expired and which carries the nonce of a login this broker began. From
//! it the broker takes the user's name (one claim, `--oidc-user-claim`,
//! `preferred_username` by default) and groups (`--oidc-groups-claim`,
//! `groups` by default), and nothing else. Rule T2 is then applied to those
//! exactly as to a `connect` with `groups`.
//!
//! Both maps here are bounded ([`MAX_PORTAL_SESSIONS`],
//! [`MAX_PENDING_LOGINS`]) and expire ([`SESSION_LIFETIME`],
//! [`PENDING_LOGIN_LIFETIME`], by the broker's clock: the one the portal is
//! built with, [`Portal::with_clock`]); sessions live in this process's memory
//! only, so a restart signs everyone out (they sign in again through the
//! provider, usually without typing anything).

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use placement::TimestampMs;

use crate::clock::Clock;

use crate::sync::MutexExt;
use openidconnect::core::{
    CoreAuthDisplay, CoreAuthPrompt, CoreAuthenticationFlow, CoreErrorResponseType,
    CoreGenderClaim, CoreJsonWebKey, CoreJweContentEncryptionAlgorithm, CoreJwsSigningAlgorithm,
    CoreProviderMetadata, CoreRevocableToken, CoreRevocationErrorResponse,
    CoreTokenIntrospectionResponse, CoreTokenType,
};
use openidconnect::{
    AdditionalClaims, AsyncHttpClient, AuthorizationCode, Client, ClientId, ClientSecret,
    CsrfToken, EmptyExtraTokenFields, EndpointMaybeSet, EndpointNotSet, EndpointSet, HttpRequest,
    HttpResponse, IdTokenFields, IssuerUrl, Nonce, PkceCodeChallenge, PkceCodeVerifier,
    RedirectUrl, Scope, StandardErrorResponse, StandardTokenResponse, TokenResponse,
};
use serde::{Deserialize, Serialize};

/// Most signed-in users kept at once; past it the session closest to its
/// end is dropped (that user signs in again).
pub const MAX_PORTAL_SESSIONS: usize = 10_000;
/// How long a portal session lasts after sign-in, whatever the ID token's
/// own lifetime (the broker does not refresh it; the user signs in again).
pub const SESSION_LIFETIME: Duration = Duration::from_secs(8 * 3600);
/// Most logins begun and not finished kept at once; past it the oldest is
/// dropped (its user starts again from `/portal`).
pub const MAX_PENDING_LOGINS: usize = 10_000;
/// How long a user has at the provider to sign in.
pub const PENDING_LOGIN_LIFETIME: Duration = Duration::from_secs(10 * 60);
/// How long the provider's discovery document and keys are used before
/// they are fetched again (so that a key rotation is picked up).
pub const DISCOVERY_LIFETIME: Duration = Duration::from_secs(3600);
/// Longest time one request to the provider may take.
pub const PROVIDER_REQUEST_TIMEOUT: Duration = Duration::from_secs(10);
/// Largest answer read from the provider (discovery, keys, tokens).
pub const MAX_PROVIDER_ANSWER_BYTES: usize = 1024 * 1024;
/// Longest user name taken from an ID token (as the API's `user`).
pub const MAX_USER_CHARS: usize = 256;

/// What `serve --oidc-*` configures. No `Debug`: it holds the secret.
#[derive(Clone)]
pub struct PortalConfig {
    /// The issuer URL (discovery is `{issuer}/.well-known/openid-configuration`).
    pub issuer: String,
    pub client_id: String,
    pub client_secret: String,
    /// How browsers reach this broker (`https://broker.contoso.com`), no
    /// trailing slash; the redirect URI is `{public_url}/portal/callback`.
    pub public_url: String,
    /// The ID token claim that names the user.
    pub user_claim: String,
    /// The ID token claim that lists the user's groups.
    pub groups_claim: String,
    /// Scopes asked for besides `openid`.
    pub scopes: Vec<String>,
    /// Which certificates the provider may present.
    pub trust: api::Trust,
}

/// Claims of the ID token beyond the standard ones (the groups claim has
/// no standard name).
#[derive(Clone, Debug, Default, Deserialize, Serialize)]
pub struct ExtraClaims {
    #[serde(flatten)]
    claims: HashMap<String, serde_json::Value>,
}

impl AdditionalClaims for ExtraClaims {}

type IdFields = IdTokenFields<
    ExtraClaims,
    EmptyExtraTokenFields,
    CoreGenderClaim,
    CoreJweContentEncryptionAlgorithm,
    CoreJwsSigningAlgorithm,
>;
type OidcTokenResponse = StandardTokenResponse<IdFields, CoreTokenType>;
type OidcClient = Client<
    ExtraClaims,
    CoreAuthDisplay,
    CoreGenderClaim,
    CoreJweContentEncryptionAlgorithm,
    CoreJsonWebKey,
    CoreAuthPrompt,
    StandardErrorResponse<CoreErrorResponseType>,
    OidcTokenResponse,
    CoreTokenIntrospectionResponse,
    CoreRevocableToken,
    CoreRevocationErrorResponse,
    EndpointSet,
    EndpointNotSet,
    EndpointNotSet,
    EndpointNotSet,
    EndpointMaybeSet,
    EndpointMaybeSet,
>;

/// Why a sign-in did not happen.
#[derive(Debug, thiserror::Error)]
pub enum PortalError {
    /// The callback's state is missing, unknown, expired, already used, or
    /// belongs to another browser (CSRF, a replayed or forged callback).
    #[error("{0}")]
    BadCallback(String),
    /// The provider refused or sent something the broker does not accept
    /// (an invalid ID token, no user claim…).
    #[error("{0}")]
    Refused(String),
    /// The provider could not be reached or answered nonsense.
    #[error("{0}")]
    Unavailable(String),
}

/// A signed-in user.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UserSession {
    pub user: String,
    pub groups: Vec<String>,
    /// By the portal's clock.
    expires: TimestampMs,
}

impl UserSession {
    /// A session for unit tests of the pages.
    #[cfg(test)]
    pub fn for_test(user: &str, groups: &[&str]) -> UserSession {
        UserSession {
            user: user.to_string(),
            groups: groups.iter().map(|g| g.to_string()).collect(),
            expires: Clock::system().now_ms() + lifetime_ms(SESSION_LIFETIME),
        }
    }
}

/// A login begun at `/portal` and not yet finished at the callback.
struct PendingLogin {
    nonce: Nonce,
    pkce_verifier: String,
    /// SHA-256 of the random value of the browser's login cookie: the
    /// callback must come from the browser that began the login.
    browser: String,
    /// By the portal's clock.
    expires: TimestampMs,
}

/// A map with a hard bound on its entries and an expiry per entry.
struct Bounded<T> {
    max: usize,
    entries: HashMap<String, T>,
}

impl<T> Bounded<T> {
    fn new(max: usize) -> Bounded<T> {
        Bounded {
            max,
            entries: HashMap::new(),
        }
    }

    /// Inserts, first dropping expired entries when full, then the entry
    /// closest to its end.
    fn insert(
        &mut self,
        key: String,
        value: T,
        now: TimestampMs,
        expires: impl Fn(&T) -> TimestampMs,
    ) {
        if self.entries.len() >= self.max {
            self.entries.retain(|_, v| expires(v) > now);
        }
        while self.entries.len() >= self.max {
            let Some(first) = self
                .entries
                .iter()
                .min_by_key(|(_, v)| expires(v))
                .map(|(k, _)| k.clone())
            else {
                break;
            };
            self.entries.remove(&first);
        }
        self.entries.insert(key, value);
    }
}

/// The provider's HTTP client: our reqwest with our rustls trust, no
/// redirects followed (the library's advice against SSRF), bounded in time
/// and size, plain HTTP only to loopback.
struct ProviderHttp(reqwest::Client);

#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct ProviderHttpError(String);

impl<'c> AsyncHttpClient<'c> for ProviderHttp {
    type Error = ProviderHttpError;
    type Future =
        Pin<Box<dyn Future<Output = Result<HttpResponse, ProviderHttpError>> + Send + 'c>>;

    fn call(&'c self, request: HttpRequest) -> Self::Future {
        Box::pin(async move {
            let fail = |what: &str, e: &dyn std::fmt::Display| {
                ProviderHttpError(format!("{what} {}: {e}", request.uri()))
            };
            let url = request.uri().to_string();
            check_transport(&url).map_err(ProviderHttpError)?;
            let mut r = self
                .0
                .request(request.method().clone(), &url)
                .body(request.body().clone());
            for (name, value) in request.headers() {
                r = r.header(name, value);
            }
            let mut answer = r.send().await.map_err(|e| fail("cannot reach", &e))?;
            let mut body = Vec::new();
            while let Some(chunk) = answer.chunk().await.map_err(|e| fail("cannot read", &e))? {
                if body.len() + chunk.len() > MAX_PROVIDER_ANSWER_BYTES {
                    return Err(ProviderHttpError(format!(
                        "{url} answered more than {MAX_PROVIDER_ANSWER_BYTES} bytes"
                    )));
                }
                body.extend_from_slice(&chunk);
            }
            let mut out = openidconnect::http::Response::builder().status(answer.status());
            for (name, value) in answer.headers() {
                out = out.header(name, value);
            }
            out.body(body).map_err(|e| fail("bad answer from", &e))
        })
    }
}

/// `https://` anywhere, `http://` only to a loopback host: the client
/// secret and the tokens never cross a network in the clear.
pub fn check_transport(url: &str) -> Result<(), String> {
    let parsed = openidconnect::url::Url::parse(url).map_err(|e| format!("{url}: {e}"))?;
    match parsed.scheme() {
        "https" => Ok(()),
        "http" if is_loopback(&parsed) => Ok(()),
        _ => Err(format!(
            "{url}: the identity provider must be reached over https:// (http:// only on \
             loopback)"
        )),
    }
}

fn is_loopback(url: &openidconnect::url::Url) -> bool {
    match url.host() {
        Some(openidconnect::url::Host::Ipv4(ip)) => ip.is_loopback(),
        Some(openidconnect::url::Host::Ipv6(ip)) => ip.is_loopback(),
        Some(openidconnect::url::Host::Domain(d)) => d.eq_ignore_ascii_case("localhost"),
        None => false,
    }
}

/// The portal's sign-in and sessions.
pub struct Portal {
    config: PortalConfig,
    issuer: IssuerUrl,
    redirect: RedirectUrl,
    http: ProviderHttp,
    /// The client built from the provider's discovery document, and when
    /// it was fetched; fetched at the first sign-in, not at start, so that
    /// the broker starts while the provider is down.
    provider: tokio::sync::Mutex<Option<(Instant, Arc<OidcClient>)>>,
    logins: Mutex<Bounded<PendingLogin>>,
    sessions: Mutex<Bounded<UserSession>>,
    /// What the lifetimes of logins and sessions are read on.
    clock: Clock,
}

impl std::fmt::Debug for Portal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Portal")
            .field("issuer", &self.config.issuer)
            .field("client_id", &self.config.client_id)
            .field("public_url", &self.config.public_url)
            .finish_non_exhaustive()
    }
}

/// SHA-256 in hex: how session ids, states and browser values are keyed,
/// so that what is kept in memory is not what a browser presents.
fn hashed(secret: &str) -> String {
    crate::state::secret_hash(secret)
}

impl Portal {
    /// Checks the configuration and builds the provider's HTTP client;
    /// does not contact the provider. Lifetimes are read on the system's
    /// clock (what every running broker uses).
    pub fn new(config: PortalConfig) -> Result<Portal, String> {
        Portal::with_clock(config, Clock::system())
    }

    /// [`Portal::new`], with the lifetimes of logins and sessions read on
    /// `clock`: give it the clock of the broker it serves, so that the
    /// portal's lifetimes pass with the broker's rules.
    pub fn with_clock(config: PortalConfig, clock: Clock) -> Result<Portal, String> {
        check_transport(&config.issuer).map_err(|e| format!("--oidc-issuer {e}"))?;
        let issuer = IssuerUrl::new(config.issuer.clone())
            .map_err(|e| format!("--oidc-issuer {}: {e}", config.issuer))?;
        let public = openidconnect::url::Url::parse(&config.public_url)
            .map_err(|e| format!("--public-url {}: {e}", config.public_url))?;
        if !matches!(public.scheme(), "http" | "https") || public.host().is_none() {
            return Err(format!(
                "--public-url {} must be http(s)://HOST[:PORT]",
                config.public_url
            ));
        }
        let redirect = RedirectUrl::new(format!(
            "{}/portal/callback",
            config.public_url.trim_end_matches('/')
        ))
        .map_err(|e| format!("--public-url {}: {e}", config.public_url))?;
        if config.client_id.trim().is_empty() || config.client_secret.is_empty() {
            return Err("--oidc-client-id and a non-empty --oidc-client-secret-file are needed with --oidc-issuer".into());
        }
        let tls = config
            .trust
            .client_config()
            .map_err(|e| format!("the identity provider's TLS: {e}"))?;
        let http = reqwest::Client::builder()
            .tls_backend_preconfigured(tls)
            .redirect(reqwest::redirect::Policy::none())
            .timeout(PROVIDER_REQUEST_TIMEOUT)
            .build()
            .map_err(|e| format!("cannot build the identity provider's client: {e}"))?;
        Ok(Portal {
            config,
            issuer,
            redirect,
            http: ProviderHttp(http),
            provider: tokio::sync::Mutex::new(None),
            logins: Mutex::new(Bounded::new(MAX_PENDING_LOGINS)),
            sessions: Mutex::new(Bounded::new(MAX_PORTAL_SESSIONS)),
            clock,
        })
    }

    /// Whether cookies must be `Secure` (the public URL is https).
    pub fn secure_cookies(&self) -> bool {
        self.config.public_url.starts_with("https://")
    }

    /// The client for the provider: discovered once, again after
    /// [`DISCOVERY_LIFETIME`] (or after a token the keys cannot verify).
    async fn client(&self, fresh: bool) -> Result<Arc<OidcClient>, PortalError> {
        let mut cached = self.provider.lock().await;
        if let Some((at, client)) = cached.as_ref()
            && !fresh
            && at.elapsed() < DISCOVERY_LIFETIME
        {
            return Ok(client.clone());
        }
        let metadata = CoreProviderMetadata::discover_async(self.issuer.clone(), &self.http)
            .await
            .map_err(|e| {
                PortalError::Unavailable(format!(
                    "cannot read the identity provider's discovery document at {}: {}",
                    self.config.issuer,
                    error_chain(&e)
                ))
            })?;
        let client = Arc::new(
            OidcClient::from_provider_metadata(
                metadata,
                ClientId::new(self.config.client_id.clone()),
                Some(ClientSecret::new(self.config.client_secret.clone())),
            )
            .set_redirect_uri(self.redirect.clone()),
        );
        *cached = Some((Instant::now(), client.clone()));
        Ok(client)
    }

    /// Begins a login: where to send the browser, and the value of its
    /// login cookie (which the callback must bring back).
    pub async fn begin_login(&self) -> Result<(String, String), PortalError> {
        let client = self.client(false).await?;
        let (challenge, verifier) = PkceCodeChallenge::new_random_sha256();
        let mut request = client.authorize_url(
            CoreAuthenticationFlow::AuthorizationCode,
            CsrfToken::new_random,
            Nonce::new_random,
        );
        for scope in &self.config.scopes {
            request = request.add_scope(Scope::new(scope.clone()));
        }
        let (url, state, nonce) = request.set_pkce_challenge(challenge).url();
        let browser = crate::state::new_secret("");
        let now = self.clock.now_ms();
        let pending = PendingLogin {
            nonce,
            pkce_verifier: verifier.secret().clone(),
            browser: hashed(&browser),
            expires: now + lifetime_ms(PENDING_LOGIN_LIFETIME),
        };
        self.logins
            .lock_or_recover()
            .insert(hashed(state.secret()), pending, now, |p| p.expires);
        Ok((url.to_string(), browser))
    }

    /// Finishes a login at the callback: the state must be one this broker
    /// issued, unused, unexpired, to the same browser; the code is then
    /// exchanged (with the PKCE verifier) and the ID token verified.
    /// Answers the new session's id and the session.
    pub async fn finish_login(
        &self,
        state: &str,
        code: &str,
        browser: Option<&str>,
    ) -> Result<(String, UserSession), PortalError> {
        let pending = {
            let mut logins = self.logins.lock_or_recover();
            // One use: taken out whatever happens next.
            logins.entries.remove(&hashed(state))
        };
        let Some(pending) = pending.filter(|p| p.expires > self.clock.now_ms()) else {
            return Err(PortalError::BadCallback(
                "this sign-in is unknown, expired or already used (its state does not match a \
                 login this broker began): start again at /portal"
                    .into(),
            ));
        };
        if browser.map(hashed).as_deref() != Some(pending.browser.as_str()) {
            return Err(PortalError::BadCallback(
                "this sign-in was begun in another browser: start again at /portal".into(),
            ));
        }
        let client = self.client(false).await?;
        let token = client
            .exchange_code(AuthorizationCode::new(code.to_string()))
            .map_err(|e| {
                PortalError::Unavailable(format!("the provider has no token endpoint: {e}"))
            })?
            .set_pkce_verifier(PkceCodeVerifier::new(pending.pkce_verifier))
            .request_async(&self.http)
            .await
            .map_err(|e| match e {
                openidconnect::RequestTokenError::ServerResponse(r) => {
                    PortalError::Refused(format!(
                        "the identity provider refused the sign-in: {}{}",
                        r.error(),
                        r.error_description()
                            .map(|d| format!(" ({d})"))
                            .unwrap_or_default()
                    ))
                }
                other => PortalError::Unavailable(format!(
                    "cannot exchange the code with the identity provider: {}",
                    error_chain(&other)
                )),
            })?;
        let id_token = token.id_token().ok_or_else(|| {
            PortalError::Refused("the identity provider answered no ID token".into())
        })?;
        let verified = match id_token.claims(&client.id_token_verifier(), &pending.nonce) {
            Ok(claims) => claims.clone(),
            // Perhaps the provider rotated its keys: fetch them again once.
            Err(openidconnect::ClaimsVerificationError::SignatureVerification(_)) => {
                let client = self.client(true).await?;
                id_token
                    .claims(&client.id_token_verifier(), &pending.nonce)
                    .map_err(|e| PortalError::Refused(format!("the ID token is not valid: {e}")))?
                    .clone()
            }
            Err(e) => {
                return Err(PortalError::Refused(format!(
                    "the ID token is not valid: {e}"
                )));
            }
        };
        let claims = serde_json::to_value(&verified)
            .map_err(|e| PortalError::Refused(format!("cannot read the ID token's claims: {e}")))?;
        let user = user_of(&claims, &self.config.user_claim)?;
        let groups = groups_of(&claims, &self.config.groups_claim)?;
        let now = self.clock.now_ms();
        let session = UserSession {
            user,
            groups,
            expires: now + lifetime_ms(SESSION_LIFETIME),
        };
        let id = crate::state::new_secret("");
        self.sessions
            .lock_or_recover()
            .insert(hashed(&id), session.clone(), now, |s| s.expires);
        tracing::info!(user = %session.user, groups = session.groups.len(), "portal sign-in");
        Ok((id, session))
    }

    /// The signed-in user of a session cookie's value, if it is live.
    pub fn session(&self, id: &str) -> Option<UserSession> {
        let sessions = self.sessions.lock_or_recover();
        sessions
            .entries
            .get(&hashed(id))
            .filter(|s| s.expires > self.clock.now_ms())
            .cloned()
    }

    /// Ends a session (sign-out).
    pub fn end_session(&self, id: &str) {
        self.sessions.lock_or_recover().entries.remove(&hashed(id));
    }
}

/// A lifetime in the clock's milliseconds.
fn lifetime_ms(lifetime: Duration) -> TimestampMs {
    lifetime.as_millis() as TimestampMs
}

/// The error and its sources, as one line.
fn error_chain(e: &dyn std::error::Error) -> String {
    let mut out = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        out.push_str(": ");
        out.push_str(&s.to_string());
        source = s.source();
    }
    out
}

/// The user's name: the string of claim `name`, non-empty, at most
/// [`MAX_USER_CHARS`], and a user name as every other source's is
/// (`placement::validate_user`: no blanks, control or invisible characters).
fn user_of(claims: &serde_json::Value, name: &str) -> Result<String, PortalError> {
    let user = claims
        .get(name)
        .and_then(|v| v.as_str())
        .map(str::trim)
        .unwrap_or_default();
    if user.is_empty() {
        return Err(PortalError::Refused(format!(
            "the ID token has no claim {name} naming the user (--oidc-user-claim)"
        )));
    }
    if user.chars().count() > MAX_USER_CHARS || placement::validate_user(name, user).is_err() {
        return Err(PortalError::Refused(format!(
            "the ID token's {name} is not a user name (at most {MAX_USER_CHARS} characters, \
             no blanks, control or invisible characters)"
        )));
    }
    Ok(user.to_string())
}

/// The user's groups: claim `name` as a list of strings (or one string);
/// none when the claim is absent. More than the entitlement lists hold
/// (`placement::MAX_ENTITLEMENTS`) is refused rather than cut, so that no
/// group that entitles is silently lost.
fn groups_of(claims: &serde_json::Value, name: &str) -> Result<Vec<String>, PortalError> {
    let bad = || {
        PortalError::Refused(format!(
            "the ID token's {name} claim is not a list of group names (--oidc-groups-claim)"
        ))
    };
    let groups: Vec<String> = match claims.get(name) {
        None | Some(serde_json::Value::Null) => Vec::new(),
        Some(serde_json::Value::String(g)) => vec![g.clone()],
        Some(serde_json::Value::Array(list)) => list
            .iter()
            .map(|g| g.as_str().map(str::to_string).ok_or_else(bad))
            .collect::<Result<_, _>>()?,
        Some(_) => return Err(bad()),
    };
    if groups.len() > placement::MAX_ENTITLEMENTS {
        return Err(PortalError::Refused(format!(
            "the ID token lists {} groups; at most {} are read",
            groups.len(),
            placement::MAX_ENTITLEMENTS
        )));
    }
    Ok(groups)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_provider_is_reached_over_https_or_loopback_only() {
        for ok in [
            "https://login.contoso.com/realms/x",
            "http://127.0.0.1:4000",
            "http://127.9.9.9/",
            "http://[::1]:80/x",
            "http://localhost:3000",
        ] {
            assert_eq!(check_transport(ok), Ok(()), "{ok}");
        }
        for bad in [
            "http://login.contoso.com",
            "http://10.0.0.1",
            "http://localhost.evil.com",
            "ftp://127.0.0.1",
            "nonsense",
        ] {
            assert!(check_transport(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn the_user_is_one_claim_and_must_be_a_name() {
        let c = json!({"preferred_username": "alice@contoso.com", "email": "a@x", "sub": "1"});
        assert_eq!(
            user_of(&c, "preferred_username").unwrap(),
            "alice@contoso.com"
        );
        assert_eq!(user_of(&c, "email").unwrap(), "a@x");
        // No fallback to another claim: a missing one refuses the sign-in.
        let c = json!({"sub": "1"});
        assert!(user_of(&c, "preferred_username").is_err());
        let c = json!({"preferred_username": "a\nb"});
        assert!(user_of(&c, "preferred_username").is_err());
        let c = json!({"preferred_username": "x".repeat(MAX_USER_CHARS + 1)});
        assert!(user_of(&c, "preferred_username").is_err());
        let c = json!({"preferred_username": 7});
        assert!(user_of(&c, "preferred_username").is_err());
        // A look-alike of another user's name, with a zero-width space.
        let c = json!({"preferred_username": "alice\u{200b}@contoso.com"});
        assert!(user_of(&c, "preferred_username").is_err());
    }

    #[test]
    fn groups_are_a_list_a_single_name_or_none() {
        assert_eq!(
            groups_of(&json!({"groups": ["a", "b"]}), "groups").unwrap(),
            ["a", "b"]
        );
        assert_eq!(groups_of(&json!({"roles": "a"}), "roles").unwrap(), ["a"]);
        assert!(groups_of(&json!({}), "groups").unwrap().is_empty());
        assert!(groups_of(&json!({"groups": [1]}), "groups").is_err());
        assert!(groups_of(&json!({"groups": {"a": 1}}), "groups").is_err());
        let many: Vec<String> = (0..=placement::MAX_ENTITLEMENTS)
            .map(|i| format!("g{i}"))
            .collect();
        assert!(groups_of(&json!({ "groups": many }), "groups").is_err());
    }

    /// A signed-in user's session ends when its lifetime is over by the
    /// portal's clock (the broker's), not a millisecond before.
    #[test]
    fn a_portal_session_lasts_its_lifetime_on_the_portals_clock() {
        let clock = Clock::manual(1_796_083_200_000);
        let portal = Portal::with_clock(
            PortalConfig {
                issuer: "https://login.contoso.com".into(),
                client_id: "deskbroker".into(),
                client_secret: "secret".into(),
                public_url: "https://desktops.contoso.com".into(),
                user_claim: "preferred_username".into(),
                groups_claim: "groups".into(),
                scopes: vec![],
                trust: api::Trust::system(),
            },
            clock.clone(),
        )
        .expect("a portal");
        let now = clock.now_ms();
        let session = UserSession {
            user: "alice".into(),
            groups: Vec::new(),
            expires: now + lifetime_ms(SESSION_LIFETIME),
        };
        portal
            .sessions
            .lock_or_recover()
            .insert(hashed("cookie"), session.clone(), now, |s| s.expires);
        clock.advance(SESSION_LIFETIME - Duration::from_millis(1));
        assert_eq!(portal.session("cookie"), Some(session), "ended early");
        clock.advance(Duration::from_millis(1));
        assert_eq!(portal.session("cookie"), None, "kept past its lifetime");
    }

    #[test]
    fn a_bounded_map_never_holds_more_than_its_bound() {
        let now: TimestampMs = 1_796_083_200_000;
        let mut m: Bounded<TimestampMs> = Bounded::new(3);
        for i in 0..10i64 {
            m.insert(i.to_string(), now + i * 1000, now, |e| *e);
            assert!(m.entries.len() <= 3);
        }
        // The ones closest to their end went first.
        let mut kept: Vec<_> = m.entries.keys().cloned().collect();
        kept.sort();
        assert_eq!(kept, ["7", "8", "9"]);
        // Expired entries go before live ones.
        let mut m: Bounded<TimestampMs> = Bounded::new(2);
        m.insert("old".into(), now, now, |e| *e);
        m.insert("live".into(), now + 60_000, now, |e| *e);
        m.insert("new".into(), now + 30_000, now, |e| *e);
        assert!(m.entries.contains_key("live") && m.entries.contains_key("new"));
    }
}
