//! Tenant limits enforced where a tenant spends (issue 16): message size, inbox cap, live peers,
//! connections, the per-minute rate and the monthly quota. Each refusal has its documented code,
//! stores nothing and is counted by limit and plan; a change through the admin API applies
//! without a restart. One relay process here (the in-process bus); `limits_cluster.rs` has the
//! cluster-wide cases on Redis.

use crate::common;

use common::{Db, TestRelay, WAIT, client, counter};
use repowire_protocol::{
    Ack, Body, DeliveryState, ErrorCode, Frame, PeerInfo, PresenceEvent, ReceiptState, Register,
};
use repowire_relay::RelayConfig;
use repowire_relay::storage::store::Limits;
use repowire_relay::tenancy::admin::NewTenant;
use serde_json::json;

async fn tenant_with(relay: &TestRelay, name: &str, overrides: Limits) -> (String, String) {
    relay
        .tenant_on(NewTenant {
            name: name.into(),
            plan: Some("unlimited".into()),
            overrides,
            ..Default::default()
        })
        .await
}

/// The messages counted for a tenant (every hour there is).
async fn counted(relay: &TestRelay, tenant: &str) -> i64 {
    relay
        .state
        .store
        .messages_counted(tenant, 0, i64::MAX)
        .await
        .expect("usage")
}

async fn patch_tenant(relay: &TestRelay, tenant: &str, body: serde_json::Value) {
    let response = reqwest::Client::new()
        .patch(format!("{}/admin/v1/tenants/{tenant}", relay.http))
        .bearer_auth("test-admin-token")
        .json(&body)
        .send()
        .await
        .expect("patch");
    assert_eq!(response.status(), 200, "{:?}", response.text().await);
}

fn notify(from: &PeerInfo, to: &str, text: &str) -> Frame {
    client::notify_frame(from, to, text)
}

async fn size_inbox_cap_and_live_peers_are_refused_and_store_nothing(db: Db) {
    let relay = TestRelay::start(&db).await;
    let (tenant, key) = tenant_with(
        &relay,
        "acme",
        Limits {
            max_message_bytes: Some(10),
            inbox_cap: Some(2),
            max_peers: Some(2),
            ..Limits::default()
        },
    )
    .await;
    let mut a = relay.client(&key).await;
    let alice = a.peer("alice", "dev").await;
    {
        // bob registers, then his connection ends: he is stored, offline, and his inbox fills.
        let mut b = relay.client(&key).await;
        b.peer("bob", "dev").await;
    }
    a.expect(|f| match &f.body {
        Body::Presence(p) if p.event == PresenceEvent::Offline && p.peer.name == "bob" => Some(()),
        _ => None,
    })
    .await;

    let big = a.notify(&alice, "bob", "0123456789A").await;
    let e = big.expect_err("11 bytes over a limit of 10");
    assert_eq!(e.code, ErrorCode::TextTooLarge);
    assert!(e.message.contains("allows 10"), "{}", e.message);
    a.notify(&alice, "bob", "0123456789").await.expect("fits");
    a.notify(&alice, "bob", "second").await.expect("fits");
    let full = a.notify(&alice, "bob", "third").await;
    assert_eq!(full.expect_err("over the cap").code, ErrorCode::InboxFull);
    assert_eq!(counted(&relay, &tenant).await, 2, "only what was accepted");

    // Live peers: alice, and bob is gone, so one more may register, not two.
    let mut c = relay.client(&key).await;
    let carol = c.peer("carol", "dev").await;
    let id = c
        .send(Body::Register(repowire_protocol::Register {
            name: Some("dave".into()),
            backend: "claude-code".into(),
            ..Default::default()
        }))
        .await;
    let e = c.answer(id).await.expect_err("a third live peer");
    assert_eq!(e.code, ErrorCode::LimitExceeded);
    assert!(e.message.contains("2 live peers"), "{}", e.message);
    assert_eq!(
        relay
            .state
            .store
            .peers_named(&tenant, "dave")
            .await
            .expect("db")
            .len(),
        0,
        "a refused registration stores no peer"
    );
    // A live peer registering again (a reclaim) takes no new place.
    let again = c
        .register(repowire_protocol::Register {
            reclaim: Some(carol.peer_id.clone()),
            backend: "claude-code".into(),
            path: Some("/work/carol".into()),
            ..Default::default()
        })
        .await;
    assert!(again.reclaimed);
    assert_eq!(again.peer.peer_id, carol.peer_id);

    let metrics = relay.metrics().await;
    for (reason, n) in [("message_bytes", 1.0), ("peers", 1.0)] {
        let series =
            format!("repowire_limit_refusals_total{{reason=\"{reason}\",plan=\"unlimited\"}}");
        assert_eq!(counter(&metrics, &series), n, "{series}\n{metrics}");
    }
    relay.stop().await;
}

