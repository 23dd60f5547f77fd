//! Postgres storage (production): the durable truth shared by every relay pod.

use sqlx::PgPool;
use sqlx::postgres::PgPoolOptions;

static MIGRATOR: sqlx::migrate::Migrator = sqlx::migrate!("../../migrations/postgres");

/// The Postgres store.
#[derive(Debug, Clone)]
pub struct PgStore {
    pool: PgPool,
}

impl PgStore {
    /// Connects and applies pending migrations.
    pub async fn connect(url: &str, max_connections: u32) -> super::Result<Self> {
        let pool = PgPoolOptions::new()
            .max_connections(max_connections)
            // Fail fast while the database is down: requests get `unavailable` instead of waiting.
            .acquire_timeout(std::time::Duration::from_secs(5))
            .connect(url)
            .await?;
        Self::new(pool).await
    }

    /// Wraps a pool, applying pending migrations (idempotent).
    pub async fn new(pool: PgPool) -> super::Result<Self> {
        MIGRATOR.run(&pool).await?;
        Ok(Self { pool })
    }
}

super::sql::impl_store!(
    PgStore,
    sqlx::Postgres,
    "postgres",
    "BEGIN",
    " FOR UPDATE OF m"
);
