//! A real Active Directory domain controller for the end-to-end tests:
//! Debian's Samba (`samba -i -M single`) serving the domain
//! DESKBROKER.TEST (NetBIOS name DESKBROKER) in a network namespace of its
//! own, reached only through forwarders on 127.0.0.1.
//!
//! - **Isolation.** Samba's LDAP and Kerberos ports cannot be moved, so
//!   each DC runs in its own namespace (`ip netns add`, only `lo`, up: the
//!   DC listens on the namespace's 127.0.0.1, which no other namespace can
//!   reach). The tests reach it through forwarders of this module:
//!   TCP listeners on the main namespace's 127.0.0.1 whose connections go
//!   out of a thread that entered the DC's namespace (`setns`), to the
//!   DC's 127.0.0.1. No packet is ever addressed to the namespace from
//!   outside; no interface joins the two. Forwarded: LDAPS (636), LDAP
//!   (389, for StartTLS) and Kerberos over TCP (88).
//! - **Provisioning once.** `samba-tool domain provision` takes 7–10 s, so
//!   one template per build is provisioned under a file lock in the cargo
//!   target directory's `tmp` (see [`template_home`]; its name carries
//!   [`RECIPE`]: a changed recipe provisions anew); each DC copies it into
//!   a temporary directory and points its smb.conf there.
//! - **Changes** (users, groups, passwords, service principals, keytabs)
//!   are made with `samba-tool` on the DC's own database files, as an
//!   administrator on the DC itself would; the running DC sees them at
//!   once. Many users at once ([`Domain::add_users`]) are added in one
//!   transaction by one process.
//! - **TLS.** The template holds a CA of its own and a certificate for
//!   127.0.0.1 and localhost signed by it, which the DC serves on LDAPS and
//!   StartTLS; [`Domain::ca_file`] is the CA.
//! - **Lifetime.** The DC's stdin is a pipe held by the test: if the test
//!   dies, Samba reads end of file and exits. Dropping a [`Domain`] kills
//!   the DC by its pid, stops the forwarders and deletes the namespace and
//!   the directory; the namespace and directory of a killed test (its
//!   pid, in their names, is gone) are deleted by the next
//!   [`Domain::start`].
//!
//! Cost, measured on a 2-core machine: provisioning the template 8–10 s
//! idle (about 20 s under a full load) and 33 MB on disk, once per build;
//! each DC then 1.5–2.6 s to start (copy, start, first LDAPS bind), 33 MB
//! of disk in the temporary directory and 55 MB of memory (one process:
//! only the `ldap` and `kdc` services run; [`Domain::start_with_winbind`]
//! adds winbind, for NTLM checks, as a process of its own). Each
//! `samba-tool` change takes 0.5–1 s.
//!
//! Needs (scripts/install-test-deps.sh installs them): samba and
//! samba-ad-provision (the DC), ldap-utils (`ldapsearch`, which also tells
//! when the DC is up), krb5-user (`kinit`), iproute2 (`ip netns`); and
//! root, for the namespace.

use std::fs::File;
use std::io::Write as _;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use crate::forward::{Connector, Forward};
use crate::{PATIENCE, eventually_blocking, require, write_secret};

/// The version of the template's recipe, part of its directory's name:
/// change it whenever the provisioning below changes, so that a build with
/// an older template provisions a new one.
pub const RECIPE: &str = "v1";

/// The domain's Kerberos realm and DNS name.
pub const REALM: &str = "DESKBROKER.TEST";
/// The domain's NetBIOS name (`DESKBROKER\user`).
pub const NETBIOS: &str = "DESKBROKER";
/// The domain's base DN.
pub const BASE_DN: &str = "DC=deskbroker,DC=test";
/// Administrator's password (the DC is private to its test).
const ADMIN_PASSWORD: &str = "Admin-Pass-4a7e1c";
/// The DC's DNS name, in its LDAP service principal `ldap/<DC_HOST>`.
const DC_HOST: &str = "dc.deskbroker.test";
/// The ordinary account the broker binds as, made in the template.
const BIND_USER: &str = "deskbroker-bind";
const BIND_PASSWORD: &str = "Bind-Pass-93d5b0";

/// Namespaces of this module are named `PREFIX<pid>-<n>`.
const NETNS_PREFIX: &str = "deskbroker-dc-";

