//! Rule S3: when nothing is eligible the connect fails with
//! `NoSessionHostAvailable` and a message that says why. The messages are
//! what users and administrators read, so they are compared whole.
//!
//! Each host is counted once, for the first filter it fails in this order:
//! lacking a required capability, unavailable, drained, at the limit.

use crate::{Alg, Case, Want, check_all};

const NO_HOSTS: &str = "the host pool has no session hosts: add session hosts";
const ALL_DRAINED: &str = "all session hosts are in drain mode: allow new sessions on a host";
const ALL_DOWN: &str =
    "no session host is available: every session host has stopped sending heartbeats";
const LIMIT_ZERO: &str =
    "the max session limit is 0, so no new sessions are allowed: increase the limit";

#[test]
fn s3_every_reason_has_its_message() {
    let base = Case::DEFAULT;
    let mut cases = Vec::new();
    for alg in [Alg::Breadth, Alg::Classic, Alg::Depth] {
        cases.extend([
            Case {
                name: "no hosts",
                hosts: "",
                alg,
                want: Want::Refused(NO_HOSTS),
                ..base
            },
            Case {
                name: "no hosts, with a requirement",
                hosts: "",
                alg,
                requires: &["gpu"],
                want: Want::Refused(NO_HOSTS),
                ..base
            },
            Case {
                name: "all drained",
                hosts: "a:0:drained b:3:drained",
                alg,
                want: Want::Refused(ALL_DRAINED),
                ..base
            },
            Case {
                name: "all unavailable",
                hosts: "a:0:down b:3:down",
                alg,
                want: Want::Refused(ALL_DOWN),
                ..base
            },
            // A host both unavailable and drained counts as unavailable.
            Case {
                name: "all unavailable, some also drained",
                hosts: "a:0:down:drained b:3:down",
                alg,
                want: Want::Refused(ALL_DOWN),
                ..base
            },
            Case {
                name: "all at the limit",
                hosts: "a:2 b:2 c:2",
                alg,
                limit: 2,
                want: Want::Refused(
                    "all session hosts have reached the max session limit (2): increase the \
                     limit or add session hosts",
                ),
                ..base
            },
            // The example of the spec: limit 10, hosts at and over it.
            Case {
                name: "all at or over the limit",
                hosts: "a:10 b:11",
                alg,
                limit: 10,
                want: Want::Refused(
                    "all session hosts have reached the max session limit (10): increase the \
                     limit or add session hosts",
                ),
                ..base
            },
            Case {
                name: "limit 0, empty hosts",
                hosts: "a:0 b:0",
                alg,
                limit: 0,
                want: Want::Refused(LIMIT_ZERO),
                ..base
            },
            Case {
                name: "limit 0 says so whatever else is wrong",
                hosts: "a:0:drained b:4:down c:1",
                alg,
                limit: 0,
                want: Want::Refused(LIMIT_ZERO),
                ..base
            },
            // a unavailable, b drained, c at the limit of 2.
            Case {
                name: "mixed reasons",
                hosts: "a:0:down b:0:drained c:2",
                alg,
                limit: 2,
                want: Want::Refused(
                    "no session host can take a new session: 1 unavailable, 1 in drain mode, \
                     1 at the max session limit (2)",
                ),
                ..base
            },
            // b is drained and at the limit: counted once, as drained.
            Case {
                name: "two reasons for one host count once",
                hosts: "a:2 b:2:drained c:3",
                alg,
                limit: 2,
                want: Want::Refused(
                    "no session host can take a new session: 1 in drain mode, 2 at the max \
                     session limit (2)",
                ),
                ..base
            },
            Case {
                name: "no host offers the required capability",
                hosts: "a:0 b:0",
                alg,
                requires: &["gpu"],
                want: Want::Refused(
                    "no session host offers every capability required (gpu): add such session \
                     hosts",
                ),
                ..base
            },
            Case {
                name: "two requirements, each offered by a different host",
                hosts: "a:0:+gpu b:0:+fido",
                alg,
                requires: &["gpu", "fido"],
                want: Want::Refused(
                    "no session host offers every capability required (gpu, fido): add such \
                     session hosts",
                ),
                ..base
            },
        ]);
    }
    check_all(&cases);
}

/// When some hosts lack a required capability and the others are full or
/// drained, the message must name both reasons: "all session hosts have
/// reached the max session limit" would be false (the hosts without the
/// capability may be empty) and would hide what the user needs.
#[test]
fn s3_a_partial_capability_match_names_the_capability() {
    let base = Case::DEFAULT;
    let mut cases = Vec::new();
    for alg in [Alg::Breadth, Alg::Classic, Alg::Depth] {
        cases.extend([
            // g offers gpu but is at the limit; a and b lack it.
            Case {
                name: "the capable host is full, the others lack the capability",
                hosts: "a:0 g:3:+gpu b:0",
                alg,
                limit: 3,
                requires: &["gpu"],
                want: Want::Refused(
                    "no session host can take a new session: 1 at the max session limit (3), \
                     2 lacking a required capability (gpu)",
                ),
                ..base
            },
            // Among the hosts with the capability every one is drained.
            Case {
                name: "the capable hosts are drained",
                hosts: "a:0 g:0:+gpu:drained h:0:+gpu:drained",
                alg,
                requires: &["gpu"],
                want: Want::Refused(
                    "no session host can take a new session: 2 in drain mode, 1 lacking a \
                     required capability (gpu)",
                ),
                ..base
            },
        ]);
    }
    check_all(&cases);
}
