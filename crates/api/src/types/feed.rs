//! The workspace feed's shapes (rule F4): what the broker tells the RD
//! Gateway that serves a user's feed.

use serde::{Deserialize, Serialize};
#[cfg(feature = "openapi")]
use utoipa::ToSchema;

/// `GET /api/v1/users/{name}/feed`: what the user's workspace feed lists
/// (rule F4), as the broker decides it for the RD Gateway that serves the
/// feed (`/RDWeb/Feed/webfeed.aspx`): the resources whose files open
/// without a ticket, and the feed's `LastUpdated`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct FeedOutput {
    pub user: String,
    /// Since when the user's feed has listed exactly these resources (ms
    /// since the Unix epoch): it moves when, and only when, the list does.
    pub last_updated_ms: i64,
    /// Pool by pool in name order, each pool's desktop before its
    /// applications, those by alias.
    pub resources: Vec<FeedResourceOutput>,
}

/// One desktop or application of a user's feed.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct FeedResourceOutput {
    pub host_pool: String,
    /// The application's alias; none for the pool's desktop.
    #[serde(default)]
    pub alias: Option<String>,
    /// What the user sees: the application's display name, or the pool's
    /// friendly name for its desktop.
    pub title: String,
    /// When the resource last changed (ms since the Unix epoch).
    pub modified_ms: i64,
    #[serde(default)]
    pub file_extensions: Vec<String>,
    #[serde(default)]
    pub folder: String,
    /// A digest of the resource's icon when it has one (hex): the icon's
    /// address carries it, so clients fetch it again when it changes.
    #[serde(default)]
    pub icon: Option<String>,
    /// The server the resource's file connects to: the RD Gateway, or the
    /// RDP front door.
    pub terminal_server: String,
}

/// `GET /api/v1/users/{name}/feed/{pool}/applications/{alias}/icon`: an
/// application's icons as the feed serves them, base64.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct FeedIconOutput {
    /// The ICO the feed names (`IconRaw`).
    pub ico: String,
    /// The 32×32 PNG the feed names (`Icon32`).
    pub png32: String,
}
