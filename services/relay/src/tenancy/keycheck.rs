//! The live-key check: every relay process looks up, on an interval, the API keys its live
//! connections use, and closes those whose key is no longer usable (4001), or whose tenant the
//! operator suspended (4010) — revoked by any path
//! (the admin CLI writing the database, the admin API on another pod whose bus message was
//! lost) or expired. The bus makes an admin-API revocation immediate; this check makes every
//! revocation certain within [`crate::config::RelayConfig::key_check`], with or without a bus.

use crate::ids::now_ms;
use crate::state::AppState;

/// Runs until shutdown.
pub async fn run(state: AppState) {
    let mut tick = tokio::time::interval(state.config.key_check());
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            () = state.shutdown.cancelled() => return,
            _ = tick.tick() => { close_unusable(&state).await; }
        }
    }
}

/// One check: closes the connections of every connected key that is no longer usable, and
/// returns how many connections were closed.
pub async fn close_unusable(state: &AppState) -> usize {
    let keys = state.hub.connected_keys();
    if keys.is_empty() {
        return 0;
    }
    let dead = match state.store.unusable_keys(&keys, now_ms()).await {
        Ok(dead) => dead,
        Err(error) => {
            tracing::warn!(%error, "cannot check the keys of live connections; will retry");
            return 0;
        }
    };
    let mut closed = 0;
    for key in dead {
        let (code, why) = if key.tenant_suspended {
            (
                repowire_protocol::CloseCode::TENANT_SUSPENDED,
                "tenant suspended",
            )
        } else {
            (
                repowire_protocol::CloseCode::KEY_REVOKED,
                "API key revoked or expired",
            )
        };
        let n = if key.tenant_suspended {
            state.hub.close_key(&key.id, code, why)
        } else {
            state.hub.kick_key(&key.id, code, why)
        };
        if n > 0 {
            tracing::info!(key = %key.id, closed = n, reason = why, "key no longer usable: connections closed");
        }
        closed += n;
    }
    closed
}
