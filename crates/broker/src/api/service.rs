//! Service endpoints: health, Prometheus metrics, the OpenAPI document.

use std::fmt::Write;
use std::sync::Arc;

use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use utoipa::OpenApi;

use api::types;
use api::{ErrorBody, ErrorCode, ErrorDetail};

use super::{
    applications, audit, credentials, feed, hosts, keys, plans, pools, power, registration,
    sessions, users, web,
};
use crate::core::Core;

/// The OpenAPI document, generated from the handlers and types.
#[derive(OpenApi)]
#[openapi(
    info(title = "deskbroker", description = "Session broker for remote-desktop farms"),
    paths(
        pools::list, pools::show, pools::put, pools::patch, pools::delete, pools::rdp_file, web::web_url,
        hosts::list, hosts::show, hosts::put, hosts::patch, hosts::delete, hosts::heartbeat,
                sessions::connect, sessions::list, sessions::show, sessions::patch, sessions::logoff,
        registration::create_token, registration::revoke_tokens, registration::register,
        credentials::create, credentials::list, credentials::revoke, keys::rotate, keys::revoke,
        audit::list, audit::sign_in_refused, audit::whoami, users::show, users::workspace,
        feed::feed, feed::desktop_file, feed::application_file, feed::icon,
        power::start, power::stop, power::list,
        sessions::send_message,
        plans::list, plans::show, plans::put, plans::patch, plans::delete, plans::status,
        applications::list, applications::show, applications::put, applications::delete,
        applications::rdp_file, applications::list_groups, applications::show_group,
        applications::put_group, applications::delete_group,
    ),
    components(schemas(ErrorBody, ErrorDetail, ErrorCode, types::HostPoolInput, types::HostPoolOutput,
        types::SessionHostInput, types::SessionHostPatch, types::SessionHostOutput,
        types::HeartbeatInput, types::HeartbeatOutput, types::RefusedSession,
        types::ConnectInput, types::ConnectOutput,
        types::SessionOutput, types::SessionPatch,
        types::CredentialInput, types::CredentialOutput, types::SigningKeysOutput,
        types::AuditEntryOutput, types::SignInRefusalInput, types::WhoAmIOutput, types::UserOutput, types::WebUrlOutput,
        types::PowerSettingsInput, types::ScalingActionOutput,
        types::HostMessage, types::LogoffOrder, types::SendMessageInput,
        plans::ScalingPlanOutput, plans::ScalingPlanStatus, plans::PoolScalingStatus,
        applications::ApplicationOutput, applications::ApplicationGroupOutput,
        users::WorkspaceOutput, users::PublishedPoolOutput, types::FeedOutput,
        types::FeedResourceOutput, types::FeedIconOutput,
        placement::Application, placement::ApplicationGroup)),
    modifiers(&BearerAuth, &Refusals),
    security(("bearer" = [])),
)]
pub struct ApiDoc;

struct BearerAuth;

impl utoipa::Modify for BearerAuth {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme};
        let components = openapi.components.get_or_insert_with(Default::default);
        components.add_security_scheme(
            "bearer",
            SecurityScheme::Http(HttpBuilder::new().scheme(HttpAuthScheme::Bearer).build()),
        );
    }
}

/// The refusals every operation can answer besides those its handler
/// lists, and the constraints of the names in paths, so that the document
/// says everything a client can receive (schemathesis checks it in CI):
/// 400 (a malformed path, query or body), 401 and 403 (the bearer token),
/// 404 (the pool or host in the path), 413 (a body over the limit), 414
/// (`MAX_URI_BYTES`), 429 (`api::throttle`), 503 (`REQUEST_TIMEOUT`, a failed store, a full queue).
struct Refusals;

/// What a pool or session host name may be (`placement::validate_name`).
const NAME_PATTERN: &str = "^[A-Za-z0-9][A-Za-z0-9._-]*$";
const NAME_MAX_CHARS: usize = 253;

