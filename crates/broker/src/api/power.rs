//! Power actions through the API (rules A9, A10): the manual start and stop
//! of a session host (202 with the action's record), and the record of a
//! pool's power and scaling actions, newest first, in pages like the audit
//! log's.

use std::sync::Arc;

use axum::extract::{OriginalUri, Path, State};
use axum::http::StatusCode;
use serde::Deserialize;

use api::ErrorBody;
use api::types::{Page, ScalingActionOutput};
use placement::ScalingActionKind;

use super::Query;
use super::error::ApiError;
use super::types::ForceQuery;
use crate::enroll::Caller;
use crate::power::Power;

/// Records a page holds when `pageSize` is not given.
pub const DEFAULT_ACTION_PAGE_SIZE: u32 = 100;

async fn power(
    power: Arc<Power>,
    caller: Option<axum::Extension<Caller>>,
    pool: String,
    host: String,
    kind: ScalingActionKind,
    force: bool,
) -> Result<(StatusCode, axum::Json<ScalingActionOutput>), ApiError> {
    let actor = caller
        .map(|axum::Extension(c)| crate::audit::actor(&c))
        .unwrap_or_else(|| "unknown".into());
    let record = power.act(&pool, &host, kind, force, actor).await?;
    Ok((StatusCode::ACCEPTED, axum::Json(record.into())))
}

/// Power the host on through the pool's driver (202: the record is
/// Pending until the driver answers; the host is `Starting` meanwhile).
/// 409 when the pool has no driver able to, or the host is not stopped.
#[utoipa::path(post, path = "/api/v1/hostPools/{pool}/sessionHosts/{host}/start", tag = "sessionHosts",
    responses((status = 202, body = ScalingActionOutput), (status = 404, body = ErrorBody), (status = 409, body = ErrorBody)))]
pub async fn start(
    State(power_actions): State<Arc<Power>>,
    caller: Option<axum::Extension<Caller>>,
    Path((pool, host)): Path<(String, String)>,
) -> Result<(StatusCode, axum::Json<ScalingActionOutput>), ApiError> {
    power(
        power_actions,
        caller,
        pool,
        host,
        ScalingActionKind::Start,
        false,
    )
    .await
}

/// Power the host off through the pool's driver (202, as start). 409
/// while it has sessions, unless `?force=true`.
#[utoipa::path(post, path = "/api/v1/hostPools/{pool}/sessionHosts/{host}/stop", tag = "sessionHosts",
    params(("force" = Option<bool>, Query, description = "stop it although it has sessions")),
    responses((status = 202, body = ScalingActionOutput), (status = 404, body = ErrorBody), (status = 409, body = ErrorBody)))]
pub async fn stop(
    State(power_actions): State<Arc<Power>>,
    caller: Option<axum::Extension<Caller>>,
    Path((pool, host)): Path<(String, String)>,
    Query(q): Query<ForceQuery>,
) -> Result<(StatusCode, axum::Json<ScalingActionOutput>), ApiError> {
    power(
        power_actions,
        caller,
        pool,
        host,
        ScalingActionKind::Stop,
        q.force,
    )
    .await
}

/// Query of the action list.
#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ActionQuery {
    pub page_size: Option<u32>,
    pub before_id: Option<String>,
}

/// The pool's power and scaling actions, newest first, in pages
/// (`nextLink` while more remain).
#[utoipa::path(get, path = "/api/v1/hostPools/{pool}/scalingActions", tag = "hostPools",
    params(("pageSize" = Option<u32>, Query, description = "at most this many records (1..=1000, default 100), with a nextLink while more remain"),
           ("beforeId" = Option<String>, Query, description = "only records older than this id (the nextLink's continuation)")),
    responses((status = 200, body = Page<ScalingActionOutput>), (status = 400, body = ErrorBody), (status = 404, body = ErrorBody)))]
pub async fn list(
    State(power): State<Arc<Power>>,
    Path(pool): Path<String>,
    OriginalUri(uri): OriginalUri,
    Query(q): Query<ActionQuery>,
) -> Result<axum::Json<Page<ScalingActionOutput>>, ApiError> {
    let size = q.page_size.unwrap_or(DEFAULT_ACTION_PAGE_SIZE);
    let max = store::MAX_SCALING_ACTION_PAGE_ROWS as u32;
    if size == 0 || size > max {
        return Err(ApiError::invalid(format!(
            "pageSize: {size} is out of range 1..={max}"
        )));
    }
    if let Some(id) = &q.before_id
        && uuid::Uuid::parse_str(id).is_err()
    {
        return Err(ApiError::invalid(format!(
            "beforeId: {id:?} is not an action id"
        )));
    }
    // The pool must exist (404 otherwise), and what it shows be durable.
    let rows = power
        .actions(&pool, q.before_id.clone(), size as usize + 1)
        .await?;
    let more = rows.len() > size as usize;
    let value: Vec<ScalingActionOutput> = rows
        .into_iter()
        .take(size as usize)
        .map(ScalingActionOutput::from)
        .collect();
    let next_link = match (more, value.last()) {
        (true, Some(last)) => Some(super::paging::next_link_with(&uri, "beforeId", &last.id)),
        _ => None,
    };
    Ok(axum::Json(Page { value, next_link }))
}
