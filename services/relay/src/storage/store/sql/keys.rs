//! API keys: lookups by hash and id, listing, use,
//! revocation and which of the keys live connections hold may no longer be used.

use super::*;

impl This {
    pub(super) async fn unusable_keys_sql(
        &self,
        ids: &[String],
        now_ms: i64,
    ) -> Result<Vec<UnusableKey>> {
        let mut unusable = Vec::new();
        // Bounded statements: SQLite allows 32 766 parameters, and a pod may hold many keys.
        for chunk in ids.chunks(500) {
            let marks: Vec<String> = (2..chunk.len() + 2).map(|i| format!("${i}")).collect();
            // Every key found, with whether it still works; a key not found at all (its
            // tenant was purged) is unusable too.
            let sql = format!(
                "SELECT k.id, \
                 (k.revoked_at_ms IS NULL AND (k.expires_at_ms IS NULL OR k.expires_at_ms > $1) \
                  AND t.id IS NOT NULL AND t.deleted_at_ms IS NULL) AS tenant_suspended, \
                 (k.revoked_at_ms IS NOT NULL \
                  OR (k.expires_at_ms IS NOT NULL AND k.expires_at_ms <= $1) \
                  OR t.id IS NULL OR t.disabled_at_ms IS NOT NULL \
                  OR t.deleted_at_ms IS NOT NULL) AS dead \
                 FROM api_keys k LEFT JOIN tenants t ON t.id = k.tenant_id WHERE k.id IN ({})",
                marks.join(", ")
            );
            let mut query = sqlx::query_as::<_, (String, bool, bool)>(&sql).bind(now_ms);
            for id in chunk {
                query = query.bind(id);
            }
            let found: HashMap<String, (bool, bool)> = query
                .fetch_all(&self.pool)
                .await?
                .into_iter()
                .map(|(id, suspended, dead)| (id, (suspended, dead)))
                .collect();
            for id in chunk {
                match found.get(id) {
                    Some((_, false)) => {}
                    Some((tenant_suspended, true)) => unusable.push(UnusableKey {
                        id: id.clone(),
                        tenant_suspended: *tenant_suspended,
                    }),
                    None => unusable.push(UnusableKey {
                        id: id.clone(),
                        tenant_suspended: false,
                    }),
                }
            }
        }
        Ok(unusable)
    }

    pub(super) async fn find_api_key_by_hash_sql(
        &self,
        hash: &str,
    ) -> Result<Option<ApiKeyRecord>> {
        let sql = format!("SELECT {KEY_COLS} FROM api_keys WHERE hash = $1");
        Ok(sqlx::query_as(&sql)
            .bind(hash)
            .fetch_optional(&self.pool)
            .await?)
    }

    pub(super) async fn get_api_key_sql(&self, id: &str) -> Result<Option<ApiKeyRecord>> {
        let sql = format!("SELECT {KEY_COLS} FROM api_keys WHERE id = $1");
        Ok(sqlx::query_as(&sql)
            .bind(id)
            .fetch_optional(&self.pool)
            .await?)
    }

    pub(super) async fn list_api_keys_sql(&self, tenant_id: &str) -> Result<Vec<ApiKeyRecord>> {
        let sql = format!(
            "SELECT {KEY_COLS} FROM api_keys WHERE tenant_id = $1 ORDER BY created_at_ms, id"
        );
        Ok(sqlx::query_as(&sql)
            .bind(tenant_id)
            .fetch_all(&self.pool)
            .await?)
    }

    pub(super) async fn key_used_sql(&self, id: &str, now_ms: i64) -> Result<()> {
        sqlx::query("UPDATE api_keys SET last_used_at_ms = $1 WHERE id = $2")
            .bind(now_ms)
            .bind(id)
            .execute(&self.pool)
            .await?;
        Ok(())
    }

    pub(super) async fn revoke_api_key_sql(&self, id: &str, now_ms: i64) -> Result<bool> {
        let n = sqlx::query(
            "UPDATE api_keys SET revoked_at_ms = $1 WHERE id = $2 AND revoked_at_ms IS NULL",
        )
        .bind(now_ms)
        .bind(id)
        .execute(&self.pool)
        .await?
        .rows_affected();
        Ok(n == 1)
    }

    /// Inserts a key through `executor` (the pool, or a transaction).
    pub(super) async fn insert_key_on<'e, E>(executor: E, k: &ApiKeyRecord) -> Result<()>
    where
        E: sqlx::Executor<'e, Database = Db>,
    {
        sqlx::query(
            "INSERT INTO api_keys (id, tenant_id, hash, display, label, mode, created_at_ms, \
             expires_at_ms, revoked_at_ms, scopes) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)",
        )
        .bind(&k.id)
        .bind(&k.tenant_id)
        .bind(&k.hash)
        .bind(&k.display)
        .bind(&k.label)
        .bind(&k.mode)
        .bind(k.created_at_ms)
        .bind(k.expires_at_ms)
        .bind(k.revoked_at_ms)
        .bind(&k.scopes)
        .execute(executor)
        .await?;
        Ok(())
    }
}
