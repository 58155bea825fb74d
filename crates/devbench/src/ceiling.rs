//! `deskbroker-devbench ceiling-server`: the HTTP stack's own ceiling, the
//! baseline of `scripts/bench-http.sh`. It answers the connect route with a
//! trivial handler — the body parsed as JSON, a JSON object of the size of a
//! connect's answer written back — on the same axum, hyper and tokio runtime
//! as `serve`, and keeps no state and writes nothing. A durable connect's
//! cost is what it adds over this, measured by the same load tool in the
//! same run.

use axum::Json;
use axum::routing::post;
use serde_json::{Value, json};

/// Flags of `deskbroker-devbench ceiling-server`.
#[derive(clap::Args, Debug, Clone)]
pub struct CeilingArgs {
    /// Address to listen on (port 0 picks a free port; the address is printed).
    #[arg(long, default_value = "127.0.0.1:0")]
    pub listen: std::net::SocketAddr,
}

pub async fn run(args: CeilingArgs) -> anyhow::Result<()> {
    let app = axum::Router::new().route("/api/v1/hostPools/{pool}/connect", post(connect));
    let listener = tokio::net::TcpListener::bind(args.listen).await?;
    let addr = listener.local_addr()?;
    println!("listening on http://{addr}");
    deskbroker::ready::Ready {
        api: Some(format!("http://{addr}")),
        ..Default::default()
    }
    .print()?;
    axum::serve(listener, app).await?;
    Ok(())
}

/// Answers what a connect answers, in shape and size, without deciding.
async fn connect(Json(body): Json<Value>) -> Json<Value> {
    let user = body["user"].as_str().unwrap_or_default().to_string();
    Json(json!({
        "sessionId": "0193a0c4-5b6e-7c8d-9e0f-1a2b3c4d5e6f",
        "hostPool": "bench-storm",
        "sessionHost": "h000001",
        "hostAddress": "10.0.0.1:3389",
        "userPrincipalName": user,
        "status": "Pending",
        "reconnected": false,
    }))
}
