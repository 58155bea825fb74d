//! A real desktop behind xrdp, for the tests that log on: xrdp's session
//! manager (xrdp-sesman) starts an X server (xorgxrdp) and a window manager
//! (twm) for a local test user, whose root window is painted one colour so
//! that a test can tell the desktop from xrdp's login screen.
//!
//! xrdp finds the session manager at the port `/etc/xrdp/sesman.ini`
//! names (it reads no other file), so the test's session manager listens
//! there; when one already does (the system's, on a machine where the xrdp
//! package runs as a service), the test uses it.
//!
//! The user is `deskbroker-web`, made by `scripts/install-test-deps.sh`.
//! Each run sets it a fresh random password (so it needs root, as the
//! installer does) and locks the account again when done: a machine that
//! runs xrdp as a service never has an account with a known password.

use std::io::{Read as _, Write as _};
use std::net::TcpStream;
use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::{Killed, PATIENCE, require};

/// The test user's name.
pub const USER: &str = "deskbroker-web";

/// The test user's desktop colour (its root window), as RGB.
pub const DESKTOP_RGB: [u8; 3] = [0x1f, 0x6f, 0x5c];

/// The test user, with a fresh password and a session script that paints
/// the root window [`DESKTOP_RGB`] and runs twm.
///
/// One test at a time has the user (each sets it a password of its own,
/// and its desktop belongs to one session manager): [`DesktopUser::prepare`]
/// waits for the others, through a lock on a file that threads and
/// processes alike see (`cargo test` runs tests as threads, nextest as
/// processes).
pub struct DesktopUser {
    pub password: String,
    /// Locked while this test has the user; unlocked when it is closed,
    /// after the password is locked again (fields drop after `drop`).
    _turn: std::fs::File,
}

/// How long a test waits for another to be done with the desktop user: a
/// test with a desktop takes well under a minute; this bounds a stuck one.
const TURN: Duration = Duration::from_secs(600);

/// Waits for this test's turn with the desktop user; answers the locked file.
fn take_turn() -> std::fs::File {
    let path = std::env::temp_dir().join("deskbroker-tests-desktop-user.lock");
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        .unwrap_or_else(|e| panic!("open {}: {e}", path.display()));
    let deadline = Instant::now() + TURN;
    loop {
        match file.try_lock() {
            Ok(()) => return file,
            Err(std::fs::TryLockError::WouldBlock) if Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(100));
            }
            Err(e) => panic!(
                "another test has had the desktop user {USER} for {TURN:?} ({}): {e}",
                path.display()
            ),
        }
    }
}

impl DesktopUser {
    pub fn prepare() -> DesktopUser {
        let turn = take_turn();
        let twm = require("twm", "twm");
        let xsetroot = require("xsetroot", "x11-xserver-utils");
        let home = home_of(USER).unwrap_or_else(|| {
            panic!("the desktop test needs the local user {USER}: run scripts/install-test-deps.sh")
        });
        assert!(
            Path::new("/usr/lib/xorg/modules/libxorgxrdp.so").exists(),
            "the desktop test needs xorgxrdp (Debian package xorgxrdp): run \
             scripts/install-test-deps.sh"
        );
        // sesman runs ~/startwm.sh in place of the system's session.
        let script = home.join("startwm.sh");
        let [r, g, b] = DESKTOP_RGB;
        std::fs::write(
            &script,
            format!(
                "#!/bin/sh\n{} -solid '#{r:02x}{g:02x}{b:02x}'\nexec {}\n",
                xsetroot.display(),
                twm.display()
            ),
        )
        .expect("write startwm.sh");
        std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755))
            .expect("chmod startwm.sh");
        let (uid, gid) = ids_of(USER).expect("the user's ids");
        std::os::unix::fs::chown(&script, Some(uid), Some(gid)).expect("chown startwm.sh");

        let password = random_password();
        run_with_input("chpasswd", &format!("{USER}:{password}\n"));
        DesktopUser {
            password,
            _turn: turn,
        }
    }
}

impl Drop for DesktopUser {
    fn drop(&mut self) {
        let _ = Command::new("passwd")
            .args(["--lock", USER])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
    }
}

