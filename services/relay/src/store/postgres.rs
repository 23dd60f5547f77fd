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

/// A stored message's tenant, id, content hash and correlation id.
type StoredId = (String, String, String, Option<String>);

impl PgStore {
    /// Which of these messages are stored already (retries, reused ids): a primary-key lookup
    /// per id, fenced like [`PgStore::receipt_entries`] (unfenced, a new database's planner
    /// hash-joined the whole `messages` table).
    async fn stored_messages(
        conn: &mut sqlx::PgConnection,
        ms: &[(usize, &super::NewMessage)],
    ) -> super::Result<Vec<StoredId>> {
        let tenants: Vec<&str> = ms.iter().map(|(_, m)| m.tenant_id.as_str()).collect();
        let ids: Vec<&str> = ms.iter().map(|(_, m)| m.message_id.as_str()).collect();
        Ok(sqlx::query_as(
            "SELECT m.tenant_id, m.message_id, m.content_hash, m.correlation_id \
             FROM unnest($1::text[], $2::text[]) AS k(tenant_id, message_id) \
             CROSS JOIN LATERAL ( \
               SELECT tenant_id, message_id, content_hash, correlation_id FROM messages \
               WHERE tenant_id = k.tenant_id AND message_id = k.message_id OFFSET 0) m",
        )
        .bind(tenants)
        .bind(ids)
        .fetch_all(&mut *conn)
        .await?)
    }

    /// The inbox entries receipts name, with their effective state and their peer's cursor.
    ///
    /// One statement whatever the batch size (arrays, not a VALUES list), and planned key by
    /// key: the `OFFSET 0` fence keeps the lateral subquery a nested loop over the keys, each
    /// an index lookup on the unique (tenant, message, peer) index. Left to itself, the planner
    /// of a table without statistics yet (a new database) joined `peers` first and scanned
    /// every inbox entry of each peer per key, ten times slower and growing with the inbox.
    async fn receipt_entries(
        conn: &mut sqlx::PgConnection,
        keys: &[(usize, &super::ReceiptOp)],
    ) -> super::Result<Vec<EntryRow>> {
        let column = |f: fn(&super::ReceiptOp) -> &str| -> Vec<&str> {
            keys.iter().map(|(_, r)| f(r)).collect()
        };
        Ok(sqlx::query_as(
            "SELECT e.tenant_id, e.peer_id, e.message_id, e.seq, \
             CASE WHEN e.state = 'accepted' AND e.seq <= p.delivered_seq THEN 'delivered' ELSE e.state END AS state, \
             e.state AS row_state, p.delivered_seq AS cursor, e.from_peer_id, e.correlation_id \
             FROM unnest($1::text[], $2::text[], $3::text[]) AS k(tenant_id, peer_id, message_id) \
             CROSS JOIN LATERAL ( \
               SELECT i.tenant_id, i.peer_id, i.message_id, i.seq, i.state, m.from_peer_id, m.correlation_id \
               FROM inbox i JOIN messages m ON m.tenant_id = i.tenant_id AND m.message_id = i.message_id \
               WHERE i.tenant_id = k.tenant_id AND i.message_id = k.message_id AND i.peer_id = k.peer_id \
               OFFSET 0) e \
             JOIN peers p ON p.tenant_id = e.tenant_id AND p.peer_id = e.peer_id",
        )
        .bind(column(|r| &r.tenant_id))
        .bind(column(|r| &r.peer_id))
        .bind(column(|r| &r.message_id))
        .fetch_all(&mut *conn)
        .await?)
    }
}
