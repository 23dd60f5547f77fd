//! Limits, expiry, presence fields, reclaim rules and graceful shutdown.

use crate::common;

use common::{Db, TestRelay, client};
use repowire_protocol::*;
use repowire_relay::RelayConfig;

both_backends!(
    a_full_inbox_refuses_new_messages_until_it_drains,
    a_broadcast_records_recipients_it_could_not_enqueue,
    undelivered_messages_expire_visibly_to_the_sender,
    presence_shows_turn_state_and_descriptions_expire_on_read,
    reclaim_requires_a_matching_identity,
    a_reclaim_from_another_connection_takes_the_peer_over,
    shutdown_closes_connections_with_going_away,
    a_message_pushed_from_the_inbox_keeps_its_trace,
    welcome_announces_the_limits_a_client_needs,
    a_reclaim_whose_name_is_taken_gets_a_suffixed_name_and_keeps_it,
);

/// protocol.md §10.3: a reclaimed peer whose stored name another live peer holds now gets the
/// next free suffixed name, stored as its name; the holder keeps its own.
async fn a_reclaim_whose_name_is_taken_gets_a_suffixed_name_and_keeps_it(db: Db) {
    let relay = TestRelay::start(&db).await;
    let (tenant, key) = relay.tenant("acme").await;
    let api = offline(&relay, &key, "api").await;
    let mut other = relay.client(&key).await;
    let holder = other.peer("api", "dev").await;
    assert_eq!(holder.name, "api", "an offline peer holds no name");

    let mut back = relay.client(&key).await;
    let again = back
        .register(Register {
            circle: Some("dev".into()),
            ..reclaim(&api)
        })
        .await;
    assert!(again.reclaimed);
    assert_eq!(again.peer.peer_id, api.peer_id);
    assert_eq!(again.peer.name, "api-2");
    let listed = back.list(&api.peer_id, true).await;
    let name_of = |id: &PeerId| {
        listed
            .iter()
            .find(|p| &p.peer_id == id)
            .map(|p| p.name.clone())
    };
    assert_eq!(name_of(&holder.peer_id).as_deref(), Some("api"));
    assert_eq!(name_of(&api.peer_id).as_deref(), Some("api-2"));
    let stored = db
        .store()
        .await
        .get_peer(&tenant, api.peer_id.as_str())
        .await
        .expect("read")
        .expect("stored");
    assert_eq!(stored.name, "api-2", "the suffixed name is the stored name");
}

/// protocol.md §9.1: `welcome.limits` carries the deployment's settings, not the defaults.
async fn welcome_announces_the_limits_a_client_needs(db: Db) {
    let relay = TestRelay::start_with(
        &db,
        RelayConfig {
            inbox_cap: 7,
            send_rate: 11,
            send_burst: 13,
            message_ttl_secs: 17,
            ping_interval_secs: 19,
            idle_timeout_secs: 23,
            ..RelayConfig::for_tests()
        },
    )
    .await;
    let (_, key) = relay.tenant("acme").await;
    let c = relay.client(&key).await;
    let limits = c.welcome.expect("welcome").limits;
    assert_eq!(
        limits,
        Limits {
            max_frame_bytes: 512 * 1024,
            max_text_bytes: 32 * 1024,
            max_transport_bytes: Some(1024 * 1024),
            send_rate_per_sec: Some(11),
            send_burst: Some(13),
            inbox_cap: Some(7),
            message_ttl_ms: Some(17_000),
            ping_interval_ms: Some(19_000),
            idle_timeout_ms: Some(23_000),
        }
    );
}

async fn offline(relay: &TestRelay, key: &str, name: &str) -> PeerInfo {
    let mut c = relay.client(key).await;
    let p = c.peer(name, "dev").await;
    let id = c
        .send(Body::Unregister(PeerRef {
            peer_id: p.peer_id.clone(),
        }))
        .await;
    c.answer(id).await.expect("unregistered");
    p
}

