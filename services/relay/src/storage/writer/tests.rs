//! The writer under a store that fails, stalls or holds writes on purpose.

use std::sync::Mutex;

use async_trait::async_trait;
use repowire_protocol::MessageKind;

use super::*;
use crate::storage::store::*;

/// Fails any transaction that contains a message with id `poison`, like a database
/// refusing one row of a batch; with `down`, fails every transaction as an unreachable
/// database would. Counts transactions. Every other store method is unused here.
#[derive(Default)]
struct PoisonStore {
    down: bool,
    calls: std::sync::atomic::AtomicUsize,
    /// Receipts get a lane of their own.
    parallel: bool,
    /// A batch with an accept waits for a permit here before it commits.
    hold_accepts: Option<Arc<tokio::sync::Semaphore>>,
}

fn unused<T>() -> crate::storage::store::Result<T> {
    Err(StoreError::Corrupt("not used by this test".into()))
}

#[async_trait]
impl Store for PoisonStore {
    fn backend(&self) -> &'static str {
        "poison"
    }
    async fn ping(&self) -> crate::storage::store::Result<()> {
        Ok(())
    }
    fn parallel_receipts(&self) -> bool {
        self.parallel
    }
}

#[async_trait]
impl TenantStore for PoisonStore {
    async fn create_tenant(&self, _: &TenantRecord) -> crate::storage::store::Result<()> {
        unused()
    }
    async fn create_tenant_with_key(
        &self,
        _: &TenantRecord,
        _: &ApiKeyRecord,
    ) -> crate::storage::store::Result<()> {
        unused()
    }
    async fn set_tenant_suspended(
        &self,
        _: &str,
        _: Option<i64>,
    ) -> crate::storage::store::Result<bool> {
        unused()
    }
    async fn list_tenants_page(
        &self,
        _: &crate::storage::store::TenantFilter,
        _: i64,
    ) -> crate::storage::store::Result<Vec<TenantRecord>> {
        unused()
    }
    async fn delete_tenant(&self, _: &str, _: i64) -> crate::storage::store::Result<bool> {
        unused()
    }
    async fn purge_tenant(&self, _: &str) -> crate::storage::store::Result<bool> {
        unused()
    }
    async fn deleted_before(&self, _: i64) -> crate::storage::store::Result<Vec<String>> {
        unused()
    }
    async fn insert_audit(
        &self,
        _: &crate::storage::store::AuditEvent,
    ) -> crate::storage::store::Result<()> {
        unused()
    }
    async fn list_audit(
        &self,
        _: &crate::storage::store::AuditFilter,
        _: i64,
    ) -> crate::storage::store::Result<Vec<crate::storage::store::AuditEvent>> {
        unused()
    }
    async fn list_tenants(&self) -> crate::storage::store::Result<Vec<TenantRecord>> {
        unused()
    }
    async fn update_tenant(&self, _: &TenantRecord) -> crate::storage::store::Result<bool> {
        unused()
    }
    async fn create_plan(
        &self,
        _: &crate::storage::store::PlanRecord,
    ) -> crate::storage::store::Result<()> {
        unused()
    }
    async fn list_plans(
        &self,
    ) -> crate::storage::store::Result<Vec<crate::storage::store::PlanRecord>> {
        unused()
    }
    async fn get_plan(
        &self,
        _: &str,
    ) -> crate::storage::store::Result<Option<crate::storage::store::PlanRecord>> {
        unused()
    }
    async fn update_plan(
        &self,
        _: &crate::storage::store::PlanRecord,
    ) -> crate::storage::store::Result<bool> {
        unused()
    }
    async fn find_tenant(
        &self,
        _: crate::storage::store::TenantKey<'_>,
    ) -> crate::storage::store::Result<Option<TenantRecord>> {
        unused()
    }
}

