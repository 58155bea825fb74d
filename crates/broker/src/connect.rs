//! Placing users, for every way a logon arrives: the HTTP API's `connect`
//! and the doors. One implementation, so all follow every rule and all are
//! counted in the same metrics. A connect that finds no host in a pool
//! with `startVmOnConnect` starts one (rule A8) and is answered 503
//! `SessionHostStarting`; the same connect, retried, is placed once that
//! host is available.
//!
//! [`Connector`] is the service: it holds the core (the pools), the power
//! service (to start a host for a connect) and the signing keys (to issue
//! and check connection tickets), and the addresses of this broker's doors
//! for the connection files and browser addresses it makes. The doors'
//! marks of the sessions they relay come here too.

use std::sync::Arc;
use std::time::Instant;

use api::types::ConnectInput;
use placement::autoscale::{StartOnConnect, start_on_connect};
use placement::{
    ConnectRequest, ConnectionTarget, DrainedBy, HostPoolType, HostPower, Placement, PowerDriver,
    PowerState, ScalingActionKind, SessionState,
};

use crate::core::Core;
use crate::directory::Directory;
use crate::error::BrokerError;
use crate::keys::SigningKeys;
use crate::power::Power;
use crate::state::Settings;

/// Rule A8's decision for a connect the engine refused with `e`: only a
/// refusal for want of a host (for a personal pool, also the user's own
/// host being unavailable), in a pool with `startVmOnConnect` and a power
/// driver.
/// A host switched on less than [`HOST_BOOT_WAIT_MS`] ago that has not
/// sent a heartbeat since counts as `Starting`.
fn start_for(
    p: &placement::Pool,
    req: &ConnectRequest<'_>,
    e: &placement::Error,
    now: placement::TimestampMs,
) -> Option<Start> {
    let config = p.config();
    let wanting = match e {
        placement::Error::NoSessionHostAvailable(_) => true,
        placement::Error::SessionHostUnavailable(_) => {
            config.host_pool_type == HostPoolType::Personal
        }
        _ => false,
    };
    if !wanting || !config.start_vm_on_connect || config.power_settings.driver == PowerDriver::None
    {
        return None;
    }
    let booting = |h: &placement::Host| {
        h.power_state == PowerState::Running
            && h.start_requested_ms.is_some_and(|started| {
                h.last_heartbeat_ms.is_some_and(|seen| seen <= started)
                    && now.saturating_sub(started) < HOST_BOOT_WAIT_MS
            })
    };
    let view = p.scaling_view(|h| HostPower {
        power_state: if booting(h) {
            PowerState::Starting
        } else {
            h.power_state
        },
        drained_by: h.spec.drained_by,
        tags: &h.spec.tags,
    });
    match start_on_connect(&view, config, req) {
        StartOnConnect::Start { host, undrain } => Some(Start::Host {
            name: host.to_string(),
            undrain,
        }),
        StartOnConnect::AlreadyStarting { host } => Some(Start::Already {
            name: host.to_string(),
        }),
        StartOnConnect::NoHost => None,
    }
}

/// An `.rdp` connection file and the pool it is for.
#[derive(Clone, Debug)]
pub struct ConnectionFile {
    pub pool: String,
    pub body: String,
    /// When the file's connection ticket expires (Unix seconds), if it
    /// carries one: what the audit log records of it (rule T5).
    pub ticket_expires_s: Option<u64>,
}

/// A connection ticket just signed, and the pool it names.
struct IssuedTicket {
    pool: String,
    ticket: String,
    /// When it expires, in Unix seconds.
    expires_s: u64,
    /// Rule AD4: the host a host-bound ticket opens.
    host: Option<NamedHost>,
}

/// Rule AD4: the host a host-named file sends its user to.
struct NamedHost {
    /// The host's name in its pool (what its ticket is bound to).
    name: String,
    /// What the file's `full address` says: the host's DNS name (or the
    /// host part of its address), with the port when it is not 3389.
    full_address: String,
}

/// How a host-named file writes the host of `address` (`HOST:PORT`): its
/// DNS name when it has one, else the address's own host; with `:PORT`
/// unless the port is 3389, which RDP clients assume.
fn full_address(dns_name: Option<&str>, address: &str) -> String {
    let (host, port) = address.rsplit_once(':').unwrap_or((address, "3389"));
    let host = dns_name.unwrap_or(host);
    if port == "3389" {
        host.to_string()
    } else {
        format!("{host}:{port}")
    }
}

