//! Peers and a circle's shared state: one statement
//! (or one small transaction) each, off the message write path.

/// The most peers one registration looks at to forget (the live ones among them are skipped).
pub(crate) const MAX_FORGET_SCAN: i64 = 1000;

use super::*;

impl This {
    pub(super) async fn upsert_peer_sql(pool: &sqlx::Pool<Db>, p: &PeerRecord) -> Result<()> {
        let mut tx = pool.begin().await?;
        Self::insert_peer_rows(&mut tx, p).await?;
        tx.commit().await?;
        Ok(())
    }

    /// The peer (inserted, or its identity fields replaced) and its delivered cursor (a
    /// row of its own, see migration 0007) together.
    pub(super) async fn insert_peer_rows(
        tx: &mut sqlx::Transaction<'_, Db>,
        p: &PeerRecord,
    ) -> Result<()> {
        sqlx::query(
            "INSERT INTO peers (tenant_id, peer_id, name, circle, backend, role, path, machine, \
             description, description_at_ms, created_at_ms, last_seen_ms) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12) \
             ON CONFLICT (tenant_id, peer_id) DO UPDATE SET name = excluded.name, \
             circle = excluded.circle, backend = excluded.backend, role = excluded.role, \
             path = excluded.path, machine = excluded.machine, last_seen_ms = excluded.last_seen_ms",
        )
        .bind(&p.tenant_id)
        .bind(&p.peer_id)
        .bind(&p.name)
        .bind(&p.circle)
        .bind(&p.backend)
        .bind(&p.role)
        .bind(&p.path)
        .bind(&p.machine)
        .bind(&p.description)
        .bind(p.description_at_ms)
        .bind(p.created_at_ms)
        .bind(p.last_seen_ms)
        .execute(&mut **tx)
        .await?;
        sqlx::query(
            "INSERT INTO peer_cursors (tenant_id, peer_id) VALUES ($1, $2) ON CONFLICT DO NOTHING",
        )
        .bind(&p.tenant_id)
        .bind(&p.peer_id)
        .execute(&mut **tx)
        .await?;
        Ok(())
    }

