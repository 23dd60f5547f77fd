//! Peers, messages, inbox entries, write operations and their outcomes, as the store keeps them.

use super::{ConversationWrite, Notice, RelayEnd};
use repowire_protocol::{DeliveryState, MessageKind};

/// A peer's durable identity. Presence (online, turn state) lives in the hub, not here.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct PeerRecord {
    /// Tenant.
    pub tenant_id: String,
    /// Relay-minted id.
    pub peer_id: String,
    /// Display name.
    pub name: String,
    /// Circle.
    pub circle: String,
    /// Backend.
    pub backend: String,
    /// Role (wire spelling).
    pub role: String,
    /// Working directory.
    pub path: Option<String>,
    /// Machine.
    pub machine: Option<String>,
    /// Description.
    pub description: Option<String>,
    /// When the description was set (ms).
    pub description_at_ms: Option<i64>,
    /// Creation time (ms).
    pub created_at_ms: i64,
    /// Last activity (ms).
    pub last_seen_ms: i64,
    /// Highest inbox seq handed out.
    pub last_seq: i64,
}

#[cfg(test)]
impl PeerRecord {
    /// A fresh agent peer for unit tests.
    pub(crate) fn for_tests(tenant_id: &str, peer_id: &str, name: &str, circle: &str) -> Self {
        Self {
            tenant_id: tenant_id.into(),
            peer_id: peer_id.into(),
            name: name.into(),
            circle: circle.into(),
            backend: "claude-code".into(),
            role: "agent".into(),
            path: None,
            machine: None,
            description: None,
            description_at_ms: None,
            created_at_ms: 0,
            last_seen_ms: 0,
            last_seq: 0,
        }
    }
}

/// A message to persist and enqueue.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewMessage {
    /// Tenant.
    pub tenant_id: String,
    /// Sender-minted UUIDv7, as text.
    pub message_id: String,
    /// Kind.
    pub kind: MessageKind,
    /// Sender peer id.
    pub from_peer_id: String,
    /// Sender display name at send time.
    pub from_name: String,
    /// Sender circle at send time.
    pub from_circle: String,
    /// Text.
    pub body: String,
    /// Relay-minted correlation id (asks, notifications) or the ask's id (replies).
    pub correlation_id: Option<String>,
    /// For asks: the ask this one chains to (closed in the same transaction).
    pub reply_to: Option<String>,
    /// Structured question, JSON.
    pub question: Option<String>,
    /// Typed answer, JSON (replies to structured asks).
    pub answer: Option<String>,
    /// Hash of the sender's request, to tell a retry from an id reused for other content.
    pub content_hash: String,
    /// Accept time (ms).
    pub created_at_ms: i64,
    /// Expiry of undelivered entries (ms).
    pub expires_at_ms: i64,
    /// For an ask whose question has a timeout: when it closes unanswered (ms).
    pub deadline_ms: Option<i64>,
    /// The Repowire session the sender was bound to, if any.
    pub from_session_id: Option<String>,
    /// The Repowire session it goes to, when known.
    pub to_session_id: Option<String>,
    /// Recipient peer ids (one for ask/notify/reply, many for broadcast).
    pub recipients: Vec<String>,
    /// Inbox cap per recipient.
    pub inbox_cap: i64,
    /// The trace of the request that created it (W3C `traceparent`), if any.
    pub traceparent: Option<String>,
    /// A direct conversation's message: the store checks the conversation, takes its next seq
    /// and decides the recipients (every other participant; `recipients` is ignored).
    pub conversation: Option<ConversationWrite>,
}

/// Closing an ask with `ack` or `answer`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CloseAsk {
    /// Tenant.
    pub tenant_id: String,
    /// The ask.
    pub correlation_id: String,
    /// The closing peer; must be the ask's recipient (for an ask to `@approvers`: an
    /// approver, see [`may_approve`](crate::storage::store::may_approve)).
    pub by_peer_id: String,
    /// The closing peer's role.
    pub by_role: String,
    /// The closing connection's key has the `approve` scope.
    pub by_approver_key: bool,
    /// The closing frame's id (idempotent retries).
    pub frame_id: String,
    /// `Acked` or `Answered`.
    pub state: DeliveryState,
    /// Typed answer (answered).
    pub answer: Option<repowire_protocol::AnswerValue>,
    /// Reply to enqueue for the asker; its `recipients` are filled in by the store.
    pub reply: Option<NewMessage>,
    /// Time (ms).
    pub now_ms: i64,
}

