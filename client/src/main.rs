//! `repowire`: the client binary. Everything is in the library; this parses arguments and
//! picks the command.

use std::process::ExitCode;

use clap::{CommandFactory, Parser, Subcommand};
use repowire::{cli, config};

/// Repowire: let AI coding-agent sessions talk to each other.
#[derive(Debug, Parser)]
#[command(name = "repowire", version = repowire::VERSION, about, propagate_version = true)]
struct Cli {
    #[command(flatten)]
    config: config::Config,
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run, start, stop or inspect the daemon.
    Daemon {
        #[command(subcommand)]
        action: cli::daemon::Action,
    },
    /// Called by the agent runtime: reads the hook JSON on stdin, prints what the event allows.
    Hook {
        /// The runtime that runs the hook (setup writes it; Claude Code when left out).
        #[arg(long, value_enum, default_value = "claude-code")]
        runtime: repowire::runtimes::Runtime,
        /// session-start, prompt-submit, stop, notification, session-end or pre-tool-use.
        event: cli::hook::Event,
        /// For pre-tool-use: the longest a call may wait for an approval, whatever
        /// config.toml says later (`setup --approvals` writes it, with Claude Code's timeout
        /// for the hook above it).
        #[arg(long, value_name = "SECONDS")]
        approval_timeout: Option<u64>,
    },
    /// The MCP server (stdio) that gives an agent its Repowire tools.
    Mcp,
    /// Talk to peers.
    Peer {
        #[command(subcommand)]
        command: cli::peer::PeerCommand,
    },
    /// Tool calls of agents waiting for a person's approval: list, allow, deny, history.
    Approvals {
        #[command(subcommand)]
        command: cli::approvals::ApprovalsCommand,
    },
    /// Direct conversations: open, end and list them.
    Conversation {
        #[command(subcommand)]
        command: cli::conversation::ConversationCommand,
    },
    /// Ask a typed question and wait for the answer (for scripts).
    Question {
        #[command(subcommand)]
        command: cli::question::QuestionCommand,
    },
    /// What peers sent to you (the person at this terminal): unread first, with the ids
    /// `peer ack` and `peer answer` take. Listing marks them read and tells their senders.
    Inbox(cli::inbox::InboxArgs),
    /// Which peer this terminal acts as, and why.
    Whoami {
        /// As `--from` would name it.
        #[arg(long)]
        from: Option<String>,
        /// JSON output.
        #[arg(long)]
        json: bool,
    },
    /// Messages queued for a relay, per relay and tenant.
    Outbox {
        #[command(subcommand)]
        command: cli::outbox::OutboxCommand,
    },
    /// Local agent sessions.
    Session {
        #[command(subcommand)]
        command: cli::session::SessionCommand,
    },
    /// Adopt an agent running in a tmux pane that never registered (fail-closed).
    Link {
        /// The pane (`%N`).
        #[arg(long)]
        pane: String,
        /// The agent runtime (default: the one the pane runs, `claude` or `codex`).
        #[arg(long, value_enum)]
        backend: Option<repowire::runtimes::Runtime>,
        /// JSON output.
        #[arg(long)]
        json: bool,
    },
    /// Install the hooks and MCP server entry of Claude Code, and of Codex when it is installed.
    Setup(cli::setup::SetupArgs),
    /// Remove what `setup` installed, keeping everything else.
    Uninstall(cli::setup::UninstallArgs),
    /// What is installed and running.
    Status {
        /// JSON output.
        #[arg(long)]
        json: bool,
    },
    /// A one-time link that signs a browser in to the relay's dashboard as the person at this
    /// machine (with this machine's key). Only from a terminal of your own, not from an agent.
    Dashboard {
        /// Open it in the desktop's browser instead of printing it.
        #[arg(long)]
        open: bool,
        /// JSON output (`url`, `expires_at_ms`).
        #[arg(long)]
        json: bool,
    },
    /// Check a relay with an API key: token exchange, WebSocket, hello → welcome. Changes
    /// nothing.
    CheckRelay {
        /// JSON output.
        #[arg(long)]
        json: bool,
    },
    /// Check the installation and say what to fix.
    Doctor {
        /// JSON output.
        #[arg(long)]
        json: bool,
    },
    /// Print shell completions (bash, zsh, fish, elvish, powershell) to stdout.
    Completions {
        /// The shell.
        shell: clap_complete::Shell,
    },
    /// Print the man page (roff) to stdout: `repowire man | man -l -`. With `--dir`, write it
    /// and the page of every subcommand it refers to (`repowire-daemon.1`, …) into that
    /// directory instead, e.g. `--dir ~/.local/share/man/man1`, so `man repowire-daemon` works.
    Man {
        /// Write every page into this directory.
        #[arg(long, value_name = "DIR")]
        dir: Option<std::path::PathBuf>,
    },
    /// Show the effective configuration.
    Config {
        #[command(subcommand)]
        command: ConfigCommand,
    },
}

#[derive(Debug, Subcommand)]
enum ConfigCommand {
    /// Print the resolved settings (the API key is redacted) and what the running daemon uses.
    Show {
        /// JSON output.
        #[arg(long)]
        json: bool,
    },
}

