//! `repowire setup` / `uninstall`: for each runtime wired ([`super::setup_claude`],
//! [`super::setup_codex`]) merge our hook entries (and, when allowed, our tools' permissions)
//! and our MCP server into its files, keeping every other key and entry; read and plan every
//! file before writing any; write atomically with a timestamped backup; change nothing when
//! nothing differs.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context;
use clap::Args;
use serde_json::Value;

use super::claude_settings::{read_json, remove_hooks, write_if_changed};
use super::permissions;
use super::setup_claude::{claude_present, plan_claude};
use super::setup_codex::{CodexPlan, codex_present};
use super::setup_gemini::{GeminiPlan, gemini_present};
use super::setup_opencode::{OpenCodePlan, opencode_present};
use crate::api::{HookEvent, Request};
use crate::config::{Config, Environment, user_home};
use crate::runtimes::Runtime;

pub(super) use super::setup_claude::{broken_hooks, claude_json_path, settings_path};

/// Options of setup.
#[derive(Debug, Clone, Args)]
pub struct SetupArgs {
    /// Never prompt (setup never prompts today; accepted for scripts).
    #[arg(long)]
    pub non_interactive: bool,
    // Tool-call approvals (`--approvals`, `--no-approvals`, `--gated-tools`, …).
    #[command(flatten)]
    pub approvals: super::approvals_setup::ApprovalArgs,
    /// Also write a systemd user service that runs the daemon.
    #[arg(long)]
    pub service: bool,
    /// Add Repowire's MCP tools to Claude Code's `permissions.allow`, so that agents call them
    /// without a permission prompt (asked, showing the entries, when neither flag is given).
    #[arg(long, conflicts_with = "no_allow_tools")]
    pub allow_tools: bool,
    /// Leave Claude Code's permissions as they are.
    #[arg(long)]
    pub no_allow_tools: bool,
    /// Where to keep the relay API key: the OS keyring when one answers (`auto`, the default
    /// for a key given now), the keyring or fail (`keyring`), or a file readable only by you
    /// (`file`). Given alone, moves the stored key there; left out, a stored key stays put.
    #[arg(long, value_enum)]
    pub key_store: Option<crate::apikey::KeyStoreChoice>,
    /// Wire only these runtimes (repeatable): `claude-code`, `codex`, `gemini`, `opencode`.
    /// Left out: Claude Code, and Codex, Gemini CLI and OpenCode when installed
    /// (`$CODEX_HOME` or `~/.codex`, `~/.gemini/settings.json`,
    /// `~/.config/opencode/opencode.json`, or `codex`/`gemini`/`opencode` on PATH).
    #[arg(long = "runtime", value_enum)]
    pub runtimes: Vec<Runtime>,
}

/// Options of uninstall.
#[derive(Debug, Clone, Args)]
pub struct UninstallArgs {
    /// Never prompt (uninstall never prompts today; accepted for scripts).
    #[arg(long)]
    pub non_interactive: bool,
}

const SERVICE_MARK: &str =
    "# Installed by `repowire setup --service`; removed by `repowire uninstall`.";

fn service_path(env: &Environment) -> PathBuf {
    env.xdg_config_home
        .clone()
        .unwrap_or_else(|| user_home().join(".config"))
        .join("systemd/user/repowire.service")
}

/// One word of a systemd command line: double-quoted, with `\\`, `"` and `%` escaped.
fn systemd_quote(s: &str) -> String {
    let escaped = s
        .replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('%', "%%");
    format!("\"{escaped}\"")
}

fn service_unit(exe: &str, config: &Config) -> String {
    let home = config
        .home
        .as_ref()
        .map(|h| format!(" --home {}", systemd_quote(&h.to_string_lossy())))
        .unwrap_or_default();
    format!(
        "{SERVICE_MARK}\n[Unit]\nDescription=Repowire daemon (agent sessions talk to each other)\n\n\
         [Service]\nExecStart={}{home} daemon run\nRestart=on-failure\nRestartSec=2\n\n\
         [Install]\nWantedBy=default.target\n",
        systemd_quote(exe)
    )
}

/// Writes the user service if it differs; true when written.
fn install_service(exe: &str, config: &Config) -> anyhow::Result<bool> {
    let path = service_path(&config.env);
    let unit = service_unit(exe, config);
    match std::fs::read_to_string(&path) {
        Ok(existing) if existing == unit => return Ok(false),
        Ok(existing) if !existing.starts_with(SERVICE_MARK) => anyhow::bail!(
            "{} exists and was not written by repowire; not touching it",
            path.display()
        ),
        _ => {}
    }
    repowire_files::replace(&path, unit.as_bytes(), repowire_files::Mode::Keep)
        .with_context(|| format!("writing {}", path.display()))?;
    Ok(true)
}

