//! The tenant wall inside the daemon (issue 15.1): a message queued while the daemon was set up
//! for one relay and tenant never reaches another after the configuration changes. It stays
//! tied to its relay, is listed as such, and goes out when the machine uses that relay again.

use repowire_e2e::agents::{Home, eventually};
use repowire_e2e::client::TestClient;
use repowire_e2e::process::{RelayProcess, relay_bin};
use repowire_protocol::{Body, Register};
use serde_json::Value;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_message_queued_for_one_relay_never_reaches_another_tenant() {
    let (dir_a, dir_b) = (
        tempfile::tempdir().expect("a"),
        tempfile::tempdir().expect("b"),
    );
    let data_a = dir_a.path().to_str().expect("utf8").to_owned();
    let data_b = dir_b.path().to_str().expect("utf8").to_owned();
    let relay_a = RelayProcess::start(&relay_bin(), &["--data-dir", &data_a], &[]).await;
    let relay_b = RelayProcess::start(&relay_bin(), &["--data-dir", &data_b], &[]).await;
    let key_a = relay_a.first_key.clone().expect("key a");
    let key_b = relay_b.first_key.clone().expect("key b");
    let addr_a = relay_a.http.trim_start_matches("http://").to_owned();

    // A peer named "target" on each relay, in its own tenant.
    let mut on_a = TestClient::connect(&relay_a.http, &relay_a.ws, &key_a).await;
    let target_a = on_a.peer("target", "default").await;
    let mut on_b = TestClient::connect(&relay_b.http, &relay_b.ws, &key_b).await;
    on_b.peer("target", "default").await;
    assert_ne!(on_a.tenant_id, on_b.tenant_id);

    let mut home = Home::new(Some((relay_a.http.clone(), key_a.clone())));
    home.install_and_start();
    eventually("connected to relay a", || {
        (home.link_state() == "connected").then_some(())
    })
    .await;

    // The person at this terminal is a peer on relay a (`peer list` registers it).
    home.json(&["peer", "list"]);

    // Relay a goes away; a message is queued for it.
    drop(on_a);
    relay_a.signal("KILL");
    eventually("the link notices", || {
        (home.link_state() != "connected").then_some(())
    })
    .await;
    let queued = home.json(&[
        "peer",
        "notify",
        "target",
        "for tenant A only",
        "--from",
        "cli",
    ]);
    let queued_id = queued["message_id"].as_str().expect("id").to_owned();

    // The machine is switched to relay b (another tenant).
    home.ok(&["daemon", "stop"]);
    home.set_relay(Some((relay_b.http.clone(), key_b.clone())));
    home.ok(&["daemon", "start"]);
    eventually("connected to relay b", || {
        (home.link_state() == "connected").then_some(())
    })
    .await;
    // Whatever the daemon resends on connecting goes out before this, on the same link.
    home.json(&[
        "peer",
        "notify",
        "target",
        "after the switch",
        "--from",
        "cli",
    ]);
    loop {
        let text = on_b
            .expect(|f| match &f.body {
                Body::Deliver(d) => Some(d.message.text.clone()),
                _ => None,
            })
            .await;
        assert_ne!(
            text, "for tenant A only",
            "a message crossed the tenant wall"
        );
        if text == "after the switch" {
            break;
        }
    }

    // It is listed as waiting for relay a, in `status`, `daemon status` and `outbox list`.
    let status = home.json(&["daemon", "status"]);
    let elsewhere = status["queued_elsewhere"].as_array().expect("listed");
    assert_eq!(elsewhere.len(), 1, "{status:#}");
    let realm = elsewhere[0]["realm"].as_str().expect("realm").to_owned();
    assert!(realm.starts_with(&relay_a.http), "{realm}");
    assert_eq!(elsewhere[0]["messages"], 1);
    assert!(home.ok(&["status"]).contains(&realm));
    let outbox = home.json(&["outbox", "list"]);
    let realms: Vec<&Value> = outbox["realms"]
        .as_array()
        .expect("realms")
        .iter()
        .collect();
    assert!(
        realms
            .iter()
            .any(|r| r["realm"] == realm.as_str() && r["current"] == false)
    );
    let refused = home.repowire(&["outbox", "drop", status["realm"].as_str().expect("current")]);
    assert!(
        !refused.status.success(),
        "the current relay's queue is not dropped"
    );

    // Back on relay a (same address, same data): the message goes out there, as the peer the
    // session had on relay a.
    home.ok(&["daemon", "stop"]);
    let relay_a =
        RelayProcess::start_on(&relay_bin(), &addr_a, &["--data-dir", &data_a], &[]).await;
    home.set_relay(Some((relay_a.http.clone(), key_a.clone())));
    home.ok(&["daemon", "start"]);
    let mut on_a = TestClient::connect(&relay_a.http, &relay_a.ws, &key_a).await;
    on_a.register(Register {
        backend: "claude-code".into(),
        path: Some("/work/target".into()),
        reclaim: Some(target_a.peer_id.clone()),
        ..Default::default()
    })
    .await;
    let got = on_a.delivered_to(&target_a.peer_id).await;
    assert_eq!(got.message.text, "for tenant A only");
    assert_eq!(
        got.message.message_id.to_string(),
        queued_id,
        "the same message, not a copy"
    );
    eventually("nothing left queued", || {
        let status = home.json(&["daemon", "status"]);
        (status["outbox"] == 0
            && status["queued_elsewhere"]
                .as_array()
                .is_some_and(Vec::is_empty))
        .then_some(())
    })
    .await;
}
