//! `repowire status` / `repowire doctor`: what is installed and running, and what to fix — the
//! Claude Code configuration `setup` writes (see [`super::setup`]), the daemon, and the relay
//! it uses.

use std::process::ExitCode;
use std::time::Duration;

use serde_json::{Value, json};

use super::claude_settings::{is_ours, read_json};
use super::permissions;
use super::setup::{EVENTS, broken_hooks, claude_json_path, settings_path};
use crate::api::{LinkState, Request};
use crate::config::Config;
use crate::runtimes::Runtime;

/// doctor's findings, printed at the end as a list or as JSON.
struct Checks {
    failed: bool,
    found: Vec<Value>,
}

impl Checks {
    fn check(&mut self, ok: bool, what: &str, fix: &str) {
        self.failed |= !ok;
        self.found.push(if ok {
            json!({ "ok": true, "check": what })
        } else {
            json!({ "ok": false, "check": what, "fix": fix })
        });
    }

    fn print(&self, json: bool) {
        if json {
            println!("{:#}", json!({ "ok": !self.failed, "checks": self.found }));
            return;
        }
        for c in &self.found {
            let what = c["check"].as_str().unwrap_or("");
            if c["ok"] == true {
                println!("✓ {what}");
            } else {
                println!("✗ {what}\n    fix: {}", c["fix"].as_str().unwrap_or(""));
            }
        }
    }
}

fn hooks_installed() -> Vec<String> {
    let Ok(Some(settings)) = read_json(&settings_path()) else {
        return Vec::new();
    };
    EVENTS
        .iter()
        .map(|event| event.claude_name())
        .filter(|event| {
            settings
                .get("hooks")
                .and_then(|h| h.get(*event))
                .and_then(Value::as_array)
                .is_some_and(|l| l.iter().any(is_ours))
        })
        .map(str::to_owned)
        .collect()
}

/// The tools our PreToolUse hook in settings.json gates (its matcher), if it is installed.
fn gated_by_hook(settings: &Value) -> Option<String> {
    settings
        .get("hooks")
        .and_then(|h| h.get(crate::api::HookEvent::PreToolUse.claude_name()))
        .and_then(Value::as_array)?
        .iter()
        .find(|e| is_ours(e))
        .map(|e| e["matcher"].as_str().unwrap_or_default().to_owned())
}

/// What approvals do on this machine, as one line, and whether the hook that does it matches
/// config.toml (`None` when it does, else what to do). Issue 35.7: enabled in config.toml with
/// no hook installed, doctor showed every check passed.
fn approvals_line(config: &Config) -> (String, Option<String>) {
    let Ok(policy) = config.approvals() else {
        return (
            "approvals unknown (the configuration is unreadable)".into(),
            None,
        );
    };
    let policy = &policy;
    let claude = read_json(&settings_path())
        .ok()
        .flatten()
        .unwrap_or(Value::Null);
    let hook = gated_by_hook(&claude);
    if !policy.enabled {
        return (
            "approvals off: agents' tool calls run without a person (`repowire setup --approvals` gates Bash, Edit and Write)".into(),
            None,
        );
    }
    let line = format!(
        "approvals on: {} wait up to {} s for a person, then are denied; an agent started before a change keeps the hooks it started with until it is restarted",
        policy.tools.join(", "),
        policy.timeout.as_secs()
    );
    let wanted = policy.tools.join("|");
    let fix = match hook {
        Some(m) if m == wanted => None,
        Some(m) => Some(format!(
            "Claude Code's PreToolUse hook gates `{}`, config.toml says `{wanted}`: run `repowire setup --approvals`, then restart running agents",
            crate::sanitize::for_terminal(&m)
        )),
        None => Some(
            "config.toml turns approvals on, but Claude Code has no Repowire PreToolUse hook, so nothing is gated: run `repowire setup --approvals`, then restart running agents".into(),
        ),
    };
    (line, fix)
}

fn mcp_installed() -> bool {
    matches!(read_json(&claude_json_path()), Ok(Some(v)) if v.get("mcpServers").and_then(|m| m.get("repowire")).is_some())
}

