//! `deskbroker-devbench rdp-ceiling-server`: the RDP front door's
//! own ceiling, the `ceiling` target of `rdp`. It is the product's
//! front door — the same `gateway::serve`, accept loop, first-PDU parsing,
//! dial, relay and metrics recorder as `serve --rdp-listen` — behind a
//! placer that keeps what HAProxy keeps: a table in memory of which host
//! each user was sent to (a new user goes to the next host in turn). It
//! decides nothing by the rules, writes nothing and keeps nothing after it
//! stops. Like the HAProxy the bench starts, it relays anyone who reaches
//! it to the hosts it is given: the bench runs it on loopback only.
//!
//! What the broker's front door costs over HAProxy is then split in two:
//! this ceiling ÷ HAProxy is what the relay costs on tokio against
//! HAProxy's event loop, and the broker ÷ this ceiling is the broker's own
//! work per connection (placement under the pool's lock, the durable
//! session before the host is dialled, the session marks).

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use anyhow::Context as _;
use deskbroker::benchkit::broker::{ready_line, spawn_child};
use gateway::{ConnectInput, FrontDoorPolicy, Placer, PlacerError};
use placement::{Placement, SessionState};

/// The most users the table holds; a new user past it is refused, so a
/// long run cannot grow the process without bound.
const MAX_USERS: usize = 1_000_000;

/// Flags of `deskbroker-devbench rdp-ceiling-server`.
#[derive(clap::Args, Debug, Clone)]
pub struct RdpCeilingArgs {
    /// Address of the front door (port 0 picks a free port; the address is
    /// printed).
    #[arg(long, default_value = "127.0.0.1:0")]
    pub listen: SocketAddr,
    /// A session host's address (repeat for each).
    #[arg(long = "host", value_name = "ADDR", required = true)]
    pub hosts: Vec<SocketAddr>,
}

pub async fn run(args: RdpCeilingArgs) -> anyhow::Result<()> {
    broker::telemetry::init();
    let listener = tokio::net::TcpListener::bind(args.listen).await?;
    println!("rdp front door listening on {}", listener.local_addr()?);
    deskbroker::ready::Ready {
        rdp: Some(listener.local_addr()?),
        ..Default::default()
    }
    .print()?;
    let placer = Arc::new(Sticky::new(args.hosts));
    gateway::serve(listener, placer, config(), async {
        let _ = tokio::signal::ctrl_c().await;
    })
    .await;
    Ok(())
}

/// The front door's settings as `serve` makes them by default, with the
/// per-source bounds lifted as `rdp` lifts the private broker's (the load
/// comes from one address, and the bounds would measure themselves, not
/// the relay). Its redirection key is random: the ceiling signs no
/// redirection token.
fn config() -> gateway::Config {
    let mut config = gateway::Config::new(Some(POOL.to_string()));
    config.bounds.source_limits = gateway::sources::Limits {
        max_connections: u32::MAX as usize,
        max_handshakes: u32::MAX as usize,
        handshakes_per_minute: u32::MAX,
        new_sessions_per_minute: u32::MAX,
        ..gateway::sources::Limits::default()
    };
    let key = format!("{:032x}", rand::random::<u128>());
    config.redirect_keys =
        gateway::redirect::RedirectKeys::of(gateway::redirect::RedirectKey::derive(&key));
    config
}

/// The ceiling started for `rdp` in a process of its own (so that
/// its CPU time is its own), killed at the end: it keeps nothing.
pub struct Ceiling {
    child: tokio::process::Child,
    pub address: SocketAddr,
}

impl Ceiling {
    pub async fn start(hosts: &[SocketAddr]) -> anyhow::Result<Ceiling> {
        let mut command = crate::devbench_command()?;
        command.arg("rdp-ceiling-server");
        for h in hosts {
            command.arg("--host").arg(h.to_string());
        }
        let (child, mut lines) = spawn_child(command, "the front door's ceiling")?;
        let address = ready_line(&mut lines, "the front door's ceiling")
            .await?
            .rdp
            .context("the front door's ceiling's ready line names no address")?;
        Ok(Ceiling { child, address })
    }

    pub fn pid(&self) -> Option<u32> {
        self.child.id()
    }

    pub async fn stop(mut self) {
        let _ = self.child.kill().await;
    }
}

