//! The workspace feed on the HTTPS front (rule F4): what Windows' "RemoteApp
//! and Desktop Connections" and Windows App subscribe to, at RD Web
//! Access's own address, `https://<gateway>/RDWeb/Feed/webfeed.aspx`.
//!
//! Every request signs in first, as a Windows user: `Negotiate`
//! (Kerberos, or NTLM inside it), `NTLM`, or HTTP `Basic` (a name and
//! password the domain checks, taken over TLS only and never offered on a
//! plain listener), through the gateway's Windows sign-in
//! ([`crate::windows_sign_in`]) with its bounds and its throttles per
//! source and per user; or with the login token a client got from
//! `/RDWeb/FeedLogin/WebFeedLogin.aspx` after signing in there
//! ([`login`]). A connection stays signed in as that user for the
//! requests that follow on it (at most [`MAX_REQUESTS_PER_CONNECTION`]),
//! as IIS does for NTLM, so that a client refreshing hundreds of
//! resources signs in once.
//!
//! What is served, all of it the signed-in user's only (the broker decides
//! it, [`Placer::feed`]):
//!
//! ```text
//! GET /RDWeb/FeedLogin/WebFeedLogin.aspx          a login token (a cookie) for the feed
//! GET /RDWeb/Feed/webfeed.aspx                    the feed (MS-TSWP 1.1, 2.0 or 2.1, as asked)
//! GET /RDWeb/Feed/rdp/{pool}.rdp                  a desktop's .rdp file
//! GET /RDWeb/Feed/rdp/{pool}/{alias}.rdp          an application's .rdp file
//! GET /RDWeb/Feed/icon/{pool}/{alias}/{digest}.ico an application's icon (.ico or .png)
//! ```
//!
//! The files carry no ticket: the client keeps them and opens them days
//! later, through this gateway with Windows sign-in (a pool whose
//! `gatewaySignIn` is `TicketOrWindows`) or through the RDP front door by
//! its routing token. A resource the user is not given, or that does not
//! exist, is `404` alike, so the feed's addresses tell nothing about what
//! others are given. Icons are served with a fixed content type and
//! `nosniff`; an icon's address carries its digest, so a changed icon is a
//! new address and an unchanged one is cached.

pub mod login;

use std::net::IpAddr;
use std::time::{Duration, Instant};

use api::feed::{IconUrls, Resource, ResourceKind, SchemaVersion, Workspace};
use tokio::io::AsyncWriteExt;

use crate::door::{Outcome, Report};
use crate::https::{BoxIo, Exchange, Head, Served, answer_status, read_head};
use crate::placer::{Placer, PlacerError};
use crate::sources::SourceGuard;
use crate::windows_sign_in::{SignInError, WindowsSignIn, refusal};

/// Where every address of the feed begins (any case, as IIS takes it).
pub const PREFIX: &str = "/RDWeb/Feed/";
/// Where a client exchanges its sign-in for a login token (any case).
pub const LOGIN_PATH: &str = "/RDWeb/FeedLogin/WebFeedLogin.aspx";
/// The requests one signed-in connection serves before it is closed: a
/// feed of a few hundred resources, their files and icons.
pub const MAX_REQUESTS_PER_CONNECTION: usize = 2048;
/// What clients call the workspace when it names itself.
pub const PUBLISHER_NAME: &str = "deskbroker";
/// The longest pool name or alias taken in an address.
const MAX_NAME_BYTES: usize = 128;
/// How long writing one answer may take (a large feed to a slow client).
const ANSWER_TIMEOUT: Duration = Duration::from_secs(60);

/// Whether `path` is one of the feed's (the front's route).
pub fn is_feed_path(path: &str) -> bool {
    path.eq_ignore_ascii_case(LOGIN_PATH)
        || (path.len() > PREFIX.len()
            && path.as_bytes()[..PREFIX.len()].eq_ignore_ascii_case(PREFIX.as_bytes()))
}

/// One request of the feed, read from its head.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FeedRequest {
    /// A login token for the signed-in user.
    Login,
    /// The feed itself, in this schema version.
    Feed(SchemaVersion),
    /// A resource's `.rdp` file: a pool's desktop (`alias` None) or one of
    /// its applications.
    File { pool: String, alias: Option<String> },
    /// An application's icon, as a PNG (`png`) or an ICO.
    Icon {
        pool: String,
        alias: String,
        png: bool,
    },
}

