//! Rule T3 through the API, against the real binary: who may have a
//! connection ticket made, for whom, what the file carries, and that the
//! broker places on a ticket only as it was issued. The front door with
//! real xfreerdp and xrdp is in `rdp.rs`.

use serde_json::{Value, json};

use crate::{App, TOKEN, credential};

/// The `loadbalanceinfo` value of an `.rdp` file.
fn load_balance_info(file: &str) -> String {
    file.split("\r\n")
        .find_map(|l| l.strip_prefix("loadbalanceinfo:s:"))
        .unwrap_or_else(|| panic!("no loadbalanceinfo in {file:?}"))
        .to_string()
}

/// `GET rdpFile` with `token`: (status, body text).
async fn rdp_file(app: &App, query: &str, token: &str) -> (u16, Value) {
    app.call_with(
        "GET",
        &format!("/api/v1/hostPools/farm/rdpFile{query}"),
        None,
        Some(token),
    )
    .await
}

async fn sessions(app: &App) -> usize {
    app.ok("GET", "/api/v1/hostPools/farm/userSessions", None, 200)
        .await["value"]
        .as_array()
        .map_or(0, Vec::len)
}

#[tokio::test]
async fn tickets_are_issued_to_portals_for_entitled_users_and_place_only_as_issued() {
    let dir = tempfile::tempdir().unwrap();
    let (app, _) = App::spawn_with(dir.path(), "127.0.0.1:0", &["--rdp-listen", "127.0.0.1:0"]);
    app.ok(
        "PUT",
        "/api/v1/hostPools/farm",
        Some(
            json!({"hostPoolType": "Pooled", "loadBalancerType": "BreadthFirst",
                    "entitledUsers": ["alice@contoso.com"], "entitledGroups": ["Sales"],
                    "requireConnectionTicket": true, "ticketLifetimeSeconds": 120}),
        ),
        201,
    )
    .await;
    app.ok(
        "PUT",
        "/api/v1/hostPools/farm/sessionHosts/h1",
        Some(json!({"address": "10.0.0.1:3389"})),
        201,
    )
    .await;
    let pool = app.ok("GET", "/api/v1/hostPools/farm", None, 200).await;
    assert_eq!(pool["requireConnectionTicket"], true);
    assert_eq!(pool["ticketLifetimeSeconds"], 120);

    // Without a user: the plain file, for every role, as before.
    let reader = credential(&app, "auditor", "reader", &[]).await;
    let (status, plain) = rdp_file(&app, "", &reader).await;
    assert_eq!(status, 200);
    assert_eq!(
        load_balance_info(plain.as_str().unwrap()),
        "tsv://MS Terminal Services Plugin.1.farm"
    );

    // A ticket places a user: a reader or operator may not have one made.
    let operator = credential(&app, "helpdesk", "operator", &[]).await;
    for token in [&reader, &operator] {
        let (status, v) = rdp_file(&app, "?user=alice@contoso.com", token).await;
        assert_eq!(
            (status, v["error"]["code"].as_str()),
            (403, Some("Forbidden")),
            "{v}"
        );
    }

    // A portal may, for entitled users only (T2 at issue, with the groups
    // the portal vouches for).
    let portal = credential(&app, "portal", "portal", &[]).await;
    let (status, v) = rdp_file(&app, "?user=mallory@contoso.com", &portal).await;
    assert_eq!(
        (status, v["error"]["code"].as_str()),
        (403, Some("NotEntitled")),
        "{v}"
    );
    let (status, file) =
        rdp_file(&app, "?user=bob@contoso.com&groups=Staff,%20Sales", &portal).await;
    assert_eq!(status, 200, "{file}");
    let bob_ticket = load_balance_info(file.as_str().unwrap());
    assert!(bob_ticket.starts_with("dbt1:farm:"), "{bob_ticket}");
    assert!(bob_ticket.ends_with(":bob@contoso.com"), "{bob_ticket}");
    let (status, file) = rdp_file(&app, "?user=alice@contoso.com", &portal).await;
    assert_eq!(status, 200);
    let alice_ticket = load_balance_info(file.as_str().unwrap());
    // Bad input is refused whole: a user the broker would never place, an
    // unknown parameter.
    for query in ["?user=", "?user=a%20b", "?user=alice&color=red"] {
        let (status, v) = rdp_file(&app, query, &portal).await;
        assert_eq!(
            (status, v["error"]["code"].as_str()),
            (400, Some("InvalidParameter")),
            "{query}: {v}"
        );
    }
    // A ticket must fit an RDP client's first PDU: too long a user is a
    // clear 400, not a file no client can use.
    let long = format!("{}@contoso.com", "u".repeat(200));
    app.ok(
        "PATCH",
        "/api/v1/hostPools/farm",
        Some(json!({"entitledUsers": ["alice@contoso.com", long]})),
        200,
    )
    .await;
    let (status, v) = rdp_file(&app, &format!("?user={long}"), &portal).await;
    assert_eq!(
        (status, v["error"]["code"].as_str()),
        (400, Some("InvalidParameter")),
        "{v}"
    );
    assert!(
        v["error"]["message"]
            .as_str()
            .unwrap()
            .contains("first PDU"),
        "{v}"
    );

    // The broker places on a ticket only its own user in its own pool.
    let connect = |user: &str, ticket: &str| json!({"user": user, "ticket": ticket});
    let tampered = alice_ticket.replace(":alice@", ":eve@");
    let foreign = api::ticket::TicketKey::derive("another broker's admin token, 32+ chars")
        .issue("farm", "alice@contoso.com", 4_000_000_000)
        .unwrap();
    let expired = api::ticket::TicketKey::derive(&crate::signing_secret(dir.path()).await)
        .issue("farm", "alice@contoso.com", 1_000_000_000)
        .unwrap();
    // The admin token signs nothing: a ticket derived from it is forged.
    let from_admin_token = api::ticket::TicketKey::derive(TOKEN)
        .issue("farm", "alice@contoso.com", 4_000_000_000)
        .unwrap();
    for (user, ticket) in [
        ("eve@contoso.com", tampered.as_str()),
        ("alice@contoso.com", foreign.as_str()),
        ("alice@contoso.com", expired.as_str()),
        ("alice@contoso.com", from_admin_token.as_str()),
        // Honest, but for someone else than the request says.
        ("eve@contoso.com", alice_ticket.as_str()),
        ("alice@contoso.com", "dbt1:farm:junk"),
    ] {
        let (status, v) = app
            .call_with(
                "POST",
                "/api/v1/hostPools/farm/connect",
                Some(connect(user, ticket)),
                Some(&portal),
            )
            .await;
        assert_eq!(
            (status, v["error"]["code"].as_str()),
            (403, Some("InvalidConnectionTicket")),
            "{ticket}: {v}"
        );
    }
    assert_eq!(sessions(&app).await, 0, "nothing was placed");
    // bob is entitled through a group the portal vouched for when the
    // ticket was made; the ticket carries that decision.
    let (status, v) = app
        .call_with(
            "POST",
            "/api/v1/hostPools/farm/connect",
            Some(connect("bob@contoso.com", &bob_ticket)),
            Some(&portal),
        )
        .await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(v["sessionHost"], "h1");
    let metrics = app.text("/metrics").await;
    assert!(
        metrics.contains("deskbroker_ticket_refusals_total{reason=\"forged_ticket\"}"),
        "{metrics}"
    );

    // A pool setting out of range is refused whole.
    app.refused(
        "PATCH",
        "/api/v1/hostPools/farm",
        Some(json!({"ticketLifetimeSeconds": 5, "description": "x"})),
        400,
        "InvalidParameter",
    )
    .await;
    let pool = app.ok("GET", "/api/v1/hostPools/farm", None, 200).await;
    assert_eq!(
        (
            pool["ticketLifetimeSeconds"].as_u64(),
            pool["description"].as_str()
        ),
        (Some(120), Some(""))
    );
}

