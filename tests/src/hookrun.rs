//! A run of a real agent CLI for its facts tests (`codex_facts.rs`, `gemini_facts.rs`): a
//! temporary directory with a home, a project, and `hook.sh`, a command hook that appends its
//! stdin (the event's payload) to `hooks.jsonl`, copies the session transcript the payload names
//! (`transcript_path`) to `transcript-EVENT.jsonl` as it is then, and prints `answer-EVENT.json` — for the event
//! that continues a turn, only the first time, so a turn is continued once.

use std::path::PathBuf;

use serde_json::Value;

/// The hook script; `CONTINUE` is replaced by the event that continues a turn.
const HOOK: &str = r#"#!/bin/sh
dir=$(dirname "$0")
payload=$(cat)
printf '%s\n' "$payload" >> "$dir/hooks.jsonl"
t=$(printf '%s' "$payload" | sed -n 's/.*"transcript_path": *"\([^"]*\)".*/\1/p')
if [ -n "$t" ] && [ -f "$t" ]; then cp "$t" "$dir/transcript-$1.jsonl"; fi
if [ "$1" = CONTINUE ] && [ -e "$dir/continued" ]; then echo '{}'; exit 0; fi
[ "$1" = CONTINUE ] && : > "$dir/continued"
if [ -e "$dir/answer-$1.json" ]; then cat "$dir/answer-$1.json"; else echo '{}'; fi
"#;

/// The run's directory.
pub struct HookRun {
    dir: tempfile::TempDir,
}

impl HookRun {
    /// A new run whose hook continues a turn once from `continue_event` (`Stop`, `AfterAgent`).
    pub fn new(continue_event: &str) -> Self {
        let dir = tempfile::tempdir().expect("a run directory");
        std::fs::create_dir_all(dir.path().join("proj")).expect("the project");
        let hook = dir.path().join("hook.sh");
        std::fs::write(&hook, HOOK.replace("CONTINUE", continue_event)).expect("the hook");
        std::fs::set_permissions(&hook, std::os::unix::fs::PermissionsExt::from_mode(0o755))
            .expect("executable");
        Self { dir }
    }

    /// A path in the run.
    pub fn path(&self, rel: &str) -> PathBuf {
        self.dir.path().join(rel)
    }

    /// The hook command for `event`.
    pub fn hook_command(&self, event: &str) -> String {
        format!("{} {event}", self.path("hook.sh").display())
    }

    /// What the hook prints for `event` from now on.
    pub fn answer(&self, event: &str, json: &str) {
        std::fs::write(self.path(&format!("answer-{event}.json")), json).expect("an answer");
    }

    /// The hook payloads recorded so far; forgets them (and that a turn was continued).
    pub fn take_hooks(&self) -> Vec<Value> {
        let text = std::fs::read_to_string(self.path("hooks.jsonl")).unwrap_or_default();
        let _ = std::fs::remove_file(self.path("hooks.jsonl"));
        let _ = std::fs::remove_file(self.path("continued"));
        text.lines()
            .filter(|l| !l.trim().is_empty())
            .map(|l| serde_json::from_str(l).expect("a hook payload is JSON"))
            .collect()
    }

    /// Runs `program ARGS` in the project with only `env` (and `PATH`, `LANG`) in its
    /// environment and no stdin; its stdout. Panics, with its output, if it fails.
    pub async fn run(
        &self,
        program: &std::path::Path,
        args: &[&str],
        env: &[(&str, String)],
    ) -> String {
        let mut command = tokio::process::Command::new(program);
        command
            .args(args)
            .current_dir(self.path("proj"))
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("LANG", "C.UTF-8")
            .stdin(std::process::Stdio::null())
            .kill_on_drop(true);
        for (key, value) in env {
            command.env(key, value);
        }
        let out = tokio::time::timeout(std::time::Duration::from_secs(120), command.output())
            .await
            .expect("the CLI finished within 120 s")
            .expect("the CLI runs");
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        assert!(
            out.status.success(),
            "{} {args:?} failed:\n{stdout}\n{}",
            program.display(),
            String::from_utf8_lossy(&out.stderr)
        );
        stdout
    }
}

/// The events of `hooks`, in order.
pub fn events(hooks: &[Value]) -> Vec<&str> {
    hooks
        .iter()
        .map(|h| h["hook_event_name"].as_str().unwrap_or("?"))
        .collect()
}

/// The CLI's path from `var`, or `None` (the test says it is skipped) when it is unset and
/// `require` is not set; panics when it is required but missing.
pub fn cli_from_env(var: &str, require: &str, installer: &str) -> Option<PathBuf> {
    match std::env::var_os(var) {
        Some(bin) if !bin.is_empty() => Some(PathBuf::from(bin)),
        _ => {
            assert!(
                std::env::var_os(require).is_none(),
                "{require} is set but {var} is not"
            );
            eprintln!("skipped: {var} is not set ({installer} installs it)");
            None
        }
    }
}

/// Checks what every payload of one session carries — the same `session_id`, `cwd` the run's
/// project, a `transcript_path` — and returns the session id and the transcript paths.
pub fn same_session(run: &HookRun, hooks: &[Value]) -> (String, Vec<String>) {
    let session = hooks
        .first()
        .and_then(|h| h["session_id"].as_str())
        .expect("a session id")
        .to_owned();
    let proj = std::fs::canonicalize(run.path("proj")).expect("proj");
    let mut transcripts = Vec::new();
    for hook in hooks {
        assert_eq!(hook["session_id"], session.as_str(), "{hook}");
        assert_eq!(
            std::fs::canonicalize(hook["cwd"].as_str().expect("cwd")).expect("cwd exists"),
            proj
        );
        let transcript = hook["transcript_path"].as_str().expect("a transcript path");
        transcripts.push(transcript.to_owned());
    }
    (session, transcripts)
}