/// Rule AD4: whether the name a client asked for (an RD Gateway channel's
/// target) names the host of `spec`: its DNS name, in any ASCII case, or
/// its address, with or without the port.
pub fn names_host(target: &str, spec: &placement::HostSpec) -> bool {
    let target = target.trim_end_matches('.');
    let address_host = spec
        .address
        .rsplit_once(':')
        .map_or(spec.address.as_str(), |(h, _)| h);
    spec.dns_name
        .as_deref()
        .is_some_and(|d| d.eq_ignore_ascii_case(target))
        || target == spec.address
        || target.eq_ignore_ascii_case(address_host)
}

/// The browser's address of a pool's desktop for one user, with a fresh
/// ticket in its fragment ([`Connector::web_url`]).
#[derive(Clone, Debug)]
pub struct WebUrl {
    pub pool: String,
    pub url: String,
    /// When its ticket expires (Unix seconds): what the audit log records.
    pub expires_s: u64,
}

/// The `Retry-After` of a 503 `SessionHostStarting` (rule A8), in seconds:
/// a machine takes tens of seconds to a few minutes to boot and its agent
/// to send a heartbeat; a client retrying every 30 s waits at most that
/// much past it, and a farm of waiting users costs one connect each per
/// 30 s.
pub const HOST_STARTING_RETRY_AFTER_SECONDS: u64 = 30;
/// How long a host that was started stays "starting" for rule A8 after
/// its power driver succeeded, while it has not sent the heartbeat that
/// makes it available (A9): a machine that is switched on is not yet a
/// desktop, and a connect in that time must wait for it rather than start
/// another. Past this, the silent host is a running host that does not
/// serve, and a connect may start another (as a plan would, A4).
pub const HOST_BOOT_WAIT_MS: i64 = 10 * 60 * 1000;
/// The actor of the power actions start on connect begins (rule A10).
pub const START_ON_CONNECT_ACTOR: &str = "startOnConnect";

/// What a refused connect may start (rule A8), decided under the pool's
/// lock with the refusal.
enum Start {
    /// Start this host (and undrain it: the scaling plan had drained it).
    Host { name: String, undrain: bool },
    /// A host that can take the user is starting already.
    Already { name: String },
}

/// The connect service: places users, issues their connection tickets,
/// files and browser addresses, and takes the doors' marks of the sessions
/// they relay.
pub struct Connector {
    core: Arc<Core>,
    /// Starts a host for a connect that finds none (rule A8).
    power: Arc<Power>,
    /// Signs and checks connection tickets (rule T3).
    keys: Arc<SigningKeys>,
    /// Where RDP clients reach this broker's front door, if it runs one.
    rdp_front_door: Option<String>,
    /// Where RDP clients reach this broker's RD Gateway, if it knows one.
    rd_gateway: Option<String>,
    /// The directory whose groups decide entitlements (rule AD1), if any.
    directory: Option<Arc<Directory>>,
}

impl Connector {
    /// The service over the core, with the power service, the signing keys
    /// and the doors' addresses of `settings`.
    pub(crate) fn new(
        core: Arc<Core>,
        power: Arc<Power>,
        keys: Arc<SigningKeys>,
        settings: &Settings,
    ) -> Connector {
        Connector {
            core,
            power,
            keys,
            rdp_front_door: settings.rdp_front_door.clone(),
            rd_gateway: settings.rd_gateway.clone(),
            directory: settings.directory.clone(),
        }
    }

    /// The groups that decide whether `user` may get a new session in
    /// `pool` (rule T2): with a directory (AD1), the directory's, read only
    /// when the decision needs a group (the pool lists groups, the user is
    /// not listed by name and has no session to go back to, S1), so that
    /// those decisions stand while the directory is down; without one,
    /// the groups the caller vouches for (`claimed`).
    pub async fn deciding_groups(
        &self,
        pool: &str,
        user: &str,
        claimed: &[String],
        session_host: Option<&str>,
    ) -> Result<Vec<String>, BrokerError> {
        let Some(directory) = &self.directory else {
            return Ok(claimed.to_vec());
        };
        let needs_groups = self.core.peek(pool, |p| {
            Ok(!p.config().entitled_groups.is_empty()
                && p.check_entitled(user, &[], session_host).is_err())
        })?;
        if !needs_groups {
            return Ok(Vec::new());
        }
        Ok(directory.groups(user).await?.groups.clone())
    }