/// A receipt from a recipient's daemon.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReceiptOp {
    /// Tenant.
    pub tenant_id: String,
    /// Recipient.
    pub peer_id: String,
    /// Message.
    pub message_id: String,
    /// `Delivered`, `Injected` or `Failed`.
    pub state: DeliveryState,
    /// Reason, for failures.
    pub reason: Option<String>,
    /// Time (ms).
    pub now_ms: i64,
}

/// One write in a batch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WriteOp {
    /// Persist a message and enqueue it.
    Accept(NewMessage),
    /// Close an ask.
    Close(CloseAsk),
    /// Move an inbox entry forward.
    Receipt(ReceiptOp),
    /// Expire undelivered entries older than `now_ms` (at most `limit`).
    Expire {
        /// Time (ms).
        now_ms: i64,
        /// Batch bound.
        limit: i64,
    },
    /// Close the open asks whose question's deadline is before `now_ms` (at most `limit`).
    CloseOverdue {
        /// Time (ms).
        now_ms: i64,
        /// Batch bound.
        limit: i64,
    },
    /// The relay ends a conversation on its own (a participant left, or it went idle).
    EndConversation(RelayEnd),
}

/// A recipient's inbox slot for a newly accepted message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Enqueued {
    /// Recipient.
    pub peer_id: String,
    /// Inbox sequence number.
    pub seq: i64,
}

/// Outcome of an accept.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AcceptOutcome {
    /// Persisted; `refused` lists broadcast recipients whose inbox was full.
    Accepted {
        /// Slots handed out.
        enqueued: Vec<Enqueued>,
        /// Broadcast recipients skipped because their inbox was full.
        refused: Vec<String>,
        /// The correlation id actually stored (re-minted on a collision).
        correlation_id: Option<String>,
        /// For `reply_to`: the ask closed by this one and its asker, to tell them.
        closed_prior: Option<Box<ClosedAsk>>,
        /// A conversation's message: its `Message.conversation`, JSON, as stored.
        conversation: Option<String>,
    },
    /// The same request was accepted before; nothing changed.
    Duplicate {
        /// Recipients of the original.
        recipients: Vec<String>,
        /// Correlation id of the original.
        correlation_id: Option<String>,
        /// A conversation's message: its `Message.conversation`, JSON, as stored.
        conversation: Option<String>,
    },
    /// The id was used before for a different message.
    IdReused,
    /// A `turn` names no conversation of this tenant.
    UnknownConversation,
    /// The sender of a `turn` is not one of the conversation's participants.
    NotParticipant,
    /// The conversation has ended; `reason` says why.
    ConversationEnded {
        /// Why it ended.
        reason: Option<String>,
    },
    /// The conversation is paused; the turn was not stored. When this turn tripped the loop
    /// guard, `notice` is the pause notice stored for every participant.
    ConversationPaused {
        /// Why it is paused.
        reason: Option<String>,
        /// The notice written now (none when it was paused before).
        notice: Option<Box<Notice>>,
    },
    /// The conversation's own rate is used up; the turn was not stored.
    ConversationRateLimited {
        /// The rate.
        turns_per_minute: i64,
        /// When the turn would go ahead, ms from now.
        retry_after_ms: u64,
    },
    /// The (single) recipient's inbox is full.
    InboxFull {
        /// The recipient.
        peer_id: String,
    },
    /// A recipient id names no peer of this tenant (peers are never deleted, so only a bad id).
    UnknownRecipient {
        /// The recipient.
        peer_id: String,
    },
    /// `reply_to` names no ask, or one the sender is not part of.
    BadReplyTo,
}

