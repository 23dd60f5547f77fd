//! Notices agent processes that ended without a SessionEnd hook (a killed pane, a crash, a
//! `kill -9`) and ends their sessions within seconds: until then their peers looked `online`
//! and `session resume` refused them as live (issue 35.6). The daemon knows each session's
//! agent process (pid and start time, from the SessionStart hook), so a look at `/proc` says.

use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use super::Daemon;

/// How often the sessions' agent processes are looked at.
pub const REAP_EVERY: Duration = Duration::from_secs(2);

/// Runs until `shutdown`.
pub async fn run(daemon: Arc<Daemon>, shutdown: CancellationToken) {
    let mut tick = tokio::time::interval(REAP_EVERY);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            () = shutdown.cancelled() => return,
            _ = tick.tick() => {}
        }
        reap(&daemon).await;
    }
}

/// Ends every active session whose agent process is gone (or whose pid now names another
/// process); returns how many.
pub async fn reap(daemon: &Daemon) -> usize {
    let sessions = match daemon.store.active_sessions().await {
        Ok(sessions) => sessions,
        Err(error) => {
            tracing::warn!(%error, "reading sessions to find exited agents");
            return 0;
        }
    };
    let mut ended = 0;
    for session in sessions {
        let Some(pid) = session.agent_pid.and_then(|p| u32::try_from(p).ok()) else {
            continue;
        };
        if crate::procinfo::same_process(pid, session.agent_start) {
            continue;
        }
        tracing::info!(session = %session.session_id, pid, "agent process exited without ending its session; ending it");
        match daemon.end_session(&session).await {
            Ok(()) => ended += 1,
            Err(error) => {
                tracing::warn!(session = %session.session_id, %error, "could not end the session of an exited agent")
            }
        }
    }
    ended
}
