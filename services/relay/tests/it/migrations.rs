//! The two migration histories: one number means one change in both, and an embedded database
//! migrated under SQLite's old numbering opens, with its data, under the shared one.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use repowire_relay::storage::store::sqlite::SqliteStore;
use repowire_relay::storage::store::{KeyStore, Store, TenantKey, TenantStore};
use repowire_relay::tenancy::admin;

fn migrations(backend: &str) -> BTreeMap<u32, String> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../migrations")
        .join(backend);
    let mut by_number = BTreeMap::new();
    for entry in std::fs::read_dir(&dir).unwrap() {
        let name = entry.unwrap().file_name().into_string().unwrap();
        let (number, _) = name.split_once('_').expect("NNNN_name.sql");
        let previous = by_number.insert(number.parse().unwrap(), name.clone());
        assert!(
            previous.is_none(),
            "{backend}: two migrations numbered {number}"
        );
    }
    by_number
}

#[test]
fn a_migration_number_names_the_same_change_in_both_backends() {
    let postgres = migrations("postgres");
    let sqlite = migrations("sqlite");
    assert!(sqlite.len() > 10, "{sqlite:?}");
    for (number, name) in &sqlite {
        assert_eq!(
            postgres.get(number),
            Some(name),
            "SQLite migration {name} has no Postgres migration of the same number and name \
             (a change both backends make takes one number in both)"
        );
    }
}

async fn versions(path: &Path) -> Vec<i64> {
    let pool = sqlx::SqlitePool::connect(&format!("sqlite://{}", path.display()))
        .await
        .unwrap();
    let v = sqlx::query_scalar("SELECT version FROM _sqlx_migrations ORDER BY version")
        .fetch_all(&pool)
        .await
        .unwrap();
    pool.close().await;
    v
}

#[tokio::test]
async fn an_embedded_database_on_the_old_sqlite_numbering_opens_with_its_data() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("relay.db");
    let store = SqliteStore::open(&path).await.unwrap();
    let (tenant, _) = admin::bootstrap(&store)
        .await
        .unwrap()
        .expect("a new tenant");
    store.close().await;
    let shared: Vec<i64> = versions(&path).await;
    let expected: Vec<i64> = migrations("sqlite").keys().map(|n| i64::from(*n)).collect();
    assert_eq!(shared, expected);

    // Back to the numbering an older relay wrote: 1, 2, 3, … with no gaps, for the migrations
    // it had (up to the shared 21, its 18); later ones only ever had the shared numbers.
    let pool = sqlx::SqlitePool::connect(&format!("sqlite://{}", path.display()))
        .await
        .unwrap();
    let renumbered: Vec<i64> = expected.iter().copied().filter(|v| *v <= 21).collect();
    let later: Vec<i64> = expected.iter().copied().filter(|v| *v > 21).collect();
    for (old, new) in renumbered.iter().enumerate() {
        sqlx::query("UPDATE _sqlx_migrations SET version = $1 WHERE version = $2")
            .bind(old as i64 + 1)
            .bind(new)
            .execute(&pool)
            .await
            .unwrap();
    }
    pool.close().await;
    let old: Vec<i64> = versions(&path).await;
    let mut as_old: Vec<i64> = (1..=renumbered.len() as i64).collect();
    as_old.extend(&later);
    assert_eq!(old, as_old);

    let reopened = SqliteStore::open(&path)
        .await
        .expect("the old ledger is renumbered");
    let found = reopened
        .find_tenant(TenantKey::Id(&tenant.id))
        .await
        .unwrap();
    assert_eq!(found.map(|t| t.name), Some(tenant.name.clone()));
    reopened.close().await;
    assert_eq!(versions(&path).await, expected);

    // And once renumbered, opening again changes nothing.
    let again = SqliteStore::open(&path).await.unwrap();
    again.close().await;
    assert_eq!(versions(&path).await, expected);
}

/// Migration 0023: an earlier relay's first key (`bootstrap`, with every scope there was) gets
/// `keys:manage` and `messages:read`; another key named with those three scopes does not.
#[tokio::test]
async fn an_earlier_relays_first_key_gets_the_dashboard_scopes_and_no_other_key_does() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("relay.db");
    let store = SqliteStore::open(&path).await.unwrap();
    let (tenant, first) = admin::bootstrap(&store)
        .await
        .unwrap()
        .expect("a new tenant");
    let other = admin::keys::create_key(
        &store,
        &tenant.id,
        repowire_relay::tenancy::apikey::KeyMode::Live,
        "laptop",
        None,
        Some(&["connect".into(), "usage:read".into(), "approve".into()]),
    )
    .await
    .unwrap();
    store.close().await;
    // As an earlier relay left it: the first key without the new scope, 0023 not applied.
    let pool = sqlx::SqlitePool::connect(&format!("sqlite://{}", path.display()))
        .await
        .unwrap();
    sqlx::query("UPDATE api_keys SET scopes = 'connect usage:read approve' WHERE id = $1")
        .bind(&first.record.id)
        .execute(&pool)
        .await
        .unwrap();
    sqlx::query("DELETE FROM _sqlx_migrations WHERE version = 23")
        .execute(&pool)
        .await
        .unwrap();
    pool.close().await;

    let reopened = SqliteStore::open(&path).await.unwrap();
    let scopes = |id: String| {
        let store = &reopened;
        async move { store.get_api_key(&id).await.unwrap().expect("key").scopes }
    };
    assert_eq!(
        scopes(first.record.id.clone()).await,
        "connect usage:read approve keys:manage messages:read"
    );
    assert_eq!(
        scopes(other.record.id.clone()).await,
        "connect usage:read approve"
    );
    reopened.close().await;
}
