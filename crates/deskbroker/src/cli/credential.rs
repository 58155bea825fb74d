//! `deskbroker credential create|list|revoke`: API credentials with roles
//! (rule T1), through `/api/v1/credentials`. Only the admin manages them;
//! the token of a new credential is printed once and kept nowhere else.
//! `deskbroker credential rotate-signing-key [--revoke-previous]`: a new
//! key for the broker's connection tickets and redirection tokens (rules
//! T3, R3), through `/api/v1/signingKeys/rotate` or `…/revoke`.

use super::output::Columns;
use super::{Body, Context, GlobalArgs};

/// Columns of a credential in a table (`token` only right after `create`).
const CREDENTIAL_COLUMNS: Columns = &["name", "role", "hostPools", "expirationTime", "token"];
/// Columns of the signing keys after a rotation (never a secret).
const SIGNING_KEY_COLUMNS: Columns = &[
    "signingKeyCreated",
    "verifyingKeys",
    "retiredKeysVerifySeconds",
];

/// Flags of `deskbroker credential`.
#[derive(clap::Args)]
#[command(arg_required_else_help = true)]
pub struct CredentialArgs {
    #[command(flatten)]
    global: GlobalArgs,
    #[command(subcommand)]
    command: CredentialCommand,
}

#[derive(clap::Subcommand)]
enum CredentialCommand {
    /// Create a credential with a role; prints its token once.
    Create(CreateArgs),
    /// List the credentials (no secrets).
    List,
    /// Revoke a credential: it stops working at once.
    Revoke(NameArg),
    /// Make a new key for connection tickets and redirection tokens. The
    /// previous keys verify for another 24 hours, so tickets already out
    /// keep working, unless --revoke-previous.
    RotateSigningKey(RotateArgs),
}

/// Flags of `deskbroker credential rotate-signing-key`.
#[derive(clap::Args)]
struct RotateArgs {
    /// Revoke every previous key at once: tickets and redirection tokens
    /// they signed stop working now (their users fetch new tickets). Use it
    /// when the key may have leaked (a store backup, a database dump).
    #[arg(long)]
    revoke_previous: bool,
}

#[derive(clap::Args)]
struct CreateArgs {
    /// Its name (letters, digits, `.`, `_`, `-`).
    #[arg(long, value_name = "NAME")]
    name: String,
    /// admin, operator, reader, portal, or gateway (a stand-alone RDP front door).
    #[arg(long, value_name = "ROLE")]
    role: String,
    /// Limit it to these host pools (comma-separated); default every pool.
    #[arg(long, value_name = "POOL,…", value_delimiter = ',')]
    host_pools: Vec<String>,
    /// Its life (`30d`, `12h`); default: it does not expire.
    #[arg(long, value_name = "DURATION", value_parser = humantime::parse_duration)]
    expires_in: Option<std::time::Duration>,
    /// Its own limit of API requests a second (bursts of twice as many),
    /// whatever serve --api-rate-limit says (rule T4).
    #[arg(long, value_name = "N")]
    rate_limit_per_second: Option<u32>,
}

#[derive(clap::Args)]
struct NameArg {
    /// Name of the credential.
    #[arg(long, value_name = "NAME")]
    name: String,
}

pub async fn run(args: CredentialArgs) -> anyhow::Result<()> {
    let ctx = Context::new(&args.global)?;
    ctx.explain(execute(&ctx, args.command).await)
}

async fn execute(ctx: &Context, command: CredentialCommand) -> anyhow::Result<()> {
    let client = &ctx.client;
    match command {
        CredentialCommand::Create(c) => {
            let mut body = Body::default();
            body.set("name", Some(c.name));
            body.set("role", Some(c.role));
            if !c.host_pools.is_empty() {
                body.set("hostPools", Some(c.host_pools));
            }
            body.set("expiresInSeconds", c.expires_in.map(|d| d.as_secs()));
            body.set("rateLimitPerSecond", c.rate_limit_per_second);
            let created = client.post(&["credentials"], &body.into_value()).await?;
            ctx.print(&created, CREDENTIAL_COLUMNS)
        }
        CredentialCommand::List => {
            let list = client.list(&["credentials"], &[]).await?;
            ctx.print(&list, CREDENTIAL_COLUMNS)
        }
        CredentialCommand::Revoke(r) => {
            let answer = client.delete(&["credentials", &r.name], &[]).await?;
            ctx.print(&answer, CREDENTIAL_COLUMNS)
        }
        CredentialCommand::RotateSigningKey(r) => {
            let action = if r.revoke_previous {
                "revoke"
            } else {
                "rotate"
            };
            let answer = client.post_action(&["signingKeys", action], &[]).await?;
            ctx.print(&answer, SIGNING_KEY_COLUMNS)
        }
    }
}
