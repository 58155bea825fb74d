//! The running broker: the composition of its [`Core`] (the pools, the
//! writer, the clock), the [`Settings`] it was built with, complete, the
//! signing keys, and the services that keep what the engines do not.
//!
//! Each service is a struct that owns its state and holds the core (and
//! the other services it needs, given at construction), so its fields say
//! what it may touch:
//!
//! - [`Messages`] (`messages.rs`): messages waiting for their hosts;
//! - [`Heartbeats`] (`heartbeat.rs`): hearing hosts, with their budgets;
//!   takes messages for the answer;
//! - [`Credentials`] (`credentials.rs`): API credentials;
//! - [`Enrollment`] (`enroll.rs`): registration tokens, host credentials,
//!   and who a bearer token is (with the credentials);
//! - [`Power`] (`power.rs`): power actions and their record;
//! - [`Autoscale`] (`autoscale.rs`): scaling plans and their evaluator;
//!   acts through power and messages;
//! - [`Audit`] (`audit.rs`): the audit log's entries on their own, and
//!   its reads;
//! - [`Connector`] (`connect.rs`): placing users, their connection
//!   tickets, files and browser addresses, and the doors' marks of the
//!   sessions they relay; starts hosts through power, signs with the keys;
//! - [`Workspace`] (`workspace.rs`): published applications, application
//!   groups, and what each user is given.
//!
//! Callers reach a service through its accessor (`broker.messages()`),
//! and the API's handlers extract just the service they use. Each service
//! changes its state only through the core's `write` or `commit`, so the
//! store's order is the order of changes. What is left on `Broker` itself
//! (creating and deleting pools, the signing keys and their first save)
//! spans several of them.

use std::sync::{Arc, Mutex};

use placement::{PoolConfig, TimestampMs};
use store::{Mutation, Snapshot, Store};

use crate::audit::Audit;
use crate::autoscale::Autoscale;
use crate::clock::Clock;
use crate::connect::Connector;
use crate::core::Core;
use crate::credentials::Credentials;
use crate::enroll::{Enrollment, Secrets};
use crate::error::BrokerError;
use crate::heartbeat::Heartbeats;
use crate::messages::Messages;
use crate::power::Power;
use crate::sync::MutexExt;
use crate::workspace::Workspace;

/// SHA-256 of a secret, in hex: what is stored and compared.
pub fn secret_hash(secret: &str) -> String {
    use sha2::Digest;
    hex::encode(sha2::Sha256::digest(secret.as_bytes()))
}

/// A new random secret with a recognisable prefix (`dbr_` registration
/// token, `dbh_` host credential).
pub fn new_secret(prefix: &str) -> String {
    let bytes: [u8; 32] = rand::random();
    format!("{prefix}{}", hex::encode(bytes))
}

/// What a broker is told when it is built, complete: nothing is patched
/// in afterwards.
#[derive(Clone)]
pub struct Settings {
    /// The administrator's bearer token (rule T1).
    pub admin_token: String,
    /// Where RDP clients reach this broker's front door (`host:port`), for
    /// the `.rdp` connection files; None when it runs none.
    pub rdp_front_door: Option<String>,
    /// Where RDP clients reach this broker's RD Gateway (`host:port`), for
    /// the gateway's connection files (`rdpFile?gateway=true`); None when
    /// there is none.
    pub rd_gateway: Option<String>,
    /// `serve --api-rate-limit`: requests a second allowed to each
    /// credential and to each source address with a valid credential
    /// (bursts of twice as many); 0 = no limit (rule T4, `api::throttle`).
    pub api_rate_limit_per_second: u32,
    /// `serve --audited-rate-limit`: audited requests a second allowed to
    /// the admin token and each API credential (rule T4; 0 = no limit).
    pub audited_rate_limit_per_second: u32,
    /// `serve --audit-retention-days`, `--audit-max-entries`,
    /// `--audit-max-bytes` (rule T5).
    pub audit_retention: crate::writer::AuditRetention,
    /// `serve --autoscale-interval`: how often scaling plans are evaluated
    /// (at least [`crate::autoscale::MIN_AUTOSCALE_INTERVAL`]).
    pub autoscale_interval: std::time::Duration,
    /// `serve --allow-power-commands` (off by default). A power command is
    /// shell on the broker's machine: with it off, even the admin token
    /// cannot make the broker run one, so a leaked admin token is not a
    /// shell on the broker.
    pub allow_power_commands: bool,
    /// The user portal's sign-in (`serve --oidc-issuer`); None: `/portal`
    /// answers that it is not configured.
    pub portal: Option<Arc<crate::portal::Portal>>,
    /// The directory whose groups decide entitlements (`serve
    /// --directory-url`, rule AD1); None: the groups a caller vouches for.
    pub directory: Option<Arc<crate::directory::Directory>>,
    /// The time every rule reads: the system's, or a test's.
    pub clock: Clock,
}