#[async_trait]
impl KeyStore for PoisonStore {
    async fn key_used(&self, _: &str, _: i64) -> crate::storage::store::Result<()> {
        unused()
    }
    async fn unusable_keys(
        &self,
        _: &[String],
        _: i64,
    ) -> crate::storage::store::Result<Vec<crate::storage::store::UnusableKey>> {
        unused()
    }
    async fn insert_api_key_once(
        &self,
        _: &ApiKeyRecord,
        _: &str,
        _: &str,
    ) -> crate::storage::store::Result<Option<crate::storage::store::KeyRequest>> {
        unused()
    }
    async fn set_key_expiry(&self, _: &str, _: Option<i64>) -> crate::storage::store::Result<bool> {
        unused()
    }
    async fn forget_key_requests(&self, _: i64) -> crate::storage::store::Result<u64> {
        unused()
    }
    async fn list_api_keys_page(
        &self,
        _: &str,
        _: Option<(i64, String)>,
        _: i64,
    ) -> crate::storage::store::Result<Vec<ApiKeyRecord>> {
        unused()
    }
    async fn insert_admin_token(
        &self,
        _: &crate::storage::store::AdminTokenRecord,
    ) -> crate::storage::store::Result<()> {
        unused()
    }
    async fn admin_token_by_hash(
        &self,
        _: &str,
    ) -> crate::storage::store::Result<Option<crate::storage::store::AdminTokenRecord>> {
        unused()
    }
    async fn list_admin_tokens(
        &self,
    ) -> crate::storage::store::Result<Vec<crate::storage::store::AdminTokenRecord>> {
        unused()
    }
    async fn revoke_admin_token(&self, _: &str, _: i64) -> crate::storage::store::Result<bool> {
        unused()
    }
    async fn admin_token_used(&self, _: &str, _: i64) -> crate::storage::store::Result<()> {
        unused()
    }
    async fn insert_api_key(&self, _: &ApiKeyRecord) -> crate::storage::store::Result<()> {
        unused()
    }
    async fn find_api_key_by_hash(
        &self,
        _: &str,
    ) -> crate::storage::store::Result<Option<ApiKeyRecord>> {
        unused()
    }
    async fn get_api_key(&self, _: &str) -> crate::storage::store::Result<Option<ApiKeyRecord>> {
        unused()
    }
    async fn list_api_keys(&self, _: &str) -> crate::storage::store::Result<Vec<ApiKeyRecord>> {
        unused()
    }
    async fn revoke_api_key(&self, _: &str, _: i64) -> crate::storage::store::Result<bool> {
        unused()
    }
}

#[async_trait]
impl UsageStore for PoisonStore {
    async fn usage_rows(
        &self,
        _: Option<&str>,
        _: i64,
        _: i64,
    ) -> crate::storage::store::Result<Vec<crate::storage::store::UsageRow>> {
        unused()
    }
    async fn messages_counted(
        &self,
        _: &str,
        _: i64,
        _: i64,
    ) -> crate::storage::store::Result<i64> {
        unused()
    }
    async fn add_usage(
        &self,
        _: &[crate::storage::store::UsageAdd],
    ) -> crate::storage::store::Result<()> {
        unused()
    }
}

