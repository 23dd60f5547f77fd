//! How a Stop hook hands queued messages to Claude Code so that the model reads them once.
//!
//! `{"decision": "block", "reason": TEXT}` continues the turn with TEXT, but Claude Code
//! 2.1.331 gives the model TEXT twice: as "Stop hook feedback" and again as a system note
//! "Stop hook blocking error from command …" (issue 35.16; docs/agents/claude-code.md has the
//! requests the model received). `{"hookSpecificOutput": {"hookEventName": "Stop",
//! "additionalContext": TEXT}}` continues the turn too, and the model reads TEXT once, as
//! "Stop hook additional context", not as an error. A runtime that does not know that output
//! would end the turn with the messages unread, so it is used only for a Claude Code that says
//! it is at least [`CONTEXT_SINCE`] (`<agent binary> --version`, asked once per binary);
//! any other keeps the `block` form, which every version honours.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, SystemTime};

use serde_json::{Value, json};

/// The first Claude Code version seen to continue a turn on a Stop hook's `additionalContext`.
pub const CONTEXT_SINCE: (u64, u64, u64) = (2, 1, 331);

/// The output a Stop hook hands messages over with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StopForm {
    /// `hookSpecificOutput.additionalContext`: read once, not as an error.
    Context,
    /// `decision: block` with the text as the reason: honoured by every version.
    Block,
}

impl StopForm {
    /// The hook's stdout JSON handing `text` over.
    pub fn output(self, text: &str) -> Value {
        match self {
            Self::Context => json!({
                "hookSpecificOutput": {
                    "hookEventName": "Stop",
                    "additionalContext": text
                }
            }),
            Self::Block => json!({ "decision": "block", "reason": text }),
        }
    }
}

/// The form for the agent process `pid` (its binary's version; `Block` when unknown).
pub async fn for_agent(pid: Option<i64>) -> StopForm {
    let Some(exe) = pid
        .and_then(|p| u32::try_from(p).ok())
        .and_then(|p| std::fs::read_link(format!("/proc/{p}/exe")).ok())
    else {
        return StopForm::Block;
    };
    // Keyed by the binary and its modification time: an upgrade in place asks again.
    let modified = std::fs::metadata(&exe)
        .and_then(|m| m.modified())
        .unwrap_or(SystemTime::UNIX_EPOCH);
    static SEEN: OnceLock<Mutex<HashMap<(PathBuf, SystemTime), StopForm>>> = OnceLock::new();
    let seen = SEEN.get_or_init(Default::default);
    let key = (exe.clone(), modified);
    if let Some(form) = seen.lock().unwrap_or_else(|p| p.into_inner()).get(&key) {
        return *form;
    }
    let asked = tokio::time::timeout(
        Duration::from_secs(5),
        tokio::process::Command::new(&exe)
            .arg("--version")
            .stdin(std::process::Stdio::null())
            .kill_on_drop(true)
            .output(),
    )
    .await;
    let form = match asked {
        Ok(Ok(out)) => form_of_version(&String::from_utf8_lossy(&out.stdout)),
        _ => StopForm::Block,
    };
    tracing::info!(exe = %exe.display(), ?form, "how Stop hooks hand messages to this agent");
    seen.lock()
        .unwrap_or_else(|p| p.into_inner())
        .insert(key, form);
    form
}

/// `Context` for a `claude --version` answer (`2.1.331 (Claude Code)`) at or above
/// [`CONTEXT_SINCE`]; `Block` for anything else (another program, an older version).
pub fn form_of_version(said: &str) -> StopForm {
    let line = said.trim();
    if !line.contains("Claude Code") {
        return StopForm::Block;
    }
    let version: Vec<u64> = line
        .split_whitespace()
        .next()
        .unwrap_or_default()
        .split('.')
        .map_while(|n| n.parse().ok())
        .collect();
    match version[..] {
        [a, b, c, ..] if (a, b, c) >= CONTEXT_SINCE => StopForm::Context,
        _ => StopForm::Block,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_context_form_only_for_a_claude_code_that_honours_it() {
        assert_eq!(
            form_of_version("2.1.331 (Claude Code)\n"),
            StopForm::Context
        );
        assert_eq!(form_of_version("2.2.0 (Claude Code)"), StopForm::Context);
        assert_eq!(form_of_version("3.0.1 (Claude Code)"), StopForm::Context);
        assert_eq!(form_of_version("2.1.330 (Claude Code)"), StopForm::Block);
        assert_eq!(form_of_version("1.9.999 (Claude Code)"), StopForm::Block);
        assert_eq!(
            form_of_version("v22.11.0"),
            StopForm::Block,
            "node, not claude"
        );
        assert_eq!(form_of_version(""), StopForm::Block);
        assert_eq!(
            StopForm::Context.output("hi"),
            json!({"hookSpecificOutput": {"hookEventName": "Stop", "additionalContext": "hi"}})
        );
        assert_eq!(
            StopForm::Block.output("hi"),
            json!({"decision": "block", "reason": "hi"})
        );
    }
}
