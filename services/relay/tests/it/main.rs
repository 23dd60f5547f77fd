//! The relay's integration tests: one binary (linking is most of a cold build), one module
//! per area, sharing the harness in `common` (an in-process relay over SQLite or Postgres).

#![allow(clippy::unwrap_used)] // a test's unwrap is its assertion

#[macro_use]
mod common;

mod admin_api;
mod admin_tokens;
mod bad_input;
mod bus;
mod bus_reconnect;
mod conversations;
mod cross_pod;
mod dashboard_store;
mod hostile_clients;
mod key_scopes;
mod lifecycle;
mod limits;
mod limits_cluster;
mod members_store;
mod migrations;
mod questions;
mod routing;
mod sessions;
mod shared_state;
mod store_batches;
mod tenancy;
mod tenant_refs;
mod tls;
mod usage_meter;
