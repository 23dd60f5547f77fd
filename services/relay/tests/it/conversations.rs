//! Direct conversations (protocol.md §10.15) over real WebSocket clients, on SQLite and on
//! Postgres, and on two pods of one Postgres database.

use crate::common;

use std::collections::BTreeSet;
use std::sync::Arc;

use common::{Db, Duo, TestClient, TestRelay};
use repowire_e2e::{redis_prefix, redis_url};
use repowire_protocol::*;
use repowire_relay::cluster::bus::redis::RedisBus;

both_backends!(
    every_turn_reaches_the_other_participants_once_in_the_conversations_order,
    turns_outside_a_conversation_are_refused_and_change_nothing,
    the_loop_guard_pauses_after_n_turns_no_person_started_and_a_persons_turn_resumes,
    a_participant_ends_a_conversation_and_the_others_are_told_once,
    an_unregistered_participant_ends_its_conversations_and_the_others_are_told,
    a_conversation_idle_past_the_timeout_ends_and_every_participant_is_told,
    the_loop_guard_also_pauses_past_its_bytes_and_a_persons_turn_starts_them_again,
    a_conversation_past_its_turn_rate_refuses_the_turn_for_a_while_and_stores_nothing,
);

fn converse(from: &PeerInfo, to: &[&str], text: &str) -> Body {
    Body::Converse(Converse {
        from: from.peer_id.clone(),
        to: to.iter().map(|s| (*s).to_owned()).collect(),
        circle: None,
        text: text.into(),
    })
}

fn turn(from: &PeerInfo, conversation_id: &str, text: &str) -> Body {
    Body::Turn(Turn {
        from: from.peer_id.clone(),
        conversation_id: conversation_id.into(),
        text: text.into(),
        by_person: false,
    })
}

/// The conversation a delivered message belongs to.
fn conversation_of(d: &Deliver) -> ConversationRef {
    d.message
        .conversation
        .clone()
        .unwrap_or_else(|| panic!("no conversation on {:?}", d.message))
}

/// The next conversation message delivered to `to`, receipted.
async fn next_turn(c: &mut TestClient, to: &PeerInfo) -> Deliver {
    let d = c.delivered_to(&to.peer_id).await;
    c.receipt(&to.peer_id, d.message.message_id, ReceiptState::Delivered)
        .await;
    d
}

