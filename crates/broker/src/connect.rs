//! Placing users, for every way a logon arrives: the HTTP API's `connect`
//! and the RDP front door. One implementation, so both follow every rule
//! and both are counted in the same metrics.

use std::time::Instant;

use api::types::ConnectInput;
use placement::{ConnectRequest, Placement, SessionState};

use crate::error::BrokerError;
use crate::state::Broker;

/// An `.rdp` connection file and the pool it is for.
#[derive(Clone, Debug)]
pub struct ConnectionFile {
    pub pool: String,
    pub body: String,
}

impl Broker {
    /// Places a user (rules S1–S4, B, D, H, P7) and answers once the new
    /// session is durable.
    pub async fn connect(&self, pool: &str, c: &ConnectInput) -> Result<Placement, BrokerError> {
        let started = Instant::now();
        let from_memory = self.writer.failure().is_some();
        let result = if let Err(e) = self.check_ticket(pool, c) {
            Err(e)
        } else if from_memory {
            self.reconnect_from_memory(pool, c)
        } else {
            self.place(pool, c).await
        };
        let outcome = match &result {
            Ok(_) if from_memory => "reconnect_from_memory",
            Ok(p) if p.reconnect => "reconnect",
            Ok(_) => "placed",
            Err(e) => e.code().as_str(),
        };
        metrics::counter!("deskbroker_placements_total", "outcome" => outcome).increment(1);
        metrics::histogram!("deskbroker_connect_duration_seconds").record(started.elapsed());
        result
    }

    /// The engine's decision, written before it is answered.
    async fn place(&self, pool: &str, c: &ConnectInput) -> Result<Placement, BrokerError> {
        // Time-ordered ids: new sessions append at the end of the store's index.
        let session_id = uuid::Uuid::now_v7().to_string();
        self.write(pool, |p, now| {
            let req = ConnectRequest {
                user: &c.user,
                requires: &c.requires,
                session_host: c.session_host.as_deref(),
            };
            // T2 before the placement, on the pool as time has left it (an
            // expired session is no reason to let an unentitled user in).
            // A verified ticket (T3) was issued only to an entitled user.
            p.tick(now);
            if c.ticket.is_none() {
                p.check_entitled(&c.user, &c.groups, c.session_host.as_deref())?;
            }
            let engine_started = Instant::now();
            let random = p.counters().placement_random();
            let r = p.connect_excluding(&req, &c.exclude, now, random, &session_id);
            metrics::histogram!("deskbroker_placement_engine_seconds")
                .record(engine_started.elapsed());
            Ok(r?)
        })
        .await
    }

    /// Rule T3: a request that carries a connection ticket is placed only if
    /// this broker signed it, for this pool and this user, and it has not
    /// expired. Nothing is read from the pool: a ticket is checked before
    /// any host is considered.
    fn check_ticket(&self, pool: &str, c: &ConnectInput) -> Result<(), BrokerError> {
        let Some(raw) = &c.ticket else {
            return Ok(());
        };
        let refused = |r: api::ticket::TicketRefusal| {
            metrics::counter!("deskbroker_ticket_refusals_total", "reason" => r.reason())
                .increment(1);
            BrokerError::Ticket(r.to_string())
        };
        let ticket = api::ticket::Ticket::parse(raw).map_err(refused)?;
        let user = self
            .ticket_key
            .verify(&ticket, pool, crate::state::now_ms().max(0) as u64 / 1000)
            .map_err(refused)?;
        if user != c.user {
            return Err(refused(api::ticket::TicketRefusal::OtherUser));
        }
        Ok(())
    }

    /// Issues the connection ticket of `user` in `pool` (rule T3) after
    /// checking that the user is entitled to it (T2, with the groups the
    /// caller vouches for); it lives the pool's `ticketLifetimeSeconds`.
    pub async fn issue_ticket(
        &self,
        pool: &str,
        user: &str,
        groups: &[String],
    ) -> Result<String, BrokerError> {
        placement::validate_user("user", user)?;
        let lifetime = self
            .read(pool, |p| {
                p.check_entitled(user, groups, None)?;
                Ok(p.config().ticket_lifetime_seconds)
            })
            .await?;
        let expires = (crate::state::now_ms().max(0) as u64 / 1000) + u64::from(lifetime);
        self.ticket_key
            .issue(pool, user, expires)
            .map_err(|e| BrokerError::Invalid(e.to_string()))
    }

    /// The `.rdp` file of `pool` through this broker's RDP front door: with
    /// a user (and the groups the caller vouches for), carrying that user's
    /// connection ticket (rule T3); without, the pool's routing token (R1).
    /// The API's `rdpFile` and the user portal both serve this.
    pub async fn connection_file(
        &self,
        pool: &str,
        user: Option<(&str, &[String])>,
    ) -> Result<ConnectionFile, BrokerError> {
        let name = self.read(pool, |p| Ok(p.name().to_string())).await?;
        let front_door = self
            .rdp_front_door
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
            .ok_or_else(|| {
                BrokerError::NotFound(
                    "this broker runs no RDP front door: start it with serve --rdp-listen".into(),
                )
            })?;
        let body = match user {
            None => api::rdp_file::rdp_file(&front_door, &name),
            Some((user, groups)) => {
                let ticket = self.issue_ticket(&name, user, groups).await?;
                api::rdp_file::rdp_file_with_ticket(&front_door, &ticket)
            }
        };
        Ok(ConnectionFile { pool: name, body })
    }

    /// While the store is unreachable: a user whose session is known (and
    /// durable) is sent back to it from memory, nothing is written; anyone
    /// else is refused with 503 `StoreUnavailable`, at once.
    fn reconnect_from_memory(
        &self,
        pool: &str,
        c: &ConnectInput,
    ) -> Result<Placement, BrokerError> {
        let unavailable = || {
            BrokerError::store_unavailable(format!(
                "the store is unreachable ({}); only users with a session can reconnect \
                 until it is back",
                self.writer.failure().unwrap_or_default()
            ))
        };
        let found = self.peek(pool, |p| {
            Ok(p.existing_placement(&c.user, c.session_host.as_deref())?)
        })?;
        match found {
            Some(placed) if self.writer.is_saved(pool, &placed.session_id) => Ok(placed),
            _ => Err(unavailable()),
        }
    }

    /// Sets a session Active or Disconnected (rule S4).
    pub async fn set_session_state(
        &self,
        pool: &str,
        id: &str,
        state: SessionState,
    ) -> Result<(), BrokerError> {
        self.write(pool, |p, now| Ok(p.set_session_state(id, state, now)?))
            .await
    }

    /// Ends a session.
    pub async fn logoff(&self, pool: &str, id: &str) -> Result<(), BrokerError> {
        self.write(pool, |p, _| Ok(p.logoff(id)?)).await
    }

    /// The name of the host of `pool` registered with `address` (an RDP
    /// redirection cookie names a host by address, rule R3).
    pub async fn host_at(&self, pool: &str, address: &str) -> Result<Option<String>, BrokerError> {
        self.read(pool, |p| {
            Ok(p.hosts()
                .find(|h| h.spec.address == address)
                .map(|h| h.spec.name.clone()))
        })
        .await
    }
}
