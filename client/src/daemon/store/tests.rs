use std::os::unix::fs::PermissionsExt;

use super::*;

fn sent(id: &str, peer: &str) -> SentRow {
    SentRow {
        message_id: id.into(),
        peer_id: peer.into(),
        kind: "notify".into(),
        to_name: Some("target".into()),
        text: "for relay A only".into(),
        correlation_id: None,
        state: "queued".into(),
        error: None,
        reply: None,
        created_at_ms: 1,
    }
}

/// A state.db made by the daemon before migrations existed, with data in it, opens with
/// everything kept; its rows join the realm the daemon starts in.
#[tokio::test]
async fn a_state_db_from_before_migrations_upgrades_with_its_data() {
    let dir = tempfile::tempdir().expect("tmp");
    let path = dir.path().join("state.db");
    {
        let options = SqliteConnectOptions::from_str("sqlite://")
            .expect("options")
            .filename(&path)
            .create_if_missing(true);
        let pool = SqlitePoolOptions::new()
            .connect_with(options)
            .await
            .expect("old db");
        // Migration 0001 is, by definition, the schema daemons made before migrations.
        sqlx::raw_sql(include_str!("../../../migrations/0001_state.sql"))
            .execute(&pool)
            .await
            .expect("old schema");
        sqlx::raw_sql(
            "INSERT INTO sessions (session_id, backend, role, circle, peer_id, name, started_at_ms)
               VALUES ('s1', 'claude-code', 'agent', 'dev', 'peer-old', 'web', 1);
             INSERT INTO outbox (frame_id, peer_id, frame, created_at_ms) VALUES ('f1', 'peer-old', '{}', 1);
             INSERT INTO sent (message_id, peer_id, kind, text, state, created_at_ms)
               VALUES ('f1', 'peer-old', 'notify', 'hello', 'queued', 1);",
        )
        .execute(&pool)
        .await
        .expect("old data");
        pool.close().await;
    }
    let store = Store::open(&path).await.expect("upgraded");
    store.enter_realm("http://a#tnt-a").await.expect("realm");
    let session = store.session("s1").await.expect("db").expect("kept");
    assert_eq!(session.peer_id.as_deref(), Some("peer-old"));
    assert_eq!(store.outbox().await.expect("outbox").len(), 1);
    assert!(store.sent("f1").await.expect("db").is_some());
    // Opening again runs nothing twice.
    drop(store);
    Store::open(&path).await.expect("reopened");
}

/// Issue 15.1: nothing queued under one relay identity is sent, re-minted or counted under
/// another; switching back restores the peer identity and the queue; dropping is explicit.
#[tokio::test]
async fn frames_queued_for_one_relay_never_leave_under_another() {
    let dir = tempfile::tempdir().expect("tmp");
    let store = Store::open(&dir.path().join("state.db"))
        .await
        .expect("open");
    let a = "http://relay-a#tnt-a";
    let b = "http://relay-b#tnt-b";
    store.enter_realm(a).await.expect("a");
    let row = SessionRow::new("s1".into(), "claude-code", "agent", "dev");
    store.upsert_session(&row).await.expect("session");
    store
        .set_identity("s1", "peer-on-a", "web", "dev")
        .await
        .expect("identity");
    store
        .set_repowire_session("s1", "rs-of-tenant-a")
        .await
        .expect("bound");
    store
        .insert_sent(&sent("f1", "peer-on-a"))
        .await
        .expect("sent");
    store
        .put_outbox("f1", "peer-on-a", "{}")
        .await
        .expect("queued");

    store.enter_realm(b).await.expect("b");
    assert!(store.outbox().await.expect("outbox").is_empty());
    assert_eq!(store.outbox_len().await.expect("len"), 0);
    let on_b = store.session("s1").await.expect("db").expect("session");
    assert_eq!(
        on_b.peer_id, None,
        "relay a's peer id is not used on relay b"
    );
    assert_eq!(
        on_b.repowire_session_id, None,
        "nor tenant a's Repowire session"
    );
    let listed = store.outbox_by_realm().await.expect("list");
    assert_eq!(
        listed
            .iter()
            .map(|r| (r.realm.as_str(), r.messages))
            .collect::<Vec<_>>(),
        vec![(a, 1)]
    );
    store
        .set_identity("s1", "peer-on-b", "web", "dev")
        .await
        .expect("identity");

    store.enter_realm(a).await.expect("back to a");
    let back = store.session("s1").await.expect("db").expect("session");
    assert_eq!(back.peer_id.as_deref(), Some("peer-on-a"));
    assert_eq!(back.repowire_session_id.as_deref(), Some("rs-of-tenant-a"));
    assert_eq!(store.outbox().await.expect("outbox").len(), 1);
    assert!(
        store
            .drop_outbox_of_realm(a)
            .await
            .expect("drop")
            .is_empty(),
        "the current relay's queue is never dropped"
    );

    store.enter_realm(b).await.expect("b again");
    assert_eq!(
        store
            .session("s1")
            .await
            .expect("db")
            .expect("s")
            .peer_id
            .as_deref(),
        Some("peer-on-b")
    );
    assert_eq!(
        store.drop_outbox_of_realm(a).await.expect("drop"),
        vec!["f1"]
    );
    let (row, _) = store.sent("f1").await.expect("db").expect("sent");
    assert_eq!(row.state, "dropped");
    assert!(store.outbox_by_realm().await.expect("list").is_empty());
}

