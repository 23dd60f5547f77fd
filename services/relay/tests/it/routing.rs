//! Routing semantics over real WebSocket clients, on SQLite and on Postgres.

use crate::common;

use repowire_e2e::client::notify_frame;

use common::{Db, Duo, TestRelay};
use repowire_protocol::*;

both_backends!(
    ask_then_ack_with_reply_walks_every_delivery_state,
    notify_to_an_offline_peer_is_delivered_once_on_reconnect,
    open_asks_survive_a_relay_restart,
    broadcast_reaches_only_the_senders_circle,
    ambiguous_names_are_refused_with_candidates,
    a_retried_frame_is_accepted_once_and_delivered_once,
    ask_with_reply_to_closes_the_prior_thread,
    structured_questions_take_typed_answers_only,
    replies_cross_circles_to_reach_the_asker,
    a_retry_is_recognised_even_after_names_changed,
    an_ack_reusing_another_messages_id_is_refused_and_harms_nothing,
    a_retried_ack_is_recognised_and_a_changed_one_refused,
    a_connection_over_its_inflight_writes_waits_instead_of_failing,
    receipts_then_an_ack_from_one_connection_take_effect_in_that_order,
    an_injected_receipt_says_how_the_message_reached_the_agent,
);

/// A daemon that hands a message over at the agent's next turn instead of waking it says so
/// with its `injected` receipt: the sender gets the reason live and in `status`; a plain
/// `injected` carries none, and a reason on `delivered` is not passed on.
async fn an_injected_receipt_says_how_the_message_reached_the_agent(db: Db) {
    let Duo {
        relay,
        key: _,
        mut a,
        alice,
        mut b,
        bob,
    } = Duo::start(&db).await;
    let how = "handed over with the next prompt typed in the pane, not typed into the pane \
               (wake deferred: a person is typing in pane %2)";
    let mut ids = Vec::new();
    for text in ["first", "second"] {
        let sent = a
            .notify(&alice, "bob", text)
            .await
            .expect("notify accepted");
        ids.push(sent.message_id);
        let got = b.delivered_to(&bob.peer_id).await;
        b.send(Body::Receipt(Receipt {
            peer_id: bob.peer_id.clone(),
            message_id: got.message.message_id,
            state: ReceiptState::Delivered,
            reason: Some("not passed on".into()),
        }))
        .await;
        b.send(Body::Receipt(Receipt {
            peer_id: bob.peer_id.clone(),
            message_id: got.message.message_id,
            state: ReceiptState::Injected,
            reason: (text == "first").then(|| how.to_owned()),
        }))
        .await;
    }
    for (id, expected) in ids.iter().zip([Some(how), None]) {
        let delivered = a.state_of(*id).await;
        assert_eq!(delivered.state, DeliveryState::Delivered);
        assert_eq!(delivered.reason, None);
        let injected = a.state_of(*id).await;
        assert_eq!(injected.state, DeliveryState::Injected);
        assert_eq!(injected.reason.as_deref(), expected);
        let q = a
            .send(Body::StatusQuery(StatusQuery {
                peer_id: alice.peer_id.clone(),
                message_id: Some(*id),
                correlation_id: None,
            }))
            .await;
        let Ok(Body::Status(status)) = a.answer(q).await else {
            panic!("status")
        };
        assert_eq!(status.recipients[0].state, DeliveryState::Injected);
        assert_eq!(status.recipients[0].reason.as_deref(), expected);
    }
    relay.stop().await;
}

/// Frames sent back to back take effect in the order sent, even where the relay commits them in
/// different writer lanes (receipts, messages): the asker sees delivered, injected, then acked.
async fn receipts_then_an_ack_from_one_connection_take_effect_in_that_order(db: Db) {
    let Duo {
        relay,
        key: _,
        mut a,
        alice,
        mut b,
        bob,
    } = Duo::start(&db).await;
    let accepted = a.ask(&alice, "bob", "ready?").await.expect("ask accepted");
    let cid = accepted.correlation_id.clone().expect("correlation id");
    let got = b.delivered_to(&bob.peer_id).await;
    // Pipelined: neither receipt is waited for before the ack goes.
    b.receipt(
        &bob.peer_id,
        got.message.message_id,
        ReceiptState::Delivered,
    )
    .await;
    b.receipt(&bob.peer_id, got.message.message_id, ReceiptState::Injected)
        .await;
    b.submit(Body::Ack(Ack {
        from: bob.peer_id.clone(),
        correlation_id: cid,
        reply: None,
    }))
    .await
    .expect("ack accepted");
    let mut states = Vec::new();
    for _ in 0..3 {
        states.push(a.state_of(accepted.message_id).await.state);
    }
    assert_eq!(
        states,
        vec![
            DeliveryState::Delivered,
            DeliveryState::Injected,
            DeliveryState::Acked
        ]
    );
    relay.stop().await;
}

