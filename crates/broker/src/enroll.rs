//! Enrolling session hosts like AVD: an administrator creates a pool's
//! registration token; an agent presents it once to register its host and
//! receives a host credential that only lets it act as that host (its
//! heartbeats are `heartbeat.rs`). Secrets are random, shown once, and
//! kept only as SHA-256 hashes (`Secrets`), changed under the pool's
//! lock in the same step that queues them for the store.
//!
//! [`Enrollment`] is the service: it owns the registration tokens and host
//! credentials, changes pools only through the core's `write`, and says
//! who a bearer token is ([`Enrollment::caller`]: the admin token, a host
//! credential, or an API credential of [`crate::credentials`]).
//!
//! Registration cannot take a host over (docs/rules.md, E1–E5): a token is
//! bound to a number of new hosts (`maxHosts`), a name that exists is
//! registered again only by the holder of that host's credential or the
//! admin, only the admin changes a registered host's address, and every
//! address must pass the pool's address policy ([`check_address`]).

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Arc, RwLock};

use api::types::{
    RegisterInput, RegisterOutput, RegistrationTokenOutput, SessionHostOutput, rfc3339,
};
use ipnet::IpNet;
use placement::{HostSpec, PoolConfig, TimestampMs, Upsert};
use store::{HostCredential, Mutation, RegistrationToken};
use subtle::ConstantTimeEq;

use crate::core::Core;
use crate::credentials::Credentials;
use crate::error::BrokerError;
use crate::state::{new_secret, secret_hash};
use crate::sync::RwLockExt;

/// Longest life of a registration token: 30 days.
pub const MAX_TOKEN_SECONDS: u64 = 30 * 24 * 3600;

/// Life of a registration token when the request does not say: one day.
pub const DEFAULT_TOKEN_SECONDS: u64 = 86_400;

/// New hosts a registration token registers when the request does not
/// say: one, so that a token given to one machine enrols that machine
/// and nothing else (rule E3).
pub const DEFAULT_TOKEN_HOSTS: u32 = 1;

/// Most new hosts one registration token may register.
pub const MAX_TOKEN_HOSTS: u32 = 10_000;

/// Most entries of a pool's `allowedAddressRanges`.
pub const MAX_ADDRESS_RANGES: usize = 256;

/// What a registration token allows, in memory (its hash is the key).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TokenGrant {
    pub pool: String,
    pub expires_ms: TimestampMs,
    /// How many new hosts it may register.
    pub max_hosts: u32,
    /// How many it has registered (kept in the store, so a restart does
    /// not refill the token).
    pub used_hosts: u32,
}

impl TokenGrant {
    pub fn from_stored(pool: &str, t: &RegistrationToken) -> TokenGrant {
        TokenGrant {
            pool: pool.to_string(),
            expires_ms: t.expires_ms,
            max_hosts: t.max_hosts,
            used_hosts: t.used_hosts,
        }
    }

    fn stored(&self, hash: &str) -> RegistrationToken {
        RegistrationToken {
            hash: hash.to_string(),
            expires_ms: self.expires_ms,
            max_hosts: self.max_hosts,
            used_hosts: self.used_hosts,
        }
    }
}

/// Who presented a bearer token.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Caller {
    /// The admin token: may do everything.
    Admin,
    /// A host credential: may act only as this host of this pool.
    Host { pool: String, host: String },
    /// An API credential (rule T1): its role, limited to `host_pools`
    /// when that is not empty (`crate::access` decides what it may call).
    Credential {
        name: String,
        role: crate::access::Role,
        host_pools: Vec<String>,
        /// Its own limit of requests a second (rule T4), if it has one.
        rate_limit_per_second: Option<u32>,
    },
}

impl Caller {
    /// The role of an API credential (the admin token is `admin`); None
    /// for a host.
    pub fn role(&self) -> Option<crate::access::Role> {
        match self {
            Caller::Admin => Some(crate::access::Role::Admin),
            Caller::Credential { role, .. } => Some(*role),
            Caller::Host { .. } => None,
        }
    }

    /// Whether this caller has the admin's rights over `pool`.
    pub fn is_admin_of(&self, pool: &str) -> bool {
        match self {
            Caller::Admin => true,
            Caller::Credential {
                role: crate::access::Role::Admin,
                host_pools,
                ..
            } => host_pools.is_empty() || host_pools.iter().any(|p| p == pool),
            _ => false,
        }
    }
}

