//! The JSON shapes of `/api/v1` (documented by `GET /openapi.json`), camelCase, in
//! both directions: the broker deserializes the inputs and serializes the
//! outputs, and its clients do the reverse with the same types, so the two
//! sides cannot drift apart.
//!
//! Inputs refuse unknown fields (a typo must not pass silently), except
//! heartbeats, which newer agents may extend. Outputs accept unknown fields,
//! so an older client keeps working with a newer broker. Optional input
//! fields that are not set are left out when serialized, so a `PATCH`
//! changes only what its caller gave: such a struct says so once, with
//! `#[serde_with::skip_serializing_none]` before its derives, which leaves
//! out every `Option` field that is `None`. So do `Page` and `Health`; the
//! other outputs write an unset field as `null` unless the field says
//! otherwise.

use placement::{
    DrainedBy, HeartbeatSource, Host, HostMetrics, HostPolicy, HostPoolType, HostStatus,
    LoadBalancerType, PersonalDesktopAssignmentType, Pool, PoolConfig, PowerState, Session,
    SessionState, TimestampMs,
};
use serde::{Deserialize, Serialize};

#[cfg(feature = "openapi")]
use utoipa::ToSchema;

mod feed;
pub use feed::{FeedIconOutput, FeedOutput, FeedResourceOutput};

/// A timestamp as the API writes it: RFC 3339, UTC, whole seconds.
pub fn rfc3339(ms: TimestampMs) -> String {
    chrono::DateTime::from_timestamp_millis(ms)
        .unwrap_or_default()
        .to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
}

/// A timestamp to the millisecond: RFC 3339, UTC, three decimals, so that
/// records a moment apart (audit entries, scaling actions) stay apart.
pub fn rfc3339_ms(ms: TimestampMs) -> String {
    chrono::DateTime::from_timestamp_millis(ms)
        .unwrap_or_default()
        .to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
}

/// `{"value": [...]}`, the shape of every list.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
pub struct List<T> {
    pub value: Vec<T>,
}

/// `{"value": [...], "nextLink": "..."}`: a list, and where its next page
/// is while there is one (absent on the last page and on unpaged lists).
#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct Page<T> {
    pub value: Vec<T>,
    /// Path and query of the next page, e.g.
    /// `/api/v1/hostPools/p/sessionHosts?pageSize=100&initialSkip=200`.
    #[serde(default)]
    pub next_link: Option<String>,
}

/// `GET /healthz`: whether this process can serve, and in a replica set
/// who decides (rule L2), so that a load balancer can route around a
/// replica that has no leader. Answered 200 when `status` is `ok`, 503
/// otherwise.
#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct Health {
    /// `ok` or `unavailable`.
    pub status: String,
    /// `standalone` (one broker on its own store), or in a replica set
    /// `leader`, `follower` or `electing` (no leader known: requests are
    /// answered 503 `LeaderUnavailable`).
    pub role: String,
    /// The leader's address (`--advertise-url`), on replicas that know it.
    #[serde(default)]
    pub leader: Option<String>,
    /// The leadership's epoch, one more at every election won.
    #[serde(default)]
    pub epoch: Option<i64>,
    /// Why this process cannot serve, when it cannot.
    #[serde(default)]
    pub error: Option<String>,
}

