//! API keys and admin tokens ([`KeyStore`]): lookups by hash and id, listing, use, expiry,
//! revocation, idempotent creation, and which of the keys live connections hold may no longer
//! be used.

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

    pub(super) async fn insert_admin_token_sql(&self, t: &AdminTokenRecord) -> Result<()> {
        sqlx::query(
            "INSERT INTO admin_tokens (id, label, scopes, hash, display, created_at_ms, \
             expires_at_ms, revoked_at_ms, last_used_at_ms) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)",
        )
        .bind(&t.id)
        .bind(&t.label)
        .bind(&t.scopes)
        .bind(&t.hash)
        .bind(&t.display)
        .bind(t.created_at_ms)
        .bind(t.expires_at_ms)
        .bind(t.revoked_at_ms)
        .bind(t.last_used_at_ms)
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    pub(super) async fn admin_tokens_where(
        &self,
        filter: &str,
        arg: Option<&str>,
    ) -> Result<Vec<AdminTokenRecord>> {
        let sql = format!(
            "SELECT id, label, scopes, hash, display, created_at_ms, expires_at_ms, \
             revoked_at_ms, last_used_at_ms FROM admin_tokens {filter} ORDER BY created_at_ms, id"
        );
        let mut q = sqlx::query_as(&sql);
        if let Some(a) = arg {
            q = q.bind(a);
        }
        Ok(q.fetch_all(&self.pool).await?)
    }

    pub(super) async fn revoke_admin_token_sql(&self, id: &str, now_ms: i64) -> Result<bool> {
        let done = sqlx::query(
            "UPDATE admin_tokens SET revoked_at_ms = $1 WHERE id = $2 AND revoked_at_ms IS NULL",
        )
        .bind(now_ms)
        .bind(id)
        .execute(&self.pool)
        .await?;
        Ok(done.rows_affected() == 1)
    }

    pub(super) async fn admin_token_used_sql(&self, id: &str, now_ms: i64) -> Result<()> {
        sqlx::query("UPDATE admin_tokens SET last_used_at_ms = $1 WHERE id = $2")
            .bind(now_ms)
            .bind(id)
            .execute(&self.pool)
            .await?;
        Ok(())
    }

    pub(super) async fn list_api_keys_page_sql(
        &self,
        tenant_id: &str,
        after: Option<(i64, String)>,
        limit: i64,
    ) -> Result<Vec<ApiKeyRecord>> {
        let (at, id) = after.unwrap_or((i64::MIN, String::new()));
        let sql = format!(
            "SELECT {KEY_COLS} FROM api_keys WHERE tenant_id = $1 \
             AND (created_at_ms > $2 OR (created_at_ms = $2 AND id > $3)) \
             ORDER BY created_at_ms, id LIMIT $4"
        );
        Ok(sqlx::query_as(&sql)
            .bind(tenant_id)
            .bind(at)
            .bind(id)
            .bind(limit)
            .fetch_all(&self.pool)
            .await?)
    }

    pub(super) async fn forget_key_requests_sql(&self, before_ms: i64) -> Result<u64> {
        Ok(
            sqlx::query("DELETE FROM key_requests WHERE created_at_ms < $1")
                .bind(before_ms)
                .execute(&self.pool)
                .await?
                .rows_affected(),
        )
    }

    pub(super) async fn insert_api_key_once_sql(
        &self,
        k: &ApiKeyRecord,
        idempotency_key: &str,
        request_hash: &str,
    ) -> Result<Option<KeyRequest>> {
        let mut tx = self.pool.begin().await?;
        let claimed = sqlx::query(
            "INSERT INTO key_requests (tenant_id, idempotency_key, request_hash, key_id, \
             created_at_ms) VALUES ($1, $2, $3, $4, $5) ON CONFLICT DO NOTHING",
        )
        .bind(&k.tenant_id)
        .bind(idempotency_key)
        .bind(request_hash)
        .bind(&k.id)
        .bind(k.created_at_ms)
        .execute(&mut *tx)
        .await?
        .rows_affected()
            == 1;
        if claimed {
            Self::insert_key_on(&mut *tx, k).await?;
            tx.commit().await?;
            return Ok(None);
        }
        tx.rollback().await?;
        let earlier: Option<KeyRequest> = sqlx::query_as(
            "SELECT key_id, request_hash, created_at_ms FROM key_requests \
             WHERE tenant_id = $1 AND idempotency_key = $2",
        )
        .bind(&k.tenant_id)
        .bind(idempotency_key)
        .fetch_optional(&self.pool)
        .await?;
        earlier
            .map(Some)
            .ok_or_else(|| StoreError::Conflict("the idempotency record vanished; retry".into()))
    }

    pub(super) async fn set_key_expiry_sql(
        &self,
        id: &str,
        expires_at_ms: Option<i64>,
    ) -> Result<bool> {
        Ok(sqlx::query(
            "UPDATE api_keys SET expires_at_ms = $2 WHERE id = $1 AND revoked_at_ms IS NULL",
        )
        .bind(id)
        .bind(expires_at_ms)
        .execute(&self.pool)
        .await?
        .rows_affected()
            == 1)
    }
}

