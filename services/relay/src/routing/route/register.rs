//! `register`: new peers and reclaims, name allocation, and the catch-up that replays a
//! peer's pending inbox in order before live deliveries resume.

use repowire_protocol::validate::is_valid_name;
use repowire_protocol::{
    Body, CloseCode, ErrorCode, ErrorFrame, MessageId, Presence, PresenceEvent, Register,
    Registered,
};

use super::session::{Handled, Refusal, Session};
use crate::ids::now_ms;
use crate::routing::dispatch::{deliver_stored, frame_text};
use crate::routing::hub::{CatchUp, peer_info};
use crate::state::AppState;
use crate::storage::store::{PeerAdmission, PeerRecord, PeerRoom};
use crate::tenancy::limits::enforce::Reason;

const DEFAULT_CIRCLE: &str = "default";
/// The backend of a person's peer on the dashboard (`crate::edge::dashboard::human`): one per
/// API key, its path `dashboard:<key id>`; only a connection of that key registers it.
pub const DASHBOARD_BACKEND: &str = "dashboard";

/// Refuses a `dashboard` peer that is not this connection's key's own: another key could
/// otherwise take over a person's peer (its replies, its name).
fn dashboard_peer_allowed(s: &Session, r: &Register) -> Result<(), Refusal> {
    if r.backend != DASHBOARD_BACKEND
        || r.path.as_deref() == Some(format!("dashboard:{}", s.key_id).as_str())
    {
        return Ok(());
    }
    Err(Refusal::new(
        ErrorCode::InvalidRequest,
        format!(
            "the backend `{DASHBOARD_BACKEND}` is the relay's own for people on the dashboard; register with your agent's backend"
        ),
    ))
}
const CATCH_UP_PAGE: i64 = 256;

/// A display name from a path's last component: name characters kept, others become '-'.
fn name_from_path(path: &str) -> Option<String> {
    let last = path.trim_end_matches('/').rsplit('/').next()?;
    let cleaned: String = last
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-') {
                c
            } else {
                '-'
            }
        })
        .take(repowire_protocol::limits::MAX_NAME_BYTES)
        .collect();
    let cleaned = cleaned.trim_matches('-').to_owned();
    is_valid_name(&cleaned).then_some(cleaned)
}

/// The reclaim rule of the identity contract: the backend must match, and the path must
/// match when both sides give one. The tenant's `@approvers` can never be reclaimed.
fn may_reclaim(stored: &PeerRecord, claim: &Register) -> bool {
    // `@approvers` is a recipient the relay keeps, never a peer a client may become.
    stored.peer_id != crate::storage::store::CONTROL_PEER
        && stored.backend == claim.backend
        && match (&stored.path, &claim.path) {
            (Some(a), Some(b)) => a == b,
            _ => true,
        }
}

/// Holds the peer's live-peer slot, or refuses with `limit_exceeded` when the tenant is at its
/// `max_peers`: the check and the claim are one atomic step on the bus (a Redis script in a
/// cluster), so registrations arriving together on any number of pods never pass the limit.
async fn peers_allowed(s: &Session, peer_id: &str) -> Result<(), Refusal> {
    match s.state.limits.hold_peer(&s.tenant_id, peer_id).await? {
        Ok(()) => Ok(()),
        Err(refusal) => Err(refusal.into()),
    }
}

/// The tenant's `max_stored_peers` with what may be forgotten to stay within it, or `None`
/// when its plan stores peers without limit. Peers live on any relay process are kept; when
/// the cluster cannot say which those are, nothing is forgotten.
struct StoredRoom {
    snapshot: std::sync::Arc<crate::tenancy::limits::enforce::Snapshot>,
    max: i64,
    live: std::collections::HashSet<String>,
    /// False when the bus could not be read: nothing may be forgotten then.
    knows_live: bool,
    seen_before_ms: i64,
}

