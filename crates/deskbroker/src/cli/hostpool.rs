//! `deskbroker hostpool create|update|show|list|delete`: host pools, through
//! `/api/v1/hostPools`.

use anyhow::Context as _;
use serde_json::Value;

use super::output::Columns;
use super::{Body, Context, GlobalArgs};

/// Columns of a pool in a table, for one pool (`show`, `create`, `update`)
/// as for a list: the interface contract's example (name, algorithm, limit)
/// with the pool's type, without which `Persistent` or `LoadIndex` alone
/// does not say what kind of pool it is.
const POOL_COLUMNS: Columns = &[
    "name",
    "hostPoolType",
    "loadBalancerType",
    "maxSessionLimit",
];

/// Flags of `deskbroker hostpool`.
#[derive(clap::Args)]
#[command(arg_required_else_help = true)]
pub struct HostpoolArgs {
    #[command(flatten)]
    global: GlobalArgs,
    #[command(subcommand)]
    command: HostpoolCommand,
}

#[derive(clap::Subcommand)]
enum HostpoolCommand {
    /// Create a host pool (PUT: a pool of the same name is replaced, and
    /// settings not given take their defaults).
    Create(CreateArgs),
    /// Change only the given settings of a host pool (PATCH).
    Update(UpdateArgs),
    /// Show one host pool.
    Show(NameArg),
    /// List the host pools.
    List,
    /// Delete a host pool (refused while it has session hosts, unless --force).
    Delete(DeleteArgs),
    /// Create a registration token for agents to enroll hosts (shown once),
    /// or revoke every token of the pool with --revoke.
    RegistrationToken(TokenArgs),
    /// Print (or save with --file) an .rdp file that points mstsc or
    /// xfreerdp at the broker's RDP front door for this pool (with
    /// --gateway, at its RD Gateway).
    RdpFile(RdpFileArgs),
    /// Print the address that opens the pool's desktop for a user in a
    /// browser tab: the RD Gateway's /web page with a fresh connection
    /// ticket (admin or portal credentials; the broker needs an RD Gateway).
    WebUrl(WebUrlArgs),
    /// The pool's power and scaling actions, newest first (rule A10).
    ScalingActions(ActionsArgs),
}

#[derive(clap::Args)]
struct ActionsArgs {
    /// Name of the host pool.
    #[arg(long, value_name = "NAME")]
    name: String,
    /// At most this many actions (1..=1000, default 100).
    #[arg(long, value_name = "N")]
    page_size: Option<u32>,
}

#[derive(clap::Args)]
struct RdpFileArgs {
    /// Name of the host pool.
    #[arg(long, value_name = "NAME")]
    name: String,
    /// Write the file here instead of printing it.
    #[arg(long, value_name = "PATH")]
    file: Option<std::path::PathBuf>,
    /// Put a signed connection ticket for this user in the file (rule T3;
    /// admin or portal credentials), valid for the pool's
    /// ticketLifetimeSeconds.
    #[arg(long, value_name = "USER")]
    user: Option<String>,
    /// The user's groups, comma-separated, for the pool's entitledGroups (T2).
    #[arg(long, value_name = "GROUP,…", value_delimiter = ',', requires = "user")]
    groups: Vec<String>,
    /// A file through the broker's RD Gateway (MS-TSGU over HTTPS), the
    /// ticket as its access token (needs --user).
    #[arg(long, requires = "user")]
    gateway: bool,
}

#[derive(clap::Args)]
struct WebUrlArgs {
    /// Name of the host pool.
    #[arg(long, value_name = "NAME")]
    name: String,
    /// The user the ticket admits (rule T3), valid for the pool's
    /// ticketLifetimeSeconds.
    #[arg(long, value_name = "USER")]
    user: String,
    /// The user's groups, comma-separated, for the pool's entitledGroups (T2).
    #[arg(long, value_name = "GROUP,…", value_delimiter = ',')]
    groups: Vec<String>,
}

#[derive(clap::Args)]
struct TokenArgs {
    /// Name of the host pool.
    #[arg(long, value_name = "NAME")]
    name: String,
    /// How long the token is valid: 90m, 24h, 7d… (at most 30 days).
    #[arg(long, value_name = "DURATION", default_value = "24h", value_parser = humantime::parse_duration)]
    expires_in: std::time::Duration,
    /// How many new session hosts the token may register (1..=10000);
    /// re-registering a host with its own credential does not count.
    #[arg(long, value_name = "N", default_value_t = 1, conflicts_with = "revoke")]
    max_hosts: u32,
    /// Revoke every registration token of the pool instead (hosts already
    /// registered keep working).
    #[arg(long, conflicts_with = "expires_in")]
    revoke: bool,
}

