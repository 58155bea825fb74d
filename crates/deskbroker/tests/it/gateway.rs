//! `deskbroker gateway`: the front door as a process of its own, placing
//! users through the broker's HTTP API, in front of a host that records
//! what reaches it.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::Duration;

use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::{App, TOKEN, eventually, exe};

/// How long to wait for what a working setup does in well under a second:
/// a failure bound for a loaded machine, not a speed.
const PATIENCE: Duration = Duration::from_secs(30);

#[tokio::test]
async fn a_standalone_front_door_relays_to_the_chosen_host() {
    let dir = tempfile::tempdir().unwrap();
    let app = App::spawn(&dir);
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
    let dead = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let dead_addr = dead.local_addr().unwrap().to_string();
    drop(dead);
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
        .env("DESKBROKER_TOKEN", TOKEN)
        .env("RUST_LOG", "warn")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(gw.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let front_door = line
        .trim()
        .strip_prefix("rdp front door listening on ")
        .expect("listening line")
        .to_string();

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
    let _ = gw.kill();
    let _ = gw.wait();
}
