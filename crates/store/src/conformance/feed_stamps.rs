//! Conformance cases for the workspace feed's stamps (rule F4): a user's
//! stamp is kept by user on its own (no pool owns it), put, replaced and
//! deleted one user at a time without touching another's, and comes back
//! after a reopen in byte order of the users' names. A batch that fails
//! keeps none of its stamps.

use placement::FeedStamp;

use super::{Opener, seed_batch, session};
use crate::{Mutation, Snapshot};

/// A feed stamp numbered `n`: a digest of 64 hex digits made of `n`, held
/// since a time that grows with `n`.
pub fn feed_stamp(n: u32) -> FeedStamp {
    FeedStamp {
        set_hash: format!("{n:08x}").repeat(8),
        since_ms: 1_700_000_600_000 + i64::from(n),
    }
}

fn put_stamp(user: &str, stamp: FeedStamp) -> Mutation {
    Mutation::PutFeedStamp {
        user: user.into(),
        stamp,
    }
}

fn delete_stamp(user: &str) -> Mutation {
    Mutation::DeleteFeedStamp { user: user.into() }
}

/// The snapshot's stamps as (user, stamp) pairs of `n`s, for short
/// comparisons.
fn stamps(pairs: &[(&str, u32)]) -> Vec<(String, FeedStamp)> {
    pairs
        .iter()
        .map(|(user, n)| (user.to_string(), feed_stamp(*n)))
        .collect()
}

/// Rule F4: a stamp is put by user whatever else the store holds, a put
/// for the same user replaces it (twice in one batch: the last holds), a
/// delete forgets it (of a user without one, changes nothing), and a
/// delete and a put in one batch leave the put.
pub async fn feed_stamps_are_put_replaced_and_deleted(open: Opener<'_>) {
    let case = "feed_stamps_are_put_replaced_and_deleted";
    let store = open("feed-stamps");
    store
        .apply(
            vec![
                put_stamp("bob@contoso.com", feed_stamp(1)),
                put_stamp("alice@contoso.com", feed_stamp(2)),
                put_stamp("carol@contoso.com", feed_stamp(3)),
                // Replaced in the same batch: the last one holds.
                put_stamp("bob@contoso.com", feed_stamp(4)),
            ]
            .into(),
        )
        .await
        .expect("put stamps");
    let snap = store.load().await.expect("load");
    assert_eq!(
        snap.feed_stamps,
        stamps(&[
            ("alice@contoso.com", 2),
            ("bob@contoso.com", 4),
            ("carol@contoso.com", 3),
        ]),
        "{case}: put, whole, in user order"
    );
    assert!(snap.pools.is_empty(), "{case}: stamps make no pools");

    // A stamp with its hash emptied and its time before the epoch comes
    // back as it was put: the store keeps what the broker gives.
    let odd = FeedStamp {
        set_hash: String::new(),
        since_ms: -1,
    };
    store
        .apply(
            vec![
                put_stamp("alice@contoso.com", odd.clone()),
                delete_stamp("carol@contoso.com"),
                delete_stamp("nobody@contoso.com"),
                // Deleted and put again in one batch: the put holds.
                delete_stamp("bob@contoso.com"),
                put_stamp("bob@contoso.com", feed_stamp(5)),
            ]
            .into(),
        )
        .await
        .expect("replace and delete");
    let snap = store.load().await.expect("load");
    assert_eq!(
        snap.feed_stamps,
        [
            ("alice@contoso.com".to_string(), odd),
            ("bob@contoso.com".to_string(), feed_stamp(5)),
        ],
        "{case}: replaced and deleted"
    );

    // Put and deleted again in one batch: the delete holds.
    store
        .apply(
            vec![
                put_stamp("carol@contoso.com", feed_stamp(6)),
                delete_stamp("carol@contoso.com"),
                delete_stamp("alice@contoso.com"),
            ]
            .into(),
        )
        .await
        .expect("put then delete");
    assert_eq!(
        store.load().await.expect("load").feed_stamps,
        stamps(&[("bob@contoso.com", 5)]),
        "{case}: a delete after a put in one batch forgets it"
    );
}

/// A put or a delete of one user's stamp changes no other user's: not a
/// user whose name differs only in case (the store keeps names as the
/// broker gives them), nor one whose name begins the same. Stamps belong
/// to no pool: deleting a pool leaves them.
pub async fn a_feed_stamp_put_leaves_other_users_alone(open: Opener<'_>) {
    let case = "a_feed_stamp_put_leaves_other_users_alone";
    let store = open("feed-stamps-others");
    store.apply(seed_batch("p").into()).await.expect("seed p");
    store
        .apply(
            vec![
                put_stamp("alice@contoso.com", feed_stamp(1)),
                put_stamp("Alice@contoso.com", feed_stamp(2)),
                put_stamp("alice@contoso.com.evil", feed_stamp(3)),
                put_stamp("bob@contoso.com", feed_stamp(4)),
            ]
            .into(),
        )
        .await
        .expect("put stamps");
    let before = store.load().await.expect("load");

    store
        .apply(vec![put_stamp("alice@contoso.com", feed_stamp(10))].into())
        .await
        .expect("replace alice's");
    let snap = store.load().await.expect("load");
    assert_eq!(
        snap.feed_stamps,
        stamps(&[
            ("Alice@contoso.com", 2),
            ("alice@contoso.com", 10),
            ("alice@contoso.com.evil", 3),
            ("bob@contoso.com", 4),
        ]),
        "{case}: only alice's changed"
    );
    assert_eq!(
        Snapshot {
            feed_stamps: before.feed_stamps.clone(),
            ..snap.clone()
        },
        before,
        "{case}: and nothing else of the store"
    );

    store
        .apply(
            vec![
                delete_stamp("Alice@contoso.com"),
                Mutation::DeletePool { pool: "p".into() },
            ]
            .into(),
        )
        .await
        .expect("delete one stamp and the pool");
    let snap = store.load().await.expect("load");
    assert_eq!(
        snap.feed_stamps,
        stamps(&[
            ("alice@contoso.com", 10),
            ("alice@contoso.com.evil", 3),
            ("bob@contoso.com", 4),
        ]),
        "{case}: a delete forgets that user's alone, and the pool's deletion none"
    );
    assert!(snap.pools.is_empty(), "{case}: the pool went");
}

