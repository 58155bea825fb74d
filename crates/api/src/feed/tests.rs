//! The feed's negotiation, its resource IDs, what a workspace refuses, and
//! what each schema version writes. (That every document validates against
//! the specification's schemas is `tests/it/feed.rs`'s, with xmllint.)

use super::*;

fn notepad() -> Resource {
    Resource {
        id: resource_id("finance", Some("notepad")),
        kind: ResourceKind::RemoteApp,
        alias: "finance.notepad".into(),
        title: "Notepad".into(),
        last_updated_ms: 1_700_000_000_000,
        icons: Some(IconUrls {
            ico: "/RDWeb/Feed/icons/finance.notepad.ico".into(),
            png_32: "/RDWeb/Feed/icons/finance.notepad_32x32.png".into(),
        }),
        file_extensions: vec![".txt".into(), ".log".into()],
        folder: "Accessories".into(),
        rdp_file_url: "/RDWeb/Feed/rdp/finance.notepad.rdp".into(),
        terminal_server: "broker.example.com".into(),
    }
}

fn desktop() -> Resource {
    Resource {
        id: resource_id("finance", None),
        kind: ResourceKind::Desktop,
        alias: "finance".into(),
        title: "Finance desktop".into(),
        last_updated_ms: 1_600_000_000_000,
        icons: None,
        file_extensions: vec![],
        folder: String::new(),
        rdp_file_url: "/RDWeb/Feed/rdp/finance.rdp".into(),
        terminal_server: "broker.example.com".into(),
    }
}

fn workspace() -> Workspace {
    Workspace::new(
        "Contoso",
        "broker.example.com",
        1_800_000_000_000,
        1_500_000_000_000,
    )
    .unwrap()
}

#[test]
fn the_accept_header_chooses_the_version_and_nothing_known_means_1_1() {
    use SchemaVersion::*;
    for (header, expected) in [
        (None, V1_1),
        (Some(""), V1_1),
        (Some("*/*"), V1_1),
        (Some("text/xml"), V1_1),
        // Windows' RemoteApp and Desktop Connections.
        (
            Some("application/x-msts-radc+xml; radc_schema_version=2.0"),
            V2_0,
        ),
        // Windows App.
        (
            Some("application/x-msts-radc+xml;radc_schema_version=2.0,text/xml"),
            V2_0,
        ),
        (
            Some("APPLICATION/X-MSTS-RADC+XML; RADC_SCHEMA_VERSION=\"2.1\""),
            V2_1,
        ),
        (
            Some("application/x-msts-radc+xml; radc_schema_version=1.1"),
            V1_1,
        ),
        (Some("application/x-msts-radc+xml"), V1_1),
        // A version this module does not know is as none (MS-TSWP 2.2.5).
        (
            Some("application/x-msts-radc+xml; radc_schema_version=3.0"),
            V1_1,
        ),
        // The parameter counts only on the RADC media type.
        (Some("text/xml; radc_schema_version=2.0"), V1_1),
        // The highest of several; a refused range counts for nothing.
        (
            Some(
                "application/x-msts-radc+xml;radc_schema_version=2.0, \
                 application/x-msts-radc+xml;radc_schema_version=2.1",
            ),
            V2_1,
        ),
        (
            Some("application/x-msts-radc+xml;radc_schema_version=2.1;q=0, text/xml"),
            V1_1,
        ),
        (
            Some("application/x-msts-radc+xml;q=0.5;radc_schema_version=2.0"),
            V2_0,
        ),
    ] {
        assert_eq!(SchemaVersion::from_accept(header), expected, "{header:?}");
    }
    let many = format!(
        "{}application/x-msts-radc+xml;radc_schema_version=2.0",
        "text/plain,".repeat(MAX_ACCEPT_RANGES)
    );
    assert_eq!(
        SchemaVersion::from_accept(Some(&many)),
        V1_1,
        "only the first ranges count"
    );
}

#[test]
fn versions_name_themselves_and_their_content_type() {
    assert_eq!(SchemaVersion::parse(" 2.1 "), Some(SchemaVersion::V2_1));
    assert_eq!(SchemaVersion::parse("2"), None);
    for v in [
        SchemaVersion::V1_1,
        SchemaVersion::V2_0,
        SchemaVersion::V2_1,
    ] {
        assert_eq!(SchemaVersion::parse(v.as_str()), Some(v));
    }
    assert_eq!(
        SchemaVersion::V1_1.content_type(),
        "text/xml; charset=utf-8"
    );
    assert!(
        SchemaVersion::V2_0
            .content_type()
            .starts_with(RADC_MEDIA_TYPE)
    );
    assert!(
        SchemaVersion::V2_1
            .content_type()
            .starts_with(RADC_MEDIA_TYPE)
    );
}

