//! Conformance cases for published applications and application groups
//! (rule F1): an application belongs to its pool (put, replaced, deleted
//! by pool and alias, and deleted with the pool); a group is kept by name
//! on its own (the broker deletes a pool's groups in the batch that
//! deletes the pool). Both come back after a reopen in byte order of
//! their keys, and a batch that fails keeps none of them.

use placement::{AppGroupKind, Application, ApplicationGroup, CommandLinePolicy};

use super::{Opener, counters, pool, seed_batch, session};
use crate::{Mutation, Snapshot, StoreError};

/// A published application shown as `display_name`, valid, with every
/// field set. Its icon is the PNG signature alone: the store keeps an
/// icon's text as given (its content is the broker's to check).
pub fn application(display_name: &str) -> Application {
    Application {
        display_name: display_name.into(),
        program: r"C:\Program Files\Contoso\app.exe".into(),
        command_line_policy: CommandLinePolicy::Fixed,
        command_line: "/profile \"ünïcode\"".into(),
        icon_png: Some("iVBORw0KGgo=".into()),
        icon_ico: None,
        file_extensions: vec![".txt".into(), ".log".into()],
        folder: "Office — ünïcode".into(),
        modified_ms: 1_700_000_400_000,
    }
}

/// An application group of `pool`: a `Desktop` one when it lists no
/// applications, a `RemoteApp` one giving `applications` otherwise.
pub fn application_group(pool: &str, applications: &[&str]) -> ApplicationGroup {
    ApplicationGroup {
        host_pool: pool.into(),
        kind: if applications.is_empty() {
            AppGroupKind::Desktop
        } else {
            AppGroupKind::RemoteApp
        },
        friendly_name: format!("{pool} — ünïcode"),
        applications: applications.iter().map(|a| a.to_string()).collect(),
        assigned_users: vec!["alice@contoso.com".into()],
        assigned_groups: vec!["Finance".into()],
        modified_ms: 1_700_000_500_000,
    }
}

fn put_app(pool: &str, alias: &str, application: Application) -> Mutation {
    Mutation::PutApplication {
        pool: pool.into(),
        alias: alias.into(),
        application,
    }
}

fn delete_app(pool: &str, alias: &str) -> Mutation {
    Mutation::DeleteApplication {
        pool: pool.into(),
        alias: alias.into(),
    }
}

fn put_group(name: &str, group: ApplicationGroup) -> Mutation {
    Mutation::PutApplicationGroup {
        name: name.into(),
        group,
    }
}

fn delete_group(name: &str) -> Mutation {
    Mutation::DeleteApplicationGroup { name: name.into() }
}

/// Each pool's applications in the snapshot: (pool, [(alias, name shown)]).
fn apps_of(snap: &Snapshot) -> Vec<(String, Vec<(String, String)>)> {
    snap.pools
        .iter()
        .map(|p| {
            let apps = p
                .applications
                .iter()
                .map(|(alias, a)| (alias.clone(), a.display_name.clone()))
                .collect();
            (p.config.name.clone(), apps)
        })
        .collect()
}

fn owned(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
    pairs
        .iter()
        .map(|(a, b)| (a.to_string(), b.to_string()))
        .collect()
}

/// Rule F1: an application is put by pool and alias, a put of the same
/// pool and alias replaces it (twice in one batch: the last holds), a
/// delete removes it (and of what is not there, changes nothing), and the
/// same alias in another pool is another application. An application of a
/// missing pool is refused as missing, and its batch changes nothing.
pub async fn applications_are_put_replaced_and_deleted(open: Opener<'_>) {
    let case = "applications_are_put_replaced_and_deleted";
    let store = open("applications");
    store.apply(seed_batch("p").into()).await.expect("seed p");
    store.apply(seed_batch("q").into()).await.expect("seed q");
    store
        .apply(
            vec![
                put_app("p", "word", application("Word")),
                put_app("p", "calc", application("Calculator")),
                put_app("p", "excel", application("Excel")),
                put_app("q", "word", application("Word of q")),
                // Replaced in the same batch: the last one holds.
                put_app("p", "calc", application("Calculator 2")),
            ]
            .into(),
        )
        .await
        .expect("put applications");
    let snap = store.load().await.expect("load");
    assert_eq!(
        apps_of(&snap),
        [
            (
                "p".to_string(),
                owned(&[
                    ("calc", "Calculator 2"),
                    ("excel", "Excel"),
                    ("word", "Word")
                ])
            ),
            ("q".to_string(), owned(&[("word", "Word of q")])),
        ],
        "{case}: put, by alias in alias order"
    );
    assert_eq!(
        snap.pools[0].applications[2].1,
        application("Word"),
        "{case}: an application comes back whole"
    );

    let mut word = application("Word 365");
    word.command_line_policy = CommandLinePolicy::Any;
    word.command_line = String::new();
    word.icon_png = None;
    word.icon_ico = Some("AAABAAEA".into());
    word.file_extensions = Vec::new();
    word.folder = String::new();
    store
        .apply(
            vec![
                put_app("p", "word", word.clone()),
                delete_app("p", "excel"),
                // Deleting what is not there changes nothing.
                delete_app("p", "nothing"),
                delete_app("nope", "word"),
                // Deleted and put again in one batch: the put holds.
                delete_app("q", "word"),
                put_app("q", "word", application("Word of q, again")),
            ]
            .into(),
        )
        .await
        .expect("replace and delete");
    let snap = store.load().await.expect("load");
    assert_eq!(
        apps_of(&snap),
        [
            (
                "p".to_string(),
                owned(&[("calc", "Calculator 2"), ("word", "Word 365")])
            ),
            ("q".to_string(), owned(&[("word", "Word of q, again")])),
        ],
        "{case}: replaced and deleted"
    );
    assert_eq!(
        snap.pools[0].applications[1].1, word,
        "{case}: a replacement keeps every field it has, and none of the old one's"
    );

    let refused = store
        .apply(
            vec![
                delete_app("p", "calc"),
                put_app("nope", "word", application("Word")),
            ]
            .into(),
        )
        .await;
    assert!(
        matches!(refused, Err(StoreError::Missing(_))),
        "{case}: an application of a missing pool is refused as missing: {refused:?}"
    );
    assert_eq!(
        store.load().await.expect("load"),
        snap,
        "{case}: the refused batch changed nothing"
    );
}

