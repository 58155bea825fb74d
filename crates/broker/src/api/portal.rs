//! The user portal at `/portal`: a person signs in with the
//! organisation's OpenID Connect provider (`crate::portal`) and gets a
//! page listing the host pools they are entitled to (rule T2, the same
//! check as `connect`), each with a link to its `.rdp` file — the same file
//! the API's `rdpFile?user=` gives for that user (`pools::rdp_file_for`).
//!
//! These routes are outside `/api/v1` and take no bearer token: the
//! browser holds a session cookie (a random id; the user and groups stay on
//! the server), `HttpOnly`, `SameSite=Lax`, `Secure` when the public URL is
//! https. They are not in the OpenAPI document nor the authorization table
//! (which decide bearer-token calls), and the unauthenticated throttle
//! (rule T4) counts them like any request without a credential.
//!
//! CSRF and open redirects: a login's `state` is one-use, expires, and is
//! bound to the browser that began it by a second cookie; sign-out is a
//! POST, and the session cookie is not sent with cross-site POSTs; every
//! redirect goes to the provider's authorization URL or to `/portal`,
//! never to a URL taken from a request. Pages are rendered on the server
//! with every value HTML-escaped, under a strict Content-Security-Policy
//! (no script at all).

use std::sync::Arc;

use api::ErrorCode;
use axum::Router;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, HeaderName, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde::Deserialize;

use super::Query;
use super::error::ApiError;
use crate::directory::DirectoryError;
use crate::portal::{Portal, PortalError, UserSession};
use crate::state::Broker;
use crate::workspace::{PublishedApp, PublishedPool};

/// The portal's policy: no script at all, styles and images from this
/// origin only, forms only to this origin (sign-out), no framing.
pub const PORTAL_CONTENT_SECURITY_POLICY: &str = "default-src 'none'; style-src 'self'; \
     img-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'";

const SECURITY_HEADERS: [(HeaderName, HeaderValue); 4] =
    super::console::security_headers(PORTAL_CONTENT_SECURITY_POLICY);

/// The session cookie's name; `__Host-` (Secure, Path=/, no Domain: no
/// sibling domain can set or shadow it) when the portal is served over
/// https.
fn session_cookie(portal: &Portal) -> &'static str {
    if portal.secure_cookies() {
        "__Host-deskbroker-portal"
    } else {
        "deskbroker-portal"
    }
}

/// The cookie that binds a login's state to the browser that began it.
fn login_cookie(portal: &Portal) -> &'static str {
    if portal.secure_cookies() {
        "__Host-deskbroker-login"
    } else {
        "deskbroker-login"
    }
}

/// A `Set-Cookie` value: `HttpOnly; SameSite=Lax; Path=/`, `Secure` over
/// https; `max_age_seconds` 0 deletes it.
fn set_cookie(portal: &Portal, name: &str, value: &str, max_age_seconds: u64) -> HeaderValue {
    let secure = if portal.secure_cookies() {
        "; Secure"
    } else {
        ""
    };
    HeaderValue::from_str(&format!(
        "{name}={value}; Path=/; Max-Age={max_age_seconds}; HttpOnly; SameSite=Lax{secure}"
    ))
    .unwrap_or_else(|_| HeaderValue::from_static("invalid=; Max-Age=0"))
}

/// The value of cookie `name` in the request, if sent.
fn cookie<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(n, _)| *n == name)
        .map(|(_, v)| v)
}

/// `/portal` and what is under it.
pub fn routes() -> Router<super::ApiState> {
    Router::new()
        .route("/portal", get(page))
        .route("/portal/callback", get(callback))
        .route("/portal/logout", post(logout))
        .route("/portal/pools/{pool}/rdpFile", get(rdp_file))
        .route("/portal/pools/{pool}/web", get(web))
        .route(
            "/portal/pools/{pool}/applications/{alias}/rdpFile",
            get(application_file),
        )
        .route(
            "/portal/pools/{pool}/applications/{alias}/icon",
            get(application_icon),
        )
        .route("/portal/portal.css", get(stylesheet))
        .layer(axum::middleware::map_response(with_security_headers))
}

