//! Every session's end has a reason: a logoff through the API, a host
//! that no longer lists a session, a Pending session's timeout; each is
//! listed with `includeEnded=true` and audited with who ended it; a
//! credential limited to other pools sees none of them; and a restarted
//! broker's sessions are put right by their host's next list.

use std::time::Duration;

use broker::testkit::Kit;
use serde_json::{Value, json};

async fn pool(kit: &Kit, name: &str) {
    kit.create_pool(
        name,
        json!({"hostPoolType": "Pooled", "loadBalancerType": "BreadthFirst"}),
    )
    .await;
}

async fn connect(kit: &Kit, pool: &str, user: &str) -> String {
    kit.connect(pool, user).await["sessionId"]
        .as_str()
        .expect("sessionId")
        .to_string()
}

/// A heartbeat of `host` with its credential, listing `(user, state)`.
async fn beat(kit: &Kit, pool: &str, host: &str, cred: &str, listed: &[(&str, &str)]) {
    let sessions: Vec<Value> = listed
        .iter()
        .map(|(u, s)| json!({"user": u, "state": s}))
        .collect();
    let (status, v) = kit
        .heartbeat(
            pool,
            host,
            cred,
            json!({"cpuPercent": 5.0, "sessions": sessions}),
        )
        .await;
    assert_eq!(status, 200, "{v}");
}

/// The list with ended sessions, as `token` (the admin's when None).
async fn listed(kit: &Kit, pool: &str, token: Option<&str>) -> (u16, Value) {
    let path = format!("/api/v1/hostPools/{pool}/userSessions?includeEnded=true");
    match token {
        Some(t) => kit.call_as(Some(t), "GET", &path, None).await,
        None => kit.call("GET", &path, None).await,
    }
}

/// The ended session `id` in the list with ended sessions.
async fn ended(kit: &Kit, pool: &str, id: &str) -> Value {
    let (status, v) = listed(kit, pool, None).await;
    assert_eq!(status, 200, "{v}");
    v["value"]
        .as_array()
        .expect("value")
        .iter()
        .find(|s| s["id"] == id && s.get("endReason").is_some())
        .cloned()
        .unwrap_or_else(|| panic!("session {id} is not listed as ended: {v}"))
}

/// The audit log's entry of the end of `id`.
async fn audit_end(kit: &Kit, pool: &str, id: &str) -> Value {
    let v = kit
        .ok(
            "GET",
            &format!("/api/v1/auditLog?hostPool={pool}&pageSize=1000"),
            None,
            200,
        )
        .await;
    v["value"]
        .as_array()
        .expect("value")
        .iter()
        .find(|e| {
            e["target"] == format!("hostPools/{pool}/userSessions/{id}")
                && e.get("endReason").is_some()
        })
        .cloned()
        .unwrap_or_else(|| panic!("no audit entry of the end of {id}: {v}"))
}

fn ids(v: &Value) -> Vec<String> {
    v["value"]
        .as_array()
        .expect("value")
        .iter()
        .map(|s| s["id"].as_str().unwrap_or("").to_string())
        .collect()
}

