//! `GET /api/v1/users/{name}`: a user as the directory sees them (rule
//! AD1): their entry and their groups, nested ones included, exactly the
//! groups that decide their entitlements. For operators who need to know
//! why a user is, or is not, let into a pool.

use std::sync::Arc;

use axum::extract::{Path, State};
use serde::Deserialize;

use api::ErrorBody;
use api::types::UserOutput;

use super::Query;
use super::error::ApiError;
use crate::connect::Connector;
use crate::error::BrokerError;

#[derive(Deserialize, utoipa::IntoParams)]
#[serde(deny_unknown_fields)]
pub struct UserQuery {
    /// Read the directory now instead of the cached answer.
    #[serde(default)]
    pub refresh: bool,
}

#[utoipa::path(get, path = "/api/v1/users/{name}", tag = "users",
    params(("name" = String, Path, description = "the user: `name`, `name@suffix` (UPN) or `DOMAIN\\name`"),
           UserQuery),
    responses((status = 200, body = UserOutput), (status = 404, body = ErrorBody),
              (status = 503, body = ErrorBody)))]
pub async fn show(
    State(connector): State<Arc<Connector>>,
    Path(name): Path<String>,
    Query(q): Query<UserQuery>,
) -> Result<axum::Json<UserOutput>, ApiError> {
    placement::validate_user("name", &name).map_err(BrokerError::from)?;
    let Some(directory) = connector.directory() else {
        return Err(BrokerError::NotFound(
            "no directory is configured (serve --directory-url): a user's groups are those the \
             portal or the caller vouches for, and the broker keeps none"
                .into(),
        )
        .into());
    };
    let user = if q.refresh {
        directory.refresh(&name).await
    } else {
        directory.groups(&name).await
    }
    .map_err(BrokerError::from)?;
    let cached_seconds = directory.cached_age(&name).await.map(|a| a.as_secs());
    Ok(axum::Json(UserOutput {
        name,
        found: user.dn.is_some(),
        distinguished_name: user.dn.clone(),
        groups: user.groups.clone(),
        cached_seconds,
        cache_seconds: directory.cache_ttl().as_secs(),
    }))
}

#[derive(Deserialize, utoipa::IntoParams)]
#[serde(deny_unknown_fields)]
pub struct WorkspaceQuery {
    /// The user's groups, comma-separated, when no directory is
    /// configured (with one, the directory's are used).
    pub groups: Option<String>,
}

/// One pool of a user's workspace.
#[derive(serde::Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct PublishedPoolOutput {
    pub host_pool: String,
    /// The pool's friendly name, or its name.
    pub title: String,
    /// Whether the pool's desktop is given.
    pub desktop: bool,
    /// The applications given, without their icons.
    pub applications: Vec<super::applications::ApplicationOutput>,
}

/// `GET /api/v1/users/{name}/workspace`.
#[derive(serde::Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct WorkspaceOutput {
    pub name: String,
    /// The groups that decided it.
    pub groups: Vec<String>,
    /// Pool by pool, by name; pools that give the user nothing are left out.
    pub value: Vec<PublishedPoolOutput>,
}

/// What a user is given (rules T2, F1): each pool's desktop and the
/// applications its application groups give them, exactly what the
/// portal shows them and what their launch files admit. For operators who
/// need to know why a user sees, or does not see, a resource.
#[utoipa::path(get, path = "/api/v1/users/{name}/workspace", tag = "users",
    params(("name" = String, Path, description = "the user"), WorkspaceQuery),
    responses((status = 200, body = WorkspaceOutput), (status = 400, body = ErrorBody),
              (status = 503, body = ErrorBody)))]
pub async fn workspace(
    State(workspace): State<Arc<crate::workspace::Workspace>>,
    Path(name): Path<String>,
    Query(q): Query<WorkspaceQuery>,
) -> Result<axum::Json<WorkspaceOutput>, ApiError> {
    placement::validate_user("name", &name).map_err(BrokerError::from)?;
    let claimed: Vec<String> = q
        .groups
        .as_deref()
        .unwrap_or_default()
        .split(',')
        .map(|g| g.trim().to_string())
        .filter(|g| !g.is_empty())
        .collect();
    for (i, group) in claimed.iter().enumerate() {
        placement::validate_group(&format!("groups[{i}]"), group).map_err(BrokerError::from)?;
    }
    let groups = workspace.groups_of(&name, None, &claimed).await?;
    let value = workspace
        .published_to(&name, &groups)
        .into_iter()
        .map(|p| PublishedPoolOutput {
            applications: p
                .applications
                .into_iter()
                .map(|a| super::applications::ApplicationOutput {
                    alias: a.alias,
                    host_pool: p.pool.clone(),
                    application: a.application,
                })
                .collect(),
            host_pool: p.pool,
            title: p.title,
            desktop: p.desktop,
        })
        .collect();
    Ok(axum::Json(WorkspaceOutput {
        name,
        groups,
        value,
    }))
}
