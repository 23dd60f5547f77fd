//! Waking an idle agent through tmux (DESIGN.md §6). Only a short, fixed prompt is typed —
//! never the remote text itself, which the agent then receives through the UserPromptSubmit
//! hook as context. Even so the typed text is treated as hostile: the pane must be proven to
//! run the registered agent, copy-mode is left first, text goes through a named buffer with
//! bracketed paste, Enter is its own step, and the submit is verified by the hook firing.
//!
//! A person may be at the pane too (docs/agents/claude-code.md): the wake waits, bounded,
//! while one types through a tmux client, and presses Enter only when the input box shows
//! exactly the wake prompt — never a person's draft with it. Otherwise the messages wait for
//! the agent's next turn boundary (the person's own prompt), and the outcome says so.

mod prompt;
mod screen;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use super::Daemon;
use super::store::SessionRow;
use crate::runtimes::{InputBox, Runtime};
use crate::{sanitize, tmux};
pub(super) use prompt::is_wake_prompt;
use screen::Landed;

/// How often the box is read while the paste lands, and how long it may take.
const LAND_POLL: Duration = Duration::from_millis(5);
const LAND_WITHIN: Duration = Duration::from_secs(2);
/// How long a wake waits for a person to stop typing, and how often it looks.
const TYPING_WAIT: Duration = Duration::from_secs(8);
const TYPING_POLL: Duration = Duration::from_millis(250);
/// When a deferred wake is tried again.
const RETRY_DEFERRED: Duration = Duration::from_secs(10);
/// How long a screen that still shows a turn running may lag the hook that ended it (OpenCode
/// keeps its progress bar up for a moment after `session.idle`), and how often it is read
/// meanwhile.
const SCREEN_LAG: Duration = Duration::from_secs(2);
const SCREEN_POLL: Duration = Duration::from_millis(50);
/// How long the UserPromptSubmit hook has to fire after Enter.
const VERIFY: Duration = Duration::from_secs(5);
/// Enter presses before giving up (the paste is typed once).
const ATTEMPTS: usize = 2;

/// How the last wake attempt of a session ended (the API's record of it).
pub use crate::api::WakeRecord as WakeOutcome;

