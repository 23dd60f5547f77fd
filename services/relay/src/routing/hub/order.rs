//! Delivery order per peer binding.
//!
//! A peer that (re)binds starts in catch-up. Live deliveries for it are skipped (they are safe
//! in its inbox) until the catch-up task has pushed every pending entry and
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

use std::sync::atomic::Ordering;

use tokio::sync::mpsc;

use super::{ConnId, Hub, OutSender, Outbound};

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

impl Hub {
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
    /// Catch-up and replay push through it with [`OutSender::send_bulk`].
    pub fn conn_sender(
        &self,
        tenant_id: &str,
        conn: ConnId,
        peer_id: &str,
        epoch: Option<u64>,
    ) -> Option<OutSender> {
        let tenants = self.lock();
        let t = tenants.get(tenant_id)?;
        t.peers
            .get(peer_id)
            .filter(|p| p.conn == conn && epoch.is_none_or(|e| p.epoch == e))?;
        t.conns.get(&conn).map(|c| c.tx.clone())
    }

    /// The outbound queue for a catch-up of binding `epoch` about to push entry `seq`, which
    /// is recorded as pushed (the connection is gone if the push then fails).
    pub fn catch_up_sender(&self, c: &CatchUp, seq: i64) -> Option<OutSender> {
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
}