impl FeedRequest {
    /// The request `head` makes, or None for an address the feed does not
    /// have. The schema version is the query's `radc_schema_version`, else
    /// what the `Accept` header asks for.
    pub fn of(head: &Head) -> Option<FeedRequest> {
        let path = head.path();
        if path.eq_ignore_ascii_case(LOGIN_PATH) {
            return Some(FeedRequest::Login);
        }
        if !is_feed_path(path) {
            return None;
        }
        let rest = path.get(PREFIX.len()..)?;
        if rest.eq_ignore_ascii_case("webfeed.aspx") {
            let query = head.target.split_once('?').map(|(_, q)| q);
            let asked = query
                .into_iter()
                .flat_map(|q| q.split('&'))
                .filter_map(|pair| pair.split_once('='))
                .find(|(k, _)| k.eq_ignore_ascii_case("radc_schema_version"))
                .and_then(|(_, v)| SchemaVersion::parse(v));
            let version =
                asked.unwrap_or_else(|| SchemaVersion::from_accept(head.header("Accept")));
            return Some(FeedRequest::Feed(version));
        }
        let parts: Vec<&str> = rest.split('/').collect();
        match parts.as_slice() {
            ["rdp", file] => Some(FeedRequest::File {
                pool: name(file.strip_suffix(".rdp")?)?,
                alias: None,
            }),
            ["rdp", pool, file] => Some(FeedRequest::File {
                pool: name(pool)?,
                alias: Some(name(file.strip_suffix(".rdp")?)?),
            }),
            ["icon", pool, alias, file] => {
                let (digest, extension) = file.rsplit_once('.')?;
                if digest.is_empty() || !digest.bytes().all(|b| b.is_ascii_hexdigit()) {
                    return None;
                }
                let png = match extension {
                    "png" => true,
                    "ico" => false,
                    _ => return None,
                };
                Some(FeedRequest::Icon {
                    pool: name(pool)?,
                    alias: name(alias)?,
                    png,
                })
            }
            _ => None,
        }
    }
}

/// A pool name or alias as an address may hold one: beginning with a
/// letter or digit, so never `.` or `..`.
fn name(s: &str) -> Option<String> {
    let ok = s.as_bytes().first().is_some_and(u8::is_ascii_alphanumeric)
        && s.len() <= MAX_NAME_BYTES
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'-' | b'_'));
    ok.then(|| s.to_string())
}

/// The address of a resource's `.rdp` file.
pub fn file_url(pool: &str, alias: Option<&str>) -> String {
    match alias {
        None => format!("{PREFIX}rdp/{pool}.rdp"),
        Some(alias) => format!("{PREFIX}rdp/{pool}/{alias}.rdp"),
    }
}

/// The addresses of an application's icons of `digest`.
pub fn icon_urls(pool: &str, alias: &str, digest: &str) -> IconUrls {
    IconUrls {
        ico: format!("{PREFIX}icon/{pool}/{alias}/{digest}.ico"),
        png_32: format!("{PREFIX}icon/{pool}/{alias}/{digest}.png"),
    }
}

/// The feed of what the broker says `user` is given, published at
/// `now_ms` under `publisher_id`. A resource the feed cannot hold is left
/// out and logged, so that one bad resource does not empty a feed.
pub fn workspace_of(
    out: &api::types::FeedOutput,
    publisher_id: &str,
    now_ms: i64,
) -> Result<Workspace, api::feed::FeedError> {
    let last_updated = out.last_updated_ms.clamp(0, api::feed::MAX_TIMESTAMP_MS);
    let mut workspace = Workspace::new(PUBLISHER_NAME, publisher_id, now_ms, last_updated)?;
    for r in &out.resources {
        let alias = r.alias.as_deref();
        let resource = Resource {
            id: api::feed::resource_id(&r.host_pool, alias),
            kind: match alias {
                None => ResourceKind::Desktop,
                Some(_) => ResourceKind::RemoteApp,
            },
            // Pool names and aliases hold no ':': a desktop's alias has
            // none, an application's one, so no two are the same.
            alias: match alias {
                None => r.host_pool.clone(),
                Some(alias) => format!("{}:{alias}", r.host_pool),
            },
            title: r.title.clone(),
            last_updated_ms: r.modified_ms.clamp(0, last_updated),
            icons: match (alias, &r.icon) {
                (Some(alias), Some(digest)) => Some(icon_urls(&r.host_pool, alias, digest)),
                _ => None,
            },
            file_extensions: r.file_extensions.clone(),
            folder: r.folder.clone(),
            rdp_file_url: file_url(&r.host_pool, alias),
            terminal_server: r.terminal_server.clone(),
        };
        if let Err(e) = workspace.add(resource) {
            tracing::warn!(user = %out.user, error = %e, "workspace feed: a resource left out");
        }
    }
    Ok(workspace)
}

