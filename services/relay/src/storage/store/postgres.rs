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
            .acquire_timeout(ACQUIRE_TIMEOUT)
            .connect(url)
            .await?;
        Self::new(pool).await
    }

    /// Wraps a pool, applying pending migrations (idempotent), each one it applies logged.
    pub async fn new(pool: PgPool) -> super::Result<Self> {
        // A fresh database has no table of applied migrations yet: none applied.
        let before: Vec<i64> = sqlx::query_scalar("SELECT version FROM _sqlx_migrations")
            .fetch_all(&pool)
            .await
            .unwrap_or_default();
        MIGRATOR.run(&pool).await?;
        super::log_applied(&MIGRATOR, &before, "postgres");
        Ok(Self { pool })
    }
}

// Write batches use generic plans (one round trip with the BEGIN). Left to the default,
// Postgres re-planned the batch statements on every execution (their array parameters make a
// custom plan look cheaper), and planning was most of a small batch's time in the database:
// 1.5 ms per batch at 1 000 messages/s, of which ~0.6 ms was `bind`. The statements are written
// so that one plan fits every batch (fenced per-key lookups, primary-key updates).
// What the shared SQL body in `sql/` takes from this backend (see `sql/mod.rs`).
type Db = sqlx::Postgres;
type This = PgStore;
const BACKEND: &str = "postgres";
const BEGIN_WRITE: &str = "BEGIN; SET LOCAL plan_cache_mode = force_generic_plan";
/// Closing an ask locks its message row, so two pods closing it serialise.
const LOCK_ASK: &str = " FOR UPDATE OF m";
/// A conversation's turn locks its conversation row, so two pods take its seqs one at a time.
const LOCK_ROW: &str = " FOR NO KEY UPDATE";

/// The shared SQL body, compiled for Postgres.
#[allow(clippy::duplicate_mod)] // on purpose: the same queries, once per driver
#[path = "sql/mod.rs"]
mod sql;

/// The element a SQL ordinal names (SQL arrays and `WITH ORDINALITY` count from 1).
fn nth<T>(items: &mut [T], ordinal: i64) -> Option<&mut T> {
    usize::try_from(ordinal - 1)
        .ok()
        .and_then(|i| items.get_mut(i))
}

/// A stored message's tenant, id, content hash and correlation id.
type StoredId = (String, String, String, Option<String>);

impl PgStore {
    /// Locks these peers' rows in (tenant, peer) order, as the updates to come will (`FOR NO
    /// KEY UPDATE`). Locks are taken as the sorted rows come out, so every transaction that
    /// locks through here takes them in the same order.
    async fn lock_peers(
        conn: &mut sqlx::PgConnection,
        rows: super::shared::PeerRows,
        peers: &std::collections::BTreeSet<(&str, &str)>,
    ) -> super::Result<()> {
        if peers.len() < 2 {
            // One row cannot be locked out of order: its update takes the lock.
            return Ok(());
        }
        let tenants: Vec<&str> = peers.iter().map(|(t, _)| *t).collect();
        let ids: Vec<&str> = peers.iter().map(|(_, p)| *p).collect();
        let table = match rows {
            super::shared::PeerRows::Slots => "peers",
            super::shared::PeerRows::Cursors => "peer_cursors",
        };
        let sql = format!(
            "SELECT 1 FROM {table} p JOIN unnest($1::text[], $2::text[]) AS k(tenant_id, peer_id) \
             ON p.tenant_id = k.tenant_id AND p.peer_id = k.peer_id \
             ORDER BY p.tenant_id, p.peer_id FOR NO KEY UPDATE OF p"
        );
        sqlx::query(&sql)
            .bind(tenants)
            .bind(ids)
            .execute(&mut *conn)
            .await?;
        Ok(())
    }

