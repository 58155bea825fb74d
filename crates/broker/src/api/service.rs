//! Service endpoints: health, Prometheus metrics, the OpenAPI document.

use std::fmt::Write;
use std::sync::Arc;

use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::IntoResponse;
use utoipa::OpenApi;

use api::types;
use api::{ErrorBody, ErrorCode, ErrorDetail};

use super::{hosts, pools, registration, sessions};
use crate::state::Broker;

/// The OpenAPI document, generated from the handlers and types.
#[derive(OpenApi)]
#[openapi(
    info(title = "deskbroker", description = "Session broker for remote-desktop farms"),
    paths(
        pools::list, pools::show, pools::put, pools::patch, pools::delete, pools::rdp_file,
        hosts::list, hosts::show, hosts::put, hosts::patch, hosts::delete, hosts::heartbeat,
                sessions::connect, sessions::list, sessions::show, sessions::patch, sessions::logoff,
        registration::create_token, registration::revoke_tokens, registration::register,
    ),
    components(schemas(ErrorBody, ErrorDetail, ErrorCode, types::HostPoolInput, types::HostPoolOutput,
        types::SessionHostInput, types::SessionHostPatch, types::SessionHostOutput,
        types::HeartbeatInput, types::HeartbeatOutput, types::RefusedSession,
        types::ConnectInput, types::ConnectOutput,
        types::SessionOutput, types::SessionPatch)),
    modifiers(&BearerAuth),
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

pub async fn openapi() -> impl IntoResponse {
    axum::Json(ApiDoc::openapi())
}

/// 200 while the broker can serve; 503 once its store has failed.
pub async fn healthz(State(b): State<Arc<Broker>>) -> impl IntoResponse {
    match b.writer.failure() {
        None => (StatusCode::OK, "ok\n".to_string()),
        Some(e) => (
            StatusCode::SERVICE_UNAVAILABLE,
            format!("store failed: {e}\n"),
        ),
    }
}

/// Prometheus text: the recorded counters and histograms, then gauges of
/// every host computed now (so the placement path pays nothing for them).
pub async fn metrics(State(b): State<Arc<Broker>>) -> impl IntoResponse {
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
    b.for_each_pool(|p| {
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