async fn ask_then_ack_with_reply_walks_every_delivery_state(db: Db) {
    let Duo {
        relay,
        key: _,
        mut a,
        alice,
        mut b,
        bob,
    } = Duo::start(&db).await;

    let accepted = a
        .ask(&alice, "bob", "is the build green?")
        .await
        .expect("ask accepted");
    let cid = accepted
        .correlation_id
        .clone()
        .expect("asks get a correlation id");
    assert!(cid.is_ask(), "{cid}");
    assert_eq!(accepted.recipients.len(), 1);
    assert_eq!(accepted.recipients[0].peer_id, bob.peer_id);

    let got = b.delivered_to(&bob.peer_id).await;
    assert_eq!(got.message.kind, MessageKind::Ask);
    assert_eq!(got.message.text, "is the build green?");
    assert_eq!(got.message.from.name, "alice");
    assert_eq!(got.message.correlation_id.as_ref(), Some(&cid));

    b.receipt(
        &bob.peer_id,
        got.message.message_id,
        ReceiptState::Delivered,
    )
    .await;
    assert_eq!(
        a.state_of(accepted.message_id).await.state,
        DeliveryState::Delivered
    );
    b.receipt(&bob.peer_id, got.message.message_id, ReceiptState::Injected)
        .await;
    assert_eq!(
        a.state_of(accepted.message_id).await.state,
        DeliveryState::Injected
    );

    let ack = b
        .submit(Body::Ack(Ack {
            from: bob.peer_id.clone(),
            correlation_id: cid.clone(),
            reply: Some("green, ship it".into()),
        }))
        .await
        .expect("ack accepted");
    assert_eq!(
        ack.recipients[0].peer_id, alice.peer_id,
        "the reply goes to the asker"
    );
    let acked = a.state_of(accepted.message_id).await;
    assert_eq!(
        (acked.state, acked.correlation_id.as_ref()),
        (DeliveryState::Acked, Some(&cid))
    );

    let reply = a.delivered_to(&alice.peer_id).await;
    assert_eq!(reply.message.kind, MessageKind::Reply);
    assert_eq!(reply.message.text, "green, ship it");
    assert_eq!(reply.message.correlation_id.as_ref(), Some(&cid));
    assert_eq!(reply.message.from.peer_id, bob.peer_id);

    // The sender can read the same story back.
    let id = a
        .send(Body::StatusQuery(StatusQuery {
            peer_id: alice.peer_id.clone(),
            message_id: None,
            correlation_id: Some(cid.clone()),
        }))
        .await;
    let Ok(Body::Status(status)) = a.answer(id).await else {
        panic!("status")
    };
    assert_eq!(status.recipients[0].state, DeliveryState::Acked);
    assert_eq!(status.reply.as_deref(), Some("green, ship it"));

    // A second ack is refused: the thread is closed.
    let again = b
        .submit(Body::Ack(Ack {
            from: bob.peer_id.clone(),
            correlation_id: cid,
            reply: None,
        }))
        .await
        .expect_err("closed");
    assert_eq!(again.code, ErrorCode::AskClosed);
    relay.stop().await;
}