/// Rule F1: an application group is put by name whatever pools the store
/// holds (that its pool exists is the broker's to check), a put of the
/// same name replaces it (twice in one batch: the last holds), and a
/// delete removes it (of a name not there, changes nothing).
pub async fn application_groups_are_put_replaced_and_deleted(open: Opener<'_>) {
    let case = "application_groups_are_put_replaced_and_deleted";
    let store = open("application-groups");
    store
        .apply(
            vec![
                put_group("p-apps", application_group("p", &["word", "calc"])),
                put_group("p-desktop", application_group("p", &[])),
                put_group("q-apps", application_group("q", &["word"])),
                // Replaced in the same batch: the last one holds.
                put_group("q-apps", application_group("q", &["excel"])),
            ]
            .into(),
        )
        .await
        .expect("put groups");
    let snap = store.load().await.expect("load");
    assert_eq!(
        snap.application_groups,
        [
            (
                "p-apps".to_string(),
                application_group("p", &["word", "calc"])
            ),
            ("p-desktop".to_string(), application_group("p", &[])),
            ("q-apps".to_string(), application_group("q", &["excel"])),
        ],
        "{case}: put, whole, in name order"
    );
    assert!(snap.pools.is_empty(), "{case}: groups make no pools");

    let mut reassigned = application_group("p", &["calc"]);
    reassigned.assigned_users = Vec::new();
    reassigned.assigned_groups = vec!["Sales".into(), "Finance".into()];
    reassigned.friendly_name = String::new();
    store
        .apply(
            vec![
                put_group("p-apps", reassigned.clone()),
                delete_group("p-desktop"),
                delete_group("nothing"),
                // Deleted and put again in one batch: the put holds.
                delete_group("q-apps"),
                put_group("q-apps", application_group("q", &["word"])),
            ]
            .into(),
        )
        .await
        .expect("replace and delete");
    let snap = store.load().await.expect("load");
    assert_eq!(
        snap.application_groups,
        [
            ("p-apps".to_string(), reassigned),
            ("q-apps".to_string(), application_group("q", &["word"])),
        ],
        "{case}: replaced and deleted"
    );
}

/// Deleting a pool deletes its applications and nothing of other pools';
/// a pool made again under that name has none. Groups are the broker's to
/// delete (in the batch that deletes the pool): the store keeps a group
/// until it is deleted, whatever became of its pool.
pub async fn a_pools_deletion_removes_its_applications(open: Opener<'_>) {
    let case = "a_pools_deletion_removes_its_applications";
    let store = open("applications-of-deleted-pool");
    store.apply(seed_batch("p").into()).await.expect("seed p");
    store.apply(seed_batch("q").into()).await.expect("seed q");
    store
        .apply(
            vec![
                put_app("p", "word", application("Word")),
                put_app("p", "calc", application("Calculator")),
                put_app("q", "word", application("Word of q")),
                put_group("p-apps", application_group("p", &["word"])),
                put_group("q-apps", application_group("q", &["word"])),
                put_group("q-desktop", application_group("q", &[])),
            ]
            .into(),
        )
        .await
        .expect("put");
    store
        .apply(
            vec![
                Mutation::DeletePool { pool: "p".into() },
                delete_group("p-apps"),
            ]
            .into(),
        )
        .await
        .expect("delete pool p and its group");
    let snap = store.load().await.expect("load");
    assert_eq!(
        apps_of(&snap),
        [("q".to_string(), owned(&[("word", "Word of q")]))],
        "{case}: p's applications went with it, q's stay"
    );
    let groups: Vec<&str> = snap
        .application_groups
        .iter()
        .map(|(n, _)| n.as_str())
        .collect();
    assert_eq!(groups, ["q-apps", "q-desktop"], "{case}: groups of q stay");

    store
        .apply(
            vec![Mutation::PutPool {
                config: pool("p"),
                counters: counters(1),
            }]
            .into(),
        )
        .await
        .expect("make p again");
    store
        .apply(vec![Mutation::DeletePool { pool: "q".into() }].into())
        .await
        .expect("delete pool q alone");
    let snap = store.load().await.expect("load");
    assert_eq!(
        apps_of(&snap),
        [("p".to_string(), Vec::new())],
        "{case}: a pool made again has no applications, and q's went with q"
    );
    let groups: Vec<&str> = snap
        .application_groups
        .iter()
        .map(|(n, _)| n.as_str())
        .collect();
    assert_eq!(
        groups,
        ["q-apps", "q-desktop"],
        "{case}: a group stays until the broker deletes it"
    );
}

