//! Frames the relay sends to a client.

use serde::{Deserialize, Serialize};

use super::*;
use crate::codes::ErrorCode;
use crate::conversation::ConversationRef;
use crate::ids::{CorrelationId, MessageId, PeerId};
use crate::question::{AnswerValue, Question};

/// Limits and settings the relay enforces, announced in `welcome` so that clients need not
/// hard-code them. Fields after the first two were added later: a relay that predates them
/// leaves them out, so clients read them as optional.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Limits {
    /// Largest frame in bytes.
    pub max_frame_bytes: usize,
    /// Largest message text in bytes.
    pub max_text_bytes: usize,
    /// Largest WebSocket message read at all (larger: close 1009).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_transport_bytes: Option<usize>,
    /// Message-creating frames per second per connection, sustained (0: unlimited).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub send_rate_per_sec: Option<u32>,
    /// Burst allowance above the sustained send rate.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub send_burst: Option<u32>,
    /// Undelivered entries a peer's inbox holds before new messages get `inbox_full`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub inbox_cap: Option<u64>,
    /// How long an undelivered message waits before it expires, milliseconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message_ttl_ms: Option<u64>,
    /// How often the relay pings, milliseconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ping_interval_ms: Option<u64>,
    /// A connection silent this long is closed (4009), milliseconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub idle_timeout_ms: Option<u64>,
}

/// `welcome`.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Welcome {
    /// Answers the `hello`.
    pub re: MessageId,
    /// This connection's id (for logs and support).
    pub connection_id: String,
    /// The tenant the token belongs to.
    pub tenant_id: String,
    /// Relay software and version.
    pub server: String,
    /// Limits.
    pub limits: Limits,
}

/// `registered`.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Registered {
    /// Answers the `register`.
    pub re: MessageId,
    /// The peer as registered.
    pub peer: PeerInfo,
    /// True when `reclaim` was honoured and the peer kept its id and inbox.
    pub reclaimed: bool,
    /// The highest inbox sequence number of this peer (0 if none).
    pub inbox_seq: u64,
}

/// `ok`.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Reply {
    /// The request this answers.
    pub re: MessageId,
}

/// `peers`.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Peers {
    /// The request this answers.
    pub re: MessageId,
    /// Visible peers, by circle then name (then peer id), at most `list_peers.limit`.
    pub peers: Vec<PeerInfo>,
    /// More visible peers follow: pass this as `list_peers.cursor` for the next page. Absent on
    /// the last page.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_cursor: Option<String>,
}

/// `accepted`.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Accepted {
    /// The request this answers (equals `message_id`).
    pub re: MessageId,
    /// The persisted message.
    pub message_id: MessageId,
    /// `ask-…` for asks, `notif-…` for notify/broadcast; for ack/answer the closed ask's id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub correlation_id: Option<CorrelationId>,
    /// Who will receive it (empty for a bare ack, or a broadcast nobody was online for).
    pub recipients: Vec<PeerSummary>,
    /// For `converse` and `turn`: the conversation (minted by the relay for `converse`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conversation_id: Option<String>,
    /// For `converse` and `turn`: the message's place in the conversation (1 for the opening).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conversation_seq: Option<u64>,
}

/// What a message is.
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
pub enum MessageKind {
    /// An ask; close it with `ack` or `answer`.
    Ask,
    /// A notification.
    Notify,
    /// A broadcast.
    Broadcast,
    /// The reply to an ask this peer sent (`correlation_id` names the ask).
    Reply,
}

impl MessageKind {
    /// Wire spelling.
    pub fn as_str(self) -> &'static str {
        self.into()
    }
}

/// A message as delivered.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Message {
    /// De-duplicate by this.
    pub message_id: MessageId,
    /// Kind.
    pub kind: MessageKind,
    /// Sender.
    pub from: PeerSummary,
    /// The text (for a reply, the reply text; may be empty for an answer without text).
    pub text: String,
    /// The ask this belongs to (asks, replies) or the notification id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub correlation_id: Option<CorrelationId>,
    /// The earlier ask this ask chains to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reply_to: Option<CorrelationId>,
    /// A typed question (asks) .
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub question: Option<Question>,
    /// A typed answer (replies to structured asks).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub answer: Option<AnswerValue>,
    /// The Repowire session the sender was bound to when it sent this, if any. On the wire
    /// `from_repowire_session_id`, the seed's name; `from_session_id` (its first spelling) is
    /// read too.
    #[serde(
        default,
        rename = "from_repowire_session_id",
        alias = "from_session_id",
        skip_serializing_if = "Option::is_none"
    )]
    pub from_session_id: Option<String>,
    /// The Repowire session it was addressed to, or the recipient's when the relay knew it at
    /// accept time; absent otherwise (and for broadcasts). On the wire
    /// `to_repowire_session_id`; `to_session_id` is read too.
    #[serde(
        default,
        rename = "to_repowire_session_id",
        alias = "to_session_id",
        skip_serializing_if = "Option::is_none"
    )]
    pub to_session_id: Option<String>,
    /// The direct conversation this message belongs to (kind `notify`): a reader that does not
    /// know conversations ignores it and shows a notification from the speaker.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conversation: Option<ConversationRef>,
    /// When the relay accepted it, milliseconds since the Unix epoch.
    pub created_at_ms: i64,
    /// When it expires undelivered.
    pub expires_at_ms: i64,
}

