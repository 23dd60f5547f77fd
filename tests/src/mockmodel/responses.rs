//! The Responses API side of the mock (docs/agents/codex.md): a Codex request is translated to
//! the Messages shape the script reads, and the script's answer back into `response.*` events.
//!
//! - `input` items: `message`s of any role but `assistant` become user text (Codex hands hook
//!   context over as `developer` messages), `assistant` messages stay the model's;
//!   `function_call` becomes a `tool_use` named `<namespace>__<name>` (our MCP tools are offered
//!   in the namespace `mcp__repowire`), `function_call_output` a `tool_result`.
//! - `tools`: the functions inside each `namespace` entry, by their full names.
//! - A tool call goes back as `function_call` with the namespace split off again: Codex refuses
//!   a flat `mcp__repowire__ack`.
//! - The thread-title request the TUI sends once per session is answered with a fixed title and
//!   never reaches the script.

use std::sync::Mutex;

use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use super::{NOT_READY, Reply, State};
use crate::responses::text_of;

/// How the TUI's thread-title request starts.
const TITLE: &str = "Generate a concise, single-line task title";

/// The request in the Messages shape: `messages` and `tools`.
fn as_messages(request: &Value) -> Value {
    let mut messages = Vec::new();
    for item in request["input"].as_array().into_iter().flatten() {
        match item["type"].as_str().unwrap_or("message") {
            "message" if item["role"] == "assistant" => messages.push(
                json!({"role": "assistant", "content": [{"type": "text", "text": text_of(item)}]}),
            ),
            "message" => messages.push(
                json!({"role": "user", "content": [{"type": "text", "text": text_of(item)}]}),
            ),
            "function_call" => {
                let name = match item["namespace"].as_str() {
                    Some(ns) => format!("{ns}__{}", item["name"].as_str().unwrap_or("")),
                    None => item["name"].as_str().unwrap_or("").to_owned(),
                };
                let input: Value = item["arguments"]
                    .as_str()
                    .and_then(|a| serde_json::from_str(a).ok())
                    .unwrap_or(Value::Null);
                messages.push(json!({"role": "assistant", "content": [{"type": "tool_use",
                    "id": item["call_id"], "name": name, "input": input}]}));
            }
            "function_call_output" => messages.push(json!({"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": item["call_id"], "content": item["output"]}]})),
            _ => {}
        }
    }
    let mut tools = Vec::new();
    for tool in request["tools"].as_array().into_iter().flatten() {
        match tool["type"].as_str() {
            Some("namespace") => {
                let ns = tool["name"].as_str().unwrap_or("");
                for f in tool["tools"].as_array().into_iter().flatten() {
                    tools.push(
                        json!({"name": format!("{ns}__{}", f["name"].as_str().unwrap_or(""))}),
                    );
                }
            }
            _ => tools.push(json!({"name": tool["name"]})),
        }
    }
    json!({"messages": messages, "tools": tools})
}

fn event(data: &Value) -> String {
    format!(
        "event: {}\ndata: {data}\n\n",
        data["type"].as_str().unwrap_or("")
    )
}

/// One streamed answer holding `item`.
fn stream(id: u64, item: &Value) -> Response {
    let rid = format!("resp_mock_{id}");
    let mut body = event(&json!({"type": "response.created", "response": {"id": rid}}));
    body += &event(&json!({"type": "response.output_item.added", "output_index": 0, "item": item}));
    body += &event(&json!({"type": "response.output_item.done", "output_index": 0, "item": item}));
    body += &event(
        &json!({"type": "response.completed", "response": {"id": rid,
        "usage": {"input_tokens": 1, "output_tokens": 1, "total_tokens": 2}}}),
    );
    ([(header::CONTENT_TYPE, "text/event-stream")], body).into_response()
}

fn message(id: u64, text: &str) -> Value {
    json!({"type": "message", "id": format!("msg_mock_{id}"), "role": "assistant",
           "content": [{"type": "output_text", "text": text, "annotations": []}]})
}

pub(super) fn handle(state: &Mutex<State>, headers: &HeaderMap, request: &Value) -> Response {
    let session = headers
        .get("session-id")
        .or_else(|| headers.get("session_id"))
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_owned();
    let Ok(mut state) = state.lock() else {
        return StatusCode::INTERNAL_SERVER_ERROR.into_response();
    };
    if request["input"].to_string().contains(TITLE) {
        state.next_id += 1;
        return stream(
            state.next_id,
            &message(state.next_id, "Repowire conversation"),
        );
    }
    let (id, reply) = state.answer(&session, &as_messages(request));
    let item = match &reply {
        Reply::Text(t) => message(id, t),
        Reply::NotReady => message(id, NOT_READY),
        Reply::Tool { name, input, .. } => {
            let (namespace, short) = match name.rsplit_once("__") {
                Some((ns, short)) => (Some(ns), short),
                None => (None, name.as_str()),
            };
            let mut call = json!({"type": "function_call", "id": format!("fc_mock_{id}"),
                "call_id": format!("call_mock_{id}"), "name": short,
                "arguments": input.to_string()});
            if let Some(ns) = namespace {
                call["namespace"] = json!(ns);
            }
            call
        }
    };
    let response = stream(id, &item);
    state.called(&session, reply);
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_codex_history_reads_as_messages_with_namespaced_tools() {
        let request = json!({
            "input": [
                {"type": "message", "role": "developer", "content": [{"type": "input_text", "text": "rules"}]},
                {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "hi"}]},
                {"type": "function_call", "namespace": "mcp__repowire", "name": "ack",
                 "call_id": "c1", "arguments": "{\"correlation_id\":\"ask-1\"}"},
                {"type": "function_call_output", "call_id": "c1", "output": "ok"}
            ],
            "tools": [{"type": "namespace", "name": "mcp__repowire",
                       "tools": [{"type": "function", "name": "ack"}]},
                      {"type": "function", "name": "exec_command"}]
        });
        let m = as_messages(&request);
        assert_eq!(m["messages"][0]["role"], "user");
        assert_eq!(m["messages"][1]["content"][0]["text"], "hi");
        assert_eq!(m["messages"][2]["content"][0]["name"], "mcp__repowire__ack");
        assert_eq!(
            m["messages"][2]["content"][0]["input"]["correlation_id"],
            "ask-1"
        );
        assert_eq!(m["messages"][3]["content"][0]["tool_use_id"], "c1");
        assert_eq!(
            m["tools"],
            json!([{"name": "mcp__repowire__ack"}, {"name": "exec_command"}])
        );
    }
}
