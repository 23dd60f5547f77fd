//! `converse`, `turn` and `end_conversation` (protocol.md §10.15): a direct conversation's
//! messages. The opener's names are resolved here, once; from then on the conversation's participants are its
//! recipients, whatever their circle (the tenant wall still holds: they are the tenant's peers).
//! The store checks the conversation and takes its next seq in the write's transaction.

use std::time::Instant;

use repowire_protocol::{
    Converse, CorrelationId, EndConversation, ErrorCode, MessageId, MessageKind, PeerSummary, Turn,
    conversation_id_from_random,
};

use super::message::{
    Draft, admit, content_hash, new_message, reply_fits, resolve_or_settled, settled,
};
use super::session::{Handled, Refusal, Session};
use crate::storage::store::{ConversationWrite, WriteOp};

pub(super) async fn converse(s: &Session, id: MessageId, c: Converse, started: Instant) -> Handled {
    let sender = s.own(c.from.as_str())?;
    let hash = content_hash("converse", &c);
    let opener = sender.summary();
    let mut participants: Vec<PeerSummary> = vec![opener.clone()];
    for to in &c.to {
        let Some((target, _)) =
            resolve_or_settled(s, id, &sender, to, c.circle.as_deref(), &hash).await?
        else {
            return Ok(());
        };
        let refusal = if target.peer_id == opener.peer_id {
            Some(format!(
                "`{to}` is the opener itself; a conversation is with other peers"
            ))
        } else if participants.iter().any(|p| p.peer_id == target.peer_id) {
            Some(format!("`{to}` names {} again", target.name))
        } else {
            None
        };
        if let Some(why) = refusal {
            if settled(s, id, &sender, &hash).await? {
                return Ok(());
            }
            return Err(Refusal::new(ErrorCode::InvalidFrame, why));
        }
        participants.push(target);
    }
    let cap = usize::try_from(s.state.config.conversation_participants).unwrap_or(usize::MAX);
    if participants.len() > cap {
        return Err(Refusal::new(
            ErrorCode::LimitExceeded,
            format!(
                "a conversation has at most {cap} participants, the opener included; this one names {}",
                participants.len()
            ),
        ));
    }
    let Some(limits) = admit(s, id, &sender, &hash, &c.text).await? else {
        return Ok(());
    };
    let others: Vec<PeerSummary> = participants[1..].to_vec();
    let mut m = new_message(
        s,
        &limits,
        Draft {
            id,
            kind: MessageKind::Notify,
            sender: &sender,
            body: c.text.clone(),
            correlation_id: Some(CorrelationId::notif_from_random(rand::random()).0),
            content_hash: hash,
            recipients: others.iter().map(|p| p.peer_id.0.clone()).collect(),
        },
    );
    m.conversation = Some(ConversationWrite::Open {
        conversation_id: conversation_id_from_random(rand::random()),
        participants,
    });
    s.submit(id, WriteOp::Accept(m), others, started).await
}

pub(super) async fn turn(s: &Session, id: MessageId, t: Turn, started: Instant) -> Handled {
    let sender = s.own(t.from.as_str())?;
    let hash = content_hash("turn", &t);
    let Some(limits) = admit(s, id, &sender, &hash, &t.text).await? else {
        return Ok(());
    };
    let mut m = new_message(
        s,
        &limits,
        Draft {
            id,
            kind: MessageKind::Notify,
            sender: &sender,
            body: t.text.clone(),
            correlation_id: Some(CorrelationId::notif_from_random(rand::random()).0),
            content_hash: hash,
            // The store decides them: every other participant.
            recipients: Vec::new(),
        },
    );
    m.conversation = Some(ConversationWrite::Turn {
        conversation_id: t.conversation_id,
        by_person: t.by_person,
        loop_turns: i64::from(s.state.config.conversation_loop_turns),
        loop_bytes: i64::try_from(s.state.config.conversation_loop_bytes).unwrap_or(i64::MAX),
        turns_per_minute: i64::from(s.state.config.conversation_turns_per_minute),
    });
    s.submit(id, WriteOp::Accept(m), Vec::new(), started).await
}

/// A participant ends a conversation: the others get a notice (the message), and no turn is
/// accepted in it any more. Held to the message size only, as a reply is: a conversation the
/// tenant could open can always be ended.
pub(super) async fn end(
    s: &Session,
    id: MessageId,
    e: EndConversation,
    started: Instant,
) -> Handled {
    let sender = s.own(e.from.as_str())?;
    let hash = content_hash("end_conversation", &e);
    let reason = e
        .reason
        .clone()
        .unwrap_or_else(|| format!("@{} ended it", sender.record.name));
    let text = format!("@{} ended the conversation: {reason}", sender.record.name);
    let limits = reply_fits(s, Some(&text)).await?;
    let mut m = new_message(
        s,
        &limits,
        Draft {
            id,
            kind: MessageKind::Notify,
            sender: &sender,
            body: text,
            correlation_id: Some(CorrelationId::notif_from_random(rand::random()).0),
            content_hash: hash,
            recipients: Vec::new(),
        },
    );
    m.conversation = Some(ConversationWrite::End {
        conversation_id: e.conversation_id,
        reason,
    });
    s.submit(id, WriteOp::Accept(m), Vec::new(), started).await
}