/// The hook events every setup installs (the shared table in [`HookEvent`]).
pub(super) const EVENTS: [HookEvent; 5] = HookEvent::ALWAYS;
pub(super) const PRE_TOOL_USE: HookEvent = HookEvent::PreToolUse;

/// The absolute path of this binary for a program that does not search the user's PATH (a
/// systemd user service: `~/.cargo/bin` is not on its search path): the PATH entry that runs
/// this binary when there is one (it survives a reinstall), else the binary itself.
fn exe_path(env: &Environment) -> anyhow::Result<String> {
    let me = std::env::current_exe().context("locating the repowire binary")?;
    let me_real = std::fs::canonicalize(&me).unwrap_or_else(|_| me.clone());
    let on_path = find_on_path(env, "repowire")
        .and_then(|p| std::path::absolute(p).ok())
        .filter(|p| std::fs::canonicalize(p).ok().as_deref() == Some(me_real.as_path()));
    Ok(on_path.unwrap_or(me_real).to_string_lossy().into_owned())
}

/// The program hooks and the MCP entry run: `repowire` when that name on PATH is this very
/// binary (an installed `repowire` keeps working after the build tree is cleaned or moved),
/// else this binary's absolute path.
fn exe(env: &Environment) -> anyhow::Result<String> {
    let me = std::env::current_exe().context("locating the repowire binary")?;
    let me_real = std::fs::canonicalize(&me).unwrap_or_else(|_| me.clone());
    let on_path = find_on_path(env, "repowire").and_then(|p| std::fs::canonicalize(p).ok());
    Ok(if on_path.as_deref() == Some(me_real.as_path()) {
        "repowire".to_owned()
    } else {
        me_real.to_string_lossy().into_owned()
    })
}

/// The executable file a program name resolves to: itself if it has a `/`, else through PATH.
pub(super) fn find_on_path(env: &Environment, program: &str) -> Option<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    let runnable = |p: &Path| {
        std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    };
    if program.contains('/') {
        let p = PathBuf::from(program);
        return runnable(&p).then_some(p);
    }
    env.path_dirs()
        .into_iter()
        .map(|dir| dir.join(program))
        .find(|p| runnable(p))
}

/// The command line a hook runs; `--home` only when the state directory is not the default,
/// `--runtime` only for a runtime other than Claude Code (whose hooks predate the flag).
pub(super) fn hook_command(exe: &str, config: &Config, runtime: Runtime, event: &str) -> String {
    let home = match &config.home {
        Some(home) => format!(" --home {}", shell_quote(&home.to_string_lossy())),
        None => String::new(),
    };
    let runtime = match runtime {
        Runtime::ClaudeCode => String::new(),
        other => format!(" --runtime {}", other.backend()),
    };
    format!("{}{home} hook{runtime} {event}", shell_quote(exe))
}

fn shell_quote(s: &str) -> String {
    if s.chars()
        .all(|c| c.is_ascii_alphanumeric() || "/._-+=:@%".contains(c))
    {
        s.to_owned()
    } else {
        format!("'{}'", s.replace('\'', "'\\''"))
    }
}

/// The runtimes setup wires: those named, else Claude Code and an installed Codex or Gemini CLI.
fn chosen(args: &SetupArgs, env: &Environment) -> Vec<Runtime> {
    if !args.runtimes.is_empty() {
        return Runtime::ALL
            .into_iter()
            .filter(|r| args.runtimes.contains(r))
            .collect();
    }
    let mut out = vec![Runtime::ClaudeCode];
    if codex_present(env) {
        out.push(Runtime::Codex);
    }
    if gemini_present(env) {
        out.push(Runtime::Gemini);
    }
    if opencode_present(env) {
        out.push(Runtime::OpenCode);
    }
    out
}

