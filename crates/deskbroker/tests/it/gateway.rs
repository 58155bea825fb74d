//! `deskbroker gateway`: the front door as a process of its own, placing
//! users through the broker's HTTP API with a `gateway` credential (not the
//! admin token), in front of a host that records what reaches it.

use std::process::{Command, Stdio};

use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::{App, PATIENCE, eventually, exe};

#[tokio::test]
async fn a_standalone_front_door_relays_to_the_chosen_host() {
    let dir = tempfile::tempdir().unwrap();
    // The broker hands out connection files that point at the stand-alone
    // front door, wherever its operator put it.
    let (app, _) = App::spawn_with(
        dir.path(),
        "127.0.0.1:0",
        &["--rdp-public-address", "rdp.contoso.test:3389"],
    );
    let host = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let host_addr = host.local_addr().unwrap().to_string();
    app.ok(
        "PUT",
        "/api/v1/hostPools/farm",
        Some(
            json!({"hostPoolType": "Pooled", "loadBalancerType": "DepthFirst", "maxSessionLimit": 5,
                    "allowedAddressRanges": ["127.0.0.0/8"]}),
        ),
        201,
    )
    .await;
    // h1 cannot be reached (nothing listens there): the front door must
    // release that placement and use h2 (R5).
    // Bound and never listening, held to the end of the test: connecting is
    // refused, and no other test can take the port meanwhile.
    let dead = tokio::net::TcpSocket::new_v4().unwrap();
    dead.bind(([127, 0, 0, 1], 0).into()).unwrap();
    let dead_addr = dead.local_addr().unwrap().to_string();
    app.ok(
        "PUT",
        "/api/v1/hostPools/farm/sessionHosts/h1",
        Some(json!({"address": dead_addr})),
        201,
    )
    .await;
    app.ok(
        "PUT",
        "/api/v1/hostPools/farm/sessionHosts/h2",
        Some(json!({"address": host_addr})),
        201,
    )
    .await;

    // The front door's own credential: what it needs, nothing more (T1).
    let v = app
        .ok(
            "POST",
            "/api/v1/credentials",
            Some(json!({"name": "front-door-1", "role": "gateway"})),
            201,
        )
        .await;
    let token = v["token"].as_str().unwrap().to_string();
    for (method, path, body) in [
        (
            "PUT",
            "/api/v1/hostPools/farm2",
            Some(json!({"hostPoolType": "Pooled", "loadBalancerType": "BreadthFirst"})),
        ),
        (
            "PATCH",
            "/api/v1/hostPools/farm/sessionHosts/h1",
            Some(json!({"allowNewSession": false})),
        ),
        ("GET", "/api/v1/credentials", None),
        ("GET", "/api/v1/hostPools/farm/rdpFile?user=alice", None),
        (
            "POST",
            "/api/v1/hostPools/farm/registrationToken",
            Some(json!({})),
        ),
    ] {
        let (status, v) = app.call_with(method, path, body, Some(&token)).await;
        assert_eq!(
            (status, v["error"]["code"].as_str()),
            (403, Some("Forbidden")),
            "{method} {path}: {v}"
        );
    }

    let mut gw = Command::new(exe())
        .args([
            "gateway",
            "--broker",
            &app.url,
            "--rdp-listen",
            "127.0.0.1:0",
            "--rdp-default-pool",
            "farm",
        ])
        .env("DESKBROKER_TOKEN", &token)
        .env("RUST_LOG", "warn")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let (ready, _) = crate::ready_line(&mut gw, crate::SERVE_START).expect("the gateway starts");
    let front_door = ready.rdp_addr().to_string();

    let pdu = std::fs::read(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../gateway/tests/fixtures/xfreerdp-2.11.7-user.bin"
    ))
    .unwrap();
    let mut client = tokio::net::TcpStream::connect(&front_door).await.unwrap();
    client.write_all(&pdu).await.unwrap();
    let (mut upstream, _) = tokio::time::timeout(PATIENCE, host.accept())
        .await
        .expect("the host is dialled")
        .unwrap();
    let mut got = vec![0; pdu.len()];
    upstream.read_exact(&mut got).await.unwrap();
    assert_eq!(
        got, pdu,
        "the first PDU reaches the host byte for byte (R4)"
    );
    upstream.write_all(b"host says hi").await.unwrap();
    let mut back = [0u8; 12];
    client.read_exact(&mut back).await.unwrap();
    assert_eq!(&back, b"host says hi");
    // A logon's worth of bytes both ways (rule S9: without them, the
    // session would end with the connection instead of being kept).
    let from_client = vec![1u8; gateway::front_door::LOGON_EVIDENCE_CLIENT_BYTES as usize];
    client.write_all(&from_client).await.unwrap();
    let mut got = vec![0; from_client.len()];
    upstream.read_exact(&mut got).await.unwrap();
    let from_host = vec![2u8; gateway::front_door::LOGON_EVIDENCE_HOST_BYTES as usize];
    upstream.write_all(&from_host).await.unwrap();
    let mut got = vec![0; from_host.len()];
    client.read_exact(&mut got).await.unwrap();

    let active = eventually(PATIENCE, || async {
        let v = app
            .ok(
                "GET",
                "/api/v1/hostPools/farm/userSessions?user=alice",
                None,
                200,
            )
            .await;
        v["value"].as_array().is_some_and(|a| {
            a.len() == 1 && a[0]["sessionHost"] == "h2" && a[0]["sessionState"] == "Active"
        })
    })
    .await;
    assert!(
        active,
        "alice is Active on h2, and h1's placement was released"
    );
    drop(client);
    let disconnected = eventually(PATIENCE, || async {
        let v = app
            .ok(
                "GET",
                "/api/v1/hostPools/farm/userSessions?user=alice",
                None,
                200,
            )
            .await;
        v["value"][0]["sessionState"] == "Disconnected"
    })
    .await;
    assert!(disconnected, "the client left: Disconnected (R4)");

    // Rule T3 through the stand-alone front door: it holds no key, the
    // broker checks the ticket it hands on.
    app.ok(
        "PATCH",
        "/api/v1/hostPools/farm",
        Some(json!({"requireConnectionTicket": true})),
        200,
    )
    .await;
    let mut bob = tokio::net::TcpStream::connect(&front_door).await.unwrap();
    bob.write_all(&crate::wire::first_pdu("Cookie: mstshash=bob"))
        .await
        .unwrap();
    // Refused, and told so: access refused (1002), then closed.
    let mut start = [0u8; 2];
    tokio::time::timeout(PATIENCE, bob.read_exact(&mut start))
        .await
        .expect("answered in time")
        .expect("bob without a ticket is answered");
    assert_eq!(
        crate::wire::refusal(&mut bob, start).await,
        1002,
        "bob without a ticket"
    );
    let file = app.text("/api/v1/hostPools/farm/rdpFile?user=carol").await;
    assert!(
        file.starts_with("full address:s:rdp.contoso.test:3389\r\n"),
        "{file}"
    );
    let ticket = file
        .split("\r\n")
        .find_map(|l| l.strip_prefix("loadbalanceinfo:s:"))
        .expect("ticket");
    let forged = ticket.replace(":carol", ":mallory");
    let mut mallory = tokio::net::TcpStream::connect(&front_door).await.unwrap();
    mallory
        .write_all(&crate::wire::first_pdu(&forged))
        .await
        .unwrap();
    // Told: ticket refused (1001), through the stand-alone front door too.
    let mut start = [0u8; 2];
    tokio::time::timeout(PATIENCE, mallory.read_exact(&mut start))
        .await
        .expect("answered in time")
        .expect("a forged ticket is answered");
    assert_eq!(
        crate::wire::refusal(&mut mallory, start).await,
        1001,
        "a forged ticket"
    );
    let pdu = crate::wire::first_pdu(ticket);
    let mut carol = tokio::net::TcpStream::connect(&front_door).await.unwrap();
    carol.write_all(&pdu).await.unwrap();
    let (mut upstream, _) = tokio::time::timeout(PATIENCE, host.accept())
        .await
        .expect("the host is dialled for carol")
        .unwrap();
    let mut got = vec![0; pdu.len()];
    upstream.read_exact(&mut got).await.unwrap();
    assert_eq!(
        got, pdu,
        "the ticket reaches the host as the client sent it (R4)"
    );
    let placed = eventually(PATIENCE, || async {
        let v = app
            .ok("GET", "/api/v1/hostPools/farm/userSessions", None, 200)
            .await;
        let users: Vec<&str> = v["value"]
            .as_array()
            .map(|a| {
                a.iter()
                    .filter_map(|s| s["userPrincipalName"].as_str())
                    .collect()
            })
            .unwrap_or_default();
        users == ["alice", "carol"] || users == ["carol", "alice"]
    })
    .await;
    assert!(
        placed,
        "carol is placed on her ticket; bob and mallory are not"
    );
    let _ = gw.kill();
    let _ = gw.wait();
}