/// A request for the feed or one of its files, its head read by the
/// front: signed in, answered, and the connection's next feed requests
/// served as the same user.
pub(crate) async fn serve_request<P: Placer>(x: Exchange<'_, P>) -> Served {
    let Exchange {
        front,
        head,
        mut stream,
        rest,
        source,
        deadline,
        report,
        ..
    } = x;
    let Some(sign_in) = front.config.windows_sign_in.clone() else {
        answer_status(&mut stream, "404 Not Found").await;
        return Served::Closed(Outcome::BadRequest);
    };
    if let Err(e) = head.bodiless() {
        return Served::Closed(crate::https::refuse(&mut stream, e, report).await);
    }
    let idle = front.config.bounds.handshake_timeout;
    let https = front.https;
    let signed = signed_in(
        &sign_in,
        &front.feed_login,
        &*front.placer,
        (head, rest),
        &mut stream,
        &source,
        (deadline, idle),
        https,
        report,
    )
    .await;
    let (user, by_token, mut head, mut rest) = match signed {
        Ok(signed) => signed,
        Err(outcome) => return Served::Closed(outcome),
    };
    let publisher_id = publisher_id(&head, &sign_in);
    for served in 1.. {
        let keep = head.keep_alive() && served < MAX_REQUESTS_PER_CONNECTION;
        let request = FeedRequest::of(&head);
        let kept = match request {
            Some(request) => {
                let mut answer = answer_for(&*front.placer, &user, &request, &publisher_id).await;
                // A token is made from a sign-in, never from a token: one
                // stolen cannot be renewed past its expiry.
                if request == FeedRequest::Login && !by_token {
                    let now = front.placer.now_unix_seconds();
                    let token = front.feed_login.issue(&user, now);
                    answer.set_cookie = Some(login::LoginKey::set_cookie(&token));
                }
                write_answer(&mut stream, &answer, head.method == "HEAD", keep, https).await
            }
            None => {
                answer_status(&mut stream, "404 Not Found").await;
                false
            }
        };
        if !kept {
            break;
        }
        // The next request on this connection, served as the same user:
        // only the feed's, bodiless, within the idle bound.
        let next = read_head(&mut stream, std::mem::take(&mut rest), idle);
        let next = tokio::time::timeout(front.config.setup_timeout, next).await;
        match next {
            Ok(Ok((next, after))) if is_feed_path(next.path()) && next.bodiless().is_ok() => {
                (head, rest) = (next, after);
            }
            Ok(Ok((next, _))) => {
                let e = next.not_served();
                crate::https::refuse(&mut stream, e, report).await;
                break;
            }
            _ => break,
        }
    }
    Served::Closed(Outcome::Feed)
}

/// The feed's publisher ID: the gateway's service host name with
/// Kerberos, else the name the client reached it by (its `Host`, when it
/// is a DNS name), else the workspace's own name.
fn publisher_id(head: &Head, sign_in: &WindowsSignIn) -> String {
    if let Some(principal) = sign_in.service_principal()
        && let Some(host) = principal.strip_prefix("HTTP/")
    {
        return host.to_lowercase();
    }
    head.header("Host")
        .map(|h| h.rsplit_once(':').map_or(h, |(host, _)| host))
        .filter(|h| {
            !h.is_empty()
                && h.len() <= 253
                && h.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'.' || b == b'-')
        })
        .map_or_else(|| PUBLISHER_NAME.to_string(), str::to_lowercase)
}

/// One answer of the feed.
struct Answer {
    status: &'static str,
    content_type: &'static str,
    /// `Cache-Control`.
    cache: &'static str,
    /// `Content-Disposition`, for a file.
    disposition: Option<String>,
    /// A `Set-Cookie` line: the login token.
    set_cookie: Option<String>,
    body: Vec<u8>,
}

impl Answer {
    fn status(status: &'static str) -> Answer {
        Answer {
            status,
            content_type: "text/plain; charset=utf-8",
            cache: "no-store",
            disposition: None,
            set_cookie: None,
            body: Vec::new(),
        }
    }
}

