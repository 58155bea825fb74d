//! `deskbroker sessionhost add|update|show|list|remove|start|stop`: the session hosts of
//! a pool, through `/api/v1/hostPools/{pool}/sessionHosts`.

use serde_json::{Map, Value};

use super::output::Columns;
use super::{Body, Context, GlobalArgs};

/// Columns of a session host in a table: where it is, whether it takes new
/// sessions, how loaded it is (its Server Load Index, -1 when unknown: rule
/// H1), and its owner in a personal pool.
const HOST_COLUMNS: Columns = &[
    "name",
    "address",
    "status",
    "allowNewSession",
    "sessions",
    "connectingSessions",
    "loadIndex",
    "assignedUser",
    "imageVersion",
];

/// Columns of a power action's record (rule A10).
pub const ACTION_COLUMNS: Columns = &[
    "time",
    "action",
    "sessionHost",
    "outcome",
    "actor",
    "message",
];

/// The fields of a host's `policy` (rule H6); `null` means "use the pool's
/// loadIndexSettings value".
const POLICY_LOAD_INDEX_THRESHOLD: &str = "loadIndexThreshold";
const POLICY_CONNECTING_SESSION_THRESHOLD: &str = "connectingSessionThreshold";

/// Flags of `deskbroker sessionhost`.
#[derive(clap::Args)]
#[command(arg_required_else_help = true)]
pub struct SessionhostArgs {
    #[command(flatten)]
    global: GlobalArgs,
    #[command(subcommand)]
    command: SessionhostCommand,
}

#[derive(clap::Subcommand)]
enum SessionhostCommand {
    /// Register a session host in a pool (PUT: a host of the same name is
    /// replaced).
    Add(AddArgs),
    /// Drain or undrain a host, assign it to a user, or set its host-side
    /// rejection policy (PATCH).
    ///
    /// A --policy-… flag changes that threshold only: the host is read first
    /// and its policy is sent back with the change, as the broker replaces
    /// the whole policy.
    Update(UpdateArgs),
    /// Show one session host.
    Show(HostArg),
    /// List the session hosts of a pool, in query order.
    List(ListArgs),
    /// Remove a session host (refused while it has sessions, unless --force).
    Remove(RemoveArgs),
    /// Power a session host on through its pool's power driver (rule A9);
    /// prints the action's record, whose outcome is Pending until the
    /// driver answers (see `hostpool scaling-actions`).
    Start(HostArg),
    /// Power a session host off through its pool's power driver (refused
    /// while it has sessions, unless --force).
    Stop(StopArgs),
}

#[derive(clap::Args)]
struct StopArgs {
    #[command(flatten)]
    host: HostArg,
    /// Stop it even with sessions (they are lost with the machine).
    #[arg(long)]
    force: bool,
}

#[derive(clap::Args)]
struct PoolArg {
    /// Name of the host pool.
    #[arg(long, value_name = "POOL")]
    host_pool: String,
}

#[derive(clap::Args)]
struct ListArgs {
    /// Name of the host pool.
    #[arg(long, value_name = "POOL")]
    host_pool: String,
    /// Only the hosts running this image (rule U1).
    #[arg(long, value_name = "VERSION")]
    image_version: Option<String>,
}

#[derive(clap::Args)]
struct HostArg {
    /// Name of the host pool.
    #[arg(long, value_name = "POOL")]
    host_pool: String,
    /// Name of the session host.
    #[arg(long, value_name = "HOST")]
    name: String,
}

