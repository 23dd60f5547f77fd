//! What docs/agents/codex.md says of the real Codex CLI, checked again on every run: installed
//! from npm by scripts/install-codex (cached; `REPOWIRE_CODEX_BIN`), run offline with
//! `codex exec` against a mock of the Responses API on 127.0.0.1 (`repowire_e2e::responses`),
//! with a command hook on each event that records its payload and answers as the file for
//! that event says. It shows what the integration relies on:
//!
//! - the events and their order, and each payload's fields (session id, transcript, cwd, the
//!   prompt, the tool call as `Bash` with its command and call id, `last_assistant_message`,
//!   a continued turn's second Stop with the continuation's own text);
//! - `additionalContext` from SessionStart and UserPromptSubmit reaches the model, as
//!   `developer` messages (the hand-over of queued messages);
//! - PreToolUse `permissionDecision: deny` stops the shell command, and the model is told why
//!   (approvals);
//! - Stop `decision: block` continues the turn with the reason as a user message, and the next
//!   Stop says `stop_hook_active` (reminders);
//! - `codex exec resume <id>` resumes the session (`source: resume`, the same id).
//!
//! Skipped with the reason printed when `REPOWIRE_CODEX_BIN` is unset and
//! `REPOWIRE_REQUIRE_CODEX` is not (scripts/test sets both unless npm cannot install it).

use std::path::{Path, PathBuf};

use repowire_e2e::hookrun::{HookRun, cli_from_env, events, same_session};
use repowire_e2e::offline::{codex_config, codex_patch_catalog};
use repowire_e2e::responses::{ResponsesMock, text_of};
use serde_json::Value;

const EVENTS: &[&str] = &[
    "SessionStart",
    "UserPromptSubmit",
    "PreToolUse",
    "PostToolUse",
    "Stop",
    "SessionEnd",
];

fn codex_bin() -> Option<PathBuf> {
    cli_from_env(
        "REPOWIRE_CODEX_BIN",
        "REPOWIRE_REQUIRE_CODEX",
        "scripts/install-codex",
    )
}

/// `$CODEX_HOME/config.toml`: offline against the mock, and the run's hook on every event.
fn config(base_url: &str, run: &HookRun) -> String {
    let mut toml = codex_config(base_url);
    for event in EVENTS {
        toml += &format!(
            "\n[[hooks.{event}]]\n[[hooks.{event}.hooks]]\ntype = \"command\"\ncommand = \"{}\"\ntimeout = 30\n",
            run.hook_command(event)
        );
    }
    toml
}

/// A run with `$CODEX_HOME` set up.
fn codex_run(base_url: &str) -> HookRun {
    let run = HookRun::new("Stop");
    let codex_home = run.path("home/.codex");
    std::fs::create_dir_all(&codex_home).expect("CODEX_HOME");
    std::fs::write(codex_home.join("config.toml"), config(base_url, &run)).expect("config");
    run
}

/// [`codex_run`] with the model catalogue that makes Codex offer `apply_patch`.
fn codex_run_with_patches(base_url: &str) -> HookRun {
    let run = codex_run(base_url);
    let codex_home = run.path("home/.codex");
    let catalog = codex_patch_catalog(&codex_home).expect("the catalogue");
    let rest = std::fs::read_to_string(codex_home.join("config.toml")).expect("config");
    std::fs::write(codex_home.join("config.toml"), format!("{catalog}\n{rest}")).expect("config");
    run
}

/// `codex exec ARGS` in the run's project, offline; its stdout.
async fn exec(run: &HookRun, codex: &Path, args: &[&str]) -> String {
    let mut all = vec!["exec"];
    all.extend_from_slice(args);
    let env = [
        ("HOME", run.path("home").display().to_string()),
        ("CODEX_HOME", run.path("home/.codex").display().to_string()),
        ("MOCK_API_KEY", "dummy".to_owned()),
    ];
    run.run(codex, &all, &env).await
}

fn of<'a>(hooks: &'a [Value], event: &str) -> Vec<&'a Value> {
    hooks
        .iter()
        .filter(|h| h["hook_event_name"] == event)
        .collect()
}

