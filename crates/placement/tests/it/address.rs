//! Rule R3: a redirected connection names its host by address. The pool
//! finds it through an index (the front door asks once per connection,
//! under the pool's lock), first in query order when several hosts share
//! an address, through every change of its hosts and after a restore.

use placement::{HostPoolType, HostSpec, LoadBalancerType, Pool, PoolConfig};

fn at<'a>(p: &'a Pool, address: &str) -> Option<&'a str> {
    p.host_at(address).map(|h| h.spec.name.as_str())
}

#[test]
fn r3_a_host_is_found_by_its_address_through_moves_removals_and_a_restore() {
    let config = PoolConfig::new("p", HostPoolType::Pooled, LoadBalancerType::BreadthFirst);
    let mut p = Pool::new(config.clone(), 1, 0);
    let put = |p: &mut Pool, name: &str, address: &str| {
        p.upsert_host(HostSpec::new(name, address), 0)
            .expect("valid host");
    };
    put(&mut p, "a", "10.0.0.1:3389");
    put(&mut p, "b", "10.0.0.1:3389");
    put(&mut p, "c", "10.0.0.2:3389");
    assert_eq!(at(&p, "10.0.0.1:3389"), Some("a"), "first in query order");
    assert_eq!(at(&p, "10.0.0.2:3389"), Some("c"));
    assert_eq!(at(&p, "10.0.0.9:3389"), None);
    assert_eq!(at(&p, "10.0.0.1"), None, "the whole address, port too");

    put(&mut p, "a", "10.0.0.3:3389");
    assert_eq!(at(&p, "10.0.0.1:3389"), Some("b"), "a moved away");
    assert_eq!(at(&p, "10.0.0.3:3389"), Some("a"));
    put(&mut p, "a", "10.0.0.1:3389");
    assert_eq!(
        at(&p, "10.0.0.1:3389"),
        Some("a"),
        "back, and first again: a host keeps its place in query order"
    );
    assert_eq!(at(&p, "10.0.0.3:3389"), None);

    let restored = Pool::restore(
        config,
        p.counters(),
        p.hosts().cloned().collect(),
        Vec::new(),
        0,
    );
    for address in ["10.0.0.1:3389", "10.0.0.2:3389", "10.0.0.3:3389"] {
        assert_eq!(at(&restored, address), at(&p, address), "{address}");
    }

    p.remove_host("a", true).expect("removed");
    assert_eq!(at(&p, "10.0.0.1:3389"), Some("b"));
    p.remove_host("b", true).expect("removed");
    assert_eq!(at(&p, "10.0.0.1:3389"), None);
    assert_eq!(at(&p, "10.0.0.2:3389"), Some("c"));
}
