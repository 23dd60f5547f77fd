//! The typed replies of `outbox` (what waits per relay identity) and `outbox_drop`. Their JSON
//! is what `repowire outbox list|drop --json` prints.

use serde::{Deserialize, Serialize};

/// `outbox`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OutboxReport {
    /// The relay identity this daemon works with now.
    pub realm: String,
    /// What waits, per relay identity (the current one first).
    pub realms: Vec<OutboxRealm>,
}

/// Queued messages of one relay identity.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OutboxRealm {
    /// The relay identity.
    pub realm: String,
    /// It is the current one: its messages go out as the link allows.
    pub current: bool,
    /// Frames waiting.
    pub messages: i64,
    /// The oldest of them (ms since the Unix epoch).
    pub oldest_ms: i64,
}

/// `outbox_drop`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OutboxDropped {
    /// The relay identity whose messages were dropped.
    pub realm: String,
    /// The ids of the dropped messages.
    pub dropped: Vec<String>,
}
