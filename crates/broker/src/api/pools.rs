//! Host pools: create, replace, change, show, list, delete.

use std::sync::Arc;

use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode, header};
use placement::{PoolConfig, validate_name};

use api::ErrorBody;
use api::types::{HostPoolInput, HostPoolOutput, List};

use super::error::ApiError;
use super::types::{ForceQuery, apply_pool_input};
use super::{Json, Query};
use crate::state::Broker;

#[utoipa::path(get, path = "/api/v1/hostPools", tag = "hostPools",
    responses((status = 200, body = List<HostPoolOutput>)))]
pub async fn list(
    State(b): State<Arc<Broker>>,
    caller: Option<axum::Extension<crate::enroll::Caller>>,
) -> Result<axum::Json<List<HostPoolOutput>>, ApiError> {
    // A credential limited to some pools sees only those (rule T1).
    let who = caller.map(|c| crate::access::Principal::of(&c.0));
    let mut value = Vec::new();
    b.core().for_each_pool(|p| {
        if who.as_ref().is_none_or(|w| w.may_see_pool(p.name())) {
            value.push(output(&b, p, Vec::new()))
        }
    });
    b.core().writer().flush().await?;
    Ok(axum::Json(List { value }))
}

#[utoipa::path(get, path = "/api/v1/hostPools/{pool}", tag = "hostPools",
    responses((status = 200, body = HostPoolOutput), (status = 404, body = ErrorBody)))]
pub async fn show(
    State(b): State<Arc<Broker>>,
    Path(pool): Path<String>,
) -> Result<axum::Json<HostPoolOutput>, ApiError> {
    let out = b
        .core()
        .read(&pool, |p| {
            Ok(output(&b, p, p.config().validate().unwrap_or_default()))
        })
        .await?;
    Ok(axum::Json(out))
}

/// Create (201) or replace (200): fields not given take their defaults.
/// With `If-None-Match: *`, only create: an existing pool is a 409.
#[utoipa::path(put, path = "/api/v1/hostPools/{pool}", tag = "hostPools", request_body = HostPoolInput,
    params(("If-None-Match" = Option<String>, Header, description = "`*`: only create the host pool; 409 Conflict if it exists")),
    responses((status = 201, body = HostPoolOutput), (status = 200, body = HostPoolOutput),
              (status = 400, body = ErrorBody), (status = 409, body = ErrorBody)))]
pub async fn put(
    State(b): State<Arc<Broker>>,
    caller: Option<axum::Extension<crate::enroll::Caller>>,
    Path(pool): Path<String>,
    headers: HeaderMap,
    Json(input): Json<HostPoolInput>,
) -> Result<(StatusCode, axum::Json<HostPoolOutput>), ApiError> {
    validate_name("name", &pool)?;
    may_set_power_commands(&b, caller.as_ref().map(|c| &c.0), &input)?;
    let create_only = headers
        .get_all(header::IF_NONE_MATCH)
        .iter()
        .any(|v| v.to_str().is_ok_and(|v| v.trim() == "*"));
    let (Some(t), Some(lb)) = (input.host_pool_type, input.load_balancer_type) else {
        return Err(ApiError::invalid(
            "hostPoolType and loadBalancerType are required to create or replace a host pool",
        ));
    };
    let config = apply_pool_input(input, PoolConfig::new(&pool, t, lb))?;
    personal_with_plan(&b, &config)?;
    let (created, warnings) = b.put_pool(config, create_only).await?;
    let out = b
        .core()
        .read(&pool, |p| Ok(output(&b, p, warnings)))
        .await?;
    let status = if created {
        StatusCode::CREATED
    } else {
        StatusCode::OK
    };
    Ok((status, axum::Json(out)))
}