/// Body of `PUT` and `PATCH` on a host pool. On `PUT` only `hostPoolType`
/// and `loadBalancerType` are required; on `PATCH` every field is optional.
#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct HostPoolInput {
    pub host_pool_type: Option<HostPoolType>,
    pub load_balancer_type: Option<LoadBalancerType>,
    pub max_session_limit: Option<u32>,
    pub breadth_first_randomized: Option<bool>,
    pub personal_desktop_assignment_type: Option<PersonalDesktopAssignmentType>,
    pub pending_timeout_seconds: Option<u32>,
    pub heartbeat_timeout_seconds: Option<u32>,
    pub standard_capabilities: Option<Vec<String>>,
    pub load_index_settings: Option<LoadIndexSettingsInput>,
    pub logon_storm_settings: Option<LogonStormSettingsInput>,
    pub description: Option<String>,
    pub friendly_name: Option<String>,
    /// CIDR ranges a host's address must lie in (`["10.0.0.0/8"]`); empty:
    /// any routable address. Loopback, link-local, unspecified and
    /// multicast addresses are refused unless a range names them.
    pub allowed_address_ranges: Option<Vec<String>>,
    /// Rule S9: seconds after which a Disconnected session ends (0 = never,
    /// otherwise 60..=31536000; a new pool's default is 28800, 8 hours).
    pub disconnected_timeout_seconds: Option<u32>,
    /// Rule S9: seconds after which any session ends (0 = never, otherwise
    /// 60..=31536000).
    pub max_session_lifetime_seconds: Option<u32>,
    /// Rule R3: whether RDP clients may name this pool with a `tsv://`
    /// routing token at the front door (default true).
    pub allow_front_door: Option<bool>,
    /// Rule T2: users who may get a new session (empty with
    /// `entitledGroups`: everyone).
    pub entitled_users: Option<Vec<String>>,
    /// Rule T2: groups whose members may get a new session.
    pub entitled_groups: Option<Vec<String>>,
    /// Rule T3: whether the RDP front door places users only on a signed
    /// connection ticket (default false).
    pub require_connection_ticket: Option<bool>,
    /// Rule T3: seconds a connection ticket of this pool is honoured
    /// (30..=86400, default 300).
    pub ticket_lifetime_seconds: Option<u32>,
    /// Accepted for symmetry with the output; must match the path.
    /// Rule A8 (stored; see docs/rules.md).
    pub start_vm_on_connect: Option<bool>,
    /// Rule A9. Setting a command needs an administrator of every pool.
    pub power_settings: Option<PowerSettingsInput>,
    /// Rule AD4: what connection files and browser addresses name: `Pool`
    /// (the default) or `Host` (the user is placed when the file is fetched,
    /// and the file names that host).
    pub connection_target: Option<placement::ConnectionTarget>,
    /// Rule AD3: whether the pool's gateway connection files name the
    /// gateway as the KDC proxy (`kdcproxyname`; default false).
    pub kdc_proxy: Option<bool>,
    /// Rule AD2: `Ticket` (the default: the RD Gateway admits only a
    /// connection ticket) or `TicketOrWindows` (also the client's Windows
    /// sign-in, where the gateway has a keytab).
    pub gateway_sign_in: Option<placement::GatewaySignIn>,
    /// Rule F3 (AVD's `customRdpProperty`): RDP properties for the pool's
    /// `.rdp` files, `name:type:value` separated by `;`
    /// (`"audiomode:i:0;redirectclipboard:i:0"`), from the list of
    /// properties clients honour, each value checked; the whole list is
    /// refused, naming each bad entry, if one is wrong. Empty: none.
    pub custom_rdp_properties: Option<String>,
    /// Rule F1 (AVD's `preferredAppGroupType`): `Desktop` (the default) or
    /// `RemoteApp`: which a user given both the pool's desktop and some of
    /// its applications sees.
    pub preferred_app_group_type: Option<placement::PreferredAppGroupType>,
    /// Rule F2: `RemoteApp` (the default: published applications open in
    /// windows of their own, Windows hosts) or `AlternateShell` (an
    /// application is the session's only program: xrdp hosts).
    pub application_mode: Option<placement::ApplicationMode>,
    pub name: Option<String>,
}

/// `powerSettings` of a pool's input: on `PATCH` only the fields given
/// change; a command set to `null` is removed.
#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PowerSettingsInput {
    pub driver: Option<placement::PowerDriver>,
    #[serde(default, with = "double_option")]
    #[cfg_attr(feature = "openapi", schema(value_type = Option<String>))]
    pub power_on_command: Option<Option<String>>,
    #[serde(default, with = "double_option")]
    #[cfg_attr(feature = "openapi", schema(value_type = Option<String>))]
    pub power_off_command: Option<Option<String>>,
    #[serde(default, with = "double_option")]
    #[cfg_attr(feature = "openapi", schema(value_type = Option<String>))]
    pub power_state_command: Option<Option<String>>,
    pub timeout_seconds: Option<u32>,
    pub broadcast_address: Option<String>,
}

impl PowerSettingsInput {
    /// Whether the input sets a command (not just removes one).
    pub fn sets_command(&self) -> bool {
        [
            &self.power_on_command,
            &self.power_off_command,
            &self.power_state_command,
        ]
        .iter()
        .any(|c| matches!(c, Some(Some(_))))
    }
}

