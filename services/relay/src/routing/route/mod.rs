//! Handlers for frames from client daemons, one file per concern. Semantics live here:
//! registration and reclaim, name resolution and circles, asks/acks/notifies/broadcasts,
//! receipts, replay and status.
//!
//! Handlers answer through the connection's queue. Writes go to the writer, whose dispatcher
//! answers `accepted`/`error` after commit; everything else answers directly.

mod conversation;
mod inbox;
mod message;
mod peers;
mod questions;
mod register;
mod resolve;
mod session;
mod sessions;
mod state;

pub use peers::went_offline;
pub(crate) use register::catch_up;
pub use register::{DASHBOARD_BACKEND, run_catch_ups};

use std::time::Instant;

use repowire_protocol::{Body, ErrorCode, Frame, MessageId};

use session::Handled;
pub use session::{Refusal, Session};

use crate::telemetry::Trace;

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
        Body::ListQuestions(l) => questions::list(s, id, l).await,
        Body::BindSession(b) => sessions::bind(s, id, b).await,
        Body::ListSessions(l) => sessions::list(s, id, l).await,
        Body::Converse(c) => conversation::converse(s, id, c, started).await,
        Body::Turn(t) => conversation::turn(s, id, t, started).await,
        Body::EndConversation(e) => conversation::end(s, id, e, started).await,
        other => Err(Refusal::new(
            ErrorCode::UnexpectedFrame,
            format!(
                "`{}` frames are sent by the relay, not to it",
                other.type_name()
            ),
        )),
    }
}
