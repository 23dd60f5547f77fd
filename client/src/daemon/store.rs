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
}

impl SessionRow {
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

/// A message this daemon sent.
#[derive(Debug, Clone, Serialize, sqlx::FromRow)]
pub struct SentRow {
    pub message_id: String,
    pub peer_id: String,
    pub kind: String,
    pub to_name: Option<String>,
    pub text: String,
    pub correlation_id: Option<String>,
    pub state: String,
    pub error: Option<String>,
    pub reply: Option<String>,
    pub created_at_ms: i64,
}

/// One delivery state the relay reported.
#[derive(Debug, Clone, Serialize, sqlx::FromRow)]
pub struct SentEvent {
    pub recipient: Option<String>,
    pub state: String,
    pub reason: Option<String>,
    pub at_ms: i64,
}

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
        if let Err(error) = repowire_relay::store::sqlite::private_files(path) {
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

    /// Works in `realm` from now on. Sessions take the peer identity they had in it (none if
    /// they never registered there); the identity they had elsewhere is kept for a switch back.
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
            "INSERT OR REPLACE INTO session_identities (session_id, realm, peer_id, name)
             SELECT session_id, realm, peer_id, name FROM sessions WHERE realm <> ? AND peer_id IS NOT NULL",
        )
        .bind(realm)
        .execute(&mut *tx)
        .await?;
        sqlx::query(
            "UPDATE sessions SET
               peer_id = (SELECT i.peer_id FROM session_identities i WHERE i.session_id = sessions.session_id AND i.realm = ?1),
               name = (SELECT i.name FROM session_identities i WHERE i.session_id = sessions.session_id AND i.realm = ?1),
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
        let mut tx = self.pool.begin().await?;
        for table in ["sessions", "inbox", "outbox", "sent", "session_identities"] {
            sqlx::query(&format!(
                "UPDATE OR IGNORE {table} SET realm = ? WHERE realm = ?"
            ))
            .bind(&known)
            .bind(&provisional)
            .execute(&mut *tx)
            .await?;
        }
        tx.commit().await?;
        if self.realm() != known {
            self.enter_realm(&known).await?;
        }
        Ok(known)
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
            "INSERT INTO sessions (session_id, backend, role, circle, path, pane, tmux_socket, agent_pid, agent_start, transcript, peer_id, name, turn_state, active, handoff, started_at_ms, realm)
             VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 1, ?, ?, ?)
             ON CONFLICT(session_id) DO UPDATE SET backend = excluded.backend, path = excluded.path,
               pane = excluded.pane, tmux_socket = excluded.tmux_socket, agent_pid = excluded.agent_pid,
               agent_start = excluded.agent_start, transcript = excluded.transcript,
               turn_state = excluded.turn_state, handoff = excluded.handoff, active = 1, ended_at_ms = NULL",
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

    // ---- inbox -------------------------------------------------------------------------

    /// Stores a delivered message; false if it was already here (a duplicate).
    pub async fn insert_inbox(
        &self,
        peer_id: &str,
        seq: u64,
        message: &repowire_protocol::Message,
    ) -> Result<bool> {
        let body = serde_json::to_string(message).unwrap_or_default();
        let done = sqlx::query(
            "INSERT INTO inbox (message_id, peer_id, seq, kind, correlation_id, body, state, received_at_ms, realm)
             VALUES (?, ?, ?, ?, ?, ?, 'queued', ?, ?) ON CONFLICT(peer_id, message_id) DO NOTHING",
        )
        .bind(message.message_id.to_string())
        .bind(peer_id)
        .bind(seq as i64)
        .bind(message.kind.as_str())
        .bind(message.correlation_id.as_ref().map(|c| c.as_str().to_owned()))
        .bind(body)
        .bind(now_ms())
        .bind(self.realm())
        .execute(&self.pool)
        .await?;
        Ok(done.rows_affected() == 1)
    }

    /// Messages for a peer not yet handed to its agent, oldest first.
    pub async fn queued(&self, peer_id: &str) -> Result<Vec<InboxRow>> {
        sqlx::query_as(
            "SELECT message_id, peer_id, seq, correlation_id, body, state FROM inbox
             WHERE peer_id = ? AND state = 'queued' ORDER BY seq",
        )
        .bind(peer_id)
        .fetch_all(&self.pool)
        .await
    }