fn reclaim(p: &PeerInfo) -> Register {
    Register {
        backend: "claude-code".into(),
        path: Some(format!("/work/{}", p.name)),
        reclaim: Some(p.peer_id.clone()),
        ..Default::default()
    }
}

async fn a_full_inbox_refuses_new_messages_until_it_drains(db: Db) {
    let relay = TestRelay::start_with(
        &db,
        RelayConfig {
            inbox_cap: 2,
            ..RelayConfig::for_tests()
        },
    )
    .await;
    let (_, key) = relay.tenant("acme").await;
    let mut a = relay.client(&key).await;
    let alice = a.peer("alice", "dev").await;
    let bob = offline(&relay, &key, "bob").await;
    a.notify(&alice, "bob", "1").await.expect("fits");
    a.ask(&alice, "bob", "2").await.expect("fits");
    let full = a
        .notify(&alice, "bob", "3")
        .await
        .expect_err("over the cap");
    assert_eq!(full.code, ErrorCode::InboxFull);
    assert!(
        full.message.contains("nothing was accepted"),
        "{}",
        full.message
    );

    let mut b = relay.client(&key).await;
    b.register(reclaim(&bob)).await;
    for text in ["1", "2"] {
        let d = b.delivered_to(&bob.peer_id).await;
        assert_eq!(d.message.text, text, "the refused message did not sneak in");
        b.receipt(&bob.peer_id, d.message.message_id, ReceiptState::Delivered)
            .await;
        a.expect(|f| {
            matches!(&f.body, Body::Delivery(x) if x.message_id == d.message.message_id)
                .then_some(())
        })
        .await;
    }
    a.notify(&alice, "bob", "3 again")
        .await
        .expect("room again once delivered");
    assert_eq!(b.delivered_to(&bob.peer_id).await.message.text, "3 again");
    relay.stop().await;
}

async fn a_broadcast_records_recipients_it_could_not_enqueue(db: Db) {
    let relay = TestRelay::start_with(
        &db,
        RelayConfig {
            inbox_cap: 1,
            ..RelayConfig::for_tests()
        },
    )
    .await;
    let (_, key) = relay.tenant("acme").await;
    let (mut a, mut b, mut c) = (
        relay.client(&key).await,
        relay.client(&key).await,
        relay.client(&key).await,
    );
    let alice = a.peer("alice", "dev").await;
    let bob = b.peer("bob", "dev").await;
    let carol = c.peer("carol", "dev").await;
    a.notify(&alice, "bob", "fills bob's inbox")
        .await
        .expect("accepted"); // never receipted
    b.delivered_to(&bob.peer_id).await;
    let sent = a
        .submit(Body::Broadcast(Broadcast {
            from: alice.peer_id.clone(),
            text: "all".into(),
        }))
        .await
        .expect("accepted");
    assert_eq!(
        sent.recipients
            .iter()
            .map(|r| r.peer_id.clone())
            .collect::<Vec<_>>(),
        vec![carol.peer_id.clone()]
    );
    let failed = a
        .expect(|f| match &f.body {
            Body::Delivery(d) if d.message_id == sent.message_id && d.recipient == bob.peer_id => {
                Some(d.clone())
            }
            _ => None,
        })
        .await;
    assert_eq!(failed.state, DeliveryState::Failed);
    let id = a
        .send(Body::StatusQuery(StatusQuery {
            peer_id: alice.peer_id.clone(),
            message_id: Some(sent.message_id),
            correlation_id: None,
        }))
        .await;
    let Ok(Body::Status(status)) = a.answer(id).await else {
        panic!("status")
    };
    let bob_state = status
        .recipients
        .iter()
        .find(|r| r.peer_id == bob.peer_id)
        .expect("bob is in the status");
    assert_eq!(bob_state.state, DeliveryState::Failed);
    assert!(
        bob_state
            .reason
            .as_deref()
            .is_some_and(|r| r.starts_with("inbox_full"))
    );
    relay.stop().await;
}

