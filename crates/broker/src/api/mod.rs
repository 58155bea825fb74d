//! The HTTP API (its shapes are the `api` crate's; `GET /openapi.json`
//! documents it): routing, authentication, and the
//! extractors that turn every malformed request into the contract's error
//! shape before a handler runs.

mod applications;
mod audit;
mod console;
mod credentials;
pub mod error;
mod feed;
mod hosts;
mod keys;
mod paging;
mod plans;
mod pools;
mod portal;
mod power;
mod registration;
mod service;
pub(crate) use service::health;
mod sessions;
pub mod throttle;
pub mod types;
mod users;
mod web;

use std::sync::Arc;
use std::time::Duration;

use api::ErrorCode;
use axum::Router;
use axum::extract::{FromRef, FromRequest, FromRequestParts, Request};
use axum::http::request::Parts;
use axum::middleware::{self, Next};
use axum::response::Response;
use axum::routing::{delete, get, post};
use serde::de::DeserializeOwned;
use tower_http::timeout::TimeoutLayer;

use crate::audit::Audit;
use crate::autoscale::Autoscale;
use crate::connect::Connector;
use crate::core::Core;
use crate::credentials::Credentials;
use crate::enroll::{Caller, Enrollment};
use crate::heartbeat::Heartbeats;
use crate::messages::Messages;
use crate::power::Power;
use crate::state::Broker;
pub use error::ApiError;

/// Largest request body accepted.
pub const MAX_BODY_BYTES: usize = 256 * 1024;
/// A request that takes longer than this is answered 503 and dropped.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);
/// Longest path and query string read; longer ones are answered 414
/// `UriTooLong` (every name is at most 253 characters, a user 256).
pub const MAX_URI_BYTES: usize = 8 * 1024;

pub use service::ApiDoc;

/// The router's state: the broker, from which each handler extracts only
/// the piece it needs (`State<Arc<Messages>>`, `State<Arc<Core>>`, …), so
/// its signature says what it may touch. Handlers of what is not a
/// service of its own yet take the whole broker.
#[derive(Clone)]
pub struct ApiState {
    broker: Arc<Broker>,
}

impl FromRef<ApiState> for Arc<Broker> {
    fn from_ref(state: &ApiState) -> Arc<Broker> {
        state.broker.clone()
    }
}

impl FromRef<ApiState> for Arc<Core> {
    fn from_ref(state: &ApiState) -> Arc<Core> {
        state.broker.core().clone()
    }
}

impl FromRef<ApiState> for Arc<Messages> {
    fn from_ref(state: &ApiState) -> Arc<Messages> {
        state.broker.messages().clone()
    }
}

impl FromRef<ApiState> for Arc<Credentials> {
    fn from_ref(state: &ApiState) -> Arc<Credentials> {
        state.broker.credentials().clone()
    }
}

impl FromRef<ApiState> for Arc<Enrollment> {
    fn from_ref(state: &ApiState) -> Arc<Enrollment> {
        state.broker.enrollment().clone()
    }
}

impl FromRef<ApiState> for Arc<Power> {
    fn from_ref(state: &ApiState) -> Arc<Power> {
        state.broker.power().clone()
    }
}

impl FromRef<ApiState> for Arc<Autoscale> {
    fn from_ref(state: &ApiState) -> Arc<Autoscale> {
        state.broker.autoscale().clone()
    }
}

impl FromRef<ApiState> for Arc<Audit> {
    fn from_ref(state: &ApiState) -> Arc<Audit> {
        state.broker.audit().clone()
    }
}

impl FromRef<ApiState> for Arc<Connector> {
    fn from_ref(state: &ApiState) -> Arc<Connector> {
        state.broker.connector().clone()
    }
}

impl FromRef<ApiState> for Arc<crate::workspace::Workspace> {
    fn from_ref(state: &ApiState) -> Arc<crate::workspace::Workspace> {
        state.broker.workspace().clone()
    }
}