async fn the_monthly_quota_refuses_with_its_reset_and_still_settles_retries_and_replies(db: Db) {
    let relay = TestRelay::start(&db).await;
    let (tenant, key) = tenant_with(
        &relay,
        "acme",
        Limits {
            messages_per_month: Some(2),
            ..Limits::default()
        },
    )
    .await;
    let (mut a, mut b) = (relay.client(&key).await, relay.client(&key).await);
    let alice = a.peer("alice", "dev").await;
    let bob = b.peer("bob", "dev").await;

    let asked = a.ask(&alice, "bob", "ready?").await.expect("first");
    let second = notify(&alice, "bob", "second");
    a.send_frame(&second).await;
    a.answer(second.id).await.expect("second");

    let e = a
        .notify(&alice, "bob", "third")
        .await
        .expect_err("the month's two are spent");
    assert_eq!(e.code, ErrorCode::QuotaExceeded);
    assert!(e.message.contains("resets at"), "{}", e.message);
    let wait = e.retry_after_ms.expect("the time to the reset");
    assert!(wait > 0 && wait <= 31 * 24 * 3600 * 1000, "{wait}");

    // The second sent again (its answer lost): still accepted, not refused.
    a.send_frame(&second).await;
    match a.answer(second.id).await {
        Ok(Body::Accepted(acc)) => assert_eq!(acc.message_id, second.id),
        other => panic!("a retry of a stored message must be accepted: {other:?}"),
    }
    // A reply to the ask still goes through: the conversation could start, so it can finish.
    let cid = asked.correlation_id.expect("an ask has a thread");
    let reply = b
        .submit(Body::Ack(Ack {
            from: bob.peer_id.clone(),
            correlation_id: cid,
            reply: Some("yes".into()),
        }))
        .await;
    assert!(reply.is_ok(), "{reply:?}");
    assert_eq!(
        counted(&relay, &tenant).await,
        3,
        "two messages and a reply"
    );
    let metrics = relay.metrics().await;
    let series = "repowire_limit_refusals_total{reason=\"messages_per_month\",plan=\"unlimited\"}";
    assert_eq!(counter(&metrics, series), 1.0, "{metrics}");
    relay.stop().await;
}

