//! The bus: what relay pods share besides the database — presence (which pod holds which
//! peer, with a TTL so a dead pod's peers go offline by themselves) and pod-addressed events
//! (a frame for a peer another pod holds, a revoked key, a takeover).
//!
//! Two implementations: [`memory::MemoryBus`] for one process (embedded mode, tests) and
//! [`redis::RedisBus`] for a cluster. Every key and channel is scoped by a configurable prefix,
//! and presence keys by tenant as well.
//!
//! [`crate::cluster`] wires it in: presence on register/unregister plus a heartbeat, frames for
//! peers held by other pods, tenant-wide presence frames, revocations.

pub mod gcra;
pub mod memlog;
pub mod memory;
#[cfg(feature = "cluster")]
pub mod redis;

use std::time::Duration;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use tokio::sync::mpsc;

use crate::cluster::bus::gcra::{Grant, Rate};

/// Why a bus operation failed.
#[derive(Debug, thiserror::Error)]
pub enum BusError {
    /// The backend (Redis) is unreachable or refused the command.
    #[error("bus unavailable: {0}")]
    Unavailable(String),
    /// A stored entry or event could not be read.
    #[error("bus data unreadable: {0}")]
    Corrupt(String),
}

/// Result of bus operations.
pub type Result<T> = std::result::Result<T, BusError>;

/// An event for one pod (or all of them).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum BusEvent {
    /// An encoded frame for a peer this pod holds (`deliver`, `delivery` …).
    ToPeer {
        /// Tenant of the peer.
        tenant_id: String,
        /// The peer.
        peer_id: String,
        /// For `deliver`: the entry's inbox sequence (catch-up ordering); absent otherwise.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        seq: Option<i64>,
        /// The frame, encoded.
        frame: String,
        /// The trace the frame belongs to (W3C `traceparent`), for the receiving pod's span.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        traceparent: Option<String>,
    },
    /// A frame for every connection of a tenant (`presence`), from pod `origin`.
    ToTenant {
        /// The tenant.
        tenant_id: String,
        /// The frame, encoded.
        frame: String,
        /// The pod that sent it (it already delivered it to its own connections).
        origin: String,
    },
    /// An API key was revoked: close its connections.
    KeyRevoked {
        /// The key.
        key_id: String,
    },
    /// A peer of this tenant was stored (registered, renamed, moved): names may resolve
    /// differently now.
    PeersChanged {
        /// The tenant.
        tenant_id: String,
    },
    /// The limits of a tenant (`Some`) or of a plan, so possibly of every tenant (`None`),
    /// changed: read them again.
    LimitsChanged {
        /// The tenant; `None`: every tenant.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        tenant_id: Option<String>,
    },
    /// Local only, never sent: the subscription broke; events may be missed until
    /// [`BusEvent::Resubscribed`].
    #[serde(skip)]
    SubscriptionLost,
    /// Local only, never sent: the subscription was re-established after a break, so events
    /// (forwards) may have been missed and presence may be gone (a restarted Redis).
    #[serde(skip)]
    Resubscribed,
    /// Pod `origin` appended to a tenant's event log, up to entry `last`: wake the streams
    /// watching it.
    EventsAppended {
        /// The tenant.
        tenant_id: String,
        /// The log's newest entry now.
        last: u64,
    },
    /// A dashboard looks at a tenant's event log: record its events from now on.
    TenantWatched {
        /// The tenant.
        tenant_id: String,
    },
    /// Another pod took this peer over: unbind it here.
    TakenOver {
        /// Tenant of the peer.
        tenant_id: String,
        /// The peer.
        peer_id: String,
        /// The pod that holds it now.
        by_pod: String,
    },
}

/// Where an event goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// The pod holding a peer, as presence says when the event is sent; nowhere if no pod
    /// holds it or this one does (the peer then gets the entry from its inbox, or here).
    Holder {
        /// Tenant of the peer.
        tenant_id: String,
        /// The peer.
        peer_id: String,
    },
    /// Every pod (this one included).
    All,
}

/// Where a live peer is, as the bus records it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Presence {
    /// The pod holding the peer's connection.
    pub pod: String,
    /// The peer.
    pub peer_id: String,
    /// Display name.
    pub name: String,
    /// Circle.
    pub circle: String,
    /// Role (wire spelling).
    pub role: String,
    /// Turn state (wire spelling).
    pub turn_state: String,
    /// Last activity, ms since the Unix epoch.
    pub last_seen_ms: i64,
}

