//! Session bindings: a durable Repowire session per work stream, kept across a `/clear` (new
//! runtime id, same session), a resume (the runtime id leads back) and a relay restart;
//! sessions listed as active or detached; messages addressed to a session, also while it is
//! detached; the session metadata of messages; the tenant wall. On SQLite and on Postgres.

use crate::common;

use common::{Db, TestRelay};
use repowire_protocol::*;

both_backends!(
    a_session_outlives_clear_and_resume_and_a_relay_restart,
    a_detached_session_gets_its_messages_when_it_is_resumed,
    sessions_are_seen_by_circle_and_never_across_tenants,
    two_binders_that_found_one_detached_session_do_not_both_get_it,
);

fn notify_to(from: &PeerInfo, to: &str, text: &str) -> Body {
    Body::Notify(Notify {
        from: from.peer_id.clone(),
        to: to.into(),
        circle: None,
        text: text.into(),
    })
}

async fn a_session_outlives_clear_and_resume_and_a_relay_restart(db: Db) {
    let relay = TestRelay::start(&db).await;
    let (_, key) = relay.tenant("acme").await;
    let mut a = relay.client(&key).await;
    let api = a.peer("api", "dev").await;
    let first = a.bind(&api.peer_id, None, "run-1").await;
    assert!(looks_like_session_id(&first.session_id), "{first:?}");
    assert_eq!(first.status, SessionStatus::Active);
    assert_eq!(
        first.executor.as_ref().map(|e| &e.peer_id),
        Some(&api.peer_id)
    );
    assert_eq!(first.runtime_session_ids, vec!["run-1"]);
    assert_eq!(
        first.transcript.as_ref().map(|t| t.path.as_str()),
        Some("/transcripts/run-1.jsonl")
    );
    // `/clear`: a new runtime session in the same work stream (the client names it).
    let cleared = a.bind(&api.peer_id, Some(&first.session_id), "run-2").await;
    assert_eq!(cleared.session_id, first.session_id);
    assert_eq!(cleared.runtime_session_ids, vec!["run-1", "run-2"]);
    // Another live peer naming the session (or its runtime id) does not take it over.
    let mut t = relay.client(&key).await;
    let thief = t.peer("thief", "dev").await;
    let own = t
        .bind(&thief.peer_id, Some(&first.session_id), "run-2")
        .await;
    assert_ne!(
        own.session_id, first.session_id,
        "a live executor keeps its session"
    );
    // protocol.md §10.14: the runtime id keeps leading to the found session, so the binder's
    // new session starts without it.
    assert!(own.runtime_session_ids.is_empty(), "{own:?}");
    let own = t.bind(&thief.peer_id, None, "run-1").await;
    assert_ne!(own.session_id, first.session_id);
    assert!(own.runtime_session_ids.is_empty(), "{own:?}");
    // A runtime id that led nowhere is the new session's own.
    let fresh = t
        .bind(&thief.peer_id, Some(&first.session_id), "run-t")
        .await;
    assert_ne!(fresh.session_id, first.session_id);
    assert_eq!(fresh.runtime_session_ids, vec!["run-t"]);
    drop(t);
    // The runtime ends; a resume in a new process: a new peer, and only the runtime id to go
    // by (the thief's binds took no runtime id away).
    drop(a);
    let mut a = relay.client(&key).await;
    // A peer of another directory does not continue it, even now that its executor is gone.
    let elsewhere = a.peer("elsewhere", "dev").await;
    let other_place = a
        .bind(&elsewhere.peer_id, Some(&first.session_id), "run-x")
        .await;
    assert_ne!(other_place.session_id, first.session_id);
    // (In the same directory of the same machine: a session is resumed where it ran.)
    let resumed_peer = a
        .register(Register {
            name: Some("api-resumed".into()),
            circle: Some("dev".into()),
            backend: "claude-code".into(),
            path: Some("/work/api".into()),
            ..Default::default()
        })
        .await
        .peer;
    let resumed = a.bind(&resumed_peer.peer_id, None, "run-1").await;
    assert_eq!(
        resumed.session_id, first.session_id,
        "the runtime id leads back"
    );
    assert_eq!(
        resumed.executor.as_ref().map(|e| &e.peer_id),
        Some(&resumed_peer.peer_id)
    );
    // An unknown runtime id and no session named: a new work stream.
    let other = a.bind(&resumed_peer.peer_id, None, "run-9").await;
    assert_ne!(other.session_id, first.session_id);
    relay.stop().await;

    let relay = TestRelay::start(&db).await;
    let mut b = relay.client(&key).await;
    let viewer = b.peer("viewer", "dev").await;
    let listed = b.sessions(&viewer.peer_id, false).await;
    let kept = listed
        .iter()
        .find(|s| s.session_id == first.session_id)
        .expect("kept across the restart");
    assert_eq!(
        kept.status,
        SessionStatus::Detached,
        "nobody executes it now"
    );
    assert_eq!(kept.runtime_session_ids, vec!["run-2", "run-1"]);
    assert_eq!(
        kept.executor.as_ref().map(|e| &e.peer_id),
        Some(&resumed_peer.peer_id)
    );
    relay.stop().await;
}

