//! The data the engine reasons about: pool settings, session hosts, sessions.
//!
//! These types are plain data with serde derives so that the store can keep
//! them and the API can show them; they carry no behaviour beyond validation
//! of settings (rules P1–P7), which must be the same wherever a pool is
//! created or changed.

mod application;
mod host;
mod rdp_properties;

use serde::{Deserialize, Serialize};

use crate::Error;
pub use application::*;
pub use host::*;
pub use rdp_properties::{
    MAX_RDP_PROPERTIES, MAX_RDP_PROPERTIES_BYTES, MAX_RDP_STRING_VALUE_CHARS, RdpPropertiesError,
    RdpProperty, format_rdp_properties, parse_rdp_properties,
};

/// The highest `maxSessionLimit`, and its default (rule P4). A pool with this
/// limit has, in practice, no limit.
pub const MAX_SESSION_LIMIT: u32 = 999_999;

/// Milliseconds since the Unix epoch. The engine never reads a clock: every
/// operation that depends on time is given `now` by its caller.
pub type TimestampMs = i64;

/// Rule P1.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub enum HostPoolType {
    Pooled,
    Personal,
}

/// Rule P2. The first three apply to pooled pools, the last two to personal ones.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub enum LoadBalancerType {
    BreadthFirst,
    DepthFirst,
    LoadIndex,
    Persistent,
    MultiplePersistent,
}

/// Rule P7.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub enum PersonalDesktopAssignmentType {
    Automatic,
    Direct,
}

/// The states of a live session. Logoff ends a session: an ended session is
/// removed, so there is no `LoggedOff` state.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub enum SessionState {
    Pending,
    Active,
    Disconnected,
}

/// Health of a session host (rule S7).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub enum HostStatus {
    Available,
    Unavailable,
    Shutdown,
}

/// A session host's power state (rule A9). A new host is `Running`; the
/// broker's power drivers and the scaling plan move it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub enum PowerState {
    #[default]
    Running,
    Starting,
    Stopping,
    Stopped,
    Unknown,
}

/// Who drained a session host (rule A6): an operator's drain is never
/// undone by a scaling plan; the plan undoes only its own.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase")]
pub enum DrainedBy {
    Operator,
    ScalingPlan,
}

/// What a scaling plan, or an operator, did to a host (rule A10).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub enum ScalingActionKind {
    Start,
    Stop,
    Drain,
    Undrain,
    Notify,
    Logoff,
}

/// How an action ended (rule A10): `Pending` while its driver works.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub enum ActionOutcome {
    Succeeded,
    Failed,
    Pending,
}

/// Factors of the Server Load Index and host-side rejection (rules H2, H3, H6).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct LoadIndexSettings {
    pub include_session_count: bool,
    pub cpu_threshold: u32,
    pub memory_threshold: u32,
    pub disk_queue_length_threshold: u32,
    pub disk_read_latency_threshold: u32,
    pub disk_write_latency_threshold: u32,
    pub use_custom_script: bool,
    pub load_index_threshold: u32,
    pub connecting_session_threshold: u32,
}

impl Default for LoadIndexSettings {
    fn default() -> Self {
        LoadIndexSettings {
            include_session_count: true,
            cpu_threshold: 0,
            memory_threshold: 0,
            disk_queue_length_threshold: 0,
            disk_read_latency_threshold: 0,
            disk_write_latency_threshold: 0,
            use_custom_script: false,
            load_index_threshold: 0,
            connecting_session_threshold: 0,
        }
    }
}

/// Logon-storm handling of the `LoadIndex` algorithm (rule H5).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct LogonStormSettings {
    pub load_index_threshold: u32,
    pub connecting_session_threshold: u32,
    pub min_hosts_in_queue: u32,
    /// Stale-index correction (rule H7, beyond the sources): index points
    /// added to a host's metric factors for each logon its last heartbeat
    /// cannot show in full — the larger of its connecting sessions (logons
    /// in progress, which an interval's average shows late and in part) and
    /// the logons placed on it since that heartbeat. 0 (the default) turns
    /// it off: the index is the sources' (H2, H3). Absent in settings
    /// stored before it existed, hence the serde default.
    #[serde(default)]
    pub logon_cost: u32,
}