/// Three peers, one of them in another circle (a conversation crosses circles once its opener
/// named the participants): the opening and every turn reach each other participant once, never
/// the speaker, with one seq per message shared by everyone; a retried turn is the same message.
async fn every_turn_reaches_the_other_participants_once_in_the_conversations_order(db: Db) {
    let Duo {
        relay,
        key,
        mut a,
        alice,
        mut b,
        bob,
    } = Duo::start(&db).await;
    let mut c = relay.client(&key).await;
    let carol = c.peer("carol", "ops").await;

    let opened = a
        .submit(converse(
            &alice,
            &["bob", carol.peer_id.as_str()],
            "schema?",
        ))
        .await
        .expect("converse accepted");
    let id = opened.conversation_id.clone().expect("a conversation id");
    assert!(looks_like_conversation_id(&id), "{id}");
    assert_eq!(opened.conversation_seq, Some(1));
    let names: BTreeSet<&str> = opened.recipients.iter().map(|r| r.name.as_str()).collect();
    assert_eq!(names, BTreeSet::from(["bob", "carol"]));

    for (client, me) in [(&mut b, &bob), (&mut c, &carol)] {
        let d = next_turn(client, me).await;
        let conv = conversation_of(&d);
        assert_eq!(d.message.kind, MessageKind::Notify);
        assert_eq!(d.message.text, "schema?");
        assert_eq!(
            (conv.id.as_str(), conv.seq, conv.event),
            (id.as_str(), 1, ConversationEvent::Open)
        );
        let who: Vec<&str> = conv.participants.iter().map(|p| p.name.as_str()).collect();
        assert_eq!(who, ["alice", "bob", "carol"], "the opener first");
    }

    // bob, carol, alice, bob: each turn to the two others, seq 2..=5.
    let mut sent = Vec::new();
    for (n, speaker) in ["bob", "carol", "alice", "bob"].into_iter().enumerate() {
        let text = format!("{speaker} says {n}");
        let (client, me) = match speaker {
            "alice" => (&mut a, &alice),
            "bob" => (&mut b, &bob),
            _ => (&mut c, &carol),
        };
        let frame = Frame::new(turn(me, &id, &text));
        client.send_frame(&frame).await;
        let Ok(Body::Accepted(acc)) = client.answer(frame.id).await else {
            panic!("turn {n} refused")
        };
        assert_eq!(acc.conversation_id.as_deref(), Some(id.as_str()));
        assert_eq!(acc.conversation_seq, Some(n as u64 + 2));
        assert_eq!(acc.recipients.len(), 2, "{:?}", acc.recipients);
        assert!(acc.recipients.iter().all(|r| r.peer_id != me.peer_id));
        sent.push((speaker, text, frame));
    }
    // A retried turn (same id, same content): the same message and seq, delivered to nobody
    // again (the next turn each participant gets is the next seq).
    let (_, _, first) = &sent[0];
    b.send_frame(first).await;
    let Ok(Body::Accepted(again)) = b.answer(first.id).await else {
        panic!("retry refused")
    };
    assert_eq!(again.conversation_seq, Some(2));

    for (client, me) in [(&mut a, &alice), (&mut b, &bob), (&mut c, &carol)] {
        let expected: Vec<(u64, String)> = sent
            .iter()
            .enumerate()
            .filter(|(_, (speaker, _, _))| *speaker != me.name)
            .map(|(n, (_, text, _))| (n as u64 + 2, text.clone()))
            .collect();
        let mut got = Vec::new();
        for _ in 0..expected.len() {
            let d = next_turn(client, me).await;
            let conv = conversation_of(&d);
            assert_eq!(conv.event, ConversationEvent::Turn);
            assert_ne!(d.message.from.peer_id, me.peer_id, "echoed to its speaker");
            got.push((conv.seq, d.message.text.clone()));
        }
        assert_eq!(got, expected, "{}", me.name);
    }
    let last = b
        .submit(turn(&bob, &id, "the next one"))
        .await
        .expect("turn accepted");
    assert_eq!(last.conversation_seq, Some(6), "the retry took no seq");
    for (client, me) in [(&mut a, &alice), (&mut c, &carol)] {
        let d = next_turn(client, me).await;
        assert_eq!(
            conversation_of(&d).seq,
            6,
            "{}: no duplicate came first",
            me.name
        );
    }
    relay.stop().await;
}

/// A turn from a peer that is not a participant, in a conversation that does not exist or is
/// another tenant's, and openings that name the opener, name one peer twice or exceed the cap
/// are refused with their codes, and none of them takes a seq or reaches anyone.
async fn turns_outside_a_conversation_are_refused_and_change_nothing(db: Db) {
    let mut config = repowire_relay::config::RelayConfig::for_tests();
    config.conversation_participants = 3;
    let Duo {
        relay,
        key,
        mut a,
        alice,
        mut b,
        bob,
    } = Duo::start_with(&db, config).await;
    let mut c = relay.client(&key).await;
    let carol = c.peer("carol", "dev").await;
    c.peer("dave", "dev").await;

    let refused = |r: Result<Accepted, ErrorFrame>| r.expect_err("refused").code;
    assert_eq!(
        refused(a.submit(converse(&alice, &["alice"], "me")).await),
        ErrorCode::InvalidFrame
    );
    assert_eq!(
        refused(
            a.submit(converse(&alice, &["bob", bob.peer_id.as_str()], "twice"))
                .await
        ),
        ErrorCode::InvalidFrame
    );
    assert_eq!(
        refused(
            a.submit(converse(&alice, &["bob", "carol", "dave"], "four"))
                .await
        ),
        ErrorCode::LimitExceeded
    );
    let id = a
        .submit(converse(&alice, &["bob"], "just us"))
        .await
        .expect("converse accepted")
        .conversation_id
        .expect("id");
    let d = next_turn(&mut b, &bob).await;
    assert_eq!(
        d.message.text, "just us",
        "the refused openings reached nobody"
    );

    assert_eq!(
        refused(c.submit(turn(&carol, &id, "let me in")).await),
        ErrorCode::NotParticipant
    );
    assert_eq!(
        refused(b.submit(turn(&bob, "cv-0000000000000000", "nowhere")).await),
        ErrorCode::UnknownConversation
    );
    // Another tenant's peer cannot even see that the conversation exists.
    let (_, other_key) = relay.tenant("globex").await;
    let mut o = relay.client(&other_key).await;
    let mallory = o.peer("mallory", "dev").await;
    assert_eq!(
        refused(o.submit(turn(&mallory, &id, "hello")).await),
        ErrorCode::UnknownConversation
    );

    let next = b
        .submit(turn(&bob, &id, "still here"))
        .await
        .expect("turn accepted");
    assert_eq!(next.conversation_seq, Some(2), "no refused turn took a seq");
    let d = next_turn(&mut a, &alice).await;
    assert_eq!(d.message.text, "still here");
    assert!(
        c.buffered().all(|f| !matches!(f.body, Body::Deliver(_))),
        "nothing reached a non-participant"
    );
    relay.stop().await;
}

