//! The HTTP contract of deskbroker, in one place for the broker and every
//! client of it (the CLI, the agent, the stand-alone RDP front door, the
//! load generator):
//!
//! - [`types`]: every JSON shape of `/api/v1`, in both directions — the
//!   broker deserializes what clients serialize with the same type;
//! - [`error`]: the closed list of error codes ([`ErrorCode`]), each with
//!   its HTTP status, and the error body `{"error": {"code", "message"}}`;
//! - [`rdp_file`]: the `.rdp` connection file and the routing token that
//!   names a pool (rule R1), written by the broker, parsed by the front door;
//! - [`feed`]: the workspace feed (MS-TSWP) that Windows' "RemoteApp and
//!   Desktop Connections" and Windows App subscribe to, and its icons;
//! - [`ticket`]: signed connection tickets (rule T3), issued by the broker
//!   into `.rdp` files, read by the front door, verified by the broker;
//! - [`url`]: the one parser of a broker URL (`--broker`, `DESKBROKER_URL`);
//! - [`tls`]: which certificates a client trusts from an `https://`
//!   broker (system roots, `--ca-cert`, a pinned `--tls-fingerprint`);
//! - [`client`]: one async client with one timeout policy, a bound on the
//!   answer's size, and one classification of failures into "retry later"
//!   and "the broker said no".
//!
//! **This crate performs no placement and holds no state**: it is the wire.
//! It depends on `placement` only for the plain data types the contract
//! shares with the engine (pool settings, states, metrics).

pub mod client;
pub mod error;
pub mod feed;
pub mod rdp_file;
pub mod ticket;
pub mod tls;
pub mod types;
pub mod url;

pub use client::{CONNECT_TIMEOUT, Client, ClientError, MAX_ANSWER_BYTES, REQUEST_TIMEOUT};
pub use error::{ErrorBody, ErrorCode, ErrorDetail};
pub use tls::{Fingerprint, FingerprintError, Trust, TrustError};
pub use url::{BrokerUrl, BrokerUrlError};
