//! Rule T1 end to end against the real binary: API credentials with roles,
//! checked against every route of the OpenAPI document with expectations
//! generated from the one authorization table (`broker::access`); pool
//! limits, revocation at once, durability across kill -9, expiry, and the
//! `deskbroker credential` commands. Each attack is shown refused, then the
//! service shown still serving the others.

use std::time::Duration;

use broker::access::{Role, Scope, lookup};
use serde_json::{Value, json};

use crate::{App, credential, eventually, pool_with_hosts};

/// A concrete path for a route pattern: every name is one that does not
/// exist, so an allowed call is refused by the handler (400 for the body,
/// 404 for the name) and changes nothing, while a forbidden one is 403
/// before any handler runs.
fn concrete(route: &str) -> String {
    route
        .replace("{pool}", "ghost")
        .replace("{host}", "ghost")
        .replace("{id}", "ghost")
        .replace("{name}", "ghost")
}

#[tokio::test]
async fn every_role_against_every_endpoint_follows_the_table() {
    let dir = tempfile::tempdir().expect("tempdir");
    let app = App::spawn(&dir);
    pool_with_hosts(&app, "p", "BreadthFirst", 5, 1).await;
    let mut tokens = vec![(Role::Admin, crate::TOKEN.to_string())];
    for role in Role::ALL {
        let t = credential(&app, &format!("c-{}", role.as_str()), role.as_str(), &[]).await;
        tokens.push((role, t));
    }
    let (status, doc) = app.call_with("GET", "/openapi.json", None, None).await;
    assert_eq!(status, 200);
    let paths = doc["paths"].as_object().expect("paths");
    let mut checked = 0;
    for (route, item) in paths {
        for method in ["get", "put", "post", "patch", "delete"] {
            if item.get(method).is_none() {
                continue;
            }
            let method = method.to_uppercase();
            let rule = lookup(&method, route)
                .unwrap_or_else(|| panic!("{method} {route} has no entry in the table"));
            if rule.scope == Scope::Public {
                continue;
            }
            for (role, token) in &tokens {
                let body = (method != "GET" && method != "DELETE").then(|| json!({"no": 1}));
                let (status, v) = app
                    .call_with(&method, &concrete(route), body, Some(token))
                    .await;
                let allowed = rule.roles.contains(role);
                if allowed {
                    assert_ne!(status, 403, "{role:?} {method} {route}: {v}");
                    assert_ne!(status, 401, "{role:?} {method} {route}: {v}");
                } else {
                    assert_eq!(status, 403, "{role:?} {method} {route}: {v}");
                    assert_eq!(v["error"]["code"], "Forbidden", "{v}");
                    let message = v["error"]["message"].as_str().unwrap_or_default();
                    assert!(
                        message.contains("needs the") && message.contains("admin"),
                        "{message}"
                    );
                }
                checked += 1;
            }
        }
    }
    assert!(checked >= 5 * 20, "only {checked} calls were checked");
    // A host credential, against every route naming its own pool and host:
    // only the routes the table gives to its own host are not 403.
    let t = app
        .ok(
            "POST",
            "/api/v1/hostPools/p/registrationToken",
            Some(json!({})),
            200,
        )
        .await;
    let (status, v) = app
        .call_with(
            "POST",
            "/api/v1/register",
            Some(
                json!({"token": t["token"], "hostPool": "p", "name": "agent1",
                        "address": "10.1.0.1:3389"}),
            ),
            None,
        )
        .await;
    assert_eq!(status, 201, "{v}");
    let host_token = v["hostCredential"]
        .as_str()
        .expect("credential")
        .to_string();
    for (route, item) in paths {
        for method in ["get", "put", "post", "patch", "delete"] {
            if item.get(method).is_none() {
                continue;
            }
            let method = method.to_uppercase();
            let rule = lookup(&method, route).expect("entry");
            if rule.scope == Scope::Public {
                continue;
            }
            let path = route
                .replace("{pool}", "p")
                .replace("{host}", "agent1")
                .replace("{id}", "ghost")
                .replace("{name}", "ghost");
            let body = (method != "GET" && method != "DELETE").then(|| json!({"no": 1}));
            let (status, v) = app.call_with(&method, &path, body, Some(&host_token)).await;
            if rule.own_host {
                assert!(![401, 403].contains(&status), "host {method} {route}: {v}");
            } else {
                assert_eq!(status, 403, "host {method} {route}: {v}");
            }
        }
    }
    let h = app
        .ok("GET", "/api/v1/hostPools/p/sessionHosts/agent1", None, 200)
        .await;
    assert_eq!(h["address"], "10.1.0.1:3389", "{h}");
    // /metrics is not in the document: reader yes, portal no.
    let reader = &tokens[3].1;
    let portal = &tokens[4].1;
    assert_eq!(tokens[3].0, Role::Reader);
    assert_eq!(
        app.call_with("GET", "/metrics", None, Some(reader)).await.0,
        200
    );
    assert_eq!(
        app.call_with("GET", "/metrics", None, Some(portal)).await.0,
        403
    );
    // A refused change changes nothing: the reader cannot delete p, and p
    // still serves (the portal connects a user there).
    let (status, _) = app
        .call_with("DELETE", "/api/v1/hostPools/p", None, Some(reader))
        .await;
    assert_eq!(status, 403);
    let (status, v) = app
        .call_with(
            "POST",
            "/api/v1/hostPools/p/connect",
            Some(json!({"user": "alice@contoso.com"})),
            Some(portal),
        )
        .await;
    assert_eq!(status, 200, "{v}");
    // No credential but the admin's manages credentials, and the list has
    // no secrets.
    let operator = &tokens[2].1;
    let (status, _) = app
        .call_with(
            "POST",
            "/api/v1/credentials",
            Some(json!({"name": "mine", "role": "admin"})),
            Some(operator),
        )
        .await;
    assert_eq!(status, 403);
    let list = app.ok("GET", "/api/v1/credentials", None, 200).await;
    let text = list.to_string();
    assert!(!text.contains("dbc_") && !text.contains("token"), "{text}");
    assert_eq!(
        list["value"].as_array().map(Vec::len),
        Some(Role::ALL.len()),
        "{list}"
    );
}