/// The exit status of a command whose stdout was closed before it finished writing: what a
/// shell reports for a Unix tool that SIGPIPE ended (128 + 13), so `set -o pipefail` and
/// `$PIPESTATUS` read it the same way.
const CLOSED_STDOUT: u8 = 141;

/// True for the message `println!` panics with when stdout is a closed pipe.
fn is_closed_stdout_panic(message: &str) -> bool {
    message.starts_with("failed printing to stdout") && message.contains("Broken pipe")
}

/// Lets a closed stdout end the process quietly, as it ends every Unix tool (`repowire man |
/// head` ends when `head` has read enough). Rust ignores SIGPIPE (and the workspace forbids the
/// `unsafe` that would restore it), so a `println!` to a closed pipe panics: that one panic
/// becomes a quiet exit with [`CLOSED_STDOUT`]. Not for the long-running commands: the daemon
/// and the MCP server handle a closed pipe or socket as an error of their own.
fn quiet_on_closed_stdout() {
    let default = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let payload = info.payload();
        let message = payload
            .downcast_ref::<String>()
            .map(String::as_str)
            .or_else(|| payload.downcast_ref::<&str>().copied())
            .unwrap_or("");
        if is_closed_stdout_panic(message) {
            std::process::exit(i32::from(CLOSED_STDOUT));
        }
        default(info);
    }));
}

/// True when `error` comes from writing to a closed stdout (a write that returned the error
/// instead of panicking: `man`, `completions`).
fn is_closed_stdout(error: &anyhow::Error) -> bool {
    error.chain().any(|cause| {
        cause
            .downcast_ref::<std::io::Error>()
            .is_some_and(|e| e.kind() == std::io::ErrorKind::BrokenPipe)
    })
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let long_running = matches!(
        cli.command,
        Command::Mcp
            | Command::Hook { .. }
            | Command::Daemon {
                action: cli::daemon::Action::Run
            }
    );
    if !long_running {
        quiet_on_closed_stdout();
    }
    // Hooks take the fast path: no async runtime, no tracing setup.
    if let Command::Hook {
        runtime,
        event,
        approval_timeout,
    } = &cli.command
    {
        return cli::hook::run(&cli.config, *runtime, *event, *approval_timeout);
    }
    let result = match cli.command {
        Command::Daemon { action } => cli::daemon::run(&cli.config, action),
        Command::Mcp => cli::daemon::mcp(&cli.config),
        Command::Peer { command } => cli::peer::run(&cli.config, command),
        Command::Inbox(args) => cli::inbox::inbox(&cli.config, args),
        Command::Approvals { command } => cli::approvals::run(&cli.config, command),
        Command::Question { command } => cli::question::run(&cli.config, command),
        Command::Conversation { command } => cli::conversation::run(&cli.config, command),
        Command::Whoami { from, json } => cli::inbox::whoami(&cli.config, from, json),
        Command::Session { command } => cli::session::run(&cli.config, command),
        Command::Outbox { command } => cli::outbox::run(&cli.config, command),
        Command::Link {
            pane,
            backend,
            json,
        } => cli::session::link(&cli.config, pane, backend, json),
        Command::Setup(args) => cli::setup::setup(&cli.config, &args),
        Command::Uninstall(args) => cli::setup::uninstall(&cli.config, &args),
        Command::Status { json } => cli::doctor::status(&cli.config, json),
        Command::Doctor { json } => cli::doctor::doctor(&cli.config, json),
        Command::CheckRelay { json } => cli::check_relay::run(&cli.config, json),
        Command::Dashboard { open, json } => cli::dashboard::run(&cli.config, open, json),
        Command::Config {
            command: ConfigCommand::Show { json },
        } => cli::daemon::show_config(&cli.config, json),
        Command::Completions { shell } => {
            // Generated into memory first: clap_complete panics when its writer fails (a
            // closed pipe); a failed write here is an ordinary error.
            let mut script = Vec::new();
            clap_complete::generate(shell, &mut Cli::command(), "repowire", &mut script);
            std::io::Write::write_all(&mut std::io::stdout(), &script)
                .map(|()| ExitCode::SUCCESS)
                .map_err(Into::into)
        }
        Command::Man { dir: None } => {
            // Built as `--dir` builds it, so both are the same page.
            let mut command = Cli::command().disable_help_subcommand(true);
            command.build();
            clap_mangen::Man::new(command)
                .render(&mut std::io::stdout())
                .map(|()| ExitCode::SUCCESS)
                .map_err(Into::into)
        }
        Command::Man { dir: Some(dir) } => std::fs::create_dir_all(&dir)
            .and_then(|()| clap_mangen::generate_to(Cli::command(), &dir))
            .map(|()| {
                println!("wrote the man pages into {}", dir.display());
                ExitCode::SUCCESS
            })
            .map_err(|e| anyhow::anyhow!("writing the man pages into {}: {e}", dir.display())),
        Command::Hook { .. } => Ok(ExitCode::SUCCESS),
    };
    match result {
        Ok(code) => code,
        Err(e) if !long_running && is_closed_stdout(&e) => ExitCode::from(CLOSED_STDOUT),
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}
