//! The relay ends direct conversations on its own (protocol.md §10.15): when a participant's
//! peer is unregistered (its session ended: the daemon's own `end_conversation` is best effort,
//! and with the link down at that moment nobody would be told), and when no turn came for
//! `REPOWIRE_CONVERSATION_IDLE_SECS`. Each end is one write, guarded in its transaction, so two
//! pods sweeping at once end a conversation once.

use crate::ids::now_ms;
use crate::state::AppState;
use crate::storage::store::{EndCause, RelayEnd, WriteOp, WriteOutcome};

/// Conversations ended per sweep query.
const BATCH: i64 = 200;

/// Ends idle conversations every `sweep_interval_secs`, the first time one interval after start,
/// until shutdown.
pub async fn run(state: AppState) {
    let period = std::time::Duration::from_secs(state.config.sweep_interval_secs.max(1));
    let mut tick = tokio::time::interval_at(tokio::time::Instant::now() + period, period);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            () = state.shutdown.cancelled() => return,
            _ = tick.tick() => {
                end_idle(&state, now_ms()).await;
            }
        }
    }
}

/// Ends one conversation for the relay; whether it ended now (not before, not kept going).
async fn end(state: &AppState, tenant_id: &str, conversation_id: &str, cause: EndCause) -> bool {
    let now = now_ms();
    let ttl = i64::try_from(state.config.message_ttl().as_millis()).unwrap_or(i64::MAX / 4);
    let op = WriteOp::EndConversation(RelayEnd {
        tenant_id: tenant_id.to_owned(),
        conversation_id: conversation_id.to_owned(),
        cause,
        now_ms: now,
        expires_at_ms: now.saturating_add(ttl),
    });
    match state.writer.write(op).await {
        Ok(Ok(WriteOutcome::EndConversation(notice))) => notice.is_some(),
        Ok(Ok(other)) => {
            tracing::error!(?other, "ending a conversation returned another outcome");
            false
        }
        Ok(Err(error)) => {
            tracing::warn!(%error, conversation = %conversation_id, "ending a conversation failed");
            false
        }
        Err(_) => false,
    }
}

/// Ends the conversations `peer_id` takes part in: its peer was unregistered. Returns how many.
pub async fn peer_left(state: &AppState, tenant_id: &str, peer_id: &str) -> usize {
    let ids = match state.store.live_conversations_of(tenant_id, peer_id).await {
        Ok(ids) => ids,
        Err(error) => {
            tracing::warn!(%error, peer = %peer_id, "cannot list a leaving peer's conversations");
            return 0;
        }
    };
    let mut ended = 0;
    for id in ids {
        let cause = EndCause::Left {
            peer_id: peer_id.to_owned(),
        };
        if end(state, tenant_id, &id, cause).await {
            tracing::info!(conversation = %id, peer = %peer_id, "conversation ended: a participant left");
            ended += 1;
        }
    }
    ended
}

/// Ends the conversations with no turn for the idle timeout, as of `now_ms`; returns how many.
pub async fn end_idle(state: &AppState, now_ms: i64) -> usize {
    let idle_secs = state.config.conversation_idle_secs;
    let before_ms =
        now_ms.saturating_sub(i64::try_from(idle_secs.saturating_mul(1000)).unwrap_or(i64::MAX));
    let mut ended = 0;
    loop {
        let due = match state.store.idle_conversations(before_ms, BATCH).await {
            Ok(due) => due,
            Err(error) => {
                tracing::warn!(%error, "cannot list idle conversations; will retry");
                return ended;
            }
        };
        let mut now_ended = 0;
        for (tenant_id, id) in &due {
            let cause = EndCause::IdleSince {
                before_ms,
                idle_secs,
            };
            if end(state, tenant_id, id, cause).await {
                now_ended += 1;
            }
        }
        ended += now_ended;
        // A batch that ended nothing (a failing store, or turns racing in) is not read again.
        if (due.len() as i64) < BATCH || now_ended == 0 {
            if ended > 0 {
                tracing::info!(ended, "ended idle conversations");
            }
            return ended;
        }
    }
}