async fn notify_to_an_offline_peer_is_delivered_once_on_reconnect(db: Db) {
    let relay = TestRelay::start(&db).await;
    let (_, key) = relay.tenant("acme").await;
    let mut a = relay.client(&key).await;
    let alice = a.peer("alice", "dev").await;
    let bob = {
        let mut b = relay.client(&key).await;
        b.peer("bob", "dev").await
    }; // bob's connection drops here

    // Wait until the relay has seen bob go offline.
    let offline = a
        .expect(|f| match &f.body {
            Body::Presence(p)
                if p.peer.peer_id == bob.peer_id && p.event == PresenceEvent::Offline =>
            {
                Some(p.clone())
            }
            _ => None,
        })
        .await;
    assert_eq!(offline.peer.status, PeerStatus::Offline);

    let first = a
        .notify(&alice, "bob", "first")
        .await
        .expect("accepted while offline");
    let second = a
        .notify(&alice, "bob", "second")
        .await
        .expect("accepted while offline");
    assert!(
        first
            .correlation_id
            .as_ref()
            .is_some_and(|c| c.as_str().starts_with("notif-"))
    );

    let mut b = relay.client(&key).await;
    let back = b
        .register(Register {
            name: Some("bob".into()),
            circle: Some("dev".into()),
            backend: "claude-code".into(),
            path: Some("/work/bob".into()),
            reclaim: Some(bob.peer_id.clone()),
            ..Default::default()
        })
        .await;
    assert!(back.reclaimed);
    assert_eq!(back.peer.peer_id, bob.peer_id);
    let d1 = b.delivered_to(&bob.peer_id).await;
    let d2 = b.delivered_to(&bob.peer_id).await;
    assert_eq!(
        (d1.message.text.as_str(), d2.message.text.as_str()),
        ("first", "second"),
        "in order"
    );
    assert!(d1.seq < d2.seq);
    b.receipt(&bob.peer_id, d1.message.message_id, ReceiptState::Delivered)
        .await;
    b.receipt(&bob.peer_id, d2.message.message_id, ReceiptState::Delivered)
        .await;
    assert_eq!(
        a.state_of(first.message_id).await.state,
        DeliveryState::Delivered
    );
    assert_eq!(
        a.state_of(second.message_id).await.state,
        DeliveryState::Delivered
    );

    // Reconnecting again replays nothing: both were reported delivered.
    drop(b);
    let mut b = relay.client(&key).await;
    b.register(Register {
        backend: "claude-code".into(),
        path: Some("/work/bob".into()),
        reclaim: Some(bob.peer_id.clone()),
        ..Default::default()
    })
    .await;
    let third = a.notify(&alice, "bob", "third").await.expect("accepted");
    let d3 = b.delivered_to(&bob.peer_id).await;
    assert_eq!(
        d3.message.message_id, third.message_id,
        "nothing already delivered came again first"
    );
    relay.stop().await;
}

async fn open_asks_survive_a_relay_restart(db: Db) {
    let Duo {
        relay,
        key,
        mut a,
        alice,
        mut b,
        bob,
    } = Duo::start(&db).await;
    let delivered = a
        .ask(&alice, "bob", "delivered before the restart")
        .await
        .expect("accepted");
    let got = b.delivered_to(&bob.peer_id).await;
    b.receipt(
        &bob.peer_id,
        got.message.message_id,
        ReceiptState::Delivered,
    )
    .await;
    assert_eq!(
        a.state_of(delivered.message_id).await.state,
        DeliveryState::Delivered
    );
    drop(b);
    let pending = a
        .ask(&alice, "bob", "sent while bob is away")
        .await
        .expect("accepted");
    relay.stop().await;

    let relay = TestRelay::start(&db).await;
    let mut b = relay.client(&key).await;
    let mut a = relay.client(&key).await;
    let reg = |id: &PeerId, path: &str| Register {
        backend: "claude-code".into(),
        path: Some(path.into()),
        reclaim: Some(id.clone()),
        ..Default::default()
    };
    assert!(
        a.register(reg(&alice.peer_id, "/work/alice"))
            .await
            .reclaimed
    );
    assert!(b.register(reg(&bob.peer_id, "/work/bob")).await.reclaimed);
    let replayed = b.delivered_to(&bob.peer_id).await;
    assert_eq!(
        replayed.message.message_id, pending.message_id,
        "the undelivered ask arrives"
    );
    for (accepted, reply) in [(&delivered, "done 1"), (&pending, "done 2")] {
        let cid = accepted.correlation_id.clone().expect("cid");
        b.submit(Body::Ack(Ack {
            from: bob.peer_id.clone(),
            correlation_id: cid,
            reply: Some(reply.into()),
        }))
        .await
        .expect("both asks are still open after the restart");
        assert_eq!(a.delivered_to(&alice.peer_id).await.message.text, reply);
    }
    relay.stop().await;
}

