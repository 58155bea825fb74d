//! Published applications and application groups through the API (rule
//! F1), and an application's launch file (F2). The checks are the model's
//! (`Application::validate`, `ApplicationGroup::validate`: 400 naming the
//! field) and the workspace's (icons, the pool and its applications
//! existing, bounds).

use std::sync::Arc;

use axum::extract::{Path, State};
use axum::http::StatusCode;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use api::ErrorBody;
use api::types::List;
use placement::{Application, ApplicationGroup};

use super::error::ApiError;
use super::pools::{Issuer, audit_ticket, placing, rdp_download, ticket_user};
use super::{Json, Query};
use crate::state::Broker;
use crate::workspace::Workspace;

/// An application as shown: its alias and pool, and its fields.
#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ApplicationOutput {
    pub alias: String,
    pub host_pool: String,
    #[serde(flatten)]
    pub application: Application,
}

/// An application group as shown: its name and its fields.
#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ApplicationGroupOutput {
    pub name: String,
    #[serde(flatten)]
    pub group: ApplicationGroup,
}

fn app_output(pool: &str, alias: String, application: Application) -> ApplicationOutput {
    ApplicationOutput {
        alias,
        host_pool: pool.to_string(),
        application,
    }
}

fn created_or_ok(created: bool) -> StatusCode {
    if created {
        StatusCode::CREATED
    } else {
        StatusCode::OK
    }
}

/// A pool's published applications, by alias, without their icons (a
/// list of hundreds would carry megabytes of them; `GET` one for its
/// icons).
#[utoipa::path(get, path = "/api/v1/hostPools/{pool}/applications", tag = "applications",
    responses((status = 200, body = List<ApplicationOutput>), (status = 404, body = ErrorBody)))]
pub async fn list(
    State(w): State<Arc<Workspace>>,
    Path(pool): Path<String>,
) -> Result<axum::Json<List<ApplicationOutput>>, ApiError> {
    let value = w
        .applications(&pool)?
        .into_iter()
        .map(|(alias, mut app)| {
            app.icon_png = None;
            app.icon_ico = None;
            app_output(&pool, alias, app)
        })
        .collect();
    Ok(axum::Json(List { value }))
}

/// One published application, with its icons.
#[utoipa::path(get, path = "/api/v1/hostPools/{pool}/applications/{alias}", tag = "applications",
    responses((status = 200, body = ApplicationOutput), (status = 404, body = ErrorBody)))]
pub async fn show(
    State(w): State<Arc<Workspace>>,
    Path((pool, alias)): Path<(String, String)>,
) -> Result<axum::Json<ApplicationOutput>, ApiError> {
    let app = w.application(&pool, &alias)?;
    Ok(axum::Json(app_output(&pool, alias, app)))
}

/// Publish (201) or replace (200) an application. 400 naming the field
/// at fault (an alias that is not a name, a program with control
/// characters, a command line its policy forbids, an icon that is not an
/// image of its kind or is larger than 64 KiB); 409 past 500 applications
/// in the pool.
#[utoipa::path(put, path = "/api/v1/hostPools/{pool}/applications/{alias}", tag = "applications",
    request_body = Application,
    responses((status = 201, body = ApplicationOutput), (status = 200, body = ApplicationOutput),
              (status = 400, body = ErrorBody), (status = 404, body = ErrorBody),
              (status = 409, body = ErrorBody)))]
pub async fn put(
    State(w): State<Arc<Workspace>>,
    Path((pool, alias)): Path<(String, String)>,
    Json(application): Json<Application>,
) -> Result<(StatusCode, axum::Json<ApplicationOutput>), ApiError> {
    let (created, app) = w.put_application(&pool, &alias, application).await?;
    Ok((
        created_or_ok(created),
        axum::Json(app_output(&pool, alias, app)),
    ))
}

/// Stop publishing an application; groups that listed it no longer do.
#[utoipa::path(delete, path = "/api/v1/hostPools/{pool}/applications/{alias}", tag = "applications",
    responses((status = 204), (status = 404, body = ErrorBody)))]
pub async fn delete(
    State(w): State<Arc<Workspace>>,
    Path((pool, alias)): Path<(String, String)>,
) -> Result<StatusCode, ApiError> {
    w.delete_application(&pool, &alias).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// Every application group, by name.
#[utoipa::path(get, path = "/api/v1/applicationGroups", tag = "applications",
    responses((status = 200, body = List<ApplicationGroupOutput>)))]
pub async fn list_groups(
    State(w): State<Arc<Workspace>>,
) -> Result<axum::Json<List<ApplicationGroupOutput>>, ApiError> {
    let value = w
        .groups()
        .into_iter()
        .map(|(name, group)| ApplicationGroupOutput { name, group })
        .collect();
    Ok(axum::Json(List { value }))
}

/// One application group.
#[utoipa::path(get, path = "/api/v1/applicationGroups/{name}", tag = "applications",
    responses((status = 200, body = ApplicationGroupOutput), (status = 404, body = ErrorBody)))]
pub async fn show_group(
    State(w): State<Arc<Workspace>>,
    Path(name): Path<String>,
) -> Result<axum::Json<ApplicationGroupOutput>, ApiError> {
    let group = w.group(&name)?;
    Ok(axum::Json(ApplicationGroupOutput { name, group }))
}