/// What `request` of `user` is answered, the broker asked.
async fn answer_for<P: Placer>(
    placer: &P,
    user: &str,
    request: &FeedRequest,
    publisher_id: &str,
) -> Answer {
    let result = match request {
        // The token is the caller's to add: the answer says the sign-in
        // worked, RD Web Access's way.
        FeedRequest::Login => Ok(Answer {
            status: "200 OK",
            content_type: "application/x-msts-webfeed-login; charset=utf-8",
            cache: "no-store",
            disposition: None,
            set_cookie: None,
            body: Vec::new(),
        }),
        FeedRequest::Feed(version) => placer.feed(user).await.map(|out| {
            let now_ms = i64::try_from(placer.now_unix_seconds())
                .unwrap_or(0)
                .saturating_mul(1000);
            match workspace_of(&out, publisher_id, now_ms) {
                Ok(workspace) => {
                    tracing::info!(
                        user,
                        resources = workspace.resources().len(),
                        schema = version.as_str(),
                        "workspace feed served"
                    );
                    Answer {
                        status: "200 OK",
                        content_type: version.content_type(),
                        cache: "private, no-cache",
                        disposition: None,
                        set_cookie: None,
                        body: api::feed::render(&workspace, *version).into_bytes(),
                    }
                }
                Err(e) => {
                    tracing::warn!(user, error = %e, "workspace feed: cannot be made");
                    Answer::status("500 Internal Server Error")
                }
            }
        }),
        FeedRequest::File { pool, alias } => placer
            .feed_file(user, pool, alias.as_deref())
            .await
            .map(|file| Answer {
                status: "200 OK",
                content_type: "application/x-rdp; charset=utf-8",
                cache: "private, no-cache",
                disposition: Some(format!(
                    "attachment; filename=\"{}.rdp\"",
                    alias.as_deref().unwrap_or(pool)
                )),
                set_cookie: None,
                body: file.into_bytes(),
            }),
        FeedRequest::Icon { pool, alias, png } => {
            placer
                .feed_icon(user, pool, alias)
                .await
                .map(|icons| Answer {
                    status: "200 OK",
                    content_type: if *png { "image/png" } else { "image/x-icon" },
                    // The address names the icon's digest: it never changes.
                    cache: "private, max-age=86400",
                    disposition: None,
                    set_cookie: None,
                    body: if *png { icons.png_32 } else { icons.ico },
                })
        }
    };
    result.unwrap_or_else(|e| match &e {
        PlacerError::Unreachable(_) => {
            tracing::warn!(user, error = %e, "workspace feed: the broker did not answer");
            Answer::status("503 Service Unavailable")
        }
        // Not given, no such resource, or a pool whose files need a
        // ticket: all alike, so that nothing is learnt of what is not the
        // user's.
        PlacerError::Refused { .. } => Answer::status("404 Not Found"),
    })
}

/// Writes `answer` (its head alone for `HEAD`); whether the connection
/// stays open for another request.
async fn write_answer(
    stream: &mut BoxIo,
    answer: &Answer,
    head_only: bool,
    keep: bool,
    https: bool,
) -> bool {
    let keep = keep && answer.status.starts_with("200");
    let mut text = format!(
        "HTTP/1.1 {}\r\nContent-Type: {}\r\nContent-Length: {}\r\nCache-Control: {}\r\n\
         X-Content-Type-Options: nosniff\r\n",
        answer.status,
        answer.content_type,
        answer.body.len(),
        answer.cache,
    );
    if let Some(disposition) = &answer.disposition {
        text.push_str(&format!("Content-Disposition: {disposition}\r\n"));
    }
    if let Some(cookie) = &answer.set_cookie {
        text.push_str(cookie);
        text.push_str("\r\n");
    }
    if https {
        text.push_str(&format!(
            "Strict-Transport-Security: {}\r\n",
            crate::web::page::STRICT_TRANSPORT_SECURITY
        ));
    }
    text.push_str(if keep {
        "Connection: keep-alive\r\n\r\n"
    } else {
        "Connection: close\r\n\r\n"
    });
    let written = tokio::time::timeout(ANSWER_TIMEOUT, async {
        stream.write_all(text.as_bytes()).await?;
        if !head_only {
            stream.write_all(&answer.body).await?;
        }
        stream.flush().await
    })
    .await;
    let written = matches!(written, Ok(Ok(())));
    if !written || !keep {
        let _ = stream.shutdown().await;
    }
    written && keep
}

