//! `repowire conversation …`: open a direct conversation as the person at this terminal (or
//! as `--from`), end one, list the conversations a local peer takes part in and show one.

use std::process::ExitCode;
use std::time::Duration;

use clap::Subcommand;

use crate::api::{Conversation, ConversationShown, ConversationStarted, Request, SendOutcome};
use crate::config::Config;
use crate::sanitize::for_terminal;

/// `repowire conversation …`.
#[derive(Debug, Subcommand)]
pub enum ConversationCommand {
    /// Open a direct conversation: PEER… get the message, then what each participant says at
    /// the end of a turn reaches the others by itself.
    Start {
        /// The other participants: names, peer ids or `rs-…` session ids.
        #[arg(required = true)]
        peers: Vec<String>,
        /// The opening message.
        #[arg(short = 'm', long = "message")]
        message: String,
        /// Resolve the names in this circle.
        #[arg(long)]
        circle: Option<String>,
        /// Act as this local session.
        #[arg(long)]
        from: Option<String>,
        /// JSON output.
        #[arg(long)]
        json: bool,
    },
    /// End a conversation: the other participants are told, nothing more is relayed in it.
    End {
        /// `cv-…`.
        conversation_id: String,
        /// Why, for the others.
        #[arg(long)]
        reason: Option<String>,
        /// Act as this local session.
        #[arg(long)]
        from: Option<String>,
        /// JSON output.
        #[arg(long)]
        json: bool,
    },
    /// One conversation: its state and participants, and what this machine's participant
    /// received (in the conversation's order) and sent in it.
    Show {
        /// `cv-…`.
        conversation_id: String,
        /// Act as this local session.
        #[arg(long)]
        from: Option<String>,
        /// JSON output.
        #[arg(long)]
        json: bool,
    },
    /// The conversations a local peer takes part in, newest first.
    List {
        /// Ended ones too.
        #[arg(long)]
        all: bool,
        /// Act as this local session.
        #[arg(long)]
        from: Option<String>,
        /// JSON output.
        #[arg(long)]
        json: bool,
    },
}

/// Runs a conversation command.
pub fn run(config: &Config, command: ConversationCommand) -> anyhow::Result<ExitCode> {
    match command {
        ConversationCommand::Start {
            peers,
            message,
            circle,
            from,
            json,
        } => {
            let started: ConversationStarted = super::call_as(
                config,
                &Request::StartConversation {
                    from,
                    peers,
                    circle,
                    text: message,
                },
                Duration::from_secs(15),
            )?;
            if json {
                println!("{}", serde_json::to_string_pretty(&started)?);
                return Ok(ExitCode::SUCCESS);
            }
            match (&started.conversation_id, &started.outcome) {
                (Some(id), SendOutcome::Accepted { recipients, .. }) => {
                    let with: Vec<String> = recipients
                        .iter()
                        .map(|p| format!("@{}", for_terminal(&p.name)))
                        .collect();
                    println!("{} with {}", for_terminal(id), with.join(", "));
                }
                (_, outcome) => println!(
                    "{} (message {}): {}; the conversation opens when the relay takes it",
                    outcome.state(),
                    outcome.message_id(),
                    for_terminal(outcome.reason())
                ),
            }
            Ok(ExitCode::SUCCESS)
        }
        ConversationCommand::End {
            conversation_id,
            reason,
            from,
            json,
        } => {
            let sent: crate::api::Sent = super::call_as(
                config,
                &Request::EndConversation {
                    from,
                    conversation_id: conversation_id.clone(),
                    reason,
                },
                Duration::from_secs(15),
            )?;
            if json {
                println!("{}", serde_json::to_string_pretty(&sent)?);
            } else {
                println!(
                    "{}: {}",
                    for_terminal(&conversation_id),
                    match &sent.outcome {
                        SendOutcome::Accepted { .. } => "ended; the others are told".to_owned(),
                        other => format!("{} ({})", other.state(), for_terminal(other.reason())),
                    }
                );
            }
            Ok(ExitCode::SUCCESS)
        }
        ConversationCommand::Show {
            conversation_id,
            from,
            json,
        } => {
            let shown: ConversationShown = super::call_as(
                config,
                &Request::ConversationShow {
                    from,
                    conversation_id,
                },
                Duration::from_secs(10),
            )?;
            if json {
                println!("{}", serde_json::to_string_pretty(&shown)?);
                return Ok(ExitCode::SUCCESS);
            }
            println!("{}", summary(&shown.conversation));
            for m in &shown.messages {
                let place = m.seq.map(|n| format!("#{n}")).unwrap_or_else(|| "-".into());
                let outcome = match (&m.state, &m.error) {
                    (Some(state), Some(error)) => {
                        format!(" [{state}: {}]", for_terminal(error))
                    }
                    (Some(state), None) if state != "accepted" => format!(" [{state}]"),
                    _ => String::new(),
                };
                println!("\n{place} {} @{}{outcome}", m.event, for_terminal(&m.from));
                for line in m.text.lines() {
                    println!("  {}", for_terminal(line));
                }
            }
            Ok(ExitCode::SUCCESS)
        }
        ConversationCommand::List { all, from, json } => {
            let list: Vec<Conversation> = super::call_as(
                config,
                &Request::Conversations { from, ended: all },
                Duration::from_secs(10),
            )?;
            if json {
                println!("{}", serde_json::to_string_pretty(&list)?);
                return Ok(ExitCode::SUCCESS);
            }
            if list.is_empty() {
                println!("no conversations");
            }
            for c in list {
                println!("{}", summary(&c));
            }
            Ok(ExitCode::SUCCESS)
        }
    }
}

/// One line for a conversation: id, state (and why), participants, the latest place seen.
fn summary(c: &Conversation) -> String {
    let names: Vec<String> = c
        .participants
        .iter()
        .map(|p| format!("@{}", for_terminal(&p.name)))
        .collect();
    let why = c
        .reason
        .as_deref()
        .map(|r| format!(" ({})", for_terminal(r)))
        .unwrap_or_default();
    format!(
        "{}  {}{}  {}  last #{}",
        for_terminal(&c.conversation_id),
        for_terminal(&c.state),
        why,
        names.join(", "),
        c.last_seq
    )
}