async fn stored_room(s: &Session, now: i64) -> Result<Option<StoredRoom>, Refusal> {
    let snapshot = s.state.limits.snapshot(&s.tenant_id).await?;
    let Some(max) = snapshot.limits.max_stored_peers else {
        return Ok(None);
    };
    let (live, knows_live) = match s.state.live_peer_ids_strict(&s.tenant_id).await {
        Ok(live) => (live, true),
        Err(error) => {
            tracing::warn!(%error, tenant = %s.tenant_id, "cannot read presence; no stored peer is forgotten to make room");
            (s.state.live_peer_ids(&s.tenant_id).await, false)
        }
    };
    let grace_ms = i64::try_from(
        s.state
            .config
            .forget_offline_peers_after_secs
            .saturating_mul(1000),
    )
    .unwrap_or(i64::MAX);
    Ok(Some(StoredRoom {
        snapshot,
        max,
        live,
        knows_live,
        // Seen at least the grace period ago may go: with a grace of 0, a peer that left in
        // this very millisecond too (a strict "before now" kept it, and a registration right
        // after a leave was refused at random, met in CI).
        seen_before_ms: now.saturating_sub(grace_ms).saturating_add(1),
    }))
}

/// Stores a new peer within the tenant's `max_stored_peers`, forgetting long-offline peers
/// that hold nothing to make room; `limit_exceeded` (nothing changed) when none may go.
async fn store_within(s: &Session, record: &PeerRecord, room: &StoredRoom) -> Result<(), Refusal> {
    let rule = PeerRoom {
        max: room.max,
        live: &room.live,
        seen_before_ms: if room.knows_live {
            room.seen_before_ms
        } else {
            i64::MIN
        },
    };
    match s.state.store.insert_peer_bounded(record, &rule).await? {
        PeerAdmission::Stored { forgotten } => {
            if !forgotten.is_empty() {
                tracing::info!(
                    tenant = %s.tenant_id,
                    peer = %record.peer_id,
                    forgotten = ?forgotten,
                    max = room.max,
                    "stored peers at the plan's limit: forgot the longest-offline idle ones"
                );
            }
            Ok(())
        }
        PeerAdmission::Full { .. } if !room.knows_live => Err(Refusal::new(
            ErrorCode::Unavailable,
            "this tenant is at its plan's max_stored_peers and the relay cannot tell now which \
             peers are live to forget an offline one; nothing changed, retry later",
        )),
        PeerAdmission::Full { stored } => {
            let refusal = s.state.limits.refuse(
                &room.snapshot,
                Reason::StoredPeers,
                ErrorCode::LimitExceeded,
                format!(
                    "this tenant's plan keeps at most {} peers and it stores {stored}, none of \
                     which may be forgotten yet (each is live, was seen in the last {} s, has \
                     messages waiting or an open ask): reclaim an existing peer instead of \
                     registering a new one, or ask the operator for a larger plan",
                    room.max, s.state.config.forget_offline_peers_after_secs
                ),
                None,
            );
            s.state.limits.count(&s.tenant_id, &refusal);
            Err(refusal.into())
        }
    }
}

