//! Rule T1: API credentials with roles, checked against every route of
//! the OpenAPI document with expectations drawn from the one
//! authorization table (`broker::access`); pool limits, revocation at
//! once, credentials kept across a restart, expiry to the millisecond.
//! Each attack is shown refused, then the broker shown still serving the
//! others.

use std::time::Duration;

use broker::access::{Role, Scope, lookup};
use broker::testkit::{ADMIN_TOKEN, Kit};
use serde_json::{Value, json};

/// A new credential, checked as the API answers it: its role and a token
/// of the documented shape.
async fn credential(kit: &Kit, name: &str, role: &str, pools: &[&str]) -> String {
    let token = kit.credential(name, role, pools).await;
    assert!(
        token.starts_with("dbc_") && token.len() == 4 + 64,
        "{token}"
    );
    token
}

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

/// Every `(method, route)` of the OpenAPI document that is not public.
async fn guarded_routes(kit: &Kit) -> Vec<(String, String)> {
    let (status, doc) = kit.call_as(None, "GET", "/openapi.json", None).await;
    assert_eq!(status, 200);
    let mut out = Vec::new();
    for (route, item) in doc["paths"].as_object().expect("paths") {
        for method in ["get", "put", "post", "patch", "delete"] {
            if item.get(method).is_none() {
                continue;
            }
            let method = method.to_uppercase();
            let rule = lookup(&method, route)
                .unwrap_or_else(|| panic!("{method} {route} has no entry in the table"));
            if rule.scope != Scope::Public {
                out.push((method, route.clone()));
            }
        }
    }
    out
}

/// A body for `method`: none for reads and removals, one no handler
/// accepts otherwise.
fn junk_body(method: &str) -> Option<Value> {
    (method != "GET" && method != "DELETE").then(|| json!({"no": 1}))
}