#[tokio::test]
async fn operators_drain_but_do_not_reconfigure_hosts() {
    let dir = tempfile::tempdir().expect("tempdir");
    let app = App::spawn(&dir);
    pool_with_hosts(&app, "p", "BreadthFirst", 5, 1).await;
    let op = credential(&app, "helpdesk", "operator", &[]).await;
    let host = "/api/v1/hostPools/p/sessionHosts/h1";
    let (status, v) = app
        .call_with(
            "PATCH",
            host,
            Some(json!({"address": "10.9.9.9:3389"})),
            Some(&op),
        )
        .await;
    assert_eq!(status, 403, "{v}");
    assert!(
        v["error"]["message"]
            .as_str()
            .unwrap_or_default()
            .contains("admin")
    );
    let h = app.ok("GET", host, None, 200).await;
    assert_eq!(h["address"], "10.0.0.1:3389", "{h}");
    let (status, v) = app
        .call_with(
            "PATCH",
            host,
            Some(json!({"allowNewSession": false})),
            Some(&op),
        )
        .await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(v["allowNewSession"], false, "{v}");
}

#[tokio::test]
async fn a_credential_limited_to_some_pools_sees_and_acts_only_on_those() {
    let dir = tempfile::tempdir().expect("tempdir");
    let app = App::spawn(&dir);
    pool_with_hosts(&app, "a", "BreadthFirst", 5, 1).await;
    pool_with_hosts(&app, "b", "BreadthFirst", 5, 1).await;
    let portal = credential(&app, "portal-a", "portal", &["a"]).await;
    let (status, v) = app
        .call_with("GET", "/api/v1/hostPools", None, Some(&portal))
        .await;
    assert_eq!(status, 200);
    let names: Vec<&str> = v["value"]
        .as_array()
        .expect("list")
        .iter()
        .filter_map(|p| p["name"].as_str())
        .collect();
    assert_eq!(names, ["a"], "{v}");
    let connect = |pool: &str| {
        (
            format!("/api/v1/hostPools/{pool}/connect"),
            Some(json!({"user": "bob@contoso.com"})),
        )
    };
    let (path, body) = connect("b");
    let (status, v) = app.call_with("POST", &path, body, Some(&portal)).await;
    assert_eq!(status, 403, "{v}");
    // A name spelt with a percent escape is the same pool, both ways.
    let (status, _) = app
        .call_with("GET", "/api/v1/hostPools/%62", None, Some(&portal))
        .await;
    assert_eq!(status, 403);
    let (status, v) = app
        .call_with("GET", "/api/v1/hostPools/%61", None, Some(&portal))
        .await;
    assert_eq!((status, &v["name"]), (200, &json!("a")), "{v}");
    let (status, _) = app.call_with("GET", "/metrics", None, Some(&portal)).await;
    assert_eq!(status, 403);
    let sessions = app
        .ok("GET", "/api/v1/hostPools/b/userSessions", None, 200)
        .await;
    assert_eq!(sessions["value"].as_array().map(Vec::len), Some(0));
    let (path, body) = connect("a");
    let (status, v) = app.call_with("POST", &path, body, Some(&portal)).await;
    assert_eq!(status, 200, "{v}");
}

