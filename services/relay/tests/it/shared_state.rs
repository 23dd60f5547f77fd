//! Shared state: one small key-value store per tenant and circle. Tenants never see each
//! other's keys (same circle name, same key), circles are separate scopes, values are
//! bounded, and a circle holds at most MAX_STATE_KEYS keys.

use crate::common;

use common::{Db, TestRelay};
use repowire_e2e::client::TestClient;
use repowire_protocol::limits::MAX_STATE_KEYS;
use repowire_protocol::*;

both_backends!(
    shared_state_is_scoped_to_tenant_and_circle_and_bounded,
    a_tenants_shared_state_is_bounded_in_bytes_by_its_plan,
);

async fn set(
    c: &mut TestClient,
    peer: &PeerInfo,
    key: &str,
    value: Option<&str>,
) -> Result<(), ErrorFrame> {
    let id = c
        .send(Body::StateSet(StateSet {
            peer_id: peer.peer_id.clone(),
            key: key.into(),
            value: value.map(str::to_owned),
        }))
        .await;
    c.answer(id)
        .await
        .map(|body| assert!(matches!(body, Body::Ok(_)), "{body:?}"))
}

async fn get(c: &mut TestClient, peer: &PeerInfo, key: Option<&str>) -> State {
    let id = c
        .send(Body::StateGet(StateGet {
            peer_id: peer.peer_id.clone(),
            key: key.map(str::to_owned),
        }))
        .await;
    match c.answer(id).await {
        Ok(Body::State(s)) => s,
        other => panic!("expected state, got {other:?}"),
    }
}

async fn shared_state_is_scoped_to_tenant_and_circle_and_bounded(db: Db) {
    let relay = TestRelay::start(&db).await;
    let (_, key1) = relay.tenant("one").await;
    let (_, key2) = relay.tenant("two").await;
    let mut a = relay.client(&key1).await;
    let mut b = relay.client(&key1).await;
    let mut other_circle = relay.client(&key1).await;
    let mut other_tenant = relay.client(&key2).await;
    let alice = a.peer("alice", "dev").await;
    let bob = b.peer("bob", "dev").await;
    let olga = other_circle.peer("olga", "ops").await;
    let eve = other_tenant.peer("eve", "dev").await;

    set(&mut a, &alice, "deploy.status", Some("staging green"))
        .await
        .expect("stored");
    let seen = get(&mut b, &bob, Some("deploy.status")).await;
    assert_eq!(seen.circle, "dev");
    assert_eq!(seen.entries.len(), 1);
    assert_eq!(seen.entries[0].value, "staging green");
    assert_eq!(seen.entries[0].updated_by, alice.peer_id);

    // Same circle name, same key, another tenant: nothing, and its write does not touch ours.
    assert!(
        get(&mut other_tenant, &eve, Some("deploy.status"))
            .await
            .entries
            .is_empty()
    );
    set(&mut other_tenant, &eve, "deploy.status", Some("tenant two"))
        .await
        .expect("stored");
    assert_eq!(
        get(&mut b, &bob, None).await.entries[0].value,
        "staging green"
    );
    // Another circle of the same tenant is another scope.
    assert!(get(&mut other_circle, &olga, None).await.entries.is_empty());

    // Overwrite, delete, and reading a missing key.
    set(&mut b, &bob, "deploy.status", Some("prod at 14:00"))
        .await
        .expect("stored");
    let now = get(&mut a, &alice, Some("deploy.status")).await;
    assert_eq!(
        (now.entries[0].value.as_str(), &now.entries[0].updated_by),
        ("prod at 14:00", &bob.peer_id)
    );
    set(&mut a, &alice, "deploy.status", None)
        .await
        .expect("deleted");
    assert!(get(&mut a, &alice, None).await.entries.is_empty());

    // Only a peer of this connection may act; bad keys and big values change nothing.
    let id = a
        .send(Body::StateSet(StateSet {
            peer_id: bob.peer_id.clone(),
            key: "k".into(),
            value: Some("v".into()),
        }))
        .await;
    assert_eq!(
        a.answer(id).await.expect_err("not ours").code,
        ErrorCode::NotRegistered
    );
    a.send_raw(format!(
        r#"{{"v":1,"type":"state_set","id":"{}","peer_id":"{}","key":"k","value":"{}"}}"#,
        MessageId::new(),
        alice.peer_id.as_str(),
        "x".repeat(limits::MAX_STATE_VALUE_BYTES + 1)
    ))
    .await;
    assert_eq!(a.error().await.code, ErrorCode::TextTooLarge);
    assert!(get(&mut a, &alice, None).await.entries.is_empty());

    // A circle holds at most MAX_STATE_KEYS keys; existing keys can still change.
    for i in 0..MAX_STATE_KEYS {
        set(&mut a, &alice, &format!("k{i}"), Some("v"))
            .await
            .expect("stored");
    }
    let full = set(&mut a, &alice, "one-too-many", Some("v"))
        .await
        .expect_err("full");
    assert_eq!(full.code, ErrorCode::LimitExceeded);
    set(&mut a, &alice, "k0", Some("changed"))
        .await
        .expect("existing keys still change");
    assert_eq!(get(&mut b, &bob, None).await.entries.len(), MAX_STATE_KEYS);
    // The other tenant's circle of the same name is not full.
    set(&mut other_tenant, &eve, "another", Some("v"))
        .await
        .expect("stored");
}

