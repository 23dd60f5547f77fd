//! OpenCode's plugin, the file `repowire setup --runtime opencode` writes, loaded by Node with a
//! stand-in for OpenCode's client (`repowire_e2e::opencode_host`), its hooks called as OpenCode
//! calls them, and the `repowire hook` commands it runs reaching a real daemon and relay. What
//! the real OpenCode cannot be made to do on cue offline: a turn that ends with messages
//! waiting, a move to another session (/new), a subagent's session, a daemon that is down.

use std::time::Duration;

use repowire_e2e::agents::{Home, Tmux, eventually};
use repowire_e2e::opencode_host::PluginHost;
use repowire_e2e::process::{RelayProcess, relay_bin};
use serde_json::{Value, json};

/// `laptop` set up for OpenCode with `setup` (extra arguments), its daemon running; `desk`,
/// another machine of the tenant, installed and running; the plugin loaded for `app`.
async fn machines(relay: &RelayProcess, setup: &[&str]) -> (Home, Home, PluginHost) {
    machines_in(relay, setup, &[]).await
}

/// [`machines`], the plugin's process given `env` too.
async fn machines_in(
    relay: &RelayProcess,
    setup: &[&str],
    env: &[(&str, String)],
) -> (Home, Home, PluginHost) {
    let key = relay.first_key.clone().expect("key");
    let laptop = Home::new(Some((relay.http.clone(), key.clone())));
    let desk = Home::new(Some((relay.http.clone(), key)));
    let mut args = vec!["setup", "--non-interactive", "--runtime", "opencode"];
    args.extend_from_slice(setup);
    laptop.ok(&args);
    laptop.ok(&["daemon", "start"]);
    desk.install_and_start();
    let project = laptop.path().join("app");
    std::fs::create_dir_all(&project).expect("project");
    let host = PluginHost::start_with(&laptop, &project, env)
        .await
        .expect("the plugin loads");
    (laptop, desk, host)
}

async fn embedded_relay() -> (tempfile::TempDir, RelayProcess) {
    let data = tempfile::tempdir().expect("data");
    let dir = data.path().to_str().expect("utf8").to_owned();
    let relay = RelayProcess::start(&relay_bin(), &["--data-dir", &dir], &[]).await;
    (data, relay)
}

/// The peers named `app` that `home` sees online.
fn apps(home: &Home) -> Vec<Value> {
    home.json(&["peer", "list"])
        .as_array()
        .cloned()
        .unwrap_or_default()
        .into_iter()
        .filter(|p| p["name"] == "app" && p["status"] != "offline")
        .collect()
}

/// Desk notifies `app` of `text`; returns its id once laptop's daemon holds it durably.
async fn notify(desk: &Home, text: &str) -> String {
    let sent = desk.json(&["peer", "notify", "app", text]);
    let id = sent["message_id"].as_str().expect("message id").to_owned();
    eventually("the message on laptop", || {
        desk.states(&id)
            .iter()
            .any(|s| s == "delivered")
            .then_some(())
    })
    .await;
    id
}

fn idle(session: &str) -> Value {
    json!({"type": "session.idle", "properties": {"sessionID": session}})
}

