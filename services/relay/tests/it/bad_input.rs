//! Bad input gets a clear error (frame or HTTP status), is counted in /metrics, and changes no
//! stored state.

use crate::common;

use repowire_e2e::client::notify_frame;

use common::{Db, Duo, TestRelay, client, counter};
use repowire_protocol::*;

both_backends!(
    malformed_and_oversized_frames_get_error_frames_and_change_nothing,
    the_first_frame_must_be_a_hello_in_a_supported_version,
    bad_tokens_and_keys_are_refused_over_http,
    revoking_a_key_closes_its_live_connections,
    a_key_revoked_or_expired_in_the_database_closes_its_connections,
    the_admin_api_needs_its_own_credential,
    a_flooding_connection_is_refused_explicitly_and_stores_nothing_extra,
);

fn errors(metrics: &str, code: &str) -> f64 {
    counter(
        metrics,
        &format!("repowire_errors_total{{code=\"{code}\"}}"),
    )
}

async fn malformed_and_oversized_frames_get_error_frames_and_change_nothing(db: Db) {
    let Duo {
        relay,
        key: _,
        mut a,
        alice,
        mut b,
        bob,
    } = Duo::start(&db).await;

    a.send_raw("this is not json".into()).await;
    assert_eq!(a.error().await.code, ErrorCode::MalformedFrame);

    let id = MessageId::new();
    a.send_raw(format!(r#"{{"v":1,"type":"teleport","id":"{id}"}}"#))
        .await;
    let e = a.error().await;
    assert_eq!((e.code, e.re), (ErrorCode::UnknownType, Some(id)));

    let id = MessageId::new();
    a.send_raw(format!(
        r#"{{"v":9,"type":"notify","id":"{id}","from":"{}","to":"bob","text":"x"}}"#,
        alice.peer_id
    ))
    .await;
    assert_eq!(a.error().await.code, ErrorCode::UnsupportedVersion);

    let huge = notify_frame(&alice, "bob", "x".repeat(limits::MAX_FRAME_BYTES));
    a.send_frame(&huge).await;
    let e = a.error().await;
    assert_eq!((e.code, e.re), (ErrorCode::FrameTooLarge, None));

    // protocol.md §4.3: a duplicate key anywhere, or an id in another spelling than lowercase
    // hyphenated, is refused without `re` (the relay would echo a different string).
    let id = MessageId::new();
    a.send_raw(format!(
        r#"{{"v":1,"type":"notify","id":"{id}","from":"{}","to":"bob","text":"one","text":"two"}}"#,
        alice.peer_id
    ))
    .await;
    let e = a.error().await;
    assert_eq!((e.code, e.re), (ErrorCode::MalformedFrame, None));
    a.send_raw(format!(
        r#"{{"v":1,"type":"notify","id":"{}","from":"{}","to":"bob","text":"x"}}"#,
        MessageId::new().to_string().to_uppercase(),
        alice.peer_id
    ))
    .await;
    let e = a.error().await;
    assert_eq!((e.code, e.re), (ErrorCode::InvalidFrame, None));
    // A message id inside the frame in another spelling: `invalid_frame`, and the frame's own
    // id was read, so the answer carries `re` (§4.1).
    let id = MessageId::new();
    a.send_raw(format!(
        r#"{{"v":1,"type":"receipt","id":"{id}","peer_id":"{}","message_id":"{}","state":"delivered"}}"#,
        alice.peer_id,
        MessageId::new().to_string().to_uppercase(),
    ))
    .await;
    let e = a.error().await;
    assert_eq!((e.code, e.re), (ErrorCode::InvalidFrame, Some(id)));
    // Relay-minted ids are opaque strings: another spelling is another (unknown) id.
    let upper = notify_frame(&alice, "bob", "x");
    let mut upper_from = upper.clone();
    if let Body::Notify(n) = &mut upper_from.body {
        n.from = PeerId(alice.peer_id.as_str().to_uppercase());
    }
    a.send_frame(&upper_from).await;
    let e = a.error().await;
    assert_eq!(
        (e.code, e.re),
        (ErrorCode::NotRegistered, Some(upper_from.id))
    );

    let long = notify_frame(&alice, "bob", "y".repeat(40_000));
    a.send_frame(&long).await;
    let e = a.error().await;
    assert_eq!((e.code, e.re), (ErrorCode::TextTooLarge, Some(long.id)));

    let hostile = notify_frame(&alice, "bob\u{1b}[2J", "x");
    a.send_frame(&hostile).await;
    assert_eq!(a.error().await.code, ErrorCode::InvalidFrame);

    let spoof = notify_frame(&bob, "alice", "as bob");
    a.send_frame(&spoof).await;
    assert_eq!(
        a.answer(spoof.id).await.expect_err("spoof").code,
        ErrorCode::NotRegistered
    );

    let from_relay = Frame::new(Body::Ok(Reply {
        re: MessageId::new(),
    }));
    a.send_frame(&from_relay).await;
    assert_eq!(
        a.answer(from_relay.id)
            .await
            .expect_err("wrong direction")
            .code,
        ErrorCode::UnexpectedFrame
    );

    // The connection survived all of it and nothing was stored: bob's inbox is empty, and
    // none of the refused ids is known.
    let id = b
        .send(Body::Replay(Replay {
            peer_id: bob.peer_id.clone(),
            after_seq: 0,
        }))
        .await;
    let Ok(Body::ReplayDone(done)) = b.answer(id).await else {
        panic!("replay")
    };
    assert_eq!(done.count, 0, "a refused frame left a message behind");
    for refused in [huge.id, long.id, hostile.id, spoof.id] {
        let q = a
            .send(Body::StatusQuery(StatusQuery {
                peer_id: alice.peer_id.clone(),
                message_id: Some(refused),
                correlation_id: None,
            }))
            .await;
        assert_eq!(
            a.answer(q).await.expect_err("nothing stored").code,
            ErrorCode::UnknownMessage
        );
    }

    // Beyond the transport limit the connection is closed with 1009, explicitly.
    a.send_raw(format!(r#"{{"pad":"{}"}}"#, "z".repeat(1_100_000)))
        .await;
    let close = a.closed().await.expect("a close frame");
    assert_eq!(u16::from(close.code), CloseCode::TOO_BIG);

    let m = relay.metrics().await;
    for code in [
        "malformed_frame",
        "unknown_type",
        "unsupported_version",
        "frame_too_large",
        "text_too_large",
        "invalid_frame",
        "not_registered",
        "unexpected_frame",
    ] {
        assert!(errors(&m, code) >= 1.0, "{code} not counted in:\n{m}");
    }
    relay.stop().await;
}

async fn the_first_frame_must_be_a_hello_in_a_supported_version(db: Db) {
    let relay = TestRelay::start(&db).await;
    let (_, key) = relay.tenant("acme").await;
    let token = client::token(&relay.http, &key).await.expect("token").token;

    let mut c = common::TestClient::from_ws(
        client::open(&relay.ws, Some(&token))
            .await
            .expect("upgrade"),
    );
    c.send(Body::Register(Register {
        backend: "claude-code".into(),
        ..Default::default()
    }))
    .await;
    let close = c.closed().await.expect("close");
    assert_eq!(u16::from(close.code), CloseCode::HELLO_REQUIRED);

    // protocol.md §1: a `v` that is present but not the integer 1 — `null` included — is
    // `unsupported_version`, and as the first frame closes with 4003.
    for v in ["2", "null"] {
        let mut c = common::TestClient::from_ws(
            client::open(&relay.ws, Some(&token))
                .await
                .expect("upgrade"),
        );
        let id = MessageId::new();
        c.send_raw(format!(
            r#"{{"v":{v},"type":"hello","id":"{id}","client":"future"}}"#
        ))
        .await;
        let close = c.closed().await.expect("close");
        assert_eq!(
            u16::from(close.code),
            CloseCode::UNSUPPORTED_VERSION,
            "v = {v}"
        );
        let e = c
            .expect(|f| match &f.body {
                Body::Error(e) => Some(e.clone()),
                _ => None,
            })
            .await;
        assert_eq!((e.code, e.re), (ErrorCode::UnsupportedVersion, Some(id)));
        assert!(
            relay
                .state
                .store
                .list_peers(&c.tenant_id)
                .await
                .expect("db")
                .is_empty()
        );
    }
    relay.stop().await;
}

async fn bad_tokens_and_keys_are_refused_over_http(db: Db) {
    let relay = TestRelay::start(&db).await;
    let (tenant, key) = relay.tenant("acme").await;
    let code_of = |body: &serde_json::Value| {
        body["error"]["code"]
            .as_str()
            .unwrap_or_default()
            .to_owned()
    };

    let (status, body) = client::token(&relay.http, "rw_live_not-a-key")
        .await
        .expect_err("malformed");
    assert_eq!((status, code_of(&body).as_str()), (401, "unauthorized"));
    let mut typo = key.clone().into_bytes();
    typo[12] = if typo[12] == b'A' { b'B' } else { b'A' };
    let (status, body) = client::token(&relay.http, &String::from_utf8(typo).expect("ascii"))
        .await
        .expect_err("typo");
    assert_eq!(status, 401);
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap_or_default()
            .contains("checksum")
    );
    let unknown = repowire_relay::tenancy::apikey::mint(
        &tenant,
        repowire_relay::tenancy::apikey::KeyMode::Live,
        "",
        0,
        None,
    )
    .text;
    assert_eq!(
        client::token(&relay.http, &unknown)
            .await
            .expect_err("unknown")
            .0,
        401
    );

    // protocol.md §3.3: a body that is not JSON, or whose `api_key` is not a string, is 400.
    for body in [
        "{",
        r#"{"api_key": 5}"#,
        r#"{"api_key": null}"#,
        r#"{"api_key": ["rw"]}"#,
        // An array is not the object §3.3 describes, though serde would read it as one.
        r#"["rw_live_Q7f2kLm9XzR4tB8wN1cV6yH3pJ5sD0aE1hp2CZ"]"#,
    ] {
        let resp = reqwest::Client::new()
            .post(format!("{}/v1/token", relay.http))
            .body(body)
            .header("content-type", "application/json")
            .send()
            .await
            .expect("send");
        assert_eq!(resp.status().as_u16(), 400, "{body}");
        let said: serde_json::Value = resp.json().await.expect("json");
        assert_eq!(said["error"]["code"], "invalid_request", "{body}: {said}");
    }

    assert_eq!(
        client::open(&relay.ws, None).await.err(),
        Some(401),
        "missing token"
    );
    assert_eq!(
        client::open(&relay.ws, Some("not.a.jwt")).await.err(),
        Some(401),
        "garbage token"
    );
    // The header is exactly `Bearer <jwt>` (protocol.md §3.4): no other spelling is read.
    let good = client::token(&relay.http, &key).await.expect("token").token;
    for header in [
        format!("Bearer  {good}"),
        format!("bearer {good}"),
        format!("Bearer\t{good}"),
        "Bearer ".to_owned(),
    ] {
        assert_eq!(
            client::open_with_authorization(&relay.ws, Some(&header))
                .await
                .err(),
            Some(401),
            "{header:?} is not the spec's header"
        );
    }
    let exact = format!("Bearer {good}");
    assert!(
        client::open_with_authorization(&relay.ws, Some(&exact))
            .await
            .is_ok()
    );
    let forged = repowire_relay::tenancy::token::Tokens::new(
        b"some-other-secret-some-other-secret",
        std::time::Duration::from_secs(60),
    );
    let key_id = relay.key_id(&key).await;
    let (forged, _) = forged.issue(&key_id, &tenant, repowire_relay::ids::now_ms());
    assert_eq!(
        client::open(&relay.ws, Some(&forged)).await.err(),
        Some(401),
        "forged token"
    );
    let (expired, _) =
        relay
            .state
            .tokens
            .issue(&key_id, &tenant, repowire_relay::ids::now_ms() - 3_600_000);
    assert_eq!(
        client::open(&relay.ws, Some(&expired)).await.err(),
        Some(401),
        "expired token"
    );

    let m = relay.metrics().await;
    assert!(errors(&m, "unauthorized") >= 6.0, "{m}");
    assert!(errors(&m, "token_expired") >= 1.0, "{m}");
    assert!(
        relay
            .state
            .store
            .list_peers(&tenant)
            .await
            .expect("db")
            .is_empty()
    );
    relay.stop().await;
}

async fn revoking_a_key_closes_its_live_connections(db: Db) {
    let relay = TestRelay::start(&db).await;
    let (tenant, key) = relay.tenant("acme").await;
    let other = repowire_relay::tenancy::admin::create_key(
        relay.state.store.as_ref(),
        &tenant,
        repowire_relay::tenancy::apikey::KeyMode::Test,
        "",
        None,
        None,
    )
    .await
    .expect("key");
    let token = client::token(&relay.http, &key).await.expect("token").token;
    let mut live = relay.client(&key).await;
    let mut unaffected = relay.client(&other.text).await;
    let alive = unaffected.peer("stays", "dev").await;

    let key_id = relay.key_id(&key).await;
    let resp = reqwest::Client::new()
        .delete(format!("{}/admin/v1/keys/{key_id}", relay.http))
        .bearer_auth("test-admin-token")
        .send()
        .await
        .expect("revoke");
    assert_eq!(resp.status().as_u16(), 204);

    let close = live.closed().await.expect("close");
    assert_eq!(u16::from(close.code), CloseCode::KEY_REVOKED);
    assert_eq!(
        client::open(&relay.ws, Some(&token)).await.err(),
        Some(401),
        "its unexpired token is dead too"
    );
    let (status, body) = client::token(&relay.http, &key).await.expect_err("revoked");
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (401, Some("key_revoked"))
    );
    // The tenant's other key keeps working.
    assert_eq!(unaffected.list(&alive.peer_id, false).await.len(), 1);
    relay.stop().await;
}

/// Revoked without the admin API (as `repowire-relay admin key revoke` does, writing the
/// database only) or simply expired: the relay's key check closes the connections anyway.
async fn a_key_revoked_or_expired_in_the_database_closes_its_connections(db: Db) {
    let relay = TestRelay::start(&db).await;
    let store = relay.state.store.clone();
    let (tenant, key) = relay.tenant("acme").await;
    let key_id = relay.key_id(&key).await;
    let token = client::token(&relay.http, &key).await.expect("token").token;
    let mut live = relay.client(&key).await;
    live.peer("soon-revoked", "dev").await;

    repowire_relay::tenancy::admin::revoke_key(store.as_ref(), None, &key_id)
        .await
        .expect("revoke in the database");
    let close = live.closed().await.expect("closed by the key check");
    assert_eq!(u16::from(close.code), CloseCode::KEY_REVOKED);
    assert_eq!(
        client::open(&relay.ws, Some(&token)).await.err(),
        Some(401),
        "a token minted before the revocation is refused"
    );

    // A key that expires while connected.
    let now = repowire_relay::ids::now_ms();
    let expiring = repowire_relay::tenancy::apikey::mint(
        &tenant,
        repowire_relay::tenancy::apikey::KeyMode::Live,
        "short",
        now,
        Some(now + 1_500),
    );
    store.insert_api_key(&expiring.record).await.expect("key");
    let mut brief = relay.client(&expiring.text).await;
    brief.peer("brief", "dev").await;
    let close = brief.closed().await.expect("closed once expired");
    assert_eq!(u16::from(close.code), CloseCode::KEY_REVOKED);
    assert!(repowire_relay::ids::now_ms() >= now + 1_500);
    relay.stop().await;
}

async fn the_admin_api_needs_its_own_credential(db: Db) {
    let relay = TestRelay::start(&db).await;
    let (_, key) = relay.tenant("acme").await;
    let token = client::token(&relay.http, &key).await.expect("token").token;
    let http = reqwest::Client::new();
    let url = format!("{}/admin/v1/tenants", relay.http);
    let create = |name: &'static str| {
        let (http, url) = (http.clone(), url.clone());
        async move {
            let body = serde_json::json!({ "name": name });
            let resp = http
                .post(&url)
                .bearer_auth("test-admin-token")
                .json(&body)
                .send()
                .await
                .expect("send");
            resp.status().as_u16()
        }
    };
    for credential in [key.as_str(), token.as_str(), "wrong"] {
        let resp = http
            .get(&url)
            .bearer_auth(credential)
            .send()
            .await
            .expect("send");
        assert_eq!(
            resp.status().as_u16(),
            403,
            "tenant credentials must not reach the admin API"
        );
    }
    assert_eq!(create("beta").await, 201);
    assert_eq!(create("beta").await, 409);
    assert_eq!(create("has space").await, 400);
    let minted: serde_json::Value = http
        .post(format!("{url}/beta/keys"))
        .bearer_auth("test-admin-token")
        .json(&serde_json::json!({"label": "ci", "test": true}))
        .send()
        .await
        .expect("send")
        .json()
        .await
        .expect("json");
    let text = minted["api_key"].as_str().expect("key shown once");
    assert!(text.starts_with("rw_test_"));
    // protocol.md §3.6: out-of-range numbers and unprintable labels are refused; no key is
    // stored for them.
    for body in [
        serde_json::json!({"expires_in_days": 0}),
        serde_json::json!({"expires_in_days": 3651}),
        serde_json::json!({"expires_in_days": -1}),
        serde_json::json!({"expires_in_days": 1.5}),
        serde_json::json!({"label": "x".repeat(129)}),
        serde_json::json!({"label": "bell\u{7}"}),
    ] {
        let resp = http
            .post(format!("{url}/beta/keys"))
            .bearer_auth("test-admin-token")
            .json(&body)
            .send()
            .await
            .expect("send");
        assert_eq!(resp.status().as_u16(), 400, "{body}");
    }
    let one_day: serde_json::Value = http
        .post(format!("{url}/beta/keys"))
        .bearer_auth("test-admin-token")
        .json(&serde_json::json!({"expires_in_days": 1}))
        .send()
        .await
        .expect("send")
        .json()
        .await
        .expect("json");
    let day_key = one_day["api_key"].as_str().expect("a one-day key");
    assert!(client::token(&relay.http, day_key).await.is_ok());
    assert!(
        minted["key"].get("hash").is_none(),
        "the hash is never returned"
    );
    assert!(client::token(&relay.http, text).await.is_ok());
    let listed: serde_json::Value = http
        .get(format!("{url}/beta/keys"))
        .bearer_auth("test-admin-token")
        .send()
        .await
        .expect("send")
        .json()
        .await
        .expect("json");
    assert!(
        !listed.to_string().contains(text),
        "listing never shows key text"
    );
    assert_eq!(
        listed["items"].as_array().map(Vec::len),
        Some(2),
        "only the two valid requests stored keys: {listed}"
    );
    let m = relay.metrics().await;
    assert!(errors(&m, "forbidden") >= 3.0, "{m}");
    relay.stop().await;
}

async fn a_flooding_connection_is_refused_explicitly_and_stores_nothing_extra(db: Db) {
    let config = repowire_relay::RelayConfig {
        send_rate: 1,
        send_burst: 3,
        ..repowire_relay::RelayConfig::for_tests()
    };
    let Duo {
        relay,
        key,
        mut a,
        alice,
        mut b,
        bob,
    } = Duo::start_with(&db, config).await;
    let frames: Vec<Frame> = (0..10)
        .map(|i| {
            Frame::new(Body::Notify(Notify {
                from: alice.peer_id.clone(),
                to: "bob".into(),
                circle: None,
                text: format!("flood {i}"),
            }))
        })
        .collect();
    for f in &frames {
        a.send_frame(f).await;
    }
    let (mut accepted, mut refused) = (Vec::new(), Vec::new());
    for f in &frames {
        match a.answer(f.id).await {
            Ok(_) => accepted.push(f.id),
            Err(e) => {
                assert_eq!(e.code, ErrorCode::RateLimited);
                assert!(
                    e.retry_after_ms.is_some_and(|ms| ms > 0),
                    "a refusal says when to retry"
                );
                refused.push(f.id);
            }
        }
    }
    // 3 fit the burst; at most one more per second of test time.
    assert!(
        accepted.len() >= 3 && !refused.is_empty(),
        "accepted {}, refused {}",
        accepted.len(),
        refused.len()
    );
    for id in &refused {
        let q = a
            .send(Body::StatusQuery(StatusQuery {
                peer_id: alice.peer_id.clone(),
                message_id: Some(*id),
                correlation_id: None,
            }))
            .await;
        assert_eq!(
            a.answer(q).await.expect_err("not stored").code,
            ErrorCode::UnknownMessage
        );
    }
    // Exactly the accepted ones arrive; receipts are not limited.
    for id in &accepted {
        let d = b.delivered_to(&bob.peer_id).await;
        assert_eq!(&d.message.message_id, id);
        b.receipt(&bob.peer_id, d.message.message_id, ReceiptState::Delivered)
            .await;
    }
    for id in &accepted {
        assert_eq!(a.state_of(*id).await.state, DeliveryState::Delivered);
    }
    // Another connection has its own allowance.
    let mut c = relay.client(&key).await;
    let carol = c.peer("carol", "dev").await;
    c.notify(&carol, "bob", "not limited by alice's flood")
        .await
        .expect("own allowance");
    assert!(errors(&relay.metrics().await, "rate_limited") >= refused.len() as f64);
    relay.stop().await;
}
