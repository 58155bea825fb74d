//! The HTTP side of the audit log (rule T5): recording every request that
//! may change something, `GET /api/v1/auditLog`, and `GET /api/v1/whoami`.
//!
//! What is recorded: every request of an authenticated caller whose method
//! is not GET or HEAD, on a route of the API, whatever its outcome (a 403
//! of the authorization table, a 404, 409 or 400 of the handler), except a
//! host's own heartbeats (host telemetry, many a second on a large farm),
//! and requests over their limit (rule T4, `throttle::Audited`). Each entry
//! holds bounded, validated text only (see [`record`]); minting a ticket is
//! recorded by `pools::rdp_file_for`. Requests
//! without a valid credential (401) are not recorded: they change nothing,
//! anybody can send them, and they are throttled per source already
//! (`throttle.rs`), so recording them would let anyone fill the log.
//! Registrations are recorded by `Enrollment::register` (their token is in
//! the body, not a bearer token). A refusal (an answer of 400 or more) is
//! folded into one entry per caller, action, target, source and outcome a
//! minute, with a count (`Audit::append_refusal`), so that refusals cannot
//! push accepted changes out of a log bounded by its count. See
//! `crate::audit` for how an entry commits with its change, and for the
//! [`Audit`] service these use.

use std::net::SocketAddr;
use std::sync::Arc;

use axum::extract::{ConnectInfo, OriginalUri, Request, State};
use axum::http::{Method, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use serde::Deserialize;

use api::ErrorBody;
use api::types::{AuditEntryOutput, Page, SignInRefusalInput, WhoAmIOutput};
use store::{AuditEntry, AuditQuery};

use super::error::ApiError;
use super::{MAX_BODY_BYTES, Query};
use crate::audit::{Audit, Resource, Scope};
use crate::enroll::Caller;

/// Entries a page holds when `pageSize` is not given.
pub const DEFAULT_AUDIT_PAGE_SIZE: u32 = 100;

/// Whether a request to `route` with `method` is recorded. A heartbeat is
/// recorded unless it comes from the host's own credential (`own_host`):
/// the admin token may send one too, and its session list can end every
/// session on that host.
pub fn is_audited(method: &Method, route: Option<&str>, own_host: bool) -> bool {
    *method != Method::GET
        && *method != Method::HEAD
        && route.is_some_and(|r| {
            r.starts_with("/api/v1/")
                && !(own_host && r.ends_with("/sessionHosts/{host}/heartbeat"))
                // Writes its own (folded) entry: see `sign_in_refused`.
                && r != SIGN_IN_REFUSALS
        })
}

/// The route a stand-alone RD Gateway reports refused sign-ins to.
pub const SIGN_IN_REFUSALS: &str = "/api/v1/auditLog/signInRefusals";

/// A stand-alone RD Gateway's refused Windows sign-in (rule AD2), written
/// to the audit log as the gateway's credential, folded as the broker's
/// own gateway's are: one entry per gateway, source, user and reason a
/// minute, and at most a bounded number of entries per caller a minute
/// (`Audit::append_refusal`), so a leaked gateway credential cannot push
/// other entries out of the log. Every field is checked: the source is an
/// IP address, the user a valid user name, the reason one of the
/// gateway's kinds; the request is not recorded a second time.
#[utoipa::path(post, path = "/api/v1/auditLog/signInRefusals", tag = "auditLog",
    request_body = SignInRefusalInput,
    responses((status = 204), (status = 400, body = ErrorBody), (status = 403, body = ErrorBody)))]
