//! Rules F1 and F2: a pool publishes applications, application groups give
//! them (or the pool's desktop) to users and groups, and an application's
//! launch file opens it in the user's one session of the pool. Bad input
//! is refused whole, naming the field; what is given is exactly what the
//! groups say, and survives a restart.

use base64::Engine as _;
use broker::testkit::Kit;
use serde_json::{Value, json};

/// A 1×1 PNG (a real image: its header, one IDAT, IEND).
const PNG_1X1: &[u8] = &[
    0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0x00, 0x00, 0x00, 0x0d, 0x49, 0x48, 0x44, 0x52,
    0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x01, 0x08, 0x06, 0x00, 0x00, 0x00, 0x1f, 0x15, 0xc4,
    0x89, 0x00, 0x00, 0x00, 0x0d, 0x49, 0x44, 0x41, 0x54, 0x78, 0x9c, 0x63, 0xf8, 0xcf, 0xc0, 0xf0,
    0x1f, 0x00, 0x05, 0x00, 0x01, 0xff, 0x89, 0x99, 0x3d, 0x1d, 0x00, 0x00, 0x00, 0x00, 0x49, 0x45,
    0x4e, 0x44, 0xae, 0x42, 0x60, 0x82,
];

fn b64(bytes: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

const APPS: &str = "/api/v1/hostPools/apps/applications";

async fn publish(kit: &Kit, alias: &str, body: Value) -> Value {
    kit.ok("PUT", &format!("{APPS}/{alias}"), Some(body), 201)
        .await
}

async fn group(kit: &Kit, name: &str, body: Value) -> Value {
    let (status, v) = kit
        .call(
            "PUT",
            &format!("/api/v1/applicationGroups/{name}"),
            Some(body),
        )
        .await;
    assert!(status == 201 || status == 200, "{status}: {v}");
    v
}

/// A pool `apps` with two hosts, served by a front door at
/// `door.example:3389`.
async fn kit_with_pool() -> Kit {
    let kit = Kit::open_with(|s| s.rdp_front_door = Some("door.example:3389".into())).await;
    kit.pool_with_hosts("apps", "BreadthFirst", 10, 2).await;
    kit
}

fn notepad() -> Value {
    json!({"displayName": "Notepad", "program": "||notepad", "fileExtensions": [".txt"],
           "folder": "Office", "iconPng": b64(PNG_1X1)})
}

/// The value of the file's `name` line.
fn line(file: &str, name: &str) -> Option<String> {
    file.split("\r\n").find_map(|l| {
        let (n, rest) = l.split_once(':')?;
        let (_, value) = rest.split_once(':')?;
        (n == name).then(|| value.to_string())
    })
}

#[tokio::test(start_paused = true)]
async fn applications_are_published_shown_and_refused_whole_when_wrong() {
    let kit = kit_with_pool().await;
    let v = publish(&kit, "notepad", notepad()).await;
    assert_eq!(v["alias"], "notepad");
    assert_eq!(v["hostPool"], "apps");
    assert_eq!(v["iconPng"], b64(PNG_1X1));
    // The list leaves the icons out; one application carries them.
    let list = kit.ok("GET", APPS, None, 200).await;
    assert_eq!(list["value"][0]["alias"], "notepad");
    assert!(list["value"][0].get("iconPng").is_none(), "{list}");
    let one = kit.ok("GET", &format!("{APPS}/notepad"), None, 200).await;
    assert_eq!(one["iconPng"], b64(PNG_1X1));
    // Replaced: 200.
    let (status, _) = kit
        .call("PUT", &format!("{APPS}/notepad"), Some(notepad()))
        .await;
    assert_eq!(status, 200);

    let big = vec![0u8; 70 * 1024];
    for (alias, body, field) in [
        ("not a name", notepad(), "alias"),
        (
            "x",
            json!({"displayName": "X", "program": "a\nb"}),
            "program",
        ),
        (
            "x",
            json!({"displayName": "X", "program": "/bin/x", "commandLine": "-y"}),
            "commandLine",
        ),
        (
            "x",
            json!({"displayName": "X", "program": "/bin/x", "iconPng": "not base64!"}),
            "iconPng",
        ),
        (
            "x",
            json!({"displayName": "X", "program": "/bin/x", "iconPng": b64(b"GIF89a....")}),
            "iconPng",
        ),
        (
            "x",
            json!({"displayName": "X", "program": "/bin/x", "iconIco": b64(PNG_1X1)}),
            "iconIco",
        ),
        (
            "x",
            json!({"displayName": "X", "program": "/bin/x", "iconPng": b64(&big)}),
            "iconPng",
        ),
        (
            "x",
            json!({"displayName": "X", "program": "/bin/x", "fileExtensions": ["txt"]}),
            "fileExtensions[0]",
        ),
        (
            "x",
            json!({"displayName": "X", "program": "/bin/x", "colour": "red"}),
            "colour",
        ),
    ] {
        let v = kit
            .refused(
                "PUT",
                &format!("{APPS}/{}", alias.replace(' ', "%20")),
                Some(body),
                400,
                "InvalidParameter",
            )
            .await;
        let message = v["error"]["message"].as_str().unwrap_or_default();
        assert!(message.contains(field), "{field}: {message}");
    }
    // Nothing of the refused ones was kept.
    let list = kit.ok("GET", APPS, None, 200).await;
    assert_eq!(list["value"].as_array().map(Vec::len), Some(1), "{list}");
    // Each change is in the audit log, by its pool and its alias.
    let log = kit
        .ok("GET", "/api/v1/auditLog?hostPool=apps", None, 200)
        .await;
    let puts = log["value"]
        .as_array()
        .expect("entries")
        .iter()
        .filter(|e| {
            e["action"] == "PUT /api/v1/hostPools/apps/applications/notepad"
                && e["target"] == "hostPools/apps/applications/notepad"
        })
        .count();
    assert_eq!(puts, 2, "{log}");
    kit.refused(
        "PUT",
        "/api/v1/hostPools/nowhere/applications/x",
        Some(notepad()),
        404,
        "HostPoolNotFound",
    )
    .await;
}

#[tokio::test(start_paused = true)]
async fn groups_give_exactly_what_they_list_to_their_users_and_groups() {
    let kit = kit_with_pool().await;
    publish(&kit, "notepad", notepad()).await;
    publish(
        &kit,
        "calc",
        json!({"displayName": "Calculator", "program": "C:\\Windows\\calc.exe"}),
    )
    .await;
    // A group naming an application the pool does not publish: refused.
    kit.refused(
        "PUT",
        "/api/v1/applicationGroups/office",
        Some(json!({"hostPool": "apps", "kind": "RemoteApp", "applications": ["word"]})),
        400,
        "InvalidParameter",
    )
    .await;
    kit.refused(
        "PUT",
        "/api/v1/applicationGroups/office",
        Some(json!({"hostPool": "nowhere", "kind": "RemoteApp"})),
        400,
        "InvalidParameter",
    )
    .await;
    group(
        &kit,
        "office",
        json!({"hostPool": "apps", "kind": "RemoteApp", "applications": ["notepad"],
               "assignedUsers": ["alice@contoso.com"], "assignedGroups": ["Finance"]}),
    )
    .await;
    // A second Desktop group of one pool: 409.
    group(
        &kit,
        "desk",
        json!({"hostPool": "apps", "kind": "Desktop", "assignedUsers": ["bob@contoso.com"]}),
    )
    .await;
    kit.refused(
        "PUT",
        "/api/v1/applicationGroups/desk2",
        Some(json!({"hostPool": "apps", "kind": "Desktop"})),
        409,
        "Conflict",
    )
    .await;

    let file =
        |user: &str, groups: &str| format!("{APPS}/notepad/rdpFile?user={user}&groups={groups}");
    // alice by name, carol by her group: given; bob (the desktop's) is not.
    let text = kit.text(&file("alice@contoso.com", "")).await;
    assert_eq!(line(&text, "remoteapplicationmode").as_deref(), Some("1"));
    assert_eq!(
        line(&text, "remoteapplicationprogram").as_deref(),
        Some("||notepad")
    );
    assert_eq!(
        line(&text, "remoteapplicationname").as_deref(),
        Some("Notepad")
    );
    assert!(line(&text, "loadbalanceinfo").is_some());
    kit.text(&file("carol@contoso.com", "finance")).await;
    kit.refused(
        "GET",
        &file("bob@contoso.com", ""),
        None,
        403,
        "NotEntitled",
    )
    .await;
    // calc is in no group: nobody is given it.
    kit.refused(
        "GET",
        &format!("{APPS}/calc/rdpFile?user=alice@contoso.com"),
        None,
        403,
        "NotEntitled",
    )
    .await;

    // Removing the application removes it from the group, in one change.
    kit.ok("DELETE", &format!("{APPS}/notepad"), None, 204)
        .await;
    let g = kit
        .ok("GET", "/api/v1/applicationGroups/office", None, 200)
        .await;
    assert_eq!(g["applications"], json!([]), "{g}");
    kit.refused("GET", &file("alice@contoso.com", ""), None, 404, "NotFound")
        .await;
}

#[tokio::test(start_paused = true)]
async fn two_applications_of_a_pool_open_in_the_users_one_session() {
    let kit = kit_with_pool().await;
    publish(&kit, "notepad", notepad()).await;
    publish(
        &kit,
        "calc",
        json!({"displayName": "Calculator", "program": "||calc",
               "commandLinePolicy": "Any"}),
    )
    .await;
    group(
        &kit,
        "office",
        json!({"hostPool": "apps", "kind": "RemoteApp", "applications": ["notepad", "calc"],
               "assignedUsers": ["alice@contoso.com"]}),
    )
    .await;
    // The pool names the host when a file is fetched, so fetching places.
    kit.patch_pool("apps", json!({"connectionTarget": "Host"}))
        .await;
    let first = kit
        .text(&format!("{APPS}/notepad/rdpFile?user=alice@contoso.com"))
        .await;
    let second = kit
        .text(&format!(
            "{APPS}/calc/rdpFile?user=alice@contoso.com&commandLine=sheet.txt"
        ))
        .await;
    assert_eq!(
        line(&first, "full address"),
        line(&second, "full address"),
        "{first}\n{second}"
    );
    assert_eq!(
        line(&second, "remoteapplicationcmdline").as_deref(),
        Some("sheet.txt")
    );
    assert_eq!(kit.sessions("apps").await.len(), 1);
    // notepad's policy is None: a command line is refused.
    kit.refused(
        "GET",
        &format!("{APPS}/notepad/rdpFile?user=alice@contoso.com&commandLine=x"),
        None,
        400,
        "InvalidParameter",
    )
    .await;
}

#[tokio::test(start_paused = true)]
async fn an_alternate_shell_pool_runs_the_application_as_its_only_program() {
    let kit = kit_with_pool().await;
    kit.patch_pool("apps", json!({"applicationMode": "AlternateShell"}))
        .await;
    // A host alias means nothing to such a host.
    kit.refused(
        "PUT",
        &format!("{APPS}/notepad"),
        Some(notepad()),
        400,
        "InvalidParameter",
    )
    .await;
    publish(
        &kit,
        "xterm",
        json!({"displayName": "Terminal", "program": "/usr/bin/xterm"}),
    )
    .await;
    group(
        &kit,
        "tools",
        json!({"hostPool": "apps", "kind": "RemoteApp", "applications": ["xterm"],
               "assignedUsers": ["alice@contoso.com"]}),
    )
    .await;
    let text = kit
        .text(&format!("{APPS}/xterm/rdpFile?user=alice@contoso.com"))
        .await;
    assert_eq!(
        line(&text, "alternate shell").as_deref(),
        Some("/usr/bin/xterm")
    );
    assert_eq!(line(&text, "remoteapplicationmode"), None);
}

#[tokio::test(start_paused = true)]
async fn applications_and_groups_survive_a_restart_and_go_with_their_pool() {
    let mut kit = kit_with_pool().await;
    publish(&kit, "notepad", notepad()).await;
    group(
        &kit,
        "office",
        json!({"hostPool": "apps", "kind": "RemoteApp", "applications": ["notepad"],
               "assignedUsers": ["alice@contoso.com"]}),
    )
    .await;
    let before = kit.ok("GET", &format!("{APPS}/notepad"), None, 200).await;
    kit.reopen().await;
    let after = kit.ok("GET", &format!("{APPS}/notepad"), None, 200).await;
    assert_eq!(before, after);
    let g = kit
        .ok("GET", "/api/v1/applicationGroups/office", None, 200)
        .await;
    assert_eq!(g["applications"], json!(["notepad"]));

    kit.ok("DELETE", "/api/v1/hostPools/apps?force=true", None, 204)
        .await;
    let groups = kit.ok("GET", "/api/v1/applicationGroups", None, 200).await;
    assert_eq!(groups["value"], json!([]));
    kit.reopen().await;
    let groups = kit.ok("GET", "/api/v1/applicationGroups", None, 200).await;
    assert_eq!(groups["value"], json!([]));
    // A pool made again under the name publishes nothing of the old one.
    kit.pool_with_hosts("apps", "BreadthFirst", 10, 1).await;
    let list = kit.ok("GET", APPS, None, 200).await;
    assert_eq!(list["value"], json!([]));
}

#[tokio::test(start_paused = true)]
async fn only_the_admin_changes_what_is_published() {
    let kit = kit_with_pool().await;
    let reader = kit.credential("r", "reader", &[]).await;
    let (status, _) = kit
        .call_as(
            Some(&reader),
            "PUT",
            &format!("{APPS}/notepad"),
            Some(notepad()),
        )
        .await;
    assert_eq!(status, 403);
    let (status, _) = kit
        .call_as(
            Some(&reader),
            "PUT",
            "/api/v1/applicationGroups/g",
            Some(json!({"hostPool": "apps", "kind": "Desktop"})),
        )
        .await;
    assert_eq!(status, 403);
    publish(&kit, "notepad", notepad()).await;
    let (status, v) = kit.call_as(Some(&reader), "GET", APPS, None).await;
    assert_eq!(status, 200, "{v}");
    // A reader cannot make a ticket for someone through a launch file.
    let (status, _) = kit
        .call_as(
            Some(&reader),
            "GET",
            &format!("{APPS}/notepad/rdpFile?user=alice@contoso.com"),
            None,
        )
        .await;
    assert_eq!(status, 403);
}

/// The pools of `user`'s workspace: (pool, desktop, aliases).
async fn workspace(kit: &Kit, user: &str, groups: &str) -> Vec<(String, bool, Vec<String>)> {
    let v = kit
        .ok(
            "GET",
            &format!("/api/v1/users/{user}/workspace?groups={groups}"),
            None,
            200,
        )
        .await;
    v["value"]
        .as_array()
        .expect("a list")
        .iter()
        .map(|p| {
            let aliases = p["applications"]
                .as_array()
                .expect("applications")
                .iter()
                .map(|a| a["alias"].as_str().unwrap_or_default().to_string())
                .collect();
            (
                p["hostPool"].as_str().unwrap_or_default().to_string(),
                p["desktop"].as_bool().unwrap_or_default(),
                aliases,
            )
        })
        .collect()
}

#[tokio::test(start_paused = true)]
async fn a_users_workspace_is_what_the_groups_give_and_the_pool_prefers() {
    let kit = kit_with_pool().await;
    kit.pool_with_hosts("desk", "BreadthFirst", 10, 1).await;
    kit.patch_pool("desk", json!({"entitledUsers": ["alice@contoso.com"]}))
        .await;
    publish(&kit, "notepad", notepad()).await;
    let ws = |v: &[(&str, bool, &[&str])]| -> Vec<(String, bool, Vec<String>)> {
        v.iter()
            .map(|(p, d, a)| (p.to_string(), *d, a.iter().map(|s| s.to_string()).collect()))
            .collect()
    };
    // No application group yet: each pool's desktop to whom it entitles.
    assert_eq!(
        workspace(&kit, "alice@contoso.com", "").await,
        ws(&[("apps", true, &[]), ("desk", true, &[])])
    );
    assert_eq!(
        workspace(&kit, "bob@contoso.com", "").await,
        ws(&[("apps", true, &[])])
    );
    group(
        &kit,
        "office",
        json!({"hostPool": "apps", "kind": "RemoteApp", "applications": ["notepad"],
               "assignedGroups": ["Finance"]}),
    )
    .await;
    group(
        &kit,
        "apps-desktop",
        json!({"hostPool": "apps", "kind": "Desktop", "assignedGroups": ["Finance", "Staff"]}),
    )
    .await;
    // Given both in one pool: the pool's preference (Desktop by default).
    assert_eq!(
        workspace(&kit, "carol@contoso.com", "Finance").await,
        ws(&[("apps", true, &[])])
    );
    kit.patch_pool("apps", json!({"preferredAppGroupType": "RemoteApp"}))
        .await;
    assert_eq!(
        workspace(&kit, "carol@contoso.com", "finance").await,
        ws(&[("apps", false, &["notepad"])])
    );
    assert_eq!(
        workspace(&kit, "dave@contoso.com", "Staff").await,
        ws(&[("apps", true, &[])])
    );
    // Someone no group names and no pool entitles: an empty workspace.
    assert_eq!(workspace(&kit, "bob@contoso.com", "").await, ws(&[]));
    // An assignment removed: the resource goes.
    group(
        &kit,
        "office",
        json!({"hostPool": "apps", "kind": "RemoteApp", "applications": ["notepad"]}),
    )
    .await;
    assert_eq!(
        workspace(&kit, "carol@contoso.com", "Finance").await,
        ws(&[("apps", true, &[])])
    );
}

#[tokio::test(start_paused = true)]
async fn an_admin_of_one_pool_publishes_there_only_and_assigns_no_groups() {
    let kit = kit_with_pool().await;
    kit.pool_with_hosts("other", "BreadthFirst", 10, 1).await;
    let limited = kit.credential("apps-admin", "admin", &["apps"]).await;
    let call = |method: &'static str, path: String, body: Value| {
        let limited = limited.clone();
        let kit = &kit;
        async move {
            kit.call_as(Some(&limited), method, &path, Some(body))
                .await
                .0
        }
    };
    assert_eq!(call("PUT", format!("{APPS}/notepad"), notepad()).await, 201);
    assert_eq!(
        call(
            "PUT",
            "/api/v1/hostPools/other/applications/notepad".into(),
            notepad()
        )
        .await,
        403
    );
    // A group names its pool in its body: only an admin of every pool.
    assert_eq!(
        call(
            "PUT",
            "/api/v1/applicationGroups/office".into(),
            json!({"hostPool": "apps", "kind": "RemoteApp", "applications": ["notepad"],
                   "assignedUsers": ["mallory@contoso.com"]}),
        )
        .await,
        403
    );
    let groups = kit.ok("GET", "/api/v1/applicationGroups", None, 200).await;
    assert_eq!(groups["value"], json!([]));
    let other = kit
        .ok("GET", "/api/v1/hostPools/other/applications", None, 200)
        .await;
    assert_eq!(other["value"], json!([]));
}

