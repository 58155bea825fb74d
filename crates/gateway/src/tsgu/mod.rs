//! MS-TSGU, the Remote Desktop Gateway protocol, over its HTTP transport
//! (WebSocket, or the legacy `RDG_OUT_DATA`/`RDG_IN_DATA` pair): RDP
//! tunnelled in HTTPS, so a farm is reachable from anywhere through one
//! port. Sans-IO: these modules turn bytes into packets and packets into
//! decisions; the sockets are the caller's.
//!
//! - [`packet`]: the packets (handshake, tunnel create with the PAA access
//!   token, tunnel auth, channel create naming the resource, data,
//!   keepalive, close), a strict bounded decoder that takes the stream in
//!   any pieces, and encoders.
//! - [`server`]: the gateway's state machine for one tunnel, refusing
//!   packets out of order with the protocol's HRESULTs.
//! - [`hresult`]: those HRESULTs.
//!
//! Packet parsing is pinned by bytes captured from a real client
//! (`tests/fixtures/tsgu/`, Debian 12's xfreerdp 2.11.7).

pub mod hresult;
pub mod packet;
pub mod server;

pub use packet::{Decoder, Packet, PacketError};
pub use server::{Action, Refusal, Server, ServerConfig, State};
