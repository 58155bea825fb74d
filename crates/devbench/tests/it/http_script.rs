//! `scripts/bench-http.sh` through the real binaries.

use std::process::Command;

use crate::{deskbroker, devbench};

/// `scripts/bench-http.sh`, the durable connects against the HTTP stack's
/// ceiling with wrk, as a smoke run (tiny, one round): both servers start,
/// wrk loads each, every connect is answered 2xx, and the ratio is
/// printed. Its figures are timings and are not checked.
#[test]
fn http_script_loads_the_broker_and_the_ceiling_and_prints_their_ratio() {
    let out = Command::new("bash")
        .arg(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../scripts/bench-http.sh"
        ))
        .env("BIN", deskbroker())
        .env("DEVBENCH", devbench())
        .env("HOSTS", "10")
        .env("THREADS", "1")
        .env("CONNECTIONS", "4")
        .env("DURATION", "1")
        .env("ROUNDS", "1")
        .output()
        .expect("run scripts/bench-http.sh");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for run in ["ceiling", "broker"] {
        let row: Vec<&str> = stdout
            .lines()
            .find(|l| l.starts_with(run))
            .unwrap_or_else(|| panic!("no {run} row in:\n{stdout}"))
            .split_whitespace()
            .collect();
        let requests: f64 = row[2].parse().expect("req/s");
        assert!(requests > 0.0, "{run} answered nothing:\n{stdout}");
        assert_eq!(row[7], "0", "{run} had errors:\n{stdout}");
    }
    assert!(stdout.contains("round 1: broker/ceiling = "), "{stdout}");
}
