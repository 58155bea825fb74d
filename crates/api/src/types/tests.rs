//! The wire shapes: what is left out when unset, what is refused, and that
//! what a client sends the broker reads back the same.

use super::*;
use serde_json::json;

#[test]
fn inputs_leave_out_what_is_not_set() {
    let patch = SessionHostPatch {
        allow_new_session: Some(false),
        ..SessionHostPatch::default()
    };
    assert_eq!(
        serde_json::to_value(&patch).unwrap(),
        json!({"allowNewSession": false})
    );
    let unassign = SessionHostPatch {
        assigned_user: Some(None),
        ..SessionHostPatch::default()
    };
    assert_eq!(
        serde_json::to_value(&unassign).unwrap(),
        json!({"assignedUser": null})
    );
    let connect = ConnectInput {
        user: "alice".into(),
        ..ConnectInput::default()
    };
    assert_eq!(
        serde_json::to_value(&connect).unwrap(),
        json!({"user": "alice"})
    );
}

/// Every optional field of an input is left out when unset, nested ones
/// too, while an output writes its unset fields as `null` unless they
/// are documented as absent (`nextLink`, a credential's `token`).
#[test]
fn unset_optional_fields_are_left_out_or_null_as_documented() {
    let empty = json!({});
    let pool = HostPoolInput {
        load_index_settings: Some(LoadIndexSettingsInput::default()),
        logon_storm_settings: Some(LogonStormSettingsInput::default()),
        power_settings: Some(PowerSettingsInput::default()),
        ..HostPoolInput::default()
    };
    assert_eq!(
        serde_json::to_value(&pool).unwrap(),
        json!({"loadIndexSettings": {}, "logonStormSettings": {}, "powerSettings": {}})
    );
    assert_eq!(
        serde_json::to_value(RegistrationTokenInput::default()).unwrap(),
        empty
    );
    // A heartbeat's metrics (placement's type, flattened) are written as
    // null; its own optional fields are left out.
    let heartbeat = serde_json::to_value(HeartbeatInput::default()).unwrap();
    let mut keys: Vec<&String> = heartbeat.as_object().unwrap().keys().collect();
    keys.sort();
    assert_eq!(
        keys,
        [
            "cpuPercent",
            "customLoadIndex",
            "diskQueueLength",
            "diskReadLatencyMs",
            "diskWriteLatencyMs",
            "memoryPercent"
        ]
    );
    let page = Page::<u32> {
        value: vec![],
        next_link: None,
    };
    assert_eq!(serde_json::to_value(&page).unwrap(), json!({"value": []}));
    let credential = CredentialOutput {
        name: "c".into(),
        role: "reader".into(),
        host_pools: vec![],
        expiration_time: None,
        rate_limit_per_second: None,
        token: None,
    };
    assert_eq!(
        serde_json::to_value(&credential).unwrap(),
        json!({"name": "c", "role": "reader", "hostPools": [], "expirationTime": null})
    );
}

/// An agent reads heartbeat answers with fields it does not know (a
/// newer broker's), and an answer without `messages` (an older one's).
#[test]
fn heartbeat_answers_with_unknown_or_missing_fields_are_read() {
    let host = json!({"name": "h1", "address": "10.0.0.1:3389", "allowNewSession": true,
        "status": "Available", "sessions": 0, "connectingSessions": 0, "loadIndex": 0,
        "lastHeartBeat": null, "assignedUser": null, "capabilities": ["rdp"],
        "policy": {}, "registeredAt": "2025-01-01T00:00:00Z", "metrics": null});
    let mut newer = host.clone();
    newer["refusedSessions"] = json!([]);
    newer["messages"] = json!([{"id": "m1", "sessionId": "s1", "user": "alice",
        "title": "T", "message": "M", "priority": "high"}]);
    newer["somethingNew"] = json!({"x": 1});
    let out: HeartbeatOutput = serde_json::from_value(newer).unwrap();
    assert_eq!(out.messages.len(), 1);
    assert_eq!(out.messages[0].user, "alice");
    let older: HeartbeatOutput = serde_json::from_value(host).unwrap();
    assert!(older.messages.is_empty());
    assert!(
        serde_json::to_value(&older)
            .unwrap()
            .get("messages")
            .is_none(),
        "no messages: the field is left out"
    );
}

#[test]
fn what_a_client_sends_the_broker_reads_back_the_same() {
    let patch: SessionHostPatch = serde_json::from_value(json!({"assignedUser": null})).unwrap();
    assert_eq!(patch.assigned_user, Some(None));
    let patch: SessionHostPatch = serde_json::from_value(json!({})).unwrap();
    assert_eq!(patch.assigned_user, None);

    let hb = HeartbeatInput {
        metrics: HostMetrics {
            cpu_percent: Some(37.5),
            ..HostMetrics::default()
        },
        sessions: Some(vec![ReportedSession {
            user: "alice@contoso.com".into(),
            state: SessionState::Active,
        }]),
        policy: None,
        source: Some(HeartbeatSource::Agent),
        ..HeartbeatInput::default()
    };
    let wire = serde_json::to_string(&hb).unwrap();
    assert_eq!(serde_json::from_str::<HeartbeatInput>(&wire).unwrap(), hb);
    assert!(wire.contains(r#""source":"agent""#), "{wire}");
    // `scrapeFailed` is sent only when true; an older agent sends
    // neither field and is read as a whole scrape of unknown source.
    assert!(!wire.contains("scrapeFailed"), "{wire}");

    let failed = HeartbeatInput {
        source: Some(HeartbeatSource::WindowsExporter),
        scrape_error: Some("no answer within 5s".into()),
        scrape_failed: true,
        ..HeartbeatInput::default()
    };
    let wire = serde_json::to_value(&failed).unwrap();
    assert_eq!(
        (&wire["source"], &wire["scrapeError"], &wire["scrapeFailed"]),
        (
            &json!("windowsExporter"),
            &json!("no answer within 5s"),
            &json!(true)
        ),
        "{wire}"
    );
    assert_eq!(
        serde_json::from_value::<HeartbeatInput>(wire).unwrap(),
        failed
    );
}

#[test]
fn inputs_refuse_unknown_fields_but_heartbeats_do_not() {
    assert!(serde_json::from_value::<ConnectInput>(json!({"user": "a", "usr": 1})).is_err());
    assert!(
        serde_json::from_value::<HeartbeatInput>(json!({"cpuPercent": 1.0, "newField": 2})).is_ok()
    );
    // Nor an unknown source (a newer agent's); a source that is not a
    // name at all is refused.
    let newer: HeartbeatInput =
        serde_json::from_value(json!({"source": "hyperVIntegration"})).unwrap();
    assert_eq!(newer.source, None);
    let known: HeartbeatInput =
        serde_json::from_value(json!({"source": "windowsExporter"})).unwrap();
    assert_eq!(known.source, Some(HeartbeatSource::WindowsExporter));
    let absent: HeartbeatInput = serde_json::from_value(json!({"source": null})).unwrap();
    assert_eq!(absent.source, None);
    assert!(serde_json::from_value::<HeartbeatInput>(json!({"source": 7})).is_err());
}