/// What the broker tells a gateway it refuses reads as written: one line,
/// no run of blanks (a message continued over lines in the source keeps
/// none of its indentation).
#[tokio::test]
async fn the_brokers_refusals_to_a_gateway_read_as_one_line() {
    let dir = tempfile::tempdir().unwrap();
    let (app, _) = App::spawn_with(dir.path(), "127.0.0.1:0", &["--rdp-listen", "127.0.0.1:0"]);
    app.ok(
        "PUT",
        "/api/v1/hostPools/farm",
        Some(
            json!({"hostPoolType": "Pooled", "loadBalancerType": "BreadthFirst",
                    "requireConnectionTicket": true}),
        ),
        201,
    )
    .await;
    let gateway = crate::credential(&app, "edge", "gateway", &[]).await;
    let one_line =
        |message: &str| !message.is_empty() && !message.contains("  ") && !message.contains('\n');
    for (body, status, code) in [
        (
            json!({"user": "alice@contoso.com"}),
            403,
            "InvalidConnectionTicket",
        ),
        (
            json!({"user": "alice@contoso.com", "groups": ["Sales"]}),
            403,
            "Forbidden",
        ),
    ] {
        let (got, v) = app
            .call_with(
                "POST",
                "/api/v1/hostPools/farm/connect",
                Some(body.clone()),
                Some(&gateway),
            )
            .await;
        assert_eq!(
            (got, v["error"]["code"].as_str()),
            (status, Some(code)),
            "{body}: {v}"
        );
        let message = v["error"]["message"].as_str().unwrap_or_default();
        assert!(one_line(message), "{body}: {message:?}");
    }
    // A host's tag that is refused says why, in one line too.
    let (status, v) = app
        .call(
            "PUT",
            "/api/v1/hostPools/farm/sessionHosts/h1",
            Some(json!({"address": "10.0.0.1:3389", "tags": ["not a tag"]})),
        )
        .await;
    assert_eq!(status, 400, "{v}");
    let message = v["error"]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("is not a valid tag") && one_line(message),
        "{message:?}"
    );
}
