//! The real OpenCode (npm `opencode-ai`) as an agent beside the real Claude Code CLI, both
//! offline against the scripted model of `repowire_e2e::mockmodel` (its Chat Completions side
//! for OpenCode): a Claude Code session asks an OpenCode session on another machine, through
//! one relay, and gets each reply, and the other way round. OpenCode runs in tmux with the
//! plugin and MCP server that `repowire setup` wrote; it registers at its first prompt, is
//! woken through its input box, and is handed each ask by the plugin as a hidden part of the
//! prompt.
//!
//! Skipped, with the reason printed, when `REPOWIRE_OPENCODE_BIN` or `REPOWIRE_CLAUDE_BIN` is
//! unset and `REPOWIRE_REQUIRE_OPENCODE` is not (scripts/test sets them).

use std::time::Duration;

use repowire_e2e::claude::{ClaudeTeam, Cli, claude_or_skip, hops};
use repowire_e2e::hookrun::cli_from_env;

fn opencode() -> Option<std::path::PathBuf> {
    cli_from_env(
        "REPOWIRE_OPENCODE_BIN",
        "REPOWIRE_REQUIRE_OPENCODE",
        "scripts/install-opencode",
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_claude_code_session_asks_an_opencode_session_and_gets_each_reply() {
    let Some(opencode) = opencode() else {
        return;
    };
    let Some(claude) = claude_or_skip() else {
        return;
    };
    let team = ClaudeTeam::start_with([Cli::Claude(claude), Cli::OpenCode(opencode)], None, true)
        .await
        .unwrap();
    let peers = team.alpha.home.json(&["peer", "list"]);
    let beta = peers
        .as_array()
        .and_then(|a| a.iter().find(|p| p["name"] == "beta"))
        .cloned()
        .unwrap_or_default();
    assert_eq!(beta["backend"], "opencode", "{peers}");

    let turns = 3;
    let seen = team
        .converse(turns, Duration::from_secs(120))
        .await
        .unwrap();
    hops(&seen, turns).unwrap();
    team.asks_closed(&seen, turns);
    // OpenCode was woken through its input box: its last wake was confirmed by its plugin.
    let status = team.beta.home.json(&["daemon", "status"]);
    let wakes = status["wakes"].as_object().cloned().unwrap_or_default();
    assert!(
        !wakes.is_empty() && wakes.values().all(|w| w["outcome"] == "woken"),
        "{status}"
    );
}

/// The other way round: an OpenCode session asks a Claude Code session through our MCP `ask`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_opencode_session_asks_a_claude_code_session_and_gets_each_reply() {
    let Some(opencode) = opencode() else {
        return;
    };
    let Some(claude) = claude_or_skip() else {
        return;
    };
    let team = ClaudeTeam::start_with([Cli::OpenCode(opencode), Cli::Claude(claude)], None, true)
        .await
        .unwrap();
    let turns = 3;
    let seen = team
        .converse(turns, Duration::from_secs(120))
        .await
        .unwrap();
    hops(&seen, turns).unwrap();
    team.asks_closed(&seen, turns);
}
