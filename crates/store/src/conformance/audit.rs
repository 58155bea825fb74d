//! Conformance cases for the audit log: appended with its batch, queried
//! newest first with filters and pages, and pruned by age, count and bytes.

use super::{Opener, append, audit_entry, host, seed_batch, session};
use crate::{AuditQuery, Mutation};

/// Rule T5: entries survive a reopen and come back whole, newest first;
/// each filter narrows; a page continues below the last id it showed.
pub async fn the_audit_log_is_appended_queried_newest_first_and_paged(open: Opener<'_>) {
    let case = "the_audit_log_is_appended_queried_newest_first_and_paged";
    let store = open("audit-query");
    let mut batch = seed_batch("p");
    batch.push(append(audit_entry(1_000, "admin", Some("p"))));
    batch.push(append(audit_entry(2_000, "credential:ops", Some("q"))));
    store.apply(batch.into()).await.expect("apply");
    store
        .apply(
            vec![
                append(audit_entry(3_000, "admin", None)),
                append(audit_entry(4_000, "credential:ops", Some("p"))),
                append(audit_entry(5_000, "admin", Some("p"))),
            ]
            .into(),
        )
        .await
        .expect("apply");
    drop(store);
    let store = open("audit-query");
    let times = |rows: &[crate::AuditRow]| rows.iter().map(|r| r.entry.time_ms).collect::<Vec<_>>();
    let all = store
        .audit(AuditQuery {
            limit: 100,
            ..AuditQuery::default()
        })
        .await
        .expect("query");
    assert_eq!(
        times(&all),
        [5_000, 4_000, 3_000, 2_000, 1_000],
        "{case}: newest first"
    );
    assert_eq!(
        all[4].entry,
        audit_entry(1_000, "admin", Some("p")),
        "{case}: whole"
    );
    assert!(
        all.windows(2).all(|w| w[0].id > w[1].id),
        "{case}: ids grow"
    );
    let q = |f: &dyn Fn(&mut AuditQuery)| {
        let mut q = AuditQuery {
            limit: 100,
            ..AuditQuery::default()
        };
        f(&mut q);
        q
    };
    let got = store
        .audit(q(&|q| q.since_ms = Some(3_000)))
        .await
        .expect("since");
    assert_eq!(times(&got), [5_000, 4_000, 3_000], "{case}: since");
    let got = store
        .audit(q(&|q| q.actor = Some("credential:ops".into())))
        .await
        .expect("actor");
    assert_eq!(times(&got), [4_000, 2_000], "{case}: actor");
    let got = store
        .audit(q(&|q| q.host_pool = Some("p".into())))
        .await
        .expect("pool");
    assert_eq!(times(&got), [5_000, 4_000, 1_000], "{case}: pool");
    let got = store
        .audit(q(&|q| q.within_pools = Some(vec!["q".into(), "x".into()])))
        .await
        .expect("within");
    assert_eq!(
        times(&got),
        [2_000],
        "{case}: within pools (no entry without a pool)"
    );
    let got = store
        .audit(q(&|q| q.within_pools = Some(Vec::new())))
        .await
        .expect("within none");
    assert!(got.is_empty(), "{case}: within no pool");
    let got = store
        .audit(q(&|q| q.ended_sessions = true))
        .await
        .expect("ended none");
    assert!(got.is_empty(), "{case}: no entry is a session's end");
    let mut ended = audit_entry(6_000, "broker", Some("p"));
    ended.end_reason = Some("pendingTimeout".into());
    store
        .apply(vec![append(ended.clone())].into())
        .await
        .expect("apply");
    let got = store
        .audit(q(&|q| q.ended_sessions = true))
        .await
        .expect("ended");
    assert_eq!(got.len(), 1, "{case}: only sessions' ends");
    assert_eq!(got[0].entry, ended, "{case}: the end comes back whole");
    let got = store
        .audit(q(&|q| {
            q.ended_sessions = true;
            q.host_pool = Some("q".into());
        }))
        .await
        .expect("ended in q");
    assert!(got.is_empty(), "{case}: ends of another pool");
    let got = store
        .audit(q(&|q| {
            q.actor = Some("admin".into());
            q.host_pool = Some("p".into());
            q.since_ms = Some(2_000);
        }))
        .await
        .expect("all filters");
    assert_eq!(times(&got), [5_000], "{case}: filters combine");
    // Pages of two: [5000, 4000], then below 4000's id [3000, 2000], [1000].
    let mut pages = Vec::new();
    let mut before_id = None;
    loop {
        let page = store
            .audit(q(&|q| {
                q.limit = 2;
                q.before_id = before_id;
            }))
            .await
            .expect("page");
        if page.is_empty() {
            break;
        }
        before_id = page.last().map(|r| r.id);
        pages.push(times(&page));
    }
    assert_eq!(
        pages,
        [vec![6_000, 5_000], vec![4_000, 3_000], vec![2_000, 1_000]],
        "{case}: pages"
    );
    let got = store
        .audit(q(&|q| q.limit = usize::MAX))
        .await
        .expect("huge limit");
    assert_eq!(got.len(), 6, "{case}: a huge limit is capped, not an error");
}

