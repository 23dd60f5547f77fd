//! What a tool call returns: text for the model (with the daemon's result as structured
//! content), or an error saying what went wrong and what to do.

use rmcp::model::{CallToolResult, ContentBlock};
use serde_json::Value;

use crate::api::{CallError, SendOutcome, Sent};
use crate::sanitize::for_context;

/// A tool's answer. Its text and its structured content quote remote peers (names,
/// descriptions, shared state, a file's content, relay errors), so all of it goes through the
/// sanitizer here, in the one place every result passes: the agent reads control characters,
/// bidi overrides and invisible characters as `\xNN` / `\u{NNNN}`, never as what they would do.
/// (JSON escaping alone would pass DEL, C1 controls and bidi overrides through as they are.)
pub(super) fn text_result(text: String, structured: Value) -> CallToolResult {
    let mut r = CallToolResult::success(vec![ContentBlock::text(for_context(&text))]);
    r.structured_content = Some(inert(structured));
    r
}

/// Every string of a JSON value (keys too) through [`for_context`].
fn inert(v: Value) -> Value {
    match v {
        Value::String(s) => Value::String(for_context(&s)),
        Value::Array(items) => Value::Array(items.into_iter().map(inert).collect()),
        Value::Object(map) => Value::Object(
            map.into_iter()
                .map(|(k, v)| (for_context(&k), inert(v)))
                .collect(),
        ),
        other => other,
    }
}

/// A tool's failure, sanitized like [`text_result`].
pub(super) fn error_result(text: String) -> CallToolResult {
    CallToolResult::error(vec![ContentBlock::text(for_context(&text))])
}

pub(super) fn describe_error(e: CallError) -> String {
    match e {
        CallError::NotRunning(_) => {
            "The repowire daemon is not running. Start it with `repowire daemon start` \
             (or check the installation with `repowire doctor`)."
                .into()
        }
        CallError::Api(e) => e.describe(),
        other => other.to_string(),
    }
}

/// `start_conversation`'s result: the conversation's id once the relay accepted the opening.
pub(super) fn conversation_result(
    who: &str,
    started: &crate::api::ConversationStarted,
) -> CallToolResult {
    let text = match (&started.conversation_id, &started.outcome) {
        (Some(id), SendOutcome::Accepted { recipients, .. }) => {
            let to: Vec<String> = recipients.iter().map(|p| format!("@{}", p.name)).collect();
            format!(
                "Conversation {id} opened with {}. From your next turn on, what you say at the end of each turn reaches them; their turns reach you as messages.",
                to.join(", ")
            )
        }
        (_, outcome) => sent_text(&format!("Conversation with {who}"), outcome),
    };
    text_result(
        text,
        serde_json::to_value(started).expect("a typed reply serializes (string keys only)"),
    )
}

/// A send's, ack's or answer's result: what became of it, with the reply as structured content.
pub(super) fn sent_result(what: &str, sent: &Sent) -> CallToolResult {
    text_result(
        sent_text(what, &sent.outcome),
        serde_json::to_value(sent).expect("a typed reply serializes (string keys only)"),
    )
}

fn sent_text(what: &str, outcome: &SendOutcome) -> String {
    match outcome {
        SendOutcome::Accepted {
            correlation_id,
            recipients,
            ..
        } => {
            let to: Vec<String> = recipients.iter().map(|p| format!("@{}", p.name)).collect();
            format!(
                "{what} accepted: {} → {}",
                correlation_id.as_deref().unwrap_or(""),
                if to.is_empty() {
                    "(no recipients)".into()
                } else {
                    to.join(", ")
                }
            )
        }
        other => format!(
            "{what} {} (message {}): {}",
            other.state(),
            other.message_id(),
            other.reason()
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::ApiError;
    use serde_json::json;

    fn only_text(r: &CallToolResult) -> String {
        r.content
            .iter()
            .filter_map(|c| c.as_text().map(|t| t.text.clone()))
            .collect()
    }

    /// No character that acts on a terminal or hides text: C0/C1 controls (bar newline and
    /// tab), bidi overrides and isolates, zero-width characters.
    fn is_inert(text: &str) -> bool {
        !text.chars().any(|c| {
            let u = c as u32;
            (u < 0x20 && c != '\n' && c != '\t')
                || (0x7f..=0x9f).contains(&u)
                || (0x202a..=0x202e).contains(&u)
                || (0x2066..=0x2069).contains(&u)
                || (0x200b..=0x200f).contains(&u)
        })
    }

    const HOSTILE: &str = "ok\u{1b}]0;pwned\u{7}\u{1b}[2J\u{202e}evil\u{200b}\r";

    #[test]
    fn a_relay_error_quoting_remote_text_reaches_the_agent_inert() {
        let mut e = ApiError::new(
            repowire_protocol::ErrorCode::AmbiguousPeer,
            format!("two peers are called {HOSTILE}"),
        )
        .hint(format!("use a peer id {HOSTILE}"));
        e.candidates = vec![json!({"name": HOSTILE, "peer_id": "p_1", "circle": HOSTILE})];
        let text = describe_error(CallError::Api(e));
        assert!(is_inert(&text), "{text:?}");
        assert!(
            text.contains("two peers are called ok\\x1b]0;pwned"),
            "{text:?}"
        );
        assert!(
            text.contains("\\u{202e}"),
            "the override is shown, not applied: {text:?}"
        );
        assert!(text.contains("candidate: ok"), "{text:?}");
        assert!(text.contains("hint: use a peer id"), "{text:?}");
        let r = error_result(text);
        assert!(is_inert(&only_text(&r)));
    }

    #[test]
    fn every_tool_result_text_is_sanitized_and_keeps_its_lines() {
        let r = text_result(
            format!("- @a — {HOSTILE}\n- @b\tx\n"),
            json!({"peers": [{"description": HOSTILE, "n": 1}], HOSTILE: null}),
        );
        let text = only_text(&r);
        let structured = r.structured_content.clone().expect("structured content");
        let description = structured["peers"][0]["description"]
            .as_str()
            .expect("string");
        assert!(is_inert(description), "{description:?}");
        assert!(description.contains("\\u{202e}"), "{description:?}");
        assert_eq!(structured["peers"][0]["n"], 1, "numbers stay numbers");
        assert!(
            structured
                .as_object()
                .expect("object")
                .keys()
                .all(|k| is_inert(k)),
            "keys too"
        );
        assert!(is_inert(&text), "{text:?}");
        assert!(text.starts_with("- @a — ok\\x1b]0;pwned\\x07"), "{text:?}");
        assert!(
            text.ends_with("\n- @b\tx\n"),
            "newlines and tabs stay: {text:?}"
        );
        // Already sanitized text (replies::wait_outcome) is not escaped twice.
        assert_eq!(for_context(&text), text);
    }
}