/// With the loop guard at 3: three turns no person started go through; the fourth is refused
/// with `conversation_paused`, and every participant (its speaker too) gets one pause notice in
/// the conversation's order; more such turns are refused without another notice; a turn a
/// person's prompt started resumes the conversation and starts a new run of 3.
async fn the_loop_guard_pauses_after_n_turns_no_person_started_and_a_persons_turn_resumes(db: Db) {
    let mut config = repowire_relay::config::RelayConfig::for_tests();
    config.conversation_loop_turns = 3;
    let Duo {
        relay,
        key: _,
        mut a,
        alice,
        mut b,
        bob,
    } = Duo::start_with(&db, config).await;
    let id = a
        .submit(converse(&alice, &["bob"], "loop with me"))
        .await
        .expect("converse accepted")
        .conversation_id
        .expect("id");
    next_turn(&mut b, &bob).await;
    let by = |who: &PeerInfo, text: &str, by_person: bool| {
        Body::Turn(Turn {
            from: who.peer_id.clone(),
            conversation_id: id.clone(),
            text: text.into(),
            by_person,
        })
    };
    for (n, speaker) in ["bob", "alice", "bob"].into_iter().enumerate() {
        let (client, me) = if speaker == "bob" {
            (&mut b, &bob)
        } else {
            (&mut a, &alice)
        };
        let acc = client
            .submit(by(me, &format!("turn {n}"), false))
            .await
            .expect("within the guard");
        assert_eq!(acc.conversation_seq, Some(n as u64 + 2));
    }
    for (client, me, count) in [(&mut a, &alice, 2), (&mut b, &bob, 1)] {
        for _ in 0..count {
            assert_eq!(
                conversation_of(&next_turn(client, me).await).event,
                ConversationEvent::Turn
            );
        }
    }
    let tripped = a
        .submit(by(&alice, "a fourth", false))
        .await
        .expect_err("the guard trips");
    assert_eq!(
        tripped.code,
        ErrorCode::ConversationPaused,
        "{}",
        tripped.message
    );
    for (client, me) in [(&mut a, &alice), (&mut b, &bob)] {
        let d = next_turn(client, me).await;
        let conv = conversation_of(&d);
        assert_eq!(
            (conv.event, conv.seq),
            (ConversationEvent::Paused, 5),
            "{}",
            me.name
        );
        let reason = conv.reason.unwrap_or_default();
        assert!(
            reason.starts_with("3 turns in a row without a person's prompt"),
            "{reason}"
        );
        assert_ne!(
            d.message.text, "a fourth",
            "the refused turn is not relayed"
        );
    }
    let again = b
        .submit(by(&bob, "still looping", false))
        .await
        .expect_err("paused");
    assert_eq!(again.code, ErrorCode::ConversationPaused);

    let resumed = a
        .submit(by(&alice, "my person says: go on", true))
        .await
        .expect("a person's turn resumes it");
    assert_eq!(
        resumed.conversation_seq,
        Some(6),
        "the refusals took no seq"
    );
    let d = next_turn(&mut b, &bob).await;
    assert_eq!(
        (d.message.text.as_str(), conversation_of(&d).seq),
        ("my person says: go on", 6),
        "bob got no second notice and no refused turn"
    );
    for n in 0..3 {
        b.submit(by(&bob, &format!("again {n}"), false))
            .await
            .expect("a new run of 3");
    }
    let tripped = b
        .submit(by(&bob, "one too many", false))
        .await
        .expect_err("trips again");
    assert_eq!(tripped.code, ErrorCode::ConversationPaused);
    relay.stop().await;
}

