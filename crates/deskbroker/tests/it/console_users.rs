//! The console's Users view (rule AD1) in a real browser against a real
//! Active Directory domain controller (`support::domain`): a reader types a
//! name and sees what the directory says of that user, nested groups
//! included; a name the directory does not know, a directory that cannot
//! be reached and a broker with no directory are each told plainly.

use serde_json::json;

use crate::browser::*;
use crate::directory::{directory_flags, domain, strs};
use crate::{App, PATIENCE, credential, eventually};

/// The names of the groups the view lists, in order.
const GROUPS_SHOWN: &str =
    "return [...document.querySelectorAll('#user-groups li')].map((li) => li.textContent);";

/// Looks `name` up through the view's form and waits for its answer.
async fn look_up(c: &fantoccini::Client, name: &str) {
    type_into(c, "#user-name", name).await;
    click(c, "#user-lookup button[type=submit]").await;
    wait_text(c, "#user-heading", "the answer's heading", |t| t == name).await;
}

async fn groups_shown(c: &fantoccini::Client) -> Vec<String> {
    serde_json::from_value(js(c, GROUPS_SHOWN, vec![]).await).expect("a list of names")
}

#[tokio::test]
async fn a_reader_sees_a_users_directory_groups_nested_ones_included() {
    // alice is in Sales, and Sales in RDS-Users; and in a group whose name,
    // shown raw, would read as "RDS-Users" (a right-to-left override
    // before "sresU-SDR"): whoever may name groups chose that text.
    let mut dc = domain();
    let lookalike = "\u{202e}sresU-SDR";
    dc.add_group(lookalike);
    dc.add_member(lookalike, "alice");
    let dir = tempfile::tempdir().expect("tempdir");
    let flags = directory_flags(&dc, &dc.ldaps_url(), 300);
    let (app, _) = App::spawn_with(&dir.path().join("data"), "127.0.0.1:0", &strs(&flags));
    let reader = credential(&app, "watcher", "reader", &[]).await;

    let b = browser().await;
    let c = &b.client;
    sign_in_as(c, &app, &reader).await;
    assert!(
        is_shown(c, "#nav a[data-nav=users]").await,
        "a reader has no Users link"
    );
    click(c, "#nav a[data-nav=users]").await;
    wait_js(
        c,
        "return !!document.querySelector('#user-lookup');",
        "the Users view",
    )
    .await;
    assert!(
        !is_shown(c, "#user-result").await,
        "an answer shown before any name was typed"
    );

    look_up(c, "alice").await;
    let found = wait_text(c, "#user-found", "whether alice is known", |t| {
        !t.is_empty()
    })
    .await;
    assert_eq!(found, "Known to the directory.");
    assert_eq!(text(c, "#user-dn").await, Some(dc.dn("alice")));
    let groups = groups_shown(c).await;
    for g in ["RDS-Users", "Sales", "Domain Users"] {
        assert!(groups.iter().any(|x| x == g), "{g} not in {groups:?}");
    }
    // Exactly the groups the API answers, in its order, the override
    // written as an escape: the look-alike cannot pass for RDS-Users.
    let api = app.ok("GET", "/api/v1/users/alice", None, 200).await;
    let escaped: Vec<String> = api["groups"]
        .as_array()
        .expect("groups")
        .iter()
        .map(|g| g.as_str().expect("a name").replace('\u{202e}', "\\u{202e}"))
        .collect();
    assert_eq!(groups, escaped, "{api}");
    assert!(
        groups.iter().any(|g| g == "\\u{202e}sresU-SDR"),
        "{groups:?}"
    );
    let age = text(c, "#user-age").await.unwrap_or_default();
    assert!(
        age.starts_with("read from the directory") && age.contains("kept 300 s"),
        "{age}"
    );
    // The name is in the page's address: a link to it opens the same.
    let hash = js(c, "return location.hash;", vec![]).await;
    assert_eq!(hash, json!("#/users?name=alice"));
    let (shots, _keep) = screenshot_dir();
    screenshot(c, &shots, "users.png").await;

    // Read again: the directory is read at once, and says so.
    click(c, "#user-refresh").await;
    wait_text(c, "#user-error", "the fresh read's note", |t| {
        t.starts_with("Read alice from the directory again at ")
    })
    .await;
    assert_eq!(groups_shown(c).await, groups);

    // DOMAIN\name is the same user.
    look_up(c, "DESKBROKER\\alice").await;
    wait_value(
        c,
        GROUPS_SHOWN,
        vec![],
        "alice's groups by DOMAIN\\name",
        |v| *v == json!(groups),
    )
    .await;

    // A name the directory does not know: not found, and no group at all.
    look_up(c, "nobody-here").await;
    let found = wait_text(c, "#user-found", "that nobody-here is unknown", |t| {
        t.starts_with("Not found")
    })
    .await;
    assert!(found.contains("belong to no group"), "{found}");
    assert_eq!(count(c, "#user-groups li").await, 0);
    assert_eq!(text(c, "#user-dn").await.as_deref(), Some("—"));
    assert_eq!(
        text(c, "#user-group-count").await.as_deref(),
        Some("No groups.")
    );

    // The directory out of reach: Read again says so, and the last answer
    // is not left on screen as if it were current.
    look_up(c, "alice").await;
    wait_text(c, "#user-found", "alice known again", |t| {
        t == "Known to the directory."
    })
    .await;
    dc.cut_off();
    let refused = eventually(PATIENCE, || async {
        let (status, body) = app
            .call("GET", "/api/v1/users/alice?refresh=true", None)
            .await;
        (status == 503).then_some(body)
    })
    .await
    .expect("the API refuses with 503 once the directory is cut off");
    assert_eq!(refused["error"]["code"], "DirectoryUnavailable");
    click(c, "#user-refresh").await;
    let said = wait_text(c, "#user-error", "the unreachable directory", |t| {
        t.starts_with("The directory cannot be reached")
    })
    .await;
    assert!(said.contains("DirectoryUnavailable: "), "{said}");
    assert!(
        !is_shown(c, "#user-result").await,
        "the answer stayed shown while the directory is away"
    );
    dc.restore();

    // A portal credential reads no one's groups: no link, and the route
    // leads back to the pools.
    click(c, "#signout").await;
    let portal = credential(&app, "portal-1", "portal", &[]).await;
    sign_in_as(c, &app, &portal).await;
    assert!(
        !is_shown(c, "#nav a[data-nav=users]").await,
        "a portal credential has a Users link"
    );
    go(c, "#/users?name=alice").await;
    wait_js(
        c,
        "return location.hash === '#/pools' && !document.querySelector('#user-lookup');",
        "the portal credential sent back to the pools",
    )
    .await;
}

#[tokio::test]
async fn without_a_directory_the_users_view_says_so() {
    let dir = tempfile::tempdir().expect("tempdir");
    let app = App::spawn(&dir);
    let b = browser().await;
    let c = &b.client;
    sign_in(c, &app).await;
    go(c, "#/users?name=alice").await;
    let said = wait_text(c, "#user-error", "that no directory is configured", |t| {
        t.starts_with("No directory is configured")
    })
    .await;
    assert!(said.contains("serve --directory-url"), "{said}");
    assert!(said.contains("NotFound: "), "{said}");
    assert!(!is_shown(c, "#user-result").await);
}
