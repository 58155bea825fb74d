//! Session hosts: register, replace, change (drain, owner), list, remove,
//! and heartbeats (with their 429 when a host sends too many, rule S8).

use std::sync::Arc;

use axum::extract::{OriginalUri, Path, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use placement::{DrainedBy, HostSpec, Upsert};

use super::error::ApiError;
use super::paging::{self, Page, PageQuery};
use super::types::ForceQuery;
use super::{Json, Query};
use crate::core::Core;
use crate::enroll::Enrollment;
use crate::error::BrokerError;
use crate::heartbeat::{HEARTBEAT_BURST, HEARTBEAT_REFILL, HeartbeatError, Heartbeats};
use api::types::{
    HeartbeatInput, HeartbeatOutput, SessionHostInput, SessionHostOutput, SessionHostPatch,
};
use api::{ErrorBody, ErrorCode};

fn host_output(p: &placement::Pool, host: &str) -> Result<SessionHostOutput, BrokerError> {
    Ok(SessionHostOutput::from(p.find_host(host)?))
}

/// `?pageSize=&initialSkip=&imageVersion=` of the list of hosts.
#[derive(serde::Deserialize, Default, Debug, Clone)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct HostListQuery {
    pub page_size: Option<u32>,
    pub initial_skip: Option<usize>,
    /// Only the hosts running this image (rule U1).
    pub image_version: Option<String>,
}

/// Session hosts in query order; paged with `?pageSize=&initialSkip=`,
/// only those of one image with `?imageVersion=`.
#[utoipa::path(get, path = "/api/v1/hostPools/{pool}/sessionHosts", tag = "sessionHosts",
    params(("pageSize" = Option<u32>, Query, description = "at most this many hosts (1..=1000), with a nextLink while more remain; absent: all"),
           ("initialSkip" = Option<usize>, Query, description = "skip this many hosts first (in query order)"),
           ("imageVersion" = Option<String>, Query, description = "only the hosts whose imageVersion is this (rule U1)")),
    responses((status = 200, body = Page<SessionHostOutput>), (status = 400, body = ErrorBody), (status = 404, body = ErrorBody)))]
pub async fn list(
    State(core): State<Arc<Core>>,
    Path(pool): Path<String>,
    OriginalUri(uri): OriginalUri,
    Query(q): Query<HostListQuery>,
) -> Result<axum::Json<Page<SessionHostOutput>>, ApiError> {
    let page = PageQuery {
        page_size: q.page_size,
        initial_skip: q.initial_skip,
    };
    page.validate()?;
    if let Some(v) = &q.image_version {
        placement::validate_image_version("imageVersion", v).map_err(BrokerError::from)?;
    }
    let version = q.image_version.as_deref();
    let out = core
        .read(&pool, |p| {
            let hosts = p
                .hosts()
                .filter(|h| version.is_none_or(|v| h.spec.image_version.as_deref() == Some(v)));
            Ok(paging::page(hosts, page, SessionHostOutput::from, &uri))
        })
        .await?;
    Ok(axum::Json(out))
}

#[utoipa::path(get, path = "/api/v1/hostPools/{pool}/sessionHosts/{host}", tag = "sessionHosts",
    responses((status = 200, body = SessionHostOutput), (status = 404, body = ErrorBody)))]
pub async fn show(
    State(core): State<Arc<Core>>,
    Path((pool, host)): Path<(String, String)>,
) -> Result<axum::Json<SessionHostOutput>, ApiError> {
    Ok(axum::Json(
        core.read(&pool, |p| host_output(p, &host)).await?,
    ))
}

/// Register (201) or replace (200); a replaced host keeps its place in
/// query order and its sessions. With `If-None-Match: *`, only register:
/// an existing host is a 409 and is left as it was.
#[utoipa::path(put, path = "/api/v1/hostPools/{pool}/sessionHosts/{host}", tag = "sessionHosts",
    request_body = SessionHostInput,
    params(("If-None-Match" = Option<String>, Header, description = "`*`: only register the session host; 409 Conflict if it exists")),
    responses((status = 201, body = SessionHostOutput), (status = 200, body = SessionHostOutput),
              (status = 400, body = ErrorBody), (status = 404, body = ErrorBody), (status = 409, body = ErrorBody)))]
pub async fn put(
    State(core): State<Arc<Core>>,
    Path((pool, host)): Path<(String, String)>,
    headers: axum::http::HeaderMap,
    Json(input): Json<SessionHostInput>,
) -> Result<(StatusCode, axum::Json<SessionHostOutput>), ApiError> {
    let create_only = headers
        .get_all(axum::http::header::IF_NONE_MATCH)
        .iter()
        .any(|v| v.to_str().is_ok_and(|v| v.trim() == "*"));
    if let Some(n) = &input.name
        && n != &host
    {
        return Err(ApiError::invalid(format!(
            "name: {n:?} does not match the session host in the path ({host:?})"
        )));
    }
    let defaults = HostSpec::new(&host, &input.address);
    let spec = HostSpec {
        allow_new_session: input.allow_new_session.unwrap_or(true),
        capabilities: input.capabilities.unwrap_or(defaults.capabilities.clone()),
        policy: input.policy.unwrap_or_default(),
        assigned_user: input.assigned_user,
        tags: input.tags.unwrap_or_default(),
        mac_address: input.mac_address,
        dns_name: input.dns_name,
        image_version: input.image_version,
        // A6: a drain through the API is an operator's (or admin's).
        drained_by: (input.allow_new_session == Some(false)).then_some(DrainedBy::Operator),
        ..defaults
    };
    let (upsert, out) = core
        .write(&pool, |p, now| {
            if create_only && p.host(&host).is_some() {
                return Err(crate::BrokerError::Engine(placement::Error::Conflict(
                    format!(
                        "session host {host} already exists in host pool {pool}; \
                         change it with PATCH, or delete it first"
                    ),
                )));
            }
            if p.host(&host).is_none_or(|h| h.spec.address != spec.address) {
                crate::enroll::check_address(p.config(), &spec.address)?;
            }
            let upsert = p.upsert_host(spec, now)?;
            Ok((upsert, host_output(p, &host)?))
        })
        .await?;
    let status = if upsert == Upsert::Created {
        StatusCode::CREATED
    } else {
        StatusCode::OK
    };
    Ok((status, axum::Json(out)))
}