/// An audit entry in a batch that fails is not kept, and one in a batch
/// that commits is kept with the change it records.
pub async fn an_audit_entry_commits_with_its_batch_or_not_at_all(open: Opener<'_>) {
    let case = "an_audit_entry_commits_with_its_batch_or_not_at_all";
    let store = open("audit-atomic");
    store.apply(seed_batch("p").into()).await.expect("apply");
    let bad = vec![
        append(audit_entry(1_000, "admin", Some("p"))),
        Mutation::PutSession {
            pool: "p".into(),
            session: session("s9", "nope", "carol"),
        },
    ];
    assert!(store.apply(bad.into()).await.is_err(), "{case}: refused");
    let all = || AuditQuery {
        limit: 100,
        ..AuditQuery::default()
    };
    assert!(
        store.audit(all()).await.expect("query").is_empty(),
        "{case}: nothing kept"
    );
    let mut h = host("h1", 2);
    h.spec.allow_new_session = false;
    store
        .apply(
            vec![
                Mutation::PutHost {
                    pool: "p".into(),
                    host: h.clone(),
                },
                append(audit_entry(2_000, "admin", Some("p"))),
            ]
            .into(),
        )
        .await
        .expect("apply");
    drop(store);
    let store = open("audit-atomic");
    let snap = store.load().await.expect("load");
    assert_eq!(snap.pools[0].hosts[1], h, "{case}: the change");
    let got = store.audit(all()).await.expect("query");
    assert_eq!(got.len(), 1, "{case}: and its entry");
    assert_eq!(got[0].entry.time_ms, 2_000, "{case}");
}

/// Retention: a prune removes entries older than its cutoff and all but
/// the newest `max_rows`, and leaves the rest.
pub async fn the_audit_log_is_pruned_by_age_and_count(open: Opener<'_>) {
    let case = "the_audit_log_is_pruned_by_age_and_count";
    let store = open("audit-prune");
    let batch: Vec<Mutation> = (1..=10)
        .map(|i| append(audit_entry(i * 1_000, "admin", Some("p"))))
        .collect();
    store.apply(batch.into()).await.expect("apply");
    let all = || AuditQuery {
        limit: 100,
        ..AuditQuery::default()
    };
    let times =
        |rows: Vec<crate::AuditRow>| rows.iter().map(|r| r.entry.time_ms).collect::<Vec<_>>();
    // Older than 3,000: 1,000 and 2,000 go.
    store
        .apply(
            vec![Mutation::PruneAudit {
                older_than_ms: 3_000,
                max_rows: u64::MAX,
                max_bytes: u64::MAX,
            }]
            .into(),
        )
        .await
        .expect("prune by age");
    assert_eq!(
        times(store.audit(all()).await.expect("query")),
        [10_000, 9_000, 8_000, 7_000, 6_000, 5_000, 4_000, 3_000],
        "{case}: by age"
    );
    // At most 3 rows, with an append in the same batch: the newest 3 stay.
    store
        .apply(
            vec![
                append(audit_entry(11_000, "admin", None)),
                Mutation::PruneAudit {
                    older_than_ms: 0,
                    max_rows: 3,
                    max_bytes: u64::MAX,
                },
            ]
            .into(),
        )
        .await
        .expect("prune by count");
    drop(store);
    let store = open("audit-prune");
    assert_eq!(
        times(store.audit(all()).await.expect("query")),
        [11_000, 10_000, 9_000],
        "{case}: by count"
    );
    store
        .apply(
            vec![Mutation::PruneAudit {
                older_than_ms: i64::MAX,
                max_rows: 0,
                max_bytes: u64::MAX,
            }]
            .into(),
        )
        .await
        .expect("prune all");
    assert!(
        store.audit(all()).await.expect("query").is_empty(),
        "{case}: emptied"
    );
    store
        .apply(vec![append(audit_entry(12_000, "admin", None))].into())
        .await
        .expect("append after emptying");
    let got = store.audit(all()).await.expect("query");
    assert_eq!(got.len(), 1, "{case}");
}