/// A session registers at its first prompt; a message that arrives during its turn is handed
/// over at the turn's end by a prompt of the plugin's own (with the session's agent and model),
/// once; a subagent's session is never a peer; moving to another session (/new) moves the peer
/// and what waits for it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_opencode_plugin_registers_hands_over_and_moves_with_its_session() {
    let (_data, relay) = embedded_relay().await;
    // The sessions claim a pane that runs a shell, not OpenCode: a wake is refused there, and
    // says why, but never types.
    let tmux = Tmux::start();
    let shell_dir = tempfile::tempdir().expect("dir");
    let shell = tmux.spawn(shell_dir.path(), &[], &["sh".into()]);
    let pane = [("TMUX", tmux.tmux_env()), ("TMUX_PANE", shell.clone())];
    let (laptop, desk, mut host) = machines_in(&relay, &[], &pane).await;

    let context = host.message("ses_a", "hello").await;
    assert!(
        context.iter().any(|t| t.contains("app")),
        "who it is, in the prompt: {context:?}"
    );
    let app = eventually("app online on desk", || {
        apps(&desk).into_iter().find(|p| p["backend"] == "opencode")
    })
    .await;

    // During the turn: nothing is typed; the turn's end hands it over.
    notify(&desk, "NOTE-1 during the turn").await;
    host.event(idle("ses_a")).await;
    let calls = host.calls().await;
    let prompts = calls["prompts"].as_array().cloned().unwrap_or_default();
    assert_eq!(prompts.len(), 1, "{calls}");
    assert_eq!(prompts[0]["path"]["id"], "ses_a");
    assert_eq!(prompts[0]["body"]["agent"], "build");
    assert_eq!(prompts[0]["body"]["model"]["modelID"], "mock-model");
    let text = prompts[0]["body"]["parts"][0]["text"]
        .as_str()
        .unwrap_or("");
    assert!(
        !text.contains("NOTE-1"),
        "the message itself goes in hidden: {text}"
    );
    // Before OpenCode runs that prompt another message comes; the session is between turns,
    // so the daemon tries a wake, which refuses the shell's pane and records why.
    let late = notify(&desk, "NOTE-1b before the prompt ran").await;
    eventually("the wake refused", || {
        laptop
            .wake_of("ses_a")
            .filter(|w| w["outcome"] == "refused")
    })
    .await;
    // OpenCode runs the plugin's prompt: its prompt-submit carries both messages.
    let handed = host.message("ses_a", text).await;
    assert!(
        handed.iter().any(|t| t.contains("NOTE-1 during the turn"))
            && handed
                .iter()
                .any(|t| t.contains("NOTE-1b before the prompt ran")),
        "{handed:?}"
    );
    eventually("NOTE-1b injected", || {
        desk.states(&late)
            .iter()
            .any(|s| s == "injected")
            .then_some(())
    })
    .await;
    // The sender is told nothing unusual: it was no person's prompt, and no pane was typed in.
    assert_eq!(desk.reason_of(&late, "injected"), None);
    assert!(
        !tmux.capture(&shell).contains("repowire"),
        "{}",
        tmux.capture(&shell)
    );
    // The turn the plugin started ends with nothing waiting: no prompt again.
    host.event(idle("ses_a")).await;
    assert_eq!(
        host.calls().await["prompts"].as_array().map(Vec::len),
        Some(1)
    );

    // A subagent's session (created by this process) runs no hooks and is no peer.
    host.event(json!({"type": "session.created",
        "properties": {"info": {"id": "ses_sub", "parentID": "ses_a"}}}))
        .await;
    assert!(host.message("ses_sub", "explore").await.is_empty());
    host.event(idle("ses_sub")).await;
    assert_eq!(apps(&desk).len(), 1, "{:?}", apps(&desk));

    // /new: the process speaks for ses_b now; the peer moves with it, and a message sent in
    // between reaches the new session at its first prompt.
    notify(&desk, "NOTE-2 before the move").await;
    let moved = host.message("ses_b", "a new session").await;
    assert!(
        moved.iter().any(|t| t.contains("NOTE-2 before the move")),
        "{moved:?}"
    );
    let now = apps(&desk);
    assert_eq!(now.len(), 1, "one app peer after the move: {now:?}");
    assert_eq!(now[0]["peer_id"], app["peer_id"], "the same peer: {now:?}");
    // ses_a's end of turn is no longer this process's: no hand-over prompt for it.
    notify(&desk, "NOTE-3 after the move").await;
    host.event(idle("ses_a")).await;
    assert_eq!(
        host.calls().await["prompts"].as_array().map(Vec::len),
        Some(1)
    );
    host.event(idle("ses_b")).await;
    let prompts = host.calls().await["prompts"].clone();
    assert_eq!(prompts[1]["path"]["id"], "ses_b", "{prompts}");
}

