//! `deskbroker gateway`: the RDP front door on a machine of its own,
//! placing users through a broker's HTTP API (`serve --rdp-listen` runs the
//! same front door inside the broker instead).

use std::io::Write;
use std::net::SocketAddr;
use std::sync::Arc;

use anyhow::Context;

/// Flags of `deskbroker gateway`.
#[derive(clap::Args, Debug, Clone)]
pub struct GatewayArgs {
    /// The broker whose rules place the users.
    #[arg(long, env = "DESKBROKER_URL", default_value = "http://127.0.0.1:8080")]
    pub broker: api::BrokerUrl,
    /// The broker's admin token (the front door places users, marks their
    /// sessions Active and Disconnected, and ends anonymous ones).
    #[arg(long, env = "DESKBROKER_TOKEN", hide_env_values = true)]
    pub token: String,
    /// Address RDP clients connect to (port 0 picks a free port; printed).
    #[arg(long = "rdp-listen", env = "DESKBROKER_RDP_LISTEN")]
    pub rdp_listen: SocketAddr,
    /// Pool of clients that send no routing token (rule R1).
    #[arg(long = "rdp-default-pool", env = "DESKBROKER_RDP_DEFAULT_POOL")]
    pub rdp_default_pool: Option<String>,
    /// How an `https://` broker is trusted.
    #[command(flatten)]
    pub tls: crate::cli::TlsArgs,
}

pub async fn run(args: GatewayArgs) -> anyhow::Result<()> {
    if let Some(pool) = &args.rdp_default_pool {
        placement::validate_name("--rdp-default-pool", pool).map_err(anyhow::Error::msg)?;
    }
    let trust = args.tls.trust()?;
    let placer = gateway::Http::with_trust(args.broker.clone(), &args.token, &trust)
        .map_err(|e| anyhow::anyhow!("broker {}: {e}", args.broker))?;
    let listener = tokio::net::TcpListener::bind(args.rdp_listen)
        .await
        .with_context(|| format!("cannot listen for RDP on {}", args.rdp_listen))?;
    let addr = listener.local_addr()?;
    tracing::info!(%addr, broker = %args.broker, "rdp front door listening");
    println!("rdp front door listening on {addr}");
    std::io::stdout().flush()?;
    let config = gateway::Config::new(args.rdp_default_pool);
    gateway::serve(
        listener,
        Arc::new(placer),
        config,
        crate::serve::shutdown_signal(),
    )
    .await;
    tracing::info!("rdp front door stopped");
    Ok(())
}
