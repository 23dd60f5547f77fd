//! The typed replies about the caller's own session: `whoami` (the MCP server's proof of whose
//! tools it serves) and `identity` (`repowire whoami`). Their JSON is what `repowire whoami
//! --json` prints and what the MCP `whoami` tool returns as structured content.

use serde::{Deserialize, Serialize};

/// A session this daemon hosts: an agent runtime's session, or the daemon's own CLI peer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LocalSession {
    /// The runtime's session id (or the CLI peer's).
    pub session_id: String,
    /// The agent runtime (`claude-code` …).
    pub backend: String,
    /// The peer role (`agent` …).
    pub role: String,
    /// Its circle.
    pub circle: String,
    /// The project directory.
    pub path: Option<String>,
    /// Its tmux pane, when it runs in one.
    pub pane: Option<String>,
    /// The tmux server's socket.
    pub tmux_socket: Option<String>,
    /// The agent's process id.
    pub agent_pid: Option<i64>,
    /// The agent process's start time (clock ticks since boot), which pins the pid.
    pub agent_start: Option<i64>,
    /// The runtime's transcript file.
    pub transcript: Option<String>,
    /// Its peer id, once registered with the relay.
    pub peer_id: Option<String>,
    /// Its display name, once registered.
    pub name: Option<String>,
    /// `busy` or `idle`.
    pub turn_state: String,
    /// Running now.
    pub active: bool,
    /// Handed over to a resumed runtime session.
    pub handoff: bool,
    /// When it started (ms since 1970).
    pub started_at_ms: i64,
    /// When it ended.
    pub ended_at_ms: Option<i64>,
    /// The Repowire session (`rs-…`) the relay bound this runtime session to.
    pub repowire_session_id: Option<String>,
}

/// `repowire whoami`: who the caller acts as, and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Identity {
    /// The session it acts as.
    pub session: LocalSession,
    /// Why that one (the process ancestry, `--from`, the CLI peer).
    pub because: String,
    /// Set when the session could not be registered with the relay now: why.
    pub unregistered: Option<String>,
}

/// `end_session`: the local session ended.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EndedSession {
    /// Its runtime session id.
    pub ended: String,
    /// Its peer's display name, if it had a peer.
    pub name: Option<String>,
}

/// `shutdown`: the daemon is stopping (it lets go of its home's lock last).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Stopping {
    /// Always true.
    pub stopping: bool,
}

/// `hook`: what the hook prints for its agent runtime (the runtime's own hook-output JSON), if
/// anything.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HookReply {
    /// The runtime's hook output; `None`: print nothing.
    #[serde(default)]
    pub output: Option<serde_json::Value>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// `repowire whoami --json`, as documented: the fields and their order.
    #[test]
    fn an_identity_reads_and_writes_the_documented_json() {
        let fixture = json!({
            "session": {
                "session_id": "9f0c", "backend": "claude-code", "role": "agent",
                "circle": "default", "path": "/work/app", "pane": "%3",
                "tmux_socket": "/tmp/tmux-0/default", "agent_pid": 4242,
                "agent_start": 1234567, "transcript": null, "peer_id": "peer-abc",
                "name": "app", "turn_state": "idle", "active": true, "handoff": false,
                "started_at_ms": 1790000000000_i64, "ended_at_ms": null,
                "repowire_session_id": null,
            },
            "because": "this process descends from the agent of session 9f0c",
            "unregistered": null,
        });
        let identity: Identity = serde_json::from_value(fixture.clone()).expect("reads");
        let written = serde_json::to_value(&identity).expect("writes");
        assert_eq!(written, fixture);
        let keys =
            |v: &serde_json::Value| v.as_object().map(|o| o.keys().cloned().collect::<Vec<_>>());
        assert_eq!(keys(&written["session"]), keys(&fixture["session"]));
        assert_eq!(keys(&written), keys(&fixture));
    }
}