    /// Inserts message rows whose correlation id is free; returns the (tenant, id) inserted.
    /// One statement whatever the batch size: columns go as arrays, so it is prepared once and
    /// binds 14 parameters instead of 14 per row.
    ///
    /// The caller has set aside ids already stored (`stored_messages`), so this is a plain
    /// insert: `ON CONFLICT DO NOTHING` made every row a speculative insertion, which measured
    /// nearly twice the cost of the row itself (12.2 against 6.7 us per row), and the message
    /// row is the most expensive write of a routed message. A correlation id already taken is
    /// skipped by a fenced per-row probe of the correlation index instead, so the caller
    /// re-mints it as before. Only a concurrent transaction inserting the same id or
    /// correlation id at the same moment (another pod) can still collide: that is a unique
    /// violation, the batch rolls back, and the writer applies its writes one by one, where the
    /// other row is then visible.
    async fn insert_messages(
        conn: &mut sqlx::PgConnection,
        ms: &[&super::NewMessage],
    ) -> super::Result<Vec<(String, String)>> {
        let text =
            |f: fn(&super::NewMessage) -> &str| -> Vec<&str> { ms.iter().map(|m| f(m)).collect() };
        let opt = |f: fn(&super::NewMessage) -> Option<&str>| -> Vec<Option<&str>> {
            ms.iter().map(|m| f(m)).collect()
        };
        let int =
            |f: fn(&super::NewMessage) -> i64| -> Vec<i64> { ms.iter().map(|m| f(m)).collect() };
        Ok(sqlx::query_as(
            "INSERT INTO messages (tenant_id, message_id, kind, from_peer_id, from_name, from_circle, \
             body, correlation_id, reply_to, question, answer, content_hash, created_at_ms, expires_at_ms, \
             traceparent, from_session_id, to_session_id) \
             SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[], \
             $7::text[], $8::text[], $9::text[], $10::text[], $11::text[], $12::text[], $13::bigint[], $14::bigint[], \
             $15::text[], $16::text[], $17::text[]) \
             AS k(t, id, kind, fp, fname, fc, body, cid, rt, q, a, h, c, x, tp, fs, ts) \
             WHERE k.cid IS NULL OR k.kind = 'reply' OR NOT EXISTS ( \
               SELECT 1 FROM messages m WHERE m.tenant_id = k.t AND m.correlation_id = k.cid \
               AND m.kind <> 'reply' OFFSET 0) \
             RETURNING tenant_id, message_id",
        )
        .bind(text(|m| &m.tenant_id))
        .bind(text(|m| &m.message_id))
        .bind(text(|m| m.kind.as_str()))
        .bind(text(|m| &m.from_peer_id))
        .bind(text(|m| &m.from_name))
        .bind(text(|m| &m.from_circle))
        .bind(text(|m| &m.body))
        .bind(opt(|m| m.correlation_id.as_deref()))
        .bind(opt(|m| m.reply_to.as_deref()))
        .bind(opt(|m| m.question.as_deref()))
        .bind(opt(|m| m.answer.as_deref()))
        .bind(text(|m| &m.content_hash))
        .bind(int(|m| m.created_at_ms))
        .bind(int(|m| m.expires_at_ms))
        .bind(opt(|m| m.traceparent.as_deref()))
        .bind(opt(|m| m.from_session_id.as_deref()))
        .bind(opt(|m| m.to_session_id.as_deref()))
        .fetch_all(&mut *conn)
        .await?)
    }

    /// Inserts new (`accepted`) inbox entries, as arrays like [`PgStore::insert_messages`].
    async fn insert_entries(
        conn: &mut sqlx::PgConnection,
        entries: &[(&super::NewMessage, &super::Enqueued)],
    ) -> super::Result<()> {
        let tenants: Vec<&str> = entries.iter().map(|(m, _)| m.tenant_id.as_str()).collect();
        let peers: Vec<&str> = entries.iter().map(|(_, e)| e.peer_id.as_str()).collect();
        let seqs: Vec<i64> = entries.iter().map(|(_, e)| e.seq).collect();
        let ids: Vec<&str> = entries.iter().map(|(m, _)| m.message_id.as_str()).collect();
        let created: Vec<i64> = entries.iter().map(|(m, _)| m.created_at_ms).collect();
        let expires: Vec<i64> = entries.iter().map(|(m, _)| m.expires_at_ms).collect();
        sqlx::query(
            "INSERT INTO inbox (tenant_id, peer_id, seq, message_id, state, reason, updated_at_ms, expires_at_ms) \
             SELECT t, p, s, id, 'accepted', NULL, c, x \
             FROM unnest($1::text[], $2::text[], $3::bigint[], $4::text[], $5::bigint[], $6::bigint[]) AS k(t, p, s, id, c, x)",
        )
        .bind(tenants)
        .bind(peers)
        .bind(seqs)
        .bind(ids)
        .bind(created)
        .bind(expires)
        .execute(&mut *conn)
        .await?;
        Ok(())
    }

