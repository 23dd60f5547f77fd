//! Structured questions: asks to `@approvers` (who may answer them, first answer wins, what a
//! late answerer is told, who sees them), and question timeouts (the default taken, late answers
//! refused), on SQLite and on Postgres.

use crate::common;

use common::{Db, TestRelay};
use repowire_protocol::*;
use repowire_relay::routing::sweeper;

both_backends!(
    approvers_answer_from_any_circle_and_agents_and_the_asker_may_not,
    of_two_concurrent_answers_one_wins_and_the_other_is_told_which,
    approvers_see_every_question_of_their_tenant_and_agents_only_their_own,
    a_question_to_approvers_cannot_be_acked_chained_closed_or_reclaimed,
    a_timed_out_question_takes_its_default_and_refuses_late_answers,
    an_answer_after_the_deadline_is_refused_even_before_the_sweep,
    a_question_without_a_default_expires_at_its_timeout,
    a_chained_ask_does_not_close_a_question_past_its_deadline_as_acked,
    a_peer_cannot_flood_the_approvers,
);

fn tool_question(timeout_ms: u64) -> Question {
    Question::tool_permission(timeout_ms)
}

fn ask_approvers(from: &PeerInfo, text: &str, question: Question) -> Body {
    ask_peer(from, APPROVERS, text, question)
}

fn ask_peer(from: &PeerInfo, to: &str, text: &str, question: Question) -> Body {
    Body::Ask(Ask {
        from: from.peer_id.clone(),
        to: to.into(),
        circle: None,
        text: text.into(),
        reply_to: None,
        question: Some(question),
    })
}

/// A choice of yes or no that takes `no` after a minute.
fn yes_or_no_defaulting_to_no() -> Question {
    let mut choice = Question::new(QuestionKind::Choice, &[("yes", "Yes"), ("no", "No")]);
    choice.timeout_ms = Some(60_000);
    choice.default = Some("no".into());
    choice
}

fn answer(from: &PeerInfo, cid: &CorrelationId, option: &str) -> Body {
    Body::Answer(Answer {
        from: from.peer_id.clone(),
        correlation_id: cid.clone(),
        option_id: Some(option.into()),
        text: None,
    })
}

/// Moves a question's deadline into the past, as if its timeout had run out (the relay's
/// clock is the wall clock; this avoids waiting for it).
async fn past_deadline(db: &Db, cid: &CorrelationId) {
    let sql = "UPDATE messages SET deadline_ms = created_at_ms WHERE correlation_id = $1";
    match db {
        Db::Postgres(pool) => {
            sqlx::query(sql)
                .bind(cid.as_str())
                .execute(pool)
                .await
                .expect("update");
        }
        Db::Sqlite(_) => {
            let path = db.path().expect("sqlite path");
            let pool = sqlx::SqlitePool::connect(&format!("sqlite://{}", path.display()))
                .await
                .expect("open");
            sqlx::query(sql)
                .bind(cid.as_str())
                .execute(&pool)
                .await
                .expect("update");
            pool.close().await;
        }
    }
}

