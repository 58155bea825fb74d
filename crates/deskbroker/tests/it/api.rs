//! The HTTP API through the real binary: bad input, concurrency, service
//! endpoints. The rules that depend on time (S4's pending timeout, S7's
//! heartbeat loss) are proved in process, in the broker's `rules` tests.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use serde_json::{Value, json};

use crate::{App, TOKEN, pool_with_hosts};

/// Everything the broker holds about a pool, to check nothing changed.
async fn state(app: &App, pool: &str) -> (Value, Value, Value) {
    (
        app.ok("GET", &format!("/api/v1/hostPools/{pool}"), None, 200)
            .await,
        app.ok(
            "GET",
            &format!("/api/v1/hostPools/{pool}/sessionHosts"),
            None,
            200,
        )
        .await,
        app.ok(
            "GET",
            &format!("/api/v1/hostPools/{pool}/userSessions"),
            None,
            200,
        )
        .await,
    )
}

/// (method, path, raw body, token, expected status, expected code, text the message must hold)
type Case<'a> = (
    &'a str,
    &'a str,
    &'a str,
    Option<&'a str>,
    u16,
    &'a str,
    &'a str,
);

#[tokio::test]
async fn bad_input_is_refused_whole_with_the_error_shape() {
    let dir = tempfile::tempdir().unwrap();
    let app = App::spawn(&dir);
    pool_with_hosts(&app, "p", "BreadthFirst", 10, 2).await;
    app.ok(
        "POST",
        "/api/v1/hostPools/p/connect",
        Some(json!({"user": "alice"})),
        200,
    )
    .await;
    let before = state(&app, "p").await;

    let cases: &[Case] = &[
        (
            "PATCH",
            "/api/v1/hostPools/p",
            "{\"maxSessionLimit\": ",
            Some(TOKEN),
            400,
            "InvalidParameter",
            "not valid JSON",
        ),
        (
            "PATCH",
            "/api/v1/hostPools/p",
            "{\"loadBalancerType\": \"Fastest\"}",
            Some(TOKEN),
            400,
            "InvalidParameter",
            "unknown variant",
        ),
        (
            "PATCH",
            "/api/v1/hostPools/p",
            "{\"maxSessionLimit\": 1000000}",
            Some(TOKEN),
            400,
            "InvalidParameter",
            "maxSessionLimit",
        ),
        (
            "PATCH",
            "/api/v1/hostPools/p",
            "{\"maxSessionLimit\": -1}",
            Some(TOKEN),
            400,
            "InvalidParameter",
            "maxSessionLimit",
        ),
        (
            "PATCH",
            "/api/v1/hostPools/p",
            "{\"maxSesionLimit\": 5}",
            Some(TOKEN),
            400,
            "InvalidParameter",
            "maxSesionLimit",
        ),
        (
            "PATCH",
            "/api/v1/hostPools/p",
            "{\"loadBalancerType\": \"Persistent\"}",
            Some(TOKEN),
            400,
            "InvalidParameter",
            "Persistent",
        ),
        (
            "PATCH",
            "/api/v1/hostPools/p",
            "{\"pendingTimeoutSeconds\": 0}",
            Some(TOKEN),
            400,
            "InvalidParameter",
            "pendingTimeoutSeconds",
        ),
        (
            "PUT",
            "/api/v1/hostPools/q",
            "{\"loadBalancerType\": \"DepthFirst\"}",
            Some(TOKEN),
            400,
            "InvalidParameter",
            "hostPoolType",
        ),
        (
            "PUT",
            "/api/v1/hostPools/bad%20name",
            "{\"hostPoolType\": \"Pooled\", \"loadBalancerType\": \"DepthFirst\"}",
            Some(TOKEN),
            400,
            "InvalidParameter",
            "name",
        ),
        (
            "PATCH",
            "/api/v1/hostPools/nope",
            "{\"maxSessionLimit\": 5}",
            Some(TOKEN),
            404,
            "HostPoolNotFound",
            "nope",
        ),
        (
            "POST",
            "/api/v1/hostPools/nope/connect",
            "{\"user\": \"bob\"}",
            Some(TOKEN),
            404,
            "HostPoolNotFound",
            "nope",
        ),
        (
            "PATCH",
            "/api/v1/hostPools/p/sessionHosts/h9",
            "{\"allowNewSession\": false}",
            Some(TOKEN),
            404,
            "SessionHostNotFound",
            "h9",
        ),
        (
            "PUT",
            "/api/v1/hostPools/p/sessionHosts/h3",
            "{\"address\": \"no-port\"}",
            Some(TOKEN),
            400,
            "InvalidParameter",
            "address",
        ),
        (
            "PUT",
            "/api/v1/hostPools/p/sessionHosts/h3",
            "{\"address\": \"10.0.0.3:3389\", \"assignedUser\": \"bob\"}",
            Some(TOKEN),
            400,
            "InvalidParameter",
            "assignedUser",
        ),
        (
            "POST",
            "/api/v1/hostPools/p/connect",
            "{\"user\": \"\"}",
            Some(TOKEN),
            400,
            "InvalidParameter",
            "user",
        ),
        (
            "POST",
            "/api/v1/hostPools/p/connect",
            "{\"usr\": \"bob\"}",
            Some(TOKEN),
            400,
            "InvalidParameter",
            "usr",
        ),
        (
            "PATCH",
            "/api/v1/hostPools/p/userSessions/nope",
            "{\"sessionState\": \"Active\"}",
            Some(TOKEN),
            404,
            "SessionNotFound",
            "nope",
        ),
        (
            "PATCH",
            "/api/v1/hostPools/p/userSessions/nope",
            "{\"sessionState\": \"Gone\"}",
            Some(TOKEN),
            400,
            "InvalidParameter",
            "unknown variant",
        ),
        (
            "DELETE",
            "/api/v1/hostPools/p",
            "",
            Some(TOKEN),
            409,
            "Conflict",
            "session host",
        ),
        (
            "DELETE",
            "/api/v1/hostPools/p/sessionHosts/h1?force=maybe",
            "",
            Some(TOKEN),
            400,
            "InvalidParameter",
            "query",
        ),
        (
            "POST",
            "/api/v1/hostPools/p/connect",
            "{\"user\": \"bob\"}",
            None,
            401,
            "Unauthorized",
            "Bearer",
        ),
        (
            "POST",
            "/api/v1/hostPools/p/connect",
            "{\"user\": \"bob\"}",
            Some("wrong-token"),
            401,
            "Unauthorized",
            "not valid",
        ),
        ("GET", "/metrics", "", None, 401, "Unauthorized", "Bearer"),
        // A path under /api/v1 that no route has: 404 in the contract's
        // shape, with or without a token (the API's routes are registered
        // under their whole path; no router of their own answers it).
        (
            "GET",
            "/api/v1/nothingHere",
            "",
            None,
            404,
            "NotFound",
            "no such path",
        ),
        (
            "POST",
            "/api/v1/hostPools/p/nothingHere",
            "{}",
            Some(TOKEN),
            404,
            "NotFound",
            "no such path",
        ),
    ];
    for &(method, path, body, token, status, code, text) in cases {
        let mut req = app.http.request(
            reqwest::Method::from_bytes(method.as_bytes()).unwrap(),
            format!("{}{}", app.url, path),
        );
        if let Some(t) = token {
            req = req.bearer_auth(t);
        }
        if !body.is_empty() {
            req = req
                .header("content-type", "application/json")
                .body(body.to_string());
        }
        let resp = req.send().await.unwrap();
        let got = resp.status().as_u16();
        let v: Value = resp.json().await.unwrap_or(Value::Null);
        assert_eq!(got, status, "{method} {path} {body}: {v}");
        assert_eq!(v["error"]["code"], code, "{method} {path} {body}: {v}");
        let message = v["error"]["message"].as_str().unwrap_or_default();
        assert!(
            message.contains(text),
            "{method} {path} {body}: message {message:?} lacks {text:?}"
        );
    }
    // Bob was never placed, and nothing else changed either.
    assert_eq!(
        state(&app, "p").await,
        before,
        "refused requests changed nothing"
    );
}

