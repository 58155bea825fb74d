//! Capabilities a connect `requires`: hosts lacking one are not candidates,
//! and the algorithms rank only the hosts that remain. (The engine has a
//! fast path when every host has what is required, and a filtered one
//! otherwise; these cases go through both.)

use placement::ConnectRequest;

use crate::{Alg, Case, Want, World, caps, check_all, host_spec};

#[test]
fn requires_filters_before_ranking() {
    check_all(&[
        // Classic: a:0 lacks gpu; g2:1 has fewer than g1:2.
        Case {
            name: "classic among the capable",
            hosts: "a:0 g1:2:+gpu g2:1:+gpu",
            requires: &["gpu"],
            want: Want::Host("g2"),
            ..Case::DEFAULT
        },
        // DepthFirst: b:5 lacks gpu; g1:2 is the fullest capable host.
        Case {
            name: "depth among the capable",
            hosts: "b:5 g1:2:+gpu g2:1:+gpu",
            alg: Alg::Depth,
            limit: 9,
            requires: &["gpu"],
            want: Want::Host("g1"),
            ..Case::DEFAULT
        },
        // Randomized: capable g1:2 g2:1 g3:0 -> sorted g3 g2 g1, half = 2 -> {g3, g2};
        // the top of the range -> g2. The empty a is not a candidate.
        Case {
            name: "breadth among the capable",
            hosts: "a:0 g1:2:+gpu g2:1:+gpu g3:0:+gpu",
            alg: Alg::Breadth,
            random: u64::MAX,
            requires: &["gpu"],
            want: Want::Host("g2"),
            ..Case::DEFAULT
        },
        // Every host offers rdp: the fast path, same answer as without it.
        Case {
            name: "a requirement every host meets",
            hosts: "a:3 b:1",
            requires: &["rdp"],
            want: Want::Host("b"),
            ..Case::DEFAULT
        },
        // Limits and drain still apply to capable hosts: g1 is at limit 2, g2 drained.
        Case {
            name: "the capable host below the limit",
            hosts: "a:0 g1:2:+gpu g2:0:+gpu:drained g3:1:+gpu",
            alg: Alg::Depth,
            limit: 2,
            requires: &["gpu"],
            want: Want::Host("g3"),
            ..Case::DEFAULT
        },
        // Two requirements: only h has both.
        Case {
            name: "every requirement at once",
            hosts: "g:0:+gpu f:0:+fido h:4:+gpu:+fido",
            requires: &["gpu", "fido"],
            want: Want::Host("h"),
            ..Case::DEFAULT
        },
    ]);
}

#[test]
fn requires_follows_host_updates_and_removals() {
    let mut w = World::with_hosts(Alg::Classic, &["a", "b"]);
    let gpu = caps(&["gpu"]);
    let req = |user| ConnectRequest {
        user,
        requires: &gpu,
        session_host: None,
    };
    assert_eq!(
        w.connect_req(&req("u1@x"), 0).unwrap_err().code(),
        "NoSessionHostAvailable"
    );
    // b gains the capability (an update keeps its sessions and its place).
    w.add_spec(host_spec("b", &["gpu"]));
    assert_eq!(w.connect_req(&req("u2@x"), 0).unwrap().host, "b");
    // Every host has it now: a (0 sessions) is preferred to b (1).
    w.add_spec(host_spec("a", &["gpu"]));
    assert_eq!(w.connect_req(&req("u3@x"), 0).unwrap().host, "a");
    // a loses it again; c arrives without it.
    w.add_spec(host_spec("a", &[]));
    w.add_host("c");
    assert_eq!(w.connect_req(&req("u4@x"), 0).unwrap().host, "b");
    // b is removed with its sessions: nobody has gpu any more.
    w.pool.remove_host("b", true).unwrap();
    assert_eq!(
        w.connect_req(&req("u5@x"), 0).unwrap_err().code(),
        "NoSessionHostAvailable"
    );
    w.assert_consistent();
}

/// A host whose capability list names `gpu` twice is still one host with
/// gpu. Capabilities are validated but not deduplicated, and the engine
/// counts, per capability, how many hosts offer it to decide whether every
/// host does. With `["rdp", "gpu", "gpu"]` on one host of two the count is
/// 2 = the number of hosts, so the unfiltered fast path runs and a host
/// without gpu gets the session.
#[test]
fn a_capability_listed_twice_is_refused_so_it_cannot_fool_requires() {
    // A host listing "gpu" twice once counted twice towards "every host has
    // gpu", which let the fast path place a gpu request on a host without
    // it. Duplicates are now refused whole, naming the capability.
    let mut w = World::with_hosts(Alg::Classic, &["plain"]);
    let mut doubled = host_spec("gpu1", &["gpu"]);
    doubled.capabilities.push("gpu".into()); // ["rdp", "gpu", "gpu"]
    let err = w.pool.upsert_host(doubled, 0).unwrap_err();
    assert_eq!(err.code(), "InvalidParameter");
    assert!(err.to_string().contains("\"gpu\" is listed twice"), "{err}");
    w.add_spec(host_spec("gpu1", &["gpu"]));
    let gpu = caps(&["gpu"]);
    let p = w
        .connect_req(
            &ConnectRequest {
                user: "u@x",
                requires: &gpu,
                session_host: None,
            },
            0,
        )
        .unwrap();
    assert_eq!(p.host, "gpu1", "only the gpu host may take a gpu request");
}
