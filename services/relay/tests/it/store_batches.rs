//! The store's write batches, driven directly so that many writes share one transaction: the
//! set-based path must give every write the same outcome the one-at-a-time path would, in
//! order, on both backends — retries, reused ids, caps, receipt chains, unknown peers, tenants.

use crate::common;

use common::Db;
use repowire_protocol::{DeliveryState, MessageKind};
use repowire_relay::storage::store::*;

both_backends!(
    a_batch_gives_each_write_its_own_outcome_in_order,
    the_inbox_cap_holds_inside_one_batch,
    batches_never_cross_tenants,
    delivered_receipts_advance_a_cursor_and_every_path_agrees_with_it,
    two_writers_crossing_the_same_peers_both_commit,
    a_taken_correlation_id_is_minted_again_and_the_batch_goes_on,
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
            suspended_at_ms: None,
            deleted_at_ms: None,
            display_name: None,
            overrides: Default::default(),
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
        deadline_ms: None,
        from_session_id: None,
        to_session_id: None,
        recipients: to.iter().map(|s| s.to_string()).collect(),
        inbox_cap: cap,
        traceparent: Some("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01".into()),
        conversation: None,
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
        WriteOutcome::Receipt(ReceiptOutcome::Changed { change: c, .. }) => c.state,
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
    if let WriteOutcome::Receipt(ReceiptOutcome::Changed { change: c, .. }) = &out[1] {
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
    assert_eq!(
        all[0].message.traceparent.as_deref(),
        Some("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"),
        "a message keeps the trace it was accepted in"
    );
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

/// A new message whose correlation id is already taken by a stored one (a random id that
/// collided) is stored under a fresh id, and the writes around it in the batch are unaffected.
async fn a_taken_correlation_id_is_minted_again_and_the_batch_goes_on(db: Db) {
    let store = db.store().await;
    setup(store.as_ref(), "t1", &["a", "b"]).await;
    store
        .apply(&[notify("t1", "m1", "b", "one")])
        .await
        .expect("first batch");
    let mut collides = msg("t1", "m2", MessageKind::Notify, &["b"], "two", 100);
    collides.correlation_id = Some("notif-m1".into());
    let out = store
        .apply(&[
            notify("t1", "m0", "b", "before"),
            WriteOp::Accept(collides),
            notify("t1", "m3", "b", "after"),
        ])
        .await
        .expect("batch");
    assert_eq!(accepted(&out[0]), own(&[("b", 2)]));
    let minted = match &out[1] {
        WriteOutcome::Accept(AcceptOutcome::Accepted {
            enqueued,
            correlation_id: Some(cid),
            ..
        }) => {
            assert_eq!(enqueued.len(), 1, "{enqueued:?}");
            cid.clone()
        }
        other => panic!("expected accepted with a correlation id, got {other:?}"),
    };
    assert_ne!(minted, "notif-m1");
    assert!(minted.starts_with("notif-"), "{minted}");
    assert_eq!(accepted(&out[2]), own(&[("b", 4)]));
    let status = |key: &str| {
        let store = store.clone();
        let key = MessageKey::Correlation(key.to_owned());
        async move {
            store
                .message_status("t1", "a", &key)
                .await
                .expect("status")
                .map(|s| s.message.message_id)
        }
    };
    assert_eq!(status("notif-m1").await.as_deref(), Some("m1"));
    assert_eq!(status(&minted).await.as_deref(), Some("m2"));
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

async fn delivered_receipts_advance_a_cursor_and_every_path_agrees_with_it(db: Db) {
    let store = db.store().await;
    setup(store.as_ref(), "t1", &["a", "b"]).await;
    let capped = |id: &str| WriteOp::Accept(msg("t1", id, MessageKind::Notify, &["b"], id, 4));
    let ask = |id: &str| {
        let mut m = msg("t1", id, MessageKind::Ask, &["b"], id, 4);
        m.correlation_id = Some(format!("ask-{id}"));
        WriteOp::Accept(m)
    };
    let out = store
        .apply(&[capped("m1"), capped("m2"), ask("q3"), capped("m4")])
        .await
        .expect("batch");
    assert!(
        out.iter()
            .all(|o| matches!(o, WriteOutcome::Accept(AcceptOutcome::Accepted { .. })))
    );
    let status_of = |id: &'static str| {
        let store = store.clone();
        async move {
            store
                .message_status("t1", "a", &MessageKey::Id(id.into()))
                .await
                .expect("db")
                .expect("stored")
                .recipients[0]
                .1
        }
    };

    // Out of order: only seq 3 is receipted; seq 1 is still pending, so 3 moves by itself.
    let out = store
        .apply(&[receipt("t1", "b", "q3", DeliveryState::Delivered)])
        .await
        .expect("batch");
    assert_eq!(changed(&out[0]), DeliveryState::Delivered);
    // Now 1 and 2 arrive: the cursor walks over 1, 2 and the already delivered 3.
    let out = store
        .apply(&[
            receipt("t1", "b", "m1", DeliveryState::Delivered),
            receipt("t1", "b", "m2", DeliveryState::Delivered),
        ])
        .await
        .expect("batch");
    assert_eq!(
        (changed(&out[0]), changed(&out[1])),
        (DeliveryState::Delivered, DeliveryState::Delivered)
    );
    assert_eq!(status_of("m1").await, DeliveryState::Delivered);
    assert_eq!(status_of("m2").await, DeliveryState::Delivered);
    let pending: Vec<i64> = store
        .inbox_after("t1", "b", 0, true, 10)
        .await
        .expect("inbox")
        .iter()
        .map(|e| e.seq)
        .collect();
    assert_eq!(pending, vec![4], "only m4 is still pending");

    // Receipts are idempotent against the cursor, and move on from it.
    let out = store
        .apply(&[
            receipt("t1", "b", "m1", DeliveryState::Delivered),
            receipt("t1", "b", "m2", DeliveryState::Injected),
        ])
        .await
        .expect("batch");
    assert_eq!(out[0], WriteOutcome::Receipt(ReceiptOutcome::Unchanged));
    assert_eq!(changed(&out[1]), DeliveryState::Injected);
    assert_eq!(status_of("m2").await, DeliveryState::Injected);

    // Closing an ask the cursor already covers.
    let close = WriteOp::Close(CloseAsk {
        tenant_id: "t1".into(),
        correlation_id: "ask-q3".into(),
        by_peer_id: "b".into(),
        by_role: "agent".into(),
        by_approver_key: false,
        frame_id: "close-1".into(),
        state: DeliveryState::Acked,
        answer: None,
        reply: None,
        now_ms: 3,
    });
    assert!(matches!(
        &store.apply(&[close]).await.expect("batch")[0],
        WriteOutcome::Close(CloseOutcome::Closed { .. })
    ));
    assert_eq!(status_of("q3").await, DeliveryState::Acked);

    // The cap counted exactly: one pending (m4) of 4, so three more fit and a fourth does not.
    let out = store
        .apply(&[capped("n1"), capped("n2"), capped("n3"), capped("n4")])
        .await
        .expect("batch");
    assert_eq!(
        out.iter()
            .filter(|o| matches!(o, WriteOutcome::Accept(AcceptOutcome::Accepted { .. })))
            .count(),
        3
    );
    assert_eq!(
        out[3],
        WriteOutcome::Accept(AcceptOutcome::InboxFull {
            peer_id: "b".into()
        })
    );

    // Expiry takes only what is still pending, never what the cursor delivered.
    let out = store
        .apply(&[WriteOp::Expire {
            now_ms: i64::MAX,
            limit: 100,
        }])
        .await
        .expect("batch");
    let WriteOutcome::Expire(expired) = &out[0] else {
        panic!("expire outcome")
    };
    let mut ids: Vec<_> = expired.iter().map(|c| c.message_id.as_str()).collect();
    ids.sort();
    assert_eq!(ids, vec!["m4", "n1", "n2", "n3"]);
    assert_eq!(status_of("m1").await, DeliveryState::Delivered);
}

/// Two pods' writers at once, as in a cluster under load: each batch receipts its own pod's
/// receiver and sends to the other pod's, so the two transactions update the same two peer rows
/// in opposite orders. Every batch commits (no deadlock aborts one), and every message lands in
/// its inbox exactly once with its own slot.
async fn two_writers_crossing_the_same_peers_both_commit(db: Db) {
    const ROUNDS: usize = 40;
    let (a, b) = (db.store().await, db.store().await);
    setup(a.as_ref(), "t", &["x", "y"]).await;
    let mut preload = Vec::new();
    for i in 0..ROUNDS {
        preload.push(notify("t", &format!("px{i}"), "x", "pre"));
        preload.push(notify("t", &format!("py{i}"), "y", "pre"));
    }
    a.apply(&preload).await.expect("preload");
    let writer = |store: std::sync::Arc<dyn Store>, mine: &'static str, theirs: &'static str| {
        tokio::spawn(async move {
            for i in 0..ROUNDS {
                let batch = [
                    receipt("t", mine, &format!("p{mine}{i}"), DeliveryState::Delivered),
                    notify("t", &format!("to-{theirs}-{i}"), theirs, "crossing"),
                ];
                if let Err(e) = store.apply(&batch).await {
                    return Err(format!("round {i}: {e}"));
                }
            }
            Ok(())
        })
    };
    let (ra, rb) = tokio::join!(writer(a.clone(), "x", "y"), writer(b.clone(), "y", "x"));
    ra.expect("task").expect("pod a's writer");
    rb.expect("task").expect("pod b's writer");
    for peer in ["x", "y"] {
        let entries = a
            .inbox_after("t", peer, 0, false, 1000)
            .await
            .expect("inbox");
        let mut seqs: Vec<i64> = entries.iter().map(|e| e.seq).collect();
        seqs.dedup();
        assert_eq!(entries.len(), 2 * ROUNDS, "{peer}: every message once");
        assert_eq!(
            seqs,
            (1..=2 * ROUNDS as i64).collect::<Vec<_>>(),
            "{peer}: one slot each"
        );
    }
}

/// What the writer applies again whole: a real Postgres deadlock is a transient conflict; a
/// constraint violation is not (it is about one write, retried alone).
#[sqlx::test(migrations = false)]
async fn a_deadlock_is_a_transient_conflict_and_a_constraint_violation_is_not(pool: sqlx::PgPool) {
    sqlx::query("CREATE TABLE rows_ (id INT PRIMARY KEY)")
        .execute(&pool)
        .await
        .expect("table");
    sqlx::query("INSERT INTO rows_ VALUES (1), (2)")
        .execute(&pool)
        .await
        .expect("rows");
    let (mut one, mut two) = (
        pool.begin().await.expect("tx"),
        pool.begin().await.expect("tx"),
    );
    let lock = "UPDATE rows_ SET id = id WHERE id = $1";
    sqlx::query(lock)
        .bind(1)
        .execute(&mut *one)
        .await
        .expect("lock 1");
    sqlx::query(lock)
        .bind(2)
        .execute(&mut *two)
        .await
        .expect("lock 2");
    // Each now wants the other's row: Postgres aborts one of them.
    let (a, b) = tokio::join!(
        sqlx::query(lock).bind(2).execute(&mut *one),
        sqlx::query(lock).bind(1).execute(&mut *two),
    );
    let aborted = match (a, b) {
        (Err(e), Ok(_)) | (Ok(_), Err(e)) => StoreError::from(e),
        other => panic!("expected exactly one deadlock abort, got {other:?}"),
    };
    assert!(aborted.is_transient_conflict(), "{aborted}");
    drop((one, two));
    let duplicate = sqlx::query("INSERT INTO rows_ VALUES (1)")
        .execute(&pool)
        .await
        .expect_err("duplicate key");
    let duplicate = StoreError::from(duplicate);
    assert!(!duplicate.is_transient_conflict(), "{duplicate}");
    assert!(duplicate.may_be_one_write());
}

/// The writer commits through a pool of its own on Postgres (made on its thread, see
/// `writer.rs`): its connections are closed when the writer ends, not left behind until the
/// process exits (a pod's shutdown, and `#[sqlx::test]`, which drops the database after).
#[sqlx::test(migrations = false)]
async fn the_writers_own_connections_close_when_it_ends(pool: sqlx::PgPool) {
    use std::sync::Arc;
    use std::time::Duration;

    use repowire_relay::metrics::Metrics;
    use repowire_relay::storage::writer::{AfterCommit, Origin, Writer};

    struct Quiet;
    impl AfterCommit for Quiet {
        fn committed(&self, _: &WriteOp, _: &WriteOutcome, _: Option<&Origin>) {}
        fn failed(&self, _: &WriteOp, _: &StoreError, _: Option<&Origin>) {}
    }
    // Backends on this test's database other than the one asking.
    let others = || {
        let pool = pool.clone();
        async move {
            let n: i64 = sqlx::query_scalar(
                "SELECT count(*) FROM pg_stat_activity \
                 WHERE datname = current_database() AND pid <> pg_backend_pid()",
            )
            .fetch_one(&pool)
            .await
            .expect("count");
            n
        }
    };
    let store = Db::Postgres(pool.clone()).store().await;
    setup(store.as_ref(), "t1", &["a", "b"]).await;
    // Hold the test pool's connections still: only the writer's come and go.
    let before = others().await;
    let (writer, task) = Writer::spawn(store, Arc::new(Quiet), Arc::new(Metrics::new()), 16);
    writer
        .write(notify("t1", "m1", "b", "one"))
        .await
        .expect("writer running")
        .expect("committed");
    assert!(
        others().await > before,
        "the write went through a connection of the writer's own"
    );
    drop(writer);
    task.await.expect("writer ended");
    // The writer closed its pool before ending; the server takes a moment to drop the backend.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while others().await > before {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the writer's connection is still open after it ended"
        );
        tokio::task::yield_now().await;
    }
}

