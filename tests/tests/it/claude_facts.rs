//! What the Stop hook of the real Claude Code CLI says a turn's final text is
//! (`last_assistant_message`), checked on every run: `claude -p` offline against the scripted
//! model (`repowire_e2e::mockmodel`), with a command hook on each event that records its payload.
//! Direct conversations (docs/plans/conversations.md) relay exactly this text, so it must be the
//! text that ended *this* turn:
//!
//! - a turn that only answers: its text;
//! - a turn that ran a shell call first: the text after the call, not the call;
//! - a turn a Stop hook continued (`decision: block`): the second Stop carries the
//!   continuation's text, not the first answer again.
//!
//! Skipped with the reason printed when the Claude Code CLI is not available (scripts/test
//! installs it).

use std::path::Path;

use repowire_e2e::claude::claude_or_skip;
use repowire_e2e::hookrun::{HookRun, events, same_session};
use repowire_e2e::mockmodel::MockModel;
use serde_json::{Value, json};

const EVENTS: &[&str] = &[
    "SessionStart",
    "UserPromptSubmit",
    "PreToolUse",
    "PostToolUse",
    "Stop",
    "SessionEnd",
];

/// A run with `~/.claude` set up: onboarding done, the project trusted, the run's hook on
/// every event.
fn claude_run() -> HookRun {
    let run = HookRun::new("Stop");
    let claude = run.path("home/.claude");
    std::fs::create_dir_all(&claude).expect("~/.claude");
    let hooks: serde_json::Map<String, Value> = EVENTS
        .iter()
        .map(|event| {
            (
                (*event).to_owned(),
                json!([{"matcher": "", "hooks": [{"type": "command",
                    "command": run.hook_command(event), "timeout": 30}]}]),
            )
        })
        .collect();
    std::fs::write(
        claude.join("settings.json"),
        json!({ "hooks": hooks }).to_string(),
    )
    .expect("settings.json");
    let project = run.path("proj");
    let config = json!({
        "hasCompletedOnboarding": true,
        "theme": "dark",
        "projects": { project.to_string_lossy(): {
            "hasTrustDialogAccepted": true,
            "hasCompletedProjectOnboarding": true
        }}
    });
    std::fs::write(run.path("home/.claude.json"), config.to_string()).expect(".claude.json");
    run
}

/// `claude -p PROMPT` in the run's project, offline against `model` (tool calls are allowed by
/// the PreToolUse hook: root may not skip permissions).
async fn claude_p(run: &HookRun, claude: &Path, model: &MockModel, prompt: &str) -> String {
    let env = [
        ("HOME", run.path("home").display().to_string()),
        ("ANTHROPIC_BASE_URL", model.url.clone()),
        ("ANTHROPIC_AUTH_TOKEN", "offline-mock".to_owned()),
        ("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1".to_owned()),
        ("DISABLE_AUTOUPDATER", "1".to_owned()),
    ];
    run.run(claude, &["-p", prompt], &env).await
}

fn stops(hooks: &[Value]) -> Vec<&Value> {
    hooks
        .iter()
        .filter(|h| h["hook_event_name"] == "Stop")
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn claude_codes_stop_hook_carries_the_text_that_ended_this_turn() {
    let Some(claude) = claude_or_skip() else {
        return;
    };
    let model = MockModel::start().await.expect("the mock model");
    let run = claude_run();
    run.answer(
        "PreToolUse",
        r#"{"hookSpecificOutput":{"hookEventName":"PreToolUse","permissionDecision":"allow"}}"#,
    );

    // A turn that only answers.
    let out = claude_p(&run, &claude, &model, "MOCK-SAY first-answer").await;
    assert!(out.contains("first-answer"), "{out}");
    let hooks = run.take_hooks();
    same_session(&run, &hooks);
    let stop = stops(&hooks);
    assert_eq!(stop.len(), 1, "{hooks:#?}");
    assert_eq!(stop[0]["stop_hook_active"], false);
    assert_eq!(stop[0]["last_assistant_message"], "first-answer");

    // A shell call, then the text after it.
    claude_p(&run, &claude, &model, "RUN-SHELL echo ran > ran.txt").await;
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
    assert!(run.path("proj/ran.txt").exists(), "the shell call ran");
    assert_eq!(stops(&hooks)[0]["last_assistant_message"], "done");

    // Continued once by the Stop hook: each Stop has its own segment's text.
    run.answer(
        "Stop",
        r#"{"decision":"block","reason":"MOCK-SAY second-answer"}"#,
    );
    claude_p(&run, &claude, &model, "MOCK-SAY first-answer").await;
    let hooks = run.take_hooks();
    let stop = stops(&hooks);
    assert_eq!(stop.len(), 2, "{hooks:#?}");
    assert_eq!(stop[0]["stop_hook_active"], false);
    assert_eq!(stop[0]["last_assistant_message"], "first-answer");
    assert_eq!(stop[1]["stop_hook_active"], true);
    assert_eq!(
        stop[1]["last_assistant_message"], "second-answer",
        "the continuation's own text: {hooks:#?}"
    );
}
