//! Connecting users, and their sessions.

use std::sync::Arc;

use axum::extract::{OriginalUri, Path, State};
use axum::http::StatusCode;

use super::paging::{self, Page, PageQuery};
use api::ErrorBody;
use api::types::{
    ConnectInput, ConnectOutput, HostMessage, SendMessageInput, SessionOutput, SessionPatch,
};

use super::error::ApiError;
use super::types::SessionQuery;
use super::{Json, Query};
use crate::audit::Audit;
use crate::connect::Connector;
use crate::core::Core;
use crate::error::BrokerError;
use crate::messages::Messages;

/// Places a user (rules S1–S4, B, D, P7): the user's existing session if
/// any, else a new Pending session on the host the pool's algorithm picks.
#[utoipa::path(post, path = "/api/v1/hostPools/{pool}/connect", tag = "sessions",
    request_body = ConnectInput,
    responses((status = 200, body = ConnectOutput), (status = 400, body = ErrorBody),
              (status = 403, body = ErrorBody), (status = 404, body = ErrorBody),
              (status = 503, body = ErrorBody, headers(("Retry-After" = u64, description = "with SessionHostStarting (rule A8): seconds until the connect is worth retrying")))))]
pub async fn connect(
    State(core): State<Arc<Core>>,
    State(connector): State<Arc<Connector>>,
    Path(pool): Path<String>,
    caller: Option<axum::Extension<crate::enroll::Caller>>,
    Json(input): Json<ConnectInput>,
) -> Result<axum::Json<ConnectOutput>, ApiError> {
    // `exclude` steers a placement away from hosts (R5: a front door that
    // could not reach them); only a front door (the gateway role) or an
    // admin may use it, so a portal cannot pick a user's host by excluding
    // the others.
    if !input.exclude.is_empty()
        && !caller.as_ref().is_some_and(|axum::Extension(c)| {
            c.is_admin_of(&pool) || c.role() == Some(crate::access::Role::Gateway)
        })
    {
        return Err(ApiError::forbidden(
            "exclude is reserved for the RDP front door, which calls with a gateway or admin \
             credential; leave it out",
        ));
    }
    let caller = caller.map(|axum::Extension(c)| c);
    let is_admin = caller.as_ref().is_some_and(|c| c.is_admin_of(&pool));
    // Rule T2: groups are the word of whoever signed the user in (a portal,
    // the admin). A front door signs nobody in: its groups would be a
    // stolen credential's way into any group's pools.
    if !input.groups.is_empty()
        && caller
            .as_ref()
            .is_some_and(|c| c.role() == Some(crate::access::Role::Gateway))
    {
        return Err(ApiError::forbidden(
            "groups: a gateway credential cannot vouch for a user's groups (only a portal or \
             an admin signs users in); leave them out",
        ));
    }
    // Rule T3: a pool that requires a connection ticket places a user only
    // on one, whoever asks (the admin aside), so that a credential stolen
    // from a front door or a portal cannot place users the broker issued
    // no ticket for.
    if input.ticket.is_none() && !is_admin {
        let required = core.peek(&pool, |p| Ok(p.config().require_connection_ticket))?;
        if required {
            metrics::counter!("deskbroker_ticket_refusals_total", "reason" => "missing_ticket")
                .increment(1);
            return Err(BrokerError::Ticket(format!(
                "host pool {pool} requires a connection ticket (requireConnectionTicket): \
                 connect with the ticket of the user's connection file"
            ))
            .into());
        }
    }
    let placed = connector.connect(&pool, &input).await?;
    Ok(axum::Json(ConnectOutput::from(placed)))
}

/// Ended sessions `?includeEnded=true` lists at most: the pool's latest
/// ends in the audit log (one page of it), before the filters.
pub const MAX_ENDED_LISTED: usize = store::MAX_AUDIT_PAGE_ROWS;