#[async_trait]
impl PeerStore for PoisonStore {
    async fn upsert_peer(&self, _: &PeerRecord) -> crate::storage::store::Result<()> {
        unused()
    }
    async fn insert_peer_bounded(
        &self,
        _: &PeerRecord,
        _: &crate::storage::store::PeerRoom<'_>,
    ) -> crate::storage::store::Result<crate::storage::store::PeerAdmission> {
        unused()
    }
    async fn stored_peers(&self, _: &str) -> crate::storage::store::Result<i64> {
        unused()
    }
    async fn get_peer(
        &self,
        _: &str,
        _: &str,
    ) -> crate::storage::store::Result<Option<PeerRecord>> {
        unused()
    }
    async fn peers_named(
        &self,
        _: &str,
        _: &str,
    ) -> crate::storage::store::Result<Vec<PeerRecord>> {
        unused()
    }
    async fn list_peers(&self, _: &str) -> crate::storage::store::Result<Vec<PeerRecord>> {
        unused()
    }
    async fn set_description(
        &self,
        _: &str,
        _: &str,
        _: Option<&str>,
        _: i64,
    ) -> crate::storage::store::Result<()> {
        unused()
    }
    async fn touch_peer(&self, _: &str, _: &str, _: i64) -> crate::storage::store::Result<()> {
        unused()
    }
    async fn clear_description(
        &self,
        _: &str,
        _: &str,
        _: i64,
    ) -> crate::storage::store::Result<()> {
        unused()
    }
    async fn state_set(
        &self,
        _: &str,
        _: &str,
        _: &str,
        _: Option<&str>,
        _: &str,
        _: i64,
        _: usize,
        _: Option<i64>,
    ) -> crate::storage::store::Result<crate::storage::store::StateWrite> {
        unused()
    }
    async fn state_bytes(&self, _: &str) -> crate::storage::store::Result<i64> {
        unused()
    }
    async fn state_get(
        &self,
        _: &str,
        _: &str,
        _: Option<&str>,
    ) -> crate::storage::store::Result<Vec<crate::storage::store::StateRecord>> {
        unused()
    }
}

#[async_trait]
impl MessageStore for PoisonStore {
    async fn apply(&self, ops: &[WriteOp]) -> crate::storage::store::Result<Vec<WriteOutcome>> {
        self.calls.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        if let Some(gate) = &self.hold_accepts
            && ops.iter().any(|op| matches!(op, WriteOp::Accept(_)))
        {
            gate.acquire().await.expect("gate open").forget();
        }
        if self.down {
            return Err(StoreError::Unavailable(sqlx::Error::PoolTimedOut));
        }
        let poisoned = ops
            .iter()
            .any(|op| matches!(op, WriteOp::Accept(m) if m.message_id == "poison"));
        if poisoned {
            return Err(StoreError::Conflict("the database refused one row".into()));
        }
        Ok(ops
            .iter()
            .map(|_| {
                WriteOutcome::Accept(AcceptOutcome::Accepted {
                    enqueued: Vec::new(),
                    refused: Vec::new(),
                    correlation_id: None,
                    closed_prior: None,
                    conversation: None,
                })
            })
            .collect())
    }
    async fn inbox_after(
        &self,
        _: &str,
        _: &str,
        _: i64,
        _: bool,
        _: i64,
    ) -> crate::storage::store::Result<Vec<InboxEntry>> {
        unused()
    }
    async fn message_status(
        &self,
        _: &str,
        _: &str,
        _: &MessageKey,
    ) -> crate::storage::store::Result<Option<MessageStatus>> {
        unused()
    }
    async fn idle_conversations(
        &self,
        _: i64,
        _: i64,
    ) -> crate::storage::store::Result<Vec<(String, String)>> {
        unused()
    }
    async fn live_conversations_of(
        &self,
        _: &str,
        _: &str,
    ) -> crate::storage::store::Result<Vec<String>> {
        unused()
    }
    async fn list_questions(
        &self,
        _: &str,
        _: Option<&str>,
        _: bool,
        _: i64,
    ) -> crate::storage::store::Result<Vec<crate::storage::store::QuestionRecord>> {
        unused()
    }
}

#[async_trait]
impl SessionStore for PoisonStore {
    async fn find_session(
        &self,
        _: &str,
        _: Option<&str>,
        _: &str,
        _: &str,
    ) -> crate::storage::store::Result<Option<crate::storage::store::SessionRecord>> {
        unused()
    }
    async fn bind_session(
        &self,
        _: &crate::storage::store::SessionBind,
    ) -> crate::storage::store::Result<crate::storage::store::SessionWithRuntimes> {
        unused()
    }
    async fn list_sessions(
        &self,
        _: &str,
    ) -> crate::storage::store::Result<Vec<crate::storage::store::SessionWithRuntimes>> {
        unused()
    }
    async fn get_session(
        &self,
        _: &str,
        _: &str,
    ) -> crate::storage::store::Result<Option<crate::storage::store::SessionRecord>> {
        unused()
    }
}