async fn the_rate_is_one_bucket_for_the_tenant_and_a_change_applies_at_once(db: Db) {
    // One message a minute with a burst of ten: nothing refills while the test runs.
    let mut config = RelayConfig::for_tests();
    config.rate_burst_secs = 600;
    let relay = TestRelay::start_with(&db, config).await;
    let (tenant, key) = tenant_with(
        &relay,
        "acme",
        Limits {
            messages_per_minute: Some(1),
            ..Limits::default()
        },
    )
    .await;
    let (_, other_key) = relay.tenant("other").await;
    let (mut a, mut b) = (relay.client(&key).await, relay.client(&key).await);
    let alice = a.peer("alice", "dev").await;
    let bob = b.peer("bob", "dev").await;

    // Ten in all, from two connections: one bucket.
    for i in 0..10 {
        let (c, from, to) = if i % 2 == 0 {
            (&mut a, &alice, "bob")
        } else {
            (&mut b, &bob, "alice")
        };
        c.notify(from, to, &format!("n{i}"))
            .await
            .expect("in the burst");
    }
    let e = b
        .notify(&bob, "alice", "one too many")
        .await
        .expect_err("the burst is spent");
    assert_eq!(e.code, ErrorCode::RateLimited);
    let wait = e.retry_after_ms.expect("when to retry");
    assert!(wait > 50_000 && wait <= 60_000, "about a minute: {wait}");
    assert!(e.message.contains("1 messages a minute"), "{}", e.message);
    assert_eq!(counted(&relay, &tenant).await, 10);

    // Another tenant has its own limits.
    let mut o = relay.client(&other_key).await;
    let olive = o.peer("olive", "dev").await;
    o.notify(&olive, "olive", "mine").await.expect("unaffected");

    // Lifting the limit through the admin API applies to the next message, without a restart.
    patch_tenant(
        &relay,
        &tenant,
        json!({"overrides": {"messages_per_minute": null}}),
    )
    .await;
    b.notify(&bob, "alice", "now").await.expect("no limit now");
    relay.stop().await;
}