/// What a presence refresh found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refreshed {
    /// This pod's record was there: renewed.
    Kept,
    /// There was no record (it expired, was evicted, or Redis restarted empty): written again.
    /// Meanwhile other pods saw the peer offline.
    Recreated,
    /// Another pod holds the peer now: nothing written.
    Taken,
}

/// One entry of a tenant's event log (see [`crate::cluster::events`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoggedEvent {
    /// Its place in the log: 1, 2, 3 … with no gaps, per tenant.
    pub seq: u64,
    /// The event, encoded (JSON).
    pub data: String,
}

/// A read of a tenant's event log.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EventPage {
    /// Entries in order.
    pub events: Vec<LoggedEvent>,
    /// Entries after the cursor that are no longer kept (the log keeps its newest entries).
    pub missed: u64,
    /// The newest entry's place (0: the log is empty). A cursor above it names a log that was
    /// dropped (idle past its lifetime, or Redis emptied) and started again.
    pub last: u64,
}

/// The slot set holding a tenant's live peers (tenant ids hold no `:`, so it is no tenant's).
fn peer_slots(tenant_id: &str) -> String {
    format!("{tenant_id}:peers")
}

/// What pods share.
#[async_trait]
pub trait Bus: Send + Sync + std::fmt::Debug {
    /// This pod's id.
    fn pod(&self) -> &str;
    /// Whether other pods share this bus (false for a single process: every live peer is then
    /// this pod's own, and presence lookups can be skipped).
    fn shared(&self) -> bool {
        true
    }
    /// Reachability (for `/readyz`).
    async fn ping(&self) -> Result<()>;
    /// Sends an event to one pod.
    async fn to_pod(&self, pod: &str, event: &BusEvent) -> Result<()>;
    /// Sends an event to every pod (this one included).
    async fn to_all(&self, event: &BusEvent) -> Result<()>;
    /// Events for this pod (addressed to it, or to all), until the receiver is dropped.
    /// A subscription that breaks (the backend went away) is re-established by itself; events
    /// sent while it was down are not replayed (pub/sub): whatever they carried must also be
    /// recoverable from the database (a peer's inbox), which is what routing relies on.
    async fn subscribe(&self) -> Result<mpsc::UnboundedReceiver<BusEvent>>;
    /// Records (or refreshes) a live peer of this pod for `ttl`.
    async fn set_presence(&self, tenant_id: &str, presence: &Presence, ttl: Duration)
    -> Result<()>;
    /// Refreshes a live peer of this pod for `ttl` unless another pod holds it now (a newer
    /// claim after a takeover): then nothing is written. Says which.
    async fn refresh_presence(
        &self,
        tenant_id: &str,
        presence: &Presence,
        ttl: Duration,
    ) -> Result<Refreshed>;
    /// Removes a peer's presence, only if this pod still holds it; true if removed.
    async fn clear_presence(&self, tenant_id: &str, peer_id: &str) -> Result<bool>;
    /// Where a peer of a tenant is live, if anywhere.
    async fn presence(&self, tenant_id: &str, peer_id: &str) -> Result<Option<Presence>>;
    /// Sends events in this order, each [`Target::Holder`] to the pod presence names as its
    /// holder at send time (on Redis: one round trip for the holders, one for the publishes).
    async fn send_all(&self, events: &[(Target, BusEvent)]) -> Result<()> {
        for (target, event) in events {
            match target {
                Target::Holder { tenant_id, peer_id } => {
                    if let Some(p) = self.presence(tenant_id, peer_id).await?
                        && p.pod != self.pod()
                    {
                        self.to_pod(&p.pod, event).await?;
                    }
                }
                Target::All => self.to_all(event).await?,
            }
        }
        Ok(())
    }
    /// Takes up to `want` tokens from a tenant's message bucket, shared by every pod (see
    /// [`crate::cluster::bus::gcra`]; on Redis one atomic script on Redis's clock).
    async fn take_tokens(&self, tenant_id: &str, rate: Rate, want: u64) -> Result<Grant>;
    /// Holds connection slot `slot` of a tenant until `expires_at_ms` unless the tenant holds
    /// `max` already (slots past their expiry do not count; one already held is refreshed).
    /// The tenant's slots with this one, or `None` when refused.
    async fn hold_connection(
        &self,
        tenant_id: &str,
        slot: &str,
        max: Option<u64>,
        expires_at_ms: i64,
    ) -> Result<Option<u64>>;
    /// Moves the expiry of slots this pod holds (the heartbeat); returns how many slots the
    /// tenant holds on every pod.
    async fn refresh_connections(
        &self,
        tenant_id: &str,
        slots: &[String],
        expires_at_ms: i64,
    ) -> Result<u64>;
    /// Lets a connection slot go.
    async fn release_connection(&self, tenant_id: &str, slot: &str) -> Result<()>;
    /// Holds the live-peer slot of `peer_id` until `expires_at_ms` unless the tenant has `max`
    /// live peers already (one this peer holds counts as free, and is refreshed): the check and
    /// the claim are one atomic step on every pod's shared bus, so registrations arriving
    /// together never pass `max_peers`. Peer slots are connection slots of their own set (the
    /// tenant id with `:peers`), so every bus gets them from the connection-slot operations.
    async fn hold_peer(
        &self,
        tenant_id: &str,
        peer_id: &str,
        max: Option<u64>,
        expires_at_ms: i64,
    ) -> Result<Option<u64>> {
        self.hold_connection(&peer_slots(tenant_id), peer_id, max, expires_at_ms)
            .await
    }
    /// Holds (again) the slots of peers live on this pod until `expires_at_ms`: the heartbeat.
    /// A slot lost meanwhile (a release racing a takeover) is taken again.
    async fn refresh_peers(
        &self,
        tenant_id: &str,
        peer_ids: &[String],
        expires_at_ms: i64,
    ) -> Result<()> {
        for peer_id in peer_ids {
            self.hold_connection(&peer_slots(tenant_id), peer_id, None, expires_at_ms)
                .await?;
        }
        Ok(())
    }
    /// Lets a live-peer slot go (the peer went offline).
    async fn release_peer(&self, tenant_id: &str, peer_id: &str) -> Result<()> {
        self.release_connection(&peer_slots(tenant_id), peer_id)
            .await
    }
    /// Every live peer of a tenant, on any pod.
    async fn tenant_presence(&self, tenant_id: &str) -> Result<Vec<Presence>>;
    /// Appends events to a tenant's log, numbered after its newest, keeping its newest `keep`
    /// entries and the log itself for `ttl` after this append. Returns the newest entry's place.
    async fn append_events(
        &self,
        tenant_id: &str,
        events: &[String],
        keep: u64,
        ttl: Duration,
    ) -> Result<u64>;
    /// Up to `limit` entries of a tenant's log after place `after`, oldest first (`after` 0:
    /// from the oldest kept).
    async fn read_events(&self, tenant_id: &str, after: u64, limit: usize) -> Result<EventPage>;
    /// The newest `limit` entries of a tenant's log, oldest first.
    async fn latest_events(&self, tenant_id: &str, limit: usize) -> Result<EventPage>;
    /// Drops a tenant's log (the tenant was deleted or purged).
    async fn drop_events(&self, tenant_id: &str) -> Result<()>;
    /// Notes that a dashboard looks at a tenant's event log, for `ttl`: until then every pod
    /// records the tenant's events.
    async fn mark_watched(&self, tenant_id: &str, ttl: Duration) -> Result<()>;
    /// Whether a dashboard looked at a tenant's event log within its last `mark_watched` ttl.
    async fn is_watched(&self, tenant_id: &str) -> Result<bool>;
    /// Claims a display name in a circle for `peer_id`, atomically across every pod: the first
    /// of `candidates` that no other live peer holds (one this peer holds already counts as
    /// free). The claim lives as long as the peer's presence (refreshed by the heartbeat,
    /// dropped with the presence); a claim the peer held under `previous` is let go. Returns
    /// the index of the name claimed, or `None` if every candidate is held. A bus no other pod
    /// shares has nothing to claim against: the first candidate, and the hub decides.
    async fn claim_name(
        &self,
        tenant_id: &str,
        circle: &str,
        candidates: &[String],
        peer_id: &str,
        previous: Option<&str>,
        ttl: Duration,
    ) -> Result<Option<usize>> {
        let _ = (tenant_id, circle, peer_id, previous, ttl);
        Ok((!candidates.is_empty()).then_some(0))
    }
}
