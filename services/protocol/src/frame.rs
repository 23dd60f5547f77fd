//! The frame envelope and every frame type.
//!
//! A frame is one JSON object per WebSocket text message:
//! `{"v": 1, "type": "<type>", "id": "<uuidv7>", ...fields}`. `id` is minted by the sender of
//! the frame; for frames that create a message (`ask`, `notify`, `broadcast`, `ack` with a
//! reply) it is also the message id, so a retried frame is recognised as the same message.
//! Replies to a request carry the request's id in `re`.

use serde::{Deserialize, Serialize};

use crate::codes::ErrorCode;
use crate::ids::{CorrelationId, MessageId, PeerId};
use crate::question::{AnswerValue, ListQuestions, Question, Questions};
use crate::session::{BindSession, ListSessions, SessionBound, Sessions};

/// One frame: version, id, and the typed body.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Frame {
    /// Protocol version: 1.
    #[cfg_attr(feature = "schema", schemars(range(min = 1, max = 1)))]
    pub v: u32,
    /// Frame id (UUIDv7), minted by the sender.
    pub id: MessageId,
    /// W3C trace context (`traceparent`) of the span this frame belongs to, when the sender
    /// traces: the relay continues it, and hands it on in the frames a message causes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub traceparent: Option<String>,
    /// The typed body; its `type` tag sits beside `v` and `id`.
    #[serde(flatten)]
    pub body: Body,
}

impl Frame {
    /// A frame with a fresh id.
    pub fn new(body: Body) -> Self {
        Self::with_id(MessageId::new(), body)
    }

    /// A frame with a given id (for retries, and for message-creating frames).
    pub fn with_id(id: MessageId, body: Body) -> Self {
        Self {
            v: crate::PROTOCOL_VERSION,
            id,
            traceparent: None,
            body,
        }
    }

    /// The same frame, carrying a trace context.
    #[must_use]
    pub fn traced(mut self, traceparent: Option<String>) -> Self {
        self.traceparent = traceparent;
        self
    }
}

/// Who may send a frame type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    /// Client daemon → relay.
    ToRelay,
    /// Relay → client daemon.
    ToClient,
}

/// Every frame type. The serde tag is the wire `type`.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(
    Debug, Clone, PartialEq, Serialize, Deserialize, strum::IntoStaticStr, strum::VariantNames,
)]
#[serde(tag = "type", rename_all = "snake_case")]
#[strum(serialize_all = "snake_case")]
pub enum Body {
    // ---- client → relay ----
    /// First frame of every connection.
    Hello(Hello),
    /// Register (or reclaim) a peer on this connection.
    Register(Register),
    /// Remove a peer from this connection; it goes offline.
    Unregister(PeerRef),
    /// Update a peer's turn state and/or description.
    UpdatePeer(UpdatePeer),
    /// List peers visible to a registered peer.
    ListPeers(ListPeers),
    /// Ask a peer; returns a correlation id at once.
    Ask(Ask),
    /// Fire-and-forget notification.
    Notify(Notify),
    /// Notification to every online peer of the sender's circle.
    Broadcast(Broadcast),
    /// Close an ask, optionally with a reply to the asker.
    Ack(Ack),
    /// Close a structured ask with a typed answer.
    Answer(Answer),
    /// Report a delivery state for a message in a peer's inbox.
    Receipt(Receipt),
    /// Re-send a peer's inbox after a cursor.
    Replay(Replay),
    /// Ask for the delivery state of a message the caller sent.
    StatusQuery(StatusQuery),
    /// Write (or delete) a key of the shared state of the peer's circle.
    StateSet(StateSet),
    /// Read the shared state of the peer's circle (one key or all).
    StateGet(StateGet),
    /// List the questions to `@approvers` the peer may see.
    ListQuestions(ListQuestions),
    /// The peer executes this work stream (a Repowire session) now.
    BindSession(BindSession),
    /// List the Repowire sessions the peer may see.
    ListSessions(ListSessions),

    // ---- relay → client ----
    /// Answer to `hello`.
    Welcome(Welcome),
    /// Answer to `register`.
    Registered(Registered),
    /// Generic success for requests with no other answer.
    Ok(Reply),
    /// Answer to `list_peers`.
    Peers(Peers),
    /// The relay persisted a message: it will be delivered or fail visibly.
    Accepted(Accepted),
    /// A message for one of this connection's peers.
    Deliver(Deliver),
    /// A delivery state change of a message this connection's peer sent.
    Delivery(Delivery),
    /// A peer of the tenant came, went or changed.
    Presence(Presence),
    /// End of a replay.
    ReplayDone(ReplayDone),
    /// Answer to `status_query`.
    Status(Status),
    /// A request failed, or a frame could not be processed.
    Error(ErrorFrame),
    /// Answer to `state_get`.
    State(State),
    /// Answer to `list_questions`.
    Questions(Questions),
    /// Answer to `bind_session`.
    SessionBound(SessionBound),
    /// Answer to `list_sessions`.
    Sessions(Sessions),
}

