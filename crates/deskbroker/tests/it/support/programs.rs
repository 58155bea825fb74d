//! The programs the tests drive: xrdp (a session host with a TLS
//! certificate of its own, made with openssl in the test's directory),
//! Xvfb, xfreerdp, and a process that is killed when dropped. A program
//! that is missing fails the test and says how to install it: a test never
//! passes untested.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use super::*;

pub use testdomain::require;

/// A child process killed when the test ends, pass or fail.
pub struct Killed(pub Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// One xrdp server, its configuration and log in a directory of its own.
pub struct Xrdp {
    _process: Killed,
    pub address: String,
    log: PathBuf,
}

impl Xrdp {
    pub fn start(xrdp: &Path, openssl: &Path, dir: &Path) -> Xrdp {
        std::fs::create_dir_all(dir).expect("xrdp dir");
        let tls = TlsFiles::make(openssl, dir);
        // A port picked by binding 0 could be taken before xrdp binds it: retry.
        let mut last_log = String::new();
        for _ in 0..3 {
            let port = free_port();
            let log = dir.join("xrdp.log");
            let _ = std::fs::remove_file(&log);
            let ini = dir.join("xrdp.ini");
            std::fs::write(&ini, xrdp_ini(port, &log, &tls)).expect("write xrdp.ini");
            let child = Command::new(xrdp)
                .arg("--nodaemon")
                .arg("--config")
                .arg(&ini)
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .expect("start xrdp");
            let mut process = Killed(child);
            let listening = format!("listening to port {port} on 127.0.0.1");
            let listens = crate::eventually_blocking(PATIENCE, || {
                last_log = std::fs::read_to_string(&log).unwrap_or_default();
                if last_log.contains(&listening) {
                    return Some(true);
                }
                // Exited (its port was taken meanwhile): try another.
                matches!(process.0.try_wait(), Ok(Some(_))).then_some(false)
            });
            if listens == Some(true) {
                return Xrdp {
                    _process: process,
                    address: format!("127.0.0.1:{port}"),
                    log,
                };
            }
        }
        panic!("xrdp did not start listening; its log:\n{last_log}");
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Connections whose TLS handshake with this host completed.
    pub fn tls_connections(&self) -> usize {
        self.log().matches("TLS connection established").count()
    }
}

/// A self-signed certificate and its key, for one xrdp (xfreerdp runs with
/// `/cert:ignore`, so any certificate does).
pub struct TlsFiles {
    pub certificate: PathBuf,
    pub key: PathBuf,
}

impl TlsFiles {
    /// `openssl req -x509` into `dir`: an RSA key without a passphrase
    /// (xrdp cannot ask for one) and a certificate for localhost valid for
    /// a day.
    pub fn make(openssl: &Path, dir: &Path) -> TlsFiles {
        let files = TlsFiles {
            certificate: dir.join("cert.pem"),
            key: dir.join("key.pem"),
        };
        let out = Command::new(openssl)
            .args([
                "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
            ])
            .args(["-subj", "/CN=localhost", "-keyout"])
            .arg(&files.key)
            .arg("-out")
            .arg(&files.certificate)
            .stdin(Stdio::null())
            .output()
            .expect("run openssl");
        assert!(
            out.status.success() && files.key.is_file() && files.certificate.is_file(),
            "openssl could not make a certificate: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        // A key only its owner reads, as the broker's doors require.
        std::fs::set_permissions(
            &files.key,
            std::os::unix::fs::PermissionsExt::from_mode(0o600),
        )
        .expect("chmod 600 the key");
        files
    }
}

/// An X display for xfreerdp, which needs one to draw its window.
pub struct Display {
    _process: Killed,
    number: String,
}

impl Display {
    pub fn start(xvfb: &Path) -> Display {
        let mut child = Command::new(xvfb)
            .args([
                "-displayfd",
                "1",
                "-nolisten",
                "tcp",
                "-screen",
                "0",
                "1024x768x24",
            ])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("start Xvfb");
        let stdout = child.stdout.take().expect("stdout");
        let process = Killed(child);
        let mut line = String::new();
        BufReader::new(stdout)
            .read_line(&mut line)
            .expect("Xvfb prints its display number");
        let number = line.trim().to_string();
        assert!(
            !number.is_empty() && number.bytes().all(|b| b.is_ascii_digit()),
            "Xvfb did not start: {line:?}"
        );
        Display {
            _process: process,
            number,
        }
    }

    /// The display's name, `:N`.
    pub fn name(&self) -> String {
        format!(":{}", self.number)
    }
}

/// One xfreerdp client; killing it closes its connection.
pub struct Client {
    pub process: Killed,
    log: PathBuf,
}

impl Client {
    pub fn start(xfreerdp: &Path, display: &Display, home: &Path, args: &[String]) -> Client {
        std::fs::create_dir_all(home).expect("client home");
        let log = home.join(format!("xfreerdp-{}.log", free_port()));
        let out = std::fs::File::create(&log).expect("client log");
        let err = out.try_clone().expect("client log");
        let child = Command::new(xfreerdp)
            .args(args)
            .arg("/cert:ignore")
            .env("DISPLAY", display.name())
            .env("HOME", home)
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err)
            .spawn()
            .expect("start xfreerdp");
        Client {
            process: Killed(child),
            log,
        }
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Whether the client gave up on its own.
    pub fn exited(&mut self) -> bool {
        matches!(self.process.0.try_wait(), Ok(Some(_)))
    }
}

/// Waits until xfreerdp `c` gave up on its own (a refusal); answers its
/// log. `what` names the attempt when it did not.
pub async fn gave_up(mut c: Client, what: &str) -> String {
    let exited = crate::eventually(crate::PATIENCE, || {
        let exited = c.exited();
        async move { exited }
    })
    .await;
    assert!(exited, "{what} was not refused: {}", c.log());
    c.log()
}

/// Waits until `host` has seen `n` TLS handshakes and `other` still `m`.
pub async fn wait_tls(host: &Xrdp, n: usize, other: &Xrdp, m: usize, client: &Client) {
    let reached = eventually(PATIENCE, || async { host.tls_connections() >= n }).await;
    assert!(
        reached,
        "host {} saw {} TLS connections, expected {n}\nits log:\n{}\nclient log:\n{}",
        host.address,
        host.tls_connections(),
        host.log(),
        client.log()
    );
    assert_eq!(
        other.tls_connections(),
        m,
        "the other host {} was reached",
        other.address
    );
}

/// The RDP_NEG_FAILURE codes the front door answers refusals with
/// (`gateway::pdu::failure`; docs/gateway.md lists them for users).
pub const TICKET_REFUSED: u32 = 1001;

pub const ACCESS_REFUSED: u32 = 1002;

pub const UNAVAILABLE: u32 = 1003;

/// Asserts that xfreerdp 2.11 ended on the front door's negotiation
/// failure `code` (its log names the code and the negotiation failure),
/// not on a transport failure.
pub fn assert_told(log: &str, code: u32, what: &impl std::fmt::Debug) {
    assert!(
        log.contains(&format!("Unknown protocol security error {code}"))
            && log.contains("ERRCONNECT_SECURITY_NEGO_CONNECT_FAILED")
            && !log.contains("ERRCONNECT_CONNECT_TRANSPORT_FAILED"),
        "{what:?}: xfreerdp was not told failure {code}:\n{log}"
    );
}

/// A minimal xrdp.ini: one loopback port, threads instead of forks (so
/// killing the server ends its connections), the log, certificate and key
/// in the test's dir.
pub fn xrdp_ini(port: u16, log: &Path, tls: &TlsFiles) -> String {
    format!(
        "[Globals]\n\
         ini_version=1\n\
         fork=false\n\
         port=tcp://127.0.0.1:{port}\n\
         use_vsock=false\n\
         security_layer=negotiate\n\
         crypt_level=high\n\
         certificate={certificate}\n\
         key_file={key}\n\
         ssl_protocols=TLSv1.2, TLSv1.3\n\
         max_bpp=32\n\
         allow_channels=true\n\
         allow_multimon=true\n\
         \n\
         [Logging]\n\
         LogFile={log}\n\
         LogLevel=INFO\n\
         EnableSyslog=false\n\
         EnableConsole=false\n\
         \n\
         [Channels]\n\
         rdpdr=true\n\
         rdpsnd=true\n\
         drdynvc=true\n\
         cliprdr=true\n\
         rail=true\n\
         xrdpvr=true\n\
         \n\
         [Xorg]\n\
         name=Xorg\n\
         lib=libxup.so\n\
         username=ask\n\
         password=ask\n\
         ip=127.0.0.1\n\
         port=-1\n\
         code=20\n",
        log = log.display(),
        certificate = tls.certificate.display(),
        key = tls.key.display(),
    )
}

/// Starts `deskbroker gateway` (a stand-alone RD Gateway) against the
/// broker at `broker` with the credential `token`, its HTTPS listener on a
/// free loopback port with the certificate `tls`, and `extra` flags:
/// the process (killed when dropped) and the listener's `host:port`.
pub fn standalone_gateway(
    broker: &str,
    token: &str,
    tls: &TlsFiles,
    extra: &[&str],
) -> (Killed, String) {
    let mut child = Command::new(crate::exe())
        .args(["gateway", "--broker", broker, "--token", token])
        .args(["--gateway-listen", "127.0.0.1:0", "--gateway-tls-cert"])
        .arg(&tls.certificate)
        .arg("--gateway-tls-key")
        .arg(&tls.key)
        .args(extra)
        .env("RUST_LOG", "warn")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("start deskbroker gateway");
    let started = crate::ready_line(&mut child, crate::SERVE_START);
    let process = Killed(child);
    let gateway = started
        .expect("deskbroker gateway starts")
        .0
        .gateway_addr()
        .to_string();
    (process, gateway)
}