/// Runs `program` (as root) with `input` on its standard input.
fn run_with_input(program: &str, input: &str) {
    let program = require(program, "passwd");
    let mut child = Command::new(&program)
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start chpasswd");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(input.as_bytes())
        .expect("write to chpasswd");
    let out = child.wait_with_output().expect("chpasswd");
    assert!(
        out.status.success(),
        "{} failed (the desktop test sets its user's password, which needs root): {}",
        program.display(),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The home directory of `user`, from /etc/passwd.
fn home_of(user: &str) -> Option<PathBuf> {
    passwd_entry(user).and_then(|f| f.get(5).map(PathBuf::from))
}

fn ids_of(user: &str) -> Option<(u32, u32)> {
    let f = passwd_entry(user)?;
    Some((f.get(2)?.parse().ok()?, f.get(3)?.parse().ok()?))
}

fn passwd_entry(user: &str) -> Option<Vec<String>> {
    std::fs::read_to_string("/etc/passwd")
        .ok()?
        .lines()
        .map(|l| l.split(':').map(str::to_string).collect::<Vec<_>>())
        .find(|f| f.first().map(String::as_str) == Some(user))
}

/// xrdp's session manager, started by the test (or the one already
/// listening where xrdp looks for it).
pub struct Sesman {
    process: Option<Killed>,
    log: Option<PathBuf>,
}

impl Sesman {
    pub fn start(dir: &Path) -> Sesman {
        let program = require("xrdp-sesman", "xrdp");
        let port = listen_port();
        if listening(port) {
            eprintln!("desktop: using the session manager already listening on port {port}");
            return Sesman {
                process: None,
                log: None,
            };
        }
        std::fs::create_dir_all(dir).expect("sesman dir");
        let ini = dir.join("sesman.ini");
        let log = dir.join("sesman.log");
        std::fs::write(&ini, sesman_ini(port, &log)).expect("write sesman.ini");
        let child = Command::new(program)
            .arg("--nodaemon")
            .arg("--config")
            .arg(&ini)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start xrdp-sesman");
        let mut process = Killed(child);
        let up = crate::eventually_blocking(PATIENCE, || {
            if matches!(process.0.try_wait(), Ok(Some(_))) {
                return Err("exited");
            }
            if listening(port) {
                Ok(())
            } else {
                Err("not yet")
            }
        });
        if up.is_err() {
            panic!(
                "xrdp-sesman did not listen on port {port}; its log:\n{}",
                std::fs::read_to_string(&log).unwrap_or_default()
            );
        }
        Sesman {
            process: Some(process),
            log: Some(log),
        }
    }

    pub fn log(&self) -> String {
        self.log
            .as_ref()
            .and_then(|l| std::fs::read_to_string(l).ok())
            .unwrap_or_default()
    }
}

impl Drop for Sesman {
    /// The sessions it started (the X server, the window manager, the
    /// channel server) outlive a disconnection and the session manager:
    /// they are stopped first, by their own pids.
    fn drop(&mut self) {
        let Some(process) = &self.process else {
            return;
        };
        let pids: Vec<String> = descendants(process.0.id())
            .iter()
            .map(|pid| pid.to_string())
            .collect();
        if !pids.is_empty() {
            // kill(1) with the positive pids of processes this test started.
            let _ = Command::new("kill")
                .args(&pids)
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status();
        }
    }
}

/// Whether a session manager listens on loopback `port`. xrdp, built with
/// IPv6, takes `127.0.0.1` in its files to mean `::1`.
fn listening(port: u16) -> bool {
    TcpStream::connect(("127.0.0.1", port)).is_ok() || TcpStream::connect(("::1", port)).is_ok()
}

/// The port xrdp reads: `[Globals] ListenPort` of /etc/xrdp/sesman.ini,
/// 3350 when it names none.
fn listen_port() -> u16 {
    let ini = std::fs::read_to_string("/etc/xrdp/sesman.ini").unwrap_or_default();
    let mut globals = false;
    for line in ini.lines().map(str::trim) {
        if line.starts_with('[') {
            globals = line == "[Globals]";
        } else if globals
            && let Some(v) = line.strip_prefix("ListenPort=")
            && let Ok(port) = v.trim().parse()
        {
            return port;
        }
    }
    3350
}

fn sesman_ini(port: u16, log: &Path) -> String {
    format!(
        "[Globals]\n\
         ListenAddress=127.0.0.1\n\
         ListenPort={port}\n\
         EnableUserWindowManager=true\n\
         UserWindowManager=startwm.sh\n\
         DefaultWindowManager=startwm.sh\n\
         ReconnectScript=reconnectwm.sh\n\
         \n\
         [Security]\n\
         AllowRootLogin=false\n\
         MaxLoginRetry=4\n\
         AlwaysGroupCheck=false\n\
         \n\
         [Sessions]\n\
         X11DisplayOffset=10\n\
         MaxSessions=8\n\
         KillDisconnected=false\n\
         DisconnectedTimeLimit=0\n\
         IdleTimeLimit=0\n\
         Policy=Default\n\
         \n\
         [Logging]\n\
         LogFile={log}\n\
         LogLevel=INFO\n\
         EnableSyslog=false\n\
         EnableConsole=false\n\
         \n\
         [Xorg]\n\
         param=/usr/lib/xorg/Xorg\n\
         param=-config\n\
         param=xrdp/xorg.conf\n\
         param=-noreset\n\
         param=-nolisten\n\
         param=tcp\n\
         param=-logfile\n\
         param=.xorgxrdp.%s.log\n\
         \n\
         [Chansrv]\n\
         FuseMountName=thinclient_drives\n\
         EnableFuseMount=false\n\
         \n\
         [ChansrvLogging]\n\
         LogLevel=INFO\n\
         EnableSyslog=false\n",
        log = log.display()
    )
}

/// The processes `user` runs now, read from /proc: (pid, command line,
/// its arguments joined by spaces).
pub fn programs_of(user: &str) -> Vec<(u32, String)> {
    let Some((uid, _)) = ids_of(user) else {
        return Vec::new();
    };
    let mut found = Vec::new();
    for (pid, dir) in processes() {
        let status = std::fs::read_to_string(dir.join("status")).unwrap_or_default();
        let owner = status
            .lines()
            .find_map(|l| l.strip_prefix("Uid:"))
            .and_then(|v| v.split_whitespace().next())
            .and_then(|v| v.parse::<u32>().ok());
        if owner != Some(uid) {
            continue;
        }
        let cmdline = std::fs::read(dir.join("cmdline")).unwrap_or_default();
        let cmdline = String::from_utf8_lossy(&cmdline).replace('\0', " ");
        found.push((pid, cmdline.trim().to_string()));
    }
    found
}

/// Every process now: its pid and its directory under /proc.
fn processes() -> Vec<(u32, PathBuf)> {
    std::fs::read_dir("/proc")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|entry| {
            let pid = entry.file_name().to_str()?.parse::<u32>().ok()?;
            Some((pid, entry.path()))
        })
        .collect()
}

/// Every process descended from `root`, read from /proc.
fn descendants(root: u32) -> Vec<u32> {
    let mut parents = Vec::new();
    for (pid, dir) in processes() {
        let stat = std::fs::read_to_string(dir.join("stat")).unwrap_or_default();
        // The parent is the second field after the command's ")".
        let ppid = stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().nth(1))
            .and_then(|p| p.parse::<u32>().ok());
        if let Some(ppid) = ppid {
            parents.push((pid, ppid));
        }
    }
    let mut found = Vec::new();
    let mut frontier = vec![root];
    while let Some(parent) = frontier.pop() {
        for &(pid, ppid) in &parents {
            if ppid == parent && pid > 0 && !found.contains(&pid) {
                found.push(pid);
                frontier.push(pid);
            }
        }
    }
    found
}

