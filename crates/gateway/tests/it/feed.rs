//! The workspace feed on a plain (TLS-less) listener, as behind a TLS
//! proxy: a password is never offered there, and one sent anyway is
//! refused untried: the helper that would check it is never started (here
//! it does not exist, so trying it would answer 503, not 401).

use std::sync::Arc;

use gateway::rd_gateway::GatewayConfig;
use gateway::windows_sign_in::ntlm::NtlmSettings;
use gateway::windows_sign_in::{SignInSettings, WindowsSignIn};
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;

use crate::rd_gateway::{farm_with, read_head};

/// A gateway whose NTLM helper does not exist: any check it tried would
/// be unavailable (503).
fn config() -> GatewayConfig {
    let sign_in = WindowsSignIn::new(SignInSettings {
        kerberos: None,
        ntlm: Some(NtlmSettings {
            helper: vec!["/nonexistent/ntlm_auth".into()],
            domains: vec![("DESKBROKER".into(), "deskbroker.test".into())],
        }),
    })
    .expect("settings");
    GatewayConfig {
        windows_sign_in: Some(Arc::new(sign_in)),
        ..GatewayConfig::default()
    }
}

async fn ask(gateway: &str, headers: &str) -> String {
    let mut tcp = TcpStream::connect(gateway).await.expect("connect");
    let request = format!("GET /RDWeb/Feed/webfeed.aspx HTTP/1.1\r\nHost: gw\r\n{headers}\r\n");
    tcp.write_all(request.as_bytes()).await.expect("write");
    read_head(&mut tcp).await
}

#[tokio::test]
async fn a_plain_listener_neither_offers_nor_tries_a_password() {
    let farm = farm_with(vec![], config()).await;
    let challenged = ask(&farm.gateway, "").await;
    assert!(challenged.starts_with("HTTP/1.1 401 "), "{challenged}");
    assert!(
        challenged.contains("WWW-Authenticate: NTLM"),
        "{challenged}"
    );
    assert!(!challenged.contains("Basic"), "{challenged}");
    // alice:secret
    let sent = ask(&farm.gateway, "Authorization: Basic YWxpY2U6c2VjcmV0\r\n").await;
    assert!(sent.starts_with("HTTP/1.1 401 "), "{sent}");
    assert!(!sent.contains("Basic"), "{sent}");
    // An NTLM sign-in is tried: the helper is missing, so it cannot be
    // checked (503), which shows the password above was not.
    let negotiate = "TlRMTVNTUAABAAAAB4IIogAAAAAAAAAAAAAAAAAAAAAKAGFKAAAADw==";
    let ntlm = ask(
        &farm.gateway,
        &format!("Authorization: NTLM {negotiate}\r\n"),
    )
    .await;
    assert!(ntlm.starts_with("HTTP/1.1 503 "), "{ntlm}");
    // Nothing of the feed without a sign-in, whatever the path.
    let mut tcp = TcpStream::connect(&farm.gateway).await.expect("connect");
    let request = "GET /RDWeb/Feed/rdp/p.rdp HTTP/1.1\r\nHost: gw\r\n\r\n";
    tcp.write_all(request.as_bytes()).await.expect("write");
    assert!(read_head(&mut tcp).await.starts_with("HTTP/1.1 401 "));
}
