//! Clients of Windows hosts (rule W6): mstsc's `mstshash` cookie carries
//! only the first 9 characters of a name, so it never draws the user whose
//! name it only prefixes; in a pool that requires tickets, only a ticket
//! places.

use serde_json::json;

use crate::{App, BEAT, eventually};

/// Each session of `pool` as (user, host, state), sorted.
async fn placed(app: &App, pool: &str) -> Vec<(String, String, String)> {
    let mut out: Vec<(String, String, String)> = crate::sessions(app, pool)
        .await
        .iter()
        .map(|s| {
            let text = |k: &str| s[k].as_str().unwrap_or_default().to_string();
            (
                text("userPrincipalName"),
                text("sessionHost"),
                text("sessionState"),
            )
        })
        .collect();
    out.sort();
    out
}

/// Rule W6 through the RDP front door: mstsc's `mstshash` cookie keeps the
/// first 9 characters of the user name, so `administrator` arrives as
/// `administ`. That cookie is the name `administ` and nothing more: it is
/// never sent to administrator's session or host (S1 matches whole names,
/// without regard to case only), it is placed as its own user by the
/// pool's rules, and it changes nothing of his. A pool that requires
/// tickets (what W6 advises for Windows clients) refuses it before any host
/// is dialled, and administrator's own ticket takes him back to his host.
#[tokio::test]
async fn w6_a_cookie_that_only_prefixes_a_name_never_draws_that_user() {
    use crate::wire::echo_host_counting;
    use crate::wire::first_pdu;
    use crate::wire::log_on;
    use crate::wire::open;
    use std::sync::atomic::Ordering::SeqCst;
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

    let dir = tempfile::tempdir().unwrap();
    let (app, front_door) = App::spawn_with_front_door(dir.path(), "farm", &[]);
    let (a, a_dialled) = echo_host_counting().await;
    let (b, b_dialled) = echo_host_counting().await;
    app.ok(
        "PUT",
        "/api/v1/hostPools/farm",
        Some(
            json!({"hostPoolType": "Pooled", "loadBalancerType": "BreadthFirst",
            "allowedAddressRanges": ["127.0.0.0/8"]}),
        ),
        201,
    )
    .await;
    // Only rdshA takes new sessions while administrator logs on.
    for (name, address, open) in [("rdshA", &a, true), ("rdshB", &b, false)] {
        app.ok(
            "PUT",
            &format!("/api/v1/hostPools/farm/sessionHosts/{name}"),
            Some(json!({"address": address, "allowNewSession": open})),
            201,
        )
        .await;
    }
    let admin = app
        .ok(
            "POST",
            "/api/v1/hostPools/farm/connect",
            Some(json!({"user": "administrator"})),
            200,
        )
        .await;
    assert_eq!(admin["sessionHost"], "rdshA", "{admin}");
    let admin_id = admin["sessionId"].as_str().unwrap().to_string();
    app.ok(
        "PATCH",
        &format!("/api/v1/hostPools/farm/userSessions/{admin_id}"),
        Some(json!({"sessionState": "Active"})),
        200,
    )
    .await;
    // Now rdshA is drained and rdshB open: only affinity could send a
    // connection to rdshA.
    for (name, open) in [("rdshA", false), ("rdshB", true)] {
        app.ok(
            "PATCH",
            &format!("/api/v1/hostPools/farm/sessionHosts/{name}"),
            Some(json!({"allowNewSession": open})),
            200,
        )
        .await;
    }
    let his = || {
        (
            "administrator".to_string(),
            "rdshA".to_string(),
            "Active".to_string(),
        )
    };

    // mstsc's cookie for him goes to rdshB, as the new user `administ`.
    let mut c = open(&front_door, "Cookie: mstshash=administ")
        .await
        .expect("placed and relayed");
    log_on(&mut c).await;
    assert_eq!(
        (a_dialled.load(SeqCst), b_dialled.load(SeqCst)),
        (0, 1),
        "administ was relayed to rdshB only"
    );
    let want = vec![
        (
            "administ".to_string(),
            "rdshB".to_string(),
            "Active".to_string(),
        ),
        his(),
    ];
    let seen = eventually(BEAT, || async { placed(&app, "farm").await == want }).await;
    assert!(seen, "{:?}", placed(&app, "farm").await);
    drop(c);
    let want = vec![
        (
            "administ".to_string(),
            "rdshB".to_string(),
            "Disconnected".to_string(),
        ),
        his(),
    ];
    let seen = eventually(BEAT, || async { placed(&app, "farm").await == want }).await;
    assert!(seen, "{:?}", placed(&app, "farm").await);
    let session = app
        .ok(
            "GET",
            &format!("/api/v1/hostPools/farm/userSessions/{admin_id}"),
            None,
            200,
        )
        .await;
    assert_eq!(session["sessionState"], "Active", "{session}");

    // The whole name (a client that sends it, as xfreerdp does) is him:
    // S1 relays it to rdshA, drained as it is, and touches his session.
    let c = open(&front_door, "Cookie: mstshash=Administrator")
        .await
        .expect("relayed to his host");
    assert_eq!(
        (a_dialled.load(SeqCst), b_dialled.load(SeqCst)),
        (1, 1),
        "the whole name goes to rdshA"
    );
    drop(c);

    // A Windows pool that requires tickets refuses the cookie alone before
    // any host is dialled, and places nobody...
    app.ok(
        "PATCH",
        "/api/v1/hostPools/farm",
        Some(json!({"requireConnectionTicket": true})),
        200,
    )
    .await;
    let sessions_before = placed(&app, "farm").await;
    for cookie in [
        "Cookie: mstshash=administ",
        "Cookie: mstshash=administrator",
    ] {
        assert!(
            open(&front_door, cookie).await.is_none(),
            "{cookie} was relayed"
        );
    }
    assert_eq!(
        (a_dialled.load(SeqCst), b_dialled.load(SeqCst)),
        (1, 1),
        "a host was dialled for a cookie"
    );
    assert_eq!(placed(&app, "farm").await, sessions_before);

    // ...while administrator's ticket names him in full: back to rdshA.
    let file = app
        .text("/api/v1/hostPools/farm/rdpFile?user=administrator")
        .await;
    let ticket = file
        .split("\r\n")
        .find_map(|l| l.strip_prefix("loadbalanceinfo:s:"))
        .unwrap_or_else(|| panic!("no ticket in {file:?}"));
    let mut c = tokio::net::TcpStream::connect(&front_door).await.unwrap();
    c.write_all(&first_pdu(ticket)).await.unwrap();
    let mut cc = [0u8; 2];
    tokio::time::timeout(BEAT, c.read_exact(&mut cc))
        .await
        .expect("in time")
        .expect("relayed on his ticket");
    assert_eq!(
        (a_dialled.load(SeqCst), b_dialled.load(SeqCst)),
        (2, 1),
        "his ticket goes to rdshA"
    );
    assert_eq!(placed(&app, "farm").await, sessions_before);
}