/// Columns of `hostpool registration-token`.
const TOKEN_COLUMNS: Columns = &["token", "expirationTime"];

#[derive(clap::Args)]
struct NameArg {
    /// Name of the host pool.
    #[arg(long, value_name = "NAME")]
    name: String,
}

#[derive(clap::Args)]
struct CreateArgs {
    /// Name of the host pool.
    #[arg(long, value_name = "NAME")]
    name: String,
    /// Pooled or Personal.
    #[arg(long, value_name = "Pooled|Personal")]
    host_pool_type: String,
    /// BreadthFirst, DepthFirst or LoadIndex for a pooled pool;
    /// Persistent or MultiplePersistent for a personal one.
    #[arg(long, value_name = "TYPE")]
    load_balancer_type: String,
    #[command(flatten)]
    settings: PoolSettings,
}

#[derive(clap::Args)]
struct UpdateArgs {
    /// Name of the host pool.
    #[arg(long, value_name = "NAME")]
    name: String,
    /// BreadthFirst, DepthFirst or LoadIndex for a pooled pool;
    /// Persistent or MultiplePersistent for a personal one.
    #[arg(long, value_name = "TYPE")]
    load_balancer_type: Option<String>,
    #[command(flatten)]
    settings: PoolSettings,
}

/// The optional settings `create` and `update` share. Values are passed to
/// the broker as given: it validates them (one set of rules, P1–P7) and its
/// error names the field.
#[derive(clap::Args)]
struct PoolSettings {
    /// Most sessions per session host, 0..=999999 (default 999999).
    #[arg(long, value_name = "N")]
    max_session_limit: Option<u32>,
    /// Automatic or Direct (personal pools only; default Automatic).
    #[arg(long, value_name = "Automatic|Direct")]
    personal_desktop_assignment_type: Option<String>,
    /// BreadthFirst: pick at random in the less-loaded half of the hosts (true,
    /// the default) or take the least-loaded host (false).
    #[arg(long, value_name = "true|false")]
    breadth_first_randomized: Option<bool>,
    /// Seconds a Pending session may wait to be confirmed Active before it
    /// ends (1..=86400, default 120).
    #[arg(long, value_name = "SECONDS")]
    pending_timeout_seconds: Option<u32>,
    /// Seconds without heartbeat before a host is Unavailable (5..=86400,
    /// default 90).
    #[arg(long, value_name = "SECONDS")]
    heartbeat_timeout_seconds: Option<u32>,
    /// Seconds after which a Disconnected session ends (rule S9): 0 = never,
    /// otherwise 60..=31536000; a new pool's default is 28800 (8 hours).
    #[arg(long, value_name = "SECONDS")]
    disconnected_timeout_seconds: Option<u32>,
    /// Seconds after which any session ends, counted from its placement
    /// (rule S9): 0 = never (the default), otherwise 60..=31536000.
    #[arg(long, value_name = "SECONDS")]
    max_session_lifetime_seconds: Option<u32>,
    /// Whether RDP clients may name this pool with a tsv:// routing token at
    /// the front door (rule R3; default true).
    #[arg(long, value_name = "true|false")]
    allow_front_door: Option<bool>,
    /// Whether the front door places users here only on a signed connection
    /// ticket, from `hostpool rdp-file --user` (rule T3; default false).
    #[arg(long, value_name = "true|false")]
    require_connection_ticket: Option<bool>,
    /// Seconds a connection ticket of this pool is honoured (30..=86400,
    /// default 300).
    #[arg(long, value_name = "SECONDS")]
    ticket_lifetime_seconds: Option<u32>,
    /// What connection files and browser addresses name (rule AD4): Pool
    /// (the default: the door places the user when they connect) or Host
    /// (the user is placed when the file is fetched, and the file names
    /// that host's dnsName, or its address when it has none).
    #[arg(long, value_name = "Pool|Host")]
    connection_target: Option<String>,
    /// CIDR ranges session hosts' addresses must lie in, comma-separated
    /// (rule E4), e.g. 10.0.0.0/8; an empty value clears the list (any
    /// routable address).
    #[arg(long, value_name = "CIDR,…", value_delimiter = ',')]
    allowed_address_ranges: Option<Vec<String>>,
    /// Users who may get a new session, comma-separated (rule T2); with
    /// --entitled-groups empty too, everyone. An empty value clears it.
    #[arg(long, value_name = "USER,…", value_delimiter = ',')]
    entitled_users: Option<Vec<String>>,
    /// Groups whose members may get a new session, comma-separated (rule
    /// T2). An empty value clears it.
    #[arg(long, value_name = "GROUP,…", value_delimiter = ',')]
    entitled_groups: Option<Vec<String>>,
    /// Capabilities every host of the pool offers, comma-separated (default rdp).
    #[arg(long, value_name = "CAP,…", value_delimiter = ',')]
    standard_capabilities: Option<Vec<String>>,
    /// Free text describing the pool.
    #[arg(long, value_name = "TEXT")]
    description: Option<String>,
    /// Name shown to users.
    #[arg(long, value_name = "TEXT")]
    friendly_name: Option<String>,
    /// Whether a connect that finds no host starts a stopped one (rule A8;
    /// default false).
    #[arg(long, value_name = "true|false")]
    start_vm_on_connect: Option<bool>,
    /// Whether the pool's connection files through the RD Gateway name it
    /// as the KDC proxy too (`kdcproxyname`, rule AD3; default false).
    #[arg(long, value_name = "true|false")]
    kdc_proxy: Option<bool>,
    /// What signs RD Gateway clients in for this pool (rule AD2): Ticket
    /// (the default: only a connection ticket) or TicketOrWindows (also
    /// the client's Windows sign-in, on a gateway with --gateway-keytab).
    #[arg(long, value_name = "Ticket|TicketOrWindows")]
    gateway_sign_in: Option<String>,
    /// RDP properties for the pool's .rdp files, AVD's syntax
    /// 'name:type:value;…' (rule F3), e.g. 'audiomode:i:0;redirectclipboard:i:0',
    /// from the properties clients honour (docs/gateway.md lists them). An
    /// empty value clears them.
    #[arg(long, value_name = "NAME:TYPE:VALUE;…")]
    custom_rdp_properties: Option<String>,
    /// Which a user given both the pool's desktop and some of its
    /// published applications sees (AVD's preferredAppGroupType): Desktop
    /// (the default) or RemoteApp.
    #[arg(long, value_name = "Desktop|RemoteApp")]
    preferred_app_group_type: Option<String>,
    /// How the pool's hosts run a published application: RemoteApp (the
    /// default: a window of its own, Windows hosts) or AlternateShell (the
    /// session's only program: xrdp hosts).
    #[arg(long, value_name = "RemoteApp|AlternateShell")]
    application_mode: Option<String>,
    #[command(flatten)]
    power: PowerFlags,
    #[command(flatten)]
    load_index: LoadIndexFlags,
    #[command(flatten)]
    logon_storm: LogonStormFlags,
}

