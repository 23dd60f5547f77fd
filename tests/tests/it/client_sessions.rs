//! Session bindings end to end (issue 19 parts 4 and 5): a real relay process, daemons, the
//! stand-in agent in real tmux. A work stream keeps its Repowire session id across `/clear`, a
//! daemon restart and a relay restart; a session that ended is detached, a message to it waits,
//! and `repowire session resume` starts the runtime's resume, which rebinds to the same session
//! and hands the message over.

use repowire_e2e::agents::{Agent, Home, Tmux, bin, eventually};
use repowire_e2e::process::{RelayProcess, relay_bin};
use serde_json::Value;
use std::path::PathBuf;

/// This machine's sessions, once `pred` holds for the one executed by `name`.
async fn session_of(home: &Home, name: &str, pred: impl Fn(&Value) -> bool) -> Value {
    eventually(&format!("the session of @{name}"), || {
        // Also while the daemon reconnects (the list comes from the relay).
        let out = home.repowire(&["session", "list", "--json"]);
        let listed: Value = serde_json::from_slice(&out.stdout).ok()?;
        listed
            .as_array()?
            .iter()
            .find(|s| s["executor"]["name"] == name && pred(s))
            .cloned()
    })
    .await
}

fn runtime_ids(s: &Value) -> Vec<String> {
    s["runtime_session_ids"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|v| v.as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

fn session_id_of(agent: &Agent) -> String {
    agent
        .events()
        .iter()
        .rev()
        .find_map(|e| {
            (e["event"] == "start" || e["event"] == "cleared")
                .then(|| e["session_id"].as_str().map(str::to_owned))
                .flatten()
        })
        .expect("the stand-in's session id")
}

/// `repowire session resume ID --command COMMAND` in `tmux`, which must start; the stand-in it
/// runs writes `transcript`.
fn resume(home: &Home, tmux: &Tmux, id: &str, command: &str, transcript: PathBuf) -> Agent {
    let out = home.repowire_in(Some(tmux), &["session", "resume", id, "--command", command]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    Agent {
        pane: String::new(),
        transcript,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_keeps_its_id_across_clear_a_daemon_restart_and_a_relay_restart() {
    let data = tempfile::tempdir().expect("data");
    let dir = data.path().to_str().expect("utf8").to_owned();
    let relay = RelayProcess::start(&relay_bin(), &["--data-dir", &dir], &[]).await;
    let key = relay.first_key.clone().expect("key");
    let addr = relay.http.trim_start_matches("http://").to_owned();
    let tmux = Tmux::start();
    let home = Home::new(Some((relay.http.clone(), key)));
    home.install_and_start();
    let app = home.agent(&tmux, "app");
    app.hook_done("SessionStart", 1).await;
    let first_runtime = session_id_of(&app);

    let bound = session_of(&home, "app", |s| s["status"] == "active").await;
    let id = bound["session_id"].as_str().expect("id").to_owned();
    assert!(id.starts_with("rs-"), "{bound}");
    assert_eq!(runtime_ids(&bound), vec![first_runtime.clone()]);
    assert_eq!(
        bound["transcript"]["path"].as_str(),
        Some(app.transcript.to_str().expect("utf8"))
    );
    assert_eq!(bound["backend"], "claude-code");

    // `/clear`: a new runtime session in the same process, the same work stream.
    app.submit(&tmux, "/clear");
    app.hook_done("SessionStart", 2).await;
    let second_runtime = session_id_of(&app);
    assert_ne!(second_runtime, first_runtime);
    let cleared = session_of(&home, "app", |s| runtime_ids(s).len() == 2).await;
    assert_eq!(cleared["session_id"], id.as_str());
    assert_eq!(
        runtime_ids(&cleared),
        vec![first_runtime.clone(), second_runtime.clone()]
    );

    // The daemon restarts: the agent is still there, and so is its session.
    home.ok(&["daemon", "stop"]);
    home.ok(&["daemon", "start"]);
    let after_daemon = session_of(&home, "app", |s| s["status"] == "active").await;
    assert_eq!(after_daemon["session_id"], id.as_str());

    // The relay restarts on the same data: the daemon reconnects, the binding holds.
    // Killed and reaped before the next one starts: until it exits it holds the data dir's
    // lock, and a new relay on the same dir refuses to start (met in CI after a bare drop).
    relay.signal("KILL");
    relay.wait(repowire_e2e::WAIT).await;
    let relay = RelayProcess::start_on(&relay_bin(), &addr, &["--data-dir", &dir], &[]).await;
    let after_relay = session_of(&home, "app", |s| s["status"] == "active").await;
    assert_eq!(after_relay["session_id"], id.as_str());
    assert_eq!(
        runtime_ids(&after_relay),
        vec![first_runtime, second_runtime]
    );

    // `peer describe` names it.
    let described = home.json(&["peer", "describe", "app"]);
    assert_eq!(
        described["session"]["session_id"],
        id.as_str(),
        "{described}"
    );
    let text =
        String::from_utf8_lossy(&home.repowire(&["peer", "describe", "app"]).stdout).into_owned();
    assert!(
        text.contains(&format!("session      {id} (active)")),
        "{text}"
    );
    drop(relay);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_resumed_session_keeps_its_id_and_gets_what_was_sent_while_it_was_detached() {
    let data = tempfile::tempdir().expect("data");
    let dir = data.path().to_str().expect("utf8").to_owned();
    let relay = RelayProcess::start(&relay_bin(), &["--data-dir", &dir], &[]).await;
    let key = relay.first_key.clone().expect("key");
    let tmux = Tmux::start();
    let home = Home::new(Some((relay.http.clone(), key.clone())));
    let desk = Home::new(Some((relay.http.clone(), key)));
    home.install_and_start();
    desk.install_and_start();
    let app = home.agent(&tmux, "app");
    app.hook_done("SessionStart", 1).await;
    let runtime = session_id_of(&app);
    let bound = session_of(&home, "app", |s| s["status"] == "active").await;
    let id = bound["session_id"].as_str().expect("id").to_owned();
    let peer = bound["executor"]["peer_id"]
        .as_str()
        .expect("peer")
        .to_owned();

    // Resuming an attached session is refused, with why.
    let standin = format!(
        "{} --transcript {}",
        bin("repowire-standin").display(),
        home.path().join("app-resumed.jsonl").display()
    );
    let refused = home.repowire_in(
        Some(&tmux),
        &["session", "resume", &id, "--command", &standin],
    );
    assert!(!refused.status.success());
    let said = String::from_utf8_lossy(&refused.stderr).into_owned();
    assert!(said.contains("is attached to @app"), "{said}");

    // The agent exits: the session is detached, and a message to it waits.
    app.submit(&tmux, "/exit");
    app.wait("exit", |e| e["event"] == "exit").await;
    session_of(&home, "app", |s| s["status"] == "detached").await;
    let from_desk = desk.json(&["session", "notify", &id, "while you were away"]);
    assert_eq!(from_desk["state"], "accepted", "{from_desk}");
    let message = from_desk["message_id"].as_str().expect("id").to_owned();

    // A dry run says what would run, and where.
    let dry = home.json(&["session", "resume", &id, "--dry-run", "--command", &standin]);
    assert_eq!(
        dry["command"].as_str(),
        Some(format!("{standin} --resume {runtime}").as_str())
    );
    assert_eq!(
        dry["cwd"].as_str(),
        Some(home.path().join("app").to_str().expect("utf8"))
    );
    assert_eq!(dry["started"], false);

    // Resumed: the same runtime session, the same Repowire session, the same peer; the
    // message that waited reaches the agent.
    let resumed = resume(
        &home,
        &tmux,
        &id,
        &standin,
        home.path().join("app-resumed.jsonl"),
    );
    let start = resumed
        .wait("the resumed session's start", |e| e["event"] == "start")
        .await;
    assert_eq!(start["session_id"], runtime.as_str());
    resumed
        .wait("the waiting message in its context", |e| {
            e["event"] == "context"
                && e["text"]
                    .as_str()
                    .is_some_and(|t| t.contains("while you were away"))
        })
        .await;
    let again = session_of(&home, "app", |s| s["status"] == "active").await;
    assert_eq!(again["session_id"], id.as_str());
    assert_eq!(again["executor"]["peer_id"], peer.as_str());
    desk.reaches_state(&message, "injected").await;
    // The message names the session it was sent to; the person's peer at the desk is in none.
    let inbox = home.json(&["inbox", "--from", "app", "--all", "--peek"]);
    let got = inbox["messages"]
        .as_array()
        .and_then(|m| m.iter().find(|e| e["message_id"] == message.as_str()))
        .unwrap_or_else(|| panic!("the message in app's inbox: {inbox}"));
    assert_eq!(got["to_repowire_session_id"], id.as_str(), "{got}");
    assert_eq!(inbox["peer"]["repowire_session_id"], id.as_str(), "{inbox}");
    assert!(got["from_repowire_session_id"].is_null(), "{got}");
    drop(tmux);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_resume_under_a_new_runtime_id_still_continues_the_session() {
    let data = tempfile::tempdir().expect("data");
    let dir = data.path().to_str().expect("utf8").to_owned();
    let relay = RelayProcess::start(&relay_bin(), &["--data-dir", &dir], &[]).await;
    let key = relay.first_key.clone().expect("key");
    let tmux = Tmux::start();
    let home = Home::new(Some((relay.http.clone(), key)));
    home.install_and_start();
    let app = home.agent(&tmux, "app");
    app.hook_done("SessionStart", 1).await;
    let runtime = session_id_of(&app);
    let bound = session_of(&home, "app", |s| s["status"] == "active").await;
    let id = bound["session_id"].as_str().expect("id").to_owned();
    let peer = bound["executor"]["peer_id"]
        .as_str()
        .expect("peer")
        .to_owned();
    app.submit(&tmux, "/exit");
    app.wait("exit", |e| e["event"] == "exit").await;
    session_of(&home, "app", |s| s["status"] == "detached").await;
    let sent = home.json(&["session", "notify", &id, "kept for you"]);
    let message = sent["message_id"].as_str().expect("id").to_owned();

    // The runtime resumes under a new id of its own (as `--fork-session` does, and some
    // versions do by themselves): the session, its peer and the waiting message carry over.
    let transcript = home.path().join("app-forked.jsonl");
    let command = format!(
        "{} --transcript {} --fork-session",
        bin("repowire-standin").display(),
        transcript.display()
    );
    let forked = resume(&home, &tmux, &id, &command, transcript);
    let start = forked
        .wait("the forked start", |e| e["event"] == "start")
        .await;
    assert_ne!(start["session_id"], runtime.as_str(), "a new runtime id");
    forked
        .wait("the waiting message", |e| {
            e["event"] == "context"
                && e["text"]
                    .as_str()
                    .is_some_and(|t| t.contains("kept for you"))
        })
        .await;
    let again = session_of(&home, "app", |s| s["status"] == "active").await;
    assert_eq!(again["session_id"], id.as_str());
    assert_eq!(again["executor"]["peer_id"], peer.as_str());
    assert_eq!(runtime_ids(&again).len(), 2, "{again}");
    home.reaches_state(&message, "injected").await;
    drop(tmux);
}

/// Issue 35.6: an agent whose pane is killed runs no SessionEnd hook; its peer stayed `online`
/// for a minute and more, and `session resume` refused it as live. The daemon looks at its
/// agents' processes every few seconds: the session is detached within seconds, and resumable.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agent_killed_without_ending_its_session_is_detached_within_seconds() {
    let data = tempfile::tempdir().expect("data");
    let dir = data.path().to_str().expect("utf8").to_owned();
    let relay = RelayProcess::start(&relay_bin(), &["--data-dir", &dir], &[]).await;
    let key = relay.first_key.clone().expect("key");
    let tmux = Tmux::start();
    let home = Home::new(Some((relay.http.clone(), key)));
    home.install_and_start();
    let app = home.agent(&tmux, "app");
    app.hook_done("SessionStart", 1).await;
    let bound = session_of(&home, "app", |s| s["status"] == "active").await;
    let id = bound["session_id"].as_str().expect("id").to_owned();

    let killed_at = std::time::Instant::now();
    tmux.run(&["kill-pane", "-t", &app.pane]);
    session_of(&home, "app", |s| s["status"] == "detached").await;
    let took = killed_at.elapsed();
    assert!(
        !app.events().iter().any(|e| e["event"] == "exit"),
        "the stand-in ran no exit of its own"
    );
    let peers = home.json(&["peer", "list", "--all"]);
    let row = peers
        .as_array()
        .and_then(|p| p.iter().find(|p| p["name"] == "app"))
        .cloned()
        .unwrap_or_default();
    assert_eq!(row["status"], "offline", "{peers}");
    // Resumable now: not refused as attached.
    let standin = format!(
        "{} --transcript {}",
        bin("repowire-standin").display(),
        home.path().join("app-resumed.jsonl").display()
    );
    let dry = home.json(&["session", "resume", &id, "--dry-run", "--command", &standin]);
    assert_eq!(dry["started"], false, "{dry}");
    eprintln!("detached {took:?} after the pane was killed");
    drop(tmux);
}