/// `repowire status`.
pub fn status(config: &Config, json: bool) -> anyhow::Result<ExitCode> {
    let hooks = hooks_installed();
    let broken = broken_hooks(&config.env);
    let mcp = mcp_installed();
    let daemon = super::daemon_status(config, Duration::from_secs(5)).ok();
    let drift = daemon.as_ref().and_then(|d| super::relay_drift(config, d));
    let version_drift = daemon.as_ref().and_then(super::version_drift);
    let approvals = approvals_line(config);
    let codex_path = crate::runtimes::codex_config_path();
    let codex = std::fs::read_to_string(&codex_path)
        .ok()
        .map(|text| super::codex_config::trust(&text, &codex_path.to_string_lossy()))
        .filter(|ours| !ours.is_empty());
    let gemini = super::setup_gemini::installed();
    let opencode = super::setup_opencode::installed();
    if json {
        let report = json!({
            "hooks": {
                "installed": hooks,
                "expected": EVENTS.len(),
                "settings": settings_path(),
                "broken": broken.iter().map(|(event, program)| json!({"event": event, "program": program})).collect::<Vec<_>>(),
            },
            "mcp_registered": mcp,
            "codex": codex.as_ref().map(|ours| json!({
                "config": codex_path,
                "hooks": ours.iter().map(|(event, trusted)| json!({"event": event, "trusted": trusted})).collect::<Vec<_>>(),
                "mcp_registered": Runtime::Codex.mcp_registered(),
            })),
            "gemini": gemini.as_ref().map(|(path, hooks)| json!({
                "settings": path,
                "hooks": hooks,
                "mcp_registered": Runtime::Gemini.mcp_registered(),
            })),
            "opencode": opencode.as_ref().map(|plugin| json!({
                "plugin": plugin,
                "mcp_registered": Runtime::OpenCode.mcp_registered(),
            })),
            "daemon": daemon.as_ref().map(|d| json!({
                "pid": d.pid,
                "relay": d.relay_label(),
                "link": d.link,
                "outbox": d.outbox,
                "queued_elsewhere": d.queued_elsewhere,
            })),
            "relay_drift": drift.as_ref().map(|(daemon, shell)| json!({"daemon": daemon, "shell": shell})),
            "version_drift": version_drift.as_ref().map(|daemon| json!({"daemon": daemon, "this": crate::VERSION})),
            "approvals": { "summary": approvals.0, "problem": approvals.1 },
        });
        println!("{report:#}");
        return Ok(ExitCode::SUCCESS);
    }
    println!(
        "hooks    {}/{} installed in {}",
        hooks.len(),
        EVENTS.len(),
        settings_path().display()
    );
    for (event, program) in &broken {
        println!(
            "         BROKEN: the {event} hook runs `{program}`, which does not exist: run `repowire setup` again"
        );
    }
    println!(
        "mcp      {}",
        if mcp {
            "registered in ~/.claude.json"
        } else {
            "not registered"
        }
    );
    if let Some((path, hooks)) = &gemini {
        println!(
            "gemini   {hooks} hooks in {}; MCP server {}",
            path.display(),
            if Runtime::Gemini.mcp_registered() {
                "registered"
            } else {
                "not registered"
            }
        );
    }
    if let Some(plugin) = &opencode {
        println!(
            "opencode plugin {}; MCP server {}",
            plugin.display(),
            if Runtime::OpenCode.mcp_registered() {
                "registered"
            } else {
                "not registered"
            }
        );
    }
    if let Some(ours) = &codex {
        let untrusted = ours.iter().filter(|(_, trusted)| !trusted).count();
        println!(
            "codex    {} hooks in {}{}; MCP server {}",
            ours.len(),
            codex_path.display(),
            if untrusted == 0 {
                String::new()
            } else {
                format!(" ({untrusted} not yet trusted in Codex)")
            },
            if Runtime::Codex.mcp_registered() {
                "registered"
            } else {
                "not registered"
            }
        );
    }
    let (approvals, fix) = approvals;
    println!("{approvals}");
    if let Some(fix) = fix {
        println!("         NOT GATED AS CONFIGURED: {fix}");
    }
    match &daemon {
        Some(status) => {
            println!(
                "daemon   running (pid {}), relay {}, link {}",
                status.pid,
                status.relay_label(),
                status.link.name()
            );
            for line in super::refused_sessions(status) {
                println!("         REFUSED: {line}");
            }
            if let Some((daemon, shell)) = &drift {
                println!(
                    "relay    DIFFERS: the running daemon uses {daemon}; this shell's settings say {shell}\n         {}",
                    super::RESTART_HINT
                );
            }
            if let Some(daemon) = &version_drift {
                println!(
                    "version  DIFFERS: the running daemon is {}, this binary {}\n         {}",
                    crate::sanitize::for_terminal(daemon),
                    crate::VERSION,
                    super::RESTART_HINT
                );
            }
            if let LinkState::Stopped {
                reason,
                key_refused: true,
            } = &status.link
            {
                println!(
                    "key      REVOKED or unknown ({}): run `repowire setup --relay-url URL --api-key rw_live_…`, then restart the daemon",
                    crate::sanitize::for_terminal(reason)
                );
            }
            for q in &status.queued_elsewhere {
                let realm = crate::sanitize::for_terminal(&q.realm);
                println!(
                    "queued   {} message(s) for another relay or tenant, not sent here: {realm}\n         \
                     they go out when this machine uses that relay again; `repowire outbox drop {realm}` drops them",
                    q.messages,
                );
            }
        }
        None if super::call(config, &Request::Status, Duration::from_secs(2)).is_ok() => println!(
            "daemon   running, {}: {}",
            super::UNREADABLE_BUILD,
            super::RESTART_HINT
        ),
        None => println!("daemon   not running (`repowire daemon start`)"),
    }
    Ok(ExitCode::SUCCESS)
}

