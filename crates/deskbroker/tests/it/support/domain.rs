//! The test domain controller: the `testdomain` crate, which
//! `deskbroker-devbench directory` shares.

pub use testdomain::domain::*;
