//! What `repowire setup --approvals` / `--no-approvals` change: `[approvals]` in
//! `~/.repowire/config.toml`, and Claude Code's PreToolUse hook entry, whose matcher names the
//! gated tools and whose timeout leaves the hook room to decide (Claude Code lets a call run
//! when a hook is killed by its timeout, so the hook must always answer first).

use std::time::Duration;

use anyhow::Context;
use serde_json::{Value, json};

use crate::config::{ApprovalPolicy, Config, FileConfig};

/// Seconds added to the approval timeout for the hook entry's own timeout: the daemon's grace
/// for the relay's word, the hook command's margin, and process start-up.
pub const HOOK_MARGIN: Duration = Duration::from_secs(30);

/// What setup does about approvals.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Change {
    /// `--approvals`: on, with this policy.
    Enable(ApprovalPolicy),
    /// `--no-approvals`: off.
    Disable,
    /// Neither flag: as they are.
    Keep,
}

impl Change {
    /// The policy in force once this change is made: the new one, none, or (neither flag)
    /// what config.toml holds, so approvals on from an earlier setup gate a runtime wired now.
    pub fn policy_after(&self, config: &Config) -> anyhow::Result<Option<ApprovalPolicy>> {
        match self {
            Change::Enable(policy) => Ok(Some(policy.clone())),
            Change::Disable => Ok(None),
            Change::Keep => {
                let policy = config
                    .approvals()
                    .context("reading [approvals] in config.toml")?;
                Ok(policy.enabled.then_some(policy))
            }
        }
    }
}

/// The approval options of `repowire setup` (flattened into its arguments).
#[derive(Debug, Clone, clap::Args)]
pub struct ApprovalArgs {
    /// Gate tool calls: before a gated tool runs (Bash, Edit, Write, MultiEdit, NotebookEdit
    /// unless --gated-tools says otherwise), ask a person on any machine of the tenant
    /// (`repowire approvals`) and wait; denied when nobody allows it in time.
    #[arg(long, alias = "pre-tool-use", conflicts_with = "no_approvals")]
    pub approvals: bool,
    /// Stop gating tool calls (removes the PreToolUse hook, turns `[approvals]` off).
    #[arg(long)]
    pub no_approvals: bool,
    /// With --approvals: the gated tools, comma-separated (e.g. `Bash,Write`).
    #[arg(
        long,
        value_delimiter = ',',
        requires = "approvals",
        value_name = "TOOLS"
    )]
    pub gated_tools: Option<Vec<String>>,
    /// With --approvals: seconds a gated call waits for a decision before it is denied.
    #[arg(long, requires = "approvals", value_name = "SECONDS")]
    pub approval_timeout: Option<u64>,
}

/// Checks, and with a flag records, `[approvals]` in config.toml. A bad tool list or timeout
/// stops setup before anything is written.
pub fn configure(config: &Config, args: &ApprovalArgs) -> anyhow::Result<Change> {
    if !args.approvals && !args.no_approvals {
        return Ok(Change::Keep);
    }
    let home = config.home();
    let mut file = FileConfig::load(&home)?;
    let change = if args.approvals {
        file.approvals.enabled = Some(true);
        if let Some(tools) = &args.gated_tools {
            let mut tools: Vec<String> = tools.iter().map(|t| t.trim().to_owned()).collect();
            tools.retain(|t| !t.is_empty());
            tools.dedup();
            file.approvals.tools = Some(tools);
        }
        if let Some(seconds) = args.approval_timeout {
            file.approvals.timeout_seconds = Some(seconds);
        }
        Change::Enable(file.approvals.resolve()?)
    } else {
        file.approvals.enabled = Some(false);
        Change::Disable
    };
    crate::config::ensure_home(&home)?;
    let path = home.join("config.toml");
    let text = toml::to_string(&file).context("writing config.toml")?;
    repowire_files::replace(&path, text.as_bytes(), repowire_files::Mode::Private)
        .with_context(|| format!("writing {}", path.display()))?;
    Ok(change)
}

/// Our PreToolUse entry: the gated tools as Claude Code's documented alternation (`Edit|Write`;
/// tool names are letters, digits and `_`), with a timeout above the approval timeout. The
/// hook command checks the exact name again, so a looser match only costs a quick exit.
pub fn hook_entry(command: &str, policy: &ApprovalPolicy) -> Value {
    let timeout = (policy.timeout + HOOK_MARGIN).as_secs();
    json!({
        "matcher": policy.tools.join("|"),
        "hooks": [{ "type": "command", "command": command, "timeout": timeout }],
    })
}

/// Says what changed.
pub fn report(change: &Change) {
    match change {
        Change::Enable(p) => println!(
            "approvals on: {} wait up to {} s for a person (`repowire approvals list`, `allow ID`, `deny ID`); denied otherwise",
            p.tools.join(", "),
            p.timeout.as_secs()
        ),
        Change::Disable => println!("approvals off: tool calls are no longer gated"),
        Change::Keep => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_entry_matches_exactly_the_gated_tools_and_outlives_the_approval() {
        let policy = ApprovalPolicy {
            enabled: true,
            tools: vec!["Bash".into(), "Write".into()],
            timeout: Duration::from_secs(120),
        };
        let entry = hook_entry("repowire hook pre-tool-use", &policy);
        assert_eq!(entry["matcher"], "Bash|Write");
        assert_eq!(entry["hooks"][0]["timeout"], 150);
    }
}
