//! The JSON shapes of the API (`shared/spec/api.md`), camelCase, with their
//! OpenAPI schemas. Inputs refuse unknown fields (a typo must not pass
//! silently), except heartbeats, which newer agents may extend.

use placement::{
    Host, HostMetrics, HostPolicy, HostPoolType, HostStatus, LoadBalancerType, LoadIndexSettings,
    LogonStormSettings, PersonalDesktopAssignmentType, Pool, PoolConfig, Session, SessionState,
    TimestampMs,
};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

pub fn rfc3339(ms: TimestampMs) -> String {
    chrono::DateTime::from_timestamp_millis(ms)
        .unwrap_or_default()
        .to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
}

/// `{"value": [...]}`, the shape of every list.
#[derive(Serialize, ToSchema)]
pub struct List<T> {
    pub value: Vec<T>,
}

/// Body of `PUT` and `PATCH` on a host pool. On `PUT` only `hostPoolType`
/// and `loadBalancerType` are required; on `PATCH` every field is optional.
#[derive(Deserialize, ToSchema, Default)]
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
    /// Accepted for symmetry with the output; must match the path.
    pub name: Option<String>,
}

#[derive(Deserialize, ToSchema, Default)]
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

#[derive(Deserialize, ToSchema, Default)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct LogonStormSettingsInput {
    pub load_index_threshold: Option<u32>,
    pub connecting_session_threshold: Option<u32>,
    pub min_hosts_in_queue: Option<u32>,
    /// Rule H7: index points each logon placed since a host's last
    /// heartbeat adds to its metric factors (0: off).
    pub logon_cost: Option<u32>,
}

macro_rules! merge {
    ($target:expr, $input:expr, [$($field:ident),*]) => {
        $( if let Some(v) = $input.$field { $target.$field = v; } )*
    };
}

impl HostPoolInput {
    /// Applies the fields given onto `base` (the defaults for a create or a
    /// replace, the current settings for a patch).
    pub fn apply_to(self, mut base: PoolConfig) -> Result<PoolConfig, crate::ApiError> {
        if let Some(n) = &self.name
            && n != &base.name
        {
            return Err(crate::ApiError::invalid(format!(
                "name: {n:?} does not match the host pool in the path ({:?})",
                base.name
            )));
        }
        let type_changed = self
            .host_pool_type
            .is_some_and(|t| t != base.host_pool_type);
        merge!(
            base,
            self,
            [
                host_pool_type,
                load_balancer_type,
                max_session_limit,
                breadth_first_randomized,
                pending_timeout_seconds,
                heartbeat_timeout_seconds,
                standard_capabilities,
                description,
                friendly_name
            ]
        );
        if let Some(t) = self.personal_desktop_assignment_type {
            base.personal_desktop_assignment_type = Some(t);
        } else if type_changed {
            base.personal_desktop_assignment_type = match base.host_pool_type {
                HostPoolType::Pooled => None,
                HostPoolType::Personal => Some(PersonalDesktopAssignmentType::Automatic),
            };
        }
        if let Some(li) = self.load_index_settings {
            let t: &mut LoadIndexSettings = &mut base.load_index_settings;
            merge!(
                t,
                li,
                [
                    include_session_count,
                    cpu_threshold,
                    memory_threshold,
                    disk_queue_length_threshold,
                    disk_read_latency_threshold,
                    disk_write_latency_threshold,
                    use_custom_script,
                    load_index_threshold,
                    connecting_session_threshold
                ]
            );
        }
        if let Some(ls) = self.logon_storm_settings {
            let t: &mut LogonStormSettings = &mut base.logon_storm_settings;
            merge!(
                t,
                ls,
                [
                    load_index_threshold,
                    connecting_session_threshold,
                    min_hosts_in_queue,
                    logon_cost
                ]
            );
        }
        Ok(base)
    }
}

/// A host pool, as returned.
#[derive(Serialize, ToSchema)]
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
}

impl HostPoolOutput {
    pub fn of(pool: &Pool, warnings: Vec<String>) -> HostPoolOutput {
        HostPoolOutput {
            config: pool.config().clone(),
            warnings,
            session_host_count: pool.host_count(),
            session_count: pool.session_count(),
        }
    }
}

/// Body of `PUT` on a session host.
#[derive(Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SessionHostInput {
    pub address: String,
    pub allow_new_session: Option<bool>,
    pub capabilities: Option<Vec<String>>,
    pub policy: Option<HostPolicy>,
    /// Owner of a host of a Personal pool.
    pub assigned_user: Option<String>,
    /// Accepted for symmetry with the output; must match the path.
    pub name: Option<String>,
}