#[tokio::test]
async fn without_a_front_door_there_is_no_connection_file() {
    let dir = tempfile::tempdir().unwrap();
    let app = App::spawn(&dir);
    app.ok(
        "PUT",
        "/api/v1/hostPools/farm",
        Some(json!({"hostPoolType": "Pooled", "loadBalancerType": "BreadthFirst"})),
        201,
    )
    .await;
    app.refused(
        "GET",
        "/api/v1/hostPools/farm/rdpFile?user=alice",
        None,
        404,
        "NotFound",
    )
    .await; // Nor, without an RD Gateway, a file through one: the request asks
    // for what this broker does not offer.
    let refused = app
        .refused(
            "GET",
            "/api/v1/hostPools/farm/rdpFile?user=alice&gateway=true",
            None,
            400,
            "InvalidParameter",
        )
        .await;
    assert!(
        refused["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("--gateway-listen")),
        "{refused}"
    );
}

/// A pool that requires tickets, with one host, on a broker with a front
/// door (tickets are for its connection files).
async fn ticket_only_pool(app: &App) {
    app.ok(
        "PUT",
        "/api/v1/hostPools/farm",
        Some(
            json!({"hostPoolType": "Pooled", "loadBalancerType": "BreadthFirst",
                    "entitledGroups": ["Sales"], "requireConnectionTicket": true}),
        ),
        201,
    )
    .await;
    app.ok(
        "PUT",
        "/api/v1/hostPools/farm/sessionHosts/h1",
        Some(json!({"address": "10.0.0.1:3389"})),
        201,
    )
    .await;
}

/// The ticket of `user`'s connection file, made with the admin token.
async fn ticket_of(app: &App, user: &str) -> String {
    let (status, file) = rdp_file(app, &format!("?user={user}"), TOKEN).await;
    assert_eq!(status, 200, "{file}");
    load_balance_info(file.as_str().unwrap())
}

/// Rule T3 is the broker's own: in a pool that requires tickets, a connect
/// without one is refused to every credential but the admin's — a
/// credential stolen from a front door or a portal places nobody the broker
/// issued no ticket for — and a front door cannot vouch for groups (T2).
#[tokio::test]
async fn the_broker_itself_requires_tickets_and_takes_groups_from_no_front_door() {
    let dir = tempfile::tempdir().unwrap();
    let (app, _) = App::spawn_with(dir.path(), "127.0.0.1:0", &["--rdp-listen", "127.0.0.1:0"]);
    ticket_only_pool(&app).await;
    let gateway = credential(&app, "edge", "gateway", &[]).await;
    let portal = credential(&app, "portal", "portal", &[]).await;
    for (who, token) in [("gateway", &gateway), ("portal", &portal)] {
        let (status, v) = app
            .call_with(
                "POST",
                "/api/v1/hostPools/farm/connect",
                Some(json!({"user": "mallory@contoso.com", "groups": ["Sales"]})),
                Some(token),
            )
            .await;
        assert_eq!(status, 403, "{who}: {v}");
        let (status, v) = app
            .call_with(
                "POST",
                "/api/v1/hostPools/farm/connect",
                Some(json!({"user": "mallory@contoso.com"})),
                Some(token),
            )
            .await;
        assert_eq!(
            (status, v["error"]["code"].as_str()),
            (403, Some("InvalidConnectionTicket")),
            "{who}: {v}"
        );
    }
    assert_eq!(sessions(&app).await, 0, "nothing was placed");
    // With a ticket, the gateway places the user the ticket names; its
    // groups are refused even then (it signs nobody in).
    app.ok(
        "PATCH",
        "/api/v1/hostPools/farm",
        Some(json!({"entitledUsers": ["alice@contoso.com"]})),
        200,
    )
    .await;
    let ticket = ticket_of(&app, "alice@contoso.com").await;
    let (status, v) = app
        .call_with(
            "POST",
            "/api/v1/hostPools/farm/connect",
            Some(json!({"user": "alice@contoso.com", "ticket": ticket, "groups": ["Sales"]})),
            Some(&gateway),
        )
        .await;
    assert_eq!(
        (status, v["error"]["code"].as_str()),
        (403, Some("Forbidden")),
        "{v}"
    );
    let (status, v) = app
        .call_with(
            "POST",
            "/api/v1/hostPools/farm/connect",
            Some(json!({"user": "alice@contoso.com", "ticket": ticket})),
            Some(&gateway),
        )
        .await;
    assert_eq!(status, 200, "{v}");
    // The admin may place without one (an operator's tool, a test), and
    // vouch for groups.
    app.ok(
        "POST",
        "/api/v1/hostPools/farm/connect",
        Some(json!({"user": "bob@contoso.com", "groups": ["Sales"]})),
        200,
    )
    .await;
    assert_eq!(sessions(&app).await, 2);
}

/// A broker on `dir` with a front door, and the ticket-only pool `farm`
/// that entitles alice, bob and carol.
async fn three_users_ticket_pool(dir: &std::path::Path) -> App {
    let (app, _) = App::spawn_with(dir, "127.0.0.1:0", &["--rdp-listen", "127.0.0.1:0"]);
    ticket_only_pool(&app).await;
    app.ok(
        "PATCH",
        "/api/v1/hostPools/farm",
        Some(
            json!({"entitledUsers": ["alice@contoso.com", "bob@contoso.com", "carol@contoso.com"]}),
        ),
        200,
    )
    .await;
    app
}

/// Tickets are signed with a random key of the broker's own, kept in its
/// store: another broker with the same admin token but its own store does
/// not take them, the same broker does after a restart, and a rotation
/// signs with a new key while the old one still verifies.
#[tokio::test]
async fn tickets_are_signed_with_the_stores_own_key_which_rotates() {
    let dir = tempfile::tempdir().unwrap();
    let app = three_users_ticket_pool(dir.path()).await;
    let alice = ticket_of(&app, "alice@contoso.com").await;
    let connect = |user: &str, ticket: &str| json!({"user": user, "ticket": ticket});

    // Another broker, the same admin token, its own store.
    let other_dir = tempfile::tempdir().unwrap();
    let (other, _) = App::spawn_with(
        other_dir.path(),
        "127.0.0.1:0",
        &["--rdp-listen", "127.0.0.1:0"],
    );
    ticket_only_pool(&other).await;
    other
        .refused(
            "POST",
            "/api/v1/hostPools/farm/connect",
            Some(connect("alice@contoso.com", &alice)),
            403,
            "InvalidConnectionTicket",
        )
        .await;

    // Rotation: only the admin; the old ticket still places, new ones
    // are signed otherwise.
    let operator = credential(&app, "helpdesk", "operator", &[]).await;
    let (status, _) = app
        .call_with("POST", "/api/v1/signingKeys/rotate", None, Some(&operator))
        .await;
    assert_eq!(status, 403);
    let first_secret = crate::signing_secret(dir.path()).await;
    let rotated = app
        .ok("POST", "/api/v1/signingKeys/rotate", None, 200)
        .await;
    assert_eq!(rotated["verifyingKeys"], 2, "{rotated}");
    let bob = ticket_of(&app, "bob@contoso.com").await;
    // bob's ticket is signed with the new key, not the first one.
    let first_key = api::ticket::TicketKey::derive(&first_secret);
    let parsed = api::ticket::Ticket::parse(&bob).unwrap();
    assert_eq!(
        first_key.verify(&parsed, "farm", 0),
        Err(api::ticket::TicketRefusal::BadSignature)
    );
    assert_ne!(crate::signing_secret(dir.path()).await, first_secret);
    app.ok(
        "POST",
        "/api/v1/hostPools/farm/connect",
        Some(connect("alice@contoso.com", &alice)),
        200,
    )
    .await;
    // A restart keeps both keys: the ticket of each places.
    drop(app);
    let (app, _) = App::spawn_with(dir.path(), "127.0.0.1:0", &["--rdp-listen", "127.0.0.1:0"]);
    for (user, ticket) in [("bob@contoso.com", &bob), ("alice@contoso.com", &alice)] {
        app.ok(
            "POST",
            "/api/v1/hostPools/farm/connect",
            Some(connect(user, ticket)),
            200,
        )
        .await;
    }
    // The rotation is in the audit log.
    let log = app
        .ok("GET", "/api/v1/auditLog?actor=admin", None, 200)
        .await;
    assert!(
        log["value"].as_array().unwrap().iter().any(|e| e["action"]
            .as_str()
            .is_some_and(|a| a.contains("signingKeys/rotate"))
            && e["outcome"] == 200),
        "{log}"
    );
}

/// After a leak, a rotation that revokes (`POST
/// /api/v1/signingKeys/revoke`, the CLI's `credential rotate-signing-key
/// --revoke-previous`) refuses at once every ticket signed before it,
/// across a restart too; tickets made after it place. A plain rotation
/// keeps older tickets valid. Only the admin may revoke, and the audit
/// log says which of the two was done.
#[tokio::test]
async fn a_revoking_rotation_refuses_every_ticket_signed_before_it() {
    let dir = tempfile::tempdir().unwrap();
    let app = three_users_ticket_pool(dir.path()).await;
    let connect = |user: &str, ticket: &str| json!({"user": user, "ticket": ticket});
    let alice = ticket_of(&app, "alice@contoso.com").await;

    // A plain rotation (here through the CLI): alice's ticket still places.
    let (ok, out, err) = app.cli(&["credential", "rotate-signing-key", "-o", "json"]);
    assert!(ok, "{err}");
    let rotated: Value = serde_json::from_str(&out).expect("JSON");
    assert_eq!(rotated["verifyingKeys"], 2, "{rotated}");
    let bob = ticket_of(&app, "bob@contoso.com").await;
    let carol_before = ticket_of(&app, "carol@contoso.com").await;
    app.ok(
        "POST",
        "/api/v1/hostPools/farm/connect",
        Some(connect("alice@contoso.com", &alice)),
        200,
    )
    .await;

    // Only the admin revokes.
    let operator = credential(&app, "helpdesk", "operator", &[]).await;
    let (status, _) = app
        .call_with("POST", "/api/v1/signingKeys/revoke", None, Some(&operator))
        .await;
    assert_eq!(status, 403);
    let (ok, out, err) = app.cli(&[
        "credential",
        "rotate-signing-key",
        "--revoke-previous",
        "-o",
        "json",
    ]);
    assert!(ok, "{err}");
    let revoked: Value = serde_json::from_str(&out).expect("JSON");
    assert_eq!(revoked["verifyingKeys"], 1, "{revoked}");

    // Every ticket made before is refused now: one signed with the first
    // key, one with the key the plain rotation made, used or not.
    for (user, ticket) in [
        ("alice@contoso.com", &alice),
        ("bob@contoso.com", &bob),
        ("carol@contoso.com", &carol_before),
    ] {
        app.refused(
            "POST",
            "/api/v1/hostPools/farm/connect",
            Some(connect(user, ticket)),
            403,
            "InvalidConnectionTicket",
        )
        .await;
    }
    assert_eq!(sessions(&app).await, 1, "only alice's first connect placed");
    // One made after places.
    let carol = ticket_of(&app, "carol@contoso.com").await;
    app.ok(
        "POST",
        "/api/v1/hostPools/farm/connect",
        Some(connect("carol@contoso.com", &carol)),
        200,
    )
    .await;

    // The store keeps the new key alone: after a restart the same holds.
    drop(app);
    let (app, _) = App::spawn_with(dir.path(), "127.0.0.1:0", &["--rdp-listen", "127.0.0.1:0"]);
    app.refused(
        "POST",
        "/api/v1/hostPools/farm/connect",
        Some(connect("bob@contoso.com", &bob)),
        403,
        "InvalidConnectionTicket",
    )
    .await;
    app.ok(
        "POST",
        "/api/v1/hostPools/farm/connect",
        Some(connect("carol@contoso.com", &carol)),
        200,
    )
    .await;

    // The audit log tells the rotation from the revocation.
    let log = app
        .ok("GET", "/api/v1/auditLog?actor=admin", None, 200)
        .await;
    let actions: Vec<(&str, &Value)> = log["value"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|e| Some((e["action"].as_str()?, &e["outcome"])))
        .collect();
    for action in [
        "POST /api/v1/signingKeys/rotate",
        "POST /api/v1/signingKeys/revoke",
    ] {
        assert!(
            actions.iter().any(|(a, o)| *a == action && **o == 200),
            "{action}: {log}"
        );
    }
}
