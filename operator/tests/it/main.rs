//! The operator's integration tests: one binary, one module per area, sharing the scripted
//! Kubernetes API and the relay process in `support`.

#![allow(clippy::unwrap_used)] // a test's unwrap is its assertion

mod support;

mod apikey_scenarios;
mod controller_loop;
mod crds;
mod no_key_in_logs;
mod tenant_scenarios;
