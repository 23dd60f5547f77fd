//! Live state of this relay process: connections, which peer is bound to which connection,
//! turn state, and per-peer delivery ordering.
//!
//! The hub is the only owner of this state; callers use its methods and never see the lock.
//! The lock is a std `Mutex` held for short, non-async sections only. Frames are pushed with
//! `try_send`: a connection whose queue is full is kicked as a slow consumer (it resumes from
//! its inbox on reconnect) instead of blocking everyone else.
//!
//! By what they own: this file has the state, connections, lookups, sends and revocations;
//! [`outbound`] bounds each connection's queue in frames and bytes; [`binding`] binds peers to connections and chooses display names; [`order`] keeps each
//! peer's deliveries in `seq` order (catch-up, live pushes, replay); [`view`] renders peers for
//! the wire.

mod binding;
mod order;
mod outbound;
mod view;

pub use binding::{Bound, suffixed};
pub use order::{CatchUp, Live};
pub use outbound::{Budget, OutReceiver, OutSender, PushError, queue};
pub use view::{in_scope, parse_role, peer_info, summary};

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};

use repowire_protocol::{CloseCode, PeerSummary, Role, TurnState};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::storage::store::PeerRecord;

/// An encoded frame on its way to a connection. `Box<str>` rather than `Utf8Bytes`: each
/// connection's queue allocates a block of 32 slots up front, and 16-byte slots instead of 32
/// save ~0.5 KiB per idle connection (measured with `repowire-bench`). Turning it into a
/// WebSocket message does not copy.
pub type Outbound = Box<str>;

pub use crate::ids::ConnId;

/// Why a connection is being closed from outside its task.
#[derive(Debug, Default)]
pub struct Kick {
    token: CancellationToken,
    reason: OnceLock<(u16, String)>,
}

impl Kick {
    /// Asks the connection to close with `code`; the first reason wins.
    pub fn kick(&self, code: u16, reason: impl Into<String>) {
        let _ = self.reason.set((code, reason.into()));
        self.token.cancel();
    }

    /// Whether it was kicked.
    pub fn is_kicked(&self) -> bool {
        self.token.is_cancelled()
    }

    /// Resolves when kicked.
    pub async fn kicked(&self) -> (u16, String) {
        self.token.cancelled().await;
        self.reason
            .get()
            .cloned()
            .unwrap_or((CloseCode::POLICY, String::new()))
    }
}

/// A connection as the hub sees it.
#[derive(Debug, Clone)]
pub struct ConnHandle {
    /// Id.
    pub id: ConnId,
    /// API key behind it (revocation closes it).
    pub key_id: String,
    /// Outbound frames.
    pub tx: OutSender,
    /// Close from outside.
    pub kick: Arc<Kick>,
}

/// A peer bound to a connection.
#[derive(Debug, Clone)]
pub struct LivePeer {
    /// Identity snapshot (name, circle, description …).
    pub record: PeerRecord,
    /// Holding connection.
    pub conn: ConnId,
    /// Turn state.
    pub turn_state: TurnState,
    /// Last activity (ms).
    pub last_seen_ms: i64,
    catching_up: bool,
    latest_seq: i64,
    /// The highest `seq` pushed to the connection in this binding, or known not to be pending.
    pushed_seq: i64,
    /// Which binding this is: a re-register or takeover makes a new one, so tasks started for
    /// an older binding (catch-up) can tell they are stale.
    pub epoch: u64,
    replaying: bool,
    /// The Repowire session this peer executes, once its daemon bound one (`bind_session`).
    pub session_id: Option<String>,
}

impl LivePeer {
    /// The peer's role.
    pub fn role(&self) -> Role {
        parse_role(&self.record.role)
    }

    /// A short reference.
    pub fn summary(&self) -> PeerSummary {
        summary(&self.record)
    }
}

#[derive(Debug, Default)]
struct TenantHub {
    conns: HashMap<ConnId, ConnHandle>,
    peers: HashMap<String, LivePeer>,
}

/// The live-state owner.
#[derive(Debug)]
pub struct Hub {
    tenants: Mutex<HashMap<String, TenantHub>>,
    next_conn: AtomicU64,
    next_epoch: AtomicU64,
    catch_ups: mpsc::UnboundedSender<CatchUp>,
    catch_up_requests: Mutex<Option<mpsc::UnboundedReceiver<CatchUp>>>,
    /// Keys revoked through this process, so a connection authenticated just before the revoke
    /// but registered just after it is closed too (see `connection::serve`).
    revoked: Mutex<std::collections::HashSet<String>>,
}

