//! The Gemini API side of the mock (docs/agents/gemini-cli.md): a Gemini CLI request
//! (`…:streamGenerateContent?alt=sse` or `…:generateContent`) is translated to the Messages
//! shape the script reads, and the script's answer back into one candidate.
//!
//! - `contents`: `user` turns become user messages (text parts, hook context included as
//!   `<hook_context>` text; `functionResponse` parts as `tool_result`s), `model` turns the
//!   model's (`functionCall` parts as `tool_use`).
//! - Gemini names our MCP tools `mcp_repowire_<tool>`; the script's `mcp__repowire__<tool>`.
//! - The project directory (the script's name for the agent) is read from the
//!   `<session_context>` Gemini sends, under "Workspace Directories".

use std::sync::Mutex;

use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use super::{NOT_READY, Reply, State};

/// Gemini's name for a tool → the script's.
fn ours(name: &str) -> String {
    match name.strip_prefix("mcp_repowire_") {
        Some(tool) => format!("mcp__repowire__{tool}"),
        None => name.to_owned(),
    }
}

/// The script's name for a tool → Gemini's.
fn theirs(name: &str) -> String {
    match name.strip_prefix("mcp__repowire__") {
        Some(tool) => format!("mcp_repowire_{tool}"),
        None => name.to_owned(),
    }
}

/// The first workspace directory of the session context.
fn workspace(request: &Value) -> String {
    let all = request["contents"].to_string();
    let marker = "Workspace Directories:**\\n  - ";
    all.find(marker)
        .map(|at| {
            all[at + marker.len()..]
                .chars()
                .take_while(|c| *c != '\\' && *c != '"')
                .collect()
        })
        .unwrap_or_default()
}

/// The request in the Messages shape: `messages`, `tools` and the working directory.
fn as_messages(request: &Value) -> Value {
    let mut messages = Vec::new();
    for content in request["contents"].as_array().into_iter().flatten() {
        let mut blocks = Vec::new();
        for part in content["parts"].as_array().into_iter().flatten() {
            if let Some(text) = part["text"].as_str() {
                blocks.push(json!({"type": "text", "text": text}));
            } else if let Some(call) = part.get("functionCall") {
                blocks.push(json!({"type": "tool_use", "id": call["id"],
                    "name": ours(call["name"].as_str().unwrap_or("")), "input": call["args"]}));
            } else if let Some(result) = part.get("functionResponse") {
                blocks.push(json!({"type": "tool_result", "tool_use_id": result["id"],
                    "content": result["response"]}));
            }
        }
        let role = if content["role"] == "model" {
            "assistant"
        } else {
            "user"
        };
        messages.push(json!({"role": role, "content": blocks}));
    }
    let tools: Vec<Value> = request["tools"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|t| {
            t["functionDeclarations"]
                .as_array()
                .cloned()
                .unwrap_or_default()
        })
        .map(|f| json!({"name": ours(f["name"].as_str().unwrap_or(""))}))
        .collect();
    json!({
        "messages": messages,
        "tools": tools,
        "system": format!("Primary working directory: {}\n", workspace(request)),
    })
}

pub(super) fn handle(state: &Mutex<State>, stream: bool, request: &Value) -> Response {
    let session = workspace(request);
    let Ok(mut state) = state.lock() else {
        return StatusCode::INTERNAL_SERVER_ERROR.into_response();
    };
    let (id, reply) = state.answer(&session, &as_messages(request));
    let part = match &reply {
        Reply::Text(t) => json!({"text": t}),
        Reply::NotReady => json!({"text": NOT_READY}),
        Reply::Tool { name, input, .. } => json!({"functionCall": {
            "id": format!("call_mock_{id}"), "name": theirs(name), "args": input}}),
    };
    let chunk = json!({"candidates": [{"content": {"role": "model", "parts": [part]},
        "finishReason": "STOP", "index": 0}],
        "usageMetadata": {"promptTokenCount": 1, "candidatesTokenCount": 1, "totalTokenCount": 2}});
    let response = if stream {
        (
            [(header::CONTENT_TYPE, "text/event-stream")],
            format!("data: {chunk}\n\n"),
        )
            .into_response()
    } else {
        axum::Json(chunk).into_response()
    };
    state.called(&session, reply);
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_gemini_history_reads_as_messages_with_our_tool_names() {
        let request = json!({
            "contents": [
                {"role": "user", "parts": [
                    {"text": "<session_context>\n- **Workspace Directories:**\n  - /tmp/x/beta\n</session_context>"},
                    {"text": "hi"}]},
                {"role": "model", "parts": [{"functionCall": {"id": "c1", "name": "mcp_repowire_ack",
                    "args": {"correlation_id": "ask-1"}}}]},
                {"role": "user", "parts": [{"functionResponse": {"id": "c1", "name": "mcp_repowire_ack",
                    "response": {"output": "ok"}}}]}
            ],
            "tools": [{"functionDeclarations": [{"name": "mcp_repowire_ack"}, {"name": "run_shell_command"}]}]
        });
        let m = as_messages(&request);
        assert_eq!(m["messages"][0]["content"][1]["text"], "hi");
        assert_eq!(m["messages"][1]["content"][0]["name"], "mcp__repowire__ack");
        assert_eq!(m["messages"][2]["content"][0]["tool_use_id"], "c1");
        assert_eq!(
            m["tools"],
            json!([{"name": "mcp__repowire__ack"}, {"name": "run_shell_command"}])
        );
        assert_eq!(m["system"], "Primary working directory: /tmp/x/beta\n");
    }
}