#[async_trait]
impl crate::storage::store::DashboardStore for PoisonStore {
    async fn create_dashboard_link(
        &self,
        _: &crate::storage::store::DashboardLink,
    ) -> crate::storage::store::Result<()> {
        unused()
    }
    async fn take_dashboard_link(
        &self,
        _: &str,
        _: i64,
    ) -> crate::storage::store::Result<Option<crate::storage::store::DashboardLink>> {
        unused()
    }
    async fn peek_dashboard_link(
        &self,
        _: &str,
        _: i64,
    ) -> crate::storage::store::Result<Option<crate::storage::store::DashboardLink>> {
        unused()
    }
    async fn create_dashboard_session(
        &self,
        _: &crate::storage::store::DashboardSession,
    ) -> crate::storage::store::Result<()> {
        unused()
    }
    async fn find_dashboard_session(
        &self,
        _: &str,
        _: i64,
    ) -> crate::storage::store::Result<Option<crate::storage::store::DashboardSession>> {
        unused()
    }
    async fn end_dashboard_session(&self, _: &str, _: i64) -> crate::storage::store::Result<bool> {
        unused()
    }
    async fn recent_asks(
        &self,
        _: &str,
        _: i64,
    ) -> crate::storage::store::Result<Vec<crate::storage::store::AskOverview>> {
        unused()
    }
}

#[derive(Default)]
struct Record(Mutex<Vec<(String, bool)>>);

fn id_of(op: &WriteOp) -> String {
    match op {
        WriteOp::Accept(m) => m.message_id.clone(),
        WriteOp::Receipt(r) => format!("receipt of {}", r.message_id),
        _ => String::new(),
    }
}

impl AfterCommit for Record {
    fn committed(&self, op: &WriteOp, _: &WriteOutcome, _: Option<&Origin>) {
        self.0.lock().expect("lock").push((id_of(op), true));
    }
    fn failed(&self, op: &WriteOp, _: &StoreError, _: Option<&Origin>) {
        self.0.lock().expect("lock").push((id_of(op), false));
    }
}

fn accept(id: &str) -> WriteOp {
    WriteOp::Accept(NewMessage {
        tenant_id: "t".into(),
        message_id: id.into(),
        kind: MessageKind::Notify,
        from_peer_id: "a".into(),
        from_name: "a".into(),
        from_circle: "dev".into(),
        body: "x".into(),
        correlation_id: None,
        reply_to: None,
        question: None,
        answer: None,
        content_hash: String::new(),
        created_at_ms: 0,
        expires_at_ms: 0,
        deadline_ms: None,
        from_session_id: None,
        to_session_id: None,
        recipients: vec!["b".into()],
        inbox_cap: 10,
        traceparent: None,
        conversation: None,
    })
}

/// Queues `ids` as accepts (before the writer task first runs, so they share one batch),
/// flushes, and returns what the dispatcher saw: (id, committed) in order.
async fn run_batch(
    store: Arc<PoisonStore>,
    metrics: Arc<Metrics>,
    ids: &[&str],
) -> Vec<(String, bool)> {
    let record = Arc::new(Record::default());
    let (writer, _task) = Writer::spawn(store, record.clone(), metrics, 16);
    for id in ids {
        writer
            .submit(accept(id), None, None)
            .expect("writer running");
    }
    writer.flush().await.expect("flushed");
    record.0.lock().expect("lock").clone()
}

fn seen(v: &[(&str, bool)]) -> Vec<(String, bool)> {
    v.iter().map(|(id, ok)| (id.to_string(), *ok)).collect()
}

