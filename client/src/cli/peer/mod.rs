//! `repowire peer …`: list, describe, ask, ack, notify, broadcast, status.

use std::process::ExitCode;
use std::time::Duration;

use clap::Subcommand;

use crate::api::{Outgoing, Request, SendKind, SendOutcome, Sender, Sent};
use crate::config::Config;

mod show;
use show::print_peers;

/// Peer commands.
#[derive(Debug, Clone, Subcommand)]
pub enum PeerCommand {
    /// Peers you can reach.
    List {
        /// JSON output.
        #[arg(long)]
        json: bool,
        /// Every circle, offline peers too.
        #[arg(long)]
        all: bool,
        /// Act as this local session (peer id or name).
        #[arg(long)]
        from: Option<String>,
    },
    /// One peer in detail (by peer id or name).
    Describe {
        /// Peer id or name.
        id: String,
        /// JSON output.
        #[arg(long)]
        json: bool,
        /// Act as this local session.
        #[arg(long)]
        from: Option<String>,
    },
    /// Ask a peer; prints the ask id at once, or the reply with --wait.
    Ask {
        /// Recipient name or peer id.
        name: String,
        /// The question; `-` reads it from stdin.
        text: String,
        /// Wait for the reply.
        #[arg(long)]
        wait: bool,
        /// Seconds to wait with --wait.
        #[arg(long, default_value_t = 300)]
        timeout: u64,
        /// Resolve the name in this circle.
        #[arg(long)]
        circle: Option<String>,
        /// Close this ask you received and chain the new one to it.
        #[arg(long)]
        reply_to: Option<String>,
        /// Make it a choice question: one option, as `ID=LABEL` (or just `ID`); give at least
        /// two. The peer answers with `peer answer ASK --option ID`.
        #[arg(
            long = "choice",
            value_name = "ID=LABEL",
            conflicts_with = "text_answer"
        )]
        choices: Vec<String>,
        /// Make it a text question: the peer answers with `peer answer ASK --text …`.
        #[arg(long, conflicts_with = "acknowledge")]
        text_answer: bool,
        /// Make it an acknowledge question: the peer only confirms, with
        /// `peer answer ASK --option ack`.
        #[arg(long, conflicts_with = "choices")]
        acknowledge: bool,
        /// Close the question after this many seconds if nobody answered it (with --default
        /// as the answer, else as expired).
        #[arg(long, value_name = "SECONDS")]
        answer_timeout: Option<u64>,
        /// The option taken when --answer-timeout passes unanswered (choice questions).
        #[arg(long, value_name = "ID", requires = "answer_timeout")]
        default: Option<String>,
        /// Act as this local session.
        #[arg(long)]
        from: Option<String>,
        /// JSON output.
        #[arg(long)]
        json: bool,
    },
    /// Close an ask you received, optionally with a reply.
    Ack {
        /// The ask id (`ask-…`).
        correlation_id: String,
        /// Reply text for the asker.
        #[arg(short, long)]
        message: Option<String>,
        /// Act as this local session.
        #[arg(long)]
        from: Option<String>,
        /// JSON output.
        #[arg(long)]
        json: bool,
    },
    /// Answer a structured question you received.
    Answer {
        /// The ask id (`ask-…`).
        correlation_id: String,
        /// The chosen option's id.
        #[arg(long)]
        option: Option<String>,
        /// Free text (text questions; a comment otherwise).
        #[arg(long)]
        text: Option<String>,
        /// Act as this local session.
        #[arg(long)]
        from: Option<String>,
        /// JSON output.
        #[arg(long)]
        json: bool,
    },
    /// Notify a peer (fire-and-forget).
    Notify {
        /// Recipient name or peer id.
        name: String,
        /// The text; `-` reads it from stdin.
        text: String,
        /// Resolve the name in this circle.
        #[arg(long)]
        circle: Option<String>,
        /// Act as this local session.
        #[arg(long)]
        from: Option<String>,
        /// JSON output.
        #[arg(long)]
        json: bool,
    },
    /// Message every online peer of your circle.
    Broadcast {
        /// The text; `-` reads it from stdin.
        text: String,
        /// Act as this local session.
        #[arg(long)]
        from: Option<String>,
        /// JSON output.
        #[arg(long)]
        json: bool,
    },
    /// Delivery state of a message you sent (message id or ask id).
    Status {
        /// Message id or correlation id.
        id: String,
        /// JSON output.
        #[arg(long)]
        json: bool,
    },
}

