//! Which local session a request acts as, and why: proven by process ancestry (the agent
//! process that ran the session's hooks), named by `--from`, or else the daemon's own peer for
//! the person at the terminal. `repowire whoami` shows the same reasoning.

use super::errors::store_error;
use super::store::SessionRow;
use super::{CLI_SESSION, Daemon, RELAY_TIMEOUT};
use crate::api::ApiError;

/// A session proven by process ancestry: the session and the ancestor that proves it.
struct Proven {
    session: SessionRow,
    pid: u32,
}

/// The session a request acts as and the reason, in words.
pub struct Acting {
    pub session: SessionRow,
    pub because: String,
}

impl Daemon {
    /// The agent session `pid` belongs to: the nearest ancestor that is a registered agent
    /// process (same pid and start time). `Err` when an agent program the daemon does not know
    /// comes first; `Ok(None)` when no agent is among the ancestors.
    fn proven_session(sessions: &[SessionRow], pid: u32) -> Result<Option<Proven>, ApiError> {
        for ancestor in crate::procinfo::ancestors(pid) {
            if let Some(s) = sessions.iter().find(|s| {
                s.session_id != CLI_SESSION
                    && s.agent_pid == Some(i64::from(ancestor))
                    && s.agent_start.is_some()
                    && crate::procinfo::same_process(ancestor, s.agent_start)
            }) {
                return Ok(Some(Proven {
                    session: s.clone(),
                    pid: ancestor,
                }));
            }
            if let Some(program) = crate::procinfo::comm(ancestor)
                && super::panes::AGENTS.contains(&program.as_str())
            {
                return Err(ApiError::new(
                    crate::api::DaemonCode::IdentityUnproven,
                    format!(
                        "this `{program}` session (pid {ancestor}) is not registered with the repowire daemon"
                    ),
                )
                .hint("install the hooks with `repowire setup` and restart the agent, or adopt its pane with `repowire link --pane $TMUX_PANE`"));
            }
        }
        Ok(None)
    }

    /// The session a request acts as: the agent session whose process started the caller
    /// (nearest ancestor first, proven by pid and start time); else `from` (a local peer id,
    /// name or session id) — which an agent's process may not use to speak as another
    /// session; else the daemon's own CLI peer. An agent the daemon does not know is refused
    /// rather than allowed to speak as the human at the terminal.
    pub async fn actor(
        &self,
        from: Option<&str>,
        caller_pid: Option<u32>,
    ) -> Result<SessionRow, ApiError> {
        Ok(self.acting(from, caller_pid).await?.session)
    }

    /// [`Daemon::actor`], with the reason.
    pub async fn acting(
        &self,
        from: Option<&str>,
        caller_pid: Option<u32>,
    ) -> Result<Acting, ApiError> {
        let sessions = self.store.active_sessions().await.map_err(store_error)?;
        let proven = match caller_pid {
            Some(pid) => Self::proven_session(&sessions, pid)?,
            None => None,
        };
        if let Some(from) = from {
            let named = sessions
                .iter()
                .find(|s| {
                    s.session_id == from
                        || s.peer_id.as_deref() == Some(from)
                        || s.name.as_deref() == Some(from)
                })
                .cloned()
                .ok_or_else(|| {
                    ApiError::new(
                        crate::api::DaemonCode::UnknownSession,
                        format!("no local session `{from}`"),
                    )
                    .hint("`repowire daemon status` lists this daemon's sessions")
                })?;
            if let Some(own) = &proven
                && own.session.session_id != named.session_id
            {
                let name = own.session.name.as_deref().unwrap_or("?");
                return Err(ApiError::new(
                    crate::api::DaemonCode::IdentityMismatch,
                    format!(
                        "this process runs inside agent session @{name} (agent process {}); it may not act as `{from}`",
                        own.pid
                    ),
                )
                .hint(format!(
                    "run the command from a terminal outside that agent; if @{name} is not an agent at all \
                     (e.g. a hook was run by hand here), end it with `repowire session end {}`",
                    own.session.session_id
                )));
            }
            return Ok(Acting {
                session: named,
                because: format!("`--from {from}` names it"),
            });
        }
        if let Some(own) = proven {
            let program = crate::procinfo::comm(own.pid).unwrap_or_else(|| "?".into());
            return Ok(Acting {
                because: format!(
                    "this process descends from agent process {} (`{program}`), which runs session {}",
                    own.pid, own.session.session_id
                ),
                session: own.session,
            });
        }
        let because = "no agent session is among this process's ancestors: it acts as the \
                       daemon's own peer for the person at the terminal"
            .to_owned();
        if let Some(cli) = sessions.into_iter().find(|s| s.session_id == CLI_SESSION) {
            return Ok(Acting {
                session: cli,
                because,
            });
        }
        let row = SessionRow::new(CLI_SESSION.into(), "cli", "human", &self.settings.circle);
        self.store.upsert_session(&row).await.map_err(store_error)?;
        Ok(Acting {
            session: row,
            because,
        })
    }

