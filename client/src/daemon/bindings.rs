//! Session bindings on this machine: each registered runtime session is bound to its Repowire
//! session (`rs-…`), which the relay keeps (protocol.md §10.14) and this daemon remembers, so
//! that the work stream keeps its id across `/clear` (the peer is handed over with it), a
//! resume (`claude --resume ID` names the same runtime session), a daemon restart and a relay
//! restart. And the session controls: listing sessions, resuming a detached local one.

use std::path::Path;

use repowire_protocol::{
    BindSession, Body, Frame, ListSessions, PeerId, SessionInfo, SessionStatus, TranscriptLocator,
    is_runtime_session_id,
};

use super::errors::{store_error, unexpected};
use super::store::SessionRow;
use super::{CLI_SESSION, Daemon, RELAY_TIMEOUT};
use crate::api::ApiError;
use crate::runtimes::Runtime;

/// How often a turn's end may send a session's transcript cursor.
const CURSOR_EVERY: std::time::Duration = std::time::Duration::from_secs(60);

/// True for a session whose id is its runtime's own (not the person's peer, not a pane adopted
/// by `repowire link` before its hooks named it).
fn is_runtime_session(row: &SessionRow) -> bool {
    row.session_id != CLI_SESSION
        && !row.session_id.starts_with("linked-")
        && is_runtime_session_id(&row.session_id)
}

/// Where the runtime keeps this session's history, and how long it is now.
fn transcript_of(row: &SessionRow) -> Option<TranscriptLocator> {
    let path = row.transcript.clone()?;
    let cursor = std::fs::metadata(Path::new(&path)).ok().map(|m| m.len());
    Some(TranscriptLocator { path, cursor })
}

impl Daemon {
    /// Binds a registered session (`peer` executes it) to its Repowire session. `wait`: wait
    /// for the relay's answer and remember the id (at registration); otherwise send and go on
    /// (a transcript cursor moving at a turn's end). Failures are logged: a binding is
    /// metadata, and messages flow without it.
    pub(super) async fn bind_session(&self, row: &SessionRow, peer: &str, wait: bool) {
        if !row.active || !is_runtime_session(row) {
            return;
        }
        let frame = Frame::new(Body::BindSession(BindSession {
            peer_id: PeerId(peer.to_owned()),
            session_id: row.repowire_session_id.clone(),
            runtime_session_id: row.session_id.clone(),
            transcript: transcript_of(row),
            source: None,
        }));
        if !wait {
            // A turn's end: the cursor moves, at most once a minute per session.
            let now = std::time::Instant::now();
            let mut sent = self.cursors_sent.lock().unwrap_or_else(|p| p.into_inner());
            let due = sent
                .get(&row.session_id)
                .is_none_or(|at| now.duration_since(*at) >= CURSOR_EVERY);
            if due && self.link.send(&frame) {
                sent.insert(row.session_id.clone(), now);
            }
            return;
        }
        match self.link.request(frame, RELAY_TIMEOUT).await {
            Ok(Frame {
                body: Body::SessionBound(b),
                ..
            }) => {
                if row.repowire_session_id.as_deref() != Some(b.session.session_id.as_str())
                    && let Err(error) = self
                        .store
                        .set_repowire_session(&row.session_id, &b.session.session_id)
                        .await
                {
                    tracing::warn!(%error, "could not record the session's binding");
                }
                tracing::debug!(session = %row.session_id, bound = %b.session.session_id, "session bound");
            }
            Ok(other) => {
                tracing::warn!(session = %row.session_id, answer = other.body.type_name(), "session not bound")
            }
            Err(error) => {
                tracing::warn!(session = %row.session_id, %error, "session not bound")
            }
        }
    }

    /// The Repowire sessions the actor may see (every circle with `all_circles`).
    pub async fn work_sessions(
        &self,
        from: Option<&str>,
        caller_pid: Option<u32>,
        all_circles: bool,
    ) -> Result<Vec<SessionInfo>, ApiError> {
        let (_, peer) = self.registered_actor(from, caller_pid).await?;
        let frame = Frame::new(Body::ListSessions(ListSessions {
            peer_id: PeerId(peer),
            all_circles,
        }));
        match self.ask_relay(frame).await? {
            Body::Sessions(l) => Ok(l.sessions),
            other => Err(unexpected(&other)),
        }
    }