pub(super) async fn register(s: &Session, id: MessageId, r: Register) -> Handled {
    dashboard_peer_allowed(s, &r)?;
    let now = now_ms();
    let stored = match &r.reclaim {
        Some(peer_id) => {
            s.state
                .store
                .get_peer(&s.tenant_id, peer_id.as_str())
                .await?
        }
        None => None,
    };
    let (record, base, reclaimed) = match stored.filter(|p| may_reclaim(p, &r)) {
        Some(old) => {
            let base = r.name.clone().unwrap_or_else(|| old.name.clone());
            let record = PeerRecord {
                circle: r.circle.clone().unwrap_or(old.circle.clone()),
                role: r
                    .role
                    .map_or(old.role.clone(), |role| role.as_str().to_owned()),
                path: r.path.clone().or(old.path.clone()),
                machine: r.machine.clone().or(old.machine.clone()),
                last_seen_ms: now,
                ..old
            };
            (record, base, true)
        }
        None => {
            let base = r
                .name
                .clone()
                .or_else(|| r.path.as_deref().and_then(name_from_path))
                .unwrap_or_else(|| r.backend.clone());
            let record = PeerRecord {
                tenant_id: s.tenant_id.clone(),
                peer_id: repowire_protocol::PeerId::from_random(rand::random()).0,
                name: base.clone(),
                circle: r
                    .circle
                    .clone()
                    .unwrap_or_else(|| DEFAULT_CIRCLE.to_owned()),
                backend: r.backend.clone(),
                role: r.role.unwrap_or_default().as_str().to_owned(),
                path: r.path.clone(),
                machine: r.machine.clone(),
                description: None,
                description_at_ms: None,
                created_at_ms: now,
                last_seen_ms: now,
                last_seq: 0,
            };
            (record, base, false)
        }
    };

    peers_allowed(s, &record.peer_id).await?;
    let room = if reclaimed {
        None
    } else {
        match stored_room(s, now).await {
            Ok(room) => room,
            Err(refusal) => {
                s.state
                    .limits
                    .release_peer(&s.tenant_id, &record.peer_id)
                    .await;
                return Err(refusal);
            }
        }
    };

    // In a cluster the name is claimed atomically on the bus, so two pods never hand one name
    // to two live peers; this pod's own live peers are skipped first, and the hub still checks.
    let taken_here = s
        .state
        .hub
        .names_in_circle(&s.tenant_id, &record.circle, &record.peer_id);
    let previous = reclaimed.then(|| record.name.clone());
    let base = s
        .state
        .cluster
        .claim_name(
            &s.tenant_id,
            &record.circle,
            &record.peer_id,
            &base,
            previous.as_deref(),
            &taken_here,
        )
        .await
        .unwrap_or(base);
    let mut bound = s.state.hub.bind_peer(s.conn, record, &base, now);
    let peer_id = bound.record.peer_id.clone();
    let stored = match &room {
        Some(room) => store_within(s, &bound.record, room).await,
        None => s
            .state
            .store
            .upsert_peer(&bound.record)
            .await
            .map_err(Refusal::from),
    };
    if let Err(refusal) = stored {
        // A reclaim's peer slot is not let go here: it may be a live binding's (a reclaim
        // from another pod, a newer registration) and it expires by itself if nobody holds the
        // peer; a new peer's id is this registration's alone.
        // Nothing changed: a binding this replaced (re-register, takeover) comes back, with a
        // fresh catch-up since its own stopped when it was replaced.
        if let Some(restored) =
            s.state
                .hub
                .rollback_bind(&s.tenant_id, &peer_id, bound.epoch, bound.replaced.take())
        {
            s.state.tracker.spawn(catch_up(s.state.clone(), restored));
        }
        if !reclaimed {
            s.state.limits.release_peer(&s.tenant_id, &peer_id).await;
        }
        return Err(refusal);
    }
    // Before the `online` frame: whoever sees the peer come online resolves names with it.
    s.state
        .cluster
        .peers_changed(&s.state.directory, &s.tenant_id);
    if let Some(previous) = bound.previous_conn {
        tracing::info!(peer = %peer_id, previous, conn = s.conn, "peer reclaimed from another connection");
        let notice = ErrorFrame::new(
            None,
            ErrorCode::NotRegistered,
            format!(
                "peer {peer_id} was reclaimed by another connection; this connection no longer holds it"
            ),
        );
        s.state
            .hub
            .send_to_conn(&s.tenant_id, previous, frame_text(Body::Error(notice)));
    }
    if !bound.was_live {
        s.state.metrics.peers.inc();
    }
    let live = s.state.hub.live_peer(&s.tenant_id, &peer_id);
    let info = peer_info(&bound.record, live.as_ref());
    s.send(Body::Registered(Registered {
        re: id,
        peer: info.clone(),
        reclaimed,
        inbox_seq: u64::try_from(bound.record.last_seq).unwrap_or(0),
    }));
    super::peers::announce(
        &s.state,
        &s.tenant_id,
        Presence {
            event: PresenceEvent::Online,
            peer: info,
        },
    );
    // Visible to the other pods before the catch-up reads the inbox (see `cluster`).
    if let Some(live) = &live {
        s.state.cluster.claim(&s.tenant_id, live).await;
    }
    if !bound.was_live {
        // A new live peer: the only moment the tenant's peak of live peers can rise.
        let live = s.state.live_peer_ids(&s.tenant_id).await.len();
        s.state
            .meter
            .peers_at(&s.tenant_id, u64::try_from(live).unwrap_or(u64::MAX), now);
    }
    tracing::info!(tenant = %s.tenant_id, peer = %peer_id, name = %bound.record.name, reclaimed, "peer registered");
    let catching_up = CatchUp {
        tenant_id: s.tenant_id.clone(),
        peer_id,
        conn: s.conn,
        epoch: bound.epoch,
        after_seq: 0,
    };
    s.state
        .tracker
        .spawn(catch_up(s.state.clone(), catching_up));
    Ok(())
}