#[derive(clap::Args)]
struct AddArgs {
    #[command(flatten)]
    host: HostArg,
    /// Where RDP clients reach the host.
    #[arg(long, value_name = "HOST:PORT")]
    address: String,
    /// Whether the host takes new sessions (false: drain mode; default true).
    #[arg(long, value_name = "true|false")]
    allow_new_session: Option<bool>,
    /// What the host offers, comma-separated (default rdp).
    #[arg(long, value_name = "CAP,…", value_delimiter = ',')]
    capabilities: Option<Vec<String>>,
    /// Labels, comma-separated (a scaling plan's exclusionTag is one).
    #[arg(long, value_name = "TAG,…", value_delimiter = ',')]
    tags: Option<Vec<String>>,
    /// The host's MAC address, aa:bb:cc:dd:ee:ff, for Wake-on-LAN.
    #[arg(long, value_name = "MAC")]
    mac_address: Option<String>,
    /// The host's fully qualified DNS name, e.g. host1.contoso.com: what a
    /// host-named connection file names (rule AD4).
    #[arg(long, value_name = "FQDN")]
    dns_name: Option<String>,
    /// The image the host runs, e.g. 2026.12.1 (rule U1); its agent's
    /// heartbeats replace it when they report one.
    #[arg(long, value_name = "VERSION")]
    image_version: Option<String>,
    #[command(flatten)]
    policy: PolicyFlags,
}

/// The host's own `policy` (rule H6): thresholds that override the pool's
/// `loadIndexSettings` for this host in a LoadIndex pool. A threshold not
/// set uses the pool's value.
#[derive(clap::Args)]
#[command(next_help_heading = "Host Policy (LoadIndex pools)")]
struct PolicyFlags {
    /// This host refuses new logons when its load index is at or over this
    /// value, 0..=100 (0: never), instead of the pool's
    /// loadIndexSettings.loadIndexThreshold.
    #[arg(long, value_name = "N", allow_negative_numbers = true)]
    policy_load_index_threshold: Option<u32>,
    /// This host refuses new logons when it has this many connecting sessions
    /// or more, 0..=150 (0: never), instead of the pool's
    /// loadIndexSettings.connectingSessionThreshold.
    #[arg(long, value_name = "N", allow_negative_numbers = true)]
    policy_connecting_session_threshold: Option<u32>,
}

impl PolicyFlags {
    fn is_empty(&self) -> bool {
        self.policy_load_index_threshold.is_none()
            && self.policy_connecting_session_threshold.is_none()
    }

    /// `base` with the thresholds given set; the others keep their value.
    fn apply_to(&self, mut base: Map<String, Value>) -> Value {
        for (key, value) in [
            (
                POLICY_LOAD_INDEX_THRESHOLD,
                self.policy_load_index_threshold,
            ),
            (
                POLICY_CONNECTING_SESSION_THRESHOLD,
                self.policy_connecting_session_threshold,
            ),
        ] {
            if let Some(value) = value {
                base.insert(key.to_owned(), value.into());
            }
        }
        Value::Object(base)
    }
}

#[derive(clap::Args)]
struct UpdateArgs {
    #[command(flatten)]
    host: HostArg,
    /// Whether the host takes new sessions (false: drain mode).
    #[arg(long, value_name = "true|false")]
    allow_new_session: Option<bool>,
    /// Give the host to this user (personal pools).
    #[arg(long, value_name = "USER")]
    assigned_user: Option<String>,
    /// Take the host away from its user (sends assignedUser: null).
    #[arg(long, conflicts_with = "assigned_user")]
    unassign: bool,
    /// Replace the host's labels, comma-separated ("" clears them).
    #[arg(long, value_name = "TAG,…", value_delimiter = ',')]
    tags: Option<Vec<String>>,
    /// The host's MAC address, aa:bb:cc:dd:ee:ff ("" clears it).
    #[arg(long, value_name = "MAC")]
    mac_address: Option<String>,
    /// The host's fully qualified DNS name (rule AD4; "" clears it).
    #[arg(long, value_name = "FQDN")]
    dns_name: Option<String>,
    /// The image the host runs (rule U1; "" clears it).
    #[arg(long, value_name = "VERSION")]
    image_version: Option<String>,
    // A threshold not given keeps its current value: the host is read first,
    // since the broker's PATCH replaces the whole policy object.
    #[command(flatten)]
    policy: PolicyFlags,
    /// Set both thresholds of the host's policy to null, so the host uses
    /// the pool's values. With --policy-… flags: those are set and the other
    /// threshold is cleared.
    #[arg(long, help_heading = "Host Policy (LoadIndex pools)")]
    clear_policy: bool,
}

