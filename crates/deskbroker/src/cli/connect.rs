//! `deskbroker connect`: asks the broker where a user's desktop is, through
//! `POST /api/v1/hostPools/{pool}/connect`, as an RDP front door would.

use super::output::Columns;
use super::{Body, Context, GlobalArgs};

/// Columns of a connect answer in a table: where to go, and whether it is the
/// user's existing session (rule S1).
const CONNECT_COLUMNS: Columns = &[
    "sessionId",
    "sessionHost",
    "address",
    "reconnect",
    "sessionState",
];

/// Flags of `deskbroker connect`.
#[derive(clap::Args)]
pub struct ConnectArgs {
    /// Name of the host pool.
    #[arg(long, value_name = "POOL")]
    host_pool: String,
    /// The user who connects, e.g. alice@contoso.com.
    #[arg(long, value_name = "USER")]
    user: String,
    /// Capabilities the host must offer, comma-separated (e.g. rdp,gpu).
    #[arg(long, value_name = "CAP,…", value_delimiter = ',')]
    requires: Option<Vec<String>>,
    /// Pick this one of the user's own hosts (MultiplePersistent pools).
    #[arg(long, value_name = "HOST")]
    session_host: Option<String>,
    /// The user's groups, comma-separated, for a pool with entitledGroups
    /// (rule T2: the caller's word, as a portal that signed the user in
    /// would give it).
    #[arg(long, value_name = "GROUP,…", value_delimiter = ',')]
    groups: Option<Vec<String>>,
    /// Last, because its help heading applies to the flags after it.
    #[command(flatten)]
    global: GlobalArgs,
}

pub async fn run(args: ConnectArgs) -> anyhow::Result<()> {
    let ctx = Context::new(&args.global)?;
    let mut body = Body::default();
    body.set("user", Some(args.user))
        .set("requires", args.requires)
        .set("sessionHost", args.session_host)
        .set("groups", args.groups);
    let answer = ctx
        .client
        .post(
            &["hostPools", &args.host_pool, "connect"],
            &body.into_value(),
        )
        .await;
    ctx.explain(answer.and_then(|answer| ctx.print(&answer, CONNECT_COLUMNS)))
}
