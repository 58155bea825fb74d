//! The front door's trust, against the real binary (`serve --rdp-listen`):
//! the RDP front door no longer turns unauthenticated claims into durable
//! state. Each test makes the attack first, shows it was refused or left
//! nothing behind, then shows that the service kept serving others.
//! Rules S9 (no session without a logon) and R3 (only what the broker
//! issued); the bounds are `gateway::sources`'s. S9's lifetimes are proved
//! in process, in the broker's `rules` tests.

use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

use crate::wire::{echo_host, first_pdu, log_on, open};
use crate::{App, PATIENCE, TOKEN, metrics_when, sessions, states, wait_states};

async fn pool(app: &App, name: &str, body: Value, host: &str) {
    app.ok("PUT", &format!("/api/v1/hostPools/{name}"), Some(body), 201)
        .await;
    app.ok(
        "PUT",
        &format!("/api/v1/hostPools/{name}/sessionHosts/h1"),
        Some(json!({"address": host})),
        201,
    )
    .await;
}

#[tokio::test]
async fn connections_that_close_before_a_logon_leave_no_session_behind() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (app, front_door) = App::spawn_with_front_door(dir.path(), "farm", &[]);
    let host = echo_host().await;
    // Six sessions fill the pool: what six junk connections used to do for good.
    pool(
        &app,
        "farm",
        json!({"hostPoolType": "Pooled", "allowedAddressRanges": ["127.0.0.0/8"], "loadBalancerType": "DepthFirst", "maxSessionLimit": 6}),
        &host,
    )
    .await;

    // The attack: six connections with invented names that close at once.
    for i in 0..6 {
        let c = open(&front_door, &format!("Cookie: mstshash=junk{i}"))
            .await
            .expect("relayed");
        drop(c);
    }
    wait_states(&app, "farm", &[]).await;

    // The pool is not full: six real users log on and keep their sessions
    // (Disconnected once they leave, for S1).
    for i in 0..6 {
        let mut c = open(&front_door, &format!("Cookie: mstshash=user{i}"))
            .await
            .expect("relayed");
        log_on(&mut c).await;
        drop(c);
    }
    let want: Vec<(String, &str)> = (0..6)
        .map(|i| (format!("user{i}"), "Disconnected"))
        .collect();
    let want: Vec<(&str, &str)> = want.iter().map(|(u, s)| (u.as_str(), *s)).collect();
    wait_states(&app, "farm", &want).await;
    let metrics = metrics_when(&app, |m| {
        m.contains("deskbroker_rdp_sessions_without_logon_total 6")
    })
    .await;
    assert!(
        metrics.contains("deskbroker_rdp_sessions_without_logon_total 6"),
        "{metrics}"
    );
    // The placements were flushed before their hosts were dialled; the
    // last change of all, the last user's Disconnected mark, was committed
    // in a batch of marks only, whose flush waits (rule S5's exception).
    let metrics = metrics_when(&app, |m| {
        m.contains("deskbroker_store_commit_seconds_count{flush=\"soon\"}")
    })
    .await;
    assert!(
        metrics.contains("deskbroker_store_commit_seconds_count{flush=\"now\"}"),
        "{metrics}"
    );
    assert!(
        metrics.contains("deskbroker_store_commit_seconds_count{flush=\"soon\"}"),
        "{metrics}"
    );
}