impl Default for LogonStormSettings {
    fn default() -> Self {
        LogonStormSettings {
            load_index_threshold: 20,
            connecting_session_threshold: 20,
            min_hosts_in_queue: 4,
            logon_cost: 0,
        }
    }
}

/// Everything an administrator sets on a host pool.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct PoolConfig {
    pub name: String,
    pub host_pool_type: HostPoolType,
    pub load_balancer_type: LoadBalancerType,
    pub max_session_limit: u32,
    pub breadth_first_randomized: bool,
    pub personal_desktop_assignment_type: Option<PersonalDesktopAssignmentType>,
    pub pending_timeout_seconds: u32,
    pub heartbeat_timeout_seconds: u32,
    pub standard_capabilities: Vec<String>,
    pub load_index_settings: LoadIndexSettings,
    pub logon_storm_settings: LogonStormSettings,
    pub description: String,
    pub friendly_name: String,
    /// CIDR ranges a host's address must lie in; empty: any routable
    /// address. The broker checks addresses against them when a host is
    /// registered or its address changes (it parses them; the engine never
    /// looks at addresses). Absent in settings stored before it existed,
    /// hence the serde default.
    #[serde(default)]
    pub allowed_address_ranges: Vec<String>,
    /// Rule S9: a Disconnected session ends this many seconds after it was
    /// disconnected (AVD's and RDS's "end a disconnected session"). 0 =
    /// never; otherwise 60..=31536000; a new pool gets
    /// [`DEFAULT_DISCONNECTED_TIMEOUT_SECONDS`]. Absent in settings stored
    /// before it existed, which keep "never" (an upgrade ends nobody's
    /// session), hence the serde default.
    #[serde(default)]
    pub disconnected_timeout_seconds: u32,
    /// Rule S9: any session ends this many seconds after it was placed
    /// (RDS's "active session limit", counted from the logon). 0 (the
    /// default) = never; otherwise 60..=31536000.
    #[serde(default)]
    pub max_session_lifetime_seconds: u32,
    /// Rule R3 (the contract's `allowFrontDoor`): whether a client of the
    /// RDP front door may name this pool with a `tsv://` routing token. True
    /// by default, as the contract has it; a pool the front door must not
    /// reach says false. The pool an operator names with
    /// `--rdp-default-pool` is reached without a token either way, since
    /// naming it there is that operator's choice.
    #[serde(default = "allow_front_door_default")]
    pub allow_front_door: bool,
    /// Rule T2: users who may get a new session here (matched without
    /// regard to ASCII case). With `entitled_groups`, both empty (the
    /// default) means everyone; otherwise only a listed user, or a user the
    /// caller says is in a listed group. At most [`MAX_ENTITLEMENTS`].
    #[serde(default)]
    pub entitled_users: Vec<String>,
    /// Rule T2: groups whose members may get a new session here (matched
    /// without regard to ASCII case, as directory group names are).
    #[serde(default)]
    pub entitled_groups: Vec<String>,
    /// Rule T3: whether the RDP front door places users here only on a
    /// signed connection ticket, refusing connections that carry just an
    /// `mstshash` cookie or no user. False by default, as the contract has it.
    #[serde(default)]
    pub require_connection_ticket: bool,
    /// Rule T3: how long a ticket issued for this pool is honoured, in
    /// seconds: [`MIN_TICKET_LIFETIME_SECONDS`]..=[`MAX_TICKET_LIFETIME_SECONDS`],
    /// 300 by default.
    #[serde(default = "ticket_lifetime_default")]
    pub ticket_lifetime_seconds: u32,
    /// Rule A8: a connect that finds no host may start a stopped one.
    /// Stored and shown; false by default, as the contract has it.
    #[serde(default)]
    pub start_vm_on_connect: bool,
    /// Rule A9: how the broker powers this pool's hosts on and off.
    #[serde(default)]
    pub power_settings: PowerSettings,
    /// Rule AD4: what a connection file or browser address of this pool
    /// names: the pool (`Pool`, the default: the doors place the user when
    /// they connect), or the host the user is placed on when the file is
    /// fetched (`Host`). Absent in settings stored before it existed, hence
    /// the serde default.
    #[serde(default)]
    pub connection_target: ConnectionTarget,
    /// Rule AD3: whether the pool's connection files through the RD
    /// Gateway name the gateway as the client's KDC proxy
    /// (`kdcproxyname`), so that clients outside the domain's network get
    /// Kerberos tickets through it. False by default (the gateway must
    /// then serve the domain's realm, `--kdc-proxy-realm`).
    #[serde(default)]
    pub kdc_proxy: bool,
    /// Rule AD2: how the RD Gateway may sign a client in for this pool:
    /// only with a connection ticket (the default), or also with the
    /// client's Windows sign-in (Kerberos against the gateway's keytab).
    #[serde(default)]
    pub gateway_sign_in: GatewaySignIn,
    /// Rule F3 (AVD's `customRdpProperty`): RDP properties written into
    /// every `.rdp` file of the pool, `name:type:value` separated by `;`,
    /// from the list of properties clients honour
    /// ([`parse_rdp_properties`]); each replaces the broker's own line of
    /// the same name. Empty (the default): none. Kept as given; absent in
    /// settings stored before it existed, hence the serde default.
    #[serde(default)]
    pub custom_rdp_properties: String,
    /// Rule F1 (AVD's `preferredAppGroupType`): which a user given both
    /// this pool's desktop and some of its applications sees. `Desktop`
    /// by default.
    #[serde(default)]
    pub preferred_app_group_type: PreferredAppGroupType,
    /// Rule F2: how the pool's hosts run a published application: as a
    /// RemoteApp (the default, Windows hosts) or as the session's only
    /// program (`AlternateShell`, hosts without RemoteApp such as xrdp).
    #[serde(default)]
    pub application_mode: ApplicationMode,
}