impl AddArgs {
    /// The body of the PUT: the settings given, the policy thresholds in a
    /// `policy` object (a threshold not given is null, the pool's value).
    fn body(&self) -> Value {
        let mut body = Body::default();
        body.set("address", Some(self.address.clone()))
            .set("allowNewSession", self.allow_new_session)
            .set("capabilities", self.capabilities.clone())
            .set("tags", self.tags.clone())
            .set("macAddress", self.mac_address.clone())
            .set("dnsName", self.dns_name.clone())
            .set("imageVersion", self.image_version.clone())
            .set(
                "policy",
                (!self.policy.is_empty()).then(|| self.policy.apply_to(Map::new())),
            );
        body.into_value()
    }
}

/// A flag's value for a PATCH: absent, `null` for "" (clear it), or the
/// value.
fn or_cleared(flag: &Option<String>) -> Option<Value> {
    flag.as_ref().map(|v| {
        if v.is_empty() {
            Value::Null
        } else {
            v.clone().into()
        }
    })
}

impl UpdateArgs {
    /// Whether the body needs the host's current policy: a PATCH replaces the
    /// whole `policy` object, so changing one threshold must resend the other.
    fn needs_current_policy(&self) -> bool {
        !self.clear_policy && !self.policy.is_empty()
    }

    /// The body of the PATCH. `current` is the host as the broker shows it,
    /// read first when `needs_current_policy`; its policy is sent back with
    /// the thresholds given changed (fields it has that this CLI does not
    /// know are kept too).
    fn body(&self, current: Option<&Value>) -> anyhow::Result<Value> {
        let policy = if self.clear_policy {
            let mut cleared = Map::new();
            cleared.insert(POLICY_LOAD_INDEX_THRESHOLD.to_owned(), Value::Null);
            cleared.insert(POLICY_CONNECTING_SESSION_THRESHOLD.to_owned(), Value::Null);
            Some(self.policy.apply_to(cleared))
        } else if self.policy.is_empty() {
            None
        } else {
            let base = current
                .and_then(|host| host.get("policy"))
                .and_then(Value::as_object)
                .cloned()
                .unwrap_or_default();
            Some(self.policy.apply_to(base))
        };
        let mut body = Body::default();
        body.set("allowNewSession", self.allow_new_session)
            .set("assignedUser", self.assigned_user.clone())
            .set("assignedUser", self.unassign.then_some(Value::Null))
            .set("policy", policy)
            .set(
                "tags",
                self.tags.as_ref().map(|t| {
                    t.iter()
                        .filter(|t| !t.is_empty())
                        .cloned()
                        .collect::<Vec<_>>()
                }),
            )
            .set("macAddress", or_cleared(&self.mac_address))
            .set("dnsName", or_cleared(&self.dns_name))
            .set("imageVersion", or_cleared(&self.image_version));
        if body.is_empty() {
            anyhow::bail!(
                "sessionhost update: nothing to change; give --allow-new-session, \
                 --assigned-user, --unassign, --tags, --mac-address, --dns-name, --image-version, \
                 --policy-load-index-threshold, --policy-connecting-session-threshold or \
                 --clear-policy"
            );
        }
        Ok(body.into_value())
    }
}

#[derive(clap::Args)]
struct RemoveArgs {
    #[command(flatten)]
    host: HostArg,
    /// Remove the host with its sessions.
    #[arg(long)]
    force: bool,
}

pub async fn run(args: SessionhostArgs) -> anyhow::Result<()> {
    let ctx = Context::new(&args.global)?;
    ctx.explain(execute(&ctx, args.command).await)
}

