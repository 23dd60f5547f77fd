//! The daemon's durable state in `~/.repowire/state.db` (SQLite): sessions and their peer
//! identities, the local inbox (for de-duplication and hand-over to the agent), the outbox
//! (message-creating frames not yet answered by the relay) and what this daemon sent, with
//! every delivery state the relay reported.

use std::path::Path;
use std::str::FromStr;
use std::time::Duration;

use std::sync::{Arc, RwLock};

use serde::Serialize;
use sqlx::SqlitePool;
use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions, SqliteSynchronous};

pub type Result<T> = std::result::Result<T, sqlx::Error>;

/// The schema, versioned: `client/migrations` (0001 is the schema from before migrations, so
/// a state.db made then upgrades in place).
static MIGRATOR: sqlx::migrate::Migrator = sqlx::migrate!("./migrations");

/// A session the daemon hosts (an agent runtime session, or the daemon's own CLI peer).
#[derive(Debug, Clone, Serialize, sqlx::FromRow)]
pub struct SessionRow {
    pub session_id: String,
    pub backend: String,
    pub role: String,
    pub circle: String,
    pub path: Option<String>,
    pub pane: Option<String>,
    pub tmux_socket: Option<String>,
    pub agent_pid: Option<i64>,
    pub agent_start: Option<i64>,
    pub transcript: Option<String>,
    pub peer_id: Option<String>,
    pub name: Option<String>,
    pub turn_state: String,
    pub active: bool,
    pub handoff: bool,
    pub started_at_ms: i64,
    pub ended_at_ms: Option<i64>,
    /// The Repowire session (`rs-…`) the relay bound this runtime session to.
    pub repowire_session_id: Option<String>,
}

impl From<SessionRow> for crate::api::LocalSession {
    fn from(r: SessionRow) -> Self {
        Self {
            session_id: r.session_id,
            backend: r.backend,
            role: r.role,
            circle: r.circle,
            path: r.path,
            pane: r.pane,
            tmux_socket: r.tmux_socket,
            agent_pid: r.agent_pid,
            agent_start: r.agent_start,
            transcript: r.transcript,
            peer_id: r.peer_id,
            name: r.name,
            turn_state: r.turn_state,
            active: r.active,
            handoff: r.handoff,
            started_at_ms: r.started_at_ms,
            ended_at_ms: r.ended_at_ms,
            repowire_session_id: r.repowire_session_id,
        }
    }
}

impl SessionRow {
    /// The agent runtime the session runs on (Claude Code for a backend we do not know).
    pub fn runtime(&self) -> crate::runtimes::Runtime {
        crate::runtimes::Runtime::from_backend(&self.backend).unwrap_or_default()
    }

    /// A new, active session with nothing known yet but who it is.
    pub fn new(session_id: String, backend: &str, role: &str, circle: &str) -> Self {
        Self {
            session_id,
            backend: backend.to_owned(),
            role: role.to_owned(),
            circle: circle.to_owned(),
            path: None,
            pane: None,
            tmux_socket: None,
            agent_pid: None,
            agent_start: None,
            transcript: None,
            peer_id: None,
            name: None,
            turn_state: "unknown".into(),
            active: true,
            handoff: false,
            started_at_ms: now_ms(),
            ended_at_ms: None,
            repowire_session_id: None,
        }
    }
}

/// A message in the local inbox.
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct InboxRow {
    pub message_id: String,
    pub peer_id: String,
    pub seq: i64,
    pub correlation_id: Option<String>,
    pub body: String,
    pub state: String,
}

/// A message this daemon sent, and the delivery states the relay reported for it: stored
/// rows that `message_status` answers with as they are.
pub use crate::api::{SentEvent, SentRow};

/// The state database.
#[derive(Debug, Clone)]
pub struct Store {
    pool: SqlitePool,
    /// The relay identity this daemon works in now (see [`Store::enter_realm`]): what new rows
    /// are stamped with and what relay-bound reads are limited to.
    realm: Arc<RwLock<String>>,
}

/// The relay identity rows are tied to: `<relay url>#<tenant id>`, or
/// `<relay url>#key:<fingerprint>` while the key's tenant is not known yet.
pub fn realm_of(relay_url: &str, tenant_id: Option<&str>, key_fingerprint: &str) -> String {
    match tenant_id {
        Some(t) => format!("{relay_url}#{t}"),
        None => format!("{relay_url}#key:{key_fingerprint}"),
    }
}

