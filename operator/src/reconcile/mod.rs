//! The reconcilers: one per kind. Each is idempotent: it compares what is with what the spec
//! asks and acts only on a difference.

pub mod apikey;
pub mod secret;
pub mod status;
pub mod tenant;