/// Each way a session ends is listed with its reason and audited with who
/// ended it, through the API (the CLI's listing is proved end to end); the
/// ends come a second apart, so their order is the
/// broker's clock's.
#[tokio::test(start_paused = true)]
async fn each_end_is_listed_and_audited_with_its_reason() {
    let kit = Kit::open().await;
    pool(&kit, "p").await;
    let cred = kit.register_host("p", "h1", "10.9.0.1:3389").await;

    // A logoff through the API: the admin's, and said so.
    let dave = connect(&kit, "p", "dave@x").await;
    kit.ok(
        "DELETE",
        &format!("/api/v1/hostPools/p/userSessions/{dave}"),
        None,
        204,
    )
    .await;
    let e = ended(&kit, "p", &dave).await;
    assert_eq!(
        (&e["endReason"], &e["userPrincipalName"], &e["sessionHost"]),
        (&json!("logoff"), &json!("dave@x"), &json!("h1")),
        "{e}"
    );
    assert_eq!(e["endedAt"], "2026-12-01T00:00:00.000Z", "{e}");
    let a = audit_end(&kit, "p", &dave).await;
    assert_eq!(
        (&a["actor"], &a["endReason"]),
        (&json!("admin"), &json!("logoff"))
    );
    assert_eq!(a["before"]["userPrincipalName"], "dave@x", "{a}");

    // The host lists carol, then no longer does: she logged off there.
    kit.advance(Duration::from_secs(1)).await;
    let carol = connect(&kit, "p", "carol@x").await;
    beat(&kit, "p", "h1", &cred, &[("carol@x", "Active")]).await;
    kit.advance(Duration::from_secs(1)).await;
    beat(&kit, "p", "h1", &cred, &[]).await;
    let e = ended(&kit, "p", &carol).await;
    assert_eq!(e["endReason"], "notListed", "{e}");
    assert_eq!(e["sessionState"], "Active", "the state it ended in: {e}");
    let a = audit_end(&kit, "p", &carol).await;
    assert_eq!(
        (&a["actor"], &a["endReason"]),
        (&json!("host:p/h1"), &json!("notListed"))
    );

    // A live session stays in the list, without an end.
    let erin = connect(&kit, "p", "erin@x").await;
    beat(&kit, "p", "h1", &cred, &[("erin@x", "Active")]).await;

    // alice never reaches her host: her Pending session times out (S4).
    let alice = connect(&kit, "p", "alice@x").await;
    kit.patch_pool("p", json!({"pendingTimeoutSeconds": 1}))
        .await;
    kit.advance(Duration::from_secs(1)).await;
    beat(&kit, "p", "h1", &cred, &[("erin@x", "Active")]).await;
    let e = ended(&kit, "p", &alice).await;
    assert_eq!(
        (&e["endReason"], &e["sessionState"]),
        (&json!("pendingTimeout"), &json!("Pending")),
        "{e}"
    );
    let a = audit_end(&kit, "p", &alice).await;
    assert_eq!(
        (&a["actor"], &a["endReason"], &a["action"]),
        (
            &json!("broker"),
            &json!("pendingTimeout"),
            &json!(format!("END /api/v1/hostPools/p/userSessions/{alice}"))
        )
    );

    // The list: the live one first, then the ends, latest first.
    let (_, v) = listed(&kit, "p", None).await;
    let rows: Vec<(String, Option<String>)> = v["value"]
        .as_array()
        .expect("value")
        .iter()
        .map(|s| {
            (
                s["id"].as_str().unwrap_or("").to_string(),
                s["endReason"].as_str().map(str::to_string),
            )
        })
        .collect();
    assert_eq!(
        rows,
        [
            (erin.clone(), None),
            (alice.clone(), Some("pendingTimeout".into())),
            (carol.clone(), Some("notListed".into())),
            (dave.clone(), Some("logoff".into())),
        ]
    );
    // Without includeEnded, only the live one; filters apply to the ends.
    assert_eq!(kit.sessions("p").await.len(), 1);
    let v = kit
        .ok(
            "GET",
            "/api/v1/hostPools/p/userSessions?includeEnded=true&user=CAROL@X",
            None,
            200,
        )
        .await;
    assert_eq!(ids(&v), std::slice::from_ref(&carol));
    // Paged like the other lists.
    let v = kit
        .ok(
            "GET",
            "/api/v1/hostPools/p/userSessions?includeEnded=true&pageSize=2&initialSkip=1",
            None,
            200,
        )
        .await;
    assert_eq!(ids(&v), [alice, carol]);
    assert!(
        v["nextLink"]
            .as_str()
            .is_some_and(|l| l.contains("includeEnded=true")),
        "{v}"
    );
}

