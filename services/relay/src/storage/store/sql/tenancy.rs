//! Tenants, plans and the audit log ([`TenantStore`]): the statements behind the admin API's
//! tenant and plan operations, a tenant's deletion and purge.

/// Columns of `plans`, in [`crate::storage::store::PlanRecord`] order.
pub(crate) const PLAN_COLS: &str = "name, description, max_peers, max_connections, \
     max_message_bytes, inbox_cap, messages_per_minute, messages_per_month, max_state_bytes, \
     max_stored_peers, created_at_ms, updated_at_ms";

use super::*;

impl This {
    /// Inserts a tenant with its settings (on a pool or inside a transaction); false if
    /// the name is taken.
    pub(super) async fn insert_tenant_on<'e, E>(executor: E, t: &TenantRecord) -> Result<bool>
    where
        E: sqlx::Executor<'e, Database = Db>,
    {
        let o = &t.overrides;
        Ok(sqlx::query(
            "INSERT INTO tenants (id, name, plan, created_at_ms, display_name, max_peers, \
             max_connections, max_message_bytes, inbox_cap, max_messages_per_minute, \
             max_monthly_messages, max_state_bytes, max_stored_peers) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13) \
             ON CONFLICT DO NOTHING",
        )
        .bind(&t.id)
        .bind(&t.name)
        .bind(&t.plan)
        .bind(t.created_at_ms)
        .bind(&t.display_name)
        .bind(o.max_peers)
        .bind(o.max_connections)
        .bind(o.max_message_bytes)
        .bind(o.inbox_cap)
        .bind(o.messages_per_minute)
        .bind(o.messages_per_month)
        .bind(o.max_state_bytes)
        .bind(o.max_stored_peers)
        .execute(executor)
        .await?
        .rows_affected()
            == 1)
    }

    pub(super) async fn update_tenant_row(&self, t: &TenantRecord) -> Result<bool> {
        let o = &t.overrides;
        Ok(sqlx::query(
            "UPDATE tenants SET plan = $2, display_name = $3, max_peers = $4, \
             max_connections = $5, max_message_bytes = $6, inbox_cap = $7, \
             max_messages_per_minute = $8, max_monthly_messages = $9, \
             max_state_bytes = $10, max_stored_peers = $11 WHERE id = $1",
        )
        .bind(&t.id)
        .bind(&t.plan)
        .bind(&t.display_name)
        .bind(o.max_peers)
        .bind(o.max_connections)
        .bind(o.max_message_bytes)
        .bind(o.inbox_cap)
        .bind(o.messages_per_minute)
        .bind(o.messages_per_month)
        .bind(o.max_state_bytes)
        .bind(o.max_stored_peers)
        .execute(&self.pool)
        .await?
        .rows_affected()
            == 1)
    }

    pub(super) async fn insert_plan_row(&self, p: &PlanRecord) -> Result<bool> {
        let l = &p.limits;
        Ok(sqlx::query(
            "INSERT INTO plans (name, description, max_peers, max_connections, \
             max_message_bytes, inbox_cap, messages_per_minute, messages_per_month, \
             max_state_bytes, max_stored_peers, created_at_ms, updated_at_ms) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12) ON CONFLICT DO NOTHING",
        )
        .bind(&p.name)
        .bind(&p.description)
        .bind(l.max_peers)
        .bind(l.max_connections)
        .bind(l.max_message_bytes)
        .bind(l.inbox_cap)
        .bind(l.messages_per_minute)
        .bind(l.messages_per_month)
        .bind(l.max_state_bytes)
        .bind(l.max_stored_peers)
        .bind(p.created_at_ms)
        .bind(p.updated_at_ms)
        .execute(&self.pool)
        .await?
        .rows_affected()
            == 1)
    }

    pub(super) async fn update_plan_row(&self, p: &PlanRecord) -> Result<bool> {
        let l = &p.limits;
        Ok(sqlx::query(
            "UPDATE plans SET description = $2, max_peers = $3, max_connections = $4, \
             max_message_bytes = $5, inbox_cap = $6, messages_per_minute = $7, \
             messages_per_month = $8, max_state_bytes = $9, max_stored_peers = $10, \
             updated_at_ms = $11 \
             WHERE name = $1",
        )
        .bind(&p.name)
        .bind(&p.description)
        .bind(l.max_peers)
        .bind(l.max_connections)
        .bind(l.max_message_bytes)
        .bind(l.inbox_cap)
        .bind(l.messages_per_minute)
        .bind(l.messages_per_month)
        .bind(l.max_state_bytes)
        .bind(l.max_stored_peers)
        .bind(p.updated_at_ms)
        .execute(&self.pool)
        .await?
        .rows_affected()
            == 1)
    }

