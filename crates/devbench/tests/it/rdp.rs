//! `deskbroker-devbench rdp` (without HAProxy) prints its comparison as
//! tsv, with the broker's own count of the sessions its connections left;
//! a missing `deskbroker` binary is a clear error. The figures are timings
//! and are not checked; the counts are.

use crate::run;

#[test]
fn rdp_prints_its_comparison_as_tsv_with_the_brokers_session_count() {
    let dir = tempfile::tempdir().unwrap();
    // No HAProxy: straight to the hosts, through the front door's ceiling
    // (no broker behind it) and through deskbroker's front door.
    let (ok, out, err) = run(
        dir.path(),
        &[
            "rdp",
            "--targets",
            "direct,ceiling,deskbroker",
            "--backends",
            "2",
            "--rate-seconds",
            "1",
            "--concurrency",
            "2",
            "--reconnect-users",
            "3",
            "--latency-connections",
            "5",
            "--stream-mib",
            "1",
            "--streams",
            "1",
            "--rounds",
            "1",
            "--quiet",
            "--output",
            "tsv",
        ],
    );
    assert!(ok, "{out}{err}");
    let rows: Vec<Vec<&str>> = out.lines().map(|l| l.split('\t').collect()).collect();
    // Every row: the measure, then direct, ceiling and deskbroker, then
    // deskbroker ÷ ceiling.
    assert!(rows.iter().all(|r| r.len() == 5), "{out}");
    let row = |measure: &str| {
        rows.iter()
            .find(|r| r[0] == measure)
            .unwrap_or_else(|| panic!("no row {measure:?} in {out}"))
    };
    assert_eq!(row("errors (all runs)")[1..], ["0", "0", "0", ""], "{out}");
    // The 3 returning users log on and keep their sessions between
    // connections (R4), so each of their connections after the first is
    // a reconnect (S1); the new users' connections, the 5 latency ones and
    // the stream never log on and leave nothing behind (S9).
    assert_eq!(
        row("deskbroker pool after the run: sessions")[1..],
        ["", "", "3 (3 expected)", ""],
        "{out}"
    );
    // Direct has no proxy and so no added latency; the proxies add some.
    assert_eq!(row("  added to direct, p50 ms")[1], "", "{out}");
    // Both front doors were measured, so their ratio is printed.
    let reconnects = row("new connections/s, reconnects (2 clients)");
    assert!(reconnects[4].ends_with('x'), "{out}");
    let cpu = row("proxy CPU ms per 1,000 new users");
    assert!(
        cpu[2].parse::<f64>().is_ok_and(|ms| ms > 0.0),
        "the ceiling's CPU is its own process's: {out}"
    );
}

#[test]
fn a_missing_deskbroker_binary_is_named_with_what_to_do() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("no-such-deskbroker");
    let out = std::process::Command::new(crate::devbench())
        .args([
            "rdp",
            "--targets",
            "deskbroker",
            "--backends",
            "1",
            "--quiet",
        ])
        .arg("--deskbroker")
        .arg(&missing)
        .output()
        .expect("run deskbroker-devbench");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{err}");
    assert!(
        err.contains(&format!("no deskbroker binary at {}", missing.display())),
        "{err}"
    );
    assert!(err.contains("--deskbroker PATH"), "{err}");
}
