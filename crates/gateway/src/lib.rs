//! The RDP front door: one address for every RDP client of a farm. It
//! reads each client's first PDU (an X.224 Connection Request), asks the
//! broker where the user goes (rules R1–R3, S1), and relays the connection
//! to that session host byte for byte, TLS and all (R4, R5); junk, oversized
//! and slow first PDUs never reach a host (R6).
//!
//! - [`pdu`]: the strict, bounded parser of the first PDU.
//! - [`placer`]: the broker seen from the front door: a [`Placer`], over
//!   HTTP ([`Http`]) or, in `deskbroker serve`, the broker's own
//!   `broker::front_door::InProcess`.
//! - [`door`]: what every door shares: one set of [`door::Bounds`], the
//!   placement and dial, the session's lifecycle with the door's table of
//!   live sessions (R4, S9), one [`door::Outcome`] and the doors' metrics.
//! - [`front_door`]: the listener and the relay.
//! - [`redirect`]: the signed msts redirection tokens the front door honours (R3).
//! - [`sources`]: per-source bounds on handshakes and new sessions.
//! - [`https`]: the HTTPS front, one listener for every door that speaks
//!   HTTP: it accepts, does TLS, reads each request's head and routes it,
//!   by method, path and upgrade, through one table to its endpoint.
//! - [`rd_gateway`]: the RD Gateway on the front: MS-TSGU over HTTPS
//!   (WebSocket, or the legacy pair of channels), the access token a
//!   ticket, placement at channel create through the same [`Placer`], the
//!   data relayed untouched.
//! - [`web`]: the browser's door on the front, `GET /web/rdp`: RDCleanPath
//!   over a WebSocket (IronRDP's web client), the ticket placed through
//!   the same [`Placer`], TLS with the host done here, the session's
//!   plaintext relayed; and its page, `/web`.
//! - [`kdc_proxy`]: the KDC proxy on the front, `POST /KdcProxy`
//!   (MS-KKDCP, rule AD3): Kerberos requests relayed to the KDCs of the
//!   configured realms only.
//! - [`tsgu`]: MS-TSGU, the RD Gateway protocol (RDP tunnelled in HTTPS):
//!   its packets, a strict bounded decoder and the gateway's state machine,
//!   without IO.
//!
//! **The front door decides nothing**: every placement, reconnect and
//! session state goes through a [`Placer`], so it follows the same rules
//! as the HTTP API's `connect`.

pub mod door;
pub mod feed;
pub mod front_door;
mod hold;
pub mod https;
pub mod kdc_proxy;
pub mod pdu;
pub mod placer;
pub mod rd_gateway;
pub mod redirect;
pub mod sources;
pub mod tsgu;
pub mod web;
pub mod windows_sign_in;

pub use api::rdp_file::{rdp_file, routing_token};
pub use front_door::{
    Config, HOST_START_RETRY_INTERVAL, HOST_START_WAIT, IDLE_TIMEOUT_WITHOUT_LOGON,
    RELAY_IDLE_TIMEOUT, serve,
};
pub use placer::{ConnectInput, FrontDoorPolicy, Http, Placer, PlacerError};
