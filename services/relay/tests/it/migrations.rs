//! The two migration histories: one number means one change in both, and an embedded database
//! migrated under SQLite's old numbering opens, with its data, under the shared one.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use repowire_relay::storage::store::sqlite::SqliteStore;
use repowire_relay::storage::store::{Store, TenantKey, TenantStore};
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

    // Back to the numbering an older relay wrote: 1, 2, 3, … with no gaps.
    let pool = sqlx::SqlitePool::connect(&format!("sqlite://{}", path.display()))
        .await
        .unwrap();
    for (old, new) in expected.iter().enumerate() {
        sqlx::query("UPDATE _sqlx_migrations SET version = $1 WHERE version = $2")
            .bind(old as i64 + 1)
            .bind(new)
            .execute(&pool)
            .await
            .unwrap();
    }
    pool.close().await;
    let old: Vec<i64> = versions(&path).await;
    assert_eq!(old, (1..=expected.len() as i64).collect::<Vec<_>>());

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