/// Body of `PATCH` on a session host; `assignedUser: null` unassigns.
#[derive(Deserialize, ToSchema, Default)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SessionHostPatch {
    pub address: Option<String>,
    pub allow_new_session: Option<bool>,
    pub capabilities: Option<Vec<String>>,
    pub policy: Option<HostPolicy>,
    #[serde(default, with = "double_option")]
    #[schema(value_type = Option<String>)]
    pub assigned_user: Option<Option<String>>,
}

/// Distinguishes a field that is absent (`None`) from one set to `null`
/// (`Some(None)`).
mod double_option {
    use serde::{Deserialize, Deserializer};
    pub fn deserialize<'de, D, T>(d: D) -> Result<Option<Option<T>>, D::Error>
    where
        D: Deserializer<'de>,
        T: Deserialize<'de>,
    {
        Option::<T>::deserialize(d).map(Some)
    }
}

/// A session host, as returned.
#[derive(Serialize, ToSchema)]
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
        }
    }
}

/// Body of a heartbeat. Unknown fields are ignored so that newer agents
/// keep working with this broker.
#[derive(Deserialize, ToSchema, Default)]
#[serde(rename_all = "camelCase")]
pub struct HeartbeatInput {
    #[serde(flatten)]
    pub metrics: HostMetrics,
    /// The host's full list of user sessions, reconciled with the broker's.
    /// Absent: the host does not know (its sessions are left alone).
    pub sessions: Option<Vec<ReportedSession>>,
    /// The host's own thresholds (H6), from its agent's configuration.
    pub policy: Option<HostPolicy>,
}

/// A session as the host sees it.
#[derive(Deserialize, ToSchema, Clone)]
#[serde(rename_all = "camelCase")]
pub struct ReportedSession {
    pub user: String,
    pub state: SessionState,
}

/// Body of `POST …/registrationToken`.
#[derive(Deserialize, ToSchema, Default)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RegistrationTokenInput {
    /// Life of the token, 1..=2592000 seconds (default 86400).
    pub expires_in_seconds: Option<u64>,
}

#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct RegistrationTokenOutput {
    /// Shown once: only its hash is kept.
    pub token: String,
    pub expiration_time: String,
}

/// Body of `POST /api/v1/register`, from an agent.
#[derive(Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RegisterInput {
    pub token: String,
    /// The pool the agent expects; refused if the token is for another.
    pub host_pool: Option<String>,
    pub name: String,
    pub address: String,
    pub capabilities: Option<Vec<String>>,
    pub policy: Option<HostPolicy>,
}

#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct RegisterOutput {
    pub session_host: SessionHostOutput,
    /// Bearer token for this host's heartbeats; it allows nothing else.
    pub host_credential: String,
}

/// Body of `connect`.
#[derive(Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ConnectInput {
    pub user: String,
    #[serde(default)]
    pub requires: Vec<String>,
    pub session_host: Option<String>,
    /// Hosts to pass over for a new session: a front door that could not
    /// reach them (rule R5). Never moves an existing session.
    #[serde(default)]
    pub exclude: Vec<String>,
}

/// The answer to `connect`.
#[derive(Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ConnectOutput {
    pub session_id: String,
    pub session_host: String,
    pub address: String,
    /// True when the user was sent back to an existing session (rule S1).
    pub reconnect: bool,
    pub session_state: SessionState,
}

/// A session, as returned.
#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct SessionOutput {
    pub id: String,
    pub session_host: String,
    pub user_principal_name: String,
    pub session_state: SessionState,
    pub create_time: String,
}

impl From<&Session> for SessionOutput {
    fn from(s: &Session) -> SessionOutput {
        SessionOutput {
            id: s.id.clone(),
            session_host: s.host.clone(),
            user_principal_name: s.user.clone(),
            session_state: s.state,
            create_time: rfc3339(s.create_time_ms),
        }
    }
}

/// Body of `PATCH` on a session.
#[derive(Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SessionPatch {
    pub session_state: SessionState,
}

/// Query of `DELETE` on pools and hosts.
#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct ForceQuery {
    #[serde(default)]
    pub force: bool,
}

/// Query of the session list.
#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SessionQuery {
    pub user: Option<String>,
    pub session_host: Option<String>,
    /// Paging (`api/paging.rs`): at most this many sessions.
    pub page_size: Option<u32>,
    /// Paging: skip this many sessions first.
    pub initial_skip: Option<usize>,
}

/// The paging part of the session list's query. (Not a flattened
/// `PageQuery` field: serde cannot refuse unknown fields through
/// `flatten`, and a flattened query string loses its numbers.)
impl From<&SessionQuery> for super::paging::PageQuery {
    fn from(q: &SessionQuery) -> Self {
        super::paging::PageQuery {
            page_size: q.page_size,
            initial_skip: q.initial_skip,
        }
    }
}