/// `loadIndexSettings` of a pool's input; fields not given are unchanged.
#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct LoadIndexSettingsInput {
    pub include_session_count: Option<bool>,
    pub cpu_threshold: Option<u32>,
    pub memory_threshold: Option<u32>,
    pub disk_queue_length_threshold: Option<u32>,
    pub disk_read_latency_threshold: Option<u32>,
    pub disk_write_latency_threshold: Option<u32>,
    pub use_custom_script: Option<bool>,
    pub load_index_threshold: Option<u32>,
    pub connecting_session_threshold: Option<u32>,
}

/// `logonStormSettings` of a pool's input; fields not given are unchanged.
#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct LogonStormSettingsInput {
    pub load_index_threshold: Option<u32>,
    pub connecting_session_threshold: Option<u32>,
    pub min_hosts_in_queue: Option<u32>,
    /// Rule H7: index points each logon placed since a host's last
    /// heartbeat adds to its metric factors (0: off).
    pub logon_cost: Option<u32>,
}

/// A host pool, as returned.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct HostPoolOutput {
    #[serde(flatten)]
    pub config: PoolConfig,
    /// Warnings about valid but doubtful settings (rule P5).
    pub warnings: Vec<String>,
    /// How many session hosts the pool has.
    pub session_host_count: usize,
    /// How many sessions (Pending, Active, Disconnected) the pool has.
    pub session_count: usize,
    /// Read-only (rule A1): the scaling plan serving this pool, set by the
    /// plan's `hostPools`.
    #[serde(default)]
    pub scaling_plan: Option<String>,
    /// Read-only (rule A2): the algorithm placements use now, the plan's
    /// phase's while a plan serves the pool, else `loadBalancerType`.
    #[serde(default)]
    pub effective_load_balancer_type: Option<placement::LoadBalancerType>,
    /// Read-only (rule A9): the power actions this broker can take on the
    /// pool's hosts: `start` with the `wakeOnLan` driver, or with a
    /// `powerOnCommand` the broker runs (`serve --allow-power-commands`);
    /// `stop` with a `powerOffCommand` it runs. Empty: hosts of this pool
    /// are neither started nor stopped (the console shows no Start/Stop).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub power_actions: Option<Vec<String>>,
}

impl HostPoolOutput {
    pub fn of(pool: &Pool, warnings: Vec<String>) -> HostPoolOutput {
        HostPoolOutput {
            config: pool.config().clone(),
            warnings,
            session_host_count: pool.host_count(),
            session_count: pool.session_count(),
            scaling_plan: None,
            effective_load_balancer_type: Some(pool.effective_load_balancer_type()),
            power_actions: None,
        }
    }
}

/// Body of `PUT` on a session host.
#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SessionHostInput {
    pub address: String,
    pub allow_new_session: Option<bool>,
    pub capabilities: Option<Vec<String>>,
    pub policy: Option<HostPolicy>,
    /// Owner of a host of a Personal pool.
    pub assigned_user: Option<String>,
    /// Labels, e.g. a scaling plan's `exclusionTag` (rule A6).
    pub tags: Option<Vec<String>>,
    /// `aa:bb:cc:dd:ee:ff`, for Wake-on-LAN (rule A9).
    pub mac_address: Option<String>,
    /// The host's fully qualified DNS name (rule AD4), e.g.
    /// `host1.contoso.com`: what host-named connection files name.
    pub dns_name: Option<String>,
    /// The image the host runs (rule U1), e.g. `2026.12.1`; its agent's
    /// heartbeats replace it when they report one.
    pub image_version: Option<String>,
    /// Accepted for symmetry with the output; must match the path.
    pub name: Option<String>,
}

/// Body of `PATCH` on a session host; `assignedUser: null` unassigns.
#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SessionHostPatch {
    pub address: Option<String>,
    pub allow_new_session: Option<bool>,
    pub capabilities: Option<Vec<String>>,
    pub policy: Option<HostPolicy>,
    /// Absent: unchanged; `null`: unassigned; a user: assigned.
    #[serde(default, with = "double_option")]
    #[cfg_attr(feature = "openapi", schema(value_type = Option<String>))]
    pub assigned_user: Option<Option<String>>,
    /// Replaces the host's tags (rule A6's `exclusionTag`).
    pub tags: Option<Vec<String>>,
    /// Absent: unchanged; `null`: none; `aa:bb:cc:dd:ee:ff`: set.
    #[serde(default, with = "double_option")]
    #[cfg_attr(feature = "openapi", schema(value_type = Option<String>))]
    pub mac_address: Option<Option<String>>,
    /// Absent: unchanged; `null`: none; a DNS name: set (rule AD4).
    #[serde(default, with = "double_option")]
    #[cfg_attr(feature = "openapi", schema(value_type = Option<String>))]
    pub dns_name: Option<Option<String>>,
    /// Absent: unchanged; `null`: unknown; a version: set (rule U1).
    #[serde(default, with = "double_option")]
    #[cfg_attr(feature = "openapi", schema(value_type = Option<String>))]
    pub image_version: Option<Option<String>>,
}

