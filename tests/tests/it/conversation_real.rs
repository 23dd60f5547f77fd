//! Direct conversations between real agent CLIs (issue 34), offline against the scripted model
//! of `repowire_e2e::mockmodel`: alpha opens a conversation with beta through our MCP
//! `start_conversation`; from then on neither calls a tool to talk. Each says `CONV N/T` at the
//! end of its turn, its daemon relays that text from the runtime's Stop hook to the other
//! machine through the relay, and the other's daemon wakes it with it; whoever hears the last
//! turn ends the conversation with `end_conversation`.
//!
//! Skipped, with the reason printed, when a CLI's binary is not named (scripts/test names
//! them and requires them).

use std::time::Duration;

use repowire_e2e::claude::{
    ClaudeTeam, Cli, Member, claude_or_skip, codex_or_skip, gemini_or_skip, opencode_or_skip,
};
use repowire_e2e::mockmodel::{Seen, Step};
use serde_json::Value;

/// The opening and ten relayed turns.
const TURNS: u32 = 11;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_real_claude_code_sessions_converse_through_their_turns_until_one_ends_it() {
    let Some(claude) = claude_or_skip() else {
        return;
    };
    let team = ClaudeTeam::start(&claude, None, true).await.unwrap();
    converse_and_check(&team).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_real_claude_code_session_and_a_real_codex_session_converse_until_one_ends_it() {
    let Some(codex) = codex_or_skip() else {
        return;
    };
    let Some(claude) = claude_or_skip() else {
        return;
    };
    let team = ClaudeTeam::start_with([Cli::Claude(claude), Cli::Codex(codex)], None, true)
        .await
        .unwrap();
    converse_and_check(&team).await;
}

/// Gemini CLI's turns are read from its transcript (its AfterAgent's reply text is garbled
/// when streamed in chunks).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_real_claude_code_session_and_a_real_gemini_session_converse_until_one_ends_it() {
    let Some(gemini) = gemini_or_skip() else {
        return;
    };
    let Some(claude) = claude_or_skip() else {
        return;
    };
    let team = ClaudeTeam::start_with([Cli::Claude(claude), Cli::Gemini(gemini)], None, true)
        .await
        .unwrap();
    converse_and_check(&team).await;
}

/// OpenCode's turns come from our plugin, which reads the turn's last assistant message at
/// `session.idle`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_real_claude_code_session_and_a_real_opencode_session_converse_until_one_ends_it() {
    let Some(opencode) = opencode_or_skip() else {
        return;
    };
    let Some(claude) = claude_or_skip() else {
        return;
    };
    let team = ClaudeTeam::start_with([Cli::Claude(claude), Cli::OpenCode(opencode)], None, true)
        .await
        .unwrap();
    converse_and_check(&team).await;
}

