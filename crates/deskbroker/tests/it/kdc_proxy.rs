//! The KDC proxy end to end (rule AD3): stock MIT `kinit` and `kvno`
//! (krb5-user, with krb5-k5tls for `https://` KDCs) get a TGT and a
//! service ticket from a real Samba domain controller through
//! `https://127.0.0.1:PORT/KdcProxy` of a real broker's gateway listener,
//! its realm given in the config file; a realm not configured gets nothing,
//! and the DC never sees its requests.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use crate::support::domain::{Domain, output};
use crate::support::{App, metrics_when, require};

/// A TCP relay on 127.0.0.1 to `target` that counts the connections it
/// relays. The proxy is told only of this address, so every request the
/// DC got from the proxy came through here, and is counted.
struct Counted {
    address: SocketAddr,
    connections: Arc<AtomicUsize>,
}

impl Counted {
    /// Relays until the test's runtime ends.
    async fn start(target: SocketAddr) -> Counted {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let address = listener.local_addr().expect("addr");
        let connections = Arc::new(AtomicUsize::new(0));
        let counted = connections.clone();
        tokio::spawn(async move {
            while let Ok((mut client, _)) = listener.accept().await {
                counted.fetch_add(1, Ordering::SeqCst);
                tokio::spawn(async move {
                    if let Ok(mut kdc) = tokio::net::TcpStream::connect(target).await {
                        let _ = tokio::io::copy_bidirectional(&mut client, &mut kdc).await;
                    }
                });
            }
        });
        Counted {
            address,
            connections,
        }
    }

    fn connections(&self) -> usize {
        self.connections.load(Ordering::SeqCst)
    }
}

/// A client's `krb5.conf` in `dir` whose realms `realms` are all reached
/// through the KDC proxy at `gateway`, trusting `anchor` (the gateway's
/// certificate) for its HTTPS.
fn krb5_conf(
    dir: &Path,
    default_realm: &str,
    realms: &[&str],
    gateway: &str,
    anchor: &Path,
) -> PathBuf {
    let mut text = format!(
        "[libdefaults]\n\tdefault_realm = {default_realm}\n\tdns_lookup_kdc = false\n\
         \tdns_lookup_realm = false\n\tdns_canonicalize_hostname = false\n\trdns = false\n\
         [realms]\n"
    );
    for realm in realms {
        text.push_str(&format!(
            "\t{realm} = {{\n\t\tkdc = https://{gateway}/KdcProxy\n\
             \t\thttp_anchors = FILE:{}\n\t}}\n",
            anchor.display()
        ));
    }
    text.push_str("[domain_realm]\n\t.deskbroker.test = DESKBROKER.TEST\n");
    let path = dir.join("krb5-proxy.conf");
    std::fs::write(&path, text).expect("write krb5.conf");
    path
}

/// `kinit USER` through `krb5_conf`, into `ccache`.
fn kinit(krb5_conf: &Path, user: &str, password: &str, ccache: &Path) -> Result<String, String> {
    let mut cmd = Command::new(require("kinit", "krb5-user"));
    cmd.arg(user)
        .env("KRB5_CONFIG", krb5_conf)
        .env("KRB5CCNAME", format!("FILE:{}", ccache.display()));
    output(&mut cmd, &format!("{password}\n"))
}

/// The value of `deskbroker_kdc_proxy_messages_total{outcome}` in `text`.
fn messages(text: &str, outcome: &str) -> u64 {
    let series = format!("deskbroker_kdc_proxy_messages_total{{outcome=\"{outcome}\"}} ");
    text.lines()
        .find_map(|l| l.strip_prefix(&series))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0)
}