/// Rule AD4: what a pool's connection files and browser addresses name.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub enum ConnectionTarget {
    /// The pool: a file names the door, and the door places the user when
    /// they connect.
    #[default]
    Pool,
    /// The host: fetching a file places the user at once (a Pending
    /// session, or their existing one), the file names that host's DNS
    /// name (its address when it has none), and its ticket opens that
    /// host only.
    Host,
}

/// Rule AD2: what signs a client of the RD Gateway in for a pool.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub enum GatewaySignIn {
    /// Only a signed connection ticket (the `.rdp` file's access token).
    #[default]
    Ticket,
    /// A ticket, or the client's Windows sign-in (HTTP `Negotiate`): the
    /// signed-in user is placed, the pool's entitlements deciding with the
    /// directory's groups (AD1).
    TicketOrWindows,
}

/// Rule A9: how a pool's hosts are powered on and off.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase")]
pub enum PowerDriver {
    /// The broker cannot power hosts on or off (the default).
    #[default]
    None,
    /// `powerOnCommand` / `powerOffCommand` through `sh -c`.
    Command,
    /// A magic packet to the host's `macAddress` starts it; stopping needs
    /// `powerOffCommand`.
    WakeOnLan,
}

/// The longest power command, in bytes: a command line, not a script
/// (a script belongs in a file the command names).
pub const MAX_POWER_COMMAND_BYTES: usize = 4096;
/// The longest a power command may run before it is killed, in seconds.
pub const MAX_POWER_TIMEOUT_SECONDS: u32 = 3600;
/// The port a Wake-on-LAN packet goes to when `broadcastAddress` names none.
pub const WAKE_ON_LAN_PORT: u16 = 9;

/// A pool's `powerSettings` (rule A9). Only an administrator of every pool
/// sets the commands: the broker runs them as itself (docs/security.md).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct PowerSettings {
    pub driver: PowerDriver,
    /// Run through `sh -c` to start a host (driver `command`). The host's
    /// values reach it only through `DESKBROKER_*` environment variables,
    /// never inside the command's text.
    #[serde(default)]
    pub power_on_command: Option<String>,
    /// Run to stop a host (drivers `command` and `wakeOnLan`).
    #[serde(default)]
    pub power_off_command: Option<String>,
    /// Optional: prints `Running` or `Stopped` (exit 0) for a host whose
    /// power state is in doubt (an action a crash interrupted).
    #[serde(default)]
    pub power_state_command: Option<String>,
    /// 1..=[`MAX_POWER_TIMEOUT_SECONDS`], 120 by default: a command still
    /// running then is killed and the attempt has failed.
    #[serde(default = "power_timeout_default")]
    pub timeout_seconds: u32,
    /// Where Wake-on-LAN packets go: an IPv4 address (port 9) or
    /// `ADDRESS:PORT`; `255.255.255.255` by default.
    #[serde(default = "broadcast_default")]
    pub broadcast_address: String,
}

