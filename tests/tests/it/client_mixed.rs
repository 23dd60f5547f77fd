//! All four runtimes in one team across two machines and one relay: on `laptop` a Claude Code
//! stand-in and a Codex stand-in, on `desk` a Gemini CLI stand-in and OpenCode's plugin (loaded
//! by `opencode_host`), each wired by `repowire setup` finding its runtime installed. A
//! broadcast from the Claude Code session reaches each of the other three exactly once, each
//! the way its runtime takes messages, and never its sender.

use repowire_e2e::agents::{Home, Tmux, eventually};
use repowire_e2e::opencode_host::PluginHost;
use repowire_e2e::process::{RelayProcess, relay_bin};
use serde_json::{Value, json};

/// The agent peers `home` sees (not a terminal's own identity), as (name, backend), sorted.
fn backends(home: &Home) -> Vec<(String, String)> {
    let mut seen: Vec<(String, String)> = home
        .json(&["peer", "list"])
        .as_array()
        .cloned()
        .unwrap_or_default()
        .iter()
        .filter(|p| p["backend"] != "cli")
        .map(|p| {
            (
                p["name"].as_str().unwrap_or("").to_owned(),
                p["backend"].as_str().unwrap_or("").to_owned(),
            )
        })
        .collect();
    seen.sort();
    seen
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_broadcast_reaches_codex_gemini_and_opencode_once_each_across_two_machines() {
    let data = tempfile::tempdir().expect("data");
    let dir = data.path().to_str().expect("utf8").to_owned();
    let relay = RelayProcess::start(&relay_bin(), &["--data-dir", &dir], &[]).await;
    let key = relay.first_key.clone().expect("key");
    let tmux = Tmux::start();

    let laptop = Home::new(Some((relay.http.clone(), key.clone())));
    std::fs::create_dir_all(laptop.path().join(".codex")).expect("~/.codex");
    laptop.install_and_start();
    let desk = Home::new(Some((relay.http.clone(), key)));
    std::fs::create_dir_all(desk.path().join(".gemini")).expect("~/.gemini");
    std::fs::write(desk.path().join(".gemini/settings.json"), "{}").expect("settings.json");
    std::fs::create_dir_all(desk.path().join(".config/opencode")).expect("opencode dir");
    std::fs::write(desk.path().join(".config/opencode/opencode.json"), "{}")
        .expect("opencode.json");
    desk.install_and_start();

    let alpha = laptop.agent(&tmux, "alpha");
    let beta = laptop.agent_with(&tmux, "beta", &["--runtime", "codex"]);
    let gamma = desk.agent_with(&tmux, "gamma", &["--runtime", "gemini"]);
    let delta_dir = desk.path().join("delta");
    std::fs::create_dir_all(&delta_dir).expect("delta");
    let mut delta = PluginHost::start(&desk, &delta_dir)
        .await
        .expect("setup wrote the OpenCode plugin");
    alpha.hook_done("SessionStart", 1).await;
    gamma.hook_done("SessionStart", 1).await;
    // Codex and OpenCode register at their first prompt.
    beta.wait("the composer drawn", |e| e["event"] == "start")
        .await;
    beta.submit(&tmux, "hello");
    beta.hook_done("Stop", 1).await;
    delta.message("ses_delta", "hello").await;
    delta
        .event(json!({"type": "session.idle", "properties": {"sessionID": "ses_delta"}}))
        .await;
    let team = eventually("all four on the relay", || {
        let seen = backends(&desk);
        (seen.len() == 4).then_some(seen)
    })
    .await;
    let want = [
        ("alpha", "claude-code"),
        ("beta", "codex"),
        ("delta", "opencode"),
        ("gamma", "gemini"),
    ]
    .map(|(n, b)| (n.to_owned(), b.to_owned()));
    assert_eq!(team, want);

    let sent = laptop.json(&["peer", "broadcast", "deploy at noon", "--from", "alpha"]);
    assert_eq!(sent["state"], "accepted", "{sent}");
    // Codex and Gemini are idle in tmux: woken, and handed it by their hooks.
    for agent in [&beta, &gamma] {
        eventually("the broadcast handed over", || {
            agent.context().contains("deploy at noon").then_some(())
        })
        .await;
    }
    // OpenCode's session has no pane to wake: it gets the message with its next prompt.
    let handed = delta.message("ses_delta", "anything new?").await;
    assert!(
        handed.iter().any(|t| t.contains("deploy at noon")),
        "{handed:?}"
    );
    // Once each, and never to its sender.
    for agent in [&beta, &gamma] {
        assert_eq!(
            agent.context().matches("deploy at noon").count(),
            1,
            "{}",
            agent.context()
        );
    }
    let again = delta.message("ses_delta", "and now?").await;
    assert!(
        !again.iter().any(|t| t.contains("deploy at noon")),
        "{again:?}"
    );
    assert!(!alpha.context().contains("deploy at noon"));
    let id = sent["message_id"].as_str().expect("id").to_owned();
    laptop.reaches_state(&id, "injected").await;
    let status: Value = laptop.json(&["peer", "status", &id]);
    assert!(
        status["events"]
            .as_array()
            .is_some_and(|e| !e.iter().any(|x| x["state"] == "failed")),
        "{status}"
    );
}
