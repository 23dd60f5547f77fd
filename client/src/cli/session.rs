//! `repowire session …`: the Repowire sessions (work streams) and their controls (`notify`,
//! `resume`), the tmux panes running agents, ending a local session; and `repowire link`.

use std::process::ExitCode;
use std::time::Duration;

use clap::Subcommand;

use crate::api::{Outgoing, Request, SendKind};
use crate::config::Config;

/// Session commands.
#[derive(Debug, Clone, Subcommand)]
pub enum SessionCommand {
    /// Repowire sessions (work streams) of this machine: their id (`rs-…`), whether an agent
    /// executes them now (active) or not (detached), the runtime's session ids, the transcript.
    List {
        /// Every session of the tenant you may see: every circle, every machine.
        #[arg(long)]
        all: bool,
        /// JSON output.
        #[arg(long)]
        json: bool,
    },
    /// Notify a session: its agent gets the message now if it runs, else when the session is
    /// resumed (the message waits for it, as for an offline peer).
    Notify {
        /// The session (`rs-…`).
        session: String,
        /// The text.
        text: String,
        /// Act as this local session.
        #[arg(long)]
        from: Option<String>,
        /// JSON output.
        #[arg(long)]
        json: bool,
    },
    /// Resume a detached session of this machine with its runtime's own resume
    /// (`claude --resume ID`, `codex resume ID`) in a new tmux window of its project.
    Resume {
        /// The session (`rs-…`).
        session: String,
        /// Print the command (and where it would run) instead of running it.
        #[arg(long)]
        dry_run: bool,
        /// The agent program (default: the session's runtime, `claude` or `codex`), called with
        /// its resume arguments: `claude --resume ID`, `codex resume ID`.
        #[arg(long)]
        command: Option<String>,
        /// JSON output.
        #[arg(long)]
        json: bool,
    },
    /// Local tmux panes running agents, registered or not.
    Panes {
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
        SessionCommand::Panes { all, json } => (all, json),
        SessionCommand::List { all, json } => return list(config, all, json),
        SessionCommand::Notify {
            session,
            text,
            from,
            json,
        } => {
            if !repowire_protocol::looks_like_session_id(&session) {
                anyhow::bail!(
                    "`{}` is not a session id (rs-…); `repowire session list --all` shows them, `repowire peer notify` takes peer names",
                    crate::sanitize::for_terminal(&session)
                );
            }
            let sent: crate::api::Sent = super::call_as(
                config,
                &Request::Send(Outgoing {
                    from,
                    kind: SendKind::Notify,
                    to: Some(session.clone()),
                    circle: None,
                    text,
                    reply_to: None,
                    question: None,
                }),
                Duration::from_secs(10),
            )?;
            super::peer::print_sent(&sent, json, &format!("notify to {session}"))?;
            return Ok(ExitCode::SUCCESS);
        }
        SessionCommand::Resume {
            session,
            dry_run,
            command,
            json,
        } => {
            let done: crate::api::Resumed = super::call_as(
                config,
                &Request::ResumeSession {
                    session: session.clone(),
                    command,
                    dry_run,
                    tmux: config.env.tmux.clone(),
                },
                Duration::from_secs(15),
            )?;
            if json {
                println!("{}", serde_json::to_string_pretty(&done)?);
            } else if dry_run {
                // The directory came from the relay: quoted for a shell, and made printable.
                let cwd = crate::sanitize::for_terminal(&done.cwd).replace('\'', "'\\''");
                println!(
                    "cd '{cwd}' && {}",
                    crate::sanitize::for_terminal(&done.command)
                );
            } else {
                println!(
                    "resumed {session} in pane {}: {}",
                    done.pane.as_deref().unwrap_or("-"),
                    crate::sanitize::for_terminal(&done.command)
                );
            }
            return Ok(ExitCode::SUCCESS);
        }
        SessionCommand::End { session } => {
            let ended: crate::api::EndedSession = super::call_as(
                config,
                &Request::EndSession { session },
                Duration::from_secs(15),
            )?;
            println!(
                "ended session {} ({})",
                crate::sanitize::for_terminal(&ended.ended),
                ended
                    .name
                    .as_deref()
                    .map(|n| format!("@{}", crate::sanitize::for_terminal(n)))
                    .unwrap_or("no peer".into())
            );
            return Ok(ExitCode::SUCCESS);
        }
    };
    let panes: Vec<crate::api::Pane> = super::call_as(
        config,
        &Request::Panes {
            tmux: config.env.tmux.clone(),
        },
        Duration::from_secs(10),
    )?;
    let shown: Vec<crate::api::Pane> = panes
        .into_iter()
        .filter(|p| all || p.state != crate::api::PaneState::Other)
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
        let t = |s: Option<&str>| crate::sanitize::for_terminal(s.unwrap_or("-"));
        println!(
            "{:<6} {:<16} {:<11} {:<20} {}",
            t(Some(&p.pane)),
            t(p.program.as_deref()),
            p.state.as_str(),
            p.name
                .as_deref()
                .map(|n| format!("@{}", t(Some(n))))
                .unwrap_or("-".into()),
            t(Some(&p.path)),
        );
    }
    Ok(ExitCode::SUCCESS)
}

/// `repowire link --pane %N`.
pub fn link(
    config: &Config,
    pane: String,
    backend: Option<crate::runtimes::Runtime>,
    json: bool,
) -> anyhow::Result<ExitCode> {
    let row: crate::api::LocalSession = super::call_as(
        config,
        &Request::Link {
            pane: pane.clone(),
            backend,
            tmux: config.env.tmux.clone(),
        },
        Duration::from_secs(15),
    )?;
    if json {
        println!("{}", serde_json::to_string_pretty(&row)?);
    } else {
        println!(
            "linked {pane} as @{} ({})",
            crate::sanitize::for_terminal(row.name.as_deref().unwrap_or("-")),
            row.peer_id.as_deref().unwrap_or("-")
        );
    }
    Ok(ExitCode::SUCCESS)
}

/// `repowire session list [--all]`.
fn list(config: &Config, all: bool, json: bool) -> anyhow::Result<ExitCode> {
    let items: Vec<repowire_protocol::SessionInfo> = super::call_as(
        config,
        &Request::WorkSessions { from: None, all },
        Duration::from_secs(10),
    )?;
    if json {
        println!("{}", serde_json::to_string_pretty(&items)?);
        return Ok(ExitCode::SUCCESS);
    }
    if items.is_empty() {
        println!(
            "no sessions{}",
            if all {
                ""
            } else {
                " on this machine (`--all` lists every machine's)"
            }
        );
        return Ok(ExitCode::SUCCESS);
    }
    let t = |v: Option<&str>| crate::sanitize::for_terminal(v.unwrap_or("-"));
    println!(
        "{:<20} {:<9} {:<20} {:<12} {:<12} PATH",
        "SESSION", "STATUS", "EXECUTOR", "MACHINE", "CIRCLE"
    );
    for x in items {
        let executor = x
            .executor
            .as_ref()
            .map(|e| format!("@{}", t(Some(&e.name))))
            .unwrap_or("-".into());
        println!(
            "{:<20} {:<9} {:<20} {:<12} {:<12} {}",
            t(Some(&x.session_id)),
            <&str>::from(x.status),
            executor,
            t(x.machine.as_deref()),
            t(Some(&x.circle)),
            t(x.project_path.as_deref()),
        );
    }
    Ok(ExitCode::SUCCESS)
}