#[tokio::test]
async fn an_impostor_cannot_disturb_a_live_session() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (app, front_door) = App::spawn_with_front_door(dir.path(), "farm", &[]);
    let host = echo_host().await;
    pool(
        &app,
        "farm",
        json!({"hostPoolType": "Pooled", "allowedAddressRanges": ["127.0.0.0/8"], "loadBalancerType": "BreadthFirst"}),
        &host,
    )
    .await;
    // alice is logged on through the front door.
    let mut alice = open(&front_door, "Cookie: mstshash=alice")
        .await
        .expect("relayed");
    log_on(&mut alice).await;
    wait_states(&app, "farm", &[("alice", "Active")]).await;

    // The impostor names ALICE, twice: once closing at once, once after a
    // "logon" worth of bytes. alice's session stays Active, and stays.
    for play in [false, true] {
        let mut c = open(&front_door, "Cookie: mstshash=ALICE")
            .await
            .expect("S1 sends the name to its host, which authenticates");
        if play {
            log_on(&mut c).await;
        }
        drop(c);
    }
    // A third party connects and leaves, so the impostor's closes were handled.
    let mut bob = open(&front_door, "Cookie: mstshash=bob")
        .await
        .expect("relayed");
    log_on(&mut bob).await;
    drop(bob);
    wait_states(
        &app,
        "farm",
        &[("alice", "Active"), ("bob", "Disconnected")],
    )
    .await;

    // alice's own connection still works, and her leaving is what
    // disconnects her session.
    alice.write_all(b"still here").await.expect("write");
    let mut back = [0u8; 10];
    alice.read_exact(&mut back).await.expect("echo");
    assert_eq!(&back, b"still here");
    drop(alice);
    wait_states(
        &app,
        "farm",
        &[("alice", "Disconnected"), ("bob", "Disconnected")],
    )
    .await;

    // A session placed through the API (alice's client went straight to
    // the host) is not the front door's to change either.
    let carol = app
        .ok(
            "POST",
            "/api/v1/hostPools/farm/connect",
            Some(json!({"user": "carol"})),
            200,
        )
        .await;
    let carol = carol["sessionId"].as_str().expect("id").to_string();
    app.ok(
        "PATCH",
        &format!("/api/v1/hostPools/farm/userSessions/{carol}"),
        Some(json!({"sessionState": "Active"})),
        200,
    )
    .await;
    let mut c = open(&front_door, "Cookie: mstshash=carol")
        .await
        .expect("relayed");
    log_on(&mut c).await;
    drop(c);
    let mut dave = open(&front_door, "Cookie: mstshash=dave")
        .await
        .expect("relayed");
    log_on(&mut dave).await;
    drop(dave);
    wait_states(
        &app,
        "farm",
        &[
            ("alice", "Disconnected"),
            ("bob", "Disconnected"),
            ("carol", "Active"),
            ("dave", "Disconnected"),
        ],
    )
    .await;
}

#[tokio::test]
async fn only_redirection_tokens_the_broker_signed_reach_a_host() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (app, front_door) = App::spawn_with_front_door(dir.path(), "farm", &[]);
    let host = echo_host().await;
    // h1 is drained: a forged token used to reach it anyway.
    pool(
        &app,
        "farm",
        json!({"hostPoolType": "Pooled", "allowedAddressRanges": ["127.0.0.0/8"], "loadBalancerType": "BreadthFirst"}),
        &host,
    )
    .await;
    app.ok(
        "PATCH",
        "/api/v1/hostPools/farm/sessionHosts/h1",
        Some(json!({"allowNewSession": false})),
        200,
    )
    .await;
    let addr: std::net::SocketAddrV4 = host.parse().expect("v4");
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("clock")
        .as_secs();

    // The attack: the plain token anyone can write, one signed with another
    // key, an expired one.
    // The admin token signs nothing: a token derived from it is as foreign
    // as any other (tokens travel in clear, and each would be an offline
    // test of a guess of the admin token).
    let stranger = gateway::redirect::RedirectKey::derive(TOKEN);
    let key = gateway::redirect::RedirectKey::derive(&crate::signing_secret(dir.path()).await);
    for forged in [
        gateway::pdu::msts_cookie(addr),
        stranger.issue(addr, now),
        key.issue_until(addr, now - 1),
    ] {
        assert!(
            open(&front_door, &forged).await.is_none(),
            "{forged} was relayed"
        );
    }
    let refused = |reason: &str| format!("deskbroker_rdp_refusals_total{{reason=\"{reason}\"}} 1");
    let reasons = ["unsigned_redirect", "forged_redirect", "expired_redirect"];
    let metrics = metrics_when(&app, |m| reasons.iter().all(|r| m.contains(&refused(r)))).await;
    for reason in reasons {
        assert!(metrics.contains(&refused(reason)), "{reason}: {metrics}");
    }

    // A token from the broker's key (random, made once and kept in its
    // store) goes through, and creates no session.
    let mut c = open(&front_door, &key.issue(addr, now))
        .await
        .expect("a signed token is honoured");
    log_on(&mut c).await;
    drop(c);
    assert_eq!(states(&app, "farm").await, vec![]);
}