const TIMEOUT: Duration = Duration::from_secs(15);

/// A message text from the command line: `-` reads it from stdin (one trailing line break
/// dropped, as `$(cat)` would), anything else is the text itself. An empty or blank text is
/// refused here, saying so, rather than by the relay as an invalid frame.
fn message_text(text: String) -> anyhow::Result<String> {
    use std::io::Read;
    let text = if text == "-" {
        let limit = repowire_protocol::limits::MAX_TEXT_BYTES as u64;
        let mut read = String::new();
        std::io::stdin()
            .take(limit + 2)
            .read_to_string(&mut read)
            .map_err(|e| anyhow::anyhow!("reading the text from stdin: {e}"))?;
        let read = read
            .strip_suffix('\n')
            .map(|t| t.strip_suffix('\r').unwrap_or(t))
            .unwrap_or(&read)
            .to_owned();
        if read.len() as u64 > limit {
            anyhow::bail!(
                "the text on stdin is longer than {limit} bytes, the most a message holds"
            );
        }
        read
    } else {
        text
    };
    if text.trim().is_empty() {
        anyhow::bail!("the text is empty: there is nothing to send");
    }
    Ok(text)
}

/// Runs a peer command.
pub fn run(config: &Config, command: PeerCommand) -> anyhow::Result<ExitCode> {
    match command {
        PeerCommand::List { json, all, from } => {
            let peers: Vec<crate::api::ListedPeer> = super::call_as(
                config,
                &Request::Peers {
                    from,
                    include_offline: all,
                    all_circles: all,
                    circle: None,
                },
                TIMEOUT,
            )?;
            if json {
                println!("{}", serde_json::to_string_pretty(&peers)?);
            } else {
                print_peers(&peers);
            }
        }
        PeerCommand::Describe { id, json, from } => show::describe(config, &id, json, from)?,
        PeerCommand::Ask {
            name,
            text,
            wait,
            timeout,
            circle,
            reply_to,
            choices,
            text_answer,
            acknowledge,
            answer_timeout,
            default,
            from,
            json,
        } => {
            let question = question(&choices, text_answer, acknowledge, answer_timeout, default);
            if question.is_none() && answer_timeout.is_some() {
                anyhow::bail!(
                    "--answer-timeout is for questions: add --choice, --text-answer or --acknowledge"
                );
            }
            let text = message_text(text)?;
            let from_for_wait = from.clone();
            let sent: Sent = super::call_as(
                config,
                &Request::Send(Outgoing {
                    from,
                    kind: SendKind::Ask,
                    to: Some(name.clone()),
                    circle,
                    text,
                    reply_to,
                    question,
                }),
                TIMEOUT,
            )?;
            let cid = sent.outcome.correlation_id().map(str::to_owned);
            if wait {
                let Some(cid) = cid else {
                    anyhow::bail!(
                        "the ask is {} ({}); it has no ask id yet, so there is nothing to wait on\nhint: `repowire peer status {}` later",
                        sent.outcome.state(),
                        crate::sanitize::for_terminal(sent.outcome.reason()),
                        sent.outcome.message_id()
                    );
                };
                // Said first, on stderr (stdout keeps its documented shape): a Ctrl-C while
                // waiting does not lose the ask.
                eprintln!(
                    "asked {} ({cid}); waiting up to {timeout} s for the reply (Ctrl-C stops waiting, not the ask: `repowire peer status {cid}` later)",
                    crate::sanitize::for_terminal(&name)
                );
                let reply: crate::api::WaitOutcome = super::call_as(
                    config,
                    &Request::WaitReply {
                        from: from_for_wait.clone(),
                        correlation_id: cid.clone(),
                        timeout_ms: timeout * 1000,
                    },
                    Duration::from_secs(timeout + 10),
                )?;
                // The same exit code in both output modes: 0 when a reply or an answer came
                // (also the default a question's timeout took), 2 when none did.
                let answered = reply.answered();
                if json {
                    println!("{}", serde_json::to_string_pretty(&reply)?);
                } else {
                    println!("{}", crate::replies::wait_outcome(&cid, &reply, timeout));
                }
                if !answered {
                    return Ok(ExitCode::from(2));
                }
            } else {
                print_sent(&sent, json, &format!("ask to {name}"))?;
            }
        }
        PeerCommand::Ack {
            correlation_id,
            message,
            from,
            json,
        } => {
            let sent: Sent = super::call_as(
                config,
                &Request::Ack {
                    from,
                    correlation_id: correlation_id.clone(),
                    reply: message,
                },
                TIMEOUT,
            )?;
            print_sent(&sent, json, &format!("ack of {correlation_id}"))?;
        }
        PeerCommand::Answer {
            correlation_id,
            option,
            text,
            from,
            json,
        } => {
            let sent: Sent = super::call_as(
                config,
                &Request::Answer {
                    from,
                    correlation_id: correlation_id.clone(),
                    option_id: option,
                    text,
                },
                TIMEOUT,
            )?;
            print_sent(&sent, json, &format!("answer to {correlation_id}"))?;
        }
        PeerCommand::Notify {
            name,
            text,
            circle,
            from,
            json,
        } => {
            let text = message_text(text)?;
            let sent: Sent = super::call_as(
                config,
                &Request::Send(Outgoing {
                    from,
                    kind: SendKind::Notify,
                    to: Some(name.clone()),
                    circle,
                    text,
                    reply_to: None,
                    question: None,
                }),
                TIMEOUT,
            )?;
            print_sent(&sent, json, &format!("notification to {name}"))?;
        }
        PeerCommand::Broadcast { text, from, json } => {
            let text = message_text(text)?;
            let sent: Sent = super::call_as(
                config,
                &Request::Send(Outgoing {
                    from,
                    kind: SendKind::Broadcast,
                    to: None,
                    circle: None,
                    text,
                    reply_to: None,
                    question: None,
                }),
                TIMEOUT,
            )?;
            print_sent(&sent, json, "broadcast")?;
        }
        PeerCommand::Status { id, json } => show::status(config, id, json)?,
    }
    Ok(ExitCode::SUCCESS)
}

