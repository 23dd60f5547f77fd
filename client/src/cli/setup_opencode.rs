//! What `repowire setup` plans for OpenCode (docs/agents/opencode.md): OpenCode has no command
//! hooks, so setup writes our plugin (`plugins/repowire.js` in OpenCode's global configuration
//! directory, from `opencode_plugin.js`), which runs `repowire hook --runtime opencode` at its
//! events, and registers our MCP server as `mcp.repowire` in `opencode.json`, merged beside the
//! user's own keys.
//!
//! The plugin file is wholly ours: it is rewritten when it differs and refused when a file of
//! that name is not ours. OpenCode runs MCP tools without asking, so `--allow-tools` changes
//! nothing here.

use std::path::PathBuf;

use anyhow::Context;
use serde_json::{Map, Value, json};

use super::approvals_setup::Change;
use super::claude_settings::{read_json, write_if_changed};
use crate::config::{Config, Environment};

/// The plugin's source, with `/*SETTINGS*/` for what setup fills in.
const PLUGIN: &str = include_str!("opencode_plugin.js");

/// The plugin's first line: how setup knows the file is its own.
const MARK: &str = "// Repowire's OpenCode plugin.";

/// OpenCode is installed: its global opencode.json exists, or `opencode` is on PATH.
pub(super) fn opencode_present(env: &Environment) -> bool {
    crate::runtimes::opencode_config_path().is_file()
        || env.path_dirs().iter().any(|p| p.join("opencode").is_file())
}

/// Where our plugin is, when it is there.
pub(super) fn installed() -> Option<PathBuf> {
    let path = crate::runtimes::opencode_plugin_path();
    std::fs::read_to_string(&path)
        .is_ok_and(|t| t.starts_with(MARK))
        .then_some(path)
}

/// Whether the plugin at `path` gates tool calls.
pub(super) fn gates_tools(path: &std::path::Path) -> bool {
    std::fs::read_to_string(path).is_ok_and(|t| plugin_gates(&t))
}

fn plugin_gates(text: &str) -> bool {
    text.starts_with(MARK) && !text.contains(r#""approvals":null"#)
}

/// OpenCode's opencode.json and our plugin as they are (`None`: no file) and as setup leaves
/// them (`plugin_after: None`: removed).
pub(super) struct OpenCodePlan {
    pub(super) path: PathBuf,
    pub(super) before: Option<Value>,
    pub(super) after: Value,
    pub(super) plugin: PathBuf,
    plugin_before: Option<String>,
    plugin_after: Option<String>,
}

/// The plugin's source for this setup: the hook command as an argument list, the variables
/// it adds, and whether (and how long) tool calls wait for an approval.
fn plugin_text(exe: &str, home: Option<&std::path::Path>, gate: Option<u64>) -> String {
    let mut hook = vec![exe.to_owned()];
    let mut env = Map::new();
    if let Some(home) = home {
        let home = home.to_string_lossy().into_owned();
        hook.extend(["--home".to_owned(), home.clone()]);
        env.insert("REPOWIRE_HOME".into(), Value::String(home));
    }
    hook.extend(["hook", "--runtime", "opencode"].map(str::to_owned));
    let settings = json!({
        "hook": hook,
        "env": env,
        "approvals": gate.map(|s| json!({ "timeout_seconds": s })),
    });
    PLUGIN.replacen("/*SETTINGS*/", &settings.to_string(), 1)
}

/// The plugin file's content, refusing a file there that is not ours.
fn read_plugin(path: &std::path::Path) -> anyhow::Result<Option<String>> {
    match std::fs::read_to_string(path) {
        Ok(text) if text.starts_with(MARK) => Ok(Some(text)),
        Ok(_) => anyhow::bail!(
            "{} exists and is not Repowire's plugin; move it away first (nothing was changed)",
            path.display()
        ),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e).with_context(|| format!("reading {}", path.display())),
    }
}

impl OpenCodePlan {
    /// Our plugin and MCP server; tool calls gated as `approvals` leaves config.toml.
    pub(super) fn install(exe: &str, config: &Config, approvals: &Change) -> anyhow::Result<Self> {
        let path = crate::runtimes::opencode_config_path();
        let before = read_json(&path)?;
        let plugin = crate::runtimes::opencode_plugin_path();
        let plugin_before = read_plugin(&plugin)?;
        let gate = approvals
            .policy_after(config)?
            .map(|policy| policy.timeout.as_secs());
        let mut after = before.clone().unwrap_or_else(|| json!({}));
        let env = super::setup_claude::mcp_env(config);
        let servers = after
            .as_object_mut()
            .context("OpenCode's opencode.json is not a JSON object; nothing was changed")?
            .entry("mcp")
            .or_insert_with(|| Value::Object(Map::new()))
            .as_object_mut()
            .context("`mcp` in OpenCode's opencode.json is not an object; nothing was changed")?;
        // The user's own keys on our entry (`timeout` …) stay; ours are set.
        let server = servers.entry("repowire").or_insert_with(|| json!({}));
        if !server.is_object() {
            *server = json!({});
        }
        if let Some(server) = server.as_object_mut() {
            server.insert("type".into(), json!("local"));
            server.insert("command".into(), json!([exe, "mcp"]));
            server.insert("environment".into(), Value::Object(env));
            server.insert("enabled".into(), json!(true));
        }
        Ok(Self {
            path,
            before,
            after,
            plugin,
            plugin_before,
            plugin_after: Some(plugin_text(exe, config.home.as_deref(), gate)),
        })
    }

