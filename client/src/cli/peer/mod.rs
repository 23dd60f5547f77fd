//! `repowire peer …`: list, describe, ask, ack, notify, broadcast, status.

use std::process::ExitCode;
use std::time::Duration;

use clap::Subcommand;
use serde_json::Value;

use crate::api::text as s;
use crate::api::{Outgoing, Request, SendKind};
use crate::config::Config;

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
        /// The question.
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
        /// The text.
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
        /// The text.
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

/// Runs a peer command.
pub fn run(config: &Config, command: PeerCommand) -> anyhow::Result<ExitCode> {
    match command {
        PeerCommand::List { json, all, from } => {
            let peers = super::call(
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
        PeerCommand::Describe { id, json, from } => {
            let peers = super::call(
                config,
                &Request::Peers {
                    from,
                    include_offline: true,
                    all_circles: true,
                    circle: None,
                },
                TIMEOUT,
            )?;
            let matches: Vec<&Value> = peers
                .as_array()
                .map(|a| {
                    a.iter()
                        .filter(|p| s(p, "peer_id") == id || s(p, "name") == id)
                        .collect()
                })
                .unwrap_or_default();
            match matches.as_slice() {
                [] => anyhow::bail!(
                    "no peer `{id}`\nhint: `repowire peer list --all` shows every peer"
                ),
                [one] => {
                    // The work stream it executes (or last executed), if bound.
                    let sessions = super::call(
                        config,
                        &Request::WorkSessions {
                            from: None,
                            all: true,
                        },
                        TIMEOUT,
                    )?;
                    let session = sessions.as_array().and_then(|l| {
                        l.iter()
                            .find(|x| x["executor"]["peer_id"] == one["peer_id"])
                            .cloned()
                    });
                    if json {
                        let mut shown = (*one).clone();
                        shown["session"] = session.unwrap_or(Value::Null);
                        println!("{}", serde_json::to_string_pretty(&shown)?);
                    } else {
                        for key in [
                            "name",
                            "peer_id",
                            "circle",
                            "backend",
                            "role",
                            "status",
                            "turn_state",
                            "path",
                            "machine",
                            "description",
                        ] {
                            println!("{key:<12} {}", t(one, key));
                        }
                        if let Some(x) = session {
                            println!(
                                "{:<12} {} ({}), runtime {}",
                                "session",
                                t(&x, "session_id"),
                                t(&x, "status"),
                                x["runtime_session_ids"]
                                    .as_array()
                                    .and_then(|r| r.last())
                                    .and_then(Value::as_str)
                                    .map(crate::sanitize::for_terminal)
                                    .unwrap_or("-".into())
                            );
                            println!("{:<12} {}", "transcript", t(&x["transcript"], "path"));
                        }
                    }
                }
                many => {
                    let ids: Vec<String> = many
                        .iter()
                        .map(|p| format!("{} ({})", t(p, "peer_id"), t(p, "circle")))
                        .collect();
                    anyhow::bail!(
                        "`{id}` names {} peers: {}\nhint: use the peer id",
                        many.len(),
                        ids.join(", ")
                    );
                }
            }
        }
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
            let from_for_wait = from.clone();
            let sent = super::call(
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
            let cid = sent
                .get("correlation_id")
                .and_then(Value::as_str)
                .map(str::to_owned);
            if wait {
                let Some(cid) = cid else {
                    anyhow::bail!(
                        "the ask is {} ({}); it has no ask id yet, so there is nothing to wait on\nhint: `repowire peer status {}` later",
                        s(&sent, "state"),
                        s(&sent, "reason"),
                        s(&sent, "message_id")
                    );
                };
                let reply = super::call(
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
                let state = s(&reply, "state");
                let answered = state == "replied"
                    || (state == "closed"
                        && reply["timed_out"] == true
                        && !reply["answer"].is_null());
                if json {
                    println!("{}", serde_json::to_string_pretty(&reply)?);
                } else if state == "replied" {
                    let m = reply.get("reply").cloned().unwrap_or(Value::Null);
                    let from = m.get("from").map(|f| t(f, "name")).unwrap_or_default();
                    match m.get("answer") {
                        Some(answer) => println!(
                            "@{from} answered {cid}: {}",
                            crate::sanitize::for_context(&crate::api::answer_text(
                                answer,
                                &s(&m, "text")
                            ))
                        ),
                        None => println!(
                            "@{from} replied to {cid}:\n{}",
                            crate::sanitize::for_context(&s(&m, "text"))
                        ),
                    }
                } else {
                    let said = |k: &str| crate::sanitize::for_context(&s(&reply, k));
                    match state.as_str() {
                        "closed" if reply["timed_out"] == true => {
                            println!("nobody answered {cid} in time: {}", said("reason"))
                        }
                        "closed" => {
                            println!("{cid} was closed ({}) without a reply", said("outcome"))
                        }
                        "failed" => {
                            println!("{cid} did not reach its recipient: {}", said("reason"))
                        }
                        _ => println!("no reply to {cid} within {timeout} s; the ask stays open"),
                    }
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
            let sent = super::call(
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
            let sent = super::call(
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
            let sent = super::call(
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
            let sent = super::call(
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
        PeerCommand::Status { id, json } => {
            let status = super::call(config, &Request::MessageStatus { id }, TIMEOUT)?;
            if json {
                println!("{}", serde_json::to_string_pretty(&status)?);
            } else {
                let m = status.get("message").cloned().unwrap_or(Value::Null);
                println!(
                    "{} {} → {}  state: {}",
                    s(&m, "kind"),
                    s(&m, "message_id"),
                    t(&m, "to_name"),
                    s(&m, "state")
                );
                if let Some(cid) = m.get("correlation_id").and_then(Value::as_str) {
                    println!("id       {cid}");
                }
                if let Some(reply) = m.get("reply").and_then(Value::as_str) {
                    println!("reply    {}", crate::sanitize::for_context(reply));
                }
                for e in status
                    .get("events")
                    .and_then(Value::as_array)
                    .cloned()
                    .unwrap_or_default()
                {
                    println!(
                        "  {:<10} {} {}",
                        s(&e, "state"),
                        s(&e, "recipient"),
                        // Written by the recipient's daemon: remote text.
                        crate::sanitize::for_terminal(
                            e.get("reason").and_then(Value::as_str).unwrap_or("")
                        )
                    );
                }
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}

pub(super) fn print_sent(sent: &Value, json: bool, what: &str) -> anyhow::Result<()> {
    if json {
        println!("{}", serde_json::to_string_pretty(sent)?);
        return Ok(());
    }
    let what = &format!("{what} as {}", sender(sent));
    match s(sent, "state").as_str() {
        "accepted" => {
            let to: Vec<String> = sent
                .get("recipients")
                .and_then(Value::as_array)
                .map(|r| r.iter().map(|p| format!("@{}", t(p, "name"))).collect())
                .unwrap_or_default();
            let id = sent
                .get("correlation_id")
                .and_then(Value::as_str)
                .unwrap_or("");
            println!(
                "{what}: accepted {id} → {}",
                if to.is_empty() {
                    "(no recipients)".into()
                } else {
                    to.join(", ")
                }
            );
        }
        state => println!(
            "{what}: {state} (message {}) — {}",
            s(sent, "message_id"),
            s(sent, "reason")
        ),
    }
    Ok(())
}

/// A field from the relay (other peers' names, paths, descriptions), safe to print.
fn t(v: &Value, key: &str) -> String {
    crate::sanitize::for_terminal(&s(v, key))
}

/// The peer a send went out as: `@name`, or the session when it has no name yet.
fn sender(sent: &Value) -> String {
    let from = &sent["from"];
    match from["name"].as_str() {
        Some(name) => format!("@{}", crate::sanitize::for_terminal(name)),
        None => format!("session {}", s(from, "session_id")),
    }
}

fn print_peers(peers: &Value) {
    let list = peers.as_array().cloned().unwrap_or_default();
    if list.is_empty() {
        println!("no peers");
        return;
    }
    println!(
        "{:<20} {:<12} {:<8} {:<8} {:<12} {:<16} {:<22} PATH",
        "NAME", "CIRCLE", "STATUS", "TURN", "BACKEND", "MACHINE", "PEER ID"
    );
    for p in list {
        let machine = t(&p, "machine");
        println!(
            "{:<20} {:<12} {:<8} {:<8} {:<12} {:<16} {:<22} {}",
            t(&p, "name"),
            t(&p, "circle"),
            t(&p, "status"),
            t(&p, "turn_state"),
            t(&p, "backend"),
            if machine.is_empty() {
                "-".to_owned()
            } else {
                machine
            },
            t(&p, "peer_id"),
            t(&p, "path")
        );
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
