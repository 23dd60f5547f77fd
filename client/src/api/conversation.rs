//! The typed replies of direct conversations: what `start_conversation` became, and the
//! conversations a local peer takes part in (`repowire conversation list`). Their JSON is the
//! structured content of the MCP tool `start_conversation` and what `--json` prints.

use repowire_protocol::PeerSummary;
use serde::{Deserialize, Serialize};

use super::{SendOutcome, Sender};

/// A conversation opened (or its opening queued until the relay takes it).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ConversationStarted {
    /// The relay's id (`cv-…`), once it accepted the opening.
    pub conversation_id: Option<String>,
    /// Where the opening message is.
    #[serde(flatten)]
    pub outcome: SendOutcome,
    /// The local peer that opened it.
    pub from: Sender,
}

/// A conversation one local peer takes part in, as this daemon knows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Conversation {
    /// `cv-…`.
    pub conversation_id: String,
    /// `active` or `ended`.
    pub state: String,
    /// Why it is not active.
    pub reason: Option<String>,
    /// Every participant, the opener first.
    pub participants: Vec<PeerSummary>,
    /// The local participant this row is for.
    pub peer_id: String,
    /// When that peer joined it (ms).
    pub joined_at_ms: i64,
    /// The latest place in the conversation that peer sent or received.
    pub last_seq: i64,
}