    /// The directory, when one decides groups (rule AD1).
    pub fn directory(&self) -> Option<&Arc<Directory>> {
        self.directory.as_ref()
    }

    /// Places a user (rules S1–S4, B, D, H, P7) and answers once the new
    /// session is durable; starts a host when none can take the user and
    /// the pool says so (A8).
    pub async fn connect(&self, pool: &str, c: &ConnectInput) -> Result<Placement, BrokerError> {
        let started = Instant::now();
        let from_memory = self.core.writer().failure().is_some();
        let result = match self.check_ticket(pool, c) {
            Err(e) => Err(e),
            Ok(bound) if from_memory => self.reconnect_from_memory(pool, c, bound.as_deref()),
            Ok(Some(host)) => self.place_on_host(pool, c, &host).await,
            Ok(None) => self.place(pool, c).await,
        };
        let hot = crate::telemetry::hot();
        match &result {
            Ok(_) if from_memory => hot.reconnect_from_memory.increment(1),
            Ok(p) if p.reconnect => hot.reconnect.increment(1),
            Ok(_) => hot.placed.increment(1),
            Err(e) => {
                metrics::counter!("deskbroker_placements_total", "outcome" => e.code().as_str())
                    .increment(1)
            }
        }
        hot.connect_duration.record(started.elapsed());
        result
    }

