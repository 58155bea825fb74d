//! `deskbroker-devbench directory` on a tiny directory (a real Samba AD
//! domain controller; needs root, as the end-to-end directory tests do):
//! every storm places every user without an error, and the broker's own
//! counters show what each storm asked the directory — nothing for the
//! baseline, each user once for the cold cache, nothing for the warm one.
//! The figures are timings and are not checked.

use crate::run;

#[test]
fn directory_places_every_user_three_times_reading_the_dc_only_when_cold() {
    let dir = tempfile::tempdir().unwrap();
    let (ok, out, err) = run(
        dir.path(),
        &[
            "directory",
            "--users",
            "20",
            "--hosts",
            "3",
            "--concurrency",
            "4",
            "--output",
            "json",
        ],
    );
    assert!(ok, "{out}{err}");
    let report: serde_json::Value = serde_json::from_str(&out).expect("a JSON report");
    for (storm, reads, cached) in [("baseline", 0, 0), ("cold", 20, 0), ("warm", 0, 20)] {
        let r = &report[storm];
        assert_eq!(r["placed"], 20, "{storm}: {out}");
        assert_eq!(r["errors"], serde_json::json!({}), "{storm}: {out}");
        assert_eq!(r["sessionsInPool"], 20, "{storm}: {out}");
        assert_eq!(r["directoryReads"], reads, "{storm}: {out}");
        assert_eq!(r["directoryCached"], cached, "{storm}: {out}");
        assert_eq!(r["entitledGroups"], storm != "baseline", "{storm}: {out}");
    }
    let ratios = &report["ratios"];
    for key in [
        "coldPerBaselineConnectsPerSecond",
        "warmPerBaselineConnectsPerSecond",
    ] {
        assert!(
            ratios[key].as_f64().is_some_and(|r| r > 0.0),
            "{key}: {out}"
        );
    }
}