/// Signs the connection's first request in: a login token, Basic here,
/// Windows sign-in (`Negotiate`, `NTLM`) as the RD Gateway does. The user,
/// whether it was by a login token, and the request to answer (an NTLM
/// sign-in's second).
#[allow(clippy::too_many_arguments)]
async fn signed_in<P: Placer>(
    sign_in: &WindowsSignIn,
    login: &login::LoginKey,
    placer: &P,
    (head, rest): (Head, Vec<u8>),
    stream: &mut BoxIo,
    source: &SourceGuard,
    (deadline, idle): (Instant, Duration),
    https: bool,
    report: &mut Report,
) -> Result<(String, bool, Head, Vec<u8>), Outcome> {
    let scheme = head
        .header("Authorization")
        .and_then(|a| a.trim().split_once(' '))
        .map(|(scheme, token)| (scheme.to_string(), token.to_string()));
    let token = head.header("Cookie").and_then(login::token_of);
    match scheme {
        // A login token, when it is this gateway's and current; a request
        // that also signs in is judged by its sign-in.
        None if let Some(user) = token.and_then(|t| login.verify(t, placer.now_unix_seconds())) => {
            report.user = Some(user.clone());
            Ok((user, true, head, rest))
        }
        None => {
            answer_status(stream, &challenge(sign_in, https)).await;
            report.detail = Some("the workspace feed, without a sign-in: challenged".into());
            Err(Outcome::SignInChallenged)
        }
        Some((scheme, credentials)) if scheme.eq_ignore_ascii_case("Basic") => {
            if !https || !sign_in.takes_basic() {
                // Never checked, so a password sent in the clear is not
                // tried against the domain; it is not offered here either.
                answer_status(stream, &challenge(sign_in, https)).await;
                report.detail = Some("Basic sign-in where it is not taken".into());
                return Err(Outcome::SignInRefused);
            }
            match sign_in.basic(source.key(), &credentials).await {
                Ok(signed) => {
                    tracing::info!(user = %signed.user, source = %source.key(), "workspace feed: signed in with a password");
                    report.user = Some(signed.user.clone());
                    Ok((signed.user, false, head, rest))
                }
                Err(e) => {
                    report.user = sign_in.basic_claimed_user(&credentials);
                    Err(
                        basic_refused(sign_in, placer, e, stream, source.key(), https, report)
                            .await,
                    )
                }
            }
        }
        Some(_) => {
            let signed = crate::rd_gateway::sign_in::sign_in(
                sign_in,
                placer,
                (head, rest),
                stream,
                source,
                (deadline, idle),
                false,
                report,
            )
            .await?;
            match signed.signed_in {
                Some(user) => Ok((user.user, false, signed.head, signed.rest)),
                // A ticket client's header; the feed takes no ticket.
                None => {
                    answer_status(stream, &challenge(sign_in, https)).await;
                    Err(Outcome::SignInChallenged)
                }
            }
        }
    }
}

/// Answers a refused Basic sign-in as the RD Gateway answers its own.
async fn basic_refused<P: Placer>(
    sign_in: &WindowsSignIn,
    placer: &P,
    e: SignInError,
    stream: &mut BoxIo,
    source: IpAddr,
    https: bool,
    report: &mut Report,
) -> Outcome {
    report.detail = Some(format!("Basic sign-in: {e}"));
    match e {
        SignInError::Refused(_) => {
            answer_status(stream, &challenge(sign_in, https)).await;
            placer
                .sign_in_refused(source, report.user.as_deref(), refusal::PASSWORD_REFUSED)
                .await;
            Outcome::SignInRefused
        }
        SignInError::Throttled(_) => {
            answer_status(stream, "429 Too Many Requests\r\nRetry-After: 60").await;
            Outcome::SignInThrottled
        }
        SignInError::Unavailable(_) => {
            answer_status(stream, "503 Service Unavailable\r\nRetry-After: 10").await;
            Outcome::SignInUnavailable
        }
    }
}

