//! `deskbroker serve`: runs the broker (HTTP API) on the embedded SQLite
//! store or on PostgreSQL.

use std::net::SocketAddr;
use std::path::PathBuf;

/// Flags of `deskbroker serve` (see `shared/spec/api.md`).
#[derive(clap::Args, Debug, Clone)]
pub struct ServeArgs {
    /// Address the HTTP API listens on.
    #[arg(long, env = "DESKBROKER_LISTEN", default_value = "127.0.0.1:8080")]
    pub listen: SocketAddr,
    /// Directory of the embedded SQLite store and the generated admin token.
    #[arg(long, env = "DESKBROKER_DATA_DIR", default_value = "./deskbroker-data")]
    pub data_dir: PathBuf,
}

pub async fn run(args: ServeArgs) -> anyhow::Result<()> {
    anyhow::bail!("serve is being wired: {args:?}")
}
