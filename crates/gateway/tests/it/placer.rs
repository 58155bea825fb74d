//! Both placers against a real broker on a real store: the in-process one
//! (`deskbroker serve --rdp-listen`) and the HTTP one (a front door on its
//! own machine) give the same answers for the same operations.

use std::sync::Arc;
use std::time::Duration;

use broker::front_door::InProcess;
use gateway::ConnectInput as Connect;
use gateway::{Http, Placer, PlacerError};
use placement::SessionState;
use serde_json::json;

const TOKEN: &str = "placer-test-admin-token-0123456789";

struct Running {
    url: String,
    broker: Arc<broker::Broker>,
    _stop: tokio::sync::oneshot::Sender<()>,
    _dir: tempfile::TempDir,
}

/// A broker serving its API on a free port, with pool `p` (DepthFirst,
/// limit 1) and hosts h1, h2.
async fn running() -> Running {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = store::SqliteStore::open(dir.path()).expect("store");
    let settings = broker::Settings {
        allow_power_commands: true,
        ..broker::Settings::new(TOKEN)
    };
    let broker = broker::open(Arc::new(store), settings)
        .await
        .expect("broker");
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let url = format!("http://{}", listener.local_addr().expect("addr"));
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    tokio::spawn(broker::serve(broker.clone(), listener, async move {
        let _ = stopped.await;
    }));
    // reqwest's TLS needs a process-wide crypto provider, even for plain
    // HTTP (see api::tls::install_default_provider).
    api::tls::install_default_provider();
    let http = reqwest::Client::new();
    let put = |path: String, body: serde_json::Value| {
        let req = http
            .put(format!("{url}/api/v1{path}"))
            .bearer_auth(TOKEN)
            .json(&body);
        async move {
            let status = req.send().await.expect("request").status();
            assert!(status.is_success(), "PUT {path}: {status}");
        }
    };
    put(
        "/hostPools/p".into(),
        json!({"hostPoolType": "Pooled", "loadBalancerType": "DepthFirst", "maxSessionLimit": 1}),
    )
    .await;
    for i in 1..=2 {
        put(
            format!("/hostPools/p/sessionHosts/h{i}"),
            json!({"address": format!("10.0.0.{i}:3389")}),
        )
        .await;
    }
    Running {
        url,
        broker,
        _stop: stop,
        _dir: dir,
    }
}

fn connect(user: &str) -> Connect {
    Connect {
        user: user.into(),
        ..Connect::default()
    }
}

/// The same script through any placer.
async fn script<P: Placer>(placer: &P) {
    let alice = placer
        .connect("p", &connect("alice"))
        .await
        .expect("placed");
    assert_eq!(
        (alice.host.as_str(), alice.address.as_str()),
        ("h1", "10.0.0.1:3389")
    );
    assert!(!alice.reconnect);
    assert_eq!(alice.state, SessionState::Pending);
    placer
        .set_session_state("p", &alice.session_id, SessionState::Active)
        .await
        .expect("Active");
    placer
        .set_session_state("p", &alice.session_id, SessionState::Disconnected)
        .await
        .expect("Disconnected");
    // S1: back to the same session, which is Disconnected.
    let again = placer
        .connect("p", &connect("Alice"))
        .await
        .expect("reconnect");
    assert!(again.reconnect);
    assert_eq!(again.session_id, alice.session_id);
    assert_eq!(again.state, SessionState::Disconnected);

    let bob = placer.connect("p", &connect("bob")).await.expect("placed");
    assert_eq!(bob.host, "h2");
    let carol = placer.connect("p", &connect("carol")).await;
    assert!(
        matches!(&carol, Err(PlacerError::Refused { code, .. }) if *code == api::ErrorCode::NoSessionHostAvailable),
        "{carol:?}"
    );
    placer.logoff("p", &bob.session_id).await.expect("logoff");
    placer.logoff("p", &alice.session_id).await.expect("logoff");
    let gone = placer.logoff("p", &alice.session_id).await;
    assert!(
        matches!(&gone, Err(PlacerError::Refused { code, .. }) if *code == api::ErrorCode::SessionNotFound),
        "{gone:?}"
    );

    assert_eq!(
        placer.host_at("p", "10.0.0.2:3389").await.expect("read"),
        Some("h2".into())
    );
    assert_eq!(
        placer.host_at("p", "10.0.0.9:3389").await.expect("read"),
        None
    );
    let missing = placer.connect("nope", &connect("alice")).await;
    assert!(
        matches!(&missing, Err(e) if e.code() == "HostPoolNotFound"),
        "{missing:?}"
    );
}

