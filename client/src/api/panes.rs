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
