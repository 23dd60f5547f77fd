//! `repowire-standin`: a stand-in for Claude Code in end-to-end tests. It behaves as
//! `../shared/agents/claude-code.md` records: runs in a tmux pane with a `❯` prompt line
//! between two rules, takes typed and bracketed-pasted input in raw mode, submits on Enter
//! (CR), calls the hook commands configured in `~/.claude/settings.json` (and the project's
//! `.claude/settings.json`) through `sh -c` with the documented JSON payloads, adds hook
//! context to its "model context", continues a turn on a Stop hook's `block` decision or its
//! `additionalContext` (with `stop_hook_active` on the next Stop), answers `--version` as
//! Claude Code 2.1.331 does (`REPOWIRE_STANDIN_VERSION` plays another), and writes every event
//! to a JSONL transcript.
//!
//! Its "model" is a script: a prompt `/run CMD` runs CMD through `sh -c` (like a Bash tool
//! call, with the output recorded), after the PreToolUse hooks whose matcher takes `Bash`: as
//! in Claude Code, a `permissionDecision` of `deny` stops the call (its reason is recorded and
//! shown), `allow` or no decision lets it run, and a hook killed by its timeout decides
//! nothing; `/busy` keeps the turn running until the file
//! `<transcript>.release` exists; `/clear` ends the session and starts a new one in the same
//! process (SessionEnd `clear`, SessionStart `clear`); `/exit` ends the session; anything
//! else gets the reply `ok`. Context handed over by hooks is recorded, never executed.
//!
//! `--resume ID` starts it as `claude --resume ID` does: with that session id (a new one with
//! `--fork-session`), and a SessionStart of source `resume`.
//!
//! Like Claude Code it is also an MCP client: `/mcp TOOL {json}` calls TOOL on the `repowire`
//! MCP server configured in `~/.claude.json` (started on first use as this process's child,
//! over stdio, with a real rmcp client) and records the result.
//!
//! `--runtime codex` plays the Codex CLI instead, as docs/agents/codex.md records: hooks and
//! the MCP server come from `$CODEX_HOME/config.toml` (default `~/.codex`); the composer is a
//! bold `›` line with a dim placeholder, a blank line and a `model · path` status line, and a
//! running turn shows `• Working (… esc to interrupt)` above it; SessionStart fires with the
//! first prompt, not at launch; there is no Notification event; a Stop `block` decision
//! continues the turn (Stop `additionalContext` does not); Enter while a turn runs steers it
//! (recorded as `steer`, no new prompt); `--version` says `codex-cli 0.171.0`; `resume ID`
//! resumes. `/dialog` plays an approval dialog that hides the composer until a key answers it.
//!
//! `--runtime gemini` plays Gemini CLI (docs/agents/gemini-cli.md): hooks and the MCP server
//! from `~/.gemini/settings.json` (`$GEMINI_CLI_HOME/.gemini`), events named `BeforeAgent`,
//! `AfterAgent` (with `prompt` and `prompt_response`) and `BeforeTool`; SessionStart at launch;
//! AfterAgent `deny` makes its reason the next prompt (BeforeAgent fires for it); SessionEnd
//! fires twice; an Enter less than
//! 100 ms after a paste is part of it (a newline, recorded as `enter_in_paste`); its box, its
//! working line and `/dialog` as Gemini draws them; `--version` says `0.61.0`.
//! `--paste-lag-ms N` plays a loaded machine: the end of a paste is read N ms late.
//! `--reply TEMPLATE` makes the model's plain replies (those that would be `ok`, continuations
//! too) the template with `{n}` replaced by how many such replies it gave, from 1: a
//! conversation partner whose every turn can be told apart; `{heard}` is replaced by the last
//! quoted line (`> …`) of the context it was handed last: an agent that echoes what it hears.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

mod keys;
mod mcp;
mod screen;

use keys::{Escape, classify_escape};
use mcp::Mcp;

#[derive(Clone, Copy, PartialEq, Eq)]
enum Runtime {
    Claude,
    Codex,
    Gemini,
}

