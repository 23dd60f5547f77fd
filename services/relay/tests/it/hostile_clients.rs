//! Clients that do not play along (issue 30, items 2 and 3): a peer that stops reading, and
//! sockets that never authenticate. Reproductions from the issue, against a real relay on
//! loopback: a stalled reader once held ~200 MB and stayed online after its key was deleted,
//! and 1 100 silent sockets starved `/healthz`, `/v1/token` and new upgrades.

use crate::common;

use std::time::Duration;

use common::{Admin, Db, TestRelay, WAIT, client::TestClient, counter};
use repowire_relay::RelayConfig;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

both_backends!(
    a_peer_that_stops_reading_is_closed_and_its_queue_stays_within_its_byte_cap,
    revoking_the_key_of_a_peer_that_stops_reading_closes_it_at_once,
    a_nul_or_a_deceptive_identity_text_is_invalid_and_stores_nothing,
);

/// Issue 30 items 8 and 11: a NUL in a text was stored on SQLite and answered `unavailable`
/// (retry for ever) on Postgres; a description could hide or reorder itself.
async fn a_nul_or_a_deceptive_identity_text_is_invalid_and_stores_nothing(db: Db) {
    use repowire_protocol::{Body, ErrorCode, UpdatePeer};
    let common::Duo {
        relay,
        mut a,
        alice,
        mut b,
        bob,
        ..
    } = common::Duo::start(&db).await;
    let id = repowire_protocol::MessageId::new();
    a.send_raw(format!(
        r#"{{"v":1,"type":"notify","id":"{id}","from":"{}","to":"bob","text":"a\u0000b"}}"#,
        alice.peer_id
    ))
    .await;
    let refused = a.answer(id).await.expect_err("refused");
    assert_eq!(refused.code, ErrorCode::InvalidFrame, "{refused:?}");
    for description in ["\u{202e}gnp.exe", "adm\u{200b}in"] {
        let id = a
            .send(Body::UpdatePeer(UpdatePeer {
                peer_id: alice.peer_id.clone(),
                turn_state: None,
                description: Some(description.into()),
            }))
            .await;
        let refused = a.answer(id).await.expect_err("refused");
        assert_eq!(refused.code, ErrorCode::InvalidFrame, "{description:?}");
    }
    // Nothing was stored: the next message bob gets is the next valid one.
    a.notify(&alice, "bob", "clean").await.expect("accepted");
    assert_eq!(b.delivered_to(&bob.peer_id).await.message.text, "clean");
    relay.stop().await;
}

/// 32 KiB of control characters: a `deliver` of it is ~196 KB once JSON-escaped.
fn heavy_text() -> String {
    "\u{1}".repeat(repowire_protocol::limits::MAX_TEXT_BYTES)
}

