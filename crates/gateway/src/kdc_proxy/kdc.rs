//! The realms the proxy serves, as configured (`--kdc-proxy-realm
//! REALM=HOST:PORT[,HOST:PORT…]`), and one exchange with a realm's KDCs
//! over TCP: each KDC tried in turn, each try bounded, the reply bounded.

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use super::message::MAX_REALM_BYTES;

/// KDCs one realm may list.
pub const MAX_KDCS_PER_REALM: usize = 16;
/// The port of a KDC given without one (RFC 4120 7.2.3).
pub const KERBEROS_PORT: u16 = 88;

/// One realm the proxy serves, and its KDCs, tried in this order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KdcRealm {
    /// The realm's name as configured (`EXAMPLE.COM`); requests name it in
    /// any case.
    pub realm: String,
    pub kdcs: Vec<KdcAddress>,
}

/// A KDC: a host name or IP address, and its TCP port.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KdcAddress {
    pub host: String,
    pub port: u16,
}

impl fmt::Display for KdcAddress {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.host.contains(':') {
            write!(f, "[{}]:{}", self.host, self.port)
        } else {
            write!(f, "{}:{}", self.host, self.port)
        }
    }
}

impl FromStr for KdcRealm {
    type Err = String;

    /// `REALM=HOST:PORT[,HOST:PORT…]`: a realm name (letters, digits, `.`,
    /// `-`, `_`) and its KDCs, a host name or IP address each (an IPv6
    /// address in brackets), the port 88 when left out.
    fn from_str(s: &str) -> Result<KdcRealm, String> {
        let (realm, kdcs) = s
            .split_once('=')
            .ok_or_else(|| format!("{s:?}: expected REALM=HOST:PORT[,HOST:PORT…]"))?;
        let realm = realm.trim();
        let realm_ok = !realm.is_empty()
            && realm.len() <= MAX_REALM_BYTES
            && realm
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b));
        if !realm_ok {
            return Err(format!(
                "{realm:?} is not a realm name (letters, digits, '.', '-' and '_', at most \
                 {MAX_REALM_BYTES})"
            ));
        }
        let kdcs = kdcs
            .split(',')
            .map(|kdc| parse_kdc(kdc.trim()))
            .collect::<Result<Vec<_>, _>>()?;
        if kdcs.len() > MAX_KDCS_PER_REALM {
            return Err(format!("realm {realm}: at most {MAX_KDCS_PER_REALM} KDCs"));
        }
        Ok(KdcRealm {
            realm: realm.to_string(),
            kdcs,
        })
    }
}

/// `HOST[:PORT]`, `IPV4[:PORT]` or `[IPV6][:PORT]`.
fn parse_kdc(s: &str) -> Result<KdcAddress, String> {
    let bad = |why: &str| Err(format!("KDC {s:?}: {why}"));
    let (host, port) = if let Some(rest) = s.strip_prefix('[') {
        let Some((host, after)) = rest.split_once(']') else {
            return bad("an IPv6 address opened with '[' is closed with ']'");
        };
        if host.parse::<std::net::Ipv6Addr>().is_err() {
            return bad("not an IPv6 address in brackets");
        }
        match after {
            "" => (host, None),
            _ => match after.strip_prefix(':') {
                Some(port) => (host, Some(port)),
                None => return bad("expected :PORT after the address"),
            },
        }
    } else {
        match s.split_once(':') {
            Some((_, port)) if port.contains(':') => {
                return bad("an IPv6 address goes in brackets ([::1]:88)");
            }
            Some((host, port)) => (host, Some(port)),
            None => (s, None),
        }
    };
    let host_ok = !host.is_empty()
        && host.len() <= 253
        && host
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b".-_:".contains(&b));
    if !host_ok {
        return bad("not a host name or IP address");
    }
    let port = match port {
        None => KERBEROS_PORT,
        Some(p) => match p.parse::<u16>() {
            Ok(p) if p > 0 => p,
            _ => return bad("the port is a number from 1 to 65535"),
        },
    };
    Ok(KdcAddress {
        host: host.to_string(),
        port,
    })
}

/// How one exchange with a KDC is bounded.
#[derive(Clone, Copy, Debug)]
pub(crate) struct ExchangeBounds {
    /// Connecting to one KDC (each of its addresses).
    pub connect_timeout: Duration,
    /// One KDC's whole exchange: connect, send, the whole reply.
    pub exchange_timeout: Duration,
    /// The longest reply taken from a KDC, its length prefix included.
    pub max_reply_bytes: usize,
}