/// How long provisioning the template may take (a loaded machine), and how
/// long a test waits for another test's provisioning.
const PROVISIONING: Duration = Duration::from_secs(180);

/// A Samba AD domain controller of the test's own; see the module's
/// documentation.
pub struct Domain {
    /// The DC's directory, named as its namespace.
    dir: PathBuf,
    conf: PathBuf,
    netns: String,
    /// The DC's process (`None` once killed).
    samba: Mutex<Option<Child>>,
    ldaps: Forward,
    ldap: Forward,
    kdc: Forward,
}

impl Domain {
    /// Starts a DC from the template (provisioning it first if this build
    /// has none) and answers once an LDAPS bind through its forwarder
    /// works. Fails the test, saying why, if it cannot.
    pub fn start() -> Domain {
        Domain::start_with(false)
    }

    /// [`Domain::start`], with the DC's winbind running too, for NTLM
    /// checks through `ntlm_auth` ([`Domain::ntlm_helper`]): winbind is a
    /// process of its own (about 20 MB more), so only the tests that check
    /// NTLM start it.
    pub fn start_with_winbind() -> Domain {
        Domain::start_with(true)
    }

    fn start_with(winbind: bool) -> Domain {
        let samba = require("samba", "samba");
        require("ldapsearch", "ldap-utils");
        remove_stale();
        let template = template();
        static SEQ: AtomicU64 = AtomicU64::new(0);
        let netns = format!(
            "{NETNS_PREFIX}{}-{}",
            std::process::id(),
            SEQ.fetch_add(1, Ordering::SeqCst)
        );
        let dir = std::env::temp_dir().join(&netns);
        let _ = std::fs::remove_dir_all(&dir); // left by an earlier process of this pid
        std::fs::create_dir(&dir).expect("the DC's directory");
        let root = dir.join("dc");
        run(
            Command::new("cp").arg("-a").arg(&template).arg(&root),
            "copy the template",
        );
        let conf = root.join("etc/smb.conf");
        let text = std::fs::read_to_string(&conf).expect("read the template's smb.conf");
        let mut text = text.replace(
            template.to_str().expect("a UTF-8 path"),
            root.to_str().expect("a UTF-8 path"),
        );
        if winbind {
            text = text.replace(
                "server services = ldap, kdc\n",
                "server services = ldap, kdc, winbindd\n",
            );
        }
        // SASL (Kerberos) binds over TLS without a SASL security layer of
        // their own, as Windows DCs and Samba from 4.20 take them; this
        // Samba (4.17) would ask for signing on top of TLS. Simple binds
        // still need TLS.
        text = text.replacen(
            "[global]\n",
            "[global]\n\tldap server require strong auth = allow_sasl_over_tls\n",
            1,
        );
        std::fs::write(&conf, text).expect("write the DC's smb.conf");

        run(
            Command::new(ip()).args(["netns", "add", &netns]),
            "add the DC's network namespace",
        );
        run(
            Command::new(ip()).args(["netns", "exec", &netns, "ip", "link", "set", "lo", "up"]),
            "bring up the namespace's loopback",
        );
        let log = File::create(dir.join("samba.log")).expect("the DC's log");
        // `ip netns exec` runs samba in place: the child's pid is samba's.
        let child = Command::new(ip())
            .args(["netns", "exec", &netns])
            .arg(&samba)
            .args(["-i", "-M", "single", "--debug-stdout", "-s"])
            .arg(&conf)
            .stdin(Stdio::piped())
            .stdout(log.try_clone().expect("log"))
            .stderr(log)
            .spawn()
            .expect("start samba");
        let connector = Connector::enter(&netns);
        let domain = Domain {
            conf,
            netns,
            samba: Mutex::new(Some(child)),
            ldaps: Forward::start(connector.clone(), 636),
            ldap: Forward::start(connector.clone(), 389),
            kdc: Forward::start(connector, 88),
            dir,
        };
        write_secret(&domain.dir.join("bind-password"), BIND_PASSWORD);
        let up = eventually_blocking(PATIENCE, || {
            let mut samba = domain.samba.lock().unwrap();
            if let Some(status) = samba.as_mut().and_then(|c| c.try_wait().ok().flatten()) {
                return Err(format!("samba exited: {status}"));
            }
            drop(samba);
            domain.search(&format!("(sAMAccountName={BIND_USER})"), &["dn"])
        });
        if let Err(e) = up {
            panic!(
                "the domain controller did not answer an LDAPS bind: {e}\n{}",
                domain.log()
            );
        }
        if winbind {
            let pipe = domain.root().join("run/winbindd/pipe");
            let up = eventually_blocking(PATIENCE, || {
                pipe.exists().then_some(()).ok_or("no winbind pipe yet")
            });
            if let Err(e) = up {
                panic!("the DC's winbind did not start: {e}\n{}", domain.log());
            }
        }
        domain
    }

