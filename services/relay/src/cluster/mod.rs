//! Relay pods as one cluster, through the [`Bus`]: each pod records the peers it holds
//! (presence with a TTL, refreshed by a heartbeat, withdrawn when they leave), claims display
//! names cluster-wide, forwards frames for peers held by another pod, and relays tenant-wide
//! presence frames and key revocations. This module sends; [`crate::routing::inbound`] applies
//! what arrives (at the routing layer: it delivers, and restarts catch-ups). [`bus`] is the
//! transport (Redis across pods, in-process for one), with the GCRA rate primitive ([`bus::gcra`])
//! its shared limits are taken with.
//!
//! Durability does not depend on any of this: every message is in the database before it is
//! accepted, and a peer that registers (on any pod) gets its inbox pushed first. A forward that
//! is lost (the holding pod died, Redis blinked) leaves the entry in the inbox, delivered when
//! the peer next registers. Ordering: forwards leave this pod in commit order (one task), and a
//! peer's presence is recorded before its catch-up reads the inbox, so a message committed
//! after that read is either forwarded or seen by the catch-up's re-check.

pub mod bus;
pub mod events;

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use repowire_protocol::{PeerInfo, PeerStatus, TurnState};
use tokio::sync::mpsc;

use crate::cluster::bus::{Bus, BusEvent, Presence, Refreshed, Target};
use crate::routing::hub::{LivePeer, Outbound};

/// What leaves this pod through the bus, in order.
#[derive(Debug)]
enum Outgoing {
    /// A frame for the pod holding a peer.
    Forward {
        tenant_id: String,
        peer_id: String,
        seq: Option<i64>,
        frame: Outbound,
        traceparent: Option<String>,
    },
    /// A frame for every pod's connections of a tenant.
    Tenant(BusEvent),
}

/// This pod's view of the cluster.
#[derive(Debug)]
pub struct Cluster {
    bus: Arc<dyn Bus>,
    ttl: Duration,
    forwards: mpsc::UnboundedSender<Outgoing>,
    /// A presence write failed since the last [`Cluster::take_presence_gap`]: other pods may
    /// have seen a peer of this pod offline and left a message in its inbox unforwarded.
    presence_gap: AtomicBool,
    /// A refresh found a record missing (expired, evicted, Redis emptied) and wrote it again:
    /// the same consequence, though every write succeeded.
    presence_lapsed: AtomicBool,
    /// The tenant event logs.
    events: Arc<events::EventLog>,
}

impl Cluster {
    /// Starts the forwarding task (in commit order) on `bus`; tenant events go to `events`.
    pub fn start(bus: Arc<dyn Bus>, ttl: Duration, events: Arc<events::EventLog>) -> Arc<Self> {
        let (forwards, rx) = mpsc::unbounded_channel();
        tokio::spawn(forward_in_order(bus.clone(), rx));
        Arc::new(Self {
            events,
            bus,
            ttl,
            forwards,
            presence_gap: AtomicBool::new(false),
            presence_lapsed: AtomicBool::new(false),
        })
    }

    /// This pod's name.
    pub fn pod(&self) -> &str {
        self.bus.pod()
    }

    /// The bus.
    pub fn bus(&self) -> &Arc<dyn Bus> {
        &self.bus
    }

    /// The tenant event logs.
    pub fn events(&self) -> &events::EventLog {
        &self.events
    }

    /// How long a presence record lasts unless refreshed.
    pub fn ttl(&self) -> Duration {
        self.ttl
    }

    /// A frame for a peer not live in this process: to the pod that holds it, if any.
    pub fn forward(&self, tenant_id: &str, peer_id: &str, seq: Option<i64>, frame: Outbound) {
        let _ = self.forwards.send(Outgoing::Forward {
            tenant_id: tenant_id.to_owned(),
            peer_id: peer_id.to_owned(),
            seq,
            frame,
            traceparent: crate::telemetry::current_traceparent(),
        });
    }

