//! `repowire-relay check` (the chart's `helm test`): the key is exchanged and a WebSocket
//! opened against a real relay; a refused key, an unreachable relay, a bad URL and a missing
//! key fail with plain words and a non-zero exit, and the key is never echoed.

use std::process::{Command, Output};

use repowire_e2e::process::{RelayProcess, relay_bin};

fn check(url: &str, key: Option<&str>, json: bool) -> Output {
    let mut cmd = Command::new(relay_bin());
    cmd.arg("check")
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("REPOWIRE_RELAY_URL", url);
    if let Some(key) = key {
        cmd.env("REPOWIRE_API_KEY", key);
    }
    if json {
        cmd.arg("--json");
    }
    cmd.output().expect("run repowire-relay check")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn relay_check_says_what_the_relay_answered() {
    let data = tempfile::tempdir().unwrap();
    let relay = RelayProcess::start(
        &relay_bin(),
        &["--data-dir", data.path().to_str().unwrap()],
        &[],
    )
    .await;
    let key = relay.first_key.clone().expect("bootstrap key");

    let out = check(&relay.http, Some(&key), true);
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

    // A WebSocket URL with a trailing slash (what an operator may hand out) is the same relay.
    let ws = format!("{}/", relay.http.replacen("http", "ws", 1));
    let out = check(&ws, Some(&key), false);
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        said.starts_with(&format!("ok: {} took the key (tenant tnt-", relay.http)),
        "{said}"
    );

    // The last character changed (to one it is not: a key ending in `x` stays wrong).
    let last = if key.ends_with('x') { 'y' } else { 'x' };
    let wrong = format!("{}{last}", &key[..key.len() - 1]);
    let out = check(&relay.http, Some(&wrong), false);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        err.contains(&format!("the relay at {} refused the key (401", relay.http)),
        "{err}"
    );
    assert!(!err.contains(&wrong), "the key was echoed: {err}");
    assert!(out.stdout.is_empty());

    let out = check("http://127.0.0.1:9", Some(&key), false);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        err.contains("cannot reach the relay at http://127.0.0.1:9"),
        "{err}"
    );

    let out = check("relay.example", Some(&key), false);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(err.contains("must start with http://"), "{err}");

    let out = check(&relay.http, None, false);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(err.contains("--api-key"), "{err}");
}
