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
