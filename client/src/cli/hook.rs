//! `repowire hook <event>`: forwards the runtime's hook JSON to the daemon and prints what
//! the daemon answers. It must never hang or break the agent: no daemon, a slow daemon or
//! bad input all end quickly with exit 0 and no output. Run by hand in a terminal, it
//! refuses rather than make the terminal an agent session.
//!
//! `pre-tool-use` is the exception to "no output": it gates tools, so it fails closed. With
//! approvals enabled and the tool gated, every path prints a decision, and anything but an
//! approver's allow (no daemon, a timeout, a payload it cannot read, a crash) is a deny.

use std::io::{Read, Write};
use std::process::ExitCode;
use std::time::Duration;

use serde_json::Value;

use crate::api::{self, Request};
use crate::config::Config;
use crate::runtimes::Runtime;

/// Largest payload read from stdin.
const MAX_PAYLOAD: u64 = 4 * 1024 * 1024;

/// Hook events (the shared table).
pub use crate::api::HookEvent as Event;

/// How long the daemon may take to answer a hook.
fn timeout(event: Event) -> Duration {
    match event {
        // Registration and the peer list are two relay round trips.
        Event::SessionStart => Duration::from_secs(12),
        _ => Duration::from_secs(8),
    }
}

/// True when a person runs the hook in a terminal, not a runtime: a runtime pipes the hook's
/// stdin (the payload) and stdout (what it reads back), and sets its own variables.
fn run_by_hand(stdin_tty: bool, stdout_tty: bool, runtime_env: bool) -> bool {
    (stdin_tty || stdout_tty) && !runtime_env
}

/// What a hook run by hand prints instead of making the terminal an agent session.
const BY_HAND: &str = "repowire hook: not run by an agent runtime (this is a terminal and no \
runtime variables such as CLAUDE_PROJECT_DIR are set), so nothing was registered.
Hooks are run by the agent runtime (Claude Code, Codex, Gemini CLI) once `repowire setup`
installed them. From a terminal:
  repowire whoami            which peer this terminal acts as
  repowire peer list         who is online
  repowire inbox             what peers sent you
  repowire link --pane %N    make an agent already running in a tmux pane a peer";

/// Runs the hook. Exits 0 whatever happens when a runtime runs it: a hook failure must not
/// break the agent. Run by hand in a terminal, it refuses with exit 1 and says what to do.
pub fn run(config: &Config, runtime: Runtime, event: Event, approval_cap: Option<u64>) -> ExitCode {
    use std::io::IsTerminal;
    let runtime_env = config.env.agent_runtime;
    if run_by_hand(
        std::io::stdin().is_terminal(),
        std::io::stdout().is_terminal(),
        runtime_env,
    ) {
        eprintln!("{BY_HAND}");
        return ExitCode::FAILURE;
    }
    if event == Event::PreToolUse {
        // A panic would exit non-zero, which Claude Code treats as "no decision": the tool
        // would run. Caught, it denies.
        let decided = std::panic::catch_unwind(|| pre_tool_use(config, runtime, approval_cap))
            .unwrap_or_else(|_| Some(deny("the approval hook failed unexpectedly; denied")));
        if let Some(output) = decided {
            let output = runtime.tool_decision(output);
            let mut stdout = std::io::stdout().lock();
            let _ = writeln!(stdout, "{output}");
        }
        return ExitCode::SUCCESS;
    }
    let mut raw = String::new();
    if std::io::stdin()
        .take(MAX_PAYLOAD)
        .read_to_string(&mut raw)
        .is_err()
    {
        return ExitCode::SUCCESS;
    }
    let Ok(payload) = serde_json::from_str::<Value>(&raw) else {
        eprintln!("repowire hook: the payload is not JSON; ignored");
        return ExitCode::SUCCESS;
    };
    let request = Request::Hook {
        event,
        runtime,
        payload,
        tmux: config.env.tmux.clone(),
        tmux_pane: config.env.tmux_pane.clone(),
        approval_timeout_ms: None,
        repowire_session: config.env.repowire_session.clone(),
    };
    let socket = crate::config::socket_path(&config.home());
    match api::call_as::<api::HookReply>(&socket, &request, timeout(event)) {
        Ok(reply) => {
            if let Some(output) = reply.output.filter(|o| !o.is_null()) {
                let mut stdout = std::io::stdout().lock();
                let _ = writeln!(stdout, "{output}");
            }
        }
        Err(api::CallError::NotRunning(_)) => {}
        Err(e) => eprintln!("repowire hook {}: {e}", event.name()),
    }
    ExitCode::SUCCESS
}

