//! Tool calls denied on this machine without an approver's decision (see migration 0006).

use super::{Result, Store, now_ms};

/// How many local decisions are kept per realm: the newest.
pub(super) const KEPT: i64 = 1000;

/// One tool call the gate denied here.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct LocalDecision {
    pub decided_at_ms: i64,
    pub session_id: String,
    pub peer_id: Option<String>,
    pub name: Option<String>,
    pub circle: Option<String>,
    /// The question's id when it was asked (its answer did not reach this machine in time).
    pub correlation_id: Option<String>,
    /// What approvers would have seen of the call.
    pub text: String,
    /// Why it was denied, as the model was told.
    pub reason: String,
}

impl Store {
    /// Records a local denial in the current realm, forgetting that realm's oldest beyond
    /// [`KEPT`].
    pub async fn record_local_decision(&self, d: &LocalDecision) -> Result<()> {
        let mut tx = self.pool.begin().await?;
        sqlx::query(
            "INSERT INTO local_decisions (realm, decided_at_ms, session_id, peer_id, name, circle,
             correlation_id, text, reason) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
        )
        .bind(self.realm())
        .bind(d.decided_at_ms)
        .bind(&d.session_id)
        .bind(&d.peer_id)
        .bind(&d.name)
        .bind(&d.circle)
        .bind(&d.correlation_id)
        .bind(&d.text)
        .bind(&d.reason)
        .execute(&mut *tx)
        .await?;
        sqlx::query(
            "DELETE FROM local_decisions WHERE realm = ?1 AND id NOT IN
             (SELECT id FROM local_decisions WHERE realm = ?1 ORDER BY id DESC LIMIT ?2)",
        )
        .bind(self.realm())
        .bind(KEPT)
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(())
    }

    /// The current realm's local denials, newest first: all of them, or one session's.
    pub async fn local_decisions(
        &self,
        session_id: Option<&str>,
        limit: u32,
    ) -> Result<Vec<LocalDecision>> {
        sqlx::query_as(
            "SELECT decided_at_ms, session_id, peer_id, name, circle, correlation_id, text, reason
             FROM local_decisions WHERE realm = ? AND (? IS NULL OR session_id = ?)
             ORDER BY decided_at_ms DESC, id DESC LIMIT ?",
        )
        .bind(self.realm())
        .bind(session_id)
        .bind(session_id)
        .bind(i64::from(limit))
        .fetch_all(&self.pool)
        .await
    }
}

impl LocalDecision {
    /// A denial of `session`'s call now.
    pub fn now(session_id: &str, text: String, reason: String) -> Self {
        Self {
            decided_at_ms: now_ms(),
            session_id: session_id.to_owned(),
            peer_id: None,
            name: None,
            circle: None,
            correlation_id: None,
            text,
            reason,
        }
    }
}
