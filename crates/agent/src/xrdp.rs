//! xrdp's sessions as the host's own kernel shows them: which users have a
//! desktop that xrdp's session manager started, and whether an RDP client
//! is connected to it right now.
//!
//! systemd-logind cannot tell: it calls every xrdp session `active` (they
//! have no seat), whether its client is connected or closed an hour ago;
//! and in a container there is no logind at all. xrdp itself knows, and
//! shows it in its sockets:
//!
//! - xrdp's session manager (`xrdp-sesman`; `xrdp-sesexec` from xrdp 0.10
//!   on), running as root, starts one display server a session, as the
//!   session's user: `Xorg :N` (xorgxrdp) or `Xvnc :N`.
//! - While a client is connected, xrdp holds a connection to that display
//!   server: to the Unix socket `…/xrdp_display_N` (Xorg; the socket lives
//!   in `/run/xrdp/sockdir` or `/tmp/.xrdp`), or to TCP port `5900 + N` on
//!   the host (Xvnc). When the client goes, xrdp closes it; the display
//!   server, and the user's desktop, live on until the user logs off.
//!
//! So a session is `Active` while the kernel's socket tables
//! (`/proc/net/unix`, `/proc/net/tcp`, `/proc/net/tcp6`) hold such a
//! connection, and `Disconnected` otherwise; it ends (is no longer listed)
//! when its display server exits.
//!
//! Trust: the display server runs as the session's user, so a user could
//! connect to their own display's socket and look connected; they cannot
//! make another user's session look connected, nor invent a session (the
//! parent must be xrdp's session manager, running as root).

use std::collections::HashSet;

/// One xrdp session: its user, its X display number, and whether a client
/// is connected to it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct XrdpSession {
    /// The local user name of the display server's owner.
    pub user: String,
    pub display: u32,
    pub connected: bool,
}

/// The display servers xrdp's session manager starts, by their process
/// name, and how a connected client shows for each.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DisplayServer {
    /// xorgxrdp: xrdp connects to the Unix socket `xrdp_display_N`.
    Xorg,
    /// Xvnc: xrdp connects to TCP port `5900 + N`.
    Xvnc,
}

impl DisplayServer {
    fn from_comm(comm: &str) -> Option<DisplayServer> {
        match comm {
            "Xorg" => Some(DisplayServer::Xorg),
            "Xvnc" => Some(DisplayServer::Xvnc),
            _ => None,
        }
    }
}

/// The process names of xrdp's session manager and (xrdp 0.10) the
/// process it runs each session under.
const SESSION_MANAGERS: [&str; 2] = ["xrdp-sesman", "xrdp-sesexec"];

/// What the agent reads of one process.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProcessInfo {
    pub pid: i32,
    pub ppid: i32,
    /// The kernel's name of the program (`/proc/PID/stat`'s second field).
    pub comm: String,
    /// The real user id.
    pub uid: u32,
    pub args: Vec<String>,
}

impl ProcessInfo {
    /// Whether this is xrdp's session manager: its name, run by root (a
    /// user can name a process anything, but not run it as root).
    fn is_session_manager(&self) -> bool {
        self.uid == 0 && SESSION_MANAGERS.contains(&self.comm.as_str())
    }
}

/// What the socket tables say of connections to display servers.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Connections {
    /// Display numbers with a connected `xrdp_display_N` Unix socket.
    pub unix_displays: HashSet<u32>,
    /// Local TCP ports with an established connection.
    pub tcp_ports: HashSet<u16>,
}

impl Connections {
    fn connected(&self, server: DisplayServer, display: u32) -> bool {
        match server {
            DisplayServer::Xorg => self.unix_displays.contains(&display),
            DisplayServer::Xvnc => u16::try_from(5900 + u64::from(display))
                .is_ok_and(|port| self.tcp_ports.contains(&port)),
        }
    }
}

/// The display number a display server was started for: its first
/// argument of the form `:N`.
pub fn display_of(args: &[String]) -> Option<u32> {
    args.iter()
        .skip(1)
        .find_map(|a| a.strip_prefix(':').and_then(|n| n.parse().ok()))
}

