//! Host registration, as an attacker would try it against the real
//! binary: a registration token must not be a master key for its pool.
//! Re-registering an existing name (to steal its users or its credential),
//! flooding a pool with hosts from one token, and registering hosts at
//! loopback or cloud-metadata addresses are each refused (rules E2–E5 of
//! docs/rules.md), and each test then shows that the pool kept serving its
//! real hosts and users.

use serde_json::{Value, json};

use crate::{App, pool_with_hosts};

/// A registration token for `pool` with the request's `body`.
async fn token(app: &App, pool: &str, body: Value) -> String {
    let v = app
        .ok(
            "POST",
            &format!("/api/v1/hostPools/{pool}/registrationToken"),
            Some(body),
            200,
        )
        .await;
    v["token"].as_str().expect("a token").to_string()
}

/// `POST /api/v1/register` with `bearer` (or none).
async fn register(app: &App, body: Value, bearer: Option<&str>) -> (u16, Value) {
    app.call_with("POST", "/api/v1/register", Some(body), bearer)
        .await
}

async fn connect(app: &App, pool: &str, user: &str) -> Value {
    app.ok(
        "POST",
        &format!("/api/v1/hostPools/{pool}/connect"),
        Some(json!({"user": user})),
        200,
    )
    .await
}

async fn heartbeat(app: &App, pool: &str, host: &str, credential: &str) -> u16 {
    app.call_with(
        "POST",
        &format!("/api/v1/hostPools/{pool}/sessionHosts/{host}/heartbeat"),
        Some(json!({"cpuPercent": 5.0})),
        Some(credential),
    )
    .await
    .0
}

fn code(v: &Value) -> &str {
    v["error"]["code"].as_str().unwrap_or("")
}

