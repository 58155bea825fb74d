//! What the agent asks the machine for when it is not told: its hostname
//! (the session host's name) and primary IPv4 address (the host's).

use std::net::{Ipv4Addr, UdpSocket};

/// The machine's hostname, the default session host name.
pub fn machine_hostname() -> Result<String, String> {
    let name = gethostname::gethostname();
    let name = name
        .into_string()
        .map_err(|n| format!("the hostname {n:?} is not UTF-8"))?;
    if name.trim().is_empty() {
        return Err("the machine has no hostname".to_string());
    }
    Ok(name.trim().to_string())
}

/// The machine's primary IPv4 address: the source address the kernel would
/// use to reach a private-range address. `connect` on a UDP socket only
/// chooses a route; it sends nothing, so this causes no network traffic.
pub fn primary_ipv4() -> Result<Ipv4Addr, String> {
    /// Any private-range address will do: only the routing decision matters.
    const PROBE: (Ipv4Addr, u16) = (Ipv4Addr::new(10, 254, 254, 254), 9);
    let fail = |e: std::io::Error| format!("cannot find the machine's primary IPv4 address: {e}");
    let socket = UdpSocket::bind((Ipv4Addr::UNSPECIFIED, 0)).map_err(fail)?;
    socket.connect(PROBE).map_err(fail)?;
    match socket.local_addr().map_err(fail)?.ip() {
        std::net::IpAddr::V4(ip) if !ip.is_unspecified() && !ip.is_loopback() => Ok(ip),
        other => Err(format!(
            "cannot find the machine's primary IPv4 address (the route says {other})"
        )),
    }
}
