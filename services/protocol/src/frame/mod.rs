//! The frame envelope and every frame type.
//!
//! A frame is one JSON object per WebSocket text message:
//! `{"v": 1, "type": "<type>", "id": "<uuidv7>", ...fields}`. `id` is minted by the sender of
//! the frame; for frames that create a message (`ask`, `notify`, `broadcast`, `converse`,
//! `turn`, `ack` with a reply) it is also the message id, so a retried frame is recognised as the same message.
//! Replies to a request carry the request's id in `re`.

use serde::{Deserialize, Serialize};

use crate::conversation::{Converse, EndConversation, Turn};
use crate::ids::MessageId;
use crate::question::{ListQuestions, Questions};
use crate::session::{BindSession, ListSessions, SessionBound, Sessions};

mod from_client;
mod from_relay;
mod peer;

pub use from_client::*;
pub use from_relay::*;
pub use peer::*;

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
    /// Open a direct conversation with an opening message.
    Converse(Converse),
    /// A participant's finished turn, for the other participants.
    Turn(Turn),
    /// A participant ends a conversation.
    EndConversation(EndConversation),

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
            Body::Ask(_)
                | Body::Notify(_)
                | Body::Broadcast(_)
                | Body::Ack(_)
                | Body::Answer(_)
                | Body::Converse(_)
                | Body::Turn(_)
                | Body::EndConversation(_)
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
            | Body::ListSessions(_)
            | Body::Converse(_)
            | Body::Turn(_)
            | Body::EndConversation(_) => Direction::ToRelay,
            _ => Direction::ToClient,
        }
    }
}