    /// The NTLM helper of this DC (for `--gateway-ntlm-helper` and its
    /// `--gateway-ntlm-helper-arg`s): Samba's `ntlm_auth` run with this
    /// DC's smb.conf, asking the DC's own winbind (started with
    /// [`Domain::start_with_winbind`]) through its socket, which is a file,
    /// not a network address: Samba's client library finds a socket
    /// outside its usual directory only under nss_wrapper
    /// (`SELFTEST_WINBINDD_SOCKET_DIR`, Samba's own test suite's way), so
    /// `env` starts it preloaded with the system's own users and groups.
    pub fn ntlm_helper(&self) -> (PathBuf, Vec<String>) {
        let ntlm_auth = require("ntlm_auth", "winbind");
        let wrapper = [
            "/usr/lib/x86_64-linux-gnu",
            "/usr/lib/aarch64-linux-gnu",
            "/usr/lib",
        ]
        .iter()
        .map(|d| Path::new(d).join("libnss_wrapper.so"))
        .find(|p| p.exists())
        .expect("libnss_wrapper.so (the libnss-wrapper package)");
        let args = vec![
            format!("LD_PRELOAD={}", wrapper.display()),
            "NSS_WRAPPER_PASSWD=/etc/passwd".into(),
            "NSS_WRAPPER_GROUP=/etc/group".into(),
            format!(
                "SELFTEST_WINBINDD_SOCKET_DIR={}",
                self.root().join("run/winbindd").display()
            ),
            ntlm_auth.display().to_string(),
            format!("--configfile={}", self.conf.display()),
        ];
        (PathBuf::from("/usr/bin/env"), args)
    }