/// A user name holding an invisible character (U+200B ZERO WIDTH SPACE,
/// a word joiner, a bidirectional override, a tag, a Hangul filler…)
/// looks exactly like another user's in every list and log: a connect
/// for one is refused 400 in the contract's shape and places nothing; a
/// heartbeat listing one, an entitlement naming one and a ticket asked
/// for one are refused too, and nothing changes.
#[tokio::test]
async fn invisible_lookalike_user_names_are_refused_from_every_source() {
    let dir = tempfile::tempdir().unwrap();
    let app = App::spawn(&dir);
    pool_with_hosts(&app, "p", "BreadthFirst", 10, 2).await;
    app.ok(
        "POST",
        "/api/v1/hostPools/p/connect",
        Some(json!({"user": "alice@contoso.com"})),
        200,
    )
    .await;
    let before = state(&app, "p").await;
    let v = app
        .refused(
            "POST",
            "/api/v1/hostPools/p/connect",
            Some(json!({"user": "alice\u{200b}@contoso.com"})),
            400,
            "InvalidParameter",
        )
        .await;
    let message = v["error"]["message"].as_str().unwrap_or_default();
    assert!(
        message.starts_with("user: ")
            && message.contains("U+200B")
            && message.contains("alice\\u{200b}@contoso.com"),
        "{v}"
    );
    for lookalike in [
        "alice\u{2060}@contoso.com",
        "alice@contoso.com\u{feff}",
        "\u{202e}alice@contoso.com",
        "alice\u{e0041}@contoso.com",
        "alice\u{3164}@contoso.com",
        "alice\u{fe0f}@contoso.com",
    ] {
        app.refused(
            "POST",
            "/api/v1/hostPools/p/connect",
            Some(json!({ "user": lookalike })),
            400,
            "InvalidParameter",
        )
        .await;
    }
    assert_eq!(
        state(&app, "p").await,
        before,
        "a refused connect wrote nothing"
    );

    // A host's session list naming one is refused whole.
    for host in ["h1", "h2"] {
        app.refused(
            "POST",
            &format!("/api/v1/hostPools/p/sessionHosts/{host}/heartbeat"),
            Some(json!({"sessions": [
                {"user": "alice@contoso.com", "state": "Active"},
                {"user": "alice\u{200b}@contoso.com", "state": "Active"},
            ]})),
            400,
            "InvalidParameter",
        )
        .await;
    }
    // An entitlement, and a connection ticket.
    app.refused(
        "PATCH",
        "/api/v1/hostPools/p",
        Some(json!({"entitledUsers": ["bob\u{200d}@contoso.com"]})),
        400,
        "InvalidParameter",
    )
    .await;
    app.refused(
        "GET",
        "/api/v1/hostPools/p/rdpFile?user=alice%E2%80%8B%40contoso.com",
        None,
        400,
        "InvalidParameter",
    )
    .await;
    assert_eq!(state(&app, "p").await, before, "nothing changed");
}

