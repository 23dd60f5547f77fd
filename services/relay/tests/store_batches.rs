//! The store's write batches, driven directly so that many writes share one transaction: the
//! set-based path must give every write the same outcome the one-at-a-time path would, in
//! order, on both backends — retries, reused ids, caps, receipt chains, unknown peers, tenants.

mod common;

use common::Db;
use repowire_protocol::{DeliveryState, MessageKind};
use repowire_relay::store::*;

both_backends!(
    a_batch_gives_each_write_its_own_outcome_in_order,
    the_inbox_cap_holds_inside_one_batch,
    batches_never_cross_tenants,
);

fn peer(tenant: &str, id: &str) -> PeerRecord {
    PeerRecord {
        tenant_id: tenant.into(),
        peer_id: id.into(),
        name: id.into(),
        circle: "dev".into(),
        backend: "claude-code".into(),
        role: "agent".into(),
        path: None,
        machine: None,
        description: None,
        description_at_ms: None,
        created_at_ms: 1,
        last_seen_ms: 1,
        last_seq: 0,
    }
}

async fn setup(store: &dyn Store, tenant: &str, peers: &[&str]) {
    store
        .create_tenant(&TenantRecord {
            id: tenant.into(),
            name: tenant.into(),
            plan: "free".into(),
            created_at_ms: 1,
        })
        .await
        .expect("tenant");
    for p in peers {
        store.upsert_peer(&peer(tenant, p)).await.expect("peer");
    }
}

fn msg(tenant: &str, id: &str, kind: MessageKind, to: &[&str], body: &str, cap: i64) -> NewMessage {
    NewMessage {
        tenant_id: tenant.into(),
        message_id: id.into(),
        kind,
        from_peer_id: "a".into(),
        from_name: "a".into(),
        from_circle: "dev".into(),
        body: body.into(),
        correlation_id: Some(format!("notif-{id}")),
        reply_to: None,
        question: None,
        answer: None,
        content_hash: format!("hash-of-{body}"),
        created_at_ms: 1,
        expires_at_ms: i64::MAX / 2,
        recipients: to.iter().map(|s| s.to_string()).collect(),
        inbox_cap: cap,
    }
}

fn notify(tenant: &str, id: &str, to: &str, body: &str) -> WriteOp {
    WriteOp::Accept(msg(tenant, id, MessageKind::Notify, &[to], body, 100))
}

fn receipt(tenant: &str, peer: &str, id: &str, state: DeliveryState) -> WriteOp {
    WriteOp::Receipt(ReceiptOp {
        tenant_id: tenant.into(),
        peer_id: peer.into(),
        message_id: id.into(),
        state,
        reason: None,
        now_ms: 2,
    })
}

fn accepted(o: &WriteOutcome) -> Vec<(String, i64)> {
    match o {
        WriteOutcome::Accept(AcceptOutcome::Accepted { enqueued, .. }) => enqueued
            .iter()
            .map(|e| (e.peer_id.clone(), e.seq))
            .collect(),
        other => panic!("expected accepted, got {other:?}"),
    }
}

fn changed(o: &WriteOutcome) -> DeliveryState {
    match o {
        WriteOutcome::Receipt(ReceiptOutcome::Changed(c)) => c.state,
        other => panic!("expected a change, got {other:?}"),
    }
}

fn own(v: &[(&str, i64)]) -> Vec<(String, i64)> {
    v.iter().map(|(p, s)| (p.to_string(), *s)).collect()
}