async fn broadcast_reaches_only_the_senders_circle(db: Db) {
    let relay = TestRelay::start(&db).await;
    let (_, key) = relay.tenant("acme").await;
    let (mut a, mut b, mut c, mut d) = (
        relay.client(&key).await,
        relay.client(&key).await,
        relay.client(&key).await,
        relay.client(&key).await,
    );
    let alice = a.peer("alice", "dev").await;
    let bob = b.peer("bob", "dev").await;
    let carol = c.peer("carol", "dev").await;
    let dave = d.peer("dave", "ops").await;

    let sent = a
        .submit(Body::Broadcast(Broadcast {
            from: alice.peer_id.clone(),
            text: "standup in 5".into(),
        }))
        .await
        .expect("accepted");
    let mut ids: Vec<_> = sent.recipients.iter().map(|r| r.peer_id.clone()).collect();
    ids.sort();
    let mut want = vec![bob.peer_id.clone(), carol.peer_id.clone()];
    want.sort();
    assert_eq!(
        ids, want,
        "only the online peers of the sender's circle, not the sender"
    );
    assert_eq!(
        b.delivered_to(&bob.peer_id).await.message.kind,
        MessageKind::Broadcast
    );
    assert_eq!(
        c.delivered_to(&carol.peer_id).await.message.text,
        "standup in 5"
    );

    // dave (other circle) must not get it: a later notify to dave arrives, and nothing before it.
    let marker = a
        .submit(Body::Notify(Notify {
            from: alice.peer_id.clone(),
            to: "dave".into(),
            circle: Some("ops".into()),
            text: "marker".into(),
        }))
        .await
        .expect("explicit circle reaches ops");
    let got = d.delivered_to(&dave.peer_id).await;
    assert_eq!(got.message.message_id, marker.message_id);
    assert!(
        !d.buffered().any(
            |f| matches!(&f.body, Body::Deliver(x) if x.message.kind == MessageKind::Broadcast)
        ),
        "the broadcast leaked into another circle"
    );
    relay.stop().await;
}

async fn ambiguous_names_are_refused_with_candidates(db: Db) {
    let relay = TestRelay::start(&db).await;
    let (_, key) = relay.tenant("acme").await;
    let (mut o, mut x, mut y, mut z) = (
        relay.client(&key).await,
        relay.client(&key).await,
        relay.client(&key).await,
        relay.client(&key).await,
    );
    let boss = o.peer_with_role("boss", "hq", Role::Orchestrator).await;
    let api_x = x.peer("api", "x").await;
    let api_y = y.peer("api", "y").await;
    // Same name in the same circle gets a suffix instead of a collision.
    let api_x2 = z.peer("api", "x").await;
    assert_eq!(api_x2.name, "api-2");

    let refused = o
        .notify(&boss, "api", "which one?")
        .await
        .expect_err("ambiguous");
    assert_eq!(refused.code, ErrorCode::AmbiguousPeer);
    let mut candidates: Vec<_> = refused
        .candidates
        .iter()
        .map(|c| (c.circle.clone(), c.peer_id.clone()))
        .collect();
    candidates.sort();
    assert_eq!(
        candidates,
        vec![
            ("x".to_owned(), api_x.peer_id.clone()),
            ("y".to_owned(), api_y.peer_id.clone())
        ]
    );

    let ok = o
        .submit(Body::Notify(Notify {
            from: boss.peer_id.clone(),
            to: "api".into(),
            circle: Some("y".into()),
            text: "you".into(),
        }))
        .await
        .expect("a circle disambiguates");
    assert_eq!(ok.recipients[0].peer_id, api_y.peer_id);
    assert_eq!(y.delivered_to(&api_y.peer_id).await.message.text, "you");

    // An agent in circle x resolves `api` in its own circle only: no ambiguity there.
    let mine = z
        .notify(&api_x2, "api", "hi neighbour")
        .await
        .expect("own circle");
    assert_eq!(mine.recipients[0].peer_id, api_x.peer_id);
    // And an unknown name is a clear refusal.
    assert_eq!(
        z.notify(&api_x2, "nobody", "?")
            .await
            .expect_err("unknown")
            .code,
        ErrorCode::UnknownPeer
    );
    relay.stop().await;
}