#[tokio::test(start_paused = true)]
async fn a_launch_file_through_the_gateway_opens_the_application_there() {
    let kit = Kit::open_with(|s| {
        s.rdp_front_door = Some("door.example:3389".into());
        s.rd_gateway = Some("gw.example:443".into());
    })
    .await;
    kit.pool_with_hosts("apps", "BreadthFirst", 10, 2).await;
    publish(&kit, "notepad", notepad()).await;
    group(
        &kit,
        "office",
        json!({"hostPool": "apps", "kind": "RemoteApp", "applications": ["notepad"],
               "assignedUsers": ["alice@contoso.com"]}),
    )
    .await;
    let text = kit
        .text(&format!(
            "{APPS}/notepad/rdpFile?user=alice@contoso.com&gateway=true"
        ))
        .await;
    assert_eq!(
        line(&text, "gatewayhostname").as_deref(),
        Some("gw.example:443")
    );
    assert!(line(&text, "gatewayaccesstoken").is_some(), "{text}");
    assert_eq!(line(&text, "remoteapplicationmode").as_deref(), Some("1"));
    assert_eq!(
        line(&text, "remoteapplicationprogram").as_deref(),
        Some("||notepad")
    );

    // The pool turned to xrdp hosts: a host alias cannot be launched there.
    kit.patch_pool("apps", json!({"applicationMode": "AlternateShell"}))
        .await;
    let v = kit
        .refused(
            "GET",
            &format!("{APPS}/notepad/rdpFile?user=alice@contoso.com"),
            None,
            400,
            "InvalidParameter",
        )
        .await;
    assert!(
        v["error"]["message"]
            .as_str()
            .is_some_and(|m| m.starts_with("program:")),
        "{v}"
    );
}
