//! The directory's flags of `serve` (rule AD1): where the organisation's
//! directory is and how to read a user's groups from it. In the config
//! file they sit in a `[directory]` table (`url`, `ca_file`, `bind_dn`,
//! `bind_password_file` or `keytab`, `base_dn`, …).

use std::path::PathBuf;
use std::sync::Arc;

use anyhow::Context;

/// Without `--directory-url` there is no directory: the groups that decide
/// entitlements are those a portal or a caller vouches for.
#[derive(clap::Args, Debug, Clone)]
pub struct DirectoryFlags {
    /// The directory's LDAP URL: `ldaps://dc1.example.com` or
    /// `ldap://dc1.example.com` (always upgraded with StartTLS; the broker
    /// never binds over plain LDAP). Repeat it (or separate with commas)
    /// for more domain controllers, tried in order. With it, the groups of
    /// a pool's entitledGroups are the directory's, nested groups included,
    /// at every door, the portal and the API.
    #[arg(
        long = "directory-url",
        env = "DESKBROKER_DIRECTORY_URL",
        value_name = "URL",
        value_delimiter = ','
    )]
    pub directory_url: Vec<String>,
    /// PEM file of the CA the directory's certificate chains to (an
    /// enterprise CA); default the system's roots.
    #[arg(
        long = "directory-ca-file",
        env = "DESKBROKER_DIRECTORY_CA_FILE",
        value_name = "FILE"
    )]
    pub directory_ca_file: Option<PathBuf>,
    /// The account the broker binds as (a DN, or a UPN such as
    /// `deskbroker@example.com` for Active Directory): an ordinary user
    /// that may read users and groups.
    #[arg(
        long = "directory-bind-dn",
        env = "DESKBROKER_DIRECTORY_BIND_DN",
        value_name = "DN"
    )]
    pub directory_bind_dn: Option<String>,
    /// File holding the bind account's password (its first line); only
    /// this user may read it (mode 0600 or 0400), or serve refuses it.
    #[arg(
        long = "directory-bind-password-file",
        env = "DESKBROKER_DIRECTORY_BIND_PASSWORD_FILE",
        value_name = "FILE"
    )]
    pub directory_bind_password_file: Option<PathBuf>,
    /// Bind with Kerberos instead of a password: the client keytab of the
    /// broker's service account (`samba-tool domain exportkeytab` or
    /// `ktpass`); only this user may read it (mode 0600 or 0400), or serve
    /// refuses it. The tickets it gets stay in this process's memory.
    #[arg(
        long = "directory-keytab",
        env = "DESKBROKER_DIRECTORY_KEYTAB",
        value_name = "FILE"
    )]
    pub directory_keytab: Option<PathBuf>,
    /// With --directory-keytab: the keytab's principal to bind as
    /// (`svc-deskbroker@EXAMPLE.COM`); default the keytab's first.
    #[arg(
        long = "directory-principal",
        env = "DESKBROKER_DIRECTORY_PRINCIPAL",
        value_name = "NAME"
    )]
    pub directory_principal: Option<String>,
    /// With --directory-keytab: the DNS name in the LDAP servers' service
    /// principal (`ldap/<name>`), for URLs that name an address; default
    /// each URL's host.
    #[arg(
        long = "directory-service-host",
        env = "DESKBROKER_DIRECTORY_SERVICE_HOST",
        value_name = "DNS-NAME"
    )]
    pub directory_service_host: Option<String>,
    /// Where users and groups are searched (`DC=example,DC=com`).
    #[arg(
        long = "directory-base-dn",
        env = "DESKBROKER_DIRECTORY_BASE_DN",
        value_name = "DN"
    )]
    pub directory_base_dn: Option<String>,
    /// NetBIOS names of the domains the directory answers for, so that
    /// `DOMAIN\name` users are looked up by their account name (repeat, or
    /// separate with commas). A `DOMAIN\name` of another domain has no
    /// groups. `name@suffix` is looked up by userPrincipalName, a bare
    /// name by the account attribute.
    #[arg(
        long = "directory-domain",
        env = "DESKBROKER_DIRECTORY_DOMAIN",
        value_name = "NETBIOS",
        value_delimiter = ','
    )]
    pub directory_domain: Vec<String>,
    /// The attribute holding a bare account name (`uid` on most LDAP
    /// servers other than Active Directory).
    #[arg(
        long = "directory-account-attribute",
        env = "DESKBROKER_DIRECTORY_ACCOUNT_ATTRIBUTE",
        value_name = "ATTRIBUTE",
        default_value = "sAMAccountName"
    )]
    pub directory_account_attribute: String,
    /// How nested groups are followed: `token-groups` (Active Directory's
    /// tokenGroups: the groups of the user's logon token, nested and
    /// primary ones included, read from the user's own entry: two indexed
    /// reads a user), `in-chain` (Active Directory's matching rule, one
    /// search the server finds costly on large directories), `walk` (one
    /// search a level, any LDAP server), or `auto` (token-groups where the
    /// server says it is Active Directory, else walk).
    #[arg(
        long = "directory-group-search",
        env = "DESKBROKER_DIRECTORY_GROUP_SEARCH",
        value_name = "HOW",
        default_value = "auto"
    )]
    pub directory_group_search: broker::directory::GroupSearch,
    /// How long a user's groups are used before they are read again: a
    /// user removed from a group loses what it gave them within this
    /// bound.
    #[arg(
        long = "directory-group-cache-seconds",
        env = "DESKBROKER_DIRECTORY_GROUP_CACHE_SECONDS",
        value_name = "SECONDS",
        default_value_t = 300,
        value_parser = clap::value_parser!(u32).range(
            i64::from(broker::directory::MIN_CACHE_SECONDS)..=i64::from(broker::directory::MAX_CACHE_SECONDS)
        )
    )]
    pub directory_group_cache_seconds: u32,
    /// Most users whose groups are cached.
    #[arg(
        long = "directory-group-cache-entries",
        env = "DESKBROKER_DIRECTORY_GROUP_CACHE_ENTRIES",
        value_name = "USERS",
        default_value_t = broker::directory::DEFAULT_CACHE_ENTRIES,
        value_parser = clap::value_parser!(u64).range(1..=10_000_000)
    )]
    pub directory_group_cache_entries: u64,
    /// How long one lookup of a user's groups may take before it counts as
    /// the directory being unreachable.
    #[arg(
        long = "directory-timeout-seconds",
        env = "DESKBROKER_DIRECTORY_TIMEOUT_SECONDS",
        value_name = "SECONDS",
        default_value_t = 5,
        value_parser = clap::value_parser!(u32).range(1..=120)
    )]
    pub directory_timeout_seconds: u32,
}

