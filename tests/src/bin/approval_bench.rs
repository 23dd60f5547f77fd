//! `repowire-approval-bench`: what remote tool approval costs (issue 19), on release binaries
//! beside this one, two daemons on one real relay process (embedded SQLite):
//! - the PreToolUse hook when it does not gate (`repowire hook pre-tool-use`, process start →
//!   exit): approvals off, and approvals on for a tool that is not gated — what every tool call
//!   of an agent pays (DESIGN.md §9: < 5 ms p50);
//! - the approval round trip: the hook of a gated Bash call starts on the agent's machine → the
//!   question shows in the other daemon's `questions` → `repowire approvals allow ID` runs there
//!   (a real CLI process on a pseudo-terminal, as a person's) → the hook exits with `allow`. The
//!   human's part is left out: the allow starts as soon as the question shows (polled every
//!   0.2 ms). The total is reported, and its two legs.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use clap::Parser;
use hdrhistogram::Histogram;
use repowire::api::{self, Request};
use repowire_e2e::agents::bin;
use repowire_e2e::process::RelayProcess;
use serde_json::{Value, json};

#[derive(Parser)]
struct Args {
    /// Hook runs to time per non-gating case.
    #[arg(long, default_value_t = 300)]
    hooks: usize,
    /// Approval round trips to time.
    #[arg(long, default_value_t = 50)]
    approvals: usize,
}

fn report(name: &str, h: &Histogram<u64>) {
    let ms = |q: f64| format!("{:.2} ms", h.value_at_quantile(q) as f64 / 1000.0);
    println!(
        "{name:<52} n={:<4} p50 {}  p90 {}  p99 {}  max {}",
        h.len(),
        ms(0.5),
        ms(0.9),
        ms(0.99),
        ms(1.0)
    );
}

/// One machine: a HOME whose daemon uses the relay.
struct Machine {
    home: tempfile::TempDir,
    relay: (String, String),
    daemon: Option<std::process::Child>,
}

impl Machine {
    fn new(relay: (String, String)) -> Self {
        Self {
            home: tempfile::tempdir().expect("home"),
            relay,
            daemon: None,
        }
    }

    fn env(&self) -> Vec<(&'static str, String)> {
        let home = self.home.path();
        vec![
            ("HOME", home.to_string_lossy().into_owned()),
            (
                "REPOWIRE_HOME",
                home.join(".repowire").to_string_lossy().into_owned(),
            ),
            ("REPOWIRE_RELAY_URL", self.relay.0.clone()),
            ("REPOWIRE_API_KEY", self.relay.1.clone()),
            ("REPOWIRE_LOG", "warn".into()),
        ]
    }

    fn socket(&self) -> PathBuf {
        self.home.path().join(".repowire/daemon.sock")
    }

    fn config(&self, approvals: &str) {
        let dir = self.home.path().join(".repowire");
        std::fs::create_dir_all(&dir).expect("home");
        let text = format!(
            "[relay]\nurl = \"{}\"\napi_key = \"{}\"\n\n[approvals]\n{approvals}\n",
            self.relay.0, self.relay.1
        );
        std::fs::write(dir.join("config.toml"), text).expect("config");
    }

