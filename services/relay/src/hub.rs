//! Live state of this relay process: connections, which peer is bound to which connection,
//! turn state, and per-peer delivery ordering.
//!
//! The hub is the only owner of this state; callers use its methods and never see the lock.
//! The lock is a std `Mutex` held for short, non-async sections only. Frames are pushed with
//! `try_send`: a connection whose queue is full is kicked as a slow consumer (it resumes from
//! its inbox on reconnect) instead of blocking everyone else.
//!
//! Ordering: a peer that (re)binds starts in catch-up. Live deliveries for it are skipped
//! (they are safe in its inbox) until the catch-up task has pushed every pending entry and
//! [`Hub::finish_catch_up`] confirms nothing newer was committed meanwhile; from then on live
//! deliveries flow in commit order.
//!
//! In a cluster, a peer's entries are committed by every pod, and a forwarded one can arrive
//! after a later entry committed here. So the hub remembers the highest `seq` it pushed for
//! each binding: an entry at or below it was already pushed (by a catch-up) and is not pushed
//! again, and an entry that skips past the next `seq` puts the peer back into catch-up, which
//! pushes the missing entries from the inbox in order (a request on
//! [`Hub::take_catch_up_requests`]). `seq` per binding therefore only ever increases
//! (protocol.md §10.9).

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};

use repowire_protocol::{CloseCode, PeerInfo, PeerStatus, PeerSummary, Role, TurnState};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::store::PeerRecord;

/// An encoded frame on its way to a connection. `Box<str>` rather than `Utf8Bytes`: each
/// connection's queue allocates a block of 32 slots up front, and 16-byte slots instead of 32
/// save ~0.5 KiB per idle connection (measured with `repowire-bench`). Turning it into a
/// WebSocket message does not copy.
pub type Outbound = Box<str>;

/// Connection id, unique in this process.
pub type ConnId = u64;

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
    pub tx: mpsc::Sender<Outbound>,
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

/// Free slots a bulk sender (catch-up, replay) leaves in a connection's queue, so live frames
/// pushed with `try_send` meanwhile do not find it full and kick the connection.
const BULK_HEADROOM: usize = 64;

/// Sends a frame from a bulk stream, first waiting until the queue has more than
/// [`BULK_HEADROOM`] free slots. It polls rather than reserving: tokio's `reserve_many` would
/// hold the slots it has gathered while waiting, starving the very pushes the headroom is for.
/// False if the connection is gone.
pub async fn send_bulk(tx: &mpsc::Sender<Outbound>, frame: Outbound) -> bool {
    let headroom = BULK_HEADROOM.min(tx.max_capacity().saturating_sub(1));
    while tx.capacity() <= headroom {
        if tx.is_closed() {
            return false;
        }
        tokio::time::sleep(std::time::Duration::from_millis(2)).await;
    }
    tx.send(frame).await.is_ok()
}

/// Parses a stored role; unknown spellings are treated as `agent` (least privilege).
pub fn parse_role(s: &str) -> Role {
    match s {
        "service" => Role::Service,
        "human" => Role::Human,
        "orchestrator" => Role::Orchestrator,
        _ => Role::Agent,
    }
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

#[derive(Debug, Default)]
struct TenantHub {
    conns: HashMap<ConnId, ConnHandle>,
    peers: HashMap<String, LivePeer>,
}

/// A catch-up to run: the pending inbox entries of `peer_id` with `seq > after_seq`, pushed
/// in order on `conn` while binding `epoch` holds the peer (`route::catch_up`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CatchUp {
    /// Tenant.
    pub tenant_id: String,
    /// The peer.
    pub peer_id: String,
    /// The connection holding it.
    pub conn: ConnId,
    /// The binding.
    pub epoch: u64,
    /// Entries up to this seq were pushed in this binding already.
    pub after_seq: i64,
}

