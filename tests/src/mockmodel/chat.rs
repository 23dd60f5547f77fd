//! The Chat Completions side of the mock (docs/agents/opencode.md): an OpenCode request
//! (`POST /v1/chat/completions`, streamed) is translated to the Messages shape the script
//! reads, and the script's answer back into `chat.completion.chunk`s ending in `[DONE]`.
//!
//! - `messages`: `system` and `user` messages become user text (content as a string or as
//!   text parts, our plugin's hidden context among them), `assistant` messages the model's
//!   (`tool_calls` as `tool_use`), `tool` messages `tool_result`s.
//! - OpenCode names our MCP tools `repowire_<tool>`; the script's `mcp__repowire__<tool>`.
//! - The session title request (no tools, "You are a title generator") is answered with a
//!   fixed title and never reaches the script.
//! - The agent's name is its working directory, from `Working directory: …` in the system
//!   prompt.
//! - Two rules for OpenCode's own tests, read in a new prompt only (the request's last
//!   message is the user's): `RUN-SHELL <command>` calls its `bash` tool, and `MOCK-SLOW`
//!   answers after [`SLOW`], so that the turn is still running when a test needs it to.

use std::sync::Mutex;

use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use super::{NOT_READY, Reply, State};

/// All text of a message, parts on lines of their own.
fn text_of(message: &Value) -> String {
    crate::responses::text_joined(message, "\n")
}

/// OpenCode's name for a tool → the script's.
fn ours(name: &str) -> String {
    match name.strip_prefix("repowire_") {
        Some(tool) => format!("mcp__repowire__{tool}"),
        None => name.to_owned(),
    }
}

/// The script's name for a tool → OpenCode's.
fn theirs(name: &str) -> String {
    match name.strip_prefix("mcp__repowire__") {
        Some(tool) => format!("repowire_{tool}"),
        None => name.to_owned(),
    }
}

/// How long a `MOCK-SLOW` prompt waits for its answer.
pub(super) const SLOW: std::time::Duration = std::time::Duration::from_secs(4);

/// The text of a new prompt: the request's last message, when it is the user's.
fn new_prompt(request: &Value) -> Option<String> {
    let last = request["messages"].as_array()?.last()?;
    (last["role"] == "user").then(|| text_of(last))
}

/// How long to hold the answer to `body` (a `MOCK-SLOW` prompt).
pub(super) fn delay(body: &[u8]) -> Option<std::time::Duration> {
    let request: Value = serde_json::from_slice(body).ok()?;
    new_prompt(&request)
        .is_some_and(|t| t.contains("MOCK-SLOW"))
        .then_some(SLOW)
}

/// The command of a `RUN-SHELL <command>` prompt (to the end of its line).
fn shell_command(request: &Value) -> Option<String> {
    let prompt = new_prompt(request)?;
    let (_, rest) = prompt.split_once("RUN-SHELL ")?;
    Some(rest.lines().next().unwrap_or("").to_owned())
}

/// The working directory OpenCode's system prompt names.
fn working_directory(request: &Value) -> String {
    let system = request["messages"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|m| m["role"] == "system")
        .map(text_of)
        .collect::<String>();
    let marker = "Working directory: ";
    system
        .find(marker)
        .map(|at| {
            system[at + marker.len()..]
                .chars()
                .take_while(|c| !c.is_whitespace())
                .collect()
        })
        .unwrap_or_default()
}

/// The request in the Messages shape: `messages`, `tools` and the working directory.
fn as_messages(request: &Value) -> Value {
    let mut messages = Vec::new();
    for message in request["messages"].as_array().into_iter().flatten() {
        match message["role"].as_str().unwrap_or("") {
            // The system prompt is not the turn's input.
            "system" => {}
            "assistant" => {
                let mut blocks = Vec::new();
                let text = text_of(message);
                if !text.is_empty() {
                    blocks.push(json!({"type": "text", "text": text}));
                }
                for call in message["tool_calls"].as_array().into_iter().flatten() {
                    let input: Value = call["function"]["arguments"]
                        .as_str()
                        .and_then(|a| serde_json::from_str(a).ok())
                        .unwrap_or(Value::Null);
                    blocks.push(json!({"type": "tool_use", "id": call["id"],
                        "name": ours(call["function"]["name"].as_str().unwrap_or("")),
                        "input": input}));
                }
                messages.push(json!({"role": "assistant", "content": blocks}));
            }
            "tool" => messages.push(json!({"role": "user", "content": [{"type": "tool_result",
                "tool_use_id": message["tool_call_id"], "content": text_of(message)}]})),
            _ => messages.push(
                json!({"role": "user", "content": [{"type": "text", "text": text_of(message)}]}),
            ),
        }
    }
    let tools: Vec<Value> = request["tools"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|t| json!({"name": ours(t["function"]["name"].as_str().unwrap_or(""))}))
        .collect();
    json!({
        "messages": messages,
        "tools": tools,
        "system": format!("Primary working directory: {}\n", working_directory(request)),
    })
}

