//! How a wait for a reply ended, in words: the one text `repowire peer ask --wait` prints and
//! the MCP tool `wait_on_ack` returns. Everything taken from the reply is remote text, made
//! safe with [`for_context`].

use crate::api::WaitOutcome;
use crate::sanitize::for_context;

/// A typed answer as one line: ``option `ID` (label: comment)`` for an option (the rendered
/// reply text in brackets), or the text of a text answer.
pub fn answer_text(option_id: Option<&str>, rendered: &str) -> String {
    match option_id {
        Some(id) => format!("option `{id}` ({rendered})"),
        None => rendered.to_owned(),
    }
}

/// What a `wait_reply` outcome says about the ask `cid`, after waiting up to `secs`.
pub fn wait_outcome(cid: &str, outcome: &WaitOutcome, secs: u64) -> String {
    match outcome {
        WaitOutcome::Replied { reply, .. } => {
            let from = for_context(
                reply
                    .as_ref()
                    .and_then(|r| r.from.as_ref())
                    .map_or("-", |f| f.name.as_str()),
            );
            let text = reply
                .as_ref()
                .and_then(|r| r.text.as_deref())
                .unwrap_or("-");
            match reply.as_ref().and_then(|r| r.answer.as_ref()) {
                Some(answer) => format!(
                    "@{from} answered {cid}: {}",
                    for_context(&answer_text(answer.option_id.as_deref(), text))
                ),
                None => format!("@{from} replied to {cid}:\n{}", for_context(text)),
            }
        }
        WaitOutcome::Closed {
            timed_out: true,
            answer,
            reply_text,
            ..
        } => {
            let taken = match answer.as_ref().and_then(|a| a.option_id.as_deref()) {
                Some(option) => format!(
                    "; its default `{}` ({}) was taken",
                    for_context(option),
                    for_context(reply_text.as_deref().unwrap_or("-"))
                ),
                None => "; it closed unanswered".to_owned(),
            };
            format!("Nobody answered {cid} within its timeout{taken}.")
        }
        WaitOutcome::Closed { outcome, .. } => {
            format!(
                "{cid} was closed ({}) without a reply.",
                for_context(outcome)
            )
        }
        WaitOutcome::Failed { reason, .. } => {
            format!("{cid} did not reach its recipient: {}", for_context(reason))
        }
        WaitOutcome::Waiting { .. } | WaitOutcome::NoVerdict { .. } => {
            format!("No reply to {cid} within {secs} s; the ask stays open.")
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn said(v: serde_json::Value) -> String {
        let outcome: WaitOutcome = serde_json::from_value(v).expect("an outcome");
        wait_outcome("c1", &outcome, 5)
    }

    #[test]
    fn each_way_a_wait_ends_has_its_own_words_and_remote_text_is_made_safe() {
        let beta = json!({"peer_id": "peer-b", "name": "beta", "circle": "dev"});
        let answered = json!({"state": "replied", "outcome": "answered", "correlation_id": "c1",
            "reply": {"from": beta, "answer": {"option_id": "b"}, "text": "B"}});
        assert_eq!(said(answered), "@beta answered c1: option `b` (B)");
        let replied = json!({"state": "replied", "outcome": "acked", "correlation_id": "c1",
            "reply": {"from": {"peer_id": "peer-b", "name": "be\u{1b}[2Jta", "circle": "dev"}, "text": "ok\u{7}"}});
        let text = said(replied);
        assert!(
            !text.contains('\u{1b}') && !text.contains('\u{7}'),
            "{text:?}"
        );
        assert!(
            text.starts_with("@be") && text.contains("replied to c1:\nok"),
            "{text:?}"
        );
        let closed = |timed_out: bool, answer: serde_json::Value, reply_text: serde_json::Value| {
            json!({"state": "closed", "outcome": "acked", "correlation_id": "c1", "timed_out": timed_out,
                   "answer": answer, "reply_text": reply_text, "reason": null})
        };
        assert_eq!(
            said(closed(true, json!({"option_id": "no"}), json!("No"))),
            "Nobody answered c1 within its timeout; its default `no` (No) was taken."
        );
        assert_eq!(
            said(closed(true, json!(null), json!(null))),
            "Nobody answered c1 within its timeout; it closed unanswered."
        );
        assert_eq!(
            said(closed(false, json!(null), json!(null))),
            "c1 was closed (acked) without a reply."
        );
        let failed = json!({"state": "failed", "outcome": "failed", "reason": "inbox_full", "correlation_id": "c1"});
        assert_eq!(said(failed), "c1 did not reach its recipient: inbox_full");
        let pending = json!({"state": "waiting", "correlation_id": "c1", "message": "m"});
        assert_eq!(
            said(pending),
            "No reply to c1 within 5 s; the ask stays open."
        );
    }
}
