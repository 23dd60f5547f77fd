//! `repowire inbox` (what peers sent to the person at the terminal) and `repowire whoami`
//! (which peer this terminal acts as, and why).
//!
//! Message text comes from remote peers: it is printed through [`sanitize::for_context`]
//! (control characters made visible, nothing removed) and names through
//! [`sanitize::for_terminal`], so no escape sequence in a message acts on the terminal.

use std::io::Write;
use std::process::ExitCode;
use std::time::Duration;

use clap::Args;

use crate::api::{InboxListing, InboxMessage, InboxQuery, Request};
use crate::config::Config;
use crate::sanitize;

/// `repowire inbox` options.
#[derive(Debug, Clone, Args)]
pub struct InboxArgs {
    /// Read messages too, newest first, after the unread ones.
    #[arg(long)]
    all: bool,
    /// How many read messages `--all` shows.
    #[arg(long, default_value_t = 20)]
    limit: u32,
    /// Keep waiting and print messages as they arrive (Ctrl-C ends).
    #[arg(long)]
    watch: bool,
    /// Leave the messages unread (their senders are not told they were read).
    #[arg(long)]
    peek: bool,
    /// Act as this local session (peer id or name).
    #[arg(long)]
    from: Option<String>,
    /// JSON output (with --watch: one JSON object per message, one per line).
    #[arg(long)]
    json: bool,
}

/// How long one `--watch` request waits before asking again.
const WATCH_WAIT: Duration = Duration::from_secs(30);

/// Runs `repowire inbox`.
pub fn inbox(config: &Config, args: InboxArgs) -> anyhow::Result<ExitCode> {
    let mut query = InboxQuery {
        from: args.from.clone(),
        read: args.all,
        after_seq: None,
        limit: args.limit,
        peek: args.peek,
        wait_ms: 0,
    };
    let first: InboxListing = super::call_as(config, &Request::Inbox(query.clone()), TIMEOUT)?;
    if args.json && !args.watch {
        println!("{}", serde_json::to_string_pretty(&first)?);
        return Ok(ExitCode::SUCCESS);
    }
    let messages = first.messages;
    if args.json {
        for m in &messages {
            println!("{}", serde_json::to_string(m)?);
        }
    } else {
        print_listing(&peer_label(&first.peer), &messages, args.watch);
    }
    if !args.watch {
        return Ok(ExitCode::SUCCESS);
    }
    // Following: only messages after the newest one seen, unread ones only.
    query.read = false;
    query.wait_ms = WATCH_WAIT.as_millis() as u64;
    query.after_seq = messages.iter().map(|m| m.seq).max();
    loop {
        let next: InboxListing =
            super::call_as(config, &Request::Inbox(query.clone()), WATCH_WAIT + TIMEOUT)?;
        for m in next.messages {
            query.after_seq = query.after_seq.max(Some(m.seq));
            if args.json {
                println!("{}", serde_json::to_string(&m)?);
            } else {
                print!("{}", render(&m));
            }
        }
        std::io::stdout().flush()?;
    }
}

const TIMEOUT: Duration = Duration::from_secs(15);

fn peer_label(p: &crate::api::InboxPeer) -> String {
    format!(
        "@{} (peer {}, circle {})",
        sanitize::for_terminal(p.name.as_deref().unwrap_or("-")),
        sanitize::for_terminal(&p.peer_id),
        sanitize::for_terminal(&p.circle)
    )
}

fn print_listing(me: &str, messages: &[InboxMessage], watching: bool) {
    let unread = messages.iter().filter(|m| m.unread).count();
    println!("inbox of {me}: {unread} unread");
    for m in messages {
        print!("{}", render(m));
    }
    if messages.iter().any(|m| m.open) {
        println!(
            "reply with `repowire peer ack ID -m \"…\"` (or `peer answer ID --option …` for a question)"
        );
    }
    if watching {
        println!("waiting for messages (Ctrl-C ends)…");
    }
    let _ = std::io::stdout().flush();
}