/// `repowire setup`.
pub fn setup(config: &Config, args: &SetupArgs) -> anyhow::Result<ExitCode> {
    // The relay first: a wrong URL or key stops setup before anything is written.
    let relay = super::relay_setup::configure(config, args.key_store)?;
    let runtimes = chosen(args, &config.env);
    let claude = runtimes.contains(&Runtime::ClaudeCode);
    if claude && !claude_present(&config.env) {
        println!(
            "Claude Code was not found (no ~/.claude, ~/.claude.json or `claude` on PATH); installing its configuration anyway."
        );
    }
    let exe = exe(&config.env)?;
    // `[approvals]` is checked (and, with a flag, written) before anything else is.
    let approvals = super::approvals_setup::configure(config, &args.approvals)?;

    // Every file is read and its new content built before any is written: a file that cannot
    // be updated (not JSON, not TOML, not an object) stops setup with nothing changed.
    let claude = if claude {
        Some(plan_claude(&exe, config, args, &approvals)?)
    } else {
        None
    };
    let codex = if runtimes.contains(&Runtime::Codex) {
        let allowed = !args.no_allow_tools
            && (args.allow_tools
                || match &claude {
                    Some(c) => c.allowed,
                    // Codex alone: asked as for Claude Code (a terminal and no flag).
                    None => super::setup_claude::allow_tools(
                        args,
                        &[
                            "[mcp_servers.repowire] default_tools_approval_mode = \"approve\""
                                .into(),
                        ],
                    )?,
                });
        Some(CodexPlan::install(&exe, config, &approvals, allowed)?)
    } else {
        None
    };
    let gemini = if runtimes.contains(&Runtime::Gemini) {
        let allowed = !args.no_allow_tools
            && (args.allow_tools
                || claude.as_ref().is_some_and(|c| c.allowed)
                || codex.as_ref().is_some_and(CodexPlan::approves_tools));
        match GeminiPlan::install(&exe, config, allowed, &approvals) {
            Ok(plan) => Some(plan),
            // Found, not named: a settings.json we cannot edit (Gemini allows comments in it)
            // is left alone and said, not a reason to stop wiring the others.
            Err(e) if !args.runtimes.contains(&Runtime::Gemini) => {
                println!("Gemini CLI left as it is: {e:#}");
                None
            }
            Err(e) => return Err(e),
        }
    } else {
        None
    };
    let opencode = if runtimes.contains(&Runtime::OpenCode) {
        match OpenCodePlan::install(&exe, config, &approvals) {
            Ok(plan) => Some(plan),
            // Found, not named: an opencode.json we cannot edit is left alone and said.
            Err(e) if !args.runtimes.contains(&Runtime::OpenCode) => {
                println!("OpenCode left as it is: {e:#}");
                None
            }
            Err(e) => return Err(e),
        }
    } else {
        None
    };
    if let Some(c) = &claude {
        let changed_settings = write_if_changed(
            &c.settings,
            c.settings_before.as_ref(),
            &c.settings_after,
            "Claude Code",
        )?;
        let changed_mcp = write_if_changed(
            &c.claude_json,
            c.claude_before.as_ref(),
            &c.claude_after,
            "Claude Code",
        )?;
        report(
            &c.settings,
            changed_settings,
            c.settings_before.is_some(),
            if c.allow {
                "Claude Code hooks; Repowire's tools allowed"
            } else {
                "Claude Code hooks"
            },
        );
        if !c.allowed {
            println!(
                "Repowire's MCP tools are not allowed in Claude Code: each call of ask, ack, answer… waits for a person to approve it. `repowire setup --allow-tools` allows them."
            );
        }
        report(
            &c.claude_json,
            changed_mcp,
            c.claude_before.is_some(),
            "Claude Code's MCP server `repowire`",
        );
    }
    if let Some(plan) = &codex {
        let changed = plan.write()?;
        report(
            &plan.path,
            changed,
            plan.before.is_some(),
            "Codex hooks and MCP server `repowire`",
        );
        if !plan.approves_tools() {
            println!(
                "Repowire's MCP tools are not allowed in Codex: each call of ask, ack, answer… waits for a person to approve it (and `codex exec` fails it). `repowire setup --allow-tools` allows them."
            );
        }
        if changed {
            println!(
                "Codex runs new or changed hooks only once you trust them: at its next start choose \"Trust all and continue\" (`repowire doctor` says whether it has)."
            );
        }
    }
    if let Some(plan) = &gemini {
        report(
            &plan.path,
            plan.write()?,
            plan.before.is_some(),
            "Gemini CLI hooks and MCP server `repowire`",
        );
        if !plan.trusts_tools() {
            println!(
                "Repowire's MCP tools are not trusted in Gemini CLI: each call of ask, ack, answer… waits for a person to approve it (and `gemini -p` does not offer them). `repowire setup --allow-tools` trusts them."
            );
        }
        if plan.gates_tools() {
            println!(
                "Gemini CLI's run_shell_command, write_file and replace calls wait for an approval like Claude Code's Bash, Write and Edit."
            );
        }
    }
    if let Some(plan) = &opencode {
        report(
            &plan.path,
            plan.write()?,
            plan.before.is_some(),
            &format!(
                "OpenCode's MCP server `repowire`; its plugin is {}",
                plan.plugin.display()
            ),
        );
        if plan.gates_tools() {
            println!(
                "OpenCode's bash, edit and write calls wait for an approval like Claude Code's Bash, Edit and Write."
            );
        }
    }
    super::approvals_setup::report(&approvals);
    if args.service {
        let path = service_path(&config.env);
        if install_service(&exe_path(&config.env)?, config)? {
            println!("wrote {}", path.display());
        } else {
            println!("{} already up to date", path.display());
        }
        println!(
            "Enable it with: systemctl --user daemon-reload && systemctl --user enable --now repowire"
        );
    }
    match &relay {
        Some(r) => println!(
            "This machine now uses the relay at {} (tenant {}); the key is in {}.",
            r.url, r.tenant_id, r.key_where
        ),
        None => match config.relay_url_only() {
            Ok(Some(url)) => {
                println!("This machine uses the relay at {url} (config.toml or environment).")
            }
            _ => println!(
                "This machine uses its own embedded relay (local only); `repowire setup --relay-url URL --api-key KEY` joins a shared one."
            ),
        },
    }
    // Any answer means a daemon runs, whatever its build.
    let running = super::call(config, &Request::Status, Duration::from_secs(2)).is_ok();
    if running && relay.is_some() {
        println!(
            "A daemon is running with the previous settings: restart it with `repowire daemon restart`."
        );
    } else if running {
        println!("The daemon is running; `repowire doctor` checks everything.");
    } else {
        println!(
            "Start the daemon with `repowire daemon start`; `repowire doctor` checks everything."
        );
    }
    Ok(ExitCode::SUCCESS)
}

