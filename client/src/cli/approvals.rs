//! `repowire approvals list|allow|deny|history`: the tool calls of the tenant's agents that
//! wait for a person (questions to `@approvers`), answering them, and the record of every
//! decision. Remote text is shown through the sanitizer, never as it came.

use std::process::ExitCode;
use std::time::Duration;

use clap::Subcommand;
use serde_json::Value;

use crate::api::Request;
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
            let questions = super::call(
                config,
                &Request::Questions {
                    from,
                    closed: false,
                    limit: None,
                },
                TIMEOUT,
            )?;
            if json {
                println!("{}", serde_json::to_string_pretty(&questions)?);
                return Ok(ExitCode::SUCCESS);
            }
            let items = questions.as_array().cloned().unwrap_or_default();
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
                let listed = super::call(
                    config,
                    &Request::Questions {
                        from: from.clone(),
                        closed,
                        limit: Some(repowire_protocol::MAX_QUESTIONS_LISTED),
                    },
                    TIMEOUT,
                )?;
                found = listed
                    .as_array()
                    .into_iter()
                    .flatten()
                    .find(|q| q["correlation_id"] == id.as_str())
                    .cloned();
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
                    peer(&q["from"]),
                    outcome(&q)
                );
                print!("{}", indented(q["text"].as_str().unwrap_or("")));
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
            let (questions, partial) = match crate::api::call(&socket, &record, TIMEOUT) {
                Ok(all) => (all, None),
                Err(crate::api::CallError::Api(e)) if e.code.is_link_failure() => {
                    let local = Request::LocalDecisions {
                        from,
                        limit: Some(limit),
                    };
                    (super::call(config, &local, TIMEOUT)?, Some(e))
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
                let items = questions.as_array().cloned().unwrap_or_default();
                if items.is_empty() {
                    println!("no decisions yet");
                }
                for q in &items {
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

/// `@name (circle)` of a PeerSummary value.
fn peer(p: &Value) -> String {
    format!(
        "@{} ({})",
        sanitize::for_terminal(p["name"].as_str().unwrap_or("?")),
        sanitize::for_terminal(p["circle"].as_str().unwrap_or("?"))
    )
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
fn body(q: &Value) -> String {
    let all = indented(q["text"].as_str().unwrap_or(""));
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
            sanitize::for_terminal(q["correlation_id"].as_str().unwrap_or("ID"))
        ));
    }
    shown
}

fn waiting(q: &Value, now: i64) -> String {
    let left = q["deadline_ms"]
        .as_i64()
        .map(|d| format!(", {} s left", ((d - now) / 1000).max(0)))
        .unwrap_or_default();
    format!(
        "{}  from {}{left}\n{}",
        sanitize::for_terminal(q["correlation_id"].as_str().unwrap_or("?")),
        peer(&q["from"]),
        body(q)
    )
}

/// What became of an approval, as a person reads it: `waiting for a decision` while it is open
/// (`accepted` on the wire), else `allowed by @ana`, `denied (no answer within 2m)` ….
fn outcome(q: &Value) -> String {
    if matches!(
        q["state"].as_str(),
        Some("accepted" | "delivered" | "injected")
    ) {
        return "waiting for a decision".to_owned();
    }
    let option = q["answer"]["option_id"].as_str().unwrap_or("");
    let what = match (q["state"].as_str(), option) {
        (Some("answered"), "allow") => "allowed".to_owned(),
        (Some("answered"), "deny") => "denied".to_owned(),
        (Some("answered"), other) => format!("answered `{}`", sanitize::for_terminal(other)),
        (Some("denied_here"), _) => "denied on this machine".to_owned(),
        (Some(state), _) => sanitize::for_terminal(state),
        (None, _) => "?".to_owned(),
    };
    let by = match (q.get("answered_by"), q["reason"].as_str()) {
        (Some(p), _) if p.is_object() => format!("by {}", peer(p)),
        (_, Some(reason)) => format!("({})", sanitize::for_terminal(reason)),
        _ => String::new(),
    };
    format!("{what} {by}").trim_end().to_owned()
}

fn decided(q: &Value) -> String {
    let what = outcome(q);
    let comment = q["answer"]["text"]
        .as_str()
        .map(|t| format!(": {}", sanitize::for_terminal(t)))
        .unwrap_or_default();
    let when = q["closed_at_ms"].as_i64().map(utc).unwrap_or_default();
    let asker = match (q["local"] == true, q["from"]["name"].as_str()) {
        // Denied before its session had a peer: named by its runtime session.
        (true, None) => format!(
            "session {}",
            sanitize::for_terminal(q["session_id"].as_str().unwrap_or("?"))
        ),
        _ => peer(&q["from"]),
    };
    format!(
        "{when}  {}  {what}{comment} — asked by {asker}\n{}",
        sanitize::for_terminal(q["correlation_id"].as_str().unwrap_or("(not asked)")),
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
        let q = serde_json::json!({
            "correlation_id": "ask-1",
            "from": { "name": "api", "circle": "dev\u{1b}[31m" },
            "text": "Bash: echo \u{1b}]0;pwned\u{7}\nsecond line",
            "deadline_ms": 61_000,
        });
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
}