/// Address ranges no host is registered at unless the pool's
/// `allowedAddressRanges` name them explicitly (rule E4): what a host
/// there would reach is the broker's own machine, the cloud's metadata
/// service, or no single machine at all.
const SPECIAL_RANGES: &[(&str, &str)] = &[
    ("0.0.0.0/8", "unspecified"),
    ("127.0.0.0/8", "loopback"),
    ("169.254.0.0/16", "link-local"),
    ("224.0.0.0/4", "multicast"),
    ("255.255.255.255/32", "broadcast"),
    ("::/128", "unspecified"),
    ("::1/128", "loopback"),
    ("fe80::/10", "link-local"),
    ("ff00::/8", "multicast"),
    // Cloud platforms' own services at fixed addresses outside the
    // link-local range: AWS's IPv6 instance metadata, Azure's platform
    // endpoint (WireServer), Alibaba Cloud's metadata.
    ("fd00:ec2::254/128", "cloud metadata"),
    ("168.63.129.16/32", "cloud platform"),
    ("100.100.100.200/32", "cloud metadata"),
];

/// The special range `ip` is in, and what it is.
fn special_range(ip: IpAddr) -> Option<(IpNet, &'static str)> {
    SPECIAL_RANGES.iter().find_map(|(net, what)| {
        let net: IpNet = net.parse().expect("the special ranges are valid CIDR");
        net.contains(&ip).then_some((net, *what))
    })
}

/// Whether one of `ranges` lies within the special range `special` and
/// contains `ip`: how a pool opens a special range (`127.0.0.0/8` opens
/// loopback, `0.0.0.0/0` does not).
fn names_within(ranges: &[IpNet], ip: IpAddr, special: IpNet) -> bool {
    ranges
        .iter()
        .any(|r| r.contains(&ip) && r.prefix_len() >= special.prefix_len())
}

/// Parses a pool's `allowedAddressRanges`: CIDR ranges (`10.0.0.0/8`,
/// `fd00::/8`) or single addresses, normalised to their network
/// (`10.1.2.3/8` is `10.0.0.0/8`).
pub fn parse_address_ranges(ranges: &[String]) -> Result<Vec<IpNet>, placement::Error> {
    if ranges.len() > MAX_ADDRESS_RANGES {
        return Err(placement::Error::InvalidParameter(format!(
            "allowedAddressRanges: {} ranges; at most {MAX_ADDRESS_RANGES} are allowed",
            ranges.len()
        )));
    }
    ranges
        .iter()
        .enumerate()
        .map(|(i, r)| {
            r.parse::<IpNet>()
                .or_else(|_| r.parse::<IpAddr>().map(IpNet::from))
                .map(|n| n.trunc())
                .map_err(|_| {
                    let shown: String = r.chars().take(64).collect();
                    placement::Error::InvalidParameter(format!(
                        "allowedAddressRanges[{i}]: {shown:?} is not an address range in CIDR \
                         notation (for example 10.0.0.0/8 or fd00::/8)"
                    ))
                })
        })
        .collect()
}

/// The address an IPv6 form of an IPv4 address stands for
/// (`::ffff:127.0.0.1` is 127.0.0.1; through a NAT64 gateway,
/// `64:ff9b::7f00:1` is too, RFC 6052 and RFC 8215; a 6to4 address
/// `2002:7f00:1::` reaches 127.0.0.1 through a relay, RFC 3056), so that no
/// special range is reached through another spelling.
fn canonical(ip: IpAddr) -> IpAddr {
    let IpAddr::V6(v6) = ip else {
        return ip;
    };
    if v6.is_loopback() || v6.is_unspecified() {
        return ip;
    }
    if let Some(v4) = v6.to_ipv4() {
        return IpAddr::V4(v4);
    }
    let bits = u128::from(v6);
    let nat64_well_known = bits >> 32 == 0x0064_ff9b_0000_0000_0000_0000;
    let nat64_local = bits >> 80 == 0x0064_ff9b_0001;
    if nat64_well_known || nat64_local {
        return IpAddr::V4(std::net::Ipv4Addr::from(bits as u32));
    }
    if bits >> 112 == 0x2002 {
        return IpAddr::V4(std::net::Ipv4Addr::from((bits >> 80) as u32));
    }
    ip
}