async fn execute(ctx: &Context, command: SessionhostCommand) -> anyhow::Result<()> {
    let client = &ctx.client;
    match command {
        SessionhostCommand::Add(add) => {
            let host = client.put(&host_path(&add.host), &add.body()).await?;
            ctx.print(&host, HOST_COLUMNS)
        }
        SessionhostCommand::Update(update) => {
            let path = host_path(&update.host);
            let current = if update.needs_current_policy() {
                Some(client.get(&path, &[]).await?)
            } else {
                None
            };
            let body = update.body(current.as_ref())?;
            let host = client.patch(&path, &body).await?;
            ctx.print(&host, HOST_COLUMNS)
        }
        SessionhostCommand::Show(show) => {
            let host = client.get(&host_path(&show), &[]).await?;
            ctx.print(&host, HOST_COLUMNS)
        }
        SessionhostCommand::List(list) => {
            let query: Vec<(&str, &str)> = list
                .image_version
                .as_deref()
                .map(|v| ("imageVersion", v))
                .into_iter()
                .collect();
            let hosts = client
                .list(&["hostPools", &list.host_pool, "sessionHosts"], &query)
                .await?;
            ctx.print(&hosts, HOST_COLUMNS)
        }
        SessionhostCommand::Remove(remove) => {
            let query: &[(&str, &str)] = if remove.force {
                &[("force", "true")]
            } else {
                &[]
            };
            let answer = client.delete(&host_path(&remove.host), query).await?;
            ctx.print(&answer, HOST_COLUMNS)
        }
        SessionhostCommand::Start(host) => {
            let [a, b, c, d] = host_path(&host);
            let action = client.post_action(&[a, b, c, d, "start"], &[]).await?;
            ctx.print(&action, ACTION_COLUMNS)
        }
        SessionhostCommand::Stop(stop) => {
            let [a, b, c, d] = host_path(&stop.host);
            let query: &[(&str, &str)] = if stop.force {
                &[("force", "true")]
            } else {
                &[]
            };
            let action = client.post_action(&[a, b, c, d, "stop"], query).await?;
            ctx.print(&action, ACTION_COLUMNS)
        }
    }
}

/// `hostPools/{pool}/sessionHosts/{host}`.
fn host_path(host: &HostArg) -> [&str; 4] {
    ["hostPools", &host.host_pool, "sessionHosts", &host.name]
}

#[cfg(test)]
mod tests {
    use clap::Parser as _;
    use serde_json::json;

    use super::super::output::{self, OutputFormat};
    use super::*;

    /// `deskbroker sessionhost …` on its own, to parse a command line as the
    /// binary does.
    #[derive(clap::Parser)]
    struct Cli {
        #[command(flatten)]
        args: SessionhostArgs,
    }

    fn parse(line: &str) -> Result<SessionhostCommand, clap::Error> {
        Cli::try_parse_from(std::iter::once("sessionhost").chain(line.split_whitespace()))
            .map(|cli| cli.args.command)
    }

    fn add_body(line: &str) -> Value {
        match parse(line).expect("valid command line") {
            SessionhostCommand::Add(add) => add.body(),
            _ => panic!("not an add: {line}"),
        }
    }

    fn update_args(line: &str) -> UpdateArgs {
        match parse(line).expect("valid command line") {
            SessionhostCommand::Update(update) => update,
            _ => panic!("not an update: {line}"),
        }
    }

    /// A host as the broker shows it, with this policy.
    fn host_with_policy(policy: Value) -> Value {
        json!({
            "name": "h1", "address": "10.0.0.5:3389", "allowNewSession": true,
            "status": "Available", "sessions": 3, "connectingSessions": 1, "loadIndex": 12,
            "lastHeartBeat": null, "assignedUser": null, "capabilities": ["rdp"],
            "policy": policy, "registeredAt": "2026-11-30T08:00:00Z"
        })
    }

    #[test]
    fn command_line_definition_is_consistent() {
        use clap::CommandFactory as _;
        Cli::command().debug_assert();
    }

    #[test]
    fn add_sends_a_policy_only_with_the_thresholds_given() {
        assert_eq!(
            add_body("add --host-pool p1 --name h1 --address 10.0.0.5:3389"),
            json!({"address": "10.0.0.5:3389"})
        );
        assert_eq!(
            add_body(
                "add --host-pool p1 --name h1 --address 10.0.0.5:3389 \
                 --policy-load-index-threshold 80"
            ),
            json!({"address": "10.0.0.5:3389", "policy": {"loadIndexThreshold": 80}})
        );
        assert_eq!(
            add_body(
                "add --host-pool p1 --name h1 --address 10.0.0.5:3389 \
                 --policy-load-index-threshold 80 --policy-connecting-session-threshold 10"
            ),
            json!({
                "address": "10.0.0.5:3389",
                "policy": {"loadIndexThreshold": 80, "connectingSessionThreshold": 10}
            })
        );
    }

