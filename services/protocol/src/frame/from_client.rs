//! Frames a client sends to the relay.

use serde::{Deserialize, Serialize};

use super::*;
use crate::ids::{CorrelationId, MessageId, PeerId};
use crate::question::Question;

/// `hello`: the first frame of a connection.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Hello {
    /// Client software and version, e.g. `repowire/0.1.0`.
    pub client: String,
}

/// `register`: claim a peer on this connection.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Register {
    /// Requested display name; defaults to the last component of `path`, then to `backend`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Circle; defaults to `default`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub circle: Option<String>,
    /// Agent runtime.
    pub backend: String,
    /// Role; a new peer defaults to `agent`, a reclaimed one keeps its stored role.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub role: Option<Role>,
    /// Working directory.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    /// Machine name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub machine: Option<String>,
    /// A peer id this client held before (reconnect); honoured only if the identity matches.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reclaim: Option<PeerId>,
}

/// `update_peer`.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct UpdatePeer {
    /// The peer (must be registered on this connection).
    pub peer_id: PeerId,
    /// New turn state.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub turn_state: Option<TurnState>,
    /// New description; an empty string clears it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
}

/// `list_peers`.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ListPeers {
    /// The asking peer; its circle and role decide what is visible.
    pub peer_id: PeerId,
    /// Only this circle.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub circle: Option<String>,
    /// Include offline peers.
    #[serde(default)]
    pub include_offline: bool,
    /// Every circle of the tenant, not just the visible scope.
    #[serde(default)]
    pub all_circles: bool,
    /// At most this many peers in the answer: 1–500, default 500.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit: Option<u32>,
    /// The previous answer's `next_cursor`: the page after it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cursor: Option<String>,
}

/// `ask`. The frame id is the message id.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Ask {
    /// Sending peer (registered on this connection).
    pub from: PeerId,
    /// Recipient: a peer id or a display name.
    pub to: String,
    /// Resolve `to` in this circle instead of the sender's scope.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub circle: Option<String>,
    /// The question.
    pub text: String,
    /// Closes this earlier ask (which the sender received) and chains the new one to it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reply_to: Option<CorrelationId>,
    /// A typed question.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub question: Option<Question>,
}

/// `notify`. The frame id is the message id.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Notify {
    /// Sending peer.
    pub from: PeerId,
    /// Recipient: a peer id or a display name.
    pub to: String,
    /// Resolve `to` in this circle.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub circle: Option<String>,
    /// The text.
    pub text: String,
}

/// `broadcast`. The frame id is the message id.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Broadcast {
    /// Sending peer.
    pub from: PeerId,
    /// The text.
    pub text: String,
}

/// `ack`. With a reply, the frame id is the reply's message id.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Ack {
    /// The acking peer: the ask's recipient.
    pub from: PeerId,
    /// The ask.
    pub correlation_id: CorrelationId,
    /// Reply text delivered to the asker.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reply: Option<String>,
}

/// `answer`. The frame id is the id of the reply message carrying the answer to the asker.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Answer {
    /// The answering peer: the ask's recipient.
    pub from: PeerId,
    /// The structured ask.
    pub correlation_id: CorrelationId,
    /// Chosen option (choice, tool_permission).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub option_id: Option<String>,
    /// Free text (text questions; optional comment otherwise).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
}

/// States a client may report with `receipt`.
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
pub enum ReceiptState {
    /// The daemon has the message durably.
    Delivered,
    /// The agent has the message in its context.
    Injected,
    /// The daemon could not get the message to the agent; `reason` says why.
    Failed,
}

/// `receipt`.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Receipt {
    /// Recipient peer (registered on this connection).
    pub peer_id: PeerId,
    /// The message.
    pub message_id: MessageId,
    /// The new state.
    pub state: ReceiptState,
    /// Why (required for `failed`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// `replay`.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Replay {
    /// The peer whose inbox to replay (registered on this connection).
    pub peer_id: PeerId,
    /// Send entries with `seq` greater than this, delivered or not. 0 replays everything kept.
    #[serde(default)]
    pub after_seq: u64,
}

/// `status_query`: give either `message_id` or `correlation_id`.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StatusQuery {
    /// A peer of this connection; only messages it sent are visible.
    pub peer_id: PeerId,
    /// The message.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message_id: Option<MessageId>,
    /// Or its correlation id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub correlation_id: Option<CorrelationId>,
}

/// `state_set`: write `key` of the shared state of the peer's circle; without `value`, delete it.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StateSet {
    /// The writing peer (registered on this connection); its circle is the scope.
    pub peer_id: PeerId,
    /// Key (name rule).
    pub key: String,
    /// New value; absent deletes the key.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<String>,
}

/// `state_get`: read one key, or every key, of the shared state of the peer's circle.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StateGet {
    /// The reading peer (registered on this connection); its circle is the scope.
    pub peer_id: PeerId,
    /// Only this key.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key: Option<String>,
}
