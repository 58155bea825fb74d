//! Conformance cases for what the broker keeps outside any pool: API
//! credentials and its signing keys.

use super::Opener;
use crate::{ApiCredential, Mutation};

/// Rule T1: API credentials survive a reopen, a put replaces one by name,
/// a delete revokes it, and they do not depend on any pool.
pub async fn api_credentials_are_kept_replaced_and_revoked(open: Opener<'_>) {
    let cred = |name: &str, role: &str, pools: &[&str], expires_ms: Option<i64>| ApiCredential {
        name: name.into(),
        role: role.into(),
        host_pools: pools.iter().map(|p| p.to_string()).collect(),
        expires_ms,
        hash: format!("hash-of-{name}-{role}"),
        // Some credentials carry their own rate limit (T4); it is kept.
        rate_limit_per_second: (role == "portal").then_some(250),
    };
    let store = open("api-credentials");
    let put = |c: ApiCredential| Mutation::PutApiCredential { credential: c };
    store
        .apply(
            vec![
                put(cred("zeta", "reader", &[], None)),
                put(cred("alpha", "operator", &["p1", "p2"], Some(7))),
                put(cred("gone", "admin", &[], None)),
            ]
            .into(),
        )
        .await
        .expect("apply");
    store
        .apply(
            vec![
                put(cred("zeta", "portal", &["p3"], Some(9))),
                Mutation::DeleteApiCredential {
                    name: "gone".into(),
                },
            ]
            .into(),
        )
        .await
        .expect("apply");
    drop(store);
    let snap = open("api-credentials").load().await.expect("load");
    assert_eq!(
        snap.credentials,
        [
            cred("alpha", "operator", &["p1", "p2"], Some(7)),
            cred("zeta", "portal", &["p3"], Some(9)),
        ],
        "api_credentials_are_kept_replaced_and_revoked"
    );
    assert!(
        snap.pools.is_empty(),
        "api_credentials_are_kept_replaced_and_revoked: no pools"
    );
}

/// Rules T3 and R3: the broker's signing keys are absent until put, come
/// back after a reopen, and a rotation replaces the whole set.
pub async fn signing_keys_are_kept_and_replaced(open: Opener<'_>) {
    use crate::{SigningKey, SigningKeys};
    let store = open("signing");
    assert_eq!(store.load().await.expect("load").signing_keys, None);
    let first = SigningKey {
        secret: "ab".repeat(32),
        created_ms: 1_000,
        retired_ms: None,
    };
    let one = SigningKeys {
        keys: vec![first.clone()],
    };
    store
        .apply(vec![Mutation::PutSigningKeys { keys: one.clone() }].into())
        .await
        .expect("put keys");
    drop(store);
    let store = open("signing");
    assert_eq!(store.load().await.expect("load").signing_keys, Some(one));
    let rotated = SigningKeys {
        keys: vec![
            SigningKey {
                secret: "cd".repeat(32),
                created_ms: 2_000,
                retired_ms: None,
            },
            SigningKey {
                retired_ms: Some(2_000),
                ..first
            },
        ],
    };
    store
        .apply(
            vec![Mutation::PutSigningKeys {
                keys: rotated.clone(),
            }]
            .into(),
        )
        .await
        .expect("rotate keys");
    drop(store);
    assert_eq!(
        open("signing").load().await.expect("load").signing_keys,
        Some(rotated)
    );
}
