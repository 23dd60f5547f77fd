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
mod conversation_ends;
mod conversations;
mod dashboard;
mod keys;
mod members;
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

use super::{BACKEND, BEGIN_WRITE, Db, LOCK_ASK, LOCK_ROW, This};

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
}

#[async_trait::async_trait]
impl MessageStore for This {
    async fn apply(&self, ops: &[WriteOp]) -> Result<Vec<WriteOutcome>> {
        let mut tx = self.pool.begin_with(BEGIN_WRITE).await?;
        // Before any peer row (see `conversations`).
        Self::lock_conversations(&mut tx, ops).await?;
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
                WriteOp::EndConversation(e) => {
                    WriteOutcome::EndConversation(Self::end_by_relay(&mut tx, e).await?)
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

    async fn idle_conversations(
        &self,
        before_ms: i64,
        limit: i64,
    ) -> Result<Vec<(String, String)>> {
        self.idle_conversations_sql(before_ms, limit).await
    }

    async fn live_conversations_of(&self, tenant_id: &str, peer_id: &str) -> Result<Vec<String>> {
        self.live_conversations_of_sql(tenant_id, peer_id).await
    }
}
