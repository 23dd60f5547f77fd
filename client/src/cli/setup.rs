//! `repowire setup` / `uninstall` / `status` / `doctor`: merge our hook entries (and, when
//! allowed, our tools' permissions) into `~/.claude/settings.json` and our MCP server into
//! `~/.claude.json`, keeping every other key and entry; write atomically with a timestamped
//! backup; change nothing when nothing differs.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context;
use clap::Args;
use serde_json::{Map, Value, json};

use super::claude_settings::{
    is_ours, merge_entries, merge_hooks, read_json, remove_event, remove_hooks, split_program,
    write_if_changed,
};
use super::permissions;
use crate::api::{HookEvent, Request};
use crate::config::{Config, Environment, user_home};
use crate::runtimes::Runtime;

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
    /// Wire only these runtimes (repeatable): `claude-code`, `codex`. Left out: Claude Code,
    /// and Codex when it is installed (`$CODEX_HOME`, `~/.codex` or `codex` on PATH).
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
const PRE_TOOL_USE: HookEvent = HookEvent::PreToolUse;

pub(super) fn settings_path() -> PathBuf {
    user_home().join(".claude").join("settings.json")
}

pub(super) fn claude_json_path() -> PathBuf {
    user_home().join(".claude.json")
}

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
fn find_on_path(env: &Environment, program: &str) -> Option<PathBuf> {
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

/// The command line a hook runs; `--home` only when the state directory is not the default,
/// `--runtime` only for a runtime other than Claude Code (whose hooks predate the flag).
fn hook_command(exe: &str, config: &Config, runtime: Runtime, event: &str) -> String {
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

fn mcp_entry(exe: &str, config: &Config) -> Value {
    let mut env = Map::new();
    if let Some(home) = &config.home {
        env.insert(
            "REPOWIRE_HOME".into(),
            Value::String(home.to_string_lossy().into_owned()),
        );
    }
    json!({ "type": "stdio", "command": exe, "args": ["mcp"], "env": env })
}

fn claude_present(env: &Environment) -> bool {
    user_home().join(".claude").is_dir()
        || claude_json_path().exists()
        || env.path_dirs().iter().any(|p| p.join("claude").is_file())
}

fn codex_present(env: &Environment) -> bool {
    crate::runtimes::codex_home().is_dir()
        || env.path_dirs().iter().any(|p| p.join("codex").is_file())
}

/// The runtimes setup wires: those named, else Claude Code and an installed Codex.
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
    out
}

/// Codex's config.toml as it is (`None`: no file) and as setup leaves it.
struct CodexPlan {
    path: PathBuf,
    before: Option<String>,
    after: String,
}

fn plan_codex(
    exe: &str,
    config: &Config,
    approvals: &super::approvals_setup::Change,
    allow: bool,
) -> anyhow::Result<CodexPlan> {
    use super::codex_config::{HookGroup, McpServer, merge};
    let path = crate::runtimes::codex_config_path();
    let before = match std::fs::read_to_string(&path) {
        Ok(text) => Some(text),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(e) => return Err(e).with_context(|| format!("reading {}", path.display())),
    };
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
    let mut drop = Vec::new();
    match approvals {
        super::approvals_setup::Change::Enable(policy) => hooks.push(HookGroup {
            event: "PreToolUse",
            command: format!(
                "{} --approval-timeout {}",
                hook_command(exe, config, runtime, PRE_TOOL_USE.name()),
                policy.timeout.as_secs()
            ),
            timeout: (policy.timeout + super::approvals_setup::HOOK_MARGIN).as_secs(),
            matcher: Some(policy.tools.join("|")),
        }),
        super::approvals_setup::Change::Disable => drop.push("PreToolUse"),
        super::approvals_setup::Change::Keep => {}
    }
    let mcp = McpServer {
        command: exe.to_owned(),
        home: config
            .home
            .as_ref()
            .map(|h| h.to_string_lossy().into_owned()),
        approve_tools: allow,
    };
    let after = merge(before.as_deref().unwrap_or(""), &hooks, &drop, &mcp)
        .with_context(|| format!("updating {}", path.display()))?;
    Ok(CodexPlan {
        path,
        before,
        after,
    })
}

/// Writes Codex's config when it changed; true when written.
fn write_codex(plan: &CodexPlan) -> anyhow::Result<bool> {
    if plan.before.as_deref() == Some(plan.after.as_str()) {
        return Ok(false);
    }
    let before = plan.before.clone();
    super::config_write::write_text(&plan.path, before.is_some(), &plan.after, "Codex", |p| {
        Ok(match std::fs::read_to_string(p) {
            Ok(now) => Some(now) == before,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => before.is_none(),
            Err(e) => return Err(e.into()),
        })
    })?;
    Ok(true)
}

/// Claude Code's two files as they are and as setup leaves them.
struct ClaudePlan {
    settings: PathBuf,
    settings_before: Option<Value>,
    settings_after: Value,
    claude_json: PathBuf,
    claude_before: Option<Value>,
    claude_after: Value,
    /// Our tools' permissions are added now.
    allow: bool,
    /// Our tools are allowed once this is written (added now, or there already).
    allowed: bool,
}

fn plan_claude(
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
            && (args.allow_tools || claude.as_ref().is_some_and(|c| c.allowed));
        Some(plan_codex(&exe, config, &approvals, allowed)?)
    } else {
        None
    };
    if let Some(c) = &claude {
        let changed_settings =
            write_if_changed(&c.settings, c.settings_before.as_ref(), &c.settings_after)?;
        let changed_mcp =
            write_if_changed(&c.claude_json, c.claude_before.as_ref(), &c.claude_after)?;
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
        let changed = write_codex(plan)?;
        report(
            &plan.path,
            changed,
            plan.before.is_some(),
            "Codex hooks and MCP server `repowire`",
        );
        if changed {
            println!(
                "Codex runs new or changed hooks only once you trust them: at its next start choose \"Trust all and continue\" (`repowire doctor` says whether it has)."
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

/// Whether to allow our tools: the flags say, or the person at the terminal does (shown the
/// entries); without a terminal or with `--non-interactive`, no.
fn allow_tools(args: &SetupArgs, entries: &[String]) -> anyhow::Result<bool> {
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
    let codex = crate::runtimes::codex_config_path();
    let codex_before = match std::fs::read_to_string(&codex) {
        Ok(text) => Some(text),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(e) => return Err(e).with_context(|| format!("reading {}", codex.display())),
    };
    if let Some(text) = &codex_before {
        // Checked before anything is changed.
        super::codex_config::remove(text)
            .with_context(|| format!("updating {}", codex.display()))?;
    }
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
            write_if_changed(&settings, Some(&before), &after)?,
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
            write_if_changed(&claude_json, Some(&before), &after)?,
            true,
            "MCP server removed",
        );
    }
    if let Some(before) = codex_before {
        let after = super::codex_config::remove(&before)
            .with_context(|| format!("updating {}", codex.display()))?;
        let plan = CodexPlan {
            path: codex.clone(),
            before: Some(before),
            after,
        };
        report(
            &codex,
            write_codex(&plan)?,
            true,
            "Codex hooks and MCP server removed",
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
