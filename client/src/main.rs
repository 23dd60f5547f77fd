//! `repowire`: the client binary. Everything is in the library; this parses arguments and
//! picks the command.

use std::process::ExitCode;

use clap::{Parser, Subcommand};
use repowire::{cli, config};

/// Repowire: let AI coding-agent sessions talk to each other.
#[derive(Debug, Parser)]
#[command(name = "repowire", version, about)]
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
        /// session-start, prompt-submit, stop, notification, session-end or pre-tool-use.
        event: cli::hook::Event,
    },
    /// The MCP server (stdio) that gives an agent its Repowire tools.
    Mcp,
    /// Talk to peers.
    Peer {
        #[command(subcommand)]
        command: cli::peer::PeerCommand,
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
        /// The agent runtime.
        #[arg(long, default_value = "claude-code")]
        backend: String,
        /// JSON output.
        #[arg(long)]
        json: bool,
    },
    /// Install the Claude Code hooks and MCP server entry.
    Setup(cli::setup::SetupArgs),
    /// Remove what `setup` installed, keeping everything else.
    Uninstall(cli::setup::SetupArgs),
    /// What is installed and running.
    Status,
    /// Check the installation and say what to fix.
    Doctor,
    /// Show the effective configuration.
    Config {
        #[command(subcommand)]
        command: ConfigCommand,
    },
}

#[derive(Debug, Subcommand)]
enum ConfigCommand {
    /// Print the resolved settings (the API key is redacted).
    Show,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    // Hooks take the fast path: no async runtime, no tracing setup.
    if let Command::Hook { event } = &cli.command {
        return cli::hook::run(&cli.config, *event);
    }
    let result = match cli.command {
        Command::Daemon { action } => cli::daemon::run(&cli.config, action),
        Command::Mcp => cli::daemon::mcp(&cli.config),
        Command::Peer { command } => cli::peer::run(&cli.config, command),
        Command::Session { command } => cli::session::run(&cli.config, command),
        Command::Link {
            pane,
            backend,
            json,
        } => cli::session::link(&cli.config, pane, backend, json),
        Command::Setup(args) => cli::setup::setup(&cli.config, &args),
        Command::Uninstall(args) => cli::setup::uninstall(&cli.config, &args),
        Command::Status => cli::setup::status(&cli.config),
        Command::Doctor => cli::setup::doctor(&cli.config),
        Command::Config {
            command: ConfigCommand::Show,
        } => cli::daemon::show_config(&cli.config),
        Command::Hook { .. } => Ok(ExitCode::SUCCESS),
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}
