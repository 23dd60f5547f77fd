//! A small stand-in for Anthropic's Messages API, so that the real Claude Code CLI runs offline
//! (`ANTHROPIC_BASE_URL=http://127.0.0.1:PORT`), and for OpenAI's Responses API (`POST
//! /v1/responses`), so that the real Codex CLI does too ([`responses`]: each request is
//! translated to the Messages shape, the same script answers, and the answer is translated
//! back), Google's Gemini API ([`gemini`]) and OpenAI's Chat Completions ([`chat`]: OpenCode).
//! It plays one scripted conversation between two
//! agents through our MCP tools and records when each step reached it:
//!
//! - a prompt containing `BENCH-START <peer> <turns>` → call `ask` to `<peer>` with
//!   `BENCH turn 1/<turns>`;
//! - a turn whose prompt or hook context holds `BENCH turn N/T` and an `ask-…` id → call `ack`
//!   with `BENCH reply N/T from <me>` (`<me>` is the working directory's name, our peer name);
//! - a turn holding `BENCH reply N/T from <peer>` → ask `BENCH turn N+1/T`, or stop after T;
//! - a tool result → end the turn; anything else → end the turn with a short text;
//! - for the facts tests: `MOCK-SAY <word>` → end the turn saying `<word>`; `RUN-SHELL <command>`
//!   → call `Bash` with the command (to the end of its line).
//!
//! When a tool is only offered through `ToolSearch` (Claude Code defers MCP tools when it
//! decides to), the model first selects it, as a real model would.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use axum::Router;
use axum::body::Bytes;
use axum::http::{HeaderMap, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

mod chat;
mod converse;
mod gemini;
mod responses;

/// A step of the conversation as the model API saw it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    /// The asker was told to start.
    Start,
    /// The model answered with an `ask` call for turn `n` (recorded when the answer was sent).
    AskCalled(u32),
    /// The asker's request carrying the `ask` tool's result for turn `n`.
    AskReturned(u32),
    /// The answerer's first request that holds the ask of turn `n`.
    AskSeen(u32),
    /// The model answered with an `ack` call for turn `n`.
    AckCalled(u32),
    /// The answerer's request carrying the `ack` tool's result for turn `n`.
    AckReturned(u32),
    /// The asker's first request that holds the reply of turn `n`.
    ReplySeen(u32),
    /// The asker got the last reply and ended the conversation.
    Finished,
    /// A direct conversation's turn `n` (`CONV n/T`) was said: the opening (1) when the
    /// `start_conversation` call was answered, a later one when the turn's text was.
    Said(u32),
    /// The model answered with an `end_conversation` call.
    EndedConversation,
    /// Our MCP server's tools were not offered yet (it connects in the background).
    NotReady,
    /// A tool result for another tool, or a tool-search step.
    Tool(String),
    /// A request the script has no rule for (answered with a short text).
    Other(String),
}

/// One recorded step.
#[derive(Debug, Clone)]
pub struct Seen {
    /// When it happened.
    pub at: Instant,
    /// Claude Code's session id (`X-Claude-Code-Session-Id`), empty when absent.
    pub session: String,
    /// What it was.
    pub step: Step,
    /// For a tool call: the correlation id it names (`ack`), else empty.
    pub detail: String,
}

#[derive(Default)]
struct State {
    seen: Vec<Seen>,
    next_id: u64,
    /// Every model request's body, in order.
    requests: Vec<Value>,
}