#[tokio::test]
async fn revocation_takes_effect_at_once_and_credentials_survive_kill_9() {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path().join("data");
    let app = App::spawn_on(&data);
    pool_with_hosts(&app, "p", "BreadthFirst", 5, 1).await;
    let kept = credential(&app, "kept", "reader", &["p"]).await;
    let gone = credential(&app, "gone", "reader", &[]).await;
    let (status, _) = app
        .call_with("GET", "/api/v1/hostPools/p", None, Some(&gone))
        .await;
    assert_eq!(status, 200);
    app.ok("DELETE", "/api/v1/credentials/gone", None, 204)
        .await;
    let (status, v) = app
        .call_with("GET", "/api/v1/hostPools/p", None, Some(&gone))
        .await;
    assert_eq!((status, &v["error"]["code"]), (401, &json!("Unauthorized")));
    app.refused("DELETE", "/api/v1/credentials/gone", None, 404, "NotFound")
        .await;
    // A name taken is 409; a role that does not exist is 400.
    app.refused(
        "POST",
        "/api/v1/credentials",
        Some(json!({"name": "kept", "role": "reader"})),
        409,
        "Conflict",
    )
    .await;
    app.refused(
        "POST",
        "/api/v1/credentials",
        Some(json!({"name": "x", "role": "root"})),
        400,
        "InvalidParameter",
    )
    .await;
    app.kill9();
    let app = App::spawn_on(&data);
    let (status, v) = app
        .call_with("GET", "/api/v1/hostPools/p", None, Some(&kept))
        .await;
    assert_eq!(status, 200, "{v}");
    let (status, _) = app
        .call_with("GET", "/api/v1/hostPools/p", None, Some(&gone))
        .await;
    assert_eq!(status, 401);
    let list = app.ok("GET", "/api/v1/credentials", None, 200).await;
    assert_eq!(
        list["value"],
        json!([{"name": "kept", "role": "reader", "hostPools": ["p"], "expirationTime": null}])
    );
}

