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

use repowire_e2e::agents::Home;
use repowire_e2e::claude::{ClaudeTeam, Cli, claude_or_skip, hops};
use repowire_e2e::hookrun::cli_from_env;
use repowire_e2e::mockmodel::Step;
use repowire_e2e::offline::codex_config;
use repowire_e2e::process::{RelayProcess, TempDatabase};
use repowire_e2e::responses::ResponsesMock;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_claude_code_session_asks_a_codex_session_and_gets_each_reply() {
    let Some(codex) = cli_from_env(
        "REPOWIRE_CODEX_BIN",
        "REPOWIRE_REQUIRE_CODEX",
        "scripts/install-codex",
    ) else {
        return;
    };
    let Some(claude) = claude_or_skip() else {
        return;
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
    for id in team.asks_closed(&seen, turns) {
        assert_eq!(team.alpha.home.reason_of(&id, "injected"), None, "{id}");
    }
    // The wakes typed into Codex's composer and were confirmed by its hook.
    let status = team.beta.home.json(&["daemon", "status"]);
    let wakes = status["wakes"].as_object().cloned().unwrap_or_default();
    assert!(
        !wakes.is_empty() && wakes.values().all(|w| w["outcome"] == "woken"),
        "{status}"
    );
}

/// The other way round: a Codex session asks a Claude Code session through our MCP `ask`, and
/// each reply reaches Codex (handed over at its turn end, or by a wake into its composer).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_codex_session_asks_a_claude_code_session_and_gets_each_reply() {
    let Some(codex) = cli_from_env(
        "REPOWIRE_CODEX_BIN",
        "REPOWIRE_REQUIRE_CODEX",
        "scripts/install-codex",
    ) else {
        return;
    };
    let Some(claude) = claude_or_skip() else {
        return;
    };
    let team = ClaudeTeam::start_with([Cli::Codex(codex), Cli::Claude(claude)], None, true)
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
/// model who denied it and why.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_codex_shell_call_is_approved_or_denied_by_a_person_on_another_machine() {
    let Some(codex) = cli_from_env(
        "REPOWIRE_CODEX_BIN",
        "REPOWIRE_REQUIRE_CODEX",
        "scripts/install-codex",
    ) else {
        return;
    };
    let db = TempDatabase::create("repowire_codex_approvals");
    let redis = repowire_e2e::redis_url();
    let prefix = repowire_e2e::redis_prefix();
    let pod_a = RelayProcess::start_pod(&db.url(), &redis, &prefix, "pod-a", &[]).await;
    let pod_b = RelayProcess::start_pod(&db.url(), &redis, &prefix, "pod-b", &[]).await;
    let key = pod_a
        .first_key
        .clone()
        .or(pod_b.first_key.clone())
        .expect("key");
    let model = ResponsesMock::start().await.expect("the mock model");
    let laptop = Home::new(Some((pod_a.http.clone(), key.clone())));
    let desk = Home::new(Some((pod_b.http.clone(), key)));
    let codex_home = laptop.path().join(".codex");
    std::fs::create_dir_all(&codex_home).expect("~/.codex");
    std::fs::write(
        codex_home.join("config.toml"),
        codex_config(&model.base_url),
    )
    .expect("config");
    laptop.ok(&[
        "setup",
        "--non-interactive",
        "--runtime",
        "codex",
        "--approvals",
        "--gated-tools",
        "Bash",
        "--approval-timeout",
        "60",
    ]);
    laptop.ok(&["daemon", "start"]);
    desk.install_and_start();
    let project = laptop.path().join("app");
    std::fs::create_dir_all(&project).expect("project");

    let run = {
        let (codex, project) = (codex.clone(), project.clone());
        let laptop_env = laptop.env();
        tokio::spawn(async move {
            codex_exec_env(&codex, &laptop_env, &project, "RUN-SHELL touch allowed.txt").await
        })
    };
    let q = desk.approvals_waiting(1).await.remove(0);
    assert_eq!(q["from"]["name"], "app");
    let peers = desk.json(&["peer", "list"]);
    let app = peers
        .as_array()
        .and_then(|a| a.iter().find(|p| p["peer_id"] == q["from"]["peer_id"]))
        .cloned()
        .unwrap_or_default();
    assert_eq!(app["backend"], "codex", "{peers}");
    assert!(
        q["text"]
            .as_str()
            .is_some_and(|t| t.starts_with("Bash: touch allowed.txt\nin ")),
        "{q}"
    );
    assert!(
        !project.join("allowed.txt").exists(),
        "ran before a decision"
    );
    let cid = q["correlation_id"].as_str().expect("cid").to_owned();
    let allowed = desk.in_terminal(&["approvals", "allow", &cid]);
    assert!(allowed.status.success(), "{allowed:?}");
    let out = run.await.expect("the run");
    assert!(out.status.success(), "{out:?}");
    assert!(project.join("allowed.txt").exists(), "the allowed call ran");

    let run = {
        let (codex, project) = (codex.clone(), project.clone());
        let laptop_env = laptop.env();
        tokio::spawn(async move {
            codex_exec_env(&codex, &laptop_env, &project, "RUN-SHELL touch denied.txt").await
        })
    };
    let q = desk.approvals_waiting(1).await.remove(0);
    let cid = q["correlation_id"].as_str().expect("cid").to_owned();
    let denied = desk.in_terminal(&["approvals", "deny", &cid, "--reason", "not today"]);
    assert!(denied.status.success(), "{denied:?}");
    let out = run.await.expect("the run");
    assert!(out.status.success(), "{out:?}");
    assert!(!project.join("denied.txt").exists(), "the denied call ran");
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
}
