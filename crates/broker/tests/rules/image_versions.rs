//! Rule U1: a host carries the image it runs, `imageVersion`, set through
//! the API or reported in its heartbeats (the agent's word replaces the
//! operator's); hosts are listed by it; a value that is not one is refused
//! whole, and the host is kept as it was, across a restart too.

use broker::testkit::Kit;
use serde_json::json;

const HOSTS: &str = "/api/v1/hostPools/p/sessionHosts";

async fn version_of(kit: &Kit, host: &str) -> serde_json::Value {
    kit.ok("GET", &format!("{HOSTS}/{host}"), None, 200).await["imageVersion"].clone()
}

/// The names of the hosts listed with `query`.
async fn listed(kit: &Kit, query: &str) -> Vec<String> {
    let v = kit.ok("GET", &format!("{HOSTS}{query}"), None, 200).await;
    v["value"]
        .as_array()
        .expect("a list")
        .iter()
        .map(|h| h["name"].as_str().expect("a name").to_string())
        .collect()
}

#[tokio::test(start_paused = true)]
async fn u1_a_hosts_image_is_set_reported_listed_and_kept() {
    let mut kit = Kit::open().await;
    kit.pool_with_hosts("p", "BreadthFirst", 5, 2).await;
    assert_eq!(version_of(&kit, "h1").await, json!(null));

    // Set through the API (PUT and PATCH), cleared with null.
    let put = json!({"address": "10.0.0.3:3389", "imageVersion": "2026.11.0"});
    kit.ok("PUT", &format!("{HOSTS}/h3"), Some(put), 201).await;
    assert_eq!(version_of(&kit, "h3").await, json!("2026.11.0"));
    let patch = json!({"imageVersion": "2026.11.0"});
    kit.ok("PATCH", &format!("{HOSTS}/h1"), Some(patch), 200)
        .await;
    kit.ok(
        "PATCH",
        &format!("{HOSTS}/h3"),
        Some(json!({"imageVersion": null})),
        200,
    )
    .await;
    assert_eq!(version_of(&kit, "h3").await, json!(null));

    // Reported by a host's agent: its word replaces the operator's; a
    // heartbeat that does not say leaves it.
    let cred = kit.register_host("p", "h4", "10.0.0.4:3389").await;
    let (status, v) = kit
        .heartbeat("p", "h4", &cred, json!({"imageVersion": "2026.12.1"}))
        .await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(v["imageVersion"], json!("2026.12.1"), "{v}");
    kit.ok(
        "PATCH",
        &format!("{HOSTS}/h4"),
        Some(json!({"imageVersion": "x"})),
        200,
    )
    .await;
    let (status, _) = kit
        .heartbeat("p", "h4", &cred, json!({"imageVersion": "2026.12.1"}))
        .await;
    assert_eq!(status, 200);
    assert_eq!(version_of(&kit, "h4").await, json!("2026.12.1"));
    let (status, _) = kit
        .heartbeat("p", "h4", &cred, json!({"cpuPercent": 5.0}))
        .await;
    assert_eq!(status, 200);
    assert_eq!(version_of(&kit, "h4").await, json!("2026.12.1"));

    // Listed by it.
    assert_eq!(listed(&kit, "?imageVersion=2026.11.0").await, vec!["h1"]);
    assert_eq!(listed(&kit, "?imageVersion=2026.12.1").await, vec!["h4"]);
    assert!(listed(&kit, "?imageVersion=1999").await.is_empty());
    assert_eq!(listed(&kit, "").await.len(), 4);

    // What is not a version is refused whole, naming the field.
    for bad in [
        json!(""),
        json!("   "),
        json!("a\nb"),
        json!("v".repeat(129)),
    ] {
        let (status, v) = kit
            .heartbeat(
                "p",
                "h4",
                &cred,
                json!({"cpuPercent": 99.0, "imageVersion": bad}),
            )
            .await;
        assert_eq!(status, 400, "{bad}: {v}");
        assert!(v.to_string().contains("imageVersion"), "{v}");
        let (status, v) = kit
            .call(
                "PATCH",
                &format!("{HOSTS}/h1"),
                Some(json!({"imageVersion": bad})),
            )
            .await;
        assert_eq!(status, 400, "{bad}: {v}");
    }
    let (status, _) = kit
        .call("GET", &format!("{HOSTS}?imageVersion=a%0Ab"), None)
        .await;
    assert_eq!(status, 400);
    let h4 = kit.ok("GET", &format!("{HOSTS}/h4"), None, 200).await;
    assert_eq!(h4["imageVersion"], json!("2026.12.1"));
    assert_ne!(
        h4["metrics"]["cpuPercent"],
        json!(99.0),
        "the refused heartbeat changed nothing"
    );

    // An operator drains and undrains; the image is the admin's (or the
    // host's own) to say.
    let operator = kit.credential("ops", "operator", &["p"]).await;
    let (status, v) = kit
        .call_as(
            Some(&operator),
            "PATCH",
            &format!("{HOSTS}/h1"),
            Some(json!({"imageVersion": "forged"})),
        )
        .await;
    assert_eq!(status, 403, "{v}");

    // Kept across a restart.
    kit.reopen().await;
    assert_eq!(version_of(&kit, "h1").await, json!("2026.11.0"));
    assert_eq!(version_of(&kit, "h4").await, json!("2026.12.1"));
}
