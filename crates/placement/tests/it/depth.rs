//! Rules D1–D2: DepthFirst fills the fullest host below the limit.

use placement::LoadBalancerType;

use crate::{Alg, Case, Want, World, check_all};

#[test]
fn d1_most_sessions_below_the_limit_ties_to_the_first_in_query_order() {
    let base = Case {
        alg: Alg::Depth,
        ..Case::DEFAULT
    };
    check_all(&[
        // Limit 6: all below it; b and c tie at 5, b was registered first.
        Case {
            name: "most sessions, tie to the first registered",
            hosts: "a:3 b:5 c:5 d:1",
            limit: 6,
            want: Want::Host("b"),
            ..base
        },
        Case {
            name: "the random value does not matter",
            hosts: "a:3 b:5 c:5 d:1",
            limit: 6,
            random: u64::MAX,
            want: Want::Host("b"),
            ..base
        },
        // Limit 5: b and c are at it (S2); the fullest below is a:3.
        Case {
            name: "hosts at the limit are skipped",
            hosts: "a:3 b:5 c:5 d:1",
            limit: 5,
            want: Want::Host("a"),
            ..base
        },
        // Limit 4: b and c are over it (P6 lowered it, say); a:3 is below.
        Case {
            name: "hosts over the limit are skipped",
            hosts: "a:3 b:5 c:5 d:1",
            limit: 4,
            want: Want::Host("a"),
            ..base
        },
        Case {
            name: "a drained host is skipped even though it is the fullest",
            hosts: "a:3 b:5:drained c:5 d:1",
            limit: 6,
            want: Want::Host("c"),
            ..base
        },
        Case {
            name: "an unavailable host is skipped",
            hosts: "a:3 b:5:down c:5:down d:1",
            limit: 6,
            want: Want::Host("a"),
            ..base
        },
        Case {
            name: "empty hosts: the first in query order",
            hosts: "q:0 p:0 o:0",
            limit: 6,
            want: Want::Host("q"),
            ..base
        },
        // The tie is decided by query order, not by the name.
        Case {
            name: "query order, not name order",
            hosts: "z:2 a:2 m:1",
            limit: 3,
            want: Want::Host("z"),
            ..base
        },
        // With the default limit DepthFirst keeps filling the fullest (P5 warns).
        Case {
            name: "the default limit",
            hosts: "a:40 b:41",
            want: Want::Host("b"),
            ..base
        },
    ]);
}

#[test]
fn d2_every_host_at_the_limit_is_refused_with_the_limit_in_the_message() {
    let base = Case {
        alg: Alg::Depth,
        ..Case::DEFAULT
    };
    check_all(&[
        Case {
            name: "two hosts at limit 2",
            hosts: "a:2 b:2",
            limit: 2,
            want: Want::Refused(
                "all session hosts have reached the max session limit (2): increase the limit or \
                 add session hosts",
            ),
            ..base
        },
        // Over the limit counts as at it.
        Case {
            name: "at and over limit 10",
            hosts: "a:10 b:12",
            limit: 10,
            want: Want::Refused(
                "all session hosts have reached the max session limit (10): increase the limit \
                 or add session hosts",
            ),
            ..base
        },
    ]);
}

#[test]
fn d1_fills_one_host_to_the_limit_then_the_next() {
    // Limit 3, three empty hosts: DepthFirst fills a, then b, then c, then refuses.
    let mut w = crate::build(Alg::Depth, 3, "a:0 b:0 c:0");
    let hosts: Vec<String> = (0..9)
        .map(|i| w.connect(&format!("u{i}@x"), u64::MAX).unwrap().host)
        .collect();
    assert_eq!(hosts, ["a", "a", "a", "b", "b", "b", "c", "c", "c"]);
    let e = w.connect("late@x", 0).unwrap_err();
    assert_eq!(e.code(), "NoSessionHostAvailable");
    assert!(e.to_string().contains("max session limit (3)"), "{e}");
    w.assert_consistent();
}

/// Rule A2: while a scaling plan's phase puts DepthFirst in force, a
/// BreadthFirst pool places depth first, and its own type is kept; clearing
/// the plan's algorithm brings its own back. A personal pool ignores it.
#[test]
fn a2_the_plans_algorithm_is_used_while_set_and_the_pools_is_kept() {
    let mut w = World::with_hosts(Alg::Classic, &["a", "b", "c"]);
    let first = w.connect("u1@x", 0).expect("first").host;
    assert_eq!(first, "a");
    // Breadth first would now pick b (fewest sessions, first in order).
    w.pool
        .set_plan_algorithm(Some(LoadBalancerType::DepthFirst));
    assert_eq!(
        w.pool.effective_load_balancer_type(),
        LoadBalancerType::DepthFirst
    );
    assert_eq!(
        w.pool.config().load_balancer_type,
        LoadBalancerType::BreadthFirst,
        "the pool's own type is kept"
    );
    assert_eq!(w.connect("u2@x", 0).expect("second").host, "a");
    w.pool.set_plan_algorithm(None);
    assert_eq!(
        w.pool.effective_load_balancer_type(),
        LoadBalancerType::BreadthFirst
    );
    assert_eq!(w.connect("u3@x", 0).expect("third").host, "b");
}
