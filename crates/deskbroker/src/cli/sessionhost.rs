//! `deskbroker sessionhost add|update|show|list|remove`: the session hosts of
//! a pool, through `/api/v1/hostPools/{pool}/sessionHosts`.

use serde_json::Value;

use super::output::Columns;
use super::{Body, Context, GlobalArgs};

/// Columns of a session host in a table: where it is, whether it takes new
/// sessions, how loaded it is, and its owner in a personal pool.
const HOST_COLUMNS: Columns = &[
    "name",
    "address",
    "status",
    "allowNewSession",
    "sessions",
    "connectingSessions",
    "assignedUser",
];

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
    /// Drain or undrain a host, or assign it to a user (PATCH).
    Update(UpdateArgs),
    /// Show one session host.
    Show(HostArg),
    /// List the session hosts of a pool, in query order.
    List(PoolArg),
    /// Remove a session host (refused while it has sessions, unless --force).
    Remove(RemoveArgs),
}

#[derive(clap::Args)]
struct PoolArg {
    /// Name of the host pool.
    #[arg(long, value_name = "POOL")]
    host_pool: String,
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
    let client = &ctx.client;
    match args.command {
        SessionhostCommand::Add(add) => {
            let mut body = Body::default();
            body.set("address", Some(add.address))
                .set("allowNewSession", add.allow_new_session)
                .set("capabilities", add.capabilities);
            let host = client
                .put(&host_path(&add.host), &body.into_value())
                .await?;
            ctx.print(&host, HOST_COLUMNS)
        }
        SessionhostCommand::Update(update) => {
            let mut body = Body::default();
            body.set("allowNewSession", update.allow_new_session)
                .set("assignedUser", update.assigned_user)
                .set("assignedUser", update.unassign.then_some(Value::Null));
            if body.is_empty() {
                anyhow::bail!(
                    "sessionhost update: nothing to change; give --allow-new-session, \
                     --assigned-user or --unassign"
                );
            }
            let host = client
                .patch(&host_path(&update.host), &body.into_value())
                .await?;
            ctx.print(&host, HOST_COLUMNS)
        }
        SessionhostCommand::Show(show) => {
            let host = client.get(&host_path(&show), &[]).await?;
            ctx.print(&host, HOST_COLUMNS)
        }
        SessionhostCommand::List(list) => {
            let hosts = client
                .list(&["hostPools", &list.host_pool, "sessionHosts"], &[])
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
    }
}

/// `hostPools/{pool}/sessionHosts/{host}`.
fn host_path(host: &HostArg) -> [&str; 4] {
    ["hostPools", &host.host_pool, "sessionHosts", &host.name]
}