pub async fn sign_in_refused(
    State(b): State<Arc<crate::state::Broker>>,
    caller: Option<axum::Extension<Caller>>,
    super::Json(input): super::Json<SignInRefusalInput>,
) -> Result<StatusCode, ApiError> {
    let source: std::net::IpAddr = input.source.parse().map_err(|_| {
        ApiError::invalid(format!("source: {:?} is not an IP address", input.source))
    })?;
    if let Some(user) = &input.user {
        placement::validate_user("user", user)?;
    }
    if !gateway::windows_sign_in::refusal::ALL.contains(&input.reason.as_str()) {
        return Err(ApiError::invalid(format!(
            "reason: {:?} is not one of {}",
            input.reason,
            gateway::windows_sign_in::refusal::ALL.join(", ")
        )));
    }
    let actor = caller
        .map(|axum::Extension(c)| crate::audit::actor(&c))
        .unwrap_or_else(|| "unknown".into());
    b.audit()
        .sign_in_refused(
            b.now_ms(),
            actor,
            source,
            input.user.as_deref(),
            &input.reason,
        )
        .await;
    Ok(StatusCode::NO_CONTENT)
}

/// Longest credential name read from a `POST /api/v1/credentials` body for
/// its entry: the name rules' own bound (253).
const MAX_NAME_BYTES: usize = 253;

/// A name from a path or a body as the log may keep it: one that passes the
/// name rules (`placement::validate_name`: at most 253 letters, digits,
/// `.`, `-`, `_`), else nothing, and the route's pattern stands in.
fn valid_name(name: Option<String>) -> Option<String> {
    name.filter(|n| placement::validate_name("name", n).is_ok())
}

/// The path an entry shows: the route's pattern with each parameter that
/// is a valid name put in its place (`{pool}` stays for one that is not),
/// so no text of the caller's own choosing reaches the log.
fn inert_path(route: &str, values: &[(&str, Option<&str>)]) -> String {
    route
        .split('/')
        .map(|segment| {
            values
                .iter()
                .find(|(param, _)| *param == segment)
                .and_then(|(_, v)| *v)
                .unwrap_or(segment)
        })
        .collect::<Vec<_>>()
        .join("/")
}

/// The method as an entry shows it: one of the API's, else `OTHER`.
fn method_name(method: &Method) -> &'static str {
    match *method {
        Method::POST => "POST",
        Method::PUT => "PUT",
        Method::PATCH => "PATCH",
        Method::DELETE => "DELETE",
        Method::GET => "GET",
        _ => "OTHER",
    }
}