/// Queued messages of one relay identity (`repowire outbox`).
#[derive(Debug, Clone, Serialize, sqlx::FromRow)]
pub struct RealmOutbox {
    /// The relay identity.
    pub realm: String,
    /// Frames waiting.
    pub messages: i64,
    /// Oldest of them (ms).
    pub oldest_ms: i64,
}

/// Milliseconds since the Unix epoch.
pub fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

impl Store {
    /// Opens (creating if needed) the state database.
    pub async fn open(path: &Path) -> Result<Self> {
        // Message bodies live here: readable by this user only, like the relay's database.
        if let Err(error) = repowire_relay::storage::store::sqlite::private_files(path) {
            return Err(sqlx::Error::Io(std::io::Error::other(error.to_string())));
        }
        let options = SqliteConnectOptions::from_str("sqlite://")?
            .filename(path)
            .create_if_missing(true)
            .journal_mode(SqliteJournalMode::Wal)
            .synchronous(SqliteSynchronous::Full)
            .busy_timeout(Duration::from_secs(10));
        let pool = SqlitePoolOptions::new()
            .max_connections(1)
            .connect_with(options)
            .await?;
        MIGRATOR.run(&pool).await?;
        Ok(Self {
            pool,
            realm: Arc::new(RwLock::new(String::new())),
        })
    }

    // ---- relay identity ----------------------------------------------------------------

    /// The realm rows are stamped with now.
    #[allow(clippy::unwrap_used)] // poisoned only by a panic while holding it, which is a bug
    pub fn realm(&self) -> String {
        self.realm.read().unwrap().clone()
    }

    /// The realm of this relay and key: by tenant if the relay told us the key's tenant before.
    pub async fn known_realm(&self, relay_url: &str, key_fingerprint: &str) -> Result<String> {
        let tenant: Option<(Option<String>,)> = sqlx::query_as(
            "SELECT tenant_id FROM relays WHERE relay_url = ? AND key_fingerprint = ?",
        )
        .bind(relay_url)
        .bind(key_fingerprint)
        .fetch_optional(&self.pool)
        .await?;
        Ok(realm_of(
            relay_url,
            tenant.and_then(|(t,)| t).as_deref(),
            key_fingerprint,
        ))
    }

    /// Works in `realm` from now on. Sessions take the peer identity and Repowire session they
    /// had in it (none if they never registered there); those they had elsewhere are kept for a
    /// switch back.
    /// Rows from before realms existed ('') join this one.
    #[allow(clippy::unwrap_used)] // see `realm`
    pub async fn enter_realm(&self, realm: &str) -> Result<()> {
        let mut tx = self.pool.begin().await?;
        for table in ["sessions", "inbox", "outbox", "sent"] {
            sqlx::query(&format!("UPDATE {table} SET realm = ? WHERE realm = ''"))
                .bind(realm)
                .execute(&mut *tx)
                .await?;
        }
        sqlx::query(
            "INSERT OR REPLACE INTO session_identities (session_id, realm, peer_id, name, repowire_session_id)
             SELECT session_id, realm, peer_id, name, repowire_session_id FROM sessions
             WHERE realm <> ? AND peer_id IS NOT NULL",
        )
        .bind(realm)
        .execute(&mut *tx)
        .await?;
        sqlx::query(
            "UPDATE sessions SET
               peer_id = (SELECT i.peer_id FROM session_identities i WHERE i.session_id = sessions.session_id AND i.realm = ?1),
               name = (SELECT i.name FROM session_identities i WHERE i.session_id = sessions.session_id AND i.realm = ?1),
               repowire_session_id = (SELECT i.repowire_session_id FROM session_identities i
                                      WHERE i.session_id = sessions.session_id AND i.realm = ?1),
               realm = ?1
             WHERE realm <> ?1",
        )
        .bind(realm)
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        *self.realm.write().unwrap() = realm.to_owned();
        Ok(())
    }

