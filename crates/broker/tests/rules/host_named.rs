//! Rule AD4: host-named connections. In a pool whose `connectionTarget` is
//! `Host`, fetching a connection file (or a browser address) places the
//! user then, through the one connect path (a Pending session, S4; the
//! existing one, S1); the file names the chosen host's DNS name (its
//! address when it has none), and its ticket, bound to that host under
//! the signature, opens that host only: never another, not after the host
//! is gone, not for another name the client asks for. Tickets without a
//! host keep working as before.

use api::ticket::Ticket;
use broker::testkit::Kit;
use serde_json::{Value, json};

/// A broker with a front door and an RD Gateway to name in files, and the
/// pooled pool `named` (connectionTarget Host, DepthFirst so that h1 fills
/// first) with h1 (`h1.contoso.com`) and h2 (no DNS name, RDP on 3390).
async fn named_pool() -> Kit {
    let kit = Kit::open_with(|s| {
        s.rdp_front_door = Some("rdp.contoso.com:3389".into());
        s.rd_gateway = Some("gw.contoso.com:443".into());
    })
    .await;
    kit.create_pool(
        "named",
        json!({"hostPoolType": "Pooled", "loadBalancerType": "DepthFirst",
               "maxSessionLimit": 10, "connectionTarget": "Host"}),
    )
    .await;
    kit.ok(
        "PUT",
        "/api/v1/hostPools/named/sessionHosts/h1",
        Some(json!({"address": "10.0.0.1:3389", "dnsName": "h1.contoso.com"})),
        201,
    )
    .await;
    kit.ok(
        "PUT",
        "/api/v1/hostPools/named/sessionHosts/h2",
        Some(json!({"address": "10.0.0.2:3390"})),
        201,
    )
    .await;
    kit
}

/// The value of setting `name` in an `.rdp` file.
fn setting<'a>(file: &'a str, name: &str) -> Option<&'a str> {
    file.split("\r\n").find_map(|l| {
        l.strip_prefix(name)
            .and_then(|rest| rest.split_once(':'))
            .map(|(_, v)| v)
    })
}

/// Alice's file of pool `named` (through the gateway with `gateway`).
async fn file(kit: &Kit, gateway: bool) -> String {
    kit.text(&format!(
        "/api/v1/hostPools/named/rdpFile?user=alice&gateway={gateway}"
    ))
    .await
}

/// The ticket a file carries (front door or gateway file).
fn ticket_of(file: &str) -> String {
    setting(file, "loadbalanceinfo:")
        .or_else(|| setting(file, "gatewayaccesstoken:"))
        .unwrap_or_else(|| panic!("no ticket in {file:?}"))
        .trim_end()
        .to_string()
}

async fn connect(kit: &Kit, body: Value) -> (u16, Value) {
    kit.call("POST", "/api/v1/hostPools/named/connect", Some(body))
        .await
}

/// Asserts a refusal as a host-bound ticket's: 403
/// `InvalidConnectionTicket`, saying to fetch the file again.
fn assert_fetch_again(status: u16, v: &Value, why: &str) {
    assert_eq!(
        (status, v["error"]["code"].as_str()),
        (403, Some("InvalidConnectionTicket")),
        "{v}"
    );
    let message = v["error"]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("fetch the connection file again") && message.contains(why),
        "{message}"
    );
}