/// The pool's `powerSettings` (rule A9). Setting a command needs the admin
/// token or an admin credential of every pool; a command reaches the host's
/// values only through DESKBROKER_* environment variables. An empty
/// command value removes the command.
#[derive(clap::Args)]
#[command(next_help_heading = "Power (rule A9)")]
struct PowerFlags {
    /// none, command or wakeOnLan.
    #[arg(long, value_name = "DRIVER")]
    power_driver: Option<String>,
    /// Run through sh -c to start a host, e.g. 'virsh start "$DESKBROKER_HOST"'.
    #[arg(long, value_name = "COMMAND")]
    power_on_command: Option<String>,
    /// Run through sh -c to stop a host.
    #[arg(long, value_name = "COMMAND")]
    power_off_command: Option<String>,
    /// Prints Running or Stopped for a host whose state is in doubt.
    #[arg(long, value_name = "COMMAND")]
    power_state_command: Option<String>,
    /// Seconds before a power command is killed (1..=3600, default 120).
    #[arg(long, value_name = "SECONDS")]
    power_timeout_seconds: Option<u32>,
    /// Where Wake-on-LAN packets go: an IPv4 address (port 9) or ADDRESS:PORT.
    #[arg(long, value_name = "ADDRESS")]
    wol_broadcast_address: Option<String>,
}

impl PowerFlags {
    fn into_body(self) -> Body {
        let command = |c: Option<String>| {
            c.map(|c| {
                if c.is_empty() {
                    serde_json::Value::Null
                } else {
                    c.into()
                }
            })
        };
        let mut b = Body::default();
        b.set("driver", self.power_driver)
            .set("powerOnCommand", command(self.power_on_command))
            .set("powerOffCommand", command(self.power_off_command))
            .set("powerStateCommand", command(self.power_state_command))
            .set("timeoutSeconds", self.power_timeout_seconds)
            .set("broadcastAddress", self.wol_broadcast_address);
        b
    }
}

