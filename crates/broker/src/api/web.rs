//! `GET /api/v1/hostPools/{pool}/webUrl` (rule WEB3): the address that
//! opens a pool's desktop in a browser tab for one user, for portals of
//! one's own. The broker's own portal links to the same address
//! (`api/portal.rs`).

use std::sync::Arc;

use axum::extract::{Path, State};
use serde::Deserialize;

use api::ErrorBody;
use api::types::WebUrlOutput;

use super::Query;
use super::error::ApiError;
use super::pools::{Issuer, audit_ticket, ticket_user};
use crate::state::Broker;

/// `?user=` (and `groups=`, comma-separated) of a browser address.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WebUrlQuery {
    pub user: String,
    pub groups: Option<String>,
}

/// The RD Gateway's `/web` page with a fresh connection ticket for `user`
/// in the URL's fragment (rule T3), issued only to the pool's admin and
/// portals, and only for a user the pool entitles (T2, with the groups the
/// caller vouches for). The ticket is recorded in the audit log (T5) before
/// the address is answered.
#[utoipa::path(get, path = "/api/v1/hostPools/{pool}/webUrl", tag = "hostPools",
    params(("user" = String, Query, description = "the user the ticket admits"),
           ("groups" = Option<String>, Query, description = "the user's groups, comma-separated, for the pool's entitledGroups")),
    responses((status = 200, body = WebUrlOutput),
              (status = 400, body = ErrorBody, description = "a bad user, or the broker knows of no RD Gateway"),
              (status = 403, body = ErrorBody, description = "not the admin or a portal, a user the pool does not entitle, or a pool the doors may not reach"),
              (status = 404, body = ErrorBody)))]
pub async fn web_url(
    State(b): State<Arc<Broker>>,
    Path(pool): Path<String>,
    caller: Option<axum::Extension<crate::enroll::Caller>>,
    extensions: axum::http::Extensions,
    Query(q): Query<WebUrlQuery>,
) -> Result<axum::Json<WebUrlOutput>, ApiError> {
    let caller = caller.as_ref().map(|c| &c.0);
    let issuer = Issuer::api(caller, &extensions);
    let (user, groups) = ticket_user(caller, &pool, q.user, q.groups.as_deref(), "webUrl")?;
    let web = super::pools::placing(
        &b,
        &issuer,
        &pool,
        "webUrl",
        b.connector().web_url(&pool, &user, &groups),
    )
    .await?;
    audit_ticket(&b, &issuer, "webUrl", &web.pool, &user, web.expires_s, None).await;
    Ok(axum::Json(WebUrlOutput {
        url: web.url,
        expiration_time: api::types::rfc3339(
            i64::try_from(web.expires_s).unwrap_or(i64::MAX / 1000) * 1000,
        ),
    }))
}
