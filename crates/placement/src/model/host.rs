//! Session hosts and sessions as the engine sees them: what a host
//! reports (its metrics and policy), what it is registered with (its spec),
//! its state in a pool, and the sessions on it.

use serde::{Deserialize, Serialize};

use super::{
    DrainedBy, HostStatus, PowerState, SessionState, TimestampMs, check_range,
    validate_capabilities, validate_name, validate_user,
};
use crate::Error;

/// Per-host overrides of the pool's host-side rejection thresholds (rule H6).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct HostPolicy {
    pub load_index_threshold: Option<u32>,
    pub connecting_session_threshold: Option<u32>,
}

impl HostPolicy {
    pub fn validate(&self) -> Result<(), Error> {
        if let Some(v) = self.load_index_threshold {
            check_range("policy.loadIndexThreshold", v, 0, 100)?;
        }
        if let Some(v) = self.connecting_session_threshold {
            check_range("policy.connectingSessionThreshold", v, 0, 150)?;
        }
        Ok(())
    }
}

/// The last metrics a host reported in a heartbeat. Every field is optional:
/// a metric the last heartbeat lacks is unknown (rule H2).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct HostMetrics {
    pub cpu_percent: Option<f64>,
    pub memory_percent: Option<f64>,
    pub disk_queue_length: Option<f64>,
    pub disk_read_latency_ms: Option<f64>,
    pub disk_write_latency_ms: Option<f64>,
    pub custom_load_index: Option<i64>,
}

impl HostMetrics {
    pub fn validate(&self) -> Result<(), Error> {
        let fields = [
            ("cpuPercent", self.cpu_percent, 100.0),
            ("memoryPercent", self.memory_percent, 100.0),
            ("diskQueueLength", self.disk_queue_length, 1e9),
            ("diskReadLatencyMs", self.disk_read_latency_ms, 1e9),
            ("diskWriteLatencyMs", self.disk_write_latency_ms, 1e9),
        ];
        for (name, value, max) in fields {
            if let Some(v) = value
                && !(v.is_finite() && (0.0..=max).contains(&v))
            {
                return Err(Error::InvalidParameter(format!(
                    "{name}: {v} is out of range; it must be from 0 to {max}"
                )));
            }
        }
        if let Some(v) = self.custom_load_index
            && v < 0
        {
            return Err(Error::InvalidParameter(format!(
                "customLoadIndex: {v} is negative; it must be 0 or more"
            )));
        }
        Ok(())
    }
}

/// Where a host's heartbeats come from, as the heartbeat says: how the
/// broker learns about the host. Used by no rule; shown to operators.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase")]
pub enum HeartbeatSource {
    /// The agent on the host itself (the Linux agent: `/proc`, logind or
    /// a sessions command).
    Agent,
    /// The watching agent, from the host's windows_exporter (rules W1–W4).
    WindowsExporter,
}

/// The longest `scrapeError` a heartbeat may carry, in bytes: room for a
/// sentence or two about what the last scrape found wrong, not for a
/// host to store its exporter's answer. The watching agent shortens its
/// own to fit.
pub const MAX_SCRAPE_ERROR_BYTES: usize = 512;

/// A heartbeat's `scrapeError`: one line of text, 1 to
/// [`MAX_SCRAPE_ERROR_BYTES`] bytes, without control characters (a host
/// that has been taken over must not write a terminal's escape sequences
/// or fake lines into what operators read). The refusal does not echo it.
pub fn validate_scrape_error(error: &str) -> Result<(), Error> {
    if error.is_empty() || error.len() > MAX_SCRAPE_ERROR_BYTES {
        return Err(Error::InvalidParameter(format!(
            "scrapeError: {} bytes; it must be 1 to {MAX_SCRAPE_ERROR_BYTES}",
            error.len()
        )));
    }
    if error.chars().any(char::is_control) {
        return Err(Error::InvalidParameter(
            "scrapeError: holds control characters; it must be one line of text".into(),
        ));
    }
    Ok(())
}