    #[test]
    fn update_of_one_threshold_resends_the_other_from_the_current_host() {
        let update =
            update_args("update --host-pool p1 --name h1 --policy-load-index-threshold 50");
        assert!(update.needs_current_policy());
        let current =
            host_with_policy(json!({"loadIndexThreshold": null, "connectingSessionThreshold": 30}));
        assert_eq!(
            update.body(Some(&current)).expect("something to change"),
            json!({"policy": {"loadIndexThreshold": 50, "connectingSessionThreshold": 30}})
        );

        let update = update_args(
            "update --host-pool p1 --name h1 --policy-connecting-session-threshold 5 \
             --allow-new-session false",
        );
        let current =
            host_with_policy(json!({"loadIndexThreshold": 70, "connectingSessionThreshold": 30}));
        assert_eq!(
            update.body(Some(&current)).expect("something to change"),
            json!({
                "allowNewSession": false,
                "policy": {"loadIndexThreshold": 70, "connectingSessionThreshold": 5}
            })
        );
    }

    #[test]
    fn clear_policy_sets_both_thresholds_to_null_without_reading_the_host() {
        let update = update_args("update --host-pool p1 --name h1 --clear-policy");
        assert!(!update.needs_current_policy());
        assert_eq!(
            update.body(None).expect("something to change"),
            json!({"policy": {"loadIndexThreshold": null, "connectingSessionThreshold": null}})
        );

        let update = update_args(
            "update --host-pool p1 --name h1 --clear-policy --policy-load-index-threshold 50",
        );
        assert!(!update.needs_current_policy());
        assert_eq!(
            update.body(None).expect("something to change"),
            json!({"policy": {"loadIndexThreshold": 50, "connectingSessionThreshold": null}})
        );
    }

    #[test]
    fn update_without_policy_flags_neither_reads_the_host_nor_sends_a_policy() {
        let update = update_args("update --host-pool p1 --name h1 --unassign");
        assert!(!update.needs_current_policy());
        assert_eq!(
            update.body(None).expect("something to change"),
            json!({"assignedUser": null})
        );
        let error = update_args("update --host-pool p1 --name h1")
            .body(None)
            .expect_err("nothing to change");
        assert!(error.to_string().contains("--clear-policy"), "{error}");
    }

    #[test]
    fn policy_thresholds_must_be_whole_numbers() {
        for bad in [
            "update --host-pool p1 --name h1 --policy-load-index-threshold high",
            "update --host-pool p1 --name h1 --policy-connecting-session-threshold -1",
        ] {
            assert!(parse(bad).is_err(), "{bad} was accepted");
        }
    }

    #[test]
    fn host_table_shows_the_load_index_after_connecting_sessions() {
        let hosts = json!([
            host_with_policy(json!({"loadIndexThreshold": null, "connectingSessionThreshold": null})),
            {"name": "h2", "address": "10.0.0.6:3389", "allowNewSession": true,
             "status": "Unavailable", "sessions": 0, "connectingSessions": 0, "loadIndex": -1,
             "assignedUser": null}
        ]);
        let expected = "\
Name    Address        Status       AllowNewSession    Sessions    ConnectingSessions    LoadIndex    AssignedUser    ImageVersion
------  -------------  -----------  -----------------  ----------  --------------------  -----------  --------------  --------------
h1      10.0.0.5:3389  Available    true               3           1                     12
h2      10.0.0.6:3389  Unavailable  true               0           0                     -1
";
        assert_eq!(
            output::render(&hosts, OutputFormat::Table, HOST_COLUMNS),
            expected
        );
        // tsv keeps every scalar field in the broker's order, the policy
        // object left out.
        assert_eq!(
            output::render(&hosts[0], OutputFormat::Tsv, HOST_COLUMNS),
            "h1\t10.0.0.5:3389\ttrue\tAvailable\t3\t1\t12\t\t\t2026-11-30T08:00:00Z\n"
        );
    }
}