fn deny(reason: &str) -> Value {
    crate::daemon::approval::deny(reason)
}

/// The PreToolUse hook: `None` (no output: Claude Code's own permissions decide) when
/// approvals are off or the tool is not gated; otherwise the decision, never nothing. A call
/// waits at most `[approvals] timeout_seconds`, and never longer than `cap` (the timeout
/// `setup` wrote Claude Code's hook timeout for: a longer wait would be killed, and run).
fn pre_tool_use(config: &Config, runtime: Runtime, cap: Option<u64>) -> Option<Value> {
    // The payload is read first, always: a hook that exits before its runtime finished
    // writing would break that write (EPIPE on the runtime's side).
    let mut raw = String::new();
    let read = std::io::stdin().take(MAX_PAYLOAD).read_to_string(&mut raw);
    let policy = match config.approvals() {
        Ok(policy) => policy,
        Err(e) => {
            return Some(deny(&format!(
                "the repowire configuration cannot be read ({e:#}); denied"
            )));
        }
    };
    if !policy.enabled {
        return None;
    }
    if read.is_err() {
        return Some(deny("the hook payload could not be read; denied"));
    }
    let Ok(mut payload) = serde_json::from_str::<Value>(&raw) else {
        return Some(deny("the hook payload is not JSON; denied"));
    };
    let Some(native) = payload.get("tool_name").and_then(Value::as_str) else {
        return Some(deny("the hook payload names no tool; denied"));
    };
    // Gated, and shown to the approver, by the name the approvals use (Claude Code's).
    let native = native.to_owned();
    let tool = runtime.gated_as(&native, &policy.tools)?;
    payload["tool_name"] = Value::String(tool);
    // And shown with its input in Claude Code's shape (OpenCode's names, Codex's patches).
    let input = payload.get_mut("tool_input").map(Value::take);
    if let Some(input) = input {
        payload["tool_input"] = runtime.approval_tool_input(&native, input);
    }
    let timeout = match cap {
        Some(cap) => policy.timeout.min(Duration::from_secs(cap)),
        None => policy.timeout,
    };
    let request = Request::Hook {
        event: Event::PreToolUse,
        runtime,
        payload,
        tmux: config.env.tmux.clone(),
        tmux_pane: config.env.tmux_pane.clone(),
        approval_timeout_ms: Some(u64::try_from(timeout.as_millis()).unwrap_or(u64::MAX)),
        repowire_session: config.env.repowire_session.clone(),
    };
    // The daemon decides within the timeout plus its grace (and a registration before it);
    // this bound is only for a daemon that hangs, and stays inside the hook timeout `setup`
    // writes (`approvals_setup::HOOK_MARGIN` above the timeout).
    let bound = timeout + crate::daemon::questions::VERDICT_GRACE + Duration::from_secs(7);
    let socket = crate::config::socket_path(&config.home());
    Some(
        match api::call_as::<api::HookReply>(&socket, &request, bound) {
            Ok(reply) => match reply.output.filter(|o| o.is_object()) {
                Some(output) => output,
                None => deny("the daemon gave no decision; denied"),
            },
            Err(api::CallError::NotRunning(_)) => deny(
                "the repowire daemon is not running on this machine, so nobody could be asked; denied",
            ),
            Err(api::CallError::Api(e)) => deny(&format!("{}; denied", e.message)),
            Err(e) => deny(&format!("{e}; denied")),
        },
    )
}

#[cfg(test)]
mod tests {
    use super::run_by_hand;

    #[test]
    fn only_a_terminal_without_a_runtime_is_by_hand() {
        // A runtime: pipes, whatever the environment.
        assert!(!run_by_hand(false, false, false));
        assert!(!run_by_hand(false, false, true));
        // `echo '{…}' | repowire hook session-start` in a shell: stdout is the terminal.
        assert!(run_by_hand(false, true, false));
        // Typing the payload: stdin is the terminal.
        assert!(run_by_hand(true, false, false));
        // A terminal inside the runtime's environment (its own shell tool): allowed.
        assert!(!run_by_hand(true, true, true));
    }
}