    /// The realm, "DESKBROKER.TEST".
    pub fn realm(&self) -> &'static str {
        REALM
    }

    /// The NetBIOS domain name, "DESKBROKER".
    pub fn netbios(&self) -> &'static str {
        NETBIOS
    }

    /// "DC=deskbroker,DC=test".
    pub fn base_dn(&self) -> &'static str {
        BASE_DN
    }

    /// The DN of the user or group `name` (all are made in CN=Users).
    pub fn dn(&self, name: &str) -> String {
        format!("CN={name},CN=Users,{BASE_DN}")
    }

    /// `ldaps://127.0.0.1:PORT`, the forwarded LDAPS port.
    pub fn ldaps_url(&self) -> String {
        format!("ldaps://127.0.0.1:{}", self.ldaps.port)
    }

    /// `ldap://127.0.0.1:PORT`, the forwarded plain LDAP port (for
    /// StartTLS; the DC refuses simple binds without TLS).
    pub fn ldap_url(&self) -> String {
        format!("ldap://127.0.0.1:{}", self.ldap.port)
    }

    /// The CA (PEM) that signed the DC's certificate, which names
    /// 127.0.0.1 and localhost.
    pub fn ca_file(&self) -> PathBuf {
        self.root().join("tls/ca.pem")
    }

    /// The forwarded Kerberos port (TCP only).
    pub fn kdc(&self) -> SocketAddr {
        SocketAddr::from(([127, 0, 0, 1], self.kdc.port))
    }

    /// An ordinary domain account for the broker to bind as: its DN and a
    /// file (mode 0600) holding its password, with no newline.
    pub fn bind_account(&self) -> (String, PathBuf) {
        (self.dn(BIND_USER), self.dir.join("bind-password"))
    }

    /// The flags of `deskbroker serve` that read this domain's groups over
    /// `url` (its LDAPS or its StartTLS URL), keeping them `cache_seconds`.
    pub fn serve_flags(&self, url: &str, cache_seconds: u32) -> Vec<String> {
        let (bind_dn, password_file) = self.bind_account();
        let bind = [
            "--directory-bind-dn".into(),
            bind_dn,
            "--directory-bind-password-file".into(),
            password_file.display().to_string(),
        ];
        self.directory_flags(url, cache_seconds, bind)
    }

    /// [`Domain::serve_flags`] binding with Kerberos as the bind account,
    /// whose keys [`Domain::export_bind_keytab`] wrote to `keytab`, to the
    /// DC's service principal `ldap/dc.deskbroker.test` (`url` names
    /// 127.0.0.1). The broker needs `KRB5_CONFIG` from
    /// [`Domain::krb5_conf`].
    pub fn serve_flags_with_keytab(
        &self,
        url: &str,
        cache_seconds: u32,
        keytab: &Path,
    ) -> Vec<String> {
        let bind = [
            "--directory-keytab".into(),
            keytab.display().to_string(),
            "--directory-service-host".into(),
            DC_HOST.into(),
        ];
        self.directory_flags(url, cache_seconds, bind)
    }

    fn directory_flags(&self, url: &str, cache_seconds: u32, bind: [String; 4]) -> Vec<String> {
        let mut flags: Vec<String> = vec![
            "--directory-url".into(),
            url.into(),
            "--directory-ca-file".into(),
            self.ca_file().display().to_string(),
        ];
        flags.extend(bind);
        flags.extend([
            "--directory-base-dn".into(),
            self.base_dn().into(),
            "--directory-domain".into(),
            self.netbios().into(),
            "--directory-group-cache-seconds".into(),
            cache_seconds.to_string(),
        ]);
        flags
    }

    /// Adds the user `name` (UPN `name@deskbroker.test`, in CN=Users). The
    /// domain's password rules hold: at least 7 characters of three kinds.
    pub fn add_user(&self, name: &str, password: &str) {
        self.tool(&["user", "add", name, password]);
    }

    /// Sets `name`'s password, as an administrator resets it.
    pub fn set_password(&self, name: &str, password: &str) {
        self.tool(&[
            "user",
            "setpassword",
            name,
            &format!("--newpassword={password}"),
        ]);
    }

    /// Adds the security group `name` (in CN=Users).
    pub fn add_group(&self, name: &str) {
        self.tool(&["group", "add", name]);
    }

    /// Makes `member` (a user or a group, by account name) a member of
    /// `group`.
    pub fn add_member(&self, group: &str, member: &str) {
        self.tool(&["group", "addmembers", group, member]);
    }

    /// Adds the users `names` (UPN `name@deskbroker.test`, in CN=Users, no
    /// password: they cannot sign in, but are found and have groups) and
    /// makes them members of `group` (made with [`Domain::add_group`]), in
    /// one transaction of one process: 5–25 ms a user, where
    /// [`Domain::add_user`] takes 0.5–1 s each.
    pub fn add_users(&self, names: &[String], group: &str) {
        let mut ldif = String::new();
        for name in names {
            ldif.push_str(&format!(
                "dn: {}\nobjectClass: user\nsAMAccountName: {name}\n\
                 userPrincipalName: {name}@deskbroker.test\n\n",
                self.dn(name)
            ));
        }
        let mut members = format!("dn: {}\nchangetype: modify\nadd: member\n", self.dn(group));
        for name in names {
            members.push_str(&format!("member: {}\n", self.dn(name)));
        }
        let script = "import sys\n\
            from samba.samdb import SamDB\n\
            from samba.param import LoadParm\n\
            from samba.auth import system_session\n\
            lp = LoadParm(); lp.load(sys.argv[1])\n\
            db = SamDB(sys.argv[2], session_info=system_session(), lp=lp)\n\
            users, members = sys.stdin.read().split('\\0')\n\
            db.transaction_start()\n\
            try:\n\
            \x20   db.add_ldif(users)\n\
            \x20   db.modify_ldif(members)\n\
            except BaseException:\n\
            \x20   db.transaction_cancel()\n\
            \x20   raise\n\
            db.transaction_commit()\n";
        let mut cmd = Command::new("/usr/bin/python3");
        cmd.args(["-c", script]).arg(&self.conf).arg(self.sam());
        // 5–25 ms a user, measured on a busy 2-core machine: a generous
        // bound.
        let limit = PATIENCE + Duration::from_millis(100 * names.len() as u64);
        if let Err(e) = output_within(&mut cmd, &format!("{ldif}\0{members}"), limit) {
            panic!("add {} users to {group}: {e}", names.len());
        }
    }

    /// Takes `member` out of `group`.
    pub fn remove_member(&self, group: &str, member: &str) {
        self.tool(&["group", "removemembers", group, member]);
    }

    /// Gives the account `account` (made with [`Domain::add_user`]) the
    /// service principal `spn` (e.g. "HTTP/gateway.deskbroker.test") with
    /// AES keys only, and writes its keys to the keytab `path` (mode
    /// 0600), as `samba-tool domain exportkeytab` does for a real service.
    pub fn add_service_keytab(&self, account: &str, spn: &str, path: &Path) {
        self.tool(&["spn", "add", spn, account]);
        // AES (0x08 | 0x10): without it the KDC issues the ticket in RC4
        // and the keytab holds only RC4.
        let script = "import sys\n\
            from samba.samdb import SamDB\n\
            from samba.param import LoadParm\n\
            from samba.auth import system_session\n\
            lp = LoadParm(); lp.load(sys.argv[1])\n\
            db = SamDB(sys.argv[2], session_info=system_session(), lp=lp)\n\
            db.modify_ldif('dn: %s\\nchangetype: modify\\nreplace: msDS-SupportedEncryptionTypes\\nmsDS-SupportedEncryptionTypes: 24\\n' % sys.argv[3])\n";
        run(
            Command::new("/usr/bin/python3")
                .args(["-c", script])
                .arg(&self.conf)
                .arg(self.sam())
                .arg(self.dn(account)),
            "set the service account's encryption types",
        );
        let _ = std::fs::remove_file(path);
        run(
            Command::new("samba-tool")
                .args(["domain", "exportkeytab"])
                .arg(path)
                .arg(format!("--principal={spn}"))
                .arg("-s")
                .arg(&self.conf),
            "export the keytab",
        );
        use std::os::unix::fs::PermissionsExt as _;
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))
            .expect("chmod 600 the keytab");
    }

    /// Writes the bind account's keys (its client keytab, as an
    /// administrator exports a service account's) to `path`, mode 0600;
    /// answers its principal. Registers the DC's LDAP service principal
    /// `ldap/dc.deskbroker.test` first (a Windows DC, or Samba's
    /// `samba_spnupdate`, which this DC does not run, registers it
    /// itself), so that a Kerberos bind finds it.
    pub fn export_bind_keytab(&self, path: &Path) -> String {
        self.tool(&["spn", "add", &format!("ldap/{DC_HOST}"), "DC$"]);
        let principal = format!("{BIND_USER}@{REALM}");
        let _ = std::fs::remove_file(path);
        run(
            Command::new("samba-tool")
                .args(["domain", "exportkeytab"])
                .arg(path)
                .arg(format!("--principal={principal}"))
                .arg("-s")
                .arg(&self.conf),
            "export the bind account's keytab",
        );
        use std::os::unix::fs::PermissionsExt as _;
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))
            .expect("chmod 600 the keytab");
        principal
    }

    /// Writes `dir/krb5.conf`, a client configuration for the realm whose
    /// KDC is the forwarder on 127.0.0.1, over TCP only; answers its path.
    pub fn krb5_conf(&self, dir: &Path) -> PathBuf {
        let path = dir.join("krb5.conf");
        let text = format!(
            "[libdefaults]\n\
             \tdefault_realm = {REALM}\n\
             \tdns_lookup_kdc = false\n\
             \tdns_lookup_realm = false\n\
             \tdns_canonicalize_hostname = false\n\
             \trdns = false\n\
             \tudp_preference_limit = 1\n\
             [realms]\n\
             \t{REALM} = {{\n\
             \t\tkdc = {}\n\
             \t}}\n\
             [domain_realm]\n\
             \t.deskbroker.test = {REALM}\n\
             \tdeskbroker.test = {REALM}\n",
            self.kdc()
        );
        std::fs::write(&path, text).expect("write krb5.conf");
        path
    }

    /// Runs MIT `kinit` for `user` (a name or a principal) with
    /// `krb5_conf`, storing the ticket in the cache file `ccache`.
    pub fn kinit(
        &self,
        krb5_conf: &Path,
        user: &str,
        password: &str,
        ccache: &Path,
    ) -> Result<(), String> {
        let kinit = require("kinit", "krb5-user");
        let mut cmd = Command::new(kinit);
        cmd.arg(user)
            .env("KRB5_CONFIG", krb5_conf)
            .env("KRB5CCNAME", format!("FILE:{}", ccache.display()));
        output(&mut cmd, &format!("{password}\n")).map(|_| ())
    }

    /// Stops the forwarders: the directory and the KDC become unreachable
    /// from the tests (connections open through them are closed, new ones
    /// refused), while the DC keeps running.
    pub fn cut_off(&mut self) {
        self.ldaps.stop();
        self.ldap.stop();
        self.kdc.stop();
    }

    /// Starts the forwarders again, on the same ports.
    pub fn restore(&mut self) {
        self.ldaps.listen();
        self.ldap.listen();
        self.kdc.listen();
    }

    /// Searches the domain from `base_dn` through the LDAPS forwarder as
    /// the bind account with `ldapsearch`; answers its LDIF output, or why
    /// it failed.
    pub fn search(&self, filter: &str, attributes: &[&str]) -> Result<String, String> {
        let (dn, password) = self.bind_account();
        let mut cmd = Command::new("ldapsearch");
        cmd.args([
            "-LLL",
            "-x",
            "-o",
            "nettimeout=10",
            "-l",
            "10",
            "-H",
            &self.ldaps_url(),
            "-D",
            &dn,
        ])
        .arg("-y")
        .arg(password)
        .args(["-b", BASE_DN, filter])
        .args(attributes)
        .env("LDAPTLS_CACERT", self.ca_file())
        .env("LDAPTLS_REQCERT", "demand");
        output(&mut cmd, "")
    }

    /// The DC's log so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("samba.log")).unwrap_or_default()
    }

    fn root(&self) -> PathBuf {
        self.dir.join("dc")
    }

    fn sam(&self) -> PathBuf {
        self.root().join("private/sam.ldb")
    }

    /// Runs `samba-tool ARGS` on this DC's database.
    fn tool(&self, args: &[&str]) {
        let mut cmd = Command::new("samba-tool");
        cmd.args(args)
            .arg("-s")
            .arg(&self.conf)
            .arg("-H")
            .arg(self.sam());
        run(&mut cmd, &format!("samba-tool {}", args[..2].join(" ")));
    }
}

