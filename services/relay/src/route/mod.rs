//! Handlers for frames from client daemons, one file per concern. Semantics live here:
//! registration and reclaim, name resolution and circles, asks/acks/notifies/broadcasts,
//! receipts, replay and status.
//!
//! Handlers answer through the connection's queue. Writes go to the writer, whose dispatcher
//! answers `accepted`/`error` after commit; everything else answers directly.

mod inbox;
mod message;
mod peers;
mod register;
mod resolve;
mod state;

pub use peers::went_offline;
pub(crate) use register::catch_up;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

use tokio::sync::Semaphore;

use repowire_protocol::{Body, ErrorCode, ErrorFrame, Frame, MessageId, PeerSummary};

use crate::dispatch::frame_text;
use crate::hub::{ConnId, LivePeer};
use crate::state::AppState;
use crate::store::WriteOp;
use crate::telemetry::Trace;
use crate::writer::Origin;

/// One authenticated connection's context.
#[derive(Debug, Clone)]
pub struct Session {
    /// Shared state.
    pub state: AppState,
    /// Tenant of the token.
    pub tenant_id: String,
    /// This connection.
    pub conn: ConnId,
    /// Writes this connection may have queued and not yet committed: waiting for a permit
    /// stops the connection's reader, so a client cannot grow the shared writer queue at will.
    pub writes: Arc<Semaphore>,
    /// The writer lane of this connection's last write (`NO_LANE` before the first).
    last_lane: Arc<AtomicUsize>,
}

/// `Session::last_lane` before any write.
const NO_LANE: usize = usize::MAX;

impl Session {
    /// A session for a new connection.
    pub fn new(state: AppState, tenant_id: String, conn: ConnId) -> Self {
        let writes = Arc::new(Semaphore::new(state.config.inflight_writes.max(1)));
        Self {
            state,
            tenant_id,
            conn,
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

    fn unavailable(error: impl std::fmt::Display) -> Self {
        tracing::warn!(%error, "storage unavailable while handling a frame");
        Self::new(
            ErrorCode::Unavailable,
            "storage is unavailable; nothing changed, retry later",
        )
    }
}

impl From<crate::store::StoreError> for Refusal {
    fn from(e: crate::store::StoreError) -> Self {
        Self::unavailable(e)
    }
}

type Handled = Result<(), Refusal>;

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
    fn own(&self, peer_id: &str) -> Result<LivePeer, Refusal> {
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

    async fn submit(
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

/// Handles one decoded client frame.
pub async fn handle(s: &Session, frame: Frame, started: Instant) {
    let id = frame.id;
    let trace = Trace::start(
        frame.body.type_name(),
        "server",
        frame.traceparent.as_deref(),
    );
    trace
        .span()
        .record("repowire.frame_id", tracing::field::display(id));
    let result = trace
        .clone()
        .scope(handle_body(s, id, frame.body, started))
        .await;
    if let Err(refusal) = result {
        trace.in_scope(|| s.refuse(Some(id), refusal));
    }
}

async fn handle_body(s: &Session, id: MessageId, body: Body, started: Instant) -> Handled {
    match body {
        Body::Hello(_) => Err(Refusal::new(
            ErrorCode::UnexpectedFrame,
            "`hello` was already received",
        )),
        Body::Register(r) => register::register(s, id, r).await,
        Body::Unregister(r) => peers::unregister(s, id, r).await,
        Body::UpdatePeer(u) => peers::update(s, id, u).await,
        Body::ListPeers(l) => peers::list(s, id, l).await,
        Body::Ask(a) => message::ask(s, id, a, started).await,
        Body::Notify(n) => message::notify(s, id, n, started).await,
        Body::Broadcast(b) => message::broadcast(s, id, b, started).await,
        Body::Ack(a) => message::ack(s, id, a, started).await,
        Body::Answer(a) => message::answer(s, id, a, started).await,
        Body::Receipt(r) => inbox::receipt(s, id, r, started).await,
        Body::Replay(r) => inbox::replay(s, id, r),
        Body::StatusQuery(q) => inbox::status(s, id, q).await,
        Body::StateSet(st) => state::set(s, id, st).await,
        Body::StateGet(g) => state::get(s, id, g).await,
        other => Err(Refusal::new(
            ErrorCode::UnexpectedFrame,
            format!(
                "`{}` frames are sent by the relay, not to it",
                other.type_name()
            ),
        )),
    }
}
