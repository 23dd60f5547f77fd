//! The protocol crate's integration tests: one binary, one module per area; the fixtures
//! they read are in `tests/fixtures`.

#![allow(clippy::unwrap_used)] // a test's unwrap is its assertion

mod edges;
mod fixtures;
mod fuzz;
mod schema;
mod spellings;