/// `end_conversation` from a participant: the others get one notice (event `ended`, the reason,
/// the next seq); the ender is answered `accepted` and a retry of it again, with the same seq;
/// from then on every turn and a second end are refused with `conversation_ended`; a peer that
/// is not a participant cannot end it.
async fn a_participant_ends_a_conversation_and_the_others_are_told_once(db: Db) {
    let Duo {
        relay,
        key,
        mut a,
        alice,
        mut b,
        bob,
    } = Duo::start(&db).await;
    let mut c = relay.client(&key).await;
    let carol = c.peer("carol", "dev").await;
    let id = a
        .submit(converse(&alice, &["bob"], "quick one"))
        .await
        .expect("converse accepted")
        .conversation_id
        .expect("id");
    next_turn(&mut b, &bob).await;
    let end = |who: &PeerInfo, reason: Option<&str>| {
        Body::EndConversation(EndConversation {
            from: who.peer_id.clone(),
            conversation_id: id.clone(),
            reason: reason.map(str::to_owned),
        })
    };
    let outsider = c.submit(end(&carol, None)).await.expect_err("not hers");
    assert_eq!(outsider.code, ErrorCode::NotParticipant);

    let frame = Frame::new(end(&bob, Some("settled: v2 it is")));
    b.send_frame(&frame).await;
    let Ok(Body::Accepted(ended)) = b.answer(frame.id).await else {
        panic!("end refused")
    };
    assert_eq!(ended.conversation_seq, Some(2));
    assert_eq!(ended.recipients.len(), 1);
    assert_eq!(ended.recipients[0].peer_id, alice.peer_id);
    b.send_frame(&frame).await;
    let Ok(Body::Accepted(again)) = b.answer(frame.id).await else {
        panic!("a retried end is the same message")
    };
    assert_eq!(again.conversation_seq, Some(2));

    let d = next_turn(&mut a, &alice).await;
    let conv = conversation_of(&d);
    assert_eq!((conv.event, conv.seq), (ConversationEvent::Ended, 2));
    assert_eq!(conv.reason.as_deref(), Some("settled: v2 it is"));
    assert_eq!(
        d.message.text,
        "@bob ended the conversation: settled: v2 it is"
    );

    for (client, me) in [(&mut a, &alice), (&mut b, &bob)] {
        let late = client
            .submit(turn(me, &id, "one more thing"))
            .await
            .expect_err("ended");
        assert_eq!(late.code, ErrorCode::ConversationEnded, "{}", late.message);
        assert!(
            late.message.contains("settled: v2 it is"),
            "{}",
            late.message
        );
    }
    let twice = a
        .submit(end(&alice, None))
        .await
        .expect_err("ended already");
    assert_eq!(twice.code, ErrorCode::ConversationEnded);
    // Nothing after the notice reached alice (a turn or a second notice would come first).
    let probe = b
        .notify(&bob, "alice", "plain notify after the end")
        .await
        .expect("notify");
    let d = next_turn(&mut a, &alice).await;
    assert_eq!(d.message.message_id, probe.message_id);
    assert!(d.message.conversation.is_none());
    relay.stop().await;
}

/// A participant's peer is unregistered (its session ended; the daemon's own end is best
/// effort): each conversation it took part in ends, once, with a notice from it to the others
/// (the next seq, "@bob's session ended"); a conversation without it goes on.
async fn an_unregistered_participant_ends_its_conversations_and_the_others_are_told(db: Db) {
    let Duo {
        relay,
        key,
        mut a,
        alice,
        mut b,
        bob,
    } = Duo::start(&db).await;
    let mut c = relay.client(&key).await;
    let carol = c.peer("carol", "dev").await;
    let with_bob = a
        .submit(converse(&alice, &["bob", "carol"], "three of us"))
        .await
        .expect("converse accepted")
        .conversation_id
        .expect("id");
    let without_bob = a
        .submit(converse(&alice, &["carol"], "just us two"))
        .await
        .expect("converse accepted")
        .conversation_id
        .expect("id");
    next_turn(&mut b, &bob).await;
    next_turn(&mut c, &carol).await;
    next_turn(&mut c, &carol).await;
    b.submit(turn(&bob, &with_bob, "my last word"))
        .await
        .expect("turn accepted");
    for (client, me) in [(&mut a, &alice), (&mut c, &carol)] {
        assert_eq!(next_turn(client, me).await.message.text, "my last word");
    }

    let id = b
        .send(Body::Unregister(PeerRef {
            peer_id: bob.peer_id.clone(),
        }))
        .await;
    b.answer(id).await.expect("unregistered");
    for (client, me) in [(&mut a, &alice), (&mut c, &carol)] {
        let d = next_turn(client, me).await;
        let conv = conversation_of(&d);
        assert_eq!(
            (conv.id.as_str(), conv.event, conv.seq),
            (with_bob.as_str(), ConversationEvent::Ended, 3),
            "{}",
            me.name
        );
        assert_eq!(conv.reason.as_deref(), Some("@bob's session ended"));
        assert_eq!(d.message.from.peer_id, bob.peer_id);
        assert_eq!(
            d.message.text,
            "The conversation ended: @bob's session ended."
        );
    }
    let late = a
        .submit(turn(&alice, &with_bob, "bob?"))
        .await
        .expect_err("ended");
    assert_eq!(late.code, ErrorCode::ConversationEnded);
    assert!(
        late.message.contains("@bob's session ended"),
        "{}",
        late.message
    );
    // The other conversation goes on, and its next message is the next alice gets: no second
    // notice came for the first.
    let next = c
        .submit(turn(&carol, &without_bob, "still here"))
        .await
        .expect("turn accepted");
    assert_eq!(next.conversation_seq, Some(2));
    let d = next_turn(&mut a, &alice).await;
    assert_eq!(d.message.text, "still here");
    relay.stop().await;
}