struct Agent {
    runtime: Runtime,
    /// Codex: SessionStart has fired (it fires with the first prompt).
    started: bool,
    /// Codex: a dialog covers the composer.
    dialog: bool,
    transcript: PathBuf,
    session_id: String,
    cwd: String,
    hooks: Value,
    input: mpsc::Receiver<u8>,
    mcp: Option<Mcp>,
    /// SessionStart's `source`.
    source: &'static str,
    /// `--paste-lag-ms N`: a busy process, which reads the end of a paste N ms late (and so
    /// opens Gemini's paste window, and draws the paste, that much after it came).
    paste_lag: Duration,
    /// `--reply TEMPLATE`, and the replies given from it so far.
    reply: Option<(String, u64)>,
    /// The last quoted line (`> …`) of the context handed over most recently, without its
    /// `> `: what `{heard}` in `--reply` repeats.
    heard: std::sync::Mutex<String>,
}

fn main() {
    let mut args = std::env::args().skip(1);
    let mut transcript = None;
    // `--resume ID`, as `claude --resume ID`: the same session id, SessionStart `resume`.
    let mut resume = None;
    // `--fork-session`, as Claude Code's: the resumed session gets a new id.
    let mut fork = false;
    let mut runtime = Runtime::Claude;
    let mut paste_lag = Duration::ZERO;
    let mut reply = None;
    while let Some(a) = args.next() {
        if a == "--reply" {
            reply = Some((args.next().expect("--reply TEMPLATE"), 0));
        }
        if a == "--paste-lag-ms" {
            let ms = args
                .next()
                .and_then(|n| n.parse().ok())
                .expect("--paste-lag-ms N");
            paste_lag = Duration::from_millis(ms);
        }
        if a == "--runtime" {
            runtime = match args.next().as_deref() {
                Some("codex") => Runtime::Codex,
                Some("gemini") => Runtime::Gemini,
                _ => Runtime::Claude,
            };
        }
        if a == "--version" && runtime == Runtime::Codex {
            println!("codex-cli 0.171.0");
            return;
        }
        if a == "--version" && runtime == Runtime::Gemini {
            println!("0.61.0");
            return;
        }
        if a == "--version" {
            // As `claude --version` answers. Another version is played with
            // REPOWIRE_STANDIN_VERSION, or by a copy of this binary named `…-X.Y.Z`.
            let named = std::env::current_exe().ok().and_then(|p| {
                let name = p.file_name()?.to_str()?.to_owned();
                let (_, v) = name.rsplit_once('-')?;
                (v.split('.').count() == 3 && v.split('.').all(|n| n.parse::<u64>().is_ok()))
                    .then(|| v.to_owned())
            });
            let version = std::env::var("REPOWIRE_STANDIN_VERSION")
                .ok()
                .or(named)
                .unwrap_or_else(|| "2.1.331".into());
            println!("{version} (Claude Code)");
            return;
        }
        if a == "--transcript" {
            transcript = args.next().map(PathBuf::from);
        }
        if a == "--resume" || (a == "resume" && runtime == Runtime::Codex) {
            resume = args.next();
        }
        if a == "--fork-session" {
            fork = true;
        }
    }
    let transcript = transcript.expect("--transcript PATH is required");
    let cwd = std::env::current_dir()
        .expect("cwd")
        .to_string_lossy()
        .into_owned();
    let hooks = match runtime {
        Runtime::Claude => load_hooks(&cwd),
        Runtime::Codex => codex_config().get("hooks").cloned().unwrap_or(json!({})),
        Runtime::Gemini => gemini_settings().get("hooks").cloned().unwrap_or(json!({})),
    };
    let _ = Command::new("stty").args(["raw", "-echo"]).status();
    print!("\x1b[?2004h");
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let mut stdin = std::io::stdin().lock();
        let mut byte = [0u8; 1];
        while stdin.read(&mut byte).map(|n| n == 1).unwrap_or(false) {
            if tx.send(byte[0]).is_err() {
                break;
            }
        }
    });
    let mut agent = Agent {
        runtime,
        started: false,
        dialog: false,
        transcript,
        session_id: resume
            .clone()
            .filter(|_| !fork)
            .unwrap_or_else(|| uuid::Uuid::new_v4().to_string()),
        cwd,
        hooks,
        input: rx,
        mcp: None,
        source: "startup",
        paste_lag,
        reply,
        heard: std::sync::Mutex::new(String::new()),
    };
    agent.record(
        json!({ "event": "start", "pid": std::process::id(), "session_id": agent.session_id }),
    );
    let source = if resume.is_some() {
        "resume"
    } else {
        "startup"
    };
    if runtime != Runtime::Codex {
        agent.hook(
            "SessionStart",
            json!({ "source": source, "model": "standin" }),
        );
        agent.started = true;
    }
    agent.source = source;
    agent.run();
    let _ = Command::new("stty").arg("sane").status();
}