    pub(super) async fn insert_audit_row(&self, e: &AuditEvent) -> Result<()> {
        sqlx::query(
            "INSERT INTO admin_audit (id, at_ms, actor, action, target, tenant_id, \
             request_id, before_json, after_json) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)",
        )
        .bind(&e.id)
        .bind(e.at_ms)
        .bind(&e.actor)
        .bind(&e.action)
        .bind(&e.target)
        .bind(&e.tenant_id)
        .bind(&e.request_id)
        .bind(&e.before_json)
        .bind(&e.after_json)
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    pub(super) async fn audit_page(&self, f: &AuditFilter, limit: i64) -> Result<Vec<AuditEvent>> {
        let mut sql = String::from(
            "SELECT id, at_ms, actor, action, target, tenant_id, request_id, before_json, \
             after_json FROM admin_audit WHERE 1 = 1",
        );
        let mut n = 1;
        let mut next = |clause: &str, sql: &mut String| {
            sql.push_str(&clause.replace('?', &format!("${n}")));
            n += 1;
        };
        if f.tenant_id.is_some() {
            next(" AND tenant_id = ?", &mut sql);
        }
        if f.from_ms.is_some() {
            next(" AND at_ms >= ?", &mut sql);
        }
        if f.to_ms.is_some() {
            next(" AND at_ms < ?", &mut sql);
        }
        if f.after.is_some() {
            let (a, b) = (n, n + 1);
            sql.push_str(&format!(
                " AND (at_ms > ${a} OR (at_ms = ${a} AND id > ${b}))"
            ));
            n += 2;
        }
        sql.push_str(&format!(" ORDER BY at_ms, id LIMIT ${n}"));
        let mut query = sqlx::query_as(&sql);
        if let Some(t) = &f.tenant_id {
            query = query.bind(t);
        }
        if let Some(from) = f.from_ms {
            query = query.bind(from);
        }
        if let Some(to) = f.to_ms {
            query = query.bind(to);
        }
        if let Some((at, id)) = &f.after {
            query = query.bind(*at).bind(id);
        }
        Ok(query.bind(limit).fetch_all(&self.pool).await?)
    }

    pub(super) async fn list_tenants_page_sql(
        &self,
        filter: &TenantFilter,
        limit: i64,
    ) -> Result<Vec<TenantRecord>> {
        let mut sql = format!("SELECT {TENANT_COLS} FROM tenants WHERE ");
        sql.push_str(match filter.status {
            None => "deleted_at_ms IS NULL",
            Some(TenantStatus::Active) => "deleted_at_ms IS NULL AND disabled_at_ms IS NULL",
            Some(TenantStatus::Suspended) => "deleted_at_ms IS NULL AND disabled_at_ms IS NOT NULL",
            Some(TenantStatus::Deleted) => "deleted_at_ms IS NOT NULL",
        });
        let mut n = 1;
        if filter.plan.is_some() {
            sql.push_str(&format!(" AND plan = ${n}"));
            n += 1;
        }
        if filter.after.is_some() {
            sql.push_str(&format!(
                " AND (created_at_ms > ${n} OR (created_at_ms = ${n} AND id > ${}))",
                n + 1
            ));
            n += 2;
        }
        sql.push_str(&format!(" ORDER BY created_at_ms, id LIMIT ${n}"));
        let mut query = sqlx::query_as(&sql);
        if let Some(plan) = &filter.plan {
            query = query.bind(plan);
        }
        if let Some((at, id)) = &filter.after {
            query = query.bind(*at).bind(id);
        }
        Ok(query.bind(limit).fetch_all(&self.pool).await?)
    }

    pub(super) async fn delete_tenant_sql(&self, tenant_id: &str, now_ms: i64) -> Result<bool> {
        let mut tx = self.pool.begin().await?;
        let marked = sqlx::query(
            "UPDATE tenants SET deleted_at_ms = $2 WHERE id = $1 AND deleted_at_ms IS NULL",
        )
        .bind(tenant_id)
        .bind(now_ms)
        .execute(&mut *tx)
        .await?
        .rows_affected()
            == 1;
        if marked {
            sqlx::query(
                "UPDATE api_keys SET revoked_at_ms = $2 WHERE tenant_id = $1 \
                 AND revoked_at_ms IS NULL",
            )
            .bind(tenant_id)
            .bind(now_ms)
            .execute(&mut *tx)
            .await?;
        }
        tx.commit().await?;
        Ok(marked)
    }

    pub(super) async fn purge_tenant_sql(&self, tenant_id: &str) -> Result<bool> {
        let mut tx = self.pool.begin().await?;
        // Children first: some dialects keep foreign keys to tenants and peers.
        for table in [
            "dashboard_sessions",
            "dashboard_links",
            "tenant_members",
            "work_session_runtimes",
            "work_sessions",
            "conversation_participants",
            "conversations",
            "inbox",
            "messages",
            "peer_cursors",
            "peers",
            "shared_state",
            "key_requests",
            "api_keys",
        ] {
            sqlx::query(&format!("DELETE FROM {table} WHERE tenant_id = $1"))
                .bind(tenant_id)
                .execute(&mut *tx)
                .await?;
        }
        let gone = sqlx::query("DELETE FROM tenants WHERE id = $1 AND deleted_at_ms IS NOT NULL")
            .bind(tenant_id)
            .execute(&mut *tx)
            .await?
            .rows_affected()
            == 1;
        if gone {
            tx.commit().await?;
        } else {
            tx.rollback().await?;
        }
        Ok(gone)
    }

    pub(super) async fn deleted_before_sql(&self, before_ms: i64) -> Result<Vec<String>> {
        Ok(sqlx::query_scalar(
            "SELECT id FROM tenants WHERE deleted_at_ms IS NOT NULL AND deleted_at_ms < $1",
        )
        .bind(before_ms)
        .fetch_all(&self.pool)
        .await?)
    }

    pub(super) async fn set_tenant_suspended_sql(
        &self,
        tenant_id: &str,
        at_ms: Option<i64>,
    ) -> Result<bool> {
        Ok(
            sqlx::query("UPDATE tenants SET disabled_at_ms = $2 WHERE id = $1")
                .bind(tenant_id)
                .bind(at_ms)
                .execute(&self.pool)
                .await?
                .rows_affected()
                == 1,
        )
    }

    pub(super) async fn plans_where(&self, name: Option<&str>) -> Result<Vec<PlanRecord>> {
        let cols = super::tenancy::PLAN_COLS;
        Ok(match name {
            Some(name) => {
                sqlx::query_as(&format!("SELECT {cols} FROM plans WHERE name = $1"))
                    .bind(name)
                    .fetch_all(&self.pool)
                    .await?
            }
            None => {
                sqlx::query_as(&format!("SELECT {cols} FROM plans ORDER BY name"))
                    .fetch_all(&self.pool)
                    .await?
            }
        })
    }
}

#[async_trait::async_trait]
impl TenantStore for This {
    async fn create_tenant(&self, t: &TenantRecord) -> Result<()> {
        if !Self::insert_tenant_on(&self.pool, t).await? {
            return Err(StoreError::Conflict(format!(
                "a tenant named `{}` exists",
                t.name
            )));
        }
        Ok(())
    }