fn power_timeout_default() -> u32 {
    120
}

fn broadcast_default() -> String {
    "255.255.255.255".to_string()
}

impl Default for PowerSettings {
    fn default() -> Self {
        PowerSettings {
            driver: PowerDriver::None,
            power_on_command: None,
            power_off_command: None,
            power_state_command: None,
            timeout_seconds: power_timeout_default(),
            broadcast_address: broadcast_default(),
        }
    }
}

impl PowerSettings {
    /// Whether any command is set: setting one needs an administrator of
    /// every pool.
    pub fn has_commands(&self) -> bool {
        self.power_on_command.is_some()
            || self.power_off_command.is_some()
            || self.power_state_command.is_some()
    }

    /// Where a Wake-on-LAN packet goes.
    pub fn broadcast_socket(&self) -> Option<std::net::SocketAddrV4> {
        let a = &self.broadcast_address;
        a.parse::<std::net::SocketAddrV4>().ok().or_else(|| {
            a.parse::<std::net::Ipv4Addr>()
                .ok()
                .map(|ip| std::net::SocketAddrV4::new(ip, WAKE_ON_LAN_PORT))
        })
    }

    pub fn validate(&self) -> Result<(), Error> {
        for (field, cmd) in [
            ("powerSettings.powerOnCommand", &self.power_on_command),
            ("powerSettings.powerOffCommand", &self.power_off_command),
            ("powerSettings.powerStateCommand", &self.power_state_command),
        ] {
            let Some(cmd) = cmd else { continue };
            if cmd.trim().is_empty() || cmd.len() > MAX_POWER_COMMAND_BYTES {
                return Err(Error::InvalidParameter(format!(
                    "{field}: give 1 to {MAX_POWER_COMMAND_BYTES} bytes, or null"
                )));
            }
            if cmd
                .chars()
                .any(|c| c.is_control() && c != '\n' && c != '\t')
            {
                return Err(Error::InvalidParameter(format!(
                    "{field}: control characters other than newline and tab are not allowed"
                )));
            }
        }
        check_range(
            "powerSettings.timeoutSeconds",
            self.timeout_seconds,
            1,
            MAX_POWER_TIMEOUT_SECONDS,
        )?;
        let Some(socket) = self.broadcast_socket().filter(|s| s.port() != 0) else {
            return Err(Error::InvalidParameter(format!(
                "powerSettings.broadcastAddress: {:?} is not an IPv4 address or ADDRESS:PORT",
                self.broadcast_address
            )));
        };
        // Wake-on-LAN wakes machines of the farm's own networks: a public
        // address would make the broker send packets to the internet (or
        // at someone) on an administrator's say.
        let ip = *socket.ip();
        let local = ip.is_private()
            || ip.is_loopback()
            || ip.is_link_local()
            || ip.is_broadcast()
            || (ip.octets()[0] == 100 && (ip.octets()[1] & 0xc0) == 64); // 100.64.0.0/10
        if !local {
            return Err(Error::InvalidParameter(format!(
                "powerSettings.broadcastAddress: {ip} is not on a private network; give \
                 255.255.255.255, a private subnet's broadcast address (10.0.1.255) or a \
                 private host address"
            )));
        }
        match self.driver {
            PowerDriver::Command if self.power_on_command.is_none() => {
                Err(Error::InvalidParameter(
                    "powerSettings.powerOnCommand: the command driver needs one".into(),
                ))
            }
            PowerDriver::WakeOnLan if self.power_on_command.is_some() => {
                Err(Error::InvalidParameter(
                    "powerSettings.powerOnCommand: the wakeOnLan driver starts hosts with a \
                     magic packet; remove the command, or use the command driver"
                        .into(),
                ))
            }
            _ => Ok(()),
        }
    }
}

