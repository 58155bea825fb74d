//! A user's groups from the organisation's directory (rule AD1): Active
//! Directory, Samba AD or any LDAP server, over TLS only.
//!
//! With a directory configured (`serve --directory-url`), the groups that
//! decide a pool's `entitledGroups` (rule T2) are the ones the directory
//! says, nested groups included, at every door, the portal and the API; a
//! caller's claimed groups (a portal's token, a connect's `groups`) no
//! longer count. A user is looked up only when a decision needs a group:
//! a pool with no `entitledGroups`, a user listed by name, and a user going
//! back to their session (S1) are decided without the directory, so they
//! keep working while it is down. A decision that needs a group while the
//! directory cannot be reached is refused with 503 `DirectoryUnavailable`
//! and changes nothing.
//!
//! Lookups are cached ([`DirectorySettings::cache_ttl`], at most
//! [`DirectorySettings::cache_entries`] users), and concurrent lookups of
//! one user share one query (a logon storm asks the directory once a user);
//! a failure is never cached. The LDAP side is the module `ldap`; the
//! bind by Kerberos, the module `keytab`.

mod keytab;
mod ldap;

use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::error::BrokerError;

pub use keytab::{
    CCACHE, CCACHE_VARIABLE, CLIENT_KEYTAB_VARIABLE, KeytabBind, check_environment, environment,
};
pub use ldap::{GroupSearch, NameMap};

/// Fewest seconds a user's groups are kept: below it, a storm of logons
/// becomes a storm of directory queries.
pub const MIN_CACHE_SECONDS: u32 = 1;
/// Most seconds a user's groups are kept: a user removed from a group
/// loses what it gave them within this bound.
pub const MAX_CACHE_SECONDS: u32 = 86_400;
/// Most users whose groups are cached by default.
pub const DEFAULT_CACHE_ENTRIES: u64 = 100_000;
/// How long one LDAP operation (connect, bind, a search) may take.
pub const DEFAULT_QUERY_TIMEOUT: Duration = Duration::from_secs(5);
/// Most groups a user may have (nested ones included); a user with more is
/// refused rather than cut short, since a shortened list could drop the
/// group that entitles them.
pub const MAX_GROUPS: usize = placement::MAX_ENTITLEMENTS;

/// How to reach and read the directory.
#[derive(Clone)]
pub struct DirectorySettings {
    /// `ldaps://host[:port]` or `ldap://host[:port]` (always upgraded with
    /// StartTLS), tried in order.
    pub urls: Vec<String>,
    /// Whom the directory's certificate must chain to.
    pub trust: api::Trust,
    /// Whom the broker binds as, and how it proves it.
    pub bind: Bind,
    /// Where users and groups are searched (subtree).
    pub base_dn: String,
    /// How a user name becomes a search (UPN, `DOMAIN\sam`, `sam`).
    pub names: NameMap,
    /// How nested groups are followed.
    pub group_search: GroupSearch,
    /// How long a user's groups are used before they are read again.
    pub cache_ttl: Duration,
    /// Most users whose groups are kept.
    pub cache_entries: u64,
    /// One LDAP operation's bound.
    pub query_timeout: Duration,
}

impl std::fmt::Debug for DirectorySettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DirectorySettings")
            .field("urls", &self.urls)
            .field("bind", &self.bind)
            .field("base_dn", &self.base_dn)
            .field("names", &self.names)
            .field("group_search", &self.group_search)
            .field("cache_ttl", &self.cache_ttl)
            .field("cache_entries", &self.cache_entries)
            .finish()
    }
}

/// How the broker proves who it is to the directory.
#[derive(Clone)]
pub enum Bind {
    /// A simple bind: the account (a DN, or a UPN for Active Directory)
    /// and its password.
    Password { dn: String, password: String },
    /// SASL GSSAPI (Kerberos) with the service account's client keytab.
    Keytab(KeytabBind),
}

impl std::fmt::Debug for Bind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Bind::Password { dn, .. } => f
                .debug_struct("Password")
                .field("dn", dn)
                .field("password", &"<redacted>")
                .finish(),
            Bind::Keytab(k) => k.fmt(f),
        }
    }
}

/// Why a user's groups could not be read.
#[derive(Debug, Clone, thiserror::Error)]
pub enum DirectoryError {
    /// No server answered, or one answered with an error: nothing is known.
    #[error("the directory cannot be reached: {0}")]
    Unavailable(String),
    /// The answer was read but cannot be used (two entries for one name,
    /// more groups than [`MAX_GROUPS`]).
    #[error("{0}")]
    Ambiguous(String),
}