/// `deliver`.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Deliver {
    /// Recipient peer on this connection.
    pub to: PeerId,
    /// Position in the recipient's inbox; strictly increasing per peer.
    pub seq: u64,
    /// True when this is a replay of an entry already reported delivered.
    #[serde(default)]
    pub redelivery: bool,
    /// The message.
    pub message: Message,
}

/// Delivery states a sender sees.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Serialize,
    Deserialize,
    strum::EnumString,
    strum::IntoStaticStr,
    strum::EnumIter,
)]
#[serde(rename_all = "snake_case")]
#[strum(serialize_all = "snake_case")]
pub enum DeliveryState {
    /// Persisted by the relay.
    Accepted,
    /// The recipient daemon has it.
    Delivered,
    /// The recipient agent has it in context.
    Injected,
    /// The ask was closed with `ack`.
    Acked,
    /// The ask was closed with `answer`.
    Answered,
    /// Not delivered before its TTL.
    Expired,
    /// The recipient's daemon reported a failure; `reason` says why.
    Failed,
}

impl DeliveryState {
    /// Wire spelling.
    pub fn as_str(self) -> &'static str {
        self.into()
    }

    /// Parses the wire spelling.
    pub fn parse(s: &str) -> Option<Self> {
        s.parse().ok()
    }

    /// True for states nothing follows.
    pub fn is_terminal(self) -> bool {
        matches!(
            self,
            DeliveryState::Acked
                | DeliveryState::Answered
                | DeliveryState::Expired
                | DeliveryState::Failed
        )
    }
}

/// `delivery`: a state change of a message sent by `from`.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Delivery {
    /// The sending peer (on this connection).
    pub from: PeerId,
    /// The message.
    pub message_id: MessageId,
    /// Its correlation id, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub correlation_id: Option<CorrelationId>,
    /// The recipient this state is about.
    pub recipient: PeerId,
    /// The new state.
    pub state: DeliveryState,
    /// Why, for failures.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// What happened to a peer.
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
pub enum PresenceEvent {
    /// Came online (registered or reconnected).
    Online,
    /// Went offline.
    Offline,
    /// Turn state or description changed.
    Updated,
}

/// `presence`.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Presence {
    /// What happened.
    pub event: PresenceEvent,
    /// The peer after the change.
    pub peer: PeerInfo,
}

/// `replay_done`.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReplayDone {
    /// The `replay` this ends.
    pub re: MessageId,
    /// The peer.
    pub peer_id: PeerId,
    /// Highest `seq` sent (or the cursor, if nothing was sent).
    pub last_seq: u64,
    /// Entries sent.
    pub count: u64,
}

/// One recipient's state in `status`.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RecipientState {
    /// The recipient.
    pub peer_id: PeerId,
    /// Its state.
    pub state: DeliveryState,
    /// Why, for failures.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// `status`.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Status {
    /// The query this answers.
    pub re: MessageId,
    /// The message.
    pub message_id: MessageId,
    /// Its kind.
    pub kind: MessageKind,
    /// Its correlation id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub correlation_id: Option<CorrelationId>,
    /// Per recipient.
    pub recipients: Vec<RecipientState>,
    /// For asks: the reply, once acked with one or answered.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reply: Option<String>,
    /// For structured asks: the answer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub answer: Option<AnswerValue>,
    /// For asks: the peer whose `ack` or `answer` closed it (absent while open, when a chained
    /// ask closed it, and when it timed out).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub answered_by: Option<PeerSummary>,
    /// For asks with a question: true when the question's `timeout_ms` closed it (no reply
    /// message follows; `answer` is the default taken, if any).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub timed_out: bool,
}

/// One key of a circle's shared state.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StateEntry {
    /// Key.
    pub key: String,
    /// Value.
    pub value: String,
    /// The peer that wrote it last.
    pub updated_by: PeerId,
    /// When, milliseconds since the Unix epoch.
    pub updated_at_ms: i64,
}

/// `state`: answer to `state_get`.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct State {
    /// The `state_get` this answers.
    pub re: MessageId,
    /// The circle whose state this is.
    pub circle: String,
    /// Entries by key (empty when the key, or the state, is empty).
    pub entries: Vec<StateEntry>,
}

/// `error`.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ErrorFrame {
    /// The request this answers, when it could be read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub re: Option<MessageId>,
    /// Machine-readable code.
    pub code: ErrorCode,
    /// Human-readable explanation, with a hint where one helps.
    pub message: String,
    /// For `ambiguous_peer`: the peers the name matched.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub candidates: Vec<PeerSummary>,
    /// For `rate_limited`: how long to wait before retrying, in milliseconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry_after_ms: Option<u64>,
}

impl ErrorFrame {
    /// An error answering `re`.
    pub fn new(re: Option<MessageId>, code: ErrorCode, message: impl Into<String>) -> Self {
        Self {
            re,
            code,
            message: message.into(),
            candidates: Vec::new(),
            retry_after_ms: None,
        }
    }
}