#[tokio::test(start_paused = true)]
async fn fetching_a_file_places_a_pending_session_on_the_host_it_names() {
    let kit = named_pool().await;
    let file = file(&kit, false).await;
    // Placed now: a Pending session on h1 (DepthFirst), which the file names
    // by its DNS name; port 3389 goes unsaid.
    let sessions = kit.sessions("named").await;
    assert_eq!(sessions.len(), 1, "{sessions:?}");
    assert_eq!(
        (
            sessions[0]["sessionHost"].as_str(),
            sessions[0]["sessionState"].as_str()
        ),
        (Some("h1"), Some("Pending"))
    );
    assert_eq!(setting(&file, "full address:"), Some("h1.contoso.com"));
    let ticket = Ticket::parse(&ticket_of(&file)).expect("a ticket");
    assert_eq!(
        (ticket.pool.as_str(), ticket.host.as_deref()),
        ("named", Some("h1"))
    );

    // S1: a second fetch gives the same host and session, nothing more.
    let again = self::file(&kit, false).await;
    assert_eq!(setting(&again, "full address:"), Some("h1.contoso.com"));
    assert_eq!(kit.sessions("named").await.len(), 1);

    // The ticket's connect is sent back to that session (as the doors' is),
    // answered as the ticket's own (not a reconnect), so that the door that
    // carries it owns the session's marks.
    let (status, v) = connect(&kit, json!({"user": "alice", "ticket": ticket_of(&file)})).await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(
        (
            v["sessionHost"].as_str(),
            v["sessionId"].as_str(),
            &v["reconnect"]
        ),
        (Some("h1"), sessions[0]["id"].as_str(), &json!(false))
    );

    // The placement is recorded as a connect's is, with its session.
    let log = kit.ok("GET", "/api/v1/auditLog", None, 200).await;
    let placed = format!(
        "hostPools/named/userSessions/{}",
        sessions[0]["id"].as_str().unwrap_or_default()
    );
    assert!(
        log["value"]
            .as_array()
            .is_some_and(|e| e.iter().any(|e| e["target"] == json!(placed))),
        "no entry for {placed}: {log}"
    );
}

#[tokio::test(start_paused = true)]
async fn a_host_without_a_dns_name_is_named_by_its_address_and_gateway_files_name_it_too() {
    let kit = named_pool().await;
    // h1 is drained: the file's placement goes to h2, which has no DNS name.
    kit.ok(
        "PATCH",
        "/api/v1/hostPools/named/sessionHosts/h1",
        Some(json!({"allowNewSession": false})),
        200,
    )
    .await;
    let file = file(&kit, true).await;
    assert_eq!(setting(&file, "full address:"), Some("10.0.0.2:3390"));
    assert_eq!(
        setting(&file, "gatewayhostname:"),
        Some("gw.contoso.com:443")
    );
    let ticket = Ticket::parse(&ticket_of(&file)).expect("a ticket");
    assert_eq!(ticket.host.as_deref(), Some("h2"));
    // Through the gateway, the target the file names is what the client
    // asks for: h2's address (with or without the port) opens h2.
    for target in ["10.0.0.2", "10.0.0.2:3390"] {
        let (status, v) = connect(
            &kit,
            json!({"user": "alice", "ticket": ticket_of(&file), "target": target}),
        )
        .await;
        assert_eq!(
            (status, v["sessionHost"].as_str()),
            (200, Some("h2")),
            "{v}"
        );
    }
}