/// One message as a person reads it.
fn render(m: &InboxMessage) -> String {
    let (from_name, from_id) = match &m.from {
        Some(from) => (sanitize::for_terminal(&from.name), from.peer_id.to_string()),
        None => ("-".to_owned(), "-".to_owned()),
    };
    let mut head = format!(
        "{} {} from @{from_name} (peer {})",
        if m.unread { "NEW " } else { "    " },
        sanitize::for_terminal(&m.kind),
        sanitize::for_terminal(&from_id),
    );
    head.push_str(&format!("  id {}", sanitize::for_terminal(&m.id)));
    if m.open {
        head.push_str("  (open: waiting for your reply)");
    } else if m.kind == "ask" {
        head.push_str("  (closed)");
    }
    let text = m.text.as_deref().map(sanitize::for_context);
    let mut out = format!("{head}\n");
    match text {
        Some(t) => {
            for line in t.lines() {
                out.push_str(&format!("    │ {line}\n"));
            }
        }
        None => out.push_str("    │ (unreadable message)\n"),
    }
    let Some(question) = &m.question else {
        return out;
    };
    if !question.options.is_empty() {
        let list: Vec<String> = question
            .options
            .iter()
            .map(|o| {
                format!(
                    "{} = {}",
                    sanitize::for_terminal(&o.id),
                    sanitize::for_terminal(&o.label)
                )
            })
            .collect();
        out.push_str(&format!("    options: {}\n", list.join(", ")));
    }
    // A question's deadline and what happens at it (issue 35.9: the inbox did not say).
    if let Some(timeout) = question.timeout_ms {
        let at = m
            .created_at_ms
            .and_then(|c| u64::try_from(c).ok())
            .map(|c| {
                format!(
                    ", at {}",
                    super::approvals::utc_ms(c.saturating_add(timeout))
                )
            })
            .unwrap_or_default();
        let then = match &question.default {
            Some(d) => format!("`{}` is taken", sanitize::for_terminal(d)),
            None if question.kind == repowire_protocol::QuestionKind::ToolPermission => {
                "it is denied".to_owned()
            }
            None => "it closes unanswered".to_owned(),
        };
        out.push_str(&format!(
            "    answer within {} s{at}: after that {then}\n",
            timeout / 1000
        ));
    }
    out
}

/// Runs `repowire whoami`.
pub fn whoami(config: &Config, from: Option<String>, json: bool) -> anyhow::Result<ExitCode> {
    let who: crate::api::Identity = super::call_as(config, &Request::Identity { from }, TIMEOUT)?;
    if json {
        println!("{}", serde_json::to_string_pretty(&who)?);
        return Ok(ExitCode::SUCCESS);
    }
    let session = &who.session;
    let name = session.name.as_deref().map(sanitize::for_terminal);
    match &name {
        Some(name) => println!(
            "@{name} (peer {})",
            session.peer_id.as_deref().unwrap_or("-")
        ),
        None => println!("session {} (no peer yet)", session.session_id),
    }
    println!("  session  {}", session.session_id);
    println!("  role     {}", session.role);
    println!("  circle   {}", sanitize::for_terminal(&session.circle));
    if let Some(path) = &session.path {
        println!("  project  {}", sanitize::for_terminal(path));
    }
    println!("  why      {}", who.because);
    if let Some(why) = &who.unregistered {
        println!(
            "  not registered with the relay yet: {}",
            sanitize::for_terminal(why)
        );
    }
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Issue 35.9: a question's deadline and what happens at it are shown; the deadline
    /// counts from when the relay accepted the ask (the listing once read a field the daemon
    /// never wrote, and the time was never shown).
    #[test]
    fn a_question_shows_its_deadline_and_default() {
        let m: InboxMessage = serde_json::from_value(serde_json::json!({
            "message_id": "019aa576-88c9-79d2-a13f-fe7979cb9e86",
            "seq": 1, "kind": "ask", "id": "ask-1", "correlation_id": "ask-1",
            "unread": true, "state": "queued", "open": true,
            "received_at_ms": 5_000, "created_at_ms": 0,
            "from": {"peer_id": "peer-lead", "name": "lead", "circle": "default"},
            "text": "deploy now?",
            "question": {"kind": "choice", "options": [{"id": "yes", "label": "Yes"}, {"id": "no", "label": "No"}],
                         "timeout_ms": 90_000, "default": "no"},
            "reply_to": null, "from_repowire_session_id": null, "to_repowire_session_id": null,
        }))
        .expect("a listing entry");
        let shown = render(&m);
        assert!(
            shown.contains("answer within 90 s, at 1970-01-01 00:01:30Z: after that `no` is taken"),
            "{shown}"
        );
        assert!(shown.contains("yes = Yes, no = No"), "{shown}");
        let mut gate = m.clone();
        gate.question = serde_json::from_value(
            serde_json::json!({"kind": "tool_permission", "timeout_ms": 5_000}),
        )
        .expect("a question");
        assert!(
            render(&gate).contains("after that it is denied"),
            "{}",
            render(&gate)
        );
        let mut plain = m;
        plain.question = None;
        assert!(!render(&plain).contains("answer within"));
    }
}