/// The ranges `placement::PoolConfig::validate` enforces on a pool's
/// input, for the document: (schema, property, minimum, maximum).
const INTEGER_RANGES: &[(&str, &str, usize, usize)] = &[
    (
        "HostPoolInput",
        "maxSessionLimit",
        0,
        placement::MAX_SESSION_LIMIT as usize,
    ),
    ("HostPoolInput", "pendingTimeoutSeconds", 1, 86_400),
    ("HostPoolInput", "heartbeatTimeoutSeconds", 5, 86_400),
    ("LoadIndexSettingsInput", "cpuThreshold", 0, 100),
    ("LoadIndexSettingsInput", "memoryThreshold", 0, 100),
    ("LoadIndexSettingsInput", "loadIndexThreshold", 0, 100),
    (
        "LoadIndexSettingsInput",
        "connectingSessionThreshold",
        0,
        150,
    ),
    ("LogonStormSettingsInput", "loadIndexThreshold", 0, 100),
    (
        "LogonStormSettingsInput",
        "connectingSessionThreshold",
        0,
        150,
    ),
    ("LogonStormSettingsInput", "minHostsInQueue", 1, 10_000),
    ("LogonStormSettingsInput", "logonCost", 0, 100),
    (
        "PowerSettingsInput",
        "timeoutSeconds",
        1,
        placement::MAX_POWER_TIMEOUT_SECONDS as usize,
    ),
];

/// Longest texts of a pool's input, in bytes: (schema, property, maximum).
const TEXT_LENGTHS: &[(&str, &str, usize)] = &[
    ("HostPoolInput", "description", 1_024),
    ("HostPoolInput", "friendlyName", 256),
    (
        "PowerSettingsInput",
        "powerOnCommand",
        placement::MAX_POWER_COMMAND_BYTES,
    ),
    (
        "PowerSettingsInput",
        "powerOffCommand",
        placement::MAX_POWER_COMMAND_BYTES,
    ),
    (
        "PowerSettingsInput",
        "powerStateCommand",
        placement::MAX_POWER_COMMAND_BYTES,
    ),
];

/// Writes [`INTEGER_RANGES`] and [`TEXT_LENGTHS`] into the components.
fn add_ranges(openapi: &mut utoipa::openapi::OpenApi) {
    use utoipa::Number;
    use utoipa::openapi::RefOr;
    use utoipa::openapi::schema::Schema;
    let Some(components) = openapi.components.as_mut() else {
        return;
    };
    for &(schema, name, min, max) in INTEGER_RANGES {
        if let Some(RefOr::T(Schema::Object(object))) = components.schemas.get_mut(schema)
            && let Some(RefOr::T(Schema::Object(p))) = object.properties.get_mut(name)
        {
            p.minimum = Some(Number::UInt(min));
            p.maximum = Some(Number::UInt(max));
        }
    }
    for &(schema, name, max) in TEXT_LENGTHS {
        if let Some(RefOr::T(Schema::Object(object))) = components.schemas.get_mut(schema)
            && let Some(RefOr::T(Schema::Object(p))) = object.properties.get_mut(name)
        {
            p.max_length = Some(max);
        }
    }
}

impl utoipa::Modify for Refusals {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        use utoipa::openapi::path::{Operation, ParameterIn};
        use utoipa::openapi::schema::{ObjectBuilder, Type};
        use utoipa::openapi::{ContentBuilder, Ref, RefOr, ResponseBuilder};

        let refusal = |why: &str| {
            RefOr::T(
                ResponseBuilder::new()
                    .description(why)
                    .content(
                        "application/json",
                        ContentBuilder::new()
                            .schema(Some(Ref::from_schema_name("ErrorBody")))
                            .build(),
                    )
                    .build(),
            )
        };
        add_ranges(openapi);
        for (path, item) in openapi.paths.paths.iter_mut() {
            let names_a_pool = path.contains("{pool}");
            let operations: [&mut Option<Operation>; 5] = [
                &mut item.get,
                &mut item.put,
                &mut item.post,
                &mut item.delete,
                &mut item.patch,
            ];
            for op in operations.into_iter().flatten() {
                let mut add = |status: &str, why: &str| {
                    op.responses
                        .responses
                        .entry(status.to_string())
                        .or_insert_with(|| refusal(why));
                };
                add(
                    "400",
                    "InvalidParameter: a malformed path, query string or body",
                );
                add(
                    "401",
                    "Unauthorized: no bearer token, or one the broker does not know",
                );
                add("403", "Forbidden: the token does not allow this request");
                add("414", "UriTooLong: the path and query are too long");
                add(
                    "429",
                    "TooManyRequests: this source sent too many unauthenticated requests \
                     (see Retry-After)",
                );
                add(
                    "503",
                    "The broker cannot serve this now (store, queue, time limit)",
                );
                if names_a_pool {
                    add(
                        "404",
                        "The host pool, session host or session does not exist",
                    );
                }
                if op.request_body.is_some() {
                    add("413", "PayloadTooLarge: the body is over the limit");
                }
                for param in op.parameters.iter_mut().flatten() {
                    let RefOr::T(param) = param else { continue };
                    if param.parameter_in == ParameterIn::Path
                        && matches!(param.name.as_str(), "pool" | "host")
                    {
                        param.schema = Some(RefOr::T(
                            ObjectBuilder::new()
                                .schema_type(Type::String)
                                .min_length(Some(1))
                                .max_length(Some(NAME_MAX_CHARS))
                                .pattern(Some(NAME_PATTERN))
                                .into(),
                        ));
                    }
                }
            }
        }
    }
}