/// No turn for the idle timeout: the sweep ends the conversation, once, and every participant
/// (the opener too) gets a notice with the next seq; a conversation with a turn after the
/// cut-off goes on; a second sweep ends nothing more.
async fn a_conversation_idle_past_the_timeout_ends_and_every_participant_is_told(db: Db) {
    use repowire_relay::routing::conversation_ends::end_idle;
    let Duo {
        relay,
        key: _,
        mut a,
        alice,
        mut b,
        bob,
    } = Duo::start(&db).await;
    let idle_ms = i64::try_from(relay.state.config.conversation_idle_secs * 1000).expect("ms");
    let opened = repowire_relay::ids::now_ms();
    let quiet = a
        .submit(converse(&alice, &["bob"], "anyone?"))
        .await
        .expect("converse accepted")
        .conversation_id
        .expect("id");
    let busy = a
        .submit(converse(&alice, &["bob"], "and this one"))
        .await
        .expect("converse accepted")
        .conversation_id
        .expect("id");
    next_turn(&mut b, &bob).await;
    next_turn(&mut b, &bob).await;
    // Both were opened before the cut-off; a turn after it keeps `busy` going.
    let cut = repowire_relay::ids::now_ms() + 1;
    while repowire_relay::ids::now_ms() <= cut {
        tokio::task::yield_now().await;
    }
    b.submit(turn(&bob, &busy, "still on it"))
        .await
        .expect("turn accepted");
    assert_eq!(next_turn(&mut a, &alice).await.message.text, "still on it");

    assert_eq!(
        end_idle(&relay.state, opened + idle_ms).await,
        0,
        "not idle yet"
    );
    assert_eq!(end_idle(&relay.state, cut + idle_ms).await, 1);
    for (client, me) in [(&mut a, &alice), (&mut b, &bob)] {
        let d = next_turn(client, me).await;
        let conv = conversation_of(&d);
        assert_eq!(
            (conv.id.as_str(), conv.event, conv.seq),
            (quiet.as_str(), ConversationEvent::Ended, 2),
            "{}",
            me.name
        );
        assert_eq!(conv.reason.as_deref(), Some("no turn for 1 hour"));
        assert_eq!(d.message.from.peer_id, alice.peer_id, "from the opener");
    }
    assert_eq!(end_idle(&relay.state, cut + idle_ms).await, 0, "ended once");
    let late = b
        .submit(turn(&bob, &quiet, "hello?"))
        .await
        .expect_err("ended");
    assert_eq!(late.code, ErrorCode::ConversationEnded);
    let next = a
        .submit(turn(&alice, &busy, "yes"))
        .await
        .expect("the busy one goes on");
    assert_eq!(next.conversation_seq, Some(3));
    let d = next_turn(&mut b, &bob).await;
    assert_eq!(d.message.text, "yes", "no second notice came first");
    relay.stop().await;
}