/// Create (201) or replace (200) an application group. 400 naming the
/// field at fault (a pool or application that does not exist, a Desktop
/// group listing applications, a group moving to another pool); 409 for a
/// second Desktop group of a pool, or past 2000 groups.
#[utoipa::path(put, path = "/api/v1/applicationGroups/{name}", tag = "applications",
    request_body = ApplicationGroup,
    responses((status = 201, body = ApplicationGroupOutput), (status = 200, body = ApplicationGroupOutput),
              (status = 400, body = ErrorBody), (status = 409, body = ErrorBody)))]
pub async fn put_group(
    State(w): State<Arc<Workspace>>,
    Path(name): Path<String>,
    Json(group): Json<ApplicationGroup>,
) -> Result<(StatusCode, axum::Json<ApplicationGroupOutput>), ApiError> {
    let (created, group) = w.put_group(&name, group).await?;
    Ok((
        created_or_ok(created),
        axum::Json(ApplicationGroupOutput { name, group }),
    ))
}

/// Remove an application group: its users are no longer given what it
/// gave.
#[utoipa::path(delete, path = "/api/v1/applicationGroups/{name}", tag = "applications",
    responses((status = 204), (status = 404, body = ErrorBody)))]
pub async fn delete_group(
    State(w): State<Arc<Workspace>>,
    Path(name): Path<String>,
) -> Result<StatusCode, ApiError> {
    w.delete_group(&name).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// `GET …/applications/{alias}/rdpFile`'s query.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AppFileQuery {
    pub user: Option<String>,
    pub groups: Option<String>,
    #[serde(default)]
    pub gateway: bool,
    /// The arguments to open the application with, where its policy
    /// allows any.
    #[serde(rename = "commandLine")]
    pub command_line: Option<String>,
}

/// An application's launch file (rule F2): the pool's `.rdp` file (as
/// `rdpFile` makes it: the front door, or the RD Gateway with
/// `gateway=true`; with `user=`, that user's connection ticket) made to
/// open the application: as a RemoteApp, or as the session's only program
/// on an `AlternateShell` pool. Placement is the pool's, so two
/// applications of a pool open in the user's one session. With `user=`,
/// only for a user an application group gives it to (403 `NotEntitled`
/// otherwise); `commandLine` only where the application's policy allows
/// any (400).
#[utoipa::path(get, path = "/api/v1/hostPools/{pool}/applications/{alias}/rdpFile", tag = "applications",
    params(("user" = Option<String>, Query, description = "issue a connection ticket for this user (admin or portal)"),
           ("groups" = Option<String>, Query, description = "the user's groups, comma-separated, when no directory is configured"),
           ("gateway" = Option<bool>, Query, description = "a file through the RD Gateway; needs user"),
           ("commandLine" = Option<String>, Query, description = "arguments, where the application's commandLinePolicy is Any")),
    responses((status = 200, content_type = "application/x-rdp", body = String),
              (status = 400, body = ErrorBody), (status = 403, body = ErrorBody),
              (status = 404, body = ErrorBody)))]
pub async fn rdp_file(
    State(b): State<Arc<Broker>>,
    Path((pool, alias)): Path<(String, String)>,
    caller: Option<axum::Extension<crate::enroll::Caller>>,
    extensions: axum::http::Extensions,
    Query(q): Query<AppFileQuery>,
) -> Result<axum::response::Response, ApiError> {
    let issuer = Issuer::api(caller.as_ref().map(|c| &c.0), &extensions);
    let user = match q.user {
        Some(user) => {
            let caller = caller.as_ref().map(|c| &c.0);
            let what = "applications/{alias}/rdpFile?user=";
            let (user, claimed) = ticket_user(caller, &pool, user, q.groups.as_deref(), what)?;
            placement::validate_user("user", &user)?;
            let groups = b
                .workspace()
                .groups_of(&user, Some(&pool), &claimed)
                .await?;
            Some((user, groups))
        }
        None => None,
    };
    let file = application_file(
        &b,
        &pool,
        &alias,
        user.as_ref().map(|(u, g)| (u.as_str(), g.as_slice())),
        q.gateway,
        q.command_line.as_deref(),
        &issuer,
    )
    .await?;
    Ok(rdp_download(&alias, file.body))
}

/// The launch file of `alias` of `pool`, for a user (with the groups that
/// decide their assignments) or for nobody in particular: the one place
/// it is made, for the API and the portal. The user must be given the
/// application; a file with a ticket is audited as `rdpFile`'s are.
pub(crate) async fn application_file(
    b: &Broker,
    pool: &str,
    alias: &str,
    user: Option<(&str, &[String])>,
    gateway: bool,
    command_line: Option<&str>,
    issuer: &Issuer,
) -> Result<crate::connect::ConnectionFile, ApiError> {
    let app = match user {
        Some((user, groups)) => b
            .workspace()
            .published_application(pool, alias, user, groups)?,
        None => b.workspace().application(pool, alias)?,
    };
    let args = app.launch_command_line(command_line)?;
    let mode = b.core().peek(pool, |p| Ok(p.config().application_mode))?;
    crate::workspace::check_mode(mode, &app)?;
    let what = format!("applications/{alias}/rdpFile");
    let mut file = placing(
        b,
        issuer,
        pool,
        &what,
        b.connector().connection_file(pool, user, gateway),
    )
    .await?;
    file.body = crate::workspace::launch_file(&file.body, mode, &app, &args);
    if let (Some((user, _)), Some(expires_s)) = (user, file.ticket_expires_s) {
        audit_ticket(b, issuer, &what, &file.pool, user, expires_s, Some(gateway)).await;
    }
    Ok(file)
}