    /// Which of these messages are stored already (retries, reused ids): a primary-key lookup
    /// per id, fenced like [`PgStore::receipt_entries`] (unfenced, a new database's planner
    /// hash-joined the whole `messages` table).
    async fn stored_messages(
        conn: &mut sqlx::PgConnection,
        ms: &[(usize, &super::NewMessage)],
    ) -> super::Result<Vec<StoredId>> {
        if let [(_, m)] = ms {
            // Alone (light load): a plain lookup, which plans in a fraction of the time.
            return Ok(sqlx::query_as(
                "SELECT tenant_id, message_id, content_hash, correlation_id FROM messages \
                 WHERE tenant_id = $1 AND message_id = $2",
            )
            .bind(&m.tenant_id)
            .bind(&m.message_id)
            .fetch_all(&mut *conn)
            .await?);
        }
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

    /// Grants each (tenant, peer, count, cap) its `count` consecutive inbox slots if its inbox
    /// has room for all of them: the peer's new `last_seq`, or `None` (full, or no such peer).
    /// One round trip (migration 0005's function loops over the single-row updates).
    async fn take_slots(
        conn: &mut sqlx::PgConnection,
        asks: &[(&str, &str, i64, i64)],
    ) -> super::Result<Vec<Option<i64>>> {
        let mut lasts = vec![None; asks.len()];
        if asks.is_empty() {
            return Ok(lasts);
        }
        let granted: Vec<(i32, i64)> =
            sqlx::query_as("SELECT k, last FROM repowire_take_slots($1, $2, $3, $4)")
                .bind(asks.iter().map(|a| a.0).collect::<Vec<_>>())
                .bind(asks.iter().map(|a| a.1).collect::<Vec<_>>())
                .bind(asks.iter().map(|a| a.2).collect::<Vec<_>>())
                .bind(asks.iter().map(|a| a.3).collect::<Vec<_>>())
                .fetch_all(&mut *conn)
                .await?;
        for (k, last) in granted {
            if let Some(slot) = nth(&mut lasts, k.into()) {
                *slot = Some(last);
            }
        }
        Ok(lasts)
    }

    /// The (seq, row state) of each peer's inbox entries in (from, to], in seq order, for
    /// each (tenant, peer, from, to): one statement, a fenced primary-key range per peer.
    async fn inbox_ranges(
        conn: &mut sqlx::PgConnection,
        spans: &[(&str, &str, i64, i64)],
    ) -> super::Result<Vec<Vec<(i64, String)>>> {
        let mut ranges = vec![Vec::new(); spans.len()];
        if spans.is_empty() {
            return Ok(ranges);
        }
        let rows: Vec<(i64, i64, String)> = sqlx::query_as(
            "SELECT k.n, e.seq, e.state \
             FROM unnest($1::text[], $2::text[], $3::bigint[], $4::bigint[]) WITH ORDINALITY AS k(t, p, lo, hi, n) \
             CROSS JOIN LATERAL ( \
               SELECT seq, state FROM inbox \
               WHERE tenant_id = k.t AND peer_id = k.p AND seq > k.lo AND seq <= k.hi OFFSET 0) e \
             ORDER BY k.n, e.seq",
        )
        .bind(spans.iter().map(|s| s.0).collect::<Vec<_>>())
        .bind(spans.iter().map(|s| s.1).collect::<Vec<_>>())
        .bind(spans.iter().map(|s| s.2).collect::<Vec<_>>())
        .bind(spans.iter().map(|s| s.3).collect::<Vec<_>>())
        .fetch_all(&mut *conn)
        .await?;
        for (n, seq, state) in rows {
            if let Some(range) = nth(&mut ranges, n) {
                range.push((seq, state));
            }
        }
        Ok(ranges)
    }

    /// Moves each (tenant, peer, from, to, freed) cursor from `from` to `to` if it is still at
    /// `from`, releasing `freed` inbox slots; true for each moved. One round trip (migration
    /// 0005's function).
    async fn advance_cursors(
        conn: &mut sqlx::PgConnection,
        moves: &[(&str, &str, i64, i64, i64)],
    ) -> super::Result<Vec<bool>> {
        let mut moved = vec![false; moves.len()];
        if moves.is_empty() {
            return Ok(moved);
        }
        let done: Vec<i32> =
            sqlx::query_scalar("SELECT k FROM repowire_advance_cursors($1, $2, $3, $4, $5)")
                .bind(moves.iter().map(|m| m.0).collect::<Vec<_>>())
                .bind(moves.iter().map(|m| m.1).collect::<Vec<_>>())
                .bind(moves.iter().map(|m| m.2).collect::<Vec<_>>())
                .bind(moves.iter().map(|m| m.3).collect::<Vec<_>>())
                .bind(moves.iter().map(|m| m.4).collect::<Vec<_>>())
                .fetch_all(&mut *conn)
                .await?;
        for k in done {
            if let Some(m) = nth(&mut moved, k.into()) {
                *m = true;
            }
        }
        Ok(moved)
    }

    /// Entries still waiting past their expiry, oldest first. Only the entries past each
    /// peer's cursor can still be waiting (rows the cursor covered say `accepted` forever): for
    /// each peer with any, a range of the inbox primary key, then one message lookup per entry.
    /// Both are `OFFSET 0` fenced laterals: left to itself the planner, which cannot know how
    /// short the ranges are, hash-joined a sequential scan of `inbox` and of `messages`.
    async fn due_entries(
        conn: &mut sqlx::PgConnection,
        now_ms: i64,
        limit: i64,
    ) -> super::Result<Vec<sql::EntryRow>> {
        // No JIT for this transaction (the sweep's own): the plan's row estimate is large (the
        // planner cannot know how short the ranges are), so JIT compiled it for ~110 ms per
        // sweep, inside the writer's transaction, to run it in a fraction of a millisecond.
        // `SET LOCAL`, not a connection option: poolers such as PgBouncer refuse those.
        sqlx::query("SET LOCAL jit = off")
            .execute(&mut *conn)
            .await?;
        Ok(sqlx::query_as(
            "SELECT i.tenant_id, i.peer_id, i.message_id, i.seq, i.state AS state, \
             i.state AS row_state, c.delivered_seq AS cursor, m.from_peer_id, m.correlation_id \
             FROM peers p JOIN peer_cursors c ON c.tenant_id = p.tenant_id AND c.peer_id = p.peer_id \
             CROSS JOIN LATERAL ( \
               SELECT e.tenant_id, e.peer_id, e.message_id, e.seq, e.state, e.expires_at_ms FROM inbox e \
               WHERE e.tenant_id = p.tenant_id AND e.peer_id = p.peer_id AND e.seq > c.delivered_seq \
               AND e.state = 'accepted' AND e.expires_at_ms <= $1 OFFSET 0) i \
             CROSS JOIN LATERAL ( \
               SELECT from_peer_id, correlation_id FROM messages \
               WHERE tenant_id = i.tenant_id AND message_id = i.message_id OFFSET 0) m \
             WHERE p.last_seq > c.delivered_seq \
             ORDER BY i.expires_at_ms LIMIT $2",
        )
        .bind(now_ms)
        .bind(limit)
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
    ) -> super::Result<Vec<sql::EntryRow>> {
        if let [(_, r)] = keys {
            // Alone (light load): plain equalities, planned in a fraction of the time the
            // lateral form takes (Postgres re-plans that one for each array it is given).
            return Ok(sqlx::query_as(super::shared::ENTRY_BY_KEY)
                .bind(&r.tenant_id)
                .bind(&r.peer_id)
                .bind(&r.message_id)
                .fetch_all(&mut *conn)
                .await?);
        }
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
             JOIN peer_cursors p ON p.tenant_id = e.tenant_id AND p.peer_id = e.peer_id",
        )
        .bind(column(|r| &r.tenant_id))
        .bind(column(|r| &r.peer_id))
        .bind(column(|r| &r.message_id))
        .fetch_all(&mut *conn)
        .await?)
    }
}

impl PgStore {
    /// Receipts commit in a writer lane of their own (see [`crate::storage::writer`]).
    const PARALLEL_RECEIPTS: bool = true;

    /// The writer's own pool (see [`crate::storage::writer`]), made lazily: its connections open on the
    /// writer's runtime, the first time the writer needs one. It holds at most two (the writer
    /// uses one per lane), on top of the shared pool's `max_connections`.
    fn own_writer_store(&self) -> Option<std::sync::Arc<dyn super::Store>> {
        let pool = PgPoolOptions::new()
            .max_connections(WRITER_CONNECTIONS)
            .acquire_timeout(ACQUIRE_TIMEOUT)
            .connect_lazy_with((*self.pool.connect_options()).clone());
        Some(std::sync::Arc::new(Self { pool }))
    }
}

/// Connections of the writer's own pool.
const WRITER_CONNECTIONS: u32 = 2;
/// How long a request waits for a connection: fail fast while the database is down, so requests
/// get `unavailable` instead of waiting.
const ACQUIRE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(5);
