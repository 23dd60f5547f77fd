//! Agent runtime hooks (Claude Code's documented events; Codex's are the same). Each returns
//! what the event allows: context for SessionStart and UserPromptSubmit, a continuation for
//! Stop (the runtime's own form: [`Runtime::stop_output`]), nothing otherwise. Hook output is the native, keystroke-free way to hand an agent its messages.
//!
//! Messages are only marked handed over (and reported `injected`) after the hook's answer
//! was written to the hook process ([`AfterWrite`]): a hook that timed out or died hands
//! nothing over, and the messages wait for the next turn.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use repowire_protocol::limits::MAX_REASON_BYTES;
use repowire_protocol::{Message, ReceiptState, TurnState};
use serde_json::Value;

use super::render::{Tools, clip, first_line, mcp_tool, render, tools_text};
use super::store::SessionRow;
use super::{Daemon, errors};
use crate::api::{ApiError, HookEvent};
use crate::runtimes::Runtime;
use crate::sanitize;

pub use super::render::display_name;

/// Relay round trips inside a hook are bounded well below the hook command's own timeout,
/// so the daemon always answers before the hook gives up.
const HOOK_RELAY_TIMEOUT: Duration = Duration::from_secs(2);

/// What a hook prints on stdout (nothing when `None`).
pub type HookOutput = Option<Value>;

/// State changes to make only once an answer reached the caller.
#[derive(Debug, Clone)]
pub struct AfterWrite {
    /// The recipient peer.
    pub peer_id: String,
    /// The messages the answer carried.
    pub message_ids: Vec<String>,
    /// `handed` (hook context) or `consumed` (returned by `wait_reply`).
    pub state: &'static str,
    /// Per message: how it reached the agent when a wake had not typed it, the `injected`
    /// receipt's `reason`, so its sender sees why it waited for the agent's next turn.
    pub how: HashMap<String, String>,
    /// The conversations whose messages the answer carried (what the agent says next is
    /// relayed to those).
    pub conversations: Vec<String>,
}

/// Facts the hook command passes along besides the payload.
pub struct HookCall<'a> {
    /// Which hook fired.
    pub event: HookEvent,
    /// The runtime that ran it.
    pub runtime: Runtime,
    /// The runtime's JSON.
    pub payload: &'a Value,
    /// `TMUX`.
    pub tmux: Option<&'a str>,
    /// `TMUX_PANE`.
    pub tmux_pane: Option<&'a str>,
    /// The hook process (from the socket's credentials).
    pub hook_pid: Option<u32>,
    /// For `pre-tool-use`: how long to wait for an approval.
    pub approval_timeout: Option<Duration>,
    /// The Repowire session a `repowire session resume` started this runtime to continue.
    pub repowire_session: Option<&'a str>,
}

fn field<'a>(payload: &'a Value, name: &str) -> Option<&'a str> {
    payload.get(name).and_then(Value::as_str)
}