/// `repowire doctor`.
pub fn doctor(config: &Config, json: bool) -> anyhow::Result<ExitCode> {
    let mut c = Checks {
        failed: false,
        found: Vec::new(),
    };
    let settings = config.settings();
    c.check(
        settings.is_ok(),
        "configuration is readable",
        &format!(
            "{:#}",
            settings
                .as_ref()
                .err()
                .map(|e| e.to_string())
                .unwrap_or_default()
        ),
    );
    c.check(
        hooks_installed().len() == EVENTS.len(),
        "Claude Code hooks installed",
        "run `repowire setup`",
    );
    c.check(
        mcp_installed(),
        "MCP server registered",
        "run `repowire setup`",
    );
    // Gemini CLI, when setup wired it: its BeforeTool hook gates tool calls.
    if super::setup_gemini::installed().is_some()
        && let Ok(policy) = config.approvals()
        && policy.enabled
        && !Runtime::Gemini.native_tool_names(&policy.tools).is_empty()
    {
        c.check(
            super::setup_gemini::settings_gate_tools(),
            "Gemini CLI gates tool calls as config.toml's [approvals] says",
            "config.toml turns approvals on, but Gemini CLI has no Repowire BeforeTool hook, so its tool calls run unasked: run `repowire setup --approvals`, then restart running agents",
        );
    }
    // OpenCode, when setup wired it: its plugin gates tool calls only when setup said so.
    if let Some(plugin) = super::setup_opencode::installed()
        && let Ok(policy) = config.approvals()
        && policy.enabled
    {
        c.check(
            super::setup_opencode::gates_tools(&plugin),
            "OpenCode gates tool calls as config.toml's [approvals] says",
            "config.toml turns approvals on, but OpenCode's Repowire plugin was written without them, so its tool calls run unasked: run `repowire setup --approvals`, then restart running agents",
        );
    }
    // Codex, when setup wired it: its hooks run only once a person trusted them.
    let codex = crate::runtimes::codex_config_path();
    if let Ok(text) = std::fs::read_to_string(&codex) {
        let ours = super::codex_config::trust(&text, &codex.to_string_lossy());
        if !ours.is_empty() {
            let untrusted: Vec<&str> = ours
                .iter()
                .filter(|(_, trusted)| !trusted)
                .map(|(event, _)| event.as_str())
                .collect();
            if let Ok(policy) = config.approvals()
                && policy.enabled
            {
                c.check(
                    ours.iter().any(|(event, _)| event == "PreToolUse"),
                    "Codex gates tool calls as config.toml's [approvals] says",
                    "config.toml turns approvals on, but Codex has no Repowire PreToolUse hook, so its tool calls run unasked: run `repowire setup --approvals`, then restart running agents",
                );
            }
            c.check(
                untrusted.is_empty(),
                "Codex has trusted Repowire's hooks",
                &format!(
                    "Codex will not run the hooks for {} until you trust them: start `codex` and choose \"Trust all and continue\" (or review them)",
                    untrusted.join(", ")
                ),
            );
        }
    }
    let settings_now = read_json(&settings_path())
        .ok()
        .flatten()
        .unwrap_or(Value::Null);
    c.check(
        permissions::missing(&settings_now).is_empty(),
        "Repowire's MCP tools are allowed without a permission prompt",
        "run `repowire setup --allow-tools`: until then each call of ask, ack, answer… waits for a person to approve it",
    );
    let broken = broken_hooks(&config.env);
    let what: Vec<String> = broken
        .iter()
        .map(|(event, program)| format!("{event} runs `{program}`, which does not exist"))
        .collect();
    c.check(
        broken.is_empty(),
        "every installed hook command resolves to a program",
        &format!(
            "{}: install with `cargo install --locked --profile dist --path client` (so `repowire` is on PATH) and run `repowire setup` again",
            what.join("; ")
        ),
    );
    c.check(
        crate::tmux::version().is_some(),
        "tmux is available (needed to wake idle agents)",
        "install tmux",
    );
    let (approvals, fix) = approvals_line(config);
    c.check(fix.is_none(), &approvals, fix.as_deref().unwrap_or(""));
    let answer = super::call(config, &Request::Status, Duration::from_secs(5));
    match answer
        .map(|a| crate::api::typed::<crate::api::DaemonStatus>(a).map_err(|e| e.to_string()))
    {
        Ok(Err(unreadable)) => {
            c.check(true, "daemon is running", "");
            c.check(
                false,
                &format!(
                    "the running daemon is this binary's version ({})",
                    crate::VERSION
                ),
                &format!(
                    "it runs {} ({unreadable}); {}",
                    super::UNREADABLE_BUILD,
                    super::RESTART_HINT
                ),
            );
        }
        Ok(Ok(status)) => {
            c.check(true, "daemon is running", "");
            let other_build = super::version_drift(&status);
            c.check(
                other_build.is_none(),
                &format!("the running daemon is this binary's version ({})", crate::VERSION),
                &other_build
                    .map(|daemon| {
                        format!(
                            "it runs {}, so hooks, CLI and MCP server of this version may ask for what it does not know; {}",
                            crate::sanitize::for_terminal(&daemon),
                            super::RESTART_HINT
                        )
                    })
                    .unwrap_or_default(),
            );
            let drift = super::relay_drift(config, &status);
            c.check(
                drift.is_none(),
                &format!(
                    "the running daemon uses this shell's relay ({})",
                    status.relay_label()
                ),
                &drift
                    .map(|(_, shell)| {
                        format!("this shell's settings say {shell}; {}", super::RESTART_HINT)
                    })
                    .unwrap_or_default(),
            );
            c.check(
                matches!(status.link, LinkState::Connected { .. }),
                &format!("relay link is connected ({})", status.link.name()),
                &link_fix(&status.link),
            );
            let refused = super::refused_sessions(&status);
            c.check(
                refused.is_empty(),
                "the relay registered every local agent session",
                &refused.join("; "),
            );
        }
        // The first line only: the call error carries a hint of its own that says the same.
        Err(e) => c.check(
            false,
            "daemon is running",
            &format!(
                "`repowire daemon start` ({})",
                e.to_string().lines().next().unwrap_or_default()
            ),
        ),
    }
    c.print(json);
    Ok(if c.failed {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    })
}

/// What to do about a relay link that is not connected, from what the daemon knows of why: a
/// refused key needs a new one, a suspended tenant its operator; anything else the settings.
fn link_fix(link: &LinkState) -> String {
    // The relay's own words (a close reason) may be in it.
    let (said, key_refused) = match link {
        LinkState::Connecting { last_error } => (last_error.as_deref().unwrap_or("-"), false),
        LinkState::Stopped {
            reason,
            key_refused,
        } => (reason.as_str(), *key_refused),
        LinkState::Registering { .. } | LinkState::Connected { .. } | LinkState::Unknown => {
            ("-", false)
        }
    };
    let said = crate::sanitize::for_terminal(said);
    if key_refused {
        format!(
            "the relay refused the API key (revoked, expired or unknown): get a new key, run `repowire setup --relay-url URL --api-key rw_live_…`, then `repowire daemon restart` ({said})"
        )
    } else if said.contains("tenant_suspended") || said.contains("suspended this tenant") {
        format!(
            "the relay's operator suspended this tenant: ask them to resume it; the same key works again then, and the daemon keeps retrying by itself ({said})"
        )
    } else {
        format!(
            "check the relay URL and the API key (`repowire config show`, `repowire check-relay`); last error: {said}"
        )
    }
}
