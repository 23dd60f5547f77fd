//! Gemini CLI beside Claude Code on one machine, with the Gemini stand-in (`repowire-standin
//! --runtime gemini`, which plays docs/agents/gemini-cli.md): `repowire setup` wires
//! ~/.gemini/settings.json, a Gemini session registers at launch with backend `gemini`, is
//! woken through its box — Enter only once Gemini's paste window has passed — and handed its
//! messages by its BeforeAgent hook; a busy turn gets them at its end through AfterAgent's
//! `deny`; a dialog is never typed into. The real Gemini CLI does the same in gemini_real.rs.

use repowire_e2e::agents::{Agent, Home, Tmux, eventually};

/// A machine with Gemini CLI installed (`~/.gemini`), set up and running, with a Claude Code
/// stand-in `alpha` and a Gemini stand-in `beta`.
async fn machine(tmux: &Tmux) -> (Home, Agent, Agent) {
    machine_with(tmux, &[]).await
}

/// [`machine`] with more arguments for the Gemini stand-in.
async fn machine_with(tmux: &Tmux, gemini: &[&str]) -> (Home, Agent, Agent) {
    let home = Home::new(None);
    std::fs::create_dir_all(home.path().join(".gemini")).expect("~/.gemini");
    std::fs::write(home.path().join(".gemini/settings.json"), "{}").expect("settings.json");
    home.install_and_start();
    let alpha = home.agent(tmux, "alpha");
    let mut args = vec!["--runtime", "gemini"];
    args.extend_from_slice(gemini);
    let beta = home.agent_with(tmux, "beta", &args);
    alpha.hook_done("SessionStart", 1).await;
    beta.hook_done("SessionStart", 1).await;
    (home, alpha, beta)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gemini_session_registers_at_launch_and_is_woken_after_its_paste_window() {
    let tmux = Tmux::start();
    let (home, alpha, beta) = machine(&tmux).await;
    let peers = home.json(&["peer", "list"]);
    let row = peers
        .as_array()
        .and_then(|a| a.iter().find(|p| p["name"] == "beta"))
        .cloned()
        .unwrap_or_default();
    assert_eq!(row["backend"], "gemini", "{peers}");
    assert!(
        beta.context().contains("You are @beta"),
        "{}",
        beta.context()
    );

    let cid = alpha.ask(&tmux, 1, "beta", "is the build green?").await;
    let prompt = beta
        .wait("the wake prompt", |e| e["event"] == "prompt")
        .await;
    assert!(
        prompt["text"]
            .as_str()
            .is_some_and(|t| t.starts_with("[repowire] 1 new message from @alpha")),
        "{prompt}"
    );
    home.reaches_state(&cid, "injected").await;
    assert!(beta.context().contains("is the build green?"));
    let wake = home.wake_of(&beta.session_id()).expect("a wake");
    assert_eq!(wake["outcome"], "woken", "{wake}");
    // Enter came after Gemini's paste window: it was never taken as part of the paste.
    assert!(
        !beta.events().iter().any(|e| e["event"] == "enter_in_paste"),
        "an Enter landed inside the paste"
    );
}

/// On a loaded machine Gemini reads a paste, opens its paste window and draws the paste well
/// after tmux returned (here 400 ms): the wake counts the window from when it saw the paste
/// drawn, so its Enter still comes after it (counted from tmux's return, it came inside, and
/// the prompt stayed in the box with a newline: CI's stuck Gemini conversation).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gemini_that_draws_a_paste_late_still_gets_its_enter_after_the_window() {
    let tmux = Tmux::start();
    let (home, alpha, beta) = machine_with(&tmux, &["--paste-lag-ms", "400"]).await;
    let cid = alpha.ask(&tmux, 1, "beta", "is the build green?").await;
    home.reaches_state(&cid, "injected").await;
    assert!(beta.context().contains("is the build green?"));
    assert!(
        !beta.events().iter().any(|e| e["event"] == "enter_in_paste"),
        "an Enter landed inside the paste"
    );
    let wake = home.wake_of(&beta.session_id()).expect("a wake");
    assert_eq!(wake["outcome"], "woken", "{wake}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_busy_gemini_turn_gets_its_messages_at_its_end_and_a_dialog_is_never_typed_into() {
    let tmux = Tmux::start();
    let (home, alpha, beta) = machine(&tmux).await;

    // Busy: the message goes at the turn's end, as AfterAgent's `deny` (the next prompt).
    beta.submit(&tmux, "/busy");
    beta.wait("the busy turn", |e| e["event"] == "busy").await;
    let cid = alpha.ask(&tmux, 1, "beta", "status?").await;
    home.reaches_state(&cid, "delivered").await;
    beta.release();
    let cont = beta
        .wait("the turn continued", |e| e["event"] == "continue")
        .await;
    assert_eq!(cont["form"], "deny");
    assert!(
        cont["reason"]
            .as_str()
            .is_some_and(|r| r.contains("status?"))
    );
    home.reaches_state(&cid, "injected").await;

    // A dialog over the box: the wake types nothing and says it cannot.
    beta.submit(&tmux, "/dialog");
    beta.wait("the dialog", |e| {
        e["event"] == "reply" && e["text"] == "asking"
    })
    .await;
    let cid = alpha.ask(&tmux, 2, "beta", "can you review?").await;
    let wake = eventually("the wake gave up", || {
        home.wake_of(&beta.session_id())
            .filter(|w| w["outcome"] == "cannot_wake")
    })
    .await;
    assert!(
        wake["reason"]
            .as_str()
            .is_some_and(|r| r.contains("no Gemini CLI input box")),
        "{wake}"
    );
    assert!(!beta.events().iter().any(|e| e["event"] == "dialog_key"));
    // The person answers the dialog and sends a prompt: the message goes with it.
    tmux.run(&["send-keys", "-t", &beta.pane, "y"]);
    beta.wait("the dialog answered", |e| e["event"] == "dialog_key")
        .await;
    beta.submit(&tmux, "next");
    home.reaches_state(&cid, "injected").await;
    assert!(beta.context().contains("can you review?"));
}