    /// Asks this peer received, handed to the agent and not closed yet.
    pub async fn open_asks(&self, peer_id: &str) -> Result<Vec<InboxRow>> {
        sqlx::query_as(
            "SELECT message_id, peer_id, seq, correlation_id, body, state FROM inbox
             WHERE peer_id = ? AND kind = 'ask' AND closed = 0 AND state = 'handed' ORDER BY seq",
        )
        .bind(peer_id)
        .fetch_all(&self.pool)
        .await
    }

    /// Moves a peer's messages from `queued` to `state` (`handed`, `consumed`); returns the
    /// ids that were still queued (the others were handed by someone else meanwhile).
    pub async fn take_queued(
        &self,
        peer_id: &str,
        message_ids: &[String],
        state: &str,
    ) -> Result<Vec<String>> {
        let mut tx = self.pool.begin().await?;
        let mut moved = Vec::new();
        for id in message_ids {
            let done = sqlx::query(
                "UPDATE inbox SET state = ?, handed_at_ms = ? WHERE peer_id = ? AND message_id = ? AND state = 'queued'",
            )
            .bind(state)
            .bind(now_ms())
            .bind(peer_id)
            .bind(id)
            .execute(&mut *tx)
            .await?;
            if done.rows_affected() == 1 {
                moved.push(id.clone());
            }
        }
        tx.commit().await?;
        Ok(moved)
    }

    /// The reply to an ask `peer_id` sent, if one arrived.
    pub async fn reply_for(&self, peer_id: &str, cid: &str) -> Result<Option<InboxRow>> {
        sqlx::query_as(
            "SELECT message_id, peer_id, seq, correlation_id, body, state FROM inbox
             WHERE peer_id = ? AND kind = 'reply' AND correlation_id = ? ORDER BY seq LIMIT 1",
        )
        .bind(peer_id)
        .bind(cid)
        .fetch_optional(&self.pool)
        .await
    }