#[tokio::test]
async fn a_pool_is_named_by_a_routing_token_only_when_it_allows_the_front_door() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (app, front_door) = App::spawn_with_front_door(dir.path(), "farm", &[]);
    let host = echo_host().await;
    let pooled = json!({"hostPoolType": "Pooled", "allowedAddressRanges": ["127.0.0.0/8"], "loadBalancerType": "BreadthFirst"});
    pool(&app, "farm", pooled.clone(), &host).await;
    // The contract's default is true; a pool says false to stay out of reach.
    let v = app.ok("GET", "/api/v1/hostPools/farm", None, 200).await;
    assert_eq!(v["allowFrontDoor"], true);
    let mut private = pooled.clone();
    private["allowFrontDoor"] = json!(false);
    pool(&app, "private", private, &host).await;
    let v = app.ok("GET", "/api/v1/hostPools/private", None, 200).await;
    assert_eq!(v["allowFrontDoor"], false);
    let token = "tsv://MS Terminal Services Plugin.1.private";
    assert!(open(&front_door, token).await.is_none(), "refused");
    assert_eq!(states(&app, "private").await, vec![]);
    let not_allowed = "deskbroker_rdp_refusals_total{reason=\"pool_not_allowed\"} 1";
    let metrics = metrics_when(&app, |m| m.contains(not_allowed)).await;
    assert!(metrics.contains(not_allowed), "{metrics}");

    // Its administrator allows it (through the CLI): the token works.
    let (ok, _, err) = app.cli(&[
        "hostpool",
        "update",
        "--name",
        "private",
        "--allow-front-door",
        "true",
    ]);
    assert!(ok, "{err}");
    let mut c = open(&front_door, token).await.expect("allowed now");
    log_on(&mut c).await;
    // The default pool needs no setting: it is the operator's choice.
    let mut d = open(&front_door, "Cookie: mstshash=alice")
        .await
        .expect("default pool");
    log_on(&mut d).await;
    wait_states(&app, "farm", &[("alice", "Active")]).await;
    assert_eq!(sessions(&app, "private").await.len(), 1);
}