/// Distinguishes a field that is absent (`None`) from one set to `null`
/// (`Some(None)`).
mod double_option {
    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    pub fn deserialize<'de, D, T>(d: D) -> Result<Option<Option<T>>, D::Error>
    where
        D: Deserializer<'de>,
        T: Deserialize<'de>,
    {
        Option::<T>::deserialize(d).map(Some)
    }

    pub fn serialize<S, T>(v: &Option<Option<T>>, s: S) -> Result<S::Ok, S::Error>
    where
        S: Serializer,
        T: Serialize,
    {
        // `None` is never serialized: `skip_serializing_none` on the
        // struct gives the field `skip_serializing_if = "Option::is_none"`.
        v.as_ref().and_then(Option::as_ref).serialize(s)
    }
}

/// A session host, as returned.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct SessionHostOutput {
    pub name: String,
    pub address: String,
    pub allow_new_session: bool,
    pub status: HostStatus,
    /// Pending + Active + Disconnected sessions.
    pub sessions: u32,
    /// Pending sessions (Horizon's connecting sessions).
    pub connecting_sessions: u32,
    /// Server Load Index 0..=100, or -1 when unknown (rule H1).
    pub load_index: i32,
    pub last_heart_beat: Option<String>,
    pub assigned_user: Option<String>,
    pub capabilities: Vec<String>,
    pub policy: HostPolicy,
    pub registered_at: String,
    /// The metrics of the last heartbeat, if any.
    pub metrics: Option<HostMetrics>,
    #[serde(default)]
    pub tags: Vec<String>,
    #[serde(default)]
    pub mac_address: Option<String>,
    /// The host's fully qualified DNS name (rule AD4), if it has one.
    #[serde(default)]
    pub dns_name: Option<String>,
    /// The image the host runs (rule U1), as its agent last reported it or
    /// an operator set it; null: not known.
    #[serde(default)]
    pub image_version: Option<String>,
    /// Read-only (rule A9): set by power actions, never by the host. A
    /// `Stopped` or `Stopping` host's `status` is `Shutdown`.
    #[serde(default)]
    pub power_state: PowerState,
    /// Read-only (rule A6): who drained the host, while it is drained.
    #[serde(default)]
    pub drained_by: Option<DrainedBy>,
    /// Read-only: how the broker learns about the host, as its last
    /// heartbeat said: `agent` (the Linux agent on the host itself) or
    /// `windowsExporter` (the watching agent, from the host's
    /// windows_exporter, rules W1–W4). Null before the first heartbeat,
    /// or when the heartbeats do not say.
    #[serde(default)]
    pub heartbeat_source: Option<HeartbeatSource>,
    /// Read-only: what the watching agent's last scrape of the host's
    /// exporter found wrong (down, timed out, garbage, too old a version,
    /// a failed collector), one line of at most 512 bytes as the agent
    /// wrote it; null when the last scrape was whole. Untrusted text from
    /// the host's side: show it as text, never as markup.
    #[serde(default)]
    pub scrape_error: Option<String>,
}

impl From<&Host> for SessionHostOutput {
    fn from(h: &Host) -> SessionHostOutput {
        SessionHostOutput {
            name: h.spec.name.clone(),
            address: h.spec.address.clone(),
            allow_new_session: h.spec.allow_new_session,
            status: h.status,
            sessions: h.sessions,
            connecting_sessions: h.connecting_sessions,
            load_index: h.load_index,
            last_heart_beat: h.last_heartbeat_ms.map(rfc3339),
            assigned_user: h.spec.assigned_user.clone(),
            capabilities: h.spec.capabilities.clone(),
            policy: h.spec.policy.clone(),
            registered_at: rfc3339(h.registered_at_ms),
            metrics: h.metrics.clone(),
            tags: h.spec.tags.clone(),
            mac_address: h.spec.mac_address.clone(),
            dns_name: h.spec.dns_name.clone(),
            image_version: h.spec.image_version.clone(),
            power_state: h.power_state,
            drained_by: h.spec.drained_by,
            heartbeat_source: h.heartbeat_source,
            scrape_error: h.scrape_error.clone(),
        }
    }
}

