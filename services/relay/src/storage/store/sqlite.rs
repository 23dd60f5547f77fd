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
        private_files(path)?;
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
        // First, so that what the migrator finds, and what is logged as applied, is in the
        // shared numbering.
        renumber_ledger(&pool).await?;
        let before: Vec<i64> = sqlx::query_scalar("SELECT version FROM _sqlx_migrations")
            .fetch_all(&pool)
            .await
            .unwrap_or_default();
        MIGRATOR.run(&pool).await?;
        super::log_applied(&MIGRATOR, &before, "sqlite");
        Ok(Self { pool })
    }
}

/// SQLite migrations were numbered on their own until they took the number of the Postgres
/// migration making the same change (SQLite has no migrations 3, 5 and 6: those are
/// Postgres-only). Old version → (new version, description), newest first.
const RENUMBERED: [(i64, i64, &str); 16] = [
    (18, 21, "stored peers limit"),
    (17, 20, "state bytes limit"),
    (16, 19, "session bindings"),
    (15, 18, "approve scope"),
    (14, 17, "question deadlines"),
    (13, 16, "api key scopes"),
    (12, 15, "admin tokens"),
    (11, 14, "usage"),
    (10, 13, "admin audit"),
    (9, 12, "tenant deletion"),
    (8, 11, "idempotent key creation"),
    (7, 10, "plans"),
    (6, 9, "message trace"),
    (5, 8, "key last used"),
    (4, 7, "peer cursors"),
    (3, 4, "sweep by cursor"),
];

/// Moves a database migrated under the old numbering to the shared one, in one transaction,
/// before the migrator runs (which would otherwise find versions it does not know). Only the
/// ledger's version numbers change: each migration's text, and so its checksum, is the same.
/// A database already on the shared numbering, or new, is left alone.
async fn renumber_ledger(pool: &SqlitePool) -> super::Result<()> {
    let ledger: Option<String> = sqlx::query_scalar(
        "SELECT name FROM sqlite_master WHERE type = 'table' AND name = '_sqlx_migrations'",
    )
    .fetch_optional(pool)
    .await?;
    if ledger.is_none() {
        return Ok(()); // a new database
    }
    let old: Option<i64> = sqlx::query_scalar(
        "SELECT version FROM _sqlx_migrations WHERE version = 3 AND description = 'sweep by cursor'",
    )
    .fetch_optional(pool)
    .await?;
    if old.is_none() {
        return Ok(());
    }
    let mut tx = pool.begin().await?;
    // Newest first: each new number is free when it is taken (new > old for every pair).
    for (from, to, description) in RENUMBERED {
        sqlx::query(
            "UPDATE _sqlx_migrations SET version = $1 WHERE version = $2 AND description = $3",
        )
        .bind(to)
        .bind(from)
        .bind(description)
        .execute(&mut *tx)
        .await?;
    }
    tx.commit().await?;
    tracing::info!(
        storage = "sqlite",
        "migration ledger renumbered to the shared numbering"
    );
    Ok(())
}

/// The database holds message bodies: its file, and the journal files SQLite gives the same
/// mode, are readable by this user only (0600), including files an older version left 0644.
/// Call before SQLite opens the file (the client's state.db uses it too).
pub fn private_files(path: &Path) -> super::Result<()> {
    use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
    let created = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path);
    match created {
        Ok(_) => return Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(sqlx::Error::Io(e).into()),
    }
    for suffix in ["", "-wal", "-shm"] {
        let mut file = path.as_os_str().to_owned();
        file.push(suffix);
        let private = std::fs::Permissions::from_mode(0o600);
        match std::fs::set_permissions(Path::new(&file), private) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                return Err(sqlx::Error::Io(e).into());
            }
            _ => {}
        }
    }
    Ok(())
}

// What the shared SQL body in `sql/` takes from this backend (see `sql/mod.rs`).
type Db = sqlx::Sqlite;
type This = SqliteStore;
const BACKEND: &str = "sqlite";
/// A write batch takes the database's write lock before it reads (see `sql/mod.rs`).
const BEGIN_WRITE: &str = "BEGIN IMMEDIATE";
/// Nothing to add: the write transaction holds the whole database.
const LOCK_ASK: &str = "";
/// Nothing to add: the write transaction holds the whole database.
const LOCK_ROW: &str = "";

/// The shared SQL body, compiled for SQLite.
#[allow(clippy::duplicate_mod)] // on purpose: the same queries, once per driver
#[path = "sql/mod.rs"]
mod sql;

/// A stored message's tenant, id, content hash and correlation id.
type StoredId = (String, String, String, Option<String>);

