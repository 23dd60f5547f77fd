//! The SQL implementation of [`Store`](super::Store), written once and compiled once per
//! backend: `postgres.rs` and `sqlite.rs` each mount this folder as their module `sql` (with
//! `#[path]`), after naming what differs in five items of their own: `Db` (the sqlx driver),
//! `This` (the store type), `BACKEND`, `BEGIN_WRITE` and `LOCK_ASK`, plus a few write-path
//! functions written per dialect (`lock_peers`, the set-based inserts). Every query here is a
//! plain function or method on a real line: go-to-definition lands on it and a type error names
//! it, once per backend. docs/architecture.md says why this and not generic functions.
//!
//! Both dialects accept `$N` placeholders, `ON CONFLICT`, `RETURNING` and partial indexes, so
//! one body serves both, and each instance type-checks against its own driver.
//! Inside [`Store::apply`](super::Store::apply) no statement is allowed to fail on expected
//! conditions (Postgres aborts a transaction on any error): duplicates and caps are detected
//! with reads, `ON CONFLICT DO NOTHING` and guarded updates instead.
//!
//! Write batches open with a backend-specific statement: SQLite needs `BEGIN IMMEDIATE`, or a
//! batch that reads before it writes fails with `SQLITE_BUSY_SNAPSHOT` whenever another
//! connection committed in between (no busy timeout can resolve that).
//!
//! Write order inside one op matters: the first write of an op is the guarded slot allocation,
//! so an op that is refused (full inbox) has written nothing.
//!
//! The write path's helpers live beside this file: [`accept`] (slots, messages, entries) and
//! [`update`] (receipts, closing asks, expiry); this file has the row types they share and the
//! [`Store`](super::Store) methods themselves. Backend-independent texts and rules are in
//! [`crate::storage::store::shared`].

mod accept;
mod keys;
mod peers;
mod questions;
mod reads;
mod sessions;
mod tenancy;
mod update;
mod usage;

use crate::storage::store::shared::{
    CHUNK, INBOX_FULL_REASON, KEY_COLS, MSG_COLS, PEER_COLS, PeerRows, TENANT_COLS, is_simple,
    receipt_allowed, state,
};
use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
type Key = (String, String, String);
use crate::storage::store::*;
use repowire_protocol::{CorrelationId, DeliveryState, MessageKind};

use super::{BACKEND, BEGIN_WRITE, Db, LOCK_ASK, This};

type Conn = <Db as sqlx::Database>::Connection;

/// Four nullable text columns (a closed ask's closing details; each query says which).
type FourTexts = (
    Option<String>,
    Option<String>,
    Option<String>,
    Option<String>,
);

#[derive(sqlx::FromRow)]
struct AskRow {
    message_id: String,
    from_peer_id: String,
    from_name: String,
    from_circle: String,
    from_session_id: Option<String>,
    closed_at_ms: Option<i64>,
    closed_by: Option<String>,
    question: Option<String>,
    deadline_ms: Option<i64>,
    recipient: String,
    /// Effective state (see the module docs); `row_state` is what the row says.
    state: String,
    row_state: String,
}

#[derive(sqlx::FromRow)]
pub(super) struct EntryRow {
    tenant_id: String,
    peer_id: String,
    message_id: String,
    seq: i64,
    /// Effective state; `row_state` is what the row says; `cursor` the peer's delivered_seq.
    state: String,
    row_state: String,
    cursor: i64,
    from_peer_id: String,
    correlation_id: Option<String>,
}

impl EntryRow {
    /// The change a sender hears about when this entry moves to `state`.
    fn change(&self, state: DeliveryState, reason: Option<String>) -> StateChange {
        StateChange {
            tenant_id: self.tenant_id.clone(),
            sender: self.from_peer_id.clone(),
            message_id: self.message_id.clone(),
            correlation_id: self.correlation_id.clone(),
            recipient: self.peer_id.clone(),
            state,
            reason,
        }
    }
}

