//! Windows session hosts watched through windows_exporter (rules W1–W4):
//! one real `deskbroker agent --config` process watching fake exporters
//! that answer `/metrics` as windows_exporter 0.31 writes it, against a
//! real broker.
//!
//! The fake exporter is a small HTTP server (`windows/exporter.rs`): the ten
//! `windows_terminal_services_session_info` series per session (labels
//! `host`, `id`, `session_name`, `state`, `user`, sorted as the Prometheus
//! client library sorts them), the collector success and timeout gauges,
//! `windows_exporter_build_info`, and CPU counters that move at every
//! scrape. It can also go silent or answer garbage.

use std::fmt::Write as _;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::{App, BEAT, eventually};

mod exporter;

use exporter::*;

async fn host(app: &App, name: &str) -> Value {
    app.ok(
        "GET",
        &format!("/api/v1/hostPools/win/sessionHosts/{name}"),
        None,
        200,
    )
    .await
}

async fn scrape_error(app: &App, name: &str) -> Value {
    host(app, name).await["scrapeError"].clone()
}

async fn sessions_of(app: &App, user: &str) -> Vec<Value> {
    let v = app
        .ok(
            "GET",
            &format!("/api/v1/hostPools/win/userSessions?user={user}"),
            None,
            200,
        )
        .await;
    v["value"].as_array().cloned().unwrap_or_default()
}