impl SqliteStore {
    /// Nothing to do: a SQLite write transaction (`BEGIN IMMEDIATE`) holds the whole database.
    async fn lock_peers(
        _conn: &mut sqlx::SqliteConnection,
        _rows: super::shared::PeerRows,
        _peers: &std::collections::BTreeSet<(&str, &str)>,
    ) -> super::Result<()> {
        Ok(())
    }

    /// Inserts message rows (skipping ids already stored); returns the (tenant, id) inserted.
    async fn insert_messages(
        conn: &mut sqlx::SqliteConnection,
        ms: &[&super::NewMessage],
    ) -> super::Result<Vec<(String, String)>> {
        let mut qb = sqlx::QueryBuilder::<sqlx::Sqlite>::new(
            "INSERT INTO messages (tenant_id, message_id, kind, from_peer_id, from_name, from_circle, \
             body, correlation_id, reply_to, question, answer, content_hash, created_at_ms, expires_at_ms, \
             traceparent, from_session_id, to_session_id) ",
        );
        qb.push_values(ms, |mut b, m| {
            b.push_bind(m.tenant_id.as_str())
                .push_bind(m.message_id.as_str())
                .push_bind(m.kind.as_str())
                .push_bind(m.from_peer_id.as_str())
                .push_bind(m.from_name.as_str())
                .push_bind(m.from_circle.as_str())
                .push_bind(m.body.as_str())
                .push_bind(m.correlation_id.as_deref())
                .push_bind(m.reply_to.as_deref())
                .push_bind(m.question.as_deref())
                .push_bind(m.answer.as_deref())
                .push_bind(m.content_hash.as_str())
                .push_bind(m.created_at_ms)
                .push_bind(m.expires_at_ms)
                .push_bind(m.traceparent.as_deref())
                .push_bind(m.from_session_id.as_deref())
                .push_bind(m.to_session_id.as_deref());
        });
        qb.push(" ON CONFLICT DO NOTHING RETURNING tenant_id, message_id");
        Ok(qb.build_query_as().fetch_all(&mut *conn).await?)
    }

    /// Inserts new (`accepted`) inbox entries.
    async fn insert_entries(
        conn: &mut sqlx::SqliteConnection,
        entries: &[(&super::NewMessage, &super::Enqueued)],
    ) -> super::Result<()> {
        let mut qb = sqlx::QueryBuilder::<sqlx::Sqlite>::new(
            "INSERT INTO inbox (tenant_id, peer_id, seq, message_id, state, reason, updated_at_ms, expires_at_ms) ",
        );
        qb.push_values(entries, |mut b, (m, e)| {
            b.push_bind(m.tenant_id.as_str())
                .push_bind(e.peer_id.as_str())
                .push_bind(e.seq)
                .push_bind(m.message_id.as_str())
                .push_bind("accepted")
                .push_bind(None::<&str>)
                .push_bind(m.created_at_ms)
                .push_bind(m.expires_at_ms);
        });
        qb.build().execute(&mut *conn).await?;
        Ok(())
    }

    /// Which of these messages are stored already (retries, reused ids).
    async fn stored_messages(
        conn: &mut sqlx::SqliteConnection,
        ms: &[(usize, &super::NewMessage)],
    ) -> super::Result<Vec<StoredId>> {
        let mut qb = sqlx::QueryBuilder::<sqlx::Sqlite>::new(
            "SELECT tenant_id, message_id, content_hash, correlation_id FROM messages \
             WHERE (tenant_id, message_id) IN (",
        );
        qb.push_values(ms, |mut b, (_, m)| {
            b.push_bind(m.tenant_id.as_str())
                .push_bind(m.message_id.as_str());
        });
        qb.push(")");
        Ok(qb.build_query_as().fetch_all(&mut *conn).await?)
    }

    /// Grants each (tenant, peer, count, cap) its `count` consecutive inbox slots if its inbox
    /// has room for all of them: the peer's new `last_seq`, or `None`. In process, so one
    /// statement per peer costs no round trip.
    async fn take_slots(
        conn: &mut sqlx::SqliteConnection,
        asks: &[(&str, &str, i64, i64)],
    ) -> super::Result<Vec<Option<i64>>> {
        let mut lasts = Vec::with_capacity(asks.len());
        for &(tenant_id, peer_id, k, cap) in asks {
            lasts.push(Self::allocate_slots(conn, tenant_id, peer_id, k, cap).await?);
        }
        Ok(lasts)
    }