/// Whether `address` (`HOST:PORT`) may be a host of the pool (rule E4):
/// loopback, link-local, unspecified, multicast and broadcast addresses
/// (and the name `localhost`) only when one of the pool's ranges lies
/// within that special range and contains the address (so `0.0.0.0/0`
/// does not open them, `127.0.0.0/8` does); with ranges, only IP
/// addresses inside one of them; without, any other address or DNS name.
pub fn check_address(config: &PoolConfig, address: &str) -> Result<(), BrokerError> {
    placement::validate_address(address)?;
    let ranges = parse_address_ranges(&config.allowed_address_ranges)?;
    let (host, _port) = address.rsplit_once(':').unwrap_or((address, ""));
    let host = host.trim_start_matches('[').trim_end_matches(']');
    let refuse = |why: String| {
        BrokerError::Invalid(format!(
            "address: {address} {why} (rule E4); an administrator can name the range in the \
             host pool's allowedAddressRanges"
        ))
    };
    let spelled = host.parse::<IpAddr>().ok();
    let ip = match host.parse::<IpAddr>() {
        Ok(ip) => canonical(ip),
        Err(_) => {
            let name = host.to_ascii_lowercase();
            let name = name.trim_end_matches('.');
            let last = name.rsplit('.').next().unwrap_or(name);
            if name == "localhost" || name.ends_with(".localhost") {
                IpAddr::from([127, 0, 0, 1])
            } else if last.chars().all(|c| c.is_ascii_digit())
                || last.starts_with("0x")
                || last.is_empty()
            {
                // `127.1`, `2130706433` and `0x7f.1` are loopback to the
                // system's resolver; no real name ends in a number.
                return Err(refuse(
                    "is neither an IP address in the usual notation nor a DNS name".into(),
                ));
            } else if ranges.is_empty() {
                return Ok(());
            } else {
                return Err(refuse(
                    "is a DNS name, which cannot be checked against the host pool's \
                     allowedAddressRanges: register the host by its IP address"
                        .into(),
                ));
            }
        }
    };
    if let Some((net, what)) = special_range(ip) {
        if !names_within(&ranges, ip, net) {
            return Err(refuse(format!("is a {what} address ({net})")));
        }
        return Ok(());
    }
    // A NAT64 or 6to4 host may be named by its IPv6 range as well.
    let in_range = |r: &IpNet| r.contains(&ip) || spelled.is_some_and(|a| r.contains(&a));
    if !ranges.is_empty() && !ranges.iter().any(in_range) {
        return Err(refuse(format!(
            "is not in the host pool's allowedAddressRanges ({})",
            config.allowed_address_ranges.join(", ")
        )));
    }
    Ok(())
}

/// Rule A9: Wake-on-LAN packets go to the farm's own networks, never to
/// this machine's own services (a loopback or unspecified address) unless
/// the pool's `allowedAddressRanges` names that range, as for hosts (E4).
/// The rest of the address policy (private ranges only) is the engine's.
pub fn check_wake_on_lan_target(config: &PoolConfig) -> Result<(), placement::Error> {
    let Some(socket) = config.power_settings.broadcast_socket() else {
        return Ok(());
    };
    let ip = IpAddr::V4(*socket.ip());
    let Some((net, what)) =
        special_range(ip).filter(|(_, what)| matches!(*what, "loopback" | "unspecified"))
    else {
        return Ok(());
    };
    let ranges = parse_address_ranges(&config.allowed_address_ranges)?;
    if names_within(&ranges, ip, net) {
        return Ok(());
    }
    Err(placement::Error::InvalidParameter(format!(
        "powerSettings.broadcastAddress: {socket} is a {what} address ({net}): Wake-on-LAN would \
         send to this machine's own services; name the range in the host pool's \
         allowedAddressRanges if that is meant"
    )))
}

/// Registration tokens and host credentials, by the SHA-256 (hex) of the
/// secret. Changed only under the lock of the pool they belong to, in the
/// same step that queues the change for the store.
#[derive(Default)]
pub(crate) struct Secrets {
    /// Registration token hash → its pool, expiry and host bound.
    tokens: HashMap<String, TokenGrant>,
    /// Host credential hash → (pool, host).
    hosts: HashMap<String, (String, String)>,
}