async fn with_security_headers(mut answer: Response) -> Response {
    for (name, value) in SECURITY_HEADERS {
        answer.headers_mut().insert(name, value);
    }
    answer
}

/// The portal, or 404 saying it is not configured.
fn configured(b: &Broker) -> Result<&Arc<Portal>, ApiError> {
    b.settings().portal.as_ref().ok_or_else(|| {
        ApiError::new(
            ErrorCode::NotFound,
            "the user portal is not configured on this broker: start serve with --oidc-issuer, \
             --oidc-client-id and --oidc-client-secret-file",
        )
    })
}

impl From<PortalError> for ApiError {
    fn from(e: PortalError) -> ApiError {
        let code = match e {
            PortalError::BadCallback(_) => ErrorCode::Forbidden,
            PortalError::Refused(_) => ErrorCode::Unauthorized,
            PortalError::Unavailable(_) => ErrorCode::IdentityProviderUnavailable,
        };
        ApiError::new(code, e.to_string())
    }
}

/// The signed-in user of the request's session cookie.
fn signed_in(portal: &Portal, headers: &HeaderMap) -> Option<UserSession> {
    cookie(headers, session_cookie(portal)).and_then(|id| portal.session(id))
}

/// `GET /portal`: the user's pools, or off to the provider to sign in.
async fn page(State(b): State<Arc<Broker>>, headers: HeaderMap) -> Result<Response, ApiError> {
    let portal = configured(&b)?;
    let Some(session) = signed_in(portal, &headers) else {
        let (url, browser) = portal.begin_login().await?;
        let location = HeaderValue::from_str(&url).map_err(|_| {
            ApiError::new(
                ErrorCode::IdentityProviderUnavailable,
                "the identity provider's authorization URL is not a valid header value",
            )
        })?;
        return Ok((
            StatusCode::SEE_OTHER,
            [
                (header::LOCATION, location),
                (
                    header::SET_COOKIE,
                    set_cookie(
                        portal,
                        login_cookie(portal),
                        &browser,
                        crate::portal::PENDING_LOGIN_LIFETIME.as_secs(),
                    ),
                ),
            ],
        )
            .into_response());
    };
    let (pools, unlisted) = entitled_pools(&b, &session).await?;
    let gateway = b.connector().rd_gateway_address().is_ok();
    Ok(html(
        StatusCode::OK,
        &pools_page(&session, &pools, gateway, unlisted),
    ))
}

/// The groups that decide what `session`'s user is given: the ID token's,
/// or the directory's where one is configured (AD1), asked only when a
/// decision needs a group. When the directory cannot give them, what is
/// given without a group (open to all, or naming the user) is still
/// offered, as AD1 keeps those decisions standing; the second value then
/// says, for the user, why what is given through a group is not listed.
async fn deciding_groups(b: &Broker, session: &UserSession) -> (Vec<String>, Option<&'static str>) {
    let Some(directory) = b.connector().directory() else {
        return (session.groups.clone(), None);
    };
    if !b.workspace().needs_groups(&session.user, None) {
        return (Vec::new(), None);
    }
    match directory.groups(&session.user).await {
        Ok(user) => (user.groups.clone(), None),
        // The directory's own words (its servers, an entry's name) are for
        // the operator's log, where `groups` put them.
        Err(DirectoryError::Unavailable(_)) => (
            Vec::new(),
            Some(
                "Desktops and applications you get through a group are not listed: the \
                 directory that holds your groups cannot be reached. Try again in a few minutes.",
            ),
        ),
        Err(DirectoryError::Ambiguous(_)) => (
            Vec::new(),
            Some(
                "Desktops and applications you get through a group are not listed: your groups \
                 could not be read from the directory. Ask your administrator.",
            ),
        ),
    }
}