/// The byte bound: the oldest entries go while the log's records take more
/// than `max_bytes`, whether the store counted the log's bytes as it wrote
/// them or counts them afresh (after a reopen), appends of the same batch
/// included.
pub async fn the_audit_log_is_pruned_by_bytes_oldest_first(open: Opener<'_>) {
    let case = "the_audit_log_is_pruned_by_bytes_oldest_first";
    let store = open("audit-bytes");
    // Times of five digits: every entry's JSON is the same size.
    let entry = |i: i64| audit_entry(10_000 + i * 1_000, "admin", Some("p"));
    let size = serde_json::to_string(&entry(0)).expect("json").len() as u64;
    let prune = |max_bytes: u64| Mutation::PruneAudit {
        older_than_ms: 0,
        max_rows: u64::MAX,
        max_bytes,
    };
    let all = || AuditQuery {
        limit: 100,
        ..AuditQuery::default()
    };
    let times =
        |rows: Vec<crate::AuditRow>| rows.iter().map(|r| r.entry.time_ms).collect::<Vec<_>>();
    let batch: Vec<Mutation> = (0..10).map(|i| append(entry(i))).collect();
    store.apply(batch.into()).await.expect("apply");
    // Room for 4.5 entries: the newest 4 stay.
    store
        .apply(vec![prune(4 * size + size / 2)].into())
        .await
        .expect("prune by bytes");
    assert_eq!(
        times(store.audit(all()).await.expect("query")),
        [19_000, 18_000, 17_000, 16_000],
        "{case}: the oldest went first"
    );
    // Two appends and a bound of 3 in one batch: the newest 3 stay.
    store
        .apply(vec![append(entry(10)), append(entry(11)), prune(3 * size)].into())
        .await
        .expect("append and prune");
    assert_eq!(
        times(store.audit(all()).await.expect("query")),
        [21_000, 20_000, 19_000],
        "{case}: counted as written"
    );
    // Reopened, the store counts the log again.
    drop(store);
    let store = open("audit-bytes");
    store
        .apply(vec![prune(2 * size)].into())
        .await
        .expect("prune after reopen");
    assert_eq!(
        times(store.audit(all()).await.expect("query")),
        [21_000, 20_000],
        "{case}: counted afresh"
    );
    // A bound the log is within removes nothing.
    store
        .apply(vec![prune(2 * size)].into())
        .await
        .expect("prune within bounds");
    assert_eq!(store.audit(all()).await.expect("query").len(), 2, "{case}");
}

/// Folded entries: requests counted into the entry kept under their key
/// (the first one appends it, with its own fields; later ones, in the same
/// batch or another, only add to its count), each key apart, beside
/// ordinary entries (a count of 1); the counts survive a reopen, and a
/// folded entry is pruned like any other.
pub async fn folded_audit_entries_count_their_requests(open: Opener<'_>) {
    let case = "folded_audit_entries_count_their_requests";
    let store = open("audit-fold");
    let fold = |key: &str, entry: crate::AuditEntry| Mutation::FoldAudit {
        key: key.into(),
        entry,
    };
    let first = audit_entry(1_000, "credential:reader", Some("p"));
    store
        .apply(
            vec![
                fold("k1", first.clone()),
                fold("k1", audit_entry(1_500, "credential:reader", Some("p"))),
                append(audit_entry(1_600, "admin", Some("p"))),
                fold("k2", audit_entry(1_700, "credential:reader", None)),
            ]
            .into(),
        )
        .await
        .expect("apply");
    store
        .apply(
            vec![fold(
                "k1",
                audit_entry(1_900, "credential:reader", Some("p")),
            )]
            .into(),
        )
        .await
        .expect("apply again");
    drop(store);
    let store = open("audit-fold");
    let all = || AuditQuery {
        limit: 100,
        ..AuditQuery::default()
    };
    let rows = store.audit(all()).await.expect("query");
    let got: Vec<(i64, u64)> = rows.iter().map(|r| (r.entry.time_ms, r.count)).collect();
    assert_eq!(got, [(1_700, 1), (1_600, 1), (1_000, 3)], "{case}");
    assert_eq!(rows[2].entry, first, "{case}: the first request's entry");
    // Pruned like any other: by count, the oldest (the folded one) goes.
    store
        .apply(
            vec![Mutation::PruneAudit {
                older_than_ms: 0,
                max_rows: 2,
                max_bytes: u64::MAX,
            }]
            .into(),
        )
        .await
        .expect("prune");
    let got: Vec<i64> = store
        .audit(all())
        .await
        .expect("query")
        .iter()
        .map(|r| r.entry.time_ms)
        .collect();
    assert_eq!(got, [1_700, 1_600], "{case}: pruned");
    // Its key is free again: a new fold makes a new entry.
    store
        .apply(
            vec![fold(
                "k1",
                audit_entry(2_000, "credential:reader", Some("p")),
            )]
            .into(),
        )
        .await
        .expect("fold after prune");
    let rows = store.audit(all()).await.expect("query");
    assert_eq!((rows[0].entry.time_ms, rows[0].count), (2_000, 1), "{case}");
}