    /// `repowire session resume`: starts the runtime's own resume of a detached session of this
    /// machine in a new tmux window (`claude --resume ID`, `codex resume ID`, in its project;
    /// `command` instead of the runtime's program when given), or with
    /// `dry_run` says the command. Refused, with the reason, for a session that is attached,
    /// of another machine, of a runtime without a resume, or whose project is gone.
    pub async fn resume_session(
        &self,
        session: &str,
        command: Option<&str>,
        dry_run: bool,
        tmux_socket: Option<&str>,
    ) -> Result<crate::api::Resumed, ApiError> {
        let sessions = self.work_sessions(Some(CLI_SESSION), None, true).await?;
        let s = sessions
            .into_iter()
            .find(|s| s.session_id == session)
            .ok_or_else(|| {
                ApiError::new(
                    crate::api::DaemonCode::UnknownSession,
                    format!("no session `{session}`"),
                )
                .hint("`repowire session list --all` lists the sessions")
            })?;
        let (backend, runtime, project) =
            resume_plan(&s, &self.settings.machine, |p| Path::new(p).is_dir())
                .map_err(|why| ApiError::new(crate::api::DaemonCode::NotResumable, why))?;
        // The relay calls it detached, but right after a reconnect it may not have heard again
        // from a session that still runs here: a second agent must not resume the same
        // transcript.
        let rows = self.store.active_sessions().await.map_err(store_error)?;
        if let Some(running) = running_here(&s, &rows, agent_alive) {
            return Err(ApiError::new(
                crate::api::DaemonCode::NotResumable,
                format!(
                    "{session} still runs on this machine (runtime session {}, agent pid {}); resume only a session whose agent has ended",
                    running.session_id,
                    running
                        .agent_pid
                        .map_or("unknown".into(), |p| p.to_string())
                ),
            ));
        }
        let program = command.unwrap_or(backend.program());
        let line = std::iter::once(program.to_owned())
            .chain(backend.resume_args(&runtime))
            .collect::<Vec<_>>()
            .join(" ");
        if dry_run {
            return Ok(crate::api::Resumed {
                session: s,
                command: line,
                cwd: project,
                started: false,
                pane: None,
            });
        }
        // The agent's hooks find this machine's Repowire through these, whatever the tmux
        // server's own environment holds.
        let env = [
            (
                "HOME",
                crate::config::user_home().to_string_lossy().into_owned(),
            ),
            (
                "REPOWIRE_HOME",
                self.settings.home.to_string_lossy().into_owned(),
            ),
            // Its hooks name the session they continue, whatever runtime id it gets.
            ("REPOWIRE_SESSION", s.session_id.clone()),
        ];
        let pane = crate::tmux::new_window(tmux_socket, &project, &line, &env)
            .await
            .map_err(|e| {
                ApiError::new(
                    crate::api::DaemonCode::Tmux,
                    format!("starting the resume: {e}"),
                )
            })?;
        tracing::info!(session, %pane, command = %line, "session resumed");
        Ok(crate::api::Resumed {
            session: s,
            command: line,
            cwd: project,
            started: true,
            pane: Some(pane),
        })
    }

    /// The session a local peer executes, as the relay has it (for `peer describe`).
    pub async fn session_of_peer(&self, peer_id: &str) -> Result<Option<SessionInfo>, ApiError> {
        let sessions = self.work_sessions(Some(CLI_SESSION), None, true).await?;
        Ok(sessions.into_iter().find(|s| {
            s.executor
                .as_ref()
                .is_some_and(|e| e.peer_id.as_str() == peer_id)
        }))
    }
}

/// What resuming session `s` on `machine` runs: its runtime, the runtime session id to resume
/// and the project to run it in; or why it cannot be resumed here.
fn resume_plan(
    s: &SessionInfo,
    machine: &str,
    is_dir: impl Fn(&str) -> bool,
) -> Result<(Runtime, String, String), String> {
    let session = &s.session_id;
    if s.status == SessionStatus::Active {
        let executor = s
            .executor
            .as_ref()
            .map(|e| format!("@{} ({})", e.name, e.peer_id))
            .unwrap_or_else(|| "?".into());
        return Err(format!(
            "{session} is attached to {executor}, which is live; resume only a detached session"
        ));
    }
    let Some(backend) = Runtime::from_backend(&s.backend) else {
        let known: Vec<&str> = Runtime::ALL.iter().map(|r| r.backend()).collect();
        return Err(format!(
            "{session} runs on `{}`, which repowire cannot resume (only {})",
            s.backend,
            known.join(" and ")
        ));
    };
    if s.machine.as_deref() != Some(machine) {
        return Err(format!(
            "{session} ran on machine `{}`; resume it there",
            s.machine.as_deref().unwrap_or("?")
        ));
    }
    let runtime = s
        .runtime_session_ids
        .last()
        .filter(|id| is_runtime_session_id(id))
        .ok_or_else(|| format!("{session} has no runtime session id to resume"))?;
    let project = s
        .project_path
        .clone()
        .filter(|p| is_dir(p))
        .ok_or_else(|| {
            format!(
                "the project of {session} ({}) is not a directory here",
                s.project_path.as_deref().unwrap_or("unknown")
            )
        })?;
    Ok((backend, runtime.clone(), project))
}