    /// Everything of ours removed (`None`: nothing of ours was there).
    pub(super) fn uninstall() -> anyhow::Result<Option<Self>> {
        let path = crate::runtimes::opencode_config_path();
        let plugin = crate::runtimes::opencode_plugin_path();
        let plugin_before = read_plugin(&plugin).unwrap_or(None);
        let before = match read_json(&path) {
            Ok(before) => before,
            // An opencode.json setup cannot edit (OpenCode allows comments in it) still loses
            // our plugin: left behind with approvals on, it would block tools once `repowire`
            // is gone.
            Err(e) if plugin_before.is_some() => {
                println!("OpenCode's MCP entry `repowire` left in place: {e:#}");
                return Ok(Some(Self {
                    path,
                    before: None,
                    after: json!({}),
                    plugin,
                    plugin_before,
                    plugin_after: None,
                }));
            }
            Err(e) => return Err(e),
        };
        if before.is_none() && plugin_before.is_none() {
            return Ok(None);
        }
        let mut after = before.clone().unwrap_or_else(|| json!({}));
        if let Some(servers) = after.get_mut("mcp").and_then(Value::as_object_mut)
            && servers.remove("repowire").is_some()
            && servers.is_empty()
            && let Some(root) = after.as_object_mut()
        {
            root.remove("mcp");
        }
        Ok(Some(Self {
            path,
            before,
            after,
            plugin,
            plugin_before,
            plugin_after: None,
        }))
    }

    /// Whether the plugin gates tool calls.
    pub(super) fn gates_tools(&self) -> bool {
        self.plugin_after.as_deref().is_some_and(plugin_gates)
    }

    /// Writes what changed: opencode.json (kept as it is when it holds nothing of ours and
    /// did not exist), then the plugin. True when something was written.
    pub(super) fn write(&self) -> anyhow::Result<bool> {
        let config = if self.before.is_none() && self.plugin_after.is_none() {
            false
        } else {
            write_if_changed(&self.path, self.before.as_ref(), &self.after, "OpenCode")?
        };
        let plugin = match (&self.plugin_before, &self.plugin_after) {
            (before, Some(text)) if before.as_deref() != Some(text.as_str()) => {
                if let Some(dir) = self.plugin.parent() {
                    std::fs::create_dir_all(dir)
                        .with_context(|| format!("creating {}", dir.display()))?;
                }
                repowire_files::replace(&self.plugin, text.as_bytes(), repowire_files::Mode::Keep)
                    .with_context(|| format!("writing {}", self.plugin.display()))?;
                true
            }
            (Some(_), None) => {
                std::fs::remove_file(&self.plugin)
                    .with_context(|| format!("removing {}", self.plugin.display()))?;
                true
            }
            _ => false,
        };
        Ok(config || plugin)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The settings the plugin was written with.
    fn settings(text: &str) -> Value {
        let line = text
            .lines()
            .find_map(|l| l.strip_prefix("const SETTINGS = "))
            .expect("a SETTINGS line");
        serde_json::from_str(line.trim_end_matches(';')).expect("JSON")
    }

    #[test]
    fn the_plugin_gets_the_hook_as_arguments_and_the_gate() {
        let home = std::path::Path::new("/tmp/a b/home");
        let text = plugin_text("/opt/re wire", Some(home), Some(120));
        assert!(text.starts_with(MARK));
        assert_eq!(
            settings(&text),
            json!({
                "hook": ["/opt/re wire", "--home", "/tmp/a b/home", "hook", "--runtime", "opencode"],
                "env": {"REPOWIRE_HOME": "/tmp/a b/home"},
                "approvals": {"timeout_seconds": 120},
            })
        );
        assert!(plugin_gates(&text));
        let off = plugin_text("/opt/repowire", None, None);
        assert_eq!(settings(&off)["approvals"], Value::Null);
        assert_eq!(
            settings(&off)["hook"],
            json!(["/opt/repowire", "hook", "--runtime", "opencode"])
        );
        assert!(!plugin_gates(&off));
    }
}
