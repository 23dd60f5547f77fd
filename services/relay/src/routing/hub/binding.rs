//! Binding peers to connections, and the display names they get.

use std::sync::atomic::Ordering;

use repowire_protocol::TurnState;

use super::{CatchUp, ConnId, Hub, LivePeer};
use crate::storage::store::PeerRecord;

/// Result of binding a peer.
#[derive(Debug)]
pub struct Bound {
    /// The record with its final display name.
    pub record: PeerRecord,
    /// The connection that held this peer before (takeover on reclaim), if another.
    pub previous_conn: Option<ConnId>,
    /// True if the peer was already live on this process (takeover or re-register).
    pub was_live: bool,
    /// This binding's epoch.
    pub epoch: u64,
    /// The binding this one replaced, to restore if registering fails.
    pub replaced: Option<LivePeer>,
}

impl Hub {
    /// Binds a peer to a connection, choosing its display name: `base`, else `base-2`,
    /// `base-3` … — the first not held by another live peer of the same circle.
    pub fn bind_peer(
        &self,
        conn: ConnId,
        mut record: PeerRecord,
        base: &str,
        now_ms: i64,
    ) -> Bound {
        let mut tenants = self.lock();
        let t = tenants.entry(record.tenant_id.clone()).or_default();
        let taken = |name: &str| {
            t.peers.values().any(|p| {
                p.record.peer_id != record.peer_id
                    && p.record.circle == record.circle
                    && p.record.name == name
            })
        };
        let mut name = base.to_owned();
        let mut n = 2;
        while taken(&name) {
            name = suffixed(base, n);
            n += 1;
        }
        record.name = name;
        let epoch = self.next_epoch.fetch_add(1, Ordering::Relaxed) + 1;
        let previous = t.peers.get(&record.peer_id).map(|p| p.conn);
        let previous_conn = previous.filter(|c| *c != conn);
        let replaced = t.peers.insert(
            record.peer_id.clone(),
            LivePeer {
                record: record.clone(),
                conn,
                turn_state: TurnState::Unknown,
                last_seen_ms: now_ms,
                catching_up: true,
                latest_seq: 0,
                pushed_seq: 0,
                epoch,
                replaying: false,
                // A new binding of the peer starts without one: its daemon binds it again.
                session_id: None,
            },
        );
        Bound {
            record,
            previous_conn,
            was_live: previous.is_some(),
            epoch,
            replaced,
        }
    }

    /// Names live peers of this pod hold in a circle, other than `peer_id`'s.
    pub fn names_in_circle(&self, tenant_id: &str, circle: &str, peer_id: &str) -> Vec<String> {
        self.lock().get(tenant_id).map_or_else(Vec::new, |t| {
            t.peers
                .values()
                .filter(|p| p.record.circle == circle && p.record.peer_id != peer_id)
                .map(|p| p.record.name.clone())
                .collect()
        })
    }

    /// Undoes a [`Hub::bind_peer`] whose registration failed: the replaced binding comes back
    /// in catch-up (its catch-up task stopped when it was replaced; the caller runs the
    /// returned one), with a new epoch so that the old task, if it has not noticed yet, stops
    /// rather than push beside the new one. The peer is unbound if there was no such binding.
    /// Does nothing if a newer binding exists.
    pub fn rollback_bind(
        &self,
        tenant_id: &str,
        peer_id: &str,
        epoch: u64,
        replaced: Option<LivePeer>,
    ) -> Option<CatchUp> {
        let new_epoch = self.next_epoch.fetch_add(1, Ordering::Relaxed) + 1;
        let mut tenants = self.lock();
        let t = tenants.get_mut(tenant_id)?;
        if t.peers.get(peer_id).is_none_or(|p| p.epoch != epoch) {
            return None;
        }
        match replaced {
            Some(mut previous) => {
                previous.catching_up = true;
                previous.replaying = false;
                previous.epoch = new_epoch;
                let restored = CatchUp {
                    tenant_id: tenant_id.to_owned(),
                    peer_id: peer_id.to_owned(),
                    conn: previous.conn,
                    epoch: new_epoch,
                    after_seq: previous.pushed_seq,
                };
                t.peers.insert(peer_id.to_owned(), previous);
                Some(restored)
            }
            None => {
                t.peers.remove(peer_id);
                None
            }
        }
    }

    /// Unbinds a peer if `conn` holds it; returns its record.
    pub fn unbind_peer(&self, tenant_id: &str, conn: ConnId, peer_id: &str) -> Option<PeerRecord> {
        let mut tenants = self.lock();
        let t = tenants.get_mut(tenant_id)?;
        if t.peers.get(peer_id).is_some_and(|p| p.conn == conn) {
            t.peers.remove(peer_id).map(|p| p.record)
        } else {
            None
        }
    }
}

/// The `n`th name tried for `base` (n ≥ 2): `base-n`, with `base` cut so the whole stays
/// within the name limit.
pub fn suffixed(base: &str, n: usize) -> String {
    let suffix = format!("-{n}");
    let mut keep = base
        .len()
        .min(repowire_protocol::limits::MAX_NAME_BYTES.saturating_sub(suffix.len()));
    while !base.is_char_boundary(keep) {
        keep -= 1;
    }
    format!("{}{suffix}", &base[..keep])
}