    /// Stores a new peer within the tenant's `max_stored_peers`, forgetting the peers
    /// `room` allows to make room, all in one transaction that holds the tenant's row
    /// (Postgres) or the write lock (SQLite): two registrations never both take the last
    /// place. Forgotten: the longest-offline peers, offline (not in `room.live`) and unseen
    /// since `room.seen_before_ms`, with no entry waiting in their inbox and no open ask
    /// sent or received. Refused (nothing changed) when not enough of them exist.
    pub(super) async fn insert_peer_bounded_sql(
        pool: &sqlx::Pool<Db>,
        p: &PeerRecord,
        room: &PeerRoom<'_>,
    ) -> Result<PeerAdmission> {
        let mut tx = pool.begin_with(BEGIN_WRITE).await?;
        if BACKEND == "postgres" {
            sqlx::query("SELECT id FROM tenants WHERE id = $1 FOR UPDATE")
                .bind(&p.tenant_id)
                .execute(&mut *tx)
                .await?;
        }
        let (stored,): (i64,) =
            sqlx::query_as("SELECT COUNT(*) FROM peers WHERE tenant_id = $1 AND peer_id <> $2")
                .bind(&p.tenant_id)
                .bind(crate::storage::store::CONTROL_PEER)
                .fetch_one(&mut *tx)
                .await?;
        let needed = stored.saturating_add(1).saturating_sub(room.max).max(0);
        let mut forgotten = Vec::new();
        if needed > 0 {
            // Enough candidates that the live ones among them (skipped here) leave
            // `needed`; bounded, so one registration never scans a whole tenant.
            let live = i64::try_from(room.live.len()).unwrap_or(i64::MAX);
            let scan = needed
                .saturating_add(live)
                .min(super::peers::MAX_FORGET_SCAN);
            let candidates: Vec<(String,)> = sqlx::query_as(
                "SELECT p.peer_id FROM peers p JOIN peer_cursors c \
                 ON c.tenant_id = p.tenant_id AND c.peer_id = p.peer_id \
                 WHERE p.tenant_id = $1 AND p.peer_id <> $2 AND p.last_seen_ms < $3 \
                 AND p.admitted = c.released \
                 AND NOT EXISTS (SELECT 1 FROM messages m WHERE m.tenant_id = p.tenant_id \
                     AND m.from_peer_id = p.peer_id AND m.kind = 'ask' AND m.closed_at_ms IS NULL) \
                 AND NOT EXISTS (SELECT 1 FROM inbox i JOIN messages m \
                     ON m.tenant_id = i.tenant_id AND m.message_id = i.message_id \
                     WHERE i.tenant_id = p.tenant_id AND i.peer_id = p.peer_id \
                     AND m.kind = 'ask' AND m.closed_at_ms IS NULL) \
                 ORDER BY p.last_seen_ms, p.peer_id LIMIT $4",
            )
            .bind(&p.tenant_id)
            .bind(crate::storage::store::CONTROL_PEER)
            .bind(room.seen_before_ms)
            .bind(scan)
            .fetch_all(&mut *tx)
            .await?;
            for (peer_id,) in candidates {
                if i64::try_from(forgotten.len()).unwrap_or(i64::MAX) >= needed {
                    break;
                }
                if room.live.contains(&peer_id) {
                    continue;
                }
                // Its cursor first (SQLite's foreign key); the peer only if it still
                // waits for nothing (an accept that raced this scan keeps it).
                sqlx::query(
                    "DELETE FROM peer_cursors WHERE tenant_id = $1 AND peer_id = $2 \
                     AND released = (SELECT admitted FROM peers WHERE tenant_id = $1 AND peer_id = $2)",
                )
                .bind(&p.tenant_id)
                .bind(&peer_id)
                .execute(&mut *tx)
                .await?;
                let gone = sqlx::query(
                    "DELETE FROM peers WHERE tenant_id = $1 AND peer_id = $2 AND last_seen_ms < $3 \
                     AND NOT EXISTS (SELECT 1 FROM peer_cursors c WHERE c.tenant_id = $1 AND c.peer_id = $2)",
                )
                .bind(&p.tenant_id)
                .bind(&peer_id)
                .bind(room.seen_before_ms)
                .execute(&mut *tx)
                .await?
                .rows_affected();
                if gone == 1 {
                    forgotten.push(peer_id);
                }
            }
            if i64::try_from(forgotten.len()).unwrap_or(i64::MAX) < needed {
                tx.rollback().await?;
                return Ok(PeerAdmission::Full { stored });
            }
        }
        Self::insert_peer_rows(&mut tx, p).await?;
        tx.commit().await?;
        Ok(PeerAdmission::Stored { forgotten })
    }

    pub(super) async fn get_peer_sql(
        pool: &sqlx::Pool<Db>,
        tenant_id: &str,
        peer_id: &str,
    ) -> Result<Option<PeerRecord>> {
        let sql = format!("SELECT {PEER_COLS} FROM peers WHERE tenant_id = $1 AND peer_id = $2");
        Ok(sqlx::query_as(&sql)
            .bind(tenant_id)
            .bind(peer_id)
            .fetch_optional(pool)
            .await?)
    }

    pub(super) async fn peers_named_sql(
        pool: &sqlx::Pool<Db>,
        tenant_id: &str,
        name: &str,
    ) -> Result<Vec<PeerRecord>> {
        let sql = format!(
            "SELECT {PEER_COLS} FROM peers WHERE tenant_id = $1 AND name = $2 ORDER BY circle, peer_id"
        );
        Ok(sqlx::query_as(&sql)
            .bind(tenant_id)
            .bind(name)
            .fetch_all(pool)
            .await?)
    }

    pub(super) async fn list_peers_sql(
        pool: &sqlx::Pool<Db>,
        tenant_id: &str,
    ) -> Result<Vec<PeerRecord>> {
        let sql = format!(
            "SELECT {PEER_COLS} FROM peers WHERE tenant_id = $1 AND peer_id <> $2 ORDER BY circle, name, peer_id"
        );
        // `@approvers` is a recipient, never a peer anyone lists.
        Ok(sqlx::query_as(&sql)
            .bind(tenant_id)
            .bind(CONTROL_PEER)
            .fetch_all(pool)
            .await?)
    }

