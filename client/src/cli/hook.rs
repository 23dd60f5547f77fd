//! `repowire hook <event>`: forwards the runtime's hook JSON to the daemon and prints what
//! the daemon answers. It must never hang or break the agent: no daemon, a slow daemon or
//! bad input all end quickly with exit 0 and no output.

use std::io::{Read, Write};
use std::process::ExitCode;
use std::time::Duration;

use clap::ValueEnum;
use serde_json::Value;

use crate::api::{self, Request};
use crate::config::Config;

/// Largest payload read from stdin.
const MAX_PAYLOAD: u64 = 4 * 1024 * 1024;

/// Hook events.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Event {
    /// SessionStart: register the session, give it identity and peers.
    SessionStart,
    /// UserPromptSubmit: busy; hand over queued messages and reminders.
    PromptSubmit,
    /// Stop: idle; continue with waiting messages.
    Stop,
    /// Notification: idle prompt.
    Notification,
    /// SessionEnd: unregister.
    SessionEnd,
    /// PreToolUse (opt-in): no decision yet.
    PreToolUse,
}

impl Event {
    fn name(self) -> &'static str {
        match self {
            Event::SessionStart => "session-start",
            Event::PromptSubmit => "prompt-submit",
            Event::Stop => "stop",
            Event::Notification => "notification",
            Event::SessionEnd => "session-end",
            Event::PreToolUse => "pre-tool-use",
        }
    }

    fn timeout(self) -> Duration {
        match self {
            // Registration and the peer list are two relay round trips.
            Event::SessionStart => Duration::from_secs(12),
            _ => Duration::from_secs(8),
        }
    }
}

/// Runs the hook. Always exits 0: a hook failure must not break the agent.
pub fn run(config: &Config, event: Event) -> ExitCode {
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
        event: event.name().into(),
        payload,
        tmux: std::env::var("TMUX").ok(),
        tmux_pane: std::env::var("TMUX_PANE").ok(),
    };
    let socket = crate::config::socket_path(&config.home());
    match api::call(&socket, &request, event.timeout()) {
        Ok(result) => {
            if let Some(output) = result.get("output").filter(|o| !o.is_null()) {
                let mut stdout = std::io::stdout().lock();
                let _ = writeln!(stdout, "{output}");
            }
        }
        Err(api::CallError::NotRunning(_)) => {}
        Err(e) => eprintln!("repowire hook {}: {e}", event.name()),
    }
    ExitCode::SUCCESS
}