impl DirectoryFlags {
    /// The directory, with `--directory-url`; checked whole (every flag it
    /// needs, the password file's mode, the URLs, the CA file).
    pub(super) fn directory(&self) -> anyhow::Result<Option<Arc<broker::directory::Directory>>> {
        if self.directory_url.is_empty() {
            return Ok(None);
        }
        let need = |v: &Option<String>, flag: &str| {
            v.clone()
                .filter(|v| !v.trim().is_empty())
                .with_context(|| format!("--directory-url needs {flag}"))
        };
        let base_dn = need(&self.directory_base_dn, "--directory-base-dn")?;
        let bind = self.bind()?;
        let trust = match &self.directory_ca_file {
            Some(path) => api::Trust::ca_file(path)?,
            None => api::Trust::system(),
        };
        let settings = broker::directory::DirectorySettings {
            urls: self.directory_url.clone(),
            trust,
            bind,
            base_dn,
            names: broker::directory::NameMap {
                domains: self
                    .directory_domain
                    .iter()
                    .map(|d| d.trim().to_ascii_uppercase())
                    .filter(|d| !d.is_empty())
                    .collect(),
                account_attribute: self.directory_account_attribute.clone(),
            },
            group_search: self.directory_group_search,
            cache_ttl: std::time::Duration::from_secs(self.directory_group_cache_seconds.into()),
            cache_entries: self.directory_group_cache_entries,
            query_timeout: std::time::Duration::from_secs(self.directory_timeout_seconds.into()),
        };
        let directory = broker::directory::Directory::new(settings).map_err(anyhow::Error::msg)?;
        Ok(Some(Arc::new(directory)))
    }