impl Default for Hub {
    fn default() -> Self {
        let (catch_ups, requests) = mpsc::unbounded_channel();
        Self {
            tenants: Mutex::default(),
            next_conn: AtomicU64::default(),
            next_epoch: AtomicU64::default(),
            catch_ups,
            catch_up_requests: Mutex::new(Some(requests)),
            revoked: Mutex::default(),
        }
    }
}

impl Hub {
    fn lock(&self) -> MutexGuard<'_, HashMap<String, TenantHub>> {
        // A poisoned lock means a panic mid-update in a short section with no awaits; the maps
        // are still structurally valid, so keep serving rather than take the process down.
        self.tenants.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A fresh connection id.
    pub fn next_conn_id(&self) -> ConnId {
        self.next_conn.fetch_add(1, Ordering::Relaxed) + 1
    }

    /// Adds a connection.
    pub fn add_conn(&self, tenant_id: &str, conn: ConnHandle) {
        self.lock()
            .entry(tenant_id.to_owned())
            .or_default()
            .conns
            .insert(conn.id, conn);
    }

    /// Removes a connection; returns the peers it held (now offline).
    pub fn remove_conn(&self, tenant_id: &str, conn: ConnId) -> Vec<PeerRecord> {
        let mut tenants = self.lock();
        let Some(t) = tenants.get_mut(tenant_id) else {
            return Vec::new();
        };
        t.conns.remove(&conn);
        let gone: Vec<String> = t
            .peers
            .iter()
            .filter(|(_, p)| p.conn == conn)
            .map(|(id, _)| id.clone())
            .collect();
        let records = gone
            .iter()
            .filter_map(|id| t.peers.remove(id))
            .map(|p| p.record)
            .collect();
        if t.conns.is_empty() && t.peers.is_empty() {
            tenants.remove(tenant_id);
        }
        records
    }

    /// The peer, if `conn` holds it.
    pub fn owned_peer(&self, tenant_id: &str, conn: ConnId, peer_id: &str) -> Option<LivePeer> {
        self.lock()
            .get(tenant_id)
            .and_then(|t| t.peers.get(peer_id))
            .filter(|p| p.conn == conn)
            .cloned()
    }

    /// The peer, if live anywhere on this process.
    pub fn live_peer(&self, tenant_id: &str, peer_id: &str) -> Option<LivePeer> {
        self.lock()
            .get(tenant_id)
            .and_then(|t| t.peers.get(peer_id))
            .cloned()
    }

    /// Live peers of a tenant with a display name.
    pub fn live_named(&self, tenant_id: &str, name: &str) -> Vec<LivePeer> {
        self.lock()
            .get(tenant_id)
            .map(|t| {
                t.peers
                    .values()
                    .filter(|p| p.record.name == name)
                    .cloned()
                    .collect()
            })
            .unwrap_or_default()
    }

    /// Every live peer of a tenant.
    pub fn live_peers(&self, tenant_id: &str) -> Vec<LivePeer> {
        self.lock()
            .get(tenant_id)
            .map(|t| t.peers.values().cloned().collect())
            .unwrap_or_default()
    }

    /// Updates a bound peer's live fields; returns the updated snapshot.
    pub fn update_peer(
        &self,
        tenant_id: &str,
        conn: ConnId,
        peer_id: &str,
        turn_state: Option<TurnState>,
        description: Option<Option<String>>,
        now_ms: i64,
    ) -> Option<LivePeer> {
        let mut tenants = self.lock();
        let p = tenants
            .get_mut(tenant_id)?
            .peers
            .get_mut(peer_id)
            .filter(|p| p.conn == conn)?;
        if let Some(ts) = turn_state {
            p.turn_state = ts;
        }
        if let Some(d) = description {
            p.record.description_at_ms = d.as_ref().map(|_| now_ms);
            p.record.description = d;
        }
        p.last_seen_ms = now_ms;
        Some(p.clone())
    }

    /// Records the Repowire session a live peer executes now.
    pub fn set_session(&self, tenant_id: &str, peer_id: &str, session_id: &str) {
        if let Some(p) = self
            .lock()
            .get_mut(tenant_id)
            .and_then(|t| t.peers.get_mut(peer_id))
        {
            p.session_id = Some(session_id.to_owned());
        }
    }