async fn undelivered_messages_expire_visibly_to_the_sender(db: Db) {
    let relay = TestRelay::start_with(
        &db,
        RelayConfig {
            message_ttl_secs: 0,
            ..RelayConfig::for_tests()
        },
    )
    .await;
    let (_, key) = relay.tenant("acme").await;
    let mut a = relay.client(&key).await;
    let alice = a.peer("alice", "dev").await;
    let bob = offline(&relay, &key, "bob").await;
    let sent = a.notify(&alice, "bob", "too late").await.expect("accepted");

    assert_eq!(
        repowire_relay::routing::sweeper::sweep(&relay.state).await,
        1
    );
    let expired = a.state_of(sent.message_id).await;
    assert_eq!(expired.state, DeliveryState::Expired);
    assert!(expired.reason.is_some());
    let id = a
        .send(Body::StatusQuery(StatusQuery {
            peer_id: alice.peer_id.clone(),
            message_id: Some(sent.message_id),
            correlation_id: None,
        }))
        .await;
    let Ok(Body::Status(status)) = a.answer(id).await else {
        panic!("status")
    };
    assert_eq!(status.recipients[0].state, DeliveryState::Expired);

    let mut b = relay.client(&key).await;
    b.register(reclaim(&bob)).await;
    let id = b
        .send(Body::Replay(Replay {
            peer_id: bob.peer_id.clone(),
            after_seq: 0,
        }))
        .await;
    let Ok(Body::ReplayDone(done)) = b.answer(id).await else {
        panic!("replay")
    };
    assert_eq!(done.count, 0, "an expired message is never delivered late");
    assert_eq!(
        repowire_relay::routing::sweeper::sweep(&relay.state).await,
        0,
        "expiry happens once"
    );
    relay.stop().await;
}

async fn presence_shows_turn_state_and_descriptions_expire_on_read(db: Db) {
    for (ttl, kept) in [(900, true), (0, false)] {
        let relay = TestRelay::start_with(
            &db,
            RelayConfig {
                description_ttl_secs: ttl,
                ..RelayConfig::for_tests()
            },
        )
        .await;
        let (_, key) = relay.tenant(&format!("acme-{ttl}")).await;
        let (mut a, mut b) = (relay.client(&key).await, relay.client(&key).await);
        let alice = a.peer("alice", "dev").await;
        let bob = b.peer("bob", "dev").await;
        let id = b
            .send(Body::UpdatePeer(UpdatePeer {
                peer_id: bob.peer_id.clone(),
                turn_state: Some(TurnState::Working),
                description: Some("fixing CI".into()),
            }))
            .await;
        b.answer(id).await.expect("updated");
        let seen = a
            .expect(|f| match &f.body {
                Body::Presence(p)
                    if p.event == PresenceEvent::Updated && p.peer.peer_id == bob.peer_id =>
                {
                    Some(p.peer.clone())
                }
                _ => None,
            })
            .await;
        assert_eq!(seen.status, PeerStatus::Busy);
        let listed = a.list(&alice.peer_id, false).await;
        let bob_now = listed
            .iter()
            .find(|p| p.peer_id == bob.peer_id)
            .expect("bob listed");
        assert_eq!(bob_now.turn_state, TurnState::Working);
        assert_eq!(bob_now.description.is_some(), kept, "ttl {ttl}");
        relay.stop().await;
    }
}

async fn reclaim_requires_a_matching_identity(db: Db) {
    let relay = TestRelay::start(&db).await;
    let (_, key) = relay.tenant("acme").await;
    let bob = offline(&relay, &key, "bob").await;
    let mut c = relay.client(&key).await;
    let wrong_backend = c
        .register(Register {
            backend: "codex".into(),
            ..reclaim(&bob)
        })
        .await;
    assert!(!wrong_backend.reclaimed);
    assert_ne!(wrong_backend.peer.peer_id, bob.peer_id);
    let wrong_path = c
        .register(Register {
            path: Some("/elsewhere".into()),
            ..reclaim(&bob)
        })
        .await;
    assert!(!wrong_path.reclaimed);
    let right = c.register(reclaim(&bob)).await;
    assert!(right.reclaimed);
    // A reclaim that names no role keeps the stored one.
    let mut o = relay.client(&key).await;
    let boss = o
        .register(Register {
            name: Some("boss".into()),
            backend: "claude-code".into(),
            path: Some("/work/boss".into()),
            role: Some(Role::Orchestrator),
            ..Default::default()
        })
        .await
        .peer;
    drop(o);
    let back = c.register(reclaim(&boss)).await;
    assert!(back.reclaimed);
    assert_eq!(back.peer.role, Role::Orchestrator);
    assert_eq!(
        (right.peer.peer_id.clone(), right.peer.name.as_str()),
        (bob.peer_id.clone(), "bob")
    );
    relay.stop().await;
}