    /// Whom the broker binds as: exactly one of a password file (with its
    /// bind DN) and a keytab (with its optional principal and service
    /// host), the file's mode checked.
    fn bind(&self) -> anyhow::Result<broker::directory::Bind> {
        match (&self.directory_bind_password_file, &self.directory_keytab) {
            (Some(_), Some(_)) => anyhow::bail!(
                "--directory-bind-password-file and --directory-keytab: give one (a password, \
                 or Kerberos with a keytab), not both"
            ),
            (None, None) => anyhow::bail!(
                "--directory-url needs --directory-bind-password-file (with \
                 --directory-bind-dn) or --directory-keytab"
            ),
            (Some(password_file), None) => {
                for (set, flag) in [
                    (self.directory_principal.is_some(), "--directory-principal"),
                    (
                        self.directory_service_host.is_some(),
                        "--directory-service-host",
                    ),
                ] {
                    anyhow::ensure!(!set, "{flag} goes with --directory-keytab");
                }
                let dn = self
                    .directory_bind_dn
                    .clone()
                    .filter(|v| !v.trim().is_empty())
                    .context("--directory-bind-password-file needs --directory-bind-dn")?;
                let password = crate::secret_file::read(
                    password_file,
                    "--directory-bind-password-file",
                    "the directory bind account's password",
                )?;
                Ok(broker::directory::Bind::Password { dn, password })
            }
            (None, Some(keytab)) => {
                anyhow::ensure!(
                    self.directory_bind_dn.is_none(),
                    "--directory-bind-dn goes with --directory-bind-password-file; with \
                     --directory-keytab the account is the keytab's principal \
                     (--directory-principal)"
                );
                agent::config::check_secret_file(
                    keytab,
                    "--directory-keytab",
                    "the directory service account's Kerberos keys",
                )?;
                let nonempty = |v: &Option<String>, flag: &str| match v {
                    Some(v) if v.trim().is_empty() => anyhow::bail!("{flag} is empty"),
                    v => Ok(v.as_ref().map(|v| v.trim().to_string())),
                };
                Ok(broker::directory::Bind::Keytab(
                    broker::directory::KeytabBind {
                        keytab: std::path::absolute(keytab)?,
                        principal: nonempty(&self.directory_principal, "--directory-principal")?,
                        service_host: nonempty(
                            &self.directory_service_host,
                            "--directory-service-host",
                        )?
                        .map(|h| h.to_ascii_lowercase()),
                    },
                ))
            }
        }
    }

    /// MIT Kerberos takes the client keytab and the credential cache from
    /// the process's environment, and this workspace does not change its
    /// own environment while it runs: with `--directory-keytab` and an
    /// environment that does not name it (and the broker's memory cache)
    /// yet, the process starts itself again, the same arguments, with them
    /// named. Returns only when no start was needed (or the new start
    /// failed: the error).
    pub(super) fn name_keytab_for_kerberos(&self) -> anyhow::Result<()> {
        use std::os::unix::process::CommandExt;
        let Some(keytab) = &self.directory_keytab else {
            return Ok(());
        };
        if self.directory_url.is_empty() {
            return Ok(());
        }
        let wanted = broker::directory::environment(&std::path::absolute(keytab)?);
        if wanted
            .iter()
            .all(|(var, value)| std::env::var_os(var).as_ref() == Some(value))
        {
            return Ok(());
        }
        let exe = std::env::current_exe()?;
        let err = std::process::Command::new(exe)
            .args(std::env::args_os().skip(1))
            .envs(wanted)
            .exec();
        Err(anyhow::anyhow!(
            "starting again with the directory's Kerberos environment: {err}"
        ))
    }
}