#[tokio::test]
async fn one_source_gets_a_bounded_share_of_new_sessions_and_handshakes() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (app, front_door) = App::spawn_with_front_door(
        dir.path(),
        "farm",
        &[
            "--rdp-new-sessions-per-source-per-minute",
            "3",
            "--rdp-max-handshakes-per-source",
            "2",
        ],
    );
    let host = echo_host().await;
    pool(
        &app,
        "farm",
        json!({"hostPoolType": "Pooled", "allowedAddressRanges": ["127.0.0.0/8"], "loadBalancerType": "BreadthFirst"}),
        &host,
    )
    .await;
    // A silent host: it never answers, so its connections stay handshakes.
    let silent = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let silent_addr = silent.local_addr().expect("addr").to_string();
    pool(
        &app,
        "quiet",
        json!({"hostPoolType": "Pooled", "allowedAddressRanges": ["127.0.0.0/8"], "loadBalancerType": "BreadthFirst", "allowFrontDoor": true}),
        &silent_addr,
    )
    .await;

    // Three new users from this address: placed.
    let mut kept = Vec::new();
    for i in 0..3 {
        let mut c = open(&front_door, &format!("Cookie: mstshash=u{i}"))
            .await
            .expect("relayed");
        log_on(&mut c).await;
        kept.push(c);
    }
    // The fourth new user this minute: refused, and nothing is left behind.
    assert!(open(&front_door, "Cookie: mstshash=u3").await.is_none());
    wait_states(
        &app,
        "farm",
        &[("u0", "Active"), ("u1", "Active"), ("u2", "Active")],
    )
    .await;
    // A reconnect is not a new session.
    drop(kept.pop());
    wait_states(
        &app,
        "farm",
        &[("u0", "Active"), ("u1", "Active"), ("u2", "Disconnected")],
    )
    .await;
    let mut again = open(&front_door, "Cookie: mstshash=u2")
        .await
        .expect("reconnect");
    log_on(&mut again).await;

    // Another source (127.0.0.2), not touched by the first one's share:
    // two connections the silent host never answers hold its handshakes,
    // and its third connection is closed before it is read.
    let from_other = || async {
        let socket = tokio::net::TcpSocket::new_v4().expect("socket");
        socket
            .bind("127.0.0.2:0".parse().expect("addr"))
            .expect("bind 127.0.0.2");
        socket
            .connect(front_door.parse().expect("addr"))
            .await
            .expect("connect")
    };
    let quiet = first_pdu("tsv://MS Terminal Services Plugin.1.quiet");
    let mut held = Vec::new();
    for _ in 0..2 {
        let mut c = from_other().await;
        c.write_all(&quiet).await.expect("write");
        held.push(c);
    }
    let mut dialled = Vec::new();
    for _ in 0..2 {
        let (s, _) = tokio::time::timeout(PATIENCE, silent.accept())
            .await
            .expect("the silent host is dialled")
            .expect("accept");
        dialled.push(s);
    }
    let mut third = from_other().await;
    let mut buf = [0u8; 1];
    let closed = tokio::time::timeout(PATIENCE, third.read(&mut buf))
        .await
        .expect("closed in time");
    assert!(
        matches!(closed, Ok(0) | Err(_)),
        "a third handshake of the same source was not refused"
    );
    let bounds = [
        "deskbroker_rdp_refusals_total{reason=\"source_handshakes\"} 1",
        "deskbroker_rdp_refusals_total{reason=\"source_session_rate\"} 1",
    ];
    let metrics = metrics_when(&app, |m| bounds.iter().all(|b| m.contains(b))).await;
    for bound in bounds {
        assert!(metrics.contains(bound), "{metrics}");
    }
    // Once the host answers, those connections are no longer handshakes:
    // the source may start another. (Whichever way the slots free up: on a
    // slow machine the front door may already have given up on the silent
    // host, HOST_ANSWER_TIMEOUT, which frees them too.)
    for d in &mut dialled {
        let _ = d.write_all(b"CC").await;
    }
    for c in &mut held {
        // The answer, relayed (or the close, if the front door gave up).
        let mut cc = [0u8; 2];
        let _ = tokio::time::timeout(PATIENCE, c.read_exact(&mut cc))
            .await
            .expect("the held connection is answered or closed");
    }
    let mut fourth = from_other().await;
    fourth.write_all(&quiet).await.expect("write");
    if tokio::time::timeout(PATIENCE, silent.accept())
        .await
        .is_err()
    {
        panic!(
            "not dialled once a handshake slot was free: {}",
            app.text("/metrics").await
        );
    }
    drop(held);
    // The API kept serving meanwhile.
    app.ok("GET", "/api/v1/hostPools/farm", None, 200).await;
}

/// Rule T2 at the front door: a user the pool does not entitle is refused
/// before any host is dialled and leaves no session; an entitled one is
/// relayed, and keeps reconnecting after the entitlement is removed (S1).
#[tokio::test]
async fn the_front_door_places_only_entitled_users() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (app, front_door) = App::spawn_with_front_door(dir.path(), "farm", &[]);
    let host = echo_host().await;
    pool(
        &app,
        "farm",
        json!({"hostPoolType": "Pooled", "allowedAddressRanges": ["127.0.0.0/8"],
               "loadBalancerType": "BreadthFirst", "entitledUsers": ["alice@contoso.com"]}),
        &host,
    )
    .await;
    assert!(
        open(&front_door, "Cookie: mstshash=mallory")
            .await
            .is_none(),
        "mallory is not entitled: closed before any host"
    );
    assert_eq!(states(&app, "farm").await, vec![]);
    let mut alice = open(&front_door, "Cookie: mstshash=alice@contoso.com")
        .await
        .expect("alice is entitled");
    log_on(&mut alice).await;
    wait_states(&app, "farm", &[("alice@contoso.com", "Active")]).await;
    drop(alice);
    wait_states(&app, "farm", &[("alice@contoso.com", "Disconnected")]).await;
    // Her entitlement goes; her session stays hers (S1).
    app.ok(
        "PATCH",
        "/api/v1/hostPools/farm",
        Some(json!({"entitledUsers": ["bob@contoso.com"]})),
        200,
    )
    .await;
    let mut again = open(&front_door, "Cookie: mstshash=alice@contoso.com")
        .await
        .expect("alice reconnects to her session");
    log_on(&mut again).await;
    // Relayed to her host; a cookie changes no session's state (R4).
    wait_states(&app, "farm", &[("alice@contoso.com", "Disconnected")]).await;
}

