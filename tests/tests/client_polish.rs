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
    bob.register(repowire_protocol::Register {
        name: Some("bob".into()),
        backend: "claude-code".into(),
        machine: Some("bobs-desktop".into()),
        ..Default::default()
    })
    .await;
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
    }
    home.ok(&["daemon", "stop"]);
}