    /// The (seq, row state) of each peer's inbox entries in (from, to], in seq order.
    async fn inbox_ranges(
        conn: &mut sqlx::SqliteConnection,
        spans: &[(&str, &str, i64, i64)],
    ) -> super::Result<Vec<Vec<(i64, String)>>> {
        let mut ranges = Vec::with_capacity(spans.len());
        for &(tenant_id, peer_id, from, to) in spans {
            ranges.push(
                sqlx::query_as(
                    "SELECT seq, state FROM inbox WHERE tenant_id = $1 AND peer_id = $2 \
                     AND seq > $3 AND seq <= $4 ORDER BY seq",
                )
                .bind(tenant_id)
                .bind(peer_id)
                .bind(from)
                .bind(to)
                .fetch_all(&mut *conn)
                .await?,
            );
        }
        Ok(ranges)
    }

    /// Moves each (tenant, peer, from, to, freed) cursor from `from` to `to` if it is still at
    /// `from`, releasing `freed` inbox slots; true for each moved.
    async fn advance_cursors(
        conn: &mut sqlx::SqliteConnection,
        moves: &[(&str, &str, i64, i64, i64)],
    ) -> super::Result<Vec<bool>> {
        let mut moved = Vec::with_capacity(moves.len());
        for &(tenant_id, peer_id, from, to, freed) in moves {
            let done = sqlx::query(
                "UPDATE peer_cursors SET delivered_seq = $1, released = released + $2 \
                 WHERE tenant_id = $3 AND peer_id = $4 AND delivered_seq = $5",
            )
            .bind(to)
            .bind(freed)
            .bind(tenant_id)
            .bind(peer_id)
            .bind(from)
            .execute(&mut *conn)
            .await?;
            moved.push(done.rows_affected() == 1);
        }
        Ok(moved)
    }

    /// Entries still waiting past their expiry, oldest first: for each peer with entries past
    /// its cursor, a range of the inbox primary key (SQLite's nested loops use it as written).
    async fn due_entries(
        conn: &mut sqlx::SqliteConnection,
        now_ms: i64,
        limit: i64,
    ) -> super::Result<Vec<sql::EntryRow>> {
        Ok(sqlx::query_as(
            "SELECT i.tenant_id, i.peer_id, i.message_id, i.seq, i.state AS state, \
             i.state AS row_state, c.delivered_seq AS cursor, m.from_peer_id, m.correlation_id \
             FROM peers p \
             JOIN peer_cursors c ON c.tenant_id = p.tenant_id AND c.peer_id = p.peer_id \
             JOIN inbox i ON i.tenant_id = p.tenant_id AND i.peer_id = p.peer_id AND i.seq > c.delivered_seq \
             JOIN messages m ON m.tenant_id = i.tenant_id AND m.message_id = i.message_id \
             WHERE p.last_seq > c.delivered_seq AND i.state = 'accepted' AND i.expires_at_ms <= $1 \
             ORDER BY i.expires_at_ms LIMIT $2",
        )
        .bind(now_ms)
        .bind(limit)
        .fetch_all(&mut *conn)
        .await?)
    }

    /// The inbox entries receipts name, with their effective state and their peer's cursor.
    async fn receipt_entries(
        conn: &mut sqlx::SqliteConnection,
        keys: &[(usize, &super::ReceiptOp)],
    ) -> super::Result<Vec<sql::EntryRow>> {
        let mut qb = sqlx::QueryBuilder::<sqlx::Sqlite>::new(
            "SELECT i.tenant_id, i.peer_id, i.message_id, i.seq, CASE WHEN i.state = 'accepted' AND i.seq <= p.delivered_seq THEN 'delivered' ELSE i.state END AS state, \
             i.state AS row_state, p.delivered_seq AS cursor, m.from_peer_id, m.correlation_id \
             FROM inbox i JOIN messages m ON m.tenant_id = i.tenant_id AND m.message_id = i.message_id \
             JOIN peer_cursors p ON p.tenant_id = i.tenant_id AND p.peer_id = i.peer_id \
             WHERE (i.tenant_id, i.peer_id, i.message_id) IN (",
        );
        qb.push_values(keys, |mut b, (_, r)| {
            b.push_bind(r.tenant_id.as_str())
                .push_bind(r.peer_id.as_str())
                .push_bind(r.message_id.as_str());
        });
        qb.push(")");
        Ok(qb.build_query_as().fetch_all(&mut *conn).await?)
    }
}

impl SqliteStore {
    /// One writer lane: SQLite runs one write transaction at a time anyway.
    const PARALLEL_RECEIPTS: bool = false;

    /// The writer shares this store: SQLite connections run on threads of their own and answer
    /// through channels, whichever runtime waits; a second pool of a `:memory:` database
    /// would be another database.
    fn own_writer_store(&self) -> Option<std::sync::Arc<dyn super::Store>> {
        None
    }
}