/// The shortest ticket lifetime a pool may set (rule T3): time enough to
/// download a file and open it.
pub const MIN_TICKET_LIFETIME_SECONDS: u32 = 30;
/// The longest (one day): a ticket is a bearer secret in a file, so it
/// should not outlive the working day it was fetched for.
pub const MAX_TICKET_LIFETIME_SECONDS: u32 = 86_400;

/// `ticketLifetimeSeconds` of settings stored before it existed, and of
/// new pools.
fn ticket_lifetime_default() -> u32 {
    300
}

/// The most entries each of `entitledUsers` and `entitledGroups` holds, and
/// the most groups a connect may name: each check is a scan under the
/// pool's lock.
pub const MAX_ENTITLEMENTS: usize = 10_000;

/// A group name (T2): 1 to 256 characters, no control characters (directory
/// group names may hold spaces, e.g. `Domain Users`).
pub fn validate_group(field: &str, group: &str) -> Result<(), Error> {
    if group.is_empty() || group.len() > 256 || group.chars().any(char::is_control) {
        return Err(Error::InvalidParameter(format!(
            "{field}: {group:?} is not a valid group name; use 1 to 256 characters without \
             control characters"
        )));
    }
    Ok(())
}

/// `allowFrontDoor` of settings stored before it existed, and of new pools.
fn allow_front_door_default() -> bool {
    true
}

/// The smallest non-zero value of S9's timeouts, in seconds.
pub const MIN_SESSION_TIMEOUT_SECONDS: u32 = 60;
/// Rule S9: a new pool's `disconnectedTimeoutSeconds`, 8 hours. The
/// vendors' own default is "never" (RDS, AVD, Horizon), which lets a
/// forgotten session hold its seat for ever; their guidance and Windows
/// 365's capacity-bound shared pools end disconnected sessions (30 minutes
/// there). A working day is what users expect: a session left at any hour
/// is there when its user comes back the same day, and one forgotten at
/// the end of the day is gone before the next morning's logons need its
/// seat.
pub const DEFAULT_DISCONNECTED_TIMEOUT_SECONDS: u32 = 8 * 3600;
/// The largest value of S9's timeouts, in seconds (365 days).
pub const MAX_SESSION_TIMEOUT_SECONDS: u32 = 31_536_000;

impl PoolConfig {
    /// Rule F3: the pool's RDP properties, checked. A configuration that
    /// passed [`PoolConfig::validate`] always parses; one that does not
    /// (none is ever stored) has none.
    pub fn rdp_properties(&self) -> Vec<RdpProperty> {
        parse_rdp_properties(&self.custom_rdp_properties).unwrap_or_default()
    }

    /// A pool with every default of the contract; personal pools get the
    /// `Automatic` assignment type (rule P7).
    pub fn new(name: &str, host_pool_type: HostPoolType, lb: LoadBalancerType) -> PoolConfig {
        PoolConfig {
            name: name.to_string(),
            host_pool_type,
            load_balancer_type: lb,
            max_session_limit: MAX_SESSION_LIMIT,
            breadth_first_randomized: true,
            personal_desktop_assignment_type: match host_pool_type {
                HostPoolType::Pooled => None,
                HostPoolType::Personal => Some(PersonalDesktopAssignmentType::Automatic),
            },
            pending_timeout_seconds: 120,
            heartbeat_timeout_seconds: 90,
            standard_capabilities: vec!["rdp".to_string()],
            load_index_settings: LoadIndexSettings::default(),
            logon_storm_settings: LogonStormSettings::default(),
            description: String::new(),
            friendly_name: String::new(),
            allowed_address_ranges: Vec::new(),
            disconnected_timeout_seconds: DEFAULT_DISCONNECTED_TIMEOUT_SECONDS,
            max_session_lifetime_seconds: 0,
            allow_front_door: true,
            entitled_users: Vec::new(),
            entitled_groups: Vec::new(),
            require_connection_ticket: false,
            ticket_lifetime_seconds: ticket_lifetime_default(),
            start_vm_on_connect: false,
            power_settings: PowerSettings::default(),
            connection_target: ConnectionTarget::Pool,
            kdc_proxy: false,
            gateway_sign_in: GatewaySignIn::Ticket,
            custom_rdp_properties: String::new(),
            preferred_app_group_type: PreferredAppGroupType::Desktop,
            application_mode: ApplicationMode::RemoteApp,
        }
    }

