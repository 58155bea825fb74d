//! The workspace feed (MS-TSWP, the Terminal Services Workspace
//! Provisioning protocol): the XML document that Windows' "RemoteApp and
//! Desktop Connections" and Windows App (macOS, iOS, Android) subscribe to
//! at `GET /RDWeb/Feed/webfeed.aspx`, listing the desktops and RemoteApp
//! programs a user is given, each with its icons, the file extensions it
//! opens, its folder and the URL of its `.rdp` file.
//!
//! This module holds no state and does no IO: the broker decides what a
//! user is given and builds a [`Workspace`] of it; [`render`] writes the
//! document in the schema version the client asked for
//! ([`SchemaVersion::from_accept`]). A [`Workspace`] is checked resource by
//! resource as it is built ([`Workspace::add`]), so that rendering cannot
//! fail and every document it writes validates against the specification's
//! schema (the tests run `xmllint` against the schemas kept in
//! `tests/data/ms-tswp/`).
//!
//! [`resource_id`] names a resource the same way on every replica and after
//! every restart, so a subscribed client sees an unchanged resource as
//! unchanged. [`icons`] checks the icons' files and derives the two forms
//! the feed names (a 32×32 PNG and an ICO).
//!
//! Where the specification leaves a choice, this module does what RD Web
//! Access does, so that clients see what they were built against: the
//! same attributes, `PrimaryHandler="True"`, a RemoteApp at the top level in
//! the folder `/`. A client that asks for no version gets schema 1.1, as
//! the specification requires.

pub mod icons;
mod render;
#[cfg(test)]
mod tests;

use std::collections::HashSet;

use placement::TimestampMs;
use sha1::{Digest, Sha1};

pub use render::render;

/// Where clients subscribe: RD Web Access's path, the one users know and
/// clients' documentation names.
pub const FEED_PATH: &str = "/RDWeb/Feed/webfeed.aspx";
/// The XML namespace of every element of the feed.
pub const NAMESPACE: &str = "http://schemas.microsoft.com/ts/2007/05/tswf";
/// The media type a client asks for with `radc_schema_version`, and the
/// content type of a feed of schema 2.0 or later.
pub const RADC_MEDIA_TYPE: &str = "application/x-msts-radc+xml";
/// The most resources one feed lists: every pool's desktop and
/// applications a user is given, with room to spare. A feed this long is
/// a few megabytes.
pub const MAX_RESOURCES: usize = 5_000;
/// The most media ranges of an `Accept` header that are looked at; the
/// rest are ignored (clients send one or two).
pub const MAX_ACCEPT_RANGES: usize = 32;
/// The longest URL (of an icon or an `.rdp` file), in bytes.
pub const MAX_URL_BYTES: usize = 2048;
/// The longest title, alias or publisher name, in bytes.
pub const MAX_NAME_BYTES: usize = 256;
/// The longest identifier (a resource's ID, the publisher's ID, a terminal
/// server's name), in bytes: a DNS name's length.
pub const MAX_ID_BYTES: usize = 255;
/// The most file extensions one resource claims.
pub const MAX_FILE_EXTENSIONS: usize = placement::MAX_FILE_EXTENSIONS;
/// The longest folder name, in bytes.
pub const MAX_FOLDER_BYTES: usize = placement::MAX_FOLDER_BYTES;
/// The latest moment `xs:dateTime` is written for with four digits of
/// year: 9999-12-31T23:59:59.999Z, in milliseconds since the epoch.
pub const MAX_TIMESTAMP_MS: TimestampMs = 253_402_300_799_999;

/// The schema version of a feed (MS-TSWP 2.2.1). Later versions add to
/// earlier ones: 2.0 folders, file-type handlers and `SupportsReconnect`;
/// 2.1 `ShowByDefault`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum SchemaVersion {
    /// What a client that asks for no version gets (Windows 7's).
    V1_1,
    /// What Windows 8 and later, and Windows App, ask for.
    V2_0,
    V2_1,
}

