//! The RDP front door: one address for every RDP client of a farm. It
//! reads each client's first PDU (an X.224 Connection Request), asks the
//! broker where the user goes (rules R1–R3, S1), and relays the connection
//! to that session host byte for byte, TLS and all (R4, R5); junk, oversized
//! and slow first PDUs never reach a host (R6).
//!
//! - [`pdu`]: the strict, bounded parser of the first PDU.
//! - [`placer`]: the broker seen from the front door — in this process
//!   ([`InProcess`]) or over HTTP ([`Http`]).
//! - [`front_door`]: the listener and the relay.
//! - [`rdp_file`]: the `.rdp` file that points clients at the front door.
//!
//! **The front door decides nothing**: every placement, reconnect and
//! session state goes through a [`Placer`], so it follows the same rules
//! as the HTTP API's `connect`.

pub mod front_door;
pub mod pdu;
pub mod placer;

pub use broker::rdp_file::{rdp_file, routing_token};
pub use front_door::{Config, serve};
pub use placer::{Http, InProcess, Placer, PlacerError};
