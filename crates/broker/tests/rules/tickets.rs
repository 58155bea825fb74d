//! Rule T3: a connection ticket places its user only until it expires,
//! give or take `api::ticket::TICKET_LEEWAY_SECONDS` for clocks; after
//! that the connect that carries it is refused (403 `InvalidConnectionTicket`)
//! and places nothing. The RDP front door's placer takes the same path
//! (`Broker::connect`), so what holds here holds at the door.

use std::time::Duration;

use api::ticket::{TICKET_LEEWAY_SECONDS, Ticket};
use broker::testkit::Kit;
use serde_json::{Value, json};

/// Pool `secure`: tickets required, living the shortest lifetime a pool
/// takes (30 s), one host.
async fn secure_pool(kit: &Kit) {
    kit.create_pool(
        "secure",
        json!({"hostPoolType": "Pooled", "loadBalancerType": "BreadthFirst",
               "allowedAddressRanges": ["127.0.0.0/8"],
               "requireConnectionTicket": true, "ticketLifetimeSeconds": 30}),
    )
    .await;
    kit.ok(
        "PUT",
        "/api/v1/hostPools/secure/sessionHosts/h1",
        Some(json!({"address": "127.0.0.1:3389"})),
        201,
    )
    .await;
}

/// Alice's ticket, as her connection file carries it.
async fn ticket(kit: &Kit) -> String {
    let file = kit
        .text("/api/v1/hostPools/secure/rdpFile?user=alice")
        .await;
    file.split("\r\n")
        .find_map(|l| l.strip_prefix("loadbalanceinfo:s:"))
        .unwrap_or_else(|| panic!("no ticket in the connection file: {file}"))
        .trim_end()
        .to_string()
}

async fn connect_with(kit: &Kit, ticket: &str) -> (u16, Value) {
    kit.call(
        "POST",
        "/api/v1/hostPools/secure/connect",
        Some(json!({"user": "alice", "ticket": ticket})),
    )
    .await
}

#[tokio::test(start_paused = true)]
async fn an_expired_ticket_is_refused_once_its_leeway_has_passed() {
    let kit = Kit::open_with(|s| s.rdp_front_door = Some("rdp.contoso.com:3389".into())).await;
    secure_pool(&kit).await;
    let ticket = ticket(&kit).await;
    let expires = Ticket::parse(&ticket)
        .expect("a ticket")
        .expires_unix_seconds;
    assert_eq!(
        expires * 1000,
        kit.now_ms() as u64 + 30_000,
        "it lives the pool's ticketLifetimeSeconds"
    );
    // While it is fresh, it places alice.
    let (status, v) = connect_with(&kit, &ticket).await;
    assert_eq!(status, 200, "the fresh ticket: {v}");
    let id = v["sessionId"].as_str().expect("id").to_string();
    kit.ok(
        "DELETE",
        &format!("/api/v1/hostPools/secure/userSessions/{id}"),
        None,
        204,
    )
    .await;

    // The last second the leeway still covers: accepted.
    let last_good_ms = (expires + TICKET_LEEWAY_SECONDS) as i64 * 1000 + 999;
    kit.advance(Duration::from_millis((last_good_ms - kit.now_ms()) as u64))
        .await;
    let (status, v) = connect_with(&kit, &ticket).await;
    assert_eq!(status, 200, "refused within its leeway: {v}");
    let id = v["sessionId"].as_str().expect("id").to_string();
    kit.ok(
        "DELETE",
        &format!("/api/v1/hostPools/secure/userSessions/{id}"),
        None,
        204,
    )
    .await;
    // A millisecond later, the ticket has expired: refused, nothing placed.
    kit.advance(Duration::from_millis(1)).await;
    let (status, v) = connect_with(&kit, &ticket).await;
    assert_eq!(
        (status, &v["error"]["code"]),
        (403, &json!("InvalidConnectionTicket")),
        "{v}"
    );
    assert!(
        v["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("expired")),
        "{v}"
    );
    assert_eq!(kit.states("secure").await, []);
}