/// Body of a heartbeat. Unknown fields are ignored so that newer agents
/// keep working with this broker.
#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct HeartbeatInput {
    #[serde(flatten)]
    pub metrics: HostMetrics,
    /// The host's full list of user sessions, reconciled with the broker's.
    /// Absent: the host does not know (its sessions are left alone).
    #[serde(default)]
    pub sessions: Option<Vec<ReportedSession>>,
    /// The host's own thresholds (H6), from its agent's configuration.
    #[serde(default)]
    pub policy: Option<HostPolicy>,
    /// Who sends it: `agent` (the Linux agent, on the host itself) or
    /// `windowsExporter` (the watching agent, from the host's
    /// windows_exporter). Kept as the host's `heartbeatSource`; absent:
    /// unknown. A value this broker does not know (a newer agent's) is
    /// read as absent, as unknown fields are ignored, so that agent's
    /// heartbeats keep working.
    #[serde(default, deserialize_with = "lenient_source")]
    pub source: Option<HeartbeatSource>,
    /// From the watching agent only: what its last scrape of the host's
    /// exporter found wrong (a failed or timed-out collector, too old a
    /// version, or with `scrapeFailed` why there was nothing to read); one
    /// line of at most 512 bytes (`placement::MAX_SCRAPE_ERROR_BYTES`),
    /// longer is refused. Absent: the scrape was whole. Kept as the host's
    /// `scrapeError`.
    #[serde(default)]
    pub scrape_error: Option<String>,
    /// From the watching agent only: the scrape failed whole (the exporter
    /// did not answer, or answered garbage), so this says nothing about the
    /// host but `scrapeError`. The broker keeps that error and nothing
    /// else: it is no heartbeat (rules S7, W1: the host still becomes
    /// `Unavailable` when its exporter stays down), it carries no metrics,
    /// no list and no policy, and its answer hands out no message or order.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub scrape_failed: bool,
    /// The image the host runs (rule U1), from its agent's
    /// `image_version_file` or `image_version_command`: it replaces the
    /// host's `imageVersion`. Absent: the agent does not say (the host's
    /// stays as it is). A value that is not one (blank, over 128 bytes,
    /// control characters) refuses the heartbeat whole.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image_version: Option<String>,
}

/// A heartbeat's `source`, or None when it is a string this broker does
/// not know; anything but a string or null is refused.
fn lenient_source<'de, D>(d: D) -> Result<Option<HeartbeatSource>, D::Error>
where
    D: serde::Deserializer<'de>,
{
    use serde::de::value::{Error, StrDeserializer};
    let Some(name) = Option::<String>::deserialize(d)? else {
        return Ok(None);
    };
    Ok(HeartbeatSource::deserialize(StrDeserializer::<Error>::new(&name)).ok())
}

/// A session as the host sees it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct ReportedSession {
    pub user: String,
    pub state: SessionState,
}

/// The answer to a heartbeat: the host as the broker now sees it, and the
/// entries of its `sessions` list the broker did not take (rule S8); the
/// rest of the heartbeat was applied.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct HeartbeatOutput {
    #[serde(flatten)]
    pub host: SessionHostOutput,
    /// Entries refused (empty when none was, or no list was sent).
    #[serde(default)]
    pub refused_sessions: Vec<RefusedSession>,
    /// Messages for users of this host's sessions (`sendMessage`), each
    /// given to the host once; only this host's. Absent when none. Agents
    /// that predate it ignore it (unknown answer fields are ignored).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub messages: Vec<HostMessage>,
    /// Rule W5: sessions of this host the broker logged off whose users
    /// the host may still have logged on; the agent ends those logons.
    /// Repeated in every answer until the host's list leaves the user out
    /// (or a bound passes); only this host's. Absent when none.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub logoffs: Vec<LogoffOrder>,
}

/// Rule W5: the broker ended this session; its host's agent ends the
/// user's logon there. The session id names the order: an agent carries
/// each out once, however many answers repeat it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct LogoffOrder {
    pub session_id: String,
    pub user: String,
}

