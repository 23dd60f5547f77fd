//! Tenants are a hard wall: a second tenant can neither see nor reach the first tenant's
//! peers, asks or messages, even with the same display names and the other side's ids.

use crate::common;

use common::{Db, TestRelay, client};
use repowire_protocol::*;

both_backends!(
    a_second_tenant_can_neither_see_nor_reach_the_first,
    a_long_peer_list_comes_in_pages_that_list_each_visible_peer_once,
);

async fn a_second_tenant_can_neither_see_nor_reach_the_first(db: Db) {
    let relay = TestRelay::start(&db).await;
    let (t1, key1) = relay.tenant("one").await;
    let (t2, key2) = relay.tenant("two").await;
    let (mut a1, mut b1) = (relay.client(&key1).await, relay.client(&key1).await);
    let alice1 = a1.peer("alice", "dev").await;
    let bob1 = b1.peer("bob", "dev").await;
    let (mut a2, mut b2) = (relay.client(&key2).await, relay.client(&key2).await);
    let alice2 = a2.peer("alice", "dev").await;
    let bob2 = b2.peer("bob", "dev").await;
    assert_eq!(
        alice2.name, "alice",
        "names are per tenant: no suffix for another tenant's alice"
    );
    assert_eq!(
        (a1.tenant_id.as_str(), a2.tenant_id.as_str()),
        (t1.as_str(), t2.as_str())
    );

    // A message from tenant one's side that tenant two will try to touch.
    let ask1 = a1
        .ask(&alice1, "bob", "tenant one secret")
        .await
        .expect("accepted");
    let cid1 = ask1.correlation_id.clone().expect("cid");
    let got1 = b1.delivered_to(&bob1.peer_id).await;

    // Same name resolves inside the caller's tenant only.
    let n2 = a2
        .notify(&alice2, "bob", "for tenant two's bob")
        .await
        .expect("accepted");
    assert_eq!(n2.recipients[0].peer_id, bob2.peer_id);
    assert_eq!(
        b2.delivered_to(&bob2.peer_id).await.message.text,
        "for tenant two's bob"
    );

    // The other tenant's peer ids are unknown, not forbidden: nothing about them leaks.
    let by_id = a2
        .notify(&alice2, bob1.peer_id.as_str(), "cross by id")
        .await
        .expect_err("unknown");
    assert_eq!(by_id.code, ErrorCode::UnknownPeer);
    let ack = b2
        .submit(Body::Ack(Ack {
            from: bob2.peer_id.clone(),
            correlation_id: cid1.clone(),
            reply: Some("hijack".into()),
        }))
        .await
        .expect_err("cannot close another tenant's ask");
    assert_eq!(ack.code, ErrorCode::UnknownCorrelation);
    let answer = b2
        .submit(Body::Answer(Answer {
            from: bob2.peer_id.clone(),
            correlation_id: cid1.clone(),
            option_id: None,
            text: Some("x".into()),
        }))
        .await
        .expect_err("cannot answer another tenant's ask");
    assert_eq!(answer.code, ErrorCode::UnknownCorrelation);
    let chained = a2
        .submit(Body::Ask(Ask {
            from: alice2.peer_id.clone(),
            to: "bob".into(),
            circle: None,
            text: "x".into(),
            reply_to: Some(cid1.clone()),
            question: None,
        }))
        .await
        .expect_err("cannot chain to another tenant's ask");
    assert_eq!(chained.code, ErrorCode::UnknownCorrelation);

    // Receipts and status for the other tenant's message change and reveal nothing.
    b2.receipt(
        &bob2.peer_id,
        got1.message.message_id,
        ReceiptState::Injected,
    )
    .await;
    let refused = b2
        .expect(|f| match &f.body {
            Body::Error(e) if e.code == ErrorCode::UnknownMessage => Some(e.clone()),
            _ => None,
        })
        .await;
    assert!(refused.message.contains("not in the inbox"));
    let id = a2
        .send(Body::StatusQuery(StatusQuery {
            peer_id: alice2.peer_id.clone(),
            message_id: Some(ask1.message_id),
            correlation_id: None,
        }))
        .await;
    assert_eq!(
        a2.answer(id).await.expect_err("unknown").code,
        ErrorCode::UnknownMessage
    );

    // A peer of the other tenant cannot be used or reclaimed.
    let id = a2
        .send(Body::Replay(Replay {
            peer_id: bob1.peer_id.clone(),
            after_seq: 0,
        }))
        .await;
    assert_eq!(
        a2.answer(id).await.expect_err("not registered").code,
        ErrorCode::NotRegistered
    );
    let spoof = a2
        .notify(&bob1, "alice", "spoofed sender")
        .await
        .expect_err("not on this connection");
    assert_eq!(spoof.code, ErrorCode::NotRegistered);
    let stolen = a2
        .register(Register {
            backend: "claude-code".into(),
            path: Some("/work/bob".into()),
            reclaim: Some(bob1.peer_id.clone()),
            ..Default::default()
        })
        .await;
    assert!(
        !stolen.reclaimed,
        "another tenant's peer id is never reclaimed"
    );
    assert_ne!(stolen.peer.peer_id, bob1.peer_id);

    // Lists show only the caller's tenant, even across all circles.
    let id = a2
        .send(Body::ListPeers(ListPeers {
            peer_id: alice2.peer_id.clone(),
            circle: None,
            include_offline: true,
            all_circles: true,
            limit: None,
            cursor: None,
        }))
        .await;
    let Ok(Body::Peers(list)) = a2.answer(id).await else {
        panic!("list")
    };
    assert!(
        list.peers
            .iter()
            .all(|p| p.peer_id != alice1.peer_id && p.peer_id != bob1.peer_id)
    );
    assert_eq!(
        list.peers.len(),
        3,
        "alice, bob and the fresh peer of tenant two"
    );

    // Tenant one's ask is untouched: still open, closable by its own recipient, and nothing
    // from tenant two ever reached tenant one's sockets.
    b1.submit(Body::Ack(Ack {
        from: bob1.peer_id.clone(),
        correlation_id: cid1,
        reply: None,
    }))
    .await
    .expect("still open for its own tenant");
    assert_eq!(
        a1.state_of(ask1.message_id).await.state,
        DeliveryState::Acked
    );
    for c in [&a1, &b1] {
        for f in c.buffered() {
            if let Body::Presence(p) = &f.body {
                assert!(
                    p.peer.peer_id != alice2.peer_id && p.peer.peer_id != bob2.peer_id,
                    "presence leaked across tenants"
                );
            }
            if let Body::Deliver(d) = &f.body {
                assert_ne!(
                    d.message.from.peer_id, alice2.peer_id,
                    "a message leaked across tenants"
                );
            }
        }
    }

    // A validly signed token whose tenant claim does not match its key is refused.
    let key1_id = relay.key_id(&key1).await;
    let (mixed, _) = relay
        .state
        .tokens
        .issue(&key1_id, &t2, repowire_relay::ids::now_ms());
    assert_eq!(client::open(&relay.ws, Some(&mixed)).await.err(), Some(401));
    relay.stop().await;
}