/// `$CODEX_HOME/config.toml` (default `~/.codex`) as JSON.
fn codex_config() -> Value {
    let home = std::env::var_os("CODEX_HOME")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(&std::env::var("HOME").unwrap_or_default()).join(".codex"));
    std::fs::read_to_string(home.join("config.toml"))
        .ok()
        .and_then(|t| toml::from_str::<Value>(&t).ok())
        .unwrap_or(json!({}))
}

/// `$GEMINI_CLI_HOME/.gemini/settings.json` (default `~/.gemini`).
fn gemini_settings() -> Value {
    let home = std::env::var_os("GEMINI_CLI_HOME")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(std::env::var("HOME").unwrap_or_default()));
    std::fs::read_to_string(home.join(".gemini/settings.json"))
        .ok()
        .and_then(|t| serde_json::from_str(&t).ok())
        .unwrap_or(json!({}))
}

fn load_hooks(cwd: &str) -> Value {
    let home = std::env::var("HOME").unwrap_or_default();
    let mut merged = serde_json::Map::new();
    for path in [
        Path::new(&home).join(".claude/settings.json"),
        Path::new(cwd).join(".claude/settings.json"),
    ] {
        let Ok(text) = std::fs::read_to_string(&path) else {
            continue;
        };
        let Ok(settings) = serde_json::from_str::<Value>(&text) else {
            continue;
        };
        if let Some(hooks) = settings.get("hooks").and_then(Value::as_object) {
            for (event, list) in hooks {
                let entry = merged
                    .entry(event.clone())
                    .or_insert_with(|| Value::Array(Vec::new()));
                if let (Some(all), Some(more)) = (entry.as_array_mut(), list.as_array()) {
                    all.extend(more.iter().cloned());
                }
            }
        }
    }
    Value::Object(merged)
}