async fn a_reclaim_from_another_connection_takes_the_peer_over(db: Db) {
    let relay = TestRelay::start(&db).await;
    let (_, key) = relay.tenant("acme").await;
    let (mut old, mut new, mut a) = (
        relay.client(&key).await,
        relay.client(&key).await,
        relay.client(&key).await,
    );
    let alice = a.peer("alice", "dev").await;
    let bob = old.peer("bob", "dev").await;
    assert!(new.register(reclaim(&bob)).await.reclaimed);
    let sent = a
        .notify(&alice, "bob", "to the new binding")
        .await
        .expect("accepted");
    assert_eq!(
        new.delivered_to(&bob.peer_id).await.message.message_id,
        sent.message_id
    );
    let notice = old.error().await;
    assert_eq!(
        (notice.code, notice.re),
        (ErrorCode::NotRegistered, None),
        "the old connection is told"
    );
    let stale = old
        .notify(&bob, "alice", "from the stale socket")
        .await
        .expect_err("lost the peer");
    assert_eq!(stale.code, ErrorCode::NotRegistered);
    relay.stop().await;
}

async fn shutdown_closes_connections_with_going_away(db: Db) {
    let relay = TestRelay::start(&db).await;
    let (_, key) = relay.tenant("acme").await;
    let ready = reqwest::get(format!("{}/readyz", relay.http))
        .await
        .expect("readyz");
    assert_eq!(ready.status().as_u16(), 200);
    assert_eq!(
        reqwest::get(format!("{}/healthz", relay.http))
            .await
            .expect("healthz")
            .status()
            .as_u16(),
        200
    );
    let mut c = relay.client(&key).await;
    c.peer("alice", "dev").await;
    let token = client::token(&relay.http, &key).await.expect("token").token;
    relay.begin_shutdown();
    assert!(
        relay.state.draining(),
        "readiness turns false as soon as the drain starts"
    );
    let close = c.closed().await.expect("close frame");
    assert_eq!(u16::from(close.code), CloseCode::GOING_AWAY);
    let ws = relay.ws.clone();
    relay.stop().await;
    // Nothing listens any more.
    assert!(
        tokio_tungstenite::connect_async(format!("{ws}?access_token={token}"))
            .await
            .is_err()
    );
}

