//! What `repowire setup` plans for Claude Code: our hooks (and, when allowed, our tools'
//! permissions) merged into `~/.claude/settings.json`, our MCP server into `~/.claude.json`.

use std::path::PathBuf;

use anyhow::Context;
use serde_json::{Map, Value, json};

use super::claude_settings::{
    is_ours, merge_entries, merge_hooks, read_json, remove_event, split_program,
};
use super::permissions;
use super::setup::{EVENTS, PRE_TOOL_USE, SetupArgs, find_on_path, hook_command};
use crate::config::{Config, Environment, user_home};
use crate::runtimes::Runtime;

pub(super) use crate::runtimes::claude::claude_json_path;

pub(super) fn settings_path() -> PathBuf {
    user_home().join(".claude").join("settings.json")
}

/// The programs of our hook commands in settings.json that do not resolve to an executable
/// (a moved checkout, a `cargo clean`): `(event, program)`.
pub(super) fn broken_hooks(env: &Environment) -> Vec<(String, String)> {
    let Ok(Some(settings)) = read_json(&settings_path()) else {
        return Vec::new();
    };
    let mut broken = Vec::new();
    for event in EVENTS.iter().chain(std::iter::once(&PRE_TOOL_USE)) {
        let entries = settings
            .get("hooks")
            .and_then(|h| h.get(event.claude_name()))
            .and_then(Value::as_array);
        for entry in entries.into_iter().flatten().filter(|e| is_ours(e)) {
            for h in entry
                .get("hooks")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
            {
                let (program, _) =
                    split_program(h.get("command").and_then(Value::as_str).unwrap_or(""));
                if find_on_path(env, &program).is_none() {
                    broken.push((event.claude_name().to_owned(), program));
                }
            }
        }
    }
    broken
}

/// The environment of our MCP server's entry, in any runtime's file: `REPOWIRE_HOME` when
/// this setup names a home of its own.
pub(super) fn mcp_env(config: &Config) -> Map<String, Value> {
    let mut env = Map::new();
    if let Some(home) = &config.home {
        env.insert(
            "REPOWIRE_HOME".into(),
            Value::String(home.to_string_lossy().into_owned()),
        );
    }
    env
}

fn mcp_entry(exe: &str, config: &Config) -> Value {
    json!({ "type": "stdio", "command": exe, "args": ["mcp"], "env": mcp_env(config) })
}

pub(super) fn claude_present(env: &Environment) -> bool {
    user_home().join(".claude").is_dir()
        || claude_json_path().exists()
        || env.path_dirs().iter().any(|p| p.join("claude").is_file())
}

/// Claude Code's two files as they are and as setup leaves them.
pub(super) struct ClaudePlan {
    pub(super) settings: PathBuf,
    pub(super) settings_before: Option<Value>,
    pub(super) settings_after: Value,
    pub(super) claude_json: PathBuf,
    pub(super) claude_before: Option<Value>,
    pub(super) claude_after: Value,
    /// Our tools' permissions are added now.
    pub(super) allow: bool,
    /// Our tools are allowed once this is written (added now, or there already).
    pub(super) allowed: bool,
}

pub(super) fn plan_claude(
    exe: &str,
    config: &Config,
    args: &SetupArgs,
    approvals: &super::approvals_setup::Change,
) -> anyhow::Result<ClaudePlan> {
    let commands: Vec<(&str, String)> = EVENTS
        .iter()
        .map(|event| {
            (
                event.claude_name(),
                hook_command(exe, config, Runtime::ClaudeCode, event.name()),
            )
        })
        .collect();
    let settings = settings_path();
    let settings_before = read_json(&settings)?;
    let mut settings_after = merge_hooks(
        settings_before.clone().unwrap_or_else(|| json!({})),
        &commands,
    )?;
    match approvals {
        super::approvals_setup::Change::Enable(policy) => {
            let command = format!(
                "{} --approval-timeout {}",
                hook_command(exe, config, Runtime::ClaudeCode, PRE_TOOL_USE.name()),
                policy.timeout.as_secs()
            );
            let entry = super::approvals_setup::hook_entry(&command, policy);
            settings_after = merge_entries(settings_after, &[(PRE_TOOL_USE.claude_name(), entry)])?;
        }
        super::approvals_setup::Change::Disable => {
            settings_after = remove_event(settings_after, PRE_TOOL_USE.claude_name());
        }
        super::approvals_setup::Change::Keep => {}
    }
    let missing = permissions::missing(&settings_after);
    let allow = !missing.is_empty() && allow_tools(args, &missing)?;
    let settings_after = if allow {
        permissions::merge(settings_after)?
    } else {
        settings_after
    };
    let claude_json = claude_json_path();
    let claude_before = read_json(&claude_json)?;
    let mut claude_after = claude_before.clone().unwrap_or_else(|| json!({}));
    claude_after
        .as_object_mut()
        .context("~/.claude.json is not a JSON object; nothing was changed")?
        .entry("mcpServers")
        .or_insert_with(|| Value::Object(Map::new()))
        .as_object_mut()
        .context("`mcpServers` in ~/.claude.json is not an object; nothing was changed")?
        .insert("repowire".into(), mcp_entry(exe, config));
    Ok(ClaudePlan {
        settings,
        settings_before,
        settings_after,
        claude_json,
        claude_before,
        claude_after,
        allow,
        allowed: allow || missing.is_empty(),
    })
}

/// Whether to allow our tools: the flags say, or the person at the terminal does (shown the
/// entries); without a terminal or with `--non-interactive`, no.
pub(super) fn allow_tools(args: &SetupArgs, entries: &[String]) -> anyhow::Result<bool> {
    use std::io::{BufRead, IsTerminal, Write};
    if args.allow_tools || args.no_allow_tools {
        return Ok(args.allow_tools);
    }
    if args.non_interactive || !std::io::stdin().is_terminal() || !std::io::stdout().is_terminal() {
        return Ok(false);
    }
    println!(
        "Claude Code asks a person before each call of an MCP tool it was not told to allow, so an agent could not ask, ack or answer on its own. Add these to `permissions.allow` in {}?",
        settings_path().display()
    );
    for e in entries {
        println!("  {e}");
    }
    print!("Allow them? [Y/n] ");
    std::io::stdout().flush()?;
    let mut line = String::new();
    std::io::stdin().lock().read_line(&mut line)?;
    Ok(matches!(
        line.trim().to_ascii_lowercase().as_str(),
        "" | "y" | "yes"
    ))
}
