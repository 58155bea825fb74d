//! The library of the `deskbroker` package: what the binary's commands
//! share with the development benchmarks (`crates/devbench`, the
//! `deskbroker-devbench` binary, which is not shipped), so that each piece
//! exists once.
//!
//! - [`output`]: `--output table|json|tsv`, as every command prints.
//! - [`token`]: which token a command sends to a broker.
//! - [`ready`]: the line `serve` and `gateway` print once they listen, and
//!   its one parser (tests, benchmarks and tools read it).
//! - [`benchkit`]: the private brokers a benchmark starts and the API
//!   calls it makes (`bench storm` and the development benchmarks).
//!
//! Everything else of the binary (`serve`, `gateway`, the CLI's commands,
//! `bench storm`, `sim`) stays in `main.rs`'s modules.

pub mod benchkit;
pub mod output;
pub mod ready;
pub mod token;
