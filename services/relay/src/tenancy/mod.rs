//! Tenancy: who may do what, and how much. Plan limits and their enforcement (cluster-wide
//! through the bus's GCRA primitive), usage metering and its periodic flush, API keys and the tokens exchanged for
//! them, the live-key check that closes connections whose key or tenant is no longer usable, and
//! the admin operations on tenants, plans, keys and admin tokens (`admin`; their HTTP routes are
//! `crate::edge::admin`, the `repowire-relay admin` CLI is `admin::cli`).

pub mod admin;
pub mod apikey;
pub mod flusher;
pub mod keycheck;
pub mod limits;
pub mod token;
pub mod usage;
