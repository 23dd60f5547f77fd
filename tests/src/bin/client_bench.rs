//! `repowire-client-bench`: the client's speed and memory budgets (DESIGN.md §9, issue "The
//! repowire client"), measured on release binaries beside this one:
//! - daemon start: `repowire daemon run` spawned → its socket answers (embedded relay, fresh
//!   state each run);
//! - hook latency: `repowire hook prompt-submit` / `stop` process start → exit, against a
//!   running daemon with one registered session (what Claude Code pays on every turn);
//! - daemon idle RSS after start and one registered session;
//! - local notify: daemon API `send` → `accepted` (relay persisted it), and send → the
//!   recipient daemon's `delivered` receipt recorded, through the embedded relay;
//! - a direct conversation's relayed turn (issue 34): one session's Stop hook spawned (its
//!   `last_assistant_message` is the turn) → the other session's next hook has handed it over
//!   (its prompt-submit returned with `[alpha] (n):` and the text), through the embedded relay.
//!   No agent runs: what is timed is all Repowire's (two hook processes, the daemon, the relay).

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use clap::Parser;
use hdrhistogram::Histogram;
use repowire::api::{self, Outgoing, Request, SendKind};
use repowire_e2e::agents::bin;
use serde_json::{Value, json};

#[derive(Parser)]
struct Args {
    /// Daemon starts to time.
    #[arg(long, default_value_t = 10)]
    starts: usize,
    /// Hook invocations to time (per event).
    #[arg(long, default_value_t = 300)]
    hooks: usize,
    /// Notifications to time.
    #[arg(long, default_value_t = 300)]
    notifies: usize,
    /// MCP server starts to time.
    #[arg(long, default_value_t = 20)]
    mcp_starts: usize,
    /// Relayed conversation turns to time.
    #[arg(long, default_value_t = 300)]
    turns: usize,
}