impl From<DirectoryError> for BrokerError {
    fn from(e: DirectoryError) -> BrokerError {
        match e {
            DirectoryError::Unavailable(_) => BrokerError::DirectoryUnavailable(format!(
                "{e}; decisions by group wait for it (users entitled by name and users going back \
                 to their session are not affected)"
            )),
            DirectoryError::Ambiguous(m) => BrokerError::Forbidden(m),
        }
    }
}

/// What the directory says of a user.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DirectoryUser {
    /// The user's entry, or None when the directory has no such user (who
    /// then belongs to no group).
    pub dn: Option<String>,
    /// The user's groups, nested ones included, by name (`sAMAccountName`,
    /// else `cn`), sorted without regard to case.
    pub groups: Vec<String>,
}

/// A user's groups as cached: what was read, and when.
#[derive(Clone)]
struct Cached {
    user: Arc<DirectoryUser>,
    read_at: Instant,
}

/// The directory: a connection (made again when it breaks) and the cache.
pub struct Directory {
    ldap: ldap::Client,
    cache: moka::future::Cache<String, Cached>,
    ttl: Duration,
}

impl Directory {
    /// The directory of `settings`; nothing is contacted until a lookup.
    pub fn new(settings: DirectorySettings) -> Result<Directory, String> {
        let seconds = settings.cache_ttl.as_secs();
        if seconds < u64::from(MIN_CACHE_SECONDS) || seconds > u64::from(MAX_CACHE_SECONDS) {
            return Err(format!(
                "the group cache lasts {MIN_CACHE_SECONDS}..={MAX_CACHE_SECONDS} seconds"
            ));
        }
        let cache = moka::future::Cache::builder()
            .max_capacity(settings.cache_entries.max(1))
            .time_to_live(settings.cache_ttl)
            .build();
        let ttl = settings.cache_ttl;
        Ok(Directory {
            ldap: ldap::Client::new(settings)?,
            cache,
            ttl,
        })
    }

    /// How long a user's groups are kept.
    pub fn cache_ttl(&self) -> Duration {
        self.ttl
    }

    /// `user`'s groups: from the cache while they are fresh, else read
    /// (concurrent readers of one user wait for one query).
    pub async fn groups(&self, user: &str) -> Result<Arc<DirectoryUser>, DirectoryError> {
        let key = placement::user_key(user);
        let started = Instant::now();
        let mut read = false;
        let got = self
            .cache
            .try_get_with(key, async {
                read = true;
                let user = self.ldap.user(user).await?;
                Ok::<_, DirectoryError>(Cached {
                    user: Arc::new(user),
                    read_at: Instant::now(),
                })
            })
            .await
            .map_err(|e: Arc<DirectoryError>| (*e).clone());
        let outcome = match (&got, read) {
            (Ok(_), false) => "cached",
            (Ok(_), true) => "read",
            (Err(DirectoryError::Unavailable(_)), _) => "unavailable",
            (Err(DirectoryError::Ambiguous(_)), _) => "refused",
        };
        metrics::counter!("deskbroker_directory_lookups_total", "outcome" => outcome).increment(1);
        if read {
            metrics::histogram!("deskbroker_directory_lookup_duration_seconds")
                .record(started.elapsed());
        }
        if let Err(e) = &got {
            tracing::warn!(user, error = %e, "directory lookup failed");
        }
        got.map(|c| c.user)
    }

    /// `user`'s groups read now, whatever the cache held (the operator's
    /// `user show --refresh`); the cache keeps the new answer.
    pub async fn refresh(&self, user: &str) -> Result<Arc<DirectoryUser>, DirectoryError> {
        self.cache.invalidate(&placement::user_key(user)).await;
        self.groups(user).await
    }

    /// How old the cached answer for `user` is, if one is cached.
    pub async fn cached_age(&self, user: &str) -> Option<Duration> {
        self.cache
            .get(&placement::user_key(user))
            .await
            .map(|c| c.read_at.elapsed())
    }
}

/// Describes the directory's metrics to the exporter.
pub fn describe_metrics() {
    metrics::describe_counter!(
        "deskbroker_directory_lookups_total",
        "Lookups of a user's groups in the directory, by outcome: cached, read, unavailable \
         (the directory could not be reached: decisions by group refused), refused (an answer \
         that cannot be used)"
    );
    metrics::describe_histogram!(
        "deskbroker_directory_lookup_duration_seconds",
        metrics::Unit::Seconds,
        "Time to read one user's groups from the directory (cache misses only)"
    );
}
