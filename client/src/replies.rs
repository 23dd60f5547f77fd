//! How a wait for a reply ended, in words: the one text `repowire peer ask --wait` prints and
//! the MCP tool `wait_on_ack` returns. Everything taken from the reply is remote text, made
//! safe with [`for_context`].

use serde_json::Value;

use crate::api::text as s;
use crate::sanitize::for_context;

/// A typed answer as one line: ``option `ID` (label: comment)`` for an option (the rendered
/// reply text in brackets), or the text of a text answer.
pub fn answer_text(answer: &Value, rendered: &str) -> String {
    match answer.get("option_id").and_then(Value::as_str) {
        Some(id) => format!("option `{id}` ({rendered})"),
        None => rendered.to_owned(),
    }
}

/// What a `wait_reply` result `v` says about the ask `cid`, after waiting up to `secs`.
pub fn wait_outcome(cid: &str, v: &Value, secs: u64) -> String {
    let reply = &v["reply"];
    let from = || for_context(&reply.get("from").map(|f| s(f, "name")).unwrap_or_default());
    match v["state"].as_str() {
        Some("replied") if reply.get("answer").is_some() => format!(
            "@{} answered {cid}: {}",
            from(),
            for_context(&answer_text(&reply["answer"], &s(reply, "text")))
        ),
        Some("replied") => format!(
            "@{} replied to {cid}:\n{}",
            from(),
            for_context(&s(reply, "text"))
        ),
        Some("closed") if v["timed_out"] == true => {
            let taken = match v["answer"]["option_id"].as_str() {
                Some(option) => format!(
                    "; its default `{}` ({}) was taken",
                    for_context(option),
                    for_context(&s(v, "reply_text"))
                ),
                None => "; it closed unanswered".to_owned(),
            };
            format!("Nobody answered {cid} within its timeout{taken}.")
        }
        Some("closed") => format!(
            "{cid} was closed ({}) without a reply.",
            for_context(&s(v, "outcome"))
        ),
        Some("failed") => format!(
            "{cid} did not reach its recipient: {}",
            for_context(&s(v, "reason"))
        ),
        _ => format!("No reply to {cid} within {secs} s; the ask stays open."),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn each_way_a_wait_ends_has_its_own_words_and_remote_text_is_made_safe() {
        let answered = json!({"state": "replied", "reply": {"from": {"name": "beta"},
            "answer": {"option_id": "b"}, "text": "B"}});
        assert_eq!(
            wait_outcome("c1", &answered, 5),
            "@beta answered c1: option `b` (B)"
        );
        let replied = json!({"state": "replied", "reply": {"from": {"name": "be\u{1b}[2Jta"}, "text": "ok\u{7}"}});
        let said = wait_outcome("c1", &replied, 5);
        assert!(
            !said.contains('\u{1b}') && !said.contains('\u{7}'),
            "{said:?}"
        );
        assert!(
            said.starts_with("@be") && said.contains("replied to c1:\nok"),
            "{said:?}"
        );
        let defaulted = json!({"state": "closed", "timed_out": true, "answer": {"option_id": "no"}, "reply_text": "No"});
        assert_eq!(
            wait_outcome("c1", &defaulted, 5),
            "Nobody answered c1 within its timeout; its default `no` (No) was taken."
        );
        let lapsed = json!({"state": "closed", "timed_out": true});
        assert_eq!(
            wait_outcome("c1", &lapsed, 5),
            "Nobody answered c1 within its timeout; it closed unanswered."
        );
        let closed = json!({"state": "closed", "outcome": "acked"});
        assert_eq!(
            wait_outcome("c1", &closed, 5),
            "c1 was closed (acked) without a reply."
        );
        let failed = json!({"state": "failed", "reason": "inbox_full"});
        assert_eq!(
            wait_outcome("c1", &failed, 5),
            "c1 did not reach its recipient: inbox_full"
        );
        let pending = json!({"state": "pending"});
        assert_eq!(
            wait_outcome("c1", &pending, 5),
            "No reply to c1 within 5 s; the ask stays open."
        );
    }
}
