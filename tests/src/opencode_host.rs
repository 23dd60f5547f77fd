//! The OpenCode plugin that `repowire setup` wrote, loaded by Node as OpenCode loads it, with a
//! stand-in for OpenCode's client (`opencode_host.mjs`): tests call its hooks one by one and
//! see what it did — the `repowire hook` commands it ran are real, against a real daemon.

use std::collections::HashMap;
use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use anyhow::Context;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, Lines};
use tokio::process::{Child, ChildStdin, ChildStdout, Command};

use crate::agents::Home;

const HOST: &str = include_str!("opencode_host.mjs");

/// How long one hook call may take (a gated call waits for a person).
const REPLY: Duration = Duration::from_secs(120);

/// A Node process holding the plugin of one machine (`Home`), for one project directory.
pub struct PluginHost {
    _child: Child,
    stdin: ChildStdin,
    lines: Lines<BufReader<ChildStdout>>,
    next: u64,
    early: HashMap<u64, Value>,
    _dir: tempfile::TempDir,
}

impl PluginHost {
    /// Loads `~/.config/opencode/plugins/repowire.js` of `home` with the project `project`,
    /// in `home`'s environment (so its hook commands reach `home`'s daemon).
    pub async fn start(home: &Home, project: &Path) -> anyhow::Result<Self> {
        Self::start_with(home, project, &[]).await
    }

    /// [`PluginHost::start`] with more environment (`TMUX`, `TMUX_PANE`: a pane the sessions
    /// then claim as theirs).
    pub async fn start_with(
        home: &Home,
        project: &Path,
        env: &[(&str, String)],
    ) -> anyhow::Result<Self> {
        let plugin = home.path().join(".config/opencode/plugins/repowire.js");
        anyhow::ensure!(plugin.exists(), "{} is missing", plugin.display());
        let dir = tempfile::tempdir()?;
        let host = dir.path().join("host.mjs");
        std::fs::write(&host, HOST)?;
        let mut child = Command::new("node")
            .arg(&host)
            .arg(&plugin)
            .arg(project)
            .current_dir(project)
            .env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .envs(home.env())
            .envs(env.iter().map(|(k, v)| (*k, v.as_str())))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .kill_on_drop(true)
            .spawn()
            .context("node runs (scripts/test installs it with the agent CLIs)")?;
        let stdin = child.stdin.take().context("stdin")?;
        let lines = BufReader::new(child.stdout.take().context("stdout")?).lines();
        Ok(PluginHost {
            _child: child,
            stdin,
            lines,
            next: 0,
            early: HashMap::new(),
            _dir: dir,
        })
    }

    /// Sends `request` (an object with `op`); its id, for [`PluginHost::reply`].
    pub async fn send(&mut self, mut request: Value) -> u64 {
        self.next += 1;
        request["id"] = json!(self.next);
        let line = format!("{request}\n");
        self.stdin
            .write_all(line.as_bytes())
            .await
            .expect("the host reads");
        self.next
    }

    /// The answer to request `id`; panics when the host failed it or took too long.
    pub async fn reply(&mut self, id: u64) -> Value {
        let answer = tokio::time::timeout(REPLY, async {
            loop {
                if let Some(answer) = self.early.remove(&id) {
                    return answer;
                }
                let line = self
                    .lines
                    .next_line()
                    .await
                    .expect("the host's output")
                    .expect("the host exited");
                let answer: Value = serde_json::from_str(&line).expect("a JSON line");
                let of = answer["id"].as_u64().expect("an id");
                self.early.insert(of, answer);
            }
        })
        .await
        .unwrap_or_else(|_| panic!("no answer to request {id} within {REPLY:?}"));
        assert!(answer.get("failed").is_none(), "{answer}");
        answer
    }

    /// Sends `request` and waits for its answer.
    pub async fn call(&mut self, request: Value) -> Value {
        let id = self.send(request).await;
        self.reply(id).await
    }

    /// A prompt typed into `session`: the texts the plugin added to it (hidden from the TUI).
    pub async fn message(&mut self, session: &str, prompt: &str) -> Vec<String> {
        let answer = self
            .call(
                json!({"op": "message", "session": session, "prompt": prompt,
                "agent": "build", "model": {"providerID": "mock", "modelID": "mock-model"}}),
            )
            .await;
        serde_json::from_value(answer["parts"].clone()).expect("texts")
    }

    /// OpenCode's event `event` (`{type, properties}`).
    pub async fn event(&mut self, event: Value) {
        self.call(json!({"op": "event", "event": event})).await;
    }

    /// Starts a `tool` call of `session` with `args`; [`PluginHost::reply`] says `ok` or `error`.
    pub async fn tool(&mut self, session: &str, tool: &str, args: Value) -> u64 {
        self.send(json!({"op": "tool", "session": session, "tool": tool, "args": args}))
            .await
    }

    /// What the stand-in client was asked: `get` (session ids) and `prompts`.
    pub async fn calls(&mut self) -> Value {
        self.call(json!({"op": "calls"})).await
    }
}
