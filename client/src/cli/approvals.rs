//! `repowire approvals list|allow|deny|history`: the tool calls of the tenant's agents that
//! wait for a person (questions to `@approvers`), answering them, and the record of every
//! decision. Remote text is shown through the sanitizer, never as it came.

use std::process::ExitCode;
use std::time::Duration;

use clap::Subcommand;

use crate::api::{Approval, Request};
use crate::config::Config;
use crate::sanitize;

const TIMEOUT: Duration = Duration::from_secs(10);

/// `repowire approvals …`.
#[derive(Debug, Subcommand)]
pub enum ApprovalsCommand {
    /// Tool calls waiting for a decision, oldest first.
    List {
        /// JSON output.
        #[arg(long)]
        json: bool,
        /// Act as this local session (default: the person at this terminal).
        #[arg(long)]
        from: Option<String>,
    },
    /// One approval (waiting or decided) in full: everything the agent's tool call would do
    /// that the relay was given.
    Show {
        /// The approval's id (`ask-…`).
        id: String,
        /// JSON output.
        #[arg(long)]
        json: bool,
        /// Act as this local session.
        #[arg(long)]
        from: Option<String>,
    },
    /// Let a waiting tool call run.
    Allow {
        /// The approval's id (`ask-…`), as `approvals list` shows it.
        id: String,
        /// A note the agent sees with the decision.
        #[arg(long)]
        reason: Option<String>,
        /// JSON output.
        #[arg(long)]
        json: bool,
        /// Act as this local session.
        #[arg(long)]
        from: Option<String>,
    },
    /// Refuse a waiting tool call (the agent sees the reason).
    Deny {
        /// The approval's id (`ask-…`).
        id: String,
        /// Why, for the agent.
        #[arg(long)]
        reason: Option<String>,
        /// JSON output.
        #[arg(long)]
        json: bool,
        /// Act as this local session.
        #[arg(long)]
        from: Option<String>,
    },
    /// Decisions made, newest first: who allowed or denied what, when; timeouts; and the calls
    /// this machine denied without asking anyone (relay unreachable, no answer in time).
    History {
        /// At most this many (1–200).
        #[arg(long, default_value_t = 50)]
        limit: u32,
        /// JSON output.
        #[arg(long)]
        json: bool,
        /// Act as this local session.
        #[arg(long)]
        from: Option<String>,
    },
}

