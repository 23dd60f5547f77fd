//! A small stand-in for OpenAI's Responses API (`POST /v1/responses`, streamed), so that the
//! real Codex CLI runs offline (`[model_providers.mock] base_url = "http://127.0.0.1:PORT/v1"`,
//! `wire_api = "responses"`). It keeps every request and answers by a short script, reading the
//! newest user message or tool result of the request's `input` (the whole history each time):
//!
//! - a tool result (`function_call_output`, `custom_tool_call_output`) → the text `MOCK-DONE`;
//! - a user message holding `RUN-SHELL <command>` → a call of Codex's shell tool,
//!   `exec_command` with `{"cmd": "<command>"}` (the rest of that line);
//! - a user message holding `RUN-PATCH <file>` → a call of Codex's patch tool, `apply_patch`
//!   (a freeform tool, offered when the model catalogue says so:
//!   `offline::codex_config_with_patches`), adding `<file>` with the line `patched`;
//! - anything else → the text `MOCK-REPLY: ` and the end of the message.
//!
//! docs/agents/codex.md says what Codex sends and what this must answer.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use axum::Router;
use axum::body::Bytes;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

/// The running mock; stops when dropped.
pub struct ResponsesMock {
    /// `http://127.0.0.1:PORT/v1`, for the provider's `base_url`.
    pub base_url: String,
    requests: Arc<Mutex<Vec<Value>>>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for ResponsesMock {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl ResponsesMock {
    /// Serves on a free loopback port.
    pub async fn start() -> anyhow::Result<Self> {
        let requests = Arc::new(Mutex::new(Vec::new()));
        let kept = requests.clone();
        let app = Router::new().fallback(move |body: Bytes| {
            let kept = kept.clone();
            async move { handle(&kept, &body) }
        });
        let listener = tokio::net::TcpListener::bind(SocketAddr::from(([127, 0, 0, 1], 0))).await?;
        let base_url = format!("http://{}/v1", listener.local_addr()?);
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Ok(Self {
            base_url,
            requests,
            task,
        })
    }

    /// Every model request so far (its JSON body), in order.
    pub fn requests(&self) -> Vec<Value> {
        self.requests.lock().map(|r| r.clone()).unwrap_or_default()
    }
}

/// The text of a message item (`content` as a string or as parts with `text`).
pub fn text_of(item: &Value) -> String {
    text_joined(item, "")
}

/// [`text_of`] with `separator` between the parts.
pub fn text_joined(item: &Value, separator: &str) -> String {
    match &item["content"] {
        Value::String(s) => s.clone(),
        Value::Array(parts) => parts
            .iter()
            .filter_map(|p| p["text"].as_str())
            .collect::<Vec<_>>()
            .join(separator),
        _ => String::new(),
    }
}

/// What the script answers to `request`: the output items.
fn decide(request: &Value, n: usize) -> Vec<Value> {
    let input = request["input"].as_array().cloned().unwrap_or_default();
    let newest = input.iter().rev().find(|i| {
        i["type"] == "function_call_output"
            || i["type"] == "custom_tool_call_output"
            || i["role"] == "user"
    });
    let message = |text: String| {
        json!({"type": "message", "id": format!("msg_{n}"), "role": "assistant",
               "content": [{"type": "output_text", "text": text, "annotations": []}]})
    };
    match newest {
        Some(item)
            if item["type"] == "function_call_output"
                || item["type"] == "custom_tool_call_output" =>
        {
            vec![message("MOCK-DONE".into())]
        }
        Some(item) => {
            let text = text_of(item);
            if let Some((_, rest)) = text.split_once("RUN-PATCH ") {
                let file = rest.split_whitespace().next().unwrap_or("patched.txt");
                let patch =
                    format!("*** Begin Patch\n*** Add File: {file}\n+patched\n*** End Patch\n");
                vec![json!({"type": "custom_tool_call", "id": format!("ctc_{n}"),
                            "call_id": format!("call_{n}"), "name": "apply_patch",
                            "input": patch})]
            } else if let Some((_, rest)) = text.split_once("RUN-SHELL ") {
                let cmd = rest.lines().next().unwrap_or_default().trim();
                vec![json!({"type": "function_call", "id": format!("fc_{n}"),
                            "call_id": format!("call_{n}"), "name": "exec_command",
                            "arguments": json!({"cmd": cmd}).to_string()})]
            } else {
                let tail: String = text
                    .chars()
                    .rev()
                    .take(60)
                    .collect::<Vec<_>>()
                    .into_iter()
                    .rev()
                    .collect();
                vec![message(format!("MOCK-REPLY: {tail}"))]
            }
        }
        None => vec![message("MOCK-REPLY:".into())],
    }
}

fn event(data: &Value) -> String {
    format!(
        "event: {}\ndata: {data}\n\n",
        data["type"].as_str().unwrap_or("")
    )
}

fn handle(requests: &Mutex<Vec<Value>>, body: &[u8]) -> Response {
    let Ok(request) = serde_json::from_slice::<Value>(body) else {
        return (StatusCode::OK, axum::Json(json!({}))).into_response();
    };
    let n = {
        let Ok(mut kept) = requests.lock() else {
            return StatusCode::INTERNAL_SERVER_ERROR.into_response();
        };
        kept.push(request.clone());
        kept.len()
    };
    let id = format!("resp_{n}");
    let mut stream = event(&json!({"type": "response.created", "response": {"id": id}}));
    for (i, item) in decide(&request, n).into_iter().enumerate() {
        stream +=
            &event(&json!({"type": "response.output_item.added", "output_index": i, "item": item}));
        stream +=
            &event(&json!({"type": "response.output_item.done", "output_index": i, "item": item}));
    }
    stream += &event(&json!({"type": "response.completed", "response": {
        "id": id,
        "usage": {"input_tokens": 1, "output_tokens": 1, "total_tokens": 2}}}));
    ([(header::CONTENT_TYPE, "text/event-stream")], stream).into_response()
}