async fn connections_over_the_limit_are_refused_before_the_upgrade(db: Db) {
    let relay = TestRelay::start(&db).await;
    let (_, key) = tenant_with(
        &relay,
        "acme",
        Limits {
            max_connections: Some(1),
            ..Limits::default()
        },
    )
    .await;
    let first = relay.client(&key).await;
    let token = client::token(&relay.http, &key).await.expect("token").token;
    let refused = client::open(&relay.ws, Some(&token)).await;
    assert_eq!(refused.err(), Some(403), "a second connection");
    drop(first);
    // The slot is let go when the first connection's task ends.
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        if client::open(&relay.ws, Some(&token)).await.is_ok() {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the slot was never let go"
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    let metrics = relay.metrics().await;
    let series = "repowire_limit_refusals_total{reason=\"connections\",plan=\"unlimited\"}";
    assert!(counter(&metrics, series) >= 1.0, "{metrics}");
    relay.stop().await;
}

/// GET with an optional bearer credential: (status, JSON body or null).
async fn get(relay: &TestRelay, path: &str, bearer: Option<&str>) -> (u16, serde_json::Value) {
    let url = format!("{}{path}", relay.http);
    repowire_e2e::http_json(reqwest::Method::GET, &url, bearer, None).await
}

async fn a_tenant_reads_its_own_limits_and_usage_and_no_one_elses(db: Db) {
    let relay = TestRelay::start(&db).await;
    let (tenant, key) = tenant_with(
        &relay,
        "acme",
        Limits {
            messages_per_month: Some(100),
            ..Limits::default()
        },
    )
    .await;
    let (other, other_key) = relay.tenant("other").await;
    let mut a = relay.client(&key).await;
    let alice = a.peer("alice", "dev").await;
    a.notify(&alice, "alice", "hello").await.expect("notify");

    let (status, with_key) = get(&relay, "/v1/limits", Some(&key)).await;
    assert_eq!(status, 200, "{with_key}");
    assert_eq!(with_key["tenant_id"], tenant.as_str());
    assert_eq!(with_key["plan"], "unlimited");
    assert_eq!(with_key["limits"]["messages_per_month"], 100);
    assert_eq!(with_key["limits"]["max_peers"], serde_json::Value::Null);
    assert_eq!(with_key["month"]["messages"], 1);
    assert!(with_key["month"]["resets_at_ms"].as_i64() > with_key["month"]["start_ms"].as_i64());
    // A token from the key reads the same.
    let jwt = client::token(&relay.http, &key).await.expect("token").token;
    let (status, with_jwt) = get(&relay, "/v1/limits", Some(&jwt)).await;
    assert_eq!((status, &with_jwt), (200, &with_key));

    let (status, usage) = get(&relay, "/v1/usage?granularity=month", Some(&jwt)).await;
    assert_eq!(status, 200, "{usage}");
    let periods = usage["periods"].as_array().expect("periods");
    assert_eq!(periods.len(), 1, "{usage}");
    assert_eq!(periods[0]["tenant_id"], tenant.as_str());
    assert_eq!(periods[0]["metrics"]["messages_notify"], 1);

    // Another tenant's credential reads that tenant only.
    let (_, theirs) = get(&relay, "/v1/usage", Some(&other_key)).await;
    assert_eq!(theirs["periods"], serde_json::json!([]), "{theirs}");
    let (_, their_limits) = get(&relay, "/v1/limits", Some(&other_key)).await;
    assert_eq!(their_limits["tenant_id"], other.as_str());

    // No credential, the admin token, a bad query: refused, with the JSON error shape.
    for (bearer, path, want, code) in [
        (None, "/v1/limits", 401, "unauthorized"),
        (Some("test-admin-token"), "/v1/limits", 401, "unauthorized"),
        (
            Some(key.as_str()),
            "/v1/usage?granularity=week",
            400,
            "invalid_request",
        ),
        (
            Some(key.as_str()),
            "/v1/usage?tenant=other",
            400,
            "invalid_request",
        ),
    ] {
        let (status, body) = get(&relay, path, bearer).await;
        assert_eq!(status, want, "{path}: {body}");
        assert_eq!(body["error"]["code"], code, "{path}: {body}");
    }
    relay.stop().await;
}

/// The tenant-facing HTTP endpoints are rate-limited per credential: past the burst, `429
/// rate_limited` with `Retry-After` in whole seconds, and nothing is read or minted; another
/// credential is not held back.
async fn http_requests_past_the_rate_get_429_with_retry_after(db: Db) {
    let mut config = RelayConfig::for_tests();
    config.http_requests_per_minute = 1;
    config.http_burst = 2;
    let relay = TestRelay::start_with(&db, config).await;
    let (_, key) = relay.tenant("acme").await;
    let (_, other) = relay.tenant("beta").await;
    let http = reqwest::Client::new();
    let exchange = |key: String| {
        let http = http.clone();
        let url = format!("{}/v1/token", relay.http);
        async move {
            http.post(url)
                .json(&json!({ "api_key": key }))
                .send()
                .await
                .expect("token")
        }
    };
    assert_eq!(exchange(key.clone()).await.status(), 200);
    assert_eq!(get(&relay, "/v1/limits", Some(&key)).await.0, 200);
    let refused = exchange(key.clone()).await;
    assert_eq!(refused.status(), 429);
    let wait: u64 = refused.headers()["retry-after"]
        .to_str()
        .expect("ascii")
        .parse()
        .expect("whole seconds");
    assert!((1..=60).contains(&wait), "Retry-After: {wait}");
    let body: serde_json::Value = refused.json().await.expect("json");
    assert_eq!(body["error"]["code"], "rate_limited", "{body}");
    let (status, body) = get(&relay, "/v1/usage", Some(&key)).await;
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (429, Some("rate_limited"))
    );
    assert_eq!(
        exchange(other).await.status(),
        200,
        "another key is not held back"
    );
    relay.stop().await;
}

both_backends!(
    http_requests_past_the_rate_get_429_with_retry_after,
    a_tenant_reads_its_own_limits_and_usage_and_no_one_elses,
    size_inbox_cap_and_live_peers_are_refused_and_store_nothing,
    the_monthly_quota_refuses_with_its_reset_and_still_settles_retries_and_replies,
    the_rate_is_one_bucket_for_the_tenant_and_a_change_applies_at_once,
    connections_over_the_limit_are_refused_before_the_upgrade,
    stored_peers_are_bounded_by_forgetting_the_longest_offline_idle_ones,
);

