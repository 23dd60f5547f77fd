//! Issue 15.9: small things a newcomer trips over, each as it was seen.

use std::process::Command;

use repowire_e2e::agents::{Home, bin, eventually};
use repowire_e2e::client::TestClient;
use repowire_e2e::process::{RelayProcess, relay_bin};

fn stdout(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn uninstall_help_offers_nothing_to_install() {
    let home = Home::new(None);
    let help = stdout(&home.repowire(&["uninstall", "--help"]));
    assert!(help.contains("--non-interactive"), "{help}");
    assert!(!help.to_lowercase().contains("install the"), "{help}");
    assert!(
        !help.contains("--pre-tool-use") && !help.contains("--service"),
        "{help}"
    );
}

#[test]
fn setup_on_a_fresh_home_claims_no_backup_it_did_not_make() {
    let home = Home::new(None);
    let said = home.ok(&["setup", "--non-interactive"]);
    assert!(!said.contains("previous version is kept"), "{said}");
    assert!(said.contains("created"), "{said}");
    let again = home.ok(&["setup", "--non-interactive"]);
    assert!(again.contains("already up to date"), "{again}");
}

/// An unreadable ~/.claude.json stops setup before settings.json is touched.
#[test]
fn setup_changes_neither_file_when_one_cannot_be_updated() {
    let home = Home::new(None);
    std::fs::write(home.path().join(".claude.json"), "{ not json").expect("claude.json");
    let out = home.repowire(&["setup", "--non-interactive"]);
    assert!(!out.status.success());
    assert!(
        !home.path().join(".claude/settings.json").exists(),
        "settings.json was written before the failure"
    );
    std::fs::write(home.path().join(".claude.json"), "[1, 2]").expect("claude.json");
    let out = home.repowire(&["setup", "--non-interactive"]);
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && said.contains("nothing was changed"),
        "{said}"
    );
    assert!(!home.path().join(".claude/settings.json").exists());
}

/// `session panes` with no tmux server lists nothing instead of failing.
#[test]
fn session_panes_without_a_tmux_server_lists_nothing() {
    let home = Home::new(None);
    home.ok(&["daemon", "start"]);
    let missing = tempfile::tempdir().expect("dir");
    let socket = missing.path().join("no-server");
    let mut c = Command::new(bin("repowire"));
    c.args(["session", "panes"])
        .envs(home.env())
        .env("TMUX", format!("{},1,0", socket.to_str().expect("utf8")));
    let out = c.output().expect("run");
    assert!(
        out.status.success(),
        "{}{}",
        stdout(&out),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout(&out).contains("no agent panes"), "{}", stdout(&out));
    home.ok(&["daemon", "stop"]);
}