/// The session of this machine's state, if any, that still executes `target` (bound to it, or
/// running one of its runtime ids) with its agent alive.
fn running_here<'a>(
    target: &SessionInfo,
    rows: &'a [SessionRow],
    alive: impl Fn(&SessionRow) -> bool,
) -> Option<&'a SessionRow> {
    rows.iter().find(|r| {
        r.active
            && (r.repowire_session_id.as_deref() == Some(target.session_id.as_str())
                || target.runtime_session_ids.contains(&r.session_id))
            && alive(r)
    })
}

/// Whether the agent process of a session still runs: its pid, started when it was recorded.
/// A session whose agent is not known counts as running.
fn agent_alive(row: &SessionRow) -> bool {
    let Some(pid) = row.agent_pid.and_then(|p| u32::try_from(p).ok()) else {
        return true;
    };
    crate::procinfo::same_process(pid, row.agent_start)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_session_still_running_here_is_found_by_its_binding_or_its_runtime_id() {
        let target = detached();
        let row = |id: &str, bound: Option<&str>, active: bool| SessionRow {
            repowire_session_id: bound.map(str::to_owned),
            active,
            ..SessionRow::new(id.into(), "claude-code", "agent", "default")
        };
        let bound = [row("other-9", Some("rs-0123456789abcdef"), true)];
        assert!(running_here(&target, &bound, |_| true).is_some());
        assert!(
            running_here(&target, &bound, |_| false).is_none(),
            "its agent ended"
        );
        let by_runtime = [row("cur-2", None, true)];
        assert!(running_here(&target, &by_runtime, |_| true).is_some());
        let ended = [row("cur-2", Some("rs-0123456789abcdef"), false)];
        assert!(running_here(&target, &ended, |_| true).is_none());
        let unrelated = [row("x-1", Some("rs-ffffffffffffffff"), true)];
        assert!(running_here(&target, &unrelated, |_| true).is_none());
    }

    #[test]
    fn an_agent_is_alive_while_its_pid_runs_the_process_that_was_recorded() {
        let mut me = SessionRow::new("s".into(), "claude-code", "agent", "default");
        assert!(agent_alive(&me), "unknown agent: taken as running");
        let pid = std::process::id();
        me.agent_pid = Some(i64::from(pid));
        me.agent_start = crate::procinfo::start_time(pid);
        assert!(agent_alive(&me));
        me.agent_start = me.agent_start.map(|s| s + 1);
        assert!(!agent_alive(&me), "the pid was reused by another process");
    }

    fn detached() -> SessionInfo {
        SessionInfo {
            session_id: "rs-0123456789abcdef".into(),
            backend: "claude-code".into(),
            circle: "default".into(),
            project_path: Some("/work/api".into()),
            machine: Some("laptop".into()),
            status: SessionStatus::Detached,
            executor: None,
            runtime_session_ids: vec!["old-1".into(), "cur-2".into()],
            transcript: None,
            created_at_ms: 1,
            last_seen_ms: 2,
        }
    }

    fn plan(s: &SessionInfo) -> Result<(Runtime, String, String), String> {
        resume_plan(s, "laptop", |p| p == "/work/api")
    }

    #[test]
    fn a_detached_local_session_resumes_its_current_runtime_session_in_its_project() {
        let got = plan(&detached()).expect("resumable");
        assert_eq!(
            got,
            (
                Runtime::ClaudeCode,
                "cur-2".to_string(),
                "/work/api".to_string()
            )
        );
        let mut codex = detached();
        codex.backend = "codex".into();
        assert_eq!(plan(&codex).expect("resumable").0, Runtime::Codex);
        assert_eq!(
            Runtime::Codex.resume_args("cur-2"),
            ["resume".to_string(), "cur-2".to_string()]
        );
    }

    #[test]
    fn each_reason_not_to_resume_is_said() {
        type Change = fn(&mut SessionInfo);
        let cases: Vec<(Change, &str)> = vec![
            (|s| s.status = SessionStatus::Active, "is attached to ?"),
            (|s| s.backend = "aider".into(), "runs on `aider`"),
            (
                |s| s.machine = Some("desk".into()),
                "ran on machine `desk`; resume it there",
            ),
            (|s| s.machine = None, "ran on machine `?`"),
            (
                |s| s.runtime_session_ids.clear(),
                "has no runtime session id to resume",
            ),
            (
                |s| s.runtime_session_ids = vec!["-rf".into()],
                "has no runtime session id to resume",
            ),
            (
                |s| s.project_path = Some("/gone".into()),
                "(/gone) is not a directory here",
            ),
            (|s| s.project_path = None, "(unknown) is not a directory"),
        ];
        for (change, want) in cases {
            let mut s = detached();
            change(&mut s);
            let why = plan(&s).expect_err(want);
            assert!(why.contains(want), "{why:?} should say {want:?}");
        }
    }
}