/// A message for the user of one session, as its host's agent receives it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct HostMessage {
    pub id: String,
    pub session_id: String,
    pub user: String,
    pub title: String,
    pub message: String,
}

/// Body of `POST …/userSessions/{id}/sendMessage`: a title (1..=256
/// characters, no control characters) and a message (1..=4096 characters,
/// no control characters but newlines).
#[derive(Clone, Debug, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SendMessageInput {
    pub title: String,
    pub message: String,
}

/// One entry of a heartbeat's list that the broker refused (rule S8). It
/// changed nothing and moved no user.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct RefusedSession {
    pub user: String,
    /// `sessionElsewhere` (the user has a session on another host of the
    /// pool), `notOwner` (a personal pool, and the user does not own this
    /// host), `hostFull` (the host is at the pool's `maxSessionLimit`) or
    /// `duplicate` (the user is listed twice).
    pub reason: String,
}

/// Body of `POST …/registrationToken`.
#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RegistrationTokenInput {
    /// Life of the token, 1..=2592000 seconds (default 86400).
    pub expires_in_seconds: Option<u64>,
    /// How many new session hosts the token may register, 1..=10000
    /// (default 1); re-registering an existing host does not count.
    pub max_hosts: Option<u32>,
}

/// A new registration token; shown once.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct RegistrationTokenOutput {
    /// Shown once: only its hash is kept.
    pub token: String,
    pub expiration_time: String,
    /// How many new session hosts the token may register.
    #[serde(default)]
    pub max_hosts: u32,
}

/// Body of `POST /api/v1/register`, from an agent.
#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RegisterInput {
    pub token: String,
    /// The pool the agent expects; refused if the token is for another.
    pub host_pool: Option<String>,
    pub name: String,
    pub address: String,
    pub capabilities: Option<Vec<String>>,
    pub policy: Option<HostPolicy>,
    /// The host's fully qualified DNS name (rule AD4), when the agent
    /// knows it; absent leaves a registered host's as it is.
    pub dns_name: Option<String>,
}

/// The answer to a registration.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct RegisterOutput {
    pub session_host: SessionHostOutput,
    /// Bearer token for this host's heartbeats; it allows nothing else.
    pub host_credential: String,
}

/// Body of `connect`.
#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ConnectInput {
    pub user: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub requires: Vec<String>,
    /// MultiplePersistent: which of the user's hosts.
    #[serde(default)]
    pub session_host: Option<String>,
    /// Hosts to pass over for a new session: a front door that could not
    /// reach them (rule R5). Never moves an existing session.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub exclude: Vec<String>,
    /// Rule T2: the caller's word for the user's groups, matched against
    /// the pool's `entitledGroups`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub groups: Vec<String>,
    /// Rule T3: a signed connection ticket (from a connection file's
    /// `loadbalanceinfo`, as an RDP client sent it). The broker verifies it
    /// and places the ticket's user, who must be `user`; the pool's
    /// entitlements were checked when it was issued.
    #[serde(default)]
    pub ticket: Option<String>,
    /// Rule AD4: the name the client asked to reach (the RD Gateway's
    /// channel target). A ticket bound to a host is honoured only when
    /// this names that host (its `dnsName`, in any case, or its
    /// `address`); absent, the ticket's host is the only place it opens.
    #[serde(default)]
    pub target: Option<String>,
}

/// The answer to `connect`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct ConnectOutput {
    pub session_id: String,
    pub session_host: String,
    pub address: String,
    /// True when the user was sent back to an existing session (rule S1).
    pub reconnect: bool,
    pub session_state: SessionState,
}

impl From<placement::Placement> for ConnectOutput {
    fn from(p: placement::Placement) -> ConnectOutput {
        ConnectOutput {
            session_id: p.session_id,
            session_host: p.host,
            address: p.address,
            reconnect: p.reconnect,
            session_state: p.state,
        }
    }
}