impl Drop for Domain {
    fn drop(&mut self) {
        if let Some(mut samba) = self.samba.lock().unwrap().take() {
            let _ = samba.kill();
            let _ = samba.wait();
        }
        self.cut_off();
        let _ = Command::new(ip())
            .args(["netns", "delete", &self.netns])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Where the template is kept: `DESKBROKER_DC_TEMPLATE_DIR` if set, else
/// `tmp` in the cargo target directory this program was built into (the
/// nearest directory above it holding cargo's `CACHEDIR.TAG`: the tests'
/// `CARGO_TARGET_TMPDIR`), else the system's temporary directory.
pub fn template_home() -> PathBuf {
    if let Some(dir) = std::env::var_os("DESKBROKER_DC_TEMPLATE_DIR") {
        return PathBuf::from(dir);
    }
    std::env::current_exe()
        .ok()
        .and_then(|exe| {
            exe.ancestors()
                .find(|dir| dir.join("CACHEDIR.TAG").is_file())
                .map(|target| target.join("tmp"))
        })
        .unwrap_or_else(std::env::temp_dir)
}

/// The provisioned template of this build, provisioning it under a file
/// lock if it is not there yet.
fn template() -> PathBuf {
    let tmp = template_home();
    let tmp = tmp.as_path();
    std::fs::create_dir_all(tmp).expect("CARGO_TARGET_TMPDIR");
    let dir = tmp.join(format!("samba-dc-template-{RECIPE}"));
    let lock_file = File::create(tmp.join(format!("samba-dc-template-{RECIPE}.lock")))
        .expect("the template's lock file");
    let mut lock_file = Some(lock_file);
    let lock = eventually_blocking(PROVISIONING, || {
        let file = lock_file.take().expect("the lock file");
        match nix::fcntl::Flock::lock(file, nix::fcntl::FlockArg::LockExclusiveNonblock) {
            Ok(lock) => Some(lock),
            Err((file, _)) => {
                lock_file = Some(file);
                None
            }
        }
    })
    .expect("another test provisioning the domain's template did not finish in time");
    if !dir.join("ready").exists() {
        provision(&dir);
    }
    drop(lock);
    dir
}

/// Provisions the domain into `dir` (through a scratch directory, renamed
/// when complete, so a half-provisioned template is never used).
fn provision(dir: &Path) {
    require("samba-tool", "samba");
    let scratch = dir.with_extension("new");
    let _ = std::fs::remove_dir_all(&scratch);
    let _ = std::fs::remove_dir_all(dir);
    let mut cmd = Command::new("samba-tool");
    cmd.args([
        "domain",
        "provision",
        "--server-role=dc",
        "--dns-backend=NONE",
        "--host-name=dc",
    ])
    .arg(format!("--realm={REALM}"))
    .arg(format!("--domain={NETBIOS}"))
    .arg(format!("--adminpass={ADMIN_PASSWORD}"))
    .arg("--targetdir")
    .arg(&scratch)
    .args([
        "--option=interfaces = lo",
        "--option=bind interfaces only = yes",
    ]);
    if let Err(e) = output_within(&mut cmd, "", PROVISIONING) {
        panic!(
            "provisioning the test domain failed (are samba and samba-ad-provision installed? run \
             scripts/install-test-deps.sh): {e}"
        );
    }
    let conf = scratch.join("etc/smb.conf");
    let sam = scratch.join("private/sam.ldb");
    let tool = |args: &[&str]| {
        run(
            Command::new("samba-tool")
                .args(args)
                .arg("-s")
                .arg(&conf)
                .arg("-H")
                .arg(&sam),
            &format!("samba-tool {}", args[..2].join(" ")),
        )
    };
    // Passwords that never expire and may be set back: tests set them as
    // they need.
    tool(&[
        "domain",
        "passwordsettings",
        "set",
        "--max-pwd-age=0",
        "--min-pwd-age=0",
        "--history-length=0",
    ]);
    tool(&["user", "add", BIND_USER, BIND_PASSWORD]);

    let tls = scratch.join("tls");
    std::fs::create_dir_all(&tls).expect("the template's tls directory");
    write_certificates(&tls);

    // Only what the tests use runs (one process: LDAP and the KDC), and
    // every file the DC writes stays in its own directory.
    let root = scratch.to_str().expect("a UTF-8 path");
    let text = std::fs::read_to_string(&conf).expect("read smb.conf");
    let mut out = String::new();
    for line in text.lines() {
        let key = line.trim().split('=').next().unwrap_or("").trim();
        if ["server services", "log file", "logging"].contains(&key) {
            continue;
        }
        out.push_str(line);
        out.push('\n');
        if line.trim() == "[global]" {
            out.push_str(&format!(
                "\tserver services = ldap, kdc\n\
                 \tlog file = {root}/log.%m\n\
                 \tlogging = file\n\
                 \tpid directory = {root}/run\n\
                 \tncalrpc dir = {root}/run/ncalrpc\n\
                 \twinbindd socket directory = {root}/run/winbindd\n\
                 \tntp signd socket directory = {root}/run/ntp_signd\n\
                 \ttls enabled = yes\n\
                 \ttls certfile = {root}/tls/dc.pem\n\
                 \ttls keyfile = {root}/tls/dc-key.pem\n\
                 \ttls cafile = {root}/tls/ca.pem\n"
            ));
        }
    }
    let out = out.replace(root, dir.to_str().expect("a UTF-8 path"));
    std::fs::write(&conf, out).expect("write smb.conf");
    std::fs::create_dir_all(scratch.join("run")).expect("the run directory");
    std::fs::write(scratch.join("ready"), RECIPE).expect("mark the template ready");
    std::fs::rename(&scratch, dir).expect("move the template in place");
}

/// A CA and, signed by it, the DC's certificate for 127.0.0.1, localhost
/// and dc.deskbroker.test, as ca.pem, dc.pem and dc-key.pem (0600: Samba
/// refuses a key others may read).
fn write_certificates(tls: &Path) {
    use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair};
    let ca_key = KeyPair::generate().expect("CA key");
    let mut ca = CertificateParams::new(Vec::<String>::new()).expect("CA params");
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca.distinguished_name
        .push(DnType::CommonName, "deskbroker test domain CA");
    let ca_cert = ca.self_signed(&ca_key).expect("CA certificate");
    std::fs::write(tls.join("ca.pem"), ca_cert.pem()).expect("write the CA");
    let issuer = Issuer::new(ca, ca_key);
    let key = KeyPair::generate().expect("DC key");
    let mut params = CertificateParams::new(vec![
        "127.0.0.1".to_string(),
        "localhost".into(),
        "dc.deskbroker.test".into(),
    ])
    .expect("DC params");
    params
        .distinguished_name
        .push(DnType::CommonName, "dc.deskbroker.test");
    let cert = params.signed_by(&key, &issuer).expect("DC certificate");
    std::fs::write(tls.join("dc.pem"), cert.pem()).expect("write the DC's certificate");
    write_secret(&tls.join("dc-key.pem"), &key.serialize_pem());
}

/// Deletes the namespaces and directories of DCs whose test process is
/// gone (killed before its drop ran), first killing whatever still runs in
/// such a namespace.
fn remove_stale() {
    let stale = |name: &str| {
        let pid = name
            .strip_prefix(NETNS_PREFIX)
            .and_then(|rest| rest.split('-').next())
            .and_then(|p| p.parse::<i32>().ok());
        pid.is_some_and(|pid| pid > 0 && !Path::new(&format!("/proc/{pid}")).exists())
    };
    for entry in std::fs::read_dir(std::env::temp_dir())
        .into_iter()
        .flatten()
        .flatten()
    {
        if stale(&entry.file_name().to_string_lossy()) {
            let _ = std::fs::remove_dir_all(entry.path());
        }
    }
    let Ok(entries) = std::fs::read_dir("/run/netns") else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        if !stale(&name) {
            continue;
        }
        if let Ok(out) = Command::new(ip()).args(["netns", "pids", &name]).output() {
            for p in String::from_utf8_lossy(&out.stdout).split_whitespace() {
                if let Ok(p) = p.parse::<i32>()
                    && p > 0
                {
                    let _ = nix::sys::signal::kill(
                        nix::unistd::Pid::from_raw(p),
                        nix::sys::signal::Signal::SIGKILL,
                    );
                }
            }
        }
        let _ = Command::new(ip())
            .args(["netns", "delete", &name])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
    }
}

