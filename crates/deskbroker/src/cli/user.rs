//! `deskbroker user show NAME`: a user as the directory sees them (rule
//! AD1), through `/api/v1/users/{name}`, and `deskbroker user workspace
//! NAME`: what they are given (rule F1), and `deskbroker user feed NAME`:
//! what their workspace feed lists (rule F4). `show`: whether it knows them, their
//! entry, and the groups (nested ones included) that decide which pools
//! they may use. Needs a broker started with `--directory-url`.

use super::output::Columns;
use super::{Context, GlobalArgs};

/// Columns of a user in a table (`--output json` shows every field).
const USER_COLUMNS: Columns = &["name", "found", "groups", "cachedSeconds"];

/// Flags of `deskbroker user`.
#[derive(clap::Args)]
#[command(arg_required_else_help = true)]
pub struct UserArgs {
    #[command(flatten)]
    global: GlobalArgs,
    #[command(subcommand)]
    command: UserCommand,
}

#[derive(clap::Subcommand)]
enum UserCommand {
    /// Show a user's directory groups, nested ones included.
    Show(ShowArgs),
    /// What a user is given: each pool's desktop and the published
    /// applications their application groups give them.
    Workspace(WorkspaceArgs),
    /// What a user's workspace feed lists (the desktops and applications
    /// whose files open without a ticket) and its LastUpdated, as the RD
    /// Gateway serves it at /RDWeb/Feed/webfeed.aspx. Admin only.
    Feed(FeedArgs),
}

#[derive(clap::Args)]
struct FeedArgs {
    /// The user, as the gateway names them once signed in (`name@domain`).
    name: String,
}

/// Columns of a user's feed, one row a resource.
const FEED_COLUMNS: Columns = &["hostPool", "alias", "title", "folder", "terminalServer"];

#[derive(clap::Args)]
struct WorkspaceArgs {
    /// The user.
    name: String,
    /// The user's groups, comma-separated, when the broker has no directory.
    #[arg(long, value_name = "GROUP,…", value_delimiter = ',')]
    groups: Vec<String>,
}

/// Columns of a user's workspace, one row a pool.
const WORKSPACE_COLUMNS: Columns = &["hostPool", "title", "desktop", "applications"];

#[derive(clap::Args)]
struct ShowArgs {
    /// The user: `name`, `name@suffix` or `DOMAIN\name`.
    name: String,
    /// Read the directory now instead of the broker's cached answer.
    #[arg(long)]
    refresh: bool,
}

pub async fn run(args: UserArgs) -> anyhow::Result<()> {
    let ctx = Context::new(&args.global)?;
    ctx.explain(execute(&ctx, args.command).await)
}

async fn execute(ctx: &Context, command: UserCommand) -> anyhow::Result<()> {
    match command {
        UserCommand::Show(s) => {
            let query: &[(&str, &str)] = if s.refresh {
                &[("refresh", "true")]
            } else {
                &[]
            };
            let user = ctx.client.get(&["users", &s.name], query).await?;
            ctx.print(&user, USER_COLUMNS)
        }
        UserCommand::Workspace(w) => {
            let groups = w.groups.join(",");
            let query: Vec<(&str, &str)> = if groups.is_empty() {
                Vec::new()
            } else {
                vec![("groups", groups.as_str())]
            };
            let mut answer = ctx
                .client
                .get(&["users", &w.name, "workspace"], &query)
                .await?;
            if ctx.output == super::output::OutputFormat::Json {
                return ctx.print(&answer, WORKSPACE_COLUMNS);
            }
            // A table: a row a pool, its applications by alias.
            if let Some(pools) = answer["value"].as_array_mut() {
                for pool in pools {
                    let aliases: Vec<serde_json::Value> = pool["applications"]
                        .as_array()
                        .map(|apps| apps.iter().map(|a| a["alias"].clone()).collect())
                        .unwrap_or_default();
                    pool["applications"] = serde_json::Value::Array(aliases);
                }
            }
            ctx.print(&answer["value"].take(), WORKSPACE_COLUMNS)
        }
        UserCommand::Feed(f) => {
            let mut answer = ctx.client.get(&["users", &f.name, "feed"], &[]).await?;
            if ctx.output == super::output::OutputFormat::Json {
                return ctx.print(&answer, FEED_COLUMNS);
            }
            ctx.print(&answer["resources"].take(), FEED_COLUMNS)
        }
    }
}