/// What `session`'s user is given (rules T2, F1: `Workspace::published_to`)
/// in the pools the RDP front door may reach (`allowFrontDoor`: the files
/// go through it, so another pool's file would be refused there), by pool
/// name, with why some could not be listed (see [`deciding_groups`]).
async fn entitled_pools(
    b: &Broker,
    session: &UserSession,
) -> Result<(Vec<PublishedPool>, Option<&'static str>), ApiError> {
    let (groups, unlisted) = deciding_groups(b, session).await;
    let mut pools = b.workspace().published_to(&session.user, &groups);
    pools.retain(|p| {
        b.core()
            .peek(&p.pool, |p| Ok(p.config().allow_front_door))
            .unwrap_or(false)
    });
    // Nothing is shown that a crash could take back.
    b.core().writer().flush().await?;
    Ok((pools, unlisted))
}

#[derive(Deserialize)]
struct CallbackQuery {
    code: Option<String>,
    state: Option<String>,
    error: Option<String>,
    error_description: Option<String>,
}

/// `GET /portal/callback?code=…&state=…`: where the provider sends the
/// browser back. A missing, forged, expired, reused or other browser's
/// state is 403 and nothing is signed in.
async fn callback(
    State(b): State<Arc<Broker>>,
    headers: HeaderMap,
    Query(q): Query<CallbackQuery>,
) -> Result<Response, ApiError> {
    let portal = configured(&b)?;
    let Some(state) = q.state.filter(|s| !s.is_empty()) else {
        return Err(ApiError::forbidden(
            "the callback carries no state: start the sign-in at /portal",
        ));
    };
    if let Some(error) = q.error {
        // The login is over either way: forget it.
        let _ = portal.finish_login(&state, "", None).await;
        return Err(ApiError::unauthorized(format!(
            "the identity provider did not sign you in: {error}{}",
            q.error_description
                .map(|d| format!(" ({d})"))
                .unwrap_or_default()
        )));
    }
    let Some(code) = q.code.filter(|c| !c.is_empty()) else {
        return Err(ApiError::invalid("the callback carries no code"));
    };
    let browser = cookie(&headers, login_cookie(portal));
    let (id, _) = portal.finish_login(&state, &code, browser).await?;
    let mut answer = (
        StatusCode::SEE_OTHER,
        [(header::LOCATION, HeaderValue::from_static("/portal"))],
    )
        .into_response();
    let cookies = answer.headers_mut();
    cookies.append(
        header::SET_COOKIE,
        set_cookie(
            portal,
            session_cookie(portal),
            &id,
            crate::portal::SESSION_LIFETIME.as_secs(),
        ),
    );
    cookies.append(
        header::SET_COOKIE,
        set_cookie(portal, login_cookie(portal), "", 0),
    );
    Ok(answer)
}

/// `POST /portal/logout`: ends the session and deletes its cookie.
async fn logout(State(b): State<Arc<Broker>>, headers: HeaderMap) -> Result<Response, ApiError> {
    let portal = configured(&b)?;
    if let Some(id) = cookie(&headers, session_cookie(portal)) {
        portal.end_session(id);
    }
    let mut answer = html(StatusCode::OK, &signed_out_page());
    answer.headers_mut().append(
        header::SET_COOKIE,
        set_cookie(portal, session_cookie(portal), "", 0),
    );
    Ok(answer)
}

/// The signed-in user of a request for a ticket, and who they are to the
/// audit log; 401 without a live session, 404 without a portal.
fn requester(
    b: &Broker,
    headers: &HeaderMap,
    extensions: &axum::http::Extensions,
) -> Result<(UserSession, super::pools::Issuer), ApiError> {
    let portal = configured(b)?;
    let session = signed_in(portal, headers).ok_or_else(|| {
        ApiError::unauthorized("not signed in to the portal (or the session ended): open /portal")
    })?;
    let issuer = super::pools::Issuer {
        actor: format!("portal:{}", session.user),
        action_prefix: "/portal/pools",
        source: super::pools::source_of(extensions),
    };
    Ok((session, issuer))
}

/// [`requester`], with the groups that decide what they are given in
/// `pool` (the directory's, where one is configured and the decision needs
/// them, AD1; else the ID token's).
async fn requester_in(
    b: &Broker,
    headers: &HeaderMap,
    extensions: &axum::http::Extensions,
    pool: &str,
) -> Result<(UserSession, super::pools::Issuer, Vec<String>), ApiError> {
    let (session, issuer) = requester(b, headers, extensions)?;
    let groups = b
        .workspace()
        .groups_of(&session.user, Some(pool), &session.groups)
        .await?;
    Ok((session, issuer, groups))
}

