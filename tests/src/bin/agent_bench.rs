//! `repowire-agent-bench`: the cost of one hop between two real agent sessions (issue 22; Codex
//! beside Claude Code, issue 37: `--pair claude,codex`). Two machines (HOME + daemon each) on
//! one relay process, each running a real CLI in tmux
//! against the scripted model API of `repowire_e2e::mockmodel`; alpha asks beta TURNS times and
//! beta acks each. Reported per hop, both directions:
//! - `ask/ack returned → peer's model request`: the tool's result reaches the model API (so the
//!   call has returned) → the other session's first model request holding the message;
//! - `tool call → peer's model request`: the model's tool call sent → the same, so it also
//!   counts the CLI running the tool and our MCP server's round trip to its daemon.
//!
//! The model answers at once, so what is left is ours (relay, daemons, wake, hooks) and the
//! CLI's own work between a prompt and its request.

use std::path::PathBuf;
use std::time::Duration;

use clap::Parser;
use repowire_e2e::claude::{ClaudeTeam, Cli, claude_bin, hops, percentile};

#[derive(Parser)]
struct Args {
    /// Ask/ack turns (each is two hops).
    #[arg(long, default_value_t = 20)]
    turns: u32,
    /// The `repowire` binary (default: the one beside this executable), to compare builds.
    #[arg(long)]
    repowire: Option<PathBuf>,
    /// Copy both daemons' logs into this directory (`alpha.log`, `beta.log`) at the end.
    #[arg(long)]
    logs: Option<PathBuf>,
    /// The asker's and the answerer's CLI: `claude`, `codex`, `gemini` or `opencode` each,
    /// e.g. `claude,codex` (Codex from `REPOWIRE_CODEX_BIN`, Gemini CLI from
    /// `REPOWIRE_GEMINI_BIN`, OpenCode from `REPOWIRE_OPENCODE_BIN`).
    #[arg(long, default_value = "claude,claude")]
    pair: String,
}

fn cli(name: &str, claude: &std::path::Path) -> anyhow::Result<Cli> {
    match name {
        "claude" => Ok(Cli::Claude(claude.to_owned())),
        "codex" => Ok(Cli::Codex(
            std::env::var_os("REPOWIRE_CODEX_BIN")
                .filter(|v| !v.is_empty())
                .map(PathBuf::from)
                .ok_or_else(|| anyhow::anyhow!("REPOWIRE_CODEX_BIN is not set"))?,
        )),
        "gemini" => Ok(Cli::Gemini(
            std::env::var_os("REPOWIRE_GEMINI_BIN")
                .filter(|v| !v.is_empty())
                .map(PathBuf::from)
                .ok_or_else(|| anyhow::anyhow!("REPOWIRE_GEMINI_BIN is not set"))?,
        )),
        "opencode" => Ok(Cli::OpenCode(
            std::env::var_os("REPOWIRE_OPENCODE_BIN")
                .filter(|v| !v.is_empty())
                .map(PathBuf::from)
                .ok_or_else(|| anyhow::anyhow!("REPOWIRE_OPENCODE_BIN is not set"))?,
        )),
        other => anyhow::bail!("unknown CLI `{other}`: claude, codex, gemini or opencode"),
    }
}

fn line(name: &str, v: &[f64]) {
    println!(
        "{name:<44} n={:<3} p50 {:>7.1} ms  p90 {:>7.1} ms  min {:>7.1} ms  max {:>7.1} ms",
        v.len(),
        percentile(v, 50.0),
        percentile(v, 90.0),
        percentile(v, 0.0),
        percentile(v, 100.0)
    );
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let claude = claude_bin().map_err(|e| anyhow::anyhow!(e))?;
    let version = std::process::Command::new(&claude)
        .arg("--version")
        .output()?;
    let (a, b) = args
        .pair
        .split_once(',')
        .ok_or_else(|| anyhow::anyhow!("--pair is ASKER,ANSWERER"))?;
    let clis = [cli(a, &claude)?, cli(b, &claude)?];
    if let Cli::Codex(codex) = &clis[1] {
        let v = std::process::Command::new(codex)
            .arg("--version")
            .output()?;
        println!("codex: {}", String::from_utf8_lossy(&v.stdout).trim());
    }
    println!(
        "pair: {}; claude: {}; repowire: {}; turns: {}",
        args.pair,
        String::from_utf8_lossy(&version.stdout).trim(),
        args.repowire
            .as_deref()
            .map_or("beside this binary".into(), |p| p.display().to_string()),
        args.turns
    );
    let team = ClaudeTeam::start_with(clis, args.repowire, true).await?;
    let seen = team
        .converse(
            args.turns,
            Duration::from_secs(30 + 15 * u64::from(args.turns)),
        )
        .await?;
    let h = hops(&seen, args.turns)?;
    line("ask/ack returned → peer's model request", &h.from_return);
    line("tool call → peer's model request", &h.from_call);
    // The hops alternate: alpha's ask reaching beta, beta's reply reaching alpha.
    let side = |v: &[f64], first: usize| -> Vec<f64> {
        v.iter().skip(first).step_by(2).copied().collect()
    };
    line(
        &format!("  of which to beta ({b})"),
        &side(&h.from_return, 0),
    );
    line(
        &format!("  of which to alpha ({a})"),
        &side(&h.from_return, 1),
    );
    let other: Vec<_> = seen
        .iter()
        .filter(|s| matches!(s.step, repowire_e2e::mockmodel::Step::Other(_)))
        .collect();
    println!("model requests without a rule: {}", other.len());
    if let Some(dir) = &args.logs {
        std::fs::create_dir_all(dir)?;
        std::fs::write(dir.join("alpha.log"), team.alpha.home.log())?;
        std::fs::write(dir.join("beta.log"), team.beta.home.log())?;
    }
    for log in [&team.alpha.home, &team.beta.home].map(|h| h.log()) {
        let woken: Vec<&str> = log.lines().filter(|l| l.contains("agent woken")).collect();
        println!(
            "wakes: {} (last: {})",
            woken.len(),
            woken.last().map_or("", |l| l.trim())
        );
    }
    Ok(())
}
