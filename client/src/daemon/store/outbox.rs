//! The outbox: message-creating frames stored before they go out, until the relay answers.

use super::{Result, SentRow, Store, now_ms};

impl Store {
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
}