#[tokio::test(start_paused = true)]
async fn a_host_bound_ticket_is_refused_for_any_other_target() {
    let kit = named_pool().await;
    let ticket = ticket_of(&file(&kit, true).await);
    // Its host's DNS name in any case opens it.
    let (status, v) = connect(
        &kit,
        json!({"user": "alice", "ticket": ticket, "target": "H1.Contoso.COM"}),
    )
    .await;
    assert_eq!(
        (status, v["sessionHost"].as_str()),
        (200, Some("h1")),
        "{v}"
    );
    // Another host's name or address, the pool's name: refused, whatever
    // the pool could otherwise do for alice.
    for target in ["h2", "10.0.0.2", "named", "h1.contoso.com.evil.example", ""] {
        let (status, v) = connect(
            &kit,
            json!({"user": "alice", "ticket": ticket, "target": target}),
        )
        .await;
        assert_fetch_again(status, &v, "");
    }
    // A client that edits the ticket's host: the signature no longer fits.
    let forged = ticket.replacen("named/h1:", "named/h2:", 1);
    assert_ne!(forged, ticket);
    let (status, v) = connect(&kit, json!({"user": "alice", "ticket": forged})).await;
    assert_eq!(
        (status, v["error"]["code"].as_str()),
        (403, Some("InvalidConnectionTicket")),
        "{v}"
    );
    assert!(
        v["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("not signed by this broker")),
        "{v}"
    );
    // Only the one session of the fetch, on h1.
    let sessions = kit.sessions("named").await;
    assert_eq!(sessions.len(), 1);
    assert_eq!(sessions[0]["sessionHost"], json!("h1"));
}

#[tokio::test(start_paused = true)]
async fn a_ticket_whose_host_is_gone_never_lands_on_another() {
    let kit = named_pool().await;
    let ticket = ticket_of(&file(&kit, false).await);
    kit.ok(
        "DELETE",
        "/api/v1/hostPools/named/sessionHosts/h1?force=true",
        None,
        204,
    )
    .await;
    // h2 could take alice, but the ticket opens h1 only.
    let (status, v) = connect(&kit, json!({"user": "alice", "ticket": ticket})).await;
    assert_fetch_again(status, &v, "no longer in host pool named");
    assert_eq!(kit.sessions("named").await, Vec::<Value>::new());
    // A host registered again under the name is that name's host: the
    // ticket opens it (the operator chose to give it the name).
    kit.ok(
        "PUT",
        "/api/v1/hostPools/named/sessionHosts/h1",
        Some(json!({"address": "10.0.0.9:3389"})),
        201,
    )
    .await;
    let (status, v) = connect(&kit, json!({"user": "alice", "ticket": ticket})).await;
    assert_eq!(
        (status, v["sessionHost"].as_str()),
        (200, Some("h1")),
        "{v}"
    );
}

#[tokio::test(start_paused = true)]
async fn after_the_session_ended_the_ticket_opens_its_host_only_while_it_can_take_the_user() {
    let kit = named_pool().await;
    let ticket = ticket_of(&file(&kit, false).await);
    let id = kit.sessions("named").await[0]["id"]
        .as_str()
        .expect("id")
        .to_string();
    kit.ok(
        "DELETE",
        &format!("/api/v1/hostPools/named/userSessions/{id}"),
        None,
        204,
    )
    .await;
    // h1 can take alice: a new session there.
    let (status, v) = connect(&kit, json!({"user": "alice", "ticket": ticket})).await;
    assert_eq!(
        (status, v["sessionHost"].as_str()),
        (200, Some("h1")),
        "{v}"
    );
    let id = v["sessionId"].as_str().expect("id").to_string();
    kit.ok(
        "DELETE",
        &format!("/api/v1/hostPools/named/userSessions/{id}"),
        None,
        204,
    )
    .await;
    // Drained: refused, and h2 gets nobody.
    kit.ok(
        "PATCH",
        "/api/v1/hostPools/named/sessionHosts/h1",
        Some(json!({"allowNewSession": false})),
        200,
    )
    .await;
    let (status, v) = connect(&kit, json!({"user": "alice", "ticket": ticket})).await;
    assert_fetch_again(status, &v, "drain mode");
    assert_eq!(kit.sessions("named").await, Vec::<Value>::new());
    // The user's session on another host (placed without the ticket) is
    // no reason to open h1, nor to send the ticket there.
    kit.ok(
        "PATCH",
        "/api/v1/hostPools/named/sessionHosts/h1",
        Some(json!({"allowNewSession": true})),
        200,
    )
    .await;
    kit.ok(
        "POST",
        "/api/v1/hostPools/named/connect",
        Some(json!({"user": "alice", "exclude": ["h1"]})),
        200,
    )
    .await;
    let (status, v) = connect(&kit, json!({"user": "alice", "ticket": ticket})).await;
    assert_fetch_again(status, &v, "");
    // A door that could not reach the ticket's host does not get another
    // host for it.
    let bob = ticket_for(&kit, "bob").await;
    let bound = Ticket::parse(&bob).expect("a ticket").host.expect("a host");
    let (status, v) = connect(
        &kit,
        json!({"user": "bob", "ticket": bob, "exclude": [bound]}),
    )
    .await;
    assert_fetch_again(status, &v, "");
}

/// `user`'s front-door file's ticket in pool `named`.
async fn ticket_for(kit: &Kit, user: &str) -> String {
    ticket_of(
        &kit.text(&format!("/api/v1/hostPools/named/rdpFile?user={user}"))
            .await,
    )
}

#[tokio::test(start_paused = true)]
async fn tickets_without_a_host_keep_working_and_pool_files_place_nobody() {
    let kit = named_pool().await;
    kit.patch_pool("named", json!({"connectionTarget": "Pool"}))
        .await;
    let file = file(&kit, false).await;
    // Today's file: the front door, a ticket without a host, nobody placed.
    assert_eq!(
        setting(&file, "full address:"),
        Some("rdp.contoso.com:3389")
    );
    let ticket = ticket_of(&file);
    assert_eq!(Ticket::parse(&ticket).expect("a ticket").host, None);
    assert_eq!(kit.sessions("named").await, Vec::<Value>::new());
    let gateway = self::file(&kit, true).await;
    assert_eq!(setting(&gateway, "full address:"), Some("named"));
    // A pool switched to Host honours the tickets it issued before.
    kit.patch_pool("named", json!({"connectionTarget": "Host"}))
        .await;
    let (status, v) = connect(&kit, json!({"user": "alice", "ticket": ticket})).await;
    assert_eq!(
        (status, v["sessionHost"].as_str()),
        (200, Some("h1")),
        "{v}"
    );
}

#[tokio::test(start_paused = true)]
async fn a_browser_address_places_the_user_and_binds_its_ticket() {
    let kit = named_pool().await;
    let v = kit
        .ok(
            "GET",
            "/api/v1/hostPools/named/webUrl?user=carol",
            None,
            200,
        )
        .await;
    let url = v["url"].as_str().expect("a url");
    let encoded = url.split_once("#ticket=").expect("a ticket").1;
    let ticket = percent_encoding::percent_decode_str(encoded)
        .decode_utf8()
        .expect("utf-8")
        .to_string();
    assert_eq!(
        Ticket::parse(&ticket).expect("a ticket").host.as_deref(),
        Some("h1")
    );
    assert_eq!(
        kit.states("named").await,
        [("carol".into(), "Pending".into())]
    );
}

#[tokio::test(start_paused = true)]
async fn dns_names_and_connection_targets_are_checked_and_kept() {
    let kit = named_pool().await;
    assert_eq!(
        kit.host("named", "h1").await["dnsName"],
        json!("h1.contoso.com")
    );
    assert_eq!(kit.host("named", "h2").await["dnsName"], json!(null));
    let long = format!("{}.com", vec!["a".repeat(63); 4].join("."));
    assert!(long.len() > 253);
    for bad in [
        "h1.contoso.com.",
        "h1..contoso.com",
        "-h1.contoso.com",
        "h1-.contoso.com",
        "h1_x.contoso.com",
        "h1.contoso.com\nx",
        "h1.contoso.com:3389",
        "10.0.0.1",
        "",
        &format!("{}.com", "a".repeat(64)),
        &long,
    ] {
        let v = kit
            .refused(
                "PATCH",
                "/api/v1/hostPools/named/sessionHosts/h2",
                Some(json!({ "dnsName": bad })),
                400,
                "InvalidParameter",
            )
            .await;
        assert!(
            v["error"]["message"]
                .as_str()
                .is_some_and(|m| m.starts_with("dnsName:")),
            "{bad:?}: {v}"
        );
    }
    assert_eq!(kit.host("named", "h2").await["dnsName"], json!(null));
    // Set, then cleared with null.
    let v = kit
        .ok(
            "PATCH",
            "/api/v1/hostPools/named/sessionHosts/h2",
            Some(json!({"dnsName": "H2.Contoso.com"})),
            200,
        )
        .await;
    assert_eq!(v["dnsName"], json!("H2.Contoso.com"));
    let v = kit
        .ok(
            "PATCH",
            "/api/v1/hostPools/named/sessionHosts/h2",
            Some(json!({"dnsName": null})),
            200,
        )
        .await;
    assert_eq!(v["dnsName"], json!(null));
    // A pool's target is one of the two.
    kit.refused(
        "PATCH",
        "/api/v1/hostPools/named",
        Some(json!({"connectionTarget": "Elsewhere"})),
        400,
        "InvalidParameter",
    )
    .await;
    let pool = kit.ok("GET", "/api/v1/hostPools/named", None, 200).await;
    assert_eq!(pool["connectionTarget"], json!("Host"));
    // A new pool names the pool, as before.
    kit.create_pool(
        "plain",
        json!({"hostPoolType": "Pooled", "loadBalancerType": "BreadthFirst"}),
    )
    .await;
    let plain = kit.ok("GET", "/api/v1/hostPools/plain", None, 200).await;
    assert_eq!(plain["connectionTarget"], json!("Pool"));
}

#[tokio::test(start_paused = true)]
async fn a_host_reports_its_dns_name_at_registration_and_does_not_rename_itself() {
    let kit = named_pool().await;
    let token = kit.registration_token("named", 3600).await;
    let (status, v) = kit
        .call_as(
            None,
            "POST",
            "/api/v1/register",
            Some(
                json!({"token": token, "name": "h3", "address": "10.0.0.3:3389",
                        "dnsName": "h3.contoso.com"}),
            ),
        )
        .await;
    assert_eq!(status, 201, "{v}");
    assert_eq!(v["sessionHost"]["dnsName"], json!("h3.contoso.com"));
    let credential = v["hostCredential"]
        .as_str()
        .expect("credential")
        .to_string();
    // Registering again with its credential: the same name is fine, another
    // is the administrator's to give.
    let again = |dns: &str| json!({"token": token, "name": "h3", "address": "10.0.0.3:3389", "dnsName": dns});
    let (status, v) = kit
        .call_as(
            Some(&credential),
            "POST",
            "/api/v1/register",
            Some(again("H3.contoso.com")),
        )
        .await;
    assert_eq!(status, 200, "{v}");
    // Each registration hands the host a new credential.
    let credential = v["hostCredential"]
        .as_str()
        .expect("credential")
        .to_string();
    let (status, v) = kit
        .call_as(
            Some(&credential),
            "POST",
            "/api/v1/register",
            Some(again("h1.contoso.com")),
        )
        .await;
    assert_eq!(
        (status, v["error"]["code"].as_str()),
        (403, Some("Forbidden")),
        "{v}"
    );
    // The same name in another case is the same name, as the host spells it.
    assert_eq!(
        kit.host("named", "h3").await["dnsName"],
        json!("H3.contoso.com")
    );
    // A bad one is refused naming the field.
    let token = kit.registration_token("named", 3600).await;
    let (status, v) = kit
        .call_as(
            None,
            "POST",
            "/api/v1/register",
            Some(
                json!({"token": token, "name": "h4", "address": "10.0.0.4:3389",
                        "dnsName": "h4.contoso.com/x"}),
            ),
        )
        .await;
    assert_eq!(
        (status, v["error"]["code"].as_str()),
        (400, Some("InvalidParameter")),
        "{v}"
    );
    assert!(
        v["error"]["message"]
            .as_str()
            .is_some_and(|m| m.starts_with("dnsName:")),
        "{v}"
    );
}