#[test]
fn resource_ids_are_uuid_v5_of_the_pool_and_alias() {
    // RFC 9562's algorithm, checked against Python's uuid.uuid5(NAMESPACE_DNS,
    // "python.org"), the example of its documentation.
    let dns = [
        0x6b, 0xa7, 0xb8, 0x10, 0x9d, 0xad, 0x11, 0xd1, 0x80, 0xb4, 0x00, 0xc0, 0x4f, 0xd4, 0x30,
        0xc8,
    ];
    assert_eq!(
        uuid_v5(&dns, b"python.org"),
        "886313e1-3b8a-5372-9b90-0c9aee199e5d"
    );
    // These values are what subscribed clients hold: they never change.
    // (Python: uuid5(uuid5(NAMESPACE_URL, "urn:deskbroker:workspace-feed:resource"),
    // "desktop:finance").)
    assert_eq!(
        resource_id("finance", None),
        "0ecb88ba-7b53-55b3-9a97-28828c95b708"
    );
    assert_eq!(
        resource_id("finance", Some("notepad")),
        "cb20f8cb-3156-539f-b3b9-8b9ef36c7cc3"
    );
    assert_ne!(
        resource_id("finance", Some("Notepad")),
        resource_id("finance", Some("notepad"))
    );
    assert_ne!(
        resource_id("desktop", None),
        resource_id("finance", Some("desktop"))
    );
}

#[test]
fn a_workspace_refuses_what_a_feed_cannot_hold_naming_the_field() {
    let mut ws = workspace();
    ws.add(notepad()).unwrap();
    ws.add(desktop()).unwrap();

    let cases: Vec<(Resource, &str)> = vec![
        (
            Resource {
                id: "a b".into(),
                ..notepad()
            },
            "id",
        ),
        (
            Resource {
                title: " ".into(),
                ..notepad()
            },
            "title",
        ),
        (
            Resource {
                title: "a\u{7}b".into(),
                ..notepad()
            },
            "title",
        ),
        (
            Resource {
                title: "x".repeat(MAX_NAME_BYTES + 1),
                ..notepad()
            },
            "title",
        ),
        (
            Resource {
                alias: String::new(),
                ..notepad()
            },
            "alias",
        ),
        (
            Resource {
                last_updated_ms: -1,
                ..notepad()
            },
            "lastUpdatedMs",
        ),
        (
            Resource {
                last_updated_ms: MAX_TIMESTAMP_MS + 1,
                ..notepad()
            },
            "lastUpdatedMs",
        ),
        (
            Resource {
                icons: Some(IconUrls {
                    ico: "/a b.ico".into(),
                    png_32: "/a.png".into(),
                }),
                ..notepad()
            },
            "icons.ico",
        ),
        (
            Resource {
                file_extensions: vec!["txt".into()],
                ..notepad()
            },
            "fileExtensions[0]",
        ),
        (
            Resource {
                file_extensions: vec![".txt".into(), ".TXT".into()],
                ..notepad()
            },
            "fileExtensions[1]",
        ),
        (
            Resource {
                file_extensions: vec![".x".into(); MAX_FILE_EXTENSIONS + 1],
                ..notepad()
            },
            "fileExtensions",
        ),
        (
            Resource {
                folder: "a/b".into(),
                ..notepad()
            },
            "folder",
        ),
        (
            Resource {
                folder: "  ".into(),
                ..notepad()
            },
            "folder",
        ),
        (
            Resource {
                rdp_file_url: "/x\ny.rdp".into(),
                ..notepad()
            },
            "rdpFileUrl",
        ),
        (
            Resource {
                terminal_server: String::new(),
                ..notepad()
            },
            "terminalServer",
        ),
        (
            Resource {
                alias: "other".into(),
                ..notepad()
            },
            "id",
        ),
        (
            Resource {
                id: resource_id("other", None),
                ..notepad()
            },
            "alias",
        ),
    ];
    for (resource, field) in cases {
        let alias = resource.alias.clone();
        let err = ws.add(resource).unwrap_err();
        assert_eq!(err.field, format!("resource {alias:?}: {field}"), "{err}");
    }
    // Nothing refused was added.
    assert_eq!(ws.resources().len(), 2);

    for (name, id, published, field) in [
        ("", "b", 0, "publisherName"),
        ("a", "b c", 0, "publisherId"),
        ("a", "b", -5, "publishedMs"),
    ] {
        assert_eq!(
            Workspace::new(name, id, published, 0).unwrap_err().field,
            field
        );
    }
}