/// `repowire mcp` spawned → `initialize` answered → `tools/list` answered.
fn mcp_ready(home: &Path) -> Duration {
    use std::io::{BufRead, BufReader};
    let started = Instant::now();
    let mut child = Command::new(bin("repowire"))
        .arg("mcp")
        .envs(env_for(home))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn repowire mcp");
    let mut stdin = child.stdin.take().expect("stdin");
    let mut stdout = BufReader::new(child.stdout.take().expect("stdout"));
    let mut line = String::new();
    writeln!(stdin, "{}", json!({"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"bench","version":"1"}}})).expect("write");
    stdout.read_line(&mut line).expect("initialize answer");
    writeln!(
        stdin,
        "{}",
        json!({"jsonrpc":"2.0","method":"notifications/initialized"})
    )
    .expect("write");
    writeln!(
        stdin,
        "{}",
        json!({"jsonrpc":"2.0","id":2,"method":"tools/list"})
    )
    .expect("write");
    line.clear();
    stdout.read_line(&mut line).expect("tools/list answer");
    let took = started.elapsed();
    assert!(
        line.contains("list_peers"),
        "unexpected tools/list answer: {line}"
    );
    drop(stdin);
    let _ = child.wait();
    took
}

fn us(h: &Histogram<u64>, q: f64) -> String {
    format!("{:.2} ms", h.value_at_quantile(q) as f64 / 1000.0)
}

fn report(name: &str, h: &Histogram<u64>) {
    println!(
        "{name:<34} n={:<5} p50 {}  p90 {}  p99 {}  max {}",
        h.len(),
        us(h, 0.5),
        us(h, 0.9),
        us(h, 0.99),
        us(h, 1.0)
    );
}

fn env_for(home: &Path) -> Vec<(&'static str, String)> {
    vec![
        ("HOME", home.to_string_lossy().into_owned()),
        (
            "REPOWIRE_HOME",
            home.join(".repowire").to_string_lossy().into_owned(),
        ),
        ("REPOWIRE_LOG", "warn".into()),
        // The conversation phase relays 320 turns in one conversation as fast as it can: the
        // embedded relay's turn rate (60 a minute by default) would measure the rate limit.
        ("REPOWIRE_CONVERSATION_TURNS_PER_MINUTE", "6000".into()),
    ]
}

struct Daemon {
    home: tempfile::TempDir,
    child: std::process::Child,
}

impl Daemon {
    fn socket(&self) -> PathBuf {
        self.home.path().join(".repowire/daemon.sock")
    }

    fn env(&self) -> Vec<(&'static str, String)> {
        env_for(self.home.path())
    }

    /// Spawns `repowire daemon run` and returns once the socket answers, with the time it took.
    fn start() -> (Self, Duration) {
        let home = tempfile::tempdir().expect("home");
        let started = Instant::now();
        let child = Command::new(bin("repowire"))
            .args(["daemon", "run"])
            .env_remove("REPOWIRE_RELAY_URL")
            .envs(env_for(home.path()))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn daemon");
        let d = Self { home, child };
        let deadline = started + Duration::from_secs(20);
        loop {
            if api::call(&d.socket(), &Request::Status, Duration::from_secs(1)).is_ok() {
                return (d, started.elapsed());
            }
            assert!(Instant::now() < deadline, "daemon did not answer");
            std::thread::sleep(Duration::from_micros(200));
        }
    }

    fn hook(&self, event: &str, payload: &Value) -> (Duration, String) {
        let started = Instant::now();
        let mut child = Command::new(bin("repowire"))
            .args(["hook", event])
            .envs(self.env())
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
        let out = child.wait_with_output().expect("hook");
        (
            started.elapsed(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
        )
    }

    fn call(&self, request: &Request) -> Value {
        api::call(&self.socket(), request, Duration::from_secs(10)).expect("daemon call")
    }

    /// Waits until the daemon's relay link is up (its embedded relay answers a few ms after
    /// the daemon does): sessions registered before would join the mesh only later.
    fn wait_linked(&self) {
        let deadline = Instant::now() + Duration::from_secs(10);
        while self.call(&Request::Status)["link"]["state"] != "connected" {
            assert!(
                Instant::now() < deadline,
                "the daemon's relay link did not come up"
            );
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    fn rss_kib(&self) -> u64 {
        let status =
            std::fs::read_to_string(format!("/proc/{}/status", self.child.id())).expect("status");
        status
            .lines()
            .find_map(|l| l.strip_prefix("VmRSS:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            .expect("VmRSS")
    }

    fn stop(mut self) {
        let _ = api::call(&self.socket(), &Request::Shutdown, Duration::from_secs(5));
        let _ = self.child.wait();
    }
}

fn session(d: &Daemon, id: &str, dir: &Path) -> Value {
    std::fs::create_dir_all(dir).expect("dir");
    let payload = json!({ "session_id": id, "hook_event_name": "SessionStart", "source": "startup", "cwd": dir });
    let (_, out) = d.hook("session-start", &payload);
    assert!(
        out.contains("You are @"),
        "session-start gave no identity: {out}"
    );
    payload
}

fn main() {
    let args = Args::parse();
    println!(
        "# repowire client benchmark (release binaries in {})",
        bin("repowire")
            .parent()
            .map(|p| p.display().to_string())
            .unwrap_or_default()
    );

    let mut starts = Histogram::<u64>::new(3).expect("hist");
    for _ in 0..args.starts {
        let (d, took) = Daemon::start();
        starts.record(took.as_micros() as u64).expect("record");
        d.stop();
    }
    report("daemon start (spawn → answering)", &starts);

    let mut mcp = Histogram::<u64>::new(3).expect("hist");
    let mcp_home = tempfile::tempdir().expect("home");
    for _ in 0..args.mcp_starts {
        mcp.record(mcp_ready(mcp_home.path()).as_micros() as u64)
            .expect("record");
    }
    report("mcp start → initialize + tools/list", &mcp);

    let (d, _) = Daemon::start();
    d.wait_linked();
    let a_dir = d.home.path().join("alpha");
    let b_dir = d.home.path().join("beta");
    let a = session(&d, "bench-alpha", &a_dir);
    let _b = session(&d, "bench-beta", &b_dir);
    std::thread::sleep(Duration::from_secs(2));
    println!("{:<34} {} KiB", "daemon idle RSS (2 sessions)", d.rss_kib());

    for (event, extra) in [
        (
            "prompt-submit",
            json!({ "hook_event_name": "UserPromptSubmit", "prompt": "work on it" }),
        ),
        (
            "stop",
            json!({ "hook_event_name": "Stop", "stop_hook_active": false, "last_assistant_message": "done" }),
        ),
    ] {
        let mut payload = a.clone();
        if let (Some(p), Some(e)) = (payload.as_object_mut(), extra.as_object()) {
            p.extend(e.clone());
        }
        let mut h = Histogram::<u64>::new(3).expect("hist");
        for i in 0..args.hooks + 20 {
            let (took, _) = d.hook(event, &payload);
            if i >= 20 {
                h.record(took.as_micros() as u64).expect("record");
            }
        }
        report(&format!("hook {event} (process start → exit)"), &h);
    }
    let mut quiet = Histogram::<u64>::new(3).expect("hist");
    let down = tempfile::tempdir().expect("tmp");
    for _ in 0..50 {
        let started = Instant::now();
        let mut child = Command::new(bin("repowire"))
            .args(["hook", "prompt-submit"])
            .env("REPOWIRE_HOME", down.path())
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .spawn()
            .expect("hook");
        let _ = child
            .stdin
            .take()
            .expect("stdin")
            .write_all(a.to_string().as_bytes());
        let _ = child.wait();
        quiet
            .record(started.elapsed().as_micros() as u64)
            .expect("record");
    }
    report("hook with no daemon (exits quietly)", &quiet);

    let mut accepted = Histogram::<u64>::new(3).expect("hist");
    let mut delivered = Histogram::<u64>::new(3).expect("hist");
    for i in 0..args.notifies + 20 {
        let started = Instant::now();
        let sent = d.call(&Request::Send(Outgoing {
            from: Some("alpha".into()),
            kind: SendKind::Notify,
            to: Some("beta".into()),
            circle: None,
            text: format!("benchmark notification {i}"),
            reply_to: None,
            question: None,
        }));
        let t_accepted = started.elapsed();
        assert_eq!(sent["state"], "accepted", "{sent}");
        let id = sent["message_id"].as_str().expect("id").to_owned();
        loop {
            let status = d.call(&Request::MessageStatus { id: id.clone() });
            if status["events"]
                .as_array()
                .is_some_and(|e| e.iter().any(|x| x["state"] == "delivered"))
            {
                break;
            }
            assert!(started.elapsed() < Duration::from_secs(10), "not delivered");
            std::thread::sleep(Duration::from_micros(100));
        }
        if i >= 20 {
            accepted
                .record(t_accepted.as_micros() as u64)
                .expect("record");
            delivered
                .record(started.elapsed().as_micros() as u64)
                .expect("record");
        }
    }
    report("local notify: send → accepted", &accepted);
    report("local notify: send → delivered", &delivered);
    report(
        "conversation: Stop → handed over",
        &conversation_turns(&d, &a, &_b, args.turns),
    );
    println!("{:<34} {} KiB", "daemon RSS after the run", d.rss_kib());
    d.stop();
}

/// `payload` with the fields of `extra` added.
fn with(payload: &Value, extra: Value) -> Value {
    let mut out = payload.clone();
    if let (Some(p), Some(e)) = (out.as_object_mut(), extra.as_object()) {
        p.extend(e.clone());
    }
    out
}

/// Waits until `peer`'s inbox holds an unread message containing `text` (long-polled).
fn wait_unread(d: &Daemon, peer: &str, text: &str) {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let listing = d.call(&Request::Inbox(api::InboxQuery {
            from: Some(peer.into()),
            read: false,
            after_seq: None,
            limit: 50,
            peek: true,
            wait_ms: 200,
        }));
        let here = listing["messages"].as_array().is_some_and(|m| {
            m.iter().any(|m| {
                m["unread"] == true && m["text"].as_str().is_some_and(|t| t.contains(text))
            })
        });
        if here {
            return;
        }
        assert!(Instant::now() < deadline, "{text} never reached {peer}");
    }
}

/// A conversation between alpha and beta (two sessions of one daemon, through its relay). Each
/// timed hop: the speaker's Stop hook is spawned with its turn's text; the turn is captured,
/// relayed and delivered to the listener's inbox; then the listener's prompt-submit hook (a
/// person's prompt, so no loop guard trips) hands it over: timed until that hook returned with
/// the turn in its context. The listener speaks next.
fn conversation_turns(d: &Daemon, alpha: &Value, beta: &Value, turns: usize) -> Histogram<u64> {
    let opened = d.call(&Request::StartConversation {
        from: Some("alpha".into()),
        peers: vec!["beta".into()],
        circle: None,
        text: "benchmark conversation".into(),
    });
    assert!(opened["conversation_id"].is_string(), "{opened}");
    wait_unread(d, "beta", "benchmark conversation");
    let prompt = |p: &Value| {
        with(
            p,
            json!({ "hook_event_name": "UserPromptSubmit", "prompt": "go on" }),
        )
    };
    // Both in a turn a person started: beta takes the opening, alpha starts its next turn.
    let (_, out) = d.hook("prompt-submit", &prompt(beta));
    assert!(out.contains("benchmark conversation"), "{out}");
    d.hook("prompt-submit", &prompt(alpha));
    let mut h = Histogram::<u64>::new(3).expect("hist");
    let sides = [("alpha", alpha), ("beta", beta)];
    for i in 0..turns + 20 {
        let (speaker, said) = sides[i % 2];
        let (listener, hears) = sides[(i + 1) % 2];
        let text = format!("{speaker} turn {i}");
        let stop = with(
            said,
            json!({ "hook_event_name": "Stop", "stop_hook_active": false, "last_assistant_message": text }),
        );
        let started = Instant::now();
        d.hook("stop", &stop);
        wait_unread(d, listener, &text);
        let (_, out) = d.hook("prompt-submit", &prompt(hears));
        let took = started.elapsed();
        assert!(
            out.contains(&format!("[{speaker}] (")) && out.contains(&text),
            "{listener} was not handed {text}: {out}"
        );
        if i >= 20 {
            h.record(took.as_micros() as u64).expect("record");
        }
    }
    h
}