async fn a_batch_gives_each_write_its_own_outcome_in_order(db: Db) {
    let store = db.store().await;
    setup(store.as_ref(), "t1", &["a", "b", "c"]).await;
    let out = store
        .apply(&[
            notify("t1", "m1", "b", "one"),
            notify("t1", "m2", "b", "two"),
            WriteOp::Accept(msg(
                "t1",
                "m3",
                MessageKind::Broadcast,
                &["b", "c"],
                "all",
                100,
            )),
            notify("t1", "m1", "b", "one"), // a retry inside the same batch
            notify("t1", "m1", "b", "different"), // the same id reused for other content
            notify("t1", "m4", "ghost", "to nobody"),
        ])
        .await
        .expect("batch");
    assert_eq!(accepted(&out[0]), own(&[("b", 1)]));
    assert_eq!(accepted(&out[1]), own(&[("b", 2)]));
    assert_eq!(
        accepted(&out[2]),
        own(&[("b", 3), ("c", 1)]),
        "per-recipient seqs follow op order"
    );
    assert!(
        matches!(&out[3], WriteOutcome::Accept(AcceptOutcome::Duplicate { recipients, .. }) if recipients == &vec!["b".to_string()])
    );
    assert_eq!(out[4], WriteOutcome::Accept(AcceptOutcome::IdReused));
    assert_eq!(
        out[5],
        WriteOutcome::Accept(AcceptOutcome::UnknownRecipient {
            peer_id: "ghost".into()
        })
    );

    let out = store
        .apply(&[
            notify("t1", "m2", "b", "two"), // a retry of a message stored by an earlier batch
            receipt("t1", "b", "m1", DeliveryState::Delivered),
            receipt("t1", "b", "m1", DeliveryState::Injected), // chained in the same batch
            receipt("t1", "b", "m2", DeliveryState::Delivered),
            receipt("t1", "c", "m3", DeliveryState::Injected), // straight from accepted
            receipt("t1", "b", "m1", DeliveryState::Delivered), // backwards: ignored
            receipt("t1", "b", "nope", DeliveryState::Delivered),
            receipt("t1", "c", "m1", DeliveryState::Delivered), // m1 is not in c's inbox
        ])
        .await
        .expect("batch");
    assert!(matches!(
        &out[0],
        WriteOutcome::Accept(AcceptOutcome::Duplicate { .. })
    ));
    assert_eq!(changed(&out[1]), DeliveryState::Delivered);
    assert_eq!(changed(&out[2]), DeliveryState::Injected);
    assert_eq!(changed(&out[3]), DeliveryState::Delivered);
    assert_eq!(changed(&out[4]), DeliveryState::Injected);
    assert_eq!(out[5], WriteOutcome::Receipt(ReceiptOutcome::Unchanged));
    assert_eq!(out[6], WriteOutcome::Receipt(ReceiptOutcome::Unknown));
    assert_eq!(out[7], WriteOutcome::Receipt(ReceiptOutcome::Unknown));
    if let WriteOutcome::Receipt(ReceiptOutcome::Changed(c)) = &out[1] {
        assert_eq!(
            (
                c.sender.as_str(),
                c.recipient.as_str(),
                c.correlation_id.as_deref()
            ),
            ("a", "b", Some("notif-m1"))
        );
    }

    let pending: Vec<i64> = store
        .inbox_after("t1", "b", 0, true, 10)
        .await
        .expect("inbox")
        .iter()
        .map(|e| e.seq)
        .collect();
    assert_eq!(
        pending,
        vec![3],
        "only the broadcast is still pending for b"
    );
    let all = store
        .inbox_after("t1", "b", 0, false, 10)
        .await
        .expect("inbox");
    let states: Vec<_> = all.iter().map(|e| (e.seq, e.state)).collect();
    assert_eq!(
        states,
        vec![
            (1, DeliveryState::Injected),
            (2, DeliveryState::Delivered),
            (3, DeliveryState::Accepted)
        ]
    );
}

