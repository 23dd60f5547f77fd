//! The dashboard's links and sessions in storage, on SQLite and on Postgres: a link is used
//! once and never after its expiry, two takers at once get it once, a session is found until it
//! expires or ends, expired rows are forgotten; and the tenant's recent asks. (The store is
//! given hashes; the dashboard hashes the secrets, session.rs.)

use crate::common;

use common::{Db, TestRelay};
use repowire_protocol::{Ack, Body};
use repowire_relay::storage::store::{DashboardLink, DashboardSession};

both_backends!(
    recent_asks_are_the_tenants_newest_first_with_each_recipients_state,
    a_link_works_once_and_not_after_it_expires,
    a_session_is_found_until_it_expires_or_ends,
    old_links_and_sessions_are_forgotten_when_a_link_is_minted,
);

const NOW: i64 = 1_800_000_000_000;

fn link(hash: &str, expires_at_ms: i64) -> DashboardLink {
    DashboardLink {
        token_hash: hash.into(),
        tenant_id: "tnt-a".into(),
        key_id: "key-a".into(),
        created_at_ms: expires_at_ms - 120_000,
        expires_at_ms,
    }
}

fn session(hash: &str, expires_at_ms: i64) -> DashboardSession {
    DashboardSession {
        id_hash: hash.into(),
        audience: "tenant".into(),
        tenant_id: Some("tnt-a".into()),
        key_id: Some("key-a".into()),
        member_id: None,
        subject: "key:key-a".into(),
        scopes: "connect usage:read".into(),
        csrf: "c".repeat(64),
        created_at_ms: NOW,
        expires_at_ms,
    }
}

async fn a_link_works_once_and_not_after_it_expires(db: Db) {
    let store = db.store().await;
    store
        .create_dashboard_link(&link("once", NOW + 120_000))
        .await
        .unwrap();
    assert_eq!(
        store.take_dashboard_link("unknown", NOW).await.unwrap(),
        None
    );
    let taken = store.take_dashboard_link("once", NOW + 1).await.unwrap();
    assert_eq!(taken, Some(link("once", NOW + 120_000)));
    assert_eq!(
        store.take_dashboard_link("once", NOW + 2).await.unwrap(),
        None
    );

    store
        .create_dashboard_link(&link("late", NOW + 120_000))
        .await
        .unwrap();
    assert_eq!(
        store
            .take_dashboard_link("late", NOW + 120_000)
            .await
            .unwrap(),
        None,
        "a link is dead at its expiry"
    );

    // Ten takers at once: one gets it.
    store
        .create_dashboard_link(&link("raced", NOW + 120_000))
        .await
        .unwrap();
    let takers = (0..10).map(|_| {
        let store = store.clone();
        tokio::spawn(async move { store.take_dashboard_link("raced", NOW).await.unwrap() })
    });
    let mut got = 0;
    for t in takers {
        got += usize::from(t.await.unwrap().is_some());
    }
    assert_eq!(got, 1);
}

async fn a_session_is_found_until_it_expires_or_ends(db: Db) {
    let store = db.store().await;
    store
        .create_dashboard_session(&session("s1", NOW + 1_000))
        .await
        .unwrap();
    store
        .create_dashboard_session(&session("s2", NOW + 1_000))
        .await
        .unwrap();
    assert_eq!(
        store.find_dashboard_session("s1", NOW).await.unwrap(),
        Some(session("s1", NOW + 1_000))
    );
    assert_eq!(
        store
            .find_dashboard_session("s1", NOW + 1_000)
            .await
            .unwrap(),
        None
    );
    assert_eq!(
        store.find_dashboard_session("nope", NOW).await.unwrap(),
        None
    );
    assert!(store.end_dashboard_session("s2", NOW).await.unwrap());
    assert!(
        !store.end_dashboard_session("s2", NOW).await.unwrap(),
        "ended once"
    );
    assert_eq!(store.find_dashboard_session("s2", NOW).await.unwrap(), None);
    // The same secret twice is refused, not silently merged.
    assert!(
        store
            .create_dashboard_session(&session("s1", NOW + 5))
            .await
            .is_err()
    );
}

