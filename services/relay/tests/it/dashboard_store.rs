//! The dashboard's links and sessions in storage, on SQLite and on Postgres: a link is used
//! once and never after its expiry, two takers at once get it once, a session is found until it
//! expires or ends, and only hashes are stored.

use crate::common;

use common::Db;
use repowire_relay::storage::store::{DashboardLink, DashboardSession};

both_backends!(
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
