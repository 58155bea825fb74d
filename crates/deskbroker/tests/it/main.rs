//! End-to-end tests of the real `deskbroker` binary: each test starts
//! `deskbroker serve` on port 0 with a fresh data directory (like
//! zero-to-production's `spawn_app`) and talks to it over real HTTP, or
//! through the CLI.
//!
//! What the tests share (the broker they start, the programs they drive,
//! waiting with a deadline) is in `support`; each other file tests one
//! area and exports nothing.

mod access;
mod agent;
mod api;
mod applications;
mod audit;
mod audit_abuse;
mod backup;
mod bench;
mod cli;
mod config;
mod console;
mod console_apps;
mod console_browser;
mod console_day_one;
mod console_power;
mod console_users;
mod console_views;
mod directory;
// The tests of support's `domain` (the test domain controller), which this
// module's name hides from the glob re-export below; they name it in full.
#[allow(hidden_glob_reexports)]
mod domain;
mod durability;
mod entitlements;
mod feed;
mod first_desktop;
mod front_door_trust;
mod gateway;
mod host_named;
mod http_edge;
mod kdc_proxy;
mod leases;
mod load_index;
mod logoffs;
mod messages;
mod nemesis;
mod ntlm_sign_in;
mod observability;
mod portal;
mod portal_apps;
mod portal_directory;
mod postgres;
mod power;
mod rd_gateway;
mod rdp;
mod rdp_properties;
mod registration;
mod replicas;
mod rolling_upgrade;
mod scaling_plans;
mod schema_versions;
mod sessions_ended;
mod sim;
mod start_on_connect;
mod support;
mod takeover;
mod throttle;
mod tickets;
mod tls;
mod web_page;
mod web_rdp;
mod web_url;
mod windows;
mod windows_clients;
mod windows_sign_in;
mod xrdp_sessions;

pub use support::*;
