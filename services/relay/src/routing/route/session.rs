//! One connection's routing context ([`Session`]) and how handlers answer: a [`Refusal`]
//! becomes an `error` frame; writes go to the writer with the connection's ordering and
//! backpressure.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

use tokio::sync::Semaphore;

use repowire_protocol::{Body, ErrorCode, ErrorFrame, MessageId, PeerSummary};

use crate::routing::dispatch::frame_text;
use crate::routing::hub::{ConnId, LivePeer};
use crate::state::AppState;
use crate::storage::store::WriteOp;
use crate::storage::writer::Origin;

/// One authenticated connection's context.
#[derive(Debug, Clone)]
pub struct Session {
    /// Shared state.
    pub state: AppState,
    /// Tenant of the token.
    pub tenant_id: String,
    /// This connection.
    pub conn: ConnId,
    /// The API key it authenticated with.
    pub key_id: String,
    /// The connection's key has the `approve` scope: its peers of an approving role may answer
    /// questions to `@approvers`.
    pub approves: bool,
    /// Writes this connection may have queued and not yet committed: waiting for a permit
    /// stops the connection's reader, so a client cannot grow the shared writer queue at will.
    pub writes: Arc<Semaphore>,
    /// The writer lane of this connection's last write (`NO_LANE` before the first).
    last_lane: Arc<AtomicUsize>,
}

/// `Session::last_lane` before any write.
const NO_LANE: usize = usize::MAX;

impl Session {
    /// A session for a new connection of key `key_id`; `approves`: the key has the `approve`
    /// scope.
    pub fn new(
        state: AppState,
        tenant_id: String,
        (conn, key_id): (ConnId, String),
        approves: bool,
    ) -> Self {
        let writes = Arc::new(Semaphore::new(state.config.inflight_writes.max(1)));
        Self {
            state,
            tenant_id,
            conn,
            key_id,
            approves,
            writes,
            last_lane: Arc::new(AtomicUsize::new(NO_LANE)),
        }
    }
}

/// A refused request: becomes an `error` frame answering it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    /// Code.
    pub code: ErrorCode,
    /// Why, with a hint.
    pub message: String,
    /// For ambiguous names.
    pub candidates: Vec<PeerSummary>,
    /// For rate limits.
    pub retry_after_ms: Option<u64>,
}

impl Refusal {
    /// A refusal.
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
            candidates: Vec::new(),
            retry_after_ms: None,
        }
    }

    pub(super) fn unavailable(error: impl std::fmt::Display) -> Self {
        tracing::warn!(%error, "storage unavailable while handling a frame");
        Self::new(
            ErrorCode::Unavailable,
            "storage is unavailable; nothing changed, retry later",
        )
    }
}

impl From<crate::storage::store::StoreError> for Refusal {
    fn from(e: crate::storage::store::StoreError) -> Self {
        Self::unavailable(e)
    }
}

impl From<crate::tenancy::limits::enforce::LimitRefusal> for Refusal {
    fn from(r: crate::tenancy::limits::enforce::LimitRefusal) -> Self {
        Self {
            code: r.code,
            message: r.message,
            candidates: Vec::new(),
            retry_after_ms: r.retry_after_ms,
        }
    }
}

/// What a handler returns: done (it answered), or a refusal to answer with.
pub(super) type Handled = Result<(), Refusal>;

impl Session {
    /// Queues a frame to this connection.
    pub fn send(&self, body: Body) {
        self.state
            .hub
            .send_to_conn(&self.tenant_id, self.conn, frame_text(body));
    }

    /// Sends an error frame and counts it.
    pub fn refuse(&self, re: Option<MessageId>, r: Refusal) {
        self.state.metrics.error(r.code);
        self.send(Body::Error(ErrorFrame {
            re,
            code: r.code,
            message: r.message,
            candidates: r.candidates,
            retry_after_ms: r.retry_after_ms,
        }));
    }

    /// The peer, if this connection holds it.
    pub(super) fn own(&self, peer_id: &str) -> Result<LivePeer, Refusal> {
        self.state
            .hub
            .owned_peer(&self.tenant_id, self.conn, peer_id)
            .ok_or_else(|| {
                Refusal::new(
                    ErrorCode::NotRegistered,
                    format!(
                        "peer {peer_id} is not registered on this connection; send `register` first"
                    ),
                )
            })
    }

    pub(super) async fn submit(
        &self,
        re: MessageId,
        op: WriteOp,
        recipients: Vec<PeerSummary>,
        started: Instant,
    ) -> Handled {
        let shutting_down = || {
            Refusal::new(
                ErrorCode::ShuttingDown,
                "the relay is shutting down; reconnect",
            )
        };
        // A connection's frames take effect in the order received. Its writes in one writer lane
        // commit in order; before its first write in the other lane (a receipt after an ask,
        // an ack after receipts), the ones still in flight commit.
        let lane = self.state.writer.lane_of(&op);
        let previous = self.last_lane.swap(lane, Ordering::Relaxed);
        if previous != lane && previous != NO_LANE {
            let all = self.state.config.inflight_writes.max(1);
            let settled = self
                .writes
                .acquire_many(u32::try_from(all).unwrap_or(u32::MAX))
                .await
                .map_err(|_| shutting_down())?;
            drop(settled);
        }
        let permit = self
            .writes
            .clone()
            .acquire_owned()
            .await
            .map_err(|_| shutting_down())?;
        let origin = Origin {
            tenant_id: self.tenant_id.clone(),
            conn: self.conn,
            re,
            recipients,
            started,
            trace: crate::telemetry::request(),
        };
        self.state
            .writer
            .submit(op, Some(origin), Some(permit))
            .map_err(|_| shutting_down())
    }
}