/// A comma-separated list flag without its empty items, so that an empty
/// value (`--flag ''`) clears the list.
fn non_empty(list: Option<Vec<String>>) -> Option<Vec<String>> {
    list.map(|v| v.into_iter().filter(|item| !item.is_empty()).collect())
}

impl PoolSettings {
    fn add_to(self, body: &mut Body) {
        body.set("maxSessionLimit", self.max_session_limit)
            .set(
                "personalDesktopAssignmentType",
                self.personal_desktop_assignment_type,
            )
            .set("breadthFirstRandomized", self.breadth_first_randomized)
            .set("pendingTimeoutSeconds", self.pending_timeout_seconds)
            .set("heartbeatTimeoutSeconds", self.heartbeat_timeout_seconds)
            .set(
                "disconnectedTimeoutSeconds",
                self.disconnected_timeout_seconds,
            )
            .set(
                "maxSessionLifetimeSeconds",
                self.max_session_lifetime_seconds,
            )
            .set("allowFrontDoor", self.allow_front_door)
            .set("requireConnectionTicket", self.require_connection_ticket)
            .set("ticketLifetimeSeconds", self.ticket_lifetime_seconds)
            .set("connectionTarget", self.connection_target)
            .set(
                "allowedAddressRanges",
                non_empty(self.allowed_address_ranges),
            )
            .set("entitledUsers", non_empty(self.entitled_users))
            .set("entitledGroups", non_empty(self.entitled_groups))
            .set("standardCapabilities", self.standard_capabilities)
            .set("description", self.description)
            .set("friendlyName", self.friendly_name)
            .set("startVmOnConnect", self.start_vm_on_connect)
            .set("kdcProxy", self.kdc_proxy)
            .set("gatewaySignIn", self.gateway_sign_in)
            .set("customRdpProperties", self.custom_rdp_properties)
            .set("preferredAppGroupType", self.preferred_app_group_type)
            .set("applicationMode", self.application_mode)
            .set_object("powerSettings", self.power.into_body())
            .set_object("loadIndexSettings", self.load_index.into_body())
            .set_object("logonStormSettings", self.logon_storm.into_body());
    }
}

/// The pool's `loadIndexSettings` (rules H2, H3, H6): which factors make up
/// a host's Server Load Index, and when a host refuses new logons. Only the
/// flags given are sent; on update the broker keeps the other fields.
///
/// Thresholds are whole numbers; their ranges are the broker's to check (its
/// `InvalidParameter` names the field). `allow_negative_numbers` makes `-1`
/// an invalid value of its flag rather than an unknown flag.
#[derive(clap::Args)]
#[command(next_help_heading = "Load Index Settings (LoadIndex pools)")]
struct LoadIndexFlags {
    /// Count sessions as a load index factor (default true).
    #[arg(long, value_name = "true|false")]
    include_session_count: Option<bool>,
    /// CPU percent that counts as full load, 0..=100 (0: not used, the default).
    #[arg(long, value_name = "N", allow_negative_numbers = true)]
    cpu_threshold: Option<u32>,
    /// Memory percent that counts as full load, 0..=100 (0: not used, the
    /// default).
    #[arg(long, value_name = "N", allow_negative_numbers = true)]
    memory_threshold: Option<u32>,
    /// Disk queue length, in requests, that counts as full load (0: not used,
    /// the default).
    #[arg(long, value_name = "N", allow_negative_numbers = true)]
    disk_queue_length_threshold: Option<u32>,
    /// Disk read latency, in milliseconds, that counts as full load (0: not
    /// used, the default).
    #[arg(long, value_name = "MS", allow_negative_numbers = true)]
    disk_read_latency_threshold: Option<u32>,
    /// Disk write latency, in milliseconds, that counts as full load (0: not
    /// used, the default).
    #[arg(long, value_name = "MS", allow_negative_numbers = true)]
    disk_write_latency_threshold: Option<u32>,
    /// Use the load index each host's agent script reports instead of the
    /// factors above (default false).
    #[arg(long, value_name = "true|false")]
    use_custom_script: Option<bool>,
    /// Host-side rejection: a host whose load index is at or over this value
    /// refuses new logons, 0..=100 (0: disabled, the default). A host's own
    /// policy overrides it.
    #[arg(long, value_name = "N", allow_negative_numbers = true)]
    load_index_threshold: Option<u32>,
    /// Host-side rejection: a host with this many connecting sessions or more
    /// refuses new logons, 0..=150 (0: disabled, the default). A host's own
    /// policy overrides it.
    #[arg(long, value_name = "N", allow_negative_numbers = true)]
    connecting_session_threshold: Option<u32>,
}

