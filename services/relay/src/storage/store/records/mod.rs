//! Rows and write operations exchanged with the store.

mod conversations;
mod messages;
mod tenancy;

pub use conversations::*;
pub use messages::*;
pub use tenancy::*;
