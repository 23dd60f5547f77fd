//! `repowire outbox`: messages queued for a relay, by relay identity. Nothing queued under
//! one relay and tenant is ever sent to another; what waits for another one is listed here and
//! goes out when this machine uses that relay again, or is dropped explicitly.

use std::process::ExitCode;
use std::time::Duration;

use clap::Subcommand;
use serde_json::Value;

use crate::api::Request;
use crate::config::Config;

/// `repowire outbox …`
#[derive(Debug, Clone, Subcommand)]
pub enum OutboxCommand {
    /// Queued messages per relay identity (`URL#tenant`).
    List {
        /// JSON output.
        #[arg(long)]
        json: bool,
    },
    /// Drop the messages queued for another relay identity (their senders see `dropped`).
    Drop {
        /// The relay identity, as `repowire outbox list` shows it.
        realm: String,
        /// JSON output.
        #[arg(long)]
        json: bool,
    },
}

/// Runs an outbox command.
pub fn run(config: &Config, command: OutboxCommand) -> anyhow::Result<ExitCode> {
    let timeout = Duration::from_secs(5);
    match command {
        OutboxCommand::List { json } => {
            let out = super::call(config, &Request::Outbox, timeout)?;
            if json {
                println!("{out:#}");
                return Ok(ExitCode::SUCCESS);
            }
            let realms = out.get("realms").and_then(Value::as_array);
            if realms.is_none_or(|r| r.is_empty()) {
                println!("nothing queued");
            }
            for r in realms.into_iter().flatten() {
                let current = r.get("current").and_then(Value::as_bool) == Some(true);
                println!(
                    "{:>5}  {}{}",
                    r.get("messages").unwrap_or(&Value::Null),
                    r.get("realm").and_then(Value::as_str).unwrap_or("?"),
                    if current {
                        "  (this relay: sent as the link allows)"
                    } else {
                        "  (another relay or tenant: not sent here)"
                    }
                );
            }
        }
        OutboxCommand::Drop { realm, json } => {
            let out = super::call(config, &Request::OutboxDrop { realm }, timeout)?;
            if json {
                println!("{out:#}");
            } else {
                let n = out
                    .get("dropped")
                    .and_then(Value::as_array)
                    .map_or(0, Vec::len);
                println!("dropped {n} queued message(s)");
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}
