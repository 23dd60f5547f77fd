//! The Repowire wire protocol, shared by the relay and the client daemon.
//!
//! Components:
//! - [`frame`]: the versioned JSON envelope and every frame type, both directions.
//! - [`codec`]: decoding with size, version and type checks, and encoding.
//! - [`ids`]: message ids (UUIDv7), peer ids and human ids (`ask-…`, `notif-…`).
//! - [`codes`]: error codes carried in error frames and HTTP bodies, WebSocket close codes.
//! - [`limits`]: size limits every implementation enforces.
//! - [`question`]: structured questions, typed answers, `@approvers`, `list_questions`.
//! - [`conversation`]: direct conversations: ids, `converse`, `turn`, `Message.conversation`.
//! - [`session`]: Repowire session ids and the bindings of work streams to peers.
//! - [`validate`]: field rules (name alphabet, lengths, question shapes).
//! - [`http`]: the JSON bodies of the HTTP endpoints (token exchange, errors).
//!
//! This crate is pure: no I/O, no async runtime. `docs/protocol.md` is the normative spec;
//! this crate implements it.

pub mod codec;
pub mod codes;
pub mod conversation;
pub mod frame;
pub mod http;
pub mod ids;
pub mod limits;
pub mod question;
pub mod session;
pub mod validate;

pub use codec::{DecodeError, decode, decode_from_relay, encode};
pub use codes::{CloseCode, ErrorCode};
pub use conversation::*;
pub use frame::*;
pub use ids::{CorrelationId, MessageId, PeerId};
pub use question::*;
pub use session::*;

/// The protocol version this crate speaks. Frames carry it in `v`.
pub const PROTOCOL_VERSION: u32 = 1;
