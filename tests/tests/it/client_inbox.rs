//! Issue 15.6 and 15.7: the person at the terminal is a peer too. `repowire inbox` reads what
//! peers sent them (and tells the senders), `peer ack` takes the ids it shows, `whoami` says
//! who a terminal acts as and why, and a hook run by hand in a terminal registers nothing.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use repowire_e2e::agents::{Home, Tmux, bin, eventually};
use repowire_e2e::client::TestClient;
use repowire_e2e::process::{RelayProcess, relay_bin};
use repowire_protocol::{Body, DeliveryState, MessageId, Register};
use serde_json::Value;

async fn injected(bob: &mut TestClient, message: MessageId) {
    bob.expect(|f| match &f.body {
        Body::Delivery(d) if d.message_id == message && d.state == DeliveryState::Injected => {
            Some(())
        }
        _ => None,
    })
    .await;
}

/// True once the pane shows `TAG=<digit>` (the typed command line itself shows `TAG=$?`).
fn exit_shown(screen: &str, tag: &str) -> bool {
    screen
        .match_indices(&format!("{tag}="))
        .any(|(i, m)| screen[i + m.len()..].starts_with(|c: char| c.is_ascii_digit()))
}

fn unread(listing: &Value) -> Vec<Value> {
    listing["messages"]
        .as_array()
        .expect("messages")
        .iter()
        .filter(|m| m["unread"] == true)
        .cloned()
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_person_at_the_terminal_reads_and_answers_what_peers_sent() {
    let data = tempfile::tempdir().expect("data");
    let data_dir = data.path().to_str().expect("utf8").to_owned();
    let relay = RelayProcess::start(&relay_bin(), &["--data-dir", &data_dir], &[]).await;
    let key = relay.first_key.clone().expect("key");
    let mut bob = TestClient::connect(&relay.http, &relay.ws, &key).await;
    let bob_peer = bob
        .register(Register {
            name: Some("bob".into()),
            backend: "claude-code".into(),
            ..Default::default()
        })
        .await
        .peer;
    let home = Home::new(Some((relay.http.clone(), key)));
    home.ok(&["daemon", "start"]);
    eventually("connected", || {
        (home.link_state() == "connected").then_some(())
    })
    .await;

    // Who this terminal is: the daemon's own peer, and why.
    let who = home.json(&["whoami"]);
    let me = who["session"]["name"].as_str().expect("a name").to_owned();
    assert_eq!(who["session"]["session_id"], "cli", "{who}");
    assert!(
        who["because"]
            .as_str()
            .is_some_and(|b| b.contains("no agent session")),
        "{who}"
    );
    let said = home.ok(&["whoami"]);
    assert!(
        said.contains(&format!("@{me}")) && said.contains("why"),
        "{said}"
    );
    let empty = home.json(&["inbox"]);
    assert!(unread(&empty).is_empty(), "{empty}");

    // Bob writes: a notification with an escape sequence in it, then an ask.
    let hostile = "look \u{1b}[31mred\u{1b}[0m\nsecond line";
    let note = bob.notify(&bob_peer, &me, hostile).await.expect("notify");
    let ask = bob.ask(&bob_peer, &me, "ship it?").await.expect("ask");
    let ask_id = ask.correlation_id.clone().expect("ask id").0;

    // `--peek` lists them and leaves them unread.
    let peeked = eventually("both delivered", || {
        let l = home.json(&["inbox", "--peek"]);
        (unread(&l).len() == 2).then_some(l)
    })
    .await;
    let listed = unread(&peeked);
    assert_eq!(listed[0]["kind"], "notify", "oldest first: {peeked}");
    assert_eq!(listed[1]["id"], ask_id.as_str(), "{peeked}");
    assert_eq!(listed[1]["open"], true, "{peeked}");
    assert_eq!(listed[0]["from"]["name"], "bob", "{peeked}");
    assert_eq!(unread(&home.json(&["inbox", "--peek"])).len(), 2);

    // Reading them in the terminal: the escape sequence is shown, not obeyed, and both
    // senders learn the messages were read.
    let read = home.repowire(&["inbox"]);
    let text = String::from_utf8_lossy(&read.stdout).into_owned();
    assert!(read.status.success(), "{text}");
    assert!(
        !text.contains('\u{1b}'),
        "a raw escape reached the terminal: {text:?}"
    );
    assert!(text.contains("\\x1b[31mred"), "{text}");
    assert!(
        text.contains("second line") && text.contains("ship it?"),
        "{text}"
    );
    assert!(
        text.contains("2 unread") && text.contains(&ask_id),
        "{text}"
    );
    assert!(text.contains("peer ack"), "says how to reply: {text}");
    injected(&mut bob, note.message_id).await;
    injected(&mut bob, ask.message_id).await;
    let after = home.json(&["inbox"]);
    assert!(unread(&after).is_empty(), "{after}");
    let all = home.json(&["inbox", "--all"]);
    assert_eq!(all["messages"].as_array().map(Vec::len), Some(2), "{all}");

    // `peer ack` takes the message id the listing shows, closes the ask and says who sent it.
    let acked = home.ok(&["peer", "ack", &ask.message_id.to_string(), "-m", "yes"]);
    assert!(acked.contains(&format!("as @{me}")), "{acked}");
    let reply = bob.delivered_to(&bob_peer.peer_id).await;
    assert_eq!(reply.message.text, "yes");
    assert_eq!(
        reply.message.correlation_id.map(|c| c.0),
        Some(ask_id.clone())
    );
    let closed = home.json(&["inbox", "--all"]);
    let the_ask = closed["messages"]
        .as_array()
        .expect("messages")
        .iter()
        .find(|m| m["id"] == ask_id.as_str())
        .cloned()
        .expect("the ask");
    assert_eq!(the_ask["open"], false, "{closed}");

    // A notification sent as the terminal says who it was sent as.
    let sent = home.ok(&["peer", "notify", "bob", "thanks"]);
    assert!(sent.contains(&format!("as @{me}")), "{sent}");

    // `--watch` prints a message that arrives while it waits.
    let mut watch = Command::new(bin("repowire"))
        .args(["inbox", "--watch", "--json"])
        .envs(home.env())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("watch");
    let (lines, arrived) = mpsc::channel::<String>();
    let out = watch.stdout.take().expect("stdout");
    std::thread::spawn(move || {
        for line in BufReader::new(out).lines().map_while(Result::ok) {
            if lines.send(line).is_err() {
                break;
            }
        }
    });
    let live = bob
        .notify(&bob_peer, &me, "live one")
        .await
        .expect("notify");
    let line = arrived
        .recv_timeout(Duration::from_secs(20))
        .expect("--watch printed the new message");
    let _ = watch.kill();
    let _ = watch.wait();
    let shown: Value = serde_json::from_str(&line).expect("a JSON line");
    assert_eq!(shown["text"], "live one", "{shown}");
    assert_eq!(shown["unread"], true, "{shown}");
    injected(&mut bob, live.message_id).await;
    home.ok(&["daemon", "stop"]);
}

/// A hook run by hand in a terminal (stdout the terminal, no runtime variables) refuses and
/// says what to do; piped so that it looks like a runtime, the daemon still refuses because
/// the process behind it is the tmux server. Either way no session is registered, and the
/// terminal still acts as the person.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hook_run_by_hand_in_a_terminal_registers_nothing() {
    let home = Home::new(None);
    home.ok(&["daemon", "start"]);
    let tmux = Tmux::start();
    let shell = tmux.spawn(
        home.path(),
        &home.env(),
        &[
            "sh".into(),
            "-c".into(),
            "unset CLAUDECODE CLAUDE_PROJECT_DIR CLAUDE_CODE_ENTRYPOINT; exec sh".into(),
        ],
    );
    let hook = format!(
        "{} hook session-start",
        bin("repowire").to_str().expect("utf8")
    );
    let payload = r#"{"session_id":"by-hand","cwd":"/tmp","hook_event_name":"SessionStart"}"#;
    tmux.type_text(
        &shell,
        &format!("echo '{payload}' | {hook}; echo \"first=$?\""),
    );
    tmux.enter(&shell);
    let screen = eventually("the first hook ended", || {
        let s = tmux.capture(&shell);
        exit_shown(&s, "first").then_some(s)
    })
    .await;
    assert!(screen.contains("first=1"), "{screen}");
    assert!(screen.contains("not run by an agent runtime"), "{screen}");
    assert!(
        screen.contains("repowire whoami"),
        "says what to do: {screen}"
    );

    tmux.type_text(
        &shell,
        &format!("echo '{payload}' | {hook} 2>&1 | cat; echo \"second=$?\""),
    );
    tmux.enter(&shell);
    let screen = eventually("the second hook ended", || {
        let s = tmux.capture(&shell);
        exit_shown(&s, "second").then_some(s)
    })
    .await;
    assert!(screen.contains("not run by an agent runtime"), "{screen}");

    let status = home.json(&["daemon", "status"]);
    let sessions = status["sessions"].to_string();
    assert!(!sessions.contains("by-hand"), "{status}");

    // The terminal still acts as the person.
    let who = format!(
        "{} whoami --json > who.json",
        bin("repowire").to_str().expect("utf8")
    );
    tmux.type_text(&shell, &format!("{who}; echo \"third=$?\""));
    tmux.enter(&shell);
    let screen = eventually("whoami ended", || {
        let s = tmux.capture(&shell);
        exit_shown(&s, "third").then_some(s)
    })
    .await;
    assert!(screen.contains("third=0"), "{screen}");
    let who: Value = serde_json::from_str(
        &std::fs::read_to_string(home.path().join("who.json")).expect("who.json"),
    )
    .expect("json");
    assert_eq!(who["session"]["session_id"], "cli", "{who}");
    home.ok(&["daemon", "stop"]);
}

