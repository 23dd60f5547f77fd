//! The agent runtimes Repowire wires in, and what differs between them: the names of their
//! hook events, the JSON their hooks answer with, how their input box looks in tmux, how a
//! session is resumed, and whether our MCP server is registered with them. Everything else —
//! registration, turn state, hand-over, approvals, the wake's safety checks — is shared and
//! lives in the daemon.
//!
//! One enum rather than a trait object: each runtime is a fixed, known set of facts
//! (docs/agents/*.md), and an exhaustive `match` makes adding one a compile error in every
//! place that must decide something for it.

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::api::HookEvent;

pub mod claude;
mod codex;
mod gemini;
mod gemini_transcript;
mod opencode;
mod tools;

pub use codex::{codex_home, config_path as codex_config_path};
pub use gemini::{gemini_dir, settings_path as gemini_settings_path};
pub use opencode::{
    config_dir as opencode_config_dir, config_path as opencode_config_path,
    plugin_path as opencode_plugin_path,
};

/// An agent runtime. Serialized (the local API, the `backend` a peer registers with) and
/// parsed (`--runtime`) in kebab-case.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize, clap::ValueEnum,
)]
#[serde(rename_all = "kebab-case")]
pub enum Runtime {
    /// Anthropic's Claude Code (`claude`).
    #[default]
    ClaudeCode,
    /// OpenAI's Codex CLI (`codex`).
    Codex,
    /// Google's Gemini CLI (`gemini`).
    Gemini,
    /// OpenCode (`opencode`), through the plugin `repowire setup` writes.
    #[serde(rename = "opencode")]
    #[value(name = "opencode")]
    OpenCode,
}

/// What a wake may type into a runtime's pane, read off the screen.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum InputBox {
    /// The input box, with its text (whitespace removed; empty when it shows only a
    /// placeholder).
    Text(String),
    /// The box is there but the agent is working: Enter would not submit a new prompt (Codex
    /// would steer the running turn with it).
    Busy,
    /// No input box this runtime draws is on the screen (a dialog, another program's UI).
    Unknown,
}

impl Runtime {
    /// Every runtime, in the order setup reports them.
    pub const ALL: [Runtime; 4] = [
        Runtime::ClaudeCode,
        Runtime::Codex,
        Runtime::Gemini,
        Runtime::OpenCode,
    ];

