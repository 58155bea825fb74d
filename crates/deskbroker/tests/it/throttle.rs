//! Rule T4's always-on part through the real binary: a source that keeps
//! sending requests without a valid credential is answered 429 with
//! Retry-After once past its budget, while a valid credential from the same
//! address and a bad one from another address are still served as usual.

use std::net::IpAddr;

use serde_json::Value;

use crate::{App, TOKEN};

/// The most requests sent before the budget must have run out: the burst
/// (100) plus what 20 a second refill over a slow minute, bounded.
const MAX_TRIES: usize = 2_000;

fn client_from(source: &str) -> reqwest::Client {
    ::api::tls::install_default_provider();
    reqwest::Client::builder()
        .local_address(source.parse::<IpAddr>().expect("address"))
        .build()
        .expect("client")
}

#[tokio::test]
async fn a_source_guessing_tokens_is_throttled_and_nobody_else_is() {
    let dir = tempfile::tempdir().unwrap();
    let app = App::spawn(&dir);
    let url = format!("{}/api/v1/hostPools", app.url);
    let guesser = client_from("127.0.0.1");
    let mut unauthorized = 0;
    let mut throttled: Option<(Option<String>, Value)> = None;
    for _ in 0..MAX_TRIES {
        let resp = guesser
            .get(&url)
            .bearer_auth("dba_not-a-token-of-this-broker-at-all")
            .send()
            .await
            .expect("answer");
        match resp.status().as_u16() {
            401 => unauthorized += 1,
            429 => {
                let retry = resp
                    .headers()
                    .get("retry-after")
                    .and_then(|v| v.to_str().ok())
                    .map(str::to_string);
                throttled = Some((retry, resp.json().await.expect("json")));
                break;
            }
            other => panic!("unexpected {other}"),
        }
    }
    let (retry, body) = throttled.expect("the guesser was throttled");
    assert!(
        unauthorized >= 100,
        "the burst is served first: {unauthorized}"
    );
    assert_eq!(body["error"]["code"], "TooManyRequests", "{body}");
    assert!(
        retry
            .and_then(|r| r.parse::<u64>().ok())
            .is_some_and(|s| s >= 1),
        "Retry-After in whole seconds"
    );
    // The same address with the admin token: served, not counted.
    let resp = guesser
        .get(&url)
        .bearer_auth(TOKEN)
        .send()
        .await
        .expect("answer");
    assert_eq!(resp.status().as_u16(), 200);
    // Another address: its own budget.
    let other = client_from("127.0.0.2");
    let resp = other
        .get(&url)
        .bearer_auth("dba_not-a-token-of-this-broker-at-all")
        .send()
        .await
        .expect("answer");
    assert_eq!(resp.status().as_u16(), 401);
    let metrics = app.text("/metrics").await;
    assert!(
        metrics.contains("deskbroker_http_requests_throttled_total{reason=\"unauthenticated\"}"),
        "{metrics}"
    );
}

/// `serve --api-rate-limit N`: a credential gets N requests a second in
/// bursts of 2×N, then 429 naming the credential's limit; a credential of
/// its own (another key) is still served.
#[tokio::test]
async fn with_an_api_rate_limit_a_busy_credential_is_throttled() {
    let dir = tempfile::tempdir().unwrap();
    let (app, _) = App::spawn_with(dir.path(), "127.0.0.1:0", &["--api-rate-limit", "5"]);
    let url = format!("{}/api/v1/hostPools", app.url);
    // Another credential, made before the admin token's budget is spent.
    let reader = app
        .ok(
            "POST",
            "/api/v1/credentials",
            Some(serde_json::json!({"name": "watcher", "role": "reader"})),
            201,
        )
        .await["token"]
        .as_str()
        .expect("token")
        .to_string();
    let mut served = 0;
    let mut throttled = None;
    for _ in 0..MAX_TRIES {
        let resp = app
            .http
            .get(&url)
            .bearer_auth(TOKEN)
            .send()
            .await
            .expect("answer");
        match resp.status().as_u16() {
            200 => served += 1,
            429 => {
                throttled = Some(resp.json::<Value>().await.expect("json"));
                break;
            }
            other => panic!("unexpected {other}"),
        }
    }
    let body = throttled.expect("the admin token was throttled");
    assert!(served >= 8, "about a burst of 10 first: {served}");
    assert_eq!(body["error"]["code"], "TooManyRequests", "{body}");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap_or("")
            .contains("this credential"),
        "{body}"
    );
    // The reader is a credential of its own; from another address it is
    // not held by this source's budget either.
    let resp = client_from("127.0.0.2")
        .get(&url)
        .bearer_auth(&reader)
        .send()
        .await
        .expect("answer");
    assert_eq!(resp.status().as_u16(), 200);
}