#[async_trait::async_trait]
impl Store for This {
    fn backend(&self) -> &'static str {
        BACKEND
    }

    fn writer_store(&self) -> Option<std::sync::Arc<dyn Store>> {
        self.own_writer_store()
    }

    async fn close(&self) {
        self.pool.close().await;
    }

    fn parallel_receipts(&self) -> bool {
        Self::PARALLEL_RECEIPTS
    }

    async fn ping(&self) -> Result<()> {
        sqlx::query("SELECT 1").execute(&self.pool).await?;
        Ok(())
    }

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

    async fn usage_rows(
        &self,
        tenant_id: Option<&str>,
        from_ms: i64,
        to_ms: i64,
    ) -> Result<Vec<UsageRow>> {
        self.usage_rows_sql(tenant_id, from_ms, to_ms).await
    }

    async fn add_usage(&self, rows: &[UsageAdd]) -> Result<()> {
        self.add_usage_sql(rows).await
    }

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

    async fn messages_counted(&self, tenant_id: &str, from_ms: i64, to_ms: i64) -> Result<i64> {
        self.messages_counted_sql(tenant_id, from_ms, to_ms).await
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

    async fn list_api_keys_page(
        &self,
        tenant_id: &str,
        after: Option<(i64, String)>,
        limit: i64,
    ) -> Result<Vec<ApiKeyRecord>> {
        self.list_api_keys_page_sql(tenant_id, after, limit).await
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

    async fn upsert_peer(&self, p: &PeerRecord) -> Result<()> {
        Self::upsert_peer_sql(&self.pool, p).await
    }

    async fn insert_peer_bounded(
        &self,
        p: &PeerRecord,
        room: &PeerRoom<'_>,
    ) -> Result<PeerAdmission> {
        Self::insert_peer_bounded_sql(&self.pool, p, room).await
    }

    async fn stored_peers(&self, tenant_id: &str) -> Result<i64> {
        let (n,): (i64,) =
            sqlx::query_as("SELECT COUNT(*) FROM peers WHERE tenant_id = $1 AND peer_id <> $2")
                .bind(tenant_id)
                .bind(crate::storage::store::CONTROL_PEER)
                .fetch_one(&self.pool)
                .await?;
        Ok(n)
    }

    async fn get_peer(&self, tenant_id: &str, peer_id: &str) -> Result<Option<PeerRecord>> {
        Self::get_peer_sql(&self.pool, tenant_id, peer_id).await
    }

    async fn peers_named(&self, tenant_id: &str, name: &str) -> Result<Vec<PeerRecord>> {
        Self::peers_named_sql(&self.pool, tenant_id, name).await
    }

    async fn list_peers(&self, tenant_id: &str) -> Result<Vec<PeerRecord>> {
        Self::list_peers_sql(&self.pool, tenant_id).await
    }

    async fn set_description(
        &self,
        tenant_id: &str,
        peer_id: &str,
        description: Option<&str>,
        now_ms: i64,
    ) -> Result<()> {
        Self::set_description_sql(&self.pool, tenant_id, peer_id, description, now_ms).await
    }

    async fn clear_description(&self, tenant_id: &str, peer_id: &str, set_at: i64) -> Result<()> {
        Self::clear_description_sql(&self.pool, tenant_id, peer_id, set_at).await
    }

    async fn touch_peer(&self, tenant_id: &str, peer_id: &str, now_ms: i64) -> Result<()> {
        Self::touch_peer_sql(&self.pool, tenant_id, peer_id, now_ms).await
    }

    async fn state_set(
        &self,
        tenant_id: &str,
        circle: &str,
        key: &str,
        value: Option<&str>,
        by: &str,
        now_ms: i64,
        max_keys: usize,
        max_bytes: Option<i64>,
    ) -> Result<StateWrite> {
        let entry = StateEntryWrite {
            tenant_id,
            circle,
            key,
            value,
            by,
            now_ms,
        };
        Self::state_set_sql(&self.pool, &entry, max_keys, max_bytes).await
    }

    async fn state_bytes(&self, tenant_id: &str) -> Result<i64> {
        let (bytes,): (i64,) = sqlx::query_as(
            "SELECT CAST(COALESCE(SUM(size_bytes), 0) AS BIGINT) FROM shared_state \
             WHERE tenant_id = $1",
        )
        .bind(tenant_id)
        .fetch_one(&self.pool)
        .await?;
        Ok(bytes)
    }

    async fn state_get(
        &self,
        tenant_id: &str,
        circle: &str,
        key: Option<&str>,
    ) -> Result<Vec<StateRecord>> {
        Self::state_get_sql(&self.pool, tenant_id, circle, key).await
    }

    async fn apply(&self, ops: &[WriteOp]) -> Result<Vec<WriteOutcome>> {
        let mut tx = self.pool.begin_with(BEGIN_WRITE).await?;
        let mut outcomes: Vec<Option<WriteOutcome>> = ops.iter().map(|_| None).collect();
        let mut run = Vec::new();
        for (i, op) in ops.iter().enumerate() {
            if is_simple(op) {
                run.push(i);
                continue;
            }
            Self::flush_run(&mut tx, ops, &run, &mut outcomes).await?;
            run.clear();
            outcomes[i] = Some(match op {
                WriteOp::Accept(m) => WriteOutcome::Accept(Self::accept_one(&mut tx, m).await?),
                WriteOp::Close(c) => WriteOutcome::Close(Self::close_one(&mut tx, c).await?),
                WriteOp::Receipt(r) => WriteOutcome::Receipt(Self::receipt_one(&mut tx, r).await?),
                WriteOp::Expire { now_ms, limit } => {
                    WriteOutcome::Expire(Self::expire_due(&mut tx, *now_ms, *limit).await?)
                }
                WriteOp::CloseOverdue { now_ms, limit } => {
                    WriteOutcome::CloseOverdue(Self::close_overdue(&mut tx, *now_ms, *limit).await?)
                }
            });
        }
        Self::flush_run(&mut tx, ops, &run, &mut outcomes).await?;
        // Usage in the same transaction as the writes it counts.
        for ((tenant_id, hour_ms, metric), value) in
            crate::storage::store::metering::additions(ops, &outcomes)
        {
            Self::upsert_usage(&mut tx, &tenant_id, hour_ms, metric, value).await?;
        }
        tx.commit().await?;
        outcomes
            .into_iter()
            .map(|o| o.ok_or_else(|| StoreError::Corrupt("a write got no outcome".into())))
            .collect()
    }

    async fn inbox_after(
        &self,
        tenant_id: &str,
        peer_id: &str,
        after_seq: i64,
        pending_only: bool,
        limit: i64,
    ) -> Result<Vec<InboxEntry>> {
        self.inbox_after_sql(tenant_id, peer_id, after_seq, pending_only, limit)
            .await
    }

    async fn find_session(
        &self,
        tenant_id: &str,
        named: Option<&str>,
        runtime_session_id: &str,
        backend: &str,
    ) -> Result<Option<SessionRecord>> {
        Self::find_session_sql(&self.pool, tenant_id, named, runtime_session_id, backend).await
    }

    async fn bind_session(&self, bind: &SessionBind) -> Result<SessionWithRuntimes> {
        Self::bind_session_sql(&self.pool, bind).await
    }

    async fn list_sessions(&self, tenant_id: &str) -> Result<Vec<SessionWithRuntimes>> {
        Self::list_sessions_sql(&self.pool, tenant_id).await
    }

    async fn get_session(
        &self,
        tenant_id: &str,
        session_id: &str,
    ) -> Result<Option<SessionRecord>> {
        Self::get_session_sql(&self.pool, tenant_id, session_id).await
    }

    async fn list_questions(
        &self,
        tenant_id: &str,
        asker: Option<&str>,
        closed: bool,
        limit: i64,
    ) -> Result<Vec<QuestionRecord>> {
        Self::questions_page(&self.pool, tenant_id, asker, closed, limit).await
    }

    async fn message_status(
        &self,
        tenant_id: &str,
        sender: &str,
        key: &MessageKey,
    ) -> Result<Option<MessageStatus>> {
        self.message_status_sql(tenant_id, sender, key).await
    }
}