    /// The `backend` string a peer registers with, and the `--runtime` spelling.
    pub fn backend(self) -> &'static str {
        match self {
            Runtime::ClaudeCode => "claude-code",
            Runtime::Codex => "codex",
            Runtime::Gemini => "gemini",
            Runtime::OpenCode => "opencode",
        }
    }

    /// The runtime of a `backend` string, if it is one of ours.
    pub fn from_backend(backend: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|r| r.backend() == backend)
    }

    /// How people call it.
    pub fn display(self) -> &'static str {
        match self {
            Runtime::ClaudeCode => "Claude Code",
            Runtime::Codex => "Codex",
            Runtime::Gemini => "Gemini CLI",
            Runtime::OpenCode => "OpenCode",
        }
    }

    /// The program name (`comm`) of the runtime's own process (the one its hooks descend
    /// from; for Codex the native binary under its `node` launcher), and the program
    /// `repowire session resume` runs.
    pub fn program(self) -> &'static str {
        match self {
            Runtime::ClaudeCode => "claude",
            Runtime::Codex => "codex",
            // Its process is `node` (it even relaunches itself as a child `node`): `link`
            // finds it only by the first program in the pane.
            Runtime::Gemini => "gemini",
            // A native binary (Bun): its plugin, and so our hook, run inside it.
            Runtime::OpenCode => "opencode",
        }
    }

    /// The runtime's name for one of our hook events; `None` when it has no such event
    /// (Codex has no Notification: its Stop is the end of every turn).
    pub fn event_name(self, event: HookEvent) -> Option<&'static str> {
        match (self, event) {
            (Runtime::Codex, HookEvent::Notification) => None,
            // Gemini's Notification is not an idle signal.
            (Runtime::Gemini, HookEvent::Notification) => None,
            (Runtime::Gemini, HookEvent::PreToolUse) => Some("BeforeTool"),
            (Runtime::Gemini, HookEvent::PromptSubmit) => Some("BeforeAgent"),
            (Runtime::Gemini, HookEvent::Stop) => Some("AfterAgent"),
            // The plugin's events (opencode_plugin.js). It starts a session at the session's
            // first prompt in this process; the reaper ends it (OpenCode has no end event).
            (Runtime::OpenCode, HookEvent::SessionStart) => Some("session.created"),
            (Runtime::OpenCode, HookEvent::PromptSubmit) => Some("chat.message"),
            (Runtime::OpenCode, HookEvent::Stop) => Some("session.idle"),
            (Runtime::OpenCode, HookEvent::PreToolUse) => Some("tool.execute.before"),
            (Runtime::OpenCode, HookEvent::Notification | HookEvent::SessionEnd) => None,
            (_, HookEvent::SessionStart) => Some("SessionStart"),
            (_, HookEvent::PromptSubmit) => Some("UserPromptSubmit"),
            (_, HookEvent::Stop) => Some("Stop"),
            (_, HookEvent::Notification) => Some("Notification"),
            (_, HookEvent::SessionEnd) => Some("SessionEnd"),
            (_, HookEvent::PreToolUse) => Some("PreToolUse"),
        }
    }

    /// The events setup installs for this runtime (the pre-tool-use hook only with
    /// approvals).
    pub fn events(self) -> Vec<HookEvent> {
        HookEvent::ALWAYS
            .into_iter()
            .filter(|e| self.event_name(*e).is_some())
            .collect()
    }

    /// The hook answer that gives the model `text` as context at session start or with a
    /// prompt. Claude Code and Codex take the same shape (Codex turns it into a developer
    /// message: docs/agents/codex.md).
    pub fn context_output(self, event: HookEvent, text: &str) -> Value {
        if self == Runtime::OpenCode {
            // The plugin adds it to the prompt as a part the TUI does not show.
            return json!({ "context": text });
        }
        let name = self.event_name(event).unwrap_or("SessionStart");
        json!({ "hookSpecificOutput": { "hookEventName": name, "additionalContext": text } })
    }

    /// The Stop answer that continues the turn with `text` for the model. `agent_pid` is the
    /// agent process (Claude Code's form depends on its version).
    pub async fn stop_output(self, text: &str, agent_pid: Option<i64>) -> Value {
        match self {
            Runtime::ClaudeCode => claude::stop_output(text, agent_pid).await,
            // Codex continues the turn with the reason as a `<hook_prompt>` user message
            // (docs/agents/codex.md, checked on every test run).
            Runtime::Codex => json!({ "decision": "block", "reason": text }),
            // Gemini's AfterAgent `deny` makes the reason the next prompt
            // (docs/agents/gemini-cli.md, checked on every test run).
            Runtime::Gemini => json!({ "decision": "deny", "reason": text }),
            // Never handed over here ([`Self::hands_over_at_stop`]): the plugin sends a prompt
            // of its own, whose prompt-submit hands the messages over.
            Runtime::OpenCode => json!({ "continue": true }),
        }
    }

    /// The final text of the turn segment that just ended, from the Stop hook's payload:
    /// Claude Code's and Codex's `last_assistant_message` (the text that ended this segment:
    /// after a tool call, the text after it; after a Stop continuation, the continuation's own;
    /// `tests/it/claude_facts.rs`, `codex_facts.rs`), the same field our OpenCode plugin adds
    /// at `session.idle` (the last assistant message's text parts), and for Gemini CLI the
    /// last reply in the transcript AfterAgent names (its own `prompt_response` is garbled when
    /// the reply was streamed in chunks: [`gemini_transcript`]). Reads a file for Gemini: call
    /// it off the async threads.
    pub fn turn_text(self, payload: &serde_json::Value) -> Option<String> {
        match self {
            Runtime::ClaudeCode | Runtime::Codex | Runtime::OpenCode => payload
                .get("last_assistant_message")
                .and_then(serde_json::Value::as_str)
                .map(str::to_owned),
            Runtime::Gemini => payload
                .get("transcript_path")
                .and_then(serde_json::Value::as_str)
                .and_then(|path| {
                    gemini_transcript::last_reply(std::path::Path::new(path), &gemini_dir())
                }),
        }
    }

    /// Whether the Stop hook's answer itself hands queued messages over (the turn continues
    /// with them). Not OpenCode's: told that messages wait, its plugin sends a prompt of its
    /// own (`client.session.promptAsync`), and that prompt's prompt-submit hands them over, so
    /// they count as handed over only once they are in a prompt.
    pub fn hands_over_at_stop(self) -> bool {
        !matches!(self, Runtime::OpenCode)
    }

    /// What the screen shows in the runtime's input box (`screen` as `capture-pane -e`
    /// prints it: with colours, which tell Codex's placeholder from typed text).
    pub fn input_box(self, screen: &str) -> InputBox {
        match self {
            Runtime::ClaudeCode => claude::input_box(screen),
            Runtime::Codex => codex::input_box(screen),
            Runtime::Gemini => gemini::input_box(screen),
            Runtime::OpenCode => opencode::input_box(screen),
        }
    }

    /// Whether a wake may paste after text already in the box and take its prompt back
    /// (Backspace) when it lands after a person's draft. Claude Code's box is read exactly;
    /// Codex's composer is typed into only while it shows its placeholder, since a dialog
    /// could pass for it and a draft there is left alone.
    pub fn pastes_after_drafts(self) -> bool {
        match self {
            Runtime::ClaudeCode => true,
            Runtime::Codex | Runtime::Gemini | Runtime::OpenCode => false,
        }
    }

    /// How long after a paste is seen in the box an Enter is taken as Enter. Gemini CLI 0.61.0 took an Enter that
    /// came less than about 100 ms after a bracketed paste as part of it (the prompt stayed in
    /// the box; from 130 ms on it was submitted every time: docs/agents/gemini-cli.md).
    pub fn paste_settle(self) -> std::time::Duration {
        match self {
            // OpenCode took an Enter right behind a short bracketed paste as Enter.
            Runtime::ClaudeCode | Runtime::Codex | Runtime::OpenCode => std::time::Duration::ZERO,
            Runtime::Gemini => std::time::Duration::from_millis(250),
        }
    }

    /// The argument list that resumes runtime session `id` (after the program).
    pub fn resume_args(self, id: &str) -> Vec<String> {
        match self {
            Runtime::ClaudeCode | Runtime::Gemini => vec!["--resume".into(), id.into()],
            Runtime::Codex => vec!["resume".into(), id.into()],
            Runtime::OpenCode => vec!["--session".into(), id.into()],
        }
    }

    /// True when our MCP server is registered with this runtime for the user.
    pub fn mcp_registered(self) -> bool {
        match self {
            Runtime::ClaudeCode => claude::mcp_registered(),
            Runtime::Codex => codex::mcp_registered(),
            Runtime::Gemini => gemini::mcp_registered(),
            Runtime::OpenCode => opencode::mcp_registered(),
        }
    }
}

