//! `list_peers`, `update_peer`, `unregister`.

use repowire_protocol::limits::MAX_PEERS_PAGE;
use repowire_protocol::validate::is_valid_name;
use repowire_protocol::{
    Body, ErrorCode, ListPeers, MessageId, PeerRef, Peers, Presence, PresenceEvent, Reply,
    UpdatePeer,
};

use super::session::{Handled, Refusal, Session};
use crate::cluster::events::TenantEvent;
use crate::ids::now_ms;
use crate::routing::dispatch::frame_text;
use crate::routing::hub::{in_scope, peer_info};
use crate::state::AppState;
use crate::storage::store::PeerRecord;

/// Where a page of `peers` continues: the peer it ended with, as `circle:name:peer_id` (names,
/// circles and peer ids hold no `:`). Peers are ordered by circle, name and peer id, byte by
/// byte, whatever the database's collation.
fn cursor_of(r: &PeerRecord) -> String {
    format!("{}:{}:{}", r.circle, r.name, r.peer_id)
}

fn parse_cursor(cursor: &str) -> Result<(String, String, String), Refusal> {
    let parts: Vec<&str> = cursor.split(':').collect();
    match parts[..] {
        [circle, name, peer_id] if is_valid_name(circle) && is_valid_name(name) => {
            Ok((circle.to_owned(), name.to_owned(), peer_id.to_owned()))
        }
        _ => Err(Refusal::new(
            ErrorCode::InvalidFrame,
            "`cursor` is not a `next_cursor` this relay gave",
        )),
    }
}

fn order_key(r: &PeerRecord) -> (&str, &str, &str) {
    (&r.circle, &r.name, &r.peer_id)
}

pub(super) async fn list(s: &Session, id: MessageId, l: ListPeers) -> Handled {
    let caller = s.own(l.peer_id.as_str())?;
    let limit = usize::try_from(l.limit.unwrap_or(MAX_PEERS_PAGE)).unwrap_or(usize::MAX);
    let after = l.cursor.as_deref().map(parse_cursor).transpose()?;
    let now = now_ms();
    let ttl = i64::try_from(s.state.config.description_ttl().as_millis()).unwrap_or(i64::MAX / 4);
    let mut peers = Vec::new();
    let mut next_cursor = None;
    let mut last: Option<PeerRecord> = None;
    for mut member in crate::routing::roster::members(&s.state, &s.tenant_id).await? {
        if let Some((c, n, p)) = &after
            && order_key(&member.record) <= (c.as_str(), n.as_str(), p.as_str())
        {
            continue;
        }
        let visible = in_scope(
            &caller,
            l.all_circles,
            l.circle.as_deref(),
            &member.record.circle,
            &member.record.role,
        );
        if !visible || !(l.include_offline || member.online()) {
            continue;
        }
        if peers.len() == limit {
            // One more visible peer: the page is full and another follows.
            next_cursor = last.as_ref().map(cursor_of);
            break;
        }
        let record = &mut member.record;
        // Descriptions are task state, not truth: past their TTL they are cleared on read.
        // Clearing is conditional on the description not having been replaced meanwhile, and
        // reading is not activity: last_seen is left alone.
        if let Some(set_at) = record
            .description_at_ms
            .filter(|at| at.saturating_add(ttl) <= now)
        {
            s.state
                .store
                .clear_description(&s.tenant_id, &record.peer_id, set_at)
                .await?;
            s.state
                .hub
                .clear_description(&s.tenant_id, &record.peer_id, set_at);
            record.description = None;
            record.description_at_ms = None;
        }
        peers.push(member.info());
        last = Some(member.record);
    }
    s.send(Body::Peers(Peers {
        re: id,
        peers,
        next_cursor,
    }));
    Ok(())
}

pub(super) async fn update(s: &Session, id: MessageId, u: UpdatePeer) -> Handled {
    s.own(u.peer_id.as_str())?;
    let now = now_ms();
    let description = u
        .description
        .map(|d| Some(d.trim().to_owned()).filter(|d| !d.is_empty()));
    if let Some(d) = &description {
        s.state
            .store
            .set_description(&s.tenant_id, u.peer_id.as_str(), d.as_deref(), now)
            .await?;
    }
    let updated = s
        .state
        .hub
        .update_peer(
            &s.tenant_id,
            s.conn,
            u.peer_id.as_str(),
            u.turn_state,
            description,
            now,
        )
        .ok_or_else(|| Refusal::new(ErrorCode::NotRegistered, "the peer left this connection"))?;
    s.send(Body::Ok(Reply { re: id }));
    let info = peer_info(&updated.record, Some(&updated));
    announce(
        &s.state,
        &s.tenant_id,
        Presence {
            event: PresenceEvent::Updated,
            peer: info,
        },
    );
    s.state.cluster.announce(&s.tenant_id, &updated).await;
    Ok(())
}

pub(super) async fn unregister(s: &Session, id: MessageId, r: PeerRef) -> Handled {
    let Some(record) = s
        .state
        .hub
        .unbind_peer(&s.tenant_id, s.conn, r.peer_id.as_str())
    else {
        return Err(Refusal::new(
            ErrorCode::NotRegistered,
            format!("peer {} is not registered on this connection", r.peer_id),
        ));
    };
    s.send(Body::Ok(Reply { re: id }));
    let peer_id = record.peer_id.clone();
    went_offline(&s.state, record).await;
    // Unregistered means its session ended: so do its conversations. Not in the way of this
    // connection's next frames (the answer is sent).
    let (state, tenant_id) = (s.state.clone(), s.tenant_id.clone());
    tokio::spawn(async move {
        crate::routing::conversation_ends::peer_left(&state, &tenant_id, &peer_id).await;
    });
    Ok(())
}

/// A peer left this process (unregister, or its connection closed): count it, record its
/// last_seen, and tell the tenant.
pub async fn went_offline(state: &AppState, mut record: PeerRecord) {
    // The slot first: once the gauge says the peer is gone, its place is free.
    state
        .limits
        .release_peer(&record.tenant_id, &record.peer_id)
        .await;
    state.metrics.peers.dec();
    let now = now_ms();
    if let Err(error) = state
        .store
        .touch_peer(&record.tenant_id, &record.peer_id, now)
        .await
    {
        // The peer is already offline; only its last_seen is stale.
        tracing::warn!(%error, peer = %record.peer_id, "could not record last_seen");
    }
    record.last_seen_ms = now;
    let presence = Presence {
        event: PresenceEvent::Offline,
        peer: peer_info(&record, None),
    };
    announce(state, &record.tenant_id, presence);
    state.cluster.withdraw(&record.tenant_id, &record.peer_id);
}

/// Tells a tenant's connections, on every pod, of a presence change, and records it in the
/// tenant's event log.
pub(super) fn announce(state: &AppState, tenant_id: &str, presence: Presence) {
    let events = state.cluster.events();
    if events.recording(tenant_id) {
        events.record(tenant_id, TenantEvent::presence(&presence));
    }
    let frame = frame_text(Body::Presence(presence));
    state.hub.broadcast(tenant_id, frame.clone());
    state.cluster.to_tenant(tenant_id, &frame);
}