impl Daemon {
    /// Handles one hook call.
    pub async fn hook(
        self: &Arc<Self>,
        call: HookCall<'_>,
    ) -> Result<(HookOutput, Option<AfterWrite>), ApiError> {
        let session_id = field(call.payload, "session_id")
            .filter(|s| !s.is_empty() && s.len() <= 128)
            .ok_or_else(|| {
                ApiError::new(
                    repowire_protocol::ErrorCode::InvalidRequest,
                    "hook payload has no session_id",
                )
            })?
            .to_owned();
        match call.event {
            HookEvent::SessionStart => {
                let (out, after) = self.session_start(&session_id, &call).await?;
                Ok((Some(out), after))
            }
            HookEvent::PromptSubmit => {
                // A submit while our wake presses Enter is the wake's, and so is the prompt
                // OpenCode's plugin sends when messages arrived during a turn (it says so); any
                // other prompt is a person's for its messages' senders, also one that sends the
                // prompt a deferred or unconfirmed wake left in the box (its messages then carry
                // the wake's reason). For a conversation's loop guard only, a prompt that is a
                // wake's own words never counts as a person's, whoever pressed Enter on it.
                // Read before the wake hears of the submit, which ends its Enter.
                let ours = self.wake_entering(&session_id)
                    || (call.runtime == Runtime::OpenCode
                        && call
                            .payload
                            .get("repowire_continuation")
                            .and_then(Value::as_bool)
                            .unwrap_or(false));
                let session = self.known_session(&session_id, &call).await?;
                self.prompt_seen(&session_id);
                self.turn(&session, TurnState::Working).await?;
                let via = (!ours).then_some("with the next prompt typed in the pane");
                let handed = self.hand_over(&session, true, via).await?;
                let carried = handed.as_ref().and_then(|(_, after)| after.as_ref());
                // For a conversation's loop guard, a wake's prompt whose submit came late is
                // still not a person's.
                let by_person = !ours
                    && !call
                        .payload
                        .get("prompt")
                        .and_then(Value::as_str)
                        .is_some_and(super::wake::is_wake_prompt);
                self.segment_started(&session, by_person, carried).await;
                Ok(match handed {
                    Some((text, after)) => (
                        Some(call.runtime.context_output(HookEvent::PromptSubmit, &text)),
                        after,
                    ),
                    None => (None, None),
                })
            }
            HookEvent::Stop => {
                let session = self.known_session(&session_id, &call).await?;
                // The segment's words go to its conversations, whatever happens next.
                self.relay_turn(&session, call.runtime, call.payload).await;
                let continuing = call
                    .payload
                    .get("stop_hook_active")
                    .and_then(Value::as_bool)
                    .unwrap_or(false);
                if !continuing && !call.runtime.hands_over_at_stop() {
                    let waiting = match &session.peer_id {
                        Some(peer) => self
                            .store
                            .has_waking(peer)
                            .await
                            .map_err(errors::store_error)?,
                        None => false,
                    };
                    if waiting {
                        // Between turns until the runtime's own prompt arrives (its
                        // prompt-submit hands the messages over); if none comes, they wait for
                        // the next prompt or wake.
                        self.turn(&session, TurnState::Idle).await?;
                        return Ok((Some(call.runtime.stop_output("", None).await), None));
                    }
                }
                // Notices alone (a conversation paused or ended) do not make the agent go on.
                let waking = match &session.peer_id {
                    Some(peer) => self
                        .store
                        .has_waking(peer)
                        .await
                        .map_err(errors::store_error)?,
                    None => false,
                };
                if !continuing
                    && waking
                    && call.runtime.hands_over_at_stop()
                    && let Some((text, after)) = self
                        .hand_over(&session, false, Some("at the agent's turn boundary"))
                        .await?
                {
                    // The agent keeps working on these: its turn state stays `working`, and
                    // what it says next is a new segment, started by the handed messages.
                    self.segment_started(&session, false, after.as_ref()).await;
                    let output = call.runtime.stop_output(&text, session.agent_pid).await;
                    return Ok((Some(output), after));
                }
                self.turn(&session, TurnState::Idle).await?;
                if let Some(peer) = &session.peer_id {
                    // The transcript grew by a turn: its session's cursor follows.
                    self.bind_session(&session, peer, false).await;
                    self.clone().maybe_wake(peer).await;
                }
                Ok((None, None))
            }
            HookEvent::Notification => {
                let session = self.known_session(&session_id, &call).await?;
                if field(call.payload, "notification_type") == Some("idle_prompt") {
                    self.turn(&session, TurnState::Idle).await?;
                    if let Some(peer) = &session.peer_id {
                        self.clone().maybe_wake(peer).await;
                    }
                }
                Ok((None, None))
            }
            HookEvent::SessionEnd => {
                // Gemini CLI fires SessionEnd two or three times: once ends the session.
                if let Some(session) = self
                    .store
                    .session(&session_id)
                    .await
                    .map_err(errors::store_error)?
                    .filter(|s| s.active)
                {
                    if field(call.payload, "reason") == Some("clear") {
                        // `/clear` starts a new session id in the same process: it keeps the
                        // peer, its inbox and its open asks.
                        self.store
                            .set_handoff(&session_id)
                            .await
                            .map_err(errors::store_error)?;
                    } else {
                        self.end_session(&session).await?;
                    }
                }
                Ok((None, None))
            }
            HookEvent::PreToolUse => {
                let (output, after) = self.pre_tool_use(&session_id, &call).await;
                Ok((Some(output), after))
            }
        }
    }

    /// The session, registering it first if the daemon has not seen it (the agent started
    /// before the daemon, or its SessionStart hook did not reach us).
    pub(super) async fn known_session(
        &self,
        session_id: &str,
        call: &HookCall<'_>,
    ) -> Result<SessionRow, ApiError> {
        match self
            .store
            .session(session_id)
            .await
            .map_err(errors::store_error)?
        {
            Some(s) if s.active => Ok(s),
            _ => self.adopt(session_id, call).await,
        }
    }