/// The pod serving a peer's receipts and a pod accepting messages for that peer do not wait for
/// each other: a receipt moves the peer's cursor row, an accept its slot row. Each side is held
/// open here in a transaction of its own (as another pod's writer would be, mid-batch) while
/// the other side's batch commits.
#[sqlx::test(migrations = false)]
async fn receipts_and_accepts_for_one_peer_lock_different_rows(pool: sqlx::PgPool) {
    use std::time::Duration;

    let store = Db::Postgres(pool.clone()).store().await;
    setup(store.as_ref(), "t", &["a", "b"]).await;
    store
        .apply(&[notify("t", "m1", "b", "one")])
        .await
        .expect("first");
    // A deadline for a failure that would otherwise hang; nothing here waits for it to pass.
    let bounded = |what: &'static str, batch: Vec<WriteOp>| {
        let store = store.clone();
        async move {
            tokio::time::timeout(Duration::from_secs(10), store.apply(&batch))
                .await
                .unwrap_or_else(|_| panic!("{what} waited for the other side's lock"))
                .expect(what)
        }
    };

    // Another writer mid-batch holds b's cursor (receipts): an accept for b still commits.
    let mut held = pool.begin().await.expect("tx");
    sqlx::query(
        "SELECT 1 FROM peer_cursors WHERE tenant_id = 't' AND peer_id = 'b' FOR NO KEY UPDATE",
    )
    .execute(&mut *held)
    .await
    .expect("lock cursor");
    let out = bounded("an accept", vec![notify("t", "m2", "b", "two")]).await;
    assert_eq!(accepted(&out[0]), own(&[("b", 2)]));
    held.rollback().await.expect("release");

    // Another writer mid-batch holds b's slots (accepts): b's receipt still commits.
    let mut held = pool.begin().await.expect("tx");
    sqlx::query("SELECT 1 FROM peers WHERE tenant_id = 't' AND peer_id = 'b' FOR NO KEY UPDATE")
        .execute(&mut *held)
        .await
        .expect("lock slots");
    let out = bounded(
        "a receipt",
        vec![receipt("t", "b", "m1", DeliveryState::Delivered)],
    )
    .await;
    assert_eq!(changed(&out[0]), DeliveryState::Delivered);
    held.rollback().await.expect("release");
}