/// Polls `done` (every 20 ms) until it holds, for at most [`WAIT`].
async fn eventually(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = tokio::time::Instant::now() + WAIT;
    while !done() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "not within {WAIT:?}: {what}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

async fn a_peer_that_stops_reading_is_closed_and_its_queue_stays_within_its_byte_cap(db: Db) {
    let mut config = RelayConfig::for_tests();
    config.write_timeout_secs = 1;
    let cap = config.outbound_queue_bytes;
    let relay = TestRelay::start_with(&db, config).await;
    let (tenant, key) = relay.tenant("acme").await;
    let mut sink = TestClient::connect_small_window(&relay.http, &relay.ws, &key, 4096).await;
    let sink_peer = sink.peer("sink", "dev").await;
    let mut sender = relay.client(&key).await;
    let alice = sender.peer("alice", "dev").await;

    // The sink reads nothing from here on.
    let text = heavy_text();
    let mut most_queued = 0;
    for _ in 0..200 {
        sender
            .notify(&alice, "sink", &text)
            .await
            .expect("accepted");
        let queued = relay.state.outbound_budget.used();
        most_queued = most_queued.max(queued);
        // The sender's own queue (its answers) is the rest of the process's total.
        assert!(
            queued <= cap + 64 * 1024,
            "{queued} bytes queued, past the {cap}-byte cap of the sink's connection"
        );
        if relay
            .state
            .hub
            .live_peer(&tenant, sink_peer.peer_id.as_str())
            .is_none()
        {
            break;
        }
    }
    eventually("the stalled sink is closed", || {
        relay
            .state
            .hub
            .live_peer(&tenant, sink_peer.peer_id.as_str())
            .is_none()
    })
    .await;
    assert!(
        counter(&relay.metrics().await, "repowire_slow_consumers_total") >= 1.0,
        "counted as a slow consumer"
    );
    eventually("nothing stays queued for the closed connection", || {
        relay.state.outbound_budget.used() == 0
    })
    .await;
    assert!(most_queued > 0, "the sink's queue was used at all");
    // The sender's connection was never held back by the sink.
    let bob = sender.peer("bob", "dev").await;
    sender
        .notify(&bob, "alice", "still here")
        .await
        .expect("a live connection");
    drop(sink);
    relay.stop().await;
}

async fn revoking_the_key_of_a_peer_that_stops_reading_closes_it_at_once(db: Db) {
    let mut config = RelayConfig::for_tests();
    // Neither the write deadline nor the byte cap may be what closes it here.
    config.write_timeout_secs = 600;
    config.outbound_queue_bytes = 0;
    let relay = TestRelay::start_with(&db, config).await;
    let admin = Admin::new(&relay);
    let (tenant, key) = relay.tenant("acme").await;
    let (_, sender_key) = admin
        .post(
            &format!("/tenants/{tenant}/keys"),
            serde_json::json!({"label": "sender"}),
        )
        .await;
    let sender_key = sender_key["api_key"].as_str().expect("key").to_owned();
    let sink_key_id = relay.key_id(&key).await;
    let mut sink = TestClient::connect_small_window(&relay.http, &relay.ws, &key, 4096).await;
    let sink_peer = sink.peer("sink", "dev").await;
    let mut sender = relay.client(&sender_key).await;
    let alice = sender.peer("alice", "dev").await;

    // Enough to fill the socket's buffers: the relay's write to the sink is now blocked, and
    // frames wait behind it.
    let text = heavy_text();
    for _ in 0..100 {
        sender
            .notify(&alice, "sink", &text)
            .await
            .expect("accepted");
    }
    eventually("frames wait behind a blocked write", || {
        relay.state.outbound_budget.used() > 1 << 20
    })
    .await;

    let (status, body) = admin
        .call(
            reqwest::Method::DELETE,
            &format!("/keys/{sink_key_id}"),
            None,
        )
        .await;
    assert!(status < 300, "{status} {body}");
    eventually("the revoked sink goes offline", || {
        relay
            .state
            .hub
            .live_peer(&tenant, sink_peer.peer_id.as_str())
            .is_none()
    })
    .await;
    eventually("its queue is given back", || {
        relay.state.outbound_budget.used() == 0
    })
    .await;
    drop(sink);
    relay.stop().await;
}

/// Settings with short pre-authentication deadlines and a small cap on pending connections.
fn strict() -> RelayConfig {
    let mut config = RelayConfig::for_tests();
    config.header_timeout_secs = 1;
    config.body_timeout_secs = 1;
    config.max_pending_connections = 16;
    config
}

fn addr(relay: &TestRelay) -> String {
    relay.http.trim_start_matches("http://").to_owned()
}

/// True if the relay ended the connection (EOF or reset) within [`WAIT`]; whatever it sent
/// before (an error response) is read and dropped.
async fn closed_by_relay(socket: &mut TcpStream) -> bool {
    let mut buf = [0u8; 4096];
    loop {
        match tokio::time::timeout(WAIT, socket.read(&mut buf)).await {
            Ok(Ok(0) | Err(_)) => return true,
            Ok(Ok(_)) => {}
            Err(_) => return false,
        }
    }
}

async fn healthy(relay: &TestRelay) -> bool {
    matches!(
        reqwest::Client::new()
            .get(format!("{}/healthz", relay.http))
            .timeout(Duration::from_secs(2))
            .send()
            .await,
        Ok(r) if r.status() == 200
    )
}

#[tokio::test]
async fn silent_sockets_slow_headers_and_slow_bodies_are_cut_while_real_clients_work() {
    let db = Db::sqlite();
    let relay = TestRelay::start_with(&db, strict()).await;
    let (_, key) = relay.tenant("acme").await;

    let mut silent = Vec::new();
    for _ in 0..8 {
        silent.push(TcpStream::connect(addr(&relay)).await.expect("connect"));
    }
    let mut slow_headers = TcpStream::connect(addr(&relay)).await.expect("connect");
    slow_headers
        .write_all(b"GET /healthz HTTP/1.1\r\nHost: relay\r\n")
        .await
        .expect("write");
    let mut slow_body = TcpStream::connect(addr(&relay)).await.expect("connect");
    slow_body
        .write_all(
            b"POST /v1/token HTTP/1.1\r\nHost: relay\r\nContent-Type: application/json\r\n\
              Content-Length: 200\r\n\r\n{\"api_key\":",
        )
        .await
        .expect("write");

    // Real clients keep working beside them.
    assert!(healthy(&relay).await, "/healthz answers");
    let mut c = relay.client(&key).await;
    c.peer("alice", "dev").await;

    for (i, socket) in silent.iter_mut().enumerate() {
        assert!(closed_by_relay(socket).await, "silent socket {i} is cut");
    }
    assert!(
        closed_by_relay(&mut slow_headers).await,
        "slow headers are cut"
    );
    assert!(closed_by_relay(&mut slow_body).await, "a slow body is cut");
    // A connection that keeps talking is not cut: the authenticated one still works.
    let bob = c.peer("bob", "dev").await;
    c.notify(&bob, "alice", "hello").await.expect("accepted");
    relay.stop().await;
}

#[tokio::test]
async fn past_the_cap_of_pending_connections_a_new_one_is_closed_at_once_until_slots_free() {
    let db = Db::sqlite();
    let config = strict();
    let cap = config.max_pending_connections;
    let relay = TestRelay::start_with(&db, config).await;
    let (_, key) = relay.tenant("acme").await;
    // An authenticated connection holds no pending slot.
    let mut c = relay.client(&key).await;
    let alice = c.peer("alice", "dev").await;

    let mut silent = Vec::new();
    for _ in 0..cap {
        silent.push(TcpStream::connect(addr(&relay)).await.expect("connect"));
    }
    // Every slot is taken: the next connection is accepted and closed at once, without an
    // answer, and counted.
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let mut extra = TcpStream::connect(addr(&relay)).await.expect("connect");
        let _ = extra
            .write_all(b"GET /healthz HTTP/1.1\r\nHost: r\r\n\r\n")
            .await;
        let mut buf = [0u8; 64];
        let closed = matches!(
            tokio::time::timeout(Duration::from_millis(500), extra.read(&mut buf)).await,
            Ok(Ok(0) | Err(_))
        );
        if closed {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "a connection past the cap was answered"
        );
    }
    assert!(relay.state.metrics.pending_refused.get() >= 1);
    // The live WebSocket is untouched meanwhile.
    c.notify(&alice, "alice", "still here")
        .await
        .expect("accepted");
    // The silent ones time out; then new clients are served again.
    for socket in &mut silent {
        assert!(closed_by_relay(socket).await);
    }
    assert!(
        healthy(&relay).await,
        "/healthz answers once slots are free"
    );
    relay.stop().await;
}

