//! The workspace feed against the specification's own schemas
//! (`tests/data/ms-tswp/`, MS-TSWP 2.2.1), checked by xmllint (Debian's
//! libxml2-utils, which `scripts/install-test-deps.sh` installs): every
//! version `render` writes validates, an empty workspace too, and xmllint
//! refuses documents that break the schema, so a pass means something.

use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, Stdio};

use api::feed::{IconUrls, Resource, ResourceKind, SchemaVersion, Workspace, render, resource_id};

/// What xmllint said of a document.
#[derive(Debug, PartialEq, Eq)]
enum Verdict {
    Valid,
    /// Well-formed and read against the schema, but not valid (xmllint's
    /// exit status 3); with its messages.
    Invalid(String),
}

fn schema(version: SchemaVersion) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/ms-tswp")
        .join(format!("ms-tswp-{}.xsd", version.as_str()))
}

/// Runs `xmllint --noout --schema` on `xml` against `version`'s schema.
/// Any other outcome than valid or invalid (no xmllint, a schema it cannot
/// read, a document that is not XML) fails the test.
fn xmllint(xml: &str, version: SchemaVersion) -> Verdict {
    let mut child = Command::new("xmllint")
        .arg("--noout")
        .arg("--schema")
        .arg(schema(version))
        .arg("-")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect(
            "xmllint runs (Debian: apt-get install libxml2-utils; scripts/install-test-deps.sh)",
        );
    let mut stdin = child.stdin.take().expect("stdin");
    let document = xml.to_string();
    let writer = std::thread::spawn(move || stdin.write_all(document.as_bytes()));
    let output = child.wait_with_output().expect("xmllint ends");
    writer
        .join()
        .expect("writer")
        .expect("xmllint reads the document");
    let messages = String::from_utf8_lossy(&output.stderr).into_owned();
    match output.status.code() {
        Some(0) => Verdict::Valid,
        Some(3) => Verdict::Invalid(messages),
        other => panic!("xmllint could not judge the document ({other:?}): {messages}"),
    }
}

const VERSIONS: [SchemaVersion; 3] = [
    SchemaVersion::V1_1,
    SchemaVersion::V2_0,
    SchemaVersion::V2_1,
];

fn icons(alias: &str) -> Option<IconUrls> {
    Some(IconUrls {
        ico: format!("/RDWeb/Feed/icons/{alias}.ico"),
        png_32: format!("/RDWeb/Feed/icons/{alias}_32x32.png"),
    })
}

fn desktop(pool: &str, title: &str, updated_ms: i64) -> Resource {
    Resource {
        id: resource_id(pool, None),
        kind: ResourceKind::Desktop,
        alias: pool.to_string(),
        title: title.to_string(),
        last_updated_ms: updated_ms,
        icons: icons(pool),
        file_extensions: vec![],
        folder: String::new(),
        rdp_file_url: format!("/RDWeb/Feed/rdp/{pool}.rdp"),
        terminal_server: "gateway.contoso.example".to_string(),
    }
}

fn app(pool: &str, alias: &str, title: &str, folder: &str, extensions: &[&str]) -> Resource {
    let full = format!("{pool}.{alias}");
    Resource {
        id: resource_id(pool, Some(alias)),
        kind: ResourceKind::RemoteApp,
        alias: full.clone(),
        title: title.to_string(),
        last_updated_ms: 1_767_225_600_123,
        icons: icons(&full),
        file_extensions: extensions.iter().map(|e| e.to_string()).collect(),
        folder: folder.to_string(),
        rdp_file_url: format!("/RDWeb/Feed/rdp/{full}.rdp?user=a&b=<c>"),
        terminal_server: "front-door.contoso.example".to_string(),
    }
}

/// Two desktops and three applications: folders (one at the top level),
/// file extensions, icons (one application without), and names with
/// `&<>"'` and characters beyond ASCII.
fn workspace() -> Workspace {
    let mut ws = Workspace::new(
        "Contoso & Söhne <\"Bureau\"> 'Ōsaka'",
        "broker.contoso.example",
        1_767_225_700_000,
        1_767_225_600_000,
    )
    .expect("workspace");
    for resource in [
        desktop("finance", "Finance — Bureau \"A\" & <B>", 1_767_225_500_000),
        desktop("design", "Design's Desktop ✏️", 1_767_225_400_000),
        app(
            "finance",
            "excel",
            "Excel <Tabellen> & Co.",
            "Büro & \"Office\"",
            &[".xlsx", ".csv"],
        ),
        app(
            "finance",
            "notepad",
            "Notepad 'plain' — 記事帳",
            "",
            &[".txt"],
        ),
        Resource {
            icons: None,
            ..app(
                "design",
                "gimp",
                "GIMP: Ünïcødé <édition>",
                "Grafik",
                &[".xcf", ".png"],
            )
        },
    ] {
        ws.add(resource).expect("resource");
    }
    ws
}