#[tokio::test]
async fn a_watched_pool_follows_its_exporters() {
    let dir = tempfile::tempdir().unwrap();
    let app = App::spawn(&dir);
    // LoadIndex on CPU alone; storm handling keeps bucket 1 to hosts under
    // index 20, with no minimum, so a connect goes to the least-loaded one.
    app.ok(
        "PUT",
        "/api/v1/hostPools/win",
        Some(json!({"hostPoolType": "Pooled", "loadBalancerType": "LoadIndex",
            "heartbeatTimeoutSeconds": 20,
            "loadIndexSettings": {"cpuThreshold": 100, "includeSessionCount": false},
            "logonStormSettings": {"loadIndexThreshold": 20, "connectingSessionThreshold": 20, "minHostsInQueue": 1}})),
        201,
    )
    .await;
    let token = app
        .ok(
            "POST",
            "/api/v1/hostPools/win/registrationToken",
            Some(json!({"maxHosts": 3})),
            200,
        )
        .await["token"]
        .as_str()
        .unwrap()
        .to_string();

    // rdsh01 is busy (80 % CPU), with a user of a domain the agent has no
    // mapping for; rdsh02 is quiet (10 %); rdsh03 is half busy (50 %).
    let e1 = Exporter::start(
        8.0,
        2.0,
        vec![Session {
            id: 2,
            name: "RDP-Tcp 0",
            user: "FABRIKAM\\carol",
            state: "active",
        }],
    )
    .await;
    let e2 = Exporter::start(1.0, 9.0, vec![]).await;
    let e3 = Exporter::start(5.0, 5.0, vec![]).await;

    let password = dir.path().join("exporter.password");
    std::fs::write(&password, "s3cret\n").unwrap();
    // Secrets readable by this user only, or the agent refuses them.
    private(&password);
    let config = dir.path().join("agent.toml");
    let mut text = format!(
        r#"
broker = "{}"
host_pool = "win"
registration_token = "{token}"
state_dir = "{}"
interval = 5
user_domain = "contoso.com"
logoff_command = 'echo "$DESKBROKER_HOST|$DESKBROKER_USER|$DESKBROKER_SESSION_ID|$DESKBROKER_WINDOWS_SESSION_ID" >> "{}"'

[windows_exporter]
username = "deskbroker"
password_file = "{}"
timeout = 2

[domains]
CONTOSO = "contoso.com"
"#,
        app.url,
        dir.path().join("agent-state").display(),
        dir.path().join("logoffs.txt").display(),
        password.display()
    );
    for (i, e) in [&e1, &e2, &e3].iter().enumerate() {
        write!(
            text,
            "\n[[windows_host]]\nname = \"rdsh0{}\"\naddress = \"10.0.0.1{}:3389\"\nmetrics_url = \"{}\"\n",
            i + 1,
            i + 1,
            e.url
        )
        .unwrap();
    }
    std::fs::write(&config, text).unwrap();
    private(&config);
    let log = dir.path().join("agent.log");
    let _agent = WatchingAgent::start(&config, &log);

    // Each host registers as itself and reports CPU once two scrapes have
    // passed: the index is the CPU share the counters show.
    let indexed = eventually(BEAT, || async {
        let v = app
            .ok("GET", "/api/v1/hostPools/win/sessionHosts", None, 200)
            .await;
        let hosts = v["value"].as_array().cloned().unwrap_or_default();
        hosts.len() == 3
            && hosts
                .iter()
                .all(|h| h["loadIndex"].as_i64().unwrap_or(-1) >= 0)
    })
    .await;
    assert!(indexed, "every watched host reports its CPU");
    for (name, index) in [("rdsh01", 80), ("rdsh02", 10), ("rdsh03", 50)] {
        let h = host(&app, name).await;
        assert_eq!(h["loadIndex"], index, "{h}");
        assert_eq!(h["status"], "Available", "{h}");
        // The broker hears of it through its exporter, whose answers are
        // whole.
        assert_eq!(h["heartbeatSource"], "windowsExporter", "{h}");
        assert_eq!(h["scrapeError"], Value::Null, "{h}");
    }
    // Each host keeps its own credential in its own state directory.
    for name in ["rdsh01", "rdsh02", "rdsh03"] {
        let state = dir
            .path()
            .join(format!("agent-state/windows/{name}/agent.json"));
        let saved: Value = serde_json::from_str(&std::fs::read_to_string(&state).unwrap()).unwrap();
        assert_eq!(saved["name"], name);
    }
    // The scrape carried the timeout and the basic-auth credentials.
    let request = e1.state.lock().unwrap().last_request.clone();
    let lower = request.to_ascii_lowercase();
    assert!(
        lower.contains("x-prometheus-scrape-timeout-seconds: 2\r\n"),
        "{request}"
    );
    // base64("deskbroker:s3cret")
    assert!(request.contains("ZGVza2Jyb2tlcjpzM2NyZXQ="), "{request}");

    // An unmapped name is reported as written: it counts on its host.
    let counted = eventually(BEAT, || async {
        host(&app, "rdsh01").await["sessions"] == 1
    })
    .await;
    assert!(counted, "FABRIKAM\\carol counts on rdsh01");

    // LoadIndex places alice by the CPU the counters show: rdsh02.
    let placed = app
        .ok(
            "POST",
            "/api/v1/hostPools/win/connect",
            Some(json!({"user": "alice@contoso.com"})),
            200,
        )
        .await;
    assert_eq!(placed["sessionHost"], "rdsh02", "{placed}");
    assert_eq!(placed["sessionState"], "Pending", "{placed}");

    // Her logon shows on the host as CONTOSO\alice: that is
    // alice@contoso.com, so her Pending session is confirmed Active...
    e2.set(|s| {
        s.sessions = vec![Session {
            id: 2,
            name: "RDP-Tcp 0",
            user: "CONTOSO\\alice",
            state: "active",
        }]
    });
    let active = eventually(BEAT, || async {
        let mine = sessions_of(&app, "alice@contoso.com").await;
        mine.len() == 1 && mine[0]["sessionState"] == "Active" && mine[0]["sessionHost"] == "rdsh02"
    })
    .await;
    assert!(active, "{:?}", sessions_of(&app, "alice@contoso.com").await);
    // ...and S1 sends her back to it.
    let back = app
        .ok(
            "POST",
            "/api/v1/hostPools/win/connect",
            Some(json!({"user": "ALICE@contoso.com"})),
            200,
        )
        .await;
    assert_eq!(back["sessionHost"], "rdsh02", "{back}");
    assert_eq!(back["reconnect"], true, "{back}");
    assert_eq!(back["sessionId"], placed["sessionId"], "{back}");

    // The exporter says alice disconnected: so does the broker.
    e2.set(|s| s.sessions[0].state = "disconnected");
    let disconnected = eventually(BEAT, || async {
        sessions_of(&app, "alice@contoso.com").await[0]["sessionState"] == "Disconnected"
    })
    .await;
    assert!(disconnected, "alice's session follows the exporter");

    // A partial scrape (the collector failed, her series missing) ends
    // nobody: two more rounds, and her session is still there.
    e2.set(|s| {
        s.sessions_whole = false;
        s.sessions.clear();
    });
    rounds(&e2, 3).await;
    assert_eq!(
        sessions_of(&app, "alice@contoso.com").await.len(),
        1,
        "a partial scrape ended a session"
    );
    // The host is heard from, and shows why its list is missing.
    let h = host(&app, "rdsh02").await;
    assert_eq!(h["status"], "Available", "{h}");
    assert_eq!(h["heartbeatSource"], "windowsExporter", "{h}");
    assert_eq!(
        h["scrapeError"],
        "no session list: the exporter's terminal_services collector failed in this scrape",
        "{h}"
    );

    // A whole scrape without her: her session has ended.
    e2.set(|s| s.sessions_whole = true);
    let ended = eventually(BEAT, || async {
        sessions_of(&app, "alice@contoso.com").await.is_empty()
    })
    .await;
    assert!(
        ended,
        "alice's session ends when the exporter no longer lists her"
    );
    assert_eq!(scrape_error(&app, "rdsh02").await, Value::Null);

    // An exporter too old for session lists: heartbeats go on, bob is
    // never listed, and the log says which version is needed.
    e3.set(|s| {
        s.version = "0.30.5";
        s.sessions = vec![Session {
            id: 3,
            name: "RDP-Tcp 1",
            user: "CONTOSO\\bob",
            state: "active",
        }];
    });
    rounds(&e3, 3).await;
    assert!(sessions_of(&app, "bob@contoso.com").await.is_empty());
    let h = host(&app, "rdsh03").await;
    assert_eq!(h["status"], "Available", "{h}");
    assert!(
        h["scrapeError"].as_str().is_some_and(|e| e.starts_with(
            "no session list: windows_exporter 0.30 is too old: session lists need \
             windows_exporter 0.31 or later"
        )),
        "{h}"
    );
    let logged = eventually(BEAT, || async {
        std::fs::read_to_string(&log).unwrap_or_default().contains(
            "windows_exporter 0.30 is too old: session lists need windows_exporter 0.31 or later",
        )
    })
    .await;
    assert!(
        logged,
        "{}",
        std::fs::read_to_string(&log).unwrap_or_default()
    );

    // A silent exporter makes only its own host Unavailable...
    e3.set(|s| s.mode = Mode::Silent);
    let down = eventually(BEAT, || async {
        let h = host(&app, "rdsh03").await;
        h["status"] == "Unavailable"
            && h["scrapeError"]
                .as_str()
                .is_some_and(|e| e.contains("no answer within 2s"))
    })
    .await;
    assert!(
        down,
        "a silent exporter's host becomes Unavailable, and shows why: {}",
        host(&app, "rdsh03").await
    );
    // The failed scrapes' reports reached the broker, and none counted as
    // a heartbeat (W1): it stays Unavailable through further rounds.
    let silent_since = host(&app, "rdsh03").await["lastHeartBeat"].clone();
    rounds(&e3, 2).await;
    let h = host(&app, "rdsh03").await;
    assert_eq!(h["status"], "Unavailable", "{h}");
    assert_eq!(h["lastHeartBeat"], silent_since, "{h}");
    assert_eq!(h["heartbeatSource"], "windowsExporter", "{h}");
    for name in ["rdsh01", "rdsh02"] {
        assert_eq!(host(&app, name).await["status"], "Available", "{name}");
    }
    // ...and so does one that answers garbage; the others go on.
    e2.set(|s| s.mode = Mode::Garbage);
    let down = eventually(BEAT, || async {
        host(&app, "rdsh02").await["status"] == "Unavailable"
    })
    .await;
    assert!(
        down,
        "a garbage-serving exporter's host becomes Unavailable"
    );
    // The error says which line was not the format.
    let h = host(&app, "rdsh02").await;
    assert!(
        h["scrapeError"].as_str().is_some_and(|e| e.starts_with(
            "scrape failed, no heartbeat this round: the answer is not the Prometheus text \
             format: line 1"
        )),
        "{h}"
    );
    let before = host(&app, "rdsh01").await["lastHeartBeat"].clone();
    let beating = eventually(BEAT, || async {
        host(&app, "rdsh01").await["lastHeartBeat"] != before
    })
    .await;
    assert!(beating, "rdsh01 keeps its heartbeats");
    assert_eq!(host(&app, "rdsh01").await["status"], "Available");
    // Back to normal: back to Available.
    e2.set(|s| s.mode = Mode::Normal);
    let up = eventually(BEAT, || async {
        host(&app, "rdsh02").await["status"] == "Available"
    })
    .await;
    assert!(up, "rdsh02 is Available again once its exporter answers");
    let whole = eventually(BEAT, || async {
        scrape_error(&app, "rdsh02").await.is_null()
    })
    .await;
    assert!(whole, "{}", host(&app, "rdsh02").await);

    // Rule W5: a broker logoff is carried out on the host, with the
    // logoff_command, given the user's Windows session id.
    let dave = app
        .ok(
            "POST",
            "/api/v1/hostPools/win/connect",
            Some(json!({"user": "dave@contoso.com"})),
            200,
        )
        .await;
    let (dave_host, dave_id) = (
        dave["sessionHost"].as_str().unwrap().to_string(),
        dave["sessionId"].as_str().unwrap().to_string(),
    );
    let exporter = match dave_host.as_str() {
        "rdsh01" => &e1,
        "rdsh02" => &e2,
        other => panic!("dave was placed on {other}"),
    };
    exporter.set(|s| {
        s.sessions.push(Session {
            id: 7,
            name: "RDP-Tcp 5",
            user: "CONTOSO\\dave",
            state: "active",
        })
    });
    let active = eventually(BEAT, || async {
        sessions_of(&app, "dave@contoso.com")
            .await
            .first()
            .map(|s| s["sessionState"].clone())
            == Some(json!("Active"))
    })
    .await;
    assert!(active, "{:?}", sessions_of(&app, "dave@contoso.com").await);
    app.ok(
        "DELETE",
        &format!("/api/v1/hostPools/win/userSessions/{dave_id}"),
        None,
        204,
    )
    .await;
    let want = format!("{dave_host}|dave@contoso.com|{dave_id}|7");
    let logoffs = dir.path().join("logoffs.txt");
    let carried_out = eventually(BEAT, || async {
        std::fs::read_to_string(&logoffs)
            .unwrap_or_default()
            .lines()
            .any(|l| l == want)
    })
    .await;
    assert!(
        carried_out,
        "want {want:?} in {:?}",
        std::fs::read_to_string(&logoffs).unwrap_or_default()
    );
}