impl SchemaVersion {
    /// The version a request's `Accept` header asks for (MS-TSWP 2.2.5): the
    /// highest `radc_schema_version` this module knows among the media
    /// ranges of type `application/x-msts-radc+xml` (not refused with
    /// `q=0`). Clients send, for example,
    /// `application/x-msts-radc+xml; radc_schema_version=2.0` (Windows) or
    /// `application/x-msts-radc+xml;radc_schema_version=2.0,text/xml`
    /// (Windows App).
    ///
    /// Without a header, or without a version this module knows, it is
    /// 1.1, as the specification requires and RD Web Access does: every
    /// client reads 1.1.
    pub fn from_accept(header: Option<&str>) -> SchemaVersion {
        header
            .into_iter()
            .flat_map(|h| h.split(',').take(MAX_ACCEPT_RANGES))
            .filter_map(requested_version)
            .max()
            .unwrap_or(SchemaVersion::V1_1)
    }

    /// A version as the protocol writes it (`"1.1"`, `"2.0"`, `"2.1"`):
    /// for the `radc_schema_version` a client may give in the URL's query
    /// instead of its `Accept` header (MS-TSWP 3.1.5.2.2).
    pub fn parse(value: &str) -> Option<SchemaVersion> {
        match value.trim() {
            "1.1" => Some(SchemaVersion::V1_1),
            "2.0" => Some(SchemaVersion::V2_0),
            "2.1" => Some(SchemaVersion::V2_1),
            _ => None,
        }
    }

    /// The version as the feed's `SchemaVersion` attribute writes it.
    pub fn as_str(self) -> &'static str {
        match self {
            SchemaVersion::V1_1 => "1.1",
            SchemaVersion::V2_0 => "2.0",
            SchemaVersion::V2_1 => "2.1",
        }
    }

    /// The answer's content type (MS-TSWP 2.2.1.4): the RADC media type for
    /// 2.0 and later, `text/xml` for 1.1.
    pub fn content_type(self) -> &'static str {
        match self {
            SchemaVersion::V1_1 => "text/xml; charset=utf-8",
            SchemaVersion::V2_0 | SchemaVersion::V2_1 => {
                "application/x-msts-radc+xml; charset=utf-8"
            }
        }
    }
}

/// The version one media range of an `Accept` header asks for, if it is the
/// RADC media type with a known `radc_schema_version` and is not refused.
fn requested_version(range: &str) -> Option<SchemaVersion> {
    let mut parts = range.split(';');
    let media_type = parts.next()?.trim();
    if !media_type.eq_ignore_ascii_case(RADC_MEDIA_TYPE) {
        return None;
    }
    let mut version = None;
    for parameter in parts {
        let Some((name, value)) = parameter.split_once('=') else {
            continue;
        };
        let (name, value) = (name.trim(), value.trim().trim_matches('"'));
        if name.eq_ignore_ascii_case("radc_schema_version") {
            version = SchemaVersion::parse(value);
        } else if name.eq_ignore_ascii_case("q") && value.parse::<f32>().is_ok_and(|q| q <= 0.0) {
            // Refused by the client.
            return None;
        }
    }
    version
}

/// The namespace of [`resource_id`]'s UUIDs: UUIDv5 of the URL
/// `urn:deskbroker:workspace-feed:resource` in RFC 9562's URL namespace.
/// It must never change: every subscribed client would see every resource
/// as a new one.
const RESOURCE_NAMESPACE: [u8; 16] = [
    0xbd, 0xe0, 0xdb, 0xd5, 0x41, 0x3c, 0x56, 0x12, 0x98, 0xe4, 0xb1, 0xc0, 0x00, 0x83, 0x75, 0x75,
];

