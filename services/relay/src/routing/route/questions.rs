//! `list_questions`: the questions sent to `@approvers` that a peer may see. Approvers (people,
//! orchestrators, services, through a key with the `approve` scope) see every one of their
//! tenant; any other peer only those it asked.

use repowire_protocol::{
    AnswerValue, Body, DEFAULT_QUESTIONS_LISTED, DeliveryState, ListQuestions, MessageId,
    PeerSummary, Question, QuestionInfo, Questions,
};

use super::session::{Handled, Session};
use crate::routing::dispatch::message_id;
use crate::storage::store::{CONTROL_PEER, QuestionRecord, approver_role};

pub(super) async fn list(s: &Session, id: MessageId, l: ListQuestions) -> Handled {
    let caller = s.own(l.peer_id.as_str())?;
    let approver = approver_role(&caller.record.role) && s.approves;
    let asker = (!approver).then_some(caller.record.peer_id.as_str());
    let limit = l.limit.unwrap_or(DEFAULT_QUESTIONS_LISTED);
    let rows = s
        .state
        .store
        .list_questions(&s.tenant_id, asker, l.closed, i64::from(limit))
        .await?;
    let questions = rows.into_iter().filter_map(info).collect();
    s.send(Body::Questions(Questions { re: id, questions }));
    Ok(())
}

/// One stored question on the wire; a row whose question cannot be read is left out (and
/// logged), since nobody could answer it.
fn info(r: QuestionRecord) -> Option<QuestionInfo> {
    let question = match r.question.as_deref().map(serde_json::from_str::<Question>) {
        Some(Ok(q)) => q,
        _ => {
            tracing::error!(message = %r.message_id, "a question to @approvers has no readable question");
            return None;
        }
    };
    let state = DeliveryState::parse(&r.state).unwrap_or(DeliveryState::Accepted);
    let answered_by = match (r.answered_by, r.answered_by_name, r.answered_by_circle) {
        (Some(peer_id), Some(name), Some(circle)) => Some(PeerSummary {
            peer_id: peer_id.into(),
            name,
            circle,
        }),
        _ => None,
    };
    Some(QuestionInfo {
        correlation_id: r.correlation_id.unwrap_or_default().into(),
        message_id: message_id(&r.message_id),
        from: PeerSummary {
            peer_id: r.from_peer_id.into(),
            name: r.from_name,
            circle: r.from_circle,
        },
        to: CONTROL_PEER.to_owned(),
        text: r.body,
        question,
        created_at_ms: r.created_at_ms,
        deadline_ms: r.deadline_ms,
        state,
        answer: r
            .answer
            .as_deref()
            .and_then(|a| serde_json::from_str::<AnswerValue>(a).ok()),
        reply: r.reply_text,
        answered_by,
        closed_at_ms: r.closed_at_ms,
        reason: r.reason,
    })
}