type Outcome = Option<(&'static str, Option<String>)>;

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
    if info.input_off {
        return Err(format!(
            "pane {pane} has input turned off (select-pane -d): keys would be dropped"
        ));
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

/// How waiting for a person to stop typing ended.
enum Quiet {
    /// Nobody is typing: the wake may type.
    Yes,
    /// The messages were handed over meanwhile (the person submitted a prompt).
    HandedOver,
    /// Still typing when the wait ran out.
    Typing(String),
}

fn now_secs() -> i64 {
    super::store::now_ms().div_euclid(1000)
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
            let mut session = session;
            let mut draft = None;
            // A deferred wake is tried again while the agent stays idle with messages queued:
            // a person who stops typing without sending leaves nobody to end the turn.
            let mut peer = session.peer_id.clone();
            while let Some((outcome, reason)) = me.wake(session, &mut draft).await {
                let record = WakeOutcome {
                    at_ms: super::store::now_ms(),
                    outcome: outcome.to_owned(),
                    reason,
                };
                if outcome != "woken"
                    && let Some(peer) = &peer
                {
                    let why = record.reason.as_deref().unwrap_or(outcome);
                    let why = why.strip_suffix(&format!("; {LATER}")).unwrap_or(why);
                    if let Err(error) = me
                        .store
                        .set_wake_reason(peer, &format!("wake {outcome}: {why}"))
                        .await
                    {
                        tracing::warn!(%error, "could not record why the wake did not type");
                    }
                }
                me.wakes.lock().unwrap().insert(id.clone(), record);
                if outcome != "deferred" {
                    break;
                }
                tokio::time::sleep(RETRY_DEFERRED).await;
                let Ok(sessions) = me.store.active_sessions().await else {
                    break;
                };
                let Some(again) = sessions
                    .into_iter()
                    .find(|s| s.session_id == id && s.turn_state == "idle")
                else {
                    break;
                };
                peer = again.peer_id.clone();
                session = again;
            }
            me.waking.lock().unwrap().remove(&id);
        });
    }

    /// The last wake outcome of every session.
    pub fn wake_outcomes(&self) -> HashMap<String, WakeOutcome> {
        self.wakes.lock().unwrap().clone()
    }

    /// One wake attempt; `None` when there was nothing to do. `draft` is the person's draft
    /// a deferred attempt found in the input box: while the box still holds just that, the
    /// wake does not paste into it again.
    async fn wake(&self, session: SessionRow, draft: &mut Option<String>) -> Outcome {
        let peer = session.peer_id.clone()?;
        // Notices alone (a conversation paused or ended) wait for the agent's next turn.
        if !self.store.has_waking(&peer).await.unwrap_or(false) {
            return None;
        }
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
        let runtime = session.runtime();
        match self.wait_for_quiet(&session, &peer, socket, &pane).await {
            Ok(Quiet::Yes) => {}
            Ok(Quiet::HandedOver) => return None,
            Ok(Quiet::Typing(reason)) => {
                tracing::info!(session = %session.session_id, %reason, "not waking: messages wait for the next turn");
                return Some(("deferred", Some(format!("{reason}; {LATER}"))));
            }
            Err(error) => return Some(("failed", Some(error.to_string()))),
        }
        // What is queued now (more may have come, or some gone, while the wake waited).
        if !self.store.has_waking(&peer).await.unwrap_or(false) {
            return None;
        }
        let queued = match self.store.queued(&peer).await {
            Ok(q) if !q.is_empty() => q,
            _ => return None,
        };
        let senders: Vec<String> = queued
            .iter()
            .filter_map(|r| serde_json::from_str::<repowire_protocol::Message>(&r.body).ok())
            .map(|m| format!("@{}", super::hooks::display_name(&m.from.name)))
            .collect();
        let prompt = sanitize::for_terminal(&prompt::wake_prompt(queued.len(), senders));
        // Nothing is typed into a screen whose input box the wake cannot read: it could
        // not tell a person's draft from its prompt, nor see that the prompt landed.
        // The session is between turns (its hook said so): a screen that still shows the
        // turn running is read again for a moment before the wake gives up on it.
        let lagging = Instant::now() + SCREEN_LAG;
        let now = loop {
            match tmux::capture(socket, &pane).await {
                Ok(screen) => match runtime.input_box(&screen) {
                    InputBox::Busy if Instant::now() < lagging => {
                        tokio::time::sleep(SCREEN_POLL).await
                    }
                    read => break read,
                },
                Err(error) => return Some(("failed", Some(error.to_string()))),
            }
        };
        let now = match now {
            InputBox::Text(text) => text,
            InputBox::Busy => {
                return Some((
                    "deferred",
                    Some(format!(
                        "pane {pane} shows {} still working; {LATER}",
                        runtime.display()
                    )),
                ));
            }
            InputBox::Unknown => {
                tracing::warn!(session = %session.session_id, %pane, "no input box on the screen: not typing");
                return Some((
                    "cannot_wake",
                    Some(format!(
                        "pane {pane} shows no {} input box the wake can read (a dialog, or another program), so nothing was typed; {LATER}",
                        runtime.display()
                    )),
                ));
            }
        };
        if !now.is_empty() && !runtime.pastes_after_drafts() {
            return Some((
                "deferred",
                Some(format!(
                    "pane {pane} has unsent text in its input box; {LATER}"
                )),
            ));
        }
        if draft.as_deref() == Some(now.as_str()) {
            return Some((
                "deferred",
                Some(format!(
                    "pane {pane} still has unsent text in its input box; {LATER}"
                )),
            ));
        }
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
        let pasted = Instant::now();
        if let Err(error) = tmux::paste(socket, &pane, &buffer, &prompt, &scratch).await {
            tracing::warn!(%error, "paste into the pane failed");
            return Some(("failed", Some(error.to_string())));
        }
        // Enter as soon as the box shows exactly the prompt; never with a draft in it.
        match paste_landed(runtime, socket, &pane, &prompt).await {
            Ok(Landed::Exact) => {}
            Ok(other) => return Some(take_back(socket, &pane, &prompt, other, draft).await),
            Err(error) => return Some(("failed", Some(error.to_string()))),
        }
        // A runtime that takes an Enter right behind a paste for part of it (Gemini CLI) gets
        // it once that window has passed — and only if the box still holds just the prompt.
        // The window opens when the agent reads the paste, which on a loaded machine can be
        // well after tmux returned; it has read it by the time it draws it, so the window is
        // counted from the moment the box was seen holding the prompt.
        let settle = runtime.paste_settle();
        if !settle.is_zero() {
            tokio::time::sleep(settle).await;
            match box_now(runtime, socket, &pane, &prompt).await {
                Some(Landed::Exact) => {}
                Some(other) => {
                    return Some(take_back(socket, &pane, &prompt, other, draft).await);
                }
                None => {
                    return Some((
                        "unconfirmed",
                        Some(format!(
                            "pane {pane}'s input box was gone after the paste; no Enter was pressed"
                        )),
                    ));
                }
            }
        }
        let entered = Instant::now();
        let _entering = self.entering(&session.session_id);
        for attempt in 1..=ATTEMPTS {
            if attempt > 1
                && !matches!(
                    box_now(runtime, socket, &pane, &prompt).await,
                    Some(Landed::Exact)
                )
            {
                // The prompt is no longer alone in the box: Enter would send something else.
                break;
            }
            if let Err(error) = tmux::enter(socket, &pane).await {
                tracing::warn!(%error, "pressing Enter failed");
                return Some(("failed", Some(error.to_string())));
            }
            match tokio::time::timeout(VERIFY, prompts.changed()).await {
                Ok(Ok(())) => {
                    tracing::info!(
                        session = %session.session_id,
                        %pane,
                        paste_to_enter_ms = (entered - pasted).as_millis() as u64,
                        enter_to_submit_ms = entered.elapsed().as_millis() as u64,
                        "agent woken"
                    );
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

    /// Waits (at most [`TYPING_WAIT`]) until no person types into the pane through a tmux
    /// client; stops early when the messages were handed over meanwhile.
    async fn wait_for_quiet(
        &self,
        session: &SessionRow,
        peer: &str,
        socket: Option<&str>,
        pane: &str,
    ) -> Result<Quiet, tmux::TmuxError> {
        let deadline = Instant::now() + TYPING_WAIT;
        loop {
            let clients = tmux::clients(socket).await?;
            let Some(reason) = screen::typing(&clients, pane, now_secs()) else {
                return Ok(Quiet::Yes);
            };
            if Instant::now() >= deadline {
                return Ok(Quiet::Typing(reason));
            }
            tracing::debug!(session = %session.session_id, %reason, "a person is at the pane; the wake waits");
            tokio::time::sleep(TYPING_POLL).await;
            let idle = matches!(self.store.session(&session.session_id).await, Ok(Some(s)) if s.turn_state == "idle");
            let queued = self.store.has_waking(peer).await.unwrap_or(false);
            if !idle || !queued {
                return Ok(Quiet::HandedOver);
            }
        }
    }
}

/// What the input box shows against the pasted prompt; `None` when the pane shows no box.
async fn box_now(
    runtime: Runtime,
    socket: Option<&str>,
    pane: &str,
    prompt: &str,
) -> Option<Landed> {
    let screen = tmux::capture(socket, pane).await.ok()?;
    match runtime.input_box(&screen) {
        InputBox::Text(text) => Some(screen::landed(&text, prompt)),
        InputBox::Busy | InputBox::Unknown => None,
    }
}

/// Watches the box until the paste shows in it, at most [`LAND_WITHIN`]. A box that is gone
/// meanwhile (a dialog opened) is `Pending`: no Enter.
async fn paste_landed(
    runtime: Runtime,
    socket: Option<&str>,
    pane: &str,
    prompt: &str,
) -> Result<Landed, tmux::TmuxError> {
    let deadline = Instant::now() + LAND_WITHIN;
    loop {
        let screen = tmux::capture(socket, pane).await?;
        let landed = match runtime.input_box(&screen) {
            InputBox::Text(text) => screen::landed(&text, prompt),
            InputBox::Busy | InputBox::Unknown => Landed::Pending,
        };
        if landed != Landed::Pending || Instant::now() >= deadline {
            return Ok(landed);
        }
        tokio::time::sleep(LAND_POLL).await;
    }
}

/// The paste met other text in the box: no Enter. A prompt pasted after a draft is taken
/// back (Backspace, once per character), leaving the draft as it was; anything else is left
/// alone, since Backspace would eat the person's keys.
async fn take_back(
    socket: Option<&str>,
    pane: &str,
    prompt: &str,
    landed: Landed,
    draft: &mut Option<String>,
) -> (&'static str, Option<String>) {
    match landed {
        Landed::AfterDraft(text) => {
            if let Err(error) = tmux::backspace(socket, pane, prompt.chars().count()).await {
                return (
                    "failed",
                    Some(format!(
                        "could not take the wake prompt back out of a draft: {error}"
                    )),
                );
            }
            tracing::info!(%pane, "the input box holds a person's draft: wake prompt taken back");
            *draft = Some(text);
            (
                "deferred",
                Some(format!(
                    "pane {pane} has unsent text in its input box; {LATER}"
                )),
            )
        }
        Landed::Pending => (
            "unconfirmed",
            Some(format!(
                "the wake prompt did not show in pane {pane}'s input box; no Enter was pressed"
            )),
        ),
        Landed::Mixed | Landed::Exact => (
            "deferred",
            Some(format!(
                "a person typed into pane {pane} during the wake; the prompt was left in the box; {LATER}"
            )),
        ),
    }
}

/// Where deferred messages go instead.
const LATER: &str = "the messages are handed over at the agent's next turn";