/// Change only the fields given: `{"allowNewSession": false}` drains,
/// `{"assignedUser": "…"}` assigns, `{"assignedUser": null}` unassigns.
#[utoipa::path(patch, path = "/api/v1/hostPools/{pool}/sessionHosts/{host}", tag = "sessionHosts",
    request_body = SessionHostPatch,
    responses((status = 200, body = SessionHostOutput), (status = 400, body = ErrorBody),
              (status = 404, body = ErrorBody), (status = 409, body = ErrorBody)))]
pub async fn patch(
    State(core): State<Arc<Core>>,
    caller: Option<axum::Extension<crate::enroll::Caller>>,
    Path((pool, host)): Path<(String, String)>,
    Json(input): Json<SessionHostPatch>,
) -> Result<axum::Json<SessionHostOutput>, ApiError> {
    // An operator only drains and undrains (rule T1).
    if let Some(axum::Extension(crate::enroll::Caller::Credential {
        role: crate::access::Role::Operator,
        ..
    })) = &caller
    {
        crate::access::operator_may_patch_host(&input).map_err(ApiError::forbidden)?;
    }
    let out = core
        .write(&pool, |p, now| {
            let current = p.find_host(&host)?;
            let mut spec = current.spec.clone();
            if let Some(a) = input.address
                && a != spec.address
            {
                crate::enroll::check_address(p.config(), &a)?;
                spec.address = a;
            }
            if let Some(v) = input.allow_new_session {
                spec.allow_new_session = v;
                // A6: whoever drained it, a drain through the API is now
                // the operator's, and an undrain clears it.
                spec.drained_by = (!v).then_some(DrainedBy::Operator);
            }
            if let Some(t) = input.tags {
                spec.tags = t;
            }
            if let Some(m) = input.mac_address {
                spec.mac_address = m;
            }
            if let Some(d) = input.dns_name {
                spec.dns_name = d;
            }
            if let Some(v) = input.image_version {
                spec.image_version = v;
            }
            if let Some(c) = input.capabilities {
                spec.capabilities = c;
            }
            if let Some(pol) = input.policy {
                spec.policy = pol;
            }
            if let Some(u) = input.assigned_user {
                spec.assigned_user = u;
            }
            p.upsert_host(spec, now)?;
            host_output(p, &host)
        })
        .await?;
    Ok(axum::Json(out))
}

/// 409 while the host has sessions, unless `?force=true` (which ends them).
#[utoipa::path(delete, path = "/api/v1/hostPools/{pool}/sessionHosts/{host}", tag = "sessionHosts",
    params(("force" = Option<bool>, Query, description = "remove with its sessions")),
    responses((status = 204), (status = 404, body = ErrorBody), (status = 409, body = ErrorBody)))]
pub async fn delete(
    State(enrollment): State<Arc<Enrollment>>,
    Path((pool, host)): Path<(String, String)>,
    Query(q): Query<ForceQuery>,
) -> Result<StatusCode, ApiError> {
    enrollment.remove_host(&pool, &host, q.force).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// From the host's agent: metrics, and the host is alive (rule S7); its
/// list of sessions is reconciled by rule S8, and the entries refused are
/// in the answer's `refusedSessions`. Beyond a host's heartbeat budget
/// (`HEARTBEAT_BURST`, then one per `HEARTBEAT_REFILL`): 429 with
/// `Retry-After`.
#[utoipa::path(post, path = "/api/v1/hostPools/{pool}/sessionHosts/{host}/heartbeat", tag = "sessionHosts",
    request_body = HeartbeatInput,
    responses((status = 200, body = HeartbeatOutput), (status = 400, body = ErrorBody), (status = 404, body = ErrorBody),
              (status = 429, body = ErrorBody, headers(("Retry-After" = u64, description = "seconds until the host may send its next heartbeat")))))]
pub async fn heartbeat(
    State(heartbeats): State<Arc<Heartbeats>>,
    Path((pool, host)): Path<(String, String)>,
    Json(input): Json<HeartbeatInput>,
) -> Result<axum::Json<HeartbeatOutput>, Response> {
    match heartbeats.heartbeat(&pool, &host, input).await {
        Ok(out) => Ok(axum::Json(out)),
        Err(HeartbeatError::Broker(e)) => Err(ApiError::from(e).into_response()),
        Err(HeartbeatError::TooSoon {
            retry_after_seconds,
        }) => {
            let e = ApiError::new(
                ErrorCode::TooManyRequests,
                format!(
                    "session host {host} sends heartbeats too often (at most {HEARTBEAT_BURST} at \
                     once, then one every {} s); retry after {retry_after_seconds} s",
                    HEARTBEAT_REFILL.as_secs()
                ),
            );
            let mut r = e.into_response();
            r.headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from(retry_after_seconds));
            Err(r)
        }
    }
}