impl FromRef<ApiState> for Arc<Heartbeats> {
    fn from_ref(state: &ApiState) -> Arc<Heartbeats> {
        state.broker.heartbeats().clone()
    }
}

/// Every route of the broker.
pub fn router(broker: Arc<Broker>) -> Router {
    // Whole paths, not a router nested at `/api/v1`: a nested router makes
    // every request a new URI without its prefix, and that cost about 2 µs
    // of each connect's CPU (3 % of the broker's, in a profile under
    // load). Handlers read the path they were called with through
    // `OriginalUri`, and the route through `MatchedPath`, either way.
    let gate = Gate {
        enrollment: broker.enrollment().clone(),
        audit: broker.audit().clone(),
        audited: Arc::new(throttle::Audited::new(
            broker.settings().audited_rate_limit_per_second,
        )),
    };
    let api = Router::new()
        .route("/api/v1/hostPools", get(pools::list))
        .route(
            "/api/v1/hostPools/{pool}",
            get(pools::show)
                .put(pools::put)
                .patch(pools::patch)
                .delete(pools::delete),
        )
        .route("/api/v1/hostPools/{pool}/sessionHosts", get(hosts::list))
        .route(
            "/api/v1/hostPools/{pool}/sessionHosts/{host}",
            get(hosts::show)
                .put(hosts::put)
                .patch(hosts::patch)
                .delete(hosts::delete),
        )
        .route(
            "/api/v1/hostPools/{pool}/sessionHosts/{host}/heartbeat",
            post(hosts::heartbeat),
        )
        .route(
            "/api/v1/hostPools/{pool}/sessionHosts/{host}/start",
            post(power::start),
        )
        .route(
            "/api/v1/hostPools/{pool}/sessionHosts/{host}/stop",
            post(power::stop),
        )
        .route("/api/v1/hostPools/{pool}/scalingActions", get(power::list))
        .route("/api/v1/scalingPlans", get(plans::list))
        .route(
            "/api/v1/scalingPlans/{plan}",
            get(plans::show)
                .put(plans::put)
                .patch(plans::patch)
                .delete(plans::delete),
        )
        .route("/api/v1/scalingPlans/{plan}/status", get(plans::status))
        .route("/api/v1/hostPools/{pool}/connect", post(sessions::connect))
        .route("/api/v1/hostPools/{pool}/userSessions", get(sessions::list))
        .route(
            "/api/v1/hostPools/{pool}/userSessions/{id}",
            get(sessions::show)
                .patch(sessions::patch)
                .delete(sessions::logoff),
        )
        .route(
            "/api/v1/hostPools/{pool}/userSessions/{id}/sendMessage",
            post(sessions::send_message),
        )
        .route("/api/v1/hostPools/{pool}/rdpFile", get(pools::rdp_file))
        .route(
            "/api/v1/hostPools/{pool}/applications",
            get(applications::list),
        )
        .route(
            "/api/v1/hostPools/{pool}/applications/{alias}",
            get(applications::show)
                .put(applications::put)
                .delete(applications::delete),
        )
        .route(
            "/api/v1/hostPools/{pool}/applications/{alias}/rdpFile",
            get(applications::rdp_file),
        )
        .route("/api/v1/applicationGroups", get(applications::list_groups))
        .route(
            "/api/v1/applicationGroups/{name}",
            get(applications::show_group)
                .put(applications::put_group)
                .delete(applications::delete_group),
        )
        .route("/api/v1/hostPools/{pool}/webUrl", get(web::web_url))
        .route(
            "/api/v1/hostPools/{pool}/registrationToken",
            post(registration::create_token).delete(registration::revoke_tokens),
        )
        .route(
            "/api/v1/credentials",
            get(credentials::list).post(credentials::create),
        )
        .route("/api/v1/credentials/{name}", delete(credentials::revoke))
        .route("/api/v1/signingKeys/rotate", post(keys::rotate))
        .route("/api/v1/signingKeys/revoke", post(keys::revoke))
        .route("/api/v1/auditLog", get(audit::list))
        .route(audit::SIGN_IN_REFUSALS, post(audit::sign_in_refused))
        .route("/api/v1/whoami", get(audit::whoami))
        .route("/api/v1/users/{name}", get(users::show))
        .route("/api/v1/users/{name}/workspace", get(users::workspace))
        .route("/api/v1/users/{name}/feed", get(feed::feed))
        .route(
            "/api/v1/users/{name}/feed/{pool}/rdpFile",
            get(feed::desktop_file),
        )
        .route(
            "/api/v1/users/{name}/feed/{pool}/applications/{alias}/rdpFile",
            get(feed::application_file),
        )
        .route(
            "/api/v1/users/{name}/feed/{pool}/applications/{alias}/icon",
            get(feed::icon),
        )
        .method_not_allowed_fallback(method_not_allowed)
        .route_layer(middleware::from_fn_with_state(gate.clone(), authenticate));
    // Registration carries its token in the body: no bearer token.
    let api = Router::new()
        .route("/api/v1/register", post(registration::register))
        .merge(api);
    Router::new()
        .merge(api)
        .route("/healthz", get(service::healthz))
        .route(
            "/metrics",
            get(service::metrics).route_layer(middleware::from_fn_with_state(gate, authenticate)),
        )
        .route("/openapi.json", get(service::openapi))
        // The web console: static files, no data, no token (console.rs).
        .merge(console::routes())
        // The user portal: its own session cookie, no bearer (portal.rs).
        .merge(portal::routes())
        .fallback(not_found)
        .method_not_allowed_fallback(method_not_allowed)
        .layer(axum::extract::DefaultBodyLimit::max(MAX_BODY_BYTES))
        .layer(TimeoutLayer::with_status_code(
            axum::http::StatusCode::SERVICE_UNAVAILABLE,
            REQUEST_TIMEOUT,
        ))
        .layer(middleware::from_fn_with_state(
            Arc::new(throttle::Throttle::new(broker.clone())),
            throttle::limit_unauthenticated,
        ))
        .layer(middleware::from_fn(edge))
        .with_state(ApiState { broker })
}