/// The running mock; stops when dropped.
pub struct MockModel {
    /// `http://127.0.0.1:PORT`, for `ANTHROPIC_BASE_URL`.
    pub url: String,
    state: Arc<Mutex<State>>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for MockModel {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl MockModel {
    /// Serves on a free loopback port.
    pub async fn start() -> anyhow::Result<Self> {
        let state = Arc::new(Mutex::new(State::default()));
        let shared = state.clone();
        let app = Router::new().fallback(move |uri: Uri, headers: HeaderMap, body: Bytes| {
            let state = shared.clone();
            async move {
                if let Some(wait) =
                    chat::delay(&body).filter(|_| uri.path().ends_with("/completions"))
                {
                    tokio::time::sleep(wait).await;
                }
                handle(&state, &uri, &headers, &body)
            }
        });
        let listener = tokio::net::TcpListener::bind(SocketAddr::from(([127, 0, 0, 1], 0))).await?;
        let url = format!("http://{}", listener.local_addr()?);
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Ok(Self { url, state, task })
    }

    /// Every model request so far (the body as the CLI sent it), in order.
    pub fn requests(&self) -> Vec<Value> {
        self.state
            .lock()
            .map(|s| s.requests.clone())
            .unwrap_or_default()
    }

    /// Every step so far, in order.
    pub fn seen(&self) -> Vec<Seen> {
        self.state
            .lock()
            .map(|s| s.seen.clone())
            .unwrap_or_default()
    }
}

fn handle(state: &Mutex<State>, uri: &Uri, headers: &HeaderMap, body: &[u8]) -> Response {
    let Ok(request) = serde_json::from_slice::<Value>(body) else {
        // GETs and anything else that is not a model call: an empty JSON object.
        return (StatusCode::OK, axum::Json(json!({}))).into_response();
    };
    if let Ok(mut state) = state.lock() {
        state.requests.push(request.clone());
    }
    if uri.path().ends_with("/chat/completions") {
        return chat::handle(state, headers, &request);
    }
    if uri.path().ends_with("/responses") {
        return responses::handle(state, headers, &request);
    }
    if uri.path().contains(":streamGenerateContent") || uri.path().contains(":generateContent") {
        return gemini::handle(state, uri.path().contains(":stream"), &request);
    }
    if request.get("messages").is_none() {
        // count_tokens and the like.
        return axum::Json(json!({"input_tokens": 1})).into_response();
    }
    let session = headers
        .get("x-claude-code-session-id")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_owned();
    let Ok(mut state) = state.lock() else {
        return StatusCode::INTERNAL_SERVER_ERROR.into_response();
    };
    let (id, reply) = state.answer(&session, &request);
    let (content, stop_reason) = match &reply {
        Reply::Text(t) => (json!({"type": "text", "text": t}), "end_turn"),
        Reply::NotReady => (json!({"type": "text", "text": NOT_READY}), "end_turn"),
        Reply::Tool { name, input, .. } => (
            json!({"type": "tool_use", "id": format!("toolu_mock_{id}"), "name": name, "input": input}),
            "tool_use",
        ),
    };
    let response = if request["stream"].as_bool() == Some(true) {
        stream_body(&request, id, &content, stop_reason)
    } else {
        axum::Json(json!({
            "id": format!("msg_mock_{id}"), "type": "message", "role": "assistant",
            "model": request["model"], "content": [content], "stop_reason": stop_reason,
            "stop_sequence": null, "usage": {"input_tokens": 1, "output_tokens": 1}
        }))
        .into_response()
    };
    state.called(&session, reply);
    response
}

/// What the model says when our tools are not offered yet.
const NOT_READY: &str = "the repowire tools are not there yet";

impl State {
    /// Runs the script on `request` (Anthropic's Messages shape; other wire formats are
    /// translated to it first) and records the steps it saw: the answer's id and the reply.
    fn answer(&mut self, session: &str, request: &Value) -> (u64, Reply) {
        let (steps, reply) = decide(request);
        let now = Instant::now();
        for step in steps {
            self.seen.push(Seen {
                at: now,
                session: session.to_owned(),
                step,
                detail: String::new(),
            });
        }
        self.next_id += 1;
        (self.next_id, reply)
    }

    /// Records the step of a tool call (or of tools not offered yet) once its answer is built.
    fn called(&mut self, session: &str, reply: Reply) {
        let (step, detail) = match reply {
            Reply::Text(_) => return,
            Reply::NotReady => (Step::NotReady, String::new()),
            Reply::Tool { input, step, .. } => match step {
                Some(step) => (
                    step,
                    input["correlation_id"].as_str().unwrap_or("").to_owned(),
                ),
                None => return,
            },
        };
        self.seen.push(Seen {
            at: Instant::now(),
            session: session.to_owned(),
            step,
            detail,
        });
    }
}

/// A whole Server-Sent-Events answer, as the streaming Messages API sends it.
fn stream_body(request: &Value, id: u64, content: &Value, stop_reason: &str) -> Response {
    let mut start = content.clone();
    let delta = if content["type"] == "tool_use" {
        start["input"] = json!({});
        json!({"type": "input_json_delta", "partial_json": content["input"].to_string()})
    } else {
        start["text"] = json!("");
        json!({"type": "text_delta", "text": content["text"]})
    };
    let events = [
        (
            "message_start",
            json!({"type": "message_start", "message": {
                "id": format!("msg_mock_{id}"), "type": "message", "role": "assistant",
                "model": request["model"], "content": [], "stop_reason": null,
                "stop_sequence": null, "usage": {"input_tokens": 1, "output_tokens": 1}}}),
        ),
        (
            "content_block_start",
            json!({"type": "content_block_start", "index": 0, "content_block": start}),
        ),
        (
            "content_block_delta",
            json!({"type": "content_block_delta", "index": 0, "delta": delta}),
        ),
        (
            "content_block_stop",
            json!({"type": "content_block_stop", "index": 0}),
        ),
        (
            "message_delta",
            json!({"type": "message_delta", "delta": {"stop_reason": stop_reason,
                "stop_sequence": null}, "usage": {"output_tokens": 1}}),
        ),
        ("message_stop", json!({"type": "message_stop"})),
    ];
    let body: String = events
        .iter()
        .map(|(name, data)| format!("event: {name}\ndata: {data}\n\n"))
        .collect();
    ([(header::CONTENT_TYPE, "text/event-stream")], body).into_response()
}

enum Reply {
    Text(String),
    NotReady,
    Tool {
        name: String,
        input: Value,
        step: Option<Step>,
    },
}

fn blocks(message: &Value) -> Vec<Value> {
    match &message["content"] {
        Value::String(s) => vec![json!({"type": "text", "text": s})],
        Value::Array(a) => a.clone(),
        _ => Vec::new(),
    }
}

/// All text of a user message, tool results excluded.
fn text_of(message: &Value) -> String {
    blocks(message)
        .iter()
        .filter(|b| b["type"] == "text")
        .filter_map(|b| b["text"].as_str())
        .collect::<Vec<_>>()
        .join("\n")
}

/// The `(name, input)` of the tool call a tool result answers.
fn tool_call(messages: &[Value], tool_use_id: &str) -> Option<(String, Value)> {
    messages.iter().rev().find_map(|m| {
        blocks(m).into_iter().find_map(|b| {
            (b["type"] == "tool_use" && b["id"] == tool_use_id).then(|| {
                (
                    b["name"].as_str().unwrap_or("").to_owned(),
                    b["input"].clone(),
                )
            })
        })
    })
}

/// `N` and `T` after `marker` (`marker N/T`), the last occurrence.
fn turn_after(text: &str, marker: &str) -> Option<(u32, u32, String)> {
    let at = text.rfind(marker)?;
    let rest = &text[at + marker.len()..];
    let fraction: String = rest
        .chars()
        .take_while(|c| c.is_ascii_digit() || *c == '/')
        .collect();
    let (n, t) = fraction.split_once('/')?;
    let tail = rest[fraction.len()..].to_owned();
    Some((n.parse().ok()?, t.parse().ok()?, tail))
}

/// The last `#ask-…` correlation id in `text`.
fn correlation_id(text: &str) -> Option<String> {
    let at = text.rfind("#ask-")? + 1;
    let id: String = text[at..]
        .chars()
        .take_while(|c| c.is_ascii_alphanumeric() || *c == '-')
        .collect();
    (id.len() > 4).then_some(id)
}

/// The working directory's last component, from Claude Code's environment section (or
/// Codex's `<cwd>`).
fn my_name(request: &Value) -> String {
    let all = request.to_string();
    ["Primary working directory: ", "<cwd>"]
        .iter()
        .find_map(|marker| {
            all.find(marker).map(|at| {
                all[at + marker.len()..]
                    .chars()
                    .take_while(|c| !c.is_whitespace() && !matches!(c, '\\' | '"' | '<'))
                    .collect::<String>()
            })
        })
        .and_then(|p| p.rsplit('/').next().map(str::to_owned))
        .unwrap_or_default()
}

fn offered(request: &Value, tool: &str) -> bool {
    request["tools"]
        .as_array()
        .is_some_and(|t| t.iter().any(|x| x["name"] == tool))
}

/// A call of our server's `tool`, through `ToolSearch` first when it is deferred.
fn call(request: &Value, tool: &str, input: Value, step: Step) -> Reply {
    let name = format!("mcp__repowire__{tool}");
    if !offered(request, &name) && !request["messages"].to_string().contains(&name) {
        return Reply::NotReady;
    }
    if !offered(request, &name) && offered(request, "ToolSearch") {
        return Reply::Tool {
            input: json!({"query": format!("select:{name}"), "max_results": 1}),
            name: "ToolSearch".into(),
            step: Some(Step::Tool(format!("ToolSearch {tool}"))),
        };
    }
    Reply::Tool {
        name,
        input,
        step: Some(step),
    }
}

fn decide(request: &Value) -> (Vec<Step>, Reply) {
    let messages: Vec<Value> = request["messages"].as_array().cloned().unwrap_or_default();
    // This turn's input: everything after the model's last answer (the prompt, hook context
    // and tool results, as user or system messages).
    let since = messages
        .iter()
        .rposition(|m| m["role"] == "assistant")
        .map_or(0, |i| i + 1);
    let tail = &messages[since..];
    // A tool result ends the turn, unless it was the tool search before our real call.
    let mut searched = false;
    if let Some(result) = tail
        .iter()
        .flat_map(blocks)
        .find(|b| b["type"] == "tool_result")
    {
        let (name, input) =
            tool_call(&messages, result["tool_use_id"].as_str().unwrap_or("")).unwrap_or_default();
        let step = match name.as_str() {
            "mcp__repowire__ask" => {
                turn_after(input["query"].as_str().unwrap_or(""), "BENCH turn ")
                    .map(|(n, _, _)| Step::AskReturned(n))
            }
            "mcp__repowire__ack" => {
                turn_after(input["message"].as_str().unwrap_or(""), "BENCH reply ")
                    .map(|(n, _, _)| Step::AckReturned(n))
            }
            "ToolSearch" => {
                searched = true;
                None
            }
            _ => None,
        };
        if !searched {
            let step = step.unwrap_or(Step::Tool(name));
            return (vec![step], Reply::Text("done".into()));
        }
    }
    // After a tool search, the instruction is the latest text that holds one.
    let text = if searched {
        messages
            .iter()
            .rev()
            .filter(|m| m["role"] != "assistant")
            .map(text_of)
            .find(|t| t.contains("BENCH") || converse::is_instruction(t))
            .unwrap_or_default()
    } else {
        tail.iter().map(text_of).collect::<Vec<_>>().join("\n")
    };
    if let Some(conversing) = converse::decide(request, &text, searched) {
        return conversing;
    }
    let mut steps = Vec::new();
    let reply = if let Some((_, rest)) = text.rsplit_once("MOCK-SAY ") {
        // The facts tests' turn with a known final text.
        let said = rest.split_whitespace().next().unwrap_or("").to_owned();
        steps.push(Step::Other(format!("say {said}")));
        Reply::Text(said)
    } else if let Some((_, rest)) = text.rsplit_once("RUN-SHELL ") {
        // The facts tests' shell call (Claude Code's Bash tool).
        let command = rest.lines().next().unwrap_or("").to_owned();
        Reply::Tool {
            name: "Bash".into(),
            input: json!({"command": command, "description": "run the command"}),
            step: Some(Step::Tool("Bash".into())),
        }
    } else if let Some((_, rest)) = text.rsplit_once("BENCH-START ") {
        let mut words = rest.split_whitespace();
        let peer = words.next().unwrap_or("").to_owned();
        let turns: u32 = words.next().and_then(|w| w.parse().ok()).unwrap_or(1);
        if !searched {
            steps.push(Step::Start);
        }
        ask(request, &peer, 1, turns)
    } else if let Some((n, t, tail)) = turn_after(&text, "BENCH reply ") {
        if !searched {
            steps.push(Step::ReplySeen(n));
        }
        let peer = tail
            .trim_start()
            .strip_prefix("from ")
            .and_then(|r| r.split_whitespace().next())
            .unwrap_or("")
            .trim_matches(|c: char| !c.is_ascii_alphanumeric() && c != '-' && c != '_')
            .to_owned();
        if n >= t {
            steps.push(Step::Finished);
            Reply::Text("all turns done".into())
        } else {
            ask(request, &peer, n + 1, t)
        }
    } else if let Some((n, t, _)) = turn_after(&text, "BENCH turn ") {
        if !searched {
            steps.push(Step::AskSeen(n));
        }
        // The id in the header of the message that holds this turn (reminders name others).
        let before = &text[..text.rfind("BENCH turn ").unwrap_or(0)];
        match correlation_id(before) {
            Some(id) => call(
                request,
                "ack",
                json!({"correlation_id": id,
                       "message": format!("BENCH reply {n}/{t} from {}", my_name(request))}),
                Step::AckCalled(n),
            ),
            None => {
                steps.push(Step::Other(format!("turn {n} without an ask id")));
                Reply::Text("no ask id".into())
            }
        }
    } else {
        steps.push(Step::Other(text.chars().take(120).collect()));
        Reply::Text("nothing to do".into())
    };
    (steps, reply)
}

fn ask(request: &Value, peer: &str, n: u32, turns: u32) -> Reply {
    call(
        request,
        "ask",
        json!({"peer_name": peer, "query": format!("BENCH turn {n}/{turns}")}),
        Step::AskCalled(n),
    )
}

#[cfg(test)]
mod tests;
