//! The client on one machine: a real daemon with its embedded relay, real tmux, and stand-in
//! agents that call the hooks `repowire setup` installed, exactly as Claude Code would.

use repowire_e2e::agents::{Home, Tmux, bin, eventually};
use serde_json::Value;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_agents_ask_and_ack_with_honest_delivery_states() {
    let tmux = Tmux::start();
    let home = Home::new(None);
    home.install_and_start();
    let alpha = home.agent(&tmux, "alpha");
    let beta = home.agent(&tmux, "beta");
    alpha.hook_done("SessionStart", 1).await;
    beta.hook_done("SessionStart", 1).await;
    assert!(
        alpha.context().contains("You are @alpha"),
        "{}",
        alpha.context()
    );

    // Alpha's agent runs the CLI (a tool call): the daemon knows it is alpha from the process
    // tree, not from anything the command says.
    let repowire = bin("repowire").to_string_lossy().into_owned();
    alpha.submit(
        &tmux,
        &format!("/run {repowire} peer ask beta 'which port does the API use?' --json"),
    );
    let tool = alpha
        .wait("the ask tool call", |e| e["event"] == "tool")
        .await;
    assert_eq!(tool["exit"], 0, "{tool}");
    let sent: Value = serde_json::from_str(tool["stdout"].as_str().unwrap_or("")).expect("json");
    assert_eq!(sent["state"], "accepted", "{sent}");
    let cid = sent["correlation_id"].as_str().expect("cid").to_owned();

    // Beta is idle: it is woken through tmux and gets the ask as hook context.
    let ctx = beta
        .wait("the ask in beta's context", |e| {
            e["event"] == "context" && e["text"].as_str().is_some_and(|t| t.contains(&cid))
        })
        .await;
    let text = ctx["text"].as_str().unwrap_or("");
    assert!(text.contains("which port does the API use?"), "{text}");
    assert!(
        text.contains(&format!("@alpha → @beta [ask #{cid}]")),
        "{text}\n--- daemon log ---\n{}",
        home.log()
    );
    // Our MCP server is registered: the agent is told to close the ask with the MCP tool
    // (no permission prompt), with the exact arguments, and not to run the CLI.
    assert!(
        text.contains(&format!(
            "MCP tool `ack`: correlation_id \"{cid}\", message \"your reply\""
        )),
        "{text}"
    );
    assert!(!text.contains("repowire peer ack"), "{text}");
    assert!(
        alpha.context().contains("repowire MCP tools"),
        "{}",
        alpha.context()
    );
    // What was typed into beta's pane is only the short wake-up prompt.
    let typed: Vec<String> = beta
        .events()
        .iter()
        .filter(|e| e["event"] == "prompt")
        .map(|e| e["text"].as_str().unwrap_or("").to_owned())
        .collect();
    assert_eq!(typed.len(), 1, "{typed:?}");
    assert!(
        typed[0].starts_with("[repowire] 1 new message from @alpha"),
        "{typed:?}"
    );

    home.reaches_state(&cid, "injected").await;
    assert_eq!(
        home.json(&["peer", "status", &cid])["message"]["kind"],
        "ask"
    );

    // Beta acks with a reply through its own tool call.
    beta.submit(
        &tmux,
        &format!("/run {repowire} peer ack {cid} -m 'port 8080'"),
    );
    let tool = beta
        .wait("the ack tool call", |e| e["event"] == "tool")
        .await;
    assert_eq!(tool["exit"], 0, "{tool}");

    // Alpha gets the reply (woken, through context) and the ask's history is complete.
    alpha
        .wait("the reply in alpha's context", |e| {
            e["event"] == "context"
                && e["text"].as_str().is_some_and(|t| {
                    t.contains("port 8080") && t.contains(&format!("[reply to #{cid}]"))
                })
        })
        .await;
    let done = eventually("ask acked", || {
        let s = home.json(&["peer", "status", &cid]);
        (s["message"]["state"] == "acked").then_some(s)
    })
    .await;
    let seen = home.states(&cid);
    let order = ["queued", "accepted", "delivered", "injected", "acked"];
    let positions: Vec<usize> = order
        .iter()
        .map(|s| {
            seen.iter()
                .position(|x| x == s)
                .unwrap_or_else(|| panic!("{s} missing in {seen:?}"))
        })
        .collect();
    assert!(positions.windows(2).all(|w| w[0] < w[1]), "{seen:?}");
    assert_eq!(done["message"]["reply"], "port 8080");
    if std::env::var_os("E2E_DUMP").is_some() {
        for e in alpha.events().iter().chain(beta.events().iter()) {
            eprintln!("{e}");
        }
        eprintln!("{}", home.log());
    }
    drop(tmux);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_busy_agent_is_not_typed_over_and_gets_the_ask_at_its_turn_boundary_with_reminders() {
    let tmux = Tmux::start();
    let home = Home::new(None);
    home.install_and_start();
    let alpha = home.agent(&tmux, "alpha");
    let beta = home.agent(&tmux, "beta");
    alpha.hook_done("SessionStart", 1).await;
    beta.hook_done("SessionStart", 1).await;

    // Beta starts a long turn; its UserPromptSubmit hook has marked it busy.
    beta.submit(&tmux, "/busy");
    beta.wait("beta busy", |e| e["event"] == "busy").await;

    // Sent through the daemon API, as alpha.
    let sent = repowire::api::call(
        &home.repowire_home().join("daemon.sock"),
        &repowire::api::Request::Send(repowire::api::Outgoing {
            from: Some("alpha".into()),
            kind: repowire::api::SendKind::Ask,
            to: Some("beta".into()),
            circle: None,
            text: "can you review PR 12?".into(),
            reply_to: None,
            question: None,
        }),
        std::time::Duration::from_secs(10),
    )
    .expect("send through the daemon API");
    assert_eq!(sent["state"], "accepted", "{sent}");
    let cid = sent["correlation_id"].as_str().expect("cid").to_owned();
    eventually("ask delivered to beta's daemon", || {
        home.states(&cid)
            .contains(&"delivered".to_owned())
            .then_some(())
    })
    .await;
    // The daemon decided not to wake a busy agent when the message arrived (the decision is
    // made on arrival, so the state above is enough to know it was made).
    assert!(
        !home.json(&["daemon", "status"])["wakes"]
            .as_object()
            .is_some_and(|w| w.values().any(|o| o["outcome"] == "woken"))
    );

    // The turn ends: the Stop hook continues the agent with the ask (no keystrokes).
    beta.release();
    let cont = beta
        .wait("the ask via the Stop hook", |e| e["event"] == "continue")
        .await;
    let reason = cont["reason"].as_str().unwrap_or("");
    assert!(
        reason.contains("can you review PR 12?") && reason.contains(&cid),
        "{reason}"
    );
    // Handed over as context the model reads once, not as a blocking error (issue 35.16):
    // the agent says it is a Claude Code that honours it.
    assert_eq!(cont["form"], "context", "{cont}");
    beta.hook_done("Stop", 2).await; // the second Stop (stop_hook_active) does not block again
    assert_eq!(
        beta.events()
            .iter()
            .filter(|e| e["event"] == "continue")
            .count(),
        1
    );
    assert!(
        !beta
            .events()
            .iter()
            .any(|e| e["event"] == "input_while_busy"),
        "something was typed into the busy agent: {:?}",
        beta.events()
    );
    home.reaches_state(&cid, "injected").await;

    // Until acked, every new turn carries a reminder.
    for (n, prompt) in [(2, "next task"), (3, "another task")] {
        beta.submit(&tmux, prompt);
        beta.hook_done("UserPromptSubmit", n).await;
        let reminder = beta
            .events()
            .iter()
            .rev()
            .find(|e| e["event"] == "context")
            .cloned();
        let text = reminder
            .as_ref()
            .and_then(|r| r["text"].as_str())
            .unwrap_or("");
        assert!(
            text.contains("Reminder") && text.contains(&cid),
            "turn {n}: {text}"
        );
    }
    home.ok(&["peer", "ack", &cid, "--from", "beta", "-m", "looks good"]);
    eventually("ask acked", || {
        (home.json(&["peer", "status", &cid])["message"]["state"] == "acked").then_some(())
    })
    .await;
    beta.submit(&tmux, "after the ack");
    beta.hook_done("UserPromptSubmit", 4).await;
    let events = beta.events();
    let last_prompt = events
        .iter()
        .rposition(|e| e["event"] == "prompt")
        .expect("prompt");
    assert!(
        !events[last_prompt..]
            .iter()
            .any(|e| e["event"] == "context"),
        "a reminder after the ack: {:?}",
        &events[last_prompt..]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hooks_exit_quietly_when_the_daemon_is_down() {
    let home = Home::new(None);
    let mut child = std::process::Command::new(bin("repowire"))
        .args(["hook", "prompt-submit"])
        .envs(home.env())
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("hook");
    use std::io::Write;
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(br#"{"session_id":"s1","hook_event_name":"UserPromptSubmit","prompt":"hi","cwd":"/tmp"}"#)
        .expect("write");
    let out = child.wait_with_output().expect("wait");
    assert!(out.status.success());
    assert!(
        out.stdout.is_empty(),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    assert!(
        out.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agent_started_before_the_daemon_is_linked_fail_closed_and_then_reached() {
    let tmux = Tmux::start();
    let home = Home::new(None);
    home.ok(&["setup", "--non-interactive"]);
    // The agent starts while no daemon runs: its SessionStart hook finds nobody.
    let late = home.agent(&tmux, "late");
    late.hook_done("SessionStart", 1).await;
    assert!(late.context().is_empty());
    let shell = tmux.spawn(home.path(), &home.env(), &["sh".into()]);
    // `daemon start` returns with the relay link up: `link` below can register at once.
    let started = home.ok(&["daemon", "start"]);
    assert!(started.contains("relay link connected"), "{started}");

    let json = |args: &[&str]| -> Value {
        let out = home.repowire_in(Some(&tmux), args);
        assert!(
            out.status.success(),
            "{args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::from_slice(&out.stdout).expect("json")
    };
    let panes = json(&["session", "panes", "--all", "--json"]);
    let entry = |panes: &Value, pane: &str| {
        panes
            .as_array()
            .and_then(|a| a.iter().find(|p| p["pane"] == pane).cloned())
            .expect("pane listed")
    };
    assert_eq!(entry(&panes, &late.pane)["state"], "other");
    assert_eq!(entry(&panes, &late.pane)["program"], "repowire-standi");

    // A pane that only runs a shell is refused, and nothing is kept.
    let refused = home.repowire_in(Some(&tmux), &["link", "--pane", &shell]);
    assert!(!refused.status.success());
    assert!(String::from_utf8_lossy(&refused.stderr).contains("runs only a shell"));

    let linked = json(&["link", "--pane", &late.pane, "--json"]);
    let peer = linked["peer_id"].as_str().expect("peer id").to_owned();
    assert_eq!(linked["name"], "late");
    let again = home.repowire_in(Some(&tmux), &["link", "--pane", &late.pane]);
    assert!(!again.status.success(), "linking twice must be refused");
    assert_eq!(
        entry(&json(&["session", "panes", "--json"]), &late.pane)["state"],
        "registered"
    );

    // Reached like any agent: woken, and its hooks now carry the same peer.
    home.ok(&["peer", "notify", "late", "welcome aboard"]);
    late.wait("the notification", |e| {
        e["event"] == "context"
            && e["text"]
                .as_str()
                .is_some_and(|t| t.contains("welcome aboard"))
    })
    .await;
    let sessions = home.json(&["daemon", "status"])["sessions"].clone();
    let mine: Vec<&Value> = sessions
        .as_array()
        .expect("sessions")
        .iter()
        .filter(|s| s["pane"] == late.pane.as_str())
        .collect();
    assert_eq!(mine.len(), 1, "{sessions}");
    assert_eq!(mine[0]["peer_id"], peer.as_str());
    assert_ne!(
        mine[0]["session_id"].as_str().unwrap_or(""),
        linked["session_id"].as_str().unwrap_or("")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_broadcast_reaches_every_local_session_and_clear_keeps_the_peer() {
    let tmux = Tmux::start();
    let home = Home::new(None);
    home.install_and_start();
    let alpha = home.agent(&tmux, "alpha");
    let beta = home.agent(&tmux, "beta");
    let gamma = home.agent(&tmux, "gamma");
    for a in [&alpha, &beta, &gamma] {
        a.hook_done("SessionStart", 1).await;
    }
    // One message id, two local recipients on the same daemon: both get it.
    let sent = home.json(&["peer", "broadcast", "standup in 5", "--from", "alpha"]);
    assert_eq!(sent["state"], "accepted", "{sent}");
    for a in [&beta, &gamma] {
        a.wait("the broadcast", |e| {
            e["event"] == "context"
                && e["text"]
                    .as_str()
                    .is_some_and(|t| t.contains("standup in 5") && t.contains("[broadcast]"))
        })
        .await;
    }
    assert!(!alpha.context().contains("standup in 5"));

    // `/clear` gives the runtime session a new id; the peer (id, inbox, open asks) stays.
    let peer_of = |pane: &str| -> String {
        let status = home.json(&["daemon", "status"]);
        let mine: Vec<String> = status["sessions"]
            .as_array()
            .expect("sessions")
            .iter()
            .filter(|s| s["pane"] == pane)
            .map(|s| s["peer_id"].as_str().unwrap_or("").to_owned())
            .collect();
        assert_eq!(mine.len(), 1, "{status}");
        mine[0].clone()
    };
    let before = peer_of(&beta.pane);
    let ask = home.json(&[
        "peer",
        "ask",
        "beta",
        "still there after a clear?",
        "--from",
        "alpha",
    ]);
    let cid = ask["correlation_id"].as_str().expect("cid").to_owned();
    beta.wait("the ask", |e| {
        e["event"] == "context" && e["text"].as_str().is_some_and(|t| t.contains(&cid))
    })
    .await;
    beta.submit(&tmux, "/clear");
    beta.hook_done("SessionStart", 2).await;
    assert_eq!(peer_of(&beta.pane), before);
    beta.submit(&tmux, "next");
    let reminder = beta
        .wait("a reminder after /clear", |e| {
            e["event"] == "context"
                && e["text"]
                    .as_str()
                    .is_some_and(|t| t.contains("Reminder") && t.contains(&cid))
        })
        .await;
    assert!(
        reminder["text"]
            .as_str()
            .unwrap_or("")
            .contains("still there after a clear?")
    );
    home.ok(&["peer", "ack", &cid, "--from", "beta", "-m", "yes"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_suspended_agent_is_not_typed_into_even_though_its_shell_is_in_front() {
    let tmux = Tmux::start();
    let home = Home::new(None);
    home.install_and_start();
    let dir = home.path().join("suspended");
    std::fs::create_dir_all(&dir).expect("dir");
    let transcript = home.path().join("suspended.jsonl");
    // An interactive shell with job control, which starts the agent as a foreground job.
    let pane = tmux.spawn(
        &dir,
        &home.env(),
        &[
            "bash".into(),
            "--norc".into(),
            "--noprofile".into(),
            "-i".into(),
        ],
    );
    tmux.type_text(
        &pane,
        &format!(
            "{} --transcript {}",
            bin("repowire-standin").display(),
            transcript.display()
        ),
    );
    tmux.enter(&pane);
    let agent = repowire_e2e::agents::Agent {
        pane: pane.clone(),
        transcript,
    };
    agent.hook_done("SessionStart", 1).await;
    let pid = agent.events()[0]["pid"].as_u64().expect("pid");

    // Suspended (as Ctrl-Z does): bash takes the terminal back.
    let stopped = std::process::Command::new("kill")
        .args(["-TSTP", &pid.to_string()])
        .status()
        .expect("kill");
    assert!(stopped.success());
    eventually("bash in the foreground", || {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
        let fields: Vec<&str> = stat[stat.rfind(')')? + 2..].split(' ').collect();
        (fields[0] == "T" && fields[2] != fields[5]).then_some(())
    })
    .await;

    home.ok(&["peer", "notify", "suspended", "are you there?"]);
    let wake = eventually("the wake attempt", || {
        let w = home.json(&["daemon", "status"])["wakes"]
            .as_object()?
            .values()
            .next()?
            .clone();
        Some(w)
    })
    .await;
    assert_eq!(wake["outcome"], "refused", "{wake}");
    assert!(
        wake["reason"]
            .as_str()
            .unwrap_or("")
            .contains("not in the foreground"),
        "{wake}"
    );
    assert!(
        !tmux.capture(&pane).contains("[repowire]"),
        "{}",
        tmux.capture(&pane)
    );
    let _ = std::process::Command::new("kill")
        .args(["-KILL", &pid.to_string()])
        .status();
}

/// Where our MCP server is not registered for Claude Code, agents are told the CLI instead.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn agents_without_our_mcp_server_are_told_the_cli() {
    let tmux = Tmux::start();
    let home = Home::new(None);
    home.install_and_start();
    let claude_json = home.path().join(".claude.json");
    let mut v: Value =
        serde_json::from_str(&std::fs::read_to_string(&claude_json).expect("read")).expect("json");
    v.as_object_mut().expect("object").remove("mcpServers");
    std::fs::write(&claude_json, v.to_string()).expect("write");
    let gamma = home.agent(&tmux, "gamma");
    gamma.hook_done("SessionStart", 1).await;
    let start = gamma.context();
    assert!(start.contains("repowire peer ask NAME"), "{start}");
    assert!(start.contains("`repowire setup` registers it"), "{start}");
    let sent = home.json(&["peer", "ask", "gamma", "still there?"]);
    let cid = sent["correlation_id"].as_str().expect("cid").to_owned();
    let ctx = gamma
        .wait("the ask in gamma's context", |e| {
            e["event"] == "context" && e["text"].as_str().is_some_and(|t| t.contains(&cid))
        })
        .await;
    let text = ctx["text"].as_str().unwrap_or("");
    assert!(
        text.contains(&format!("repowire peer ack {cid} -m")),
        "{text}"
    );
}

/// Issue 35.16: the Stop hook hands messages over as `additionalContext` (the model reads them
/// once) only to a Claude Code that says it honours it (2.1.331 and later); any other agent
/// binary keeps the `block` form, which every version honours, so nothing goes unread.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_stop_hand_over_form_follows_the_agents_version() {
    use repowire::runtimes::claude::stop_form::{StopForm, for_agent};
    let dir = tempfile::tempdir().expect("dir");
    for (name, want) in [
        ("claude-2.1.331", StopForm::Context),
        ("claude-2.3.0", StopForm::Context),
        ("claude-2.1.330", StopForm::Block),
        ("claude-1.0.0", StopForm::Block),
    ] {
        let exe = dir.path().join(name);
        std::fs::copy(bin("repowire-standin"), &exe).expect("copy");
        let mut agent = repowire_e2e::agents::spawn_written(
            std::process::Command::new(&exe)
                .args([
                    "--transcript",
                    &dir.path().join(format!("{name}.jsonl")).to_string_lossy(),
                ])
                .stdin(std::process::Stdio::piped())
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::null()),
        )
        .expect("agent");
        let form = for_agent(Some(i64::from(agent.id()))).await;
        let _ = agent.kill();
        let _ = agent.wait();
        assert_eq!(form, want, "{name}");
    }
    // A process that is not Claude Code (here: a shell) gets the form every version honours.
    let mut other = std::process::Command::new("sleep")
        .arg("30")
        .spawn()
        .expect("sleep");
    assert_eq!(
        for_agent(Some(i64::from(other.id()))).await,
        StopForm::Block
    );
    let _ = other.kill();
    let _ = other.wait();
    assert_eq!(for_agent(None).await, StopForm::Block);
}