/// A session, as returned.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct SessionOutput {
    pub id: String,
    pub session_host: String,
    pub user_principal_name: String,
    /// For an ended session (`?includeEnded=true`), the state it was in
    /// when it ended.
    pub session_state: SessionState,
    pub create_time: String,
    /// Only on an ended session (listed with `?includeEnded=true`): when it
    /// ended (RFC 3339, UTC, milliseconds).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ended_at: Option<String>,
    /// Only on an ended session: why it ended. One of `logoff` (logged off
    /// through the API), `released` (a front door's connection closed
    /// before any logon), `pendingTimeout` (never reached its host within
    /// `pendingTimeoutSeconds`), `noLogonEvidence` (disconnected
    /// `pendingTimeoutSeconds` with no logon confirmed by its host),
    /// `notListed` (its host's agent no longer lists it: the user logged
    /// off there), `disconnectedTimeout` (`disconnectedTimeoutSeconds`),
    /// `lifetimeExceeded` (`maxSessionLifetimeSeconds`), `hostRemoved`
    /// (its host was removed with force), `scalingLogoff` (a scaling
    /// plan logged it off).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub end_reason: Option<String>,
}

impl From<&Session> for SessionOutput {
    fn from(s: &Session) -> SessionOutput {
        SessionOutput {
            id: s.id.clone(),
            session_host: s.host.clone(),
            user_principal_name: s.user.clone(),
            session_state: s.state,
            create_time: rfc3339(s.create_time_ms),
            ended_at: None,
            end_reason: None,
        }
    }
}

/// Body of `PATCH` on a session.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SessionPatch {
    pub session_state: SessionState,
}

/// Answer of `GET /api/v1/hostPools/{pool}/webUrl` (rule WEB3): the
/// address that opens the pool's desktop in a browser tab for one user.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct WebUrlOutput {
    /// `https://GATEWAY/web#ticket=…`: the RD Gateway's page, with a fresh
    /// connection ticket in the fragment (a browser never sends it to a
    /// server). It is a credential for the user until it expires.
    pub url: String,
    /// When the ticket expires (RFC 3339): open the page before then.
    pub expiration_time: String,
}

#[cfg(test)]
mod tests;

/// Body of `POST /api/v1/credentials` (rule T1).
#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CredentialInput {
    /// Its name, like a pool's (letters, digits, `.`, `_`, `-`).
    pub name: String,
    /// `admin`, `operator`, `reader`, `portal`, or `gateway` (a stand-alone
    /// RDP front door: places users and changes the sessions it relays).
    pub role: String,
    /// The pools it may act on; absent or empty: every pool.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub host_pools: Vec<String>,
    /// Its life in seconds; absent: it does not expire.
    pub expires_in_seconds: Option<u64>,
    /// Rule T4: requests a second it may make (bursts of twice as many),
    /// 1..=100000, whatever `serve --api-rate-limit` says; absent: the
    /// broker's limit.
    pub rate_limit_per_second: Option<u32>,
}

/// An API credential as listed (no secret), or just created (with its
/// token, shown that once).
#[derive(Clone, Debug, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct CredentialOutput {
    pub name: String,
    pub role: String,
    /// Empty: every pool.
    pub host_pools: Vec<String>,
    /// RFC 3339; null when it does not expire.
    pub expiration_time: Option<String>,
    /// Its own limit of requests a second; absent: the broker's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rate_limit_per_second: Option<u32>,
    /// Only in the answer to its creation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token: Option<String>,
}

/// Reads an RFC 3339 time (any offset) as milliseconds since the epoch.
pub fn parse_rfc3339(s: &str) -> Option<TimestampMs> {
    chrono::DateTime::parse_from_rfc3339(s)
        .ok()
        .map(|t| t.timestamp_millis())
}

/// A stand-alone RD Gateway's refused Windows sign-in (rule AD2), for the
/// broker's audit log (`POST /api/v1/auditLog/signInRefusals`): folded
/// there into one entry per gateway, source, user and reason a minute.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SignInRefusalInput {
    /// The client's IP address.
    pub source: String,
    /// The user the sign-in named, when it named one (a refused Kerberos
    /// ticket names none).
    #[serde(default)]
    pub user: Option<String>,
    /// Why, one of the gateway's kinds of refusal: `a ticket for another
    /// service`, `a malformed token`, `an NTLM sign-in refused`, `a
    /// Kerberos ticket refused`, `a password refused`, `a pool that takes only tickets`.
    pub reason: String,
}

