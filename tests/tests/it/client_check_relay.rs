//! `repowire check-relay`: the key is exchanged and a WebSocket opened against a real relay;
//! a refused key and an unreachable relay fail with plain words and a non-zero exit.

use repowire_e2e::agents::Home;
use repowire_e2e::process::{RelayProcess, relay_bin};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn check_relay_says_what_the_relay_answered() {
    let data = tempfile::tempdir().unwrap();
    let relay = RelayProcess::start(
        &relay_bin(),
        &["--data-dir", data.path().to_str().unwrap()],
        &[],
    )
    .await;
    let key = relay.first_key.clone().expect("bootstrap key");
    let home = Home::new(Some((relay.http.clone(), key.clone())));

    let out = home.repowire(&["check-relay", "--json"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let said: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(said["relay"], relay.http.as_str());
    assert!(
        said["tenant_id"].as_str().unwrap().starts_with("tnt-"),
        "{said}"
    );
    assert!(!said["connection_id"].as_str().unwrap().is_empty());

    // The last character changed (to one it is not: a key ending in `x` stays wrong).
    let last = if key.ends_with('x') { 'y' } else { 'x' };
    let wrong = format!("{}{last}", &key[..key.len() - 1]);
    let out = home.repowire(&["check-relay", "--api-key", &wrong]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(err.contains("refused the API key"), "{err}");
    assert!(!err.contains(&wrong), "the key was echoed: {err}");

    let out = home.repowire(&["check-relay", "--relay-url", "http://127.0.0.1:9"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        err.contains("cannot reach the relay at http://127.0.0.1:9"),
        "{err}"
    );
}

/// `daemon start` returns once the relay link is up (so the next command finds it connected),
/// and says so; a relay it cannot reach yet, or one that refuses its key, is said in words.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn daemon_start_says_whether_its_relay_link_is_up() {
    let data = tempfile::tempdir().unwrap();
    let relay = RelayProcess::start(
        &relay_bin(),
        &["--data-dir", data.path().to_str().unwrap()],
        &[],
    )
    .await;
    let key = relay.first_key.clone().expect("bootstrap key");

    let home = Home::new(Some((relay.http.clone(), key.clone())));
    let out = home.ok(&["daemon", "start"]);
    assert!(out.contains("relay link connected (tenant tnt-"), "{out}");
    assert_eq!(home.link_state(), "connected");

    let away = Home::new(Some(("http://127.0.0.1:9".into(), key.clone())));
    let out = away.repowire(&["daemon", "start"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(
        err.contains("not connected to the relay yet (last attempt:"),
        "{err}"
    );
    assert!(err.contains("the daemon keeps trying"), "{err}");

    // The last character changed (to one it is not: a key ending in `x` stays wrong).
    let last = if key.ends_with('x') { 'y' } else { 'x' };
    let wrong = format!("{}{last}", &key[..key.len() - 1]);
    let refused = Home::new(Some((relay.http.clone(), wrong.clone())));
    let out = refused.repowire(&["daemon", "start"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(err.contains("the relay refused this daemon"), "{err}");
    assert!(!err.contains(&wrong), "the key was echoed: {err}");
}
