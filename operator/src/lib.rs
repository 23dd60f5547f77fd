//! repowire-operator: `Tenant` and `ApiKey` objects reconciled into the relay through its
//! admin API (never its database), with keys delivered in Secrets. See docs/operator.md.

pub mod config;
pub mod context;
pub mod crd;
pub mod leader;
pub mod metrics;
pub mod reconcile;
pub mod relay;
pub mod run;
pub mod server;