async fn the_inbox_cap_holds_inside_one_batch(db: Db) {
    let store = db.store().await;
    setup(store.as_ref(), "t1", &["a", "d", "e"]).await;
    let capped = |id: &str, kind, to: &[&str]| WriteOp::Accept(msg("t1", id, kind, to, id, 2));
    let out = store
        .apply(&[
            capped("n1", MessageKind::Notify, &["d"]),
            capped("n2", MessageKind::Notify, &["d"]),
            capped("n3", MessageKind::Notify, &["d"]),
            capped("b1", MessageKind::Broadcast, &["d", "e"]),
        ])
        .await
        .expect("batch");
    assert_eq!(accepted(&out[0]), own(&[("d", 1)]));
    assert_eq!(accepted(&out[1]), own(&[("d", 2)]));
    assert_eq!(
        out[2],
        WriteOutcome::Accept(AcceptOutcome::InboxFull {
            peer_id: "d".into()
        }),
        "the third does not fit"
    );
    match &out[3] {
        WriteOutcome::Accept(AcceptOutcome::Accepted {
            enqueued, refused, ..
        }) => {
            assert_eq!(
                enqueued
                    .iter()
                    .map(|e| e.peer_id.as_str())
                    .collect::<Vec<_>>(),
                vec!["e"]
            );
            assert_eq!(refused, &vec!["d".to_string()]);
        }
        other => panic!("{other:?}"),
    }
    // The refusal is on record for the sender; nothing refused is pending delivery.
    let status = store
        .message_status("t1", "a", &MessageKey::Id("b1".into()))
        .await
        .expect("db")
        .expect("stored");
    let d = status
        .recipients
        .iter()
        .find(|(p, _, _)| p == "d")
        .expect("d recorded");
    assert_eq!(d.1, DeliveryState::Failed);
    assert!(
        store
            .message_status("t1", "a", &MessageKey::Id("n3".into()))
            .await
            .expect("db")
            .is_none(),
        "refused means not stored"
    );
    let pending: Vec<_> = store
        .inbox_after("t1", "d", 0, true, 10)
        .await
        .expect("inbox")
        .iter()
        .map(|e| e.message.message_id.clone())
        .collect();
    assert_eq!(pending, vec!["n1", "n2"]);

    // Delivering one frees exactly one slot.
    let out = store
        .apply(&[
            receipt("t1", "d", "n1", DeliveryState::Delivered),
            capped("n4", MessageKind::Notify, &["d"]),
            capped("n5", MessageKind::Notify, &["d"]),
        ])
        .await
        .expect("batch");
    assert_eq!(changed(&out[0]), DeliveryState::Delivered);
    assert!(matches!(
        out[1],
        WriteOutcome::Accept(AcceptOutcome::Accepted { .. })
    ));
    assert_eq!(
        out[2],
        WriteOutcome::Accept(AcceptOutcome::InboxFull {
            peer_id: "d".into()
        })
    );
}

async fn batches_never_cross_tenants(db: Db) {
    let store = db.store().await;
    setup(store.as_ref(), "t1", &["a", "b"]).await;
    setup(store.as_ref(), "t2", &["a", "b"]).await;
    let out = store
        .apply(&[
            notify("t1", "same-id", "b", "tenant one"),
            notify("t2", "same-id", "b", "tenant two"),
            receipt("t2", "b", "same-id", DeliveryState::Delivered),
        ])
        .await
        .expect("batch");
    assert_eq!(accepted(&out[0]), own(&[("b", 1)]));
    assert_eq!(
        accepted(&out[1]),
        own(&[("b", 1)]),
        "the same id in another tenant is another message"
    );
    // Receipts run before accepts inside a run, so this one sees no entry yet.
    assert_eq!(out[2], WriteOutcome::Receipt(ReceiptOutcome::Unknown));
    let out = store
        .apply(&[receipt("t2", "b", "same-id", DeliveryState::Delivered)])
        .await
        .expect("batch");
    assert_eq!(changed(&out[0]), DeliveryState::Delivered);
    let t1 = store
        .inbox_after("t1", "b", 0, false, 10)
        .await
        .expect("inbox");
    assert_eq!(
        (t1[0].state, t1[0].message.body.as_str()),
        (DeliveryState::Accepted, "tenant one"),
        "tenant two's receipt did not touch tenant one"
    );
    let t2 = store
        .inbox_after("t2", "b", 0, false, 10)
        .await
        .expect("inbox");
    assert_eq!(
        (t2[0].state, t2[0].message.body.as_str()),
        (DeliveryState::Delivered, "tenant two")
    );
    assert!(
        store
            .message_status("t2", "a", &MessageKey::Correlation("notif-same-id".into()))
            .await
            .expect("db")
            .is_some()
    );
}