impl LoadIndexFlags {
    fn into_body(self) -> Body {
        let mut body = Body::default();
        body.set("includeSessionCount", self.include_session_count)
            .set("cpuThreshold", self.cpu_threshold)
            .set("memoryThreshold", self.memory_threshold)
            .set("diskQueueLengthThreshold", self.disk_queue_length_threshold)
            .set("diskReadLatencyThreshold", self.disk_read_latency_threshold)
            .set(
                "diskWriteLatencyThreshold",
                self.disk_write_latency_threshold,
            )
            .set("useCustomScript", self.use_custom_script)
            .set("loadIndexThreshold", self.load_index_threshold)
            .set(
                "connectingSessionThreshold",
                self.connecting_session_threshold,
            );
        body
    }
}

/// The pool's `logonStormSettings` (rule H5): which hosts form the queue that
/// new logons are spread over while the load indexes are stale.
#[derive(clap::Args)]
#[command(next_help_heading = "Logon Storm Settings (LoadIndex pools)")]
struct LogonStormFlags {
    /// Hosts with a load index below this value qualify for the queue,
    /// 0..=100 (default 20; 0: no limit). Sent as
    /// logonStormSettings.loadIndexThreshold.
    #[arg(long, value_name = "N", allow_negative_numbers = true)]
    storm_load_index_threshold: Option<u32>,
    /// Hosts with fewer connecting sessions than this qualify for the queue,
    /// 0..=150 (default 20; 0: no limit). Sent as
    /// logonStormSettings.connectingSessionThreshold.
    #[arg(long, value_name = "N", allow_negative_numbers = true)]
    storm_connecting_session_threshold: Option<u32>,
    /// Fewest hosts in the queue: the load index threshold is raised until
    /// this many qualify, 1..=10000 (default 4).
    #[arg(long, value_name = "N", allow_negative_numbers = true)]
    min_hosts_in_queue: Option<u32>,
    /// Stale-index correction (rule H7): index points each logon placed on
    /// a host since its last heartbeat adds to its CPU, memory, disk or
    /// custom factor, 0..=100 (default 0: off). About the CPU percent one
    /// logon costs a host; `deskbroker sim` shows the effect. Sent as
    /// logonStormSettings.logonCost.
    #[arg(long, value_name = "N", allow_negative_numbers = true)]
    storm_logon_cost: Option<u32>,
}

impl LogonStormFlags {
    fn into_body(self) -> Body {
        let mut body = Body::default();
        body.set("loadIndexThreshold", self.storm_load_index_threshold)
            .set(
                "connectingSessionThreshold",
                self.storm_connecting_session_threshold,
            )
            .set("minHostsInQueue", self.min_hosts_in_queue)
            .set("logonCost", self.storm_logon_cost);
        body
    }
}

impl CreateArgs {
    /// The pool's name and the body of the PUT: the two required settings and
    /// the optional ones given.
    fn into_request(self) -> (String, Value) {
        let mut body = Body::default();
        body.set("hostPoolType", Some(self.host_pool_type))
            .set("loadBalancerType", Some(self.load_balancer_type));
        self.settings.add_to(&mut body);
        (self.name, body.into_value())
    }
}

impl UpdateArgs {
    /// The pool's name and the body of the PATCH: only the settings given,
    /// nested settings in their object (the broker merges them field by
    /// field).
    fn into_request(self) -> anyhow::Result<(String, Value)> {
        let mut body = Body::default();
        body.set("loadBalancerType", self.load_balancer_type);
        self.settings.add_to(&mut body);
        if body.is_empty() {
            anyhow::bail!(
                "hostpool update: nothing to change; give at least one setting, \
                 e.g. --load-balancer-type, --max-session-limit or --cpu-threshold"
            );
        }
        Ok((self.name, body.into_value()))
    }
}

#[derive(clap::Args)]
struct DeleteArgs {
    /// Name of the host pool.
    #[arg(long, value_name = "NAME")]
    name: String,
    /// Delete the pool with its session hosts and sessions.
    #[arg(long)]
    force: bool,
}