/// Rule A9: a power command runs on the broker's machine as the broker, so
/// it can do whatever the broker can in every pool; only an administrator
/// of every pool (the admin token, or an admin credential not limited to
/// some pools) may set one. Removing one is any administrator's.
fn may_set_power_commands(
    b: &Broker,
    caller: Option<&crate::enroll::Caller>,
    input: &HostPoolInput,
) -> Result<(), ApiError> {
    let sets = input
        .power_settings
        .as_ref()
        .is_some_and(|p| p.sets_command());
    let unlimited_admin = match caller {
        Some(crate::enroll::Caller::Admin) => true,
        Some(crate::enroll::Caller::Credential {
            role: crate::access::Role::Admin,
            host_pools,
            ..
        }) => host_pools.is_empty(),
        _ => false,
    };
    if sets && !b.settings().allow_power_commands {
        return Err(ApiError::forbidden(format!(
            "powerSettings: {}",
            crate::power::COMMANDS_NOT_ALLOWED
        )));
    }
    if sets && !unlimited_admin {
        return Err(ApiError::forbidden(
            "powerSettings: a power command runs on the broker's machine as the broker; only \
             the admin token or an admin credential of every pool (no hostPools) sets one"
                .to_string(),
        ));
    }
    Ok(())
}

/// Change only the fields given.
#[utoipa::path(patch, path = "/api/v1/hostPools/{pool}", tag = "hostPools", request_body = HostPoolInput,
    responses((status = 200, body = HostPoolOutput), (status = 400, body = ErrorBody),
              (status = 404, body = ErrorBody), (status = 409, body = ErrorBody)))]
pub async fn patch(
    State(b): State<Arc<Broker>>,
    caller: Option<axum::Extension<crate::enroll::Caller>>,
    Path(pool): Path<String>,
    Json(input): Json<HostPoolInput>,
) -> Result<axum::Json<HostPoolOutput>, ApiError> {
    may_set_power_commands(&b, caller.as_ref().map(|c| &c.0), &input)?;
    let out = b
        .core()
        .write(&pool, |p, _| {
            let config = apply_pool_input(input, p.config().clone())?;
            personal_with_plan(&b, &config)?;
            let warnings = p.set_config(config)?;
            Ok(output(&b, p, warnings))
        })
        .await?;
    Ok(axum::Json(out))
}

/// 409 while the pool has session hosts, unless `?force=true`.
#[utoipa::path(delete, path = "/api/v1/hostPools/{pool}", tag = "hostPools",
    params(("force" = Option<bool>, Query, description = "delete with its hosts and sessions")),
    responses((status = 204), (status = 404, body = ErrorBody), (status = 409, body = ErrorBody)))]
pub async fn delete(
    State(b): State<Arc<Broker>>,
    Path(pool): Path<String>,
    Query(q): Query<ForceQuery>,
) -> Result<StatusCode, ApiError> {
    b.delete_pool(&pool, q.force).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// `?user=` (and `groups=`, comma-separated) of a connection file.
#[derive(Debug, Default, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RdpFileQuery {
    pub user: Option<String>,
    pub groups: Option<String>,
    /// Through the RD Gateway rather than the front door (needs `user`).
    #[serde(default)]
    pub gateway: bool,
}

/// An `.rdp` file that points mstsc or xfreerdp at this broker's RDP front
/// door with the pool's routing token (rule R1); with `?user=`, a signed
/// connection ticket for that user instead (rule T3), issued only to the
/// admin and portals, and only for a user the pool entitles (T2, with the
/// groups the caller vouches for in `groups`). With `gateway=true` (and a
/// user), a file through the RD Gateway: the pool as the target, the
/// ticket as the gateway access token.
#[utoipa::path(get, path = "/api/v1/hostPools/{pool}/rdpFile", tag = "hostPools",
    params(("user" = Option<String>, Query, description = "issue a connection ticket for this user (admin or portal)"),
           ("groups" = Option<String>, Query, description = "the user's groups, comma-separated, for the pool's entitledGroups"),
           ("gateway" = Option<bool>, Query, description = "a file through the RD Gateway (MS-TSGU over HTTPS) with the ticket as its access token; needs user; 400 InvalidParameter when the broker knows of no gateway")),
    responses((status = 200, content_type = "application/x-rdp", body = String),
              (status = 400, body = ErrorBody), (status = 403, body = ErrorBody),
              (status = 404, body = ErrorBody)))]