/// Runs the catch-ups live deliveries ask for (see [`crate::routing::hub`]) until shutdown.
pub async fn run_catch_ups(state: AppState) {
    let Some(mut requests) = state.hub.take_catch_up_requests() else {
        return;
    };
    loop {
        tokio::select! {
            () = state.shutdown.cancelled() => return,
            request = requests.recv() => {
                let Some(c) = request else { return };
                state.metrics.order_catch_ups.inc();
                state.tracker.spawn(catch_up(state.clone(), c));
            }
        }
    }
}

/// Pushes the pending inbox entries of a bound peer after `c.after_seq` (all of them for a
/// fresh binding), in order, then opens the live path. Tied to one binding (`epoch`): a
/// re-register or takeover starts a new catch-up and this one stops at its next step.
pub(crate) async fn catch_up(state: AppState, c: CatchUp) {
    let hub = &state.hub;
    let mut cursor = c.after_seq;
    loop {
        let Some(snapshot) = hub.latest_seq(&c.tenant_id, &c.peer_id, c.epoch) else {
            return;
        };
        loop {
            let entries = match state
                .store
                .inbox_after(&c.tenant_id, &c.peer_id, cursor, true, CATCH_UP_PAGE)
                .await
            {
                Ok(entries) => entries,
                Err(error) => {
                    tracing::warn!(%error, peer = %c.peer_id, "inbox catch-up failed; closing so the client resumes later");
                    hub.kick_conn(
                        &c.tenant_id,
                        c.conn,
                        CloseCode::INTERNAL,
                        "storage unavailable; reconnect later",
                    );
                    return;
                }
            };
            for entry in &entries {
                let frame = deliver_stored(&c.peer_id, entry.seq, false, &entry.message);
                match hub.catch_up_sender(&c, entry.seq) {
                    Some(tx) if tx.send_bulk(frame).await => cursor = entry.seq,
                    _ => return,
                }
            }
            if (entries.len() as i64) < CATCH_UP_PAGE {
                break;
            }
        }
        match hub.finish_catch_up(&c.tenant_id, &c.peer_id, c.epoch, snapshot) {
            Some(true) | None => return,
            Some(false) => continue,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_come_from_the_last_path_component() {
        assert_eq!(
            name_from_path("/home/me/src/api-server/").as_deref(),
            Some("api-server")
        );
        assert_eq!(
            name_from_path("/tmp/my project").as_deref(),
            Some("my-project")
        );
        assert_eq!(name_from_path("/").as_deref(), None);
        // protocol.md §10.3: cut to 64 characters (all ASCII by then), then stripped of '-'.
        let long = format!("/src/{}-{}", "a".repeat(63), "b".repeat(10));
        assert_eq!(name_from_path(&long), Some("a".repeat(63)));
        assert_eq!(
            name_from_path("/src/éé").as_deref(),
            None,
            "nothing left once non-name characters are replaced and stripped"
        );
    }
}
