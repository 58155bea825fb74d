//! Writes a [`Workspace`] as an MS-TSWP resource list (2.2.1), with
//! quick-xml's writer, which escapes every attribute value.
//!
//! What each schema version adds, and where this writer puts it:
//!
//! - 1.1: publisher, resources (icons, file extensions, the `.rdp` file's
//!   URL and its terminal server), terminal servers. Its wildcards are
//!   strict, so nothing of a later version may appear.
//! - 2.0: `SupportsReconnect="false"` (this broker does not serve the
//!   Remote Desktop Workspace Runtime protocol, MS-RDWR; without it
//!   Windows offers a reconnection that then fails) on the publisher,
//!   where the schema declares it, and on the resource collection, where
//!   the specification's prose puts it and Windows reads it;
//!   `PrimaryHandler="True"` on each file extension, with the resource's
//!   icon as the files' icon (`FileAssociationIcons`); each resource's
//!   folder (`/` for a RemoteApp at the top level, as RD Web Access
//!   writes it).
//! - 2.1: `ShowByDefault="true"` on each resource (`xs:boolean`, so in
//!   lower case).

use std::collections::HashMap;
use std::io;

use placement::TimestampMs;
use quick_xml::Writer;
use quick_xml::events::{BytesDecl, Event};

use super::{NAMESPACE, Resource, ResourceKind, SchemaVersion, Workspace};

/// The feed of `workspace` in schema `version`: a complete XML document
/// in UTF-8, valid against that version's schema.
pub fn render(workspace: &Workspace, version: SchemaVersion) -> String {
    let mut writer = Writer::new_with_indent(Vec::new(), b' ', 2);
    write_feed(&mut writer, workspace, version).expect("writing to memory cannot fail");
    let mut xml = String::from_utf8_lossy(&writer.into_inner()).into_owned();
    xml.push('\n');
    xml
}

fn write_feed(
    w: &mut Writer<Vec<u8>>,
    workspace: &Workspace,
    version: SchemaVersion,
) -> io::Result<()> {
    let v2 = version >= SchemaVersion::V2_0;
    w.write_event(Event::Decl(BytesDecl::new("1.0", Some("utf-8"), None)))?;
    let published = timestamp(workspace.published_ms());
    let mut collection = w
        .create_element("ResourceCollection")
        .with_attribute(("PubDate", published.as_str()))
        .with_attribute(("SchemaVersion", version.as_str()));
    if v2 {
        collection = collection.with_attribute(("SupportsReconnect", "false"));
    }
    collection
        .with_attribute(("xmlns", NAMESPACE))
        .write_inner_content(|w| write_publisher(w, workspace, version))?;
    Ok(())
}

fn write_publisher(
    w: &mut Writer<Vec<u8>>,
    workspace: &Workspace,
    version: SchemaVersion,
) -> io::Result<()> {
    let last_updated = timestamp(workspace.last_updated_ms());
    let mut publisher = w
        .create_element("Publisher")
        .with_attribute(("LastUpdated", last_updated.as_str()))
        .with_attribute(("Name", workspace.publisher_name()))
        .with_attribute(("ID", workspace.publisher_id()))
        .with_attribute(("Description", ""));
    if version >= SchemaVersion::V2_0 {
        publisher = publisher.with_attribute(("SupportsReconnect", "false"));
    }
    publisher.write_inner_content(|w| {
        w.create_element("Resources").write_inner_content(|w| {
            for resource in workspace.resources() {
                write_resource(w, resource, version)?;
            }
            Ok(())
        })?;
        w.create_element("TerminalServers")
            .write_inner_content(|w| {
                for (name, last_updated_ms) in terminal_servers(workspace.resources()) {
                    let last_updated = timestamp(last_updated_ms);
                    w.create_element("TerminalServer")
                        .with_attribute(("ID", name))
                        .with_attribute(("Name", name))
                        .with_attribute(("LastUpdated", last_updated.as_str()))
                        .write_empty()?;
                }
                Ok(())
            })?;
        Ok(())
    })?;
    Ok(())
}