#[tokio::test(start_paused = true)]
async fn a_credential_of_other_pools_sees_none_of_their_ended_sessions() {
    let kit = Kit::open().await;
    pool(&kit, "secret").await;
    pool(&kit, "mine").await;
    kit.register_host("secret", "s1", "10.9.0.1:3389").await;
    kit.register_host("mine", "m1", "10.9.0.2:3389").await;
    let gone = connect(&kit, "secret", "ceo@x").await;
    kit.ok(
        "DELETE",
        &format!("/api/v1/hostPools/secret/userSessions/{gone}"),
        None,
        204,
    )
    .await;
    ended(&kit, "secret", &gone).await;
    let mine = connect(&kit, "mine", "clerk@x").await;
    kit.ok(
        "DELETE",
        &format!("/api/v1/hostPools/mine/userSessions/{mine}"),
        None,
        204,
    )
    .await;
    for role in ["reader", "operator"] {
        let token = kit
            .credential(&format!("{role}-mine"), role, &["mine"])
            .await;
        let (status, v) = listed(&kit, "secret", Some(&token)).await;
        assert_eq!(status, 403, "{role}: {v}");
        let (status, v) = listed(&kit, "mine", Some(&token)).await;
        assert_eq!(status, 200, "{role}: {v}");
        let text = v.to_string();
        assert!(
            text.contains(&mine) && !text.contains(&gone),
            "{role}: {text}"
        );
        let (status, v) = kit
            .call_as(Some(&token), "GET", "/api/v1/auditLog?pageSize=1000", None)
            .await;
        assert_eq!(status, 200, "{v}");
        assert!(!v.to_string().contains(&gone), "{role}: {v}");
        let (status, _) = kit
            .call_as(
                Some(&token),
                "GET",
                "/api/v1/auditLog?hostPool=secret",
                None,
            )
            .await;
        assert_eq!(status, 403, "{role}");
    }
}

/// Sessions a broker loads as Active are put right by their host's next
/// list after a restart,
/// one listed Disconnected becomes Disconnected, one no longer listed ends
/// as `notListed`.
#[tokio::test(start_paused = true)]
async fn loaded_sessions_are_put_right_by_their_hosts_next_list() {
    let mut kit = Kit::open().await;
    pool(&kit, "p").await;
    let cred = kit.register_host("p", "h1", "10.9.0.1:3389").await;
    let alice = connect(&kit, "p", "alice@x").await;
    let bob = connect(&kit, "p", "bob@x").await;
    beat(
        &kit,
        "p",
        "h1",
        &cred,
        &[("alice@x", "Active"), ("bob@x", "Active")],
    )
    .await;
    kit.reopen().await;
    let state = |v: &Value, id: &str| -> Option<Value> {
        v["value"]
            .as_array()?
            .iter()
            .find(|s| s["id"] == id && s.get("endReason").is_none())
            .map(|s| s["sessionState"].clone())
    };
    let (_, v) = listed(&kit, "p", None).await;
    assert_eq!(state(&v, &alice), Some(json!("Active")), "{v}");
    assert_eq!(state(&v, &bob), Some(json!("Active")), "{v}");

    // Meanwhile alice's client closed, and bob logged off at the host.
    beat(&kit, "p", "h1", &cred, &[("alice@x", "Disconnected")]).await;
    let (_, v) = listed(&kit, "p", None).await;
    assert_eq!(state(&v, &alice), Some(json!("Disconnected")), "{v}");
    assert_eq!(state(&v, &bob), None, "{v}");
    let e = ended(&kit, "p", &bob).await;
    assert_eq!(
        (&e["endReason"], &e["sessionState"]),
        (&json!("notListed"), &json!("Active")),
        "{e}"
    );
}

#[tokio::test(start_paused = true)]
async fn the_openapi_document_describes_ended_sessions() {
    let kit = Kit::open().await;
    let (status, doc) = kit.call_as(None, "GET", "/openapi.json", None).await;
    assert_eq!(status, 200);
    let params = doc["paths"]["/api/v1/hostPools/{pool}/userSessions"]["get"]["parameters"]
        .as_array()
        .expect("parameters");
    let ended = params
        .iter()
        .find(|p| p["name"] == "includeEnded")
        .unwrap_or_else(|| panic!("no includeEnded in {params:?}"));
    assert!(
        ended["description"]
            .as_str()
            .is_some_and(|d| d.contains("endReason")),
        "{ended}"
    );
    let session = &doc["components"]["schemas"]["SessionOutput"]["properties"];
    for field in ["endedAt", "endReason"] {
        assert!(
            session[field]["description"].is_string(),
            "{field}: {session}"
        );
    }
    assert!(
        session["endReason"]["description"]
            .as_str()
            .is_some_and(|d| d.contains("notListed") && d.contains("pendingTimeout")),
        "{session}"
    );
    let entry = &doc["components"]["schemas"]["AuditEntryOutput"]["properties"];
    assert!(entry["endReason"]["description"].is_string(), "{entry}");
}