/// What an administrator (or an agent's registration) says about a host.
///
/// `repr(C)`, fields in the order a placement reads them: what every
/// placement and logoff reads (name, address, drain, owner) comes first,
/// so that in [`Host`] it lies in the lines next to the host's counters and
/// metrics.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase")]
#[repr(C)]
pub struct HostSpec {
    pub name: String,
    pub address: String,
    pub allow_new_session: bool,
    /// Who set `allow_new_session` false (rule A6): an operator through the
    /// API, or a scaling plan. Always None while the host allows new
    /// sessions.
    #[serde(default)]
    pub drained_by: Option<DrainedBy>,
    pub assigned_user: Option<String>,
    pub capabilities: Vec<String>,
    pub policy: HostPolicy,
    /// Free-form labels (rule A6: a scaling plan's `exclusionTag` is one),
    /// at most [`MAX_HOST_TAGS`]. Absent in hosts stored before they
    /// existed, hence the serde default.
    #[serde(default)]
    pub tags: Vec<String>,
    /// The host's `aa:bb:cc:dd:ee:ff`, for the `wakeOnLan` power driver
    /// (rule A9) and `DESKBROKER_MAC` of the command driver.
    #[serde(default)]
    pub mac_address: Option<String>,
    /// The host's fully qualified DNS name (rule AD4), as its Kerberos
    /// service name and certificate know it: what a host-named connection
    /// file of a pool whose `connectionTarget` is `Host` names. None: such
    /// a file names the host's address. Absent in hosts stored before it
    /// existed, hence the serde default.
    #[serde(default)]
    pub dns_name: Option<String>,
    /// The image the host runs (rule U1), as its agent reports it in its
    /// heartbeats or an operator sets it: free text such as `2026.12.1`,
    /// at most [`MAX_IMAGE_VERSION_BYTES`]. None: not known. Absent in
    /// hosts stored before it existed, hence the serde default.
    #[serde(default)]
    pub image_version: Option<String>,
}

/// The longest image version, in bytes.
pub const MAX_IMAGE_VERSION_BYTES: usize = 128;

/// An image version (rule U1): one line of 1 to [`MAX_IMAGE_VERSION_BYTES`]
/// bytes, not blank, without control characters. Refused with
/// `InvalidParameter` naming `field`.
pub fn validate_image_version(field: &str, version: &str) -> Result<(), Error> {
    if version.trim().is_empty() || version.len() > MAX_IMAGE_VERSION_BYTES {
        return Err(Error::InvalidParameter(format!(
            "{field}: {} bytes; an image version is 1 to {MAX_IMAGE_VERSION_BYTES} bytes, not blank",
            version.len()
        )));
    }
    if version.chars().any(char::is_control) {
        return Err(Error::InvalidParameter(format!(
            "{field}: holds control characters; an image version is one line of text"
        )));
    }
    Ok(())
}

/// The longest DNS name, in bytes (RFC 1035: 255 octets on the wire, 253
/// characters written out).
pub const MAX_DNS_NAME_BYTES: usize = 253;
/// The longest label of a DNS name, in bytes.
pub const MAX_DNS_LABEL_BYTES: usize = 63;

/// A DNS name as RFC 1123 writes host names: dot-separated labels of 1 to
/// [`MAX_DNS_LABEL_BYTES`] ASCII letters, digits and hyphens, none
/// beginning or ending with a hyphen, at most [`MAX_DNS_NAME_BYTES`] in
/// all, without a trailing dot; the last label is not all digits (so an
/// IPv4 address is not one). Refused with `InvalidParameter` naming
/// `field`.
pub fn validate_dns_name(field: &str, name: &str) -> Result<(), Error> {
    let bad = |why: &str| {
        Error::InvalidParameter(format!(
            "{field}: {name:?} is not a DNS name ({why}); write a fully qualified name such \
             as host1.contoso.com"
        ))
    };
    if name.is_empty() {
        return Err(bad("it is empty"));
    }
    if name.len() > MAX_DNS_NAME_BYTES {
        return Err(bad("longer than 253 characters"));
    }
    let labels: Vec<&str> = name.split('.').collect();
    for label in &labels {
        if label.is_empty() {
            return Err(bad("an empty label"));
        }
        if label.len() > MAX_DNS_LABEL_BYTES {
            return Err(bad("a label longer than 63 characters"));
        }
        if !label
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-')
        {
            return Err(bad("only letters, digits, '-' and '.' are allowed"));
        }
        if label.starts_with('-') || label.ends_with('-') {
            return Err(bad("a label begins or ends with '-'"));
        }
    }
    if labels
        .last()
        .is_some_and(|l| l.bytes().all(|b| b.is_ascii_digit()))
    {
        return Err(bad("its last label is all digits"));
    }
    Ok(())
}