    fn presence_of(&self, live: &LivePeer) -> Presence {
        Presence {
            pod: self.pod().to_owned(),
            peer_id: live.record.peer_id.clone(),
            name: live.record.name.clone(),
            circle: live.record.circle.clone(),
            role: live.record.role.clone(),
            turn_state: live.turn_state.as_str().to_owned(),
            last_seen_ms: live.last_seen_ms,
        }
    }

    /// A peer was just bound here: if another pod held it, that pod lets it go (the cluster's
    /// takeover notice), then this pod's presence is recorded.
    pub async fn claim(&self, tenant_id: &str, live: &LivePeer) {
        match self.bus.presence(tenant_id, &live.record.peer_id).await {
            Ok(Some(p)) if p.pod != self.pod() => {
                let event = BusEvent::TakenOver {
                    tenant_id: tenant_id.to_owned(),
                    peer_id: live.record.peer_id.clone(),
                    by_pod: self.pod().to_owned(),
                };
                if let Err(error) = self.bus.to_pod(&p.pod, &event).await {
                    tracing::warn!(%error, pod = %p.pod, "could not tell the previous pod about a takeover");
                }
            }
            Ok(_) => {}
            Err(error) => tracing::warn!(%error, "cannot read presence before a takeover"),
        }
        // Awaited: callers rely on it being visible. Unconditional: this is the newest claim.
        if let Err(error) = self
            .bus
            .set_presence(tenant_id, &self.presence_of(live), self.ttl)
            .await
        {
            self.mark_presence_gap();
            tracing::warn!(%error, peer = %live.record.peer_id, "could not record presence; other pods see the peer offline until the next heartbeat");
        }
    }

    /// Notes that presence may be missing (a write failed, or the bus was away).
    pub fn mark_presence_gap(&self) {
        self.presence_gap.store(true, Ordering::SeqCst);
    }

    /// Whether a presence write failed since the last call; clears the mark (and that of a
    /// lapsed record, which the writes that follow put back).
    pub fn take_presence_gap(&self) -> bool {
        self.presence_lapsed.store(false, Ordering::SeqCst);
        self.presence_gap.swap(false, Ordering::SeqCst)
    }

    /// Whether presence may have been missing (a failed write or a lapsed record); the marks
    /// are kept.
    pub fn presence_gap(&self) -> bool {
        self.presence_gap.load(Ordering::SeqCst) || self.presence_lapsed.load(Ordering::SeqCst)
    }

    /// Refreshes the record that this pod holds `live`. False when another pod holds it now
    /// (it claimed the peer after this pod did, and the takeover notice was missed or is still
    /// on its way): nothing is written, so a late heartbeat never takes a peer back.
    pub async fn announce(&self, tenant_id: &str, live: &LivePeer) -> bool {
        match self
            .bus
            .refresh_presence(tenant_id, &self.presence_of(live), self.ttl)
            .await
        {
            Ok(Refreshed::Kept) => true,
            Ok(Refreshed::Recreated) => {
                self.presence_lapsed.store(true, Ordering::SeqCst);
                tracing::info!(peer = %live.record.peer_id, "presence had lapsed; recorded again, pending entries follow");
                true
            }
            Ok(Refreshed::Taken) => false,
            Err(error) => {
                self.mark_presence_gap();
                tracing::warn!(%error, peer = %live.record.peer_id, "could not record presence; other pods see the peer offline until the next heartbeat");
                true
            }
        }
    }