/// The display number in the path of an xrdp display socket
/// (`/run/xrdp/sockdir/xrdp_display_10` → 10). Only xrdp's own socket
/// directories count: a socket of that name elsewhere is anybody's.
pub fn display_of_socket(path: &str) -> Option<u32> {
    let (dir, name) = path.rsplit_once('/')?;
    if !SOCKET_DIRS.contains(&dir) {
        return None;
    }
    name.strip_prefix("xrdp_display_")?.parse().ok()
}

/// Where xrdp puts its sockets: `/run/xrdp/sockdir` (Debian 12's 0.9.21,
/// and 0.10), `/tmp/.xrdp` (older releases), `/var/run/xrdp/sockdir`.
const SOCKET_DIRS: [&str; 3] = ["/run/xrdp/sockdir", "/var/run/xrdp/sockdir", "/tmp/.xrdp"];

/// xrdp's sessions among `processes`: `None` when no xrdp session manager
/// runs as root (this host has no xrdp, and its sessions come from
/// elsewhere), else every display server whose parent is the session
/// manager (or its per-session process), with the user `name_of` gives its
/// owner (a display server whose owner has no name is skipped).
pub fn sessions_from(
    processes: &[ProcessInfo],
    connections: &Connections,
    name_of: impl Fn(u32) -> Option<String>,
) -> Option<Vec<XrdpSession>> {
    let managers: HashSet<i32> = processes
        .iter()
        .filter(|p| p.is_session_manager())
        .map(|p| p.pid)
        .collect();
    if managers.is_empty() {
        return None;
    }
    let mut sessions: Vec<XrdpSession> = processes
        .iter()
        .filter(|p| managers.contains(&p.ppid))
        .filter_map(|p| {
            let server = DisplayServer::from_comm(&p.comm)?;
            let display = display_of(&p.args)?;
            Some(XrdpSession {
                user: name_of(p.uid)?,
                display,
                connected: connections.connected(server, display),
            })
        })
        .collect();
    sessions.sort_by_key(|s| s.display);
    Some(sessions)
}

/// Why the kernel's tables could not be read.
#[derive(Debug, thiserror::Error)]
#[error("reading {what}: {source}")]
pub struct ReadError {
    what: &'static str,
    source: procfs::ProcError,
}

/// Reads xrdp's sessions from this host's `/proc`; `Ok(None)` when no
/// xrdp session manager runs. Processes that exit while being read are
/// skipped.
pub fn read() -> Result<Option<Vec<XrdpSession>>, ReadError> {
    let processes = read_processes()?;
    // Most hosts run no xrdp: read no socket table for them.
    if !processes.iter().any(ProcessInfo::is_session_manager) {
        return Ok(None);
    }
    // The TCP tables cost the kernel a walk of every socket bucket (some
    // 14 ms a read on a small VM, 200 times the Unix table): they are read
    // only when an Xvnc session needs them.
    let has = |server| {
        processes
            .iter()
            .any(|p| DisplayServer::from_comm(&p.comm) == Some(server))
    };
    let connections = read_connections(has(DisplayServer::Xorg), has(DisplayServer::Xvnc))?;
    Ok(sessions_from(&processes, &connections, user_name))
}

fn read_processes() -> Result<Vec<ProcessInfo>, ReadError> {
    let all = procfs::process::all_processes().map_err(|source| ReadError {
        what: "/proc",
        source,
    })?;
    let mut out = Vec::new();
    for process in all.flatten() {
        let Ok(stat) = process.stat() else { continue };
        let server = DisplayServer::from_comm(&stat.comm).is_some();
        // Only session managers and display servers matter: the others
        // are not read further.
        if !server && !SESSION_MANAGERS.contains(&stat.comm.as_str()) {
            continue;
        }
        let Ok(uid) = process.uid() else { continue };
        let args = if server {
            process.cmdline().unwrap_or_default()
        } else {
            Vec::new()
        };
        out.push(ProcessInfo {
            pid: stat.pid,
            ppid: stat.ppid,
            comm: stat.comm,
            uid,
            args,
        });
    }
    Ok(out)
}