/// The most tags a host carries: a scaling plan scans them per host.
pub const MAX_HOST_TAGS: usize = 32;
/// The longest tag, in bytes.
pub const MAX_TAG_BYTES: usize = 64;

/// A tag: 1 to [`MAX_TAG_BYTES`] letters, digits, `.`, `-`, `_`, `:` or
/// `=` (so `no-autoscale` and `team=finance` both work), each listed once.
pub fn validate_tags(field: &str, tags: &[String]) -> Result<(), Error> {
    if tags.len() > MAX_HOST_TAGS {
        return Err(Error::InvalidParameter(format!(
            "{field}: {} tags; at most {MAX_HOST_TAGS}",
            tags.len()
        )));
    }
    for (i, t) in tags.iter().enumerate() {
        let ok = !t.is_empty()
            && t.len() <= MAX_TAG_BYTES
            && t.chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_' | ':' | '='));
        if !ok {
            return Err(Error::InvalidParameter(format!(
                "{field}: {t:?} is not a valid tag; use 1 to {MAX_TAG_BYTES} letters, digits, \
                 '.', '-', '_', ':' or '='"
            )));
        }
        if tags[..i].contains(t) {
            return Err(Error::InvalidParameter(format!(
                "{field}: {t:?} is listed twice"
            )));
        }
    }
    Ok(())
}

/// The six bytes of a MAC address written `aa:bb:cc:dd:ee:ff` (either
/// case), or None when it is not one.
pub fn parse_mac(mac: &str) -> Option<[u8; 6]> {
    let mut out = [0u8; 6];
    let mut parts = mac.split(':');
    for b in &mut out {
        let p = parts.next()?;
        if p.len() != 2 || !p.chars().all(|c| c.is_ascii_hexdigit()) {
            return None;
        }
        *b = u8::from_str_radix(p, 16).ok()?;
    }
    parts.next().is_none().then_some(out)
}

impl HostSpec {
    pub fn new(name: &str, address: &str) -> HostSpec {
        HostSpec {
            name: name.to_string(),
            address: address.to_string(),
            allow_new_session: true,
            capabilities: vec!["rdp".to_string()],
            policy: HostPolicy::default(),
            assigned_user: None,
            tags: Vec::new(),
            mac_address: None,
            drained_by: None,
            dns_name: None,
            image_version: None,
        }
    }

    pub fn validate(&self) -> Result<(), Error> {
        validate_name("name", &self.name)?;
        validate_address(&self.address)?;
        validate_capabilities("capabilities", &self.capabilities)?;
        self.policy.validate()?;
        if let Some(u) = &self.assigned_user {
            validate_user("assignedUser", u)?;
        }
        validate_tags("tags", &self.tags)?;
        if let Some(d) = &self.dns_name {
            validate_dns_name("dnsName", d)?;
        }
        if let Some(v) = &self.image_version {
            validate_image_version("imageVersion", v)?;
        }
        if let Some(m) = &self.mac_address
            && parse_mac(m).is_none()
        {
            return Err(Error::InvalidParameter(format!(
                "macAddress: {m:?} is not a MAC address; write it aa:bb:cc:dd:ee:ff"
            )));
        }
        if self.allow_new_session && self.drained_by.is_some() {
            return Err(Error::InvalidParameter(
                "drainedBy: a host that allows new sessions is drained by nobody".into(),
            ));
        }
        Ok(())
    }
}

/// `HOST:PORT`, where HOST is a DNS name, an IPv4 address or a bracketed
/// IPv6 address, and PORT is 1..=65535.
pub fn validate_address(address: &str) -> Result<(), Error> {
    let bad = || {
        Error::InvalidParameter(format!(
            "address: {address:?} is not HOST:PORT (for example 10.0.0.5:3389)"
        ))
    };
    let (host, port) = address.rsplit_once(':').ok_or_else(bad)?;
    let port: u16 = port.parse().map_err(|_| bad())?;
    if port == 0 || host.is_empty() || host.len() > 253 {
        return Err(bad());
    }
    let host_ok = if let Some(inner) = host.strip_prefix('[').and_then(|h| h.strip_suffix(']')) {
        inner.parse::<std::net::Ipv6Addr>().is_ok()
    } else {
        host.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_'))
    };
    if !host_ok {
        return Err(bad());
    }
    Ok(())
}

