//! The real Gemini CLI (npm `@google/gemini-cli`) as an agent beside the real Claude Code CLI,
//! both offline against the scripted model of `repowire_e2e::mockmodel` (its Gemini API side
//! for Gemini): a Claude Code session asks a Gemini CLI session on another machine, through one
//! relay, and gets each reply. Gemini runs in tmux with the hooks and MCP server that
//! `repowire setup` wrote into its settings.json; it is woken through its input box, handed
//! the ask through its BeforeAgent hook, and continued with the next one through AfterAgent.
//!
//! Skipped, with the reason printed, when `REPOWIRE_GEMINI_BIN` or `REPOWIRE_CLAUDE_BIN` is
//! unset and `REPOWIRE_REQUIRE_GEMINI` is not (scripts/test sets them).

use std::time::Duration;

use repowire_e2e::claude::{ClaudeTeam, Cli, claude_or_skip, hops};
use repowire_e2e::hookrun::cli_from_env;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_claude_code_session_asks_a_gemini_session_and_gets_each_reply() {
    let Some(gemini) = cli_from_env(
        "REPOWIRE_GEMINI_BIN",
        "REPOWIRE_REQUIRE_GEMINI",
        "scripts/install-gemini-cli",
    ) else {
        return;
    };
    let Some(claude) = claude_or_skip() else {
        return;
    };
    let team = ClaudeTeam::start_with([Cli::Claude(claude), Cli::Gemini(gemini)], None, true)
        .await
        .unwrap();
    let peers = team.alpha.home.json(&["peer", "list"]);
    let beta = peers
        .as_array()
        .and_then(|a| a.iter().find(|p| p["name"] == "beta"))
        .cloned()
        .unwrap_or_default();
    assert_eq!(beta["backend"], "gemini", "{peers}");

    let turns = 3;
    let seen = team
        .converse(turns, Duration::from_secs(120))
        .await
        .unwrap();
    hops(&seen, turns).unwrap();
    team.asks_closed(&seen, turns);
    // Gemini was woken through its input box: its last wake was confirmed by its hook.
    let status = team.beta.home.json(&["daemon", "status"]);
    let wakes = status["wakes"].as_object().cloned().unwrap_or_default();
    assert!(
        !wakes.is_empty() && wakes.values().all(|w| w["outcome"] == "woken"),
        "{status}"
    );
}

/// The other way round: a Gemini session asks a Claude Code session through our MCP `ask`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gemini_session_asks_a_claude_code_session_and_gets_each_reply() {
    let Some(gemini) = cli_from_env(
        "REPOWIRE_GEMINI_BIN",
        "REPOWIRE_REQUIRE_GEMINI",
        "scripts/install-gemini-cli",
    ) else {
        return;
    };
    let Some(claude) = claude_or_skip() else {
        return;
    };
    let team = ClaudeTeam::start_with([Cli::Gemini(gemini), Cli::Claude(claude)], None, true)
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