async fn approvers_answer_from_any_circle_and_agents_and_the_asker_may_not(db: Db) {
    let relay = TestRelay::start(&db).await;
    let (_, key) = relay.tenant("acme").await;
    let mut a = relay.client(&key).await;
    let mut h = relay.client(&key).await;
    let alice = a.peer("alice", "dev").await;
    let carol = a.peer("carol", "dev").await;
    let dave = a.peer("dave", "ops").await;
    let hank = h.peer_with_role("hank", "ops", Role::Human).await;

    let asked = a
        .submit(ask_approvers(
            &alice,
            "Bash: rm -rf build",
            tool_question(60_000),
        ))
        .await
        .expect("accepted");
    assert_eq!(asked.recipients.len(), 1);
    assert_eq!(asked.recipients[0].peer_id.as_str(), APPROVERS);
    let cid = asked.correlation_id.clone().expect("cid");

    for (agent, why) in [
        (&alice, "yourself"),
        (&carol, "`agent`"),
        (&dave, "`agent`"),
    ] {
        let refused = a
            .submit(answer(agent, &cid, "allow"))
            .await
            .expect_err("agents do not answer for @approvers");
        assert_eq!(refused.code, ErrorCode::NotRecipient, "{}", refused.message);
        assert!(refused.message.contains(why), "{}", refused.message);
    }
    // The question is still open: the human of another circle answers it.
    h.submit(answer(&hank, &cid, "allow"))
        .await
        .expect("answered");
    let closed = a.state_of(asked.message_id).await;
    assert_eq!(closed.state, DeliveryState::Answered);
    let reply = a.delivered_to(&alice.peer_id).await;
    assert_eq!(reply.message.kind, MessageKind::Reply);
    assert_eq!(reply.message.from.peer_id, hank.peer_id);
    assert_eq!(reply.message.text, "Allow");
    assert_eq!(
        reply.message.answer.and_then(|a| a.option_id).as_deref(),
        Some("allow")
    );
    let q = a
        .send(Body::StatusQuery(StatusQuery {
            peer_id: alice.peer_id.clone(),
            message_id: None,
            correlation_id: Some(cid.clone()),
        }))
        .await;
    let Ok(Body::Status(status)) = a.answer(q).await else {
        panic!("status")
    };
    assert_eq!(
        status.answered_by.map(|p| p.peer_id),
        Some(hank.peer_id.clone())
    );
    assert!(!status.timed_out);

    // A person never answers a question they asked themselves.
    let own = h
        .submit(ask_approvers(&hank, "deploy?", tool_question(60_000)))
        .await
        .expect("accepted");
    let refused = h
        .submit(answer(
            &hank,
            own.correlation_id.as_ref().expect("cid"),
            "allow",
        ))
        .await
        .expect_err("not your own");
    assert_eq!(refused.code, ErrorCode::NotRecipient);
    assert!(refused.message.contains("yourself"), "{}", refused.message);
    relay.stop().await;
}

async fn of_two_concurrent_answers_one_wins_and_the_other_is_told_which(db: Db) {
    let relay = TestRelay::start(&db).await;
    let (_, key) = relay.tenant("acme").await;
    let mut a = relay.client(&key).await;
    let (mut h, mut o) = (relay.client(&key).await, relay.client(&key).await);
    let alice = a.peer("alice", "dev").await;
    let hank = h.peer_with_role("hank", "ops", Role::Human).await;
    let olga = o.peer_with_role("olga", "dev", Role::Orchestrator).await;
    let asked = a
        .submit(ask_approvers(&alice, "Write: .env", tool_question(60_000)))
        .await
        .expect("accepted");
    let cid = asked.correlation_id.clone().expect("cid");
    // Both go out before either answer is read: the store serialises the closes.
    let hid = h.send(answer(&hank, &cid, "allow")).await;
    let oid = o.send(answer(&olga, &cid, "deny")).await;
    let (hr, or) = (h.answer(hid).await, o.answer(oid).await);
    let (winner, option, loser) = match (&hr, &or) {
        (Ok(Body::Accepted(_)), Err(e)) => (&hank, "allow", e.clone()),
        (Err(e), Ok(Body::Accepted(_))) => (&olga, "deny", e.clone()),
        other => panic!("exactly one answer must win: {other:?}"),
    };
    assert_eq!(loser.code, ErrorCode::AskClosed);
    assert!(
        loser.message.contains(&format!("@{}", winner.name))
            && loser.message.contains(&format!("`{option}`")),
        "the refusal names the first answer: {}",
        loser.message
    );
    let reply = a.delivered_to(&alice.peer_id).await;
    assert_eq!(reply.message.from.peer_id, winner.peer_id);
    assert_eq!(
        reply.message.answer.and_then(|a| a.option_id).as_deref(),
        Some(option)
    );
    relay.stop().await;
}

