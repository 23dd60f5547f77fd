//! Waking an idle agent through tmux (DESIGN.md §6). Only a short, fixed prompt is typed —
//! never the remote text itself, which the agent then receives through the UserPromptSubmit
//! hook as context. Even so the typed text is treated as hostile: the pane must be proven to
//! run the registered agent, copy-mode is left first, text goes through a named buffer with
//! bracketed paste, Enter is its own step, and the submit is verified by the hook firing.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use super::Daemon;
use super::store::SessionRow;
use crate::{sanitize, tmux};

/// Pause between the paste and Enter, so the agent's UI has taken the paste in.
const ENTER_GAP: Duration = Duration::from_millis(150);
/// How long the UserPromptSubmit hook has to fire after Enter.
const VERIFY: Duration = Duration::from_secs(5);
/// Enter presses before giving up (the paste is typed once).
const ATTEMPTS: usize = 2;

/// How the last wake attempt of a session ended.
#[derive(Debug, Clone, serde::Serialize)]
pub struct WakeOutcome {
    /// When it ended, milliseconds since the Unix epoch.
    pub at_ms: i64,
    /// `woken`, `refused` (the pane may not be typed into), `unconfirmed` (no prompt-submit
    /// followed) or `failed` (tmux failed).
    pub outcome: &'static str,
    /// Why, for anything but `woken`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// Why a pane may not be typed into: it must be the registered agent's pane, the agent must
/// be the very process that registered (pid and start time), and its process group must be in
/// the terminal's foreground — so keystrokes reach the agent, not a shell that took over the
/// terminal (an agent suspended with Ctrl-Z, say).
pub async fn check_pane(session: &SessionRow) -> Result<(), String> {
    let pane = session
        .pane
        .as_deref()
        .ok_or("the session has no tmux pane")?;
    let agent = session
        .agent_pid
        .ok_or("the agent's process is not known")? as u32;
    if !crate::procinfo::same_process(agent, session.agent_start) {
        return Err(format!("the agent process {agent} has exited"));
    }
    let info = tmux::pane(session.tmux_socket.as_deref(), pane)
        .await
        .map_err(|e| format!("pane {pane} is not available: {e}"))?;
    if info.dead {
        return Err(format!("pane {pane} is dead"));
    }
    if !crate::procinfo::is_self_or_ancestor(info.pid, agent) {
        return Err(format!(
            "pane {pane} is not running the registered agent (pid {agent}); it runs `{}`",
            info.command
        ));
    }
    if !crate::procinfo::in_foreground(agent) {
        return Err(format!(
            "the agent (pid {agent}) is not in the foreground of pane {pane}; `{}` is",
            info.command
        ));
    }
    Ok(())
}

#[allow(clippy::unwrap_used)] // poisoned locks only follow a panic elsewhere
impl Daemon {
    /// If the peer's agent is idle and has queued messages, wake it (in the background).
    pub async fn maybe_wake(self: Arc<Self>, peer_id: &str) {
        if !self.settings.tmux_wake {
            return;
        }
        let Ok(sessions) = self.store.active_sessions().await else {
            return;
        };
        let Some(session) = sessions
            .into_iter()
            .find(|s| s.peer_id.as_deref() == Some(peer_id))
        else {
            return;
        };
        if session.turn_state != "idle" || session.pane.is_none() {
            return;
        }
        if !self
            .waking
            .lock()
            .unwrap()
            .insert(session.session_id.clone())
        {
            return;
        }
        let me = self.clone();
        tokio::spawn(async move {
            let id = session.session_id.clone();
            if let Some((outcome, reason)) = me.wake(session).await {
                let outcome = WakeOutcome {
                    at_ms: super::store::now_ms(),
                    outcome,
                    reason,
                };
                me.wakes.lock().unwrap().insert(id.clone(), outcome);
            }
            me.waking.lock().unwrap().remove(&id);
        });
    }

    /// The last wake outcome of every session.
    pub fn wake_outcomes(&self) -> HashMap<String, WakeOutcome> {
        self.wakes.lock().unwrap().clone()
    }

    /// One wake attempt; `None` when there was nothing to do.
    async fn wake(&self, session: SessionRow) -> Option<(&'static str, Option<String>)> {
        let peer = session.peer_id.clone()?;
        let queued = match self.store.queued(&peer).await {
            Ok(q) if !q.is_empty() => q,
            _ => return None,
        };
        if let Some(pid) = session.agent_pid
            && !crate::procinfo::same_process(pid as u32, session.agent_start)
        {
            let _ = self.end_session(&session).await;
            return Some((
                "refused",
                Some(format!(
                    "the agent process {pid} has exited; its session ended and its queued messages were reported failed"
                )),
            ));
        }
        if let Err(reason) = check_pane(&session).await {
            tracing::warn!(session = %session.session_id, %reason, "not typing into the pane; messages wait for the next turn");
            return Some(("refused", Some(reason)));
        }
        let pane = session.pane.clone().unwrap_or_default();
        let socket = session.tmux_socket.as_deref();
        let senders: Vec<String> = queued
            .iter()
            .filter_map(|r| serde_json::from_str::<repowire_protocol::Message>(&r.body).ok())
            .map(|m| format!("@{}", super::hooks::display_name(&m.from.name)))
            .collect();
        let prompt = sanitize::for_terminal(&format!(
            "[repowire] {} new message{} from {} - read them in your context and respond.",
            queued.len(),
            if queued.len() == 1 { "" } else { "s" },
            dedup(senders).join(", ")
        ));
        let mut prompts = self.watch_prompts(&session.session_id);
        prompts.mark_unchanged();
        if let Ok(info) = tmux::pane(socket, &pane).await
            && info.in_mode
            && let Err(error) = tmux::leave_mode(socket, &pane).await
        {
            tracing::warn!(%error, "could not leave copy-mode");
            return Some(("failed", Some(error.to_string())));
        }
        let scratch = self
            .settings
            .home
            .join(format!("wake-{}.txt", uuid::Uuid::new_v4().simple()));
        let buffer = format!("repowire-{}", peer);
        if let Err(error) = tmux::paste(socket, &pane, &buffer, &prompt, &scratch).await {
            tracing::warn!(%error, "paste into the pane failed");
            return Some(("failed", Some(error.to_string())));
        }
        for attempt in 1..=ATTEMPTS {
            tokio::time::sleep(ENTER_GAP).await;
            if let Err(error) = tmux::enter(socket, &pane).await {
                tracing::warn!(%error, "pressing Enter failed");
                return Some(("failed", Some(error.to_string())));
            }
            match tokio::time::timeout(VERIFY, prompts.changed()).await {
                Ok(Ok(())) => {
                    tracing::info!(session = %session.session_id, %pane, "agent woken");
                    return Some(("woken", None));
                }
                _ => {
                    tracing::warn!(session = %session.session_id, attempt, "no prompt-submit after Enter")
                }
            }
            // Still idle and still unsubmitted? Only then press Enter again.
            match self.store.session(&session.session_id).await {
                Ok(Some(s)) if s.turn_state == "idle" => {}
                _ => return Some(("woken", None)),
            }
        }
        tracing::warn!(session = %session.session_id, "wake not confirmed; messages wait for the next turn");
        Some((
            "unconfirmed",
            Some("no UserPromptSubmit hook followed the wake-up prompt".into()),
        ))
    }
}

fn dedup(mut v: Vec<String>) -> Vec<String> {
    let mut seen = std::collections::HashSet::new();
    v.retain(|s| seen.insert(s.clone()));
    v
}
