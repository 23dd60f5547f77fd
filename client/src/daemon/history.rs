//! The record of decisions `repowire approvals history` shows: the relay's closed questions,
//! with the tool calls this machine denied without asking anyone merged in.

use repowire_protocol::QuestionInfo;

use super::store::LocalDecision;
use crate::api::{Approval, LocalAsker, LocalDenial};

/// The relay's closed questions and this machine's local denials as one list, newest first,
/// at most `limit` long. A local denial reads like a closed question: state `denied_here`,
/// `local: true`, its correlation id if the question was asked.
pub(super) fn merged(
    questions: Vec<QuestionInfo>,
    local: Vec<LocalDecision>,
    limit: u32,
) -> Vec<Approval> {
    let mut all: Vec<Approval> = questions
        .into_iter()
        .map(|q| Approval::Asked(Box::new(q)))
        .collect();
    all.extend(local.into_iter().map(|d| {
        Approval::Local(LocalDenial {
            correlation_id: d.correlation_id,
            from: LocalAsker {
                peer_id: d.peer_id,
                name: d.name,
                circle: d.circle,
            },
            session_id: d.session_id,
            text: d.text,
            state: "denied_here".to_owned(),
            reason: d.reason,
            closed_at_ms: d.decided_at_ms,
            local: true,
        })
    }));
    // Stable: at equal times the relay's record comes first.
    all.sort_by_key(|q| std::cmp::Reverse(q.closed_at_ms().unwrap_or(0)));
    all.truncate(usize::try_from(limit).unwrap_or(usize::MAX));
    all
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn closed_at(all: &[Approval]) -> Vec<i64> {
        all.iter()
            .map(|q| q.closed_at_ms().expect("time"))
            .collect()
    }

    #[test]
    fn local_denials_merge_newest_first_and_read_like_closed_questions() {
        let question: QuestionInfo = serde_json::from_value(json!({
            "correlation_id": "ask-1", "message_id": "0190b2a4-0000-7000-8000-000000000001",
            "from": {"peer_id": "peer-a", "name": "app", "circle": "dev"}, "to": "@approvers",
            "text": "Bash: make", "question": {"kind": "tool_permission", "options": [
                {"id": "allow", "label": "Allow"}, {"id": "deny", "label": "Deny"}]},
            "created_at_ms": 1, "state": "answered", "closed_at_ms": 20,
        }))
        .expect("question");
        let local = |at: i64, cid: Option<&str>| LocalDecision {
            decided_at_ms: at,
            correlation_id: cid.map(str::to_owned),
            name: Some("app".into()),
            ..LocalDecision::now("s1", "Bash: ls".into(), "could not ask".into())
        };
        let all = merged(
            vec![question.clone()],
            vec![local(30, None), local(10, Some("ask-0"))],
            50,
        );
        assert_eq!(closed_at(&all), [30, 20, 10]);
        let all = serde_json::to_value(&all).expect("json");
        let newest = &all[0];
        assert_eq!(newest["state"], "denied_here");
        assert_eq!(newest["local"], true);
        assert!(newest["correlation_id"].is_null());
        assert_eq!(newest["from"]["name"], "app");
        assert_eq!(newest["session_id"], "s1");
        assert_eq!(newest["text"], "Bash: ls");
        assert_eq!(newest["reason"], "could not ask");
        assert_eq!(all[1]["correlation_id"], "ask-1");
        assert!(all[1].get("local").is_none());
        assert_eq!(all[2]["correlation_id"], "ask-0");
        // The limit holds for the merged list.
        let two = merged(vec![question], vec![local(30, None), local(10, None)], 2);
        assert_eq!(closed_at(&two), [30, 20]);
    }
}