#[tokio::test]
async fn in_process() {
    let r = running().await;
    let placer = InProcess::new(r.broker.clone());
    script(&placer).await;
    // Rule R5: an excluded host is passed over for a new session.
    let dave = placer
        .connect(
            "p",
            &Connect {
                user: "dave".into(),
                exclude: vec!["h1".into()],
                ..Connect::default()
            },
        )
        .await
        .expect("placed");
    assert_eq!(dave.host, "h2");
}

#[tokio::test]
async fn over_http() {
    let r = running().await;
    script(&Http::new(r.url.parse().expect("url"), TOKEN).expect("client")).await;
}

#[tokio::test]
async fn over_http_a_missing_broker_is_unreachable() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let url = format!("http://{}", listener.local_addr().expect("addr"));
    drop(listener);
    let placer = Http::new(url.parse().expect("url"), TOKEN).expect("client");
    let e = tokio::time::timeout(Duration::from_secs(20), placer.connect("p", &connect("a")))
        .await
        .expect("in time")
        .expect_err("unreachable");
    assert!(matches!(e, PlacerError::Unreachable(_)), "{e}");
    assert_eq!(e.code(), "BrokerUnreachable");
}

/// Rule A8 through both placers: a pool with `startVmOnConnect` whose
/// only host is stopped answers 503 `SessionHostStarting`, which the HTTP
/// placer reads as that code (not as an unknown answer), as the
/// in-process one does.
#[tokio::test]
async fn a8_both_placers_say_a_host_is_starting() {
    let r = running().await;
    let http = reqwest::Client::new();
    let put = |path: &str, body: serde_json::Value| {
        http.put(format!("{}/api/v1{path}", r.url))
            .bearer_auth(TOKEN)
            .json(&body)
            .send()
    };
    let s = put(
        "/hostPools/cold",
        json!({"hostPoolType": "Pooled", "loadBalancerType": "BreadthFirst",
               "startVmOnConnect": true,
               "powerSettings": {"driver": "command", "powerOnCommand": "true",
                                 "powerOffCommand": "true"}}),
    )
    .await
    .expect("PUT pool")
    .status();
    assert!(s.is_success(), "{s}");
    let s = put(
        "/hostPools/cold/sessionHosts/h1",
        json!({"address": "10.0.0.9:3389"}),
    )
    .await
    .expect("PUT host")
    .status();
    assert!(s.is_success(), "{s}");
    // A host that has sent heartbeats is available again only after its
    // next one (A9): until then it counts as starting.
    let s = http
        .post(format!(
            "{}/api/v1/hostPools/cold/sessionHosts/h1/heartbeat",
            r.url
        ))
        .bearer_auth(TOKEN)
        .json(&json!({"sessions": []}))
        .send()
        .await
        .expect("heartbeat")
        .status();
    assert!(s.is_success(), "{s}");
    r.broker
        .power()
        .act(
            "cold",
            "h1",
            placement::ScalingActionKind::Stop,
            false,
            "test".into(),
        )
        .await
        .expect("stop");
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while r
        .broker
        .core()
        .read("cold", |p| Ok(p.host("h1").map(|h| h.power_state)))
        .await
        .expect("read")
        != Some(placement::PowerState::Stopped)
    {
        assert!(std::time::Instant::now() < deadline, "h1 never stopped");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let over_http = Http::new(r.url.parse().expect("url"), TOKEN).expect("client");
    let in_process = InProcess::new(r.broker.clone());
    for placed in [
        over_http.connect("cold", &connect("alice")).await,
        in_process.connect("cold", &connect("bob")).await,
    ] {
        assert!(
            matches!(&placed, Err(PlacerError::Refused { code, .. }) if *code == api::ErrorCode::SessionHostStarting),
            "{placed:?}"
        );
    }
}
