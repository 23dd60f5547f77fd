//! `repowire mcp`: a stdio MCP server (rmcp) giving an agent its Repowire tools. It talks to
//! the local daemon; it answers `initialize` and `tools/list` even when the daemon is down
//! (tool calls then say how to start it). stdout carries only the protocol; logs go to stderr.
//!
//! Identity: the server acts as the agent session that started it, which the daemon proves
//! from the process tree (this process descends from the agent that ran the session's
//! SessionStart hook: pid and start time) and `TMUX_PANE`. Unproven, outbound tools refuse.

use std::path::PathBuf;
use std::time::Duration;

use rmcp::handler::server::router::tool::ToolRouter;
use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::{CallToolResult, Implementation, ServerCapabilities, ServerConfig};
use rmcp::{ErrorData, ServerHandler, ServiceExt, tool, tool_handler, tool_router};
use serde_json::{Value, json};

use crate::api::{self, LocalSession, Outgoing, Request, SendKind, Sent};

/// The longest `wait_on_ack` may block.
const MAX_WAIT_SECS: u64 = 600;
/// How long `wait_on_ack` blocks by default: below the tool-call timeouts MCP clients commonly
/// apply (60 s), so its answer is not thrown away by the client.
const DEFAULT_WAIT_SECS: u64 = 50;

mod args;
mod results;

pub use args::*;
use results::{describe_error, error_result, sent_result, text_result};

/// The MCP server.
#[derive(Debug, Clone)]
pub struct RepowireMcp {
    socket: PathBuf,
    tmux_pane: Option<String>,
    tool_router: ToolRouter<Self>,
}

impl RepowireMcp {
    /// The names of the tools this server offers (as an agent calls them, without the
    /// `mcp__repowire__` prefix Claude Code adds).
    pub fn tool_names() -> Vec<String> {
        let mut names: Vec<String> = Self::tool_router()
            .list_all()
            .into_iter()
            .map(|t| t.name.to_string())
            .collect();
        names.sort();
        names
    }

    /// "`name` (a, b)" for a tool of this server and parameters of its input schema, or `None`
    /// when the server has no such tool or the tool no such parameter: the one way other text
    /// (the session-start context) names a tool, so it cannot drift from the tool list.
    pub fn signature(name: &str, params: &[&str]) -> Option<String> {
        let tool = Self::tool_router()
            .list_all()
            .into_iter()
            .find(|t| t.name == name)?;
        let properties = tool.input_schema.get("properties")?.as_object()?;
        params
            .iter()
            .all(|p| properties.contains_key(*p))
            .then(|| format!("`{name}` ({})", params.join(", ")))
    }

    /// A server talking to the daemon at `socket`.
    pub fn new(socket: PathBuf, tmux_pane: Option<String>) -> Self {
        Self {
            socket,
            tmux_pane,
            tool_router: Self::tool_router(),
        }
    }

    async fn call(&self, request: Request, timeout: Duration) -> Result<Value, String> {
        api::call_async(&self.socket, &request, timeout)
            .await
            .map_err(describe_error)
    }

    /// [`Self::call`], the answer read as the request's typed reply.
    async fn call_as<T: serde::de::DeserializeOwned>(
        &self,
        request: Request,
        timeout: Duration,
    ) -> Result<T, String> {
        let answer = self.call(request, timeout).await?;
        api::typed(answer).map_err(describe_error)
    }

    /// The session this server acts as (its session id), proven by the daemon.
    async fn me(&self) -> Result<LocalSession, String> {
        self.call_as(
            Request::Whoami {
                tmux_pane: self.tmux_pane.clone(),
            },
            Duration::from_secs(10),
        )
        .await
        .map_err(|e| {
            if e.contains("identity_unproven") {
                format!("Refusing to act: this MCP server cannot prove which agent session it belongs to.\n{e}")
            } else {
                e
            }
        })
    }

    async fn as_me(
        &self,
        build: impl FnOnce(Option<String>) -> Request,
        timeout: Duration,
    ) -> Result<Value, String> {
        let me = self.me().await?;
        self.call(build(Some(me.session_id)), timeout).await
    }

    /// [`Self::as_me`], the answer read as the request's typed reply.
    async fn as_me_typed<T: serde::de::DeserializeOwned>(
        &self,
        build: impl FnOnce(Option<String>) -> Request,
        timeout: Duration,
    ) -> Result<T, String> {
        let answer = self.as_me(build, timeout).await?;
        api::typed(answer).map_err(describe_error)
    }