/// Issue 30 item 7: a free-plan tenant stored 17 MB of shared state in seconds. Its state is
/// bounded in bytes (keys and values, across circles) by `max_state_bytes`; a write past it is
/// refused with `limit_exceeded` and stores nothing, and the tenant and its operator see the
/// bytes in use.
async fn a_tenants_shared_state_is_bounded_in_bytes_by_its_plan(db: Db) {
    let relay = TestRelay::start(&db).await;
    let (tenant, key) = relay
        .tenant_on(repowire_relay::tenancy::admin::NewTenant {
            name: "acme".into(),
            plan: Some("unlimited".into()),
            overrides: repowire_relay::storage::store::Limits {
                max_state_bytes: Some(1000),
                ..Default::default()
            },
            ..Default::default()
        })
        .await;
    let mut c = relay.client(&key).await;
    let dev = c.peer("a", "dev").await;
    let ops = c.peer("b", "ops").await;
    let v = |n: usize| "x".repeat(n);
    // 1 + 599 bytes in one circle, then 1 + 399 in another: exactly the limit.
    set(&mut c, &dev, "k", Some(&v(599))).await.expect("fits");
    set(&mut c, &ops, "k", Some(&v(399))).await.expect("fits");
    let refused = set(&mut c, &ops, "j", Some("y")).await.expect_err("full");
    assert_eq!(refused.code, ErrorCode::LimitExceeded, "{refused:?}");
    assert!(refused.message.contains("1000"), "{refused:?}");
    // Nothing was stored by the refusal.
    let id = c
        .send(Body::StateGet(StateGet {
            peer_id: ops.peer_id.clone(),
            key: None,
        }))
        .await;
    let Ok(Body::State(state)) = c.answer(id).await else {
        panic!("state")
    };
    assert_eq!(state.entries.len(), 1);
    // Replacing a value counts only the new one; deleting frees its bytes.
    set(&mut c, &dev, "k", Some(&v(500)))
        .await
        .expect("smaller");
    set(&mut c, &dev, "k", Some(&v(600)))
        .await
        .expect_err("one byte over");
    set(&mut c, &dev, "k", None).await.expect("deleted");
    set(&mut c, &ops, "j", Some(&v(500)))
        .await
        .expect("room again");
    // What is in use, for the operator and for the tenant itself.
    let admin = common::Admin::new(&relay);
    let (_, detail) = admin.get(&format!("/tenants/{tenant}")).await;
    assert_eq!(detail["state_bytes"], 400 + 501, "{detail}");
    assert_eq!(detail["effective_limits"]["max_state_bytes"], 1000);
    let limits: serde_json::Value = reqwest::Client::new()
        .get(format!("{}/v1/limits", relay.http))
        .bearer_auth(&key)
        .send()
        .await
        .expect("send")
        .json()
        .await
        .expect("json");
    assert_eq!(limits["state_bytes"], 901, "{limits}");
    relay.stop().await;
}