/// A `POST /v1/token` from `local` (an address of 127.0.0.0/8) with `forwarded` as its
/// `X-Forwarded-For`; the status and the `Retry-After` header.
async fn exchange(
    relay: &TestRelay,
    local: &str,
    forwarded: Option<&str>,
    api_key: &str,
) -> (u16, Option<String>) {
    let http = reqwest::Client::builder()
        .local_address(Some(local.parse().expect("ip")))
        .build()
        .expect("client");
    let mut request = http
        .post(format!("{}/v1/token", relay.http))
        .json(&serde_json::json!({ "api_key": api_key }));
    if let Some(f) = forwarded {
        request = request.header("x-forwarded-for", f);
    }
    let response = request.send().await.expect("send");
    let retry = response
        .headers()
        .get("retry-after")
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    (response.status().as_u16(), retry)
}

/// A well-formed key that no tenant has.
fn unknown_key() -> String {
    repowire_relay::tenancy::apikey::mint(
        "tnt-0000000000000000",
        repowire_relay::tenancy::apikey::KeyMode::Live,
        "",
        0,
        None,
    )
    .text
}

/// Issue 30 item 10: 1 500 distinct well-formed keys were all answered 401 (each a lookup),
/// since the limit was per credential. Failures are now counted per source address.
#[tokio::test]
async fn failed_token_exchanges_are_limited_per_source_address() {
    let db = Db::sqlite();
    let mut config = RelayConfig::for_tests();
    config.failed_auth_per_minute = 1;
    config.failed_auth_burst = 5;
    let relay = TestRelay::start_with(&db, config).await;
    let (_, key) = relay.tenant("acme").await;
    for i in 0..5 {
        assert_eq!(
            exchange(&relay, "127.0.0.1", None, &unknown_key()).await.0,
            401,
            "failure {i} is within the burst"
        );
    }
    let (status, retry) = exchange(&relay, "127.0.0.1", None, &unknown_key()).await;
    assert_eq!(status, 429);
    assert!(retry.is_some_and(|s| s.parse::<u64>().is_ok_and(|s| s >= 1)));
    // Refused before any lookup from then on, even with a good key.
    assert_eq!(exchange(&relay, "127.0.0.1", None, &key).await.0, 429);
    // Another source is untouched, and a forwarded-for header from an untrusted peer is not
    // believed (the peer itself is the source).
    assert_eq!(exchange(&relay, "127.0.0.2", None, &key).await.0, 200);
    assert_eq!(
        exchange(&relay, "127.0.0.1", Some("198.51.100.7"), &key)
            .await
            .0,
        429
    );
    relay.stop().await;
}

