//! The dashboard's sign-in links and sessions: small single statements, off the message path.

use super::*;

/// Rows that expired this long ago are deleted when a link is minted.
const KEEP_EXPIRED_MS: i64 = 24 * 3600 * 1000;

const SESSION_COLS: &str = "id_hash, audience, tenant_id, key_id, subject, scopes, csrf, \
                            created_at_ms, expires_at_ms";

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

    async fn create_dashboard_session(&self, s: &DashboardSession) -> Result<()> {
        sqlx::query(&format!(
            "INSERT INTO dashboard_sessions ({SESSION_COLS}) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)"
        ))
        .bind(&s.id_hash)
        .bind(&s.audience)
        .bind(&s.tenant_id)
        .bind(&s.key_id)
        .bind(&s.subject)
        .bind(&s.scopes)
        .bind(&s.csrf)
        .bind(s.created_at_ms)
        .bind(s.expires_at_ms)
        .execute(&self.pool)
        .await?;
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
