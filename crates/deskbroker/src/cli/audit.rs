//! `deskbroker audit list`: the audit log (rule T5), newest first, through
//! `/api/v1/auditLog`. Any credential that may read it can run it; one
//! limited to some pools sees their entries only.

use super::output::Columns;
use super::{Context, GlobalArgs};

/// Columns of an entry in a table (`--output json` shows before and after).
/// `count` is set on an entry that stands for several refused requests of
/// one minute (empty for one request).
const AUDIT_COLUMNS: Columns = &[
    "id",
    "time",
    "actor",
    "action",
    "outcome",
    "count",
    "target",
    "endReason",
];

/// Flags of `deskbroker audit`.
#[derive(clap::Args)]
#[command(arg_required_else_help = true)]
pub struct AuditArgs {
    #[command(flatten)]
    global: GlobalArgs,
    #[command(subcommand)]
    command: AuditCommand,
}

#[derive(clap::Subcommand)]
enum AuditCommand {
    /// List entries, newest first.
    List(ListArgs),
}

#[derive(clap::Args)]
struct ListArgs {
    /// Only entries at or after this RFC 3339 time (2026-01-31T08:00:00Z).
    #[arg(long, value_name = "TIME")]
    since: Option<String>,
    /// Only this actor's entries (admin, credential:NAME, host:POOL/HOST,
    /// registration-token:POOL).
    #[arg(long, value_name = "ACTOR")]
    actor: Option<String>,
    /// Only entries of this host pool.
    #[arg(long, value_name = "POOL")]
    host_pool: Option<String>,
    /// At most this many entries (1..=1000).
    #[arg(long, value_name = "N", default_value_t = 100)]
    limit: u32,
    /// Only entries older than this id (to continue a list).
    #[arg(long, value_name = "ID")]
    before_id: Option<i64>,
}

pub async fn run(args: AuditArgs) -> anyhow::Result<()> {
    let ctx = Context::new(&args.global)?;
    ctx.explain(execute(&ctx, args.command).await)
}

async fn execute(ctx: &Context, command: AuditCommand) -> anyhow::Result<()> {
    match command {
        AuditCommand::List(l) => {
            let limit = l.limit.to_string();
            let before_id = l.before_id.map(|i| i.to_string());
            let mut query = vec![("pageSize", limit.as_str())];
            for (name, value) in [
                ("since", &l.since),
                ("actor", &l.actor),
                ("hostPool", &l.host_pool),
                ("beforeId", &before_id),
            ] {
                if let Some(v) = value {
                    query.push((name, v.as_str()));
                }
            }
            let list = ctx.client.list(&["auditLog"], &query).await?;
            ctx.print(&list, AUDIT_COLUMNS)
        }
    }
}