pub async fn rdp_file(
    State(b): State<Arc<Broker>>,
    Path(pool): Path<String>,
    caller: Option<axum::Extension<crate::enroll::Caller>>,
    extensions: axum::http::Extensions,
    Query(q): Query<RdpFileQuery>,
) -> Result<axum::response::Response, ApiError> {
    let issuer = Issuer::api(caller.as_ref().map(|c| &c.0), &extensions);
    let user = q
        .user
        .map(|user| {
            let caller = caller.as_ref().map(|c| &c.0);
            ticket_user(caller, &pool, user, q.groups.as_deref(), "rdpFile?user=")
        })
        .transpose()?;
    let file = rdp_file_for(
        &b,
        &pool,
        user.as_ref().map(|(u, g)| (u.as_str(), g.as_slice())),
        q.gateway,
        &issuer,
    )
    .await?;
    Ok(rdp_answer(file))
}

/// Who asks for a connection file, for the audit entry of its ticket.
pub(crate) struct Issuer {
    /// The caller as the log names it (`admin`, `credential:NAME`,
    /// `portal:USER`).
    pub actor: String,
    /// The route's path up to the pool's name.
    pub action_prefix: &'static str,
    /// The caller's address, when known.
    pub source: Option<String>,
}

impl Issuer {
    /// The caller of an `/api/v1/hostPools/…` request.
    pub(crate) fn api(
        caller: Option<&crate::enroll::Caller>,
        extensions: &axum::http::Extensions,
    ) -> Issuer {
        Issuer {
            actor: caller.map_or_else(|| "anonymous".to_string(), crate::audit::actor),
            action_prefix: "/api/v1/hostPools",
            source: source_of(extensions),
        }
    }
}

/// The caller's address of a request, from its extensions.
pub(crate) fn source_of(extensions: &axum::http::Extensions) -> Option<String> {
    extensions
        .get::<axum::extract::ConnectInfo<std::net::SocketAddr>>()
        .map(|c| c.0.ip().to_string())
}

/// The user a request asks a connection ticket for, with the groups the
/// caller vouches for (`groups`, comma-separated). A ticket places its user, so only whoever may connect
/// users may have one made (rule T1: the admin of the pool and portals);
/// anyone else is refused 403, naming `what` they asked for.
pub(crate) fn ticket_user(
    caller: Option<&crate::enroll::Caller>,
    pool: &str,
    user: String,
    groups: Option<&str>,
    what: &str,
) -> Result<(String, Vec<String>), ApiError> {
    let may = caller
        .is_some_and(|c| c.is_admin_of(pool) || c.role() == Some(crate::access::Role::Portal));
    if !may {
        return Err(ApiError::forbidden(format!(
            "{what} issues a connection ticket and needs the admin or portal role"
        )));
    }
    let groups = groups
        .map(|g| {
            g.split(',')
                .map(|s| s.trim().to_string())
                .filter(|s| !s.is_empty())
                .collect()
        })
        .unwrap_or_default();
    Ok((user, groups))
}

/// Records that a connection ticket was handed out (rule T5: a ticket is a
/// credential for its user), and waits until the entry is durable: who
/// asked, the pool, the user and when the ticket expires, never the ticket.
/// `what` is the route's last segment (`rdpFile`, `webUrl`, `web`);
/// `gateway`, for a file, whether it goes through the RD Gateway.
pub(crate) async fn audit_ticket(
    b: &Broker,
    issuer: &Issuer,
    what: &str,
    pool: &str,
    user: &str,
    expires_s: u64,
    gateway: Option<bool>,
) {
    let mut after = serde_json::json!({
        "ticketFor": user,
        "expirationTime": api::types::rfc3339(
            i64::try_from(expires_s).unwrap_or(i64::MAX / 1000) * 1000
        ),
    });
    if let Some(gateway) = gateway {
        after["gateway"] = gateway.into();
    }
    let entry = store::AuditEntry {
        time_ms: b.now_ms(),
        actor: issuer.actor.clone(),
        action: format!("GET {}/{pool}/{what}", issuer.action_prefix),
        target: format!("hostPools/{pool}/{what}"),
        host_pool: Some(pool.to_string()),
        before: None,
        after: store::Rendered::of(&after),
        outcome: 200,
        source: issuer.source.clone(),
        end_reason: None,
    };
    b.audit().append(entry).await;
}