/// The stable ID of a resource (its `ID` attribute): the desktop of `pool`
/// when `app_alias` is `None`, else the pool's application of that alias.
/// A UUIDv5 (RFC 9562) of the pair, so it is the same on every replica,
/// after every restart and in every version, and never the same for two
/// resources.
pub fn resource_id(pool: &str, app_alias: Option<&str>) -> String {
    // Pool names and aliases hold no ':', so the name is unambiguous.
    let name = match app_alias {
        None => format!("desktop:{pool}"),
        Some(alias) => format!("remoteapp:{pool}:{alias}"),
    };
    uuid_v5(&RESOURCE_NAMESPACE, name.as_bytes())
}

/// RFC 9562's UUIDv5: SHA-1 of the namespace and the name, with the
/// version and variant bits set, in its hyphenated form.
fn uuid_v5(namespace: &[u8; 16], name: &[u8]) -> String {
    let digest = Sha1::new()
        .chain_update(namespace)
        .chain_update(name)
        .finalize();
    let mut bytes = [0u8; 16];
    bytes.copy_from_slice(&digest[..16]);
    bytes[6] = (bytes[6] & 0x0f) | 0x50;
    bytes[8] = (bytes[8] & 0x3f) | 0x80;
    let hex = hex::encode(bytes);
    format!(
        "{}-{}-{}-{}-{}",
        &hex[..8],
        &hex[8..12],
        &hex[12..16],
        &hex[16..20],
        &hex[20..]
    )
}

/// What a resource starts: a whole desktop, or one program in its own
/// window.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ResourceKind {
    Desktop,
    RemoteApp,
}

impl ResourceKind {
    /// As the feed's `Type` attribute writes it.
    pub fn as_str(self) -> &'static str {
        match self {
            ResourceKind::Desktop => "Desktop",
            ResourceKind::RemoteApp => "RemoteApp",
        }
    }
}

/// Where a client downloads a resource's icon, in the two forms the feed
/// names ([`icons::feed_icons`] derives one from the other): relative to
/// the feed's URL (`/RDWeb/…`) or absolute.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IconUrls {
    /// The ICO file (`IconRaw`), which Windows puts in its Start menu; also
    /// the icon of the files of the resource's extensions.
    pub ico: String,
    /// The 32×32 PNG (`Icon32`), which Windows App shows.
    pub png_32: String,
}

/// One desktop or RemoteApp program of a workspace.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Resource {
    /// Unique in the workspace and the same on every request: see
    /// [`resource_id`].
    pub id: String,
    pub kind: ResourceKind,
    /// Unique in the workspace: the name the server knows the resource by
    /// (the specification's `Alias`), without white space, such as
    /// `finance.notepad`.
    pub alias: String,
    /// What users see.
    pub title: String,
    /// When anything about the resource last changed (its icons included):
    /// clients fetch again what changed.
    pub last_updated_ms: TimestampMs,
    pub icons: Option<IconUrls>,
    /// The extensions (`.txt`) of the files it opens, which a subscribed
    /// Windows client associates with it; empty for a desktop.
    pub file_extensions: Vec<String>,
    /// The folder it is shown in (schema 2.0 and later); empty: the top
    /// level.
    pub folder: String,
    /// Where the client downloads the resource's `.rdp` file.
    pub rdp_file_url: String,
    /// The name of the server the `.rdp` file connects to (the front door's
    /// or the gateway's DNS name), which the feed lists once among its
    /// terminal servers.
    pub terminal_server: String,
}

/// Why a workspace or a resource cannot be in a feed, naming the field.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{field}: {message}")]
pub struct FeedError {
    /// The field at fault; for a resource, prefixed with its alias
    /// (`resource "finance.notepad": title`).
    pub field: String,
    pub message: String,
}

impl FeedError {
    fn new(field: impl Into<String>, message: impl Into<String>) -> FeedError {
        FeedError {
            field: field.into(),
            message: message.into(),
        }
    }
}

/// A user's workspace: the publisher (this broker) and the resources the
/// user is given, each checked as it is added, so that [`render`] always
/// writes a valid feed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Workspace {
    publisher_name: String,
    publisher_id: String,
    published_ms: TimestampMs,
    last_updated_ms: TimestampMs,
    resources: Vec<Resource>,
    ids: HashSet<String>,
    aliases: HashSet<String>,
}