async fn approvers_see_every_question_of_their_tenant_and_agents_only_their_own(db: Db) {
    let relay = TestRelay::start(&db).await;
    let (_, key) = relay.tenant("acme").await;
    let (_, other_key) = relay.tenant("globex").await;
    let mut a = relay.client(&key).await;
    let mut h = relay.client(&key).await;
    let mut x = relay.client(&other_key).await;
    // A key of the same tenant without the `approve` scope (as a team gives agent machines).
    let agents_key = repowire_relay::tenancy::admin::create_key(
        relay.state.store.as_ref(),
        "acme",
        repowire_relay::tenancy::apikey::KeyMode::Live,
        "agents",
        None,
        Some(&["connect".to_owned(), "usage:read".to_owned()]),
    )
    .await
    .expect("key")
    .text;
    let mut n = relay.client(&agents_key).await;
    let alice = a.peer("alice", "dev").await;
    let bob = a.peer("bob", "ops").await;
    let hank = h.peer_with_role("hank", "qa", Role::Human).await;
    let xena = x.peer_with_role("xena", "dev", Role::Human).await;
    let nina = n.peer_with_role("nina", "qa", Role::Human).await;

    let first = a
        .submit(ask_approvers(
            &alice,
            "Bash: make deploy",
            tool_question(60_000),
        ))
        .await
        .expect("accepted");
    let second = a
        .submit(ask_approvers(
            &bob,
            "Edit: src/main.rs",
            tool_question(60_000),
        ))
        .await
        .expect("accepted");
    let open = h.questions(&hank.peer_id, false).await;
    let cids: Vec<_> = open.iter().map(|q| q.correlation_id.clone()).collect();
    assert_eq!(
        cids,
        vec![
            first.correlation_id.clone().expect("cid"),
            second.correlation_id.clone().expect("cid")
        ],
        "open questions, oldest first"
    );
    assert_eq!(open[0].from.peer_id, alice.peer_id);
    assert_eq!(open[0].text, "Bash: make deploy");
    assert_eq!(open[0].state, DeliveryState::Accepted);
    assert_eq!(
        open[0].deadline_ms,
        Some(open[0].created_at_ms + 60_000),
        "the deadline is the accept time plus the timeout"
    );
    let mine = a.questions(&alice.peer_id, false).await;
    assert_eq!(mine.len(), 1, "an agent sees only what it asked");
    assert_eq!(mine[0].correlation_id, open[0].correlation_id);
    // A person connected with a key that does not approve sees none and answers none.
    assert!(n.questions(&nina.peer_id, false).await.is_empty());
    let refused = n
        .submit(answer(&nina, &open[0].correlation_id, "allow"))
        .await
        .expect_err("no approve scope");
    assert_eq!(refused.code, ErrorCode::NotRecipient);
    assert!(
        refused.message.contains("`approve` scope"),
        "{}",
        refused.message
    );
    // Another tenant sees none of them and cannot answer them.
    assert!(x.questions(&xena.peer_id, false).await.is_empty());
    let refused = x
        .submit(answer(&xena, &open[0].correlation_id, "allow"))
        .await
        .expect_err("another tenant's question");
    assert_eq!(refused.code, ErrorCode::UnknownCorrelation);

    h.submit(answer(&hank, &open[0].correlation_id, "deny"))
        .await
        .expect("answered");
    let open = h.questions(&hank.peer_id, false).await;
    assert_eq!(open.len(), 1);
    let closed = h.questions(&hank.peer_id, true).await;
    assert_eq!(closed.len(), 1);
    let record = &closed[0];
    assert_eq!(record.state, DeliveryState::Answered);
    assert_eq!(
        record.answer.as_ref().and_then(|a| a.option_id.as_deref()),
        Some("deny")
    );
    assert_eq!(record.reply.as_deref(), Some("Deny"));
    assert_eq!(
        record.answered_by.as_ref().map(|p| &p.peer_id),
        Some(&hank.peer_id)
    );
    assert!(record.closed_at_ms.is_some());
    relay.stop().await;
}

async fn a_question_to_approvers_cannot_be_acked_chained_closed_or_reclaimed(db: Db) {
    let relay = TestRelay::start(&db).await;
    let (_, key) = relay.tenant("acme").await;
    let mut a = relay.client(&key).await;
    let mut h = relay.client(&key).await;
    let alice = a.peer("alice", "dev").await;
    let hank = h.peer_with_role("hank", "ops", Role::Human).await;
    let asked = a
        .submit(ask_approvers(&alice, "Bash: ls", tool_question(60_000)))
        .await
        .expect("accepted");
    let cid = asked.correlation_id.clone().expect("cid");

    let acked = h
        .submit(Body::Ack(Ack {
            from: hank.peer_id.clone(),
            correlation_id: cid.clone(),
            reply: Some("fine".into()),
        }))
        .await
        .expect_err("approvers answer, they do not ack");
    assert_eq!(acked.code, ErrorCode::InvalidAnswer, "{}", acked.message);
    // The asker chaining a new ask to it does not close it.
    a.submit(Body::Ask(Ask {
        from: alice.peer_id.clone(),
        to: "hank".into(),
        circle: None,
        text: "please approve".into(),
        reply_to: Some(cid.clone()),
        question: None,
    }))
    .await
    .expect("the chained ask itself is accepted");
    assert_eq!(h.questions(&hank.peer_id, false).await.len(), 1);
    // Nobody can become @approvers.
    let taken = h
        .register(Register {
            name: Some("sneaky".into()),
            backend: "repowire".into(),
            reclaim: Some(PeerId(APPROVERS.into())),
            role: Some(Role::Human),
            ..Default::default()
        })
        .await;
    assert!(!taken.reclaimed);
    assert_ne!(taken.peer.peer_id.as_str(), APPROVERS);
    // And nobody lists it as a peer.
    let listed = h.list(&hank.peer_id, true).await;
    assert!(listed.iter().all(|p| p.peer_id.as_str() != APPROVERS));
    // The question is still open and answerable.
    h.submit(answer(&hank, &cid, "allow"))
        .await
        .expect("answered");
    relay.stop().await;
}