/// With the loop guard's bytes at 32 KiB (the least it takes): two turns of 13 000 bytes no
/// person started go through, the third (39 000 bytes in all) is refused with `conversation_paused` and both participants
/// get the notice; a person's turn resumes it and starts the count again from zero.
async fn the_loop_guard_also_pauses_past_its_bytes_and_a_persons_turn_starts_them_again(db: Db) {
    let mut config = repowire_relay::config::RelayConfig::for_tests();
    config.conversation_loop_bytes = 32 * 1024;
    let Duo {
        relay,
        key: _,
        mut a,
        alice,
        mut b,
        bob,
    } = Duo::start_with(&db, config).await;
    let id = a
        .submit(converse(&alice, &["bob"], "long answers please"))
        .await
        .expect("converse accepted")
        .conversation_id
        .expect("id");
    next_turn(&mut b, &bob).await;
    let long = |who: &str| format!("{who}: {}", "x".repeat(13_000 - who.len() - 2));
    b.submit(turn(&bob, &id, &long("bob")))
        .await
        .expect("13 000 bytes");
    a.submit(turn(&alice, &id, &long("alice")))
        .await
        .expect("26 000 bytes");
    let refused = b
        .submit(turn(&bob, &id, &long("bob")))
        .await
        .expect_err("past 32 KiB");
    assert_eq!(
        refused.code,
        ErrorCode::ConversationPaused,
        "{}",
        refused.message
    );
    for (client, me, turns) in [(&mut a, &alice, 1), (&mut b, &bob, 1)] {
        for _ in 0..turns {
            assert_eq!(
                conversation_of(&next_turn(client, me).await).event,
                ConversationEvent::Turn
            );
        }
        let d = next_turn(client, me).await;
        let conv = conversation_of(&d);
        assert_eq!(
            (conv.event, conv.seq),
            (ConversationEvent::Paused, 4),
            "{}",
            me.name
        );
        assert!(
            conv.reason
                .as_deref()
                .is_some_and(|r| r.starts_with("32 KiB relayed without a person's prompt")),
            "{:?}",
            conv.reason
        );
    }
    let person = Body::Turn(Turn {
        from: alice.peer_id.clone(),
        conversation_id: id.clone(),
        text: long("alice"),
        by_person: true,
    });
    let resumed = a.submit(person).await.expect("a person's turn resumes it");
    assert_eq!(resumed.conversation_seq, Some(5));
    // The count starts again after the person's turn: 26 000 bytes more go, 39 000 do not.
    b.submit(turn(&bob, &id, &long("bob")))
        .await
        .expect("13 000");
    a.submit(turn(&alice, &id, &long("alice")))
        .await
        .expect("26 000");
    let again = b
        .submit(turn(&bob, &id, &long("bob")))
        .await
        .expect_err("past 32 KiB again");
    assert_eq!(again.code, ErrorCode::ConversationPaused);
    relay.stop().await;
}

/// Two pods on one Postgres database accept turns of one conversation at the same time: every
/// turn gets its own seq, the seqs have no gap, and the observer on a third connection receives
/// them in seq order (its inbox order is the conversation's order).
#[sqlx::test(migrations = false)]
async fn concurrent_turns_on_two_pods_get_one_order(pool: sqlx::PgPool) {
    let prefix = redis_prefix();
    let bus = |pod: &'static str| {
        let prefix = prefix.clone();
        async move {
            Arc::new(
                RedisBus::connect(&redis_url(), &prefix, pod)
                    .await
                    .expect("redis"),
            )
        }
    };
    let db = Db::Postgres(pool);
    // The agents here never get a person's prompt: the loop guard must let 50 turns through.
    let mut config = repowire_relay::config::RelayConfig::for_tests();
    config.conversation_loop_turns = 1000;
    // Measured is the order, not the rate.
    config.conversation_turns_per_minute = 6000;
    let pod_a = TestRelay::start_pod_with(&db, config.clone(), bus("pod-a").await).await;
    let pod_b = TestRelay::start_pod_with(&db, config, bus("pod-b").await).await;
    let (_, key) = pod_a.tenant("acme").await;
    let mut a = pod_a.client(&key).await;
    let alice = a.peer("alice", "dev").await;
    let mut b = pod_b.client(&key).await;
    let bob = b.peer("bob", "dev").await;
    let mut o = pod_b.client(&key).await;
    let olga = o.peer("olga", "dev").await;

    let id = a
        .submit(converse(
            &alice,
            &[bob.peer_id.as_str(), olga.peer_id.as_str()],
            "go",
        ))
        .await
        .expect("converse accepted")
        .conversation_id
        .expect("id");
    next_turn(&mut o, &olga).await;

    const EACH: usize = 25;
    let mut frames = Vec::new();
    for n in 0..EACH {
        for (client, me) in [(&mut a, &alice), (&mut b, &bob)] {
            let frame = Frame::new(turn(me, &id, &format!("{} {n}", me.name)));
            client.send_frame(&frame).await;
            frames.push((me.name.clone(), frame.id));
        }
    }
    let mut seqs = BTreeSet::new();
    for (name, frame_id) in &frames {
        let client = if name == "alice" { &mut a } else { &mut b };
        let Ok(Body::Accepted(acc)) = client.answer(*frame_id).await else {
            panic!("a turn of {name} was refused")
        };
        assert!(
            seqs.insert(acc.conversation_seq.expect("seq")),
            "a seq given twice"
        );
    }
    let all: BTreeSet<u64> = (2..2 + 2 * EACH as u64).collect();
    assert_eq!(seqs, all, "one seq per turn, no gap");

    let mut got = Vec::new();
    for _ in 0..2 * EACH {
        let d = next_turn(&mut o, &olga).await;
        got.push((conversation_of(&d).seq, d.message.text.clone()));
    }
    let order: Vec<u64> = got.iter().map(|(seq, _)| *seq).collect();
    assert_eq!(
        order,
        all.iter().copied().collect::<Vec<_>>(),
        "delivered in seq order"
    );
    // Each speaker's own turns keep the order they were sent in.
    for name in ["alice", "bob"] {
        let mine: Vec<&str> = got
            .iter()
            .map(|(_, t)| t.as_str())
            .filter(|t| t.starts_with(name))
            .collect();
        let sent: Vec<String> = (0..EACH).map(|n| format!("{name} {n}")).collect();
        assert_eq!(mine, sent);
    }
    pod_a.stop().await;
    pod_b.stop().await;
}

