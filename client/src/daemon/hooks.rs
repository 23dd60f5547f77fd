//! Agent runtime hooks (Claude Code's documented events). Each returns what the event allows:
//! context for SessionStart and UserPromptSubmit, a `block` decision for Stop, nothing
//! otherwise. Hook output is the native, keystroke-free way to hand an agent its messages.

use std::sync::Arc;

use repowire_protocol::{Message, MessageKind, ReceiptState, TurnState};
use serde_json::{Value, json};

use super::store::{InboxRow, SessionRow, now_ms};
use super::{Daemon, ops};
use crate::api::ApiError;
use crate::sanitize;

/// What a hook prints on stdout (nothing when `None`).
pub type HookOutput = Option<Value>;

/// Facts the hook command passes along besides the payload.
pub struct HookCall<'a> {
    /// Event name (`session-start` …).
    pub event: &'a str,
    /// The runtime's JSON.
    pub payload: &'a Value,
    /// `TMUX`.
    pub tmux: Option<&'a str>,
    /// `TMUX_PANE`.
    pub tmux_pane: Option<&'a str>,
    /// The hook process (from the socket's credentials).
    pub hook_pid: Option<u32>,
}

fn field<'a>(payload: &'a Value, name: &str) -> Option<&'a str> {
    payload.get(name).and_then(Value::as_str)
}

impl Daemon {
    /// Handles one hook call.
    pub async fn hook(self: &Arc<Self>, call: HookCall<'_>) -> Result<HookOutput, ApiError> {
        let session_id = field(call.payload, "session_id")
            .filter(|s| !s.is_empty() && s.len() <= 128)
            .ok_or_else(|| ApiError::new("invalid_request", "hook payload has no session_id"))?
            .to_owned();
        match call.event {
            "session-start" => self.session_start(&session_id, &call).await.map(Some),
            "prompt-submit" => {
                let session = self.known_session(&session_id, &call).await?;
                self.prompt_seen(&session_id);
                self.turn(&session, TurnState::Working).await?;
                let text = self.hand_over(&session, true).await?;
                Ok(text.map(|t| context("UserPromptSubmit", &t)))
            }
            "stop" => {
                let session = self.known_session(&session_id, &call).await?;
                self.turn(&session, TurnState::Idle).await?;
                let continuing = call
                    .payload
                    .get("stop_hook_active")
                    .and_then(Value::as_bool)
                    .unwrap_or(false);
                if !continuing && let Some(text) = self.hand_over(&session, false).await? {
                    return Ok(Some(json!({ "decision": "block", "reason": text })));
                }
                if let Some(peer) = &session.peer_id {
                    self.clone().maybe_wake(peer).await;
                }
                Ok(None)
            }
            "notification" => {
                let session = self.known_session(&session_id, &call).await?;
                if field(call.payload, "notification_type") == Some("idle_prompt") {
                    self.turn(&session, TurnState::Idle).await?;
                    if let Some(peer) = &session.peer_id {
                        self.clone().maybe_wake(peer).await;
                    }
                }
                Ok(None)
            }
            "session-end" => {
                if let Some(session) = self
                    .store
                    .session(&session_id)
                    .await
                    .map_err(ops::store_error)?
                {
                    self.end_session(&session).await?;
                }
                Ok(None)
            }
            "pre-tool-use" => Ok(None),
            other => Err(ApiError::new(
                "invalid_request",
                format!("unknown hook event `{other}`"),
            )),
        }
    }

    /// The session, registering it first if the daemon has not seen it (the agent started
    /// before the daemon, or its SessionStart hook did not reach us).
    async fn known_session(
        &self,
        session_id: &str,
        call: &HookCall<'_>,
    ) -> Result<SessionRow, ApiError> {
        match self
            .store
            .session(session_id)
            .await
            .map_err(ops::store_error)?
        {
            Some(s) if s.active => Ok(s),
            _ => self.adopt(session_id, call).await,
        }
    }

