//! Expires undelivered inbox entries past their TTL, so a sender always learns the end of a
//! message that could not be delivered (as a `delivery` frame with state `expired`, or later
//! through `status_query`); closes, every second by default, the asks whose question timed out (with the
//! question's default, or as expired), so their askers learn it as it happens; purges tenants deleted longer ago than the retention period; and
//! forgets key-creation idempotency records after [`KEY_REQUEST_TTL_MS`] and idle HTTP rate
//! buckets; ends the direct conversations idle for `REPOWIRE_CONVERSATION_IDLE_SECS`.

use std::time::Duration;

use crate::ids::now_ms;
use crate::state::AppState;
use crate::storage::store::{WriteOp, WriteOutcome};

const SWEEP_LIMIT: i64 = 1000;

/// Runs until shutdown.
pub async fn run(state: AppState) {
    // The first sweep one interval after start, not at once: what a sweep does (expiry, purges)
    // is due by time, and a sweep racing the start-up of a test or an operator's first request
    // helps nobody.
    let period = Duration::from_secs(state.config.sweep_interval_secs.max(1));
    let mut tick = tokio::time::interval_at(tokio::time::Instant::now() + period, period);
    // A question's own deadline is kept exactly (an answer after it is refused at once); this
    // only bounds how late its asker hears that it timed out.
    let mut questions = tokio::time::interval(Duration::from_millis(
        state.config.question_sweep_ms.max(100),
    ));
    questions.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut questions_failing = false;
    // Idle conversations are ended by a task of their own: a backlog of them (the first sweep
    // after an upgrade) must not hold up the question timeouts above.
    let conversations = tokio::spawn(super::conversation_ends::run(state.clone()));
    let _stop_with_me = AbortOnDrop(conversations);
    loop {
        tokio::select! {
            () = state.shutdown.cancelled() => return,
            _ = questions.tick() => {
                let failed = close_overdue(&state, now_ms()).await.is_none();
                if failed && !questions_failing {
                    tracing::warn!("closing timed-out questions failed; retrying every second");
                }
                questions_failing = failed;
            }
            _ = tick.tick() => {
                sweep(&state).await;
                purge_deleted(&state).await;
                forget_old_key_requests(&state).await;
                state.http_limit.prune();
                state.failed_auth.prune();
            }
        }
    }
}

/// Aborts a task when dropped: the sweeper's helpers end with it.
struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
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

/// Closes the asks whose question's deadline is at or before `now_ms`, in bounded batches,
/// telling each asker; returns how many, or `None` when storage failed (nothing more closed).
pub async fn close_overdue(state: &AppState, now_ms: i64) -> Option<usize> {
    let mut total = 0;
    loop {
        match state
            .writer
            .write(WriteOp::CloseOverdue {
                now_ms,
                limit: SWEEP_LIMIT,
            })
            .await
        {
            Ok(Ok(WriteOutcome::CloseOverdue(closed))) => {
                total += closed.len();
                if (closed.len() as i64) < SWEEP_LIMIT {
                    if total > 0 {
                        tracing::info!(closed = total, "closed questions that timed out");
                    }
                    return Some(total);
                }
            }
            Ok(Ok(other)) => {
                tracing::error!(?other, "close_overdue returned another outcome");
                return None;
            }
            Ok(Err(error)) => {
                tracing::debug!(%error, "closing timed-out questions failed");
                return None;
            }
            Err(_) => return None,
        }
    }
}

/// Purges the tenants deleted more than `tenant_retention_days` ago; returns how many.
pub async fn purge_deleted(state: &AppState) -> usize {
    let retention = i64::try_from(state.config.tenant_retention_days)
        .unwrap_or(i64::MAX / 86_400_000)
        .saturating_mul(86_400_000);
    let due = match state
        .store
        .deleted_before(now_ms().saturating_sub(retention))
        .await
    {
        Ok(due) => due,
        Err(error) => {
            tracing::warn!(%error, "cannot list deleted tenants; will retry");
            return 0;
        }
    };
    let mut purged = 0;
    for tenant in due {
        match state.store.purge_tenant(&tenant).await {
            Ok(true) => {
                state.cluster.events().forget(&tenant).await;
                tracing::info!(%tenant, "deleted tenant purged after the retention period");
                purged += 1;
            }
            Ok(false) => {}
            Err(error) => {
                tracing::warn!(%error, %tenant, "purging a deleted tenant failed; will retry")
            }
        }
    }
    purged
}

/// How long a key creation's `Idempotency-Key` is remembered (7 days): a retry later than that
/// makes a new key.
pub const KEY_REQUEST_TTL_MS: i64 = 7 * 24 * 3_600_000;

/// Forgets the idempotency records older than [`KEY_REQUEST_TTL_MS`]; returns how many.
pub async fn forget_old_key_requests(state: &AppState) -> u64 {
    match state
        .store
        .forget_key_requests(now_ms().saturating_sub(KEY_REQUEST_TTL_MS))
        .await
    {
        Ok(n) => n,
        Err(error) => {
            tracing::warn!(%error, "cannot forget old key requests; will retry");
            0
        }
    }
}
