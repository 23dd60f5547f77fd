//! The real Codex CLI (npm `@openai/codex`) as an agent beside the real Claude Code CLI, both
//! offline against the scripted model of `repowire_e2e::mockmodel` (its Responses API side for
//! Codex): a Claude Code session on one machine asks a Codex session on another, through one
//! relay, and gets each reply. Codex runs in tmux with the hooks and MCP server that
//! `repowire setup` wrote into its config.toml; it is woken by the daemon through its composer
//! and is handed the ask through its UserPromptSubmit hook.
//!
//! Skipped, with the reason printed, when `REPOWIRE_CODEX_BIN` or `REPOWIRE_CLAUDE_BIN` is
//! unset and `REPOWIRE_REQUIRE_CODEX` is not (scripts/test sets them).

use std::time::Duration;

use repowire_e2e::claude::{ClaudeTeam, Cli, claude_bin, hops};
use repowire_e2e::hookrun::cli_from_env;
use repowire_e2e::mockmodel::Step;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_claude_code_session_asks_a_codex_session_and_gets_each_reply() {
    let Some(codex) = cli_from_env(
        "REPOWIRE_CODEX_BIN",
        "REPOWIRE_REQUIRE_CODEX",
        "scripts/install-codex",
    ) else {
        return;
    };
    let claude = match claude_bin() {
        Ok(p) => p,
        Err(why) => {
            eprintln!("skipped: the real Claude Code CLI is not available: {why}");
            return;
        }
    };
    let team = ClaudeTeam::start_with([Cli::Claude(claude), Cli::Codex(codex)], None, true)
        .await
        .unwrap();

    // Codex registered truthfully.
    let peers = team.alpha.home.json(&["peer", "list"]);
    let beta = peers
        .as_array()
        .and_then(|a| a.iter().find(|p| p["name"] == "beta"))
        .cloned()
        .unwrap_or_default();
    assert_eq!(beta["backend"], "codex", "{peers}");

    let turns = 3;
    let seen = team
        .converse(turns, Duration::from_secs(120))
        .await
        .unwrap();
    hops(&seen, turns).unwrap();
    // Nothing reached the model without a rule but Codex's `hello`, before the conversation.
    let start = seen.iter().position(|s| s.step == Step::Start).unwrap();
    let stray: Vec<(usize, &Step)> = seen
        .iter()
        .enumerate()
        .filter(|(_, s)| matches!(s.step, Step::Other(_)))
        .map(|(i, s)| (i, &s.step))
        .collect();
    assert!(
        stray.len() == 1 && stray[0].0 < start,
        "requests without a rule: {stray:?}"
    );

    // Each ask was woken into Codex (`injected`, with no deferral to report) and acked by it.
    let acked: Vec<&str> = seen
        .iter()
        .filter(|s| matches!(s.step, Step::AckCalled(_)))
        .map(|s| s.detail.as_str())
        .collect();
    assert_eq!(acked.len(), turns as usize, "{acked:?}");
    for id in acked {
        let states = team.alpha.home.states(id);
        assert!(
            states.iter().any(|s| s == "injected") && states.iter().any(|s| s == "acked"),
            "{id}: {states:?}"
        );
        assert_eq!(team.alpha.home.reason_of(id, "injected"), None, "{id}");
    }
    // The wakes typed into Codex's composer and were confirmed by its hook.
    let status = team.beta.home.json(&["daemon", "status"]);
    let wakes = status["wakes"].as_object().cloned().unwrap_or_default();
    assert!(
        !wakes.is_empty() && wakes.values().all(|w| w["outcome"] == "woken"),
        "{status}"
    );
}