/// A registered session host with what the broker knows of it.
///
/// `repr(C)`, fields in the order a placement reads them: in the first 64
/// bytes the counters a placement and a logoff update and the two
/// optional times (an `Option<Host>`, as the engine's host table holds
/// it, is told from `None` by the tag of one of them, read on every look
/// at the host); then the metrics (the load index is recomputed from them
/// on each placement), then the spec (name, address, drain), then the
/// rest. On a large pool the host of a placement is cold: this way what a
/// placement reads lies in adjacent cache lines, which the host table
/// loads together before using any (`HostTable::prefetch`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase")]
#[repr(C)]
pub struct Host {
    /// Query order: the registration sequence in the pool, never reused.
    pub seq: u64,
    /// Derived: never stored, recomputed from heartbeats, the power state
    /// and the clock.
    #[serde(skip, default = "available")]
    pub status: HostStatus,
    /// Rule A9: set by the broker's power actions (and a scaling plan's),
    /// never by the host. Absent in hosts stored before it existed, which
    /// were running, hence the serde default.
    #[serde(default)]
    pub power_state: PowerState,
    /// Derived from the pool's sessions (Pending + Active + Disconnected).
    #[serde(skip)]
    pub sessions: u32,
    /// Derived: the Pending sessions of this host.
    #[serde(skip)]
    pub connecting_sessions: u32,
    /// Derived: the Disconnected sessions of this host (a scaling plan's
    /// `ZeroActiveSessions` counts the others without a pass over every
    /// session, rule A5).
    #[serde(skip)]
    pub disconnected_sessions: u32,
    /// Derived: the Server Load Index, 0..=100 or -1 (rules H1–H3), with
    /// the stale-index correction of H7 when the pool sets one.
    #[serde(skip, default = "unknown_index")]
    pub load_index: i32,
    /// Derived: logons placed on this host since its last heartbeat (H7).
    /// Not stored: after a restart it counts from 0 again, which errs for
    /// at most one heartbeat interval (its connecting sessions still count).
    #[serde(skip)]
    pub logons_since_heartbeat: u32,
    pub last_heartbeat_ms: Option<TimestampMs>,
    /// When the host was last asked to start (None: never). A host that
    /// has sent heartbeats and was started is available again only after a
    /// heartbeat later than this (A9): until then nothing says its desktop
    /// is up, only that its machine was switched on.
    #[serde(default)]
    pub start_requested_ms: Option<TimestampMs>,
    pub metrics: Option<HostMetrics>,
    pub spec: HostSpec,
    pub registered_at_ms: TimestampMs,
    /// Where its last heartbeat came from, as it said (None: no heartbeat
    /// yet, or one that did not say). Kept with the metrics, like them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub heartbeat_source: Option<HeartbeatSource>,
    /// What the watching agent's last scrape of the host's exporter found
    /// wrong (None: nothing, or the host is not watched). A scrape that
    /// failed whole sets it too, though it is no heartbeat (rule W1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scrape_error: Option<String>,
}

fn available() -> HostStatus {
    HostStatus::Available
}

fn unknown_index() -> i32 {
    crate::load_index::UNKNOWN
}

/// One user's session on one host.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct Session {
    pub id: String,
    pub host: String,
    pub user: String,
    pub state: SessionState,
    pub create_time_ms: TimestampMs,
    /// When the session entered its current state; a Pending session expires
    /// `pendingTimeoutSeconds` after this (rule S4).
    pub state_since_ms: TimestampMs,
    /// Rule S9: placed, and no logon on it is confirmed yet. A placement
    /// starts so; the host's word confirms it (its agent listing the user,
    /// S8, or a `PATCH` of its state by anyone but a front door), the front
    /// door's own marks never do. Such a session lasts only while a
    /// connection holds it: once `Disconnected` it ends
    /// `pendingTimeoutSeconds` later, so a client that never logged on
    /// cannot pin a host's capacity. Absent in records stored before it
    /// existed, which load as confirmed (an upgrade ends nobody's session),
    /// and left out of confirmed ones.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub awaiting_logon: bool,
}

/// The key under which users are matched: UPNs compare without regard to
/// ASCII case, so `Alice@Contoso.com` reconnects to `alice@contoso.com`'s session.
pub fn user_key(user: &str) -> String {
    user.to_ascii_lowercase()
}
