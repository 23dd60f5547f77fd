//! Expires undelivered inbox entries past their TTL, so a sender always learns the end of a
//! message that could not be delivered (as a `delivery` frame with state `expired`, or later
//! through `status_query`).

use std::time::Duration;

use crate::ids::now_ms;
use crate::state::AppState;
use crate::store::{WriteOp, WriteOutcome};

const SWEEP_LIMIT: i64 = 1000;

/// Runs until shutdown.
pub async fn run(state: AppState) {
    let mut tick =
        tokio::time::interval(Duration::from_secs(state.config.sweep_interval_secs.max(1)));
    loop {
        tokio::select! {
            () = state.shutdown.cancelled() => return,
            _ = tick.tick() => { sweep(&state).await; }
        }
    }
}

/// One sweep: expire in bounded batches until nothing is due.
pub async fn sweep(state: &AppState) -> usize {
    let mut total = 0;
    loop {
        match state
            .writer
            .write(WriteOp::Expire {
                now_ms: now_ms(),
                limit: SWEEP_LIMIT,
            })
            .await
        {
            Ok(Ok(WriteOutcome::Expire(changes))) => {
                total += changes.len();
                if (changes.len() as i64) < SWEEP_LIMIT {
                    if total > 0 {
                        tracing::info!(expired = total, "expired undelivered messages");
                    }
                    return total;
                }
            }
            Ok(Ok(other)) => {
                tracing::error!(?other, "expire returned another outcome");
                return total;
            }
            Ok(Err(error)) => {
                tracing::warn!(%error, "expiry sweep failed; will retry");
                return total;
            }
            Err(_) => return total,
        }
    }
}