/// What became of a live delivery.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Live {
    /// Pushed to the connection holding the peer.
    Pushed,
    /// The peer is here, but this push is not needed or not yet in order: a catch-up pushes
    /// (or pushed) the entry from the inbox.
    Held,
    /// The peer is not live in this process.
    NotHere,
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

    /// Binds a peer to a connection, choosing its display name: `base`, else `base-2`,
    /// `base-3` … — the first not held by another live peer of the same circle.
    pub fn bind_peer(&self, conn: ConnId, record: PeerRecord, base: &str, now_ms: i64) -> Bound {
        self.bind_peer_avoiding(conn, record, base, now_ms, &[])
    }

    /// Like [`Hub::bind_peer`], also avoiding names live peers of the same circle hold on
    /// other pods of the cluster.
    pub fn bind_peer_avoiding(
        &self,
        conn: ConnId,
        mut record: PeerRecord,
        base: &str,
        now_ms: i64,
        taken_elsewhere: &[String],
    ) -> Bound {
        let mut tenants = self.lock();
        let t = tenants.entry(record.tenant_id.clone()).or_default();
        let taken = |name: &str| {
            taken_elsewhere.iter().any(|n| n == name)
                || t.peers.values().any(|p| {
                    p.record.peer_id != record.peer_id
                        && p.record.circle == record.circle
                        && p.record.name == name
                })
        };
        let mut name = base.to_owned();
        let mut n = 2;
        while taken(&name) {
            let suffix = format!("-{n}");
            let keep = base
                .len()
                .min(repowire_protocol::limits::MAX_NAME_BYTES - suffix.len());
            name = format!("{}{suffix}", &base[..keep]);
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

    /// The catch-ups live deliveries ask for when they find a gap (see the module doc); the
    /// caller runs each one. `Some` once.
    pub fn take_catch_up_requests(&self) -> Option<mpsc::UnboundedReceiver<CatchUp>> {
        self.catch_up_requests
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take()
    }

    /// Puts a live peer back into catch-up, so pending inbox entries it was not pushed are
    /// pushed in order — after the cluster bus was down and forwards may have been lost. The
    /// binding gets a new epoch, so a replay still running for the old one stops at its next
    /// step. `None` if the peer is not here, or is catching up already (that catch-up reads the
    /// inbox until it is current, so it covers what was lost).
    pub fn restart_catch_up(&self, tenant_id: &str, peer_id: &str) -> Option<CatchUp> {
        let epoch = self.next_epoch.fetch_add(1, Ordering::Relaxed) + 1;
        let mut tenants = self.lock();
        let p = tenants
            .get_mut(tenant_id)?
            .peers
            .get_mut(peer_id)
            .filter(|p| !p.catching_up)?;
        p.catching_up = true;
        p.replaying = false;
        p.epoch = epoch;
        Some(CatchUp {
            tenant_id: tenant_id.to_owned(),
            peer_id: peer_id.to_owned(),
            conn: p.conn,
            epoch,
            after_seq: p.pushed_seq,
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

    /// Marks a replay of the peer's inbox as running on this binding; `None` if one already
    /// runs (one at a time per peer, so a client cannot pile up replay tasks). Returns the
    /// binding's epoch for [`Hub::end_replay`].
    pub fn start_replay(&self, tenant_id: &str, conn: ConnId, peer_id: &str) -> Option<u64> {
        let mut tenants = self.lock();
        let p = tenants
            .get_mut(tenant_id)?
            .peers
            .get_mut(peer_id)
            .filter(|p| p.conn == conn && !p.replaying)?;
        p.replaying = true;
        Some(p.epoch)
    }

    /// Ends a replay started with [`Hub::start_replay`] on binding `epoch` (a newer binding has
    /// its own flag).
    pub fn end_replay(&self, tenant_id: &str, peer_id: &str, epoch: u64) {
        if let Some(p) = self
            .lock()
            .get_mut(tenant_id)
            .and_then(|t| t.peers.get_mut(peer_id))
            .filter(|p| p.epoch == epoch)
        {
            p.replaying = false;
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
        match conn.tx.try_send(frame) {
            Ok(()) => true,
            Err(mpsc::error::TrySendError::Full(_)) => {
                conn.kick.kick(
                    CloseCode::SLOW_CONSUMER,
                    "outbound queue full; reconnect and resume",
                );
                false
            }
            Err(mpsc::error::TrySendError::Closed(_)) => false,
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

    /// A live delivery after commit, for entry `seq` of the peer's inbox: pushed if it is the
    /// next one this binding is owed. Held (the inbox has it) while the peer catches up, if a
    /// catch-up pushed it already, or if an earlier entry has not come this way yet — a forward
    /// still on its way from another pod, or an entry never pushed live (a `failed` one); then
    /// the peer goes back into catch-up to push the entries from the inbox in order.
    pub fn deliver_live(
        &self,
        tenant_id: &str,
        peer_id: &str,
        seq: i64,
        frame: impl FnOnce() -> Outbound,
    ) -> Live {
        let mut tenants = self.lock();
        let Some(t) = tenants.get_mut(tenant_id) else {
            return Live::NotHere;
        };
        let Some(p) = t.peers.get_mut(peer_id) else {
            return Live::NotHere;
        };
        p.latest_seq = p.latest_seq.max(seq);
        if p.catching_up || seq <= p.pushed_seq {
            return Live::Held;
        }
        if seq > p.pushed_seq + 1 {
            p.catching_up = true;
            tracing::debug!(peer = %peer_id, seq, pushed = p.pushed_seq, "entries missing before a live delivery; catching up from the inbox");
            let _ = self.catch_ups.send(CatchUp {
                tenant_id: tenant_id.to_owned(),
                peer_id: peer_id.to_owned(),
                conn: p.conn,
                epoch: p.epoch,
                after_seq: p.pushed_seq,
            });
            return Live::Held;
        }
        match t.conns.get(&p.conn) {
            Some(c) if Self::push(c, frame()) => {
                p.pushed_seq = seq;
                Live::Pushed
            }
            // Gone or kicked as slow: the entry waits in the inbox for the next registration.
            _ => Live::Held,
        }
    }

    /// The outbound queue of `conn`, while it holds the peer (in binding `epoch`, if given).
    /// Catch-up and replay push through it with [`send_bulk`].
    pub fn conn_sender(
        &self,
        tenant_id: &str,
        conn: ConnId,
        peer_id: &str,
        epoch: Option<u64>,
    ) -> Option<mpsc::Sender<Outbound>> {
        let tenants = self.lock();
        let t = tenants.get(tenant_id)?;
        t.peers
            .get(peer_id)
            .filter(|p| p.conn == conn && epoch.is_none_or(|e| p.epoch == e))?;
        t.conns.get(&conn).map(|c| c.tx.clone())
    }

    /// The outbound queue for a catch-up of binding `epoch` about to push entry `seq`, which
    /// is recorded as pushed (the connection is gone if the push then fails).
    pub fn catch_up_sender(&self, c: &CatchUp, seq: i64) -> Option<mpsc::Sender<Outbound>> {
        let mut tenants = self.lock();
        let t = tenants.get_mut(&c.tenant_id)?;
        let p = t
            .peers
            .get_mut(&c.peer_id)
            .filter(|p| p.conn == c.conn && p.epoch == c.epoch)?;
        p.pushed_seq = p.pushed_seq.max(seq);
        t.conns.get(&c.conn).map(|conn| conn.tx.clone())
    }

    /// The highest seq dispatched for the peer so far, while binding `epoch` holds it.
    pub fn latest_seq(&self, tenant_id: &str, peer_id: &str, epoch: u64) -> Option<i64> {
        self.lock()
            .get(tenant_id)?
            .peers
            .get(peer_id)
            .filter(|p| p.epoch == epoch)
            .map(|p| p.latest_seq)
    }

    /// Ends catch-up if nothing was dispatched for the peer since `snapshot` (a
    /// [`Hub::latest_seq`] taken before the catch-up read, which therefore saw every commit up
    /// to it). `Some(true)`: done; `Some(false)`: read again; `None`: binding `epoch` is gone.
    ///
    /// Done, every pending entry up to `snapshot`, and up to the inbox seq the peer registered
    /// with, was pushed: live deliveries continue after the higher of the two.
    pub fn finish_catch_up(
        &self,
        tenant_id: &str,
        peer_id: &str,
        epoch: u64,
        snapshot: i64,
    ) -> Option<bool> {
        let mut tenants = self.lock();
        let p = tenants
            .get_mut(tenant_id)?
            .peers
            .get_mut(peer_id)
            .filter(|p| p.epoch == epoch)?;
        if p.latest_seq <= snapshot {
            p.catching_up = false;
            p.pushed_seq = p.pushed_seq.max(snapshot).max(p.record.last_seq);
            Some(true)
        } else {
            Some(false)
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

    /// Closes one connection.
    pub fn kick_conn(&self, tenant_id: &str, conn: ConnId, code: u16, reason: &str) {
        if let Some(c) = self.lock().get(tenant_id).and_then(|t| t.conns.get(&conn)) {
            c.kick.kick(code, reason);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn connect(
        hub: &Hub,
        tenant: &str,
        id: ConnId,
        key_id: &str,
        tx: mpsc::Sender<Outbound>,
        kick: Arc<Kick>,
    ) {
        hub.add_conn(
            tenant,
            ConnHandle {
                id,
                key_id: key_id.into(),
                tx,
                kick,
            },
        );
    }

    fn record(peer_id: &str, circle: &str) -> PeerRecord {
        PeerRecord::for_tests("t", peer_id, "", circle)
    }

    #[test]
    fn colliding_names_in_one_circle_get_suffixes_but_other_circles_do_not() {
        let hub = Hub::default();
        assert_eq!(
            hub.bind_peer(1, record("p1", "a"), "api", 0).record.name,
            "api"
        );
        assert_eq!(
            hub.bind_peer(1, record("p2", "a"), "api", 0).record.name,
            "api-2"
        );
        assert_eq!(
            hub.bind_peer(1, record("p3", "a"), "api", 0).record.name,
            "api-3"
        );
        assert_eq!(
            hub.bind_peer(1, record("p4", "b"), "api", 0).record.name,
            "api"
        );
        // Rebinding the same peer keeps its own name.
        assert_eq!(
            hub.bind_peer(2, record("p1", "a"), "api", 0).record.name,
            "api"
        );
    }

    #[test]
    fn live_deliveries_wait_for_catch_up_to_finish() {
        let hub = Hub::default();
        let (tx, mut rx) = mpsc::channel(8);
        connect(&hub, "t", 1, "k", tx, Arc::default());
        let epoch = hub.bind_peer(1, record("p1", "a"), "api", 0).epoch;
        assert_eq!(
            hub.deliver_live("t", "p1", 1, || "m1".into()),
            Live::Held,
            "skipped while catching up"
        );
        assert_eq!(
            hub.finish_catch_up("t", "p1", epoch, 0),
            Some(false),
            "seq 1 was committed after the read"
        );
        assert_eq!(hub.finish_catch_up("t", "p1", epoch, 1), Some(true));
        assert_eq!(hub.deliver_live("t", "p1", 2, || "m2".into()), Live::Pushed);
        assert_eq!(&*rx.try_recv().expect("pushed"), "m2");
        assert_eq!(
            hub.deliver_live("t", "other", 1, || "m".into()),
            Live::NotHere
        );
    }

    /// Live pushes for a binding never go back in `seq`: an entry arriving after a later one
    /// (a forward from another pod) was pushed by the catch-up the later one started, and is
    /// not pushed again.
    #[test]
    fn an_entry_that_skips_ahead_starts_a_catch_up_and_late_ones_are_not_pushed_again() {
        let hub = Hub::default();
        let mut requests = hub.take_catch_up_requests().expect("first take");
        assert!(hub.take_catch_up_requests().is_none(), "taken once");
        let (tx, mut rx) = mpsc::channel(8);
        connect(&hub, "t", 1, "k", tx, Arc::default());
        let epoch = hub.bind_peer(1, record("p1", "a"), "api", 0).epoch;
        assert_eq!(hub.finish_catch_up("t", "p1", epoch, 0), Some(true));
        assert_eq!(hub.deliver_live("t", "p1", 1, || "m1".into()), Live::Pushed);

        // Entry 3 before 2: held, and a catch-up from 1 is asked for.
        assert_eq!(hub.deliver_live("t", "p1", 3, || "m3".into()), Live::Held);
        let c = requests.try_recv().expect("a catch-up was asked for");
        assert_eq!((c.conn, c.epoch, c.after_seq), (1, epoch, 1));
        assert_eq!(hub.deliver_live("t", "p1", 4, || "m4".into()), Live::Held);
        assert!(requests.try_recv().is_err(), "one catch-up at a time");
        // The catch-up pushes 2, 3 and 4 from the inbox, read after a snapshot of 4.
        for seq in 2..=4 {
            assert!(hub.catch_up_sender(&c, seq).is_some());
        }
        assert_eq!(hub.finish_catch_up("t", "p1", epoch, 4), Some(true));

        // The late forward of entry 2 is not pushed again; entry 5 is.
        assert_eq!(hub.deliver_live("t", "p1", 2, || "m2".into()), Live::Held);
        assert_eq!(hub.deliver_live("t", "p1", 5, || "m5".into()), Live::Pushed);
        let pushed: Vec<String> = std::iter::from_fn(|| rx.try_recv().ok())
            .map(String::from)
            .collect();
        assert_eq!(pushed, ["m1", "m5"], "2 to 4 went by the catch-up");
        assert!(requests.try_recv().is_err());
    }

    /// A registration's catch-up covers the inbox up to the seq the peer registered with, so
    /// the first live entry after it is no gap.
    #[test]
    fn live_delivery_continues_after_the_inbox_seq_of_the_registration() {
        let hub = Hub::default();
        let mut requests = hub.take_catch_up_requests().expect("requests");
        let (tx, mut rx) = mpsc::channel(8);
        connect(&hub, "t", 1, "k", tx, Arc::default());
        let mut reclaimed = record("p1", "a");
        reclaimed.last_seq = 7;
        let epoch = hub.bind_peer(1, reclaimed, "api", 0).epoch;
        assert_eq!(hub.finish_catch_up("t", "p1", epoch, 0), Some(true));
        assert_eq!(hub.deliver_live("t", "p1", 8, || "m8".into()), Live::Pushed);
        assert_eq!(&*rx.try_recv().expect("pushed"), "m8");
        assert!(requests.try_recv().is_err());
    }

    /// After the bus was down, a catch-up starts again after what was pushed, unless one is
    /// running (it reads the inbox until current anyway).
    #[test]
    fn a_restarted_catch_up_begins_after_what_was_pushed() {
        let hub = Hub::default();
        let (tx, _rx) = mpsc::channel(8);
        connect(&hub, "t", 1, "k", tx, Arc::default());
        let epoch = hub.bind_peer(1, record("p1", "a"), "api", 0).epoch;
        assert_eq!(hub.restart_catch_up("t", "p1"), None, "one is running");
        assert_eq!(hub.finish_catch_up("t", "p1", epoch, 0), Some(true));
        assert_eq!(hub.deliver_live("t", "p1", 1, || "m1".into()), Live::Pushed);
        let c = hub.restart_catch_up("t", "p1").expect("restarted");
        assert_eq!((c.after_seq, c.conn), (1, 1));
        assert_ne!(c.epoch, epoch, "a replay of the old epoch stops");
        assert_eq!(hub.deliver_live("t", "p1", 2, || "m2".into()), Live::Held);
    }

    #[test]
    fn a_full_queue_kicks_the_connection_as_a_slow_consumer() {
        let hub = Hub::default();
        let (tx, _rx) = mpsc::channel(1);
        let kick = Arc::new(Kick::default());
        connect(&hub, "t", 1, "k", tx, kick.clone());
        assert!(hub.send_to_conn("t", 1, "a".into()));
        assert!(!hub.send_to_conn("t", 1, "b".into()));
        assert_eq!(
            kick.reason.get().map(|r| r.0),
            Some(CloseCode::SLOW_CONSUMER)
        );
    }

    #[test]
    fn revoking_a_key_kicks_only_its_connections() {
        let hub = Hub::default();
        let (a, b) = (Arc::new(Kick::default()), Arc::new(Kick::default()));
        let (tx, _rx) = mpsc::channel(1);
        connect(&hub, "t1", 1, "k1", tx.clone(), a.clone());
        connect(&hub, "t2", 2, "k2", tx, b.clone());
        assert_eq!(hub.kick_key("k1", CloseCode::KEY_REVOKED, "revoked"), 1);
        assert!(a.token.is_cancelled() && !b.token.is_cancelled());
    }

    #[test]
    fn a_rebind_makes_the_old_bindings_catch_up_stale() {
        let hub = Hub::default();
        let (tx, _rx) = mpsc::channel(8);
        connect(&hub, "t", 1, "k", tx, Arc::default());
        let first = hub.bind_peer(1, record("p1", "a"), "api", 0).epoch;
        let second = hub.bind_peer(1, record("p1", "a"), "api", 0).epoch;
        assert_ne!(first, second);
        assert_eq!(
            hub.latest_seq("t", "p1", first),
            None,
            "the old catch-up stops"
        );
        assert!(hub.conn_sender("t", 1, "p1", Some(first)).is_none());
        assert_eq!(
            hub.finish_catch_up("t", "p1", first, 0),
            None,
            "and cannot open the new binding's live path"
        );
        assert_eq!(hub.finish_catch_up("t", "p1", second, 0), Some(true));
    }

    #[test]
    fn a_failed_registration_restores_the_binding_it_replaced() {
        let hub = Hub::default();
        let old = hub.bind_peer(1, record("p1", "a"), "api", 0);
        let new = hub.bind_peer(2, record("p1", "a"), "api", 0);
        assert_eq!(new.previous_conn, Some(1));
        let restored = hub
            .rollback_bind("t", "p1", new.epoch, new.replaced)
            .expect("restored");
        assert_eq!(restored.conn, 1);
        assert_ne!(restored.epoch, old.epoch, "the old catch-up stops");
        let back = hub.live_peer("t", "p1").expect("still live");
        assert_eq!((back.conn, back.epoch), (1, restored.epoch));
        // Without a replaced binding, the peer is simply unbound.
        let fresh = hub.bind_peer(1, record("p2", "a"), "web", 0);
        hub.rollback_bind("t", "p2", fresh.epoch, fresh.replaced);
        assert!(hub.live_peer("t", "p2").is_none());
    }

    #[test]
    fn an_expired_description_is_cleared_only_if_unchanged() {
        let hub = Hub::default();
        hub.bind_peer(1, record("p1", "a"), "api", 0);
        hub.update_peer("t", 1, "p1", None, Some(Some("old".into())), 10);
        hub.update_peer("t", 1, "p1", None, Some(Some("new".into())), 20);
        hub.clear_description("t", "p1", 10);
        assert_eq!(
            hub.live_peer("t", "p1")
                .and_then(|p| p.record.description)
                .as_deref(),
            Some("new")
        );
        hub.clear_description("t", "p1", 20);
        assert_eq!(
            hub.live_peer("t", "p1").and_then(|p| p.record.description),
            None
        );
    }

    #[test]
    fn one_replay_at_a_time_per_peer() {
        let hub = Hub::default();
        hub.bind_peer(1, record("p1", "a"), "api", 0);
        let epoch = hub.start_replay("t", 1, "p1").expect("first replay");
        assert_eq!(
            hub.start_replay("t", 1, "p1"),
            None,
            "a second one waits for the first"
        );
        assert_eq!(
            hub.start_replay("t", 2, "p1"),
            None,
            "only the holding connection may replay"
        );
        hub.end_replay("t", "p1", epoch + 1);
        assert_eq!(
            hub.start_replay("t", 1, "p1"),
            None,
            "another binding's end does not count"
        );
        hub.end_replay("t", "p1", epoch);
        assert!(hub.start_replay("t", 1, "p1").is_some());
    }
}