/// The only pool of the ceiling (its front door's default pool).
const POOL: &str = "bench";

/// A user's host, remembered as HAProxy's stick table does.
#[derive(Default)]
struct Table {
    /// User → (session id, host index).
    by_user: HashMap<String, (String, usize)>,
    /// Session id → user, for the front door's logoff.
    by_session: HashMap<String, String>,
}

struct Sticky {
    hosts: Vec<SocketAddr>,
    table: Mutex<Table>,
    next: AtomicU64,
}

impl Sticky {
    fn new(hosts: Vec<SocketAddr>) -> Sticky {
        Sticky {
            hosts,
            table: Mutex::new(Table::default()),
            next: AtomicU64::new(0),
        }
    }

    fn placement(&self, id: &str, host: usize, reconnect: bool) -> Placement {
        let address = self.hosts[host].to_string();
        Placement {
            session_id: id.to_string(),
            host: address.clone(),
            address,
            reconnect,
            state: if reconnect {
                SessionState::Disconnected
            } else {
                SessionState::Pending
            },
        }
    }
}

impl Placer for Sticky {
    async fn connect(&self, _pool: &str, request: &ConnectInput) -> Result<Placement, PlacerError> {
        let mut t = self.table.lock().unwrap_or_else(|p| p.into_inner());
        if let Some((id, host)) = t.by_user.get(&request.user) {
            return Ok(self.placement(id, *host, true));
        }
        if t.by_user.len() >= MAX_USERS {
            return Err(PlacerError::Refused {
                code: api::ErrorCode::NoSessionHostAvailable,
                message: format!("the ceiling's table holds {MAX_USERS} users"),
            });
        }
        let n = self.next.fetch_add(1, Ordering::Relaxed);
        let host = (n % self.hosts.len() as u64) as usize;
        let id = format!("ceiling-{n}");
        t.by_user.insert(request.user.clone(), (id.clone(), host));
        t.by_session.insert(id.clone(), request.user.clone());
        Ok(self.placement(&id, host, false))
    }

    async fn set_session_state(
        &self,
        _pool: &str,
        _session_id: &str,
        _state: SessionState,
    ) -> Result<(), PlacerError> {
        Ok(())
    }

    async fn logoff(&self, _pool: &str, session_id: &str) -> Result<(), PlacerError> {
        let mut t = self.table.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(user) = t.by_session.remove(session_id) {
            t.by_user.remove(&user);
        }
        Ok(())
    }

    async fn front_door_policy(&self, _pool: &str) -> Result<FrontDoorPolicy, PlacerError> {
        Ok(FrontDoorPolicy {
            allowed: true,
            require_ticket: false,
            windows_sign_in: false,
        })
    }

    async fn sign_in_refused(&self, _source: std::net::IpAddr, _user: Option<&str>, _reason: &str) {
    }

    fn now_unix_seconds(&self) -> u64 {
        gateway::placer::system_unix_seconds()
    }

    async fn host_at(&self, _pool: &str, _address: &str) -> Result<Option<String>, PlacerError> {
        Ok(None)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn input(user: &str) -> ConnectInput {
        ConnectInput {
            user: user.into(),
            ..ConnectInput::default()
        }
    }

    #[tokio::test]
    async fn a_user_goes_back_to_their_host_until_logged_off() {
        let hosts: Vec<SocketAddr> = vec![
            "127.0.0.1:3001".parse().unwrap(),
            "127.0.0.1:3002".parse().unwrap(),
        ];
        let p = Sticky::new(hosts);
        let a = p.connect(POOL, &input("a")).await.unwrap();
        let b = p.connect(POOL, &input("b")).await.unwrap();
        assert!(!a.reconnect && !b.reconnect);
        assert_ne!(a.address, b.address, "new users take the hosts in turn");
        let again = p.connect(POOL, &input("a")).await.unwrap();
        assert!(again.reconnect);
        assert_eq!(
            (again.session_id.as_str(), again.address.as_str()),
            (a.session_id.as_str(), a.address.as_str())
        );
        p.logoff(POOL, &a.session_id).await.unwrap();
        let after = p.connect(POOL, &input("a")).await.unwrap();
        assert!(!after.reconnect, "a logged-off user is placed anew");
        assert_ne!(after.session_id, a.session_id);
    }
}