    /// Records a runtime session from a hook and registers its peer.
    async fn adopt(&self, session_id: &str, call: &HookCall<'_>) -> Result<SessionRow, ApiError> {
        let agent_pid = call.hook_pid.and_then(crate::procinfo::agent_of_hook);
        let mut existing = self
            .store
            .session(session_id)
            .await
            .map_err(ops::store_error)?;
        if existing.is_none()
            && let Some(pid) = agent_pid
            && let Some(linked) = self
                .store
                .session_of_agent(i64::from(pid), session_id)
                .await
                .map_err(ops::store_error)?
        {
            // The same agent process, registered earlier by `repowire link`: its hooks now
            // name the runtime's own session id, and the peer carries over.
            self.store
                .delete_session(&linked.session_id)
                .await
                .map_err(ops::store_error)?;
            existing = Some(linked);
        }
        let row = SessionRow {
            session_id: session_id.to_owned(),
            backend: "claude-code".into(),
            role: existing.as_ref().map_or("agent".into(), |e| e.role.clone()),
            circle: existing
                .as_ref()
                .map_or(self.settings.circle.clone(), |e| e.circle.clone()),
            path: field(call.payload, "cwd").map(str::to_owned),
            pane: call
                .tmux_pane
                .filter(|p| p.starts_with('%'))
                .map(str::to_owned),
            tmux_socket: call.tmux.and_then(crate::tmux::socket_of),
            agent_pid: agent_pid.map(i64::from),
            transcript: field(call.payload, "transcript_path").map(str::to_owned),
            // A resumed session keeps its peer id: the relay honours the reclaim only if
            // backend and path still match.
            peer_id: existing.as_ref().and_then(|e| e.peer_id.clone()),
            name: existing.as_ref().and_then(|e| e.name.clone()),
            turn_state: "idle".into(),
            active: true,
            started_at_ms: now_ms(),
            ended_at_ms: None,
        };
        self.store
            .upsert_session(&row)
            .await
            .map_err(ops::store_error)?;
        match self.register(&row).await {
            Ok(row) => Ok(row),
            Err(e) => {
                tracing::warn!(session = session_id, error = %e, "session recorded; registration waits for the relay");
                Ok(row)
            }
        }
    }

    async fn session_start(
        self: &Arc<Self>,
        session_id: &str,
        call: &HookCall<'_>,
    ) -> Result<Value, ApiError> {
        let session = self.adopt(session_id, call).await?;
        let Some(peer) = session.peer_id.clone() else {
            return Ok(context(
                "SessionStart",
                "[repowire] The relay is not reachable right now; this session will join the mesh when it is back.",
            ));
        };
        let name = session.name.clone().unwrap_or_default();
        let mut text = format!(
            "[repowire] You are @{name} (peer id {peer}) in circle `{}`; backend {}, project {}.\n",
            session.circle,
            session.backend,
            session.path.as_deref().unwrap_or("?"),
        );
        if let Ok(peers) = self.peers(Some(session_id), None, false, false, None).await
            && let Some(list) = peers.as_array()
        {
            let others: Vec<String> = list
                .iter()
                .filter(|p| p.get("peer_id").and_then(Value::as_str) != Some(peer.as_str()))
                .map(|p| {
                    format!(
                        "@{} ({}, {})",
                        p.get("name").and_then(Value::as_str).unwrap_or("?"),
                        p.get("status").and_then(Value::as_str).unwrap_or("?"),
                        p.get("path").and_then(Value::as_str).unwrap_or("-"),
                    )
                })
                .collect();
            if others.is_empty() {
                text.push_str("No other peers are online.\n");
            } else {
                text.push_str(&format!("Online peers: {}.\n", others.join(", ")));
            }
        }
        text.push_str(
            "Talk to them with `repowire peer ask NAME \"question\"`, `repowire peer notify NAME \"text\"`, \
             and close asks you receive with `repowire peer ack ASK_ID -m \"reply\"`.",
        );
        // Anything that arrived before the session started is handed over too.
        if let Some(queued) = self.hand_over(&session, false).await? {
            text.push_str("\n\n");
            text.push_str(&queued);
        }
        Ok(context("SessionStart", &text))
    }

