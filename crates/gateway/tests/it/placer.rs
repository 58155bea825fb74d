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
    let broker = broker::open(Arc::new(store), TOKEN.into())
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