/// `peer ask --wait` exits 2 on a timeout with `--json` as without it; the peer table shows
/// each peer's machine.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ask_wait_exit_codes_agree_and_peers_show_their_machine() {
    let data = tempfile::tempdir().expect("data");
    let data_dir = data.path().to_str().expect("utf8").to_owned();
    let relay = RelayProcess::start(&relay_bin(), &["--data-dir", &data_dir], &[]).await;
    let key = relay.first_key.clone().expect("key");
    let mut bob = TestClient::connect(&relay.http, &relay.ws, &key).await;
    let bob_peer = bob
        .register(repowire_protocol::Register {
            name: Some("bob".into()),
            backend: "claude-code".into(),
            machine: Some("bobs-desktop".into()),
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
    let table = home.ok(&["peer", "list"]);
    assert!(
        table.contains("MACHINE") && table.contains("bobs-desktop"),
        "{table}"
    );
    // Issue 35.9: the caller's own row is marked, and only it.
    assert_eq!(table.matches("(you)").count(), 1, "{table}");
    assert!(
        table
            .lines()
            .any(|l| l.contains("(you)") && !l.contains("bobs-desktop")),
        "{table}"
    );
    let listed = home.json(&["peer", "list"]);
    let mine: Vec<_> = listed
        .as_array()
        .expect("peers")
        .iter()
        .filter(|p| p["you"] == true)
        .collect();
    assert_eq!(mine.len(), 1, "{listed}");

    for json in [false, true] {
        let mut args = vec![
            "peer",
            "ask",
            "bob",
            "are you there?",
            "--wait",
            "--timeout",
            "1",
        ];
        if json {
            args.push("--json");
        }
        let out = home.repowire(&args);
        assert_eq!(out.status.code(), Some(2), "json {json}: {}", stdout(&out));
        // Issue 35.9: the ask id is said before the wait, on stderr, so Ctrl-C loses nothing.
        let said = String::from_utf8_lossy(&out.stderr);
        assert!(
            said.contains("waiting up to 1 s") && said.contains("(ask-"),
            "json {json}: {said}"
        );
    }

    // Issue 35.9: `-` reads the text from stdin (it sent a literal `-`).
    let mut notify = home.command(&["peer", "notify", "bob", "-"]);
    notify.stdin(std::process::Stdio::piped());
    let mut child = notify.spawn().expect("notify");
    std::io::Write::write_all(
        child.stdin.as_mut().expect("stdin"),
        b"line one\nline two\n",
    )
    .expect("write");
    drop(child.stdin.take());
    let out = child.wait_with_output().expect("notify");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let got = loop {
        let d = bob.delivered_to(&bob_peer.peer_id).await;
        if d.message.kind == repowire_protocol::MessageKind::Notify {
            break d;
        }
    };
    assert_eq!(got.message.text, "line one\nline two");
    // An empty text is refused as such, not as an invalid frame.
    let out = home.repowire(&["peer", "notify", "bob", "  "]);
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && said.contains("the text is empty"),
        "{said}"
    );
    // An unknown peer says how to find the right one.
    let out = home.repowire(&["peer", "notify", "nobody", "hello"]);
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && said.contains("peer list --all"),
        "{said}"
    );
    home.ok(&["daemon", "stop"]);
}

/// Issue 35.4: a daemon whose session the relay refuses (its tenant at the plan's peer limit)
/// said only "link connected" in `daemon start`, `status` and `doctor`. They now say which
/// session was refused, why in the relay's words, and what to do.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_over_the_peer_limit_is_reported_refused_with_what_to_do() {
    use repowire_e2e::agents::Tmux;
    const ADMIN: &str = "polish-admin-token-polish-admin-token";
    let data = tempfile::tempdir().expect("data");
    let data_dir = data.path().to_str().expect("utf8").to_owned();
    let relay = RelayProcess::start(
        &relay_bin(),
        &["--data-dir", &data_dir],
        &[("REPOWIRE_ADMIN_TOKEN", ADMIN)],
    )
    .await;
    let key = relay.first_key.clone().expect("key");
    let patched = reqwest::Client::new()
        .patch(format!("{}/admin/v1/tenants/default", relay.http))
        .bearer_auth(ADMIN)
        .json(&serde_json::json!({ "overrides": { "max_peers": 1 } }))
        .send()
        .await
        .expect("patch");
    assert_eq!(patched.status(), 200);
    let tmux = Tmux::start();
    let home = Home::new(Some((relay.http.clone(), key)));
    home.install_and_start();
    let first = home.agent(&tmux, "first");
    first.hook_done("SessionStart", 1).await;
    let second = home.agent(&tmux, "second");
    second.hook_done("SessionStart", 1).await;
    let status = eventually("the refusal in the daemon's status", || {
        let status = home.json(&["daemon", "status"]);
        (!status["refused"].as_array()?.is_empty()).then_some(status)
    })
    .await;
    assert_eq!(status["refused"][0]["code"], "limit_exceeded", "{status}");
    let shown = home.ok(&["daemon", "status"]);
    assert!(
        shown.contains("REFUSED") && shown.contains("repowire session end"),
        "{shown}"
    );
    let out = home.repowire(&["doctor"]);
    let said = stdout(&out);
    assert!(!out.status.success(), "{said}");
    assert!(
        said.contains("✗ the relay registered every local agent session")
            && said.contains("limit_exceeded")
            && said.contains("larger plan"),
        "{said}"
    );
    home.ok(&["daemon", "stop"]);
    drop(tmux);
}
