//! The conformance suite on the in-memory store, and what is particular
//! to it: its clones are one storage.

use store::{MemoryStore, Mutation, Store};

/// Each case of the conformance suite, as a test of its own.
mod conformance {
    use std::collections::HashMap;
    use std::sync::Mutex;

    use store::{MemoryStore, Store};

    /// Opens the case's storage: a new store the first time a name is
    /// used, a clone of it (the same storage) each time after.
    fn opener() -> impl Fn(&str) -> Box<dyn Store> + Sync {
        let stores: Mutex<HashMap<String, MemoryStore>> = Mutex::new(HashMap::new());
        move |case: &str| -> Box<dyn Store> {
            let mut stores = stores.lock().expect("lock");
            Box::new(stores.entry(case.to_string()).or_default().clone())
        }
    }

    store::conformance_tests!(
        #[tokio::test]
        opener
    );
}

/// A clone is the same storage: what one commits, the other loads, and a
/// store made afresh shares nothing with them.
#[tokio::test]
async fn clones_share_their_storage_and_new_stores_do_not() {
    let first = MemoryStore::new();
    let second = first.clone();
    first
        .apply(
            vec![Mutation::PutPool {
                config: store::conformance::pool("p"),
                counters: placement::PoolCounters::default(),
            }]
            .into(),
        )
        .await
        .expect("apply");
    let names = |s: store::Snapshot| -> Vec<String> {
        s.pools.into_iter().map(|p| p.config.name).collect()
    };
    assert_eq!(names(second.load().await.expect("load")), ["p"]);
    assert!(names(MemoryStore::new().load().await.expect("load")).is_empty());
}
