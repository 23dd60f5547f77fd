//! Codex beside Claude Code on one machine, with the Codex stand-in (`repowire-standin
//! --runtime codex`, which plays docs/agents/codex.md): `repowire setup` wires Codex's
//! config.toml, a Codex session registers at its first prompt with backend `codex`, is woken
//! through its composer and handed its messages by its own hooks; a dialog over the composer
//! is never typed into (the wake says it cannot), and a running turn is never steered by a
//! wake's Enter. The real Codex CLI does the same in codex_real.rs.

use repowire_e2e::agents::{Agent, Home, Tmux, bin, eventually};
use serde_json::Value;

fn peer<'a>(peers: &'a Value, name: &str) -> Option<&'a Value> {
    peers.as_array()?.iter().find(|p| p["name"] == name)
}

/// A machine with Codex installed (`~/.codex`), set up and running, with a Claude Code
/// stand-in `alpha` and a Codex stand-in `beta` that has had its first prompt.
async fn machine(tmux: &Tmux) -> (Home, Agent, Agent) {
    let home = Home::new(None);
    std::fs::create_dir_all(home.path().join(".codex")).expect("~/.codex");
    home.install_and_start();
    let config = std::fs::read_to_string(home.path().join(".codex/config.toml")).expect("config");
    assert!(config.contains("hook --runtime codex stop"), "{config}");
    let alpha = home.agent(tmux, "alpha");
    let beta = home.agent_with(tmux, "beta", &["--runtime", "codex"]);
    alpha.hook_done("SessionStart", 1).await;
    // Codex registers nothing until its first prompt.
    beta.wait("the composer drawn", |e| e["event"] == "start")
        .await;
    assert!(peer(&home.json(&["peer", "list"]), "beta").is_none());
    beta.submit(tmux, "hello");
    beta.hook_done("Stop", 1).await;
    (home, alpha, beta)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_codex_session_registers_as_codex_and_is_woken_through_its_composer() {
    let tmux = Tmux::start();
    let (home, alpha, beta) = machine(&tmux).await;
    let peers = home.json(&["peer", "list"]);
    assert_eq!(peer(&peers, "beta").expect("beta")["backend"], "codex");
    assert_eq!(
        peer(&peers, "alpha").expect("alpha")["backend"],
        "claude-code"
    );
    // Its session start told it who it is, as Codex hands context over.
    assert!(
        beta.context().contains("You are @beta"),
        "{}",
        beta.context()
    );

    let cid = alpha.ask(&tmux, 1, "beta", "is the build green?").await;
    // Typed into the composer (a short fixed prompt), submitted, confirmed by the hook.
    let prompt = beta
        .wait_nth(2, "the wake prompt", |e| e["event"] == "prompt")
        .await;
    assert!(
        prompt["text"]
            .as_str()
            .is_some_and(|t| t.starts_with("[repowire] 1 new message from @alpha")),
        "{prompt}"
    );
    home.reaches_state(&cid, "injected").await;
    assert_eq!(
        home.wake_of(&beta.session_id()).expect("a wake")["outcome"],
        "woken"
    );
    assert!(beta.context().contains("is the build green?"));
    assert_eq!(home.reason_of(&cid, "injected"), None);

    // A broadcast reaches both runtimes.
    home.ok(&["peer", "broadcast", "deploy at noon"]);
    for agent in [&alpha, &beta] {
        eventually("the broadcast handed over", || {
            agent.context().contains("deploy at noon").then_some(())
        })
        .await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dialog_over_the_composer_is_never_typed_into_and_the_wake_says_it_cannot() {
    let tmux = Tmux::start();
    let (home, alpha, beta) = machine(&tmux).await;
    beta.submit(&tmux, "/dialog");
    beta.hook_done("Stop", 2).await;

    let cid = alpha.ask(&tmux, 1, "beta", "can you review?").await;
    let wake = eventually("the wake gave up", || {
        home.wake_of(&beta.session_id())
            .filter(|w| w["outcome"] == "cannot_wake")
    })
    .await;
    assert!(
        wake["reason"]
            .as_str()
            .is_some_and(|r| r.contains("no Codex input box")),
        "{wake}"
    );
    // Not a key reached the dialog.
    assert!(
        !beta.events().iter().any(|e| e["event"] == "dialog_key"),
        "the wake typed into the dialog"
    );
    // The person answers the dialog and sends a prompt: the message goes with it, and its
    // sender is told why it waited.
    tmux.run(&["send-keys", "-t", &beta.pane, "y"]);
    beta.wait("the dialog answered", |e| e["event"] == "dialog_key")
        .await;
    beta.submit(&tmux, "next");
    home.reaches_state(&cid, "injected").await;
    let reason = home.reason_of(&cid, "injected").unwrap_or_default();
    assert!(reason.contains("cannot_wake"), "{reason}");
    assert!(beta.context().contains("can you review?"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_running_codex_turn_is_never_steered_and_gets_its_messages_at_its_end() {
    let tmux = Tmux::start();
    let (home, alpha, beta) = machine(&tmux).await;
    beta.submit(&tmux, "/busy");
    beta.wait("the busy turn", |e| e["event"] == "busy").await;

    let cid = alpha.ask(&tmux, 1, "beta", "status?").await;
    home.reaches_state(&cid, "delivered").await;
    beta.release();
    // Codex continues the turn on Stop's `block` decision, with the message.
    let cont = beta
        .wait("the turn continued", |e| e["event"] == "continue")
        .await;
    assert_eq!(cont["form"], "block");
    assert!(
        cont["reason"]
            .as_str()
            .is_some_and(|r| r.contains("status?"))
    );
    home.reaches_state(&cid, "injected").await;
    assert!(
        !beta.events().iter().any(|e| e["event"] == "steer"),
        "a wake pressed Enter into the running turn"
    );
}

/// `repowire link` on a Codex pane that has not registered yet (Codex registers at its first
/// prompt): the runtime is the one the pane runs, found by its process, and a `--backend` that
/// contradicts it is refused. Its first prompt then takes the linked peer over.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn link_finds_codex_in_its_pane_and_its_first_prompt_takes_the_link_over() {
    let tmux = Tmux::start();
    let home = Home::new(None);
    std::fs::create_dir_all(home.path().join(".codex")).expect("~/.codex");
    home.install_and_start();
    // The stand-in under Codex's own program name.
    let dir = tempfile::tempdir().expect("dir");
    let codex = dir.path().join("codex");
    std::fs::copy(bin("repowire-standin"), &codex).expect("copy");
    let beta = home.agent_program(&tmux, "beta", &codex, &["--runtime", "codex"]);
    beta.wait("the composer drawn", |e| e["event"] == "start")
        .await;

    let refused = home.repowire_in(
        Some(&tmux),
        &["link", "--pane", &beta.pane, "--backend", "claude-code"],
    );
    assert!(!refused.status.success());
    let said = String::from_utf8_lossy(&refused.stderr);
    assert!(said.contains("runs Codex, not Claude Code"), "{said}");

    let out = home.repowire_in(Some(&tmux), &["link", "--pane", &beta.pane, "--json"]);
    assert!(out.status.success(), "{out:?}");
    let linked: Value = serde_json::from_slice(&out.stdout).expect("json");
    assert_eq!(linked["backend"], "codex", "{linked}");
    let pid = beta
        .events()
        .iter()
        .find(|e| e["event"] == "start")
        .and_then(|e| e["pid"].as_i64())
        .expect("pid");
    assert_eq!(linked["agent_pid"], pid, "{linked}");
    let peer_id = linked["peer_id"].clone();

    // Its first prompt's hooks take the linked session over: the same peer.
    beta.submit(&tmux, "hello");
    beta.hook_done("Stop", 1).await;
    let peers = home.json(&["peer", "list"]);
    let row = peer(&peers, "beta").expect("beta");
    assert_eq!(row["peer_id"], peer_id, "{peers}");
    assert_eq!(row["backend"], "codex");
}

/// `repowire session resume` of a Codex session runs `codex resume ID` (here the stand-in under
/// `--command`): the same runtime session and Repowire session, and a message that waited for
/// it is handed over — at its first prompt, since a Codex session registers only then.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_codex_session_resumes_with_codex_resume_and_gets_what_waited() {
    let tmux = Tmux::start();
    let (home, _alpha, beta) = machine(&tmux).await;
    let runtime = beta.session_id();
    let listed = eventually("beta's session", || {
        home.json(&["session", "list"])
            .as_array()?
            .iter()
            .find(|s| s["executor"]["name"] == "beta")
            .cloned()
    })
    .await;
    let id = listed["session_id"].as_str().expect("id").to_owned();
    beta.submit(&tmux, "/exit");
    beta.wait("exit", |e| e["event"] == "exit").await;
    eventually("beta's session detached", || {
        home.json(&["session", "list"])
            .as_array()?
            .iter()
            .find(|s| s["session_id"] == id.as_str() && s["status"] == "detached")
            .cloned()
    })
    .await;
    let sent = home.json(&["session", "notify", &id, "while you were away"]);
    let message = sent["message_id"].as_str().expect("id").to_owned();

    let transcript = home.path().join("beta-resumed.jsonl");
    let standin = format!(
        "{} --runtime codex --transcript {}",
        bin("repowire-standin").display(),
        transcript.display()
    );
    let dry = home.json(&["session", "resume", &id, "--dry-run", "--command", &standin]);
    assert_eq!(
        dry["command"].as_str(),
        Some(format!("{standin} resume {runtime}").as_str()),
        "{dry}"
    );
    let out = home.repowire_in(
        Some(&tmux),
        &["session", "resume", &id, "--command", &standin, "--json"],
    );
    assert!(out.status.success(), "{out:?}");
    let started: Value = serde_json::from_slice(&out.stdout).expect("json");
    let resumed = Agent {
        pane: started["pane"].as_str().expect("the new pane").to_owned(),
        transcript,
    };
    let start = resumed
        .wait("the resumed Codex", |e| e["event"] == "start")
        .await;
    assert_eq!(start["session_id"], runtime.as_str());
    resumed.submit(&tmux, "continue");
    let session_start = resumed
        .wait("SessionStart at the first prompt", |e| {
            e["event"] == "hook" && e["hook"] == "SessionStart"
        })
        .await;
    assert_eq!(session_start["exit"], 0);
    eventually("the waiting message handed over", || {
        resumed
            .context()
            .contains("while you were away")
            .then_some(())
    })
    .await;
    home.reaches_state(&message, "injected").await;
    let again = home.json(&["session", "list"]);
    let row = again
        .as_array()
        .and_then(|a| a.iter().find(|s| s["session_id"] == id.as_str()))
        .cloned()
        .unwrap_or_default();
    assert_eq!(row["status"], "active", "{again}");
    assert_eq!(row["executor"]["name"], "beta", "{again}");
}
