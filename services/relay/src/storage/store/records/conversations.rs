//! Direct conversations' writes (protocol.md §10.15): what a conversation message does to its
//! conversation, and the relay's own ends (a participant's session ended, or nobody spoke for
//! the idle timeout).

use super::{Enqueued, NewMessage};

/// What a conversation message does to its conversation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ConversationWrite {
    /// `converse`: a new conversation with these participants, the opener first (its
    /// `recipients` are the others).
    Open {
        /// The relay-minted id.
        conversation_id: String,
        /// Every participant, the opener first.
        participants: Vec<repowire_protocol::PeerSummary>,
    },
    /// `turn`: one more message in an existing conversation, from one of its participants.
    Turn {
        /// The conversation.
        conversation_id: String,
        /// A person's prompt started the turn (resumes a paused conversation).
        by_person: bool,
        /// The loop guard: turns in a row no person started, after which the conversation
        /// pauses.
        loop_turns: i64,
        /// The loop guard's bytes: text relayed in a row without a person's turn, past which
        /// the conversation pauses.
        loop_bytes: i64,
    },
    /// `end_conversation`: a participant ends it; the message is the notice to the others.
    End {
        /// The conversation.
        conversation_id: String,
        /// Why.
        reason: String,
    },
}

impl ConversationWrite {
    /// The conversation written to.
    pub fn id(&self) -> &str {
        match self {
            Self::Open {
                conversation_id, ..
            }
            | Self::Turn {
                conversation_id, ..
            }
            | Self::End {
                conversation_id, ..
            } => conversation_id,
        }
    }
}

/// A notice the relay wrote into a conversation (paused, ended), for every participant.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Notice {
    /// The notice as a message.
    pub message: NewMessage,
    /// Its correlation id as stored.
    pub correlation_id: Option<String>,
    /// Its `Message.conversation`, JSON.
    pub conversation: String,
    /// The participants' slots.
    pub enqueued: Vec<Enqueued>,
}

/// The relay ends a conversation on its own: a participant's peer was unregistered (its
/// session ended), or no turn came for the idle timeout. Every participant still in it is told
/// (the one that left is not), with a notice from the peer that left or, for an idle end, from
/// the opener.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RelayEnd {
    /// Tenant.
    pub tenant_id: String,
    /// The conversation.
    pub conversation_id: String,
    /// Why it ends.
    pub cause: EndCause,
    /// Now (ms): the end's time.
    pub now_ms: i64,
    /// When the notice's undelivered entries expire (ms).
    pub expires_at_ms: i64,
}

/// Why the relay ends a conversation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EndCause {
    /// This participant's peer was unregistered.
    Left {
        /// The peer.
        peer_id: String,
    },
    /// No turn since this time (ms); a turn that came since keeps it going.
    IdleSince {
        /// The idle cut-off (ms).
        before_ms: i64,
        /// The idle timeout, for the notice (seconds).
        idle_secs: u64,
    },
}