fn write_resource(
    w: &mut Writer<Vec<u8>>,
    resource: &Resource,
    version: SchemaVersion,
) -> io::Result<()> {
    let v2 = version >= SchemaVersion::V2_0;
    let last_updated = timestamp(resource.last_updated_ms);
    let mut element = w
        .create_element("Resource")
        .with_attribute(("ID", resource.id.as_str()))
        .with_attribute(("Alias", resource.alias.as_str()))
        .with_attribute(("Title", resource.title.as_str()))
        .with_attribute(("LastUpdated", last_updated.as_str()))
        .with_attribute(("Type", resource.kind.as_str()));
    if version >= SchemaVersion::V2_1 {
        element = element.with_attribute(("ShowByDefault", "true"));
    }
    element.write_inner_content(|w| {
        if let Some(icons) = &resource.icons {
            // 2.0's schema wants IconRaw first; 1.1's takes any order.
            w.create_element("Icons").write_inner_content(|w| {
                w.create_element("IconRaw")
                    .with_attribute(("FileType", "Ico"))
                    .with_attribute(("FileURL", icons.ico.as_str()))
                    .write_empty()?;
                w.create_element("Icon32")
                    .with_attribute(("Dimensions", "32x32"))
                    .with_attribute(("FileType", "Png"))
                    .with_attribute(("FileURL", icons.png_32.as_str()))
                    .write_empty()?;
                Ok(())
            })?;
        }
        // Written even when empty, as the specification asks.
        let extensions = w.create_element("FileExtensions");
        if resource.file_extensions.is_empty() {
            extensions.write_empty()?;
        } else {
            extensions.write_inner_content(|w| {
                for name in &resource.file_extensions {
                    let extension = w
                        .create_element("FileExtension")
                        .with_attribute(("Name", name.as_str()));
                    if !v2 {
                        extension.write_empty()?;
                        continue;
                    }
                    let extension = extension.with_attribute(("PrimaryHandler", "True"));
                    match &resource.icons {
                        None => {
                            extension.write_empty()?;
                        }
                        Some(icons) => {
                            extension.write_inner_content(|w| {
                                w.create_element("FileAssociationIcons")
                                    .write_inner_content(|w| {
                                        w.create_element("IconRaw")
                                            .with_attribute(("FileType", "Ico"))
                                            .with_attribute(("FileURL", icons.ico.as_str()))
                                            .write_empty()?;
                                        Ok(())
                                    })?;
                                Ok(())
                            })?;
                        }
                    }
                }
                Ok(())
            })?;
        }
        if v2 && (resource.kind == ResourceKind::RemoteApp || !resource.folder.is_empty()) {
            let folder = format!("/{}", resource.folder);
            w.create_element("Folders").write_inner_content(|w| {
                w.create_element("Folder")
                    .with_attribute(("Name", folder.as_str()))
                    .write_empty()?;
                Ok(())
            })?;
        }
        w.create_element("HostingTerminalServers")
            .write_inner_content(|w| {
                w.create_element("HostingTerminalServer")
                    .write_inner_content(|w| {
                        w.create_element("ResourceFile")
                            .with_attribute(("FileExtension", ".rdp"))
                            .with_attribute(("URL", resource.rdp_file_url.as_str()))
                            .write_empty()?;
                        w.create_element("TerminalServerRef")
                            .with_attribute(("Ref", resource.terminal_server.as_str()))
                            .write_empty()?;
                        Ok(())
                    })?;
                Ok(())
            })?;
        Ok(())
    })?;
    Ok(())
}

/// Each terminal server the resources name, once, in the order first
/// named, with the latest change of a resource on it.
fn terminal_servers(resources: &[Resource]) -> Vec<(&str, TimestampMs)> {
    let mut servers: Vec<(&str, TimestampMs)> = Vec::new();
    let mut index: HashMap<&str, usize> = HashMap::new();
    for resource in resources {
        let name = resource.terminal_server.as_str();
        match index.get(name) {
            Some(&i) => servers[i].1 = servers[i].1.max(resource.last_updated_ms),
            None => {
                index.insert(name, servers.len());
                servers.push((name, resource.last_updated_ms));
            }
        }
    }
    servers
}

/// `xs:dateTime` in UTC to the millisecond (RFC 3339), such as
/// `2026-05-04T10:11:12.345Z`; `Workspace` admits only moments from 1970
/// to 9999.
fn timestamp(ms: TimestampMs) -> String {
    chrono::DateTime::from_timestamp_millis(ms)
        .unwrap_or_default()
        .to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
}