    pub(super) async fn set_description_sql(
        pool: &sqlx::Pool<Db>,
        tenant_id: &str,
        peer_id: &str,
        description: Option<&str>,
        now_ms: i64,
    ) -> Result<()> {
        sqlx::query(
            "UPDATE peers SET description = $1, description_at_ms = $2, last_seen_ms = $3 \
             WHERE tenant_id = $4 AND peer_id = $5",
        )
        .bind(description)
        .bind(description.map(|_| now_ms))
        .bind(now_ms)
        .bind(tenant_id)
        .bind(peer_id)
        .execute(pool)
        .await?;
        Ok(())
    }

    pub(super) async fn clear_description_sql(
        pool: &sqlx::Pool<Db>,
        tenant_id: &str,
        peer_id: &str,
        set_at: i64,
    ) -> Result<()> {
        sqlx::query(
            "UPDATE peers SET description = NULL, description_at_ms = NULL \
             WHERE tenant_id = $1 AND peer_id = $2 AND description_at_ms = $3",
        )
        .bind(tenant_id)
        .bind(peer_id)
        .bind(set_at)
        .execute(pool)
        .await?;
        Ok(())
    }

    pub(super) async fn touch_peer_sql(
        pool: &sqlx::Pool<Db>,
        tenant_id: &str,
        peer_id: &str,
        now_ms: i64,
    ) -> Result<()> {
        sqlx::query("UPDATE peers SET last_seen_ms = $1 WHERE tenant_id = $2 AND peer_id = $3")
            .bind(now_ms)
            .bind(tenant_id)
            .bind(peer_id)
            .execute(pool)
            .await?;
        Ok(())
    }

    // The arguments of `Store::state_set`, and the pool.
    #[allow(clippy::too_many_arguments)]
    pub(super) async fn state_set_sql(
        pool: &sqlx::Pool<Db>,
        e: &StateEntryWrite<'_>,
        max_keys: usize,
        max_bytes: Option<i64>,
    ) -> Result<StateWrite> {
        let Some(value) = e.value else {
            sqlx::query(
                "DELETE FROM shared_state WHERE tenant_id = $1 AND circle = $2 AND key = $3",
            )
            .bind(e.tenant_id)
            .bind(e.circle)
            .bind(e.key)
            .execute(pool)
            .await?;
            return Ok(StateWrite::Deleted);
        };
        let size = i64::try_from(e.key.len() + value.len()).unwrap_or(i64::MAX);
        // One writer of a tenant's state at a time, so the byte total it checks is the
        // one it writes against: SQLite's write transaction is exclusive already; on
        // Postgres the tenant's row is locked for the transaction.
        let mut tx = pool.begin_with(BEGIN_WRITE).await?;
        if BACKEND == "postgres" {
            sqlx::query("SELECT id FROM tenants WHERE id = $1 FOR UPDATE")
                .bind(e.tenant_id)
                .execute(&mut *tx)
                .await?;
        }
        if let Some(max) = max_bytes {
            let (used,): (i64,) = sqlx::query_as(
                "SELECT CAST(COALESCE(SUM(size_bytes), 0) AS BIGINT) FROM shared_state \
                 WHERE tenant_id = $1 AND NOT (circle = $2 AND key = $3)",
            )
            .bind(e.tenant_id)
            .bind(e.circle)
            .bind(e.key)
            .fetch_one(&mut *tx)
            .await?;
            if used.saturating_add(size) > max {
                tx.rollback().await?;
                return Ok(StateWrite::OverBytes { used });
            }
        }
        // One statement: an existing key is always updated; a new one only below the cap.
        let done = sqlx::query(
            "INSERT INTO shared_state (tenant_id, circle, key, value, updated_by, updated_at_ms, size_bytes) \
             SELECT $1, $2, $3, $4, $5, $6, $8 \
             WHERE EXISTS (SELECT 1 FROM shared_state WHERE tenant_id = $1 AND circle = $2 AND key = $3) \
                OR (SELECT COUNT(*) FROM shared_state WHERE tenant_id = $1 AND circle = $2) < $7 \
             ON CONFLICT (tenant_id, circle, key) DO UPDATE SET value = excluded.value, \
                updated_by = excluded.updated_by, updated_at_ms = excluded.updated_at_ms, \
                size_bytes = excluded.size_bytes",
        )
        .bind(e.tenant_id)
        .bind(e.circle)
        .bind(e.key)
        .bind(value)
        .bind(e.by)
        .bind(e.now_ms)
        .bind(i64::try_from(max_keys).unwrap_or(i64::MAX))
        .bind(size)
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(if done.rows_affected() == 0 {
            StateWrite::Full
        } else {
            StateWrite::Stored
        })
    }

