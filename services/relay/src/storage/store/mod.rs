//! Durable storage: tenants, API keys, peers, messages and inboxes.
//!
//! [`Store`] is the one interface the relay uses; [`postgres::PgStore`] (production) and
//! [`sqlite::SqliteStore`] (embedded) implement it with the same SQL body (`sql/`, compiled once per backend), and the
//! same behaviour tests run against both. Every statement on peers, messages and inboxes filters
//! on the tenant id, so nothing here reads or writes across tenants; the exceptions are the
//! tenant and key tables themselves (keys are found by hash or id, then carry their tenant) and
//! the expiry sweep, which selects due entries of all tenants and writes each under its own.
//!
//! Writes that move inbox state go through [`Store::apply`] as a batch of [`WriteOp`]s in one
//! transaction (group commit); the relay's writer task builds the batches.

use std::sync::Arc;

use async_trait::async_trait;

mod dashboard;
mod members;
pub mod metering;
#[cfg(feature = "postgres")]
pub mod postgres;
mod questions;
mod records;
mod sessions;
mod shared;
pub mod sqlite;

pub use dashboard::*;
pub use members::*;
pub use questions::*;
pub use records::*;
pub use sessions::*;
pub(crate) use shared::INBOX_FULL_REASON;

/// How a tenant is looked up: each lookup says which column it means.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TenantKey<'a> {
    /// By id (`tnt-…`).
    Id(&'a str),
    /// By name.
    Name(&'a str),
}

/// Storage failures. Expected outcomes (duplicates, full inboxes, unknown asks) are not errors:
/// they are variants of the operation's outcome.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The database could not be reached or failed; nothing was committed.
    #[error("database unavailable: {0}")]
    Unavailable(#[from] sqlx::Error),
    /// Migrations failed, or the schema is newer than this relay.
    #[error("{}", migrate_message(.0))]
    Migrate(#[from] sqlx::migrate::MigrateError),
    /// A row held data this version cannot read.
    #[error("corrupt row: {0}")]
    Corrupt(String),
    /// A uniqueness rule refused the insert (e.g. a tenant name already taken).
    #[error("{0}")]
    Conflict(String),
}

/// What a failed migration means for the operator of the relay.
fn migrate_message(e: &sqlx::migrate::MigrateError) -> String {
    match e {
        sqlx::migrate::MigrateError::VersionMissing(v) => format!(
            "the database schema has migration {v}, which this relay does not know: a newer \
             relay migrated it. This relay will not serve on a schema it does not know; run \
             that version or a newer one"
        ),
        other => format!("migration failed: {other}"),
    }
}

impl StoreError {
    /// True for a transaction another one got in the way of (Postgres deadlock `40P01` or
    /// serialization failure `40001`): nothing was committed and the same batch may simply be
    /// applied again.
    pub fn is_transient_conflict(&self) -> bool {
        matches!(self, StoreError::Unavailable(sqlx::Error::Database(e))
            if matches!(e.code().as_deref(), Some("40P01" | "40001")))
    }

    /// True when the failure may be about one write of a batch (a constraint, an unreadable
    /// row), so retrying the writes one by one isolates it. False when the database itself is
    /// unreachable: retrying each write would only stall the writer.
    pub fn may_be_one_write(&self) -> bool {
        match self {
            StoreError::Conflict(_) | StoreError::Corrupt(_) => true,
            StoreError::Unavailable(e) => matches!(
                e,
                sqlx::Error::Database(_)
                    | sqlx::Error::Decode(_)
                    | sqlx::Error::ColumnDecode { .. }
            ),
            StoreError::Migrate(_) => false,
        }
    }
}

/// Result alias for storage calls.
pub type Result<T, E = StoreError> = std::result::Result<T, E>;

/// The storage interface: every role below, plus what the relay asks of the store itself.
/// Callers bring into scope the roles they use, so an import says what a module reads and
/// writes.
#[async_trait]
pub trait Store:
    TenantStore
    + KeyStore
    + UsageStore
    + PeerStore
    + MessageStore
    + SessionStore
    + DashboardStore
    + MemberStore
    + 'static
{
    /// `postgres` or `sqlite`.
    fn backend(&self) -> &'static str;
    /// Cheap liveness check for `/readyz`.
    async fn ping(&self) -> Result<()>;
    /// A store of the writer's own, if this backend wants one. Called on the writer's thread
    /// (see [`crate::storage::writer`]); `None`: the writer shares this store.
    fn writer_store(&self) -> Option<Arc<dyn Store>> {
        None
    }
    /// Closes this store's connections (the writer's own store, when the writer ends).
    async fn close(&self) {}
    /// True if receipts may commit in transactions of their own alongside message writes (see
    /// [`crate::storage::writer`]): the database runs concurrent transactions, and the two kinds update
    /// different rows of a peer.
    fn parallel_receipts(&self) -> bool {
        false
    }
}

/// Tenants and plans, their lifecycle (suspend, delete, purge) and the admin audit log.
#[async_trait]
pub trait TenantStore: Send + Sync {
    /// Creates a tenant; `Conflict` if the name is taken.
    async fn create_tenant(&self, tenant: &TenantRecord) -> Result<()>;
    /// Creates a tenant and its first key in one transaction; `Conflict` (and nothing stored)
    /// if the name is taken.
    async fn create_tenant_with_key(&self, tenant: &TenantRecord, key: &ApiKeyRecord)
    -> Result<()>;
    /// All tenants, oldest first.
    async fn list_tenants(&self) -> Result<Vec<TenantRecord>>;
    /// One tenant, by id or by name as the key says (never either: a name could be another
    /// tenant's id).
    async fn find_tenant(&self, key: TenantKey<'_>) -> Result<Option<TenantRecord>>;
    /// Replaces a tenant's plan, display name and overrides; false if there is no such tenant.
    async fn update_tenant(&self, tenant: &TenantRecord) -> Result<bool>;
    /// Creates a plan; `Conflict` if the name is taken.
    async fn create_plan(&self, plan: &PlanRecord) -> Result<()>;
    /// All plans, by name.
    async fn list_plans(&self) -> Result<Vec<PlanRecord>>;
    /// One plan by name.
    async fn get_plan(&self, name: &str) -> Result<Option<PlanRecord>>;
    /// Replaces a plan's description and limits; false if there is no such plan.
    async fn update_plan(&self, plan: &PlanRecord) -> Result<bool>;
    /// A page of tenants in listing order (`created_at_ms`, `id`).
    async fn list_tenants_page(
        &self,
        filter: &TenantFilter,
        limit: i64,
    ) -> Result<Vec<TenantRecord>>;
    /// Marks a tenant deleted and revokes every key of it, in one transaction; false if there
    /// is no such tenant or it was deleted already.
    async fn delete_tenant(&self, tenant_id: &str, now_ms: i64) -> Result<bool>;
    /// Removes every row of a deleted tenant; false (and nothing removed) unless it exists and
    /// is deleted.
    async fn purge_tenant(&self, tenant_id: &str) -> Result<bool>;
    /// Tenants deleted before `before_ms` (due for the purge).
    async fn deleted_before(&self, before_ms: i64) -> Result<Vec<String>>;
    /// Stores an audit event.
    async fn insert_audit(&self, event: &AuditEvent) -> Result<()>;
    /// A page of audit events, oldest first.
    async fn list_audit(&self, filter: &AuditFilter, limit: i64) -> Result<Vec<AuditEvent>>;
    /// Suspends (`Some(time)`) or resumes (`None`) a tenant; false if there is no such tenant.
    async fn set_tenant_suspended(&self, tenant_id: &str, at_ms: Option<i64>) -> Result<bool>;
}

/// API keys (tenants' credentials) and admin tokens (the service operator's).
#[async_trait]
pub trait KeyStore: Send + Sync {
    /// Stores a new API key (hash only).
    async fn insert_api_key(&self, key: &ApiKeyRecord) -> Result<()>;
    /// Stores `key` for the request `(tenant, idempotency_key)` unless that request already
    /// made a key: `Ok(None)` when this call stored it, else the earlier request (and nothing
    /// stored). Atomic: of two concurrent calls, one stores.
    async fn insert_api_key_once(
        &self,
        key: &ApiKeyRecord,
        idempotency_key: &str,
        request_hash: &str,
    ) -> Result<Option<KeyRequest>>;
    /// Forgets the idempotency records of key creations made before `before_ms` (a retry
    /// after that makes a new key); returns how many.
    async fn forget_key_requests(&self, before_ms: i64) -> Result<u64>;
    /// Sets a key's expiry (rotation's grace period); false if it does not exist or is revoked.
    async fn set_key_expiry(&self, id: &str, expires_at_ms: Option<i64>) -> Result<bool>;
    /// Looks a key up by the hash of its full text.
    async fn find_api_key_by_hash(&self, hash: &str) -> Result<Option<ApiKeyRecord>>;
    /// Looks a key up by id.
    async fn get_api_key(&self, id: &str) -> Result<Option<ApiKeyRecord>>;
    /// Keys of a tenant.
    async fn list_api_keys(&self, tenant_id: &str) -> Result<Vec<ApiKeyRecord>>;
    /// Records that a key was exchanged for a token at `now_ms`.
    async fn key_used(&self, id: &str, now_ms: i64) -> Result<()>;
    /// Those of `ids` that are no longer usable at `now_ms`: revoked, expired, or of a
    /// suspended tenant.
    async fn unusable_keys(&self, ids: &[String], now_ms: i64) -> Result<Vec<UnusableKey>>;
    /// A page of a tenant's keys in listing order (`created_at_ms`, `id`), after `after`.
    async fn list_api_keys_page(
        &self,
        tenant_id: &str,
        after: Option<(i64, String)>,
        limit: i64,
    ) -> Result<Vec<ApiKeyRecord>>;
    /// Stores a minted admin token.
    async fn insert_admin_token(&self, token: &AdminTokenRecord) -> Result<()>;
    /// The admin token with this hash, revoked or not.
    async fn admin_token_by_hash(&self, hash: &str) -> Result<Option<AdminTokenRecord>>;
    /// Every admin token, oldest first.
    async fn list_admin_tokens(&self) -> Result<Vec<AdminTokenRecord>>;
    /// Revokes an admin token; false if there is none by that id or it was revoked already.
    async fn revoke_admin_token(&self, id: &str, now_ms: i64) -> Result<bool>;
    /// Records an admin token's use (for the operator's view).
    async fn admin_token_used(&self, id: &str, now_ms: i64) -> Result<()>;
    /// Revokes a key; false if it does not exist or was already revoked.
    async fn revoke_api_key(&self, id: &str, now_ms: i64) -> Result<bool>;
}

/// Metering: usage rows and the monthly message count.
#[async_trait]
pub trait UsageStore: Send + Sync {
    /// Usage rows (per tenant, hour and metric) of one tenant or all, for hours starting in
    /// `[from_ms, to_ms)`, by tenant, hour and metric.
    async fn usage_rows(
        &self,
        tenant_id: Option<&str>,
        from_ms: i64,
        to_ms: i64,
    ) -> Result<Vec<UsageRow>>;
    /// Adds usage a pod measured (connection time, peaks; see `usage::meter`) in one
    /// transaction: counts are added, peaks keep the larger value.
    async fn add_usage(&self, rows: &[UsageAdd]) -> Result<()>;
    /// The messages (every kind, see `metering::metric`) counted for a tenant in the hours
    /// starting in `[from_ms, to_ms)`.
    async fn messages_counted(&self, tenant_id: &str, from_ms: i64, to_ms: i64) -> Result<i64>;
}

/// Peers of a tenant and their circles' shared state (off the message write path).
#[async_trait]
pub trait PeerStore: Send + Sync {
    /// Inserts a new peer or replaces the identity fields of an existing one (reclaim).
    async fn upsert_peer(&self, peer: &PeerRecord) -> Result<()>;
    /// Inserts a new peer within its tenant's `max_stored_peers` (`room`), forgetting
    /// long-offline peers that hold nothing to make room; refused when there are not enough.
    async fn insert_peer_bounded(
        &self,
        peer: &PeerRecord,
        room: &PeerRoom<'_>,
    ) -> Result<PeerAdmission>;
    /// Peers a tenant stores (live and offline; not its `@approvers`).
    async fn stored_peers(&self, tenant_id: &str) -> Result<i64>;
    /// One peer of a tenant.
    async fn get_peer(&self, tenant_id: &str, peer_id: &str) -> Result<Option<PeerRecord>>;
    /// Peers of a tenant with a display name.
    async fn peers_named(&self, tenant_id: &str, name: &str) -> Result<Vec<PeerRecord>>;
    /// All peers of a tenant.
    async fn list_peers(&self, tenant_id: &str) -> Result<Vec<PeerRecord>>;
    /// Sets (or clears, with `None`) a peer's description.
    async fn set_description(
        &self,
        tenant_id: &str,
        peer_id: &str,
        description: Option<&str>,
        now_ms: i64,
    ) -> Result<()>;
    /// Clears a description set at `set_at` (expired), unless it was replaced since.
    async fn clear_description(&self, tenant_id: &str, peer_id: &str, set_at: i64) -> Result<()>;
    /// Records activity.
    async fn touch_peer(&self, tenant_id: &str, peer_id: &str, now_ms: i64) -> Result<()>;
    /// Writes (`Some`) or deletes (`None`) a key of a circle's shared state; a new key is
    /// refused when the circle already has `max_keys`.
    #[allow(clippy::too_many_arguments)]
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
    ) -> Result<StateWrite>;
    /// Bytes of shared state a tenant stores (keys and values, every circle).
    async fn state_bytes(&self, tenant_id: &str) -> Result<i64>;
    /// A circle's shared state (one key, or all of them by key).
    async fn state_get(
        &self,
        tenant_id: &str,
        circle: &str,
        key: Option<&str>,
    ) -> Result<Vec<StateRecord>>;
}

/// Messages and inboxes: the write path's batches and what reads them back.
#[async_trait]
pub trait MessageStore: Send + Sync {
    /// Applies a batch of writes in one transaction; one outcome per op, in order.
    async fn apply(&self, ops: &[WriteOp]) -> Result<Vec<WriteOutcome>>;
    /// Inbox entries of a peer after `after_seq`, oldest first; `pending_only` keeps entries
    /// not yet reported delivered. Expired and failed entries are never returned.
    async fn inbox_after(
        &self,
        tenant_id: &str,
        peer_id: &str,
        after_seq: i64,
        pending_only: bool,
        limit: i64,
    ) -> Result<Vec<InboxEntry>>;
    /// Questions sent to `@approvers` (the inbox of [`CONTROL_PEER`]): open ones oldest first,
    /// or closed ones newest first; with `asker`, only those that peer asked.
    async fn list_questions(
        &self,
        tenant_id: &str,
        asker: Option<&str>,
        closed: bool,
        limit: i64,
    ) -> Result<Vec<QuestionRecord>>;
    /// A message the given peer sent, by message id or correlation id, with its recipients.
    async fn message_status(
        &self,
        tenant_id: &str,
        sender: &str,
        key: &MessageKey,
    ) -> Result<Option<MessageStatus>>;
    /// Conversations not ended whose last turn came before `before_ms`, oldest first, at most
    /// `limit`: (tenant, conversation).
    async fn idle_conversations(&self, before_ms: i64, limit: i64)
    -> Result<Vec<(String, String)>>;
    /// The conversations a peer takes part in that have not ended.
    async fn live_conversations_of(&self, tenant_id: &str, peer_id: &str) -> Result<Vec<String>>;
}

/// Session bindings: which work stream a peer executes.
#[async_trait]
pub trait SessionStore: Send + Sync {
    /// The session a binding continues: the one named (if the tenant has it with this
    /// backend), else the one this runtime session id was last bound to.
    async fn find_session(
        &self,
        tenant_id: &str,
        named: Option<&str>,
        runtime_session_id: &str,
        backend: &str,
    ) -> Result<Option<SessionRecord>>;
    /// Records that a peer executes a work stream now: `bind.session_id` (created if it does
    /// not exist), or a new one (`new_session_id`); the runtime id is remembered with it (the
    /// newest 16 are kept, and a runtime id leads to one session only).
    async fn bind_session(&self, bind: &SessionBind) -> Result<SessionWithRuntimes>;
    /// Every session of a tenant, most recently bound first.
    async fn list_sessions(&self, tenant_id: &str) -> Result<Vec<SessionWithRuntimes>>;
    /// One session of a tenant.
    async fn get_session(&self, tenant_id: &str, session_id: &str)
    -> Result<Option<SessionRecord>>;
}

/// Logs each migration of `migrator` that was not among `before` (the versions applied before
/// it ran), so that `migrate` says what it did and not only that the schema is up to date.
pub(crate) fn log_applied(migrator: &sqlx::migrate::Migrator, before: &[i64], storage: &str) {
    let mut applied = 0;
    for m in migrator.iter().filter(|m| !before.contains(&m.version)) {
        tracing::info!(storage, version = m.version, migration = %m.description, "applied migration");
        applied += 1;
    }
    if applied > 0 {
        tracing::info!(
            storage,
            applied,
            total = migrator.iter().count(),
            "database schema migrated"
        );
    }
}