async fn a_retried_frame_is_accepted_once_and_delivered_once(db: Db) {
    let Duo {
        relay,
        key: _,
        mut a,
        alice,
        mut b,
        bob,
    } = Duo::start(&db).await;
    let frame = notify_frame(&alice, "bob", "once");
    a.send_frame(&frame).await;
    let Ok(Body::Accepted(first)) = a.answer(frame.id).await else {
        panic!("first")
    };
    a.send_frame(&frame).await;
    let Ok(Body::Accepted(second)) = a.answer(frame.id).await else {
        panic!("retry")
    };
    assert_eq!(first.correlation_id, second.correlation_id);
    assert_eq!(second.recipients[0].peer_id, bob.peer_id);

    // The same id with other content is refused.
    let mut forged = frame.clone();
    forged.body = Body::Notify(Notify {
        from: alice.peer_id.clone(),
        to: "bob".into(),
        circle: None,
        text: "twice".into(),
    });
    a.send_frame(&forged).await;
    assert_eq!(
        a.answer(frame.id).await.expect_err("reused id").code,
        ErrorCode::DuplicateId
    );

    let marker = a.notify(&alice, "bob", "marker").await.expect("accepted");
    let d = b.delivered_to(&bob.peer_id).await;
    assert_eq!(d.message.message_id, frame.id);
    let next = b.delivered_to(&bob.peer_id).await;
    assert_eq!(
        next.message.message_id, marker.message_id,
        "the retry was not delivered again"
    );
    relay.stop().await;
}

async fn ask_with_reply_to_closes_the_prior_thread(db: Db) {
    let relay = TestRelay::start(&db).await;
    let (_, key) = relay.tenant("acme").await;
    let (mut a, mut b, mut c) = (
        relay.client(&key).await,
        relay.client(&key).await,
        relay.client(&key).await,
    );
    let alice = a.peer("alice", "dev").await;
    let bob = b.peer("bob", "dev").await;
    let carol = c.peer("carol", "dev").await;
    let first = a
        .ask(&alice, "bob", "can you review?")
        .await
        .expect("accepted");
    let cid = first.correlation_id.clone().expect("cid");
    b.delivered_to(&bob.peer_id).await;

    // carol is not part of the thread: she cannot chain to it.
    let bad = c
        .submit(Body::Ask(Ask {
            from: carol.peer_id.clone(),
            to: "alice".into(),
            circle: None,
            text: "x".into(),
            reply_to: Some(cid.clone()),
            question: None,
        }))
        .await
        .expect_err("not a participant");
    assert_eq!(bad.code, ErrorCode::UnknownCorrelation);

    let follow = b
        .submit(Body::Ask(Ask {
            from: bob.peer_id.clone(),
            to: "alice".into(),
            circle: None,
            text: "which branch?".into(),
            reply_to: Some(cid.clone()),
            question: None,
        }))
        .await
        .expect("chained");
    assert_ne!(follow.correlation_id.as_ref(), Some(&cid), "a new thread");
    assert_eq!(
        a.state_of(first.message_id).await.state,
        DeliveryState::Acked,
        "the prior thread closed"
    );
    let got = a.delivered_to(&alice.peer_id).await;
    assert_eq!(got.message.reply_to.as_ref(), Some(&cid));
    relay.stop().await;
}