async fn a_timed_out_question_takes_its_default_and_refuses_late_answers(db: Db) {
    let relay = TestRelay::start(&db).await;
    let (_, key) = relay.tenant("acme").await;
    let mut a = relay.client(&key).await;
    let mut b = relay.client(&key).await;
    let mut h = relay.client(&key).await;
    let alice = a.peer("alice", "dev").await;
    let bob = b.peer("bob", "dev").await;
    let hank = h.peer_with_role("hank", "ops", Role::Human).await;
    let to_bob = a
        .submit(ask_peer(
            &alice,
            "bob",
            "ship it?",
            yes_or_no_defaulting_to_no(),
        ))
        .await
        .expect("accepted");
    let got = b.delivered_to(&bob.peer_id).await;
    b.receipt(&bob.peer_id, got.message.message_id, ReceiptState::Injected)
        .await;
    assert_eq!(
        a.state_of(to_bob.message_id).await.state,
        DeliveryState::Injected
    );
    let to_approvers = a
        .submit(ask_approvers(
            &alice,
            "Bash: rm -rf /tmp/x",
            tool_question(60_000),
        ))
        .await
        .expect("accepted");

    // Nothing is due before the deadline; everything due is closed after it.
    let now = repowire_relay::ids::now_ms();
    assert_eq!(sweeper::close_overdue(&relay.state, now).await, Some(0));
    assert_eq!(
        sweeper::close_overdue(&relay.state, now + 60_001).await,
        Some(2)
    );
    for (asked, option, within) in [(&to_bob, "no", "60 s"), (&to_approvers, "deny", "60 s")] {
        let change = a.state_of(asked.message_id).await;
        assert_eq!(change.state, DeliveryState::Answered);
        assert_eq!(
            change.reason.as_deref(),
            Some(format!("no answer within {within}: the default `{option}` was taken").as_str())
        );
        let q = a
            .send(Body::StatusQuery(StatusQuery {
                peer_id: alice.peer_id.clone(),
                message_id: Some(asked.message_id),
                correlation_id: None,
            }))
            .await;
        let Ok(Body::Status(status)) = a.answer(q).await else {
            panic!("status")
        };
        assert!(status.timed_out);
        assert_eq!(status.answered_by, None);
        assert_eq!(
            status.answer.and_then(|a| a.option_id).as_deref(),
            Some(option)
        );
    }
    // A second sweep finds nothing; a late answer is refused with what happened.
    assert_eq!(
        sweeper::close_overdue(&relay.state, now + 120_000).await,
        Some(0)
    );
    let late = b
        .submit(answer(
            &bob,
            to_bob.correlation_id.as_ref().expect("cid"),
            "yes",
        ))
        .await
        .expect_err("timed out");
    assert_eq!(late.code, ErrorCode::AskClosed);
    assert!(late.message.contains("default `no`"), "{}", late.message);
    let late = h
        .submit(answer(
            &hank,
            to_approvers.correlation_id.as_ref().expect("cid"),
            "allow",
        ))
        .await
        .expect_err("timed out");
    assert!(late.message.contains("default `deny`"), "{}", late.message);
    let history = h.questions(&hank.peer_id, true).await;
    assert_eq!(history.len(), 1);
    assert_eq!(history[0].answered_by, None);
    assert_eq!(
        history[0].reason.as_deref(),
        Some("no answer within 60 s: the default `deny` was taken")
    );
    relay.stop().await;
}

