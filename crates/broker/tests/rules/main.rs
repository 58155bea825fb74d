//! The broker's rules, in this process on the test kit
//! (`broker::testkit`): a broker on the in-memory store, on a clock the
//! test moves together with tokio's paused time, called through its API as
//! a client would. Nothing here waits on the wall clock; a rule that
//! depends on time is checked on both sides of its deadline. One module
//! per family of rules (docs/rules.md).

mod access;
mod applications;
mod audit;
mod audit_abuse;
mod entitlements;
mod heartbeat_authority;
mod heartbeat_loss;
mod host_named;
mod image_versions;
mod kit;
mod lifetimes;
mod messages;
mod pending;
mod power;
mod ramp_down;
mod registration;
mod scaling_plans;
mod sessions_ended;
mod start_on_connect;
mod tickets;