    /// The relay told us which tenant the key belongs to. A provisional realm (by key) becomes
    /// the tenant's: its rows move with it, since they were made with this very key. Returns the
    /// realm to work in.
    pub async fn learn_tenant(
        &self,
        relay_url: &str,
        key_fingerprint: &str,
        tenant_id: &str,
    ) -> Result<String> {
        let now = now_ms();
        sqlx::query(
            "INSERT INTO relays (relay_url, key_fingerprint, tenant_id, first_seen_ms, last_seen_ms)
             VALUES (?, ?, ?, ?, ?)
             ON CONFLICT (relay_url, key_fingerprint) DO UPDATE SET tenant_id = excluded.tenant_id,
               last_seen_ms = excluded.last_seen_ms",
        )
        .bind(relay_url)
        .bind(key_fingerprint)
        .bind(tenant_id)
        .bind(now)
        .bind(now)
        .execute(&self.pool)
        .await?;
        let provisional = realm_of(relay_url, None, key_fingerprint);
        let known = realm_of(relay_url, Some(tenant_id), key_fingerprint);
        self.adopt_rows(&provisional, &known).await?;
        if self.realm() != known {
            self.enter_realm(&known).await?;
            // A write that read the provisional realm just before the switch and landed after
            // the move above: moved now, or at the latest on the next connection (this runs
            // on each).
            self.adopt_rows(&provisional, &known).await?;
        }
        Ok(known)
    }

    /// Moves every row of realm `from` to realm `to` (rows `to` already has stay as they are).
    async fn adopt_rows(&self, from: &str, to: &str) -> Result<()> {
        let mut tx = self.pool.begin().await?;
        for table in [
            "sessions",
            "inbox",
            "outbox",
            "sent",
            "session_identities",
            "local_decisions",
        ] {
            sqlx::query(&format!(
                "UPDATE OR IGNORE {table} SET realm = ? WHERE realm = ?"
            ))
            .bind(to)
            .bind(from)
            .execute(&mut *tx)
            .await?;
        }
        tx.commit().await?;
        Ok(())
    }

    /// Queued frames per relay identity, the current one first.
    pub async fn outbox_by_realm(&self) -> Result<Vec<RealmOutbox>> {
        sqlx::query_as(
            "SELECT realm, COUNT(*) AS messages, MIN(created_at_ms) AS oldest_ms FROM outbox
             GROUP BY realm ORDER BY realm <> ?, realm",
        )
        .bind(self.realm())
        .fetch_all(&self.pool)
        .await
    }

    /// Drops the queued frames of another relay identity (never the current one's: those are
    /// being sent); returns their ids. Their sent records say why.
    pub async fn drop_outbox_of_realm(&self, realm: &str) -> Result<Vec<String>> {
        if realm == self.realm() {
            return Ok(Vec::new());
        }
        let mut tx = self.pool.begin().await?;
        let rows: Vec<(String,)> =
            sqlx::query_as("DELETE FROM outbox WHERE realm = ? RETURNING frame_id")
                .bind(realm)
                .fetch_all(&mut *tx)
                .await?;
        for (id,) in &rows {
            sqlx::query("UPDATE sent SET state = 'dropped', error = ? WHERE message_id = ?")
                .bind(format!("dropped by the user while queued for {realm}"))
                .bind(id)
                .execute(&mut *tx)
                .await?;
        }
        tx.commit().await?;
        Ok(rows.into_iter().map(|(id,)| id).collect())
    }
    // ---- sessions ----------------------------------------------------------------------

    /// Inserts or replaces a session's runtime facts, keeping its peer identity.
    pub async fn upsert_session(&self, s: &SessionRow) -> Result<()> {
        sqlx::query(
            "INSERT INTO sessions (session_id, backend, role, circle, path, pane, tmux_socket, agent_pid, agent_start, transcript, peer_id, name, turn_state, active, handoff, started_at_ms, realm, repowire_session_id)
             VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 1, ?, ?, ?, ?)
             ON CONFLICT(session_id) DO UPDATE SET backend = excluded.backend, path = excluded.path,
               pane = excluded.pane, tmux_socket = excluded.tmux_socket, agent_pid = excluded.agent_pid,
               agent_start = excluded.agent_start, transcript = excluded.transcript,
               turn_state = excluded.turn_state, handoff = excluded.handoff, active = 1, ended_at_ms = NULL,
               repowire_session_id = COALESCE(excluded.repowire_session_id, sessions.repowire_session_id)",
        )
        .bind(&s.session_id)
        .bind(&s.backend)
        .bind(&s.role)
        .bind(&s.circle)
        .bind(&s.path)
        .bind(&s.pane)
        .bind(&s.tmux_socket)
        .bind(s.agent_pid)
        .bind(s.agent_start)
        .bind(&s.transcript)
        .bind(&s.peer_id)
        .bind(&s.name)
        .bind(&s.turn_state)
        .bind(s.handoff)
        .bind(s.started_at_ms)
        .bind(self.realm())
        .bind(&s.repowire_session_id)
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    /// The most recent ended session bound to a Repowire session.
    pub async fn ended_session_of(&self, repowire_session_id: &str) -> Result<Option<SessionRow>> {
        sqlx::query_as(
            "SELECT * FROM sessions WHERE repowire_session_id = ? AND active = 0
             ORDER BY started_at_ms DESC LIMIT 1",
        )
        .bind(repowire_session_id)
        .fetch_optional(&self.pool)
        .await
    }