/// Runs the rest of the request (the handler when `authorized`, else the
/// 403) and records it: in the change's own batch when `Core::write_with`
/// could (see `crate::audit`), else here, before the answer leaves.
///
/// Only bounded, validated text is recorded (rule T5): the method, the
/// route with its names where they are valid names, the caller, its
/// address, and the resource before and after as the broker renders it
/// (each at most [`crate::audit::MAX_RENDERED_BYTES`]). Nothing of a refused
/// request's body is read.
///
/// The API runs this in a task of its own (`api::authenticate`), so that a
/// change and its entry run to completion even when the client goes away
/// and its request is dropped.
pub async fn record(
    audit: Arc<Audit>,
    caller: Caller,
    route: String,
    params: [Option<String>; 5],
    mut req: Request,
    authorized: Result<(), String>,
    next: Next,
) -> Response {
    let [pool, host, id, name, alias] = params.map(valid_name);
    let mut resource = Resource::of(
        &route,
        pool.as_deref(),
        host.as_deref(),
        id.as_deref(),
        name.as_deref(),
    );
    if resource == Resource::Credentials && *req.method() == Method::POST && authorized.is_ok() {
        // The new credential's name is in the body: read it (bounded as
        // every body is) once the caller may create credentials at all,
        // and hand the body on unchanged.
        let (parts, body) = req.into_parts();
        let bytes = match axum::body::to_bytes(body, MAX_BODY_BYTES).await {
            Ok(b) => b,
            Err(_) => {
                return ApiError::new(
                    api::ErrorCode::PayloadTooLarge,
                    format!("request body: larger than {MAX_BODY_BYTES} bytes"),
                )
                .into_response();
            }
        };
        #[derive(Deserialize)]
        struct Named {
            name: Option<String>,
        }
        if let Some(n) = valid_name(
            serde_json::from_slice::<Named>(&bytes)
                .ok()
                .and_then(|v| v.name)
                .filter(|n| n.len() <= MAX_NAME_BYTES),
        ) {
            resource = Resource::Credential(n);
        }
        req = Request::from_parts(parts, axum::body::Body::from(bytes));
    }
    let credential = match &resource {
        Resource::Credential(n) => Some(n.as_str()),
        _ => None,
    };
    let path = inert_path(
        &route,
        &[
            ("{pool}", pool.as_deref()),
            ("{host}", host.as_deref()),
            ("{id}", id.as_deref()),
            ("{name}", name.as_deref().or(credential)),
            ("{alias}", alias.as_deref()),
        ],
    );
    let source = req
        .extensions()
        .get::<ConnectInfo<SocketAddr>>()
        .map(|ConnectInfo(a)| a.ip().to_string());
    let target = match credential {
        Some(n) if route == "/api/v1/credentials" => format!("credentials/{n}"),
        _ => path.trim_start_matches("/api/v1/").to_string(),
    };
    // A request the authorization table refused changes nothing and may
    // come from anyone holding a credential: its entry renders nothing, so
    // it stays a few hundred bytes whatever the resource is.
    let refused = authorized.is_err();
    let before = if refused {
        None
    } else {
        audit.render(&resource)
    };
    let method = method_name(req.method());
    let scope = Scope {
        entry: AuditEntry {
            time_ms: audit.now_ms(),
            actor: crate::audit::actor(&caller),
            action: format!("{method} {path}"),
            target,
            host_pool: pool,
            before,
            after: None,
            outcome: 0,
            source,
            end_reason: None,
        },
        method: method.to_string(),
        resource,
        recorded: None,
    };
    let run = async move {
        match authorized {
            Ok(()) => next.run(req).await,
            Err(e) => ApiError::forbidden(e).into_response(),
        }
    };
    let (response, scope) = crate::audit::with_scope(scope, run).await;
    let status = response.status().as_u16();
    match scope.recorded {
        Some(outcome) if outcome == status => {}
        recorded => {
            if let Some(outcome) = recorded {
                // The handler answered otherwise than its change said:
                // the entry with the change stands, and this one says how
                // the request ended.
                tracing::warn!(outcome, status, "an audited change answered another status");
            }
            let mut entry = scope.entry;
            if !refused {
                entry.after = audit.render(&scope.resource);
            }
            entry.outcome = status;
            if crate::audit::is_refusal(status) {
                // Changed nothing: folded with its like (see
                // `Audit::append_refusal`), so that refusals cannot push
                // accepted changes out of the log.
                let pattern = format!("{method} {route}");
                let pattern_target = route.trim_start_matches("/api/v1/");
                audit.append_refusal(entry, &pattern, pattern_target).await;
            } else {
                audit.append(entry).await;
            }
        }
    }
    response
}

/// `?since=&actor=&hostPool=&pageSize=&beforeId=` of the audit log.
#[derive(Deserialize, Default, Debug)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct AuditLogQuery {
    pub since: Option<String>,
    pub actor: Option<String>,
    pub host_pool: Option<String>,
    pub page_size: Option<u32>,
    pub before_id: Option<i64>,
}

/// The audit log, newest first, in pages (`nextLink` while more remain).
/// A credential limited to some pools sees only the entries of its pools.
#[utoipa::path(get, path = "/api/v1/auditLog", tag = "audit",
    params(("since" = Option<String>, Query, description = "only entries at or after this RFC 3339 time"),
           ("actor" = Option<String>, Query, description = "only this actor's entries (admin, credential:NAME, host:POOL/HOST, registration-token:POOL)"),
           ("hostPool" = Option<String>, Query, description = "only entries of this host pool"),
           ("pageSize" = Option<u32>, Query, description = "at most this many entries (1..=1000, default 100), with a nextLink while more remain"),
           ("beforeId" = Option<i64>, Query, description = "only entries older than this id (what nextLink carries)")),
    responses((status = 200, body = Page<AuditEntryOutput>), (status = 400, body = ErrorBody), (status = 403, body = ErrorBody)))]
