//! What the broker's HTTP layer reads beyond the contract's JSON shapes
//! (those are the `api` crate's): the query strings, and how a pool's
//! input is laid over its current settings.

use api::types::HostPoolInput;
use placement::{
    HostPoolType, LoadIndexSettings, LogonStormSettings, PersonalDesktopAssignmentType, PoolConfig,
};
use serde::Deserialize;

macro_rules! merge {
    ($target:expr, $input:expr, [$($field:ident),*]) => {
        $( if let Some(v) = $input.$field { $target.$field = v; } )*
    };
}

/// Applies the fields of a pool's input onto `base` (the defaults for a
/// create or a replace, the current settings for a patch).
pub fn apply_pool_input(
    input: HostPoolInput,
    mut base: PoolConfig,
) -> Result<PoolConfig, placement::Error> {
    if let Some(n) = &input.name
        && n != &base.name
    {
        return Err(placement::Error::InvalidParameter(format!(
            "name: {n:?} does not match the host pool in the path ({:?})",
            base.name
        )));
    }
    let type_changed = input
        .host_pool_type
        .is_some_and(|t| t != base.host_pool_type);
    merge!(
        base,
        input,
        [
            host_pool_type,
            load_balancer_type,
            max_session_limit,
            breadth_first_randomized,
            pending_timeout_seconds,
            heartbeat_timeout_seconds,
            standard_capabilities,
            description,
            friendly_name,
            disconnected_timeout_seconds,
            max_session_lifetime_seconds,
            allow_front_door,
            entitled_users,
            entitled_groups,
            require_connection_ticket,
            ticket_lifetime_seconds,
            start_vm_on_connect,
            connection_target,
            kdc_proxy,
            gateway_sign_in,
            custom_rdp_properties,
            preferred_app_group_type,
            application_mode
        ]
    );
    if let Some(ps) = input.power_settings {
        let t = &mut base.power_settings;
        merge!(t, ps, [driver, timeout_seconds, broadcast_address]);
        for (target, given) in [
            (&mut t.power_on_command, ps.power_on_command),
            (&mut t.power_off_command, ps.power_off_command),
            (&mut t.power_state_command, ps.power_state_command),
        ] {
            if let Some(v) = given {
                *target = v;
            }
        }
    }
    if let Some(ranges) = input.allowed_address_ranges {
        base.allowed_address_ranges = crate::enroll::parse_address_ranges(&ranges)?
            .iter()
            .map(ToString::to_string)
            .collect();
    }
    if let Some(t) = input.personal_desktop_assignment_type {
        base.personal_desktop_assignment_type = Some(t);
    } else if type_changed {
        base.personal_desktop_assignment_type = match base.host_pool_type {
            HostPoolType::Pooled => None,
            HostPoolType::Personal => Some(PersonalDesktopAssignmentType::Automatic),
        };
    }
    if let Some(li) = input.load_index_settings {
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
    if let Some(ls) = input.logon_storm_settings {
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
    crate::enroll::check_wake_on_lan_target(&base)?;
    Ok(base)
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
    /// Also list the pool's recently ended sessions, from the audit log,
    /// after the live ones.
    #[serde(default)]
    pub include_ended: bool,
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