async fn an_answer_after_the_deadline_is_refused_even_before_the_sweep(db: Db) {
    // The sweep of timed-out questions runs once, at start: only the answer can close it.
    let mut config = repowire_relay::RelayConfig::for_tests();
    config.question_sweep_ms = 3_600_000;
    let relay = TestRelay::start_with(&db, config).await;
    let (_, key) = relay.tenant("acme").await;
    let mut a = relay.client(&key).await;
    let mut h = relay.client(&key).await;
    let alice = a.peer("alice", "dev").await;
    let hank = h.peer_with_role("hank", "ops", Role::Human).await;
    let asked = a
        .submit(ask_approvers(&alice, "Bash: reboot", tool_question(60_000)))
        .await
        .expect("accepted");
    let cid = asked.correlation_id.clone().expect("cid");
    past_deadline(&db, &cid).await;
    let late = h
        .submit(answer(&hank, &cid, "allow"))
        .await
        .expect_err("past its deadline");
    assert_eq!(late.code, ErrorCode::AskClosed);
    assert_eq!(
        late.message,
        format!("{cid} is closed: no answer within 60 s: the default `deny` was taken")
    );
    // The late answer closed it by its timeout, and the asker heard so.
    let change = a.state_of(asked.message_id).await;
    assert_eq!(change.state, DeliveryState::Answered);
    assert!(
        change
            .reason
            .as_deref()
            .is_some_and(|r| r.contains("`deny`")),
        "{change:?}"
    );
    let now = repowire_relay::ids::now_ms();
    assert_eq!(sweeper::close_overdue(&relay.state, now).await, Some(0));
    relay.stop().await;
}

async fn a_question_without_a_default_expires_at_its_timeout(db: Db) {
    let relay = TestRelay::start(&db).await;
    let (_, key) = relay.tenant("acme").await;
    let mut a = relay.client(&key).await;
    let mut b = relay.client(&key).await;
    let alice = a.peer("alice", "dev").await;
    let bob = b.peer("bob", "dev").await;
    let mut text = Question::new(QuestionKind::Text, &[]);
    text.timeout_ms = Some(60_000);
    let asked = a
        .submit(ask_peer(&alice, "bob", "what broke?", text))
        .await
        .expect("accepted");
    b.delivered_to(&bob.peer_id).await;
    let now = repowire_relay::ids::now_ms();
    assert_eq!(
        sweeper::close_overdue(&relay.state, now + 60_001).await,
        Some(1)
    );
    let change = a.state_of(asked.message_id).await;
    assert_eq!(change.state, DeliveryState::Expired);
    assert_eq!(change.reason.as_deref(), Some("no answer within 60 s"));
    let late = b
        .submit(Body::Answer(Answer {
            from: bob.peer_id.clone(),
            correlation_id: asked.correlation_id.clone().expect("cid"),
            option_id: None,
            text: Some("the cache".into()),
        }))
        .await
        .expect_err("expired");
    assert_eq!(late.code, ErrorCode::AskClosed);
    assert!(late.message.contains("timed out"), "{}", late.message);
    relay.stop().await;
}