impl Settings {
    /// A broker with `admin_token` and every other setting at its default:
    /// no doors, the default limits, the system's clock.
    pub fn new(admin_token: impl Into<String>) -> Settings {
        Settings {
            admin_token: admin_token.into(),
            rdp_front_door: None,
            rd_gateway: None,
            api_rate_limit_per_second: 0,
            audited_rate_limit_per_second: crate::api::throttle::AUDITED_PER_SECOND,
            audit_retention: crate::writer::AuditRetention::DEFAULT,
            autoscale_interval: crate::autoscale::DEFAULT_AUTOSCALE_INTERVAL,
            allow_power_commands: false,
            portal: None,
            directory: None,
            clock: Clock::system(),
        }
    }
}

/// Shows every setting but the admin token (logs must not carry it).
impl std::fmt::Debug for Settings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Settings")
            .field("admin_token", &"<redacted>")
            .field("rdp_front_door", &self.rdp_front_door)
            .field("rd_gateway", &self.rd_gateway)
            .field("api_rate_limit_per_second", &self.api_rate_limit_per_second)
            .field(
                "audited_rate_limit_per_second",
                &self.audited_rate_limit_per_second,
            )
            .field("audit_retention", &self.audit_retention)
            .field("autoscale_interval", &self.autoscale_interval)
            .field("allow_power_commands", &self.allow_power_commands)
            .field("portal", &self.portal.is_some())
            .field("directory", &self.directory.is_some())
            .field("clock", &self.clock)
            .finish()
    }
}

/// The running broker: its [`Core`], its settings and the services that
/// keep what the engines do not, shared by every request.
pub struct Broker {
    core: Arc<Core>,
    settings: Settings,
    /// Registration tokens, host credentials, and who a bearer token is.
    enrollment: Arc<Enrollment>,
    /// API credentials with roles (rule T1).
    credentials: Arc<Credentials>,
    /// Sign and check connection tickets (rule T3) and redirection tokens
    /// (R3): random, kept in the store, so every replica shares them
    /// (`keys.rs`).
    keys: Arc<crate::keys::SigningKeys>,
    /// A signing key made at start, until it is durable
    /// ([`Broker::save_new_signing_key`]).
    unsaved_key: Mutex<Option<Mutation>>,
    /// The audit log (rule T5): entries on their own, and the log's reads.
    audit: Arc<Audit>,
    /// Heartbeats, with their per-host budgets (rule S8: one host cannot
    /// starve others).
    heartbeats: Arc<Heartbeats>,
    /// Power actions (rules A9, A10), with the bound on those running at
    /// once.
    power: Arc<Power>,
    /// Messages waiting for their session hosts' heartbeats (not durable).
    messages: Arc<Messages>,
    /// Scaling plans, their memory and their evaluator (A1–A7).
    autoscale: Arc<Autoscale>,
    /// Placing users and their connection tickets (rules S1–S4, T3, A8).
    connector: Arc<Connector>,
    /// Published applications and application groups (rule F1).
    workspace: Arc<Workspace>,
}