    /// The actor, registered with the relay (registering it now if it has no peer id yet).
    pub async fn registered_actor(
        &self,
        from: Option<&str>,
        caller_pid: Option<u32>,
    ) -> Result<(SessionRow, String), ApiError> {
        let session = self.actor(from, caller_pid).await?;
        self.registered(session).await
    }

    /// `session`, registered with the relay (now, if it has no peer id yet).
    pub async fn registered(&self, session: SessionRow) -> Result<(SessionRow, String), ApiError> {
        if let Some(peer) = session.peer_id.clone() {
            return Ok((session, peer));
        }
        let session = self.register(&session, RELAY_TIMEOUT).await?;
        let peer = session.peer_id.clone().unwrap_or_default();
        Ok((session, peer))
    }

    /// `repowire whoami`: who the caller acts as and why. The peer is registered when the
    /// relay is reachable; if it is not, the session is shown without a peer id.
    pub async fn identity(
        &self,
        from: Option<&str>,
        caller_pid: Option<u32>,
    ) -> Result<crate::api::Identity, ApiError> {
        let Acting { session, because } = self.acting(from, caller_pid).await?;
        let (session, registration) = match self.registered(session.clone()).await {
            Ok((session, _)) => (session, None),
            Err(e) => (session, Some(e.message)),
        };
        Ok(crate::api::Identity {
            session: session.into(),
            because,
            unregistered: registration,
        })
    }

    /// The agent session the caller belongs to, proven by process ancestry (pid and start
    /// time of the agent that ran its SessionStart hook) and, when given, its tmux pane.
    /// There is no fallback: an unproven caller is refused. (How the MCP server learns whose
    /// tools it serves.)
    pub async fn whoami(
        &self,
        caller_pid: Option<u32>,
        tmux_pane: Option<&str>,
    ) -> Result<crate::api::LocalSession, ApiError> {
        let unproven = |why: String| {
            ApiError::new(crate::api::DaemonCode::IdentityUnproven, why).hint(
                "run the MCP server from an agent session whose hooks are installed (`repowire setup`), \
                 or adopt the agent's pane with `repowire link --pane $TMUX_PANE`",
            )
        };
        let pid = caller_pid.ok_or_else(|| unproven("the caller's process is unknown".into()))?;
        let sessions = self.store.active_sessions().await.map_err(store_error)?;
        let Some(Proven { session, .. }) = Self::proven_session(&sessions, pid)? else {
            return Err(unproven(
                "this process does not descend from an agent session this daemon registered".into(),
            ));
        };
        if let (Some(claimed), Some(own)) = (tmux_pane, session.pane.as_deref())
            && claimed != own
        {
            return Err(unproven(format!(
                "TMUX_PANE {claimed} is not the pane of the session this process belongs to ({own})"
            )));
        }
        let (session, _) = self.registered(session).await?;
        Ok(session.into())
    }

    /// `repowire session end`: ends a local agent session by session id, peer id or name.
    pub async fn end_named_session(&self, id: &str) -> Result<crate::api::EndedSession, ApiError> {
        let sessions = self.store.active_sessions().await.map_err(store_error)?;
        let Some(session) = sessions.into_iter().find(|s| {
            s.session_id == id || s.peer_id.as_deref() == Some(id) || s.name.as_deref() == Some(id)
        }) else {
            return Err(ApiError::new(
                crate::api::DaemonCode::UnknownSession,
                format!("no active local session `{id}`"),
            )
            .hint("`repowire daemon status` lists this daemon's sessions"));
        };
        if session.session_id == CLI_SESSION {
            return Err(ApiError::new(
                repowire_protocol::ErrorCode::InvalidRequest,
                "the daemon's own peer (for the person at the terminal) is not a session to end",
            )
            .hint("`repowire daemon stop` takes it offline with the daemon"));
        }
        self.end_session(&session).await?;
        Ok(crate::api::EndedSession {
            ended: session.session_id,
            name: session.name,
        })
    }
}
