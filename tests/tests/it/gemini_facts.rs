//! What docs/agents/gemini-cli.md says of the real Gemini CLI, checked again on every run:
//! installed from npm by scripts/install-gemini-cli (cached; `REPOWIRE_GEMINI_BIN`), run
//! offline with `gemini -p` against a mock of the Gemini API on 127.0.0.1
//! (`repowire_e2e::gemini_api`), with a command hook on each event that records its payload and
//! answers as the file for that event says. It shows what the integration relies on:
//!
//! - the events and their order, and the payload fields;
//! - `additionalContext` from SessionStart and BeforeAgent reaches the model as
//!   `<hook_context>…</hook_context>` text in the user's message (the hand-over);
//! - BeforeTool `decision: deny` stops the shell command, and the model is told why;
//! - AfterAgent `decision: deny` continues with the reason as a new prompt (BeforeAgent fires
//!   for it), and the next AfterAgent says `stop_hook_active` (reminders);
//! - `gemini --resume <id> -p …` resumes the session (`source: resume`, the same id);
//! - a reply streamed in two chunks is garbled in AfterAgent's `prompt_response` but whole in
//!   the transcript when AfterAgent fires (what a direct conversation relays).
//!
//! Skipped with the reason printed when `REPOWIRE_GEMINI_BIN` is unset and
//! `REPOWIRE_REQUIRE_GEMINI` is not (scripts/test sets the first unless npm cannot install it).

use std::path::{Path, PathBuf};

use repowire_e2e::gemini_api::{GeminiMock, texts};
use repowire_e2e::hookrun::{HookRun, cli_from_env, events, same_session};
use serde_json::{Value, json};

const EVENTS: &[&str] = &[
    "SessionStart",
    "BeforeAgent",
    "BeforeTool",
    "AfterTool",
    "AfterAgent",
    "SessionEnd",
];

fn gemini_bin() -> Option<PathBuf> {
    cli_from_env(
        "REPOWIRE_GEMINI_BIN",
        "REPOWIRE_REQUIRE_GEMINI",
        "scripts/install-gemini-cli",
    )
}

/// A run with `~/.gemini` set up: offline settings, the run's hook on every event, the project
/// trusted.
fn gemini_run() -> HookRun {
    let run = HookRun::new("AfterAgent");
    let gemini = run.path("home/.gemini");
    std::fs::create_dir_all(&gemini).expect("~/.gemini");
    // No `matcher` on these groups: with one (even ".*"), SessionStart and SessionEnd did not
    // fire.
    let hooks: serde_json::Map<String, Value> = EVENTS
        .iter()
        .map(|event| {
            (
                (*event).to_owned(),
                json!([{"hooks": [{"name": format!("rec-{event}"), "type": "command",
                                   "command": run.hook_command(event), "timeout": 30000}]}]),
            )
        })
        .collect();
    let settings = json!({
        "security": {"auth": {"selectedType": "gemini-api-key"}},
        "general": {"enableAutoUpdate": false, "enableAutoUpdateNotification": false},
        "privacy": {"usageStatisticsEnabled": false},
        "telemetry": {"enabled": false},
        "ide": {"enabled": false},
        "model": {"name": "gemini-2.5-flash"},
        "hooks": hooks,
    });
    std::fs::write(gemini.join("settings.json"), settings.to_string()).expect("settings");
    let trusted = json!({ run.path("proj").to_str().expect("utf8"): "TRUST_FOLDER" });
    std::fs::write(gemini.join("trustedFolders.json"), trusted.to_string()).expect("trust");
    run
}

/// `gemini ARGS` in the run's project, offline against `url`; its stdout.
async fn gemini(run: &HookRun, bin: &Path, url: &str, args: &[&str]) -> String {
    let env = [
        ("HOME", run.path("home").display().to_string()),
        ("GEMINI_CLI_HOME", run.path("home").display().to_string()),
        ("GOOGLE_GEMINI_BASE_URL", url.to_owned()),
        ("GEMINI_API_KEY", "dummy".to_owned()),
    ];
    run.run(bin, args, &env).await
}

