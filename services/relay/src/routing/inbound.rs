//! This pod's side of the cluster bus, run as a task beside the sweeper and the key check:
//! applies what other pods send (forwarded frames, tenant-wide frames, revocations, takeovers,
//! peer-change notices), refreshes the presence of the peers this pod holds (the heartbeat), and
//! recovers after the bus was unreachable. Sending is [`crate::cluster`]'s job; this module is
//! above the routing layer because recovery restarts catch-ups ([`crate::routing::route::catch_up`]).

use std::collections::HashSet;

use crate::cluster::bus::BusEvent;
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
    // Peers that still owe a catch-up after a heal (see [`heal`]).
    let mut owed = HashSet::new();
    loop {
        tokio::select! {
            _ = state.shutdown.cancelled() => return,
            _ = heartbeat.tick() => {
                if state.cluster.presence_gap() {
                    heal(&state, &mut owed).await;
                } else {
                    refresh(&state).await;
                    if !owed.is_empty() {
                        let peers = owed.iter().cloned().collect();
                        catch_up(&state, &mut owed, peers);
                    }
                }
            }
            event = events.recv() => match event {
                Some(BusEvent::Resubscribed) => {
                    state.directory.resume();
                    // Event-log notices may have been missed: streams read again.
                    state.cluster.events().wake_all();
                    // Limit changes may have been missed too.
                    state.limits.changed(None);
                    recover(&state, &mut owed).await;
                }
                Some(BusEvent::SubscriptionLost) => state.directory.suspend(),
                Some(event) => apply(&state, event),
                None => return,
            },
        }
    }
}

/// The bus was down: presence may be gone (Redis may have come back empty), forwards and
/// revocations lost. Close connections whose key was revoked meanwhile (the database says),
/// then [`heal`].
async fn recover(state: &AppState, owed: &mut HashSet<(String, String)>) {
    crate::tenancy::keycheck::close_unusable(state).await;
    state.cluster.mark_presence_gap();
    heal(state, owed).await;
}

/// Presence may have been missing, so another pod may have left a message for a peer held
/// here in its inbox without forwarding it. Record every live peer's presence again; once all
/// of it is written, push every live peer's pending entries again (a fresh catch-up of the
/// same binding), which finds such messages. Until a round of writes succeeds (the first
/// command after Redis returns can still fail) the mark stays and the next heartbeat heals
/// again: catching up before presence is back would miss what is sent in between.
async fn heal(state: &AppState, owed: &mut HashSet<(String, String)>) {
    state.cluster.take_presence_gap();
    refresh(state).await;
    if state.cluster.take_presence_gap() {
        state.cluster.mark_presence_gap();
        tracing::warn!("presence not recorded again yet; retrying at the next heartbeat");
        return;
    }
    let live = state
        .hub
        .all_live()
        .into_iter()
        .map(|(tenant, live)| (tenant, live.record.peer_id))
        .collect();
    catch_up(state, owed, live);
    tracing::info!(
        still_catching_up = owed.len(),
        "presence recorded again, pending entries pushed again"
    );
}

/// Restarts the catch-up of each of `peers`. A peer catching up already may be working from an
/// inbox read older than a message another pod left unforwarded: it stays in `owed` and is
/// tried again at each heartbeat until its catch-up can be restarted (or it is gone).
fn catch_up(state: &AppState, owed: &mut HashSet<(String, String)>, peers: Vec<(String, String)>) {
    for (tenant, peer) in peers {
        match state.hub.restart_catch_up(&tenant, &peer) {
            Some(c) => {
                owed.remove(&(tenant, peer));
                state
                    .tracker
                    .spawn(crate::routing::route::catch_up(state.clone(), c));
            }
            None if state.hub.live_peer(&tenant, &peer).is_some() => {
                owed.insert((tenant, peer));
            }
            None => {
                owed.remove(&(tenant, peer));
            }
        }
    }
}

/// The heartbeat: refreshes the presence of every peer held here; a peer another pod holds
/// now is let go here, as a takeover notice would have.
async fn refresh(state: &AppState) {
    for (tenant, live) in state.hub.all_live() {
        if !state.cluster.announce(&tenant, &live).await {
            let_go(state, &tenant, &live.record.peer_id, None);
        }
    }
    let mut peers: std::collections::BTreeMap<String, Vec<String>> = Default::default();
    for (tenant, live) in state.hub.all_live() {
        peers.entry(tenant).or_default().push(live.record.peer_id);
    }
    state
        .limits
        .refresh_peers(peers.into_iter().collect(), |tenant, peer| {
            state.hub.live_peer(tenant, peer).is_some()
        })
        .await;
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
        BusEvent::TenantWatched { tenant_id } => {
            state.cluster.events().watched_elsewhere(&tenant_id);
        }
        BusEvent::EventsAppended { tenant_id, last } => {
            state.cluster.events().appended(&tenant_id, last);
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
            crate::routing::dispatch::frame_text(repowire_protocol::Body::Error(notice)),
        );
        tracing::info!(peer = %peer_id, by_pod = by_pod.unwrap_or("(seen at heartbeat)"), "peer taken over by another pod");
    }
}