impl Secrets {
    /// The tokens and host credentials the store kept for `pools`.
    pub(crate) fn of_pools(pools: &[store::PoolRecord]) -> Secrets {
        let mut secrets = Secrets::default();
        for r in pools {
            for t in &r.registration_tokens {
                secrets
                    .tokens
                    .insert(t.hash.clone(), TokenGrant::from_stored(&r.config.name, t));
            }
            for c in &r.host_credentials {
                secrets
                    .hosts
                    .insert(c.hash.clone(), (r.config.name.clone(), c.host.clone()));
            }
        }
        secrets
    }

    /// Forgets the credential of `host` in `pool` (all of the pool's when
    /// `host` is None), and with a pool its registration tokens.
    fn forget(&mut self, pool: &str, host: Option<&str>) {
        self.hosts
            .retain(|_, (p, h)| !(p == pool && host.is_none_or(|host| host == h)));
        if host.is_none() {
            self.tokens.retain(|_, t| t.pool != pool);
        }
    }
}

/// The enrollment service: registration tokens and host credentials, the
/// core whose pools registration changes, and who a bearer token is.
pub struct Enrollment {
    core: Arc<Core>,
    /// The administrator's bearer token (rule T1), as the settings give it.
    admin_token: String,
    /// Where API credentials are looked up for [`Enrollment::caller`].
    credentials: Arc<Credentials>,
    secrets: RwLock<Secrets>,
}

impl Enrollment {
    /// The service over `core`, with the tokens and host credentials the
    /// store kept ([`Secrets::of_pools`]).
    pub(crate) fn new(
        core: Arc<Core>,
        admin_token: String,
        credentials: Arc<Credentials>,
        secrets: Secrets,
    ) -> Enrollment {
        Enrollment {
            core,
            admin_token,
            credentials,
            secrets: RwLock::new(secrets),
        }
    }

    /// Forgets every secret of `pool`: for the pool's removal, under the
    /// lock that removes it ([`Core::delete_pool`]).
    pub(crate) fn forget_pool(&self, pool: &str) {
        self.secrets.write_or_recover().forget(pool, None);
    }

    /// Who `token` is: the admin token is compared in constant time; host
    /// and API credentials by their hash. `Err` is why it is not valid
    /// (unknown, revoked or expired: 401).
    pub fn caller(&self, token: &str) -> Result<Caller, String> {
        if bool::from(token.as_bytes().ct_eq(self.admin_token.as_bytes())) {
            return Ok(Caller::Admin);
        }
        let hash = secret_hash(token);
        let secrets = self.secrets.read_or_recover();
        if let Some((pool, host)) = secrets.hosts.get(&hash) {
            return Ok(Caller::Host {
                pool: pool.clone(),
                host: host.clone(),
            });
        }
        drop(secrets);
        let now = self.core.now_ms();
        let found = self.credentials.with_hash(&hash, |c| {
            if let Some(at) = c.expires_ms
                && now >= at
            {
                return Err(format!(
                    "the credential {} expired at {}; an admin creates a new one",
                    c.name,
                    rfc3339(at)
                ));
            }
            let role = crate::access::Role::parse(&c.role)
                .ok_or_else(|| format!("the credential {} has no known role", c.name))?;
            Ok(Caller::Credential {
                name: c.name.clone(),
                role,
                host_pools: c.host_pools.clone(),
                rate_limit_per_second: c.rate_limit_per_second,
            })
        });
        found.unwrap_or_else(|| Err("the bearer token is not valid".into()))
    }