#[test]
fn every_version_of_a_full_workspace_validates_against_its_schema() {
    let ws = workspace();
    for version in VERSIONS {
        let xml = render(&ws, version);
        assert_eq!(
            xmllint(&xml, version),
            Verdict::Valid,
            "{}:\n{xml}",
            version.as_str()
        );
        assert_eq!(xml.matches("<Resource ").count(), 5);
        assert_eq!(xml.matches("<TerminalServer ").count(), 2, "{xml}");
    }
    // 2.0 and 2.1 documents validate against each other's schema, as the
    // specification says they do.
    assert_eq!(
        xmllint(&render(&ws, SchemaVersion::V2_1), SchemaVersion::V2_0),
        Verdict::Valid
    );
    assert_eq!(
        xmllint(&render(&ws, SchemaVersion::V2_0), SchemaVersion::V2_1),
        Verdict::Valid
    );
}

#[test]
fn an_empty_workspace_is_a_valid_feed() {
    let ws = Workspace::new("Contoso", "broker.contoso.example", 0, 0).expect("workspace");
    for version in VERSIONS {
        let xml = render(&ws, version);
        assert_eq!(xmllint(&xml, version), Verdict::Valid, "{xml}");
    }
}

#[test]
fn xmllint_refuses_what_breaks_the_schema() {
    let ws = workspace();
    let v20 = render(&ws, SchemaVersion::V2_0);
    let v21 = render(&ws, SchemaVersion::V2_1);

    // A 2.0 document is not a 1.1 one: 1.1 knows no folders.
    let Verdict::Invalid(why) = xmllint(&v20, SchemaVersion::V1_1) else {
        panic!("a 2.0 document passed as 1.1");
    };
    assert!(
        why.contains("Folders") || why.contains("SupportsReconnect"),
        "{why}"
    );

    let finance = resource_id("finance", None);
    let design = resource_id("design", None);
    let (v2_0, v2_1) = (SchemaVersion::V2_0, SchemaVersion::V2_1);
    for (source, version, broken, expected) in [
        // Two resources with one ID (a key of the schema).
        (
            &v20,
            v2_0,
            v20.replace(&design, &finance),
            "Duplicate key-sequence",
        ),
        // A terminal server the publisher does not list (a key reference).
        (
            &v20,
            v2_0,
            v20.replace(
                "<TerminalServerRef Ref=\"gateway.contoso.example\"/>",
                "<TerminalServerRef Ref=\"elsewhere.example\"/>",
            ),
            "No match found for key-sequence",
        ),
        // Icons without their required IconRaw.
        (
            &v20,
            v2_0,
            v20.replace(
                "<IconRaw FileType=\"Ico\" FileURL=\"/RDWeb/Feed/icons/finance.ico\"/>",
                "",
            ),
            "Icon32",
        ),
        // A date that is not an xs:dateTime.
        (
            &v20,
            v2_0,
            v20.replacen(
                "PubDate=\"2026-01-01T00:01:40.000Z\"",
                "PubDate=\"yesterday\"",
                1,
            ),
            "PubDate",
        ),
        // An xs:boolean written as .NET writes it.
        (
            &v21,
            v2_1,
            v21.replace("ShowByDefault=\"true\"", "ShowByDefault=\"True\""),
            "ShowByDefault",
        ),
        // A resource type the schema does not list.
        (
            &v20,
            v2_0,
            v20.replacen("Type=\"RemoteApp\"", "Type=\"Application\"", 1),
            "Type",
        ),
    ] {
        assert_ne!(
            &broken, source,
            "the test's edit must change the document ({expected})"
        );
        match xmllint(&broken, version) {
            Verdict::Invalid(why) => assert!(why.contains(expected), "{expected}: {why}"),
            Verdict::Valid => panic!("xmllint passed a broken document ({expected}):\n{broken}"),
        }
    }
}