/// A session host that requires Network Level Authentication: FreeRDP's
/// shadow server sharing an X display of its own, which takes one NTLM
/// user from a SAM file of its own, with a fresh random password.
pub struct NlaHost {
    _process: Killed,
    _display: crate::Display,
    pub address: String,
    pub user: String,
    pub password: String,
    log: PathBuf,
}

impl NlaHost {
    pub fn start(dir: &Path) -> NlaHost {
        let shadow = require("freerdp-shadow-cli", "freerdp2-shadow-x11");
        let hash = require("winpr-hash", "winpr-utils");
        let xvfb = require("Xvfb", "xvfb");
        std::fs::create_dir_all(dir).expect("nla host dir");
        let display = crate::Display::start(&xvfb);

        let user = "nla-user".to_string();
        let password = random_password();
        let sam = dir.join("sam");
        let line = Command::new(hash)
            .args(["-u", &user, "-p", &password, "-f", "sam"])
            .output()
            .expect("winpr-hash");
        assert!(line.status.success(), "winpr-hash failed");
        std::fs::write(&sam, &line.stdout).expect("write the SAM file");

        // A port picked by binding 0 could be taken before the server binds
        // it: retry.
        for _ in 0..3 {
            let port = crate::free_port();
            let log = dir.join("shadow.log");
            let child = Command::new(&shadow)
                .arg(format!("/port:{port}"))
                .arg("/bind-address:127.0.0.1")
                .arg("/sec:nla")
                .arg(format!("/sam-file:{}", sam.display()))
                // Its certificate and key are made under $HOME.
                .env("HOME", dir)
                .env("DISPLAY", display.name())
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                // FreeRDP logs to standard error.
                .stderr(std::fs::File::create(&log).expect("shadow log"))
                .spawn()
                .expect("start freerdp-shadow-cli");
            let mut process = Killed(child);
            let listening = crate::eventually_blocking(PATIENCE, || {
                if TcpStream::connect(("127.0.0.1", port)).is_ok() {
                    return Some(true);
                }
                // Exited: no use waiting.
                matches!(process.0.try_wait(), Ok(Some(_))).then_some(false)
            });
            if listening == Some(true) {
                return NlaHost {
                    _process: process,
                    _display: display,
                    address: format!("127.0.0.1:{port}"),
                    user,
                    password,
                    log,
                };
            }
        }
        panic!("freerdp-shadow-cli did not start listening");
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

/// 18 letters and digits from /dev/urandom: typed through the browser,
/// every keyboard layout agrees on them.
fn random_password() -> String {
    let mut random = [0u8; 18];
    std::fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut random))
        .expect("random bytes");
    let alphabet = b"abcdefghijkmnopqrstuvwxyzABCDEFGHJKLMNPQRSTUVWXYZ23456789";
    random
        .iter()
        .map(|b| alphabet[usize::from(*b) % alphabet.len()] as char)
        .collect()
}