async fn a_detached_session_gets_its_messages_when_it_is_resumed(db: Db) {
    let relay = TestRelay::start(&db).await;
    let (_, key) = relay.tenant("acme").await;
    let mut a = relay.client(&key).await;
    let mut w = relay.client(&key).await;
    let lead = a.peer("lead", "dev").await;
    let lead_session = a.bind(&lead.peer_id, None, "lead-run").await;
    let worker = w.peer("worker", "dev").await;
    let session = w.bind(&worker.peer_id, None, "worker-run").await;
    // Addressed to the session while it is active: delivered, with both sessions named.
    let live = a
        .submit(notify_to(&lead, &session.session_id, "first"))
        .await
        .expect("accepted");
    assert_eq!(live.recipients[0].peer_id, worker.peer_id);
    let got = w.delivered_to(&worker.peer_id).await;
    assert_eq!(
        got.message.from_session_id.as_deref(),
        Some(lead_session.session_id.as_str())
    );
    assert_eq!(
        got.message.to_session_id.as_deref(),
        Some(session.session_id.as_str())
    );
    w.receipt(
        &worker.peer_id,
        got.message.message_id,
        ReceiptState::Injected,
    )
    .await;
    // The worker goes away: the session is detached, and a message to it waits.
    drop(w);
    let detached = tokio::time::timeout(common::WAIT, async {
        loop {
            let listed = a.sessions(&lead.peer_id, false).await;
            let s = listed
                .into_iter()
                .find(|s| s.session_id == session.session_id)
                .expect("listed");
            if s.status == SessionStatus::Detached {
                break s;
            }
            tokio::task::yield_now().await;
        }
    })
    .await
    .expect("detached once its executor left");
    assert_eq!(
        detached.executor.map(|e| e.peer_id),
        Some(worker.peer_id.clone())
    );
    a.submit(notify_to(&lead, &session.session_id, "while you were away"))
        .await
        .expect("accepted for the detached session");
    // Resumed: the worker's peer comes back and binds the same session; the message arrives.
    let mut w = relay.client(&key).await;
    let back = w
        .register(Register {
            name: Some("worker".into()),
            circle: Some("dev".into()),
            backend: "claude-code".into(),
            path: Some("/work/worker".into()),
            reclaim: Some(worker.peer_id.clone()),
            ..Default::default()
        })
        .await;
    assert!(back.reclaimed);
    let got = w.delivered_to(&worker.peer_id).await;
    assert_eq!(got.message.text, "while you were away");
    assert_eq!(
        got.message.to_session_id.as_deref(),
        Some(session.session_id.as_str())
    );
    let rebound = w
        .bind(&worker.peer_id, Some(&session.session_id), "worker-run")
        .await;
    assert_eq!(rebound.status, SessionStatus::Active);
    // An unknown session id is an unknown recipient; nothing is stored.
    let refused = a
        .submit(notify_to(&lead, "rs-0000000000000000", "hello?"))
        .await
        .expect_err("no such session");
    assert_eq!(refused.code, ErrorCode::UnknownPeer);
    // protocol.md §10.4: `to` in the shape of a session id names the tenant's session when
    // there is one, whatever peer is named like it; only otherwise is it a display name.
    let look_alike = a.peer(&session.session_id, "dev").await;
    assert_eq!(look_alike.name, session.session_id);
    let to_session = a
        .submit(notify_to(&lead, &session.session_id, "to the session"))
        .await
        .expect("accepted");
    assert_eq!(to_session.recipients[0].peer_id, worker.peer_id);
    let look_alike = a.peer("rs-0000000000000000", "dev").await;
    let to_name = a
        .submit(notify_to(&lead, "rs-0000000000000000", "no such session"))
        .await
        .expect("a display name once no session has that id");
    assert_eq!(to_name.recipients[0].peer_id, look_alike.peer_id);
    relay.stop().await;
}