/// With approvals on, a subagent's tool call that this process did not see created (OpenCode
/// is asked whose it is) is gated as its top-level session's and waits for a person; an edit
/// is shown with its file and change; a tool that is not gated runs at once; and with the
/// daemon down a gated call is stopped, not run.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_opencode_subagents_call_is_gated_as_its_sessions_and_fails_closed() {
    let (_data, relay) = embedded_relay().await;
    let (laptop, desk, mut host) = machines(
        &relay,
        &[
            "--approvals",
            "--gated-tools",
            "Bash,Edit",
            "--approval-timeout",
            "60",
        ],
    )
    .await;
    host.message("ses_a", "hello").await;
    eventually("app online on desk", || apps(&desk).into_iter().next()).await;

    // OpenCode's SDK answers `session.get` bare here: the plugin reads both shapes.
    host.call(
        json!({"op": "parents", "map": {"ses_sub": "ses_a", "ses_a": null}, "shape": "bare"}),
    )
    .await;
    let call = host
        .tool("ses_sub", "bash", json!({"command": "rm -rf build"}))
        .await;
    let q = desk.approvals_waiting(1).await.remove(0);
    assert_eq!(
        q["from"]["name"], "app",
        "asked as the top-level session's: {q}"
    );
    assert!(
        q["text"]
            .as_str()
            .is_some_and(|t| t.starts_with("Bash: rm -rf build\nin ")),
        "{q}"
    );
    let cid = q["correlation_id"].as_str().expect("cid");
    let denied = desk.in_terminal(&["approvals", "deny", cid, "--reason", "not on friday"]);
    assert!(denied.status.success(), "{denied:?}");
    let answer = host.reply(call).await;
    assert!(
        answer["error"]
            .as_str()
            .is_some_and(|e| e.contains("not on friday")),
        "{answer}"
    );
    assert!(
        host.calls().await["get"]
            .as_array()
            .is_some_and(|g| g.iter().any(|id| id == "ses_sub")),
        "OpenCode was asked whose session ses_sub is"
    );

    // An edit is shown to the person as Claude Code's would be: the file, and what changes.
    let edit = host
        .tool(
            "ses_a",
            "edit",
            // With a decoy in Claude Code's spelling, which OpenCode would not act on.
            json!({"filePath": "/srv/app/config.toml", "oldString": "debug = false",
                   "newString": "debug = true", "file_path": "README.md"}),
        )
        .await;
    let q = desk.approvals_waiting(1).await.remove(0);
    let text = q["text"].as_str().unwrap_or_default();
    assert!(
        text.starts_with("Edit: /srv/app/config.toml\n")
            && text.contains("debug = false")
            && text.contains("debug = true"),
        "{q}"
    );
    let cid = q["correlation_id"].as_str().expect("cid");
    let allowed = desk.in_terminal(&["approvals", "allow", cid]);
    assert!(allowed.status.success(), "{allowed:?}");
    assert_eq!(host.reply(edit).await["ok"], true);
    // A patch keeps OpenCode's name and is gated as an edit, shown with the files it touches.
    let patch = host
        .tool(
            "ses_a",
            "apply_patch",
            json!({"patchText": "*** Begin Patch\n*** Add File: notes.md\n+hi\n*** End Patch\n"}),
        )
        .await;
    let q = desk.approvals_waiting(1).await.remove(0);
    assert!(
        q["text"].as_str().is_some_and(
            |t| t.starts_with("Edit: patch of 1 file: notes.md\n") && t.contains("+hi")
        ),
        "{q}"
    );
    let cid = q["correlation_id"].as_str().expect("cid");
    let denied = desk.in_terminal(&["approvals", "deny", cid, "--reason", "not that"]);
    assert!(denied.status.success(), "{denied:?}");
    assert!(
        host.reply(patch).await["error"]
            .as_str()
            .is_some_and(|e| e.contains("not that"))
    );

    // Not gated: read runs without asking anyone.
    let read = host
        .tool("ses_a", "read", json!({"filePath": "README.md"}))
        .await;
    assert_eq!(host.reply(read).await["ok"], true);

    // The daemon is down: a gated call cannot be asked about, so it does not run.
    laptop.ok(&["daemon", "stop"]);
    let call = host.tool("ses_a", "bash", json!({"command": "ls"})).await;
    let answer = tokio::time::timeout(Duration::from_secs(100), host.reply(call))
        .await
        .expect("answered");
    assert!(
        answer["error"].is_string(),
        "ran without a decision: {answer}"
    );
}