#[test]
fn a_workspace_holds_at_most_max_resources() {
    let mut ws = workspace();
    for i in 0..MAX_RESOURCES {
        let alias = format!("app{i}");
        ws.add(Resource {
            id: resource_id("p", Some(&alias)),
            alias,
            ..notepad()
        })
        .unwrap();
    }
    let err = ws
        .add(Resource {
            id: "one-more".into(),
            alias: "one-more".into(),
            ..notepad()
        })
        .unwrap_err();
    assert!(err.message.contains("already holds"), "{err}");
}

#[test]
fn last_updated_is_the_latest_change() {
    let mut ws = workspace();
    assert_eq!(ws.last_updated_ms(), 1_500_000_000_000);
    ws.add(desktop()).unwrap();
    assert_eq!(ws.last_updated_ms(), 1_600_000_000_000);
}

#[test]
fn each_version_writes_only_what_its_schema_knows() {
    let mut ws = workspace();
    ws.add(notepad()).unwrap();
    ws.add(desktop()).unwrap();

    let v11 = render(&ws, SchemaVersion::V1_1);
    let v20 = render(&ws, SchemaVersion::V2_0);
    let v21 = render(&ws, SchemaVersion::V2_1);
    assert!(v11.starts_with("<?xml version=\"1.0\" encoding=\"utf-8\"?>\n<ResourceCollection"));
    assert!(v11.contains("SchemaVersion=\"1.1\""));
    assert!(v20.contains("SchemaVersion=\"2.0\""));
    assert!(v21.contains("SchemaVersion=\"2.1\""));
    assert!(
        v11.contains("PubDate=\"2027-01-15T08:00:00.000Z\""),
        "{v11}"
    );

    for (xml, v2) in [(&v11, false), (&v20, true), (&v21, true)] {
        assert_eq!(xml.contains("SupportsReconnect=\"false\""), v2);
        assert_eq!(xml.contains("PrimaryHandler=\"True\""), v2);
        assert_eq!(xml.contains("<Folder Name=\"/Accessories\"/>"), v2);
        assert_eq!(xml.contains("<FileAssociationIcons>"), v2);
        assert!(xml.contains("<FileExtension Name=\".txt\""));
        assert!(
            xml.contains("<FileExtensions/>"),
            "a desktop's are written empty"
        );
    }
    assert!(!v20.contains("ShowByDefault"));
    assert_eq!(v21.matches("ShowByDefault=\"true\"").count(), 2);
    // One terminal server, named by both resources, with the later change.
    assert_eq!(
        v21.matches(
            "<TerminalServer ID=\"broker.example.com\" Name=\"broker.example.com\" \
                     LastUpdated=\"2023-11-14T22:13:20.000Z\"/>"
        )
        .count(),
        1,
        "{v21}"
    );
    // The desktop at the top level is in no folder; a RemoteApp is in "/".
    let mut root = notepad();
    root.folder = String::new();
    let mut ws = workspace();
    ws.add(root).unwrap();
    ws.add(desktop()).unwrap();
    let xml = render(&ws, SchemaVersion::V2_0);
    assert_eq!(xml.matches("<Folder Name=\"/\"/>").count(), 1, "{xml}");
}

#[test]
fn every_value_is_escaped() {
    let mut ws = Workspace::new("A & <B> \"C\" 'D'", "broker.example.com", 0, 0).unwrap();
    ws.add(Resource {
        title: "Tom & Jerry's <\"Ünïcødé\"> 日本".into(),
        folder: "R&D <lab>".into(),
        rdp_file_url: "/rdp?a=1&b=\"2\"".into(),
        ..notepad()
    })
    .unwrap();
    let xml = render(&ws, SchemaVersion::V2_1);
    assert!(
        xml.contains("Name=\"A &amp; &lt;B&gt; &quot;C&quot; &apos;D&apos;\""),
        "{xml}"
    );
    assert!(xml.contains("Title=\"Tom &amp; Jerry&apos;s &lt;&quot;Ünïcødé&quot;&gt; 日本\""));
    assert!(xml.contains("<Folder Name=\"/R&amp;D &lt;lab&gt;\"/>"));
    assert!(xml.contains("URL=\"/rdp?a=1&amp;b=&quot;2&quot;\""));
}

#[test]
fn an_empty_workspace_is_a_feed_with_no_resources() {
    let xml = render(&workspace(), SchemaVersion::V2_0);
    assert!(
        xml.contains("<Resources>\n    </Resources>")
            || xml.contains("<Resources/>")
            || xml.contains("<Resources></Resources>"),
        "{xml}"
    );
    assert!(xml.contains("TerminalServers"));
}
