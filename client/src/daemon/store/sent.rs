//! What this daemon sent, with every delivery state the relay reported.

use super::{Result, SentEvent, SentRow, Store, now_ms};

impl Store {
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

    /// Marks a sent ask as one a caller blocks on: `waiting`, `decided` or `abandoned`.
    pub async fn set_blocking(&self, message_id: &str, state: &str) -> Result<()> {
        sqlx::query("UPDATE sent SET blocking = ? WHERE message_id = ?")
            .bind(state)
            .bind(message_id)
            .execute(&self.pool)
            .await?;
        Ok(())
    }

    /// The blocking state of the ask with this correlation id, if a caller blocked on it.
    pub async fn blocking_of(&self, cid: &str) -> Result<Option<String>> {
        sqlx::query_scalar(
            "SELECT blocking FROM sent WHERE correlation_id = ? AND kind = 'ask' AND blocking IS NOT NULL",
        )
        .bind(cid)
        .fetch_optional(&self.pool)
        .await
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