pub async fn run(args: HostpoolArgs) -> anyhow::Result<()> {
    let ctx = Context::new(&args.global)?;
    ctx.explain(execute(&ctx, args.command).await)
}

async fn execute(ctx: &Context, command: HostpoolCommand) -> anyhow::Result<()> {
    let client = &ctx.client;
    match command {
        HostpoolCommand::Create(create) => {
            let (name, body) = create.into_request();
            let pool = client.put(&["hostPools", &name], &body).await?;
            ctx.print(&pool, POOL_COLUMNS)
        }
        HostpoolCommand::Update(update) => {
            let (name, body) = update.into_request()?;
            let pool = client.patch(&["hostPools", &name], &body).await?;
            ctx.print(&pool, POOL_COLUMNS)
        }
        HostpoolCommand::Show(show) => {
            let pool = client.get(&["hostPools", &show.name], &[]).await?;
            ctx.print(&pool, POOL_COLUMNS)
        }
        HostpoolCommand::ScalingActions(a) => {
            let size = a.page_size.map(|n| n.to_string());
            let query: Vec<(&str, &str)> = size
                .as_deref()
                .map(|s| vec![("pageSize", s)])
                .unwrap_or_default();
            let actions = client
                .list(&["hostPools", &a.name, "scalingActions"], &query)
                .await?;
            ctx.print(&actions, super::sessionhost::ACTION_COLUMNS)
        }
        HostpoolCommand::List => {
            let pools = client.list(&["hostPools"], &[]).await?;
            ctx.print(&pools, POOL_COLUMNS)
        }
        HostpoolCommand::Delete(delete) => {
            let query: &[(&str, &str)] = if delete.force {
                &[("force", "true")]
            } else {
                &[]
            };
            let answer = client.delete(&["hostPools", &delete.name], query).await?;
            ctx.print(&answer, POOL_COLUMNS)
        }
        HostpoolCommand::RdpFile(r) => {
            let mut query = Vec::new();
            if let Some(user) = &r.user {
                query.push(("user", user.as_str()));
            }
            let groups = r.groups.join(",");
            if !groups.is_empty() {
                query.push(("groups", groups.as_str()));
            }
            if r.gateway {
                query.push(("gateway", "true"));
            }
            let text = client
                .get_text(&["hostPools", &r.name, "rdpFile"], &query)
                .await?;
            // Said on stderr, with or without --file: stdout stays for data.
            if let Some(note) = ticket_expiry_note(&text, std::time::SystemTime::now()) {
                eprintln!("{note}");
            }
            match r.file {
                Some(path) => {
                    std::fs::write(&path, &text)
                        .with_context(|| format!("cannot write {}", path.display()))?;
                    // Said on stderr: stdout stays for data, as without --file.
                    eprintln!(
                        "wrote the .rdp file of host pool {} to {} ({} bytes)",
                        r.name,
                        path.display(),
                        text.len()
                    );
                    Ok(())
                }
                None => {
                    print!("{text}");
                    Ok(())
                }
            }
        }
        HostpoolCommand::WebUrl(w) => {
            let groups = w.groups.join(",");
            let mut query = vec![("user", w.user.as_str())];
            if !groups.is_empty() {
                query.push(("groups", groups.as_str()));
            }
            let answer = client
                .get(&["hostPools", &w.name, "webUrl"], &query)
                .await?;
            ctx.print(&answer, &["url", "expirationTime"])
        }
        HostpoolCommand::RegistrationToken(t) => {
            let path = ["hostPools", t.name.as_str(), "registrationToken"];
            if t.revoke {
                let answer = client.delete(&path, &[]).await?;
                ctx.print(&answer, TOKEN_COLUMNS)?;
                // The API answers 204 with no body: say what was done, on
                // stderr so that stdout stays for data.
                eprintln!(
                    "revoked every registration token of host pool {} \
                     (hosts already registered keep working)",
                    t.name
                );
                return Ok(());
            }
            let body = serde_json::json!({
                "expiresInSeconds": t.expires_in.as_secs(),
                "maxHosts": t.max_hosts,
            });
            let answer = client.post(&path, &body).await?;
            ctx.print(&answer, TOKEN_COLUMNS)
        }
    }
}

