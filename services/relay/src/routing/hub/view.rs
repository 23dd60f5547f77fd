//! Peers as the wire shows them, and who sees whom (roles and circles).

use repowire_protocol::{PeerInfo, PeerStatus, PeerSummary, Role, TurnState};

use super::LivePeer;
use crate::storage::store::PeerRecord;

/// Parses a stored role; unknown spellings are treated as `agent` (least privilege).
pub fn parse_role(s: &str) -> Role {
    s.parse().unwrap_or(Role::Agent)
}

/// Whether a peer is in a viewer's scope. With `circle`, that circle only; otherwise the
/// viewer's circle plus peers whose role crosses circles, or every peer when `mesh_wide` (a
/// viewer whose own role crosses circles, or a request for all circles).
pub fn in_scope(
    viewer: &LivePeer,
    mesh_wide: bool,
    circle: Option<&str>,
    peer_circle: &str,
    peer_role: &str,
) -> bool {
    match circle {
        Some(c) => peer_circle == c,
        None => {
            mesh_wide
                || viewer.role().crosses_circles()
                || peer_circle == viewer.record.circle
                || parse_role(peer_role).crosses_circles()
        }
    }
}

/// A short reference to a stored peer.
pub fn summary(r: &PeerRecord) -> PeerSummary {
    PeerSummary {
        peer_id: r.peer_id.clone().into(),
        name: r.name.clone(),
        circle: r.circle.clone(),
    }
}

/// The wire view of a peer: its record plus live state when bound.
pub fn peer_info(r: &PeerRecord, live: Option<&LivePeer>) -> PeerInfo {
    let (status, turn_state, last_seen_ms) = match live {
        Some(l) if l.turn_state == TurnState::Working => {
            (PeerStatus::Busy, l.turn_state, l.last_seen_ms)
        }
        Some(l) => (PeerStatus::Online, l.turn_state, l.last_seen_ms),
        None => (PeerStatus::Offline, TurnState::Unknown, r.last_seen_ms),
    };
    PeerInfo {
        peer_id: r.peer_id.clone().into(),
        name: r.name.clone(),
        circle: r.circle.clone(),
        backend: r.backend.clone(),
        role: parse_role(&r.role),
        status,
        turn_state,
        path: r.path.clone(),
        machine: r.machine.clone(),
        description: r.description.clone(),
        last_seen_ms,
    }
}
