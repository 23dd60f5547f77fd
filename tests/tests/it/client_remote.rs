//! Two machines (two HOMEs, two daemons) through one real relay process, including the relay
//! going away while a message is sent.

use std::time::Duration;

use repowire_e2e::agents::{Home, Tmux, bin, eventually};
use repowire_e2e::process::{RelayProcess, relay_bin};
use serde_json::Value;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_daemons_through_one_relay_ask_ack_and_survive_a_relay_outage() {
    let data = tempfile::tempdir().expect("data");
    let data_dir = data.path().to_str().expect("utf8").to_owned();
    let relay = RelayProcess::start(&relay_bin(), &["--data-dir", &data_dir], &[]).await;
    let key = relay.first_key.clone().expect("key");
    let addr = relay.http.trim_start_matches("http://").to_owned();

    let tmux = Tmux::start();
    let laptop = Home::new(Some((relay.http.clone(), key.clone())));
    let desktop = Home::new(Some((relay.http.clone(), key.clone())));
    laptop.install_and_start();
    desktop.install_and_start();
    let web = laptop.agent(&tmux, "web");
    let api = desktop.agent(&tmux, "api");
    web.hook_done("SessionStart", 1).await;
    api.hook_done("SessionStart", 1).await;

    // Across daemons: web asks api, api acks with a reply, web gets it.
    let repowire = bin("repowire").to_string_lossy().into_owned();
    web.submit(
        &tmux,
        &format!("/run {repowire} peer ask api 'schema for users?' --json"),
    );
    let tool = web.wait("ask tool call", |e| e["event"] == "tool").await;
    let sent: Value = serde_json::from_str(tool["stdout"].as_str().unwrap_or("")).expect("json");
    let cid = sent["correlation_id"].as_str().expect("cid").to_owned();
    api.wait("ask in api's context", |e| {
        e["event"] == "context"
            && e["text"]
                .as_str()
                .is_some_and(|t| t.contains("schema for users?"))
    })
    .await;
    api.submit(
        &tmux,
        &format!("/run {repowire} peer ack {cid} -m '{{id, name, email}}'"),
    );
    web.wait("reply in web's context", |e| {
        e["event"] == "context"
            && e["text"]
                .as_str()
                .is_some_and(|t| t.contains("{id, name, email}"))
    })
    .await;
    eventually("acked", || {
        let s = laptop.states(&cid);
        (s.contains(&"injected".into()) && s.contains(&"acked".into())).then_some(())
    })
    .await;

    // Api starts a long turn and a notification reaches its daemon meanwhile.
    api.submit(&tmux, "/busy");
    api.wait("api busy", |e| e["event"] == "busy").await;
    let early = laptop.json(&[
        "peer",
        "notify",
        "api",
        "handed over during the outage",
        "--from",
        "web",
    ]);
    let early_id = early["message_id"].as_str().expect("id").to_owned();
    eventually("delivered to api's daemon", || {
        laptop
            .states(&early_id)
            .contains(&"delivered".into())
            .then_some(())
    })
    .await;

    // The relay goes away. A message sent meanwhile is queued, and says so.
    relay.signal("TERM");
    relay.wait(Duration::from_secs(15)).await;
    eventually("laptop notices the outage", || {
        (laptop.link_state() == "connecting").then_some(())
    })
    .await;
    eventually("desktop notices the outage", || {
        (desktop.link_state() == "connecting").then_some(())
    })
    .await;
    // Api's turn ends while the relay is down: it gets the notification through its Stop hook;
    // the `injected` receipt waits for the link to return.
    api.release();
    api.wait("handed over at the turn boundary", |e| {
        e["event"] == "continue"
            && e["reason"]
                .as_str()
                .is_some_and(|t| t.contains("handed over during the outage"))
    })
    .await;
    let queued = laptop.json(&[
        "peer",
        "notify",
        "api",
        "deploy done while you were away",
        "--from",
        "web",
    ]);
    assert_eq!(queued["state"], "queued", "{queued}");
    let id = queued["message_id"].as_str().expect("id").to_owned();
    assert_eq!(
        laptop.json(&["peer", "status", &id])["message"]["state"],
        "queued"
    );
    assert_eq!(laptop.json(&["daemon", "status"])["outbox"], 1);

    // It comes back on the same address and data: the outbox drains, api gets the message once.
    let _relay = RelayProcess::start_on(&relay_bin(), &addr, &["--data-dir", &data_dir], &[]).await;
    api.wait("the queued notify", |e| {
        e["event"] == "context"
            && e["text"]
                .as_str()
                .is_some_and(|t| t.contains("deploy done while you were away"))
    })
    .await;
    eventually("injected after the outage", || {
        laptop
            .states(&id)
            .contains(&"injected".into())
            .then_some(())
    })
    .await;
    assert_eq!(laptop.json(&["daemon", "status"])["outbox"], 0);
    eventually("the receipt kept during the outage arrives", || {
        laptop
            .states(&early_id)
            .contains(&"injected".into())
            .then_some(())
    })
    .await;
    let seen = api
        .events()
        .iter()
        .filter(|e| {
            e["text"]
                .as_str()
                .is_some_and(|t| t.contains("deploy done while you were away"))
        })
        .count();
    assert_eq!(seen, 1, "shown more than once");
}

/// The relay answers `list_peers` a page at a time, at most 500 peers a page (issue 30 item 7);
/// the daemon follows `next_cursor`, so `peer list --all` shows every peer of a tenant with more.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn peer_list_shows_every_peer_of_a_tenant_with_more_than_one_page() {
    let data = tempfile::tempdir().expect("data");
    let data_dir = data.path().to_str().expect("utf8").to_owned();
    let relay = RelayProcess::start(&relay_bin(), &["--data-dir", &data_dir], &[]).await;
    let key = relay.first_key.clone().expect("key");
    let mut crowd = repowire_e2e::client::TestClient::connect(&relay.http, &relay.ws, &key).await;
    for i in 0..520 {
        crowd.peer(&format!("crowd-{i:03}"), "dev").await;
    }
    let home = Home::new(Some((relay.http.clone(), key)));
    home.install_and_start();
    let listed = home.json(&["peer", "list", "--all"]);
    let mut names: Vec<&str> = listed
        .as_array()
        .expect("peers")
        .iter()
        .filter_map(|p| p["name"].as_str())
        .filter(|n| n.starts_with("crowd-"))
        .collect();
    let before = names.len();
    names.dedup();
    assert_eq!((before, names.len()), (520, 520), "each crowd peer once");
    home.ok(&["daemon", "stop"]);
}
