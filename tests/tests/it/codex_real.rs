//! The real Codex CLI (npm `@openai/codex`) as an agent beside the real Claude Code CLI, both
//! offline against the scripted model of `repowire_e2e::mockmodel` (its Responses API side for
//! Codex): a Claude Code session on one machine asks a Codex session on another, through one
//! relay, and gets each reply. Codex runs in tmux with the hooks and MCP server that
//! `repowire setup` wrote into its config.toml; it is woken by the daemon through its composer
//! and is handed the ask through its UserPromptSubmit hook.
//!
//! Skipped, with the reason printed, when `REPOWIRE_CODEX_BIN` or `REPOWIRE_CLAUDE_BIN` is
//! unset and `REPOWIRE_REQUIRE_CODEX` is not (scripts/test sets them).

use std::path::Path;
use std::process::Output;
use std::time::Duration;

use repowire_e2e::claude::{ClaudeTeam, Cli, claude_or_skip, codex_or_skip};
use repowire_e2e::gated::GatedPair;
use repowire_e2e::mockmodel::Step;
use repowire_e2e::offline::codex_config_with_patches;
use repowire_e2e::responses::ResponsesMock;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_claude_code_session_asks_a_codex_session_and_gets_each_reply() {
    let Some(codex) = codex_or_skip() else {
        return;
    };
    let Some(claude) = claude_or_skip() else {
        return;
    };
    let team = ClaudeTeam::start_with([Cli::Claude(claude), Cli::Codex(codex)], None, true)
        .await
        .unwrap();

    // Codex registered truthfully.
    assert_eq!(team.beta_backend(), "codex");
    let (seen, asks) = team.asks_answered(3).await.unwrap();
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
    for id in asks {
        assert_eq!(team.alpha.home.reason_of(&id, "injected"), None, "{id}");
    }
    // The wakes typed into Codex's composer and were confirmed by its hook.
    team.beta_woken_every_time();
}

/// The other way round: a Codex session asks a Claude Code session through our MCP `ask`, and
/// each reply reaches Codex (handed over at its turn end, or by a wake into its composer).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_codex_session_asks_a_claude_code_session_and_gets_each_reply() {
    let Some(codex) = codex_or_skip() else {
        return;
    };
    let Some(claude) = claude_or_skip() else {
        return;
    };
    let team = ClaudeTeam::start_with([Cli::Codex(codex), Cli::Claude(claude)], None, true)
        .await
        .unwrap();
    team.asks_answered(3).await.unwrap();
}

/// `codex exec PROMPT` with `env` (a machine's user), in `project`, against the facts mock
/// (whose `RUN-SHELL CMD` is a shell call); its output.
async fn codex_exec_env(
    codex: &Path,
    env: &[(&'static str, String)],
    project: &Path,
    prompt: &str,
) -> Output {
    let mut command = tokio::process::Command::new(codex);
    command
        .args([
            "exec",
            "--skip-git-repo-check",
            "--dangerously-bypass-hook-trust",
            "-s",
            "workspace-write",
            prompt,
        ])
        .current_dir(project)
        .envs(env.iter().map(|(k, v)| (*k, v.as_str())))
        .env("MOCK_API_KEY", "offline-mock")
        .stdin(std::process::Stdio::null())
        .kill_on_drop(true);
    tokio::time::timeout(Duration::from_secs(120), command.output())
        .await
        .expect("codex exec finished within 120 s")
        .expect("codex runs")
}

/// A real Codex on `laptop` (relay pod A) with approvals on: its shell call waits for a person
/// on `desk` (pod B), runs when they allow it, and not when they deny it — and Codex tells its
/// model who denied it and why. With `Edit` gated, its patches (`apply_patch`) wait the same.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_codex_shell_call_is_approved_or_denied_by_a_person_on_another_machine() {
    let Some(codex) = codex_or_skip() else {
        return;
    };
    let model = ResponsesMock::start().await.expect("the mock model");
    let (pair, _) = GatedPair::start("repowire_codex_approvals", "codex", &[], |laptop, _| {
        let codex_home = laptop.path().join(".codex");
        std::fs::create_dir_all(&codex_home).expect("~/.codex");
        let config =
            codex_config_with_patches(&model.base_url, &codex_home).expect("the catalogue");
        std::fs::write(codex_home.join("config.toml"), config).expect("config");
    })
    .await;
    let out = pair
        .allow_then_deny("codex", |prompt| {
            let (codex, project) = (codex.clone(), pair.project.clone());
            let env = pair.laptop.env();
            tokio::spawn(async move { codex_exec_env(&codex, &env, &project, prompt).await })
        })
        .await;
    assert!(out.status.success(), "{out:?}");
    // Codex told its model why.
    let told = model
        .requests()
        .iter()
        .flat_map(|r| r["input"].as_array().cloned().unwrap_or_default())
        .filter(|i| i["type"] == "function_call_output")
        .map(|i| i["output"].as_str().unwrap_or_default().to_owned())
        .find(|o| o.contains("touch denied.txt"))
        .unwrap_or_default();
    assert!(
        told.contains("Command blocked by PreToolUse hook: Repowire approvals:")
            && told.contains("not today"),
        "{told}"
    );

    // Edits gated too: Codex's patch waits as an `Edit`, shown whole, and is not applied
    // when denied.
    pair.laptop.ok(&[
        "setup",
        "--non-interactive",
        "--runtime",
        "codex",
        "--approvals",
        "--gated-tools",
        "Bash,Edit",
        "--approval-timeout",
        "60",
    ]);
    let run = {
        let (codex, project) = (codex.clone(), pair.project.clone());
        let env = pair.laptop.env();
        tokio::spawn(async move {
            codex_exec_env(&codex, &env, &project, "RUN-PATCH patched.txt").await
        })
    };
    let q = pair.desk.approvals_waiting(1).await.remove(0);
    let text = q["text"].as_str().unwrap_or_default();
    assert!(
        text.starts_with("Edit: patch of 1 file: patched.txt\nin ") && text.contains("+patched"),
        "{q}"
    );
    let cid = q["correlation_id"].as_str().expect("cid");
    let denied = pair
        .desk
        .in_terminal(&["approvals", "deny", cid, "--reason", "no edits today"]);
    assert!(denied.status.success(), "{denied:?}");
    let out = run.await.expect("the run");
    assert!(out.status.success(), "{out:?}");
    assert!(
        !pair.project.join("patched.txt").exists(),
        "the denied patch was applied"
    );
    assert!(
        model
            .requests()
            .iter()
            .flat_map(|r| r["input"].as_array().cloned().unwrap_or_default())
            .filter(|i| i["type"] == "custom_tool_call_output")
            .any(|i| i["output"]
                .as_str()
                .is_some_and(|o| o.contains("no edits today"))),
        "Codex's model was told why"
    );
}