/// Every `type` this version knows, for telling "unknown type" apart from "invalid frame".
pub const FRAME_TYPES: &[&str] = <Body as strum::VariantNames>::VARIANTS;

impl Body {
    /// The wire `type` of this body.
    pub fn type_name(&self) -> &'static str {
        self.into()
    }

    /// True for frames that create a message for other peers (rate-limited per connection).
    pub fn creates_message(&self) -> bool {
        matches!(
            self,
            Body::Ask(_) | Body::Notify(_) | Body::Broadcast(_) | Body::Ack(_) | Body::Answer(_)
        )
    }

    /// Which side may send this frame.
    pub fn direction(&self) -> Direction {
        match self {
            Body::Hello(_)
            | Body::Register(_)
            | Body::Unregister(_)
            | Body::UpdatePeer(_)
            | Body::ListPeers(_)
            | Body::Ask(_)
            | Body::Notify(_)
            | Body::Broadcast(_)
            | Body::Ack(_)
            | Body::Answer(_)
            | Body::Receipt(_)
            | Body::Replay(_)
            | Body::StatusQuery(_)
            | Body::StateSet(_)
            | Body::StateGet(_)
            | Body::ListQuestions(_)
            | Body::BindSession(_)
            | Body::ListSessions(_) => Direction::ToRelay,
            _ => Direction::ToClient,
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Shared value types

/// What kind of peer this is. `agent` peers see their own circle; the others cross circles.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Hash,
    Default,
    Serialize,
    Deserialize,
    strum::EnumString,
    strum::IntoStaticStr,
    strum::EnumIter,
)]
#[serde(rename_all = "snake_case")]
#[strum(serialize_all = "snake_case")]
pub enum Role {
    /// An agent session (default); scoped to its circle.
    #[default]
    Agent,
    /// A service (bot, CI); crosses circles.
    Service,
    /// A human surface (dashboard, phone); crosses circles.
    Human,
    /// An orchestrator session; crosses circles.
    Orchestrator,
}

impl Role {
    /// True for roles that resolve and are resolved across circles.
    pub fn crosses_circles(self) -> bool {
        !matches!(self, Role::Agent)
    }

    /// Wire spelling.
    pub fn as_str(self) -> &'static str {
        self.into()
    }
}

/// Presence as the relay computes it.
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
pub enum PeerStatus {
    /// Connected and not in a turn.
    Online,
    /// Connected and in a turn (`turn_state` is `working`).
    Busy,
    /// Not connected; messages queue in its inbox.
    Offline,
}

/// The agent's turn state, reported by the client from the runtime's hooks.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Default,
    Serialize,
    Deserialize,
    strum::EnumString,
    strum::IntoStaticStr,
    strum::EnumIter,
)]
#[serde(rename_all = "snake_case")]
#[strum(serialize_all = "snake_case")]
pub enum TurnState {
    /// Not known yet.
    #[default]
    Unknown,
    /// Waiting for a prompt.
    Idle,
    /// Processing a turn.
    Working,
}

impl TurnState {
    /// Wire spelling.
    pub fn as_str(self) -> &'static str {
        self.into()
    }
}

/// A peer as the relay shows it.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PeerInfo {
    /// Routing key.
    pub peer_id: PeerId,
    /// Display name, unique among live peers of its circle.
    pub name: String,
    /// Routing scope.
    pub circle: String,
    /// Agent runtime (`claude-code`, `codex` …).
    pub backend: String,
    /// Role.
    pub role: Role,
    /// Presence.
    pub status: PeerStatus,
    /// Turn state.
    pub turn_state: TurnState,
    /// Working directory, if reported.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    /// Machine name, if reported.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub machine: Option<String>,
    /// Short task state; expires after a TTL.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// Last activity, milliseconds since the Unix epoch.
    pub last_seen_ms: i64,
}

/// A short reference to a peer (in messages, errors and recipient lists).
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PeerSummary {
    /// Routing key.
    pub peer_id: PeerId,
    /// Display name.
    pub name: String,
    /// Circle.
    pub circle: String,
}

/// A frame that names one peer of this connection.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PeerRef {
    /// The peer.
    pub peer_id: PeerId,
}

// ---------------------------------------------------------------------------------------------
// Client → relay

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

// ---------------------------------------------------------------------------------------------
// Relay → client

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