async fn structured_questions_take_typed_answers_only(db: Db) {
    let Duo {
        relay,
        key: _,
        mut a,
        alice,
        mut b,
        bob,
    } = Duo::start(&db).await;
    let question = Question::new(QuestionKind::Choice, &[("pg", "Postgres"), ("my", "MySQL")]);
    let asked = a
        .submit(Body::Ask(Ask {
            from: alice.peer_id.clone(),
            to: "bob".into(),
            circle: None,
            text: "which db?".into(),
            reply_to: None,
            question: Some(question.clone()),
        }))
        .await
        .expect("accepted");
    let cid = asked.correlation_id.clone().expect("cid");
    let got = b.delivered_to(&bob.peer_id).await;
    assert_eq!(got.message.question.as_ref(), Some(&question));

    let answer = |option: &str| {
        Body::Answer(Answer {
            from: bob.peer_id.clone(),
            correlation_id: cid.clone(),
            option_id: Some(option.into()),
            text: None,
        })
    };
    let wrong = b.submit(answer("oracle")).await.expect_err("not an option");
    assert_eq!(wrong.code, ErrorCode::InvalidAnswer);
    assert!(
        wrong.message.contains("pg"),
        "the refusal lists the options: {}",
        wrong.message
    );
    b.submit(answer("pg")).await.expect("answered");
    assert_eq!(
        a.state_of(asked.message_id).await.state,
        DeliveryState::Answered
    );
    let reply = a.delivered_to(&alice.peer_id).await;
    assert_eq!(reply.message.text, "Postgres");
    assert_eq!(
        reply.message.answer.and_then(|a| a.option_id).as_deref(),
        Some("pg")
    );

    // A plain ask cannot be answered: replies go through ack.
    let plain = a.ask(&alice, "bob", "plain").await.expect("accepted");
    let refused = b
        .submit(Body::Answer(Answer {
            from: bob.peer_id.clone(),
            correlation_id: plain.correlation_id.expect("cid"),
            option_id: None,
            text: Some("x".into()),
        }))
        .await
        .expect_err("plain asks close with ack");
    assert_eq!(refused.code, ErrorCode::InvalidAnswer);
    relay.stop().await;
}

async fn replies_cross_circles_to_reach_the_asker(db: Db) {
    let relay = TestRelay::start(&db).await;
    let (_, key) = relay.tenant("acme").await;
    let (mut a, mut b) = (relay.client(&key).await, relay.client(&key).await);
    let alice = a.peer("alice", "dev").await;
    let bob = b.peer("bob", "ops").await;
    let asked = a
        .submit(Body::Ask(Ask {
            from: alice.peer_id.clone(),
            to: "bob".into(),
            circle: Some("ops".into()),
            text: "disk space?".into(),
            reply_to: None,
            question: None,
        }))
        .await
        .expect("explicit circle");
    // bob cannot resolve `alice` from his own circle, but the reply is routed by the thread.
    assert_eq!(
        b.notify(&bob, "alice", "hi")
            .await
            .expect_err("other circle")
            .code,
        ErrorCode::UnknownPeer
    );
    b.submit(Body::Ack(Ack {
        from: bob.peer_id.clone(),
        correlation_id: asked.correlation_id.expect("cid"),
        reply: Some("80% free".into()),
    }))
    .await
    .expect("acked");
    assert_eq!(
        a.delivered_to(&alice.peer_id).await.message.text,
        "80% free"
    );
    relay.stop().await;
}

async fn a_retry_is_recognised_even_after_names_changed(db: Db) {
    let relay = TestRelay::start(&db).await;
    let (_, key) = relay.tenant("acme").await;
    let (mut o, mut x, mut y) = (
        relay.client(&key).await,
        relay.client(&key).await,
        relay.client(&key).await,
    );
    let boss = o.peer_with_role("boss", "hq", Role::Orchestrator).await;
    let api_x = x.peer("api", "x").await;
    let frame = notify_frame(&boss, "api", "deploy");
    o.send_frame(&frame).await;
    let Ok(Body::Accepted(first)) = o.answer(frame.id).await else {
        panic!("accepted")
    };
    // A second `api` appears in another circle: the name is now ambiguous for boss...
    y.peer("api", "y").await;
    assert_eq!(
        o.notify(&boss, "api", "new")
            .await
            .expect_err("ambiguous now")
            .code,
        ErrorCode::AmbiguousPeer
    );
    // ...but the retry of the stored message is still answered as accepted, to the same peer.
    o.send_frame(&frame).await;
    let Ok(Body::Accepted(retry)) = o.answer(frame.id).await else {
        panic!("the retry must be recognised")
    };
    assert_eq!(
        (retry.correlation_id, retry.recipients[0].peer_id.clone()),
        (first.correlation_id, api_x.peer_id.clone())
    );
    let got = x.delivered_to(&api_x.peer_id).await;
    assert_eq!(got.message.message_id, frame.id);
    relay.stop().await;
}