/// Someone holding a valid registration token re-registers alice's host
/// under its name at their own address: 409, and alice's reconnect still
/// goes to the real address, whose credential still works. Neither another
/// host's credential nor the host's own credential moves it; the admin
/// can.
#[tokio::test]
async fn re_registering_an_existing_name_is_refused_and_alice_keeps_her_host() {
    let dir = tempfile::tempdir().unwrap();
    let app = App::spawn(&dir);
    pool_with_hosts(&app, "p", "BreadthFirst", 10, 0).await;
    let enrol = token(&app, "p", json!({"maxHosts": 2})).await;
    let (status, v) = register(
        &app,
        json!({"token": enrol, "name": "h1", "address": "10.1.0.1:3389"}),
        None,
    )
    .await;
    assert_eq!(status, 201, "{v}");
    let real = v["hostCredential"].as_str().unwrap().to_string();
    let (status, v) = register(
        &app,
        json!({"token": enrol, "name": "h2", "address": "10.1.0.2:3389"}),
        None,
    )
    .await;
    assert_eq!(status, 201, "{v}");
    let other = v["hostCredential"].as_str().unwrap().to_string();
    // Drain h2 so that alice goes to h1.
    app.ok(
        "PATCH",
        "/api/v1/hostPools/p/sessionHosts/h2",
        Some(json!({"allowNewSession": false})),
        200,
    )
    .await;
    let alice = connect(&app, "p", "alice").await;
    assert_eq!(
        (&alice["sessionHost"], &alice["address"]),
        (&json!("h1"), &json!("10.1.0.1:3389"))
    );

    // The attack: a fresh, valid token (as an agent's would be), the name
    // h1 and another address. Without a bearer, and with h2's credential.
    let stolen = token(&app, "p", json!({})).await;
    let hijack = json!({"token": stolen, "name": "h1", "address": "10.66.6.6:3389"});
    for bearer in [None, Some(other.as_str())] {
        let (status, v) = register(&app, hijack.clone(), bearer).await;
        assert_eq!((status, code(&v)), (409, "Conflict"), "{v}");
        assert!(
            v["error"]["message"]
                .as_str()
                .unwrap()
                .contains("host credential"),
            "{v}"
        );
    }
    // A bearer the broker does not know is 401, not a way around the 409.
    let (status, v) = register(&app, hijack.clone(), Some("dbh_forged")).await;
    assert_eq!((status, code(&v)), (401, "Unauthorized"), "{v}");
    // Even h1's own credential does not move h1 (only the admin does).
    let (status, v) = register(&app, hijack.clone(), Some(&real)).await;
    assert_eq!((status, code(&v)), (403, "Forbidden"), "{v}");

    // Nothing was taken: alice reconnects to the real address, h1's
    // credential still works, and so does the service for others.
    let again = connect(&app, "p", "alice").await;
    assert_eq!(
        (
            &again["sessionHost"],
            &again["address"],
            &again["reconnect"]
        ),
        (&json!("h1"), &json!("10.1.0.1:3389"), &json!(true))
    );
    assert_eq!(heartbeat(&app, "p", "h1", &real).await, 200);
    assert_eq!(heartbeat(&app, "p", "h2", &other).await, 200);
    let bob = connect(&app, "p", "bob").await;
    assert_eq!(bob["address"], "10.1.0.1:3389");
    // The refusals did not use the attacker's token up: it still enrols
    // one new host (its maxHosts is the default, 1).
    let (status, v) = register(
        &app,
        json!({"token": stolen, "name": "h3", "address": "10.1.0.3:3389"}),
        None,
    )
    .await;
    assert_eq!(status, 201, "{v}");

    // h1's own agent re-registers at its address with its credential: a
    // new credential, the old one stops working, sessions are kept.
    let (status, v) = register(
        &app,
        json!({"token": stolen, "name": "h1", "address": "10.1.0.1:3389"}),
        Some(&real),
    )
    .await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(v["sessionHost"]["sessions"], 2, "{v}");
    let rotated = v["hostCredential"].as_str().unwrap().to_string();
    assert_eq!(heartbeat(&app, "p", "h1", &real).await, 401);
    assert_eq!(heartbeat(&app, "p", "h1", &rotated).await, 200);

    // The admin can still move a host: by PATCH, and by registering it
    // with the admin token as the bearer.
    app.ok(
        "PATCH",
        "/api/v1/hostPools/p/sessionHosts/h1",
        Some(json!({"address": "10.1.0.9:3389"})),
        200,
    )
    .await;
    assert_eq!(
        connect(&app, "p", "alice").await["address"],
        "10.1.0.9:3389"
    );
    let (status, v) = register(
        &app,
        json!({"token": stolen, "name": "h1", "address": "10.1.0.8:3389"}),
        Some(crate::TOKEN),
    )
    .await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(
        connect(&app, "p", "alice").await["address"],
        "10.1.0.8:3389"
    );
}

