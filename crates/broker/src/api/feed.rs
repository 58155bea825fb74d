//! `GET /api/v1/users/{name}/feed` and the files and icons it names (rule
//! F4): what a user's workspace feed lists, for an RD Gateway on its own
//! machine that serves the feed (`deskbroker gateway --broker`). The
//! gateway signs the user in; these answer for the user it names, so only
//! the gateway's credential (and the admin's) may call them.

use std::sync::Arc;

use axum::extract::{Path, State};
use base64::Engine as _;

use api::ErrorBody;
use api::types::{FeedIconOutput, FeedOutput};

use super::error::ApiError;
use crate::state::Broker;

/// What the user's feed lists: the desktops and applications they are
/// given whose files open without a ticket, and the feed's `LastUpdated`.
#[utoipa::path(get, path = "/api/v1/users/{name}/feed", tag = "users",
    params(("name" = String, Path, description = "the signed-in user")),
    responses((status = 200, body = FeedOutput), (status = 400, body = ErrorBody),
              (status = 503, body = ErrorBody)))]
pub async fn feed(
    State(b): State<Arc<Broker>>,
    Path(name): Path<String>,
) -> Result<axum::Json<FeedOutput>, ApiError> {
    Ok(axum::Json(crate::feed::feed(&b, &name).await?))
}

/// The `.rdp` file the user's feed names for a pool's desktop: no ticket
/// inside.
#[utoipa::path(get, path = "/api/v1/users/{name}/feed/{pool}/rdpFile", tag = "users",
    params(("name" = String, Path, description = "the signed-in user"),
           ("pool" = String, Path, description = "the host pool")),
    responses((status = 200, content_type = "application/x-rdp", body = String),
              (status = 403, body = ErrorBody), (status = 404, body = ErrorBody)))]
pub async fn desktop_file(
    State(b): State<Arc<Broker>>,
    Path((name, pool)): Path<(String, String)>,
) -> Result<axum::response::Response, ApiError> {
    let file = crate::feed::feed_file(&b, &name, &pool, None).await?;
    Ok(super::pools::rdp_download(&pool, file))
}

/// The `.rdp` file the user's feed names for an application.
#[utoipa::path(get, path = "/api/v1/users/{name}/feed/{pool}/applications/{alias}/rdpFile",
    tag = "users",
    params(("name" = String, Path, description = "the signed-in user"),
           ("pool" = String, Path, description = "the host pool"),
           ("alias" = String, Path, description = "the application")),
    responses((status = 200, content_type = "application/x-rdp", body = String),
              (status = 403, body = ErrorBody), (status = 404, body = ErrorBody)))]
pub async fn application_file(
    State(b): State<Arc<Broker>>,
    Path((name, pool, alias)): Path<(String, String, String)>,
) -> Result<axum::response::Response, ApiError> {
    let file = crate::feed::feed_file(&b, &name, &pool, Some(&alias)).await?;
    Ok(super::pools::rdp_download(&alias, file))
}

/// The icons the user's feed names for an application: a 32×32 PNG and
/// an ICO, base64.
#[utoipa::path(get, path = "/api/v1/users/{name}/feed/{pool}/applications/{alias}/icon",
    tag = "users",
    params(("name" = String, Path, description = "the signed-in user"),
           ("pool" = String, Path, description = "the host pool"),
           ("alias" = String, Path, description = "the application")),
    responses((status = 200, body = FeedIconOutput),
              (status = 403, body = ErrorBody), (status = 404, body = ErrorBody)))]
pub async fn icon(
    State(b): State<Arc<Broker>>,
    Path((name, pool, alias)): Path<(String, String, String)>,
) -> Result<axum::Json<FeedIconOutput>, ApiError> {
    let icons = crate::feed::feed_icon(&b, &name, &pool, &alias).await?;
    let encode = |bytes: &[u8]| base64::engine::general_purpose::STANDARD.encode(bytes);
    Ok(axum::Json(FeedIconOutput {
        ico: encode(&icons.ico),
        png32: encode(&icons.png_32),
    }))
}