pub(super) fn print_sent(sent: &Sent, json: bool, what: &str) -> anyhow::Result<()> {
    if json {
        println!("{}", serde_json::to_string_pretty(sent)?);
        return Ok(());
    }
    let what = &format!("{what} as {}", sender(&sent.from));
    match &sent.outcome {
        SendOutcome::Accepted {
            correlation_id,
            recipients,
            ..
        } => {
            let to: Vec<String> = recipients
                .iter()
                .map(|p| format!("@{}", crate::sanitize::for_terminal(&p.name)))
                .collect();
            println!(
                "{what}: accepted {} → {}",
                correlation_id.as_deref().unwrap_or(""),
                if to.is_empty() {
                    "(no recipients)".into()
                } else {
                    to.join(", ")
                }
            );
        }
        other => println!(
            "{what}: {} (message {}) — {}",
            other.state(),
            other.message_id(),
            crate::sanitize::for_terminal(other.reason())
        ),
    }
    Ok(())
}

/// The peer a send went out as: `@name`, or the session when it has no name yet.
fn sender(from: &Sender) -> String {
    match &from.name {
        Some(name) => format!("@{}", crate::sanitize::for_terminal(name)),
        None => format!("session {}", from.session_id),
    }
}

/// The typed question `--choice` / `--text-answer` / `--acknowledge` ask for, if any, with
/// `--timeout-answer` and `--default`.
pub(crate) fn question(
    choices: &[String],
    text_answer: bool,
    acknowledge: bool,
    timeout_s: Option<u64>,
    default: Option<String>,
) -> Option<repowire_protocol::Question> {
    use repowire_protocol::{Question, QuestionKind, QuestionOption};
    let kind = if text_answer {
        QuestionKind::Text
    } else if acknowledge {
        QuestionKind::Acknowledge
    } else if !choices.is_empty() {
        QuestionKind::Choice
    } else {
        return None;
    };
    Some(Question {
        kind,
        options: choices
            .iter()
            .map(|c| {
                let (id, label) = c.split_once('=').unwrap_or((c, c));
                QuestionOption {
                    id: id.trim().to_owned(),
                    label: label.trim().to_owned(),
                }
            })
            .collect(),
        timeout_ms: timeout_s.map(|s| s.saturating_mul(1000)),
        default,
    })
}
