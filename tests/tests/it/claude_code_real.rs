//! The real Claude Code CLI (npm `@anthropic-ai/claude-code`) as the agent, offline against the
//! scripted model API of `repowire_e2e::mockmodel`: two sessions on two daemons through one
//! relay process. Skipped, with the reason printed, when `REPOWIRE_CLAUDE_BIN` names no binary
//! (`scripts/test` sets it when the npm package installs).

use std::time::Duration;

use repowire_e2e::claude::{ClaudeTeam, claude_or_skip, hops};
use repowire_e2e::mockmodel::Step;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_real_claude_code_sessions_hold_an_ask_ack_conversation_without_a_person() {
    let Some(claude) = claude_or_skip() else {
        return;
    };
    let team = ClaudeTeam::start(&claude, None, true).await.unwrap();
    let turns = 3;
    let seen = team
        .converse(turns, Duration::from_secs(120))
        .await
        .unwrap();

    // Every step of every turn reached the model, in both directions, and nothing else did
    // (no permission classifier, no stray prompt typed into a session).
    hops(&seen, turns).unwrap();
    let stray: Vec<_> = seen
        .iter()
        .filter(|s| matches!(s.step, Step::Other(_)))
        .collect();
    assert!(stray.is_empty(), "requests without a rule: {stray:?}");

    // The asker's daemon reports each ask woken into beta (`injected`) and closed (`acked`).
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
        // Woken (or handed over at a turn end) with nobody at the pane: no deferral to report.
        assert_eq!(team.alpha.home.reason_of(id, "injected"), None, "{id}");
    }
    // Each session saw only its own side: alpha asked, beta acked.
    let session_of = |step: &Step| {
        seen.iter()
            .find(|s| &s.step == step)
            .map(|s| s.session.clone())
            .unwrap()
    };
    assert_ne!(
        session_of(&Step::AskCalled(1)),
        session_of(&Step::AckCalled(1))
    );
    assert!(!team.tmux.capture(&team.beta.pane).contains("Do you want"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_our_tools_allowed_the_real_cli_stops_the_agent_on_a_permission_prompt() {
    let Some(claude) = claude_or_skip() else {
        return;
    };
    // What `setup --no-allow-tools` leaves, in Claude Code's `default` permission mode: the
    // asker's first `ask` waits for a person, so nothing reaches beta.
    let team = ClaudeTeam::start(&claude, None, false).await.unwrap();
    team.converse_until(1, Duration::from_secs(60), "alpha's ask call", |seen| {
        seen.iter().any(|s| s.step == Step::AskCalled(1))
    })
    .await
    .unwrap();
    team.until(
        Duration::from_secs(60),
        "a permission prompt in alpha",
        |t| {
            t.tmux
                .capture(&t.alpha.pane)
                .contains("Do you want to proceed?")
        },
    )
    .await
    .unwrap();
    let seen = team.model.seen();
    assert!(
        seen.iter().any(|s| s.step == Step::AskCalled(1)),
        "{seen:?}"
    );
    assert!(
        !seen.iter().any(|s| s.step == Step::AskReturned(1)),
        "the ask ran without a person: {seen:?}"
    );
}