/// What was applied is what a reopened store loads: every field of every
/// application and group, applications in their pool by alias and groups
/// by name, both in byte order (upper case before lower case), beside the
/// pool's other state.
pub async fn applications_and_groups_come_back_after_reopen(open: Opener<'_>) {
    let case = "applications_and_groups_come_back_after_reopen";
    let store = open("applications-reopen");
    store.apply(seed_batch("p").into()).await.expect("seed p");
    store.apply(seed_batch("a").into()).await.expect("seed a");
    let mut any = application("Terminal");
    any.program = "/usr/bin/gnome-terminal".into();
    any.command_line_policy = CommandLinePolicy::Any;
    any.command_line = String::new();
    store
        .apply(
            vec![
                put_app("p", "beta", application("Beta")),
                put_app("p", "Zed", application("Zed")),
                put_app("p", "alpha", any.clone()),
                put_app("a", "one", application("One")),
                put_group("p-remote", application_group("p", &["alpha", "Zed"])),
                put_group("P-desktop", application_group("p", &[])),
                put_group("a-desktop", application_group("a", &[])),
            ]
            .into(),
        )
        .await
        .expect("put");
    store
        .apply(vec![put_app("p", "gamma", application("Gamma"))].into())
        .await
        .expect("put another");
    let before = store.load().await.expect("load");
    drop(store);
    let snap = open("applications-reopen").load().await.expect("reopen");
    assert_eq!(snap, before, "{case}: a reopen loads what was applied");
    assert_eq!(
        snap.pools[1].applications,
        [
            ("Zed".to_string(), application("Zed")),
            ("alpha".to_string(), any),
            ("beta".to_string(), application("Beta")),
            ("gamma".to_string(), application("Gamma")),
        ],
        "{case}: p's applications by alias, in byte order"
    );
    assert_eq!(
        snap.pools[0].applications,
        [("one".to_string(), application("One"))],
        "{case}: a's"
    );
    assert_eq!(
        snap.application_groups,
        [
            ("P-desktop".to_string(), application_group("p", &[])),
            ("a-desktop".to_string(), application_group("a", &[])),
            (
                "p-remote".to_string(),
                application_group("p", &["alpha", "Zed"])
            ),
        ],
        "{case}: groups by name, in byte order"
    );
    assert_eq!(snap.pools[1].hosts.len(), 2, "{case}: beside the hosts");
    assert_eq!(snap.pools[1].sessions.len(), 2, "{case}: and sessions");
}

/// A batch that puts and deletes applications and groups is all or
/// nothing: when any mutation of it fails (an application of a missing
/// pool, or a session on a missing host), none of its applications or
/// groups is kept, ordinary or relaxed.
pub async fn a_failing_batch_applies_none_of_its_applications(open: Opener<'_>) {
    let case = "a_failing_batch_applies_none_of_its_applications";
    let store = open("applications-atomic");
    store.apply(seed_batch("p").into()).await.expect("seed p");
    store
        .apply(
            vec![
                put_app("p", "word", application("Word")),
                put_app("p", "calc", application("Calculator")),
                put_group("p-apps", application_group("p", &["word"])),
                put_group("p-desktop", application_group("p", &[])),
            ]
            .into(),
        )
        .await
        .expect("put");
    let before = store.load().await.expect("load");
    let changes = || {
        vec![
            put_app("p", "excel", application("Excel")),
            put_app("p", "word", application("Word 2")),
            delete_app("p", "calc"),
            put_group("p-more", application_group("p", &["excel"])),
            put_group("p-apps", application_group("p", &["calc"])),
            delete_group("p-desktop"),
        ]
    };
    let mut missing_pool = changes();
    missing_pool.push(put_app("nope", "word", application("Word")));
    let refused = store.apply(missing_pool.into()).await;
    assert!(
        refused.is_err(),
        "{case}: an application of a missing pool: {refused:?}"
    );
    let mut missing_host = changes();
    missing_host.insert(
        3,
        Mutation::PutSession {
            pool: "p".into(),
            session: session("s9", "nope", "carol@contoso.com"),
        },
    );
    let refused = store.apply(missing_host.clone().into()).await;
    assert!(
        refused.is_err(),
        "{case}: a session on a missing host: {refused:?}"
    );
    let refused = store.apply_relaxed(missing_host.into()).await;
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
        open("applications-atomic").load().await.expect("reopen"),
        before,
        "{case}: nor after a reopen"
    );
}
