//! `deskbroker user show NAME`: a user as the directory sees them (rule
//! AD1), through `/api/v1/users/{name}`: whether it knows them, their
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
}

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
    }
}