pub async fn list(
    State(audit): State<Arc<Audit>>,
    caller: Option<axum::Extension<Caller>>,
    OriginalUri(uri): OriginalUri,
    Query(q): Query<AuditLogQuery>,
) -> Result<axum::Json<Page<AuditEntryOutput>>, ApiError> {
    let size = q.page_size.unwrap_or(DEFAULT_AUDIT_PAGE_SIZE);
    let max = store::MAX_AUDIT_PAGE_ROWS as u32;
    if size == 0 || size > max {
        return Err(ApiError::invalid(format!(
            "pageSize: {size} is out of range 1..={max}"
        )));
    }
    let since_ms = match &q.since {
        Some(s) => Some(api::types::parse_rfc3339(s).ok_or_else(|| {
            ApiError::invalid(format!(
                "since: {s:?} is not an RFC 3339 time (e.g. 2026-01-31T08:00:00Z)"
            ))
        })?),
        None => None,
    };
    let within_pools = match caller.as_ref().map(|axum::Extension(c)| c) {
        Some(Caller::Credential { host_pools, .. }) if !host_pools.is_empty() => {
            if let Some(p) = &q.host_pool
                && !host_pools.contains(p)
            {
                return Err(ApiError::forbidden(format!(
                    "hostPool: the credential is limited to the host pools {}",
                    host_pools.join(", ")
                )));
            }
            Some(host_pools.clone())
        }
        _ => None,
    };
    let rows = audit
        .entries(AuditQuery {
            since_ms,
            actor: q.actor.clone(),
            host_pool: q.host_pool.clone(),
            within_pools,
            before_id: q.before_id,
            ended_sessions: false,
            limit: size as usize + 1,
        })
        .await?;
    let more = rows.len() > size as usize;
    let value: Vec<AuditEntryOutput> = rows
        .into_iter()
        .take(size as usize)
        .map(|r| AuditEntryOutput {
            id: r.id,
            time: api::types::rfc3339_ms(r.entry.time_ms),
            actor: r.entry.actor,
            action: r.entry.action,
            target: r.entry.target,
            host_pool: r.entry.host_pool,
            before: r.entry.before.as_ref().map(store::Rendered::to_value),
            after: r.entry.after.as_ref().map(store::Rendered::to_value),
            outcome: r.entry.outcome,
            source: r.entry.source,
            count: (r.count > 1).then_some(r.count),
            end_reason: r.entry.end_reason,
        })
        .collect();
    let next_link = match (more, value.last()) {
        (true, Some(last)) => Some(super::paging::next_link_with(&uri, "beforeId", last.id)),
        _ => None,
    };
    Ok(axum::Json(Page { value, next_link }))
}

/// Who the caller is: its role, name and pools, for any valid credential.
#[utoipa::path(get, path = "/api/v1/whoami", tag = "audit",
    responses((status = 200, body = WhoAmIOutput), (status = 401, body = ErrorBody)))]
pub async fn whoami(caller: Option<axum::Extension<Caller>>) -> Response {
    let out = match caller {
        Some(axum::Extension(Caller::Admin)) => WhoAmIOutput {
            role: "admin".into(),
            name: "admin".into(),
            host_pools: Vec::new(),
        },
        Some(axum::Extension(Caller::Credential {
            name,
            role,
            host_pools,
            ..
        })) => WhoAmIOutput {
            role: role.as_str().into(),
            name,
            host_pools,
        },
        Some(axum::Extension(Caller::Host { pool, host })) => WhoAmIOutput {
            role: "host".into(),
            name: format!("{pool}/{host}"),
            host_pools: vec![pool],
        },
        None => {
            return ApiError::unauthorized("no caller").into_response();
        }
    };
    (StatusCode::OK, axum::Json(out)).into_response()
}