async fn sessions_are_seen_by_circle_and_never_across_tenants(db: Db) {
    let relay = TestRelay::start(&db).await;
    let (_, key) = relay.tenant("acme").await;
    let (_, other_key) = relay.tenant("globex").await;
    let mut a = relay.client(&key).await;
    let mut x = relay.client(&other_key).await;
    let dev = a.peer("dev-agent", "dev").await;
    let ops = a.peer("ops-agent", "ops").await;
    let person = a.peer_with_role("person", "dev", Role::Human).await;
    // A person in another circle: `list_peers` shows it to every agent (its role crosses
    // circles), but its session is seen by its circle like any other (protocol.md §8.18).
    let boss = a.peer_with_role("boss", "ops", Role::Human).await;
    let dev_session = a.bind(&dev.peer_id, None, "dev-run").await;
    a.bind(&ops.peer_id, None, "ops-run").await;
    a.bind(&boss.peer_id, None, "boss-run").await;
    let seen = |l: Vec<SessionInfo>| {
        let mut ids: Vec<String> = l.into_iter().map(|s| s.circle).collect();
        ids.sort();
        ids
    };
    assert_eq!(seen(a.sessions(&dev.peer_id, false).await), vec!["dev"]);
    assert!(
        a.list(&dev.peer_id, false)
            .await
            .iter()
            .any(|p| p.peer_id == boss.peer_id),
        "the person is in the agent's list_peers"
    );
    assert_eq!(
        seen(a.sessions(&dev.peer_id, true).await),
        vec!["dev", "ops", "ops"]
    );
    assert_eq!(
        seen(a.sessions(&person.peer_id, false).await),
        vec!["dev", "ops", "ops"]
    );
    // Another tenant sees none of them and cannot reach them by id.
    let stranger = x.peer("stranger", "dev").await;
    assert!(x.sessions(&stranger.peer_id, true).await.is_empty());
    let refused = x
        .submit(notify_to(&stranger, &dev_session.session_id, "hi"))
        .await
        .expect_err("another tenant's session");
    assert_eq!(refused.code, ErrorCode::UnknownPeer);
    // Nor bind it: naming it starts a session of its own tenant.
    let own = x
        .bind(&stranger.peer_id, Some(&dev_session.session_id), "dev-run")
        .await;
    assert_ne!(own.session_id, dev_session.session_id);
    relay.stop().await;
}

/// Two resumes that found the same detached session at once (find and bind are separate
/// steps): the first to bind continues it, the second gets a session of its own, and the
/// runtime id keeps leading to the continued one.
async fn two_binders_that_found_one_detached_session_do_not_both_get_it(db: Db) {
    use repowire_relay::storage::store::SessionBind;
    let relay = TestRelay::start(&db).await;
    let (tenant, _) = relay.tenant("acme").await;
    let store = relay.state.store.clone();
    let bind =
        |peer: &str, session: Option<&str>, expected: Option<&str>, runtime: &str, id: &str| {
            SessionBind {
                tenant_id: tenant.clone(),
                session_id: session.map(str::to_owned),
                expected_executor: expected.map(str::to_owned),
                runtime_session_id: runtime.into(),
                peer_id: peer.into(),
                backend: "claude-code".into(),
                circle: "dev".into(),
                project_path: Some("/work/api".into()),
                machine: Some("laptop".into()),
                transcript_path: None,
                transcript_cursor: None,
                new_session_id: id.into(),
                claim_runtime: true,
                now_ms: 1_000,
            }
        };
    let (first, _) = store
        .bind_session(&bind(
            "peer-old",
            None,
            None,
            "run-1",
            "rs-aaaaaaaaaaaaaaaa",
        ))
        .await
        .expect("bound");
    assert_eq!(first.session_id, "rs-aaaaaaaaaaaaaaaa");
    // Both found it executed by peer-old, gone; peer-b binds first.
    let (won, _) = store
        .bind_session(&bind(
            "peer-b",
            Some(&first.session_id),
            Some("peer-old"),
            "run-1",
            "rs-bbbbbbbbbbbbbbbb",
        ))
        .await
        .expect("bound");
    assert_eq!(won.session_id, first.session_id);
    assert_eq!(won.executor_peer_id.as_deref(), Some("peer-b"));
    let (lost, runtimes) = store
        .bind_session(&bind(
            "peer-c",
            Some(&first.session_id),
            Some("peer-old"),
            "run-1",
            "rs-cccccccccccccccc",
        ))
        .await
        .expect("bound");
    assert_eq!(
        lost.session_id, "rs-cccccccccccccccc",
        "a session of its own"
    );
    assert!(
        runtimes.is_empty(),
        "run-1 still leads to the continued session: {runtimes:?}"
    );
    let found = store
        .find_session(&tenant, None, "run-1", "claude-code")
        .await
        .expect("find")
        .expect("found");
    assert_eq!(found.session_id, first.session_id);
    assert_eq!(found.executor_peer_id.as_deref(), Some("peer-b"));
    // The executor binding its own session again (a `/clear`) continues it.
    let (again, _) = store
        .bind_session(&bind(
            "peer-b",
            Some(&first.session_id),
            Some("peer-b"),
            "run-2",
            "rs-dddddddddddddddd",
        ))
        .await
        .expect("bound");
    assert_eq!(again.session_id, first.session_id);
}