    /// Claims a display name for a peer across the cluster (see [`Bus::claim_name`]): `base`
    /// if free, else `base-2`, `base-3` …, skipping `taken_here` (this pod's live peers of the
    /// circle). `None` when there is nothing to claim against (a single process) or the bus is
    /// unreachable: the hub's own allocation then decides, as on a single relay.
    pub async fn claim_name(
        &self,
        tenant_id: &str,
        circle: &str,
        peer_id: &str,
        base: &str,
        previous: Option<&str>,
        taken_here: &[String],
    ) -> Option<String> {
        if !self.bus.shared() {
            return None;
        }
        let candidates: Vec<String> = std::iter::once(base.to_owned())
            .chain((2..).map(|n| crate::routing::hub::suffixed(base, n)))
            .filter(|name| !taken_here.contains(name))
            .take(NAME_CANDIDATES)
            .collect();
        match self
            .bus
            .claim_name(tenant_id, circle, &candidates, peer_id, previous, self.ttl)
            .await
        {
            Ok(Some(i)) => candidates.get(i).cloned(),
            Ok(None) => {
                tracing::warn!(%base, %circle, "every candidate name is held; allocating on this pod alone");
                None
            }
            Err(error) => {
                tracing::warn!(%error, "cannot claim a name on the bus; allocating on this pod alone");
                None
            }
        }
    }

    /// The peer left this pod.
    pub fn withdraw(&self, tenant_id: &str, peer_id: &str) {
        let (bus, tenant, peer) = (self.bus.clone(), tenant_id.to_owned(), peer_id.to_owned());
        tokio::spawn(async move {
            if let Err(error) = bus.clear_presence(&tenant, &peer).await {
                tracing::warn!(%error, %peer, "could not withdraw presence; it expires by itself");
            }
        });
    }

    /// A frame for every connection of the tenant on the other pods (this pod's own
    /// connections are served by the caller).
    pub fn to_tenant(&self, tenant_id: &str, frame: &Outbound) {
        // Through the ordered task: a peer's online/updated/offline frames keep their order.
        let _ = self.forwards.send(Outgoing::Tenant(BusEvent::ToTenant {
            tenant_id: tenant_id.to_owned(),
            frame: frame.to_string(),
            origin: self.pod().to_owned(),
        }));
    }

    /// A peer of the tenant was stored: every pod's directory drops the tenant's answers.
    /// This pod's is dropped at once; the others hear it on the ordered channel, before any
    /// presence frame the caller sends next.
    pub fn peers_changed(&self, directory: &crate::routing::directory::Directory, tenant_id: &str) {
        directory.changed(tenant_id);
        if self.shared() {
            let _ = self.forwards.send(Outgoing::Tenant(BusEvent::PeersChanged {
                tenant_id: tenant_id.to_owned(),
            }));
        }
    }

    /// Tells every pod (this one too) that limits changed: a tenant's, or a plan's (`None`).
    pub async fn limits_changed(&self, tenant_id: Option<&str>) {
        let event = BusEvent::LimitsChanged {
            tenant_id: tenant_id.map(str::to_owned),
        };
        if let Err(error) = self.bus.to_all(&event).await {
            tracing::warn!(%error, "could not tell the other pods about changed limits; they read them again within the refresh interval");
        }
    }

    /// Tells every pod (this one too) that a key was revoked.
    pub async fn revoked(&self, key_id: &str) {
        let event = BusEvent::KeyRevoked {
            key_id: key_id.to_owned(),
        };
        if let Err(error) = self.bus.to_all(&event).await {
            tracing::warn!(%error, key = key_id, "could not tell the other pods about a revoked key");
        }
    }

    /// Whether other pods may hold peers of this relay's tenants.
    pub fn shared(&self) -> bool {
        self.bus.shared()
    }

    /// Where a peer is live if it is on another pod. Unknown (bus down) is `None`: the peer
    /// then looks offline, which is safe (its entries wait in its inbox).
    pub async fn live_elsewhere(&self, tenant_id: &str, peer_id: &str) -> Option<Presence> {
        if !self.bus.shared() {
            return None;
        }
        match self.bus.presence(tenant_id, peer_id).await {
            Ok(p) => p.filter(|p| p.pod != self.pod()),
            Err(error) => {
                tracing::warn!(%error, peer = %peer_id, "cannot read presence; the peer looks offline");
                None
            }
        }
    }