#[tokio::test]
async fn parallel_connects_never_exceed_the_limit_nor_double_book() {
    let dir = tempfile::tempdir().unwrap();
    let app = Arc::new(App::spawn(&dir));
    // 8 hosts × limit 5 = 40 places for 120 distinct users, each trying 3 times at once.
    pool_with_hosts(&app, "storm", "BreadthFirst", 5, 8).await;
    let mut tasks = Vec::new();
    for i in 0..360 {
        let app = app.clone();
        tasks.push(tokio::spawn(async move {
            let user = format!("user{}", i % 120);
            let (status, v) = app
                .call(
                    "POST",
                    "/api/v1/hostPools/storm/connect",
                    Some(json!({"user": user})),
                )
                .await;
            (user, status, v)
        }));
    }
    let mut by_user: HashMap<String, HashSet<String>> = HashMap::new();
    let mut placed = 0;
    for t in tasks {
        let (user, status, v) = t.await.unwrap();
        match status {
            200 => {
                placed += 1;
                by_user
                    .entry(user)
                    .or_default()
                    .insert(v["sessionId"].as_str().unwrap().to_string());
            }
            503 => assert_eq!(v["error"]["code"], "NoSessionHostAvailable", "{v}"),
            s => panic!("unexpected {s}: {v}"),
        }
    }
    assert!(placed >= 40, "every place was taken ({placed} answers)");
    assert!(
        by_user.values().all(|ids| ids.len() == 1),
        "a user got two sessions: {by_user:?}"
    );
    assert_eq!(by_user.len(), 40, "exactly the 40 places were given");
    let hosts = app
        .ok("GET", "/api/v1/hostPools/storm/sessionHosts", None, 200)
        .await;
    for h in hosts["value"].as_array().unwrap() {
        assert_eq!(
            h["sessions"], 5,
            "every host filled to the limit and no further: {h}"
        );
    }
    let sessions = app
        .ok("GET", "/api/v1/hostPools/storm/userSessions", None, 200)
        .await;
    assert_eq!(sessions["value"].as_array().unwrap().len(), 40);
}