/// Waits until `watcher` sees `name` go offline.
async fn gone(watcher: &mut common::TestClient, name: &str) {
    watcher
        .expect(|f| match &f.body {
            Body::Presence(p) if p.event == PresenceEvent::Offline && p.peer.name == name => {
                Some(())
            }
            _ => None,
        })
        .await;
}

/// Issue 30 item 7: a tenant's stored peers (live and offline) are bounded by its plan's
/// `max_stored_peers`. A new peer past it makes room by forgetting the longest-offline peer
/// that holds nothing (no entry waiting, no open ask sent or received); when none may go, the
/// registration is `limit_exceeded` and stores nothing. Live peers are never forgotten.
async fn stored_peers_are_bounded_by_forgetting_the_longest_offline_idle_ones(db: Db) {
    let mut config = RelayConfig::for_tests();
    // Offline peers may go at once here; the default keeps one seen in the last 10 minutes.
    config.forget_offline_peers_after_secs = 0;
    let relay = TestRelay::start_with(&db, config).await;
    let (tenant, key) = tenant_with(
        &relay,
        "acme",
        Limits {
            max_stored_peers: Some(5),
            ..Limits::default()
        },
    )
    .await;
    let store = relay.state.store.clone();
    let mut a = relay.client(&key).await;
    let lead = a.peer("lead", "dev").await;
    // `waiting` leaves, then a message for it waits in its inbox.
    let mut w = relay.client(&key).await;
    let waiting = w.peer("waiting", "dev").await;
    drop(w);
    gone(&mut a, "waiting").await;
    a.notify(&lead, "waiting", "while you were away")
        .await
        .expect("accepted");
    // `asked` received an ask that is still open; `asker` sent one.
    let mut b = relay.client(&key).await;
    let asked = b.peer("asked", "dev").await;
    a.ask(&lead, "asked", "which port?")
        .await
        .expect("accepted");
    let got = b.delivered_to(&asked.peer_id).await;
    b.receipt(
        &asked.peer_id,
        got.message.message_id,
        ReceiptState::Delivered,
    )
    .await;
    drop(b);
    gone(&mut a, "asked").await;
    let mut c = relay.client(&key).await;
    let asker = c.peer("asker", "dev").await;
    c.ask(&asker, "lead", "may I deploy?")
        .await
        .expect("accepted");
    drop(c);
    gone(&mut a, "asker").await;
    // `idle` holds nothing.
    let mut d = relay.client(&key).await;
    let idle = d.peer("idle", "dev").await;
    drop(d);
    gone(&mut a, "idle").await;
    assert_eq!(store.stored_peers(&tenant).await.expect("count"), 5);

    // A sixth peer: `idle` is forgotten to make room.
    let mut n = relay.client(&key).await;
    let first = n.peer("first-new", "dev").await;
    assert_eq!(store.stored_peers(&tenant).await.expect("count"), 5);
    assert!(
        store
            .get_peer(&tenant, idle.peer_id.as_str())
            .await
            .expect("read")
            .is_none(),
        "the idle offline peer was forgotten"
    );
    for kept in [&lead, &waiting, &asked, &asker, &first] {
        assert!(
            store
                .get_peer(&tenant, kept.peer_id.as_str())
                .await
                .expect("read")
                .is_some(),
            "{} is kept",
            kept.name
        );
    }
    // Another: nothing may go (live, waiting, open asks): refused, nothing stored.
    let id = n
        .send(Body::Register(Register {
            name: Some("second-new".into()),
            circle: Some("dev".into()),
            backend: "claude-code".into(),
            ..Default::default()
        }))
        .await;
    let refused = n.answer(id).await.expect_err("no room");
    assert_eq!(refused.code, ErrorCode::LimitExceeded);
    assert!(
        refused.message.contains("at most 5 peers"),
        "{}",
        refused.message
    );
    assert!(
        store
            .peers_named(&tenant, "second-new")
            .await
            .expect("read")
            .is_empty(),
        "a refused registration stores nothing"
    );
    // The refusal is not a live peer either: the tenant still lists its six.
    assert!(
        !n.list(&first.peer_id, false)
            .await
            .iter()
            .any(|p| p.name == "second-new")
    );
    let (_, detail) = get(&relay, "/v1/limits", Some(&key)).await;
    assert_eq!(detail["stored_peers"], 5, "{detail}");
    assert_eq!(detail["limits"]["max_stored_peers"], 5, "{detail}");

    // `waiting` comes back, takes its message and leaves: now it holds nothing and goes next.
    let mut w = relay.client(&key).await;
    let back = w
        .register(Register {
            name: Some("waiting".into()),
            circle: Some("dev".into()),
            backend: "claude-code".into(),
            reclaim: Some(waiting.peer_id.clone()),
            ..Default::default()
        })
        .await;
    assert!(back.reclaimed);
    let got = w.delivered_to(&waiting.peer_id).await;
    w.receipt(
        &waiting.peer_id,
        got.message.message_id,
        ReceiptState::Delivered,
    )
    .await;
    a.expect(|f| match &f.body {
        Body::Delivery(d)
            if d.recipient == waiting.peer_id && d.state == DeliveryState::Delivered =>
        {
            Some(())
        }
        _ => None,
    })
    .await;
    drop(w);
    gone(&mut a, "waiting").await;
    let second = n.peer("second-new", "dev").await;
    assert!(
        store
            .get_peer(&tenant, waiting.peer_id.as_str())
            .await
            .expect("read")
            .is_none(),
        "forgotten once it held nothing"
    );
    assert_eq!(store.stored_peers(&tenant).await.expect("count"), 5);
    // A forgotten peer's reclaim is a new registration (a new peer id, §8.2); it makes room
    // by forgetting one of the two that just left.
    drop(n);
    gone(&mut a, "first-new").await;
    gone(&mut a, "second-new").await;
    let mut i = relay.client(&key).await;
    let again = i
        .register(Register {
            name: Some("idle".into()),
            circle: Some("dev".into()),
            backend: "claude-code".into(),
            reclaim: Some(idle.peer_id.clone()),
            ..Default::default()
        })
        .await;
    assert!(!again.reclaimed);
    assert_ne!(again.peer.peer_id, idle.peer_id);
    let mut left = 0;
    for p in [&first, &second] {
        if store
            .get_peer(&tenant, p.peer_id.as_str())
            .await
            .expect("read")
            .is_some()
        {
            left += 1;
        }
    }
    assert_eq!(left, 1, "one of the two idle peers went");
    assert_eq!(store.stored_peers(&tenant).await.expect("count"), 5);
    relay.stop().await;

    // With the default setting a peer seen in the last ten minutes is never forgotten: it may
    // be a laptop coming back.
    let relay = TestRelay::start(&db).await;
    let (tenant, key) = tenant_with(
        &relay,
        "globex",
        Limits {
            max_stored_peers: Some(2),
            ..Limits::default()
        },
    )
    .await;
    let mut a = relay.client(&key).await;
    a.peer("lead", "dev").await;
    let mut b = relay.client(&key).await;
    let recent = b.peer("recent", "dev").await;
    drop(b);
    gone(&mut a, "recent").await;
    let id = a
        .send(Body::Register(Register {
            name: Some("newcomer".into()),
            circle: Some("dev".into()),
            backend: "claude-code".into(),
            ..Default::default()
        }))
        .await;
    assert_eq!(
        a.answer(id).await.expect_err("no room").code,
        ErrorCode::LimitExceeded
    );
    assert!(
        relay
            .state
            .store
            .get_peer(&tenant, recent.peer_id.as_str())
            .await
            .expect("read")
            .is_some()
    );
    relay.stop().await;
}