/// An ask that was closed, for telling its asker.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClosedAsk {
    /// The ask's message id.
    pub message_id: String,
    /// Its correlation id.
    pub correlation_id: String,
    /// Who asked.
    pub asker: String,
    /// The asker's display name and circle at ask time.
    pub asker_name: String,
    /// The asker's circle at ask time.
    pub asker_circle: String,
    /// The asker's Repowire session at ask time, if it had one (where a reply goes).
    pub asker_session_id: Option<String>,
    /// Who was asked.
    pub recipient: String,
    /// `Acked` or `Answered`, or (closed by its question's timeout) `Expired`.
    pub state: DeliveryState,
    /// For an ask closed by its question's timeout: what happened (the default taken).
    pub reason: Option<String>,
}

/// Outcome of closing an ask.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CloseOutcome {
    /// Closed; the reply (if any) was enqueued for the asker.
    Closed {
        /// The ask.
        closed: ClosedAsk,
        /// The reply's slot in the asker's inbox.
        reply: Option<Enqueued>,
        /// The reply text as stored (answers are rendered from the question).
        reply_text: Option<String>,
    },
    /// The same close was applied before.
    Duplicate {
        /// The ask.
        closed: ClosedAsk,
    },
    /// No such ask in this tenant.
    Unknown,
    /// The closing peer is not the recipient.
    NotRecipient,
    /// The ask went to `@approvers` and the closing peer may not answer it: why.
    NotEligible(String),
    /// Already closed by another frame: how (who answered what, or the timeout).
    AlreadyClosed(String),
    /// Its question's deadline had passed: closed now by the timeout (the closing frame is
    /// refused), and the asker is told.
    TimedOut {
        /// The ask, as the timeout closed it.
        closed: ClosedAsk,
    },
    /// `answer` on a plain ask, or an answer that does not fit the question.
    InvalidAnswer(String),
    /// The asker's inbox is full; the ask stays open.
    InboxFull,
    /// The closing frame's id is already the id of another message.
    IdReused,
}

/// A state change a sender should hear about.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StateChange {
    /// Tenant.
    pub tenant_id: String,
    /// Sender of the message.
    pub sender: String,
    /// The message.
    pub message_id: String,
    /// Its correlation id.
    pub correlation_id: Option<String>,
    /// The recipient.
    pub recipient: String,
    /// New state.
    pub state: DeliveryState,
    /// Reason (failures).
    pub reason: Option<String>,
}

/// Outcome of a receipt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReceiptOutcome {
    /// Moved forward. `arrived`: the entry left `accepted` for `delivered` or `injected`, its
    /// first arrival at the recipient (a delivery, as metered; see [`arrival`]).
    Changed {
        /// What the sender hears.
        change: StateChange,
        /// First arrival at the recipient.
        arrived: bool,
    },
    /// Already at or past that state: nothing to do (retries are harmless).
    Unchanged,
    /// No such entry in that peer's inbox.
    Unknown,
}

/// Whether an entry moving `from` → `to` arrives at its recipient for the first time: the one
/// move of an entry that counts as a delivery.
pub fn arrival(from: DeliveryState, to: DeliveryState) -> bool {
    from == DeliveryState::Accepted
        && matches!(to, DeliveryState::Delivered | DeliveryState::Injected)
}

/// One outcome per [`WriteOp`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WriteOutcome {
    /// For `Accept`.
    Accept(AcceptOutcome),
    /// For `Close`.
    Close(CloseOutcome),
    /// For `Receipt`.
    Receipt(ReceiptOutcome),
    /// For `Expire`: the entries that expired.
    Expire(Vec<StateChange>),
    /// For `CloseOverdue`: the asks closed, with their tenant.
    CloseOverdue(Vec<(String, ClosedAsk)>),
    /// For `EndConversation`: the notice, or `None` when it had ended already, the peer was
    /// not in it, or a turn came since the idle cut-off.
    EndConversation(Option<Box<Notice>>),
}

