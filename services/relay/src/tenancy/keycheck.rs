//! The live-key check: every relay process looks up, on an interval, the API keys its live
//! connections use, and closes those whose key is no longer usable (4001), or whose tenant the
//! operator suspended (4010) — revoked by any path
//! (the admin CLI writing the database, the admin API on another pod whose bus message was
//! lost) or expired. The bus makes an admin-API revocation immediate; this check makes every
//! revocation certain within [`crate::config::RelayConfig::key_check`], with or without a bus.

use crate::ids::now_ms;
use crate::state::AppState;
use crate::storage::store::TenantKey;

/// How a member's credential id starts (`crate::edge::dashboard::session::member_credential`).
const MEMBER: &str = "member:";

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
    // A dashboard member's person connection is keyed `member:<id>`, not by an API key: its
    // membership is checked instead.
    let (members, keys): (Vec<String>, Vec<String>) = state
        .hub
        .connected_keys()
        .into_iter()
        .partition(|k| k.starts_with(MEMBER));
    let mut closed = close_unusable_members(state, &members).await;
    if keys.is_empty() {
        return closed;
    }
    let dead = match state.store.unusable_keys(&keys, now_ms()).await {
        Ok(dead) => dead,
        Err(error) => {
            tracing::warn!(%error, "cannot check the keys of live connections; will retry");
            return 0;
        }
    };
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

/// Closes the person connections of members who were removed, or whose tenant was suspended
/// or deleted; returns how many were closed.
async fn close_unusable_members(state: &AppState, credentials: &[String]) -> usize {
    let mut closed = 0;
    for credential in credentials {
        let Some(id) = credential.strip_prefix(MEMBER) else {
            continue;
        };
        let member = match state.store.get_member(id).await {
            Ok(member) => member,
            Err(error) => {
                tracing::warn!(%error, "cannot check a member's connection; will retry");
                continue;
            }
        };
        let tenant = match &member {
            Some(m) => match state.store.find_tenant(TenantKey::Id(&m.tenant_id)).await {
                Ok(tenant) => tenant,
                Err(error) => {
                    tracing::warn!(%error, "cannot check a member's tenant; will retry");
                    continue;
                }
            },
            None => None,
        };
        let usable = member.as_ref().is_some_and(|m| m.removed_at_ms.is_none())
            && tenant.as_ref().is_some_and(|t| t.deleted_at_ms.is_none());
        let n = if !usable {
            state.hub.kick_key(
                credential,
                repowire_protocol::CloseCode::KEY_REVOKED,
                "member removed",
            )
        } else if tenant.is_some_and(|t| t.suspended_at_ms.is_some()) {
            state.hub.close_key(
                credential,
                repowire_protocol::CloseCode::TENANT_SUSPENDED,
                "tenant suspended",
            )
        } else {
            0
        };
        closed += n;
    }
    closed
}
