//! The directory's bind by Kerberos (rule AD1's "Kerberos with a keytab"):
//! SASL GSSAPI over the connection's TLS (ldap3's `sasl_gssapi_cred_bind`,
//! MIT's GSSAPI through `cross-krb5`), as the service account whose keys
//! the broker's client keytab holds.
//!
//! MIT's initiator reads the client keytab from the process's environment
//! (`KRB5_CLIENT_KTNAME`) and keeps the tickets it gets with it in the
//! default credential cache (`KRB5CCNAME`), which for the broker is a
//! `MEMORY:` cache of its own: the tickets live in this process only, and
//! the cache of the user who started it is never read or written. The
//! safe API names neither per credential, so the binary sets both for
//! itself at start (`deskbroker` starts itself again with them, see
//! [`environment`]), and every bind checks them ([`check_environment`]).
//! With the keytab, MIT gets a ticket-granting ticket when the cache has
//! none or it has expired, so a connection made again a day later binds
//! without anyone's help.
//!
//! MIT's calls block (they read the keytab and talk to the KDC), so the
//! bind runs on the blocking pool; the lookup's timeout bounds how long a
//! caller waits for it.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use cross_krb5::{Cred, InitiateFlags, K5Cred};
use ldap3::Ldap;

/// The environment variable MIT Kerberos reads an initiator's keytab from.
pub const CLIENT_KEYTAB_VARIABLE: &str = "KRB5_CLIENT_KTNAME";
/// The environment variable naming the default credential cache.
pub const CCACHE_VARIABLE: &str = "KRB5CCNAME";
/// The broker's credential cache: in this process's memory only.
pub const CCACHE: &str = "MEMORY:deskbroker-directory";

/// How the broker binds with Kerberos.
#[derive(Debug, Clone)]
pub struct KeytabBind {
    /// The client keytab of the broker's service account (absolute).
    pub keytab: PathBuf,
    /// The keytab's principal to bind as; None: the keytab's first.
    pub principal: Option<String>,
    /// The DNS name of the LDAP servers' service principal
    /// (`ldap/<service host>`); None: each URL's host.
    pub service_host: Option<String>,
}

impl KeytabBind {
    /// The host part of the LDAP service principal for `url_host` (a URL's
    /// host, port left out).
    pub fn service_host_for<'a>(&'a self, url_host: &'a str) -> &'a str {
        self.service_host.as_deref().unwrap_or(url_host)
    }
}

/// What the process's environment must say for `keytab` (an absolute
/// path): the client keytab as a `FILE:` (never read as another keytab
/// type) and the broker's own memory cache.
pub fn environment(keytab: &Path) -> [(&'static str, OsString); 2] {
    let mut value = OsString::from("FILE:");
    value.push(keytab.as_os_str());
    [
        (CLIENT_KEYTAB_VARIABLE, value),
        (CCACHE_VARIABLE, OsString::from(CCACHE)),
    ]
}

/// Refuses an environment that does not name `keytab` and the memory
/// cache: MIT would use another keytab or the user's cache.
pub fn check_environment(keytab: &Path) -> Result<(), String> {
    for (var, wanted) in environment(keytab) {
        if std::env::var_os(var).as_ref() != Some(&wanted) {
            return Err(format!(
                "{var} must be {} in the broker's environment (deskbroker sets it for itself \
                 when it starts with --directory-keytab)",
                wanted.to_string_lossy()
            ));
        }
    }
    Ok(())
}

/// Binds `ldap` (a connection over TLS) as `bind`'s principal to the
/// service `ldap/<service_host>`, the LDAP exchange within `timeout` (so
/// that a server that never answers holds no blocking thread for long).
pub(super) async fn bind(
    ldap: &Ldap,
    bind: &KeytabBind,
    service_host: &str,
    timeout: std::time::Duration,
) -> Result<(), String> {
    check_environment(&bind.keytab)?;
    std::fs::File::open(&bind.keytab).map_err(|e| format!("the directory keytab: {e}"))?;
    let mut ldap = ldap.clone();
    let principal = bind.principal.clone();
    let service = service_host.to_string();
    let runtime = tokio::runtime::Handle::current();
    let who = principal
        .as_deref()
        .unwrap_or("the keytab's first principal");
    let what = format!("binding as {who} to ldap/{service_host} with Kerberos");
    tokio::task::spawn_blocking(move || {
        let cred = Cred::client_acquire(InitiateFlags::empty(), principal.as_deref())
            .map_err(|e| format!("the keytab's credentials: {e:#}"))?;
        // The exchange's messages go through the connection's driver, a
        // task of the runtime; this thread only waits for them.
        runtime
            .block_on(async {
                tokio::time::timeout(timeout, ldap.sasl_gssapi_cred_bind(cred, &service)).await
            })
            .map_err(|_| format!("no answer within {} s", timeout.as_secs_f64()))?
            .and_then(|r| r.success())
            .map(|_| ())
            .map_err(|e| e.to_string())
    })
    .await
    .map_err(|e| e.to_string())
    .and_then(|r| r)
    .map_err(|e| format!("{what}: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_environment_names_a_file_keytab_and_a_memory_cache() {
        let [(kt, ktv), (cc, ccv)] = environment(Path::new("/etc/deskbroker/directory.keytab"));
        assert_eq!(kt, "KRB5_CLIENT_KTNAME");
        assert_eq!(ktv, "FILE:/etc/deskbroker/directory.keytab");
        assert_eq!(cc, "KRB5CCNAME");
        assert!(ccv.to_string_lossy().starts_with("MEMORY:"));
        // This test process was started without them.
        let err = check_environment(Path::new("/nowhere/directory.keytab")).unwrap_err();
        assert!(
            err.contains("KRB5_CLIENT_KTNAME must be FILE:/nowhere"),
            "{err}"
        );
    }

    #[test]
    fn the_service_host_defaults_to_the_urls() {
        let mut bind = KeytabBind {
            keytab: "/k".into(),
            principal: None,
            service_host: None,
        };
        assert_eq!(bind.service_host_for("dc1.example.com"), "dc1.example.com");
        bind.service_host = Some("dc.example.com".into());
        assert_eq!(bind.service_host_for("10.0.0.1"), "dc.example.com");
    }
}
