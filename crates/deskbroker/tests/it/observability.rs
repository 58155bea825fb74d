//! What `deploy/` gives operators to watch deskbroker with — a Grafana
//! dashboard and Prometheus alert rules — names only metrics the broker
//! exports: a broker with a pool, hosts and a placement is scraped, and
//! every `deskbroker_*` name the files use must be in its exposition.

use std::collections::BTreeSet;

use serde_json::{Value, json};

use crate::{App, pool_with_hosts};

const DASHBOARD: &str = include_str!("../../../../deploy/grafana/deskbroker.json");
const RULES: &str = include_str!("../../../../deploy/prometheus/deskbroker.rules.yml");

/// Every `deskbroker_…` metric name in `text`.
fn metric_names(text: &str) -> BTreeSet<String> {
    text.match_indices("deskbroker_")
        .map(|(at, _)| {
            text[at..]
                .chars()
                .take_while(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == '_')
                .collect()
        })
        .collect()
}

#[tokio::test]
async fn the_dashboard_and_the_alert_rules_name_only_metrics_the_broker_exports() {
    let dir = tempfile::tempdir().unwrap();
    // With the RD Gateway's listener, for its certificate's expiry.
    let (app, _) = App::spawn_with(
        &dir.path().join("data"),
        "127.0.0.1:0",
        &["--gateway-listen", "127.0.0.1:0"],
    );
    pool_with_hosts(&app, "p", "BreadthFirst", 10, 2).await;
    app.ok(
        "POST",
        "/api/v1/hostPools/p/connect",
        Some(json!({"user": "alice"})),
        200,
    )
    .await;
    let exported: BTreeSet<String> = app
        .text("/metrics")
        .await
        .lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| l.split(['{', ' ']).next())
        .map(str::to_string)
        .collect();
    for name in [
        "deskbroker_leader",
        "deskbroker_audit_entries_total",
        "deskbroker_tls_certificate_expiry_timestamp_seconds",
    ] {
        assert!(
            exported.contains(name),
            "{name} is not exported: {exported:?}"
        );
    }

    let dashboard: Value = serde_json::from_str(DASHBOARD).expect("the dashboard is JSON");
    let panels = dashboard["panels"].as_array().expect("panels");
    assert!(!panels.is_empty());
    for panel in panels {
        let targets = panel["targets"].as_array().expect("targets");
        assert!(!targets.is_empty(), "{}", panel["title"]);
        for t in targets {
            assert!(
                t["expr"]
                    .as_str()
                    .is_some_and(|e| e.contains("deskbroker_")),
                "{}: {t}",
                panel["title"]
            );
        }
    }
    let alerts = RULES.matches("- alert:").count();
    assert_eq!(
        alerts,
        RULES.matches("expr:").count(),
        "every alert has an expression"
    );
    assert!(alerts >= 5, "{alerts} alerts");

    for (file, text) in [
        ("grafana/deskbroker.json", DASHBOARD),
        ("prometheus/deskbroker.rules.yml", RULES),
    ] {
        let named = metric_names(text);
        assert!(!named.is_empty(), "{file} names no metric");
        let missing: Vec<_> = named.difference(&exported).collect();
        assert!(
            missing.is_empty(),
            "deploy/{file} names metrics the broker does not export: {missing:?}"
        );
    }
}
