//! `deskbroker session list|show|update|logoff|send-message`: user sessions
//! of a pool, through `/api/v1/hostPools/{pool}/userSessions`.

use super::output::Columns;
use super::{Body, Context, GlobalArgs};

/// Columns of a session in a table.
const SESSION_COLUMNS: Columns = &[
    "id",
    "sessionHost",
    "userPrincipalName",
    "sessionState",
    "createTime",
];

/// Columns of a session list with its ended sessions (`--include-ended`):
/// when and why each ended (empty for the live ones).
const ENDED_SESSION_COLUMNS: Columns = &[
    "id",
    "sessionHost",
    "userPrincipalName",
    "sessionState",
    "createTime",
    "endedAt",
    "endReason",
];

/// Flags of `deskbroker session`.
#[derive(clap::Args)]
#[command(arg_required_else_help = true)]
pub struct SessionArgs {
    #[command(flatten)]
    global: GlobalArgs,
    #[command(subcommand)]
    command: SessionCommand,
}

#[derive(clap::Subcommand)]
enum SessionCommand {
    /// List the sessions of a pool, optionally of one user or one host;
    /// with --include-ended, then its recently ended ones with when and
    /// why each ended.
    List(ListArgs),
    /// Show one session.
    Show(SessionIdArg),
    /// Mark a session Active or Disconnected (PATCH).
    Update(UpdateArgs),
    /// Log a session off: it ends and frees its slot (DELETE).
    Logoff(SessionIdArg),
    /// Send a message to the session's user, shown on their host by its
    /// agent's --message-command after its next heartbeat.
    SendMessage(SendMessageArgs),
}

#[derive(clap::Args)]
struct SendMessageArgs {
    #[command(flatten)]
    session: SessionIdArg,
    /// The message's title (at most 256 characters).
    #[arg(long, value_name = "TEXT")]
    title: String,
    /// The message (at most 4096 characters; newlines allowed).
    #[arg(long, value_name = "TEXT")]
    message: String,
}

/// Columns of a queued message.
const MESSAGE_COLUMNS: Columns = &["id", "sessionId", "user", "title"];

#[derive(clap::Args)]
struct ListArgs {
    /// Name of the host pool.
    #[arg(long, value_name = "POOL")]
    host_pool: String,
    /// Only the sessions of this user.
    #[arg(long, value_name = "USER")]
    user: Option<String>,
    /// Only the sessions on this session host.
    #[arg(long, value_name = "HOST")]
    session_host: Option<String>,
    /// Also list the pool's recently ended sessions (its last 1000 ends
    /// in the audit log, latest first), each with endedAt and its
    /// endReason: logoff, released, pendingTimeout, noLogonEvidence,
    /// notListed, disconnectedTimeout, lifetimeExceeded, hostRemoved or
    /// scalingLogoff (see docs/operations.md).
    #[arg(long)]
    include_ended: bool,
}

#[derive(clap::Args)]
struct SessionIdArg {
    /// Name of the host pool.
    #[arg(long, value_name = "POOL")]
    host_pool: String,
    /// Id of the session (session list shows it).
    #[arg(long, value_name = "ID")]
    id: String,
}

#[derive(clap::Args)]
struct UpdateArgs {
    #[command(flatten)]
    session: SessionIdArg,
    /// New state: Active or Disconnected.
    #[arg(long, value_name = "Active|Disconnected")]
    state: String,
}

pub async fn run(args: SessionArgs) -> anyhow::Result<()> {
    let ctx = Context::new(&args.global)?;
    ctx.explain(execute(&ctx, args.command).await)
}

async fn execute(ctx: &Context, command: SessionCommand) -> anyhow::Result<()> {
    let client = &ctx.client;
    match command {
        SessionCommand::List(list) => {
            let mut query = Vec::new();
            if let Some(user) = &list.user {
                query.push(("user", user.as_str()));
            }
            if let Some(host) = &list.session_host {
                query.push(("sessionHost", host.as_str()));
            }
            if list.include_ended {
                query.push(("includeEnded", "true"));
            }
            let sessions = client
                .list(&["hostPools", &list.host_pool, "userSessions"], &query)
                .await?;
            let columns = if list.include_ended {
                ENDED_SESSION_COLUMNS
            } else {
                SESSION_COLUMNS
            };
            ctx.print(&sessions, columns)
        }
        SessionCommand::Show(show) => {
            let session = client.get(&session_path(&show), &[]).await?;
            ctx.print(&session, SESSION_COLUMNS)
        }
        SessionCommand::Update(update) => {
            let mut body = Body::default();
            body.set("sessionState", Some(update.state));
            let session = client
                .patch(&session_path(&update.session), &body.into_value())
                .await?;
            ctx.print(&session, SESSION_COLUMNS)
        }
        SessionCommand::SendMessage(send) => {
            let [a, b, c, d] = session_path(&send.session);
            let body = serde_json::json!({"title": send.title, "message": send.message});
            let queued = client.post(&[a, b, c, d, "sendMessage"], &body).await?;
            ctx.print(&queued, MESSAGE_COLUMNS)
        }
        SessionCommand::Logoff(logoff) => {
            let answer = client.delete(&session_path(&logoff), &[]).await?;
            ctx.print(&answer, SESSION_COLUMNS)
        }
    }
}

/// `hostPools/{pool}/userSessions/{id}`.
fn session_path(session: &SessionIdArg) -> [&str; 4] {
    ["hostPools", &session.host_pool, "userSessions", &session.id]
}