#[tokio::test(flavor = "multi_thread")]
async fn mit_kinit_and_kvno_get_tickets_through_the_proxy_for_its_realm_only() {
    require("kvno", "krb5-user");
    let k5tls = std::fs::read_dir("/usr/lib")
        .into_iter()
        .flatten()
        .flatten()
        .any(|d| d.path().join("krb5/plugins/tls/k5tls.so").is_file());
    assert!(
        k5tls,
        "MIT Kerberos' TLS plugin (Debian package krb5-k5tls) is not installed: run \
         scripts/install-test-deps.sh"
    );
    let domain = Domain::start();
    domain.add_user("alice", "Alice-Pass-1234");
    domain.add_user("gateway", "Gateway-Pass-1");
    let dir = tempfile::tempdir().expect("tempdir");
    let keytab = dir.path().join("gateway.keytab");
    domain.add_service_keytab("gateway", "HTTP/gateway.deskbroker.test", &keytab);
    let kdc = Counted::start(domain.kdc()).await;

    // The realm comes from the config file, as a list.
    let data = dir.path().join("data");
    let config = dir.path().join("deskbroker.toml");
    std::fs::write(
        &config,
        format!(
            "kdc_proxy_realm = [\"{}={}\"]\n",
            domain.realm(),
            kdc.address
        ),
    )
    .expect("write the config file");
    let config = config.to_str().expect("UTF-8").to_string();
    let (app, gateway) = App::spawn_with_rd_gateway(&data, &["--config", &config]);
    // The gateway's certificate: the data dir's self-signed one, for
    // 127.0.0.1.
    let anchor = data.join("tls-cert.pem");
    let conf = krb5_conf(
        dir.path(),
        domain.realm(),
        &[domain.realm(), "OTHER.TEST"],
        &gateway,
        &anchor,
    );

    // A TGT, through the proxy only.
    let ccache = dir.path().join("alice.cc");
    kinit(&conf, "alice", "Alice-Pass-1234", &ccache).expect("kinit through the KDC proxy");
    let mut klist = Command::new("klist");
    klist
        .env("KRB5_CONFIG", &conf)
        .env("KRB5CCNAME", format!("FILE:{}", ccache.display()));
    let tickets = output(&mut klist, "").expect("klist");
    assert!(
        tickets.contains("krbtgt/DESKBROKER.TEST@DESKBROKER.TEST"),
        "{tickets}"
    );
    assert!(kdc.connections() >= 1, "the TGT came from elsewhere");

    // A service ticket (TGS-REQ), which the service's keytab decrypts.
    let mut kvno = Command::new("kvno");
    kvno.arg("-k")
        .arg(&keytab)
        .arg("HTTP/gateway.deskbroker.test")
        .env("KRB5_CONFIG", &conf)
        .env("KRB5CCNAME", format!("FILE:{}", ccache.display()));
    let checked = output(&mut kvno, "").expect("kvno through the KDC proxy");
    assert!(checked.contains("keytab entry valid"), "{checked}");

    // The KDC's refusal of a wrong password comes back as it is.
    let wrong = dir.path().join("wrong.cc");
    let refused = kinit(&conf, "alice", "Not-Her-Pass-1", &wrong).expect_err("a wrong password");
    assert!(
        refused.contains("Password incorrect") || refused.contains("Preauthentication failed"),
        "{refused}"
    );

    // A realm the proxy does not serve: kinit gets nothing, and the DC
    // never sees the request.
    let seen = kdc.connections();
    let other = dir.path().join("other.cc");
    let failed = kinit(&conf, "alice@OTHER.TEST", "Alice-Pass-1234", &other)
        .expect_err("a realm not configured");
    assert!(failed.contains("OTHER.TEST"), "{failed}");
    assert_eq!(
        kdc.connections(),
        seen,
        "a request for OTHER.TEST reached the DC"
    );

    let text = metrics_when(&app, |t| messages(t, "unknown_realm") >= 1).await;
    assert!(messages(&text, "relayed") >= 3, "{text}");
    assert!(messages(&text, "unknown_realm") >= 1, "{text}");
}

/// A pool's `kdcProxy` (default false) makes its gateway connection files
/// name the gateway as the client's KDC proxy (`kdcproxyname`), as mstsc
/// reads it; a pool without it, and one that turned it off, do not.
#[tokio::test]
async fn a_pools_gateway_files_name_the_kdc_proxy_when_it_asks() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (app, gateway) = App::spawn_with_rd_gateway(
        &dir.path().join("data"),
        &["--kdc-proxy-realm", "DESKBROKER.TEST=127.0.0.1:88"],
    );
    let line = format!("kdcproxyname:s:{gateway}\r\n");
    let file = async |pool: &str| {
        app.text(&format!(
            "/api/v1/hostPools/{pool}/rdpFile?user=alice&gateway=true"
        ))
        .await
    };
    for (pool, kdc_proxy) in [("kerberos", Some(true)), ("plain", None)] {
        let mut body =
            serde_json::json!({"hostPoolType": "Pooled", "loadBalancerType": "DepthFirst"});
        if let Some(on) = kdc_proxy {
            body["kdcProxy"] = on.into();
        }
        let created = app
            .ok("PUT", &format!("/api/v1/hostPools/{pool}"), Some(body), 201)
            .await;
        assert_eq!(created["kdcProxy"], kdc_proxy.unwrap_or(false), "{created}");
        let text = file(pool).await;
        assert!(text.contains("gatewayaccesstoken:s:"), "{text}");
        assert_eq!(text.contains(&line), kdc_proxy.is_some(), "{pool}: {text}");
    }
    // Turned on, then off again.
    let patched = app
        .ok(
            "PATCH",
            "/api/v1/hostPools/plain",
            Some(serde_json::json!({"kdcProxy": true})),
            200,
        )
        .await;
    assert_eq!(patched["kdcProxy"], true, "{patched}");
    assert!(file("plain").await.contains(&line));
    app.ok(
        "PATCH",
        "/api/v1/hostPools/kerberos",
        Some(serde_json::json!({"kdcProxy": false})),
        200,
    )
    .await;
    assert!(!file("kerberos").await.contains("kdcproxyname"));
    // Only a boolean is taken.
    let (status, refused) = app
        .call(
            "PATCH",
            "/api/v1/hostPools/plain",
            Some(serde_json::json!({"kdcProxy": "yes"})),
        )
        .await;
    assert_eq!(status, 400, "{refused}");
}