    /// Checks every setting at once and answers the warnings a valid
    /// configuration still deserves (rule P5). The first problem found is
    /// the error, naming its field.
    pub fn validate(&self) -> Result<Vec<String>, Error> {
        validate_name("name", &self.name)?;
        use HostPoolType::*;
        use LoadBalancerType::*;
        match (self.host_pool_type, self.load_balancer_type) {
            (Pooled, BreadthFirst | DepthFirst | LoadIndex) => {}
            (Personal, Persistent | MultiplePersistent) => {}
            (t, lb) => {
                return Err(Error::InvalidParameter(format!(
                    "loadBalancerType: {lb:?} cannot be used with hostPoolType {t:?}; \
                     Pooled pools take BreadthFirst, DepthFirst or LoadIndex, \
                     Personal pools take Persistent or MultiplePersistent"
                )));
            }
        }
        match (self.host_pool_type, self.personal_desktop_assignment_type) {
            (Pooled, Some(_)) => {
                return Err(Error::InvalidParameter(
                    "personalDesktopAssignmentType: only Personal host pools have one".into(),
                ));
            }
            (Personal, None) => {
                return Err(Error::InvalidParameter(
                    "personalDesktopAssignmentType: a Personal host pool needs Automatic or Direct"
                        .into(),
                ));
            }
            _ => {}
        }
        check_range(
            "maxSessionLimit",
            self.max_session_limit,
            0,
            MAX_SESSION_LIMIT,
        )?;
        check_range(
            "pendingTimeoutSeconds",
            self.pending_timeout_seconds,
            1,
            86_400,
        )?;
        check_range(
            "heartbeatTimeoutSeconds",
            self.heartbeat_timeout_seconds,
            5,
            86_400,
        )?;
        validate_capabilities("standardCapabilities", &self.standard_capabilities)?;
        for (field, len) in [
            ("entitledUsers", self.entitled_users.len()),
            ("entitledGroups", self.entitled_groups.len()),
        ] {
            if len > MAX_ENTITLEMENTS {
                return Err(Error::InvalidParameter(format!(
                    "{field}: {len} entries; at most {MAX_ENTITLEMENTS}"
                )));
            }
        }
        for u in &self.entitled_users {
            validate_user("entitledUsers", u)?;
        }
        for g in &self.entitled_groups {
            validate_group("entitledGroups", g)?;
        }
        let li = &self.load_index_settings;
        check_range("loadIndexSettings.cpuThreshold", li.cpu_threshold, 0, 100)?;
        check_range(
            "loadIndexSettings.memoryThreshold",
            li.memory_threshold,
            0,
            100,
        )?;
        check_range(
            "loadIndexSettings.loadIndexThreshold",
            li.load_index_threshold,
            0,
            100,
        )?;
        check_range(
            "loadIndexSettings.connectingSessionThreshold",
            li.connecting_session_threshold,
            0,
            150,
        )?;
        let ls = &self.logon_storm_settings;
        check_range(
            "logonStormSettings.loadIndexThreshold",
            ls.load_index_threshold,
            0,
            100,
        )?;
        check_range(
            "logonStormSettings.connectingSessionThreshold",
            ls.connecting_session_threshold,
            0,
            150,
        )?;
        check_range(
            "logonStormSettings.minHostsInQueue",
            ls.min_hosts_in_queue,
            1,
            10_000,
        )?;
        check_range("logonStormSettings.logonCost", ls.logon_cost, 0, 100)?;
        check_session_timeout(
            "disconnectedTimeoutSeconds",
            self.disconnected_timeout_seconds,
        )?;
        check_session_timeout(
            "maxSessionLifetimeSeconds",
            self.max_session_lifetime_seconds,
        )?;
        check_range(
            "ticketLifetimeSeconds",
            self.ticket_lifetime_seconds,
            MIN_TICKET_LIFETIME_SECONDS,
            MAX_TICKET_LIFETIME_SECONDS,
        )?;
        self.power_settings.validate()?;
        check_text("description", &self.description, 1024)?;
        check_text("friendlyName", &self.friendly_name, 256)?;
        parse_rdp_properties(&self.custom_rdp_properties)
            .map_err(|e| Error::InvalidParameter(format!("customRdpProperties: {e}")))?;

        let mut warnings = Vec::new();
        if self.require_connection_ticket && !self.allow_front_door {
            warnings.push(
                "requireConnectionTicket has no effect while allowFrontDoor is false: the \
                 front door places nobody in this pool"
                    .to_string(),
            );
        }
        if self.load_balancer_type == DepthFirst && self.max_session_limit == MAX_SESSION_LIMIT {
            warnings.push(
                "DepthFirst with the default maxSessionLimit (999999) fills the first host \
                 without bound: set a real maxSessionLimit"
                    .to_string(),
            );
        }
        Ok(warnings)
    }
}