/// `GET /portal/pools/{pool}/rdpFile`: the pool's `.rdp` file for the
/// signed-in user; 401 without a session, 403 `NotEntitled` for a pool
/// rule T2 keeps them out of, 403 `Forbidden` for a pool the front door
/// may not reach. With `?gateway=true`, the file through the RD Gateway
/// (400 `InvalidParameter` when the broker knows of none).
async fn rdp_file(
    State(b): State<Arc<Broker>>,
    Path(pool): Path<String>,
    Query(q): Query<PortalFileQuery>,
    extensions: axum::http::Extensions,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    let (session, issuer, groups) = requester_in(&b, &headers, &extensions, &pool).await?;
    front_door_reaches(&b, &pool)?;
    b.workspace()
        .published_desktop(&pool, &session.user, &groups)?;
    let file = super::pools::rdp_file_for(
        &b,
        &pool,
        Some((session.user.as_str(), session.groups.as_slice())),
        q.gateway,
        &issuer,
    )
    .await?;
    Ok(super::pools::rdp_answer(file))
}

/// `GET /portal/pools/{pool}/web`: "Open in the browser" (rule WEB3). Sends
/// the signed-in user on to the RD Gateway's `/web` page with a fresh
/// connection ticket in the fragment (`Connector::web_url`): every click makes
/// a new one, and the answer is never cached. Refused as the file is (401
/// without a session, 403 for a pool the user may not use or the doors may
/// not reach, 400 when the broker knows of no RD Gateway).
async fn web(
    State(b): State<Arc<Broker>>,
    Path(pool): Path<String>,
    extensions: axum::http::Extensions,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    let (session, issuer, groups) = requester_in(&b, &headers, &extensions, &pool).await?;
    b.workspace()
        .published_desktop(&pool, &session.user, &groups)?;
    let web = super::pools::placing(
        &b,
        &issuer,
        &pool,
        "web",
        b.connector().web_url(&pool, &session.user, &session.groups),
    )
    .await?;
    super::pools::audit_ticket(
        &b,
        &issuer,
        "web",
        &web.pool,
        &session.user,
        web.expires_s,
        None,
    )
    .await;
    Ok((
        StatusCode::SEE_OTHER,
        [
            (header::LOCATION, web.url),
            (header::CACHE_CONTROL, "no-store".to_string()),
        ],
    )
        .into_response())
}

/// `GET /portal/pools/{pool}/applications/{alias}/rdpFile`: the file that
/// opens an application the signed-in user is given (rule F5), made as
/// the API's (`applications::application_file`): with their connection
/// ticket, through the front door or, with `?gateway=true`, the RD
/// Gateway. 401 without a session, 403 `NotEntitled` for an application
/// no group gives them, 403 `Forbidden` for a pool the front door may not
/// reach.
async fn application_file(
    State(b): State<Arc<Broker>>,
    Path((pool, alias)): Path<(String, String)>,
    Query(q): Query<PortalFileQuery>,
    extensions: axum::http::Extensions,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    let (session, issuer, groups) = requester_in(&b, &headers, &extensions, &pool).await?;
    front_door_reaches(&b, &pool)?;
    let file = super::applications::application_file(
        &b,
        &pool,
        &alias,
        Some((session.user.as_str(), groups.as_slice())),
        q.gateway,
        None,
        &issuer,
    )
    .await?;
    Ok(super::pools::rdp_download(&alias, file.body))
}