/// A stored message, as read back for delivery and status.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct StoredMessage {
    /// Message id.
    pub message_id: String,
    /// Kind (wire spelling).
    pub kind: String,
    /// Sender.
    pub from_peer_id: String,
    /// Sender name.
    pub from_name: String,
    /// Sender circle.
    pub from_circle: String,
    /// Text.
    pub body: String,
    /// Correlation id.
    pub correlation_id: Option<String>,
    /// Chained ask.
    pub reply_to: Option<String>,
    /// Question JSON.
    pub question: Option<String>,
    /// Answer JSON.
    pub answer: Option<String>,
    /// Accept time.
    pub created_at_ms: i64,
    /// Expiry.
    pub expires_at_ms: i64,
    /// Reply text of a closed ask.
    pub reply_text: Option<String>,
    /// Hash of the request that created it (tells a retry from a reused id).
    pub content_hash: String,
    /// The trace of the request that created it (W3C `traceparent`), if any.
    pub traceparent: Option<String>,
    /// The sender's Repowire session, if known.
    pub from_session_id: Option<String>,
    /// The recipient's Repowire session, if known.
    pub to_session_id: Option<String>,
    /// A conversation's message: its `Message.conversation`, JSON.
    pub conversation: Option<String>,
}

/// An inbox entry with its message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InboxEntry {
    /// Sequence number.
    pub seq: i64,
    /// Entry state.
    pub state: DeliveryState,
    /// The message.
    pub message: StoredMessage,
}

/// How a sender names one of its messages.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MessageKey {
    /// By message id.
    Id(String),
    /// By correlation id.
    Correlation(String),
}

/// A sent message and its per-recipient states.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MessageStatus {
    /// The message.
    pub message: StoredMessage,
    /// (recipient, state, reason).
    pub recipients: Vec<(String, DeliveryState, Option<String>)>,
    /// For a closed ask: the peer whose reply closed it.
    pub answered_by: Option<PeerRef>,
    /// For a closed ask: true when its question's timeout closed it.
    pub timed_out: bool,
}

/// A peer as a message recorded it (id, display name and circle at the time).
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct PeerRef {
    /// Peer id.
    pub peer_id: String,
    /// Display name then.
    pub name: String,
    /// Circle then.
    pub circle: String,
}

/// One key of a circle's shared state.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct StateRecord {
    /// Key.
    pub key: String,
    /// Value.
    pub value: String,
    /// The peer that wrote it last.
    pub updated_by: String,
    /// When.
    pub updated_at_ms: i64,
}

/// One shared-state write: set `value` (or delete the key when `None`).
#[derive(Debug, Clone, Copy)]
pub struct StateEntryWrite<'a> {
    /// Tenant.
    pub tenant_id: &'a str,
    /// Circle.
    pub circle: &'a str,
    /// Key.
    pub key: &'a str,
    /// New value; `None` deletes.
    pub value: Option<&'a str>,
    /// The peer writing.
    pub by: &'a str,
    /// When (ms).
    pub now_ms: i64,
}

/// What a shared-state write did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StateWrite {
    /// Stored (new key or new value).
    Stored,
    /// Deleted (or was already absent).
    Deleted,
    /// Refused: the circle already holds the most keys allowed.
    Full,
    /// Refused: the tenant's shared state would pass its `max_state_bytes`; it holds `used`.
    OverBytes {
        /// Bytes the tenant's other entries hold.
        used: i64,
    },
}

/// What may be forgotten to store a new peer within the tenant's `max_stored_peers`.
#[derive(Debug, Clone, Copy)]
pub struct PeerRoom<'a> {
    /// The tenant's `max_stored_peers`.
    pub max: i64,
    /// Peers live on any relay process now: never forgotten.
    pub live: &'a std::collections::HashSet<String>,
    /// Only peers last seen before this (ms) are forgotten: one that registered or left since
    /// is kept (it may be registering on another process right now). The caller passes one ms
    /// past `now - grace`, so a peer seen exactly the grace period ago may go.
    pub seen_before_ms: i64,
}

/// How storing a new peer within `max_stored_peers` went.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PeerAdmission {
    /// Stored, after forgetting these peers to make room (oldest first; usually none).
    Stored {
        /// Forgotten peer ids.
        forgotten: Vec<String>,
    },
    /// Refused, nothing changed: the tenant stores `stored` peers and none may be forgotten.
    Full {
        /// Peers the tenant stores.
        stored: i64,
    },
}