/// One streamed answer: the delta, then the finish, the usage and `[DONE]`.
fn stream(id: u64, delta: Value, finish: &str) -> Response {
    let chunk = |choices: Value, usage: Value| {
        json!({"id": format!("chatcmpl-mock-{id}"), "object": "chat.completion.chunk",
               "created": 0, "model": "mock-model", "choices": choices, "usage": usage})
    };
    let mut body = String::new();
    for data in [
        chunk(
            json!([{"index": 0, "delta": delta, "finish_reason": null}]),
            Value::Null,
        ),
        chunk(
            json!([{"index": 0, "delta": {}, "finish_reason": finish}]),
            Value::Null,
        ),
        chunk(
            json!([]),
            json!({"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}),
        ),
    ] {
        body += &format!("data: {data}\n\n");
    }
    body += "data: [DONE]\n\n";
    ([(header::CONTENT_TYPE, "text/event-stream")], body).into_response()
}

fn text(t: &str) -> Value {
    json!({"role": "assistant", "content": t})
}

pub(super) fn handle(state: &Mutex<State>, headers: &HeaderMap, request: &Value) -> Response {
    let session = headers
        .get("x-session-id")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_owned();
    let Ok(mut state) = state.lock() else {
        return StatusCode::INTERNAL_SERVER_ERROR.into_response();
    };
    if request["tools"].as_array().is_none_or(Vec::is_empty)
        && request["messages"].to_string().contains("title generator")
    {
        state.next_id += 1;
        return stream(state.next_id, text("Repowire conversation"), "stop");
    }
    if let Some(command) = shell_command(request) {
        state.next_id += 1;
        let id = state.next_id;
        return stream(
            id,
            json!({"role": "assistant", "tool_calls": [{"index": 0,
                "id": format!("call_mock_{id}"), "type": "function",
                "function": {"name": "bash", "arguments":
                    json!({"command": command, "description": "Runs the command"}).to_string()}}]}),
            "tool_calls",
        );
    }
    let (id, reply) = state.answer(&session, &as_messages(request));
    let response = match &reply {
        Reply::Text(t) => stream(id, text(t), "stop"),
        Reply::NotReady => stream(id, text(NOT_READY), "stop"),
        Reply::Tool { name, input, .. } => stream(
            id,
            json!({"role": "assistant", "tool_calls": [{"index": 0,
                "id": format!("call_mock_{id}"), "type": "function",
                "function": {"name": theirs(name), "arguments": input.to_string()}}]}),
            "tool_calls",
        ),
    };
    state.called(&session, reply);
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_opencode_history_reads_as_messages_with_our_tool_names() {
        let request = json!({
            "messages": [
                {"role": "system", "content": "You are opencode.\n<env>\n  Working directory: /tmp/x/beta\n</env>"},
                {"role": "user", "content": [{"type": "text", "text": "hidden context"},
                                             {"type": "text", "text": "hi"}]},
                {"role": "assistant", "content": "", "tool_calls": [{"id": "c1", "type": "function",
                    "function": {"name": "repowire_ack", "arguments": "{\"correlation_id\":\"ask-1\"}"}}]},
                {"role": "tool", "tool_call_id": "c1", "content": "ok"}
            ],
            "tools": [{"type": "function", "function": {"name": "repowire_ack"}},
                      {"type": "function", "function": {"name": "bash"}}]
        });
        let m = as_messages(&request);
        assert_eq!(m["messages"][0]["content"][0]["text"], "hidden context\nhi");
        assert_eq!(m["messages"][1]["content"][0]["name"], "mcp__repowire__ack");
        assert_eq!(
            m["messages"][1]["content"][0]["input"]["correlation_id"],
            "ask-1"
        );
        assert_eq!(m["messages"][2]["content"][0]["tool_use_id"], "c1");
        assert_eq!(
            m["tools"],
            json!([{"name": "mcp__repowire__ack"}, {"name": "bash"}])
        );
        assert_eq!(m["system"], "Primary working directory: /tmp/x/beta\n");
    }
}