/// Issue 30 item 7: a tenant's `peers` answer grew with its stored peers (809 KiB at 3 000;
/// past ~3 800 it would not fit the transport limit). It comes in pages now.
async fn a_long_peer_list_comes_in_pages_that_list_each_visible_peer_once(db: Db) {
    let relay = TestRelay::start(&db).await;
    let (_, key) = relay.tenant("acme").await;
    let mut c = relay.client(&key).await;
    let me = c.peer("me", "dev").await;
    let mut expected = vec![("dev".to_owned(), "me".to_owned())];
    // Mixed case sorts byte by byte on every backend.
    for i in 0..23 {
        let name = if i % 3 == 0 {
            format!("Z{i:02}")
        } else {
            format!("a{i:02}")
        };
        c.peer(&name, "dev").await;
        expected.push(("dev".to_owned(), name));
    }
    // Another circle: not visible to an agent without `all_circles`.
    let mut other = relay.client(&key).await;
    other.peer("hidden", "ops").await;
    expected.sort();

    let page = |cursor: Option<String>, limit: Option<u32>| ListPeers {
        peer_id: me.peer_id.clone(),
        circle: None,
        include_offline: true,
        all_circles: false,
        limit,
        cursor,
    };
    let mut seen = Vec::new();
    let mut cursor = None;
    let mut pages = 0;
    loop {
        let id = c.send(Body::ListPeers(page(cursor.take(), Some(10)))).await;
        let Ok(Body::Peers(p)) = c.answer(id).await else {
            panic!("a page")
        };
        pages += 1;
        assert!(p.peers.len() <= 10);
        seen.extend(p.peers.into_iter().map(|i| (i.circle, i.name)));
        match p.next_cursor {
            Some(next) => cursor = Some(next),
            None => break,
        }
        assert!(pages < 10, "the pages end");
    }
    assert_eq!(pages, 3);
    assert_eq!(seen, expected, "every visible peer once, in order");
    // Without a limit: one page of at most 500, and no cursor when it holds everything.
    let id = c.send(Body::ListPeers(page(None, None))).await;
    let Ok(Body::Peers(all)) = c.answer(id).await else {
        panic!("peers")
    };
    assert_eq!((all.peers.len(), all.next_cursor), (expected.len(), None));
    // Bad limits and cursors are refused.
    for bad in [
        page(None, Some(0)),
        page(None, Some(501)),
        page(Some("nonsense".into()), None),
        page(Some("a:b:c:d".into()), None),
    ] {
        let id = c.send(Body::ListPeers(bad)).await;
        let refused = c.answer(id).await.expect_err("refused");
        assert_eq!(refused.code, ErrorCode::InvalidFrame, "{refused:?}");
    }
    relay.stop().await;
}