    async fn send(&self, out: Outgoing) -> Result<Sent, String> {
        self.sent(
            |from| Request::Send(Outgoing { from, ..out }),
            Duration::from_secs(15),
        )
        .await
    }

    /// A sending request (send, ack, answer) as this session, read as its typed reply.
    async fn sent(
        &self,
        build: impl FnOnce(Option<String>) -> Request,
        timeout: Duration,
    ) -> Result<Sent, String> {
        let v = self.as_me(build, timeout).await?;
        api::typed(v).map_err(describe_error)
    }
}

#[tool_router]
impl RepowireMcp {
    #[tool(
        description = "List the peers (other agent sessions) you can talk to: id, name, circle, backend, status, turn state, description, last seen."
    )]
    async fn list_peers(
        &self,
        Parameters(a): Parameters<ListPeersArgs>,
    ) -> Result<CallToolResult, ErrorData> {
        let me = match self.me().await {
            Ok(me) => me,
            Err(e) => return Ok(error_result(e)),
        };
        let peers: Vec<api::ListedPeer> = match self
            .call_as(
                Request::Peers {
                    from: Some(me.session_id.clone()),
                    include_offline: a.show_offline.unwrap_or(false),
                    all_circles: false,
                    circle: a.circle,
                },
                Duration::from_secs(15),
            )
            .await
        {
            Ok(p) => p,
            Err(e) => return Ok(error_result(e)),
        };
        let mine = me.peer_id.as_deref().unwrap_or("");
        let list: Vec<api::ListedPeer> = peers
            .into_iter()
            .filter(|p| a.include_self.unwrap_or(false) || p.peer.peer_id.as_str() != mine)
            .collect();
        let mut text = if list.is_empty() {
            "No peers.".to_owned()
        } else {
            format!(
                "{} peer{}:\n",
                list.len(),
                if list.len() == 1 { "" } else { "s" }
            )
        };
        for p in list.iter().map(|l| &l.peer) {
            text.push_str(&format!(
                "- @{} ({}) circle {}, {}, {} / {}{}\n",
                p.name,
                p.peer_id,
                p.circle,
                p.backend,
                <&str>::from(p.status),
                p.turn_state.as_str(),
                p.description
                    .as_deref()
                    .map(|d| format!(" — {d}"))
                    .unwrap_or_default(),
            ));
        }
        Ok(text_result(text, json!({ "peers": list })))
    }

    #[tool(
        description = "Who you are on Repowire: your display name, peer id, circle, backend and project."
    )]
    async fn whoami(&self) -> Result<CallToolResult, ErrorData> {
        Ok(match self.me().await {
            Ok(me) => text_result(
                format!(
                    "You are @{} (peer id {}) in circle {}; backend {}, project {}.",
                    me.name.as_deref().unwrap_or("-"),
                    me.peer_id.as_deref().unwrap_or("-"),
                    me.circle,
                    me.backend,
                    me.path.as_deref().unwrap_or("-")
                ),
                serde_json::to_value(&me).expect("a typed reply serializes (string keys only)"),
            ),
            Err(e) => error_result(e),
        })
    }

    #[tool(
        description = "Set a short description of what you are working on, shown to peers in list_peers (an empty text clears it)."
    )]
    async fn set_description(
        &self,
        Parameters(a): Parameters<DescriptionArgs>,
    ) -> Result<CallToolResult, ErrorData> {
        let text = a.text;
        Ok(
            match self
                .as_me_typed::<api::Described>(
                    |from| Request::Describe { from, text },
                    Duration::from_secs(15),
                )
                .await
            {
                Ok(v) => text_result("Description updated.".into(), json!(v)),
                Err(e) => error_result(e),
            },
        )
    }

    #[tool(
        description = "Ask a peer a question. Returns a correlation id at once; the peer answers with ack, or, when you give a typed `question` (`choice` with options, or `text`), with answer. Use wait_on_ack to get the reply in this turn, or it arrives later as a message."
    )]
    async fn ask(&self, Parameters(a): Parameters<AskArgs>) -> Result<CallToolResult, ErrorData> {
        let question = match a
            .question
            .as_ref()
            .map(QuestionArgs::to_question)
            .transpose()
        {
            Ok(q) => q,
            Err(e) => return Ok(error_result(e)),
        };
        let out = Outgoing {
            from: None,
            kind: SendKind::Ask,
            to: Some(a.peer_name.clone()),
            circle: a.circle,
            text: a.query,
            reply_to: a.reply_to,
            question,
        };
        Ok(match self.send(out).await {
            Ok(sent) => sent_result(&format!("Ask to {}", a.peer_name), &sent),
            Err(e) => error_result(e),
        })
    }

    #[tool(
        description = "Wait (in this turn) for the reply to an ask you sent, up to timeout_seconds. A reply returned here is not delivered again as a message."
    )]
    async fn wait_on_ack(
        &self,
        Parameters(a): Parameters<WaitArgs>,
        cancelled: tokio_util::sync::CancellationToken,
    ) -> Result<CallToolResult, ErrorData> {
        let me = match self.me().await {
            Ok(me) => me,
            Err(e) => return Ok(error_result(e)),
        };
        let secs = a
            .timeout_seconds
            .unwrap_or(DEFAULT_WAIT_SECS)
            .clamp(1, MAX_WAIT_SECS);
        // A cancelled call drops the daemon connection: the daemon then hands nothing over,
        // and the reply stays queued for the agent's next turn.
        let result = tokio::select! {
            r = self.call_as::<api::WaitOutcome>(
                Request::WaitReply {
                    from: Some(me.session_id.clone()),
                    correlation_id: a.correlation_id.clone(),
                    timeout_ms: secs * 1000,
                },
                Duration::from_secs(secs + 10),
            ) => r,
            _ = cancelled.cancelled() => Err("cancelled; the reply (if any) will arrive as a message".into()),
        };
        Ok(match result {
            Ok(v) => text_result(
                crate::replies::wait_outcome(&a.correlation_id, &v, secs),
                json!(v),
            ),
            Err(e) => error_result(e),
        })
    }

    #[tool(
        description = "Close an ask you received. With message, the reply is delivered to the asker; without, the ask is just closed."
    )]
    async fn ack(&self, Parameters(a): Parameters<AckArgs>) -> Result<CallToolResult, ErrorData> {
        let (cid, reply) = (a.correlation_id.clone(), a.message);
        Ok(
            match self
                .sent(
                    |from| Request::Ack {
                        from,
                        correlation_id: cid,
                        reply,
                    },
                    Duration::from_secs(15),
                )
                .await
            {
                Ok(sent) => sent_result(&format!("Ack of {}", a.correlation_id), &sent),
                Err(e) => error_result(e),
            },
        )
    }

    #[tool(
        description = "Answer a structured question you received (choice, text or tool permission) with an option id and/or text."
    )]
    async fn answer(
        &self,
        Parameters(a): Parameters<AnswerArgs>,
    ) -> Result<CallToolResult, ErrorData> {
        let cid = a.correlation_id.clone();
        Ok(
            match self
                .sent(
                    |from| Request::Answer {
                        from,
                        correlation_id: cid,
                        option_id: a.option_id,
                        text: a.text,
                    },
                    Duration::from_secs(15),
                )
                .await
            {
                Ok(sent) => sent_result(&format!("Answer to {}", a.correlation_id), &sent),
                Err(e) => error_result(e),
            },
        )
    }

    #[tool(description = "Send a fire-and-forget message to a peer. Returns its notif-… id.")]
    async fn notify_peer(
        &self,
        Parameters(a): Parameters<NotifyArgs>,
    ) -> Result<CallToolResult, ErrorData> {
        let out = Outgoing {
            from: None,
            kind: SendKind::Notify,
            to: Some(a.peer_name.clone()),
            circle: a.circle,
            text: a.message,
            reply_to: None,
            question: None,
        };
        Ok(match self.send(out).await {
            Ok(sent) => sent_result(&format!("Notification to {}", a.peer_name), &sent),
            Err(e) => error_result(e),
        })
    }

    #[tool(
        description = "Open a direct conversation with one or more peers: they get your message, and from then on what each of you says at the end of a turn reaches the others by itself, headed `[name] (n):` (no tool call per message). Returns the conversation's cv-… id."
    )]
    async fn start_conversation(
        &self,
        Parameters(a): Parameters<StartConversationArgs>,
    ) -> Result<CallToolResult, ErrorData> {
        let who = a.peer_names.join(", ");
        let answer: Result<api::ConversationStarted, String> = async {
            let v = self
                .as_me(
                    |from| Request::StartConversation {
                        from,
                        peers: a.peer_names,
                        circle: a.circle,
                        text: a.message,
                    },
                    Duration::from_secs(15),
                )
                .await?;
            api::typed(v).map_err(describe_error)
        }
        .await;
        Ok(match answer {
            Ok(started) => results::conversation_result(&who, &started),
            Err(e) => error_result(e),
        })
    }

    #[tool(
        description = "End a direct conversation you take part in: the others are told, and nothing more is relayed in it."
    )]
    async fn end_conversation(
        &self,
        Parameters(a): Parameters<EndConversationArgs>,
    ) -> Result<CallToolResult, ErrorData> {
        let what = format!("End of {}", a.conversation_id);
        Ok(
            match self
                .sent(
                    |from| Request::EndConversation {
                        from,
                        conversation_id: a.conversation_id,
                        reason: a.reason,
                    },
                    Duration::from_secs(15),
                )
                .await
            {
                Ok(sent) => sent_result(&what, &sent),
                Err(e) => error_result(e),
            },
        )
    }

    #[tool(description = "Send a message to every online peer of your circle.")]
    async fn broadcast(
        &self,
        Parameters(a): Parameters<BroadcastArgs>,
    ) -> Result<CallToolResult, ErrorData> {
        let out = Outgoing {
            from: None,
            kind: SendKind::Broadcast,
            to: None,
            circle: None,
            text: a.message,
            reply_to: None,
            question: None,
        };
        Ok(match self.send(out).await {
            Ok(sent) => sent_result("Broadcast", &sent),
            Err(e) => error_result(e),
        })
    }

    #[tool(
        description = "Read a text file from a peer's project, if that peer's daemon shares the project (off by default). The path is relative to the peer's project root; no `..`, no dotfiles, size-capped."
    )]
    async fn read_peer_file(
        &self,
        Parameters(a): Parameters<ReadFileArgs>,
    ) -> Result<CallToolResult, ErrorData> {
        let (peer, path) = (a.peer_name, a.path);
        Ok(
            match self
                .as_me_typed::<api::FileRead>(
                    |from| Request::ReadFile { from, peer, path },
                    Duration::from_secs(15),
                )
                .await
            {
                Ok(v) => text_result(v.content.clone(), json!(v)),
                Err(e) => error_result(e),
            },
        )
    }

    #[tool(
        description = "Write a key of the shared state of your circle (a small key-value store every peer of the circle can read, kept by the relay). An empty value deletes the key."
    )]
    async fn write_shared_state(
        &self,
        Parameters(a): Parameters<StateWriteArgs>,
    ) -> Result<CallToolResult, ErrorData> {
        let key = a.key.clone();
        let value = Some(a.value).filter(|v| !v.is_empty());
        let deleting = value.is_none();
        Ok(
            match self
                .as_me_typed::<api::StateWritten>(
                    |from| Request::StateSet { from, key, value },
                    Duration::from_secs(15),
                )
                .await
            {
                Ok(v) if deleting => text_result(format!("`{}` is not set now.", a.key), json!(v)),
                Ok(v) => text_result(format!("Stored `{}`.", a.key), json!(v)),
                Err(e) => error_result(e),
            },
        )
    }

    #[tool(
        description = "Read the shared state of your circle: one key, or every key with its value, who wrote it and when."
    )]
    async fn read_shared_state(
        &self,
        Parameters(a): Parameters<StateReadArgs>,
    ) -> Result<CallToolResult, ErrorData> {
        let key = a.key.clone();
        Ok(
            match self
                .as_me_typed::<api::CircleState>(
                    |from| Request::StateGet { from, key },
                    Duration::from_secs(15),
                )
                .await
            {
                Ok(v) => {
                    let mut text = if v.entries.is_empty() {
                        match &a.key {
                            Some(k) => format!("`{k}` is not set in circle {}.", v.circle),
                            None => {
                                format!("The shared state of circle {} is empty.", v.circle)
                            }
                        }
                    } else {
                        String::new()
                    };
                    for e in &v.entries {
                        text.push_str(&format!("{} = {}  (by {})\n", e.key, e.value, e.updated_by));
                    }
                    text_result(text, json!(v))
                }
                Err(e) => error_result(e),
            },
        )
    }
}

#[tool_handler(router = self.tool_router)]
impl ServerHandler for RepowireMcp {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new("repowire", env!("CARGO_PKG_VERSION")))
            .with_instructions(
                "Repowire connects you with other agent sessions (peers). list_peers shows who is \
             there; ask sends a question (close asks you receive with ack); notify_peer and \
             broadcast send messages; start_conversation opens a direct conversation in which \
             each participant's turns reach the others by themselves. Messages for you arrive in \
             your context at turn boundaries.",
            )
    }
}

/// Runs the server on stdin/stdout until the client disconnects.
pub async fn serve(socket: PathBuf, tmux_pane: Option<String>) -> anyhow::Result<()> {
    let server = RepowireMcp::new(socket, tmux_pane)
        .serve(rmcp::transport::stdio())
        .await?;
    server.waiting().await?;
    Ok(())
}