impl Broker {
    /// Rebuilds every pool from the store's snapshot and starts the writer.
    pub fn new(store: Arc<dyn Store>, mut snapshot: Snapshot, settings: Settings) -> Broker {
        let mut pools = std::mem::take(&mut snapshot.pools);
        let secrets = Secrets::of_pools(&pools);
        let published = Workspace::take_stored(&mut pools, &mut snapshot);
        let core = Arc::new(Core::new(
            store.clone(),
            pools,
            settings.clock.clone(),
            settings.audit_retention,
        ));
        let messages = Arc::new(Messages::new(core.clone()));
        let credentials = Arc::new(Credentials::new(
            core.clone(),
            std::mem::take(&mut snapshot.credentials),
        ));
        let enrollment = Arc::new(Enrollment::new(
            core.clone(),
            settings.admin_token.clone(),
            credentials.clone(),
            secrets,
        ));
        let heartbeats = Arc::new(Heartbeats::new(core.clone(), messages.clone()));
        let audit = Arc::new(Audit::new(core.clone(), store.clone(), credentials.clone()));
        let power = Arc::new(Power::new(
            core.clone(),
            store.clone(),
            settings.allow_power_commands,
        ));
        let autoscale = Arc::new(Autoscale::new(
            core.clone(),
            power.clone(),
            messages.clone(),
            settings.autoscale_interval,
            &mut snapshot,
        ));
        let (keys, unsaved_key) =
            crate::keys::SigningKeys::load(snapshot.signing_keys.take(), core.started_ms());
        let keys = Arc::new(keys);
        let connector = Arc::new(Connector::new(
            core.clone(),
            power.clone(),
            keys.clone(),
            &settings,
        ));
        let workspace = Arc::new(Workspace::new(
            core.clone(),
            settings.directory.clone(),
            published,
        ));
        Broker {
            core,
            workspace,
            enrollment,
            keys,
            unsaved_key: Mutex::new(unsaved_key),
            heartbeats,
            audit,
            credentials,
            power,
            messages,
            autoscale,
            connector,
            settings,
        }
    }

    /// The pools, the writer and the clock.
    pub fn core(&self) -> &Arc<Core> {
        &self.core
    }

    /// Messages to the users of sessions, waiting for their hosts.
    pub fn messages(&self) -> &Arc<Messages> {
        &self.messages
    }

    /// Registration tokens and host credentials, and who a bearer token
    /// is.
    pub fn enrollment(&self) -> &Arc<Enrollment> {
        &self.enrollment
    }

    /// API credentials with roles (rule T1).
    pub fn credentials(&self) -> &Arc<Credentials> {
        &self.credentials
    }

    /// Power actions: manual starts and stops, and their record.
    pub fn power(&self) -> &Arc<Power> {
        &self.power
    }

    /// Scaling plans and their evaluator.
    pub fn autoscale(&self) -> &Arc<Autoscale> {
        &self.autoscale
    }

    /// Placing users, their connection tickets, files and browser
    /// addresses.
    pub fn connector(&self) -> &Arc<Connector> {
        &self.connector
    }

    /// Published applications, application groups, and what each user is
    /// given (rules F1, F2).
    pub fn workspace(&self) -> &Arc<Workspace> {
        &self.workspace
    }

    /// The audit log (rule T5).
    pub fn audit(&self) -> &Arc<Audit> {
        &self.audit
    }

    /// Session hosts' heartbeats.
    pub fn heartbeats(&self) -> &Arc<Heartbeats> {
        &self.heartbeats
    }

    /// What this broker was built with.
    pub fn settings(&self) -> &Settings {
        &self.settings
    }

    /// The ticket and redirection-token keys.
    pub fn keys(&self) -> &crate::keys::SigningKeys {
        &self.keys
    }

    /// Now, by the broker's clock.
    pub fn now_ms(&self) -> TimestampMs {
        self.core.now_ms()
    }

    /// Writes the signing key made at start, if one was, and waits until it
    /// is durable: before this broker signs anything, so a ticket it hands
    /// out is still good after a restart.
    pub async fn save_new_signing_key(&self) -> Result<(), BrokerError> {
        let unsaved = self.unsaved_key.lock_or_recover().take();
        if let Some(put) = unsaved {
            self.core.commit(|| Ok(((), vec![put]))).await?;
            tracing::info!("made this broker's signing key (tickets, redirection tokens)");
        }
        Ok(())
    }

    /// Creates a pool, or replaces the settings of an existing one (see
    /// [`Core::put_pool`]).
    pub async fn put_pool(
        &self,
        config: PoolConfig,
        create_only: bool,
    ) -> Result<(bool, Vec<String>), BrokerError> {
        self.core.put_pool(config, create_only).await
    }

    /// Removes a pool (with session hosts only when `force`), its secrets,
    /// its published applications and application groups, and its place
    /// in a scaling plan.
    pub async fn delete_pool(&self, name: &str, force: bool) -> Result<(), BrokerError> {
        self.core
            .delete_pool(name, force, || {
                self.enrollment.forget_pool(name);
                self.workspace.forget_pool(name)
            })
            .await?;
        self.autoscale.forget_pool(name).await;
        Ok(())
    }
}
