//! What a tool call returns: text for the model (with the daemon's result as structured
//! content), or an error saying what went wrong and what to do.

use rmcp::model::{CallToolResult, ContentBlock};
use serde_json::Value;

use crate::api::CallError;
use crate::api::text as s;

pub(super) fn text_result(text: String, structured: Value) -> CallToolResult {
    let mut r = CallToolResult::success(vec![ContentBlock::text(text)]);
    r.structured_content = Some(structured);
    r
}

pub(super) fn error_result(text: String) -> CallToolResult {
    CallToolResult::error(vec![ContentBlock::text(text)])
}

pub(super) fn describe_error(e: CallError) -> String {
    match e {
        CallError::NotRunning(_) => {
            "The repowire daemon is not running. Start it with `repowire daemon start` \
             (or check the installation with `repowire doctor`)."
                .into()
        }
        CallError::Api(e) => {
            let mut text = format!("{} ({})", e.message, e.code);
            for c in &e.candidates {
                text.push_str(&format!(
                    "\n- candidate: {} (peer id {}, circle {})",
                    c["name"].as_str().unwrap_or("?"),
                    c["peer_id"].as_str().unwrap_or("?"),
                    c["circle"].as_str().unwrap_or("?"),
                ));
            }
            if let Some(h) = e.hint {
                text.push_str(&format!("\nHint: {h}"));
            }
            text
        }
        other => other.to_string(),
    }
}

pub(super) fn sent_text(what: &str, v: &Value) -> String {
    match v["state"].as_str() {
        Some("accepted") => {
            let to: Vec<String> = v["recipients"]
                .as_array()
                .map(|r| r.iter().map(|p| format!("@{}", s(p, "name"))).collect())
                .unwrap_or_default();
            format!(
                "{what} accepted: {} → {}",
                v["correlation_id"].as_str().unwrap_or(""),
                if to.is_empty() {
                    "(no recipients)".into()
                } else {
                    to.join(", ")
                }
            )
        }
        _ => format!(
            "{what} queued (message {}): {}",
            s(v, "message_id"),
            s(v, "reason")
        ),
    }
}