/// Runs the conversation and checks what the model and both daemons saw.
async fn converse_and_check(team: &ClaudeTeam) {
    let start = format!("CONVERSE-START {} {TURNS}", team.beta.name);
    let seen = team
        .run_until(
            &start,
            Duration::from_secs(240),
            "the conversation's end",
            |seen| seen.iter().any(|s| s.step == Step::EndedConversation),
        )
        .await
        .unwrap();

    // The model saw each turn said exactly once and in order, by alternate sessions: a turn
    // delivered twice, or echoed back to its speaker, would have been answered twice.
    let said: Vec<&Seen> = seen
        .iter()
        .filter(|s| matches!(s.step, Step::Said(_)))
        .collect();
    let numbers: Vec<u32> = said
        .iter()
        .map(|s| match s.step {
            Step::Said(n) => n,
            _ => 0,
        })
        .collect();
    assert_eq!(numbers, (1..=TURNS).collect::<Vec<_>>(), "{seen:?}");
    let ended: Vec<&Seen> = seen
        .iter()
        .filter(|s| s.step == Step::EndedConversation)
        .collect();
    assert_eq!(ended.len(), 1, "{seen:?}");
    // Nothing without a rule after the start (Codex's `hello` comes before it).
    let begin = seen.iter().position(|s| s.step == Step::Start).unwrap();
    let stray: Vec<&Step> = seen[begin..]
        .iter()
        .filter(|s| matches!(s.step, Step::Other(_)))
        .map(|s| &s.step)
        .collect();
    assert!(stray.is_empty(), "requests without a rule: {stray:?}");

    // Both daemons know the conversation ended (the ender from its call, alpha from the
    // relay's notice), after the opening, ten turns and the end.
    team.until(Duration::from_secs(30), "both daemons see the end", |t| {
        [&t.alpha, &t.beta]
            .iter()
            .all(|m| listed(m).is_some_and(|c| c["state"] == "ended"))
    })
    .await
    .unwrap();
    let id = listed(&team.alpha).unwrap()["conversation_id"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(id.starts_with("cv-"), "{id}");

    // What each machine received, in the relay's order: only the other's turns, each once,
    // attributed to it, with the words its model said; then the end (alpha's only).
    let odd: Vec<u32> = (1..=TURNS).filter(|n| n % 2 == 1).collect();
    let even: Vec<u32> = (1..=TURNS).filter(|n| n % 2 == 0).collect();
    let beta_got = received(&team.beta, &id);
    assert_eq!(beta_got, lines("alpha", &odd), "beta's view");
    let mut alpha_got = received(&team.alpha, &id);
    let end = alpha_got.pop().unwrap();
    assert_eq!(alpha_got, lines("beta", &even), "alpha's view");
    assert_eq!(
        (end.0, end.1.as_str()),
        (u64::from(TURNS) + 1, "ended"),
        "the end notice last"
    );
    // And what each sent: its own turns (alpha's opening first; beta's end last), none failed.
    let mut ender = texts(&even);
    ender.push("all turns done".into());
    assert_eq!(sent(&team.beta, &id), ender, "beta's turns");
    assert_eq!(sent(&team.alpha, &id), texts(&odd), "alpha's turns");
}

/// The one conversation `member`'s session takes part in, as `conversation list` shows it.
fn listed(member: &Member) -> Option<Value> {
    let list = member.home.json(&[
        "conversation",
        "list",
        "--all",
        "--from",
        member.name.as_str(),
    ]);
    list.as_array().and_then(|l| l.first().cloned())
}

/// `conversation show ID` of `member`'s session.
fn shown(member: &Member, id: &str) -> Vec<Value> {
    let shown = member
        .home
        .json(&["conversation", "show", id, "--from", member.name.as_str()]);
    shown["messages"].as_array().cloned().unwrap_or_default()
}

/// `(seq, event, from, text)` of every message `member` received in conversation `id`.
fn received(member: &Member, id: &str) -> Vec<(u64, String, String, String)> {
    shown(member, id)
        .iter()
        .filter(|l| {
            l["event"] != "sent" && !(l["event"] == "open" && l["from"] == member.name.as_str())
        })
        .map(|l| {
            let text = if l["event"] == "ended" {
                String::new()
            } else {
                l["text"].as_str().unwrap_or("").to_owned()
            };
            (
                l["seq"].as_u64().unwrap_or(0),
                l["event"].as_str().unwrap_or("").to_owned(),
                l["from"].as_str().unwrap_or("").to_owned(),
                text,
            )
        })
        .collect()
}

/// The texts `member` sent in conversation `id` (its opening first, if it opened it), each
/// checked accepted.
fn sent(member: &Member, id: &str) -> Vec<String> {
    shown(member, id)
        .iter()
        .filter(|l| {
            l["event"] == "sent" || (l["event"] == "open" && l["from"] == member.name.as_str())
        })
        .map(|l| {
            assert_ne!(l["state"], "failed", "{l}");
            l["text"].as_str().unwrap_or("").to_owned()
        })
        .collect()
}

/// The lines a machine receives for turns `numbers` said by `from`.
fn lines(from: &str, numbers: &[u32]) -> Vec<(u64, String, String, String)> {
    numbers
        .iter()
        .map(|&n| {
            let event = if n == 1 { "open" } else { "turn" };
            (
                u64::from(n),
                event.to_owned(),
                from.to_owned(),
                format!("CONV {n}/{TURNS}"),
            )
        })
        .collect()
}

fn texts(numbers: &[u32]) -> Vec<String> {
    numbers
        .iter()
        .map(|n| format!("CONV {n}/{TURNS}"))
        .collect()
}
