//! The README's worked example, through the CLI.

use crate::App;

#[tokio::test]
async fn readme_worked_example() {
    let dir = tempfile::tempdir().unwrap();
    let app = App::spawn(&dir);
    let (ok, _, err) = app.cli(&[
        "hostpool",
        "create",
        "--name",
        "contosohp01",
        "--host-pool-type",
        "Pooled",
        "--load-balancer-type",
        "DepthFirst",
        "--max-session-limit",
        "10",
    ]);
    assert!(ok, "{err}");
    let (ok, out, err) = app.cli(&["hostpool", "show", "--name", "contosohp01"]);
    assert!(ok, "{err}");
    assert_eq!(
        out,
        "Name         LoadBalancerType    MaxSessionLimit\n\
         -----------  ------------------  -----------------\n\
         contosohp01  DepthFirst          10\n"
    );
    for (h, a) in [("sh1", "10.0.0.5:3389"), ("sh2", "10.0.0.6:3389")] {
        let (ok, _, err) = app.cli(&[
            "sessionhost",
            "add",
            "--host-pool",
            "contosohp01",
            "--name",
            h,
            "--address",
            a,
        ]);
        assert!(ok, "{err}");
    }
    // DepthFirst fills sh1 (first in query order) before sh2.
    for u in ["alice@contoso.com", "bob@contoso.com"] {
        let (ok, out, err) = app.cli(&[
            "connect",
            "--host-pool",
            "contosohp01",
            "--user",
            u,
            "--output",
            "json",
        ]);
        assert!(ok, "{err}");
        let v: serde_json::Value = serde_json::from_str(&out).unwrap();
        assert_eq!(v["sessionHost"], "sh1", "{v}");
        assert_eq!(v["reconnect"], false);
    }
    // Alice again: her session, not a new one (S1).
    let (ok, out, _) = app.cli(&[
        "connect",
        "--host-pool",
        "contosohp01",
        "--user",
        "alice@contoso.com",
        "-o",
        "json",
    ]);
    assert!(ok);
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["reconnect"], true);
    // Drain sh1: the next new user goes to sh2.
    let (ok, _, err) = app.cli(&[
        "sessionhost",
        "update",
        "--host-pool",
        "contosohp01",
        "--name",
        "sh1",
        "--allow-new-session",
        "false",
    ]);
    assert!(ok, "{err}");
    let (ok, out, _) = app.cli(&[
        "connect",
        "--host-pool",
        "contosohp01",
        "--user",
        "carol@contoso.com",
        "-o",
        "tsv",
    ]);
    assert!(ok);
    assert!(out.contains("sh2"), "{out}");
    let (ok, out, _) = app.cli(&[
        "session",
        "list",
        "--host-pool",
        "contosohp01",
        "-o",
        "json",
    ]);
    assert!(ok);
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v.as_array().unwrap().len(), 3);
    let (ok, out, _) = app.cli(&["sessionhost", "list", "--host-pool", "contosohp01"]);
    assert!(ok);
    assert!(out.lines().count() == 4, "{out}");
}

#[tokio::test]
async fn cli_errors_are_one_line_and_fail() {
    let dir = tempfile::tempdir().unwrap();
    let app = App::spawn(&dir);
    let (ok, out, err) = app.cli(&["hostpool", "show", "--name", "nope"]);
    assert!(!ok);
    assert!(out.is_empty());
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(err.contains("HostPoolNotFound"), "{err}");
    let (ok, _, err) = app.cli(&[
        "hostpool",
        "create",
        "--name",
        "p",
        "--host-pool-type",
        "Pooled",
        "--load-balancer-type",
        "DepthFirst",
    ]);
    assert!(ok);
    assert!(err.contains("warning:"), "P5 warning expected: {err}");
}
