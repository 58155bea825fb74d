//! The console's Applications and Application groups (rule F1) in a real
//! browser: the admin publishes applications with icons chosen as files
//! (a PNG and an ICO, told apart by their first bytes), replaces one
//! keeping its icon, and deletes one after confirming; an icon too large
//! or not an image is refused with the API's own message and nothing is
//! added; groups are made from the pool's applications, and the broker's
//! refusal of one is shown as it says it; the pool forms set the pool's
//! two settings about applications. A reader sees the lists and icons,
//! and no form.

use std::path::Path;

use base64::Engine as _;
use serde_json::{Value, json};

use crate::browser::*;
use crate::{App, PNG_1X1, credential};

const APPS: &str = "/api/v1/hostPools/apps/applications";

fn b64(bytes: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

/// An ICO made of the 1×1 PNG as the broker's feed makes one: the image
/// held at 32×32.
fn ico() -> Vec<u8> {
    ::api::feed::icons::feed_icons(Some(PNG_1X1), None)
        .expect("the PNG is an icon")
        .expect("an ICO made of it")
        .ico
}

/// `bytes` written to `dir/name`; its path, for the form's file input.
fn file(dir: &Path, name: &str, bytes: &[u8]) -> String {
    let path = dir.join(name);
    std::fs::write(&path, bytes).expect("write the icon file");
    path.to_str().expect("a UTF-8 path").to_string()
}

/// What the application form is filled with.
struct AppForm<'a> {
    alias: &'a str,
    name: &'a str,
    program: &'a str,
    extensions: &'a str,
    folder: &'a str,
    icon: Option<&'a str>,
}

/// Fills the application form (its icon chosen as a file, as a person
/// would) and submits it; answers what the form then says.
async fn publish(c: &fantoccini::Client, f: &AppForm<'_>) -> String {
    type_into(c, "#app-alias", f.alias).await;
    type_into(c, "#app-name", f.name).await;
    type_into(c, "#app-program", f.program).await;
    type_into(c, "#app-extensions", f.extensions).await;
    type_into(c, "#app-folder", f.folder).await;
    js(c, "document.querySelector('#app-icon').value = '';", vec![]).await;
    if let Some(path) = f.icon {
        c.find(fantoccini::Locator::Css("#app-icon"))
            .await
            .expect("the icon's file input")
            .send_keys(path)
            .await
            .expect("choose the icon file");
    }
    submit(c, "#app-submit", "#app-message").await
}

/// Clicks `button`, and answers the text `out` shows once it is done (the
/// line emptied first, so that the same message twice is seen too).
async fn submit(c: &fantoccini::Client, button: &str, out: &str) -> String {
    js(
        c,
        "document.querySelector(arguments[0]).textContent = '';",
        vec![json!(out)],
    )
    .await;
    click(c, button).await;
    wait_text(c, out, "the form's answer", |t| !t.is_empty()).await
}

/// The attributes of the icon shown in the row of `alias`, once loaded:
/// `[src, naturalWidth]`.
async fn icon_shown(c: &fantoccini::Client, alias: &str, src: &str) -> Value {
    wait_value(
        c,
        "const i = document.querySelector(`#apps-table tr[data-alias='${arguments[0]}'] img.app-icon`);
         return i && i.complete ? [i.getAttribute('src'), i.naturalWidth] : null;",
        vec![json!(alias)],
        &format!("the icon of {alias}"),
        |v| v[0] == json!(src),
    )
    .await
}

/// The keys (`data-KEY`) of a table's rows, in its order.
async fn rows(c: &fantoccini::Client, table: &str, key: &str) -> Vec<String> {
    let v = js(
        c,
        "return [...document.querySelectorAll(arguments[0] + ' tbody tr')].map((r) => r.dataset[arguments[1]]);",
        vec![json!(table), json!(key)],
    )
    .await;
    serde_json::from_value(v).expect("a list of keys")
}

/// The aliases the API lists for the pool `apps`, sorted.
async fn aliases(app: &App) -> Vec<String> {
    let list = app.ok("GET", APPS, None, 200).await;
    let mut names = list["value"]
        .as_array()
        .expect("a list")
        .iter()
        .map(|a| a["alias"].as_str().expect("an alias").to_string())
        .collect::<Vec<_>>();
    names.sort();
    names
}