fn report(path: &Path, changed: bool, existed: bool, what: &str) {
    if changed && existed {
        println!(
            "updated {} ({what}; the previous version is kept as a .repowire-backup-* file)",
            path.display()
        );
    } else if changed {
        println!("created {} ({what})", path.display());
    } else {
        println!("{} already up to date ({what})", path.display());
    }
}

/// `repowire uninstall`.
pub fn uninstall(config: &Config, _args: &UninstallArgs) -> anyhow::Result<ExitCode> {
    // Every file is read before anything is changed (see `setup`).
    let settings = settings_path();
    let claude_json = claude_json_path();
    let settings_before = read_json(&settings)?;
    let claude_before = read_json(&claude_json)?;
    let codex = CodexPlan::uninstall()?;
    let gemini = match GeminiPlan::uninstall() {
        Ok(plan) => plan,
        Err(e) => {
            println!("Gemini CLI's settings left as they are: {e:#}");
            None
        }
    };
    let opencode = match OpenCodePlan::uninstall() {
        Ok(plan) => plan,
        Err(e) => {
            println!("OpenCode's configuration left as it is: {e:#}");
            None
        }
    };
    let unit = service_path(&config.env);
    if std::fs::read_to_string(&unit).is_ok_and(|u| u.starts_with(SERVICE_MARK)) {
        std::fs::remove_file(&unit).with_context(|| format!("removing {}", unit.display()))?;
        println!(
            "removed {} (run `systemctl --user disable --now repowire` if it was enabled)",
            unit.display()
        );
    }
    if let Some(before) = settings_before {
        let after = permissions::remove(remove_hooks(before.clone()));
        report(
            &settings,
            write_if_changed(&settings, Some(&before), &after, "Claude Code")?,
            true,
            "hooks and Repowire's tool permissions removed",
        );
    }
    if let Some(before) = claude_before {
        let mut after = before.clone();
        if let Some(servers) = after.get_mut("mcpServers").and_then(Value::as_object_mut) {
            servers.remove("repowire");
            if servers.is_empty()
                && let Some(root) = after.as_object_mut()
            {
                root.remove("mcpServers");
            }
        }
        report(
            &claude_json,
            write_if_changed(&claude_json, Some(&before), &after, "Claude Code")?,
            true,
            "MCP server removed",
        );
    }
    if let Some(plan) = codex {
        report(
            &plan.path,
            plan.write()?,
            true,
            "Codex hooks and MCP server removed",
        );
    }
    if let Some(plan) = gemini {
        report(
            &plan.path,
            plan.write()?,
            true,
            "Gemini CLI hooks and MCP server removed",
        );
    }
    if let Some(plan) = opencode {
        report(
            &plan.path,
            plan.write()?,
            true,
            "OpenCode's plugin and MCP server removed",
        );
    }
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn systemd_words_escape_quotes_backslashes_and_percent() {
        assert_eq!(
            systemd_quote("/opt/a b/100%\"x\\"),
            "\"/opt/a b/100%%\\\"x\\\\\""
        );
    }
}