pub(crate) fn check_range(field: &str, value: u32, min: u32, max: u32) -> Result<(), Error> {
    if value < min || value > max {
        return Err(Error::InvalidParameter(format!(
            "{field}: {value} is out of range; it must be from {min} to {max}"
        )));
    }
    Ok(())
}

/// Rule S9's timeouts: 0 (never) or 60..=31536000 seconds.
fn check_session_timeout(field: &str, value: u32) -> Result<(), Error> {
    if value == 0 {
        return Ok(());
    }
    check_range(
        field,
        value,
        MIN_SESSION_TIMEOUT_SECONDS,
        MAX_SESSION_TIMEOUT_SECONDS,
    )
    .map_err(|_| {
        Error::InvalidParameter(format!(
            "{field}: {value} is out of range; it must be 0 (never) or from \
             {MIN_SESSION_TIMEOUT_SECONDS} to {MAX_SESSION_TIMEOUT_SECONDS}"
        ))
    })
}

fn check_text(field: &str, value: &str, max_len: usize) -> Result<(), Error> {
    if value.len() > max_len {
        return Err(Error::InvalidParameter(format!(
            "{field}: longer than {max_len} bytes"
        )));
    }
    if value.chars().any(char::is_control) {
        return Err(Error::InvalidParameter(format!(
            "{field}: control characters are not allowed"
        )));
    }
    Ok(())
}

/// Names of pools and hosts: 1 to 253 characters of letters, digits, `.`,
/// `-` and `_`, starting with a letter or digit, so that they are safe in
/// URLs, file names and log lines.
pub fn validate_name(field: &str, name: &str) -> Result<(), Error> {
    let ok = !name.is_empty()
        && name.len() <= 253
        && name.starts_with(|c: char| c.is_ascii_alphanumeric())
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_'));
    if !ok {
        return Err(Error::InvalidParameter(format!(
            "{field}: {name:?} is not a valid name; use 1 to 253 letters, digits, '.', '-' \
             or '_', starting with a letter or digit"
        )));
    }
    Ok(())
}

/// A user principal name: 1 to 256 bytes, no white space or control
/// characters, and nothing that shows as nothing ([`is_invisible`]).
/// Users are matched without regard to ASCII case, as UPNs are.
///
/// Every user name the broker takes passes here, whatever brought it: a
/// connect, a ticket, the portal's sign-in, the front doors, a heartbeat's
/// session list, an entitlement, a host's assigned user. A name with an
/// invisible character looks exactly like the name without it in every
/// log, list and console, yet is another user to every rule (S1's "the
/// user's session", T2's entitlements, W5's logoffs): refused, nobody can
/// pass for someone else that way.
pub fn validate_user(field: &str, user: &str) -> Result<(), Error> {
    if user.is_empty()
        || user.len() > 256
        || user.chars().any(|c| c.is_whitespace() || c.is_control())
    {
        return Err(Error::InvalidParameter(format!(
            "{field}: {user:?} is not a valid user name; use 1 to 256 characters without \
             white space"
        )));
    }
    if let Some(c) = user.chars().find(|&c| is_invisible(c)) {
        // Shown with every invisible character escaped: as it is, the
        // message would show the very name it looks like.
        let shown: String = user
            .chars()
            .map(|c| {
                if is_invisible(c) {
                    format!("\\u{{{:x}}}", u32::from(c))
                } else {
                    c.to_string()
                }
            })
            .collect();
        return Err(Error::InvalidParameter(format!(
            "{field}: \"{shown}\" is not a valid user name: it holds U+{:04X}, a character \
             that shows as nothing or changes how the text around it shows, so the name would \
             look like another one",
            u32::from(c)
        )));
    }
    Ok(())
}