/// Every part of every request's contents, as (role, text or tool result).
fn parts(requests: &[Value]) -> Vec<(String, String)> {
    let mut all = Vec::new();
    for request in requests {
        for content in request["contents"].as_array().cloned().unwrap_or_default() {
            let role = content["role"].as_str().unwrap_or("?").to_owned();
            for text in texts(&content) {
                all.push((role.clone(), text));
            }
            for part in content["parts"].as_array().cloned().unwrap_or_default() {
                if let Some(response) = part.get("functionResponse") {
                    all.push((role.clone(), response["response"].to_string()));
                }
            }
        }
    }
    all
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gemini_fires_its_hooks_offline_and_takes_their_answers() {
    let Some(bin) = gemini_bin() else { return };
    let mock = GeminiMock::start().await.expect("the mock model");
    let run = gemini_run();
    run.answer(
        "SessionStart",
        r#"{"hookSpecificOutput":{"hookEventName":"SessionStart","additionalContext":"RW-SESSION-CONTEXT"}}"#,
    );
    run.answer(
        "BeforeAgent",
        r#"{"hookSpecificOutput":{"hookEventName":"BeforeAgent","additionalContext":"RW-QUEUED-MESSAGE"}}"#,
    );
    run.answer(
        "BeforeTool",
        r#"{"decision":"deny","reason":"RW-DENIED-BY-A-PERSON"}"#,
    );
    run.answer(
        "AfterAgent",
        r#"{"decision":"deny","reason":"RW-REMINDER"}"#,
    );

    let prompt = "please RUN-SHELL echo ran > ran.txt";
    gemini(
        &run,
        &bin,
        &mock.url,
        &["--approval-mode", "yolo", "-p", prompt],
    )
    .await;
    let hooks = run.take_hooks();
    assert_eq!(
        events(&hooks),
        [
            "SessionStart",
            "BeforeAgent",
            "BeforeTool",
            "AfterAgent",
            "BeforeAgent",
            "AfterAgent",
            "SessionEnd"
        ],
        "a denied call has no AfterTool; a denied AfterAgent prompts again: {hooks:#?}"
    );
    let (session, transcripts) = same_session(&run, &hooks);
    for (hook, transcript) in hooks.iter().zip(&transcripts) {
        assert!(transcript.contains(&session[..8]), "{transcript}");
        assert!(hook["timestamp"].is_string(), "{hook}");
    }
    assert_eq!(hooks[0]["source"], "startup");
    // SessionStart's context is put before the first prompt, and BeforeAgent sees it there.
    assert_eq!(
        hooks[1]["prompt"],
        format!("<hook_context>RW-SESSION-CONTEXT</hook_context>\n\n{prompt}")
    );
    assert_eq!(hooks[2]["tool_name"], "run_shell_command");
    assert_eq!(hooks[2]["tool_input"]["command"], "echo ran > ran.txt");
    assert_eq!(hooks[3]["stop_hook_active"], false);
    assert_eq!(hooks[3]["prompt_response"], "MOCK-DONE");
    assert_eq!(
        hooks[4]["prompt"], "RW-REMINDER",
        "the reason is the next prompt"
    );
    assert_eq!(hooks[5]["stop_hook_active"], true);
    assert_eq!(hooks[6]["reason"], "exit");

    // The answers took effect.
    assert!(
        !run.path("proj/ran.txt").exists(),
        "the denied command did not run"
    );
    let seen = parts(&mock.requests());
    let has = |role: &str, needle: &str| seen.iter().any(|(r, t)| r == role && t.contains(needle));
    assert!(
        has("user", "<hook_context>RW-SESSION-CONTEXT</hook_context>"),
        "{seen:#?}"
    );
    assert!(
        has("user", "<hook_context>RW-QUEUED-MESSAGE</hook_context>"),
        "{seen:#?}"
    );
    assert!(
        has("user", "Tool execution blocked: RW-DENIED-BY-A-PERSON"),
        "{seen:#?}"
    );
    assert!(
        seen.iter().any(|(r, t)| r == "user" && t == "RW-REMINDER"),
        "{seen:#?}"
    );

    // Resumed, with the shell call allowed this time: it runs, AfterTool reports it.
    run.answer("BeforeTool", "{}");
    run.answer("AfterAgent", "{}");
    gemini(
        &run,
        &bin,
        &mock.url,
        &[
            "--resume",
            &session,
            "--approval-mode",
            "yolo",
            "-p",
            "again RUN-SHELL echo ran > ran.txt",
        ],
    )
    .await;
    let hooks = run.take_hooks();
    assert_eq!(
        events(&hooks),
        [
            "SessionStart",
            "BeforeAgent",
            "BeforeTool",
            "AfterTool",
            "AfterAgent",
            "SessionEnd"
        ],
        "{hooks:#?}"
    );
    assert_eq!(hooks[0]["source"], "resume");
    assert_eq!(hooks[0]["session_id"], session.as_str(), "the same session");
    assert!(hooks[3]["tool_response"].is_object(), "{}", hooks[3]);
    assert!(run.path("proj/ran.txt").exists(), "the allowed command ran");
}

/// A reply streamed in two chunks: AfterAgent's `prompt_response` is not it, but the session's
/// transcript (`transcript_path`) holds it whole when AfterAgent fires, as the last `gemini`
/// message after the prompt's `user` one: what the daemon relays of a Gemini turn
/// (`client/src/runtimes/gemini_transcript.rs`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_streamed_reply_is_whole_in_the_transcript_when_after_agent_fires() {
    let Some(bin) = gemini_bin() else { return };
    let mock = GeminiMock::start().await.expect("the mock model");
    let run = gemini_run();
    let prompt = "MOCK-CHUNKS say something long enough to split";
    gemini(&run, &bin, &mock.url, &["-p", prompt]).await;
    let reply = format!("MOCK-REPLY: {prompt}");
    let hooks = run.take_hooks();
    let after = hooks
        .iter()
        .find(|h| h["hook_event_name"] == "AfterAgent")
        .expect("AfterAgent fired");
    assert_ne!(
        after["prompt_response"],
        reply.as_str(),
        "AfterAgent's own text came whole: docs/agents/gemini-cli.md is out of date"
    );
    let transcript =
        std::fs::read_to_string(run.path("transcript-AfterAgent.jsonl")).expect("the transcript");
    let mut last = None;
    for line in transcript.lines() {
        let Ok(record) = serde_json::from_str::<Value>(line) else {
            continue;
        };
        match record["type"].as_str() {
            Some("user") => last = None,
            Some("gemini") => last = Some(record["content"].clone()),
            _ => {}
        }
    }
    assert_eq!(last, Some(Value::from(reply)), "{transcript}");
}
