//! Remote approval of tool calls: the PreToolUse hook of a gated tool asks `@approvers` (a
//! person on any machine of the tenant, an orchestrator, a service) whether the call may run,
//! waits, and answers Claude Code with `permissionDecision` `allow` or `deny`. Fail-closed:
//! anything but an approver's `allow` (a deny, the timeout, an unreachable relay, a payload it
//! cannot read) denies, with a reason the model sees.
//!
//! Also `repowire approvals allow|deny`, answering such a question as the person at this
//! machine, which must then really be a person at a terminal.

use std::sync::Arc;
use std::time::Duration;

use repowire_protocol::{APPROVERS, Question};
use serde_json::{Value, json};

use super::Daemon;
use super::approval_text::describe;
use super::errors::store_error;
use super::hooks::{AfterWrite, HookCall};
use super::questions::{MAX_BLOCKING, VERDICT_GRACE};
use super::store::LocalDecision;
use crate::api::WaitOutcome;
use crate::api::{ApiError, Outgoing, SendKind};
use crate::sanitize;

/// Claude Code's answer to a PreToolUse hook.
pub fn decision(allow: bool, reason: &str) -> Value {
    json!({ "hookSpecificOutput": {
        "hookEventName": crate::api::HookEvent::PreToolUse.claude_name(),
        "permissionDecision": if allow { "allow" } else { "deny" },
        "permissionDecisionReason": reason,
    }})
}

/// A deny with `reason`, prefixed so the model knows who denied.
pub fn deny(reason: &str) -> Value {
    decision(false, &format!("Repowire approvals: {reason}"))
}

impl Daemon {
    /// The PreToolUse hook of a gated tool: ask `@approvers`, wait, decide. Never an error:
    /// whatever goes wrong denies. A denial made here, without an approver's decision or the
    /// question's timeout (which the relay records), is recorded in state.db for
    /// `repowire approvals history`.
    pub(super) async fn pre_tool_use(
        self: &Arc<Self>,
        session_id: &str,
        call: &HookCall<'_>,
    ) -> (Value, Option<AfterWrite>) {
        // The whole decision is due by then: the hook command waits a little longer, and Claude
        // Code's timeout for the hook longer still (`approvals_setup::HOOK_MARGIN`).
        let timeout = call
            .approval_timeout
            .unwrap_or(self.settings.approvals.timeout)
            .clamp(Duration::from_secs(1), MAX_BLOCKING);
        let deadline = tokio::time::Instant::now() + timeout + VERDICT_GRACE;
        let tool = call.payload.get("tool_name").and_then(Value::as_str);
        let input = call.payload.get("tool_input").unwrap_or(&Value::Null);
        let cwd = call.payload.get("cwd").and_then(Value::as_str);
        let shown = describe(tool.unwrap_or("(no tool named)"), input, cwd);
        let mut local = LocalDecision::now(session_id, shown.clone(), String::new());
        let Some(tool) = tool else {
            return (
                self.denied_here(local, "the hook payload names no tool; denied")
                    .await,
                None,
            );
        };
        let session = match self.known_session(session_id, call).await {
            Ok(s) => s,
            Err(e) => {
                let why = format!("this session is not known: {}", e.message);
                return (self.denied_here(local, &why).await, None);
            }
        };
        local.peer_id = session.peer_id.clone();
        local.name = session.name.clone();
        local.circle = Some(session.circle.clone());
        let Some(peer) = session.peer_id.clone() else {
            let why = "the relay is not reachable, so nobody could be asked to approve this call";
            return (self.denied_here(local, why).await, None);
        };
        let out = Outgoing {
            from: None,
            kind: SendKind::Ask,
            to: Some(APPROVERS.into()),
            circle: None,
            text: shown,
            reply_to: None,
            question: Some(Question::tool_permission(
                u64::try_from(timeout.as_millis()).unwrap_or(u64::MAX),
            )),
        };
        let started = std::time::Instant::now();
        let (outcome, after) = match self.block_on(&peer, out, Some(deadline)).await {
            Ok(done) => done,
            Err(e) => {
                let why = format!("could not ask for approval ({}); denied", e.message);
                tracing::warn!(session = session_id, tool, error = %e.message, "approval not asked; denied");
                return (self.denied_here(local, &why).await, None);
            }
        };
        let (allow, reason) = verdict(&outcome, timeout);
        let cid = outcome.correlation_id();
        tracing::info!(
            session = session_id,
            tool,
            allow,
            cid = cid.unwrap_or("-"),
            waited_ms = started.elapsed().as_millis() as u64,
            "tool call decided"
        );
        if !allow && !decided_by_relay(&outcome) {
            local.correlation_id = cid.map(str::to_owned);
            return (self.denied_here(local, &reason).await, after);
        }
        (
            decision(allow, &format!("Repowire approvals: {reason}")),
            after,
        )
    }