    fn start(&mut self) {
        let child = Command::new(bin("repowire"))
            .args(["daemon", "run"])
            .envs(self.env())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("daemon");
        self.daemon = Some(child);
        let deadline = Instant::now() + Duration::from_secs(20);
        while api::call(&self.socket(), &Request::Status, Duration::from_secs(1)).is_err() {
            assert!(Instant::now() < deadline, "daemon did not answer");
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    /// Runs `repowire hook EVENT` with `payload`; returns the time and what it printed.
    fn hook(&self, event: &str, payload: &Value) -> (Duration, String) {
        let started = Instant::now();
        let child = self.spawn_hook(event, payload);
        let out = child.wait_with_output().expect("hook");
        (
            started.elapsed(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
        )
    }

    fn spawn_hook(&self, event: &str, payload: &Value) -> std::process::Child {
        let mut child = Command::new(bin("repowire"))
            .args(["hook", event])
            .envs(self.env())
            // As Claude Code sets it for hook commands (the hook refuses a terminal without).
            .env("CLAUDE_PROJECT_DIR", self.home.path())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("hook");
        child
            .stdin
            .take()
            .expect("stdin")
            .write_all(payload.to_string().as_bytes())
            .expect("payload");
        child
    }

    /// `repowire approvals allow ID` on a pseudo-terminal of its own, as a person runs it.
    fn allow(&self, cid: &str) {
        let line = format!("'{}' approvals allow {cid}", bin("repowire").display());
        let out = Command::new("script")
            .args(["-q", "-e", "-c", &line, "/dev/null"])
            .envs(self.env())
            .stdin(Stdio::null())
            .output()
            .expect("script");
        assert!(
            out.status.success(),
            "approvals allow failed: {}",
            String::from_utf8_lossy(&out.stdout)
        );
    }

    fn open_questions(&self) -> Vec<Value> {
        let request = Request::Questions {
            from: None,
            closed: false,
            limit: None,
        };
        api::call(&self.socket(), &request, Duration::from_secs(5))
            .ok()
            .and_then(|v| v.as_array().cloned())
            .unwrap_or_default()
    }
}

impl Drop for Machine {
    fn drop(&mut self) {
        let _ = api::call(&self.socket(), &Request::Shutdown, Duration::from_secs(5));
        if let Some(mut d) = self.daemon.take() {
            let _ = d.wait();
        }
    }
}

fn session(m: &Machine, dir: &Path) -> Value {
    std::fs::create_dir_all(dir).expect("dir");
    let payload = json!({ "session_id": "bench-agent", "hook_event_name": "SessionStart", "source": "startup", "cwd": dir });
    let (_, out) = m.hook("session-start", &payload);
    assert!(out.contains("You are @"), "no identity: {out}");
    payload
}

fn tool_call(session: &Value, tool: &str, input: Value) -> Value {
    let mut p = session.clone();
    p["hook_event_name"] = json!("PreToolUse");
    p["tool_name"] = json!(tool);
    p["tool_input"] = input;
    p["tool_use_id"] = json!(format!("toolu_{}", uuid::Uuid::new_v4().simple()));
    p["permission_mode"] = json!("default");
    p
}

fn time_hooks(m: &Machine, payload: &Value, n: usize, expect_silent: bool) -> Histogram<u64> {
    let mut h = Histogram::<u64>::new(3).expect("hist");
    for i in 0..n + 20 {
        let (took, out) = m.hook("pre-tool-use", payload);
        assert_eq!(out.trim().is_empty(), expect_silent, "hook printed: {out}");
        if i >= 20 {
            h.record(took.as_micros() as u64).expect("record");
        }
    }
    h
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let args = Args::parse();
    let data = tempfile::tempdir().expect("data");
    let dir = data.path().to_string_lossy().into_owned();
    let relay = RelayProcess::start(&bin("repowire-relay"), &["--data-dir", &dir], &[]).await;
    let key = relay.first_key.clone().expect("key");
    println!(
        "# approvals benchmark (release binaries in {}), relay {}",
        bin("repowire")
            .parent()
            .map(|p| p.display().to_string())
            .unwrap_or_default(),
        relay.http
    );
    let mut laptop = Machine::new((relay.http.clone(), key.clone()));
    let mut desk = Machine::new((relay.http.clone(), key));
    laptop.config("enabled = false");
    desk.config("enabled = false");
    laptop.start();
    desk.start();
    let agent = session(&laptop, &laptop.home.path().join("app"));
    let bash = tool_call(&agent, "Bash", json!({ "command": "touch x" }));

    let off = time_hooks(&laptop, &bash, args.hooks, true);
    report("hook pre-tool-use, approvals off", &off);
    laptop.config("enabled = true\ntimeout_seconds = 60");
    let read = tool_call(&agent, "Read", json!({ "file_path": "/etc/hostname" }));
    let ungated = time_hooks(&laptop, &read, args.hooks, true);
    report("hook pre-tool-use, approvals on, tool not gated", &ungated);

    let (mut total, mut to_seen, mut allow_to_exit) = (
        Histogram::<u64>::new(3).expect("hist"),
        Histogram::<u64>::new(3).expect("hist"),
        Histogram::<u64>::new(3).expect("hist"),
    );
    for i in 0..args.approvals + 3 {
        let started = Instant::now();
        let hook = laptop.spawn_hook("pre-tool-use", &bash);
        let cid = loop {
            if let Some(q) = desk.open_questions().first() {
                break q["correlation_id"].as_str().expect("cid").to_owned();
            }
            assert!(started.elapsed() < Duration::from_secs(10), "no question");
            std::thread::sleep(Duration::from_micros(200));
        };
        let seen = started.elapsed();
        let allowing = Instant::now();
        desk.allow(&cid);
        let out = hook.wait_with_output().expect("hook");
        let exited = started.elapsed();
        let said = String::from_utf8_lossy(&out.stdout);
        assert!(said.contains("\"allow\""), "the hook did not allow: {said}");
        if i >= 3 {
            total.record(exited.as_micros() as u64).expect("record");
            to_seen.record(seen.as_micros() as u64).expect("record");
            allow_to_exit
                .record(allowing.elapsed().as_micros() as u64)
                .expect("record");
        }
    }
    report("approval: hook start → question seen on the desk", &to_seen);
    report(
        "approval: `approvals allow` start → hook exits",
        &allow_to_exit,
    );
    report("approval: hook start → exit (allow typed at once)", &total);
}
