//! What the operating system refused, said so that an administrator knows
//! what to do: a data directory whose files this user may not use (a
//! restore or a start as root leaves them root's), and a listener that
//! cannot bind (a port below 1024 without the capability, or a port
//! another program holds).

use std::io;
use std::net::SocketAddr;
use std::path::Path;

/// Refuses, in one sentence that names the file, its owner and mode and
/// the user this process runs as, a data directory that this process may
/// not read and write, or that holds a file it may not (the store, its
/// journal, the lock, the admin token, the self-signed certificate).
/// Without it SQLite's "unable to open database file (code 14)" is all an
/// administrator would see.
#[cfg(unix)]
pub fn data_dir_usable(dir: &Path) -> anyhow::Result<()> {
    use nix::unistd::{AccessFlags, access};
    let mut refused = Vec::new();
    if access(
        dir,
        AccessFlags::R_OK | AccessFlags::W_OK | AccessFlags::X_OK,
    )
    .is_err()
    {
        refused.push(dir.to_path_buf());
    } else if let Ok(entries) = std::fs::read_dir(dir) {
        for entry in entries.flatten() {
            let path = entry.path();
            let is_file = entry.file_type().is_ok_and(|t| t.is_file());
            if is_file && access(&path, AccessFlags::R_OK | AccessFlags::W_OK).is_err() {
                refused.push(path);
            }
        }
    }
    refused.sort();
    let Some(first) = refused.first() else {
        return Ok(());
    };
    let others = match refused.len() {
        1 => String::new(),
        n => format!(" (and {} more of its files)", n - 1),
    };
    anyhow::bail!(
        "cannot use the data directory {}: {}{others}, and this process runs as {}, which may \
         not read and write it. Give the directory and its files to the broker's user \
         (`chown -R USER: {}`, USER being the user the broker runs as: `deskbroker` for the \
         package's service); `deskbroker restore` run as root does this itself",
        dir.display(),
        describe(first),
        whoami(),
        dir.display(),
    )
}

#[cfg(not(unix))]
pub fn data_dir_usable(_dir: &Path) -> anyhow::Result<()> {
    Ok(())
}

/// `PATH belongs to NAME (uid N) with mode 600`.
#[cfg(unix)]
fn describe(path: &Path) -> String {
    use std::os::unix::fs::MetadataExt as _;
    match std::fs::metadata(path) {
        Ok(meta) => format!(
            "{} belongs to {} with mode {:o}",
            path.display(),
            user_name(meta.uid()),
            meta.mode() & 0o7777
        ),
        Err(e) => format!("{} cannot be read ({e})", path.display()),
    }
}

/// `NAME (uid N)`, or `uid N` for a uid with no account.
#[cfg(unix)]
fn user_name(uid: u32) -> String {
    match nix::unistd::User::from_uid(nix::unistd::Uid::from_raw(uid)) {
        Ok(Some(user)) => format!("{} (uid {uid})", user.name),
        _ => format!("uid {uid}"),
    }
}

/// The user this process runs as.
#[cfg(unix)]
fn whoami() -> String {
    user_name(nix::unistd::geteuid().as_raw())
}

/// Binds `addr` for `what` ("the API", "the RDP front door", …), turning
/// the two refusals an administrator meets into what to do about them.
pub async fn bind(addr: SocketAddr, what: &str) -> anyhow::Result<tokio::net::TcpListener> {
    tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|e| bind_error(addr, what, e))
}

/// The error of a refused bind of `addr` for `what`.
pub fn bind_error(addr: SocketAddr, what: &str, e: io::Error) -> anyhow::Error {
    let hint = match e.kind() {
        io::ErrorKind::PermissionDenied if addr.port() < 1024 => format!(
            ": a port below 1024 needs the CAP_NET_BIND_SERVICE capability. Under systemd, \
             give the unit a drop-in (`systemctl edit deskbroker`) with \
             AmbientCapabilities=CAP_NET_BIND_SERVICE and \
             CapabilityBoundingSet=CAP_NET_BIND_SERVICE (the stand-alone \
             deskbroker-gateway service has it); or listen on a port above 1023, such as \
             {}",
            SocketAddr::new(addr.ip(), alternative_port(addr.port()))
        ),
        io::ErrorKind::AddrInUse => format!(
            ": another program listens on port {} (`ss -ltnp 'sport = :{}'` shows which){}; \
             stop it or choose another port",
            addr.port(),
            addr.port(),
            if addr.port() == 3389 {
                " — on a machine that is also a session host, xrdp or Windows' own RDP \
                 listens on 3389"
            } else {
                ""
            }
        ),
        io::ErrorKind::AddrNotAvailable => format!(
            ": {} is not an address of this machine (0.0.0.0 listens on all of them)",
            addr.ip()
        ),
        _ => String::new(),
    };
    anyhow::Error::new(e).context(format!("cannot listen for {what} on {addr}{hint}"))
}

/// A port above 1023 to suggest instead of `port`.
fn alternative_port(port: u16) -> u16 {
    match port {
        443 => 8443,
        80 => 8080,
        p => p + 10_000,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refused_binds_say_what_to_do() {
        let low: SocketAddr = "0.0.0.0:443".parse().unwrap();
        let e = bind_error(
            low,
            "the RD Gateway",
            io::Error::from(io::ErrorKind::PermissionDenied),
        );
        let text = format!("{e:#}");
        assert!(
            text.contains("cannot listen for the RD Gateway on 0.0.0.0:443"),
            "{text}"
        );
        assert!(text.contains("CAP_NET_BIND_SERVICE"), "{text}");
        assert!(text.contains("0.0.0.0:8443"), "{text}");

        let rdp: SocketAddr = "0.0.0.0:3389".parse().unwrap();
        let text = format!(
            "{:#}",
            bind_error(rdp, "RDP", io::Error::from(io::ErrorKind::AddrInUse))
        );
        assert!(
            text.contains("another program listens on port 3389"),
            "{text}"
        );
        assert!(text.contains("xrdp"), "{text}");

        // Anything else is passed on as it is.
        let text = format!(
            "{:#}",
            bind_error(rdp, "RDP", io::Error::from(io::ErrorKind::Other))
        );
        assert!(
            text.starts_with("cannot listen for RDP on 0.0.0.0:3389: "),
            "{text}"
        );
    }
}
