//! The typed replies about local tmux panes and sessions started or adopted there: `panes`
//! (`repowire session panes`), `link` (`repowire link`) and `resume_session` (`repowire session
//! resume`). Their JSON is what those commands print with `--json`.

use repowire_protocol::SessionInfo;
use serde::{Deserialize, Serialize};

/// One pane of the tmux server, and what runs in it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Pane {
    /// Its id (`%3`).
    pub pane: String,
    /// tmux's name for what runs in it.
    pub command: String,
    /// Its working directory.
    pub path: String,
    /// The program in its foreground, if not a shell.
    pub program: Option<String>,
    /// That program's pid.
    pub program_pid: Option<u32>,
    /// Whether an agent runs there that this daemon hosts.
    pub state: PaneState,
    /// The hosted session's peer id.
    pub peer_id: Option<String>,
    /// The hosted session's peer name.
    pub name: Option<String>,
}

/// What a pane is to this daemon.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PaneState {
    /// It runs a session this daemon hosts.
    Registered,
    /// It runs an agent runtime this daemon does not host (`repowire link` adopts it).
    Orphan,
    /// Anything else.
    Other,
}

impl PaneState {
    /// Its name, as in JSON.
    pub fn as_str(self) -> &'static str {
        match self {
            PaneState::Registered => "registered",
            PaneState::Orphan => "orphan",
            PaneState::Other => "other",
        }
    }
}

/// `resume_session`: the runtime's resume command for a detached session, started in a new
/// tmux window or (dry run) only said.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Resumed {
    /// The work stream resumed.
    pub session: SessionInfo,
    /// The command line (`claude --resume ID`).
    pub command: String,
    /// Where it runs: the session's project.
    pub cwd: String,
    /// It was started (false: a dry run).
    pub started: bool,
    /// The new window's pane, once started.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pane: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// `session panes --json`, `session resume --json`, `outbox list|drop --json`, `session end`
    /// and `peer status --json` keep their shapes, key order included.
    #[test]
    fn the_smaller_replies_keep_their_json_shape() {
        fn pinned<T: serde::Serialize + serde::de::DeserializeOwned>(fixture: serde_json::Value) {
            let read: T = serde_json::from_value(fixture.clone()).expect("reads");
            let written = serde_json::to_value(&read).expect("writes");
            assert_eq!(written, fixture);
            let keys = |v: &serde_json::Value| {
                v.as_object().map(|o| o.keys().cloned().collect::<Vec<_>>())
            };
            assert_eq!(keys(&written), keys(&fixture));
        }
        pinned::<Pane>(
            json!({"pane": "%3", "command": "claude", "path": "/w/app", "program": "claude",
            "program_pid": 4242, "state": "orphan", "peer_id": null, "name": null}),
        );
        pinned::<Resumed>(
            json!({"session": {"session_id": "rs-1", "backend": "claude-code", "circle": "dev",
            "status": "detached", "runtime_session_ids": ["9f0c"], "created_at_ms": 1, "last_seen_ms": 2},
            "command": "claude --resume 9f0c", "cwd": "/w/app", "started": true, "pane": "%7"}),
        );
        pinned::<crate::api::OutboxReport>(json!({"realm": "r1", "realms": [
            {"realm": "r1", "current": true, "messages": 2, "oldest_ms": 5}]}));
        pinned::<crate::api::OutboxDropped>(json!({"realm": "r0", "dropped": ["m1", "m2"]}));
        pinned::<crate::api::EndedSession>(json!({"ended": "9f0c", "name": "app"}));
        pinned::<crate::api::MessageStatus>(json!({
            "message": {"message_id": "m1", "peer_id": "peer-a", "kind": "ask", "to_name": "api",
                "text": "ready?", "correlation_id": "ask-1", "state": "delivered", "error": null,
                "reply": null, "created_at_ms": 1},
            "events": [{"recipient": "peer-b", "state": "delivered", "reason": null, "at_ms": 2}]}));
    }
}