/// At 2 turns a minute: two turns go through at once; the third, a person's too, is refused
/// with `rate_limited` and a wait of up to a cell (30 s) to send it again, and takes no seq and
/// reaches nobody: the end that follows (never held to the rate) is the next message. The
/// refill over time is `turn_rate`'s (unit-tested with its own clock).
async fn a_conversation_past_its_turn_rate_refuses_the_turn_for_a_while_and_stores_nothing(db: Db) {
    let mut config = repowire_relay::config::RelayConfig::for_tests();
    config.conversation_turns_per_minute = 2;
    let Duo {
        relay,
        key: _,
        mut a,
        alice,
        mut b,
        bob,
    } = Duo::start_with(&db, config).await;
    let id = a
        .submit(converse(&alice, &["bob"], "rate me"))
        .await
        .expect("converse accepted (the opening is the tenant's rate's)")
        .conversation_id
        .expect("id");
    next_turn(&mut b, &bob).await;
    for (n, (client, me)) in [(&mut b, &bob), (&mut a, &alice)].into_iter().enumerate() {
        let acc = client
            .submit(turn(me, &id, &format!("turn {n}")))
            .await
            .expect("within the rate");
        assert_eq!(acc.conversation_seq, Some(n as u64 + 2));
    }
    assert_eq!(next_turn(&mut a, &alice).await.message.text, "turn 0");
    assert_eq!(next_turn(&mut b, &bob).await.message.text, "turn 1");

    let person = Body::Turn(Turn {
        from: bob.peer_id.clone(),
        conversation_id: id.clone(),
        text: "my person says hi".into(),
        by_person: true,
    });
    let refused = b.submit(person).await.expect_err("past the rate");
    assert_eq!(refused.code, ErrorCode::RateLimited, "{}", refused.message);
    let wait = refused.retry_after_ms.expect("a retry_after_ms");
    assert!((1..=30_000).contains(&wait), "{wait}");
    assert!(
        refused.message.contains("allows 2 turns a minute"),
        "{}",
        refused.message
    );

    let ended = b
        .submit(Body::EndConversation(EndConversation {
            from: bob.peer_id.clone(),
            conversation_id: id.clone(),
            reason: Some("enough".into()),
        }))
        .await
        .expect("an end is never held to the rate");
    assert_eq!(
        ended.conversation_seq,
        Some(4),
        "the refused turn took no seq"
    );
    let d = next_turn(&mut a, &alice).await;
    assert_eq!(
        (conversation_of(&d).event, conversation_of(&d).seq),
        (ConversationEvent::Ended, 4),
        "{}",
        d.message.text
    );
    relay.stop().await;
}
