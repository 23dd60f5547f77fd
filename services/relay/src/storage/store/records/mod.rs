//! Rows and write operations exchanged with the store.

mod messages;
mod tenancy;

pub use messages::*;
pub use tenancy::*;