    /// The engine's decision, written before it is answered; when it
    /// refuses for want of a host, rule A8.
    async fn place(&self, pool: &str, c: &ConnectInput) -> Result<Placement, BrokerError> {
        // Time-ordered ids: new sessions append at the end of the store's index.
        let session_id = uuid::Uuid::now_v7().to_string();
        let mut groups = if c.ticket.is_none() {
            self.deciding_groups(pool, &c.user, &c.groups, c.session_host.as_deref())
                .await?
        } else {
            Vec::new()
        };
        let mut looked_again = false;
        let (placed, start) = loop {
            let mut start = None;
            let placed = self
                .core
                .write(pool, |p, now| {
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
                        p.check_entitled(&c.user, &groups, c.session_host.as_deref())?;
                    }
                    let engine_started = Instant::now();
                    let random = p.counters().placement_random();
                    let r = p.connect_excluding(&req, &c.exclude, now, random, &session_id);
                    crate::telemetry::hot()
                        .placement_engine
                        .record(engine_started.elapsed());
                    if let Err(e) = &r {
                        start = start_for(p, &req, e, now);
                    }
                    Ok(r?)
                })
                .await;
            // The session that let the decision go without the directory
            // ended in between (AD1): the groups decide after all.
            if let (Some(directory), Err(BrokerError::Engine(placement::Error::NotEntitled(_)))) =
                (&self.directory, &placed)
                && c.ticket.is_none()
                && groups.is_empty()
                && !looked_again
            {
                looked_again = true;
                groups = directory.groups(&c.user).await?.groups.clone();
                continue;
            }
            break (placed, start);
        };
        let (refusal, start) = match (placed, start) {
            (Ok(p), _) => return Ok(p),
            (Err(e), None) => return Err(e),
            (Err(e), Some(s)) => (e, s),
        };
        let (name, decision) = match start {
            Start::Already { name } => (name, "already_starting"),
            Start::Host { name, undrain } => {
                self.start_on_connect(pool, &name, undrain, &c.user, refusal)
                    .await?;
                (name, "started")
            }
        };
        metrics::counter!("deskbroker_start_on_connect_total", "decision" => decision).increment(1);
        Err(BrokerError::HostStarting(format!(
            "no session host of host pool {pool} can take {} now; session host {name} is \
             starting for it (startVmOnConnect): retry this connect after {} s",
            c.user, HOST_STARTING_RETRY_AFTER_SECONDS
        )))
    }

    /// Rule AD4: a connect on a host-bound ticket, placed on that `host`
    /// only (`Pool::connect_on_host`); a Pending session there (the one the
    /// file's fetch made) is answered as new (`reconnect: false`), so that
    /// the door that carries the connection owns it: when the host is gone, the client
    /// asked for another (`target`), the door could not reach it, the
    /// user's session is elsewhere or the host cannot take them, refused
    /// as the ticket, saying to fetch the file again. Nothing is started
    /// for it (A8 starts a host for a connect that may take any).
    async fn place_on_host(
        &self,
        pool: &str,
        c: &ConnectInput,
        host: &str,
    ) -> Result<Placement, BrokerError> {
        let session_id = uuid::Uuid::now_v7().to_string();
        let refused = |why: String| {
            let r = api::ticket::TicketRefusal::OtherHost {
                host: host.to_string(),
                why,
            };
            metrics::counter!("deskbroker_ticket_refusals_total", "reason" => r.reason())
                .increment(1);
            BrokerError::Ticket(r.to_string())
        };
        self.core
            .write(pool, |p, now| {
                let Some(h) = p.host(host) else {
                    return Err(refused(format!(
                        "which is no longer in host pool {}",
                        p.name()
                    )));
                };
                if let Some(target) = c.target.as_deref()
                    && !names_host(target, &h.spec)
                {
                    return Err(refused(format!(
                        "and the client asked for {:?}",
                        target.chars().take(64).collect::<String>()
                    )));
                }
                if c.exclude.iter().any(|e| e == host) {
                    return Err(refused("which the door could not reach".into()));
                }
                let req = ConnectRequest {
                    user: &c.user,
                    requires: &c.requires,
                    session_host: None,
                };
                p.connect_on_host(&req, host, now, &session_id)
                    // The Pending session the file's fetch made is the
                    // ticket's own: the door that brings its connection
                    // takes it as one it made (marks it Active, ends it if
                    // no logon shows, R4, S9).
                    .map(|mut placed| {
                        if placed.state == SessionState::Pending {
                            placed.reconnect = false;
                        }
                        placed
                    })
                    .map_err(|e| match e {
                        placement::Error::NoSessionHostAvailable(m)
                        | placement::Error::SessionHostUnavailable(m)
                        | placement::Error::NoPersonalDesktopAssigned(m)
                        | placement::Error::SessionHostNotFound(m) => {
                            refused(format!("which cannot take {} now ({m})", c.user))
                        }
                        e => e.into(),
                    })
            })
            .await
    }

    /// Starts `host` through the power driver (rule A9) for a refused
    /// connect, recorded with the actor [`START_ON_CONNECT_ACTOR`]; first
    /// undrains it when the scaling plan had drained it (recorded too).
    /// When the host cannot be started (another action began meanwhile,
    /// the driver cannot), the connect's own `refusal` stands, unless the
    /// host is now starting anyway.
    async fn start_on_connect(
        &self,
        pool: &str,
        host: &str,
        undrain: bool,
        user: &str,
        refusal: BrokerError,
    ) -> Result<(), BrokerError> {
        if undrain {
            self.undrain_for_connect(pool, host).await?;
        }
        match self
            .power
            .act(
                pool,
                host,
                ScalingActionKind::Start,
                false,
                START_ON_CONNECT_ACTOR.to_string(),
            )
            .await
        {
            Ok(_) => {
                tracing::info!(
                    pool,
                    host,
                    user,
                    "start on connect: starting a session host"
                );
                Ok(())
            }
            // Two connects decided at once: the other one started it.
            Err(_) if self.host_is_starting(pool, host) => Ok(()),
            Err(e) => {
                tracing::warn!(pool, host, user, error = %e,
                    "start on connect: cannot start the session host");
                Err(refusal)
            }
        }
    }

    /// Whether `host` of `pool` is `Starting` now.
    fn host_is_starting(&self, pool: &str, host: &str) -> bool {
        self.core
            .peek(pool, |p| {
                Ok(p.host(host)
                    .is_some_and(|h| h.power_state == PowerState::Starting))
            })
            .unwrap_or(false)
    }

    /// Puts back into service a host the scaling plan drained, for a
    /// connect that needs it (A8, A10: recorded as an `Undrain`). An
    /// operator's drain is never undone (A6): such a host was not chosen.
    async fn undrain_for_connect(&self, pool: &str, host: &str) -> Result<(), BrokerError> {
        self.core
            .write_with(pool, |p, now| {
                let mut spec = p.find_host(host)?.spec.clone();
                if spec.drained_by != Some(DrainedBy::ScalingPlan) {
                    return Ok(((), Vec::new()));
                }
                spec.allow_new_session = true;
                spec.drained_by = None;
                p.upsert_host(spec, now)?;
                let record = store::ScalingAction {
                    attempts: 1,
                    ..store::ScalingAction::new(
                        p.name(),
                        host,
                        ScalingActionKind::Undrain,
                        format!("undrained by {START_ON_CONNECT_ACTOR}"),
                        START_ON_CONNECT_ACTOR,
                        now,
                    )
                    .finished(placement::ActionOutcome::Succeeded, now)
                };
                Ok((
                    (),
                    vec![store::Mutation::PutScalingAction { action: record }],
                ))
            })
            .await
    }

    /// Rule T3: a request that carries a connection ticket is placed only if
    /// this broker signed it, for this pool and this user, and it has not
    /// expired. Nothing is read from the pool: a ticket is checked before
    /// any host is considered. Answers the host a host-bound ticket opens
    /// (rule AD4).
    fn check_ticket(&self, pool: &str, c: &ConnectInput) -> Result<Option<String>, BrokerError> {
        let Some(raw) = &c.ticket else {
            return Ok(None);
        };
        let refused = |r: api::ticket::TicketRefusal| {
            metrics::counter!("deskbroker_ticket_refusals_total", "reason" => r.reason())
                .increment(1);
            BrokerError::Ticket(r.to_string())
        };
        let ticket = api::ticket::Ticket::parse(raw).map_err(refused)?;
        let user = self
            .keys
            .verify_ticket(&ticket, pool, self.core.clock().now_secs())
            .map_err(refused)?;
        if user != c.user {
            return Err(refused(api::ticket::TicketRefusal::OtherUser));
        }
        Ok(ticket.host)
    }

    /// A connection ticket for `user` of `pool` (rule T3), with the groups
    /// the caller vouches for: issued only when the pool entitles the user
    /// (T2), living the pool's `ticketLifetimeSeconds`. With `door_only`,
    /// only for a pool the doors may reach (`allowFrontDoor`), since the
    /// ticket is good for nothing else.
    ///
    /// In a pool whose `connectionTarget` is `Host` (rule AD4), the user is
    /// placed now, through [`Connector::connect`] and every rule of a
    /// connect (a Pending session, S4; the existing one, S1), and the
    /// ticket is bound to the host chosen, whose name for clients it
    /// answers too.
    async fn issue_ticket(
        &self,
        pool: &str,
        user: &str,
        groups: &[String],
        door_only: bool,
    ) -> Result<IssuedTicket, BrokerError> {
        placement::validate_user("user", user)?;
        let groups = &self.deciding_groups(pool, user, groups, None).await?;
        // One look at the pool: its name, the entitlement, the lifetime.
        let (name, lifetime, target) = self
            .core
            .read(pool, |p| {
                if door_only && !p.config().allow_front_door {
                    return Err(BrokerError::Forbidden(format!(
                        "host pool {} is not reached through the doors (allowFrontDoor is false)",
                        p.name()
                    )));
                }
                p.check_entitled(user, groups, None)?;
                Ok((
                    p.name().to_string(),
                    p.config().ticket_lifetime_seconds,
                    p.config().connection_target,
                ))
            })
            .await?;
        let host = match target {
            ConnectionTarget::Pool => None,
            ConnectionTarget::Host => Some(self.place_for_file(&name, user, groups).await?),
        };
        let expires_s = self.core.clock().now_secs() + u64::from(lifetime);
        let ticket = self
            .keys
            .ticket_signer()
            .issue_bound(
                &name,
                host.as_ref().map(|h| h.name.as_str()),
                user,
                expires_s,
            )
            .map_err(|e| BrokerError::Invalid(e.to_string()))?;
        Ok(IssuedTicket {
            pool: name,
            ticket,
            expires_s,
            host,
        })
    }

    /// Rule AD4: places `user` for a host-named file or browser address,
    /// as a connect would, and answers the host chosen and how clients
    /// name it: its `dnsName`, else the host part of its address, with
    /// the address's port unless it is RDP's own 3389.
    async fn place_for_file(
        &self,
        pool: &str,
        user: &str,
        groups: &[String],
    ) -> Result<NamedHost, BrokerError> {
        let input = ConnectInput {
            user: user.to_string(),
            groups: groups.to_vec(),
            ..ConnectInput::default()
        };
        let placed = self.connect(pool, &input).await?;
        let dns_name = self
            .core
            .peek(pool, |p| {
                Ok(p.host(&placed.host).and_then(|h| h.spec.dns_name.clone()))
            })
            .unwrap_or_default();
        Ok(NamedHost {
            full_address: full_address(dns_name.as_deref(), &placed.address),
            name: placed.host,
        })
    }

    /// The `.rdp` file of `pool` through this broker's RDP front door: with
    /// a user (and the groups the caller vouches for), carrying that user's
    /// connection ticket (`Connector::issue_ticket`); without, the pool's
    /// routing token (R1). With `gateway`, through this broker's RD
    /// Gateway instead, the ticket as its access token (a user is needed).
    /// The pool's own RDP properties (rule F3) are written into every file.
    /// The API's `rdpFile` and the user portal both serve this.
    pub async fn connection_file(
        &self,
        pool: &str,
        user: Option<(&str, &[String])>,
        gateway: bool,
    ) -> Result<ConnectionFile, BrokerError> {
        if let Some((user, _)) = user {
            placement::validate_user("user", user)?;
        }
        let gateway = if gateway {
            if user.is_none() {
                return Err(BrokerError::Invalid(
                    "gateway=true needs user=: the RD Gateway admits a client on its user's \
                     connection ticket"
                        .into(),
                ));
            }
            Some(self.rd_gateway_address()?)
        } else {
            None
        };
        let front_door = || {
            self.rdp_front_door.clone().ok_or_else(|| {
                BrokerError::NotFound(
                    "this broker runs no RDP front door: start it with serve --rdp-listen".into(),
                )
            })
        };
        let Some((user, groups)) = user else {
            let (name, properties) = self
                .core
                .read(pool, |p| {
                    Ok((p.name().to_string(), p.config().rdp_properties()))
                })
                .await?;
            let file = api::rdp_file::rdp_file(&front_door()?, &name);
            return Ok(ConnectionFile {
                body: api::rdp_file::with_properties(&file, &properties),
                pool: name,
                ticket_expires_s: None,
            });
        };
        // Checked before a host-named file places anyone.
        let door = match (&gateway, self.connection_target(pool)?) {
            (None, ConnectionTarget::Pool) => Some(front_door()?),
            _ => None,
        };
        let issued = self.issue_ticket(pool, user, groups, false).await?;
        // Rule AD3's line and the pool's own properties (F3), read as the
        // file is made.
        let (kdc_proxy, properties) = self
            .core
            .read(pool, |p| {
                Ok((p.config().kdc_proxy, p.config().rdp_properties()))
            })
            .await?;
        // Rule AD4: a host-named file names its host, through the gateway
        // as its target, or as the address the client dials itself.
        let body = match (&gateway, &issued.host, door) {
            (Some(gateway), host, _) => {
                let mut file = api::rdp_file::gateway_rdp_file(
                    gateway,
                    host.as_ref().map_or(&issued.pool, |h| &h.full_address),
                    &issued.ticket,
                );
                // Rule AD3: the pool's clients get their Kerberos tickets
                // through the gateway (unless the pool's own `kdcproxyname`,
                // rule F3, replaces the line below).
                if kdc_proxy {
                    file.push_str(&api::rdp_file::kdc_proxy_line(gateway));
                }
                file
            }
            (None, Some(host), _) => {
                api::rdp_file::rdp_file_with_ticket(&host.full_address, &issued.ticket)
            }
            (None, None, door) => {
                let door = match door {
                    Some(door) => door,
                    None => front_door()?,
                };
                api::rdp_file::rdp_file_with_ticket(&door, &issued.ticket)
            }
        };
        Ok(ConnectionFile {
            pool: issued.pool,
            body: api::rdp_file::with_properties(&body, &properties),
            ticket_expires_s: Some(issued.expires_s),
        })
    }

    /// The address that opens `pool`'s desktop for `user` in a browser tab
    /// (rule WEB3): the RD Gateway's `/web` page with a fresh connection
    /// ticket in the URL's fragment, which a browser never sends to a
    /// server, so the ticket stays out of every access log on its way.
    /// Refused like a ticket (`Connector::issue_ticket`), for a pool the
    /// doors may not reach, and with 400 `InvalidParameter` when this
    /// broker knows of no RD Gateway (the page and its WebSocket are served
    /// on the gateway's listener).
    pub async fn web_url(
        &self,
        pool: &str,
        user: &str,
        groups: &[String],
    ) -> Result<WebUrl, BrokerError> {
        let gateway = self.rd_gateway.clone().ok_or_else(|| {
            BrokerError::Invalid(
                "the browser's page is served on the RD Gateway's listener, and this broker \
                 knows of none (start it with serve --gateway-listen, or name a stand-alone one \
                 with --gateway-public-address)"
                    .into(),
            )
        })?;
        let issued = self.issue_ticket(pool, user, groups, true).await?;
        Ok(WebUrl {
            // Encoded as a form value: the page reads its fragment with
            // `URLSearchParams`, which decodes it back to the ticket.
            url: format!(
                "https://{gateway}/web#ticket={}",
                percent_encoding::utf8_percent_encode(
                    &issued.ticket,
                    percent_encoding::NON_ALPHANUMERIC
                )
            ),
            pool: issued.pool,
            expires_s: issued.expires_s,
        })
    }

    /// The pool's `connectionTarget` (rule AD4), as memory holds it.
    fn connection_target(&self, pool: &str) -> Result<ConnectionTarget, BrokerError> {
        self.core.peek(pool, |p| Ok(p.config().connection_target))
    }

    /// Where clients reach the RDP front door and the RD Gateway, where
    /// this broker knows them.
    pub fn doors(&self) -> (Option<&str>, Option<&str>) {
        (self.rdp_front_door.as_deref(), self.rd_gateway.as_deref())
    }

    /// Where clients reach the RD Gateway; refused with 400
    /// `InvalidParameter` when this broker knows of none (`serve
    /// --gateway-listen` or `--gateway-public-address`).
    pub fn rd_gateway_address(&self) -> Result<String, BrokerError> {
        self.rd_gateway.clone().ok_or_else(|| {
            BrokerError::Invalid(
                "gateway=true: this broker knows of no RD Gateway (start it with serve \
                     --gateway-listen, or name a stand-alone one with --gateway-public-address)"
                    .into(),
            )
        })
    }

    /// While the store is unreachable: a user whose session is known (and
    /// durable) is sent back to it from memory, nothing is written; anyone
    /// else is refused with 503 `StoreUnavailable`, at once.
    /// A host-bound ticket (rule AD4) is sent back only to its `bound` host.
    fn reconnect_from_memory(
        &self,
        pool: &str,
        c: &ConnectInput,
        bound: Option<&str>,
    ) -> Result<Placement, BrokerError> {
        let unavailable = || {
            BrokerError::store_unavailable(format!(
                "the store is unreachable ({}); only users with a session can reconnect \
                 until it is back",
                self.core.writer().failure().unwrap_or_default()
            ))
        };
        let found = self.core.peek(pool, |p| {
            Ok(p.existing_placement(&c.user, c.session_host.as_deref())?)
        })?;
        match found {
            Some(placed)
                if self.core.writer().is_saved(pool, &placed.session_id)
                    && bound.is_none_or(|b| b == placed.host) =>
            {
                Ok(placed)
            }
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
        self.core
            .write(pool, |p, now| Ok(p.set_session_state(id, state, now)?))
            .await
    }

    /// Ends a session.
    pub async fn logoff(&self, pool: &str, id: &str) -> Result<(), BrokerError> {
        self.core.write(pool, |p, _| Ok(p.logoff(id)?)).await
    }

    /// The RDP front door's mark of a session it relays: `Some(state)`
    /// sets it (never confirming a logon, S9), `None` ends the session (one
    /// that never logged on, or that the connection could not use). Relaxed: queued in order, answered
    /// without waiting for the commit (see `crate::writer`), so no relayed
    /// connection waits for its own bookkeeping.
    pub async fn mark_relayed_session(
        &self,
        pool: &str,
        id: &str,
        state: Option<SessionState>,
    ) -> Result<(), BrokerError> {
        self.core
            .write_relaxed(pool, |p, now| {
                match state {
                    Some(state) => p.mark_relayed_session(id, state, now)?,
                    // Not a logoff of a logged-on user: nothing for the host.
                    None => p.release(id)?,
                }
                Ok(())
            })
            .await
    }

    /// The name of the host of `pool` registered with `address` (an RDP
    /// redirection cookie names a host by address, rule R3).
    pub async fn host_at(&self, pool: &str, address: &str) -> Result<Option<String>, BrokerError> {
        self.core
            .read(pool, |p| {
                Ok(p.host_at(address).map(|h| h.spec.name.clone()))
            })
            .await
    }
}