/// Two pods on one Postgres and real Redis: an agent on pod a asks `@approvers`, a person on
/// pod b sees the question and answers it, and the asker on pod a gets the answer; a question
/// that times out is closed once whichever pod sweeps it, and its asker on the other pod hears.
#[sqlx::test(migrations = false)]
async fn a_question_asked_on_one_pod_is_answered_from_another(pool: sqlx::PgPool) {
    use repowire_relay::cluster::bus::redis::RedisBus;
    use std::sync::Arc;
    let redis = std::env::var("REDIS_URL").unwrap_or_else(|_| "redis://127.0.0.1:6379".into());
    let prefix = format!("repowire-test-{}", uuid::Uuid::new_v4().simple());
    let bus = |pod: &'static str| {
        let (redis, prefix) = (redis.clone(), prefix.clone());
        async move {
            RedisBus::connect(&redis, &prefix, pod)
                .await
                .expect("redis")
        }
    };
    let db = Db::Postgres(pool);
    let pod_a = TestRelay::start_pod(&db, Arc::new(bus("pod-a").await)).await;
    let pod_b = TestRelay::start_pod(&db, Arc::new(bus("pod-b").await)).await;
    let (_, key) = pod_a.tenant("acme").await;
    let mut a = pod_a.client(&key).await;
    let mut h = pod_b.client(&key).await;
    let alice = a.peer("alice", "dev").await;
    let hank = h.peer_with_role("hank", "ops", Role::Human).await;

    let asked = a
        .submit(ask_approvers(
            &alice,
            "Bash: cargo publish",
            tool_question(60_000),
        ))
        .await
        .expect("accepted");
    let open = h.questions(&hank.peer_id, false).await;
    assert_eq!(open.len(), 1);
    h.submit(answer(&hank, &open[0].correlation_id, "allow"))
        .await
        .expect("answered");
    assert_eq!(
        a.state_of(asked.message_id).await.state,
        DeliveryState::Answered
    );
    let reply = a.delivered_to(&alice.peer_id).await;
    assert_eq!(reply.message.from.peer_id, hank.peer_id);

    let timed = a
        .submit(ask_approvers(
            &alice,
            "Bash: rm -rf target",
            tool_question(60_000),
        ))
        .await
        .expect("accepted");
    let later = repowire_relay::ids::now_ms() + 60_001;
    assert_eq!(sweeper::close_overdue(&pod_b.state, later).await, Some(1));
    assert_eq!(sweeper::close_overdue(&pod_a.state, later).await, Some(0));
    let change = a.state_of(timed.message_id).await;
    assert_eq!(change.state, DeliveryState::Answered);
    assert!(change.reason.is_some_and(|r| r.contains("`deny`")));
    pod_a.stop().await;
    pod_b.stop().await;
}

async fn a_chained_ask_does_not_close_a_question_past_its_deadline_as_acked(db: Db) {
    let mut config = repowire_relay::RelayConfig::for_tests();
    config.question_sweep_ms = 3_600_000;
    let relay = TestRelay::start_with(&db, config).await;
    let (_, key) = relay.tenant("acme").await;
    let mut a = relay.client(&key).await;
    let mut b = relay.client(&key).await;
    let alice = a.peer("alice", "dev").await;
    let bob = b.peer("bob", "dev").await;
    let asked = a
        .submit(ask_peer(
            &alice,
            "bob",
            "ship it?",
            yes_or_no_defaulting_to_no(),
        ))
        .await
        .expect("accepted");
    let cid = asked.correlation_id.clone().expect("cid");
    b.delivered_to(&bob.peer_id).await;
    past_deadline(&db, &cid).await;
    b.submit(Body::Ask(Ask {
        from: bob.peer_id.clone(),
        to: "alice".into(),
        circle: None,
        text: "what was the question again?".into(),
        reply_to: Some(cid.clone()),
        question: None,
    }))
    .await
    .expect("the chained ask is accepted");
    let change = a.state_of(asked.message_id).await;
    assert_eq!(change.state, DeliveryState::Answered, "{change:?}");
    assert_eq!(
        change.reason.as_deref(),
        Some("no answer within 60 s: the default `no` was taken")
    );
    relay.stop().await;
}

async fn a_peer_cannot_flood_the_approvers(db: Db) {
    let relay = TestRelay::start(&db).await;
    let (_, key) = relay.tenant("acme").await;
    let mut a = relay.client(&key).await;
    let alice = a.peer("alice", "dev").await;
    let bob = a.peer("bob", "dev").await;
    for i in 0..16 {
        a.submit(ask_approvers(
            &alice,
            &format!("Bash: job {i}"),
            tool_question(60_000),
        ))
        .await
        .expect("accepted");
    }
    let refused = a
        .submit(ask_approvers(
            &alice,
            "Bash: one too many",
            tool_question(60_000),
        ))
        .await
        .expect_err("16 are waiting");
    assert_eq!(
        refused.code,
        ErrorCode::LimitExceeded,
        "{}",
        refused.message
    );
    // Another peer is not held back by alice's questions.
    a.submit(ask_approvers(&bob, "Bash: make", tool_question(60_000)))
        .await
        .expect("accepted");
    // Only tool calls go to the approvers.
    let mut choice = Question::new(QuestionKind::Choice, &[("a", "A"), ("b", "B")]);
    choice.timeout_ms = Some(60_000);
    let not_a_tool = a
        .submit(ask_approvers(&bob, "pick one", choice))
        .await
        .expect_err("not a tool_permission question");
    assert_eq!(not_a_tool.code, ErrorCode::InvalidFrame);
    relay.stop().await;
}