#[tokio::test(start_paused = true)]
async fn every_role_against_every_endpoint_follows_the_table() {
    let kit = Kit::open().await;
    kit.pool_with_hosts("p", "BreadthFirst", 5, 1).await;
    let mut tokens = vec![(Role::Admin, ADMIN_TOKEN.to_string())];
    for role in Role::ALL {
        let t = credential(&kit, &format!("c-{}", role.as_str()), role.as_str(), &[]).await;
        tokens.push((role, t));
    }
    let routes = guarded_routes(&kit).await;
    let mut checked = 0;
    for (method, route) in &routes {
        let rule = lookup(method, route).expect("entry");
        for (role, token) in &tokens {
            let (status, v) = kit
                .call_as(Some(token), method, &concrete(route), junk_body(method))
                .await;
            if rule.roles.contains(role) {
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
    assert!(checked >= 5 * 20, "only {checked} calls were checked");

    // A host credential, against every route naming its own pool and
    // host: only the routes the table gives to its own host are not 403.
    let host_token = kit.register_host("p", "agent1", "10.1.0.1:3389").await;
    for (method, route) in &routes {
        let rule = lookup(method, route).expect("entry");
        let path = route
            .replace("{pool}", "p")
            .replace("{host}", "agent1")
            .replace("{id}", "ghost")
            .replace("{name}", "ghost");
        let (status, v) = kit
            .call_as(Some(&host_token), method, &path, junk_body(method))
            .await;
        if rule.own_host {
            assert!(![401, 403].contains(&status), "host {method} {route}: {v}");
        } else {
            assert_eq!(status, 403, "host {method} {route}: {v}");
        }
    }
    assert_eq!(kit.host("p", "agent1").await["address"], "10.1.0.1:3389");

    let token = |wanted: Role| {
        tokens
            .iter()
            .skip(1)
            .find(|(r, _)| *r == wanted)
            .map(|(_, t)| t.clone())
            .expect("a credential of each role")
    };
    let (reader, portal, operator) = (
        token(Role::Reader),
        token(Role::Portal),
        token(Role::Operator),
    );
    // /metrics is not in the document: reader yes, portal no.
    assert_eq!(
        kit.call_as(Some(&reader), "GET", "/metrics", None).await.0,
        200
    );
    assert_eq!(
        kit.call_as(Some(&portal), "GET", "/metrics", None).await.0,
        403
    );
    // A refused change changes nothing: the reader cannot delete p, and p
    // still serves (the portal connects a user there).
    let (status, _) = kit
        .call_as(Some(&reader), "DELETE", "/api/v1/hostPools/p", None)
        .await;
    assert_eq!(status, 403);
    let (status, v) = kit
        .call_as(
            Some(&portal),
            "POST",
            "/api/v1/hostPools/p/connect",
            Some(json!({"user": "alice@contoso.com"})),
        )
        .await;
    assert_eq!(status, 200, "{v}");
    // No credential but the admin's manages credentials, and the list has
    // no secrets.
    let (status, _) = kit
        .call_as(
            Some(&operator),
            "POST",
            "/api/v1/credentials",
            Some(json!({"name": "mine", "role": "admin"})),
        )
        .await;
    assert_eq!(status, 403);
    let list = kit.ok("GET", "/api/v1/credentials", None, 200).await;
    let text = list.to_string();
    assert!(!text.contains("dbc_") && !text.contains("token"), "{text}");
    assert_eq!(
        list["value"].as_array().map(Vec::len),
        Some(Role::ALL.len()),
        "{list}"
    );
}

#[tokio::test(start_paused = true)]
async fn operators_drain_but_do_not_reconfigure_hosts() {
    let kit = Kit::open().await;
    kit.pool_with_hosts("p", "BreadthFirst", 5, 1).await;
    let op = credential(&kit, "helpdesk", "operator", &[]).await;
    let host = "/api/v1/hostPools/p/sessionHosts/h1";
    let (status, v) = kit
        .call_as(
            Some(&op),
            "PATCH",
            host,
            Some(json!({"address": "10.9.9.9:3389"})),
        )
        .await;
    assert_eq!(status, 403, "{v}");
    assert!(
        v["error"]["message"]
            .as_str()
            .unwrap_or_default()
            .contains("admin"),
        "{v}"
    );
    assert_eq!(kit.host("p", "h1").await["address"], "10.0.0.1:3389");
    let (status, v) = kit
        .call_as(
            Some(&op),
            "PATCH",
            host,
            Some(json!({"allowNewSession": false})),
        )
        .await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(v["allowNewSession"], false, "{v}");
}

#[tokio::test(start_paused = true)]
async fn a_credential_limited_to_some_pools_sees_and_acts_only_on_those() {
    let kit = Kit::open().await;
    kit.pool_with_hosts("a", "BreadthFirst", 5, 1).await;
    kit.pool_with_hosts("b", "BreadthFirst", 5, 1).await;
    let portal = credential(&kit, "portal-a", "portal", &["a"]).await;
    let (status, v) = kit
        .call_as(Some(&portal), "GET", "/api/v1/hostPools", None)
        .await;
    assert_eq!(status, 200);
    let names: Vec<&str> = v["value"]
        .as_array()
        .expect("list")
        .iter()
        .filter_map(|p| p["name"].as_str())
        .collect();
    assert_eq!(names, ["a"], "{v}");
    let connect = |pool: &str| format!("/api/v1/hostPools/{pool}/connect");
    let bob = json!({"user": "bob@contoso.com"});
    let (status, v) = kit
        .call_as(Some(&portal), "POST", &connect("b"), Some(bob.clone()))
        .await;
    assert_eq!(status, 403, "{v}");
    // A name spelt with a percent escape is the same pool, both ways.
    let (status, _) = kit
        .call_as(Some(&portal), "GET", "/api/v1/hostPools/%62", None)
        .await;
    assert_eq!(status, 403);
    let (status, v) = kit
        .call_as(Some(&portal), "GET", "/api/v1/hostPools/%61", None)
        .await;
    assert_eq!((status, &v["name"]), (200, &json!("a")), "{v}");
    let (status, _) = kit.call_as(Some(&portal), "GET", "/metrics", None).await;
    assert_eq!(status, 403);
    assert!(kit.sessions("b").await.is_empty(), "nothing placed in b");
    let (status, v) = kit
        .call_as(Some(&portal), "POST", &connect("a"), Some(bob))
        .await;
    assert_eq!(status, 200, "{v}");
}

/// Revocation takes effect at once, and credentials survive a restart (the
/// kit's, as after `kill -9`).
#[tokio::test(start_paused = true)]
async fn revocation_takes_effect_at_once_and_credentials_survive_a_restart() {
    let mut kit = Kit::open().await;
    kit.pool_with_hosts("p", "BreadthFirst", 5, 1).await;
    let kept = credential(&kit, "kept", "reader", &["p"]).await;
    let gone = credential(&kit, "gone", "reader", &[]).await;
    let pool = "/api/v1/hostPools/p";
    assert_eq!(kit.call_as(Some(&gone), "GET", pool, None).await.0, 200);
    kit.ok("DELETE", "/api/v1/credentials/gone", None, 204)
        .await;
    let (status, v) = kit.call_as(Some(&gone), "GET", pool, None).await;
    assert_eq!((status, &v["error"]["code"]), (401, &json!("Unauthorized")));
    kit.refused("DELETE", "/api/v1/credentials/gone", None, 404, "NotFound")
        .await;
    // A name taken is 409; a role that does not exist is 400.
    kit.refused(
        "POST",
        "/api/v1/credentials",
        Some(json!({"name": "kept", "role": "reader"})),
        409,
        "Conflict",
    )
    .await;
    kit.refused(
        "POST",
        "/api/v1/credentials",
        Some(json!({"name": "x", "role": "root"})),
        400,
        "InvalidParameter",
    )
    .await;

    kit.reopen().await;
    let (status, v) = kit.call_as(Some(&kept), "GET", pool, None).await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(kit.call_as(Some(&gone), "GET", pool, None).await.0, 401);
    let list = kit.ok("GET", "/api/v1/credentials", None, 200).await;
    assert_eq!(
        list["value"],
        json!([{"name": "kept", "role": "reader", "hostPools": ["p"], "expirationTime": null}])
    );
}

/// A credential of one second works until its second is over, and from then
/// on is refused as expired.
#[tokio::test(start_paused = true)]
async fn an_expired_credential_is_refused_from_its_expiry_on() {
    let kit = Kit::open().await;
    let v = kit
        .ok(
            "POST",
            "/api/v1/credentials",
            Some(json!({"name": "brief", "role": "reader", "expiresInSeconds": 1})),
            201,
        )
        .await;
    assert_eq!(v["expirationTime"], "2026-12-01T00:00:01Z", "{v}");
    let token = v["token"].as_str().expect("token").to_string();
    let list = "/api/v1/hostPools";
    kit.advance(Duration::from_millis(999)).await;
    let (status, v) = kit.call_as(Some(&token), "GET", list, None).await;
    assert_eq!(status, 200, "alive a millisecond before its expiry: {v}");
    kit.advance(Duration::from_millis(1)).await;
    let (status, v) = kit.call_as(Some(&token), "GET", list, None).await;
    assert_eq!(status, 401, "{v}");
    assert!(
        v["error"]["message"]
            .as_str()
            .unwrap_or("")
            .contains("expired"),
        "{v}"
    );
    kit.ok("GET", list, None, 200).await;
}

#[tokio::test(start_paused = true)]
async fn only_an_admin_steers_a_placement_with_exclude() {
    let kit = Kit::open().await;
    kit.pool_with_hosts("p", "DepthFirst", 10, 3).await;
    let portal = credential(&kit, "portal1", "portal", &[]).await;
    let connect = "/api/v1/hostPools/p/connect";
    let steer = json!({"user": "mallory@contoso.com", "exclude": ["h1", "h2"]});
    let (status, v) = kit
        .call_as(Some(&portal), "POST", connect, Some(steer))
        .await;
    assert_eq!(
        (status, v["error"]["code"].as_str()),
        (403, Some("Forbidden")),
        "{v}"
    );
    assert!(kit.sessions("p").await.is_empty(), "nothing was placed");
    // Without exclude the portal places as the rules say.
    let (status, v) = kit
        .call_as(
            Some(&portal),
            "POST",
            connect,
            Some(json!({"user": "mallory@contoso.com"})),
        )
        .await;
    assert_eq!(
        (status, v["sessionHost"].as_str()),
        (200, Some("h1")),
        "{v}"
    );
    // The admin may exclude (the stand-alone front door's retries).
    let v = kit
        .ok(
            "POST",
            connect,
            Some(json!({"user": "trent@contoso.com", "exclude": ["h1"]})),
            200,
        )
        .await;
    assert_eq!(v["sessionHost"], "h2", "{v}");
}
