//! Structured questions in storage: the tenant's `@approvers` recipient, who may answer for it,
//! what a question's timeout does, and the rows `list_questions` reads.
//!
//! A question to `@approvers` is an ask like any other: its inbox entry belongs to a stored
//! peer of the tenant, [`CONTROL_PEER`], that never connects, is never listed and cannot be
//! named (`@` is outside the name alphabet). Closing it is the usual close of an ask, serialised
//! in storage so that the first answer wins; only the check of who may close it differs.

use repowire_protocol::{AnswerValue, DeliveryState, Question};

use super::PeerRecord;

/// The peer id (and display name) of the tenant's approvers.
pub const CONTROL_PEER: &str = repowire_protocol::APPROVERS;

/// `closed_by` of an ask its question's timeout closed.
pub const CLOSED_BY_TIMEOUT: &str = "timeout";

/// The stored peer behind `@approvers` in a tenant.
pub fn control_peer(tenant_id: &str, now_ms: i64) -> PeerRecord {
    PeerRecord {
        tenant_id: tenant_id.to_owned(),
        peer_id: CONTROL_PEER.to_owned(),
        name: CONTROL_PEER.to_owned(),
        circle: "*".to_owned(),
        backend: "repowire".to_owned(),
        role: "human".to_owned(),
        path: None,
        machine: None,
        description: None,
        description_at_ms: None,
        created_at_ms: now_ms,
        last_seen_ms: now_ms,
        last_seq: 0,
    }
}

/// True for the roles that answer questions to `@approvers`: people (`human`),
/// `orchestrator` and `service` peers, in any circle of the tenant.
pub fn approver_role(role: &str) -> bool {
    matches!(role, "human" | "orchestrator" | "service")
}

/// Whether a peer of `role`, connected with a key that has the `approve` scope or not, may
/// answer a question that `asker` sent to `@approvers`: people (`human`), `orchestrator` and
/// `service` peers may, in any circle of the tenant, through a key with `approve`; `agent`
/// peers may not (a model must not approve its team's tool calls), and nobody answers a
/// question it asked itself. `Err` says why not.
pub fn may_approve(
    role: &str,
    approver_key: bool,
    by_peer_id: &str,
    asker: &str,
) -> Result<(), String> {
    if by_peer_id == asker {
        return Err(
            "you asked this question yourself: another peer (a person, an orchestrator or a service) must answer it"
                .into(),
        );
    }
    if !approver_role(role) {
        return Err(format!(
            "a question to {CONTROL_PEER} is answered by a person, an orchestrator or a service; a peer of role `{role}` may not answer it"
        ));
    }
    if approver_key {
        Ok(())
    } else {
        Err(
            "this connection's API key lacks the `approve` scope, so its peers do not answer approvals"
                .into(),
        )
    }
}

/// How an ask whose question timed out is closed: its state, the answer taken (as stored JSON
/// and as the reply text), and the reason the asker is told.
pub struct TimeoutClose {
    /// `Answered` (a default was taken) or `Expired`.
    pub state: DeliveryState,
    /// The default as an answer (JSON), if one was taken.
    pub answer: Option<String>,
    /// The default's label, if one was taken.
    pub reply_text: Option<String>,
    /// What happened, in words.
    pub reason: String,
}

/// What a question's timeout does to its ask (`question` is the stored JSON, if any).
pub fn timeout_close(question: Option<&str>) -> TimeoutClose {
    let question = question.and_then(|q| serde_json::from_str::<Question>(q).ok());
    let within = question
        .as_ref()
        .and_then(|q| q.timeout_ms)
        .map_or_else(|| "its timeout".to_owned(), seconds);
    match question.as_ref().and_then(|q| {
        let option = q.timeout_option()?;
        Some((
            option.to_owned(),
            q.label_of(option).unwrap_or(option).to_owned(),
        ))
    }) {
        Some((option, label)) => TimeoutClose {
            state: DeliveryState::Answered,
            answer: serde_json::to_string(&AnswerValue {
                option_id: Some(option.clone()),
                text: None,
            })
            .ok(),
            reply_text: Some(label),
            reason: format!("no answer within {within}: the default `{option}` was taken"),
        },
        None => TimeoutClose {
            state: DeliveryState::Expired,
            answer: None,
            reply_text: None,
            reason: format!("no answer within {within}"),
        },
    }
}

fn seconds(ms: u64) -> String {
    if ms.is_multiple_of(1000) {
        format!("{} s", ms / 1000)
    } else {
        format!("{:.1} s", ms as f64 / 1000.0)
    }
}

/// One question as `list_questions` reads it.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct QuestionRecord {
    /// The ask's message id.
    pub message_id: String,
    /// Its correlation id.
    pub correlation_id: Option<String>,
    /// Who asked.
    pub from_peer_id: String,
    /// The asker's name then.
    pub from_name: String,
    /// The asker's circle then.
    pub from_circle: String,
    /// The ask's text.
    pub body: String,
    /// The question (JSON).
    pub question: Option<String>,
    /// Accept time.
    pub created_at_ms: i64,
    /// When it times out.
    pub deadline_ms: Option<i64>,
    /// The entry's state.
    pub state: String,
    /// The entry's reason (a timeout's).
    pub reason: Option<String>,
    /// The answer (JSON).
    pub answer: Option<String>,
    /// The reply text.
    pub reply_text: Option<String>,
    /// When it closed.
    pub closed_at_ms: Option<i64>,
    /// The answerer, when a reply closed it.
    pub answered_by: Option<String>,
    /// The answerer's name then.
    pub answered_by_name: Option<String>,
    /// The answerer's circle then.
    pub answered_by_circle: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_people_orchestrators_and_services_other_than_the_asker_may_approve() {
        assert!(may_approve("human", true, "peer-b", "peer-a").is_ok());
        assert!(may_approve("orchestrator", true, "peer-b", "peer-a").is_ok());
        assert!(may_approve("service", true, "peer-b", "peer-a").is_ok());
        assert!(may_approve("agent", true, "peer-b", "peer-a").is_err());
        let scope = may_approve("human", false, "peer-b", "peer-a").expect_err("no scope");
        assert!(scope.contains("`approve` scope"), "{scope}");
        let own = may_approve("human", true, "peer-a", "peer-a").expect_err("own question");
        assert!(own.contains("yourself"), "{own}");
    }

    #[test]
    fn a_timed_out_tool_permission_question_is_denied_and_a_choice_without_default_expires() {
        let tool = serde_json::to_string(&Question::tool_permission(60_000)).expect("json");
        let closed = timeout_close(Some(&tool));
        assert_eq!(closed.state, DeliveryState::Answered);
        assert_eq!(closed.reply_text.as_deref(), Some("Deny"));
        assert_eq!(
            closed.reason,
            "no answer within 60 s: the default `deny` was taken"
        );
        let mut choice = Question::new(
            repowire_protocol::QuestionKind::Choice,
            &[("a", "A"), ("b", "B")],
        );
        choice.timeout_ms = Some(1_500);
        let closed = timeout_close(Some(&serde_json::to_string(&choice).expect("json")));
        assert_eq!(closed.state, DeliveryState::Expired);
        assert_eq!(closed.answer, None);
        assert_eq!(closed.reason, "no answer within 1.5 s");
    }
}
