//! End-to-end support shared by the cross-process tests in `tests/tests/` and the benchmark
//! driver: a protocol [`client`] and [`process`] control of real relay binaries.

pub mod agents;
pub mod claude;
pub mod client;
pub mod fakekube;
pub mod mockmodel;
pub mod otlp;
pub mod process;

use std::time::Duration;

/// Upper bound for any single wait in a test: a missing frame fails instead of hanging.
pub const WAIT: Duration = Duration::from_secs(10);