/// Until when the connection ticket in a fetched `.rdp` file admits its
/// user, said to whoever fetched it: past that moment the door refuses the
/// file, and most clients then show only that the connection failed.
/// None when the file holds no ticket.
fn ticket_expiry_note(text: &str, now: std::time::SystemTime) -> Option<String> {
    let prefix = api::ticket::TICKET_PREFIX;
    let ticket = text
        .lines()
        .find_map(|line| line.find(prefix).map(|at| line[at..].trim()))?;
    let ticket = api::ticket::Ticket::parse(ticket).ok()?;
    let at = std::time::UNIX_EPOCH + std::time::Duration::from_secs(ticket.expires_unix_seconds);
    let left = at.duration_since(now).map_or(0, |d| d.as_secs());
    Some(format!(
        "the connection ticket in this file admits {} until {} (in {left} s: the pool's \
         ticketLifetimeSeconds, 300 unless set): open the file before then, or fetch a new one",
        ticket.user,
        humantime::format_rfc3339_seconds(at)
    ))
}

#[cfg(test)]
mod tests {
    use clap::Parser as _;
    use serde_json::json;

    use super::super::output::{self, OutputFormat};
    use super::*;

    #[test]
    fn a_files_ticket_is_said_with_its_expiry() {
        let key = api::ticket::TicketKey::derive("a secret of the test");
        let ticket = key
            .issue("farm", "alice@contoso.com", 1_800_000_300)
            .unwrap();
        let now = std::time::UNIX_EPOCH + std::time::Duration::from_secs(1_800_000_000);
        let file = format!("full address:s:door:3389\nloadbalanceinfo:s:{ticket}\n");
        assert_eq!(
            ticket_expiry_note(&file, now).unwrap(),
            "the connection ticket in this file admits alice@contoso.com until \
             2027-01-15T08:05:00Z (in 300 s: the pool's ticketLifetimeSeconds, 300 unless set): \
             open the file before then, or fetch a new one"
        );
        let gateway = format!("gatewayaccesstoken:s:{ticket}\n");
        assert!(ticket_expiry_note(&gateway, now).is_some());
        assert_eq!(ticket_expiry_note("full address:s:door:3389\n", now), None);
    }

    /// `deskbroker hostpool …` on its own, to parse a command line as the
    /// binary does.
    #[derive(clap::Parser)]
    struct Cli {
        #[command(flatten)]
        args: HostpoolArgs,
    }

    fn parse(line: &str) -> Result<HostpoolCommand, clap::Error> {
        Cli::try_parse_from(std::iter::once("hostpool").chain(line.split_whitespace()))
            .map(|cli| cli.args.command)
    }

    fn update_body(line: &str) -> anyhow::Result<Value> {
        match parse(line).expect("valid command line") {
            HostpoolCommand::Update(update) => update.into_request().map(|(_, body)| body),
            _ => panic!("not an update: {line}"),
        }
    }

    fn create_request(line: &str) -> (String, Value) {
        match parse(line).expect("valid command line") {
            HostpoolCommand::Create(create) => create.into_request(),
            _ => panic!("not a create: {line}"),
        }
    }

    #[test]
    fn command_line_definition_is_consistent() {
        use clap::CommandFactory as _;
        Cli::command().debug_assert();
    }

    #[test]
    fn update_nests_load_index_and_logon_storm_flags_in_their_objects() {
        assert_eq!(
            update_body("update --name p1 --cpu-threshold 90 --min-hosts-in-queue 4")
                .expect("something to change"),
            json!({
                "loadIndexSettings": {"cpuThreshold": 90},
                "logonStormSettings": {"minHostsInQueue": 4}
            })
        );
        assert_eq!(
            update_body(
                "update --name N --load-balancer-type LoadIndex --cpu-threshold 90 \
                 --storm-load-index-threshold 20 --min-hosts-in-queue 4"
            )
            .expect("something to change"),
            json!({
                "loadBalancerType": "LoadIndex",
                "loadIndexSettings": {"cpuThreshold": 90},
                "logonStormSettings": {"loadIndexThreshold": 20, "minHostsInQueue": 4}
            })
        );
    }

    #[test]
    fn storm_logon_cost_is_sent_as_logon_storm_settings_logon_cost() {
        assert_eq!(
            update_body("update --name p1 --storm-logon-cost 8").expect("something to change"),
            json!({"logonStormSettings": {"logonCost": 8}})
        );
    }