/// Frames queued before the relay said which tenant the key is for join that tenant's
/// realm; a key of another tenant on the same relay is another realm.
#[tokio::test]
async fn a_provisional_realm_becomes_the_keys_tenant() {
    let dir = tempfile::tempdir().expect("tmp");
    let store = Store::open(&dir.path().join("state.db"))
        .await
        .expect("open");
    let url = "http://relay";
    let first = store.known_realm(url, "fp1").await.expect("realm");
    assert_eq!(first, "http://relay#key:fp1");
    store.enter_realm(&first).await.expect("enter");
    store.put_outbox("f1", "p", "{}").await.expect("queued");
    let known = store
        .learn_tenant(url, "fp1", "tnt-1")
        .await
        .expect("learn");
    assert_eq!(known, "http://relay#tnt-1");
    assert_eq!(store.realm(), known);
    assert_eq!(store.outbox().await.expect("outbox").len(), 1);
    assert_eq!(store.known_realm(url, "fp1").await.expect("realm"), known);
    // A frame stamped with the provisional realm after the move (a write that read the realm
    // just before the switch) joins the tenant's at the next connection.
    sqlx::query(
        "INSERT INTO outbox (frame_id, peer_id, frame, created_at_ms, realm) VALUES ('f2', 'p', '{}', 2, ?)",
    )
    .bind(&first)
    .execute(&store.pool)
    .await
    .expect("straggler");
    assert_eq!(store.outbox().await.expect("outbox").len(), 1);
    store
        .learn_tenant(url, "fp1", "tnt-1")
        .await
        .expect("learn again");
    assert_eq!(store.outbox().await.expect("outbox").len(), 2);

    let other = store
        .learn_tenant(url, "fp2", "tnt-2")
        .await
        .expect("learn");
    assert_eq!(other, "http://relay#tnt-2");
    assert!(store.outbox().await.expect("outbox").is_empty());
}

#[tokio::test]
async fn state_db_is_readable_by_its_owner_only() {
    let dir = tempfile::tempdir().expect("tmp");
    let path = dir.path().join("state.db");
    let _store = Store::open(&path).await.expect("open");
    let mode = std::fs::metadata(&path).expect("meta").permissions().mode() & 0o777;
    assert_eq!(mode, 0o600);
}

fn denial(session: &str, text: &str, at: i64) -> LocalDecision {
    LocalDecision {
        decided_at_ms: at,
        ..LocalDecision::now(session, text.into(), "could not ask for approval".into())
    }
}

/// Local denials stay in their relay identity (a provisional one joins the key's tenant), list
/// newest first, per session when asked, and only the newest [`decisions::KEPT`] are kept.
#[tokio::test]
async fn local_denials_keep_to_their_realm_and_the_newest_are_kept() {
    let dir = tempfile::tempdir().expect("tmp");
    let store = Store::open(&dir.path().join("state.db"))
        .await
        .expect("open");
    let provisional = store
        .known_realm("http://relay", "fp1")
        .await
        .expect("realm");
    store.enter_realm(&provisional).await.expect("enter");
    store
        .record_local_decision(&denial("s1", "Bash: make", 10))
        .await
        .expect("recorded");
    store
        .learn_tenant("http://relay", "fp1", "tnt-1")
        .await
        .expect("learn");
    store
        .record_local_decision(&denial("s2", "Bash: ls", 20))
        .await
        .expect("recorded");
    let all = store.local_decisions(None, 10).await.expect("list");
    let texts: Vec<&str> = all.iter().map(|d| d.text.as_str()).collect();
    assert_eq!(texts, ["Bash: ls", "Bash: make"]);
    let one = store.local_decisions(Some("s1"), 10).await.expect("list");
    assert_eq!(one.len(), 1);
    assert_eq!(one[0].session_id, "s1");
    assert_eq!(store.local_decisions(None, 1).await.expect("list").len(), 1);

    // Another tenant's daemon state shows none of them.
    store
        .learn_tenant("http://relay", "fp2", "tnt-2")
        .await
        .expect("learn");
    assert!(
        store
            .local_decisions(None, 10)
            .await
            .expect("list")
            .is_empty()
    );

    // The oldest go once more than KEPT are recorded.
    sqlx::query(
        "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < ?)
         INSERT INTO local_decisions (realm, decided_at_ms, session_id, text, reason)
         SELECT ?, 100 + i, 's3', 'old ' || i, 'r' FROM n",
    )
    .bind(decisions::KEPT)
    .bind(store.realm())
    .execute(&store.pool)
    .await
    .expect("filled");
    store
        .record_local_decision(&denial("s3", "newest", 1_000_000))
        .await
        .expect("recorded");
    let left: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM local_decisions WHERE realm = ?")
        .bind(store.realm())
        .fetch_one(&store.pool)
        .await
        .expect("count");
    assert_eq!(left, decisions::KEPT);
    // Another realm's keep their own count.
    let all: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM local_decisions")
        .fetch_one(&store.pool)
        .await
        .expect("count");
    assert_eq!(all, decisions::KEPT + 2);
    let newest = store.local_decisions(None, 2).await.expect("list");
    assert_eq!(newest[0].text, "newest");
    assert_eq!(newest[1].text, format!("old {}", decisions::KEPT));
}