/// What every request passes first and every answer last: a path and query
/// longer than [`MAX_URI_BYTES`] is 414, a path that is not UTF-8 once
/// percent-decoded is 400 (both in the contract's shape, before routing),
/// every answer says `X-Content-Type-Options: nosniff`, and answers say
/// `Cache-Control: no-store` unless they chose otherwise
/// (the console's files), so that no cache or proxy keeps a registration
/// token, a host credential or any state.
async fn edge(req: Request, next: Next) -> Response {
    let uri = req.uri();
    let length = uri.path_and_query().map_or(0, |p| p.as_str().len());
    let refusal = if length > MAX_URI_BYTES {
        Some(ApiError::new(
            ErrorCode::UriTooLong,
            format!("the path and query are {length} bytes; at most {MAX_URI_BYTES} are read"),
        ))
    } else if std::str::from_utf8(&percent_decode(uri.path())).is_err() {
        Some(ApiError::invalid(
            "the path is not valid UTF-8 once percent-decoded",
        ))
    } else {
        None
    };
    let mut answer = match refusal {
        Some(e) => axum::response::IntoResponse::into_response(e),
        None => next.run(req).await,
    };
    let headers = answer.headers_mut();
    headers
        .entry(axum::http::header::CACHE_CONTROL)
        .or_insert(axum::http::HeaderValue::from_static("no-store"));
    // No browser may guess another type than the one said (a JSON answer
    // that echoes a name must never be run as a page or a script).
    headers.insert(
        axum::http::header::X_CONTENT_TYPE_OPTIONS,
        axum::http::HeaderValue::from_static("nosniff"),
    );
    answer
}

/// `%XX` sequences decoded to their bytes; anything else (a `%` without
/// two hex digits after it) kept as it is.
fn percent_decode(input: &str) -> Vec<u8> {
    percent_encoding::percent_decode_str(input).collect()
}

async fn method_not_allowed() -> ApiError {
    ApiError::new(
        ErrorCode::MethodNotAllowed,
        "this path does not take that method (see /openapi.json)",
    )
}

