//! The dashboard's sign-in links and sessions: small single statements, off the message path.

use super::*;

/// Rows that expired this long ago are deleted when a link is minted.
const KEEP_EXPIRED_MS: i64 = 24 * 3600 * 1000;

const SESSION_COLS: &str = "id_hash, audience, tenant_id, key_id, member_id, subject, scopes, \
                            csrf, created_at_ms, expires_at_ms";

#[async_trait::async_trait]
impl DashboardStore for This {
    async fn create_dashboard_link(&self, link: &DashboardLink) -> Result<()> {
        let mut tx = self.pool.begin().await?;
        let before = link.created_at_ms.saturating_sub(KEEP_EXPIRED_MS);
        sqlx::query("DELETE FROM dashboard_links WHERE expires_at_ms < $1")
            .bind(before)
            .execute(&mut *tx)
            .await?;
        sqlx::query("DELETE FROM dashboard_sessions WHERE expires_at_ms < $1")
            .bind(before)
            .execute(&mut *tx)
            .await?;
        sqlx::query(
            "INSERT INTO dashboard_links (token_hash, tenant_id, key_id, created_at_ms, expires_at_ms) \
             VALUES ($1, $2, $3, $4, $5)",
        )
        .bind(&link.token_hash)
        .bind(&link.tenant_id)
        .bind(&link.key_id)
        .bind(link.created_at_ms)
        .bind(link.expires_at_ms)
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(())
    }

    async fn take_dashboard_link(
        &self,
        token_hash: &str,
        now_ms: i64,
    ) -> Result<Option<DashboardLink>> {
        Ok(sqlx::query_as(
            "UPDATE dashboard_links SET used_at_ms = $2 \
             WHERE token_hash = $1 AND used_at_ms IS NULL AND expires_at_ms > $2 \
             RETURNING token_hash, tenant_id, key_id, created_at_ms, expires_at_ms",
        )
        .bind(token_hash)
        .bind(now_ms)
        .fetch_optional(&self.pool)
        .await?)
    }

    async fn peek_dashboard_link(
        &self,
        token_hash: &str,
        now_ms: i64,
    ) -> Result<Option<DashboardLink>> {
        Ok(sqlx::query_as(
            "SELECT token_hash, tenant_id, key_id, created_at_ms, expires_at_ms FROM dashboard_links \
             WHERE token_hash = $1 AND used_at_ms IS NULL AND expires_at_ms > $2",
        )
        .bind(token_hash)
        .bind(now_ms)
        .fetch_optional(&self.pool)
        .await?)
    }

    async fn create_dashboard_session(&self, s: &DashboardSession) -> Result<()> {
        let mut tx = self.pool.begin().await?;
        sqlx::query("DELETE FROM dashboard_sessions WHERE expires_at_ms < $1")
            .bind(s.created_at_ms.saturating_sub(KEEP_EXPIRED_MS))
            .execute(&mut *tx)
            .await?;
        sqlx::query(&format!(
            "INSERT INTO dashboard_sessions ({SESSION_COLS}) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)"
        ))
        .bind(&s.id_hash)
        .bind(&s.audience)
        .bind(&s.tenant_id)
        .bind(&s.key_id)
        .bind(&s.member_id)
        .bind(&s.subject)
        .bind(&s.scopes)
        .bind(&s.csrf)
        .bind(s.created_at_ms)
        .bind(s.expires_at_ms)
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(())
    }

    async fn find_dashboard_session(
        &self,
        id_hash: &str,
        now_ms: i64,
    ) -> Result<Option<DashboardSession>> {
        Ok(sqlx::query_as(&format!(
            "SELECT {SESSION_COLS} FROM dashboard_sessions \
             WHERE id_hash = $1 AND ended_at_ms IS NULL AND expires_at_ms > $2"
        ))
        .bind(id_hash)
        .bind(now_ms)
        .fetch_optional(&self.pool)
        .await?)
    }

    async fn recent_asks(&self, tenant_id: &str, limit: i64) -> Result<Vec<AskOverview>> {
        // `kind = 'ask'` as a literal: the partial index of migration 0022 serves it.
        const NEWEST: &str = "SELECT message_id FROM messages WHERE tenant_id = $1 AND kind = 'ask' \
                              ORDER BY created_at_ms DESC, message_id DESC LIMIT $2";
        let asks: Vec<crate::storage::store::ListedAsk> = sqlx::query_as(&format!(
            "SELECT message_id, correlation_id, from_name, from_circle, body, created_at_ms, \
             closed_at_ms, closed_by, answer, reply_text FROM messages \
             WHERE tenant_id = $1 AND message_id IN ({NEWEST}) \
             ORDER BY created_at_ms DESC, message_id DESC"
        ))
        .bind(tenant_id)
        .bind(limit)
        .fetch_all(&self.pool)
        .await?;
        if asks.is_empty() {
            return Ok(Vec::new());
        }
        // A forgotten peer's entries stay with the message: its cursor and name are gone, so
        // both joins are outer ones (the recipient shows by id, in the state its row says).
        let mut recipients: Vec<AskRecipient> = sqlx::query_as(&format!(
            "SELECT i.message_id, i.peer_id, pe.name, \
             CASE WHEN i.state = 'accepted' AND c.delivered_seq IS NOT NULL AND i.seq <= c.delivered_seq \
             THEN 'delivered' ELSE i.state END AS state, i.reason FROM inbox i \
             LEFT JOIN peer_cursors c ON c.tenant_id = i.tenant_id AND c.peer_id = i.peer_id \
             LEFT JOIN peers pe ON pe.tenant_id = i.tenant_id AND pe.peer_id = i.peer_id \
             WHERE i.tenant_id = $1 AND i.message_id IN ({NEWEST}) ORDER BY i.message_id, i.peer_id"
        ))
        .bind(tenant_id)
        .bind(limit)
        .fetch_all(&self.pool)
        .await?;
        Ok(asks
            .into_iter()
            .map(|ask| {
                let (mine, rest): (Vec<_>, Vec<_>) = recipients
                    .drain(..)
                    .partition(|r| r.message_id == ask.message_id);
                recipients = rest;
                AskOverview {
                    ask,
                    recipients: mine,
                }
            })
            .collect())
    }

    async fn end_dashboard_session(&self, id_hash: &str, now_ms: i64) -> Result<bool> {
        let done = sqlx::query(
            "UPDATE dashboard_sessions SET ended_at_ms = $2 \
             WHERE id_hash = $1 AND ended_at_ms IS NULL",
        )
        .bind(id_hash)
        .bind(now_ms)
        .execute(&self.pool)
        .await?
        .rows_affected();
        Ok(done == 1)
    }
}