/// `GET /portal/pools/{pool}/applications/{alias}/icon`: the icon of an
/// application the signed-in user is given, as a PNG (its own, or made
/// from its ICO), with a fixed content type: whatever bytes an icon
/// holds, a browser shows it as an image or not at all. 404 for an
/// application without an icon.
async fn application_icon(
    State(b): State<Arc<Broker>>,
    Path((pool, alias)): Path<(String, String)>,
    extensions: axum::http::Extensions,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    let (session, _, groups) = requester_in(&b, &headers, &extensions, &pool).await?;
    let app = b
        .workspace()
        .published_application(&pool, &alias, &session.user, &groups)?;
    let icons = crate::workspace::icons_of(&app)
        .map_err(|e| ApiError::invalid(format!("the application's icon cannot be shown: {e}")))?
        .ok_or_else(|| {
            ApiError::new(
                ErrorCode::NotFound,
                format!("application {alias} of host pool {pool} has no icon"),
            )
        })?;
    Ok((
        [
            (header::CONTENT_TYPE, "image/png"),
            (header::CACHE_CONTROL, "private, max-age=300"),
        ],
        icons.png_32,
    )
        .into_response())
}

/// Refused with 403 `Forbidden` when the front door may not reach `pool`
/// (`allowFrontDoor` false): the portal's files go through it.
fn front_door_reaches(b: &Broker, pool: &str) -> Result<(), ApiError> {
    b.core().peek(pool, |p| {
        if p.config().allow_front_door {
            Ok(())
        } else {
            Err(crate::BrokerError::Forbidden(format!(
                "host pool {} is not reached through the RDP front door (allowFrontDoor is false)",
                p.name()
            )))
        }
    })?;
    Ok(())
}

/// `?gateway=true` of the portal's file.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct PortalFileQuery {
    #[serde(default)]
    gateway: bool,
}

/// The page's style (a file: the policy allows no inline style).
async fn stylesheet() -> Response {
    (
        [
            (header::CONTENT_TYPE, "text/css; charset=utf-8"),
            (header::CACHE_CONTROL, "no-cache"),
        ],
        STYLE,
    )
        .into_response()
}

const STYLE: &str = "body{font-family:system-ui,sans-serif;max-width:44rem;margin:2rem auto;\
padding:0 1rem;color:#1b1f24}header{display:flex;justify-content:space-between;\
align-items:baseline;gap:1rem;flex-wrap:wrap}ul{list-style:none;padding:0}\
li{display:flex;justify-content:space-between;align-items:center;padding:.75rem 0;\
border-bottom:1px solid #d0d7de}.pool-name{font-weight:600}.pool-id{color:#57606a;\
font-size:.9em;margin-left:.5rem}a.download{padding:.35rem .8rem;border:1px solid #0969da;\
border-radius:6px;color:#0969da;text-decoration:none}button{font:inherit;padding:.3rem .8rem}\
.notice{padding:.5rem .75rem;border-left:4px solid #9a6700;background:#fff8c5}\
ul.apps{display:grid;grid-template-columns:repeat(auto-fill,minmax(9rem,1fr));gap:.75rem}\
li.app{flex-direction:column;gap:.5rem;padding:.75rem;border:1px solid #d0d7de;\
border-radius:8px;text-align:center}li.app>span{display:flex;flex-direction:column;\
align-items:center;gap:.35rem}.app-name{font-weight:600}h3.folder{font-size:1rem;\
color:#57606a;margin:1rem 0 .5rem}";

/// `&`, `<`, `>`, `"` and `'` as entities: safe in text and in quoted
/// attributes.
pub fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// Percent-encodes everything but unreserved characters, for a path
/// segment (pool names are already restricted; this keeps the rule local).
fn path_segment(text: &str) -> String {
    const RESERVED: &percent_encoding::AsciiSet = &percent_encoding::NON_ALPHANUMERIC
        .remove(b'-')
        .remove(b'.')
        .remove(b'_')
        .remove(b'~');
    percent_encoding::utf8_percent_encode(text, RESERVED).to_string()
}

fn html(status: StatusCode, body: &str) -> Response {
    (
        status,
        [(header::CONTENT_TYPE, "text/html; charset=utf-8")],
        body.to_string(),
    )
        .into_response()
}

fn document(title: &str, body: &str) -> String {
    format!(
        "<!doctype html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n\
         <title>{}</title>\n<link rel=\"stylesheet\" href=\"/portal/portal.css\">\n\
         </head>\n<body>\n{body}</body>\n</html>\n",
        escape(title)
    )
}