    /// Peers of the tenant live on other pods, by peer id. Unknown (bus down) is empty: for
    /// lists and name resolution they then look offline, which is safe.
    pub async fn remote_live(&self, tenant_id: &str) -> HashMap<String, Presence> {
        self.remote_live_strict(tenant_id)
            .await
            .unwrap_or_else(|error| {
                tracing::warn!(%error, "cannot read presence; peers on other pods look offline");
                HashMap::new()
            })
    }

    /// Like [`Cluster::remote_live`], failing when the bus is unreachable (for callers whose
    /// answer would be wrong without it, such as a broadcast's recipient list).
    pub async fn remote_live_strict(
        &self,
        tenant_id: &str,
    ) -> crate::cluster::bus::Result<HashMap<String, Presence>> {
        if !self.bus.shared() {
            return Ok(HashMap::new());
        }
        Ok(self
            .bus
            .tenant_presence(tenant_id)
            .await?
            .into_iter()
            .filter(|p| p.pod != self.pod())
            .map(|p| (p.peer_id.clone(), p))
            .collect())
    }
}

/// A peer's wire view with its liveness taken from another pod's presence.
pub fn with_presence(mut info: PeerInfo, p: &Presence) -> PeerInfo {
    info.turn_state = match p.turn_state.as_str() {
        "working" => TurnState::Working,
        "idle" => TurnState::Idle,
        _ => TurnState::Unknown,
    };
    info.status = if info.turn_state == TurnState::Working {
        PeerStatus::Busy
    } else {
        PeerStatus::Online
    };
    info.last_seen_ms = p.last_seen_ms;
    info
}

/// Forwards in commit order, a batch at a time: whatever is queued (up to [`FORWARD_BATCH`])
/// costs two Redis round trips (the holder of every peer named, [`Target::Holder`], then every
/// publish), not two per frame. Per frame they could not keep up with the writer under load,
/// and the backlog reached the receiving pod in bursts that overflowed its connections' queues.
///
/// Peer-change notices a failed publish did not deliver are sent again, first in the next batch
/// (so still before anything sent after them) or alone after [`NOTICE_RETRY`]: without them the
/// other pods would resolve names against an outdated answer until it ages out.
async fn forward_in_order(bus: Arc<dyn Bus>, mut rx: mpsc::UnboundedReceiver<Outgoing>) {
    let mut batch = Vec::with_capacity(FORWARD_BATCH);
    let mut unsent: Vec<BusEvent> = Vec::new();
    loop {
        let received = if unsent.is_empty() {
            rx.recv_many(&mut batch, FORWARD_BATCH).await
        } else {
            match tokio::time::timeout(NOTICE_RETRY, rx.recv_many(&mut batch, FORWARD_BATCH)).await
            {
                Ok(received) => received,
                Err(_) => usize::MAX, // nothing new: retry the notices alone
            }
        };
        if received == 0 {
            return;
        }
        unsent = forward_batch(
            bus.as_ref(),
            std::mem::take(&mut unsent),
            std::mem::take(&mut batch),
        )
        .await;
    }
}

const FORWARD_BATCH: usize = 512;

/// Names tried in one claim: enough for every realistic crowd of one name in a circle.
const NAME_CANDIDATES: usize = 64;

/// How long peer-change notices that could not be published wait before being tried again.
const NOTICE_RETRY: Duration = Duration::from_millis(200);

