//! The typed replies of direct conversations: what `start_conversation` became, the
//! conversations a local peer takes part in (`repowire conversation list`), and one of them with
//! its messages as this daemon saw them (`repowire conversation show`). Their JSON is the
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

/// One conversation and its messages as this daemon saw them (`repowire conversation show`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ConversationShown {
    /// The conversation.
    pub conversation: Conversation,
    /// What the local participant received and sent in it, oldest first.
    pub messages: Vec<ConversationLine>,
}

/// A message of a conversation, received or sent by the local participant.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ConversationLine {
    /// Its place in the conversation (received ones and the opening; a sent turn's place is
    /// not kept).
    pub seq: Option<u64>,
    /// `open`, `turn`, `paused`, `ended` (received; `open` also for the opener's own opening),
    /// or `sent` (a turn or an end of ours).
    pub event: String,
    /// The speaker's display name (remote text: sanitize before showing it).
    pub from: String,
    /// When this daemon received or sent it (ms).
    pub at_ms: i64,
    /// The text.
    pub text: String,
    /// A sent one's state at the relay (`accepted`, `rejected` …) and why, when refused.
    pub state: Option<String>,
    /// Why a sent one was refused.
    pub error: Option<String>,
}