/// One entry of the audit log (rule T5): who changed, or tried to change,
/// what, the resource as the API showed it before and after (never a
/// secret), and the HTTP status of the answer.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct AuditEntryOutput {
    /// Grows with every entry; `beforeId` continues a list below it.
    pub id: i64,
    /// RFC 3339, UTC, milliseconds.
    pub time: String,
    /// `admin`, `credential:NAME`, `host:POOL/HOST`,
    /// `registration-token:POOL`, or `broker` for what the broker did on
    /// its own (a session's timeout, a scaling plan's logoff).
    pub actor: String,
    /// `METHOD /api/v1/...`; `END /api/v1/hostPools/POOL/userSessions/ID`
    /// for the end of a session (see `endReason`).
    pub action: String,
    /// The resource acted on, e.g. `hostPools/p/sessionHosts/h1`.
    pub target: String,
    /// The host pool of the resource; null for credentials.
    pub host_pool: Option<String>,
    /// The resource before; null when it did not exist or is not shown.
    #[cfg_attr(feature = "openapi", schema(value_type = Option<Object>))]
    pub before: Option<serde_json::Value>,
    /// The resource after; null once removed, or when it is not shown.
    #[cfg_attr(feature = "openapi", schema(value_type = Option<Object>))]
    pub after: Option<serde_json::Value>,
    /// The HTTP status of the answer (refusals are recorded too).
    pub outcome: u16,
    /// The caller's address, when known.
    pub source: Option<String>,
    /// How many requests the entry stands for, when more than one: the
    /// refusals (an outcome of 400 or more) of one caller with the same
    /// action, target, source and outcome within one minute are one entry,
    /// whose `time` is the first one's. Absent for an entry of one request.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub count: Option<u64>,
    /// On the entry of a session's end: why it ended (see
    /// `SessionOutput.endReason`); `before` is the session as it was.
    /// Absent on every other entry.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub end_reason: Option<String>,
}

/// The broker's signing keys after a rotation (`POST
/// /api/v1/signingKeys/rotate`): never a secret, only what an operator
/// needs to know that the rotation took.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct SigningKeysOutput {
    /// When the key that signs from now on was made (RFC 3339).
    pub signing_key_created: String,
    /// How many keys verify: the new one, and those it replaced while
    /// tickets they signed may still be alive.
    pub verifying_keys: usize,
    /// How long a replaced key still verifies, in seconds.
    pub retired_keys_verify_seconds: u64,
}

/// Who the caller is (`GET /api/v1/whoami`), so that a client such as the
/// web console shows only what the caller may do.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct WhoAmIOutput {
    /// `admin`, `operator`, `reader`, `portal`, or `host` (a host
    /// credential).
    pub role: String,
    /// The credential's name; `admin` for the admin token, `POOL/HOST`
    /// for a host credential.
    pub name: String,
    /// The pools it is limited to; empty: every pool.
    pub host_pools: Vec<String>,
}

/// A user as the directory sees them (`GET /api/v1/users/{name}`, rule
/// AD1): the groups that decide their entitlements.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct UserOutput {
    /// The name asked about.
    pub name: String,
    /// Whether the directory has an entry for the name; a user it does not
    /// know belongs to no group.
    pub found: bool,
    /// The user's entry.
    pub distinguished_name: Option<String>,
    /// The user's groups, nested ones included (by `sAMAccountName`, else
    /// `cn`), sorted.
    pub groups: Vec<String>,
    /// How old the answer is, in seconds (0: read just now).
    pub cached_seconds: Option<u64>,
    /// How long an answer is used before the directory is read again.
    pub cache_seconds: u64,
}

/// A power or scaling action on a host (rule A10), as
/// `GET /api/v1/hostPools/{pool}/scalingActions` and the manual
/// `…/start` and `…/stop` answer it.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct ScalingActionOutput {
    /// Orders actions (newer ones are greater); `beforeId` continues a
    /// list below it.
    pub id: String,
    /// RFC 3339, UTC, milliseconds: when the action was decided.
    pub time: String,
    /// The scaling plan's phase; null for an operator's action.
    pub phase: Option<String>,
    pub action: placement::ScalingActionKind,
    pub session_host: String,
    pub reason: String,
    pub used_capacity_pct: Option<u32>,
    pub threshold_pct: Option<u32>,
    pub running_hosts: Option<u32>,
    pub minimum_hosts: Option<u32>,
    pub outcome: placement::ActionOutcome,
    /// What the power driver said (bounded), or why the action failed.
    pub message: String,
    /// Who asked, for an operator's action (`admin`, `credential:NAME`).
    pub actor: Option<String>,
    /// When the outcome was known.
    pub finished_time: Option<String>,
    /// How many times the power driver was tried.
    #[serde(default)]
    pub attempts: u32,
}