pub async fn openapi() -> impl IntoResponse {
    axum::Json(ApiDoc::openapi())
}

/// 200 while the broker can serve; 503 once its store has failed.
pub async fn healthz(State(core): State<Arc<Core>>) -> Response {
    let error = core
        .writer()
        .failure()
        .map(|e| format!("store failed: {e}"));
    health(types::Health {
        status: String::new(),
        role: "standalone".into(),
        leader: None,
        epoch: None,
        error,
    })
}

/// `health` as `/healthz` answers it: `ok` and 200 without an error,
/// `unavailable` and 503 with one.
pub fn health(mut health: types::Health) -> Response {
    let status = match health.error {
        None => StatusCode::OK,
        Some(_) => StatusCode::SERVICE_UNAVAILABLE,
    };
    health.status = match health.error {
        None => "ok",
        Some(_) => "unavailable",
    }
    .into();
    (status, axum::Json(health)).into_response()
}

/// Prometheus text: the recorded counters and histograms, then gauges of
/// every host computed now (so the placement path pays nothing for them).
pub async fn metrics(State(core): State<Arc<Core>>) -> impl IntoResponse {
    // This broker answers, so it decides (a lone one, or the leader: a
    // follower answers `/metrics` itself, `replica/forward.rs`).
    metrics::gauge!("deskbroker_leader").set(1.0);
    let mut out = crate::telemetry::render();
    out.push_str(
        "# HELP deskbroker_host_sessions Sessions (Pending, Active, Disconnected) per session host.\n\
         # TYPE deskbroker_host_sessions gauge\n",
    );
    let mut connecting = String::from(
        "# HELP deskbroker_host_connecting_sessions Pending sessions per session host.\n\
         # TYPE deskbroker_host_connecting_sessions gauge\n",
    );
    let mut load = String::from(
        "# HELP deskbroker_host_load_index Server Load Index per session host, 0..100, or -1 when unknown.\n\
         # TYPE deskbroker_host_load_index gauge\n",
    );
    let mut available = String::from(
        "# HELP deskbroker_host_available 1 when the session host is Available and allows new sessions.\n\
         # TYPE deskbroker_host_available gauge\n",
    );
    core.for_each_pool(|p| {
        let pool = p.name();
        for h in p.hosts() {
            let host = &h.spec.name;
            let _ = writeln!(
                out,
                "deskbroker_host_sessions{{pool=\"{pool}\",host=\"{host}\"}} {}",
                h.sessions
            );
            let _ = writeln!(
                connecting,
                "deskbroker_host_connecting_sessions{{pool=\"{pool}\",host=\"{host}\"}} {}",
                h.connecting_sessions
            );
            let _ = writeln!(
                load,
                "deskbroker_host_load_index{{pool=\"{pool}\",host=\"{host}\"}} {}",
                h.load_index
            );
            let open = h.status == placement::HostStatus::Available && h.spec.allow_new_session;
            let _ = writeln!(
                available,
                "deskbroker_host_available{{pool=\"{pool}\",host=\"{host}\"}} {}",
                u8::from(open)
            );
        }
    });
    out.push_str(&connecting);
    out.push_str(&load);
    out.push_str(&available);
    ([(header::CONTENT_TYPE, "text/plain; version=0.0.4")], out)
}