    async fn turn(&self, session: &SessionRow, turn: TurnState) -> Result<(), ApiError> {
        self.store
            .set_turn(&session.session_id, turn.as_str())
            .await
            .map_err(ops::store_error)?;
        if let Some(peer) = &session.peer_id {
            self.set_turn_remote(peer, turn);
        }
        Ok(())
    }

    /// Queued messages (and, at a new prompt, reminders of open asks) as text for the agent.
    /// Handed messages are marked so, and reported `injected` to their senders.
    pub async fn hand_over(
        &self,
        session: &SessionRow,
        reminders: bool,
    ) -> Result<Option<String>, ApiError> {
        let Some(peer) = session.peer_id.as_deref() else {
            return Ok(None);
        };
        let open = if reminders {
            self.store.open_asks(peer).await.map_err(ops::store_error)?
        } else {
            Vec::new()
        };
        let queued = self.store.queued(peer).await.map_err(ops::store_error)?;
        if queued.is_empty() && open.is_empty() {
            return Ok(None);
        }
        let me = session.name.as_deref().unwrap_or(peer);
        let mut text = String::new();
        if !queued.is_empty() {
            text.push_str(&format!(
                "[repowire] {} new message{} for @{me}:\n",
                queued.len(),
                if queued.len() == 1 { "" } else { "s" }
            ));
            for row in &queued {
                text.push_str(&render(row, me));
            }
        }
        if !open.is_empty() {
            text.push_str("[repowire] Reminder: these asks are still open; close each with `repowire peer ack ID -m \"reply\"`:\n");
            for row in &open {
                if let Ok(m) = serde_json::from_str::<Message>(&row.body) {
                    text.push_str(&format!(
                        "  - #{} from @{}: {}\n",
                        row.correlation_id.as_deref().unwrap_or("?"),
                        m.from.name,
                        first_line(&sanitize::for_context(&m.text)),
                    ));
                }
            }
        }
        let ids: Vec<String> = queued.iter().map(|r| r.message_id.clone()).collect();
        self.store
            .set_inbox_state(&ids, "handed")
            .await
            .map_err(ops::store_error)?;
        for id in &ids {
            self.receipt(peer, id, ReceiptState::Injected, None).await;
        }
        Ok(Some(text))
    }
}

fn context(event: &str, text: &str) -> Value {
    json!({ "hookSpecificOutput": { "hookEventName": event, "additionalContext": text } })
}

fn first_line(s: &str) -> String {
    let line = s.lines().next().unwrap_or("");
    if line.chars().count() > 120 {
        format!("{}…", line.chars().take(120).collect::<String>())
    } else {
        line.to_owned()
    }
}

/// One message, framed so the agent sees who sent it: `@from → @to [ask #cid]`.
fn render(row: &InboxRow, me: &str) -> String {
    let Ok(m) = serde_json::from_str::<Message>(&row.body) else {
        return format!("--- message {} (unreadable) ---\n", row.message_id);
    };
    let cid = m.correlation_id.as_ref().map(|c| c.as_str()).unwrap_or("");
    let tag = match m.kind {
        MessageKind::Ask => format!("[ask #{cid}]"),
        MessageKind::Notify => "[notify]".to_owned(),
        MessageKind::Broadcast => "[broadcast]".to_owned(),
        MessageKind::Reply => format!("[reply to #{cid}]"),
    };
    let mut out = format!(
        "--- @{} → @{me} {tag} (peer {}, circle {}) ---\n{}\n",
        m.from.name,
        m.from.peer_id,
        m.from.circle,
        sanitize::for_context(&m.text)
    );
    if m.kind == MessageKind::Ask {
        out.push_str(&format!(
            "(Answer with: repowire peer ack {cid} -m \"your reply\")\n"
        ));
    }
    out
}
