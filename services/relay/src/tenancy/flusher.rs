//! Adds what this pod's [`Meter`](crate::tenancy::usage::meter::Meter) measured (connection time,
//! peaks) to the usage rows every `REPOWIRE_USAGE_FLUSH_MS`, and once more at a clean stop. A
//! failed flush keeps its measurements for the next one; `usage_flush_lag_seconds` says how
//! old the oldest unstored measurement is (what a kill would lose).

use std::collections::BTreeSet;
use std::time::Duration;

use crate::ids::now_ms;
use crate::state::AppState;

/// Runs until shutdown (the server flushes once more when its connections have closed).
pub async fn run(state: AppState) {
    let period = Duration::from_millis(state.config.usage_flush_ms.max(10));
    let mut tick = tokio::time::interval_at(tokio::time::Instant::now() + period, period);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut last_ok = now_ms();
    loop {
        tokio::select! {
            () = state.shutdown.cancelled() => return,
            _ = tick.tick() => {
                if flush(&state).await {
                    last_ok = now_ms();
                }
                let lag = (now_ms() - last_ok).max(0) as f64 / 1000.0;
                state.metrics.usage_flush_lag_seconds.set(lag);
            }
        }
    }
}

/// One flush: reads the tenants' live peers in the cluster (their peak carries into a new
/// hour), then stores everything measured. True if it was stored.
pub async fn flush(state: &AppState) -> bool {
    let now = now_ms();
    let tenants: BTreeSet<String> = state.hub.all_live().into_iter().map(|(t, _)| t).collect();
    for tenant in tenants {
        let live = state.live_peer_ids(&tenant).await.len();
        state
            .meter
            .peers_at(&tenant, u64::try_from(live).unwrap_or(u64::MAX), now);
    }
    let rows = state.meter.take_at(now);
    if rows.is_empty() {
        return true;
    }
    match state.store.add_usage(&rows).await {
        Ok(()) => true,
        Err(error) => {
            tracing::warn!(%error, rows = rows.len(), "could not store measured usage; keeping it for the next flush");
            state.metrics.usage_flush_failures.inc();
            state.meter.restore(rows);
            false
        }
    }
}