/// Stamps of many users, put over several batches (some users put again),
/// come back after a reopen each with its last stamp, in byte order of the
/// users' names (upper case before lower case, ASCII before the rest),
/// beside the store's other state.
pub async fn feed_stamps_of_many_users_come_back_after_reopen(open: Opener<'_>) {
    let case = "feed_stamps_of_many_users_come_back_after_reopen";
    let store = open("feed-stamps-reopen");
    store.apply(seed_batch("p").into()).await.expect("seed p");
    let user = |n: u32| format!("user{n:04}@contoso.com");
    // 500 users in one batch, in an order that is not theirs.
    let first: Vec<Mutation> = (0..500u32)
        .map(|i| (i * 7) % 500)
        .map(|n| put_stamp(&user(n), feed_stamp(n)))
        .collect();
    store.apply(first.into()).await.expect("first batch");
    // Every third put again, interleaved with other kinds of mutation.
    let mut again = Vec::new();
    let mut sessions = 0;
    for n in (0..500u32).step_by(3) {
        again.push(put_stamp(&user(n), feed_stamp(1_000 + n)));
        if n % 30 == 0 {
            again.push(Mutation::PutSession {
                pool: "p".into(),
                session: session(&format!("s-{n}"), "h1", &user(n)),
            });
            sessions += 1;
        }
    }
    again.push(put_stamp("Zed@contoso.com", feed_stamp(7)));
    again.push(put_stamp("ünïcode@contoso.com", feed_stamp(8)));
    again.push(put_stamp("Ärger@contoso.com", feed_stamp(9)));
    store.apply(again.into()).await.expect("second batch");
    store
        .apply_relaxed(vec![put_stamp("user0001@contoso.com", feed_stamp(2_001))].into())
        .await
        .expect("a relaxed put");

    let before = store.load().await.expect("load");
    drop(store);
    let snap = open("feed-stamps-reopen").load().await.expect("reopen");
    assert_eq!(snap, before, "{case}: a reopen loads what was applied");

    let mut want: Vec<(String, FeedStamp)> = vec![("Zed@contoso.com".into(), feed_stamp(7))];
    for n in 0..500u32 {
        let stamp = match n {
            1 => feed_stamp(2_001),
            n if n % 3 == 0 => feed_stamp(1_000 + n),
            n => feed_stamp(n),
        };
        want.push((user(n), stamp));
    }
    want.push(("Ärger@contoso.com".into(), feed_stamp(9)));
    want.push(("ünïcode@contoso.com".into(), feed_stamp(8)));
    assert_eq!(
        snap.feed_stamps, want,
        "{case}: every user's last stamp, in byte order"
    );
    assert_eq!(
        snap.pools[0].sessions.len(),
        2 + sessions,
        "{case}: beside the sessions put in the same batch"
    );
}

/// A batch with stamps is all or nothing: when any mutation of it fails (a
/// session on a missing host), none of its stamps is put or deleted,
/// ordinary or relaxed, and a reopen finds the store as it was.
pub async fn a_failing_batch_applies_none_of_its_feed_stamps(open: Opener<'_>) {
    let case = "a_failing_batch_applies_none_of_its_feed_stamps";
    let store = open("feed-stamps-atomic");
    store.apply(seed_batch("p").into()).await.expect("seed p");
    store
        .apply(
            vec![
                put_stamp("alice@contoso.com", feed_stamp(1)),
                put_stamp("bob@contoso.com", feed_stamp(2)),
            ]
            .into(),
        )
        .await
        .expect("put");
    let before = store.load().await.expect("load");
    let failing = vec![
        put_stamp("alice@contoso.com", feed_stamp(3)),
        put_stamp("carol@contoso.com", feed_stamp(4)),
        delete_stamp("bob@contoso.com"),
        Mutation::PutSession {
            pool: "p".into(),
            session: session("s9", "nope", "carol@contoso.com"),
        },
        put_stamp("dave@contoso.com", feed_stamp(5)),
    ];
    let refused = store.apply(failing.clone().into()).await;
    assert!(
        refused.is_err(),
        "{case}: a session on a missing host: {refused:?}"
    );
    let refused = store.apply_relaxed(failing.into()).await;
    assert!(
        refused.is_err(),
        "{case}: the same batch, relaxed: {refused:?}"
    );
    assert_eq!(
        store.load().await.expect("load"),
        before,
        "{case}: the refused batches left nothing behind"
    );
    drop(store);
    assert_eq!(
        open("feed-stamps-atomic").load().await.expect("reopen"),
        before,
        "{case}: nor after a reopen"
    );
}
