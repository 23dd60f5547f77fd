//! What `repowire setup` plans for Codex (docs/agents/codex.md): our hook groups and MCP
//! server in `$CODEX_HOME/config.toml` ([`super::codex_config`] edits the TOML).

use std::path::PathBuf;

use anyhow::Context;

use super::approvals_setup::{Change, HOOK_MARGIN};
use super::codex_config::{HookGroup, McpServer};
use super::setup::{PRE_TOOL_USE, hook_command};
use crate::api::HookEvent;
use crate::config::{ApprovalPolicy, Config, Environment};
use crate::runtimes::Runtime;

/// Codex is installed: `$CODEX_HOME` (else `~/.codex`) exists, or `codex` is on PATH.
pub(super) fn codex_present(env: &Environment) -> bool {
    crate::runtimes::codex_home().is_dir()
        || env.path_dirs().iter().any(|p| p.join("codex").is_file())
}

/// Codex's config.toml as it is (`None`: no file) and as setup leaves it.
pub(super) struct CodexPlan {
    pub(super) path: PathBuf,
    pub(super) before: Option<String>,
    pub(super) after: String,
}

impl CodexPlan {
    /// The path as Codex names it in its trust keys.
    fn key_path(path: &std::path::Path) -> String {
        path.to_string_lossy().into_owned()
    }

    /// The file as it is now.
    fn read() -> anyhow::Result<(PathBuf, Option<String>)> {
        let path = crate::runtimes::codex_config_path();
        let before = match std::fs::read_to_string(&path) {
            Ok(text) => Some(text),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
            Err(e) => return Err(e).with_context(|| format!("reading {}", path.display())),
        };
        Ok((path, before))
    }

    /// What setup writes: our hooks (the approval hook as `approvals` says, or, when setup
    /// leaves approvals as they are, as config.toml has them) and our MCP server; `allow`: our
    /// tools run without asking a person.
    pub(super) fn install(
        exe: &str,
        config: &Config,
        approvals: &Change,
        allow: bool,
    ) -> anyhow::Result<Self> {
        let (path, before) = Self::read()?;
        let runtime = Runtime::Codex;
        let mut hooks: Vec<HookGroup> = runtime
            .events()
            .into_iter()
            .filter_map(|event| {
                Some(HookGroup {
                    event: runtime.event_name(event)?,
                    command: hook_command(exe, config, runtime, event.name()),
                    // Codex clamps a SessionEnd hook to 3 s, with a warning at every start.
                    timeout: if event == HookEvent::SessionEnd {
                        3
                    } else {
                        15
                    },
                    matcher: None,
                })
            })
            .collect();
        let gate = |policy: &ApprovalPolicy| HookGroup {
            event: "PreToolUse",
            command: format!(
                "{} --approval-timeout {}",
                hook_command(exe, config, runtime, PRE_TOOL_USE.name()),
                policy.timeout.as_secs()
            ),
            timeout: (policy.timeout + HOOK_MARGIN).as_secs(),
            // Codex's names: `apply_patch` too when patches are gated.
            matcher: Some(runtime.native_tool_names(&policy.tools).join("|")),
        };
        let mut drop = Vec::new();
        match approvals.policy_after(config)? {
            Some(policy) => hooks.push(gate(&policy)),
            None => drop.push("PreToolUse"),
        }
        let mcp = McpServer {
            command: exe.to_owned(),
            home: config
                .home
                .as_ref()
                .map(|h| h.to_string_lossy().into_owned()),
            approve_tools: allow,
        };
        let after = super::codex_config::merge(
            before.as_deref().unwrap_or(""),
            &Self::key_path(&path),
            &hooks,
            &drop,
            &mcp,
        )
        .with_context(|| format!("updating {}", path.display()))?;
        Ok(Self {
            path,
            before,
            after,
        })
    }

    /// What uninstall writes: the file without anything of ours (`None`: no file).
    pub(super) fn uninstall() -> anyhow::Result<Option<Self>> {
        let (path, before) = Self::read()?;
        let Some(text) = before else {
            return Ok(None);
        };
        let after = super::codex_config::remove(&text, &Self::key_path(&path))
            .with_context(|| format!("updating {}", path.display()))?;
        Ok(Some(Self {
            path,
            before: Some(text),
            after,
        }))
    }

    /// Whether the MCP server entry already lets our tools run without asking.
    pub(super) fn approves_tools(&self) -> bool {
        self.after.contains("default_tools_approval_mode")
            && self
                .after
                .parse::<toml_edit::DocumentMut>()
                .ok()
                .and_then(|d| {
                    d.get("mcp_servers")?
                        .get("repowire")?
                        .get("default_tools_approval_mode")?
                        .as_str()
                        .map(|m| m == "approve")
                })
                .unwrap_or(false)
    }

    /// Writes the file when it changed; true when written.
    pub(super) fn write(&self) -> anyhow::Result<bool> {
        if self.before.as_deref() == Some(self.after.as_str()) {
            return Ok(false);
        }
        let before = self.before.clone();
        super::config_write::write_text(&self.path, before.is_some(), &self.after, "Codex", |p| {
            Ok(match std::fs::read_to_string(p) {
                Ok(now) => Some(now) == before,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => before.is_none(),
                Err(e) => return Err(e.into()),
            })
        })?;
        Ok(true)
    }
}