/// Behind a configured proxy, the client it names is the source.
#[tokio::test]
async fn behind_a_trusted_proxy_the_forwarded_client_is_the_source() {
    let db = Db::sqlite();
    let mut config = RelayConfig::for_tests();
    config.failed_auth_per_minute = 1;
    config.failed_auth_burst = 2;
    config.trusted_proxies = vec!["127.0.0.1/32".parse().expect("net")];
    let relay = TestRelay::start_with(&db, config).await;
    let (_, key) = relay.tenant("acme").await;
    let attacker = Some("203.0.113.9");
    for _ in 0..2 {
        assert_eq!(
            exchange(&relay, "127.0.0.1", attacker, &unknown_key())
                .await
                .0,
            401
        );
    }
    assert_eq!(
        exchange(&relay, "127.0.0.1", attacker, &unknown_key())
            .await
            .0,
        429
    );
    // The proxy's other clients are not held back by that one.
    assert_eq!(
        exchange(&relay, "127.0.0.1", Some("203.0.113.10"), &key)
            .await
            .0,
        200
    );
    // A spoofed leftmost entry does not move the attacker: the proxy appended the real one.
    assert_eq!(
        exchange(&relay, "127.0.0.1", Some("192.0.2.1, 203.0.113.9"), &key)
            .await
            .0,
        429
    );
    relay.stop().await;
}

/// Issue 30 item 13: the embedded relay's `/metrics` was readable by any local user. With
/// `--metrics-auth` (which the daemon's embedded relay sets) only the admin credential reads
/// it, and with no admin token configured nobody does.
#[tokio::test]
async fn with_metrics_auth_only_the_admin_credential_reads_metrics() {
    let db = Db::sqlite();
    let mut config = RelayConfig::for_tests();
    config.metrics_auth = true;
    let relay = TestRelay::start_with(&db, config).await;
    let (_, key) = relay.tenant("acme").await;
    let get = |bearer: Option<String>| {
        let url = format!("{}/metrics", relay.http);
        async move {
            let mut request = reqwest::Client::new().get(url);
            if let Some(b) = bearer {
                request = request.bearer_auth(b);
            }
            request.send().await.expect("send").status().as_u16()
        }
    };
    assert_eq!(get(None).await, 403);
    assert_eq!(
        get(Some(key)).await,
        403,
        "a tenant key is no admin credential"
    );
    assert_eq!(get(Some(common::ADMIN.into())).await, 200);
    relay.stop().await;

    let db = Db::sqlite();
    let mut config = RelayConfig::for_tests();
    config.metrics_auth = true;
    config.admin_token = None;
    let relay = TestRelay::start_with(&db, config).await;
    let status = reqwest::get(format!("{}/metrics", relay.http))
        .await
        .expect("send")
        .status()
        .as_u16();
    assert_eq!(status, 404, "no admin token: nobody reads it");
    relay.stop().await;
}