/// Publishes `notices` then `batch`, in order; returns the peer-change notices not delivered.
async fn forward_batch(
    bus: &dyn Bus,
    notices: Vec<BusEvent>,
    batch: Vec<Outgoing>,
) -> Vec<BusEvent> {
    let mut events: Vec<(Target, BusEvent)> =
        notices.into_iter().map(|n| (Target::All, n)).collect();
    events.reserve(batch.len());
    for out in batch {
        match out {
            Outgoing::Forward {
                tenant_id,
                peer_id,
                seq,
                frame,
                traceparent,
            } => {
                // The bus skips it if the peer is offline or held here after all (the entry
                // waits in the inbox).
                let target = Target::Holder {
                    tenant_id: tenant_id.clone(),
                    peer_id: peer_id.clone(),
                };
                let event = BusEvent::ToPeer {
                    tenant_id,
                    peer_id,
                    seq,
                    frame: frame.to_string(),
                    traceparent,
                };
                events.push((target, event));
            }
            Outgoing::Tenant(event) => events.push((Target::All, event)),
        }
    }
    match bus.send_all(&events).await {
        Ok(()) => Vec::new(),
        Err(error) => {
            tracing::warn!(%error, events = events.len(), "could not forward; the entries wait in the inboxes");
            let mut unsent: Vec<BusEvent> = Vec::new();
            for (_, event) in events {
                if matches!(event, BusEvent::PeersChanged { .. }) && !unsent.contains(&event) {
                    unsent.push(event);
                }
            }
            unsent
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

    use async_trait::async_trait;

    use super::*;
    use crate::cluster::bus::Result;
    use crate::cluster::bus::memory::MemoryBus;
    use crate::routing::directory::Directory;

    /// An in-process bus whose publishes fail while `down` is set.
    #[derive(Debug)]
    struct Flaky {
        inner: MemoryBus,
        down: AtomicBool,
        refused: AtomicUsize,
    }

    impl Flaky {
        fn check(&self) -> Result<()> {
            if self.down.load(Ordering::SeqCst) {
                self.refused.fetch_add(1, Ordering::SeqCst);
                return Err(crate::cluster::bus::BusError::Unavailable(
                    "publish refused".into(),
                ));
            }
            Ok(())
        }
    }

    #[async_trait]
    impl Bus for Flaky {
        fn pod(&self) -> &str {
            self.inner.pod()
        }
        async fn ping(&self) -> Result<()> {
            self.inner.ping().await
        }
        async fn to_pod(&self, pod: &str, event: &BusEvent) -> Result<()> {
            self.check()?;
            self.inner.to_pod(pod, event).await
        }
        async fn to_all(&self, event: &BusEvent) -> Result<()> {
            self.check()?;
            self.inner.to_all(event).await
        }
        async fn subscribe(&self) -> Result<mpsc::UnboundedReceiver<BusEvent>> {
            self.inner.subscribe().await
        }
        async fn set_presence(&self, t: &str, p: &Presence, ttl: Duration) -> Result<()> {
            self.inner.set_presence(t, p, ttl).await
        }
        async fn refresh_presence(
            &self,
            t: &str,
            p: &Presence,
            ttl: Duration,
        ) -> Result<crate::cluster::bus::Refreshed> {
            self.inner.refresh_presence(t, p, ttl).await
        }
        async fn clear_presence(&self, t: &str, peer: &str) -> Result<bool> {
            self.inner.clear_presence(t, peer).await
        }
        async fn presence(&self, t: &str, peer: &str) -> Result<Option<Presence>> {
            self.inner.presence(t, peer).await
        }
        async fn tenant_presence(&self, t: &str) -> Result<Vec<Presence>> {
            self.inner.tenant_presence(t).await
        }
        async fn take_tokens(
            &self,
            t: &str,
            rate: crate::cluster::bus::gcra::Rate,
            want: u64,
        ) -> Result<crate::cluster::bus::gcra::Grant> {
            self.inner.take_tokens(t, rate, want).await
        }
        async fn hold_connection(
            &self,
            t: &str,
            s: &str,
            m: Option<u64>,
            e: i64,
        ) -> Result<Option<u64>> {
            self.inner.hold_connection(t, s, m, e).await
        }
        async fn refresh_connections(&self, t: &str, s: &[String], e: i64) -> Result<u64> {
            self.inner.refresh_connections(t, s, e).await
        }
        async fn release_connection(&self, t: &str, s: &str) -> Result<()> {
            self.inner.release_connection(t, s).await
        }
        async fn append_events(
            &self,
            t: &str,
            events: &[String],
            keep: u64,
            ttl: Duration,
        ) -> Result<u64> {
            self.inner.append_events(t, events, keep, ttl).await
        }
        async fn read_events(
            &self,
            t: &str,
            after: u64,
            limit: usize,
        ) -> Result<crate::cluster::bus::EventPage> {
            self.inner.read_events(t, after, limit).await
        }
        async fn latest_events(
            &self,
            t: &str,
            limit: usize,
        ) -> Result<crate::cluster::bus::EventPage> {
            self.inner.latest_events(t, limit).await
        }
        async fn drop_events(&self, t: &str) -> Result<()> {
            self.inner.drop_events(t).await
        }
        async fn mark_watched(&self, t: &str, ttl: Duration) -> Result<()> {
            self.inner.mark_watched(t, ttl).await
        }
        async fn is_watched(&self, t: &str) -> Result<bool> {
            self.inner.is_watched(t).await
        }
    }

    /// The next event heard, or `None` if nothing comes within a (paused-clock) second.
    async fn next(heard: &mut mpsc::UnboundedReceiver<BusEvent>) -> Option<BusEvent> {
        tokio::time::timeout(Duration::from_secs(1), heard.recv())
            .await
            .ok()
            .flatten()
    }

    fn changed(tenant: &str) -> BusEvent {
        BusEvent::PeersChanged {
            tenant_id: tenant.into(),
        }
    }

    /// A peer-change notice whose publish failed is sent again: first in the next batch,
    /// ahead of what was sent after it, or alone once the retry delay passes.
    #[tokio::test(start_paused = true)]
    async fn a_change_notice_that_could_not_be_published_is_sent_again_first() {
        let bus = Arc::new(Flaky {
            inner: MemoryBus::new("pod-a"),
            down: AtomicBool::new(true),
            refused: AtomicUsize::new(0),
        });
        // Lets the forwarding task run until the bus has refused `n` publishes in all.
        let refused = |n: usize| {
            let bus = bus.clone();
            async move {
                while bus.refused.load(Ordering::SeqCst) < n {
                    tokio::task::yield_now().await;
                }
            }
        };
        let mut heard = bus.subscribe().await.expect("subscribe");
        let cluster = Cluster::start(
            bus.clone(),
            Duration::from_secs(30),
            events::EventLog::start(bus.clone(), 0),
        );
        let directory = Directory::new(true);

        // Refused, along with the presence frame after it.
        cluster.peers_changed(&directory, "t1");
        cluster.to_tenant("t1", &Outbound::from("lost"));
        refused(1).await;
        tokio::task::yield_now().await;
        bus.down.store(false, Ordering::SeqCst);

        // The next frame goes out behind the notice.
        cluster.to_tenant("t1", &Outbound::from("after"));
        assert_eq!(next(&mut heard).await, Some(changed("t1")));
        assert!(matches!(
            next(&mut heard).await,
            Some(BusEvent::ToTenant { frame, .. }) if frame == "after"
        ));

        // Refused again, and nothing else to send: it goes alone after the retry delay.
        bus.down.store(true, Ordering::SeqCst);
        let before = bus.refused.load(Ordering::SeqCst);
        cluster.peers_changed(&directory, "t2");
        cluster.peers_changed(&directory, "t2");
        refused(before + 1).await;
        tokio::task::yield_now().await;
        bus.down.store(false, Ordering::SeqCst);
        tokio::time::advance(NOTICE_RETRY).await;
        assert_eq!(
            next(&mut heard).await,
            Some(changed("t2")),
            "sent again, once"
        );
        tokio::task::yield_now().await;
        assert!(heard.try_recv().is_err(), "nothing else was sent");
    }
}