/// `If-None-Match: *` makes a PUT create only: of eight creations at once
/// exactly one succeeds, the others are conflicts that change nothing.
#[tokio::test]
async fn put_if_none_match_star_only_creates() {
    let dir = tempfile::tempdir().unwrap();
    let app = Arc::new(App::spawn(&dir));
    let mut tasks = Vec::new();
    for limit in 1..=8 {
        let app = app.clone();
        tasks.push(tokio::spawn(async move {
            let r = app
                .http
                .put(format!("{}/api/v1/hostPools/p", app.url))
                .bearer_auth(TOKEN)
                .header("if-none-match", "*")
                .json(
                    &json!({"hostPoolType": "Pooled", "loadBalancerType": "DepthFirst",
                              "maxSessionLimit": limit}),
                )
                .send()
                .await
                .expect("request");
            let status = r.status().as_u16();
            (limit, status, r.json::<Value>().await.expect("JSON"))
        }));
    }
    let mut created = Vec::new();
    for t in tasks {
        let (limit, status, v) = t.await.unwrap();
        match status {
            201 => created.push(limit),
            409 => {
                assert_eq!(v["error"]["code"], "Conflict", "{v}");
                let message = v["error"]["message"].as_str().unwrap();
                assert!(message.starts_with("host pool p already exists"), "{v}");
            }
            _ => panic!("PUT If-None-Match: * answered {status}: {v}"),
        }
    }
    assert_eq!(created.len(), 1, "exactly one creation: {created:?}");
    let p = app.ok("GET", "/api/v1/hostPools/p", None, 200).await;
    assert_eq!(
        p["maxSessionLimit"], created[0],
        "the refused PUTs changed nothing"
    );
    // Without the header a PUT still replaces.
    let body = json!({"hostPoolType": "Pooled", "loadBalancerType": "BreadthFirst"});
    let p = app.ok("PUT", "/api/v1/hostPools/p", Some(body), 200).await;
    assert_eq!(p["loadBalancerType"], "BreadthFirst");
}