#[tokio::test]
async fn one_failing_write_does_not_fail_the_others_in_its_batch() {
    let metrics = Arc::new(Metrics::new());
    let got = run_batch(
        Arc::new(PoisonStore::default()),
        metrics.clone(),
        &["good-1", "poison", "good-2"],
    )
    .await;
    assert_eq!(
        got,
        seen(&[("good-1", true), ("poison", false), ("good-2", true)]),
        "each write is answered once, in order, and only the bad one fails"
    );
    let rendered = metrics.render();
    assert!(
        rendered.contains("repowire_write_batch_size_sum{lane=\"all\"} 3.0")
            && rendered.contains("repowire_write_batch_size_count{lane=\"all\"} 1"),
        "the three writes were one batch before the retry:\n{rendered}"
    );
}

#[tokio::test]
async fn an_unreachable_database_fails_the_batch_at_once_without_retrying_each_write() {
    let store = Arc::new(PoisonStore {
        down: true,
        ..PoisonStore::default()
    });
    let got = run_batch(store.clone(), Arc::new(Metrics::new()), &["a", "b", "c"]).await;
    assert_eq!(got, seen(&[("a", false), ("b", false), ("c", false)]));
    assert_eq!(
        store.calls.load(std::sync::atomic::Ordering::SeqCst),
        1,
        "one attempt, not one per write"
    );
}

/// With a lane of their own, receipts do not wait for a message write's transaction: the
/// receipt commits and is dispatched while the accept is still held in its transaction, and
/// a flush waits for both lanes.
#[tokio::test]
async fn a_receipt_commits_while_a_message_write_is_still_in_its_transaction() {
    let gate = Arc::new(tokio::sync::Semaphore::new(0));
    let store = Arc::new(PoisonStore {
        parallel: true,
        hold_accepts: Some(gate.clone()),
        ..PoisonStore::default()
    });
    let record = Arc::new(Record::default());
    let (writer, _task) = Writer::spawn(store, record.clone(), Arc::new(Metrics::new()), 16);
    writer
        .submit(accept("m1"), None, None)
        .expect("writer running");
    let receipt = WriteOp::Receipt(ReceiptOp {
        tenant_id: "t".into(),
        peer_id: "b".into(),
        message_id: "m0".into(),
        state: repowire_protocol::DeliveryState::Delivered,
        reason: None,
        now_ms: 0,
    });
    // A deadline only for the failure (one lane: the receipt waits behind the held accept).
    let outcome = tokio::time::timeout(std::time::Duration::from_secs(10), writer.write(receipt))
        .await
        .expect("the receipt waited for the message lane")
        .expect("writer running");
    assert!(outcome.is_ok(), "{outcome:?}");
    assert_eq!(
        record.0.lock().expect("lock").clone(),
        seen(&[("receipt of m0", true)])
    );
    gate.add_permits(1);
    writer.flush().await.expect("flushed");
    assert_eq!(
        record.0.lock().expect("lock").clone(),
        seen(&[("receipt of m0", true), ("m1", true)])
    );
}

#[async_trait]
impl crate::storage::store::MemberStore for PoisonStore {
    async fn add_member(
        &self,
        _: &crate::storage::store::MemberRecord,
    ) -> crate::storage::store::Result<bool> {
        unused()
    }
    async fn list_members(
        &self,
        _: &str,
    ) -> crate::storage::store::Result<Vec<crate::storage::store::MemberRecord>> {
        unused()
    }
    async fn get_member(
        &self,
        _: &str,
    ) -> crate::storage::store::Result<Option<crate::storage::store::MemberRecord>> {
        unused()
    }
    async fn remove_member(&self, _: &str, _: &str, _: i64) -> crate::storage::store::Result<bool> {
        unused()
    }
    async fn sign_in_member(
        &self,
        _: &str,
        _: &str,
        _: Option<&str>,
        _: i64,
    ) -> crate::storage::store::Result<Vec<crate::storage::store::MemberRecord>> {
        unused()
    }
    async fn create_oidc_attempt(
        &self,
        _: &crate::storage::store::OidcAttempt,
    ) -> crate::storage::store::Result<()> {
        unused()
    }
    async fn take_oidc_attempt(
        &self,
        _: &str,
        _: i64,
    ) -> crate::storage::store::Result<Option<crate::storage::store::OidcAttempt>> {
        unused()
    }
}