    #[test]
    fn host_side_and_storm_thresholds_go_to_different_objects() {
        assert_eq!(
            update_body(
                "update --name p1 --load-index-threshold 80 --connecting-session-threshold 10 \
                 --storm-load-index-threshold 30 --storm-connecting-session-threshold 5"
            )
            .expect("something to change"),
            json!({
                "loadIndexSettings": {"loadIndexThreshold": 80, "connectingSessionThreshold": 10},
                "logonStormSettings": {"loadIndexThreshold": 30, "connectingSessionThreshold": 5}
            })
        );
    }

    #[test]
    fn update_without_nested_flags_sends_no_nested_object() {
        assert_eq!(
            update_body("update --name p1 --max-session-limit 5").expect("something to change"),
            json!({"maxSessionLimit": 5})
        );
        let error = update_body("update --name p1").expect_err("nothing to change");
        assert!(error.to_string().contains("nothing to change"), "{error}");
    }

    #[test]
    fn create_sends_every_load_index_flag_given_with_its_type() {
        let (name, body) = create_request(
            "create --name p1 --host-pool-type Pooled --load-balancer-type LoadIndex \
             --standard-capabilities rdp,gpu \
             --include-session-count false --cpu-threshold 90 --memory-threshold 80 \
             --disk-queue-length-threshold 4 --disk-read-latency-threshold 20 \
             --disk-write-latency-threshold 25 --use-custom-script true \
             --load-index-threshold 95 --connecting-session-threshold 30 \
             --storm-load-index-threshold 20 --storm-connecting-session-threshold 15 \
             --min-hosts-in-queue 4",
        );
        assert_eq!(name, "p1");
        assert_eq!(
            body,
            json!({
                "hostPoolType": "Pooled",
                "loadBalancerType": "LoadIndex",
                "standardCapabilities": ["rdp", "gpu"],
                "loadIndexSettings": {
                    "includeSessionCount": false,
                    "cpuThreshold": 90,
                    "memoryThreshold": 80,
                    "diskQueueLengthThreshold": 4,
                    "diskReadLatencyThreshold": 20,
                    "diskWriteLatencyThreshold": 25,
                    "useCustomScript": true,
                    "loadIndexThreshold": 95,
                    "connectingSessionThreshold": 30
                },
                "logonStormSettings": {
                    "loadIndexThreshold": 20,
                    "connectingSessionThreshold": 15,
                    "minHostsInQueue": 4
                }
            })
        );
    }

    #[test]
    fn create_without_load_index_flags_sends_only_the_required_settings() {
        let (_, body) = create_request(
            "create --name p1 --host-pool-type Pooled --load-balancer-type BreadthFirst",
        );
        assert_eq!(
            body,
            json!({"hostPoolType": "Pooled", "loadBalancerType": "BreadthFirst"})
        );
    }

    #[test]
    fn thresholds_must_be_whole_numbers_but_ranges_are_left_to_the_broker() {
        for bad in [
            "update --name p1 --cpu-threshold 9x",
            "update --name p1 --cpu-threshold -1",
            "update --name p1 --min-hosts-in-queue 2.5",
            "update --name p1 --use-custom-script yes",
        ] {
            assert!(parse(bad).is_err(), "{bad} was accepted");
        }
        // Over 100 % is the broker's to refuse (InvalidParameter), with its
        // message naming loadIndexSettings.cpuThreshold.
        assert_eq!(
            update_body("update --name p1 --cpu-threshold 150").expect("parses"),
            json!({"loadIndexSettings": {"cpuThreshold": 150}})
        );
    }

    /// `hostpool show` prints the contract's columns and the pool's type, for
    /// a LoadIndex pool too, and `--output json` prints the broker's answer
    /// unchanged, nested settings included.
    #[test]
    fn show_prints_the_pool_type_and_passes_json_through() {
        let pool = json!({
            "name": "contosohp01",
            "hostPoolType": "Pooled",
            "loadBalancerType": "LoadIndex",
            "maxSessionLimit": 10,
            "loadIndexSettings": {"includeSessionCount": true, "cpuThreshold": 90},
            "logonStormSettings": {"loadIndexThreshold": 20, "minHostsInQueue": 4},
            "warnings": []
        });
        assert_eq!(
            output::render(&pool, OutputFormat::Table, POOL_COLUMNS),
            "\
Name         HostPoolType    LoadBalancerType    MaxSessionLimit
-----------  --------------  ------------------  -----------------
contosohp01  Pooled          LoadIndex           10
"
        );
        let json_text = output::render(&pool, OutputFormat::Json, POOL_COLUMNS);
        assert_eq!(
            serde_json::from_str::<Value>(&json_text).expect("JSON"),
            pool
        );
    }
}