/// A connection whose own write waits on storage keeps receiving: while one of its frames is
/// being handled, the deliveries queued for it still leave. (It used to stop writing until that
/// write committed, so a busy database got healthy readers closed as slow consumers, 4008.)
/// Postgres only: the wait is a row lock held by the test.
#[sqlx::test(migrations = false)]
async fn deliveries_keep_flowing_while_the_connections_own_write_waits(pool: sqlx::PgPool) {
    use std::time::Duration;

    let db = Db::Postgres(pool.clone());
    let mut config = RelayConfig::for_tests();
    config.inflight_writes = 1;
    config.outbound_queue = 8;
    let relay = TestRelay::start_with(&db, config).await;
    let (_, key) = relay.tenant("acme").await;
    let mut s = relay.client(&key).await;
    let mut r = relay.client(&key).await;
    let alice = s.peer("alice", "dev").await;
    let bob = r.peer("bob", "dev").await;
    let first = s
        .notify(&alice, "bob", "first")
        .await
        .expect("accepted")
        .message_id;
    r.delivered_to(&bob.peer_id).await;

    // Hold bob's first entry, so a receipt for it waits on the database with bob's connection's
    // only write permit.
    let mut held = pool.begin().await.expect("begin");
    sqlx::query("SELECT 1 FROM inbox WHERE message_id = $1 FOR UPDATE")
        .bind(first.to_string())
        .execute(&mut *held)
        .await
        .expect("lock the entry");
    r.receipt(&bob.peer_id, first, ReceiptState::Injected).await;
    let deadline = tokio::time::Instant::now() + common::WAIT;
    loop {
        let waiting: i64 = sqlx::query_scalar(
            "SELECT count(*) FROM pg_stat_activity \
             WHERE datname = current_database() AND wait_event_type = 'Lock'",
        )
        .fetch_one(&pool)
        .await
        .expect("count");
        if waiting > 0 {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the receipt never reached the held row"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    // The next frame is held until that write commits.
    r.receipt(&bob.peer_id, first, ReceiptState::Delivered)
        .await;

    // Four queues' worth of deliveries arrive meanwhile, and all of them leave.
    for i in 0..32 {
        s.notify(&alice, "bob", &format!("m{i}"))
            .await
            .expect("accepted");
    }
    for i in 0..32 {
        let d = r.delivered_to(&bob.peer_id).await;
        assert_eq!(d.message.text, format!("m{i}"));
    }
    assert_eq!(
        common::counter(&relay.metrics().await, "repowire_slow_consumers_total"),
        0.0
    );

    // Released, the held receipt commits and its sender hears of it.
    held.rollback().await.expect("release");
    let state = s.state_of(first).await;
    assert_eq!(state.state, DeliveryState::Injected);
    relay.stop().await;
}

/// A message that waited in an inbox is pushed later (catch-up after a reconnect, replay) in
/// the trace of the request that created it, not in none.
async fn a_message_pushed_from_the_inbox_keeps_its_trace(db: Db) {
    let relay = TestRelay::start(&db).await;
    let (_, key) = relay.tenant("acme").await;
    let bob = offline(&relay, &key, "bob").await;
    let mut a = relay.client(&key).await;
    let alice = a.peer("alice", "dev").await;
    let tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
    let sent = client::notify_frame(&alice, "bob", "while you were away").traced(Some(tp.into()));
    a.send_frame(&sent).await;
    a.answer(sent.id).await.expect("accepted");
    // A chained ask is written on the one-by-one path, not the batch one: its trace is kept too.
    let first = a.ask(&alice, "bob", "first").await.expect("accepted");
    let tp2 = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";
    let chained = Frame::new(Body::Ask(Ask {
        from: alice.peer_id.clone(),
        to: "bob".into(),
        circle: None,
        text: "and a follow-up".into(),
        reply_to: first.correlation_id.clone(),
        question: None,
    }))
    .traced(Some(tp2.into()));
    a.send_frame(&chained).await;
    a.answer(chained.id).await.expect("chained ask accepted");

    let mut b = relay.client(&key).await;
    b.register(reclaim(&bob)).await;
    let trace_of_deliver = |f: &Frame| match &f.body {
        Body::Deliver(d) if d.message.message_id == sent.id => Some(f.traceparent.clone()),
        _ => None,
    };
    assert_eq!(
        b.expect(trace_of_deliver).await.as_deref(),
        Some(tp),
        "catch-up"
    );
    let chained_trace = b
        .expect(|f| match &f.body {
            Body::Deliver(d) if d.message.message_id == chained.id => Some(f.traceparent.clone()),
            _ => None,
        })
        .await;
    assert_eq!(
        chained_trace.as_deref(),
        Some(tp2),
        "catch-up of a chained ask"
    );
    let id = b
        .send(Body::Replay(Replay {
            peer_id: bob.peer_id.clone(),
            after_seq: 0,
        }))
        .await;
    assert_eq!(
        b.expect(trace_of_deliver).await.as_deref(),
        Some(tp),
        "replay"
    );
    assert!(matches!(b.answer(id).await, Ok(Body::ReplayDone(_))));
    relay.stop().await;
}