/// A credential's own `rateLimitPerSecond` holds even without
/// `--api-rate-limit`, and only for that credential.
#[tokio::test]
async fn a_credential_with_its_own_limit_is_held_to_it_and_nobody_else_is() {
    let dir = tempfile::tempdir().unwrap();
    let app = App::spawn(&dir);
    // Out of range: refused whole, nothing made.
    for bad in [0, 100_001] {
        app.refused(
            "POST",
            "/api/v1/credentials",
            Some(
                serde_json::json!({"name": "script", "role": "reader", "rateLimitPerSecond": bad}),
            ),
            400,
            "InvalidParameter",
        )
        .await;
    }
    // Made through the CLI, as an administrator would.
    let (ok, out, err) = app.cli(&[
        "credential",
        "create",
        "--name",
        "script",
        "--role",
        "reader",
        "--rate-limit-per-second",
        "1",
        "--output",
        "json",
    ]);
    assert!(ok, "credential create: {err}");
    let created: Value = serde_json::from_str(&out).expect("json");
    assert_eq!(created["rateLimitPerSecond"], 1, "{created}");
    let token = created["token"].as_str().expect("token").to_string();
    let url = format!("{}/api/v1/hostPools", app.url);
    // One a second in bursts of two: well within MAX_TRIES it is refused.
    let mut throttled = None;
    for _ in 0..MAX_TRIES {
        let resp = app
            .http
            .get(&url)
            .bearer_auth(&token)
            .send()
            .await
            .expect("answer");
        match resp.status().as_u16() {
            200 => {}
            429 => {
                assert!(resp.headers().get("retry-after").is_some());
                throttled = Some(resp.json::<Value>().await.expect("json"));
                break;
            }
            other => panic!("unexpected {other}"),
        }
    }
    let body = throttled.expect("the credential was held to its own limit");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap_or("")
            .contains("script is over its own limit of 1"),
        "{body}"
    );
    // The admin token from the same address is not held by it.
    for _ in 0..20 {
        app.ok("GET", "/api/v1/hostPools", None, 200).await;
    }
    let list = app.ok("GET", "/api/v1/credentials", None, 200).await;
    assert_eq!(list["value"][0]["rateLimitPerSecond"], 1, "{list}");
}

/// On a dual-stack `[::]` listener every IPv4 client arrives IPv4-mapped
/// (`::ffff:a.b.c.d`); each is still a source of its own (T4), not one
/// bucket for all of IPv4.
#[tokio::test]
async fn ipv4_clients_of_a_dual_stack_listener_are_each_a_source_of_their_own() {
    let dir = tempfile::tempdir().unwrap();
    // Plain HTTP, so the test's clients need no certificate.
    let (app, _) = App::spawn_with(dir.path(), "[::]:0", &["--insecure-http"]);
    let port = app.url.rsplit(':').next().expect("a port");
    let url = format!("http://127.0.0.1:{port}/api/v1/hostPools");
    let guess = async |client: &reqwest::Client| {
        client
            .get(&url)
            .bearer_auth("dba_not-a-token-of-this-broker-at-all")
            .send()
            .await
            .expect("answer")
            .status()
            .as_u16()
    };
    let guesser = client_from("127.0.0.2");
    let mut throttled = false;
    for _ in 0..MAX_TRIES {
        match guess(&guesser).await {
            401 => {}
            429 => {
                throttled = true;
                break;
            }
            other => panic!("unexpected {other}"),
        }
    }
    assert!(throttled, "127.0.0.2 was throttled");
    // Another IPv4 address on the same listener has a whole burst of its
    // own (100): 60 requests in a row are all answered. Were both one
    // bucket, the spent one would refill 20 a second, far short of that.
    let other = client_from("127.0.0.3");
    for i in 0..60 {
        assert_eq!(guess(&other).await, 401, "request {i} from 127.0.0.3");
    }
}