impl Workspace {
    /// An empty workspace (itself a valid feed), published at
    /// `published_ms` (the feed's `PubDate`: now) by `publisher_name` (what
    /// clients call the workspace), `publisher_id` (globally unique: the
    /// broker's DNS name), last changed at `last_updated_ms` (the feed's
    /// `LastUpdated`; a resource changed later moves it on).
    pub fn new(
        publisher_name: &str,
        publisher_id: &str,
        published_ms: TimestampMs,
        last_updated_ms: TimestampMs,
    ) -> Result<Workspace, FeedError> {
        check_name("publisherName", publisher_name)?;
        check_token("publisherId", publisher_id, MAX_ID_BYTES)?;
        check_timestamp("publishedMs", published_ms)?;
        check_timestamp("lastUpdatedMs", last_updated_ms)?;
        Ok(Workspace {
            publisher_name: publisher_name.to_string(),
            publisher_id: publisher_id.to_string(),
            published_ms,
            last_updated_ms,
            resources: Vec::new(),
            ids: HashSet::new(),
            aliases: HashSet::new(),
        })
    }

    /// Adds `resource` after the others, or refuses it (naming the field)
    /// and changes nothing: a field a feed cannot hold, an ID or alias
    /// already in the workspace, or a workspace already holding
    /// [`MAX_RESOURCES`].
    pub fn add(&mut self, resource: Resource) -> Result<(), FeedError> {
        let prefix = format!("resource {:?}", resource.alias);
        let at = |field: &str| format!("{prefix}: {field}");
        if self.resources.len() >= MAX_RESOURCES {
            return Err(FeedError::new(
                prefix,
                format!(
                    "the workspace already holds {MAX_RESOURCES} resources, the most a feed lists"
                ),
            ));
        }
        check_resource(&resource).map_err(|e| FeedError::new(at(&e.field), e.message))?;
        if self.ids.contains(&resource.id) {
            return Err(FeedError::new(
                at("id"),
                format!("{:?} is already another resource's", resource.id),
            ));
        }
        if self.aliases.contains(&resource.alias) {
            return Err(FeedError::new(
                at("alias"),
                "already another resource's; aliases are unique in a workspace",
            ));
        }
        self.ids.insert(resource.id.clone());
        self.aliases.insert(resource.alias.clone());
        self.resources.push(resource);
        Ok(())
    }

    pub fn publisher_name(&self) -> &str {
        &self.publisher_name
    }

    pub fn publisher_id(&self) -> &str {
        &self.publisher_id
    }

    pub fn published_ms(&self) -> TimestampMs {
        self.published_ms
    }

    /// When anything in the workspace last changed: the later of what
    /// [`Workspace::new`] was given and every resource's `last_updated_ms`.
    pub fn last_updated_ms(&self) -> TimestampMs {
        self.resources
            .iter()
            .map(|r| r.last_updated_ms)
            .fold(self.last_updated_ms, TimestampMs::max)
    }

    /// The resources, in the order they were added.
    pub fn resources(&self) -> &[Resource] {
        &self.resources
    }
}

/// Every field of one resource, on its own.
fn check_resource(resource: &Resource) -> Result<(), FeedError> {
    check_token("id", &resource.id, MAX_ID_BYTES)?;
    check_token("alias", &resource.alias, MAX_NAME_BYTES)?;
    check_name("title", &resource.title)?;
    check_timestamp("lastUpdatedMs", resource.last_updated_ms)?;
    if let Some(icons) = &resource.icons {
        check_url("icons.ico", &icons.ico)?;
        check_url("icons.png32", &icons.png_32)?;
    }
    if resource.file_extensions.len() > MAX_FILE_EXTENSIONS {
        return Err(FeedError::new(
            "fileExtensions",
            format!(
                "{} entries; at most {MAX_FILE_EXTENSIONS}",
                resource.file_extensions.len()
            ),
        ));
    }
    let mut seen = HashSet::new();
    for (i, extension) in resource.file_extensions.iter().enumerate() {
        let field = format!("fileExtensions[{i}]");
        check_file_extension(&field, extension)?;
        if !seen.insert(extension.to_ascii_lowercase()) {
            return Err(FeedError::new(
                field,
                format!("{extension:?} is listed twice"),
            ));
        }
    }
    check_folder(&resource.folder)?;
    check_url("rdpFileUrl", &resource.rdp_file_url)?;
    check_token("terminalServer", &resource.terminal_server, MAX_ID_BYTES)?;
    Ok(())
}