    /// Creates a registration token for `pool`, valid for `seconds`
    /// (1..=[`MAX_TOKEN_SECONDS`]), that registers at most `max_hosts` new
    /// hosts (1..=[`MAX_TOKEN_HOSTS`]).
    pub async fn create_token(
        &self,
        pool: &str,
        seconds: u64,
        max_hosts: u32,
    ) -> Result<RegistrationTokenOutput, BrokerError> {
        if !(1..=MAX_TOKEN_SECONDS).contains(&seconds) {
            return Err(BrokerError::Invalid(format!(
                "expiresInSeconds: {seconds} is out of range; it must be from 1 to \
                 {MAX_TOKEN_SECONDS} (30 days)"
            )));
        }
        if !(1..=MAX_TOKEN_HOSTS).contains(&max_hosts) {
            return Err(BrokerError::Invalid(format!(
                "maxHosts: {max_hosts} is out of range; it must be from 1 to {MAX_TOKEN_HOSTS}"
            )));
        }
        let token = new_secret("dbr_");
        let hash = secret_hash(&token);
        let now = self.core.now_ms();
        let expires_ms = now + (seconds as i64) * 1000;
        self.core
            .write_with(pool, |p, _| {
                let pool = p.name().to_string();
                let grant = TokenGrant {
                    pool: pool.clone(),
                    expires_ms,
                    max_hosts,
                    used_hosts: 0,
                };
                let stored = grant.stored(&hash);
                let mut secrets = self.secrets.write_or_recover();
                // The pool's expired tokens are forgotten with each new one, so
                // they never pile up in memory or in the store.
                let mut changes: Vec<Mutation> = secrets
                    .tokens
                    .iter()
                    .filter(|(_, t)| t.pool == pool && t.expires_ms <= now)
                    .map(|(h, _)| Mutation::DeleteRegistrationToken {
                        pool: pool.clone(),
                        hash: h.clone(),
                    })
                    .collect();
                secrets
                    .tokens
                    .retain(|_, t| !(t.pool == pool && t.expires_ms <= now));
                secrets.tokens.insert(hash.clone(), grant);
                changes.push(Mutation::PutRegistrationToken {
                    pool,
                    token: stored,
                });
                Ok(((), changes))
            })
            .await?;
        Ok(RegistrationTokenOutput {
            token,
            expiration_time: rfc3339(expires_ms),
            max_hosts,
        })
    }

    /// Revokes every registration token of `pool`. Hosts already
    /// registered keep their credentials.
    pub async fn revoke_tokens(&self, pool: &str) -> Result<(), BrokerError> {
        self.core
            .write_with(pool, |p, _| {
                let pool = p.name().to_string();
                self.secrets
                    .write_or_recover()
                    .tokens
                    .retain(|_, t| t.pool != pool);
                Ok(((), vec![Mutation::DeleteRegistrationTokens { pool }]))
            })
            .await
    }

    /// The grant of a registration token, if it is known and unexpired.
    fn token_grant(&self, hash: &str) -> Result<TokenGrant, BrokerError> {
        let found = self.secrets.read_or_recover().tokens.get(hash).cloned();
        let Some(grant) = found else {
            return Err(BrokerError::Unauthorized(
                "the registration token is not valid: it is unknown or was revoked; create a \
                 new one"
                    .into(),
            ));
        };
        if self.core.now_ms() >= grant.expires_ms {
            return Err(BrokerError::Unauthorized(format!(
                "the registration token expired at {}; create a new one",
                rfc3339(grant.expires_ms)
            )));
        }
        Ok(grant)
    }

    /// An agent registers its host with a registration token: creates the
    /// host, or re-registers it (keeping its sessions and drain state), and
    /// answers a new host credential, which replaces any earlier one.
    ///
    /// `caller` is who the request's bearer token is, if it has one. A name
    /// that exists is registered again only by that host's own credential
    /// or the admin (else 409, rule E2), and only the admin changes its
    /// address (rule E5); a new host uses one of the token's `maxHosts`
    /// (rule E3); every address passes [`check_address`] (rule E4).
    ///
    /// In phases: the token's pool (`token_pool`), then under the pool's
    /// lock the host's new spec (`reregistered_spec` or `new_spec`), the
    /// token's use and the new credential (`grant_credential`) and the
    /// audit entry (`registration_audit`), all in one batch.
    pub async fn register(
        &self,
        input: RegisterInput,
        caller: Option<Caller>,
    ) -> Result<(Upsert, RegisterOutput), BrokerError> {
        let token_hash = secret_hash(&input.token);
        let pool = self.token_pool(&token_hash, input.host_pool.as_deref())?;
        let credential = new_secret("dbh_");
        let hash = secret_hash(&credential);
        let name = input.name.clone();
        let caller = caller.as_ref();
        let (upsert, host) = self
            .core
            .write_with(&pool, |p, now| {
                // Again under the pool's lock: the token may have been
                // revoked or used up by a registration that ran meanwhile.
                let grant = self.token_grant(&token_hash)?;
                let before = p
                    .host(&name)
                    .and_then(|h| store::Rendered::of(&SessionHostOutput::from(h)));
                let spec = match p.host(&name) {
                    Some(h) => reregistered_spec(p, h, &input, caller)?,
                    None => new_spec(p.config(), &name, &input, &grant)?,
                };
                let upsert = p.upsert_host(spec, now)?;
                let mut mutations =
                    self.grant_credential(p.name(), &name, upsert, grant, &token_hash, hash);
                let out = SessionHostOutput::from(p.find_host(&name)?);
                mutations.push(registration_audit(
                    p.name(),
                    &name,
                    caller,
                    before,
                    &out,
                    upsert,
                    now,
                ));
                Ok(((upsert, out), mutations))
            })
            .await?;
        tracing::info!(pool = %pool, host = %input.name, "session host registered");
        Ok((
            upsert,
            RegisterOutput {
                session_host: host,
                host_credential: credential,
            },
        ))
    }