/// Sessions of the pool, optionally of one user and/or one host, oldest
/// first; with `?includeEnded=true`, then the pool's recently ended ones
/// (latest end first, each with `endedAt` and `endReason`); paged with
/// `?pageSize=&initialSkip=`.
#[utoipa::path(get, path = "/api/v1/hostPools/{pool}/userSessions", tag = "sessions",
    params(("user" = Option<String>, Query, description = "only this user's sessions (case-insensitive)"),
           ("sessionHost" = Option<String>, Query, description = "only sessions on this host"),
           ("includeEnded" = Option<bool>, Query, description = "also list recently ended sessions (the pool's last 1000 ends in the audit log, latest first, after the live ones), each with endedAt and endReason"),
           ("pageSize" = Option<u32>, Query, description = "at most this many sessions (1..=1000), with a nextLink while more remain; absent: all"),
           ("initialSkip" = Option<usize>, Query, description = "skip this many sessions first")),
    responses((status = 200, body = Page<SessionOutput>), (status = 400, body = ErrorBody), (status = 404, body = ErrorBody)))]
pub async fn list(
    State(core): State<Arc<Core>>,
    State(audit): State<Arc<Audit>>,
    Path(pool): Path<String>,
    OriginalUri(uri): OriginalUri,
    Query(q): Query<SessionQuery>,
) -> Result<axum::Json<Page<SessionOutput>>, ApiError> {
    let paged = PageQuery::from(&q);
    paged.validate()?;
    if q.include_ended {
        // Outside the pool's lock: the log is read from the store.
        let ended = ended_sessions(&audit, &pool, &q).await?;
        let value = core
            .read(&pool, |p| {
                let mut v = live_sessions(p, &q);
                paging::sort_for_page(&mut v, paged, |a, b| {
                    (a.create_time_ms, &a.id).cmp(&(b.create_time_ms, &b.id))
                });
                let items = v
                    .into_iter()
                    .map(Listed::Live)
                    .chain(ended.into_iter().map(Listed::Ended));
                Ok(paging::page(items, paged, Listed::output, &uri))
            })
            .await?;
        return Ok(axum::Json(value));
    }
    let value = core
        .read(&pool, |p| {
            let mut v = live_sessions(p, &q);
            // Oldest first; paged, only as far as the page needs.
            paging::sort_for_page(&mut v, paged, |a, b| {
                (a.create_time_ms, &a.id).cmp(&(b.create_time_ms, &b.id))
            });
            Ok(paging::page(
                v.into_iter(),
                paged,
                SessionOutput::from,
                &uri,
            ))
        })
        .await?;
    Ok(axum::Json(value))
}

/// The pool's sessions the query's filters select, in no order.
fn live_sessions<'a>(p: &'a placement::Pool, q: &SessionQuery) -> Vec<&'a placement::Session> {
    let on_host = |s: &&placement::Session| q.session_host.as_ref().is_none_or(|h| &s.host == h);
    match &q.user {
        Some(u) => p.user_sessions(u).filter(on_host).collect(),
        None => p.sessions().filter(on_host).collect(),
    }
}

/// One item of a list with its ended sessions.
enum Listed<'a> {
    Live(&'a placement::Session),
    Ended(SessionOutput),
}

impl Listed<'_> {
    fn output(self) -> SessionOutput {
        match self {
            Listed::Live(s) => SessionOutput::from(s),
            Listed::Ended(s) => s,
        }
    }
}

/// The pool's recently ended sessions the query's filters select, latest
/// end first: the entries of their ends in the audit log (at most
/// [`MAX_ENDED_LISTED`] of them are read), each the session as it was
/// with when and why it ended. Only this pool's entries are read, so a
/// credential that may list this pool sees no other pool's ends.
async fn ended_sessions(
    audit: &Audit,
    pool: &str,
    q: &SessionQuery,
) -> Result<Vec<SessionOutput>, BrokerError> {
    let rows = audit
        .entries(store::AuditQuery {
            host_pool: Some(pool.to_string()),
            ended_sessions: true,
            limit: MAX_ENDED_LISTED,
            ..store::AuditQuery::default()
        })
        .await?;
    let user = q.user.as_deref().map(placement::user_key);
    Ok(rows
        .into_iter()
        .filter_map(|r| {
            let before = r.entry.before?;
            let mut s: SessionOutput = serde_json::from_str(before.get()).ok()?;
            s.ended_at = Some(api::types::rfc3339_ms(r.entry.time_ms));
            s.end_reason = r.entry.end_reason;
            Some(s)
        })
        .filter(|s| {
            user.as_ref()
                .is_none_or(|u| &placement::user_key(&s.user_principal_name) == u)
                && q.session_host.as_ref().is_none_or(|h| &s.session_host == h)
        })
        .collect())
}

