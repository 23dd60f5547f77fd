//! Local tmux panes: which run agents, which of those the daemon hosts, and linking an
//! orphan pane (an agent the daemon missed) — fail-closed: only a pane whose program is not a
//! shell, and only reported linked once its peer is registered with the relay.

use super::store::SessionRow;
use super::{Daemon, errors};
use crate::api::{ApiError, LocalSession, Pane, PaneState};
use crate::runtimes::Runtime;
use crate::tmux;

/// Program names of agent runtimes, for spotting unregistered agent panes.
pub const AGENTS: &[&str] = &["claude", "codex", "gemini", "opencode", "aider", "pi"];

impl Daemon {
    /// Panes of the tmux server at `socket` (default server when `None`), with the session
    /// each belongs to.
    pub async fn panes(&self, socket: Option<&str>) -> Result<Vec<Pane>, ApiError> {
        let panes = match tmux::panes(socket).await {
            Ok(panes) => panes,
            // No tmux server running: there are no panes, which is an answer, not an error.
            Err(tmux::TmuxError::Failed { stderr, .. })
                if stderr.contains("no server running")
                    || stderr.contains("error connecting to") =>
            {
                Vec::new()
            }
            Err(e) => {
                return Err(ApiError::new(crate::api::DaemonCode::Tmux, e.to_string())
                    .hint("is tmux installed?"));
            }
        };
        let sessions = self
            .store
            .active_sessions()
            .await
            .map_err(errors::store_error)?;
        let mut out = Vec::new();
        for p in panes {
            let session = sessions.iter().find(|s| {
                s.pane.as_deref() == Some(p.pane_id.as_str())
                    && s.agent_pid
                        .is_some_and(|a| crate::procinfo::is_self_or_ancestor(p.pid, a as u32))
            });
            let program = crate::procinfo::program_in(p.pid);
            let program_name = program.and_then(crate::procinfo::comm);
            let agent_like = program_name.as_deref().is_some_and(|c| AGENTS.contains(&c));
            out.push(Pane {
                pane: p.pane_id,
                command: p.command,
                path: p.path,
                program: program_name,
                program_pid: program,
                state: match (session, agent_like) {
                    (Some(_), _) => PaneState::Registered,
                    (None, true) => PaneState::Orphan,
                    (None, false) => PaneState::Other,
                },
                peer_id: session.and_then(|s| s.peer_id.clone()),
                name: session.and_then(|s| s.name.clone()),
            });
        }
        Ok(out)
    }

    /// Adopts an agent running in `pane` that never registered.
    pub async fn link(
        &self,
        pane: &str,
        backend: Option<Runtime>,
        socket: Option<&str>,
    ) -> Result<LocalSession, ApiError> {
        let info = tmux::pane(socket, pane).await.map_err(|e| {
            ApiError::new(
                crate::api::DaemonCode::UnknownPane,
                format!("no pane {pane}: {e}"),
            )
        })?;
        if info.dead {
            return Err(ApiError::new(
                crate::api::DaemonCode::UnknownPane,
                format!("pane {pane} is dead"),
            ));
        }
        // The runtime's own process, as its hooks find it (Codex's native `codex`, not the
        // `node` launcher above it); else the first program that is not a shell.
        let tree = crate::procinfo::tree(info.pid);
        let runtime_in = tree
            .iter()
            .find_map(|&p| {
                let comm = crate::procinfo::comm(p)?;
                Runtime::ALL
                    .into_iter()
                    .find(|r| r.program() == comm)
                    .map(|r| (p, r))
            })
            .or_else(|| {
                // Gemini CLI runs as `node …/gemini` and relaunches itself as a child `node`:
                // the deepest one is the process its hooks descend from.
                tree.iter()
                    .rev()
                    .find(|&&p| {
                        crate::procinfo::comm(p).as_deref() == Some("node")
                            && crate::procinfo::cmdline(p).is_some_and(|args| {
                                args.iter().skip(1).take(3).any(|a| a.ends_with("/gemini"))
                            })
                    })
                    .map(|&p| (p, Runtime::Gemini))
            });
        let backend = match (backend, runtime_in) {
            (Some(asked), Some((_, found))) if asked != found => {
                return Err(ApiError::new(
                    repowire_protocol::ErrorCode::InvalidRequest,
                    format!(
                        "pane {pane} runs {}, not {}: nothing was linked",
                        found.display(),
                        asked.display()
                    ),
                ));
            }
            (Some(asked), _) => asked,
            (None, Some((_, found))) => found,
            (None, None) => Runtime::ClaudeCode,
        };
        let agent = runtime_in
            .map(|(p, _)| p)
            .or_else(|| crate::procinfo::program_in(info.pid))
            .ok_or_else(|| {
                ApiError::new(
                    crate::api::DaemonCode::NotAnAgent,
                    format!(
                        "pane {pane} runs only a shell (`{}`): nothing to link",
                        info.command
                    ),
                )
                .hint("start the agent in the pane first, or let its SessionStart hook register it")
            })?;
        let sessions = self
            .store
            .active_sessions()
            .await
            .map_err(errors::store_error)?;
        // Any session whose agent runs in this pane (the agent itself, or a process under
        // the one found: Gemini's hooks name its child `node`).
        if let Some(s) = sessions.iter().find(|s| {
            s.agent_pid
                .and_then(|p| u32::try_from(p).ok())
                .is_some_and(|p| tree.contains(&p))
        }) {
            return Err(ApiError::new(
                repowire_protocol::ErrorCode::Conflict,
                format!(
                    "pane {pane} already runs a registered session (@{})",
                    s.name.as_deref().unwrap_or("?")
                ),
            ));
        }
        let row = SessionRow {
            path: Some(info.path.clone()).filter(|p| !p.is_empty()),
            pane: Some(info.pane_id.clone()),
            tmux_socket: socket.map(str::to_owned),
            agent_pid: Some(i64::from(agent)),
            agent_start: crate::procinfo::start_time(agent),
            turn_state: "idle".into(),
            // Its own hooks, when they fire, name the runtime's session id: they take it over.
            handoff: true,
            ..SessionRow::new(
                format!("linked-{}-{agent}", pane.trim_start_matches('%')),
                backend.backend(),
                "agent",
                &self.settings.circle,
            )
        };
        self.store
            .upsert_session(&row)
            .await
            .map_err(errors::store_error)?;
        match self.register(&row, super::RELAY_TIMEOUT).await {
            Ok(row) => Ok(row.into()),
            Err(e) => {
                // No transportless peer is left behind.
                let _ = self.store.delete_session(&row.session_id).await;
                Err(ApiError::new(
                    e.code,
                    format!("linking failed, nothing was kept: {}", e.message),
                )
                .hint("retry once `repowire daemon status` shows the relay link connected"))
            }
        }
    }
}