/// Unicode's Default_Ignorable_Code_Point property (DerivedCoreProperties.txt):
/// code points a renderer shows as nothing when it has no glyph for them.
/// Most are format characters (general category Cf) or unassigned, which
/// [`is_invisible`] refuses by category anyway; the table lists them all
/// so that the letters and marks among them are refused too: the Hangul
/// fillers (U+115F, U+1160, U+3164, U+FFA0), the Mongolian and other
/// variation selectors (U+180B–U+180F, U+FE00–U+FE0F, U+E0100–U+E01EF),
/// the combining grapheme joiner (U+034F) and the Khmer inherent vowels
/// (U+17B4, U+17B5).
const DEFAULT_IGNORABLE: &[(char, char)] = &[
    ('\u{00AD}', '\u{00AD}'),
    ('\u{034F}', '\u{034F}'),
    ('\u{061C}', '\u{061C}'),
    ('\u{115F}', '\u{1160}'),
    ('\u{17B4}', '\u{17B5}'),
    ('\u{180B}', '\u{180F}'),
    ('\u{200B}', '\u{200F}'),
    ('\u{202A}', '\u{202E}'),
    ('\u{2060}', '\u{206F}'),
    ('\u{3164}', '\u{3164}'),
    ('\u{FE00}', '\u{FE0F}'),
    ('\u{FEFF}', '\u{FEFF}'),
    ('\u{FFA0}', '\u{FFA0}'),
    ('\u{FFF0}', '\u{FFF8}'),
    ('\u{1BCA0}', '\u{1BCA3}'),
    ('\u{1D173}', '\u{1D17A}'),
    ('\u{E0000}', '\u{E0FFF}'),
];

/// Whether `c` shows as nothing, or changes how other characters show,
/// so that a name holding it looks like a name without it: format
/// characters (Unicode general category Cf: U+200B ZERO WIDTH SPACE,
/// U+200C/U+200D joiners, U+FEFF, U+2060–U+2064, the bidirectional
/// controls U+202A–U+202E and U+2066–U+2069, the tag characters
/// U+E0000–U+E007F, …), controls, separators (spaces of every width),
/// private-use and unassigned code points (no agreed glyph: they may be
/// assigned an invisible one later), every Default_Ignorable_Code_Point,
/// and U+2800 BRAILLE PATTERN BLANK (a symbol that is drawn blank).
pub fn is_invisible(c: char) -> bool {
    use unicode_properties::{GeneralCategory as G, UnicodeGeneralCategory as _};
    if c.is_ascii() {
        return c.is_ascii_control() || c == ' ';
    }
    matches!(
        c.general_category(),
        G::Format
            | G::Control
            | G::Surrogate
            | G::PrivateUse
            | G::Unassigned
            | G::SpaceSeparator
            | G::LineSeparator
            | G::ParagraphSeparator
    ) || c == '\u{2800}'
        || DEFAULT_IGNORABLE
            .iter()
            .any(|&(first, last)| (first..=last).contains(&c))
}

/// Capabilities are short lowercase words (`rdp`, `gpu`, …), at most 32 of them.
pub fn validate_capabilities(field: &str, caps: &[String]) -> Result<(), Error> {
    if caps.len() > 32 {
        return Err(Error::InvalidParameter(format!(
            "{field}: at most 32 capabilities"
        )));
    }
    for (i, c) in caps.iter().enumerate() {
        if caps[..i].contains(c) {
            return Err(Error::InvalidParameter(format!(
                "{field}: {c:?} is listed twice"
            )));
        }
        let ok = !c.is_empty()
            && c.len() <= 64
            && c.chars().all(|ch| {
                ch.is_ascii_lowercase() || ch.is_ascii_digit() || matches!(ch, '-' | '_' | '.')
            });
        if !ok {
            return Err(Error::InvalidParameter(format!(
                "{field}: {c:?} is not a valid capability; use lowercase letters, digits, \
                 '-', '_' or '.'"
            )));
        }
    }
    Ok(())
}