    /// Records a runtime session from a hook and registers its peer.
    async fn adopt(&self, session_id: &str, call: &HookCall<'_>) -> Result<SessionRow, ApiError> {
        let agent_pid = call.hook_pid.and_then(crate::procinfo::agent_of_hook);
        if let Some(host) = agent_pid.filter(|&p| crate::procinfo::is_terminal_host(p)) {
            // Adopting it would make every shell of that terminal (or tmux server) speak as
            // this session.
            return Err(ApiError::new(
                crate::api::DaemonCode::NotAnAgent,
                format!(
                    "this hook was not run by an agent runtime: the process behind it is `{}` (pid {host}); nothing was registered",
                    crate::procinfo::comm(host).unwrap_or_default()
                ),
            )
            .hint("hooks are run by the agent runtime once `repowire setup` installed them; `repowire whoami` shows who this terminal acts as"));
        }
        let mut existing = self
            .store
            .session(session_id)
            .await
            .map_err(errors::store_error)?;
        if existing.is_none()
            && let Some(pid) = agent_pid
            && let Some(previous) = self
                .store
                .handoff_of_agent(i64::from(pid), session_id)
                .await
                .map_err(errors::store_error)?
        {
            // The same agent process under a new session id (after `/clear`, or a pane adopted
            // by `repowire link`): the peer carries over.
            self.store
                .delete_session(&previous.session_id)
                .await
                .map_err(errors::store_error)?;
            existing = Some(previous);
        }
        if existing.is_none()
            && let Some(rs) = call
                .repowire_session
                .filter(|rs| repowire_protocol::looks_like_session_id(rs))
            && let Some(previous) = self
                .store
                .ended_session_of(rs)
                .await
                .map_err(errors::store_error)?
        {
            // Started by `repowire session resume` to continue that session, under a runtime
            // id of its own (some runtimes give a resumed session a new one): the ended
            // session's peer, and so what waited for it, carries over.
            self.store
                .delete_session(&previous.session_id)
                .await
                .map_err(errors::store_error)?;
            existing = Some(previous);
        }
        let (role, circle) = match &existing {
            Some(e) => (e.role.as_str(), e.circle.as_str()),
            None => ("agent", self.settings.circle.as_str()),
        };
        let row = SessionRow {
            path: field(call.payload, "cwd").map(str::to_owned),
            pane: call
                .tmux_pane
                .filter(|p| p.starts_with('%'))
                .map(str::to_owned),
            tmux_socket: call.tmux.and_then(crate::tmux::socket_of),
            agent_pid: agent_pid.map(i64::from),
            agent_start: agent_pid.and_then(crate::procinfo::start_time),
            transcript: field(call.payload, "transcript_path").map(str::to_owned),
            // A resumed session keeps its peer id: the relay honours the reclaim only if
            // backend and path still match.
            peer_id: existing.as_ref().and_then(|e| e.peer_id.clone()),
            name: existing.as_ref().and_then(|e| e.name.clone()),
            // The work stream goes on: after `/clear` (handed over) and after a resume.
            repowire_session_id: existing
                .as_ref()
                .and_then(|e| e.repowire_session_id.clone()),
            turn_state: "idle".into(),
            ..SessionRow::new(session_id.to_owned(), call.runtime.backend(), role, circle)
        };
        self.store
            .upsert_session(&row)
            .await
            .map_err(errors::store_error)?;
        match self.register(&row, HOOK_RELAY_TIMEOUT).await {
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
    ) -> Result<(Value, Option<AfterWrite>), ApiError> {
        let session = self.adopt(session_id, call).await?;
        let Some(peer) = session.peer_id.clone() else {
            // Still told how to talk to peers: this may be the only SessionStart it gets.
            let text = format!(
                "[repowire] The relay is not reachable right now; this session will join the mesh when it is back.\n{}",
                tools_text(call.runtime)
            );
            return Ok((
                call.runtime.context_output(HookEvent::SessionStart, &text),
                None,
            ));
        };
        let name = session.name.clone().unwrap_or_default();
        let mut text = format!(
            "[repowire] You are @{name} (peer id {peer}) in circle `{}`; backend {}, project {}.\n",
            session.circle,
            session.backend,
            session.path.as_deref().unwrap_or("?"),
        );
        let peers = tokio::time::timeout(
            HOOK_RELAY_TIMEOUT,
            self.peers(Some(session_id), None, false, false, None),
        )
        .await;
        if let Ok(Ok(list)) = peers {
            let others: Vec<String> = list
                .iter()
                .map(|p| &p.peer)
                .filter(|p| p.peer_id.as_str() != peer.as_str())
                .map(|p| {
                    format!(
                        "@{} ({}, {})",
                        p.name,
                        <&str>::from(p.status),
                        p.path.as_deref().unwrap_or("-"),
                    )
                })
                .collect();
            if others.is_empty() {
                text.push_str("No other peers are online.\n");
            } else {
                text.push_str(&format!("Online peers: {}.\n", others.join(", ")));
            }
        }
        text.push_str(&tools_text(call.runtime));
        // Anything that arrived before the session started is handed over too.
        let mut after = None;
        if let Some((queued, handed)) = self
            .hand_over(&session, false, Some("at the session's start"))
            .await?
        {
            text.push_str("\n\n");
            text.push_str(&queued);
            after = handed;
        }
        Ok((
            call.runtime.context_output(HookEvent::SessionStart, &text),
            after,
        ))
    }

    async fn turn(&self, session: &SessionRow, turn: TurnState) -> Result<(), ApiError> {
        self.store
            .set_turn(&session.session_id, turn.as_str())
            .await
            .map_err(errors::store_error)?;
        if let Some(peer) = &session.peer_id {
            self.set_turn_remote(peer, turn);
        }
        Ok(())
    }

    /// Queued messages (and, at a new prompt, reminders of open asks) as text for the agent,
    /// with the state change to make once that text reached it. `via` says how they reach it
    /// when that is not the daemon's own wake prompt.
    pub async fn hand_over(
        &self,
        session: &SessionRow,
        reminders: bool,
        via: Option<&str>,
    ) -> Result<Option<(String, Option<AfterWrite>)>, ApiError> {
        let Some(peer) = session.peer_id.as_deref() else {
            return Ok(None);
        };
        let open = if reminders {
            let mut open = self
                .store
                .open_asks(peer)
                .await
                .map_err(errors::store_error)?;
            open.retain(|row| {
                serde_json::from_str::<Message>(&row.body).map_or(true, |m| !past_deadline(&m))
            });
            open
        } else {
            Vec::new()
        };
        let queued = self.store.queued(peer).await.map_err(errors::store_error)?;
        if queued.is_empty() && open.is_empty() {
            return Ok(None);
        }
        let me = session.name.as_deref().unwrap_or(peer);
        let tools = Tools::of(session.runtime());
        let mut text = String::new();
        if !queued.is_empty() {
            text.push_str(&format!(
                "[repowire] {} new message{} for @{me}:\n",
                queued.len(),
                if queued.len() == 1 { "" } else { "s" }
            ));
            for row in &queued {
                text.push_str(&render(row, me, tools));
            }
        }
        if !open.is_empty() {
            text.push_str(&match tools {
                Tools::Mcp => format!(
                    "[repowire] Reminder: these asks are still open; close each with the MCP tool {}:\n",
                    mcp_tool("ack")
                ),
                Tools::Cli => "[repowire] Reminder: these asks are still open; close each with `repowire peer ack ID -m \"reply\"`:\n".to_owned(),
            });
            for row in &open {
                if let Ok(m) = serde_json::from_str::<Message>(&row.body) {
                    text.push_str(&format!(
                        "  - #{} from @{}: {}\n",
                        row.correlation_id.as_deref().unwrap_or("?"),
                        display_name(&m.from.name),
                        first_line(&sanitize::for_context(&m.text)),
                    ));
                }
            }
        }
        let how = match via {
            Some(via) if !queued.is_empty() => self
                .store
                .wake_reasons(peer)
                .await
                .map_err(errors::store_error)?
                .into_iter()
                .map(|(id, why)| {
                    let how = format!("handed over {via}, not typed into the pane ({why})");
                    (id, clip(how, MAX_REASON_BYTES))
                })
                .collect(),
            _ => HashMap::new(),
        };
        let conversations = queued
            .iter()
            .filter_map(|r| serde_json::from_str::<Message>(&r.body).ok()?.conversation)
            .map(|c| c.id)
            .collect();
        let after = (!queued.is_empty()).then(|| AfterWrite {
            peer_id: peer.to_owned(),
            message_ids: queued.iter().map(|r| r.message_id.clone()).collect(),
            state: "handed",
            how,
            conversations,
        });
        Ok(Some((text, after)))
    }

    /// The answer carrying these messages reached the agent: mark them and tell the senders.
    pub async fn commit_hand_over(&self, after: AfterWrite) {
        match self
            .store
            .take_queued(&after.peer_id, &after.message_ids, after.state)
            .await
        {
            Ok(moved) => {
                for id in moved {
                    let how = after.how.get(&id).cloned();
                    self.receipt(&after.peer_id, &id, ReceiptState::Injected, how, None)
                        .await;
                }
            }
            Err(error) => tracing::error!(%error, "could not record a hand-over"),
        }
    }
}

/// True for an ask whose question's deadline has passed: the relay closed it (with its default
/// or unanswered), so the agent is not reminded of it any more.
fn past_deadline(m: &Message) -> bool {
    let Some(timeout) = m.question.as_ref().and_then(|q| q.timeout_ms) else {
        return false;
    };
    let deadline = m
        .created_at_ms
        .saturating_add(i64::try_from(timeout).unwrap_or(i64::MAX));
    super::store::now_ms() >= deadline
}