#[tokio::test]
async fn service_endpoints() {
    let dir = tempfile::tempdir().unwrap();
    let app = App::spawn(&dir);
    let (status, _) = app.call_with("GET", "/healthz", None, None).await;
    assert_eq!(status, 200);
    let health = app.health().await.expect("/healthz answers JSON");
    assert_eq!(
        (health.status.as_str(), health.role.as_str()),
        ("ok", "standalone")
    );
    pool_with_hosts(&app, "p", "BreadthFirst", 10, 2).await;
    app.ok(
        "POST",
        "/api/v1/hostPools/p/connect",
        Some(json!({"user": "alice"})),
        200,
    )
    .await;
    // The same user again (a reconnect), and a connect the broker refuses:
    // each outcome is counted under its own label.
    app.ok(
        "POST",
        "/api/v1/hostPools/p/connect",
        Some(json!({"user": "alice"})),
        200,
    )
    .await;
    app.ok(
        "POST",
        "/api/v1/hostPools/p/connect",
        Some(json!({"user": "bob", "sessionHost": "h1"})),
        400,
    )
    .await;
    let text = app.text("/metrics").await;
    for counted in [
        "deskbroker_placements_total{outcome=\"placed\"} 1",
        "deskbroker_placements_total{outcome=\"reconnect\"} 1",
        "deskbroker_placements_total{outcome=\"InvalidParameter\"} 1",
        "deskbroker_placements_total{outcome=\"reconnect_from_memory\"} 0",
        "deskbroker_connect_duration_seconds_count 3",
        "deskbroker_placement_engine_seconds_count 3",
        "deskbroker_store_batch_requests_count",
        "deskbroker_store_commit_seconds_count{flush=\"now\"}",
    ] {
        assert!(text.contains(counted), "{counted} in {text}");
    }
    assert!(
        text.contains("deskbroker_host_sessions{pool=\"p\",host=\"h1\"}"),
        "{text}"
    );
    // The SQLite checkpointer copies that placement within its interval.
    let text = crate::metrics_when(&app, |t| {
        t.contains("deskbroker_store_checkpoint_seconds_count{mode=\"passive\"}")
    })
    .await;
    assert!(
        text.contains("deskbroker_store_checkpoint_seconds_count{mode=\"passive\"}"),
        "{text}"
    );
    let doc = app.ok("GET", "/openapi.json", None, 200).await;
    assert!(
        doc["paths"]["/api/v1/hostPools/{pool}/connect"]["post"].is_object(),
        "{doc}"
    );
    assert!(doc["components"]["schemas"]["ConnectOutput"].is_object());
}

/// Rule P4 pinned by its literal numbers, not by the code's constant: a
/// new pool's `maxSessionLimit` is 999999, which is also the highest value
/// accepted; one more is refused and changes nothing.
#[tokio::test]
async fn max_session_limit_defaults_to_999999_and_refuses_more() {
    let dir = tempfile::tempdir().unwrap();
    let app = App::spawn(&dir);
    let created = app
        .ok(
            "PUT",
            "/api/v1/hostPools/p",
            Some(json!({"hostPoolType": "Pooled", "loadBalancerType": "BreadthFirst"})),
            201,
        )
        .await;
    assert_eq!(created["maxSessionLimit"], 999_999, "{created}");
    let shown = app.ok("GET", "/api/v1/hostPools/p", None, 200).await;
    assert_eq!(shown["maxSessionLimit"], 999_999, "{shown}");

    app.ok(
        "PATCH",
        "/api/v1/hostPools/p",
        Some(json!({"maxSessionLimit": 10})),
        200,
    )
    .await;
    let highest = app
        .ok(
            "PATCH",
            "/api/v1/hostPools/p",
            Some(json!({"maxSessionLimit": 999_999})),
            200,
        )
        .await;
    assert_eq!(highest["maxSessionLimit"], 999_999, "{highest}");
    app.ok(
        "PATCH",
        "/api/v1/hostPools/p",
        Some(json!({"maxSessionLimit": 10})),
        200,
    )
    .await;
    for (method, path, body) in [
        (
            "PATCH",
            "/api/v1/hostPools/p",
            json!({"maxSessionLimit": 1_000_000}),
        ),
        (
            "PUT",
            "/api/v1/hostPools/p",
            json!({"hostPoolType": "Pooled", "loadBalancerType": "BreadthFirst",
                   "maxSessionLimit": 1_000_000}),
        ),
        (
            "PUT",
            "/api/v1/hostPools/q",
            json!({"hostPoolType": "Pooled", "loadBalancerType": "BreadthFirst",
                   "maxSessionLimit": 1_000_000}),
        ),
    ] {
        let (status, v) = app.call(method, path, Some(body.clone())).await;
        assert_eq!(status, 400, "{method} {path} {body}: {v}");
        assert_eq!(v["error"]["code"], "InvalidParameter", "{v}");
        assert!(
            v["error"]["message"]
                .as_str()
                .is_some_and(|m| m.contains("maxSessionLimit")),
            "{v}"
        );
    }
    let kept = app.ok("GET", "/api/v1/hostPools/p", None, 200).await;
    assert_eq!(
        kept["maxSessionLimit"], 10,
        "a refused limit changed {kept}"
    );
    let (status, _) = app.call("GET", "/api/v1/hostPools/q", None).await;
    assert_eq!(status, 404, "a refused PUT created the pool");
}