    /// Denies a call without an approver's decision, and records that it did.
    async fn denied_here(&self, mut local: LocalDecision, reason: &str) -> Value {
        local.reason = reason.to_owned();
        local.decided_at_ms = super::store::now_ms();
        if let Err(error) = self.store.record_local_decision(&local).await {
            tracing::error!(%error, session = %local.session_id, "could not record a local denial");
        }
        deny(reason)
    }

    /// `repowire approvals allow|deny ID`: answers a question to `@approvers` as the actor.
    /// As the person at this machine (the daemon's own peer), the caller must be at a terminal
    /// no agent session runs in.
    pub async fn decide(
        &self,
        from: Option<&str>,
        caller_pid: Option<u32>,
        correlation_id: String,
        allow: bool,
        reason: Option<String>,
    ) -> Result<crate::api::Sent, ApiError> {
        let actor = self.actor(from, caller_pid).await?;
        if actor.session_id == super::CLI_SESSION {
            self.person_at_terminal(caller_pid).await?;
        }
        let option = if allow { "allow" } else { "deny" };
        self.answer(
            Some(actor.session_id.as_str()),
            caller_pid,
            correlation_id,
            Some(option.to_owned()),
            reason.filter(|r| !r.trim().is_empty()),
        )
        .await
    }

    /// Refuses unless `pid` has a controlling terminal that is not the terminal of a local
    /// agent session: the person at this machine, not a program an agent started (it would
    /// need a terminal of its own, detached from the agent).
    pub(super) async fn person_at_terminal(&self, pid: Option<u32>) -> Result<(), ApiError> {
        let refuse = |why: String| {
            ApiError::new(crate::api::DaemonCode::NotAPerson, why).hint(
                "approvals are answered by a person: run `repowire approvals allow|deny ID` in a terminal",
            )
        };
        let Some(tty) = pid.and_then(crate::procinfo::tty) else {
            return Err(refuse(
                "this command has no terminal, so it is not taken as the person at this machine"
                    .into(),
            ));
        };
        let sessions = self.store.active_sessions().await.map_err(store_error)?;
        if let Some(agent) = sessions.iter().find(|s| {
            s.agent_pid
                .and_then(|p| u32::try_from(p).ok())
                .and_then(crate::procinfo::tty)
                == Some(tty)
        }) {
            return Err(refuse(format!(
                "this terminal runs agent session @{}; an agent's terminal does not answer approvals",
                agent.name.as_deref().unwrap_or("?")
            )));
        }
        Ok(())
    }
}

/// Whether the relay holds the decision of this outcome: an approver's answer, or the
/// question's timeout. Anything else was decided on this machine.
fn decided_by_relay(outcome: &WaitOutcome) -> bool {
    match outcome {
        WaitOutcome::Replied { .. } => outcome.answer().is_some(),
        WaitOutcome::Closed { timed_out, .. } => *timed_out,
        _ => false,
    }
}

