//! `receipt`, `replay`, `status_query`: the recipient and sender sides of an inbox.

use std::time::Instant;

use repowire_protocol::{
    Body, DeliveryState, ErrorCode, MessageId, PeerSummary, Receipt, ReceiptState, RecipientState,
    Replay, ReplayDone, Status, StatusQuery,
};

use super::session::{Handled, Refusal, Session};
use crate::ids::now_ms;
use crate::routing::dispatch::{deliver_stored, frame_text, to_wire};
use crate::storage::store::{MessageKey, ReceiptOp, WriteOp};

const REPLAY_PAGE: i64 = 256;

pub(super) async fn receipt(s: &Session, id: MessageId, r: Receipt, started: Instant) -> Handled {
    s.own(r.peer_id.as_str())?;
    let state = match r.state {
        ReceiptState::Delivered => DeliveryState::Delivered,
        ReceiptState::Injected => DeliveryState::Injected,
        ReceiptState::Failed => DeliveryState::Failed,
    };
    let op = ReceiptOp {
        tenant_id: s.tenant_id.clone(),
        peer_id: r.peer_id.0,
        message_id: r.message_id.to_string(),
        state,
        reason: r.reason,
        now_ms: now_ms(),
    };
    s.submit(id, WriteOp::Receipt(op), Vec::new(), started)
        .await
}

/// Replays in a task: a long inbox must not hold up the connection's reader. Pushes wait for
/// queue space and leave headroom ([`crate::routing::hub::OutSender::send_bulk`]), so live frames pushed meanwhile still fit.
pub(super) fn replay(s: &Session, id: MessageId, r: Replay) -> Handled {
    s.own(r.peer_id.as_str())?;
    let Some(epoch) = s
        .state
        .hub
        .start_replay(&s.tenant_id, s.conn, r.peer_id.as_str())
    else {
        return Err(Refusal::new(
            ErrorCode::RateLimited,
            "a replay of this peer's inbox is already running; wait for its replay_done",
        ));
    };
    let s = s.clone();
    s.state.tracker.clone().spawn(async move {
        let peer_id = r.peer_id.0.clone();
        replay_pages(&s, id, r).await;
        s.state.hub.end_replay(&s.tenant_id, &peer_id, epoch);
    });
    Ok(())
}

async fn replay_pages(s: &Session, id: MessageId, r: Replay) {
    let peer = r.peer_id.0.clone();
    let mut cursor = i64::try_from(r.after_seq).unwrap_or(i64::MAX);
    let mut count = 0u64;
    loop {
        let entries = match s
            .state
            .store
            .inbox_after(&s.tenant_id, &peer, cursor, false, REPLAY_PAGE)
            .await
        {
            Ok(entries) => entries,
            Err(e) => return s.refuse(Some(id), Refusal::from(e)),
        };
        for e in &entries {
            let frame =
                deliver_stored(&peer, e.seq, e.state != DeliveryState::Accepted, &e.message);
            match s.state.hub.conn_sender(&s.tenant_id, s.conn, &peer, None) {
                Some(tx) if tx.send_bulk(frame).await => {}
                _ => return,
            }
            cursor = e.seq;
            count += 1;
        }
        if (entries.len() as i64) < REPLAY_PAGE {
            break;
        }
    }
    let done = ReplayDone {
        re: id,
        peer_id: r.peer_id,
        last_seq: u64::try_from(cursor).unwrap_or(0),
        count,
    };
    if let Some(tx) = s.state.hub.conn_sender(&s.tenant_id, s.conn, &peer, None) {
        tx.send_bulk(frame_text(Body::ReplayDone(done))).await;
    }
}

pub(super) async fn status(s: &Session, id: MessageId, q: StatusQuery) -> Handled {
    s.own(q.peer_id.as_str())?;
    let key = match (&q.message_id, &q.correlation_id) {
        (Some(m), _) => MessageKey::Id(m.to_string()),
        (None, Some(c)) => MessageKey::Correlation(c.0.clone()),
        (None, None) => {
            return Err(Refusal::new(
                ErrorCode::InvalidFrame,
                "give message_id or correlation_id",
            ));
        }
    };
    let Some(found) = s
        .state
        .store
        .message_status(&s.tenant_id, q.peer_id.as_str(), &key)
        .await?
    else {
        return Err(Refusal::new(
            ErrorCode::UnknownMessage,
            "no message you sent has that id",
        ));
    };
    let wire = to_wire(&found.message);
    s.send(Body::Status(Status {
        re: id,
        message_id: wire.message_id,
        kind: wire.kind,
        correlation_id: wire.correlation_id,
        recipients: found
            .recipients
            .into_iter()
            .map(|(peer_id, state, reason)| RecipientState {
                peer_id: peer_id.into(),
                state,
                reason,
            })
            .collect(),
        reply: found.message.reply_text,
        answer: wire.answer,
        answered_by: found.answered_by.map(|p| PeerSummary {
            peer_id: p.peer_id.into(),
            name: p.name,
            circle: p.circle,
        }),
        timed_out: found.timed_out,
    }));
    Ok(())
}