/// The `401` status line and the schemes the feed takes: the Windows ones,
/// and Basic over TLS when the domain can check passwords.
fn challenge(sign_in: &WindowsSignIn, https: bool) -> String {
    let mut status = crate::rd_gateway::sign_in::challenge(sign_in);
    if https && sign_in.takes_basic() {
        status.push_str("\r\nWWW-Authenticate: Basic realm=\"deskbroker\", charset=\"UTF-8\"");
    }
    status
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::https::parse_head;

    fn request(target: &str, accept: Option<&str>) -> Option<FeedRequest> {
        let accept = accept
            .map(|a| format!("Accept: {a}\r\n"))
            .unwrap_or_default();
        let text = format!("GET {target} HTTP/1.1\r\nHost: gw\r\n{accept}\r\n");
        let (head, _) = parse_head(text.as_bytes()).expect("a head").expect("whole");
        FeedRequest::of(&head)
    }

    #[test]
    fn each_address_of_the_feed_is_read_and_no_other() {
        use FeedRequest as R;
        let radc = "application/x-msts-radc+xml; radc_schema_version=2.0";
        assert_eq!(
            request("/RDWeb/Feed/webfeed.aspx", None),
            Some(R::Feed(SchemaVersion::V1_1))
        );
        assert_eq!(
            request("/rdweb/feed/WebFeed.aspx", Some(radc)),
            Some(R::Feed(SchemaVersion::V2_0))
        );
        assert_eq!(
            request(
                "/RDWeb/Feed/webfeed.aspx?radc_schema_version=2.1",
                Some(radc)
            ),
            Some(R::Feed(SchemaVersion::V2_1))
        );
        assert_eq!(
            request("/rdweb/feedlogin/webfeedlogin.aspx?ReturnUrl=/x", None),
            Some(R::Login)
        );
        assert_eq!(
            request("/RDWeb/Feed/rdp/finance.rdp", None),
            Some(R::File {
                pool: "finance".into(),
                alias: None
            })
        );
        assert_eq!(
            request("/RDWeb/Feed/rdp/finance/notepad.rdp", None),
            Some(R::File {
                pool: "finance".into(),
                alias: Some("notepad".into())
            })
        );
        assert_eq!(
            request("/RDWeb/Feed/icon/finance/notepad/0a1b.png", None),
            Some(R::Icon {
                pool: "finance".into(),
                alias: "notepad".into(),
                png: true
            })
        );
        for refused in [
            "/RDWeb/Feed/",
            "/RDWeb/Feed/rdp/finance",
            "/RDWeb/Feed/rdp/../finance.rdp",
            "/RDWeb/Feed/rdp/a%2Fb.rdp",
            "/RDWeb/Feed/rdp/finance/notepad/x.rdp",
            "/RDWeb/Feed/icon/finance/notepad/zz.png",
            "/RDWeb/Feed/icon/finance/notepad/0a.svg",
            "/RDWeb/Feed/icon/finance/notepad.png",
            "/RDWeb/Pages/webfeed.aspx",
            "/RDWeb/FeedLogin/",
            "/RDWeb/FeedLogin/x.aspx",
        ] {
            assert_eq!(request(refused, None), None, "{refused}");
        }
    }

    #[test]
    fn a_desktop_and_an_application_never_share_an_alias() {
        let resource = |pool: &str, alias: Option<&str>| api::types::FeedResourceOutput {
            host_pool: pool.into(),
            alias: alias.map(str::to_string),
            title: "T".into(),
            modified_ms: 5,
            file_extensions: vec![],
            folder: String::new(),
            icon: alias.map(|_| "ab".to_string()),
            terminal_server: "gw.example".into(),
        };
        let out = api::types::FeedOutput {
            user: "alice@example".into(),
            last_updated_ms: 10,
            resources: vec![resource("a.b", None), resource("a", Some("b"))],
        };
        let workspace = workspace_of(&out, "gw.example", 20).expect("a workspace");
        assert_eq!(workspace.resources().len(), 2);
        assert_eq!(workspace.last_updated_ms(), 10);
        let app = &workspace.resources()[1];
        assert_eq!(app.kind, ResourceKind::RemoteApp);
        assert_eq!(app.rdp_file_url, "/RDWeb/Feed/rdp/a/b.rdp");
        assert_eq!(
            app.icons.as_ref().map(|i| i.png_32.as_str()),
            Some("/RDWeb/Feed/icon/a/b/ab.png")
        );
        // Each address it names is one the feed serves.
        for url in [&app.rdp_file_url, &app.icons.as_ref().unwrap().ico] {
            assert!(request(url, None).is_some(), "{url}");
        }
    }
}