impl Agent {
    fn record(&self, event: Value) {
        let mut f = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.transcript)
            .expect("transcript");
        let _ = writeln!(f, "{event}");
    }

    /// Runs every command configured for `event`; returns their parsed outputs.
    fn hook(&self, event: &str, specific: Value) -> Vec<Value> {
        // Gemini CLI's names for Claude Code's events.
        let event = match (self.runtime, event) {
            (Runtime::Gemini, "UserPromptSubmit") => "BeforeAgent",
            (Runtime::Gemini, "Stop") => "AfterAgent",
            (Runtime::Gemini, "PreToolUse") => "BeforeTool",
            _ => event,
        };
        let mut payload = json!({
            "session_id": self.session_id,
            "transcript_path": self.transcript.to_string_lossy(),
            "cwd": self.cwd,
            "hook_event_name": event,
        });
        if event != "SessionStart" {
            payload["prompt_id"] = json!(uuid::Uuid::new_v4().to_string());
        }
        if matches!(event, "UserPromptSubmit" | "Stop" | "PreToolUse") {
            payload["permission_mode"] = json!("default");
        }
        // Tool events run only the entries whose matcher takes the tool: `*`, empty, or an
        // alternation of exact names (`Edit|Write`), as Claude Code documents.
        let tool = specific
            .get("tool_name")
            .and_then(Value::as_str)
            .map(str::to_owned);
        let takes = |entry: &Value| match (&tool, entry.get("matcher").and_then(Value::as_str)) {
            (None, _) | (_, None) | (_, Some("*" | "")) => true,
            (Some(tool), Some(m)) => m
                .trim_start_matches('^')
                .trim_end_matches('$')
                .trim_start_matches('(')
                .trim_end_matches(')')
                .split('|')
                .any(|name| name == tool),
        };
        if let (Some(p), Some(s)) = (payload.as_object_mut(), specific.as_object()) {
            p.extend(s.clone());
        }
        let mut outputs = Vec::new();
        let commands: Vec<(String, u64)> = self
            .hooks
            .get(event)
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter(|entry| takes(entry))
            .flat_map(|m| {
                m.get("hooks")
                    .and_then(Value::as_array)
                    .cloned()
                    .unwrap_or_default()
            })
            .filter_map(|h| {
                Some((
                    h.get("command")?.as_str()?.to_owned(),
                    h.get("timeout").and_then(Value::as_u64).unwrap_or(60),
                ))
            })
            .collect();
        for (command, timeout) in commands {
            let started = Instant::now();
            let mut sh = Command::new("sh");
            sh.args(["-c", &command]);
            if self.runtime == Runtime::Claude {
                // As Claude Code documents for hook commands.
                sh.env("CLAUDE_PROJECT_DIR", &self.cwd);
            }
            let mut child = match sh
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
            {
                Ok(c) => c,
                Err(e) => {
                    self.record(
                        json!({ "event": "hook_error", "hook": event, "error": e.to_string() }),
                    );
                    continue;
                }
            };
            if let Some(mut stdin) = child.stdin.take() {
                let _ = stdin.write_all(payload.to_string().as_bytes());
            }
            let deadline = started + Duration::from_secs(timeout);
            let status = loop {
                if let Ok(Some(status)) = child.try_wait() {
                    break Some(status);
                }
                if Instant::now() > deadline {
                    let _ = child.kill();
                    break None;
                }
                std::thread::sleep(Duration::from_millis(2));
            };
            let mut stdout = String::new();
            if let Some(mut out) = child.stdout.take() {
                let _ = out.read_to_string(&mut stdout);
            }
            self.record(json!({
                "event": "hook",
                "hook": event,
                "exit": status.and_then(|s| s.code()),
                "ms": started.elapsed().as_millis() as u64,
            }));
            let trimmed = stdout.trim();
            if trimmed.is_empty() {
                continue;
            }
            let output = serde_json::from_str::<Value>(trimmed).unwrap_or(json!(trimmed));
            if let Some(ctx) = output
                .pointer("/hookSpecificOutput/additionalContext")
                .and_then(Value::as_str)
                .or(output.as_str())
            {
                if let Some(last) = ctx.lines().rev().find_map(|l| l.strip_prefix("> "))
                    && let Ok(mut heard) = self.heard.lock()
                {
                    *heard = last.to_owned();
                }
                self.record(json!({ "event": "context", "hook": event, "text": ctx }));
            }
            outputs.push(output);
        }
        self.record(json!({ "event": "hook_done", "hook": event }));
        outputs
    }

    fn run(&mut self) {
        self.draw_box(&[]);
        let mut line: Vec<u8> = Vec::new();
        let mut pasting = false;
        // Gemini CLI takes an Enter that comes within about 100 ms of a paste as part of it.
        let mut pasted_at: Option<Instant> = None;
        let mut escape: Vec<u8> = Vec::new();
        while let Ok(b) = self.input.recv() {
            if self.dialog {
                // Any key answers the dialog, pasted ones too; the composer comes back as it
                // was.
                self.record(json!({ "event": "dialog_key", "byte": b }));
                self.dialog = false;
                pasting = false;
                escape.clear();
                self.draw_box(&line);
                continue;
            }
            if !escape.is_empty() || b == 0x1b {
                escape.push(b);
                match classify_escape(&escape) {
                    Escape::Incomplete => continue,
                    Escape::PasteStart => pasting = true,
                    Escape::PasteEnd => {
                        std::thread::sleep(self.paste_lag);
                        pasting = false;
                        pasted_at = Some(Instant::now());
                        self.draw_box(&line);
                    }
                    Escape::Other => {}
                }
                escape.clear();
                continue;
            }
            if pasting {
                line.push(b);
                continue;
            }
            match b {
                b'\r'
                    if self.runtime == Runtime::Gemini
                        && pasted_at.is_some_and(|t| t.elapsed() < Duration::from_millis(100)) =>
                {
                    self.record(json!({ "event": "enter_in_paste" }));
                    line.push(b'\n');
                    self.draw_box(&line);
                }
                b'\r' => {
                    let text = String::from_utf8_lossy(&line).into_owned();
                    line.clear();
                    print!("\r\n");
                    if !text.trim().is_empty() {
                        // Codex empties its composer and shows the turn working.
                        self.draw_busy();
                    }
                    if !text.trim().is_empty() && !self.turn(text) {
                        return;
                    }
                    self.draw_box(&line);
                }
                0x03 => self.record(json!({ "event": "interrupt" })),
                0x7f | 0x08 => {
                    // One character back (UTF-8: its continuation bytes too).
                    while line.pop().is_some_and(|last| last & 0xc0 == 0x80) {}
                    self.draw_box(&line);
                }
                b => {
                    line.push(b);
                    self.draw_box(&line);
                }
            }
        }
    }

    /// One submitted prompt; false when the session ends.
    fn turn(&mut self, prompt: String) -> bool {
        self.record(json!({ "event": "prompt", "text": prompt }));
        if !self.started {
            // Codex: the session starts with its first prompt.
            self.hook(
                "SessionStart",
                json!({ "source": self.source, "model": "standin" }),
            );
            self.started = true;
        }
        if prompt.trim() == "/clear" {
            // As Claude Code does: the session ends and a new one (new id) starts in-process.
            self.hook("SessionEnd", json!({ "reason": "clear" }));
            self.session_id = uuid::Uuid::new_v4().to_string();
            self.record(json!({ "event": "cleared", "session_id": self.session_id }));
            self.hook(
                "SessionStart",
                json!({ "source": "clear", "model": "standin" }),
            );
            return true;
        }
        if prompt.trim() == "/exit" {
            self.hook("SessionEnd", json!({ "reason": "prompt_input_exit" }));
            if self.runtime == Runtime::Gemini {
                // Gemini CLI fires SessionEnd more than once.
                self.hook("SessionEnd", json!({ "reason": "exit" }));
            }
            self.record(json!({ "event": "exit" }));
            return false;
        }
        self.hook("UserPromptSubmit", json!({ "prompt": prompt }));
        let mut reply = self.respond(&prompt);
        let mut continuing = false;
        let mut asked = prompt.clone();
        for _ in 0..5 {
            // Gemini's AfterAgent names the turn's prompt and reply `prompt` and
            // `prompt_response`; Claude Code's and Codex's Stop, `last_assistant_message`.
            let stop = if self.runtime == Runtime::Gemini {
                json!({ "stop_hook_active": continuing, "prompt": asked, "prompt_response": reply })
            } else {
                json!({ "stop_hook_active": continuing, "last_assistant_message": reply })
            };
            let outputs = self.hook("Stop", stop);
            // Claude Code 2.1.331 continues the turn on either output: a `block` decision (its
            // reason reaches the model twice, once as an error) or Stop `additionalContext`.
            let codex = self.runtime == Runtime::Codex;
            let gemini = self.runtime == Runtime::Gemini;
            let Some((reason, form)) = outputs.iter().find_map(|o| {
                if gemini {
                    // Gemini: AfterAgent `deny` makes the reason the next prompt.
                    return (o.get("decision").and_then(Value::as_str) == Some("deny")).then(
                        || {
                            let reason = o.get("reason").and_then(Value::as_str).unwrap_or("");
                            (reason.to_owned(), "deny")
                        },
                    );
                }
                if o.get("decision").and_then(Value::as_str) == Some("block") {
                    return Some((
                        o.get("reason")
                            .and_then(Value::as_str)
                            .unwrap_or("")
                            .to_owned(),
                        "block",
                    ));
                }
                let specific = o.get("hookSpecificOutput").filter(|_| !codex)?;
                (specific.get("hookEventName").and_then(Value::as_str) == Some("Stop")).then(|| {
                    (
                        specific
                            .get("additionalContext")
                            .and_then(Value::as_str)
                            .unwrap_or("")
                            .to_owned(),
                        "context",
                    )
                })
            }) else {
                break;
            };
            self.record(json!({ "event": "continue", "reason": reason, "form": form }));
            if gemini {
                self.hook("UserPromptSubmit", json!({ "prompt": reason }));
                asked = reason;
            }
            continuing = true;
            reply = self.plain_reply();
            self.record(json!({ "event": "reply", "text": reply }));
        }
        true
    }

    /// A reply to anything that is not a command: `ok`, or the next of `--reply`.
    fn plain_reply(&mut self) -> String {
        match &mut self.reply {
            Some((template, n)) => {
                *n += 1;
                template.replace("{n}", &n.to_string()).replace(
                    "{heard}",
                    &self.heard.lock().map(|h| h.clone()).unwrap_or_default(),
                )
            }
            None => "ok".to_owned(),
        }
    }

    fn respond(&mut self, prompt: &str) -> String {
        let reply = if let Some(cmd) = prompt.strip_prefix("/run ") {
            let decisions = self.hook(
                "PreToolUse",
                json!({
                    "tool_name": "Bash",
                    "tool_input": { "command": cmd },
                    "tool_use_id": format!("toolu_{}", uuid::Uuid::new_v4().simple()),
                }),
            );
            let decision = decisions.iter().find_map(|o| {
                let d = o.get("hookSpecificOutput")?;
                Some((
                    d.get("permissionDecision")?.as_str()?.to_owned(),
                    d.get("permissionDecisionReason")
                        .and_then(Value::as_str)
                        .unwrap_or("")
                        .to_owned(),
                ))
            });
            if let Some((decision, reason)) = &decision {
                self.record(json!({ "event": "permission", "command": cmd, "decision": decision, "reason": reason }));
            }
            if let Some((_, reason)) = decision.filter(|(d, _)| d == "deny") {
                let reply = format!("denied: {reason}");
                print!("● {reply}\r\n");
                let _ = std::io::stdout().flush();
                self.record(json!({ "event": "reply", "text": reply }));
                return reply;
            }
            let out = Command::new("sh")
                .args(["-c", cmd])
                .stdin(Stdio::null())
                .output();
            let (code, stdout, stderr) = match out {
                Ok(o) => (
                    o.status.code(),
                    String::from_utf8_lossy(&o.stdout).into_owned(),
                    String::from_utf8_lossy(&o.stderr).into_owned(),
                ),
                Err(e) => (None, String::new(), e.to_string()),
            };
            self.record(json!({ "event": "tool", "command": cmd, "exit": code, "stdout": stdout, "stderr": stderr }));
            format!("ran `{cmd}`")
        } else if let Some(call) = prompt.strip_prefix("/mcp ") {
            self.mcp_call(call);
            "called".to_owned()
        } else if prompt.trim() == "/dialog" && self.runtime != Runtime::Claude {
            self.dialog = true;
            self.draw_box(&[]);
            "asking".to_owned()
        } else if prompt.trim() == "/busy" {
            let release = PathBuf::from(format!("{}.release", self.transcript.display()));
            self.record(json!({ "event": "busy" }));
            self.draw_busy();
            while !release.exists() {
                while let Ok(b) = self.input.try_recv() {
                    if b == b'\r' && self.runtime != Runtime::Claude {
                        // Codex: Enter while a turn runs steers that turn.
                        self.record(json!({ "event": "steer" }));
                    }
                    self.record(json!({ "event": "input_while_busy", "byte": b }));
                }
                std::thread::sleep(Duration::from_millis(10));
            }
            let _ = std::fs::remove_file(&release);
            "done".to_owned()
        } else {
            self.plain_reply()
        };
        if self.runtime == Runtime::Claude {
            print!("● {reply}\r\n");
            let _ = std::io::stdout().flush();
        }
        self.record(json!({ "event": "reply", "text": reply }));
        reply
    }
}