    /// Records the Repowire session the relay bound a runtime session to.
    pub async fn set_repowire_session(
        &self,
        session_id: &str,
        repowire_session_id: &str,
    ) -> Result<()> {
        sqlx::query("UPDATE sessions SET repowire_session_id = ? WHERE session_id = ?")
            .bind(repowire_session_id)
            .bind(session_id)
            .execute(&self.pool)
            .await?;
        Ok(())
    }

    /// One session.
    pub async fn session(&self, session_id: &str) -> Result<Option<SessionRow>> {
        sqlx::query_as("SELECT * FROM sessions WHERE session_id = ?")
            .bind(session_id)
            .fetch_optional(&self.pool)
            .await
    }

    /// Sessions not ended.
    pub async fn active_sessions(&self) -> Result<Vec<SessionRow>> {
        sqlx::query_as("SELECT * FROM sessions WHERE active = 1 ORDER BY started_at_ms")
            .fetch_all(&self.pool)
            .await
    }

    /// Records the relay's answer to a registration.
    pub async fn set_identity(
        &self,
        session_id: &str,
        peer_id: &str,
        name: &str,
        circle: &str,
    ) -> Result<()> {
        sqlx::query(
            "UPDATE sessions SET peer_id = ?, name = ?, circle = ?, realm = ? WHERE session_id = ?",
        )
        .bind(peer_id)
        .bind(name)
        .bind(circle)
        .bind(self.realm())
        .bind(session_id)
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    /// Records a turn state.
    pub async fn set_turn(&self, session_id: &str, turn: &str) -> Result<()> {
        sqlx::query("UPDATE sessions SET turn_state = ? WHERE session_id = ?")
            .bind(turn)
            .bind(session_id)
            .execute(&self.pool)
            .await?;
        Ok(())
    }

    /// Forgets a session (a link that could not be completed).
    pub async fn delete_session(&self, session_id: &str) -> Result<()> {
        sqlx::query("DELETE FROM sessions WHERE session_id = ?")
            .bind(session_id)
            .execute(&self.pool)
            .await?;
        Ok(())
    }

    /// A session of this agent process waiting to be taken over by the runtime's next session
    /// id (a linked pane whose hooks now fire, or the session before a `/clear`).
    pub async fn handoff_of_agent(
        &self,
        agent_pid: i64,
        except: &str,
    ) -> Result<Option<SessionRow>> {
        sqlx::query_as(
            "SELECT * FROM sessions WHERE active = 1 AND handoff = 1 AND agent_pid = ? AND session_id <> ?",
        )
        .bind(agent_pid)
        .bind(except)
        .fetch_optional(&self.pool)
        .await
    }

    /// Marks a session as waiting for its agent's next session id to take it over.
    pub async fn set_handoff(&self, session_id: &str) -> Result<()> {
        sqlx::query("UPDATE sessions SET handoff = 1, turn_state = 'idle' WHERE session_id = ?")
            .bind(session_id)
            .execute(&self.pool)
            .await?;
        Ok(())
    }

    /// Ended sessions with receipts still to send.
    pub async fn ended_with_pending_receipts(&self) -> Result<Vec<SessionRow>> {
        sqlx::query_as(
            "SELECT * FROM sessions s WHERE active = 0 AND peer_id IS NOT NULL AND realm = ?
             AND EXISTS (SELECT 1 FROM inbox i WHERE i.peer_id = s.peer_id AND i.realm = s.realm
                         AND i.receipt_pending = 1)",
        )
        .bind(self.realm())
        .fetch_all(&self.pool)
        .await
    }

    /// Marks a session ended.
    pub async fn end_session(&self, session_id: &str) -> Result<()> {
        sqlx::query("UPDATE sessions SET active = 0, ended_at_ms = ?, turn_state = 'unknown' WHERE session_id = ?")
            .bind(now_ms())
            .bind(session_id)
            .execute(&self.pool)
            .await?;
        Ok(())
    }
}

mod conversations;
pub use conversations::{ConversationRow, Segment};
mod decisions;
pub use decisions::LocalDecision;
mod inbox;
pub use inbox::InboxEntry;
mod outbox;
mod sent;

#[cfg(test)]
mod tests;