/// Rule S9 against the real binary: a client that only completes TLS with
/// the host (all the front door can see of a logon) holds its host's
/// capacity no longer than the pool's `pendingTimeoutSeconds` after it
/// leaves, even across a restart; a cookie naming a user never changes
/// that user's session (R4); and a session whose logon the host's agent
/// confirmed (S8) lasts past its connection.
#[tokio::test]
async fn s9_a_client_that_never_logged_on_holds_no_capacity_past_its_bound() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (app, front_door) = App::spawn_with_front_door(dir.path(), "farm", &[]);
    let host = echo_host().await;
    app.ok(
        "PUT",
        "/api/v1/hostPools/farm",
        Some(
            json!({"hostPoolType": "Pooled", "allowedAddressRanges": ["127.0.0.0/8"],
                    "loadBalancerType": "DepthFirst", "maxSessionLimit": 1,
                    "pendingTimeoutSeconds": 3}),
        ),
        201,
    )
    .await;
    let credential = crate::enroll(&app, "farm", "h1", &host).await;

    // The attack: a TLS handshake's worth of bytes both ways, then gone.
    let mut c = open(&front_door, "Cookie: mstshash=mallory")
        .await
        .expect("relayed");
    log_on(&mut c).await;
    drop(c);
    wait_states(&app, "farm", &[("mallory", "Disconnected")]).await;
    // An ordinary change after the mark: once it is durable, so is the mark
    // (changes are committed in order). Then kill -9 and start again.
    app.ok(
        "PATCH",
        "/api/v1/hostPools/farm",
        Some(json!({"description": "after the mark"})),
        200,
    )
    .await;
    app.kill9();
    let (app, front_door) = App::spawn_with_front_door(dir.path(), "farm", &[]);
    // The bound was stored with the session: it ends, and h1 (limit 1)
    // takes a real user again.
    wait_states(&app, "farm", &[]).await;
    let mut bob = open(&front_door, "Cookie: mstshash=bob")
        .await
        .expect("h1 has room again");
    log_on(&mut bob).await;
    wait_states(&app, "farm", &[("bob", "Active")]).await;

    // bob's host's agent lists him: his logon is confirmed.
    let (status, v) = app
        .call_with(
            "POST",
            "/api/v1/hostPools/farm/sessionHosts/h1/heartbeat",
            Some(json!({"cpuPercent": 5.0, "sessions": [{"user": "bob", "state": "Active"}]})),
            Some(&credential),
        )
        .await;
    assert_eq!(status, 200, "{v}");
    app.ok(
        "PATCH",
        "/api/v1/hostPools/farm",
        Some(json!({"maxSessionLimit": 3})),
        200,
    )
    .await;
    drop(bob);
    wait_states(&app, "farm", &[("bob", "Disconnected")]).await;

    // Someone who knows bob's name connects as him: relayed to his host
    // (which would authenticate him), but bob's session stays Disconnected.
    let mut impostor = open(&front_door, "Cookie: mstshash=bob")
        .await
        .expect("relayed");
    log_on(&mut impostor).await;
    // carol's own connection, marked Active after the impostor's would have been.
    let mut carol = open(&front_door, "Cookie: mstshash=carol")
        .await
        .expect("relayed");
    log_on(&mut carol).await;
    wait_states(
        &app,
        "farm",
        &[("bob", "Disconnected"), ("carol", "Active")],
    )
    .await;
    drop(impostor);
    drop(carol);
    // carol's logon was never confirmed: her session ends its bound after
    // she left; bob's, confirmed, stays.
    wait_states(&app, "farm", &[("bob", "Disconnected")]).await;
}