/// iproute2's `ip`.
fn ip() -> PathBuf {
    require("ip", "iproute2")
}

/// Runs `cmd` to completion within [`PATIENCE`], failing the test with
/// its output if it fails.
fn run(cmd: &mut Command, what: &str) -> String {
    output(cmd, "").unwrap_or_else(|e| panic!("{what}: {e}"))
}

/// Runs `cmd` with `input` on its stdin, within [`PATIENCE`]; answers its
/// stdout if it succeeds, else its status and output.
pub fn output(cmd: &mut Command, input: &str) -> Result<String, String> {
    output_within(cmd, input, PATIENCE)
}

/// Runs `cmd` with `input` on its stdin; answers its stdout if it exits
/// successfully within `limit`, else its status and output (a command
/// still running at `limit` is killed).
fn output_within(cmd: &mut Command, input: &str, limit: Duration) -> Result<String, String> {
    let out = tempfile::tempfile().map_err(|e| e.to_string())?;
    let err = tempfile::tempfile().map_err(|e| e.to_string())?;
    let mut child = cmd
        .stdin(Stdio::piped())
        .stdout(out.try_clone().map_err(|e| e.to_string())?)
        .stderr(err.try_clone().map_err(|e| e.to_string())?)
        .spawn()
        .map_err(|e| format!("{cmd:?}: {e}"))?;
    if let Some(mut stdin) = child.stdin.take() {
        let _ = stdin.write_all(input.as_bytes());
    }
    let status = eventually_blocking(limit, || child.try_wait().ok().flatten());
    let read = |mut f: File| {
        use std::io::{Read as _, Seek as _};
        let mut s = String::new();
        let _ = f.seek(std::io::SeekFrom::Start(0));
        let _ = f.read_to_string(&mut s);
        s
    };
    let (stdout, stderr) = (read(out), read(err));
    match status {
        Some(s) if s.success() => Ok(stdout),
        Some(s) => Err(format!("{s}\n{stdout}{stderr}")),
        None => {
            let _ = child.kill();
            let _ = child.wait();
            Err(format!("still running after {limit:?}\n{stdout}{stderr}"))
        }
    }
}