/// The signed-in user's desktops and applications (rule F5): each pool
/// whose desktop they are given with its `.rdp` file, and with `gateway`
/// (the broker knows of an RD Gateway) its file through the gateway too,
/// for use outside the office, and a link that opens the desktop in a new
/// browser tab (the page is the gateway's); then their applications as
/// tiles with their icons, by folder (the top level first), each with the
/// file that opens it. `unlisted` says why what a group gives could not
/// be listed, if so.
fn pools_page(
    session: &UserSession,
    pools: &[PublishedPool],
    gateway: bool,
    unlisted: Option<&str>,
) -> String {
    let mut body = format!(
        "<header>\n<h1>Your desktops</h1>\n<p>Signed in as <strong id=\"user\">{}</strong></p>\n\
         <form method=\"post\" action=\"/portal/logout\"><button id=\"signout\" \
         type=\"submit\">Sign out</button></form>\n</header>\n<main>\n",
        escape(&session.user)
    );
    if let Some(why) = unlisted {
        body.push_str(&format!(
            "<p id=\"unlisted\" class=\"notice\">{}</p>\n",
            escape(why)
        ));
    }
    let desktops: Vec<&PublishedPool> = pools.iter().filter(|p| p.desktop).collect();
    let any_application = pools.iter().any(|p| !p.applications.is_empty());
    if desktops.is_empty() && !any_application {
        // With a notice, it says why nothing is listed.
        if unlisted.is_none() {
            body.push_str(
                "<p id=\"none\">No desktop is available to you. Ask your administrator to \
                 entitle you to a host pool.</p>\n",
            );
        }
        body.push_str("</main>\n");
        return document("Your desktops", &body);
    }
    if !desktops.is_empty() {
        body.push_str("<ul id=\"pools\">\n");
        for p in desktops {
            body.push_str(&format!(
                "<li class=\"pool\" data-pool=\"{name}\"><span><span class=\"pool-name\">{shown}\
                 </span><span class=\"pool-id\">{name}</span></span> <a class=\"download\" \
                 href=\"/portal/pools/{path}/rdpFile\" download=\"{name}.rdp\">Download .rdp</a>{via}\
                 </li>\n",
                name = escape(&p.pool),
                shown = escape(&p.title),
                path = escape(&path_segment(&p.pool)),
                via = if gateway {
                    format!(
                        " <a class=\"download-gateway\" href=\"/portal/pools/{path}/rdpFile?gateway=true\" \
                         download=\"{name}-gateway.rdp\">Download .rdp through the gateway</a> \
                         <a class=\"browser\" href=\"/portal/pools/{path}/web\" target=\"_blank\" \
                         rel=\"noopener noreferrer\">Open in the browser</a>",
                        name = escape(&p.pool),
                        path = escape(&path_segment(&p.pool)),
                    )
                } else {
                    String::new()
                },
            ));
        }
        body.push_str("</ul>\n");
    }
    if any_application {
        body.push_str(&applications_section(pools, gateway));
    }
    body.push_str(
        "<p>Open the downloaded file with Remote Desktop Connection (mstsc) or another RDP client",
    );
    body.push_str(if gateway {
        ", or open a desktop in this browser.</p>\n"
    } else {
        ".</p>\n"
    });
    body.push_str("</main>\n");
    document("Your desktops", &body)
}

