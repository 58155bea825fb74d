//! `POST /api/v1/signingKeys/rotate` and `POST /api/v1/signingKeys/revoke`:
//! a new signing key for connection tickets and redirection tokens (rules
//! T3, R3; see `crate::keys`), keeping the previous keys for the tickets
//! already out, or revoking them.

use std::sync::Arc;

use axum::extract::State;

use api::ErrorBody;
use api::types::SigningKeysOutput;

use super::error::ApiError;
use crate::state::Broker;

/// Makes a new signing key. Tickets issued from now on are signed with
/// it; those signed with the keys it replaces keep working until they
/// expire (the replaced keys verify for a ticket's longest lifetime).
/// Only the admin may; the rotation is in the audit log.
#[utoipa::path(post, path = "/api/v1/signingKeys/rotate", tag = "credentials",
    responses((status = 200, body = SigningKeysOutput), (status = 403, body = ErrorBody),
              (status = 503, body = ErrorBody)))]
pub async fn rotate(
    State(b): State<Arc<Broker>>,
) -> Result<axum::Json<SigningKeysOutput>, ApiError> {
    b.rotate_signing_keys(false).await?;
    Ok(axum::Json(output(&b)))
}

/// Makes a new signing key and revokes every other one at once: tickets
/// and redirection tokens signed before stop working now (their users
/// fetch new tickets). For a key that may have leaked: a store backup,
/// a database dump, a copy of the data directory. Only the admin may;
/// the revocation is in the audit log as this route.
#[utoipa::path(post, path = "/api/v1/signingKeys/revoke", tag = "credentials",
    responses((status = 200, body = SigningKeysOutput), (status = 403, body = ErrorBody),
              (status = 503, body = ErrorBody)))]
pub async fn revoke(
    State(b): State<Arc<Broker>>,
) -> Result<axum::Json<SigningKeysOutput>, ApiError> {
    b.rotate_signing_keys(true).await?;
    Ok(axum::Json(output(&b)))
}

fn output(b: &Broker) -> SigningKeysOutput {
    let (verifying_keys, created_ms) = b.keys().summary();
    SigningKeysOutput {
        signing_key_created: api::types::rfc3339_ms(created_ms),
        verifying_keys,
        retired_keys_verify_seconds: (crate::keys::RETIRED_KEY_KEPT_MS / 1000) as u64,
    }
}
