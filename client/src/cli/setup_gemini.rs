//! What `repowire setup` plans for Gemini CLI (docs/agents/gemini-cli.md): our hooks and MCP
//! server in `~/.gemini/settings.json` (`$GEMINI_CLI_HOME/.gemini` when set), merged beside the
//! user's own like Claude Code's settings.
//!
//! Each event gets one group of ours with no `matcher`: a matcher on SessionStart or
//! SessionEnd, even `.*`, keeps Gemini from firing them. With approvals, BeforeTool gets one
//! matched on Gemini's names for the gated tools (`run_shell_command|write_file|replace`). Timeouts are in milliseconds. The MCP
//! server is `trust`ed only when our tools are allowed: untrusted, Gemini asks a person before
//! each call (and `gemini -p` does not offer the tools at all).

use std::path::PathBuf;

use anyhow::Context;
use serde_json::{Map, Value, json};

use super::approvals_setup::{Change, HOOK_MARGIN};
use super::claude_settings::{
    merge_entries, read_json, remove_event, remove_hooks, write_if_changed,
};
use super::setup::hook_command;
use crate::api::HookEvent;
use crate::config::{Config, Environment};
use crate::runtimes::Runtime;

/// Gemini CLI is installed: its settings file exists, or `gemini` is on PATH. (Not `~/.gemini`
/// alone: other Google tools make that directory too.)
pub(super) fn gemini_present(env: &Environment) -> bool {
    crate::runtimes::gemini_settings_path().is_file()
        || env.path_dirs().iter().any(|p| p.join("gemini").is_file())
}

/// How many hook groups of ours Gemini's settings.json holds, and where it is; `None` when it
/// holds none (or cannot be read).
pub(super) fn installed() -> Option<(PathBuf, usize)> {
    let path = crate::runtimes::gemini_settings_path();
    let settings = read_json(&path).ok()??;
    let count = settings["hooks"]
        .as_object()?
        .values()
        .filter_map(Value::as_array)
        .flatten()
        .filter(|e| super::claude_settings::is_ours(e))
        .count();
    (count > 0).then_some((path, count))
}

/// Whether `settings` hold our BeforeTool group.
fn gates(settings: &Value) -> bool {
    settings["hooks"]["BeforeTool"]
        .as_array()
        .is_some_and(|groups| groups.iter().any(super::claude_settings::is_ours))
}

/// Whether Gemini's settings.json gates tool calls through our BeforeTool hook.
pub(super) fn settings_gate_tools() -> bool {
    read_json(&crate::runtimes::gemini_settings_path())
        .ok()
        .flatten()
        .is_some_and(|s| gates(&s))
}

/// Gemini's settings.json as it is (`None`: no file) and as setup leaves it.
pub(super) struct GeminiPlan {
    pub(super) path: PathBuf,
    pub(super) before: Option<Value>,
    pub(super) after: Value,
}

impl GeminiPlan {
    /// Our hooks and MCP server merged in; `allow`: our tools run without asking a person;
    /// tool calls gated as `approvals` leaves config.toml (a BeforeTool group matched on
    /// Gemini's names for the gated tools).
    pub(super) fn install(
        exe: &str,
        config: &Config,
        allow: bool,
        approvals: &Change,
    ) -> anyhow::Result<Self> {
        let path = crate::runtimes::gemini_settings_path();
        let before = read_json(&path)?;
        let runtime = Runtime::Gemini;
        let entries: Vec<(&str, Value)> = runtime
            .events()
            .into_iter()
            .filter_map(|event| {
                let command = hook_command(exe, config, runtime, event.name());
                Some((
                    runtime.event_name(event)?,
                    json!({ "hooks": [{ "name": "repowire", "type": "command", "command": command, "timeout": 15_000 }] }),
                ))
            })
            .collect();
        let mut after = merge_entries(before.clone().unwrap_or_else(|| json!({})), &entries)
            .with_context(|| format!("updating {}", path.display()))?;
        let policy = approvals.policy_after(config)?;
        let before_tool = runtime
            .event_name(HookEvent::PreToolUse)
            .context("Gemini CLI has a BeforeTool event")?;
        let gated = policy
            .as_ref()
            .map(|p| runtime.native_tool_names(&p.tools))
            .unwrap_or_default();
        after = match policy {
            Some(policy) if !gated.is_empty() => {
                let command = format!(
                    "{} --approval-timeout {}",
                    hook_command(exe, config, runtime, HookEvent::PreToolUse.name()),
                    policy.timeout.as_secs()
                );
                // Gemini's timeouts are milliseconds; the hook must outlive the approval.
                let timeout = (policy.timeout + HOOK_MARGIN).as_millis();
                let entry = json!({
                    "matcher": gated.join("|"),
                    "hooks": [{ "name": "repowire", "type": "command", "command": command, "timeout": timeout }],
                });
                merge_entries(after, &[(before_tool, entry)])
                    .with_context(|| format!("updating {}", path.display()))?
            }
            _ => remove_event(after, before_tool),
        };
        let env = super::setup_claude::mcp_env(config);
        let servers = after
            .as_object_mut()
            .context("Gemini's settings.json is not a JSON object; nothing was changed")?
            .entry("mcpServers")
            .or_insert_with(|| Value::Object(Map::new()))
            .as_object_mut()
            .context(
                "`mcpServers` in Gemini's settings.json is not an object; nothing was changed",
            )?;
        // The user's own keys on our entry (`timeout`, `includeTools` …) stay, and so does a
        // `trust` already there; ours are set.
        let server = servers.entry("repowire").or_insert_with(|| json!({}));
        if !server.is_object() {
            *server = json!({});
        }
        if let Some(server) = server.as_object_mut() {
            server.insert("command".into(), json!(exe));
            server.insert("args".into(), json!(["mcp"]));
            server.insert("env".into(), Value::Object(env));
            if allow {
                server.insert("trust".into(), json!(true));
            }
        }
        Ok(Self {
            path,
            before,
            after,
        })
    }

    /// The file without anything of ours (`None`: no file).
    pub(super) fn uninstall() -> anyhow::Result<Option<Self>> {
        let path = crate::runtimes::gemini_settings_path();
        let Some(before) = read_json(&path)? else {
            return Ok(None);
        };
        let mut after = remove_hooks(before.clone());
        if let Some(servers) = after.get_mut("mcpServers").and_then(Value::as_object_mut)
            && servers.remove("repowire").is_some()
            && servers.is_empty()
            && let Some(root) = after.as_object_mut()
        {
            root.remove("mcpServers");
        }
        Ok(Some(Self {
            path,
            before: Some(before),
            after,
        }))
    }

    /// Whether our BeforeTool hook gates tool calls.
    pub(super) fn gates_tools(&self) -> bool {
        gates(&self.after)
    }

    /// Whether our MCP server is trusted (its tools run without asking).
    pub(super) fn trusts_tools(&self) -> bool {
        self.after["mcpServers"]["repowire"]["trust"] == json!(true)
    }

    /// Writes the file when it changed; true when written.
    pub(super) fn write(&self) -> anyhow::Result<bool> {
        write_if_changed(&self.path, self.before.as_ref(), &self.after, "Gemini CLI")
    }
}
