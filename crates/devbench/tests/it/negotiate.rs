//! `deskbroker-devbench negotiate` on a few sign-ins (a real Samba AD
//! domain controller; needs root): every token is accepted as the user it
//! was made for (the run stops at the first refusal), and both operations
//! report a CPU time. The figures are timings and are not checked.

use crate::run;

#[test]
fn negotiate_signs_every_fresh_token_in_and_reports_both_costs() {
    let dir = tempfile::tempdir().unwrap();
    let (ok, out, err) = run(
        dir.path(),
        &[
            "negotiate",
            "--sign-ins",
            "5",
            "--ticket-checks",
            "1000",
            "--output",
            "json",
        ],
    );
    assert!(ok, "{out}{err}");
    let report: serde_json::Value = serde_json::from_str(&out).expect("a JSON report");
    assert_eq!(report["signIn"]["count"], 5, "{out}");
    assert_eq!(report["ticketCheck"]["count"], 1000, "{out}");
    assert!(
        report["signIn"]["wallMicros"]
            .as_f64()
            .is_some_and(|w| w > 0.0),
        "{out}"
    );
    assert!(report["signInPerTicketCheckCpu"].is_number(), "{out}");
}
