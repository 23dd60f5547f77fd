//! The wire forms the relay sends of what it stored: a stored message as a `Message`, and
//! `deliver` frames (live, from the inbox, across pods).

use repowire_protocol::{
    AnswerValue, Body, ConversationRef, Deliver, Frame, Message, MessageId, MessageKind,
    PeerSummary, Question, encode,
};

use crate::routing::hub::Outbound;
use crate::storage::store::*;

/// Encodes a frame for the outbound queues.
/// Encodes a frame for the outbound queues, carrying the current trace (see
/// [`crate::telemetry`]).
pub fn frame_text(body: Body) -> Outbound {
    encode(&Frame::new(body).traced(crate::telemetry::current_traceparent())).into_boxed_str()
}

pub(crate) fn message_id(s: &str) -> MessageId {
    s.parse().unwrap_or_else(|_| {
        tracing::error!(message_id = s, "stored message id is not a UUID");
        MessageId(uuid::Uuid::nil())
    })
}

fn kind(s: &str) -> MessageKind {
    s.parse().unwrap_or(MessageKind::Notify)
}

/// The wire form of a stored message.
pub fn to_wire(m: &StoredMessage) -> Message {
    Message {
        message_id: message_id(&m.message_id),
        kind: kind(&m.kind),
        from: PeerSummary {
            peer_id: m.from_peer_id.clone().into(),
            name: m.from_name.clone(),
            circle: m.from_circle.clone(),
        },
        text: m.body.clone(),
        correlation_id: m.correlation_id.clone().map(Into::into),
        reply_to: m.reply_to.clone().map(Into::into),
        question: m
            .question
            .as_deref()
            .and_then(|q| serde_json::from_str::<Question>(q).ok()),
        answer: m
            .answer
            .as_deref()
            .and_then(|a| serde_json::from_str::<AnswerValue>(a).ok()),
        from_session_id: m.from_session_id.clone(),
        to_session_id: m.to_session_id.clone(),
        conversation: m.conversation.as_deref().and_then(conversation),
        created_at_ms: m.created_at_ms,
        expires_at_ms: m.expires_at_ms,
    }
}

/// A stored `Message.conversation`.
pub(crate) fn conversation(json: &str) -> Option<ConversationRef> {
    serde_json::from_str(json)
        .inspect_err(|e| tracing::error!(error = %e, "stored conversation is not readable"))
        .ok()
}

/// A message being written, as it will read back (`conversation`: as the store wrote it).
pub fn stored(
    m: &NewMessage,
    correlation_id: Option<String>,
    conversation: Option<String>,
) -> StoredMessage {
    StoredMessage {
        message_id: m.message_id.clone(),
        kind: m.kind.as_str().to_owned(),
        from_peer_id: m.from_peer_id.clone(),
        from_name: m.from_name.clone(),
        from_circle: m.from_circle.clone(),
        body: m.body.clone(),
        correlation_id,
        reply_to: m.reply_to.clone(),
        question: m.question.clone(),
        answer: m.answer.clone(),
        created_at_ms: m.created_at_ms,
        expires_at_ms: m.expires_at_ms,
        reply_text: None,
        content_hash: m.content_hash.clone(),
        traceparent: m.traceparent.clone(),
        from_session_id: m.from_session_id.clone(),
        to_session_id: m.to_session_id.clone(),
        conversation,
    }
}

/// A `deliver` frame.
pub fn deliver_frame(to: &str, seq: i64, redelivery: bool, message: Message) -> Outbound {
    frame_text(Body::Deliver(Deliver {
        to: to.to_owned().into(),
        seq: u64::try_from(seq).unwrap_or(0),
        redelivery,
        message,
    }))
}

/// A `deliver` frame of a message pushed from the inbox (catch-up, replay), continuing the
/// trace of the request that created the message: with export on, under a span of its own
/// (`inbox deliver`, a child of that request's span).
pub fn deliver_stored(to: &str, seq: i64, redelivery: bool, message: &StoredMessage) -> Outbound {
    let body = Body::Deliver(Deliver {
        to: to.to_owned().into(),
        seq: u64::try_from(seq).unwrap_or(0),
        redelivery,
        message: to_wire(message),
    });
    let trace = match message.traceparent.as_deref() {
        Some(tp) => crate::telemetry::Trace::start("inbox deliver", "producer", Some(tp))
            .traceparent()
            .map(str::to_owned),
        None => crate::telemetry::current_traceparent(),
    };
    encode(&Frame::new(body).traced(trace)).into_boxed_str()
}