/// Records every Content-Security-Policy violation of the page from now
/// on: the icons are `data:` images, which the policy allows, and nothing
/// else of the views may be refused by it.
async fn watch_csp(c: &fantoccini::Client) {
    js(
        c,
        "window.__csp = [];
         document.addEventListener('securitypolicyviolation',
           (e) => window.__csp.push(`${e.violatedDirective} ${e.blockedURI}`));",
        vec![],
    )
    .await;
}

async fn assert_no_csp_violation(c: &fantoccini::Client) {
    assert_eq!(js(c, "return window.__csp;", vec![]).await, json!([]));
}

#[tokio::test]
async fn the_admin_publishes_applications_with_icons_and_gives_them_to_groups() {
    let dir = tempfile::tempdir().expect("tempdir");
    let app = App::spawn(&dir);
    app.ok(
        "PUT",
        "/api/v1/hostPools/apps",
        Some(json!({"hostPoolType": "Pooled", "loadBalancerType": "BreadthFirst"})),
        201,
    )
    .await;
    let files = tempfile::tempdir().expect("tempdir");
    let b = browser().await;
    let c = &b.client;
    sign_in(c, &app).await;
    watch_csp(c).await;
    click(c, "#nav a[data-nav=applications]").await;
    wait_text(c, "#apps-empty", "the empty list", |t| {
        t == "apps publishes no applications: publish one below."
    })
    .await;

    // A PNG icon; a name with markup in it, shown as text.
    let hostile = "<b>Notepad</b> & <img src=x onerror=\"window.__owned=1\">";
    let said = publish(
        c,
        &AppForm {
            alias: "notepad",
            name: hostile,
            program: "||notepad",
            extensions: ".txt, .log",
            folder: "Office",
            icon: Some(&file(files.path(), "notepad.png", PNG_1X1)),
        },
    )
    .await;
    assert_eq!(
        said,
        format!("Published {hostile} as notepad in apps, with its icon.")
    );
    let row = "#apps-table tr[data-alias='notepad']";
    let name = wait_text(c, &format!("{row} .name"), "notepad's row", |t| {
        !t.is_empty()
    })
    .await;
    assert_eq!(name, hostile);
    assert_eq!(
        text(c, &format!("{row} .extensions")).await.as_deref(),
        Some(".txt, .log")
    );
    assert_eq!(
        text(c, &format!("{row} .folder")).await.as_deref(),
        Some("Office")
    );
    assert_eq!(
        text(c, &format!("{row} .program")).await.as_deref(),
        Some("||notepad")
    );
    let shown = icon_shown(
        c,
        "notepad",
        &format!("data:image/png;base64,{}", b64(PNG_1X1)),
    )
    .await;
    assert_eq!(shown[1], json!(1), "the PNG did not decode: {shown}");
    let made = js(
        c,
        "return [document.querySelectorAll('#apps-table b, #app-message b').length,
                 document.querySelectorAll('#apps-table img:not(.app-icon)').length,
                 window.__owned === undefined];",
        vec![],
    )
    .await;
    assert_eq!(made, json!([0, 0, true]), "the name made elements");
    let api = app.ok("GET", &format!("{APPS}/notepad"), None, 200).await;
    assert_eq!(api["iconPng"], b64(PNG_1X1), "{api}");
    assert_eq!(api["displayName"], hostile);
    assert_eq!(api["fileExtensions"], json!([".txt", ".log"]));
    assert_eq!(api["folder"], "Office");
    assert_eq!(api["commandLinePolicy"], "None");

    // An ICO, told apart by its first bytes: sent as iconIco.
    let ico = ico();
    let said = publish(
        c,
        &AppForm {
            alias: "calc",
            name: "Calculator",
            program: "C:\\Windows\\calc.exe",
            extensions: "",
            folder: "",
            icon: Some(&file(files.path(), "calc.ico", &ico)),
        },
    )
    .await;
    assert_eq!(said, "Published Calculator as calc in apps, with its icon.");
    let api = app.ok("GET", &format!("{APPS}/calc"), None, 200).await;
    assert_eq!(api["iconIco"], b64(&ico), "{api}");
    assert!(api.get("iconPng").is_none(), "{api}");
    let shown = icon_shown(
        c,
        "calc",
        &format!("data:image/x-icon;base64,{}", b64(&ico)),
    )
    .await;
    assert_eq!(shown[1], json!(32), "the ICO did not decode: {shown}");

    // Refused whole, with the API's own message naming the field: an icon
    // over 64 KiB, a file that is no image, an extension without its dot.
    let mut oversize = PNG_1X1[..8].to_vec();
    oversize.resize(70 * 1024, 0);
    for (alias, name, bytes, extensions, field) in [
        ("big", "big.png", Some(oversize.as_slice()), "", "iconPng"),
        (
            "gif",
            "picture.png",
            Some(b"GIF89a: not a PNG at all".as_slice()),
            "",
            "iconPng",
        ),
        ("ext", "", None, "txt", "fileExtensions[0]"),
    ] {
        let icon = bytes.map(|b| file(files.path(), name, b));
        let said = publish(
            c,
            &AppForm {
                alias,
                name: "Refused",
                program: "/usr/bin/refused",
                extensions,
                folder: "",
                icon: icon.as_deref(),
            },
        )
        .await;
        let mut body = json!({"displayName": "Refused", "program": "/usr/bin/refused",
            "commandLinePolicy": "None", "commandLine": "", "folder": "",
            "fileExtensions": if extensions.is_empty() { json!([]) } else { json!([extensions]) }});
        if let Some(b) = bytes {
            body["iconPng"] = json!(b64(b));
        }
        let refusal = api_refusal(&app, "PUT", &format!("{APPS}/{alias}"), body).await;
        assert_eq!(said, refusal, "{alias}");
        assert!(
            said.starts_with(&format!("InvalidParameter: {field}: ")),
            "{said}"
        );
        assert!(
            js(
                c,
                "return document.querySelector('#app-message').classList.contains('error');",
                vec![]
            )
            .await
                == json!(true),
            "the refusal of {alias} is not shown as one"
        );
        assert_eq!(
            aliases(&app).await,
            ["calc", "notepad"],
            "{alias} was added"
        );
        let mut shown = rows(c, "#apps-table", "alias").await;
        shown.sort();
        assert_eq!(shown, ["calc", "notepad"], "{alias} is listed");
    }

    // Replaced through Edit: its icon is kept.
    click(c, "button.edit[data-alias='notepad']").await;
    wait_value(
        c,
        "return document.querySelector('#app-name').value;",
        vec![],
        "notepad loaded into the form",
        |v| *v == json!(hostile),
    )
    .await;
    assert_eq!(text(c, "#app-submit").await.as_deref(), Some("Replace"));
    type_into(c, "#app-name", "Notepad").await;
    let said = submit(c, "#app-submit", "#app-message").await;
    assert_eq!(said, "Replaced Notepad as notepad in apps, with its icon.");
    let api = app.ok("GET", &format!("{APPS}/notepad"), None, 200).await;
    assert_eq!(
        (&api["displayName"], &api["iconPng"], &api["folder"]),
        (&json!("Notepad"), &json!(b64(PNG_1X1)), &json!("Office")),
        "{api}"
    );
    wait_text(c, &format!("{row} .name"), "the new name", |t| {
        t == "Notepad"
    })
    .await;
    let (shots, _keep) = screenshot_dir();
    screenshot(c, &shots, "applications.png").await;

    // Application groups: one giving notepad, picked from the pool's.
    click(c, "#nav a[data-nav=appgroups]").await;
    wait_js(
        c,
        "return !!document.querySelector('#group-apps input.group-app[data-alias=\"notepad\"]');",
        "the pool's applications to pick from",
    )
    .await;
    assert!(is_shown(c, "#groups-empty").await, "no word of no groups");
    type_into(c, "#group-name", "office").await;
    type_into(c, "#group-friendly", "Office").await;
    click(c, "#group-apps input.group-app[data-alias='notepad']").await;
    type_into(c, "#group-users", "alice@contoso.com\nbob@contoso.com").await;
    type_into(c, "#group-groups", "Finance").await;
    let said = submit(c, "#group-submit", "#group-message").await;
    assert_eq!(
        said,
        "Saved office: it gives 1 application of apps to 2 user(s) and 1 group(s)."
    );
    let g = app
        .ok("GET", "/api/v1/applicationGroups/office", None, 200)
        .await;
    assert_eq!(
        (
            &g["hostPool"],
            &g["kind"],
            &g["friendlyName"],
            &g["applications"]
        ),
        (
            &json!("apps"),
            &json!("RemoteApp"),
            &json!("Office"),
            &json!(["notepad"])
        ),
        "{g}"
    );
    assert_eq!(
        g["assignedUsers"],
        json!(["alice@contoso.com", "bob@contoso.com"])
    );
    assert_eq!(g["assignedGroups"], json!(["Finance"]));
    let office = "#groups-table tr[data-name='office']";
    wait_text(c, &format!("{office} .apps"), "office's row", |t| {
        t == "notepad"
    })
    .await;
    assert_eq!(
        text(c, &format!("{office} .users")).await.as_deref(),
        Some("alice@contoso.com, bob@contoso.com")
    );

    // The pool's Desktop group, then a second one: the broker's refusal.
    for name in ["desk", "desk2"] {
        type_into(c, "#group-name", name).await;
        choose(c, "#group-kind", "Desktop").await;
        type_into(c, "#group-users", "carol@contoso.com").await;
        let said = submit(c, "#group-submit", "#group-message").await;
        if name == "desk" {
            assert!(
                said.starts_with("Saved desk: it gives the desktop of apps"),
                "{said}"
            );
            continue;
        }
        let refusal = api_refusal(
            &app,
            "PUT",
            "/api/v1/applicationGroups/desk2",
            json!({"hostPool": "apps", "kind": "Desktop", "friendlyName": "",
                   "applications": [], "assignedUsers": ["carol@contoso.com"],
                   "assignedGroups": []}),
        )
        .await;
        assert_eq!(said, refusal);
        assert!(said.starts_with("Conflict: "), "{said}");
    }
    app.ok("GET", "/api/v1/applicationGroups/desk2", None, 404)
        .await;
    wait_js(
        c,
        "return !!document.querySelector(\"#groups-table tr[data-name='desk']\");",
        "the desk group",
    )
    .await;
    let mut groups = rows(c, "#groups-table", "name").await;
    groups.sort();
    assert_eq!(groups, ["desk", "office"]);

    // Deleting asks for a second click; then the group no longer lists it.
    go(c, "#/applications?pool=apps").await;
    click(c, "button.delete[data-alias='notepad']").await;
    assert_eq!(
        text(c, "button.delete[data-alias='notepad']")
            .await
            .as_deref(),
        Some("Confirm delete")
    );
    assert_eq!(aliases(&app).await, ["calc", "notepad"], "deleted at once");
    click(c, "button.delete[data-alias='notepad']").await;
    wait_js(
        c,
        "return !document.querySelector(\"#apps-table tr[data-alias='notepad']\");",
        "notepad gone from the list",
    )
    .await;
    assert_eq!(aliases(&app).await, ["calc"]);
    let g = app
        .ok("GET", "/api/v1/applicationGroups/office", None, 200)
        .await;
    assert_eq!(g["applications"], json!([]), "{g}");

    // The pool forms: a pool made with its application settings, then one
    // of them changed.
    go(c, "#/pools").await;
    wait_js(
        c,
        "return !!document.querySelector('#new-pool');",
        "the pool form",
    )
    .await;
    type_into(c, "#new-pool-name", "xapps").await;
    choose(c, "#new-pool-app-group-type", "RemoteApp").await;
    choose(c, "#new-pool-application-mode", "AlternateShell").await;
    let said = submit(c, "#new-pool button[type=submit]", "#new-pool-message").await;
    assert!(said.starts_with("Created host pool xapps"), "{said}");
    let p = app.ok("GET", "/api/v1/hostPools/xapps", None, 200).await;
    assert_eq!(
        (&p["preferredAppGroupType"], &p["applicationMode"]),
        (&json!("RemoteApp"), &json!("AlternateShell")),
        "{p}"
    );
    go(c, "#/pools/xapps").await;
    wait_value(
        c,
        "return document.querySelector('#pool-application-mode').value;",
        vec![],
        "the pool's application mode in its settings",
        |v| *v == json!("AlternateShell"),
    )
    .await;
    choose(c, "#pool-application-mode", "RemoteApp").await;
    let said = submit(
        c,
        "#pool-settings button[type=submit]",
        "#pool-settings-message",
    )
    .await;
    assert!(said.contains("applications as RemoteApp"), "{said}");
    let p = app.ok("GET", "/api/v1/hostPools/xapps", None, 200).await;
    assert_eq!(
        (&p["preferredAppGroupType"], &p["applicationMode"]),
        (&json!("RemoteApp"), &json!("RemoteApp")),
        "{p}"
    );
    assert_no_csp_violation(c).await;
}

