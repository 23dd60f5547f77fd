//! This pod's side of the cluster bus, run as a task beside the sweeper and the key check:
//! applies what other pods send (forwarded frames, tenant-wide frames, revocations, takeovers,
//! peer-change notices), refreshes the presence of the peers this pod holds (the heartbeat), and
//! recovers after the bus was unreachable. Sending is [`crate::cluster`]'s job; this module is
//! above the routing layer because recovery restarts catch-ups ([`crate::route::catch_up`]).

use crate::bus::BusEvent;
use crate::state::AppState;
use crate::telemetry::Trace;

/// Serves the bus for this pod until shutdown: events from other pods, and the presence
/// heartbeat of the peers this pod holds.
pub async fn run(state: AppState) {
    let cluster = state.cluster.clone();
    let mut events = match cluster.bus().subscribe().await {
        Ok(rx) => rx,
        Err(error) => {
            tracing::error!(%error, "cannot subscribe to the bus; this pod is isolated");
            return;
        }
    };
    // Subscribed: from here on no change notice is missed, so answers may be kept.
    state.directory.resume();
    let mut heartbeat = tokio::time::interval(cluster.ttl() / 3);
    loop {
        tokio::select! {
            _ = state.shutdown.cancelled() => return,
            _ = heartbeat.tick() => refresh(&state).await,
            event = events.recv() => match event {
                Some(BusEvent::Resubscribed) => {
                    state.directory.resume();
                    // Limit changes may have been missed too.
                    state.limits.changed(None);
                    recover(&state).await;
                }
                Some(BusEvent::SubscriptionLost) => state.directory.suspend(),
                Some(event) => apply(&state, event),
                None => return,
            },
        }
    }
}

/// The bus was down: presence may be gone, forwards and revocations lost. Close connections
/// whose key was revoked meanwhile (the database says), record presence again, then push every
/// live peer's pending inbox entries again (a fresh catch-up of the same binding).
async fn recover(state: &AppState) {
    crate::keycheck::close_unusable(state).await;
    refresh(state).await;
    for (tenant, live) in state.hub.all_live() {
        if let Some(c) = state.hub.restart_catch_up(&tenant, &live.record.peer_id) {
            state
                .tracker
                .spawn(crate::route::catch_up(state.clone(), c));
        }
    }
    tracing::info!("bus back: presence recorded again, pending entries pushed again");
}

/// The heartbeat: refreshes the presence of every peer held here; a peer another pod holds
/// now is let go here, as a takeover notice would have.
async fn refresh(state: &AppState) {
    for (tenant, live) in state.hub.all_live() {
        if !state.cluster.announce(&tenant, &live).await {
            let_go(state, &tenant, &live.record.peer_id, None);
        }
    }
    let open = state
        .limits
        .refresh_connections(state.hub.conns_by_tenant())
        .await;
    let now = crate::ids::now_ms();
    for (tenant, n) in open {
        state.meter.connections_at(&tenant, n, now);
    }
}

fn apply(state: &AppState, event: BusEvent) {
    let hub = &state.hub;
    match event {
        BusEvent::ToPeer {
            tenant_id,
            peer_id,
            seq,
            frame,
            traceparent,
        } => {
            // This pod's part of the message's trace: the push to the connection it holds.
            let name = if seq.is_some() {
                "forward deliver"
            } else {
                "forward frame"
            };
            Trace::start(name, "consumer", traceparent.as_deref()).in_scope(|| match seq {
                Some(seq) => {
                    hub.deliver_live(&tenant_id, &peer_id, seq, || frame.into_boxed_str());
                }
                None => {
                    hub.send_to_peer(&tenant_id, &peer_id, frame.into_boxed_str());
                }
            });
        }
        BusEvent::ToTenant {
            tenant_id,
            frame,
            origin,
        } => {
            if origin != state.cluster.pod() {
                hub.broadcast(&tenant_id, frame.into_boxed_str());
            }
        }
        BusEvent::KeyRevoked { key_id } => {
            let closed = hub.kick_key(
                &key_id,
                repowire_protocol::CloseCode::KEY_REVOKED,
                "API key revoked",
            );
            if closed > 0 {
                tracing::info!(key = %key_id, closed, "revoked on another pod: connections closed");
            }
        }
        BusEvent::PeersChanged { tenant_id } => state.directory.changed(&tenant_id),
        BusEvent::LimitsChanged { tenant_id } => state.limits.changed(tenant_id.as_deref()),
        BusEvent::Resubscribed | BusEvent::SubscriptionLost => {}
        BusEvent::TakenOver {
            tenant_id,
            peer_id,
            by_pod,
        } => let_go(state, &tenant_id, &peer_id, Some(&by_pod)),
    }
}

/// The peer is live on another pod now: this binding ends without the peer going offline, and
/// its connection is told.
fn let_go(state: &AppState, tenant_id: &str, peer_id: &str, by_pod: Option<&str>) {
    let hub = &state.hub;
    let Some(live) = hub.live_peer(tenant_id, peer_id) else {
        return;
    };
    if hub.unbind_peer(tenant_id, live.conn, peer_id).is_some() {
        state.metrics.peers.dec();
        let notice = repowire_protocol::ErrorFrame::new(
            None,
            repowire_protocol::ErrorCode::NotRegistered,
            format!(
                "peer {peer_id} was reclaimed by another connection; this connection no longer holds it"
            ),
        );
        hub.send_to_conn(
            tenant_id,
            live.conn,
            crate::dispatch::frame_text(repowire_protocol::Body::Error(notice)),
        );
        tracing::info!(peer = %peer_id, by_pod = by_pod.unwrap_or("(seen at heartbeat)"), "peer taken over by another pod");
    }
}