/// `repowire session end` takes a session off the mesh by name; the daemon's own peer is not
/// a session to end.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn session_end_takes_a_session_off_the_mesh() {
    let tmux = Tmux::start();
    let home = Home::new(None);
    home.install_and_start();
    let alpha = home.agent(&tmux, "alpha");
    alpha.hook_done("SessionStart", 1).await;
    let names = |home: &Home| -> Vec<String> {
        home.json(&["peer", "list"])
            .as_array()
            .expect("peers")
            .iter()
            .filter_map(|p| p["name"].as_str().map(str::to_owned))
            .collect()
    };
    assert!(names(&home).contains(&"alpha".to_owned()));

    let ended = home.ok(&["session", "end", "alpha"]);
    assert!(ended.contains("@alpha"), "{ended}");
    let status = home.json(&["daemon", "status"]);
    assert!(
        !status["sessions"].to_string().contains("alpha"),
        "{status}"
    );
    assert!(!names(&home).contains(&"alpha".to_owned()));

    let refused = home.repowire(&["session", "end", "cli"]);
    let said = String::from_utf8_lossy(&refused.stderr);
    assert!(
        !refused.status.success() && said.contains("not a session to end"),
        "{said}"
    );
    let missing = home.repowire(&["session", "end", "nobody"]);
    let said = String::from_utf8_lossy(&missing.stderr);
    assert!(
        !missing.status.success() && said.contains("hint:"),
        "{said}"
    );
}
