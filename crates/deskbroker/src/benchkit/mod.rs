//! What every load generator of the project shares: `deskbroker bench
//! storm` in the product, and the benchmarks of `crates/devbench`
//! (`deskbroker-devbench rdp`, `windows-agent` and the ceiling servers).
//!
//! - [`broker`]: the private brokers a benchmark starts (`deskbroker
//!   serve` on a temporary data directory) and every API call the
//!   benchmarks make.
//! - [`round3`]: the precision of every figure in their reports.

pub mod broker;

/// Rounds to three decimals, the precision of every figure in the reports
/// (microseconds of a millisecond figure, milliseconds of a second).
pub fn round3(x: f64) -> f64 {
    (x * 1000.0).round() / 1000.0
}