/// Every message item of every request, as (role or type, text).
fn items(requests: &[Value]) -> Vec<(String, String)> {
    requests
        .iter()
        .flat_map(|r| r["input"].as_array().cloned().unwrap_or_default())
        .map(|i| {
            let kind = i["role"]
                .as_str()
                .or(i["type"].as_str())
                .unwrap_or("?")
                .to_owned();
            let text = if i["type"] == "function_call_output" {
                i["output"].as_str().unwrap_or_default().to_owned()
            } else {
                text_of(&i)
            };
            (kind, text)
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn codex_fires_its_hooks_offline_and_takes_their_answers() {
    let Some(codex) = codex_bin() else { return };
    let mock = ResponsesMock::start().await.expect("the mock model");
    let run = codex_run(&mock.base_url);
    run.answer(
        "SessionStart",
        r#"{"hookSpecificOutput":{"hookEventName":"SessionStart","additionalContext":"RW-SESSION-CONTEXT"}}"#,
    );
    run.answer(
        "UserPromptSubmit",
        r#"{"hookSpecificOutput":{"hookEventName":"UserPromptSubmit","additionalContext":"RW-QUEUED-MESSAGE"}}"#,
    );
    run.answer(
        "PreToolUse",
        r#"{"hookSpecificOutput":{"hookEventName":"PreToolUse","permissionDecision":"deny","permissionDecisionReason":"RW-DENIED-BY-A-PERSON"}}"#,
    );
    run.answer("Stop", r#"{"decision":"block","reason":"RW-REMINDER"}"#);

    let prompt = "please RUN-SHELL echo ran > ran.txt";
    let out = exec(
        &run,
        &codex,
        &[
            "--skip-git-repo-check",
            "--dangerously-bypass-hook-trust",
            "-s",
            "workspace-write",
            prompt,
        ],
    )
    .await;
    let hooks = run.take_hooks();
    assert_eq!(
        events(&hooks),
        [
            "SessionStart",
            "UserPromptSubmit",
            "PreToolUse",
            "Stop",
            "Stop",
            "SessionEnd"
        ],
        "a denied call has no PostToolUse; a blocked Stop comes again: {hooks:#?}"
    );
    let (session, transcripts) = same_session(&run, &hooks);
    for transcript in &transcripts {
        assert!(transcript.contains(&session), "{transcript}");
        assert!(
            transcript.starts_with(run.path("home/.codex/sessions").to_str().expect("utf8")),
            "{transcript}"
        );
    }
    assert_eq!(hooks[0]["source"], "startup");
    assert_eq!(hooks[1]["prompt"], prompt);
    let pre = &hooks[2];
    assert_eq!(pre["tool_name"], "Bash");
    assert_eq!(pre["tool_input"]["command"], "echo ran > ran.txt");
    assert!(
        pre["tool_use_id"]
            .as_str()
            .is_some_and(|id| id.starts_with("call_")),
        "{pre}"
    );
    let stops = of(&hooks, "Stop");
    assert_eq!(stops[0]["stop_hook_active"], false);
    assert_eq!(stops[0]["last_assistant_message"], "MOCK-DONE");
    assert_eq!(stops[1]["stop_hook_active"], true);
    // The continued segment's own text, not the first answer again (direct conversations relay
    // it: docs/plans/conversations.md).
    assert!(
        stops[1]["last_assistant_message"]
            .as_str()
            .is_some_and(|m| m.starts_with("MOCK-REPLY") && m.contains("RW-REMINDER")),
        "{}",
        stops[1]
    );
    assert_eq!(hooks[5]["reason"], "other");

    // The answers took effect.
    assert!(
        !run.path("proj/ran.txt").exists(),
        "the denied command did not run"
    );
    let seen = items(&mock.requests());
    let has = |kind: &str, needle: &str| seen.iter().any(|(k, t)| k == kind && t.contains(needle));
    assert!(has("developer", "RW-SESSION-CONTEXT"), "{seen:#?}");
    assert!(has("developer", "RW-QUEUED-MESSAGE"), "{seen:#?}");
    assert!(
        has(
            "function_call_output",
            "blocked by PreToolUse hook: RW-DENIED-BY-A-PERSON"
        ),
        "{seen:#?}"
    );
    assert!(has("user", "<hook_prompt"), "{seen:#?}");
    assert!(has("user", "RW-REMINDER</hook_prompt>"), "{seen:#?}");
    assert!(out.contains("MOCK-REPLY"), "{out}");

    // Resumed, with the shell call allowed this time: it runs, PostToolUse reports it.
    run.answer("PreToolUse", "{}");
    run.answer("Stop", "{}");
    exec(
        &run,
        &codex,
        &[
            "resume",
            "--skip-git-repo-check",
            "--dangerously-bypass-hook-trust",
            // `exec resume` has no `-s`; the setting it stands for.
            "-c",
            "sandbox_mode=\"workspace-write\"",
            &session,
            "again RUN-SHELL echo ran > ran.txt",
        ],
    )
    .await;
    let hooks = run.take_hooks();
    assert_eq!(
        events(&hooks),
        [
            "SessionStart",
            "UserPromptSubmit",
            "PreToolUse",
            "PostToolUse",
            "Stop",
            "SessionEnd"
        ],
        "{hooks:#?}"
    );
    assert_eq!(hooks[0]["source"], "resume");
    assert_eq!(hooks[0]["session_id"], session.as_str(), "the same session");
    assert!(hooks[3]["tool_response"].is_string(), "{}", hooks[3]);
    assert!(run.path("proj/ran.txt").exists(), "the allowed command ran");
}

/// Codex's file edits are `apply_patch` calls, and its PreToolUse hook sees them (as
/// `apply_patch`, the patch in `tool_input.command`): a deny stops the patch and the model is
/// told why; an allowed one is applied. Repowire's approvals gate them as `Edit`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn codex_asks_its_pre_tool_use_hook_before_a_patch() {
    let Some(codex) = codex_bin() else { return };
    let mock = ResponsesMock::start().await.expect("the mock model");
    let run = codex_run_with_patches(&mock.base_url);
    run.answer(
        "PreToolUse",
        r#"{"hookSpecificOutput":{"hookEventName":"PreToolUse","permissionDecision":"deny","permissionDecisionReason":"RW-NO-PATCH"}}"#,
    );
    let args = [
        "--skip-git-repo-check",
        "--dangerously-bypass-hook-trust",
        "-s",
        "workspace-write",
        "RUN-PATCH patched.txt",
    ];
    exec(&run, &codex, &args).await;
    let hooks = run.take_hooks();
    let pre = of(&hooks, "PreToolUse");
    assert_eq!(pre.len(), 1, "{hooks:#?}");
    assert_eq!(pre[0]["tool_name"], "apply_patch");
    assert!(
        pre[0]["tool_input"]["command"]
            .as_str()
            .is_some_and(|p| p.starts_with("*** Begin Patch\n*** Add File: patched.txt")),
        "{}",
        pre[0]
    );
    assert!(
        !run.path("proj/patched.txt").exists(),
        "the denied patch ran"
    );
    let told = mock
        .requests()
        .iter()
        .flat_map(|r| r["input"].as_array().cloned().unwrap_or_default())
        .filter(|i| i["type"] == "custom_tool_call_output")
        .map(|i| i["output"].as_str().unwrap_or_default().to_owned())
        .collect::<Vec<_>>();
    assert!(
        told.iter()
            .any(|o| o.contains("blocked by PreToolUse hook: RW-NO-PATCH")),
        "{told:?}"
    );

    run.answer("PreToolUse", "{}");
    exec(&run, &codex, &args).await;
    let hooks = run.take_hooks();
    assert_eq!(of(&hooks, "PostToolUse").len(), 1, "{hooks:#?}");
    assert_eq!(
        std::fs::read_to_string(run.path("proj/patched.txt")).expect("the patch applied"),
        "patched\n"
    );
}