#[async_trait::async_trait]
impl KeyStore for This {
    async fn insert_admin_token(&self, t: &AdminTokenRecord) -> Result<()> {
        self.insert_admin_token_sql(t).await
    }

    async fn admin_token_by_hash(&self, hash: &str) -> Result<Option<AdminTokenRecord>> {
        Ok(self
            .admin_tokens_where("WHERE hash = $1", Some(hash))
            .await?
            .pop())
    }

    async fn list_admin_tokens(&self) -> Result<Vec<AdminTokenRecord>> {
        self.admin_tokens_where("", None).await
    }

    async fn revoke_admin_token(&self, id: &str, now_ms: i64) -> Result<bool> {
        self.revoke_admin_token_sql(id, now_ms).await
    }

    async fn admin_token_used(&self, id: &str, now_ms: i64) -> Result<()> {
        self.admin_token_used_sql(id, now_ms).await
    }

    async fn list_api_keys_page(
        &self,
        tenant_id: &str,
        after: Option<(i64, String)>,
        limit: i64,
    ) -> Result<Vec<ApiKeyRecord>> {
        self.list_api_keys_page_sql(tenant_id, after, limit).await
    }

    async fn forget_key_requests(&self, before_ms: i64) -> Result<u64> {
        self.forget_key_requests_sql(before_ms).await
    }

    async fn insert_api_key_once(
        &self,
        k: &ApiKeyRecord,
        idempotency_key: &str,
        request_hash: &str,
    ) -> Result<Option<KeyRequest>> {
        self.insert_api_key_once_sql(k, idempotency_key, request_hash)
            .await
    }

    async fn set_key_expiry(&self, id: &str, expires_at_ms: Option<i64>) -> Result<bool> {
        self.set_key_expiry_sql(id, expires_at_ms).await
    }

    async fn insert_api_key(&self, k: &ApiKeyRecord) -> Result<()> {
        Self::insert_key_on(&self.pool, k).await
    }

    async fn unusable_keys(&self, ids: &[String], now_ms: i64) -> Result<Vec<UnusableKey>> {
        self.unusable_keys_sql(ids, now_ms).await
    }

    async fn find_api_key_by_hash(&self, hash: &str) -> Result<Option<ApiKeyRecord>> {
        self.find_api_key_by_hash_sql(hash).await
    }

    async fn get_api_key(&self, id: &str) -> Result<Option<ApiKeyRecord>> {
        self.get_api_key_sql(id).await
    }

    async fn list_api_keys(&self, tenant_id: &str) -> Result<Vec<ApiKeyRecord>> {
        self.list_api_keys_sql(tenant_id).await
    }

    async fn key_used(&self, id: &str, now_ms: i64) -> Result<()> {
        self.key_used_sql(id, now_ms).await
    }

    async fn revoke_api_key(&self, id: &str, now_ms: i64) -> Result<bool> {
        self.revoke_api_key_sql(id, now_ms).await
    }
}