/// Runs an approvals command.
pub fn run(config: &Config, command: ApprovalsCommand) -> anyhow::Result<ExitCode> {
    match command {
        ApprovalsCommand::List { json, from } => {
            let items: Vec<Approval> = super::call_as(
                config,
                &Request::Questions {
                    from,
                    closed: false,
                    limit: None,
                },
                TIMEOUT,
            )?;
            if json {
                println!("{}", serde_json::to_string_pretty(&items)?);
                return Ok(ExitCode::SUCCESS);
            }
            if items.is_empty() {
                println!("nothing is waiting for approval");
            }
            let now = crate::daemon::store::now_ms();
            for q in &items {
                println!("{}", waiting(q, now));
            }
        }
        ApprovalsCommand::Show { id, json, from } => {
            let mut found = None;
            for closed in [false, true] {
                let listed: Vec<Approval> = super::call_as(
                    config,
                    &Request::Questions {
                        from: from.clone(),
                        closed,
                        limit: Some(repowire_protocol::MAX_QUESTIONS_LISTED),
                    },
                    TIMEOUT,
                )?;
                found = listed
                    .into_iter()
                    .find(|q| q.correlation_id() == Some(id.as_str()));
                if found.is_some() {
                    break;
                }
            }
            let Some(q) = found else {
                anyhow::bail!(
                    "no approval `{}` among the ones you may see (the open ones and the last {} decided)",
                    sanitize::for_terminal(&id),
                    repowire_protocol::MAX_QUESTIONS_LISTED
                );
            };
            if json {
                println!("{}", serde_json::to_string_pretty(&q)?);
            } else {
                println!(
                    "{}  from {}  ({})",
                    sanitize::for_terminal(&id),
                    asker(&q),
                    outcome(&q)
                );
                print!("{}", indented(q.text()));
            }
        }
        ApprovalsCommand::Allow {
            id,
            reason,
            json,
            from,
        } => return decide(config, id, true, reason, json, from),
        ApprovalsCommand::Deny {
            id,
            reason,
            json,
            from,
        } => return decide(config, id, false, reason, json, from),
        ApprovalsCommand::History { limit, json, from } => {
            let socket = crate::config::socket_path(&config.home());
            let record = Request::Questions {
                from: from.clone(),
                closed: true,
                limit: Some(limit),
            };
            // Without the relay, this machine's own denials (those it made because the relay
            // could not be reached among them) are still shown, and the gap is said.
            let (questions, partial): (Vec<Approval>, _) =
                match crate::api::call_as(&socket, &record, TIMEOUT) {
                    Ok(all) => (all, None),
                    Err(crate::api::CallError::Api(e)) if e.code.is_link_failure() => {
                        let local = Request::LocalDecisions {
                            from,
                            limit: Some(limit),
                        };
                        (super::call_as(config, &local, TIMEOUT)?, Some(e))
                    }
                    Err(e) => return Err(super::call_error(e)),
                };
            if let Some(e) = &partial {
                eprintln!(
                    "the relay's record of decisions is not available ({}): only the calls this machine denied by itself are shown",
                    sanitize::for_context(&e.message)
                );
            }
            if json {
                println!("{}", serde_json::to_string_pretty(&questions)?);
            } else {
                if questions.is_empty() {
                    println!("no decisions yet");
                }
                for q in &questions {
                    println!("{}", decided(q));
                }
            }
            if partial.is_some() {
                return Ok(ExitCode::FAILURE);
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn decide(
    config: &Config,
    id: String,
    allow: bool,
    reason: Option<String>,
    json: bool,
    from: Option<String>,
) -> anyhow::Result<ExitCode> {
    let done: crate::api::Sent = super::call_as(
        config,
        &Request::Decide {
            from,
            correlation_id: id.clone(),
            allow,
            reason,
        },
        TIMEOUT,
    )?;
    if json {
        println!("{}", serde_json::to_string_pretty(&done)?);
    } else {
        let verb = if allow { "allowed" } else { "denied" };
        match &done.outcome {
            crate::api::SendOutcome::Accepted { .. } => println!("{verb} {id}"),
            other => println!(
                "{verb} {id}: {} (the relay is not reachable; it is sent when it is, if still in time)",
                other.state()
            ),
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// `@name (circle)` of a peer.
fn peer(p: &repowire_protocol::PeerSummary) -> String {
    format!(
        "@{} ({})",
        sanitize::for_terminal(&p.name),
        sanitize::for_terminal(&p.circle)
    )
}

/// Who asked: the peer, or (denied before its session had a peer) the runtime session.
fn asker(q: &Approval) -> String {
    match q {
        Approval::Asked(q) => peer(&q.from),
        Approval::Local(d) => match (&d.from.name, &d.from.circle) {
            (Some(name), circle) => format!(
                "@{} ({})",
                sanitize::for_terminal(name),
                sanitize::for_terminal(circle.as_deref().unwrap_or("?"))
            ),
            (None, _) => format!("session {}", sanitize::for_terminal(&d.session_id)),
        },
    }
}

/// How much of a question's text a listing shows: the rest is for `approvals show`.
const PREVIEW_BYTES: usize = 1500;
/// How many of its lines a listing shows.
const PREVIEW_LINES: usize = 20;

/// Every line of `text` indented, control characters made visible.
fn indented(text: &str) -> String {
    sanitize::for_context(text)
        .lines()
        .map(|l| format!("    {l}\n"))
        .collect()
}

/// The question's text, indented, cut to a preview that says where the rest is.
fn body(q: &Approval) -> String {
    let all = indented(q.text());
    let mut shown = String::new();
    for line in all.lines().take(PREVIEW_LINES) {
        if shown.len() + line.len() > PREVIEW_BYTES {
            break;
        }
        shown.push_str(line);
        shown.push('\n');
    }
    if shown.len() < all.len() {
        shown.push_str(&format!(
            "    … more: `repowire approvals show {}`\n",
            sanitize::for_terminal(q.correlation_id().unwrap_or("ID"))
        ));
    }
    shown
}

fn waiting(q: &Approval, now: i64) -> String {
    let deadline = match q {
        Approval::Asked(q) => q.deadline_ms,
        Approval::Local(_) => None,
    };
    let left = deadline
        .map(|d| format!(", {} s left", ((d - now) / 1000).max(0)))
        .unwrap_or_default();
    format!(
        "{}  from {}{left}\n{}",
        sanitize::for_terminal(q.correlation_id().unwrap_or("?")),
        asker(q),
        body(q)
    )
}

/// What became of an approval, as a person reads it: `waiting for a decision` while it is open
/// (`accepted` on the wire), else `allowed by @ana`, `denied (no answer within 2m)` ….
fn outcome(q: &Approval) -> String {
    let q = match q {
        _ if q.is_open() => return "waiting for a decision".to_owned(),
        Approval::Local(d) => {
            return format!(
                "denied on this machine ({})",
                sanitize::for_terminal(&d.reason)
            );
        }
        Approval::Asked(q) => q,
    };
    let option = q
        .answer
        .as_ref()
        .and_then(|a| a.option_id.as_deref())
        .unwrap_or("");
    let what = match (q.state, option) {
        (repowire_protocol::DeliveryState::Answered, "allow") => "allowed".to_owned(),
        (repowire_protocol::DeliveryState::Answered, "deny") => "denied".to_owned(),
        (repowire_protocol::DeliveryState::Answered, other) => {
            format!("answered `{}`", sanitize::for_terminal(other))
        }
        (state, _) => state.as_str().to_owned(),
    };
    let by = match (&q.answered_by, &q.reason) {
        (Some(p), _) => format!("by {}", peer(p)),
        (None, Some(reason)) => format!("({})", sanitize::for_terminal(reason)),
        (None, None) => String::new(),
    };
    format!("{what} {by}").trim_end().to_owned()
}

fn decided(q: &Approval) -> String {
    let what = outcome(q);
    let comment = match q {
        Approval::Asked(q) => q
            .answer
            .as_ref()
            .and_then(|a| a.text.as_deref())
            .map(|t| format!(": {}", sanitize::for_terminal(t)))
            .unwrap_or_default(),
        Approval::Local(_) => String::new(),
    };
    let when = q.closed_at_ms().map(utc).unwrap_or_default();
    format!(
        "{when}  {}  {what}{comment} — asked by {}\n{}",
        sanitize::for_terminal(q.correlation_id().unwrap_or("(not asked)")),
        asker(q),
        body(q)
    )
}

/// [`utc`] of an unsigned time (as JSON numbers are read).
pub(super) fn utc_ms(ms: u64) -> String {
    utc(i64::try_from(ms).unwrap_or(i64::MAX))
}

/// `YYYY-MM-DD HH:MM:SSZ` of a time in milliseconds since the Unix epoch (UTC; the civil
/// calendar from the day count, Howard Hinnant's algorithm).
fn utc(ms: i64) -> String {
    let secs = ms.div_euclid(1000);
    let (days, rest) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02} {:02}:{:02}:{:02}Z",
        rest / 3600,
        rest % 3600 / 60,
        rest % 60
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_print_in_utc() {
        assert_eq!(utc(0), "1970-01-01 00:00:00Z");
        assert_eq!(utc(1_764_075_012_000), "2025-11-25 12:50:12Z");
        assert_eq!(utc(951_782_400_000), "2000-02-29 00:00:00Z");
    }

    #[test]
    fn a_hostile_question_is_shown_with_its_escapes_visible_and_indented() {
        let q: Approval = serde_json::from_value(serde_json::json!({
            "correlation_id": "ask-1",
            "message_id": "0190b2a4-0000-7000-8000-000000000001",
            "from": { "peer_id": "peer-a", "name": "api", "circle": "dev\u{1b}[31m" },
            "to": "@approvers",
            "text": "Bash: echo \u{1b}]0;pwned\u{7}\nsecond line",
            "question": {"kind": "tool_permission"},
            "created_at_ms": 0,
            "state": "delivered",
            "deadline_ms": 61_000,
        }))
        .expect("an approval");
        let shown = waiting(&q, 1_000);
        assert!(
            !shown.contains('\u{1b}') && !shown.contains('\u{7}'),
            "{shown:?}"
        );
        assert!(shown.contains("\\x1b]0;pwned\\x07"), "{shown}");
        assert!(
            shown.contains("ask-1  from @api (dev), 60 s left"),
            "{shown}"
        );
        assert!(shown.ends_with("    Bash: echo \\x1b]0;pwned\\x07\n    second line\n"));
    }

    #[test]
    fn a_call_denied_here_says_so_and_names_its_session_when_it_had_no_peer() {
        let d: Approval = serde_json::from_value(serde_json::json!({
            "correlation_id": null,
            "from": {"peer_id": null, "name": null, "circle": null},
            "session_id": "9f0c",
            "text": "Bash: rm -rf build",
            "state": "denied_here",
            "reason": "the relay could not be reached",
            "closed_at_ms": 0,
            "local": true,
        }))
        .expect("a local denial");
        let line = decided(&d);
        assert!(
            line.starts_with(
                "1970-01-01 00:00:00Z  (not asked)  denied on this machine (the relay could not be reached) — asked by session 9f0c"
            ),
            "{line}"
        );
    }
}