    /// The pool of a valid registration token (see `token_grant`); refused when the request names another.
    fn token_pool(&self, token_hash: &str, asked: Option<&str>) -> Result<String, BrokerError> {
        let pool = self.token_grant(token_hash)?.pool;
        if let Some(asked) = asked
            && asked != pool
        {
            return Err(BrokerError::Forbidden(format!(
                "the registration token is for host pool {pool}, not {asked}"
            )));
        }
        Ok(pool)
    }

    /// Rules E3 and the credential's replacement: a new host uses one of
    /// the token's hosts (kept in memory and in the batch), the host's
    /// earlier credential is forgotten, and the new one (its `hash`) names
    /// it from now on. Answers the batch's mutations so far.
    fn grant_credential(
        &self,
        pool: &str,
        name: &str,
        upsert: Upsert,
        mut grant: TokenGrant,
        token_hash: &str,
        hash: String,
    ) -> Vec<Mutation> {
        let mut mutations = Vec::new();
        let mut s = self.secrets.write_or_recover();
        if upsert == Upsert::Created {
            grant.used_hosts += 1;
            mutations.push(Mutation::PutRegistrationToken {
                pool: pool.to_string(),
                token: grant.stored(token_hash),
            });
            s.tokens.insert(token_hash.to_string(), grant);
        }
        s.forget(pool, Some(name));
        s.hosts
            .insert(hash.clone(), (pool.to_string(), name.to_string()));
        mutations.push(Mutation::PutHostCredential {
            pool: pool.to_string(),
            credential: HostCredential {
                host: name.to_string(),
                hash,
            },
        });
        mutations
    }

    /// Removes a host (with its sessions only when `force`), and forgets
    /// its credential in the same step.
    pub async fn remove_host(
        &self,
        pool: &str,
        host: &str,
        force: bool,
    ) -> Result<(), BrokerError> {
        self.core
            .write(pool, |p, _| {
                p.remove_host(host, force)?;
                self.secrets.write_or_recover().forget(p.name(), Some(host));
                Ok(())
            })
            .await
    }
}

/// The spec of a host registering again under its name `h`: only its own
/// credential or the admin may (rule E2), only the admin changes its
/// address, which passes [`check_address`] (E5, E4); the request's
/// capabilities and policy replace the host's when given; the rest (its
/// drain state) is kept.
fn reregistered_spec(
    p: &placement::Pool,
    h: &placement::Host,
    input: &RegisterInput,
    caller: Option<&Caller>,
) -> Result<HostSpec, BrokerError> {
    let name = &h.spec.name;
    let own = caller.is_some_and(|c| match c {
        Caller::Host { pool, host } => pool == p.name() && host == name,
        other => other.is_admin_of(p.name()),
    });
    if !own {
        return Err(placement::Error::Conflict(format!(
            "session host {name} is already registered in host pool {}; registering it again \
             takes its current host credential (or the admin token) as the bearer token (rule \
             E2): to enrol another machine under this name, an administrator removes the host \
             first",
            p.name()
        ))
        .into());
    }
    if input.address != h.spec.address {
        if !caller.is_some_and(|c| c.is_admin_of(p.name())) {
            return Err(BrokerError::Forbidden(format!(
                "address: session host {name} is registered at {}; only an administrator \
                 changes the address of a registered host (rule E5, PATCH \
                 /api/v1/hostPools/{}/sessionHosts/{name})",
                h.spec.address,
                p.name()
            )));
        }
        check_address(p.config(), &input.address)?;
    }
    // Rule AD4: host-named files send users to the DNS name, so a host
    // does not rename itself once it has one; an administrator does.
    if let (Some(old), Some(new)) = (&h.spec.dns_name, &input.dns_name)
        && !old.eq_ignore_ascii_case(new)
        && !caller.is_some_and(|c| c.is_admin_of(p.name()))
    {
        return Err(BrokerError::Forbidden(format!(
            "dnsName: session host {name} is registered as {old}; only an administrator \
             changes the DNS name of a registered host (PATCH \
             /api/v1/hostPools/{}/sessionHosts/{name})",
            p.name()
        )));
    }
    Ok(HostSpec {
        address: input.address.clone(),
        capabilities: input
            .capabilities
            .clone()
            .unwrap_or(h.spec.capabilities.clone()),
        policy: input.policy.clone().unwrap_or(h.spec.policy.clone()),
        dns_name: input.dns_name.clone().or(h.spec.dns_name.clone()),
        ..h.spec.clone()
    })
}

