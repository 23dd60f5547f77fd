//! `repowire outbox`: messages queued for a relay, by relay identity. Nothing queued under
//! one relay and tenant is ever sent to another; what waits for another one is listed here and
//! goes out when this machine uses that relay again, or is dropped explicitly.

use std::process::ExitCode;
use std::time::Duration;

use clap::Subcommand;

use crate::api::{OutboxDropped, OutboxReport, Request};
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
            let out: OutboxReport = super::call_as(config, &Request::Outbox, timeout)?;
            if json {
                println!("{}", serde_json::to_string_pretty(&out)?);
                return Ok(ExitCode::SUCCESS);
            }
            if out.realms.is_empty() {
                println!("nothing queued");
            }
            for r in &out.realms {
                println!(
                    "{:>5}  {}{}",
                    r.messages,
                    crate::sanitize::for_terminal(&r.realm),
                    if r.current {
                        "  (this relay: sent as the link allows)"
                    } else {
                        "  (another relay or tenant: not sent here)"
                    }
                );
            }
        }
        OutboxCommand::Drop { realm, json } => {
            let out: OutboxDropped =
                super::call_as(config, &Request::OutboxDrop { realm }, timeout)?;
            if json {
                println!("{}", serde_json::to_string_pretty(&out)?);
            } else {
                println!("dropped {} queued message(s)", out.dropped.len());
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}