/// `POST …/heartbeat` of rdsh01 with its credential; answers (status,
/// body). Waits out the host's heartbeat budget (429) first, as its agent
/// would: refusals count against it too.
async fn beat(app: &App, credential: &str, body: Value) -> (u16, Value) {
    let deadline = Instant::now() + BEAT;
    loop {
        let (status, v) = app
            .call_with(
                "POST",
                "/api/v1/hostPools/win/sessionHosts/rdsh01/heartbeat",
                Some(body.clone()),
                Some(credential),
            )
            .await;
        if status != 429 || Instant::now() > deadline {
            return (status, v);
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// What a host may say about its scrapes, and what a compromised host
/// cannot make of it: an error is one bounded line, stored and answered as
/// JSON text (the console's test shows it rendered as text); a failed
/// scrape's report is no heartbeat and ends nobody's session; both survive
/// a restart with the host's other heartbeat figures.
#[tokio::test]
async fn scrape_reports_are_bounded_text_and_never_a_heartbeat() {
    let dir = tempfile::tempdir().unwrap();
    let app = App::spawn(&dir);
    app.ok(
        "PUT",
        "/api/v1/hostPools/win",
        Some(
            json!({"hostPoolType": "Pooled", "loadBalancerType": "BreadthFirst",
            "heartbeatTimeoutSeconds": 5}),
        ),
        201,
    )
    .await;
    let credential = crate::enroll(&app, "win", "rdsh01", "10.0.0.11:3389").await;
    // The OpenAPI document describes the fields.
    let doc = app.ok("GET", "/openapi.json", None, 200).await;
    let schemas = &doc["components"]["schemas"];
    for field in ["heartbeatSource", "scrapeError"] {
        assert!(
            schemas["SessionHostOutput"]["properties"][field].is_object(),
            "{field}: {}",
            schemas["SessionHostOutput"]
        );
    }
    // The heartbeat's metrics are flattened into it: its own fields are
    // the second part of an `allOf`.
    let heartbeat = &schemas["HeartbeatInput"]["allOf"][1]["properties"];
    for field in ["source", "scrapeError", "scrapeFailed"] {
        assert!(heartbeat[field].is_object(), "{field}: {heartbeat}");
    }
    assert_eq!(
        schemas["HeartbeatSource"]["enum"],
        json!(["agent", "windowsExporter"]),
        "{}",
        schemas["HeartbeatSource"]
    );

    // A whole scrape with alice on the host.
    let (status, v) = beat(
        &app,
        &credential,
        json!({"source": "windowsExporter", "cpuPercent": 12.0,
            "sessions": [{"user": "alice@contoso.com", "state": "Active"}]}),
    )
    .await;
    assert_eq!(status, 200, "{v}");
    let h = host(&app, "rdsh01").await;
    assert_eq!(
        (&h["heartbeatSource"], &h["scrapeError"], &h["sessions"]),
        (&json!("windowsExporter"), &Value::Null, &json!(1)),
        "{h}"
    );

    // Refused whole, without echoing what was sent, and nothing changes:
    // too long (by one byte, and by far), control characters (a fake
    // second line, a terminal's escape), an error from a host that says it
    // is not watched, and failed scrapes that carry more than their error.
    let long = "x".repeat(placement::MAX_SCRAPE_ERROR_BYTES + 1);
    let huge = "<b>".repeat(60_000);
    let refusals = [
        json!({"source": "windowsExporter", "scrapeError": long}),
        json!({"source": "windowsExporter", "scrapeError": huge}),
        json!({"source": "windowsExporter", "scrapeError": "fine\nINFO all good"}),
        json!({"source": "windowsExporter", "scrapeError": "\u{1b}[2Jcleared"}),
        json!({"source": "windowsExporter", "scrapeError": ""}),
        json!({"source": "agent", "scrapeError": "not mine to say"}),
        json!({"scrapeError": "from nobody"}),
        json!({"source": "windowsExporter", "scrapeFailed": true}),
        json!({"source": "agent", "scrapeError": "down", "scrapeFailed": true}),
        json!({"source": "windowsExporter", "scrapeError": "down", "scrapeFailed": true,
            "sessions": []}),
        json!({"source": "windowsExporter", "scrapeError": "down", "scrapeFailed": true,
            "cpuPercent": 5.0}),
        json!({"source": 7}),
    ];
    for body in refusals {
        let (status, v) = beat(&app, &credential, body.clone()).await;
        let message = v["error"]["message"].as_str().unwrap_or_default();
        assert_eq!(
            (status, v["error"]["code"].as_str()),
            (400, Some("InvalidParameter")),
            "{body}: {v}"
        );
        assert!(message.len() < 300, "the refusal echoes: {message}");
        assert!(
            !message.contains("<b>") && !message.contains('\u{1b}'),
            "{message}"
        );
    }
    let after = host(&app, "rdsh01").await;
    assert_eq!(after["scrapeError"], Value::Null, "{after}");
    assert_eq!(after["lastHeartBeat"], h["lastHeartBeat"], "{after}");
    assert_eq!(after["sessions"], 1, "{after}");

    // A newer agent's source is read as unknown, its heartbeat applied.
    let (status, v) = beat(&app, &credential, json!({"source": "hyperVIntegration"})).await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(host(&app, "rdsh01").await["heartbeatSource"], Value::Null);

    // Markup is kept as the text it is, within the bound.
    let markup = r#"<img src=x onerror="alert(1)"> collector <b>failed</b> & "quoted""#;
    let (status, v) = beat(
        &app,
        &credential,
        json!({"source": "windowsExporter", "scrapeError": markup}),
    )
    .await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(v["scrapeError"], markup, "the answer is the host as stored");
    assert_eq!(host(&app, "rdsh01").await["scrapeError"], markup);

    // A failed scrape's report: the error is kept, nothing else happens.
    // The host is not heard from (S7): sent again and again, the reports
    // do not keep it Available; alice's session is left as it is (W2).
    let heard = host(&app, "rdsh01").await["lastHeartBeat"].clone();
    let failed = json!({"source": "windowsExporter", "scrapeFailed": true,
        "scrapeError": "scrape failed, no heartbeat this round: no answer within 5s"});
    let silent = eventually(BEAT, || async {
        let (status, v) = beat(&app, &credential, failed.clone()).await;
        assert_eq!(status, 200, "{v}");
        host(&app, "rdsh01").await["status"] == "Unavailable"
    })
    .await;
    let h = host(&app, "rdsh01").await;
    assert!(silent, "failed scrapes kept the host Available: {h}");
    assert_eq!(h["lastHeartBeat"], heard, "{h}");
    assert_eq!(h["sessions"], 1, "{h}");
    assert_eq!(h["scrapeError"], failed["scrapeError"], "{h}");
    assert_eq!(h["heartbeatSource"], "windowsExporter", "{h}");

    // A partial scrape: heard from again, with its error; kept across a
    // restart like the host's metrics.
    let partial = "no session list: the exporter's terminal_services collector timed out in \
                   this scrape";
    let (status, v) = beat(
        &app,
        &credential,
        json!({"source": "windowsExporter", "cpuPercent": 20.0, "scrapeError": partial}),
    )
    .await;
    assert_eq!(status, 200, "{v}");
    let h = host(&app, "rdsh01").await;
    assert_eq!(h["status"], "Available", "{h}");
    assert_eq!(h["scrapeError"], partial, "{h}");
    let data = app.data_dir.clone();
    drop(app);
    let app = App::spawn_on(&data);
    let h = host(&app, "rdsh01").await;
    assert_eq!(
        (&h["heartbeatSource"], &h["scrapeError"]),
        (&json!("windowsExporter"), &json!(partial)),
        "{h}"
    );

    // A whole scrape clears it.
    let (status, v) = beat(
        &app,
        &credential,
        json!({"source": "windowsExporter", "cpuPercent": 20.0}),
    )
    .await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(host(&app, "rdsh01").await["scrapeError"], Value::Null);
}

/// Hosts whose exporters never answer the agent well are `Unavailable`
/// once the pool's heartbeat timeout has passed since they registered,
/// though they never sent a heartbeat, and stay so through a restart;
/// their first good scrape makes them `Available`. Each host has its own
/// exporter password, so one host's exporter refuses another's; an
/// exporter's redirect is not followed; and the host's `scrapeError` says
/// why in the agent's words, with nothing the exporter sent.
#[tokio::test]
async fn exporters_that_never_answer_well_leave_their_hosts_unavailable() {
    let dir = tempfile::tempdir().unwrap();
    let app = App::spawn(&dir);
    app.ok(
        "PUT",
        "/api/v1/hostPools/win",
        Some(
            json!({"hostPoolType": "Pooled", "loadBalancerType": "BreadthFirst",
            "heartbeatTimeoutSeconds": 5}),
        ),
        201,
    )
    .await;
    let token = app
        .ok(
            "POST",
            "/api/v1/hostPools/win/registrationToken",
            Some(json!({"maxHosts": 5})),
            200,
        )
        .await["token"]
        .as_str()
        .unwrap()
        .to_string();

    // rdsh01 and rdsh02 take their own passwords; rdsh03 answers garbage;
    // rdsh04 takes its own password, and the agent is given rdsh01's for
    // it; rdsh05 redirects to a page no host's exporter is.
    let e1 = Exporter::start(1.0, 9.0, vec![]).await;
    let e2 = Exporter::start(1.0, 9.0, vec![]).await;
    let e3 = Exporter::start(1.0, 9.0, vec![]).await;
    let e4 = Exporter::start(1.0, 9.0, vec![]).await;
    let e5 = Exporter::start(1.0, 9.0, vec![]).await;
    let inside = Exporter::start(1.0, 9.0, vec![]).await;
    let inside_url: &'static str = Box::leak(inside.url.clone().into_boxed_str());
    // base64("deskbroker:pw-rdsh01") and so on.
    e1.set(|s| s.credentials = Some("ZGVza2Jyb2tlcjpwdy1yZHNoMDE="));
    e2.set(|s| s.credentials = Some("ZGVza2Jyb2tlcjpwdy1yZHNoMDI="));
    e3.set(|s| s.mode = Mode::Garbage);
    e4.set(|s| s.credentials = Some("ZGVza2Jyb2tlcjpwdy1yZHNoMDQ="));
    e5.set(|s| s.mode = Mode::Redirect(inside_url));

    let password = |host: &str| {
        let path = dir.path().join(format!("{host}.password"));
        std::fs::write(&path, format!("pw-{host}\n")).unwrap();
        private(&path);
        path.display().to_string()
    };
    let (pw1, pw2) = (password("rdsh01"), password("rdsh02"));
    let config = dir.path().join("agent.toml");
    let mut text = format!(
        r#"
broker = "{}"
host_pool = "win"
registration_token = "{token}"
state_dir = "{}"
interval = 5

[windows_exporter]
timeout = 2
"#,
        app.url,
        dir.path().join("agent-state").display(),
    );
    for (i, (e, auth)) in [
        (&e1, Some(&pw1)),
        (&e2, Some(&pw2)),
        (&e3, None),
        (&e4, Some(&pw1)),
        (&e5, None),
    ]
    .iter()
    .enumerate()
    {
        write!(
            text,
            "\n[[windows_host]]\nname = \"rdsh0{}\"\naddress = \"10.0.0.1{}:3389\"\nmetrics_url = \"{}\"\n",
            i + 1,
            i + 1,
            e.url
        )
        .unwrap();
        if let Some(path) = auth {
            write!(
                text,
                "username = \"deskbroker\"\npassword_file = \"{path}\"\n"
            )
            .unwrap();
        }
    }
    std::fs::write(&config, text).unwrap();
    private(&config);
    let log = dir.path().join("agent.log");
    let _agent = WatchingAgent::start(&config, &log);

    // Each host registers; the two whose exporters take their passwords
    // are heard from, the others never are and turn Unavailable.
    let settled = eventually(BEAT, || async {
        let v = app
            .ok("GET", "/api/v1/hostPools/win/sessionHosts", None, 200)
            .await;
        let hosts = v["value"].as_array().cloned().unwrap_or_default();
        hosts.len() == 5
            && hosts.iter().all(|h| {
                let good = matches!(h["name"].as_str(), Some("rdsh01" | "rdsh02"));
                let want = if good { "Available" } else { "Unavailable" };
                h["status"] == want && h["lastHeartBeat"].is_null() != good
            })
    })
    .await;
    assert!(
        settled,
        "{}",
        app.ok("GET", "/api/v1/hostPools/win/sessionHosts", None, 200)
            .await
    );
    let why = |name: &'static str| {
        let app = &app;
        async move {
            let h = host(app, name).await;
            assert_eq!(h["heartbeatSource"], "windowsExporter", "{h}");
            h["scrapeError"].as_str().unwrap_or_default().to_string()
        }
    };
    let e = why("rdsh03").await;
    assert!(
        e.starts_with(
            "scrape failed, no heartbeat this round: the answer is not the Prometheus text \
             format: line 1: a sample line must start with a metric name"
        ),
        "{e}"
    );
    assert!(!e.contains("html") && !e.contains("Service"), "{e}");
    let e = why("rdsh04").await;
    assert!(e.contains("the exporter answered HTTP 401"), "{e}");
    let e = why("rdsh05").await;
    assert!(
        e.contains("the exporter answered HTTP 302: redirected, not followed"),
        "{e}"
    );
    assert!(!e.contains("127.0.0.1"), "{e}");
    assert_eq!(inside.scrapes(), 0, "the redirect was followed");
    // Each exporter was asked with its host's own password: rdsh04's
    // refused rdsh01's.
    for (e, credentials) in [
        (&e1, "ZGVza2Jyb2tlcjpwdy1yZHNoMDE="),
        (&e2, "ZGVza2Jyb2tlcjpwdy1yZHNoMDI="),
        (&e4, "ZGVza2Jyb2tlcjpwdy1yZHNoMDE="),
    ] {
        let request = e.state.lock().unwrap().last_request.clone();
        assert!(request.contains(credentials), "{request}");
    }

    // No user is placed on a host nothing good was heard from.
    for i in 0..6 {
        let placed = app
            .ok(
                "POST",
                "/api/v1/hostPools/win/connect",
                Some(json!({"user": format!("user{i}@contoso.com")})),
                200,
            )
            .await;
        let on = placed["sessionHost"].as_str().unwrap_or_default();
        assert!(matches!(on, "rdsh01" | "rdsh02"), "{placed}");
    }

    // Its first good scrape makes a host Available.
    e4.set(|s| s.credentials = Some("ZGVza2Jyb2tlcjpwdy1yZHNoMDE="));
    let up = eventually(BEAT, || async {
        host(&app, "rdsh04").await["status"] == "Available"
    })
    .await;
    assert!(up, "{}", host(&app, "rdsh04").await);

    // A restart, on the same address: from what the broker stored, the
    // hosts still never heard from are Unavailable again once the timeout
    // has passed since the start, while the agent's good scrapes keep the
    // others Available.
    let data = app.data_dir.clone();
    let listen = app.url.trim_start_matches("http://").to_string();
    drop(app);
    let (app, _) = App::spawn_with(&data, &listen, &[]);
    let settled = eventually(BEAT, || async {
        let v = app
            .ok("GET", "/api/v1/hostPools/win/sessionHosts", None, 200)
            .await;
        let hosts = v["value"].as_array().cloned().unwrap_or_default();
        hosts.len() == 5
            && hosts.iter().all(|h| {
                let good = matches!(h["name"].as_str(), Some("rdsh01" | "rdsh02" | "rdsh04"));
                h["status"] == if good { "Available" } else { "Unavailable" }
            })
    })
    .await;
    assert!(
        settled,
        "{}",
        app.ok("GET", "/api/v1/hostPools/win/sessionHosts", None, 200)
            .await
    );
}

/// Makes a file that holds a secret readable by this user only (mode 0600).
fn private(path: &std::path::Path) {
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600)).unwrap();
}
