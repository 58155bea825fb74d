//! The HTTP API (its shapes are the `api` crate's; `GET /openapi.json`
//! documents it): routing, authentication, and the
//! extractors that turn every malformed request into the contract's error
//! shape before a handler runs.

mod console;
pub mod error;
mod hosts;
mod paging;
mod pools;
mod registration;
mod service;
mod sessions;
pub mod types;

use std::sync::Arc;
use std::time::Duration;

use api::ErrorCode;
use axum::Router;
use axum::extract::{FromRequest, FromRequestParts, Request};
use axum::http::request::Parts;
use axum::middleware::{self, Next};
use axum::response::Response;
use axum::routing::{get, post};
use serde::de::DeserializeOwned;
use tower_http::timeout::TimeoutLayer;

use crate::enroll::Caller;
use crate::state::Broker;
pub use error::ApiError;

/// Largest request body accepted.
pub const MAX_BODY_BYTES: usize = 256 * 1024;
/// A request that takes longer than this is answered 503 and dropped.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);

pub use service::ApiDoc;

/// Every route of the broker.
pub fn router(broker: Arc<Broker>) -> Router {
    let api = Router::new()
        .route("/hostPools", get(pools::list))
        .route(
            "/hostPools/{pool}",
            get(pools::show)
                .put(pools::put)
                .patch(pools::patch)
                .delete(pools::delete),
        )
        .route("/hostPools/{pool}/sessionHosts", get(hosts::list))
        .route(
            "/hostPools/{pool}/sessionHosts/{host}",
            get(hosts::show)
                .put(hosts::put)
                .patch(hosts::patch)
                .delete(hosts::delete),
        )
        .route(
            "/hostPools/{pool}/sessionHosts/{host}/heartbeat",
            post(hosts::heartbeat),
        )
        .route("/hostPools/{pool}/connect", post(sessions::connect))
        .route("/hostPools/{pool}/userSessions", get(sessions::list))
        .route(
            "/hostPools/{pool}/userSessions/{id}",
            get(sessions::show)
                .patch(sessions::patch)
                .delete(sessions::logoff),
        )
        .route("/hostPools/{pool}/rdpFile", get(pools::rdp_file))
        .route(
            "/hostPools/{pool}/registrationToken",
            post(registration::create_token).delete(registration::revoke_tokens),
        )
        .fallback(not_found)
        .route_layer(middleware::from_fn_with_state(broker.clone(), authenticate));
    // Registration carries its token in the body: no bearer token.
    let api = Router::new()
        .route("/register", post(registration::register))
        .merge(api);
    Router::new()
        .nest("/api/v1", api)
        .route("/healthz", get(service::healthz))
        .route(
            "/metrics",
            get(service::metrics)
                .route_layer(middleware::from_fn_with_state(broker.clone(), authenticate)),
        )
        .route("/openapi.json", get(service::openapi))
        // The web console: static files, no data, no token (console.rs).
        .merge(console::routes())
        .fallback(not_found)
        .layer(axum::extract::DefaultBodyLimit::max(MAX_BODY_BYTES))
        .layer(TimeoutLayer::with_status_code(
            axum::http::StatusCode::SERVICE_UNAVAILABLE,
            REQUEST_TIMEOUT,
        ))
        .with_state(broker)
}

async fn not_found() -> ApiError {
    ApiError::new(
        ErrorCode::NotFound,
        "no such path in the deskbroker API (see /openapi.json)",
    )
}

/// Who may call what: the admin token (compared in constant time) may
/// call everything; a host credential only its own host's heartbeat and
/// `GET` of that host.
async fn authenticate(
    axum::extract::State(broker): axum::extract::State<Arc<Broker>>,
    req: Request,
    next: Next,
) -> Result<Response, ApiError> {
    let header = req
        .headers()
        .get(axum::http::header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok());
    let Some(token) = header.and_then(|h| h.strip_prefix("Bearer ")) else {
        return Err(ApiError::unauthorized(
            "missing Authorization: Bearer TOKEN header (the admin token is in \
             DATA_DIR/admin.token or DESKBROKER_ADMIN_TOKEN)",
        ));
    };
    let (pool, host) = match broker.caller(token) {
        Some(Caller::Admin) => return Ok(next.run(req).await),
        Some(Caller::Host { pool, host }) => (pool, host),
        None => return Err(ApiError::unauthorized("the bearer token is not valid")),
    };
    let path = req.uri().path();
    let path = path.strip_prefix("/api/v1").unwrap_or(path);
    let own = format!("/hostPools/{pool}/sessionHosts/{host}");
    let allowed = (req.method() == axum::http::Method::GET && path == own)
        || (req.method() == axum::http::Method::POST && path == format!("{own}/heartbeat"));
    if !allowed {
        return Err(ApiError::forbidden(format!(
            "a host credential only allows heartbeats and reading its own session host \
                 ({pool}/{host})"
        )));
    }
    Ok(next.run(req).await)
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
