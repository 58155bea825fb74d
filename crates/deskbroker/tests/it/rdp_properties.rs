//! Rule F3 end to end: a pool's `customRdpProperties` reach every `.rdp`
//! file its users get (the front door's, the ticket's, the RD Gateway's),
//! each in place of the broker's own line of the same name; a bad list is
//! refused whole, naming each bad entry, through the API and the CLI, and
//! the pool is left as it was.

use serde_json::{Value, json};

use crate::App;

/// The lines of an `.rdp` file whose name is `name`.
fn lines_named<'a>(file: &'a str, name: &str) -> Vec<&'a str> {
    file.split("\r\n")
        .filter(|line| line.split(':').next() == Some(name))
        .collect()
}

/// The pool's `customRdpProperties` as the API shows it.
async fn shown(app: &App, pool: &str) -> Value {
    app.ok("GET", &format!("/api/v1/hostPools/{pool}"), None, 200)
        .await["customRdpProperties"]
        .clone()
}

#[tokio::test]
async fn a_pools_rdp_properties_reach_its_files_and_a_bad_list_changes_nothing() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (app, _) = App::spawn_with(
        &dir.path().join("data"),
        "127.0.0.1:0",
        &[
            "--rdp-listen",
            "127.0.0.1:0",
            "--gateway-listen",
            "127.0.0.1:0",
        ],
    );
    let list = "audiomode:i:2;RedirectClipboard:i:0;screen mode id:i:1;drivestoredirect:s:*;\
                kdcproxyname:s:kdc.contoso.com:443;";
    let created = app
        .ok(
            "PUT",
            "/api/v1/hostPools/farm",
            Some(
                json!({"hostPoolType": "Pooled", "loadBalancerType": "BreadthFirst",
                        "kdcProxy": true, "customRdpProperties": list}),
            ),
            201,
        )
        .await;
    assert_eq!(created["customRdpProperties"], list, "{created}");
    let doc = app.ok("GET", "/openapi.json", None, 200).await;
    let schemas = &doc["components"]["schemas"];
    for (schema, kind) in [
        ("HostPoolInput", json!(["string", "null"])),
        ("PoolConfig", json!("string")),
    ] {
        let field = &schemas[schema]["properties"]["customRdpProperties"];
        assert_eq!(field["type"], kind, "{schema}: {field}");
        assert!(
            field["description"]
                .as_str()
                .is_some_and(|d| d.contains("F3")),
            "{field}"
        );
    }

    for query in ["", "?user=alice", "?user=alice&gateway=true"] {
        let file = app
            .text(&format!("/api/v1/hostPools/farm/rdpFile{query}"))
            .await;
        assert!(!file.replace("\r\n", "").contains('\n'), "{file:?}");
        for (name, line) in [
            ("audiomode", "audiomode:i:2"),
            ("redirectclipboard", "redirectclipboard:i:0"),
            ("screen mode id", "screen mode id:i:1"),
            ("drivestoredirect", "drivestoredirect:s:*"),
            // The pool's own line wins over kdcProxy's.
            ("kdcproxyname", "kdcproxyname:s:kdc.contoso.com:443"),
            // Ours, where the pool sets nothing.
            ("authentication level", "authentication level:i:2"),
        ] {
            assert_eq!(lines_named(&file, name), [line], "{query}: {file:?}");
        }
        assert_eq!(lines_named(&file, "full address").len(), 1, "{file:?}");
    }

    // A bad list: refused whole, each bad entry named, nothing changed.
    let (status, v) = app
        .call(
            "PATCH",
            "/api/v1/hostPools/farm",
            Some(json!({"friendlyName": "Farm", "customRdpProperties":
                "audiomode:i:0;redirectprinters:i:7;full address:s:evil.example;colordepth:i:8;\
                 use multimon:s:1;audiomode:i:1"})),
        )
        .await;
    assert_eq!(status, 400, "{v}");
    assert_eq!(v["error"]["code"], "InvalidParameter", "{v}");
    let message = v["error"]["message"].as_str().expect("a message");
    assert!(message.starts_with("customRdpProperties: "), "{message}");
    for named in [
        "\"redirectprinters\": \"7\" is not allowed",
        "\"full address\": the broker writes this property itself",
        "\"colordepth\": not a property a pool may set",
        "\"use multimon\": type \"s\"; it takes i",
        "\"audiomode\": given twice",
    ] {
        assert!(message.contains(named), "{named} not in {message}");
    }
    let pool = app.ok("GET", "/api/v1/hostPools/farm", None, 200).await;
    assert_eq!(pool["customRdpProperties"], list);
    assert_eq!(
        pool["friendlyName"], "",
        "half of the PATCH was kept: {pool}"
    );
    let file = app.text("/api/v1/hostPools/farm/rdpFile").await;
    assert_eq!(lines_named(&file, "audiomode"), ["audiomode:i:2"]);
    assert!(!file.contains("evil.example"), "{file:?}");

    // A line break cannot smuggle a line in; a bad list creates no pool.
    let (status, v) = app
        .call(
            "PATCH",
            "/api/v1/hostPools/farm",
            Some(json!({"customRdpProperties": "audiomode:i:0\r\nalternate shell:s:cmd.exe"})),
        )
        .await;
    assert_eq!(status, 400, "{v}");
    assert!(
        v["error"]["message"]
            .as_str()
            .unwrap_or_default()
            .contains("control"),
        "{v}"
    );
    let (status, v) = app
        .call(
            "PUT",
            "/api/v1/hostPools/other",
            Some(json!({"hostPoolType": "Pooled", "loadBalancerType": "BreadthFirst",
                        "customRdpProperties": "loadbalanceinfo:s:tsv://MS Terminal Services Plugin.1.farm"})),
        )
        .await;
    assert_eq!(status, 400, "{v}");
    assert_eq!(
        app.call("GET", "/api/v1/hostPools/other", None).await.0,
        404
    );

    // The CLI: a list set, a bad one refused with its reason, then cleared.
    let (ok, _, err) = app.cli(&[
        "hostpool",
        "update",
        "--name",
        "farm",
        "--custom-rdp-properties",
        "audiomode:i:1;desktopscalefactor:i:150",
    ]);
    assert!(ok, "{err}");
    let file = app.text("/api/v1/hostPools/farm/rdpFile").await;
    assert_eq!(lines_named(&file, "audiomode"), ["audiomode:i:1"]);
    assert_eq!(
        lines_named(&file, "desktopscalefactor"),
        ["desktopscalefactor:i:150"]
    );
    assert_eq!(
        lines_named(&file, "redirectclipboard"),
        ["redirectclipboard:i:1"]
    );
    let (ok, _, err) = app.cli(&[
        "hostpool",
        "update",
        "--name",
        "farm",
        "--custom-rdp-properties",
        "desktopscalefactor:i:110",
    ]);
    assert!(!ok);
    assert!(
        err.contains("desktopscalefactor") && err.contains("one of 100, 125"),
        "{err}"
    );
    assert_eq!(
        shown(&app, "farm").await,
        "audiomode:i:1;desktopscalefactor:i:150"
    );
    let (ok, _, err) = app.cli(&[
        "hostpool",
        "update",
        "--name",
        "farm",
        "--custom-rdp-properties",
        "",
    ]);
    assert!(ok, "{err}");
    assert_eq!(shown(&app, "farm").await, "");
    let file = app.text("/api/v1/hostPools/farm/rdpFile").await;
    assert_eq!(lines_named(&file, "screen mode id"), ["screen mode id:i:2"]);
    assert!(lines_named(&file, "audiomode").is_empty(), "{file:?}");
}