/// Sends `message` (with its TCP length prefix) to the KDCs of `realm` in
/// turn, and answers the first reply (with its length prefix); `Err` says
/// what each KDC did when none answered.
pub(crate) async fn exchange(
    realm: &KdcRealm,
    message: &[u8],
    bounds: ExchangeBounds,
) -> Result<Vec<u8>, String> {
    let mut failures = Vec::new();
    for kdc in &realm.kdcs {
        let one = tokio::time::timeout(bounds.exchange_timeout, ask(kdc, message, bounds));
        match one.await {
            Ok(Ok(reply)) => return Ok(reply),
            Ok(Err(e)) => failures.push(format!("{kdc}: {e}")),
            Err(_) => failures.push(format!(
                "{kdc}: no whole reply within {} s",
                bounds.exchange_timeout.as_secs_f32()
            )),
        }
    }
    Err(failures.join("; "))
}

/// One KDC's exchange: connect (each address its name resolves to, in
/// turn), send, read one length-prefixed reply.
async fn ask(kdc: &KdcAddress, message: &[u8], bounds: ExchangeBounds) -> Result<Vec<u8>, String> {
    let addresses = tokio::net::lookup_host((kdc.host.as_str(), kdc.port))
        .await
        .map_err(|e| format!("cannot resolve: {e}"))?;
    let mut stream = None;
    let mut last = String::from("the name resolves to no address");
    for address in addresses {
        match tokio::time::timeout(bounds.connect_timeout, TcpStream::connect(address)).await {
            Ok(Ok(s)) => {
                stream = Some(s);
                break;
            }
            Ok(Err(e)) => last = format!("{address}: {e}"),
            Err(_) => last = format!("{address}: no connection within the bound"),
        }
    }
    let mut stream = stream.ok_or(last)?;
    let _ = stream.set_nodelay(true);
    stream
        .write_all(message)
        .await
        .map_err(|e| format!("sending: {e}"))?;
    let mut prefix = [0u8; 4];
    stream
        .read_exact(&mut prefix)
        .await
        .map_err(|e| format!("reading the reply: {e}"))?;
    let length = u32::from_be_bytes(prefix) as usize;
    if length == 0 || length > bounds.max_reply_bytes.saturating_sub(4) {
        return Err(format!(
            "a reply of {length} bytes (at most {} taken)",
            bounds.max_reply_bytes.saturating_sub(4)
        ));
    }
    let mut reply = Vec::with_capacity(4 + length);
    reply.extend_from_slice(&prefix);
    reply.resize(4 + length, 0);
    stream
        .read_exact(&mut reply[4..])
        .await
        .map_err(|e| format!("reading the reply: {e}"))?;
    Ok(reply)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn realms_are_read_from_their_flag() {
        let r: KdcRealm = "EXAMPLE.COM=dc1.example.com:88,10.0.0.2,[::1]:1088"
            .parse()
            .expect("valid");
        assert_eq!(r.realm, "EXAMPLE.COM");
        let kdcs: Vec<String> = r.kdcs.iter().map(ToString::to_string).collect();
        assert_eq!(kdcs, ["dc1.example.com:88", "10.0.0.2:88", "[::1]:1088"]);
        for bad in [
            "EXAMPLE.COM",
            "=dc1:88",
            "EXAMPLE COM=dc1:88",
            "EXAMPLE.COM=",
            "EXAMPLE.COM=dc1:0",
            "EXAMPLE.COM=dc1:99999",
            "EXAMPLE.COM=dc1:",
            "EXAMPLE.COM=::1:88",
            "EXAMPLE.COM=[::1",
            "EXAMPLE.COM=[dc1]:88",
            "EXAMPLE.COM=[::1]88",
            "EXAMPLE.COM=dc1:88,,dc2:88",
            "EXAMPLE.COM=dc/1:88",
        ] {
            assert!(bad.parse::<KdcRealm>().is_err(), "{bad}");
        }
        let many = format!("R={}", vec!["k"; MAX_KDCS_PER_REALM + 1].join(","));
        assert!(many.parse::<KdcRealm>().is_err());
    }
}
