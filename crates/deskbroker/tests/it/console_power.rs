//! The console's power pages in a real browser (headless Chromium, as in
//! `console.rs`): an operator stops a host from the pool's host list (the
//! command driver runs, `serve --allow-power-commands`) and sees the action
//! on the pool's "Scaling actions" page; the operator sends a message to a
//! session's user from the sessions page; a reader sees the power state and
//! the actions but no Start/Stop and no Send message.

use std::path::Path;
use std::time::Duration;

use serde_json::{Value, json};

use crate::browser::{browser, click, count, go, sign_in_as, text, type_into, wait_js, wait_text};
use crate::{App, credential, eventually};

fn log_lines(log: &Path) -> String {
    std::fs::read_to_string(log).unwrap_or_default()
}

#[tokio::test]
async fn an_operator_stops_a_host_sees_the_action_and_messages_a_user_a_reader_cannot() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("power.log");
    let app = App::spawn_with(
        &dir.path().join("data"),
        "127.0.0.1:0",
        &["--allow-power-commands"],
    )
    .0;
    let cmd = format!(
        "echo \"$DESKBROKER_ACTION $DESKBROKER_HOST\" >> '{}'",
        log.display()
    );
    app.ok(
        "PUT",
        "/api/v1/hostPools/p",
        Some(
            json!({"hostPoolType": "Pooled", "loadBalancerType": "BreadthFirst",
                    "powerSettings": {"driver": "command", "powerOnCommand": cmd,
                                      "powerOffCommand": cmd}}),
        ),
        201,
    )
    .await;
    for (h, ip) in [("h1", 1), ("h2", 2)] {
        app.ok(
            "PUT",
            &format!("/api/v1/hostPools/p/sessionHosts/{h}"),
            Some(json!({"address": format!("10.0.0.{ip}:3389")})),
            201,
        )
        .await;
    }
    let reader = credential(&app, "watcher", "reader", &[]).await;
    let operator = credential(&app, "ops", "operator", &[]).await;
    let b = browser().await;
    let c = &b.client;

    // The operator stops h1 (no sessions) from the host list: two clicks.
    sign_in_as(c, &app, &operator).await;
    go(c, "#/pools/p").await;
    wait_text(
        c,
        "#hosts-table tr[data-host=\"h1\"] .power-state",
        "h1's power state",
        |t| t == "Running",
    )
    .await;
    wait_js(
        c,
        "const b = document.querySelector('tr[data-host=\"h1\"] button.stop'); \
         return !!b && !b.disabled;",
        "h1's Stop button",
    )
    .await;
    click(c, "tr[data-host=\"h1\"] button.stop").await;
    wait_text(
        c,
        "tr[data-host=\"h1\"] button.stop",
        "the confirming click",
        |t| t == "Confirm stop",
    )
    .await;
    click(c, "tr[data-host=\"h1\"] button.stop").await;
    let stopped = eventually(Duration::from_secs(30), || async {
        app.ok("GET", "/api/v1/hostPools/p/sessionHosts/h1", None, 200)
            .await["powerState"]
            == "Stopped"
    })
    .await;
    assert!(
        stopped,
        "the console's Stop stopped h1: {}",
        log_lines(&log)
    );
    assert_eq!(log_lines(&log), "stop h1\n", "the command driver ran once");
    wait_text(
        c,
        "#hosts-table tr[data-host=\"h1\"] .power-state",
        "h1 shown stopped",
        |t| t == "Stopped",
    )
    .await;
    wait_js(
        c,
        "const b = document.querySelector('tr[data-host=\"h1\"] button.start'); \
         return !!b && !b.disabled;",
        "h1's Start button, once stopped",
    )
    .await;

    // The pool's scaling actions page shows it.
    click(c, "#scaling-link").await;
    let outcome = wait_text(
        c,
        "#scaling-table tr[data-host=\"h1\"][data-action=\"Stop\"] .outcome",
        "the operator's stop",
        |t| t == "Succeeded",
    )
    .await;
    assert_eq!(outcome, "Succeeded");
    let actor = text(c, "#scaling-table tr[data-host=\"h1\"] .actor").await;
    assert_eq!(actor.as_deref(), Some("credential:ops"));
    let reason = text(c, "#scaling-table tr[data-host=\"h1\"] .reason")
        .await
        .unwrap_or_default();
    assert!(!reason.is_empty(), "the reason is shown");

    // A message to alice (placed on h2, the running host) from the sessions page.
    let placed = app
        .ok(
            "POST",
            "/api/v1/hostPools/p/connect",
            Some(json!({"user": "alice"})),
            200,
        )
        .await;
    assert_eq!(placed["sessionHost"], "h2");
    let id = placed["sessionId"].as_str().unwrap().to_string();
    go(c, "#/sessions?pool=p").await;
    let button = format!("button.send-message[data-id=\"{id}\"]");
    wait_js(
        c,
        &format!(
            "return !!document.querySelector('{}');",
            button.replace('\'', "\\'")
        ),
        "alice's Send message button",
    )
    .await;
    click(c, &button).await;
    type_into(c, "#message-title", "Maintenance").await;
    type_into(c, "#message-text", "h2 restarts at noon").await;
    click(c, "#message-form button[type=submit]").await;
    wait_text(c, "#sessions-error", "the message queued", |t| {
        t.starts_with("Message queued for alice")
    })
    .await;
    let answer: Value = app
        .ok(
            "POST",
            "/api/v1/hostPools/p/sessionHosts/h2/heartbeat",
            Some(json!({})),
            200,
        )
        .await;
    assert_eq!(answer["messages"][0]["title"], "Maintenance");
    assert_eq!(answer["messages"][0]["message"], "h2 restarts at noon");
    assert_eq!(answer["messages"][0]["sessionId"], id.as_str());
    click(c, "#signout").await;

    // A reader sees power states and the actions, no buttons.
    sign_in_as(c, &app, &reader).await;
    go(c, "#/pools/p").await;
    wait_text(
        c,
        "#hosts-table tr[data-host=\"h1\"] .power-state",
        "h1's power state for a reader",
        |t| t == "Stopped",
    )
    .await;
    assert_eq!(
        count(c, "button.start, button.stop").await,
        0,
        "a reader has no Start/Stop"
    );
    go(c, "#/pools/p/scaling").await;
    wait_text(
        c,
        "#scaling-table tr[data-host=\"h1\"] .outcome",
        "the stop for a reader",
        |t| t == "Succeeded",
    )
    .await;
    go(c, "#/sessions?pool=p").await;
    wait_js(
        c,
        "return !!document.querySelector('tr[data-user=\"alice\"]');",
        "alice's session for a reader",
    )
    .await;
    assert_eq!(
        count(c, "button.send-message").await,
        0,
        "a reader sends no message"
    );
    b.client.clone().close().await.expect("close the browser");
}
