//! The local inbox: what the relay delivered to this daemon's peers, until handed over.

use super::{InboxRow, Result, Store, now_ms};

impl Store {
    // ---- inbox -------------------------------------------------------------------------

    /// Stores a delivered message; false if it was already here (a duplicate).
    pub async fn insert_inbox(
        &self,
        peer_id: &str,
        seq: u64,
        message: &repowire_protocol::Message,
    ) -> Result<bool> {
        let body = serde_json::to_string(message).unwrap_or_default();
        // A conversation's notice (paused, ended) waits for the agent's next turn.
        let quiet = message.conversation.as_ref().is_some_and(|c| {
            matches!(
                c.event,
                repowire_protocol::ConversationEvent::Paused
                    | repowire_protocol::ConversationEvent::Ended
            )
        });
        let done = sqlx::query(
            "INSERT INTO inbox (message_id, peer_id, seq, kind, correlation_id, body, state, received_at_ms, realm, quiet)
             VALUES (?, ?, ?, ?, ?, ?, 'queued', ?, ?, ?) ON CONFLICT(peer_id, message_id) DO NOTHING",
        )
        .bind(message.message_id.to_string())
        .bind(peer_id)
        .bind(seq as i64)
        .bind(message.kind.as_str())
        .bind(message.correlation_id.as_ref().map(|c| c.as_str().to_owned()))
        .bind(body)
        .bind(now_ms())
        .bind(self.realm())
        .bind(quiet)
        .execute(&self.pool)
        .await?;
        Ok(done.rows_affected() == 1)
    }

    /// Whether a peer has queued messages worth a turn of its agent: any but quiet ones (a
    /// conversation's notices), which only go along with others or at the next prompt.
    pub async fn has_waking(&self, peer_id: &str) -> Result<bool> {
        let found: Option<(String,)> = sqlx::query_as(
            "SELECT message_id FROM inbox WHERE peer_id = ? AND state = 'queued' AND quiet = 0 LIMIT 1",
        )
        .bind(peer_id)
        .fetch_optional(&self.pool)
        .await?;
        Ok(found.is_some())
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

    /// Records why a wake did not type this peer's queued messages (those queued now only:
    /// one handed over meanwhile keeps none).
    pub async fn set_wake_reason(&self, peer_id: &str, reason: &str) -> Result<()> {
        sqlx::query("UPDATE inbox SET wake_reason = ? WHERE peer_id = ? AND state = 'queued'")
            .bind(reason)
            .bind(peer_id)
            .execute(&self.pool)
            .await?;
        Ok(())
    }

    /// (message id, why the wake did not type it) of this peer's queued messages that have one.
    pub async fn wake_reasons(&self, peer_id: &str) -> Result<Vec<(String, String)>> {
        sqlx::query_as(
            "SELECT message_id, wake_reason FROM inbox
             WHERE peer_id = ? AND state = 'queued' AND wake_reason IS NOT NULL",
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
        reason: Option<&str>,
    ) -> Result<()> {
        // `fail_reason` also keeps the `reason` of an `injected` receipt still to be sent (how
        // the message reached the agent when it was not woken).
        sqlx::query(
            "UPDATE inbox SET receipt_pending = ?, fail_reason = COALESCE(?, fail_reason) \
             WHERE peer_id = ? AND message_id = ?",
        )
        .bind(pending)
        .bind(reason)
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
}

/// A message as `repowire inbox` lists it.
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct InboxEntry {
    pub message_id: String,
    pub seq: i64,
    pub kind: String,
    pub correlation_id: Option<String>,
    pub body: String,
    /// `queued` (unread), `handed` (read), `failed`, `consumed`.
    pub state: String,
    /// An ask already acked or answered.
    pub closed: bool,
    pub received_at_ms: i64,
}

impl Store {
    /// What `peer_id` received on the current relay: unread messages oldest first, then (with
    /// `read`) the read ones newest first, at most `limit` of those. Only messages after
    /// `after_seq`, when given.
    pub async fn inbox_of(
        &self,
        peer_id: &str,
        read: bool,
        after_seq: Option<i64>,
        limit: i64,
    ) -> Result<Vec<InboxEntry>> {
        let columns = "message_id, seq, kind, correlation_id, body, state, closed, received_at_ms";
        let after = after_seq.unwrap_or(-1);
        let mut rows: Vec<InboxEntry> = sqlx::query_as(&format!(
            "SELECT {columns} FROM inbox WHERE peer_id = ? AND realm = ? AND seq > ?
             AND state = 'queued' ORDER BY seq"
        ))
        .bind(peer_id)
        .bind(self.realm())
        .bind(after)
        .fetch_all(&self.pool)
        .await?;
        if read {
            let older: Vec<InboxEntry> = sqlx::query_as(&format!(
                "SELECT {columns} FROM inbox WHERE peer_id = ? AND realm = ? AND seq > ?
                 AND state <> 'queued' ORDER BY seq DESC LIMIT ?"
            ))
            .bind(peer_id)
            .bind(self.realm())
            .bind(after)
            .bind(limit)
            .fetch_all(&self.pool)
            .await?;
            rows.extend(older);
        }
        Ok(rows)
    }

    /// The ask id of a message `peer_id` received, named by its message id or its ask id.
    pub async fn received_ask(&self, peer_id: &str, id: &str) -> Result<Option<String>> {
        let row: Option<(Option<String>,)> = sqlx::query_as(
            "SELECT correlation_id FROM inbox WHERE peer_id = ? AND kind = 'ask'
             AND (message_id = ? OR correlation_id = ?) LIMIT 1",
        )
        .bind(peer_id)
        .bind(id)
        .bind(id)
        .fetch_optional(&self.pool)
        .await?;
        Ok(row.and_then(|(cid,)| cid))
    }
}
