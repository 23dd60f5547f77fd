//! Direct conversations (protocol.md §8.19, §8.20, §10.15): two or more peers whose every
//! finished turn reaches the others, in one order the relay keeps per conversation.
//!
//! A conversation is opened with `converse` (its text is the opening message) and fed with
//! `turn`, and ended with `end_conversation`. Every message of a conversation is a `notify` to an old daemon; a new one reads the
//! `conversation` of the delivered [`crate::Message`] and heads the text `[name] (n):`.

use serde::{Deserialize, Serialize};

use crate::frame::PeerSummary;
use crate::ids::PeerId;

/// Prefix of conversation ids.
pub const CONVERSATION_ID_PREFIX: &str = "cv-";
/// Most participants a conversation may have on the wire (the relay's own cap is lower).
pub const MAX_CONVERSATION_PARTICIPANTS: usize = 32;

/// True for a conversation id as the relay mints them: `cv-` and 16 characters of the peer-id
/// alphabet.
pub fn looks_like_conversation_id(s: &str) -> bool {
    crate::ids::looks_like_relay_id(CONVERSATION_ID_PREFIX, s)
}

/// A new conversation id from 80 random bits.
pub fn conversation_id_from_random(bits: u128) -> String {
    crate::ids::relay_id_from_random(CONVERSATION_ID_PREFIX, bits)
}

/// `converse`: open a conversation with `to`; `text` is the opening message. The frame id is
/// the opening message's id.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Converse {
    /// The opening peer (registered on this connection); a participant.
    pub from: PeerId,
    /// The other participants: peer ids, display names or Repowire session ids, resolved as
    /// `notify` resolves `to`; 1 to 31 distinct entries.
    pub to: Vec<String>,
    /// Resolve names in this circle instead of the sender's scope.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub circle: Option<String>,
    /// The opening message.
    pub text: String,
}

/// `turn`: what a participant said at the end of a turn, for every other participant. The
/// frame id is the message's id.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Turn {
    /// The speaking participant (registered on this connection).
    pub from: PeerId,
    /// The conversation.
    pub conversation_id: String,
    /// The turn's final text.
    pub text: String,
    /// True when a person's prompt started the turn (not a relayed message).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub by_person: bool,
}

/// `end_conversation`: a participant ends a conversation; every other participant gets the
/// notice. The frame id is the notice's message id.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EndConversation {
    /// The ending participant (registered on this connection).
    pub from: PeerId,
    /// The conversation.
    pub conversation_id: String,
    /// Why, for the others (at most 512 bytes).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// What a conversation message is.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Serialize,
    Deserialize,
    strum::EnumString,
    strum::IntoStaticStr,
    strum::EnumIter,
)]
#[serde(rename_all = "snake_case")]
#[strum(serialize_all = "snake_case")]
pub enum ConversationEvent {
    /// The opening message (`converse`).
    Open,
    /// A participant's turn.
    Turn,
    /// The relay paused the conversation (a notice; `reason` says why).
    Paused,
    /// A paused conversation goes on.
    Resumed,
    /// The conversation ended (a notice; `reason` says why).
    Ended,
}

impl ConversationEvent {
    /// Wire spelling.
    pub fn as_str(self) -> &'static str {
        self.into()
    }
}

/// The conversation a delivered message belongs to (`Message.conversation`).
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ConversationRef {
    /// The conversation.
    pub id: String,
    /// This message's place in the conversation: 1 for the opening, then one more per message,
    /// the same for every participant.
    pub seq: u64,
    /// What the message is.
    pub event: ConversationEvent,
    /// Every participant, the opener first.
    pub participants: Vec<PeerSummary>,
    /// Why (for `paused` and `ended`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn conversation_ids_have_the_documented_shape() {
        let id = conversation_id_from_random(0x1234_5678_9abc_def0_1234);
        assert!(looks_like_conversation_id(&id), "{id}");
        assert_eq!(id.len(), 3 + 16);
        assert!(!looks_like_conversation_id("cv-short"));
        assert!(!looks_like_conversation_id("rs-0123456789abcdef"));
        assert!(!looks_like_conversation_id("cv-0123456789abcdei"), "no i");
    }
}
