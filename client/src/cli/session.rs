//! `repowire session list` and `repowire link --pane %N`.

use std::process::ExitCode;
use std::time::Duration;

use clap::Subcommand;
use serde_json::Value;

use crate::api::Request;
use crate::api::text as s;
use crate::config::Config;

/// Session commands.
#[derive(Debug, Clone, Subcommand)]
pub enum SessionCommand {
    /// Local tmux panes running agents, registered or not.
    List {
        /// Every pane, not only agents.
        #[arg(long)]
        all: bool,
        /// JSON output.
        #[arg(long)]
        json: bool,
    },
    /// End a local agent session: its peer goes offline and messages still waiting for it
    /// fail back to their senders. For a session the daemon should not have (a hook run by
    /// hand in a terminal) or one whose agent is gone.
    End {
        /// Session id, peer id or name (`repowire daemon status` lists them).
        session: String,
    },
}

/// Runs a session command.
pub fn run(config: &Config, command: SessionCommand) -> anyhow::Result<ExitCode> {
    let (all, json) = match command {
        SessionCommand::List { all, json } => (all, json),
        SessionCommand::End { session } => {
            let ended = super::call(
                config,
                &Request::EndSession { session },
                Duration::from_secs(15),
            )?;
            println!(
                "ended session {} ({})",
                s(&ended, "ended"),
                ended["name"]
                    .as_str()
                    .map(|n| format!("@{}", crate::sanitize::for_terminal(n)))
                    .unwrap_or("no peer".into())
            );
            return Ok(ExitCode::SUCCESS);
        }
    };
    let panes = super::call(
        config,
        &Request::Panes {
            tmux: std::env::var("TMUX").ok(),
        },
        Duration::from_secs(10),
    )?;
    let shown: Vec<Value> = panes
        .as_array()
        .cloned()
        .unwrap_or_default()
        .into_iter()
        .filter(|p| all || p["state"] != "other")
        .collect();
    if json {
        println!("{}", serde_json::to_string_pretty(&shown)?);
        return Ok(ExitCode::SUCCESS);
    }
    if shown.is_empty() {
        println!("no agent panes (`--all` lists every pane)");
        return Ok(ExitCode::SUCCESS);
    }
    println!(
        "{:<6} {:<16} {:<11} {:<20} PATH",
        "PANE", "PROGRAM", "STATE", "PEER"
    );
    for p in shown {
        println!(
            "{:<6} {:<16} {:<11} {:<20} {}",
            s(&p, "pane"),
            s(&p, "program"),
            s(&p, "state"),
            p.get("name")
                .and_then(Value::as_str)
                .map(|n| format!("@{n}"))
                .unwrap_or("-".into()),
            s(&p, "path"),
        );
    }
    Ok(ExitCode::SUCCESS)
}

/// `repowire link --pane %N`.
pub fn link(
    config: &Config,
    pane: String,
    backend: String,
    json: bool,
) -> anyhow::Result<ExitCode> {
    let row = super::call(
        config,
        &Request::Link {
            pane: pane.clone(),
            backend,
            tmux: std::env::var("TMUX").ok(),
        },
        Duration::from_secs(15),
    )?;
    if json {
        println!("{}", serde_json::to_string_pretty(&row)?);
    } else {
        println!(
            "linked {pane} as @{} ({})",
            s(&row, "name"),
            s(&row, "peer_id")
        );
    }
    Ok(ExitCode::SUCCESS)
}