/// The token of an `Authorization: Bearer TOKEN` header; the scheme is
/// matched without regard to case (RFC 9110, section 11.1).
pub(crate) fn bearer_token(header: &str) -> Option<&str> {
    let (scheme, token) = header.split_once(' ')?;
    let token = token.trim_start_matches(' ');
    (scheme.eq_ignore_ascii_case("bearer") && !token.is_empty()).then_some(token)
}

async fn not_found() -> ApiError {
    ApiError::new(
        ErrorCode::NotFound,
        "no such path in the deskbroker API (see /openapi.json)",
    )
}

/// What [`authenticate`] needs: who a bearer token is, the audit log, and
/// the limits of audited requests (rule T4), one set for the whole router.
#[derive(Clone)]
struct Gate {
    enrollment: Arc<Enrollment>,
    audit: Arc<Audit>,
    audited: Arc<throttle::Audited>,
}

/// Who may call what: the bearer token says who the caller is (401 when
/// it is unknown, revoked or expired), and the one authorization table
/// (`crate::access`, rule T1) decides this route for them (403 naming the
/// role it needs, before any handler runs). The caller is left in the
/// request's extensions for handlers that narrow further (lists of a
/// limited credential, an operator's host changes).
async fn authenticate(
    axum::extract::State(gate): axum::extract::State<Gate>,
    mut req: Request,
    next: Next,
) -> Result<Response, ApiError> {
    // Looked up once per request: the throttle in front may have done it.
    let resolved = req.extensions_mut().remove::<throttle::Resolved>();
    let header = req
        .headers()
        .get(axum::http::header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok());
    let Some(token) = header.and_then(bearer_token) else {
        return Err(ApiError::unauthorized(
            "missing Authorization: Bearer TOKEN header (the admin token is in \
             DATA_DIR/admin.token or DESKBROKER_ADMIN_TOKEN)",
        ));
    };
    let caller = match resolved {
        Some(throttle::Resolved(caller)) => caller,
        None => gate
            .enrollment
            .caller(token)
            .map_err(ApiError::unauthorized)?,
    };
    let route = req
        .extensions()
        .get::<axum::extract::MatchedPath>()
        .map(|m| m.as_str().to_string());
    // The whole path, as the route pattern spells it (a nested router
    // sees its own part only).
    let path = req
        .extensions()
        .get::<axum::extract::OriginalUri>()
        .map_or_else(|| req.uri().path(), |u| u.0.path())
        .to_string();
    let (pool, host) = match &route {
        Some(r) => (
            path_param(r, &path, "{pool}"),
            path_param(r, &path, "{host}"),
        ),
        None => (None, None),
    };
    // A method the route does not take: 405, as the router would answer
    // (no handler runs either way).
    if let Some(r) = &route
        && crate::access::lookup(req.method().as_str(), r).is_none()
        && crate::access::known_route(r)
    {
        return Err(method_not_allowed().await);
    }
    let authorized = crate::access::authorize(
        &crate::access::Principal::of(&caller),
        req.method().as_str(),
        route.as_deref(),
        pool.as_deref(),
        host.as_deref(),
    );
    req.extensions_mut().insert(caller.clone());
    let own_host = matches!(&caller, Caller::Host { pool: p, host: h }
        if pool.as_deref() == Some(p.as_str()) && host.as_deref() == Some(h.as_str()));
    // Rule T5: changes, allowed or refused, go to the audit log.
    match route {
        Some(r) if audit::is_audited(req.method(), Some(&r), own_host) => {
            // Rule T4: each credential's audited requests are limited.
            if let Some(too_many) = gate.audited.check(&caller) {
                return Ok(too_many);
            }
            let params = [
                pool,
                host,
                path_param(&r, &path, "{id}"),
                path_param(&r, &path, "{name}"),
                path_param(&r, &path, "{alias}"),
            ];
            // In a task of its own: the change and its entry run to the
            // end even if the client goes away and this request is
            // dropped (an answered change is always recorded).
            let task = tokio::spawn(audit::record(
                gate.audit.clone(),
                caller,
                r,
                params,
                req,
                authorized,
                next,
            ));
            match task.await {
                Ok(answer) => Ok(answer),
                Err(e) => {
                    tracing::error!(error = %e, "an audited request's task failed");
                    Err(ApiError::new(
                        ErrorCode::InternalError,
                        "the request failed inside the broker; see its log",
                    ))
                }
            }
        }
        _ => match authorized {
            Ok(()) => Ok(next.run(req).await),
            Err(e) => Err(ApiError::forbidden(e)),
        },
    }
}

