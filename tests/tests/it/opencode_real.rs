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

use std::path::Path;
use std::process::Output;
use std::time::Duration;

use repowire_e2e::agents::Home;
use repowire_e2e::claude::{ClaudeTeam, Cli, claude_or_skip};
use repowire_e2e::gated::GatedPair;
use repowire_e2e::hookrun::cli_from_env;
use repowire_e2e::mockmodel::MockModel;
use repowire_e2e::offline::{OPENCODE_OFFLINE, prepare_opencode};
use tokio::io::AsyncWriteExt;

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
    assert_eq!(team.beta_backend(), "opencode");
    team.asks_answered(3).await.unwrap();
    // OpenCode was woken through its input box, each wake confirmed by its plugin.
    team.beta_woken_every_time();
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
    team.asks_answered(3).await.unwrap();
}

/// The text of every user message in OpenCode's model requests (hidden parts included).
fn user_texts(model: &repowire_e2e::mockmodel::MockModel) -> Vec<String> {
    model
        .requests()
        .iter()
        .filter_map(|r| r["messages"].as_array().cloned())
        .flatten()
        .filter(|m| m["role"] == "user")
        .map(|m| m["content"].to_string())
        .collect()
}

fn turn_state(home: &Home, name: &str) -> String {
    home.json(&["peer", "list"])
        .as_array()
        .and_then(|a| a.iter().find(|p| p["name"] == name).cloned())
        .and_then(|p| p["turn_state"].as_str().map(str::to_owned))
        .unwrap_or_default()
}

/// A message that arrives while OpenCode works waits for the end of its turn; the plugin then
/// hands it over as a new prompt of its own (the message a hidden part of it), so nothing is
/// typed into the pane and no wake is needed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_message_that_arrives_during_an_opencode_turn_is_handed_over_when_it_ends() {
    let Some(opencode) = opencode() else {
        return;
    };
    let Some(claude) = claude_or_skip() else {
        return;
    };
    let team = ClaudeTeam::start_with([Cli::Claude(claude), Cli::OpenCode(opencode)], None, true)
        .await
        .unwrap();
    // The mock holds its answer to this prompt for a few seconds.
    team.submit(&team.beta, "MOCK-SLOW think it over")
        .await
        .unwrap();
    team.until(Duration::from_secs(30), "beta working", |t| {
        turn_state(&t.beta.home, "beta") == "working"
    })
    .await
    .unwrap();
    let sent = team.alpha.home.ok(&[
        "peer",
        "notify",
        "beta",
        "HANDOVER-CHECK the build is green",
    ]);
    assert!(!sent.is_empty());
    team.until(
        Duration::from_secs(60),
        "the message in a prompt of the plugin's",
        |t| {
            user_texts(&t.model).iter().any(|m| {
                m.contains("HANDOVER-CHECK the build is green")
                    && m.contains("[repowire] messages arrived during your turn")
            })
        },
    )
    .await
    .unwrap();
    // It was not in the slow turn's own prompt: it came after.
    assert!(
        !user_texts(&team.model)
            .iter()
            .any(|m| m.contains("MOCK-SLOW") && m.contains("HANDOVER-CHECK")),
        "handed over with the slow prompt"
    );
    // OpenCode draws the prompt after it has sent it to the model: the screen lags a little.
    team.until(
        Duration::from_secs(30),
        "the plugin's prompt on the screen",
        |t| {
            t.tmux
                .capture(&t.beta.pane)
                .contains("[repowire] messages arrived during your turn")
        },
    )
    .await
    .unwrap();
    // Handed over by the plugin, not typed: beta's daemon never woke it.
    let status = team.beta.home.json(&["daemon", "status"]);
    assert!(
        status["wakes"].as_object().is_none_or(|w| w.is_empty()),
        "{status}"
    );
    team.until(Duration::from_secs(30), "beta idle again", |t| {
        turn_state(&t.beta.home, "beta") == "idle"
    })
    .await
    .unwrap();
}

/// `echo PROMPT | opencode run` with `env` (a machine's user) in `project`; its output.
async fn opencode_run(
    opencode: &Path,
    env: &[(&'static str, String)],
    project: &Path,
    prompt: &str,
) -> Output {
    let mut command = tokio::process::Command::new(opencode);
    command
        .args(["run", "--auto"])
        .current_dir(project)
        // OpenCode takes its directory from PWD, as a shell would have set it.
        .env("PWD", project)
        .envs(env.iter().map(|(k, v)| (*k, v.as_str())))
        .envs(OPENCODE_OFFLINE)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true);
    for var in [
        "XDG_CONFIG_HOME",
        "XDG_DATA_HOME",
        "XDG_STATE_HOME",
        "XDG_CACHE_HOME",
    ] {
        command.env_remove(var);
    }
    let mut child = command.spawn().expect("opencode runs");
    let mut stdin = child.stdin.take().expect("stdin");
    stdin
        .write_all(format!("{prompt}\n").as_bytes())
        .await
        .expect("the prompt");
    drop(stdin);
    tokio::time::timeout(Duration::from_secs(120), child.wait_with_output())
        .await
        .expect("opencode run finished within 120 s")
        .expect("opencode runs")
}

/// A real OpenCode on `laptop` (relay pod A) with approvals on: its plugin holds a bash call
/// for a person on `desk` (pod B); the call runs when they allow it, and not when they deny
/// it — and OpenCode tells its model who denied it and why.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_opencode_bash_call_is_approved_or_denied_by_a_person_on_another_machine() {
    let Some(opencode) = opencode() else {
        return;
    };
    let model = MockModel::start().await.expect("the mock model");
    let (pair, _) = GatedPair::start(
        "repowire_opencode_approvals",
        "opencode",
        &[],
        |laptop, _| prepare_opencode(laptop, &model.url).expect("OpenCode's config"),
    )
    .await;
    let out = pair
        .allow_then_deny("opencode", |prompt| {
            let (opencode, project) = (opencode.clone(), pair.project.clone());
            let env = pair.laptop.env();
            tokio::spawn(async move { opencode_run(&opencode, &env, &project, prompt).await })
        })
        .await;
    // OpenCode told its model why.
    let told = model
        .requests()
        .iter()
        .flat_map(|r| r["messages"].as_array().cloned().unwrap_or_default())
        .filter(|m| m["role"] == "tool")
        .map(|m| m["content"].to_string())
        .find(|c| c.contains("Repowire approvals"))
        .unwrap_or_default();
    assert!(told.contains("not today"), "{told}\n{out:?}");
}