    pub(super) async fn state_get_sql(
        pool: &sqlx::Pool<Db>,
        tenant_id: &str,
        circle: &str,
        key: Option<&str>,
    ) -> Result<Vec<StateRecord>> {
        Ok(sqlx::query_as(
            "SELECT key, value, updated_by, updated_at_ms FROM shared_state \
             WHERE tenant_id = $1 AND circle = $2 AND ($3 IS NULL OR key = $3) ORDER BY key",
        )
        .bind(tenant_id)
        .bind(circle)
        .bind(key)
        .fetch_all(pool)
        .await?)
    }
}

#[async_trait::async_trait]
impl PeerStore for This {
    async fn upsert_peer(&self, p: &PeerRecord) -> Result<()> {
        Self::upsert_peer_sql(&self.pool, p).await
    }

    async fn insert_peer_bounded(
        &self,
        p: &PeerRecord,
        room: &PeerRoom<'_>,
    ) -> Result<PeerAdmission> {
        Self::insert_peer_bounded_sql(&self.pool, p, room).await
    }

    async fn stored_peers(&self, tenant_id: &str) -> Result<i64> {
        let (n,): (i64,) =
            sqlx::query_as("SELECT COUNT(*) FROM peers WHERE tenant_id = $1 AND peer_id <> $2")
                .bind(tenant_id)
                .bind(crate::storage::store::CONTROL_PEER)
                .fetch_one(&self.pool)
                .await?;
        Ok(n)
    }

    async fn get_peer(&self, tenant_id: &str, peer_id: &str) -> Result<Option<PeerRecord>> {
        Self::get_peer_sql(&self.pool, tenant_id, peer_id).await
    }

    async fn peers_named(&self, tenant_id: &str, name: &str) -> Result<Vec<PeerRecord>> {
        Self::peers_named_sql(&self.pool, tenant_id, name).await
    }

    async fn list_peers(&self, tenant_id: &str) -> Result<Vec<PeerRecord>> {
        Self::list_peers_sql(&self.pool, tenant_id).await
    }

    async fn set_description(
        &self,
        tenant_id: &str,
        peer_id: &str,
        description: Option<&str>,
        now_ms: i64,
    ) -> Result<()> {
        Self::set_description_sql(&self.pool, tenant_id, peer_id, description, now_ms).await
    }

    async fn clear_description(&self, tenant_id: &str, peer_id: &str, set_at: i64) -> Result<()> {
        Self::clear_description_sql(&self.pool, tenant_id, peer_id, set_at).await
    }

    async fn touch_peer(&self, tenant_id: &str, peer_id: &str, now_ms: i64) -> Result<()> {
        Self::touch_peer_sql(&self.pool, tenant_id, peer_id, now_ms).await
    }

    async fn state_set(
        &self,
        tenant_id: &str,
        circle: &str,
        key: &str,
        value: Option<&str>,
        by: &str,
        now_ms: i64,
        max_keys: usize,
        max_bytes: Option<i64>,
    ) -> Result<StateWrite> {
        let entry = StateEntryWrite {
            tenant_id,
            circle,
            key,
            value,
            by,
            now_ms,
        };
        Self::state_set_sql(&self.pool, &entry, max_keys, max_bytes).await
    }

    async fn state_bytes(&self, tenant_id: &str) -> Result<i64> {
        let (bytes,): (i64,) = sqlx::query_as(
            "SELECT CAST(COALESCE(SUM(size_bytes), 0) AS BIGINT) FROM shared_state \
             WHERE tenant_id = $1",
        )
        .bind(tenant_id)
        .fetch_one(&self.pool)
        .await?;
        Ok(bytes)
    }

    async fn state_get(
        &self,
        tenant_id: &str,
        circle: &str,
        key: Option<&str>,
    ) -> Result<Vec<StateRecord>> {
        Self::state_get_sql(&self.pool, tenant_id, circle, key).await
    }
}
