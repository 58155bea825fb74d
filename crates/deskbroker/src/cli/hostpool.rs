//! `deskbroker hostpool create|update|show|list|delete`: host pools, through
//! `/api/v1/hostPools`.

use super::output::Columns;
use super::{Body, Context, GlobalArgs};

/// Columns of one pool in a table; `hostpool show` must print exactly these
/// (the example of `api.md`).
const POOL_COLUMNS: Columns = &["name", "loadBalancerType", "maxSessionLimit"];

/// Columns of `hostpool list`: with several pools, their type tells them apart.
const POOL_LIST_COLUMNS: Columns = &[
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
}

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
    /// Capabilities every host of the pool offers, comma-separated (default rdp).
    #[arg(long, value_name = "CAP,…", value_delimiter = ',')]
    standard_capabilities: Option<Vec<String>>,
    /// Free text describing the pool.
    #[arg(long, value_name = "TEXT")]
    description: Option<String>,
    /// Name shown to users.
    #[arg(long, value_name = "TEXT")]
    friendly_name: Option<String>,
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
            .set("standardCapabilities", self.standard_capabilities)
            .set("description", self.description)
            .set("friendlyName", self.friendly_name);
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
    let client = &ctx.client;
    match args.command {
        HostpoolCommand::Create(create) => {
            let mut body = Body::default();
            body.set("hostPoolType", Some(create.host_pool_type))
                .set("loadBalancerType", Some(create.load_balancer_type));
            create.settings.add_to(&mut body);
            let pool = client
                .put(&["hostPools", &create.name], &body.into_value())
                .await?;
            ctx.print(&pool, POOL_COLUMNS)
        }
        HostpoolCommand::Update(update) => {
            let mut body = Body::default();
            body.set("loadBalancerType", update.load_balancer_type);
            update.settings.add_to(&mut body);
            if body.is_empty() {
                anyhow::bail!(
                    "hostpool update: nothing to change; give at least one setting, \
                     e.g. --load-balancer-type or --max-session-limit"
                );
            }
            let pool = client
                .patch(&["hostPools", &update.name], &body.into_value())
                .await?;
            ctx.print(&pool, POOL_COLUMNS)
        }
        HostpoolCommand::Show(show) => {
            let pool = client.get(&["hostPools", &show.name], &[]).await?;
            ctx.print(&pool, POOL_COLUMNS)
        }
        HostpoolCommand::List => {
            let pools = client.list(&["hostPools"], &[]).await?;
            ctx.print(&pools, POOL_LIST_COLUMNS)
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
    }
}
