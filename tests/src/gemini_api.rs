//! A small stand-in for the Gemini API (`POST /v1beta/models/<model>:streamGenerateContent`
//! and `:generateContent`), so that the real Gemini CLI runs offline
//! (`GOOGLE_GEMINI_BASE_URL=http://127.0.0.1:PORT`). It keeps every request and answers by a
//! short script, reading the newest content of the request (the whole history each time):
//!
//! - a tool result (`functionResponse`) → the text `MOCK-DONE`;
//! - a text part holding `RUN-SHELL <command>` → a call of the CLI's shell tool,
//!   `run_shell_command` with `{"command": "<command>"}` (the rest of that line);
//! - anything else → the text `MOCK-REPLY: ` and the end of the newest text.
//!
//! Each answer is one chunk (the CLI's AfterAgent `prompt_response` garbles replies streamed in
//! several: docs/agents/gemini-cli.md), unless the newest text holds `MOCK-CHUNKS`: then a text
//! answer is streamed in two.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use axum::Router;
use axum::body::Bytes;
use axum::http::{Uri, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

/// The running mock; stops when dropped.
pub struct GeminiMock {
    /// `http://127.0.0.1:PORT`, for `GOOGLE_GEMINI_BASE_URL`.
    pub url: String,
    requests: Arc<Mutex<Vec<Value>>>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for GeminiMock {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl GeminiMock {
    /// Serves on a free loopback port.
    pub async fn start() -> anyhow::Result<Self> {
        let requests = Arc::new(Mutex::new(Vec::new()));
        let kept = requests.clone();
        let app = Router::new().fallback(move |uri: Uri, body: Bytes| {
            let kept = kept.clone();
            async move { handle(&kept, &uri, &body) }
        });
        let listener = tokio::net::TcpListener::bind(SocketAddr::from(([127, 0, 0, 1], 0))).await?;
        let url = format!("http://{}", listener.local_addr()?);
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Ok(Self {
            url,
            requests,
            task,
        })
    }

    /// Every model request so far (its JSON body), in order.
    pub fn requests(&self) -> Vec<Value> {
        self.requests.lock().map(|r| r.clone()).unwrap_or_default()
    }
}

/// The text parts of a content, in order.
pub fn texts(content: &Value) -> Vec<String> {
    content["parts"]
        .as_array()
        .map(|parts| {
            parts
                .iter()
                .filter_map(|p| p["text"].as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

fn decide(request: &Value, n: usize) -> Value {
    let newest = request["contents"]
        .as_array()
        .and_then(|c| c.last())
        .cloned()
        .unwrap_or_default();
    let answered = newest["parts"]
        .as_array()
        .is_some_and(|parts| parts.iter().any(|p| p.get("functionResponse").is_some()));
    if answered {
        return json!({"text": "MOCK-DONE"});
    }
    let parts = texts(&newest);
    if let Some((_, rest)) = parts.iter().find_map(|t| t.split_once("RUN-SHELL ")) {
        let command = rest.lines().next().unwrap_or_default().trim();
        return json!({"functionCall": {"id": format!("call_{n}"), "name": "run_shell_command",
                                       "args": {"command": command, "description": "test"}}});
    }
    let last = parts.last().cloned().unwrap_or_default();
    let tail: String = last
        .chars()
        .rev()
        .take(60)
        .collect::<Vec<_>>()
        .into_iter()
        .rev()
        .map(|c| if c == '\n' { ' ' } else { c })
        .collect();
    json!({"text": format!("MOCK-REPLY: {tail}")})
}

fn handle(requests: &Mutex<Vec<Value>>, uri: &Uri, body: &[u8]) -> Response {
    let request = serde_json::from_slice::<Value>(body).unwrap_or_default();
    let n = match requests.lock() {
        Ok(mut kept) => {
            kept.push(request.clone());
            kept.len()
        }
        Err(_) => 0,
    };
    let answer = json!({
        "candidates": [{"content": {"role": "model", "parts": [decide(&request, n)]},
                        "finishReason": "STOP", "index": 0}],
        "usageMetadata": {"promptTokenCount": 1, "candidatesTokenCount": 1, "totalTokenCount": 2},
        "modelVersion": "mock",
    });
    if uri.path().ends_with(":streamGenerateContent") {
        let chunks = match answer["candidates"][0]["content"]["parts"][0]["text"].as_str() {
            Some(text) if request.to_string().contains("MOCK-CHUNKS") => {
                let mut half = text.len() / 2;
                while !text.is_char_boundary(half) {
                    half -= 1;
                }
                let mut first = answer.clone();
                first["candidates"][0]["content"]["parts"][0]["text"] = json!(&text[..half]);
                first["candidates"][0]
                    .as_object_mut()
                    .map(|c| c.remove("finishReason"));
                let mut second = answer.clone();
                second["candidates"][0]["content"]["parts"][0]["text"] = json!(&text[half..]);
                format!("data: {first}\r\n\r\ndata: {second}\r\n\r\n")
            }
            _ => format!("data: {answer}\r\n\r\n"),
        };
        ([(header::CONTENT_TYPE, "text/event-stream")], chunks).into_response()
    } else {
        axum::Json(answer).into_response()
    }
}