    async fn create_tenant_with_key(&self, t: &TenantRecord, k: &ApiKeyRecord) -> Result<()> {
        let mut tx = self.pool.begin().await?;
        if !Self::insert_tenant_on(&mut *tx, t).await? {
            return Err(StoreError::Conflict(format!(
                "a tenant named `{}` exists",
                t.name
            )));
        }
        Self::insert_key_on(&mut *tx, k).await?;
        tx.commit().await?;
        Ok(())
    }

    async fn list_tenants(&self) -> Result<Vec<TenantRecord>> {
        let sql = format!("SELECT {TENANT_COLS} FROM tenants ORDER BY created_at_ms, id");
        Ok(sqlx::query_as(&sql).fetch_all(&self.pool).await?)
    }

    async fn find_tenant(&self, key: TenantKey<'_>) -> Result<Option<TenantRecord>> {
        let (column, value) = match key {
            TenantKey::Id(id) => ("id", id),
            TenantKey::Name(name) => ("name", name),
        };
        let sql = format!("SELECT {TENANT_COLS} FROM tenants WHERE {column} = $1");
        Ok(sqlx::query_as(&sql)
            .bind(value)
            .fetch_optional(&self.pool)
            .await?)
    }

    async fn insert_audit(&self, e: &AuditEvent) -> Result<()> {
        self.insert_audit_row(e).await
    }

    async fn list_audit(&self, f: &AuditFilter, limit: i64) -> Result<Vec<AuditEvent>> {
        self.audit_page(f, limit).await
    }

    async fn list_tenants_page(
        &self,
        filter: &TenantFilter,
        limit: i64,
    ) -> Result<Vec<TenantRecord>> {
        self.list_tenants_page_sql(filter, limit).await
    }

    async fn delete_tenant(&self, tenant_id: &str, now_ms: i64) -> Result<bool> {
        self.delete_tenant_sql(tenant_id, now_ms).await
    }

    async fn purge_tenant(&self, tenant_id: &str) -> Result<bool> {
        self.purge_tenant_sql(tenant_id).await
    }

    async fn deleted_before(&self, before_ms: i64) -> Result<Vec<String>> {
        self.deleted_before_sql(before_ms).await
    }

    async fn set_tenant_suspended(&self, tenant_id: &str, at_ms: Option<i64>) -> Result<bool> {
        self.set_tenant_suspended_sql(tenant_id, at_ms).await
    }

    async fn update_tenant(&self, t: &TenantRecord) -> Result<bool> {
        self.update_tenant_row(t).await
    }

    async fn create_plan(&self, p: &PlanRecord) -> Result<()> {
        if !self.insert_plan_row(p).await? {
            return Err(StoreError::Conflict(format!(
                "a plan named `{}` exists",
                p.name
            )));
        }
        Ok(())
    }

    async fn list_plans(&self) -> Result<Vec<PlanRecord>> {
        self.plans_where(None).await
    }

    async fn get_plan(&self, name: &str) -> Result<Option<PlanRecord>> {
        Ok(self.plans_where(Some(name)).await?.pop())
    }

    async fn update_plan(&self, p: &PlanRecord) -> Result<bool> {
        self.update_plan_row(p).await
    }
}