fn read_connections(unix: bool, tcp: bool) -> Result<Connections, ReadError> {
    let mut c = Connections::default();
    if unix {
        let table = procfs::net::unix().map_err(|source| ReadError {
            what: "/proc/net/unix",
            source,
        })?;
        for entry in table {
            if entry.state != procfs::net::UnixState::CONNECTED {
                continue;
            }
            if let Some(display) = entry
                .path
                .as_deref()
                .and_then(|p| p.to_str())
                .and_then(display_of_socket)
            {
                c.unix_displays.insert(display);
            }
        }
    }
    if tcp {
        let table = procfs::net::tcp().map_err(|source| ReadError {
            what: "/proc/net/tcp",
            source,
        })?;
        // A host without IPv6 has no tcp6 table: that is no error.
        let table6 = procfs::net::tcp6().unwrap_or_default();
        for entry in table.into_iter().chain(table6) {
            if entry.state == procfs::net::TcpState::Established {
                c.tcp_ports.insert(entry.local_address.port());
            }
        }
    }
    Ok(c)
}

/// The user name of `uid`, through the system's user database (NSS, so
/// directory users of sssd or winbind have theirs too).
fn user_name(uid: u32) -> Option<String> {
    nix::unistd::User::from_uid(nix::unistd::Uid::from_raw(uid))
        .ok()
        .flatten()
        .map(|u| u.name)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn process(pid: i32, ppid: i32, comm: &str, uid: u32, args: &[&str]) -> ProcessInfo {
        ProcessInfo {
            pid,
            ppid,
            comm: comm.into(),
            uid,
            args: args.iter().map(|a| a.to_string()).collect(),
        }
    }

    fn names(uid: u32) -> Option<String> {
        match uid {
            1000 => Some("alice".into()),
            1001 => Some("bob".into()),
            1002 => Some("carol".into()),
            _ => None,
        }
    }

    /// Debian 12's xrdp 0.9.21 as `ps` shows it with three sessions: the
    /// session manager, one child of it a session, and under each child
    /// the display server, the window manager and the channel server.
    fn farm() -> Vec<ProcessInfo> {
        vec![
            process(1, 0, "systemd", 0, &[]),
            process(400, 1, "xrdp-sesman", 0, &[]),
            process(401, 1, "xrdp", 0, &[]),
            process(500, 400, "xrdp-sesman", 0, &[]),
            process(
                501,
                500,
                "Xorg",
                1000,
                &["/usr/lib/xorg/Xorg", ":10", "-auth", ".Xauthority"],
            ),
            process(502, 500, "startwm.sh", 1000, &[]),
            process(503, 500, "xrdp-chansrv", 1000, &[]),
            process(600, 400, "xrdp-sesman", 0, &[]),
            process(
                601,
                600,
                "Xorg",
                1001,
                &["/usr/lib/xorg/Xorg", ":11", "-config", "xrdp/xorg.conf"],
            ),
            process(700, 400, "xrdp-sesman", 0, &[]),
            process(
                701,
                700,
                "Xvnc",
                1002,
                &["Xvnc", ":12", "-geometry", "1024x768"],
            ),
        ]
    }

    #[test]
    fn a_session_is_active_while_xrdp_holds_its_display_and_disconnected_after() {
        let connections = Connections {
            unix_displays: HashSet::from([10]),
            tcp_ports: HashSet::from([5912, 22]),
        };
        let sessions = sessions_from(&farm(), &connections, names).unwrap();
        assert_eq!(
            sessions,
            vec![
                XrdpSession {
                    user: "alice".into(),
                    display: 10,
                    connected: true
                },
                XrdpSession {
                    user: "bob".into(),
                    display: 11,
                    connected: false
                },
                XrdpSession {
                    user: "carol".into(),
                    display: 12,
                    connected: true
                },
            ]
        );
    }

    #[test]
    fn without_a_session_manager_running_as_root_there_is_no_xrdp() {
        let mut processes = farm();
        processes.retain(|p| p.comm != "xrdp-sesman" || p.pid != 400);
        // The per-session children are still there, but a session manager
        // that is not root's is not xrdp's.
        for p in &mut processes {
            if p.comm == "xrdp-sesman" {
                p.uid = 1000;
            }
        }
        assert_eq!(
            sessions_from(&processes, &Connections::default(), names),
            None
        );
        // A host with the session manager and no session has an empty list.
        let idle = vec![process(400, 1, "xrdp-sesman", 0, &[])];
        assert_eq!(
            sessions_from(&idle, &Connections::default(), names),
            Some(vec![])
        );
    }

    #[test]
    fn a_display_server_not_started_by_the_session_manager_is_no_session() {
        // A user's own Xorg or Xvnc (named as xrdp's), under their shell,
        // and a process named like the session manager that is not root's.
        let mut processes = farm();
        processes.push(process(900, 1, "bash", 1001, &[]));
        processes.push(process(901, 900, "Xvnc", 1001, &["Xvnc", ":20"]));
        processes.push(process(902, 900, "xrdp-sesman", 1001, &[]));
        processes.push(process(903, 902, "Xorg", 1001, &["Xorg", ":21"]));
        let connections = Connections {
            unix_displays: HashSet::from([21]),
            tcp_ports: HashSet::from([5920]),
        };
        let sessions = sessions_from(&processes, &connections, names).unwrap();
        let displays: Vec<u32> = sessions.iter().map(|s| s.display).collect();
        assert_eq!(displays, vec![10, 11, 12]);
    }

    #[test]
    fn xrdp_0_10_runs_each_session_under_sesexec() {
        let processes = vec![
            process(400, 1, "xrdp-sesman", 0, &[]),
            process(500, 400, "xrdp-sesexec", 0, &[]),
            process(501, 500, "Xorg", 1000, &["/usr/lib/xorg/Xorg", ":10"]),
        ];
        let connections = Connections {
            unix_displays: HashSet::from([10]),
            ..Connections::default()
        };
        let sessions = sessions_from(&processes, &connections, names).unwrap();
        assert_eq!(sessions.len(), 1);
        assert!(sessions[0].connected);
    }

    #[test]
    fn a_display_server_without_a_display_or_a_user_name_is_skipped() {
        let processes = vec![
            process(400, 1, "xrdp-sesman", 0, &[]),
            process(
                501,
                400,
                "Xorg",
                1000,
                &["/usr/lib/xorg/Xorg", "-nolisten", "tcp"],
            ),
            process(502, 400, "Xorg", 4242, &["/usr/lib/xorg/Xorg", ":13"]),
        ];
        assert_eq!(
            sessions_from(&processes, &Connections::default(), names),
            Some(vec![])
        );
    }

    #[test]
    fn display_numbers_are_read_from_arguments_and_xrdps_own_sockets() {
        let args = |a: &[&str]| a.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(display_of(&args(&["Xorg", ":10", "-auth", "x"])), Some(10));
        assert_eq!(display_of(&args(&["Xorg", "-auth", "x", ":7"])), Some(7));
        assert_eq!(
            display_of(&args(&[":9"])),
            None,
            "the program is no argument"
        );
        assert_eq!(display_of(&args(&["Xorg", ":x"])), None);

        assert_eq!(
            display_of_socket("/run/xrdp/sockdir/xrdp_display_10"),
            Some(10)
        );
        assert_eq!(display_of_socket("/tmp/.xrdp/xrdp_display_11"), Some(11));
        assert_eq!(display_of_socket("/home/bob/xrdp_display_10"), None);
        assert_eq!(
            display_of_socket("/run/xrdp/sockdir/xrdp_chansrv_socket_10"),
            None
        );
        assert_eq!(display_of_socket("/run/xrdp/sockdir/xrdp_display_"), None);
        assert_eq!(display_of_socket("xrdp_display_10"), None);
    }

    #[test]
    fn a_display_too_high_for_a_vnc_port_is_never_connected() {
        let connections = Connections {
            tcp_ports: HashSet::from([u16::MAX]),
            ..Connections::default()
        };
        assert!(!connections.connected(DisplayServer::Xvnc, u32::MAX));
        assert!(!connections.connected(DisplayServer::Xvnc, 65535 - 5900 + 1));
        assert!(connections.connected(DisplayServer::Xvnc, 65535 - 5900));
    }
}