/// The owner of host `host` in pool `pool` (its `assignedUser`).
async fn owner(app: &App, pool: &str, host: &str) -> Value {
    app.ok(
        "GET",
        &format!("/api/v1/hostPools/{pool}/sessionHosts/{host}"),
        None,
        200,
    )
    .await["assignedUser"]
        .clone()
}

/// Rule P7 over HTTP: in a `Persistent` pool with `Direct` assignment,
/// giving an owned host to someone else and giving an owner a second host
/// are 409 `Conflict` (and change nothing); a user without a host is 403
/// `NoPersonalDesktopAssigned`. A `MultiplePersistent` pool takes the
/// second host.
#[tokio::test]
async fn personal_desktops_conflicts_and_users_without_one() {
    let dir = tempfile::tempdir().unwrap();
    let app = App::spawn(&dir);
    for (pool, lb) in [("desks", "Persistent"), ("multi", "MultiplePersistent")] {
        app.ok(
            "PUT",
            &format!("/api/v1/hostPools/{pool}"),
            Some(json!({"hostPoolType": "Personal", "loadBalancerType": lb,
                        "personalDesktopAssignmentType": "Direct"})),
            201,
        )
        .await;
        for (i, desk) in ["d1", "d2"].into_iter().enumerate() {
            app.ok(
                "PUT",
                &format!("/api/v1/hostPools/{pool}/sessionHosts/{desk}"),
                Some(json!({"address": format!("10.0.2.{i}:3389")})),
                201,
            )
            .await;
        }
        let assigned = app
            .ok(
                "PATCH",
                &format!("/api/v1/hostPools/{pool}/sessionHosts/d1"),
                Some(json!({"assignedUser": "alice@contoso.com"})),
                200,
            )
            .await;
        assert_eq!(assigned["assignedUser"], "alice@contoso.com");
    }

    // d1 is alice's: not bob's too, in either kind of pool.
    for pool in ["desks", "multi"] {
        let (status, v) = app
            .call(
                "PATCH",
                &format!("/api/v1/hostPools/{pool}/sessionHosts/d1"),
                Some(json!({"assignedUser": "bob@contoso.com"})),
            )
            .await;
        assert_eq!(
            (status, &v["error"]["code"]),
            (409, &json!("Conflict")),
            "{pool}: {v}"
        );
        assert_eq!(owner(&app, pool, "d1").await, "alice@contoso.com");
    }
    // A second desktop for alice: a conflict in a Persistent pool (users
    // matched without regard to case), accepted in a MultiplePersistent one.
    app.refused(
        "PATCH",
        "/api/v1/hostPools/desks/sessionHosts/d2",
        Some(json!({"assignedUser": "Alice@Contoso.com"})),
        409,
        "Conflict",
    )
    .await;
    assert_eq!(owner(&app, "desks", "d2").await, Value::Null);
    app.ok(
        "PATCH",
        "/api/v1/hostPools/multi/sessionHosts/d2",
        Some(json!({"assignedUser": "alice@contoso.com"})),
        200,
    )
    .await;

    // Direct assignment: bob has no desktop and is told so; d2 stays free
    // (nothing is assigned on connect); alice goes to hers.
    app.refused(
        "POST",
        "/api/v1/hostPools/desks/connect",
        Some(json!({"user": "bob@contoso.com"})),
        403,
        "NoPersonalDesktopAssigned",
    )
    .await;
    assert_eq!(owner(&app, "desks", "d2").await, Value::Null);
    let alice = app
        .ok(
            "POST",
            "/api/v1/hostPools/desks/connect",
            Some(json!({"user": "alice@contoso.com"})),
            200,
        )
        .await;
    assert_eq!(alice["sessionHost"], "d1", "{alice}");
    let sessions = app
        .ok("GET", "/api/v1/hostPools/desks/userSessions", None, 200)
        .await;
    assert_eq!(
        sessions["value"].as_array().map(Vec::len),
        Some(1),
        "{sessions}"
    );
}