/// Whether an outcome allows the call, and why, in words for the model.
fn verdict(outcome: &WaitOutcome, timeout: Duration) -> (bool, String) {
    let who = |by: Option<&repowire_protocol::PeerSummary>| {
        by.map(|f| {
            format!(
                "@{} (peer {}, circle {})",
                super::hooks::display_name(&f.name),
                f.peer_id,
                super::hooks::display_name(&f.circle),
            )
        })
        .unwrap_or_else(|| "nobody".into())
    };
    let comment = |a: &repowire_protocol::AnswerValue| {
        a.text
            .as_deref()
            .map(str::trim)
            .filter(|t| !t.is_empty())
            .map(|t| format!(": {}", sanitize::for_context(t)))
            .unwrap_or_default()
    };
    match (outcome, outcome.answer()) {
        (WaitOutcome::Replied { .. }, Some((a, by))) if a.option_id.as_deref() == Some("allow") => {
            (true, format!("approved by {}{}", who(by), comment(a)))
        }
        (WaitOutcome::Replied { .. }, Some((a, by))) => {
            (false, format!("denied by {}{}", who(by), comment(a)))
        }
        (
            WaitOutcome::Closed {
                timed_out: true, ..
            },
            _,
        ) => (
            false,
            format!(
                "nobody answered within {} s, so the call is denied",
                timeout.as_secs()
            ),
        ),
        (WaitOutcome::NoVerdict { reason, .. }, _) => (
            false,
            format!("no answer reached this machine in time ({reason}), so the call is denied"),
        ),
        (WaitOutcome::Failed { reason, .. }, _) => (
            false,
            format!(
                "the approval request failed ({}), so the call is denied",
                sanitize::for_context(reason)
            ),
        ),
        _ => (false, "the approval ended without an answer; denied".into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_an_approvers_allow_allows() {
        let o = |v: Value| -> WaitOutcome { serde_json::from_value(v).expect("an outcome") };
        let by = json!({ "name": "ana", "peer_id": "peer-a", "circle": "ops" });
        let replied = |answer: Value| {
            o(
                json!({ "state": "replied", "outcome": "answered", "correlation_id": "c",
                      "reply": { "from": by, "answer": answer } }),
            )
        };
        let closed = |timed_out: bool, answer: Value| {
            o(
                json!({ "state": "closed", "outcome": "acked", "correlation_id": "c",
                      "timed_out": timed_out, "answer": answer, "reply_text": null, "reason": null }),
            )
        };
        let allow = replied(json!({ "option_id": "allow" }));
        let deny_ = replied(json!({ "option_id": "deny", "text": "not on prod" }));
        let timed = closed(true, json!({ "option_id": "deny" }));
        let no_verdict = o(json!({ "state": "no_verdict", "reason": "x" }));
        let failed = o(
            json!({ "state": "failed", "outcome": "failed", "reason": "x", "correlation_id": "c" }),
        );
        let waiting = o(json!({ "state": "waiting", "correlation_id": "c", "message": "m" }));
        let t = Duration::from_secs(60);
        assert_eq!(
            verdict(&allow, t),
            (true, "approved by @ana (peer peer-a, circle ops)".into())
        );
        assert_eq!(
            verdict(&deny_, t),
            (
                false,
                "denied by @ana (peer peer-a, circle ops): not on prod".into()
            )
        );
        assert!(!verdict(&timed, t).0);
        assert!(!verdict(&no_verdict, t).0);
        assert!(!verdict(&failed, t).0);
        assert!(!verdict(&waiting, t).0);
        // Which denials the relay records, and which only this machine can.
        for relays in [&allow, &deny_, &timed] {
            assert!(decided_by_relay(relays), "{relays:?}");
        }
        for here in [&no_verdict, &failed, &closed(false, json!(null)), &waiting] {
            assert!(!decided_by_relay(here), "{here:?}");
        }
    }
}