/// The applications of `pools` as tiles, one list a folder: the top
/// level (no folder) first, then the folders by name.
fn applications_section(pools: &[PublishedPool], gateway: bool) -> String {
    let mut folders: std::collections::BTreeMap<&str, Vec<(&str, &PublishedApp)>> =
        std::collections::BTreeMap::new();
    for p in pools {
        for app in &p.applications {
            folders
                .entry(app.application.folder.as_str())
                .or_default()
                .push((p.pool.as_str(), app));
        }
    }
    let mut html = String::from("<section id=\"applications\">\n<h2>Applications</h2>\n");
    for (folder, mut apps) in folders {
        apps.sort_by(|a, b| (a.1.application.display_name).cmp(&b.1.application.display_name));
        if !folder.is_empty() {
            html.push_str(&format!("<h3 class=\"folder\">{}</h3>\n", escape(folder)));
        }
        html.push_str(&format!(
            "<ul class=\"apps\" data-folder=\"{}\">\n",
            escape(folder)
        ));
        for (pool, app) in apps {
            let alias = app.alias.as_str();
            let base = format!(
                "/portal/pools/{}/applications/{}",
                escape(&path_segment(pool)),
                escape(&path_segment(alias))
            );
            let icon = if app.has_icon {
                format!(
                    "<img class=\"icon\" src=\"{base}/icon\" alt=\"\" width=\"32\" height=\"32\"> "
                )
            } else {
                String::new()
            };
            let via = if gateway {
                format!(
                    " <a class=\"download-gateway\" href=\"{base}/rdpFile?gateway=true\" \
                     download=\"{alias}-gateway.rdp\">Through the gateway</a>",
                    alias = escape(alias)
                )
            } else {
                String::new()
            };
            html.push_str(&format!(
                "<li class=\"app\" data-pool=\"{pool}\" data-app=\"{alias}\"><span>{icon}<span \
                 class=\"app-name\">{name}</span></span> <a class=\"download\" href=\"{base}/rdpFile\" \
                 download=\"{alias}.rdp\">Open</a>{via}</li>\n",
                pool = escape(pool),
                alias = escape(alias),
                name = escape(&app.application.display_name),
            ));
        }
        html.push_str("</ul>\n");
    }
    html.push_str("</section>\n");
    html
}