/// One token is given to one machine; whoever steals it floods the pool
/// with 300 hosts at once. The token's bound (maxHosts, default 1) lets
/// none in, also after a restart, and 100 new logons all go to the real
/// hosts.
#[tokio::test]
async fn a_bound_token_stops_a_flood_of_hosts() {
    let dir = tempfile::tempdir().unwrap();
    let app = App::spawn(&dir);
    pool_with_hosts(&app, "p", "BreadthFirst", 999_999, 2).await;
    let t = token(&app, "p", json!({"expiresInSeconds": 3600})).await;
    let (status, v) = register(
        &app,
        json!({"token": t, "name": "h3", "address": "10.0.0.3:3389"}),
        None,
    )
    .await;
    assert_eq!(status, 201, "the machine the token was for: {v}");

    let mut flood = tokio::task::JoinSet::new();
    for i in 0..300 {
        let (http, url, t) = (app.http.clone(), app.url.clone(), t.clone());
        flood.spawn(async move {
            let resp = http
                .post(format!("{url}/api/v1/register"))
                .json(&json!({"token": t, "name": format!("evil{i:03}"),
                              "address": format!("10.66.{}.{}:3389", i / 250, i % 250 + 1)}))
                .send()
                .await
                .expect("request");
            let status = resp.status().as_u16();
            (status, resp.json::<Value>().await.expect("json"))
        });
    }
    // Each is refused: by the token's bound (403), or, once the flood is
    // past the source's budget of unauthenticated requests (T4), before
    // the token is even looked at (429).
    let (mut bound, mut throttled) = (0, 0);
    while let Some(answer) = flood.join_next().await {
        let (status, v) = answer.expect("task");
        match (status, code(&v)) {
            (403, "Forbidden") => {
                assert!(
                    v["error"]["message"].as_str().unwrap().contains("maxHosts"),
                    "{v}"
                );
                bound += 1;
            }
            (429, "TooManyRequests") => throttled += 1,
            _ => panic!("neither refused by the bound nor throttled: {status} {v}"),
        }
    }
    assert_eq!(bound + throttled, 300);
    assert!(
        bound >= 1,
        "the bound refused what the throttle let through"
    );

    // The count is durable: after kill -9 the token is still used up.
    let data = app.data_dir.clone();
    app.kill9();
    let app = App::spawn_on(&data);
    let (status, v) = register(
        &app,
        json!({"token": t, "name": "evil300", "address": "10.66.9.9:3389"}),
        None,
    )
    .await;
    assert_eq!((status, code(&v)), (403, "Forbidden"), "{v}");

    let hosts = app
        .ok("GET", "/api/v1/hostPools/p/sessionHosts", None, 200)
        .await;
    let names: Vec<&str> = hosts["value"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| h["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["h1", "h2", "h3"]);
    for i in 0..100 {
        let placed = connect(&app, "p", &format!("user{i}")).await;
        let host = placed["sessionHost"].as_str().unwrap();
        assert!(["h1", "h2", "h3"].contains(&host), "{placed}");
    }
    // A token made for a farm's worth of hosts enrols them, and no more.
    let farm = token(&app, "p", json!({"maxHosts": 3})).await;
    let mut statuses = Vec::new();
    for i in 0..4 {
        let (status, _) = register(
            &app,
            json!({"token": farm, "name": format!("f{i}"), "address": format!("10.2.0.{}:3389", i + 1)}),
            None,
        )
        .await;
        statuses.push(status);
    }
    assert_eq!(statuses, [201, 201, 201, 403]);
    for bad in [json!({"maxHosts": 0}), json!({"maxHosts": 10_001})] {
        let v = app
            .refused(
                "POST",
                "/api/v1/hostPools/p/registrationToken",
                Some(bad),
                400,
                "InvalidParameter",
            )
            .await;
        assert!(v["error"]["message"].as_str().unwrap().contains("maxHosts"));
    }
}

/// Hosts at loopback, link-local (the cloud's metadata service), and the
/// like are refused on registration and on the admin's PUT and PATCH,
/// unless the pool's allowedAddressRanges names them; a pool with ranges
/// takes only addresses inside them.
#[tokio::test]
async fn metadata_and_loopback_addresses_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let app = App::spawn(&dir);
    pool_with_hosts(&app, "p", "BreadthFirst", 10, 1).await;
    let t = token(&app, "p", json!({})).await;
    for address in [
        "169.254.169.254:80",
        "127.0.0.1:3389",
        "[::1]:3389",
        "[::ffff:127.0.0.1]:3389",
        "localhost:3389",
        "127.1:3389",
        "0.0.0.0:3389",
        "[fe80::1]:3389",
        "224.0.0.251:5353",
    ] {
        let (status, v) = register(
            &app,
            json!({"token": t, "name": "evil", "address": address}),
            None,
        )
        .await;
        assert_eq!(
            (status, code(&v)),
            (400, "InvalidParameter"),
            "{address}: {v}"
        );
        assert!(
            v["error"]["message"].as_str().unwrap().contains("rule E4"),
            "{v}"
        );
        // The admin is held to the same policy.
        app.refused(
            "PUT",
            "/api/v1/hostPools/p/sessionHosts/evil",
            Some(json!({"address": address})),
            400,
            "InvalidParameter",
        )
        .await;
        app.refused(
            "PATCH",
            "/api/v1/hostPools/p/sessionHosts/h1",
            Some(json!({"address": address})),
            400,
            "InvalidParameter",
        )
        .await;
    }
    // Nothing was registered or moved, and the token was not used up.
    let h1 = app
        .ok("GET", "/api/v1/hostPools/p/sessionHosts/h1", None, 200)
        .await;
    assert_eq!(h1["address"], "10.0.0.1:3389");
    assert_eq!(
        connect(&app, "p", "alice").await["address"],
        "10.0.0.1:3389"
    );
    let (status, v) = register(
        &app,
        json!({"token": t, "name": "h2", "address": "10.0.0.2:3389"}),
        None,
    )
    .await;
    assert_eq!(status, 201, "{v}");

    // A pool confined to 10.0.0.0/8 (given as any address of it).
    let v = app
        .ok(
            "PATCH",
            "/api/v1/hostPools/p",
            Some(json!({"allowedAddressRanges": ["10.9.9.9/8"]})),
            200,
        )
        .await;
    assert_eq!(v["allowedAddressRanges"], json!(["10.0.0.0/8"]));
    let t = token(&app, "p", json!({"maxHosts": 5})).await;
    for address in ["192.168.1.5:3389", "h9.contoso.com:3389"] {
        let (status, v) = register(
            &app,
            json!({"token": t, "name": "h9", "address": address}),
            None,
        )
        .await;
        assert_eq!((status, code(&v)), (400, "InvalidParameter"), "{v}");
    }
    app.refused(
        "PATCH",
        "/api/v1/hostPools/p/sessionHosts/h1",
        Some(json!({"address": "192.168.1.5:3389"})),
        400,
        "InvalidParameter",
    )
    .await;
    // Inside the range, and an admin's address change, are fine; so is a
    // change of something else on a host whose address is unchanged.
    let (status, v) = register(
        &app,
        json!({"token": t, "name": "h9", "address": "10.7.0.9:3389"}),
        None,
    )
    .await;
    assert_eq!(status, 201, "{v}");
    app.ok(
        "PATCH",
        "/api/v1/hostPools/p/sessionHosts/h1",
        Some(json!({"address": "10.3.0.1:3389"})),
        200,
    )
    .await;
    // Loopback opens only when a range names it.
    app.ok(
        "PATCH",
        "/api/v1/hostPools/p",
        Some(json!({"allowedAddressRanges": ["0.0.0.0/0"]})),
        200,
    )
    .await;
    app.refused(
        "PUT",
        "/api/v1/hostPools/p/sessionHosts/lab",
        Some(json!({"address": "127.0.0.1:3389"})),
        400,
        "InvalidParameter",
    )
    .await;
    app.ok(
        "PATCH",
        "/api/v1/hostPools/p",
        Some(json!({"allowedAddressRanges": ["127.0.0.0/8", "10.0.0.0/8"]})),
        200,
    )
    .await;
    app.ok(
        "PUT",
        "/api/v1/hostPools/p/sessionHosts/lab",
        Some(json!({"address": "127.0.0.1:3389"})),
        201,
    )
    .await;
    // A range that is not CIDR is refused, naming it.
    let v = app
        .refused(
            "PATCH",
            "/api/v1/hostPools/p",
            Some(json!({"allowedAddressRanges": ["10.0.0.0/8", "ten/8"]})),
            400,
            "InvalidParameter",
        )
        .await;
    assert!(
        v["error"]["message"]
            .as_str()
            .unwrap()
            .contains("allowedAddressRanges[1]"),
        "{v}"
    );
    // Users are still served by the pool's hosts.
    assert_eq!(connect(&app, "p", "alice").await["reconnect"], true);
    assert!(connect(&app, "p", "bob").await["address"].is_string());
}