async fn an_ack_reusing_another_messages_id_is_refused_and_harms_nothing(db: Db) {
    let Duo {
        relay,
        key: _,
        mut a,
        alice,
        mut b,
        bob,
    } = Duo::start(&db).await;
    let asked = a.ask(&alice, "bob", "q").await.expect("accepted");
    let cid = asked.correlation_id.clone().expect("cid");
    b.delivered_to(&bob.peer_id).await;
    // The ack's frame id (which would become the reply's message id) collides with the ask's.
    let colliding = Frame::with_id(
        asked.message_id,
        Body::Ack(Ack {
            from: bob.peer_id.clone(),
            correlation_id: cid.clone(),
            reply: Some("r".into()),
        }),
    );
    b.send_frame(&colliding).await;
    assert_eq!(
        b.answer(colliding.id).await.expect_err("reused id").code,
        ErrorCode::DuplicateId
    );
    // Other writes still go through, and the ask is still open for a proper ack.
    a.notify(&alice, "bob", "still flowing")
        .await
        .expect("accepted");
    b.submit(Body::Ack(Ack {
        from: bob.peer_id.clone(),
        correlation_id: cid,
        reply: Some("fine".into()),
    }))
    .await
    .expect("the ask stayed open");
    assert_eq!(a.delivered_to(&alice.peer_id).await.message.text, "fine");
    relay.stop().await;
}

async fn a_retried_ack_is_recognised_and_a_changed_one_refused(db: Db) {
    let Duo {
        relay,
        key: _,
        mut a,
        alice,
        mut b,
        bob,
    } = Duo::start(&db).await;
    let asked = a.ask(&alice, "bob", "q").await.expect("accepted");
    let cid = asked.correlation_id.clone().expect("cid");
    b.delivered_to(&bob.peer_id).await;
    let ack = Frame::new(Body::Ack(Ack {
        from: bob.peer_id.clone(),
        correlation_id: cid.clone(),
        reply: Some("yes".into()),
    }));
    b.send_frame(&ack).await;
    let Ok(Body::Accepted(first)) = b.answer(ack.id).await else {
        panic!("acked")
    };
    b.send_frame(&ack).await;
    let Ok(Body::Accepted(again)) = b.answer(ack.id).await else {
        panic!("a retry is answered as accepted")
    };
    assert_eq!(again.correlation_id, first.correlation_id);
    let changed = Frame::with_id(
        ack.id,
        Body::Ack(Ack {
            from: bob.peer_id.clone(),
            correlation_id: cid,
            reply: Some("no!".into()),
        }),
    );
    b.send_frame(&changed).await;
    assert_eq!(
        b.answer(ack.id).await.expect_err("changed reply").code,
        ErrorCode::DuplicateId
    );
    assert_eq!(
        a.delivered_to(&alice.peer_id).await.message.text,
        "yes",
        "one reply, the original"
    );
    relay.stop().await;
}

async fn a_connection_over_its_inflight_writes_waits_instead_of_failing(db: Db) {
    let config = repowire_relay::RelayConfig {
        inflight_writes: 1,
        ..repowire_relay::RelayConfig::for_tests()
    };
    let Duo {
        relay,
        key: _,
        mut a,
        alice,
        mut b,
        bob,
    } = Duo::start_with(&db, config).await;
    let frames: Vec<Frame> = (0..20)
        .map(|i| {
            Frame::new(Body::Notify(Notify {
                from: alice.peer_id.clone(),
                to: "bob".into(),
                circle: None,
                text: format!("n{i}"),
            }))
        })
        .collect();
    for f in &frames {
        a.send_frame(f).await; // pipelined: the relay may hold only one of them in flight
    }
    for f in &frames {
        assert!(
            matches!(a.answer(f.id).await, Ok(Body::Accepted(_))),
            "backpressure, not refusal"
        );
    }
    for i in 0..20 {
        assert_eq!(
            b.delivered_to(&bob.peer_id).await.message.text,
            format!("n{i}"),
            "in order"
        );
    }
    relay.stop().await;
}