fn find(p: &placement::Pool, id: &str) -> Result<SessionOutput, BrokerError> {
    Ok(SessionOutput::from(p.find_session(id)?))
}

#[utoipa::path(get, path = "/api/v1/hostPools/{pool}/userSessions/{id}", tag = "sessions",
    responses((status = 200, body = SessionOutput), (status = 404, body = ErrorBody)))]
pub async fn show(
    State(core): State<Arc<Core>>,
    Path((pool, id)): Path<(String, String)>,
) -> Result<axum::Json<SessionOutput>, ApiError> {
    Ok(axum::Json(core.read(&pool, |p| find(p, &id)).await?))
}

/// `{"sessionState": "Active"}` or `"Disconnected"` (rule S4). From an
/// administrator or operator it also confirms the session's logon (S9);
/// from a front door (the gateway role) it is a relay's mark, which
/// confirms nothing (R4).
#[utoipa::path(patch, path = "/api/v1/hostPools/{pool}/userSessions/{id}", tag = "sessions",
    request_body = SessionPatch,
    responses((status = 200, body = SessionOutput), (status = 400, body = ErrorBody), (status = 404, body = ErrorBody)))]
pub async fn patch(
    State(core): State<Arc<Core>>,
    Path((pool, id)): Path<(String, String)>,
    caller: Option<axum::Extension<crate::enroll::Caller>>,
    Json(input): Json<SessionPatch>,
) -> Result<axum::Json<SessionOutput>, ApiError> {
    let relayed =
        caller.is_some_and(|axum::Extension(c)| c.role() == Some(crate::access::Role::Gateway));
    let out = core
        .write(&pool, |p, now| {
            if relayed {
                p.mark_relayed_session(&id, input.session_state, now)?;
            } else {
                p.set_session_state(&id, input.session_state, now)?;
            }
            find(p, &id)
        })
        .await?;
    Ok(axum::Json(out))
}

/// Logoff: ends the session.
#[utoipa::path(delete, path = "/api/v1/hostPools/{pool}/userSessions/{id}", tag = "sessions",
    responses((status = 204), (status = 404, body = ErrorBody)))]
pub async fn logoff(
    State(core): State<Arc<Core>>,
    Path((pool, id)): Path<(String, String)>,
) -> Result<StatusCode, ApiError> {
    core.write(&pool, |p, _| Ok(p.logoff(&id)?)).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// Queues a message for the session's user, shown on the session's host by
/// its agent after its next heartbeat (202: queued, not yet shown; not
/// durable, see `crate::messages`). 429 when too many wait for that host.
#[utoipa::path(post, path = "/api/v1/hostPools/{pool}/userSessions/{id}/sendMessage", tag = "sessions",
    request_body = SendMessageInput,
    responses((status = 202, body = HostMessage), (status = 400, body = ErrorBody),
              (status = 404, body = ErrorBody), (status = 429, body = ErrorBody)))]
pub async fn send_message(
    State(messages): State<Arc<Messages>>,
    Path((pool, id)): Path<(String, String)>,
    Json(input): Json<SendMessageInput>,
) -> Result<(StatusCode, axum::Json<HostMessage>), ApiError> {
    let (queued, _host) = messages
        .queue(&pool, &id, &input.title, &input.message)
        .await?;
    Ok((StatusCode::ACCEPTED, axum::Json(queued)))
}
