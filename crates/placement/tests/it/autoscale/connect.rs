//! A8: start on connect, pooled and personal — at most one host per
//! connect, never an operator's drained host, the user's own in a personal
//! pool.

use placement::autoscale::{StartOnConnect, start_on_connect};
use placement::{
    ConnectRequest, HostPoolType, LoadBalancerType, PersonalDesktopAssignmentType, PoolConfig,
};

use super::Farm;

fn pooled() -> PoolConfig {
    PoolConfig::new("p", HostPoolType::Pooled, LoadBalancerType::BreadthFirst)
}

fn personal(assignment: PersonalDesktopAssignmentType) -> PoolConfig {
    let mut c = PoolConfig::new("p", HostPoolType::Personal, LoadBalancerType::Persistent);
    c.personal_desktop_assignment_type = Some(assignment);
    c
}

fn req(user: &str) -> ConnectRequest<'_> {
    ConnectRequest {
        user,
        ..Default::default()
    }
}

#[test]
fn a8_pooled_starts_the_first_stopped_host_once() {
    use StartOnConnect::*;
    // (hosts, answer): operator-drained h2 is skipped, h3 is first.
    let rows: [(&str, StartOnConnect<'_>); 5] = [
        (
            "h1:10 h2:0SD h3:0S h4:0S",
            Start {
                host: "h3",
                undrain: false,
            },
        ),
        // A host already starting: wait for it, start no spare.
        ("h1:10 h2:0s h3:0S", AlreadyStarting { host: "h2" }),
        // A host the plan drained and stopped is started and undrained.
        (
            "h1:10 h2:0SP",
            Start {
                host: "h2",
                undrain: true,
            },
        ),
        ("h1:10 h2:0SD h3:0x", NoHost),
        ("h1:10", NoHost),
    ];
    for (hosts, want) in rows {
        let farm = Farm::new(10, hosts);
        assert_eq!(
            start_on_connect(&farm.view(), &pooled(), &req("a@x")),
            want,
            "{hosts}"
        );
    }
    // A limit of 0 places nobody, so it starts nothing.
    let farm = Farm::new(0, "h1:0S");
    assert_eq!(
        start_on_connect(&farm.view(), &pooled(), &req("a@x")),
        NoHost
    );
}

#[test]
fn a8_pooled_requires_capabilities() {
    let mut farm = Farm::new(10, "h1:0S h2:0S");
    farm.host("h2").capabilities.push("gpu".into());
    let requires = vec!["gpu".to_string()];
    let r = ConnectRequest {
        user: "a@x",
        requires: &requires,
        session_host: None,
    };
    assert_eq!(
        start_on_connect(&farm.view(), &pooled(), &r),
        StartOnConnect::Start {
            host: "h2",
            undrain: false
        }
    );
}

#[test]
fn a8_personal_starts_the_users_own_host() {
    use PersonalDesktopAssignmentType::*;
    use StartOnConnect::*;
    let mut farm = Farm::new(1, "h1:0S h2:0S h3:0S h4:0SD");
    farm.host("h2").assigned_user = Some("Alice@Contoso.com".into());
    farm.host("h4").assigned_user = Some("carol@contoso.com".into());
    let v = farm.view();
    // Alice's own, whatever the case of her name; not the first free host.
    assert_eq!(
        start_on_connect(&v, &personal(Automatic), &req("alice@contoso.com")),
        Start {
            host: "h2",
            undrain: false
        }
    );
    // Bob has none: Automatic gives him the first unassigned host; Direct none.
    assert_eq!(
        start_on_connect(&v, &personal(Automatic), &req("bob@contoso.com")),
        Start {
            host: "h1",
            undrain: false
        }
    );
    assert_eq!(
        start_on_connect(&v, &personal(Direct), &req("bob@contoso.com")),
        NoHost
    );
    // Carol's host is drained by an operator: not started, and she is not
    // given someone else's or a free one instead.
    assert_eq!(
        start_on_connect(&v, &personal(Automatic), &req("carol@contoso.com")),
        NoHost
    );
}

#[test]
fn a8_multiple_persistent_starts_the_named_host() {
    let mut farm = Farm::new(1, "h1:0S h2:0S");
    for h in ["h1", "h2"] {
        farm.host(h).assigned_user = Some("alice@contoso.com".into());
    }
    let mut c = personal(PersonalDesktopAssignmentType::Direct);
    c.load_balancer_type = LoadBalancerType::MultiplePersistent;
    let r = ConnectRequest {
        user: "alice@contoso.com",
        requires: &[],
        session_host: Some("h2"),
    };
    assert_eq!(
        start_on_connect(&farm.view(), &c, &r),
        StartOnConnect::Start {
            host: "h2",
            undrain: false
        }
    );
    assert_eq!(
        start_on_connect(&farm.view(), &c, &req("alice@contoso.com")),
        StartOnConnect::Start {
            host: "h1",
            undrain: false
        }
    );
}