fn signed_out_page() -> String {
    document(
        "Signed out",
        "<main>\n<h1 id=\"signed-out\">Signed out</h1>\n<p><a href=\"/portal\">Sign in again</a></p>\n</main>\n",
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn desktop(pool: &str, title: &str) -> PublishedPool {
        PublishedPool {
            pool: pool.into(),
            title: title.into(),
            desktop: true,
            applications: Vec::new(),
        }
    }

    #[test]
    fn every_value_on_a_page_is_escaped() {
        assert_eq!(
            escape(r#"<script>"x"&'y'</script>"#),
            "&lt;script&gt;&quot;x&quot;&amp;&#39;y&#39;&lt;/script&gt;"
        );
        let session = UserSession::for_test("<b>eve</b>", &[]);
        let page = pools_page(
            &session,
            &[desktop("p1", "<img src=x onerror=alert(1)>")],
            true,
            None,
        );
        assert!(!page.contains("<b>eve"), "{page}");
        assert!(!page.contains("<img"), "{page}");
        assert!(page.contains("&lt;img src=x onerror=alert(1)&gt;"));
    }

    #[test]
    fn the_gateway_file_and_the_browser_are_offered_only_with_a_gateway() {
        let session = UserSession::for_test("alice", &[]);
        let pools = [desktop("p1", "p1")];
        let link = "href=\"/portal/pools/p1/rdpFile?gateway=true\"";
        let with = pools_page(&session, &pools, true, None);
        assert!(with.contains(link), "{with}");
        assert!(with.contains("href=\"/portal/pools/p1/web\""), "{with}");
        let without = pools_page(&session, &pools, false, None);
        assert!(!without.contains("gateway"), "{without}");
        assert!(!without.contains("/web"), "{without}");
        assert!(without.contains("href=\"/portal/pools/p1/rdpFile\""));
    }

    #[test]
    fn pools_a_group_gives_that_could_not_be_decided_are_said_to_be_unlisted() {
        let session = UserSession::for_test("alice", &[]);
        let why = "not listed: <the directory> is away";
        let pools = [desktop("p1", "p1")];
        let page = pools_page(&session, &pools, false, Some(why));
        assert!(
            page.contains("id=\"unlisted\"") && page.contains("&lt;the directory&gt;"),
            "{page}"
        );
        assert!(page.contains("data-pool=\"p1\""), "{page}");
        // Nothing listed: the notice alone, not "no desktop is available".
        let page = pools_page(&session, &[], false, Some(why));
        assert!(page.contains("id=\"unlisted\""), "{page}");
        assert!(!page.contains("id=\"none\""), "{page}");
        let page = pools_page(&session, &[], false, None);
        assert!(page.contains("id=\"none\"") && !page.contains("unlisted"));
    }

    #[test]
    fn applications_are_tiles_by_folder_with_their_icons_and_files() {
        let session = UserSession::for_test("alice", &[]);
        let app = |alias: &str, name: &str, folder: &str, icon: bool| PublishedApp {
            alias: alias.into(),
            application: placement::Application {
                display_name: name.into(),
                program: "||x".into(),
                command_line_policy: placement::CommandLinePolicy::None,
                command_line: String::new(),
                icon_png: None,
                icon_ico: None,
                file_extensions: Vec::new(),
                folder: folder.into(),
                modified_ms: 0,
            },
            has_icon: icon,
        };
        let pools = [PublishedPool {
            pool: "apps".into(),
            title: "Apps".into(),
            desktop: false,
            applications: vec![
                app("calc", "Calculator", "", false),
                app("excel", "Excel <&>", "Office", true),
                app("word", "Word", "Office", true),
            ],
        }];
        let page = pools_page(&session, &pools, true, None);
        // No desktop tile for a pool that gives applications only.
        assert!(!page.contains("id=\"pools\""), "{page}");
        assert!(!page.contains("id=\"none\""), "{page}");
        // The top level first, then Office with its two, by name.
        let top = page.find("data-folder=\"\"").expect("the top level");
        let office = page.find("data-folder=\"Office\"").expect("Office");
        assert!(top < office, "{page}");
        let excel = page.find("data-app=\"excel\"").expect("excel");
        let word = page.find("data-app=\"word\"").expect("word");
        assert!(office < excel && excel < word, "{page}");
        assert!(page.contains("Excel &lt;&amp;&gt;"), "{page}");
        assert!(page.contains("src=\"/portal/pools/apps/applications/word/icon\""));
        assert!(!page.contains("applications/calc/icon"), "{page}");
        assert!(page.contains("href=\"/portal/pools/apps/applications/calc/rdpFile\""));
        assert!(
            page.contains("href=\"/portal/pools/apps/applications/calc/rdpFile?gateway=true\"")
        );
    }

    #[test]
    fn cookies_are_read_by_exact_name() {
        let mut h = HeaderMap::new();
        h.insert(
            header::COOKIE,
            HeaderValue::from_static("xdeskbroker-portal=1; deskbroker-portal=abc; other=2"),
        );
        assert_eq!(cookie(&h, "deskbroker-portal"), Some("abc"));
        assert_eq!(cookie(&h, "missing"), None);
    }

    fn portal(public_url: &str) -> Portal {
        Portal::new(crate::portal::PortalConfig {
            issuer: "https://login.contoso.com".into(),
            client_id: "deskbroker".into(),
            client_secret: "secret".into(),
            public_url: public_url.into(),
            user_claim: "preferred_username".into(),
            groups_claim: "groups".into(),
            scopes: vec![],
            trust: api::Trust::system(),
        })
        .expect("a portal")
    }

    #[test]
    fn over_https_cookies_are_secure_and_host_only() {
        let p = portal("https://desktops.contoso.com");
        assert_eq!(session_cookie(&p), "__Host-deskbroker-portal");
        assert_eq!(login_cookie(&p), "__Host-deskbroker-login");
        let c = set_cookie(&p, session_cookie(&p), "abc", 60);
        assert_eq!(
            c.to_str().unwrap(),
            "__Host-deskbroker-portal=abc; Path=/; Max-Age=60; HttpOnly; SameSite=Lax; Secure"
        );
        // Plain HTTP (loopback labs): no Secure, which browsers would drop.
        let p = portal("http://127.0.0.1:8080");
        let c = set_cookie(&p, session_cookie(&p), "abc", 0);
        assert_eq!(
            c.to_str().unwrap(),
            "deskbroker-portal=abc; Path=/; Max-Age=0; HttpOnly; SameSite=Lax"
        );
    }

    #[test]
    fn path_segments_are_encoded() {
        assert_eq!(path_segment("pool-1.a_b"), "pool-1.a_b");
        assert_eq!(path_segment("a/b c"), "a%2Fb%20c");
    }
}