async fn old_links_and_sessions_are_forgotten_when_a_link_is_minted(db: Db) {
    let store = db.store().await;
    let day = 24 * 3_600_000;
    store
        .create_dashboard_session(&session("ancient", NOW - day - 1))
        .await
        .unwrap();
    store
        .create_dashboard_session(&session("recent", NOW - 1))
        .await
        .unwrap();
    store
        .create_dashboard_link(&link("ancient-link", NOW - day - 1))
        .await
        .unwrap();
    store
        .create_dashboard_link(&link("new", NOW + 120_000))
        .await
        .unwrap();
    // Expired rows are unusable either way; the older ones are gone from the table.
    assert_eq!(count(&db, "dashboard_sessions").await, 1);
    assert_eq!(count(&db, "dashboard_links").await, 1);
}

async fn count(db: &Db, table: &str) -> i64 {
    let sql = format!("SELECT COUNT(*) FROM {table}");
    match db {
        Db::Sqlite(dir) => {
            let url = format!("sqlite://{}", dir.path().join("relay.db").display());
            let pool = sqlx::SqlitePool::connect(&url).await.unwrap();
            sqlx::query_scalar(&sql).fetch_one(&pool).await.unwrap()
        }
        Db::Postgres(pool) => sqlx::query_scalar(&sql).fetch_one(pool).await.unwrap(),
    }
}

async fn recent_asks_are_the_tenants_newest_first_with_each_recipients_state(db: Db) {
    let relay = TestRelay::start(&db).await;
    let (tenant, key) = relay.tenant("acme").await;
    let (_, other_key) = relay.tenant("other").await;
    let mut c = relay.client(&key).await;
    let asker = c.peer("asker", "dev").await;
    let one = c.peer("one", "dev").await;
    let two = c.peer("two", "dev").await;
    let first = c.ask(&asker, "one", "first?").await.unwrap();
    c.delivered_to(&one.peer_id).await;
    let id = c
        .send(Body::Ack(Ack {
            from: one.peer_id.clone(),
            correlation_id: first.correlation_id.clone().unwrap(),
            reply: Some("done".into()),
        }))
        .await;
    c.answer(id).await.unwrap();
    let second = c.ask(&asker, "two", "second?").await.unwrap();
    let mut o = relay.client(&other_key).await;
    let theirs = o.peer("theirs", "dev").await;
    o.ask(&theirs, "theirs", "not yours").await.unwrap();

    let store = relay.state.store.clone();
    let asks = store.recent_asks(&tenant, 10).await.unwrap();
    let texts: Vec<&str> = asks.iter().map(|a| a.ask.body.as_str()).collect();
    assert_eq!(
        texts,
        ["second?", "first?"],
        "newest first, this tenant's only"
    );
    assert_eq!(asks[1].ask.reply_text.as_deref(), Some("done"));
    assert!(asks[1].ask.closed_at_ms.is_some());
    assert_eq!(asks[1].recipients.len(), 1);
    assert_eq!(asks[1].recipients[0].name.as_deref(), Some("one"));
    assert_eq!(asks[1].recipients[0].state, "acked");
    assert_eq!(asks[0].recipients[0].peer_id, two.peer_id.as_str());
    assert!(
        matches!(
            asks[0].recipients[0].state.as_str(),
            "accepted" | "delivered"
        ),
        "{:?}",
        asks[0].recipients
    );
    assert_eq!(
        asks[0].ask.correlation_id,
        second.correlation_id.map(|c| c.to_string())
    );
    // A limit of one: the newest only, with its recipients.
    let newest = store.recent_asks(&tenant, 1).await.unwrap();
    assert_eq!(newest.len(), 1);
    assert_eq!(newest[0].ask.body, "second?");
    assert_eq!(newest[0].recipients.len(), 1);
    assert_eq!(asks[1].ask.answer, None, "an ack is not an answer");
    relay.stop().await;
}