/// The spec of a new host `name`: the token must allow one more (rule E3)
/// and its address pass [`check_address`] (E4); it offers `rdp` unless
/// the request says what it offers.
fn new_spec(
    config: &PoolConfig,
    name: &str,
    input: &RegisterInput,
    grant: &TokenGrant,
) -> Result<HostSpec, BrokerError> {
    if grant.used_hosts >= grant.max_hosts {
        return Err(BrokerError::Forbidden(format!(
            "the registration token has registered all the {} new session host(s) it allows \
             (maxHosts, rule E3); create a new token for more hosts",
            grant.max_hosts
        )));
    }
    check_address(config, &input.address)?;
    Ok(HostSpec {
        capabilities: input
            .capabilities
            .clone()
            .unwrap_or_else(|| vec!["rdp".to_string()]),
        policy: input.policy.clone().unwrap_or_default(),
        dns_name: input.dns_name.clone(),
        ..HostSpec::new(name, &input.address)
    })
}

/// Rule T5: the registration's audit entry, with the host before and
/// after (never its credential or the token), for the same batch.
fn registration_audit(
    pool: &str,
    name: &str,
    caller: Option<&Caller>,
    before: Option<store::Rendered>,
    after: &SessionHostOutput,
    upsert: Upsert,
    now: TimestampMs,
) -> Mutation {
    Mutation::AppendAudit {
        entry: store::AuditEntry {
            time_ms: now,
            actor: caller.map_or_else(|| format!("registration-token:{pool}"), crate::audit::actor),
            action: "POST /api/v1/register".into(),
            target: format!("hostPools/{pool}/sessionHosts/{name}"),
            host_pool: Some(pool.to_string()),
            before,
            after: store::Rendered::of(after),
            outcome: if upsert == Upsert::Created { 201 } else { 200 },
            source: None,
            end_reason: None,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use placement::{HostPoolType, LoadBalancerType};

    fn pool(ranges: &[&str]) -> PoolConfig {
        let mut c = PoolConfig::new("p", HostPoolType::Pooled, LoadBalancerType::BreadthFirst);
        c.allowed_address_ranges = ranges.iter().map(ToString::to_string).collect();
        c
    }

    #[test]
    fn the_address_policy() {
        // (pool's ranges, address, allowed)
        let cases: &[(&[&str], &str, bool)] = &[
            // Without ranges: any routable address or name…
            (&[], "10.0.0.5:3389", true),
            (&[], "203.0.113.7:3389", true),
            (&[], "[2001:db8::7]:3389", true),
            (&[], "host7.contoso.com:3389", true),
            // …but none of the special ranges, in any spelling.
            (&[], "127.0.0.1:3389", false),
            (&[], "127.8.9.10:3389", false),
            (&[], "169.254.169.254:80", false),
            (&[], "0.0.0.0:3389", false),
            (&[], "224.0.0.1:3389", false),
            (&[], "255.255.255.255:3389", false),
            (&[], "[::1]:3389", false),
            (&[], "[::]:3389", false),
            (&[], "[fe80::1]:3389", false),
            (&[], "[ff02::1]:3389", false),
            (&[], "[::ffff:127.0.0.1]:3389", false),
            (&[], "[::ffff:169.254.169.254]:80", false),
            // Through NAT64 (well-known and local-use prefixes) and 6to4.
            (&[], "[64:ff9b::7f00:1]:3389", false),
            (&[], "[64:ff9b::a9fe:a9fe]:80", false),
            (&[], "[64:ff9b:1::7f00:1]:3389", false),
            (&[], "[2002:7f00:1::1]:3389", false),
            (&[], "[64:ff9b::a00:5]:3389", true),
            (&["64:ff9b::/96"], "[64:ff9b::a00:5]:3389", true),
            // Cloud platforms' services at fixed addresses.
            (&[], "[fd00:ec2::254]:80", false),
            (&[], "168.63.129.16:80", false),
            (&[], "100.100.100.200:80", false),
            (&["fd00::/8"], "[fd00:ec2::254]:80", false),
            (&[], "localhost:3389", false),
            (&[], "LocalHost.:3389", false),
            (&[], "db.localhost:3389", false),
            // inet_aton spellings of 127.0.0.1 the resolver accepts.
            (&[], "127.1:3389", false),
            (&[], "2130706433:3389", false),
            (&[], "0x7f.1:3389", false),
            (&[], "010.0.0.5:3389", false),
            // A list confines addresses to it, and names cannot be checked.
            (&["10.0.0.0/8"], "10.200.0.5:3389", true),
            (&["10.0.0.0/8"], "192.168.1.5:3389", false),
            (&["10.0.0.0/8"], "host7.contoso.com:3389", false),
            (&["10.0.0.0/8", "fd00::/8"], "[fd12::5]:3389", true),
            // A special range opens only when named within itself.
            (&["127.0.0.0/8"], "127.0.0.1:3389", true),
            (&["127.0.0.1"], "127.0.0.1:3389", true),
            (&["127.0.0.1"], "127.0.0.2:3389", false),
            (&["127.0.0.0/8"], "localhost:3389", true),
            (&["0.0.0.0/0"], "127.0.0.1:3389", false),
            (&["0.0.0.0/0"], "169.254.169.254:80", false),
            (&["0.0.0.0/0"], "8.8.8.8:3389", true),
            (&["169.254.0.0/16"], "169.254.169.254:80", true),
            (&["::/0"], "[::1]:3389", false),
        ];
        for (ranges, address, allowed) in cases {
            let got = check_address(&pool(ranges), address);
            assert_eq!(got.is_ok(), *allowed, "{ranges:?} {address}: {got:?}");
            if let Err(e) = got {
                assert!(e.to_string().contains("rule E4"), "{e}");
            }
        }
    }

    #[test]
    fn wake_on_lan_reaches_this_machine_only_when_the_pool_names_it() {
        let with = |ranges: &[&str], to: &str| {
            let mut config = pool(ranges);
            config.power_settings.broadcast_address = to.to_string();
            check_wake_on_lan_target(&config)
        };
        assert!(with(&[], "10.0.0.255").is_ok());
        assert!(with(&[], "255.255.255.255").is_ok());
        for to in ["127.0.0.1:7", "127.0.0.1", "0.0.0.0:9"] {
            let e = with(&[], to).unwrap_err();
            assert!(e.to_string().contains("broadcastAddress"), "{to}: {e}");
            assert!(with(&["0.0.0.0/0"], to).is_err(), "{to}");
        }
        assert!(with(&["127.0.0.0/8"], "127.0.0.1:7").is_ok());
    }

    #[test]
    fn ranges_are_parsed_normalised_and_bounded() {
        let parsed = parse_address_ranges(&["10.1.2.3/8".into(), "fd00::1".into()]).unwrap();
        let shown: Vec<String> = parsed.iter().map(ToString::to_string).collect();
        assert_eq!(shown, ["10.0.0.0/8", "fd00::1/128"]);
        for bad in ["10.0.0.0/33", "10.0.0", "", "ten/8", "10.0.0.0/8 "] {
            let e = parse_address_ranges(&["10.0.0.0/8".into(), bad.into()]).unwrap_err();
            assert!(
                e.to_string().contains("allowedAddressRanges[1]"),
                "{bad:?}: {e}"
            );
        }
        let many = vec!["10.0.0.0/8".to_string(); MAX_ADDRESS_RANGES + 1];
        assert!(parse_address_ranges(&many).is_err());
    }
}
