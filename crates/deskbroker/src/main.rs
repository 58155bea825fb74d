//! The `deskbroker` binary: broker, CLI, load generator.
mod bench;
mod serve;

fn main() {}