    /// Clears an expired description on the live snapshot, unless it was replaced since
    /// (`set_at` is when the expired one was set).
    pub fn clear_description(&self, tenant_id: &str, peer_id: &str, set_at: i64) {
        if let Some(p) = self
            .lock()
            .get_mut(tenant_id)
            .and_then(|t| t.peers.get_mut(peer_id))
            && p.record.description_at_ms == Some(set_at)
        {
            p.record.description = None;
            p.record.description_at_ms = None;
        }
    }

    fn push(conn: &ConnHandle, frame: Outbound) -> bool {
        match conn.tx.try_push(frame) {
            Ok(()) => true,
            Err(PushError::Full) => {
                conn.kick.kick(
                    CloseCode::SLOW_CONSUMER,
                    "outbound queue full; reconnect and resume",
                );
                false
            }
            Err(PushError::Closed) => false,
        }
    }

    /// Sends a frame to a connection. False if it is gone or was kicked as slow.
    pub fn send_to_conn(&self, tenant_id: &str, conn: ConnId, frame: Outbound) -> bool {
        let tenants = self.lock();
        match tenants.get(tenant_id).and_then(|t| t.conns.get(&conn)) {
            Some(c) => Self::push(c, frame),
            None => false,
        }
    }

    /// Sends a frame to the connection holding a peer. False if the peer is not live here.
    pub fn send_to_peer(&self, tenant_id: &str, peer_id: &str, frame: Outbound) -> bool {
        let tenants = self.lock();
        let Some(t) = tenants.get(tenant_id) else {
            return false;
        };
        match t.peers.get(peer_id).and_then(|p| t.conns.get(&p.conn)) {
            Some(c) => Self::push(c, frame),
            None => false,
        }
    }

    /// Every live peer of this process, with its tenant.
    pub fn all_live(&self) -> Vec<(String, LivePeer)> {
        self.lock()
            .iter()
            .flat_map(|(t, th)| th.peers.values().map(|p| (t.clone(), p.clone())))
            .collect()
    }

    /// Sends a frame to every connection of a tenant.
    pub fn broadcast(&self, tenant_id: &str, frame: Outbound) {
        if let Some(t) = self.lock().get(tenant_id) {
            for c in t.conns.values() {
                Self::push(c, frame.clone());
            }
        }
    }

    /// True if `key_id` was revoked through this process.
    pub fn is_revoked(&self, key_id: &str) -> bool {
        self.revoked
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .contains(key_id)
    }

    /// Closes every connection authenticated with `key_id`, and remembers the revocation.
    pub fn kick_key(&self, key_id: &str, code: u16, reason: &str) -> usize {
        self.revoked
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(key_id.to_owned());
        self.close_key(key_id, code, reason)
    }

    /// Closes every connection authenticated with `key_id` without remembering anything: the
    /// key may be used again (its tenant was suspended and may be resumed).
    pub fn close_key(&self, key_id: &str, code: u16, reason: &str) -> usize {
        let tenants = self.lock();
        let mut n = 0;
        for c in tenants
            .values()
            .flat_map(|t| t.conns.values())
            .filter(|c| c.key_id == key_id)
        {
            c.kick.kick(code, reason);
            n += 1;
        }
        n
    }

    /// The API keys of the open connections (each once).
    pub fn connected_keys(&self) -> Vec<String> {
        let keys: std::collections::BTreeSet<String> = self
            .lock()
            .values()
            .flat_map(|t| t.conns.values())
            .map(|c| c.key_id.clone())
            .collect();
        keys.into_iter().collect()
    }

    /// This process's connections, by tenant.
    pub fn conns_by_tenant(&self) -> Vec<(String, Vec<ConnId>)> {
        self.lock()
            .iter()
            .filter(|(_, t)| !t.conns.is_empty())
            .map(|(tenant, t)| (tenant.clone(), t.conns.keys().copied().collect()))
            .collect()
    }

    /// Closes every connection of this process (shutdown).
    pub fn kick_all(&self, code: u16, reason: &str) {
        for c in self.lock().values().flat_map(|t| t.conns.values()) {
            c.kick.kick(code, reason);
        }
    }

    /// Closes one connection.
    pub fn kick_conn(&self, tenant_id: &str, conn: ConnId, code: u16, reason: &str) {
        if let Some(c) = self.lock().get(tenant_id).and_then(|t| t.conns.get(&conn)) {
            c.kick.kick(code, reason);
        }
    }
}

#[cfg(test)]
mod tests;
