//! The listeners of `serve`: the API's (HTTPS with the given certificate,
//! or a self-signed one generated into the data directory when it listens
//! beyond loopback, reloaded on SIGHUP), the RDP front door's and the RD
//! Gateway's (HTTPS only: its own certificate, else the API's, else the
//! self-signed one), what each is reached at, and the lines that announce
//! them: for people, then the ready line for programs.

use std::net::SocketAddr;
use std::sync::Arc;

use anyhow::Context;

use super::ServeArgs;

/// The listener's TLS, if any: the given files; none when asked for plain
/// HTTP or on loopback; otherwise the self-signed pair of the data dir
/// (generated on first start). Prints the scheme's choice and the
/// certificate's fingerprint, and installs the SIGHUP reload.
pub(super) fn listener_tls(
    args: &ServeArgs,
    addr: SocketAddr,
) -> anyhow::Result<Option<Arc<broker::tls::Tls>>> {
    let tls = match (&args.tls_cert, &args.tls_key) {
        (Some(cert), Some(key)) => broker::tls::Tls::from_files(cert, key)?,
        _ if args.insecure_http || addr.ip().is_loopback() => return Ok(None),
        _ => {
            let (tls, generated) =
                broker::tls::Tls::self_signed(&args.data_dir, &self_signed_names(addr))?;
            let path = args.data_dir.join(broker::tls::SELF_SIGNED_CERT);
            if generated {
                eprintln!(
                    "{addr} is not a loopback address and no --tls-cert was given: generated a \
                     self-signed certificate {} (clients pin it with --tls-fingerprint, or \
                     pass --insecure-http to serve plain HTTP)",
                    path.display()
                );
            } else {
                eprintln!("using the self-signed certificate {}", path.display());
            }
            tls
        }
    };
    let tls = Arc::new(tls);
    tls.reload_on_sighup()
        .context("cannot install the SIGHUP handler for TLS reloads")?;
    Ok(Some(tls))
}

/// The names a self-signed certificate is for: loopback, this machine's
/// host name, and the listen address unless it is a wildcard.
pub(super) fn self_signed_names(addr: SocketAddr) -> Vec<String> {
    let mut names = vec![
        "localhost".to_string(),
        "127.0.0.1".to_string(),
        "::1".to_string(),
    ];
    if let Ok(host) = std::fs::read_to_string("/proc/sys/kernel/hostname") {
        let host = host.trim();
        if !host.is_empty() && host != "localhost" {
            names.push(host.to_string());
        }
    }
    if !addr.ip().is_unspecified() && !addr.ip().is_loopback() {
        names.push(addr.ip().to_string());
    }
    names
}

/// Prints the certificate's fingerprint, after the "listening on" lines
/// (scripts and tests read it to pin the certificate).
pub(super) fn announce_tls(tls: Option<&Arc<broker::tls::Tls>>) {
    if let Some(tls) = tls {
        println!("TLS certificate SHA-256 fingerprint {}", tls.fingerprint());
    }
}

/// Prints the ready line ([`deskbroker::ready`]), once every listener is
/// bound and after the lines for people: what programs read.
pub(super) fn announce_ready(
    api: &str,
    rdp: Option<&tokio::net::TcpListener>,
    rd_gateway: Option<&tokio::net::TcpListener>,
) -> anyhow::Result<()> {
    deskbroker::ready::Ready {
        api: Some(api.to_string()),
        rdp: rdp.map(|l| l.local_addr()).transpose()?,
        gateway: rd_gateway.map(|l| l.local_addr()).transpose()?,
    }
    .print()?;
    Ok(())
}

/// Serves `listener` with `tls`, or plain.
pub(super) fn listening(
    listener: tokio::net::TcpListener,
    tls: Option<Arc<broker::tls::Tls>>,
) -> broker::tls::Listening {
    match tls {
        Some(tls) => broker::tls::Listening::tls(listener, tls),
        None => listener.into(),
    }
}

/// The RDP front door's listener, with `--rdp-listen`.
pub(super) async fn bind_rdp(
    rdp_listen: Option<SocketAddr>,
) -> anyhow::Result<Option<tokio::net::TcpListener>> {
    let Some(rdp_addr) = rdp_listen else {
        return Ok(None);
    };
    let l = crate::explain::bind(rdp_addr, "RDP").await?;
    Ok(Some(l))
}

/// The RD Gateway's listener and certificate, with `--gateway-listen`: its
/// own (`--gateway-tls-cert`), else the API's, else the data dir's
/// self-signed one (generated if missing): clients speak HTTPS only.
pub(super) async fn bind_rd_gateway(
    args: &ServeArgs,
    api_tls: Option<&Arc<broker::tls::Tls>>,
    addr: SocketAddr,
) -> anyhow::Result<Option<(tokio::net::TcpListener, Arc<broker::tls::Tls>)>> {
    let Some(listener) = args.rd_gateway.bind().await? else {
        return Ok(None);
    };
    let tls = match (args.rd_gateway.own_tls()?, api_tls) {
        (Some(own), _) => own,
        (None, Some(api)) => api.clone(),
        (None, None) => {
            let names = self_signed_names(listener.local_addr().unwrap_or(addr));
            let (tls, generated) = broker::tls::Tls::self_signed(&args.data_dir, &names)?;
            let path = args.data_dir.join(broker::tls::SELF_SIGNED_CERT);
            eprintln!(
                "the RD Gateway serves HTTPS with the self-signed certificate {} ({}; give it \
                 its own with --gateway-tls-cert and --gateway-tls-key)",
                path.display(),
                if generated { "generated" } else { "kept" }
            );
            Arc::new(tls)
        }
    };
    Ok(Some((listener, tls)))
}

/// Prints the front door's address (after the API's "listening on" line).
pub(super) fn announce_rdp(rdp_listener: Option<&tokio::net::TcpListener>) -> anyhow::Result<()> {
    if let Some(l) = rdp_listener {
        let rdp_addr = l.local_addr()?;
        tracing::info!(%rdp_addr, "rdp front door listening");
        println!("rdp front door listening on {rdp_addr}");
    }
    Ok(())
}

/// How clients reach the front door, for `.rdp` files: the flag, or the
/// listen address.
pub(super) fn rdp_public_address(
    args: &ServeArgs,
    rdp_listener: Option<&tokio::net::TcpListener>,
) -> anyhow::Result<Option<String>> {
    Ok(match (&args.rdp_public_address, rdp_listener) {
        (Some(p), _) => Some(p.clone()),
        (None, Some(l)) => Some(l.local_addr()?.to_string()),
        (None, None) => None,
    })
}

/// How clients reach the RD Gateway, for its `.rdp` files: the flag, or
/// the listen address.
pub(super) fn gateway_public_address(
    args: &ServeArgs,
    listener: Option<&tokio::net::TcpListener>,
) -> anyhow::Result<Option<String>> {
    Ok(match (&args.gateway_public_address, listener) {
        (Some(p), _) => Some(p.clone()),
        (None, Some(l)) => Some(l.local_addr()?.to_string()),
        (None, None) => None,
    })
}