/// The `.rdp` file of `pool`, for a user (with the groups the caller
/// vouches for) or for nobody in particular: the one place the file is
/// made (`Connector::connection_file`), so that the API's `rdpFile` and the
/// user portal's download (`api/portal.rs`) hand out the same file, with
/// a connection ticket (rule T3) for the user.
///
/// A file that carries a ticket is recorded in the audit log (rule T5: a
/// ticket is a credential for its user): who asked, the pool, the user and
/// when the ticket expires, never the ticket. The file is handed out only
/// once its entry is durable.
pub(crate) async fn rdp_file_for(
    b: &Broker,
    pool: &str,
    user: Option<(&str, &[String])>,
    gateway: bool,
    issuer: &Issuer,
) -> Result<crate::connect::ConnectionFile, ApiError> {
    let file = placing(
        b,
        issuer,
        pool,
        "rdpFile",
        b.connector().connection_file(pool, user, gateway),
    )
    .await?;
    if let (Some((user, _)), Some(expires_s)) = (user, file.ticket_expires_s) {
        audit_ticket(
            b,
            issuer,
            "rdpFile",
            &file.pool,
            user,
            expires_s,
            Some(gateway),
        )
        .await;
    }
    Ok(file)
}

/// Runs `f`, a file's or browser address's making, so that the placement
/// a host-named one makes (rule AD4) is recorded in the audit log as a
/// connect's is (T5), in the placement's own batch: the caller is the
/// actor, the session placed the target. Nothing is recorded when nothing
/// is placed (a pool's files, a reconnect).
pub(crate) async fn placing<F: std::future::Future>(
    b: &Broker,
    issuer: &Issuer,
    pool: &str,
    what: &str,
    f: F,
) -> F::Output {
    let scope = crate::audit::Scope {
        entry: store::AuditEntry {
            time_ms: b.now_ms(),
            actor: issuer.actor.clone(),
            action: format!("GET {}/{pool}/{what}", issuer.action_prefix),
            target: format!("hostPools/{pool}"),
            host_pool: Some(pool.to_string()),
            before: None,
            after: None,
            outcome: 0,
            source: issuer.source.clone(),
            end_reason: None,
        },
        method: "POST".to_string(),
        resource: crate::audit::Resource::Connect {
            pool: pool.to_string(),
        },
        recorded: None,
    };
    crate::audit::with_scope(scope, f).await.0
}

/// An `.rdp` file as a download named after its pool.
pub(crate) fn rdp_answer(file: crate::connect::ConnectionFile) -> axum::response::Response {
    rdp_download(&file.pool, file.body)
}

/// An `.rdp` file's `body` as a download named `name.rdp` (`name` is a
/// valid pool or application name: nothing to escape).
pub(crate) fn rdp_download(name: &str, body: String) -> axum::response::Response {
    axum::response::IntoResponse::into_response((
        [
            (
                axum::http::header::CONTENT_TYPE,
                "application/x-rdp".to_string(),
            ),
            (
                axum::http::header::CONTENT_DISPOSITION,
                format!("attachment; filename=\"{name}.rdp\""),
            ),
        ],
        body,
    ))
}

/// The pool as shown, with its scaling plan (rules A1, A2).
fn output(b: &Broker, p: &placement::Pool, warnings: Vec<String>) -> HostPoolOutput {
    let mut out = HostPoolOutput::of(p, warnings);
    out.scaling_plan = b.autoscale().plan_of(p.name());
    out.power_actions = Some(
        crate::power::actions(
            &p.config().power_settings,
            b.settings().allow_power_commands,
        )
        .iter()
        .map(|a| a.to_string())
        .collect(),
    );
    out
}

/// A pool a scaling plan serves stays pooled (plans serve pooled pools).
fn personal_with_plan(b: &Broker, config: &PoolConfig) -> Result<(), crate::BrokerError> {
    if config.host_pool_type == placement::HostPoolType::Personal
        && let Some(plan) = b.autoscale().plan_of(&config.name)
    {
        return Err(crate::BrokerError::Invalid(format!(
            "hostPoolType: host pool {} is served by scaling plan {plan}, which serves only \
             pooled pools; remove it from the plan first",
            config.name
        )));
    }
    Ok(())
}
