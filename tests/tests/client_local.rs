//! The client on one machine: a real daemon with its embedded relay, real tmux, and stand-in
//! agents that call the hooks `repowire setup` installed, exactly as Claude Code would.

use repowire_e2e::agents::{Home, Tmux, bin, eventually};
use serde_json::Value;

fn peer_status(home: &Home, id: &str) -> Value {
    home.json(&["peer", "status", id])
}

fn states(status: &Value) -> Vec<String> {
    status["events"]
        .as_array()
        .map(|e| e.iter().map(|x| x["state"].as_str().unwrap_or("").to_owned()).collect())
        .unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_agents_ask_and_ack_with_honest_delivery_states() {
    let tmux = Tmux::start();
    let home = Home::new(None);
    home.install_and_start();
    let alpha = home.agent(&tmux, "alpha");
    let beta = home.agent(&tmux, "beta");
    alpha.hook_done("SessionStart", 1).await;
    beta.hook_done("SessionStart", 1).await;
    assert!(alpha.context().contains("You are @alpha"), "{}", alpha.context());

    // Alpha's agent runs the CLI (a tool call): the daemon knows it is alpha from the process
    // tree, not from anything the command says.
    let repowire = bin("repowire").to_string_lossy().into_owned();
    alpha.submit(
        &tmux,
        &format!("/run {repowire} peer ask beta 'which port does the API use?' --json"),
    );
    let tool = alpha.wait("the ask tool call", |e| e["event"] == "tool").await;
    assert_eq!(tool["exit"], 0, "{tool}");
    let sent: Value = serde_json::from_str(tool["stdout"].as_str().unwrap_or("")).expect("json");
    assert_eq!(sent["state"], "accepted", "{sent}");
    let cid = sent["correlation_id"].as_str().expect("cid").to_owned();

    // Beta is idle: it is woken through tmux and gets the ask as hook context.
    let ctx = beta
        .wait("the ask in beta's context", |e| {
            e["event"] == "context" && e["text"].as_str().is_some_and(|t| t.contains(&cid))
        })
        .await;
    let text = ctx["text"].as_str().unwrap_or("");
    assert!(text.contains("which port does the API use?"), "{text}");
    assert!(text.contains(&format!("@alpha → @beta [ask #{cid}]")), "{text}");
    // What was typed into beta's pane is only the short wake-up prompt.
    let typed: Vec<String> = beta
        .events()
        .iter()
        .filter(|e| e["event"] == "prompt")
        .map(|e| e["text"].as_str().unwrap_or("").to_owned())
        .collect();
    assert_eq!(typed.len(), 1, "{typed:?}");
    assert!(typed[0].starts_with("[repowire] 1 new message from @alpha"), "{typed:?}");

    let injected = eventually("ask injected", || {
        let s = peer_status(&home, &cid);
        states(&s).contains(&"injected".to_owned()).then_some(s)
    })
    .await;
    assert_eq!(injected["message"]["kind"], "ask");

    // Beta acks with a reply through its own tool call.
    beta.submit(&tmux, &format!("/run {repowire} peer ack {cid} -m 'port 8080'"));
    let tool = beta.wait("the ack tool call", |e| e["event"] == "tool").await;
    assert_eq!(tool["exit"], 0, "{tool}");

    // Alpha gets the reply (woken, through context) and the ask's history is complete.
    alpha
        .wait("the reply in alpha's context", |e| {
            e["event"] == "context"
                && e["text"].as_str().is_some_and(|t| t.contains("port 8080") && t.contains(&format!("[reply to #{cid}]")))
        })
        .await;
    let done = eventually("ask acked", || {
        let s = peer_status(&home, &cid);
        (s["message"]["state"] == "acked").then_some(s)
    })
    .await;
    let seen = states(&done);
    let order = ["queued", "accepted", "delivered", "injected", "acked"];
    let positions: Vec<usize> = order
        .iter()
        .map(|s| seen.iter().position(|x| x == s).unwrap_or_else(|| panic!("{s} missing in {seen:?}")))
        .collect();
    assert!(positions.windows(2).all(|w| w[0] < w[1]), "{seen:?}");
    assert_eq!(done["message"]["reply"], "port 8080");
    if std::env::var_os("E2E_DUMP").is_some() {
        for e in alpha.events().iter().chain(beta.events().iter()) { eprintln!("{e}"); }
        eprintln!("{}", home.log());
    }
    drop(tmux);
}