    /// Marks an ask this peer received closed (acked, answered, or chained by `reply_to`).
    pub async fn close_ask(&self, peer_id: &str, cid: &str) -> Result<()> {
        sqlx::query(
            "UPDATE inbox SET closed = 1 WHERE peer_id = ? AND kind = 'ask' AND correlation_id = ?",
        )
        .bind(peer_id)
        .bind(cid)
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    /// Remembers that the receipt for this message's current state still has to be sent.
    pub async fn set_receipt_pending(
        &self,
        peer_id: &str,
        message_id: &str,
        pending: bool,
    ) -> Result<()> {
        sqlx::query("UPDATE inbox SET receipt_pending = ? WHERE peer_id = ? AND message_id = ?")
            .bind(pending)
            .bind(peer_id)
            .bind(message_id)
            .execute(&self.pool)
            .await?;
        Ok(())
    }

    /// Messages of a peer whose receipt is still to be sent: (message id, state, reason).
    pub async fn pending_receipts(
        &self,
        peer_id: &str,
    ) -> Result<Vec<(String, String, Option<String>)>> {
        sqlx::query_as(
            "SELECT message_id, state, fail_reason FROM inbox WHERE peer_id = ? AND realm = ?
             AND receipt_pending = 1 ORDER BY seq",
        )
        .bind(peer_id)
        .bind(self.realm())
        .fetch_all(&self.pool)
        .await
    }

    /// Queued messages of a peer whose session ended: they can no longer reach the agent.
    pub async fn fail_queued(&self, peer_id: &str, reason: &str) -> Result<Vec<String>> {
        let ids: Vec<(String,)> = sqlx::query_as(
            "UPDATE inbox SET state = 'failed', handed_at_ms = ?, fail_reason = ? WHERE peer_id = ? AND state = 'queued' RETURNING message_id",
        )
        .bind(now_ms())
        .bind(reason)
        .bind(peer_id)
        .fetch_all(&self.pool)
        .await?;
        Ok(ids.into_iter().map(|(id,)| id).collect())
    }

    // ---- outbox ------------------------------------------------------------------------

    /// Keeps a message-creating frame until the relay answers it.
    pub async fn put_outbox(&self, frame_id: &str, peer_id: &str, frame: &str) -> Result<()> {
        sqlx::query(
            "INSERT OR REPLACE INTO outbox (frame_id, peer_id, frame, created_at_ms, realm) VALUES (?, ?, ?, ?, ?)",
        )
        .bind(frame_id)
        .bind(peer_id)
        .bind(frame)
        .bind(now_ms())
        .bind(self.realm())
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    /// Drops an answered frame.
    pub async fn remove_outbox(&self, frame_id: &str) -> Result<bool> {
        let done = sqlx::query("DELETE FROM outbox WHERE frame_id = ?")
            .bind(frame_id)
            .execute(&self.pool)
            .await?;
        Ok(done.rows_affected() == 1)
    }

    /// One unanswered frame's JSON.
    pub async fn outbox_frame(&self, frame_id: &str) -> Result<Option<String>> {
        let row: Option<(String,)> = sqlx::query_as("SELECT frame FROM outbox WHERE frame_id = ?")
            .bind(frame_id)
            .fetch_optional(&self.pool)
            .await?;
        Ok(row.map(|(f,)| f))
    }

    /// Replaces an unanswered frame by a re-minted one (new id, new sender) in one
    /// transaction; the old message is recorded as superseded by the new one.
    pub async fn remint(
        &self,
        old_id: &str,
        new_id: &str,
        peer_id: &str,
        frame: &str,
    ) -> Result<()> {
        let mut tx = self.pool.begin().await?;
        sqlx::query("DELETE FROM outbox WHERE frame_id = ?")
            .bind(old_id)
            .execute(&mut *tx)
            .await?;
        sqlx::query(
            "INSERT INTO outbox (frame_id, peer_id, frame, created_at_ms, realm) VALUES (?, ?, ?, ?, ?)",
        )
        .bind(new_id)
        .bind(peer_id)
        .bind(frame)
        .bind(now_ms())
        .bind(self.realm())
        .execute(&mut *tx)
        .await?;
        sqlx::query(
            "INSERT INTO sent (message_id, peer_id, kind, to_name, text, correlation_id, state, created_at_ms, realm)
             SELECT ?, ?, kind, to_name, text, correlation_id, 'queued', ?, ? FROM sent WHERE message_id = ?",
        )
        .bind(new_id)
        .bind(peer_id)
        .bind(now_ms())
        .bind(self.realm())
        .bind(old_id)
        .execute(&mut *tx)
        .await?;
        sqlx::query("UPDATE sent SET state = 'superseded', error = ? WHERE message_id = ?")
            .bind(format!("re-sent as {new_id}: the sender's peer id changed"))
            .bind(old_id)
            .execute(&mut *tx)
            .await?;
        tx.commit().await
    }

    /// Every unanswered frame of the current relay identity, oldest first: (frame id, peer id,
    /// frame JSON). Frames queued for another relay or tenant are never among them.
    pub async fn outbox(&self) -> Result<Vec<(String, String, String)>> {
        sqlx::query_as(
            "SELECT frame_id, peer_id, frame FROM outbox WHERE realm = ? ORDER BY created_at_ms, frame_id",
        )
        .bind(self.realm())
        .fetch_all(&self.pool)
        .await
    }

    /// Drops a peer's unanswered frames (its session ended); returns their ids.
    pub async fn drop_outbox_of(&self, peer_id: &str) -> Result<Vec<String>> {
        let rows: Vec<(String,)> =
            sqlx::query_as("DELETE FROM outbox WHERE peer_id = ? RETURNING frame_id")
                .bind(peer_id)
                .fetch_all(&self.pool)
                .await?;
        Ok(rows.into_iter().map(|(id,)| id).collect())
    }

    /// Sent messages whose outcome may have changed while this daemon was not listening.
    pub async fn open_sent(&self, since_ms: i64) -> Result<Vec<SentRow>> {
        sqlx::query_as(
            "SELECT * FROM sent WHERE state IN ('accepted', 'delivered', 'injected')
             AND kind IN ('ask', 'notify') AND created_at_ms >= ? AND realm = ?",
        )
        .bind(since_ms)
        .bind(self.realm())
        .fetch_all(&self.pool)
        .await
    }

    /// Number of unanswered frames of the current relay identity.
    pub async fn outbox_len(&self) -> Result<i64> {
        let (n,): (i64,) = sqlx::query_as("SELECT COUNT(*) FROM outbox WHERE realm = ?")
            .bind(self.realm())
            .fetch_one(&self.pool)
            .await?;
        Ok(n)
    }

    // ---- sent --------------------------------------------------------------------------

    /// Records a message this daemon is sending.
    pub async fn insert_sent(&self, row: &SentRow) -> Result<()> {
        sqlx::query(
            "INSERT OR IGNORE INTO sent (message_id, peer_id, kind, to_name, text, correlation_id, state, created_at_ms, realm)
             VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
        )
        .bind(&row.message_id)
        .bind(&row.peer_id)
        .bind(&row.kind)
        .bind(&row.to_name)
        .bind(&row.text)
        .bind(&row.correlation_id)
        .bind(&row.state)
        .bind(row.created_at_ms)
        .bind(self.realm())
        .execute(&self.pool)
        .await?;
        self.add_event(&row.message_id, None, &row.state, None)
            .await
    }

    /// The relay accepted a sent message.
    pub async fn sent_accepted(&self, message_id: &str, cid: Option<&str>) -> Result<()> {
        let done = sqlx::query(
            "UPDATE sent SET state = 'accepted', correlation_id = COALESCE(?, correlation_id)
             WHERE message_id = ? AND state = 'queued'",
        )
        .bind(cid)
        .bind(message_id)
        .execute(&self.pool)
        .await?;
        if done.rows_affected() == 1 {
            self.add_event(message_id, None, "accepted", None).await?;
        }
        Ok(())
    }

    /// The relay refused a sent message.
    pub async fn sent_rejected(&self, message_id: &str, error: &str) -> Result<()> {
        sqlx::query("UPDATE sent SET state = 'rejected', error = ? WHERE message_id = ?")
            .bind(error)
            .bind(message_id)
            .execute(&self.pool)
            .await?;
        self.add_event(message_id, None, "rejected", Some(error))
            .await
    }

    /// A delivery state change for one recipient.
    pub async fn sent_delivery(
        &self,
        message_id: &str,
        recipient: &str,
        state: &str,
        reason: Option<&str>,
    ) -> Result<()> {
        sqlx::query("UPDATE sent SET state = ? WHERE message_id = ?")
            .bind(state)
            .bind(message_id)
            .execute(&self.pool)
            .await?;
        self.add_event(message_id, Some(recipient), state, reason)
            .await
    }

    /// The reply to an ask this daemon sent.
    pub async fn sent_reply(&self, cid: &str, reply: &str) -> Result<()> {
        sqlx::query("UPDATE sent SET reply = ? WHERE correlation_id = ? AND kind = 'ask'")
            .bind(reply)
            .bind(cid)
            .execute(&self.pool)
            .await?;
        Ok(())
    }

    async fn add_event(
        &self,
        message_id: &str,
        recipient: Option<&str>,
        state: &str,
        reason: Option<&str>,
    ) -> Result<()> {
        sqlx::query("INSERT INTO sent_events (message_id, recipient, state, reason, at_ms) VALUES (?, ?, ?, ?, ?)")
            .bind(message_id)
            .bind(recipient)
            .bind(state)
            .bind(reason)
            .bind(now_ms())
            .execute(&self.pool)
            .await?;
        Ok(())
    }

    /// A sent message by message id or correlation id, with its state history.
    pub async fn sent(&self, id: &str) -> Result<Option<(SentRow, Vec<SentEvent>)>> {
        let row: Option<SentRow> = sqlx::query_as(
            "SELECT * FROM sent WHERE message_id = ? OR (correlation_id = ? AND kind IN ('ask', 'notify', 'broadcast'))
             ORDER BY created_at_ms LIMIT 1",
        )
        .bind(id)
        .bind(id)
        .fetch_optional(&self.pool)
        .await?;
        let Some(row) = row else { return Ok(None) };
        let events = sqlx::query_as(
            "SELECT recipient, state, reason, at_ms FROM sent_events WHERE message_id = ? ORDER BY rowid",
        )
        .bind(&row.message_id)
        .fetch_all(&self.pool)
        .await?;
        Ok(Some((row, events)))
    }
}

#[cfg(test)]
mod tests {
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
            sqlx::raw_sql(include_str!("../../migrations/0001_state.sql"))
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
}
