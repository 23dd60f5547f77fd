//! Members, invitations and sign-ins through the provider: small statements off the message
//! path.

use super::*;

/// Rows that expired this long ago are deleted when a sign-in starts.
const KEEP_EXPIRED_MS: i64 = 24 * 3600 * 1000;

const MEMBER_COLS: &str = "id, tenant_id, issuer, subject, email, scopes, owner, invited_by, \
                           created_at_ms, joined_at_ms, last_seen_at_ms, removed_at_ms";

const ATTEMPT_COLS: &str = "state_hash, browser_hash, purpose, nonce, pkce_verifier, \
                            signup_team, created_at_ms, expires_at_ms";

#[async_trait::async_trait]
impl MemberStore for This {
    async fn add_member(&self, m: &MemberRecord) -> Result<bool> {
        // The partial unique indexes refuse a second identity or open invitation.
        let added = sqlx::query(&format!(
            "INSERT INTO tenant_members ({MEMBER_COLS}) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12) ON CONFLICT DO NOTHING"
        ))
        .bind(&m.id)
        .bind(&m.tenant_id)
        .bind(&m.issuer)
        .bind(&m.subject)
        .bind(&m.email)
        .bind(&m.scopes)
        .bind(m.owner)
        .bind(&m.invited_by)
        .bind(m.created_at_ms)
        .bind(m.joined_at_ms)
        .bind(m.last_seen_at_ms)
        .bind(m.removed_at_ms)
        .execute(&self.pool)
        .await?
        .rows_affected();
        Ok(added == 1)
    }

    async fn list_members(&self, tenant_id: &str) -> Result<Vec<MemberRecord>> {
        Ok(sqlx::query_as(&format!(
            "SELECT {MEMBER_COLS} FROM tenant_members \
             WHERE tenant_id = $1 AND removed_at_ms IS NULL ORDER BY created_at_ms, id"
        ))
        .bind(tenant_id)
        .fetch_all(&self.pool)
        .await?)
    }

    async fn get_member(&self, id: &str) -> Result<Option<MemberRecord>> {
        Ok(sqlx::query_as(&format!(
            "SELECT {MEMBER_COLS} FROM tenant_members WHERE id = $1"
        ))
        .bind(id)
        .fetch_optional(&self.pool)
        .await?)
    }

    async fn remove_member(&self, tenant_id: &str, id: &str, now_ms: i64) -> Result<bool> {
        let mut tx = self.pool.begin().await?;
        let removed = sqlx::query(
            "UPDATE tenant_members SET removed_at_ms = $3 \
             WHERE tenant_id = $1 AND id = $2 AND removed_at_ms IS NULL",
        )
        .bind(tenant_id)
        .bind(id)
        .bind(now_ms)
        .execute(&mut *tx)
        .await?
        .rows_affected()
            == 1;
        if removed {
            // Invitations still open for the same email would bring the member back.
            sqlx::query(
                "UPDATE tenant_members SET removed_at_ms = $3 \
                 WHERE tenant_id = $1 AND issuer IS NULL AND removed_at_ms IS NULL \
                 AND email = (SELECT email FROM tenant_members WHERE id = $2)",
            )
            .bind(tenant_id)
            .bind(id)
            .bind(now_ms)
            .execute(&mut *tx)
            .await?;
            sqlx::query(
                "UPDATE dashboard_sessions SET ended_at_ms = $3 \
                 WHERE tenant_id = $1 AND member_id = $2 AND ended_at_ms IS NULL",
            )
            .bind(tenant_id)
            .bind(id)
            .bind(now_ms)
            .execute(&mut *tx)
            .await?;
        }
        tx.commit().await?;
        Ok(removed)
    }

    async fn sign_in_member(
        &self,
        issuer: &str,
        subject: &str,
        verified_email: Option<&str>,
        now_ms: i64,
    ) -> Result<Vec<MemberRecord>> {
        let mut tx = self.pool.begin().await?;
        if let Some(email) = verified_email {
            // An invitation is claimed only in a tenant (not deleted) where the identity is not
            // a member yet: the identity index allows one membership per tenant.
            sqlx::query(
                "UPDATE tenant_members SET issuer = $1, subject = $2, joined_at_ms = $4 \
                 WHERE issuer IS NULL AND removed_at_ms IS NULL AND email = $3 \
                 AND tenant_id IN (SELECT id FROM tenants WHERE deleted_at_ms IS NULL) \
                 AND tenant_id NOT IN (SELECT tenant_id FROM tenant_members \
                     WHERE issuer = $1 AND subject = $2 AND removed_at_ms IS NULL)",
            )
            .bind(issuer)
            .bind(subject)
            .bind(email)
            .bind(now_ms)
            .execute(&mut *tx)
            .await?;
        }
        sqlx::query(
            "UPDATE tenant_members SET last_seen_at_ms = $3 \
             WHERE issuer = $1 AND subject = $2 AND removed_at_ms IS NULL",
        )
        .bind(issuer)
        .bind(subject)
        .bind(now_ms)
        .execute(&mut *tx)
        .await?;
        let members = sqlx::query_as(&format!(
            "SELECT {MEMBER_COLS} FROM tenant_members \
             WHERE issuer = $1 AND subject = $2 AND removed_at_ms IS NULL \
             AND tenant_id IN (SELECT id FROM tenants WHERE deleted_at_ms IS NULL) \
             ORDER BY created_at_ms, id"
        ))
        .bind(issuer)
        .bind(subject)
        .fetch_all(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(members)
    }

    async fn create_oidc_attempt(&self, a: &OidcAttempt) -> Result<()> {
        let mut tx = self.pool.begin().await?;
        sqlx::query("DELETE FROM dashboard_oidc_attempts WHERE expires_at_ms < $1")
            .bind(a.created_at_ms.saturating_sub(KEEP_EXPIRED_MS))
            .execute(&mut *tx)
            .await?;
        sqlx::query(&format!(
            "INSERT INTO dashboard_oidc_attempts ({ATTEMPT_COLS}) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8)"
        ))
        .bind(&a.state_hash)
        .bind(&a.browser_hash)
        .bind(&a.purpose)
        .bind(&a.nonce)
        .bind(&a.pkce_verifier)
        .bind(&a.signup_team)
        .bind(a.created_at_ms)
        .bind(a.expires_at_ms)
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(())
    }

    async fn take_oidc_attempt(
        &self,
        state_hash: &str,
        now_ms: i64,
    ) -> Result<Option<OidcAttempt>> {
        Ok(sqlx::query_as(&format!(
            "UPDATE dashboard_oidc_attempts SET used_at_ms = $2 \
             WHERE state_hash = $1 AND used_at_ms IS NULL AND expires_at_ms > $2 \
             RETURNING {ATTEMPT_COLS}"
        ))
        .bind(state_hash)
        .bind(now_ms)
        .fetch_optional(&self.pool)
        .await?)
    }
}