/// Whether `c` may stand in an attribute as itself: XML 1.0 forbids most
/// control characters and U+FFFE/U+FFFF, and a parser turns tabs and line
/// breaks in an attribute into spaces, so none of them is taken.
fn is_refused_char(c: char) -> bool {
    c.is_control() || matches!(c, '\u{FFFE}' | '\u{FFFF}')
}

/// Text without refused characters, 1 to `max_bytes` bytes.
fn check_text(field: &str, value: &str, max_bytes: usize) -> Result<(), FeedError> {
    if value.is_empty() {
        return Err(FeedError::new(field, "required"));
    }
    if value.len() > max_bytes {
        return Err(FeedError::new(
            field,
            format!("{} bytes; at most {max_bytes}", value.len()),
        ));
    }
    if let Some(c) = value.chars().find(|&c| is_refused_char(c)) {
        return Err(FeedError::new(
            field,
            format!("holds the control character {c:?}, which a feed cannot carry"),
        ));
    }
    Ok(())
}

/// A name users read: not blank.
fn check_name(field: &str, value: &str) -> Result<(), FeedError> {
    check_text(field, value, MAX_NAME_BYTES)?;
    if value.trim().is_empty() {
        return Err(FeedError::new(field, "blank; it is what users see"));
    }
    Ok(())
}

/// An identifier: no white space.
fn check_token(field: &str, value: &str, max_bytes: usize) -> Result<(), FeedError> {
    check_text(field, value, max_bytes)?;
    if value.chars().any(char::is_whitespace) {
        return Err(FeedError::new(
            field,
            format!("{value:?} holds white space; an identifier has none"),
        ));
    }
    Ok(())
}

/// A URL: no white space, at most [`MAX_URL_BYTES`].
fn check_url(field: &str, value: &str) -> Result<(), FeedError> {
    check_token(field, value, MAX_URL_BYTES)
}

/// `.` and 1 to 16 letters, digits, `-` or `_`, as the model's file
/// extensions are.
fn check_file_extension(field: &str, extension: &str) -> Result<(), FeedError> {
    if !placement::is_file_extension(extension) {
        return Err(FeedError::new(
            field,
            format!(
                "{extension:?} is not a file extension; use a dot and 1 to 16 letters, digits, \
                 '-' or '_' (.txt)"
            ),
        ));
    }
    Ok(())
}

/// Empty, or one level of name: the feed writes it as `/name`.
fn check_folder(folder: &str) -> Result<(), FeedError> {
    if folder.is_empty() {
        return Ok(());
    }
    check_text("folder", folder, MAX_FOLDER_BYTES)?;
    if folder.trim().is_empty() {
        return Err(FeedError::new(
            "folder",
            "blank; leave it empty for the top level",
        ));
    }
    if folder.contains(['/', '\\']) {
        return Err(FeedError::new(
            "folder",
            format!("{folder:?}: one level, without '/' or '\\'"),
        ));
    }
    Ok(())
}

/// A moment `xs:dateTime` writes with a four-digit year, from 1970 on.
fn check_timestamp(field: &str, ms: TimestampMs) -> Result<(), FeedError> {
    if !(0..=MAX_TIMESTAMP_MS).contains(&ms) {
        return Err(FeedError::new(
            field,
            format!("{ms} is not a moment from 1970 to 9999 in milliseconds since the epoch"),
        ));
    }
    Ok(())
}
