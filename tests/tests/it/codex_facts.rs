//! What docs/agents/codex.md says of the real Codex CLI, checked again on every run: installed
//! from npm by scripts/install-codex (cached; `REPOWIRE_CODEX_BIN`), run offline with
//! `codex exec` against a mock of the Responses API on 127.0.0.1 (`repowire_e2e::responses`),
//! with a command hook on each event that records its payload and answers as the file for
//! that event says. It shows what the integration relies on:
//!
//! - the events and their order, and each payload's fields (session id, transcript, cwd, the
//!   prompt, the tool call as `Bash` with its command and call id, `last_assistant_message`);
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
    match std::env::var_os("REPOWIRE_CODEX_BIN") {
        Some(bin) if !bin.is_empty() => Some(PathBuf::from(bin)),
        _ => {
            assert!(
                std::env::var_os("REPOWIRE_REQUIRE_CODEX").is_none(),
                "REPOWIRE_REQUIRE_CODEX is set but REPOWIRE_CODEX_BIN is not"
            );
            eprintln!("skipped: REPOWIRE_CODEX_BIN is not set (scripts/install-codex installs it)");
            None
        }
    }
}

/// `$CODEX_HOME/config.toml`: the mock as the model provider, nothing that reaches the
/// network, and `hook.sh EVENT` on every event.
fn config(base_url: &str, hook: &Path) -> String {
    let mut toml = format!(
        r#"model = "mock-model"
model_provider = "mock"
check_for_update_on_startup = false

[model_providers.mock]
name = "Mock"
base_url = "{base_url}"
env_key = "MOCK_API_KEY"
wire_api = "responses"

[features]
plugins = false
daemon_auto_start = false

[analytics]
enabled = false

[feedback]
enabled = false

[otel]
exporter = "none"
"#
    );
    for event in EVENTS {
        toml += &format!(
            "\n[[hooks.{event}]]\n[[hooks.{event}.hooks]]\ntype = \"command\"\ncommand = \"{} {event}\"\ntimeout = 30\n",
            hook.display()
        );
    }
    toml
}

/// The hook: appends its stdin to `hooks.jsonl`, then prints `answer-EVENT.json` (for Stop, only
/// the first time: a turn is continued once).
const HOOK: &str = r#"#!/bin/sh
dir=$(dirname "$0")
cat >> "$dir/hooks.jsonl"
echo >> "$dir/hooks.jsonl"
if [ "$1" = Stop ] && [ -e "$dir/stopped" ]; then echo '{}'; exit 0; fi
[ "$1" = Stop ] && : > "$dir/stopped"
if [ -e "$dir/answer-$1.json" ]; then cat "$dir/answer-$1.json"; else echo '{}'; fi
"#;

struct Run {
    dir: tempfile::TempDir,
}

impl Run {
    fn new(base_url: &str) -> Self {
        let dir = tempfile::tempdir().expect("a run directory");
        let codex_home = dir.path().join("home/.codex");
        std::fs::create_dir_all(&codex_home).expect("CODEX_HOME");
        std::fs::create_dir_all(dir.path().join("proj")).expect("the project");
        let hook = dir.path().join("hook.sh");
        std::fs::write(&hook, HOOK).expect("the hook");
        std::fs::set_permissions(&hook, std::os::unix::fs::PermissionsExt::from_mode(0o755))
            .expect("executable");
        std::fs::write(codex_home.join("config.toml"), config(base_url, &hook)).expect("config");
        Self { dir }
    }

    fn path(&self, rel: &str) -> PathBuf {
        self.dir.path().join(rel)
    }

    fn answer(&self, event: &str, json: &str) {
        std::fs::write(self.path(&format!("answer-{event}.json")), json).expect("an answer");
    }

    /// The hook payloads recorded so far, and forgets them.
    fn take_hooks(&self) -> Vec<Value> {
        let text = std::fs::read_to_string(self.path("hooks.jsonl")).unwrap_or_default();
        let _ = std::fs::remove_file(self.path("hooks.jsonl"));
        let _ = std::fs::remove_file(self.path("stopped"));
        text.lines()
            .filter(|l| !l.trim().is_empty())
            .map(|l| serde_json::from_str(l).expect("a hook payload is JSON"))
            .collect()
    }

    /// `codex exec ARGS` in the project, offline; its stdout.
    async fn exec(&self, codex: &Path, args: &[&str]) -> String {
        let out = tokio::time::timeout(
            std::time::Duration::from_secs(120),
            tokio::process::Command::new(codex)
                .arg("exec")
                .args(args)
                .current_dir(self.path("proj"))
                .env_clear()
                .env("HOME", self.path("home"))
                .env("CODEX_HOME", self.path("home/.codex"))
                .env("MOCK_API_KEY", "dummy")
                .env("PATH", std::env::var_os("PATH").unwrap_or_default())
                .env("LANG", "C.UTF-8")
                .stdin(std::process::Stdio::null())
                .kill_on_drop(true)
                .output(),
        )
        .await
        .expect("codex exec finished within 120 s")
        .expect("codex runs");
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        assert!(
            out.status.success(),
            "codex exec {args:?} failed:\n{stdout}\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        stdout
    }
}

fn events(hooks: &[Value]) -> Vec<&str> {
    hooks
        .iter()
        .map(|h| h["hook_event_name"].as_str().unwrap_or("?"))
        .collect()
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
    let run = Run::new(&mock.base_url);
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
    let out = run
        .exec(
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
    let session = hooks[0]["session_id"]
        .as_str()
        .expect("a session id")
        .to_owned();
    let proj = std::fs::canonicalize(run.path("proj")).expect("proj");
    for hook in &hooks {
        assert_eq!(hook["session_id"], session.as_str(), "{hook}");
        assert_eq!(
            std::fs::canonicalize(hook["cwd"].as_str().expect("cwd")).expect("cwd exists"),
            proj
        );
        let transcript = hook["transcript_path"].as_str().expect("a transcript path");
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
    run.exec(
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