#[tokio::test]
async fn an_expired_credential_is_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let app = App::spawn(&dir);
    let v = app
        .ok(
            "POST",
            "/api/v1/credentials",
            Some(json!({"name": "brief", "role": "reader", "expiresInSeconds": 1})),
            201,
        )
        .await;
    assert!(v["expirationTime"].is_string(), "{v}");
    let token = v["token"].as_str().expect("token").to_string();
    let expired = eventually(Duration::from_secs(20), || {
        let (app, token) = (&app, &token);
        async move {
            let (status, v): (u16, Value) = app
                .call_with("GET", "/api/v1/hostPools", None, Some(token))
                .await;
            status == 401
                && v["error"]["message"]
                    .as_str()
                    .unwrap_or("")
                    .contains("expired")
        }
    })
    .await;
    assert!(expired, "the credential still works after its life");
    app.ok("GET", "/api/v1/hostPools", None, 200).await;
}

#[tokio::test]
async fn the_credential_commands_create_list_and_revoke() {
    let dir = tempfile::tempdir().expect("tempdir");
    let app = App::spawn(&dir);
    pool_with_hosts(&app, "a", "BreadthFirst", 5, 0).await;
    let (ok, out, err) = app.cli(&[
        "credential",
        "create",
        "--name",
        "cli-reader",
        "--role",
        "reader",
        "--host-pools",
        "a,b",
        "--expires-in",
        "30d",
        "-o",
        "json",
    ]);
    assert!(ok, "{err}");
    let created: Value = serde_json::from_str(&out).expect("json");
    assert_eq!(created["hostPools"], json!(["a", "b"]), "{created}");
    let token = created["token"].as_str().expect("token").to_string();
    let (status, _) = app
        .call_with("GET", "/api/v1/hostPools/a", None, Some(&token))
        .await;
    assert_eq!(status, 200);
    let (ok, out, err) = app.cli(&["credential", "list", "-o", "json"]);
    assert!(ok, "{err}");
    assert!(out.contains("cli-reader") && !out.contains("dbc_"), "{out}");
    let (ok, _, err) = app.cli(&["credential", "revoke", "--name", "cli-reader"]);
    assert!(ok, "{err}");
    let (status, _) = app
        .call_with("GET", "/api/v1/hostPools/a", None, Some(&token))
        .await;
    assert_eq!(status, 401);
    let (ok, _, err) = app.cli(&["credential", "create", "--name", "n", "--role", "root"]);
    assert!(!ok && err.contains("role"), "{err}");
}

/// A portal places users but cannot steer a placement with `exclude` (the
/// front door's R5 retries, admin only): excluding every host but one is
/// 403 and makes nothing; the admin (the stand-alone front door) may.
#[tokio::test]
async fn only_an_admin_steers_a_placement_with_exclude() {
    let dir = tempfile::tempdir().unwrap();
    let app = App::spawn(&dir);
    pool_with_hosts(&app, "p", "DepthFirst", 10, 3).await;
    let portal = credential(&app, "portal1", "portal", &[]).await;
    let steer = json!({"user": "mallory@contoso.com", "exclude": ["h1", "h2"]});
    let (status, v) = app
        .call_with(
            "POST",
            "/api/v1/hostPools/p/connect",
            Some(steer.clone()),
            Some(&portal),
        )
        .await;
    assert_eq!(
        (status, v["error"]["code"].as_str()),
        (403, Some("Forbidden")),
        "{v}"
    );
    let sessions = app
        .ok("GET", "/api/v1/hostPools/p/userSessions", None, 200)
        .await;
    assert_eq!(sessions["value"], json!([]), "nothing was placed");
    // Without exclude the portal places as the rules say.
    let (status, v) = app
        .call_with(
            "POST",
            "/api/v1/hostPools/p/connect",
            Some(json!({"user": "mallory@contoso.com"})),
            Some(&portal),
        )
        .await;
    assert_eq!(
        (status, v["sessionHost"].as_str()),
        (200, Some("h1")),
        "{v}"
    );
    // The admin may exclude (R5 retries of the stand-alone front door).
    let v = app
        .ok(
            "POST",
            "/api/v1/hostPools/p/connect",
            Some(json!({"user": "trent@contoso.com", "exclude": ["h1"]})),
            200,
        )
        .await;
    assert_eq!(v["sessionHost"], "h2", "{v}");
}
