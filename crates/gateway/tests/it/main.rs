//! Tests of the gateway through its public API: the first-PDU parser on
//! bytes captured from real clients and on hostile ones, property tests
//! that throw random and mutated bytes at it, the front door driving real
//! sockets against a recording placer and fake session hosts, both
//! placers against a real broker, and the RD Gateway protocol (MS-TSGU)
//! on bytes captured from a real client and on random ones.

mod feed;
mod front_door;
mod front_door_bounds;
mod fuzz;
mod https;
mod kdc_proxy;
mod live;
mod pdu;
mod placer;
mod rd_gateway;
mod rd_gateway_bounds;
mod tsgu;
mod tsgu_props;

use std::path::PathBuf;

/// A loopback address where nothing listens, for as long as this lives: a
/// socket bound there and never listening, so a connection is refused at
/// once, and no other socket can take the port meanwhile. (A listener
/// bound and dropped frees its port: a test running beside may bind it
/// next, and the "dead" host then answers.)
pub struct DeadAddress {
    pub address: String,
    _held: tokio::net::TcpSocket,
}

impl DeadAddress {
    pub fn hold() -> DeadAddress {
        let socket = tokio::net::TcpSocket::new_v4().expect("socket");
        socket
            .bind(([127, 0, 0, 1], 0).into())
            .expect("bind a loopback port");
        let address = socket.local_addr().expect("addr").to_string();
        DeadAddress {
            address,
            _held: socket,
        }
    }
}

/// A first PDU captured from a real client (see `fixtures/README.md`).
pub fn fixture(name: &str) -> Vec<u8> {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name);
    std::fs::read(&path).unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()))
}

/// A fixture from a subdirectory of `tests/fixtures` (`tsgu/`: see its README.md).
pub fn fixture_in(dir: &str, name: &str) -> Vec<u8> {
    fixture(&format!("{dir}/{name}"))
}

/// Every captured fixture, by file name.
pub fn fixtures() -> Vec<(String, Vec<u8>)> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures");
    let mut all: Vec<(String, Vec<u8>)> = std::fs::read_dir(&dir)
        .expect("fixtures dir")
        .map(|e| e.expect("dir entry").path())
        .filter(|p| p.extension().is_some_and(|x| x == "bin"))
        .map(|p| {
            let name = p.file_name().expect("name").to_string_lossy().into_owned();
            (name, std::fs::read(&p).expect("fixture"))
        })
        .collect();
    all.sort();
    assert!(all.len() >= 5, "fixtures missing from {}", dir.display());
    all
}

/// Builds a first PDU from its parts, the way clients do (a reference
/// encoder for the parser's tests).
pub fn build_pdu(
    line: Option<&[u8]>,
    neg: Option<(u8, u32)>,
    correlation: Option<[u8; 16]>,
) -> Vec<u8> {
    let mut body = vec![0xE0, 0, 0, 0, 0, 0];
    if let Some(line) = line {
        body.extend_from_slice(line);
        body.extend_from_slice(b"\r\n");
    }
    if let Some((flags, protocols)) = neg {
        body.extend_from_slice(&[0x01, flags, 8, 0]);
        body.extend_from_slice(&protocols.to_le_bytes());
    }
    if let Some(id) = correlation {
        body.extend_from_slice(&[0x06, 0, 36, 0]);
        body.extend_from_slice(&id);
        body.extend_from_slice(&[0; 16]);
    }
    let total = 4 + 1 + body.len();
    let mut pdu = vec![3, 0];
    pdu.extend_from_slice(&(total as u16).to_be_bytes());
    pdu.push(body.len() as u8);
    pdu.extend_from_slice(&body);
    pdu
}
