//! The real Gemini CLI (npm `@google/gemini-cli`) as an agent beside the real Claude Code CLI,
//! both offline against the scripted model of `repowire_e2e::mockmodel` (its Gemini API side
//! for Gemini): a Claude Code session asks a Gemini CLI session on another machine, through one
//! relay, and gets each reply. Gemini runs in tmux with the hooks and MCP server that
//! `repowire setup` wrote into its settings.json; it is woken through its input box, handed
//! the ask through its BeforeAgent hook, and continued with the next one through AfterAgent.
//!
//! Skipped, with the reason printed, when `REPOWIRE_GEMINI_BIN` or `REPOWIRE_CLAUDE_BIN` is
//! unset and `REPOWIRE_REQUIRE_GEMINI` is not (scripts/test sets them).

use std::path::Path;
use std::process::Output;
use std::time::Duration;

use repowire_e2e::claude::{ClaudeTeam, Cli, claude_or_skip, gemini_or_skip};
use repowire_e2e::gated::GatedPair;
use repowire_e2e::gemini_api::GeminiMock;
use repowire_e2e::offline::prepare_gemini;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_claude_code_session_asks_a_gemini_session_and_gets_each_reply() {
    let Some(gemini) = gemini_or_skip() else {
        return;
    };
    let Some(claude) = claude_or_skip() else {
        return;
    };
    let team = ClaudeTeam::start_with([Cli::Claude(claude), Cli::Gemini(gemini)], None, true)
        .await
        .unwrap();
    assert_eq!(team.beta_backend(), "gemini");
    team.asks_answered(3).await.unwrap();
    // Gemini was woken through its input box, each wake confirmed by its hook.
    team.beta_woken_every_time();
}

/// The other way round: a Gemini session asks a Claude Code session through our MCP `ask`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gemini_session_asks_a_claude_code_session_and_gets_each_reply() {
    let Some(gemini) = gemini_or_skip() else {
        return;
    };
    let Some(claude) = claude_or_skip() else {
        return;
    };
    let team = ClaudeTeam::start_with([Cli::Gemini(gemini), Cli::Claude(claude)], None, true)
        .await
        .unwrap();
    team.asks_answered(3).await.unwrap();
}

/// `gemini --approval-mode yolo -p PROMPT` with `env` (a machine's user) in `project`, against
/// the facts mock at `url` (whose `RUN-SHELL CMD` is a shell call); its output. YOLO: Gemini
/// asks nobody itself, so only our BeforeTool hook stands before the call.
async fn gemini_p(
    gemini: &Path,
    env: &[(&'static str, String)],
    project: &Path,
    url: &str,
    prompt: &str,
) -> Output {
    let mut command = tokio::process::Command::new(gemini);
    command
        .args(["--approval-mode", "yolo", "-p", prompt])
        .current_dir(project)
        .env("PWD", project)
        .envs(env.iter().map(|(k, v)| (*k, v.as_str())))
        .env("GOOGLE_GEMINI_BASE_URL", url)
        .env("GEMINI_API_KEY", "offline-mock")
        .env_remove("GEMINI_CLI_HOME")
        .stdin(std::process::Stdio::null())
        .kill_on_drop(true);
    tokio::time::timeout(Duration::from_secs(120), command.output())
        .await
        .expect("gemini -p finished within 120 s")
        .expect("gemini runs")
}

/// A real Gemini CLI on `laptop` (relay pod A) with approvals on: its shell call waits for a
/// person on `desk` (pod B) through our BeforeTool hook, runs when they allow it, and not when
/// they deny it — and Gemini tells its model why.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gemini_shell_call_is_approved_or_denied_by_a_person_on_another_machine() {
    let Some(gemini) = gemini_or_skip() else {
        return;
    };
    let model = GeminiMock::start().await.expect("the mock model");
    let (pair, said) = GatedPair::start(
        "repowire_gemini_approvals",
        "gemini",
        &["--allow-tools"],
        |laptop, project| prepare_gemini(laptop, project).expect("Gemini's settings"),
    )
    .await;
    assert!(said.contains("run_shell_command"), "{said}");
    let out = pair
        .allow_then_deny("gemini", |prompt| {
            let (gemini, project, url) = (gemini.clone(), pair.project.clone(), model.url.clone());
            let env = pair.laptop.env();
            tokio::spawn(async move { gemini_p(&gemini, &env, &project, &url, prompt).await })
        })
        .await;
    // Gemini told its model why.
    let told = model
        .requests()
        .iter()
        .flat_map(|r| r["contents"].as_array().cloned().unwrap_or_default())
        .flat_map(|c| c["parts"].as_array().cloned().unwrap_or_default())
        .filter_map(|p| p.get("functionResponse").map(|r| r.to_string()))
        .find(|r| r.contains("Repowire approvals"))
        .unwrap_or_default();
    assert!(told.contains("not today"), "{told}\n{out:?}");
}