#[tokio::test]
async fn a_reader_sees_applications_and_groups_without_the_forms() {
    let dir = tempfile::tempdir().expect("tempdir");
    let app = App::spawn(&dir);
    app.ok(
        "PUT",
        "/api/v1/hostPools/apps",
        Some(json!({"hostPoolType": "Pooled", "loadBalancerType": "BreadthFirst"})),
        201,
    )
    .await;
    app.ok(
        "PUT",
        &format!("{APPS}/notepad"),
        Some(json!({"displayName": "Notepad", "program": "||notepad", "iconPng": b64(PNG_1X1)})),
        201,
    )
    .await;
    app.ok(
        "PUT",
        &format!("{APPS}/calc"),
        Some(json!({"displayName": "calculator", "program": "||calc"})),
        201,
    )
    .await;
    app.ok(
        "PUT",
        "/api/v1/applicationGroups/office",
        Some(
            json!({"hostPool": "apps", "kind": "RemoteApp", "applications": ["notepad"],
                    "assignedGroups": ["Finance"]}),
        ),
        201,
    )
    .await;
    let reader = credential(&app, "watcher", "reader", &[]).await;
    let b = browser().await;
    let c = &b.client;
    sign_in_as(c, &app, &reader).await;
    watch_csp(c).await;
    for link in ["applications", "appgroups"] {
        assert!(
            is_shown(c, &format!("#nav a[data-nav={link}]")).await,
            "a reader has no {link} link"
        );
    }
    click(c, "#nav a[data-nav=applications]").await;
    icon_shown(
        c,
        "notepad",
        &format!("data:image/png;base64,{}", b64(PNG_1X1)),
    )
    .await;
    // No icon: its initial stands in.
    assert_eq!(
        text(c, "#apps-table tr[data-alias='calc'] .placeholder")
            .await
            .as_deref(),
        Some("C")
    );
    assert_eq!(count(c, "#app-form").await, 0, "a reader publishes nothing");
    assert_eq!(
        count(c, "#apps-table button").await,
        0,
        "nor edits or deletes"
    );
    click(c, "#nav a[data-nav=appgroups]").await;
    wait_text(
        c,
        "#groups-table tr[data-name='office'] .groups",
        "the office group",
        |t| t == "Finance",
    )
    .await;
    assert_eq!(count(c, "#group-form").await, 0, "a reader makes no group");
    assert_eq!(count(c, "#groups-table button").await, 0);
    assert_no_csp_violation(c).await;

    // A portal credential reads neither: no links, and the routes lead
    // back to the pools.
    click(c, "#signout").await;
    let portal = credential(&app, "portal-1", "portal", &[]).await;
    sign_in_as(c, &app, &portal).await;
    for link in ["applications", "appgroups"] {
        assert!(
            !is_shown(c, &format!("#nav a[data-nav={link}]")).await,
            "a portal credential has the {link} link"
        );
    }
    go(c, "#/applications?pool=apps").await;
    wait_js(
        c,
        "return location.hash === '#/pools' && !document.querySelector('#apps-table');",
        "the portal credential sent back to the pools",
    )
    .await;
}
