//! SQLite storage (embedded mode): one file under the data dir, WAL, full fsync on commit so
//! "accepted" means durable here too.

use std::path::Path;
use std::str::FromStr;
use std::time::Duration;

use sqlx::SqlitePool;
use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions, SqliteSynchronous};

static MIGRATOR: sqlx::migrate::Migrator = sqlx::migrate!("../../migrations/sqlite");

/// The SQLite store.
#[derive(Debug, Clone)]
pub struct SqliteStore {
    pool: SqlitePool,
}

impl SqliteStore {
    /// Opens (creating if missing) the database file and applies pending migrations.
    pub async fn open(path: &Path) -> super::Result<Self> {
        Self::open_with(path, 4).await
    }

    /// Like [`SqliteStore::open`] with a given pool size (a relay embedded in a laptop daemon
    /// needs few connections, and each holds its own page cache).
    pub async fn open_with(path: &Path, connections: u32) -> super::Result<Self> {
        let options = SqliteConnectOptions::from_str("sqlite://")?
            .filename(path)
            .create_if_missing(true)
            .journal_mode(SqliteJournalMode::Wal)
            .synchronous(SqliteSynchronous::Full)
            .foreign_keys(true)
            .busy_timeout(Duration::from_secs(10));
        let pool = SqlitePoolOptions::new()
            .max_connections(connections.max(1))
            .acquire_timeout(Duration::from_secs(5))
            .connect_with(options)
            .await?;
        MIGRATOR.run(&pool).await?;
        Ok(Self { pool })
    }
}

super::sql::impl_store!(SqliteStore, sqlx::Sqlite, "sqlite", "BEGIN IMMEDIATE", "");