/// The percent-decoded segment of `path` where the route pattern has
/// `param` (as the `Path` extractor will see it).
fn path_param(route: &str, path: &str, param: &str) -> Option<String> {
    let i = route.split('/').position(|s| s == param)?;
    let raw = path.split('/').nth(i)?;
    String::from_utf8(percent_decode(raw)).ok()
}

/// JSON body extractor whose every rejection (bad syntax, wrong type,
/// unknown field or enum value, wrong content type, too large) is an
/// `InvalidParameter` in the contract's shape.
pub struct Json<T>(pub T);

impl<T: DeserializeOwned, S: Send + Sync> FromRequest<S> for Json<T> {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, Self::Rejection> {
        match axum::Json::<T>::from_request(req, state).await {
            Ok(axum::Json(v)) => Ok(Json(v)),
            Err(rejection) => {
                use axum::extract::rejection::JsonRejection::*;
                let message = match &rejection {
                    JsonDataError(e) => format!(
                        "request body: {}",
                        e.body_text().trim_start_matches(
                            "Failed to deserialize the JSON body into the target type: "
                        )
                    ),
                    JsonSyntaxError(e) => {
                        format!("request body is not valid JSON: {}", e.body_text())
                    }
                    MissingJsonContentType(_) => {
                        "request body: the Content-Type must be application/json".to_string()
                    }
                    other => format!("request body: {}", other.body_text()),
                };
                let code = if rejection.status() == axum::http::StatusCode::PAYLOAD_TOO_LARGE {
                    ErrorCode::PayloadTooLarge
                } else {
                    ErrorCode::InvalidParameter
                };
                Err(ApiError::new(code, message))
            }
        }
    }
}

/// Query-string extractor with the same error shape.
pub struct Query<T>(pub T);

impl<T: DeserializeOwned, S: Send + Sync> FromRequestParts<S> for Query<T> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        axum::extract::Query::<T>::from_request_parts(parts, state)
            .await
            .map(|axum::extract::Query(v)| Query(v))
            .map_err(|e| ApiError::invalid(format!("query string: {}", e.body_text())))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_bearer_scheme_is_matched_without_regard_to_case() {
        for header in ["Bearer t0k", "bearer t0k", "BEARER t0k", "bEaReR  t0k"] {
            assert_eq!(bearer_token(header), Some("t0k"), "{header}");
        }
        for header in ["Basic t0k", "Bearer", "Bearer ", "Bearert0k", "t0k"] {
            assert_eq!(bearer_token(header), None, "{header}");
        }
    }

    #[test]
    fn path_params_are_read_where_the_route_names_them() {
        let route = "/api/v1/hostPools/{pool}/sessionHosts/{host}";
        let path = "/api/v1/hostPools/p%31/sessionHosts/h1";
        assert_eq!(path_param(route, path, "{pool}").as_deref(), Some("p1"));
        assert_eq!(path_param(route, path, "{host}").as_deref(), Some("h1"));
        assert_eq!(path_param(route, path, "{id}"), None);
    }

    #[test]
    fn paths_are_percent_decoded_before_the_utf8_check() {
        assert_eq!(percent_decode("/a%20b"), b"/a b");
        assert_eq!(percent_decode("/%ff%FE"), [b'/', 0xff, 0xfe]);
        assert_eq!(percent_decode("/100%"), b"/100%");
        assert_eq!(percent_decode("/%zz"), b"/%zz");
    }
}