/// The last (modification time, size) of a file and what was read from it then.
type Seen = std::sync::Mutex<Option<((std::time::SystemTime, u64), bool)>>;

/// `check` of the file at `path`, read again only when it changed: hooks run on every turn
/// and ~/.claude.json is large. Keyed by modification time and size: a rewrite within one tick
/// of the file system's clock keeps the time but (nearly always) not the size.
fn registered_in(path: &std::path::Path, seen: &Seen, check: impl Fn(&str) -> bool) -> bool {
    let Ok(stamp) = std::fs::metadata(path).and_then(|m| Ok((m.modified()?, m.len()))) else {
        return false;
    };
    let mut seen = seen.lock().unwrap_or_else(|p| p.into_inner());
    match *seen {
        Some((at, registered)) if at == stamp => registered,
        _ => {
            let registered = std::fs::read_to_string(path).is_ok_and(|t| check(&t));
            *seen = Some((stamp, registered));
            registered
        }
    }
}

/// Removes ANSI escape sequences (CSI and OSC) from captured screen text.
pub(crate) fn plain(screen: &str) -> String {
    let mut out = String::with_capacity(screen.len());
    let mut chars = screen.chars().peekable();
    while let Some(c) = chars.next() {
        if c != '\x1b' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('[') => {
                for c in chars.by_ref() {
                    if ('@'..='~').contains(&c) {
                        break;
                    }
                }
            }
            Some(']') => {
                while let Some(c) = chars.next() {
                    if c == '\x07' || (c == '\x1b' && chars.next_if_eq(&'\\').is_some()) {
                        break;
                    }
                }
            }
            _ => {}
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backends_round_trip_and_match_serde() {
        for r in Runtime::ALL {
            assert_eq!(Runtime::from_backend(r.backend()), Some(r));
            assert_eq!(
                serde_json::to_value(r).expect("test"),
                Value::String(r.backend().into())
            );
        }
        assert_eq!(Runtime::from_backend("aider"), None);
    }

    #[test]
    fn codex_gets_no_notification_hook() {
        assert!(!Runtime::Codex.events().contains(&HookEvent::Notification));
        assert_eq!(Runtime::ClaudeCode.events(), HookEvent::ALWAYS.to_vec());
    }

    #[test]
    fn gemini_tools_are_gated_by_claude_names_and_answered_in_its_shape() {
        let gemini = Runtime::Gemini;
        assert_eq!(gemini.approval_tool_name("run_shell_command"), "Bash");
        assert_eq!(gemini.approval_tool_name("replace"), "Edit");
        assert_eq!(gemini.approval_tool_name("read_file"), "read_file");
        assert_eq!(Runtime::Codex.approval_tool_name("Bash"), "Bash");
        let gated = [
            "Bash".to_owned(),
            "Edit".to_owned(),
            "NotebookEdit".to_owned(),
        ];
        assert_eq!(
            gemini.native_tool_names(&gated),
            vec!["run_shell_command", "replace"]
        );
        let deny = json!({"hookSpecificOutput": {"hookEventName": "PreToolUse",
            "permissionDecision": "deny", "permissionDecisionReason": "Repowire approvals: no"}});
        assert_eq!(
            gemini.tool_decision(deny.clone()),
            json!({"decision": "deny", "reason": "Repowire approvals: no"})
        );
        let mut allow = deny.clone();
        allow["hookSpecificOutput"]["permissionDecision"] = json!("allow");
        assert_eq!(gemini.tool_decision(allow)["decision"], "allow");
        // Anything but an allow is a deny.
        assert_eq!(gemini.tool_decision(json!({}))["decision"], "deny");
        assert_eq!(Runtime::Codex.tool_decision(deny.clone()), deny);
    }

    #[test]
    fn escapes_are_removed() {
        assert_eq!(
            plain("\x1b[2m› Ask\x1b[0m x\x1b]0;title\x07y"),
            "› Ask xy".to_owned()
        );
    }
}
