//! `repowire question ask-blocking`: ask a peer (or `@approvers`) a typed question and wait
//! for its answer, for scripts: the answer on stdout, the outcome in the exit code.

use std::process::ExitCode;
use std::time::Duration;

use clap::Subcommand;

use crate::api::{Outgoing, Request, SendKind, WaitOutcome};
use crate::config::Config;
use crate::daemon::questions::{MAX_BLOCKING, VERDICT_GRACE};
use crate::sanitize;

/// `repowire question …`.
#[derive(Debug, Subcommand)]
pub enum QuestionCommand {
    /// Ask and wait for the answer. Prints the chosen option's id (or the text of a text
    /// answer); exit 0 when answered (also when the timeout took --default), 2 when the
    /// question timed out with no default or ended without an answer, 1 on an error.
    AskBlocking {
        /// The recipient: a peer's name or id.
        to: String,
        /// The question.
        text: String,
        /// An option, as `ID=LABEL` (or just `ID`); give at least two.
        #[arg(long = "choice", value_name = "ID=LABEL", conflicts_with_all = ["text_answer", "acknowledge"])]
        choices: Vec<String>,
        /// Ask for a free-text answer.
        #[arg(long, conflicts_with = "acknowledge")]
        text_answer: bool,
        /// Ask only for an acknowledgement (`ack`).
        #[arg(long)]
        acknowledge: bool,
        /// How long the question waits for an answer, in seconds (1 to 3600).
        #[arg(long, default_value_t = 300, value_name = "SECONDS")]
        timeout: u64,
        /// The option taken when the timeout passes (choice questions).
        #[arg(long, value_name = "ID")]
        default: Option<String>,
        /// Resolve the name in this circle.
        #[arg(long)]
        circle: Option<String>,
        /// Act as this local session.
        #[arg(long)]
        from: Option<String>,
        /// JSON output (the whole outcome).
        #[arg(long)]
        json: bool,
    },
}

/// Runs a question command.
pub fn run(config: &Config, command: QuestionCommand) -> anyhow::Result<ExitCode> {
    let QuestionCommand::AskBlocking {
        to,
        text,
        choices,
        text_answer,
        acknowledge,
        timeout,
        default,
        circle,
        from,
        json,
    } = command;
    if timeout == 0 || timeout > MAX_BLOCKING.as_secs() {
        anyhow::bail!("--timeout must be 1 to {} seconds", MAX_BLOCKING.as_secs());
    }
    let Some(question) =
        super::peer::question(&choices, text_answer, acknowledge, Some(timeout), default)
    else {
        anyhow::bail!(
            "say what answer you want: --choice ID=LABEL (twice or more), --text-answer or --acknowledge"
        );
    };
    let blocked: crate::api::Blocked = super::call_as(
        config,
        &Request::AskBlocking(Outgoing {
            from,
            kind: SendKind::Ask,
            to: Some(to.clone()),
            circle,
            text,
            reply_to: None,
            question: Some(question),
        }),
        Duration::from_secs(timeout) + VERDICT_GRACE + Duration::from_secs(10),
    )?;
    let outcome = &blocked.outcome;
    let answered = outcome.answer();
    if json {
        println!("{}", serde_json::to_string_pretty(&blocked)?);
    } else {
        match &answered {
            Some((answer, _)) => println!(
                "{}",
                sanitize::for_context(
                    answer
                        .option_id
                        .as_deref()
                        .or(answer.text.as_deref())
                        .unwrap_or("")
                )
            ),
            None => eprintln!("{}", why_no_answer(outcome, &to)),
        }
    }
    Ok(if answered.is_some() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(2)
    })
}

/// In words, why an outcome carries no answer.
fn why_no_answer(outcome: &WaitOutcome, to: &str) -> String {
    let t = |s: Option<&str>| sanitize::for_terminal(s.unwrap_or("?"));
    match outcome {
        WaitOutcome::Closed {
            timed_out: true,
            reason,
            ..
        } => format!("no answer: {}", t(reason.as_deref())),
        WaitOutcome::Closed { outcome, .. } | WaitOutcome::Replied { outcome, .. } => format!(
            "{to} closed the question without answering it ({})",
            t(Some(outcome))
        ),
        WaitOutcome::Failed { reason, .. } => format!("the question failed: {}", t(Some(reason))),
        WaitOutcome::NoVerdict { reason, .. } => format!("no outcome: {}", t(Some(reason))),
        WaitOutcome::Waiting { .. } => "the question ended without an answer".to_owned(),
    }
}
