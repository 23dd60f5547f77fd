//! A tenant's concurrent connections and live peers across the cluster: each open connection
//! holds a slot on the bus (`{pod}:{conn}`), taken before the WebSocket upgrade and let go when
//! the connection ends, and each live peer a slot of its own (its peer id), taken atomically
//! with the `max_peers` check at `register` and let go when the peer goes offline; the pod's
//! heartbeat keeps its slots alive, so a dead pod's stop counting after the presence TTL.

use std::sync::Arc;

use repowire_protocol::ErrorCode;

use super::enforce::{Enforcer, LimitRefusal, Reason};
use crate::cluster::bus::Bus;
use crate::ids::ConnId;
use crate::ids::now_ms;
use crate::storage::store::StoreError;
use crate::tenancy::usage::meter::{Meter, Open};

/// A held connection slot; dropping it lets the slot go (and ends the connection's metering).
#[derive(Debug)]
pub struct ConnectionSlot {
    tenant_id: String,
    slot: String,
    bus: Arc<dyn Bus>,
    /// The tenant's open connections in the cluster with this one, as the bus counted them
    /// (`None` when it could not be read).
    cluster_open: Option<u64>,
    metered: Option<Open>,
}

impl ConnectionSlot {
    /// Measures this connection's time (see [`Meter`]) until the slot is dropped.
    pub fn metered(mut self, meter: &Arc<Meter>) -> Self {
        self.metered = Some(meter.opened(&self.tenant_id, self.cluster_open));
        self
    }
}

impl Drop for ConnectionSlot {
    fn drop(&mut self) {
        self.metered.take();
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return; // the process is ending; the slot expires by itself
        };
        let (bus, tenant_id, slot) = (
            self.bus.clone(),
            std::mem::take(&mut self.tenant_id),
            std::mem::take(&mut self.slot),
        );
        runtime.spawn(async move {
            if let Err(error) = bus.release_connection(&tenant_id, &slot).await {
                tracing::warn!(%error, tenant = %tenant_id, "could not let a connection slot go; it expires by itself");
            }
        });
    }
}

/// The slot name of connection `conn` of pod `pod`.
pub fn slot_name(pod: &str, conn: ConnId) -> String {
    format!("{pod}:{conn}")
}

impl Enforcer {
    /// Holds a connection slot for `conn` unless the tenant is at its `max_connections`.
    /// Without the bus the connection is let in (counted in `limit_checks_failed_open`).
    pub async fn hold_connection(
        &self,
        tenant_id: &str,
        conn: ConnId,
    ) -> Result<Result<ConnectionSlot, LimitRefusal>, StoreError> {
        let snapshot = self.snapshot(tenant_id).await?;
        let max = snapshot
            .limits
            .max_connections
            .map(|m| u64::try_from(m).unwrap_or(0));
        let slot = slot_name(self.bus().pod(), conn);
        let expires = now_ms().saturating_add(self.slot_ttl_ms());
        let cluster_open = match self
            .bus()
            .hold_connection(tenant_id, &slot, max, expires)
            .await
        {
            Ok(None) => {
                let max = max.unwrap_or(0);
                let refusal = self.refuse(
                    &snapshot,
                    Reason::Connections,
                    ErrorCode::LimitExceeded,
                    format!(
                        "this tenant's plan allows {max} connections at once and they are open; close one first"
                    ),
                    None,
                );
                self.count(tenant_id, &refusal);
                return Ok(Err(refusal));
            }
            Ok(Some(open)) => Some(open),
            Err(error) => {
                self.failed_open(tenant_id, &error);
                None
            }
        };
        Ok(Ok(ConnectionSlot {
            tenant_id: tenant_id.to_owned(),
            slot,
            bus: self.bus().clone(),
            cluster_open,
            metered: None,
        }))
    }

    /// Holds `peer_id`'s live-peer slot unless the tenant is at its `max_peers` (a peer live
    /// already holds its slot and is let through). Without the bus the peer is let in
    /// (counted in `limit_checks_failed_open`).
    pub async fn hold_peer(
        &self,
        tenant_id: &str,
        peer_id: &str,
    ) -> Result<Result<(), LimitRefusal>, StoreError> {
        let snapshot = self.snapshot(tenant_id).await?;
        let max = snapshot
            .limits
            .max_peers
            .map(|m| u64::try_from(m).unwrap_or(0));
        let expires = now_ms().saturating_add(self.slot_ttl_ms());
        match self.bus().hold_peer(tenant_id, peer_id, max, expires).await {
            Ok(Some(_)) => Ok(Ok(())),
            Ok(None) => {
                let max = max.unwrap_or(0);
                let refusal = self.refuse(
                    &snapshot,
                    Reason::Peers,
                    ErrorCode::LimitExceeded,
                    format!(
                        "this tenant's plan allows {max} live peers and they are live; unregister one (end a session) first"
                    ),
                    None,
                );
                self.count(tenant_id, &refusal);
                Ok(Err(refusal))
            }
            Err(error) => {
                self.failed_open(tenant_id, &error);
                Ok(Ok(()))
            }
        }
    }

    /// Lets a peer's live-peer slot go (it went offline, or its registration failed).
    pub async fn release_peer(&self, tenant_id: &str, peer_id: &str) {
        if let Err(error) = self.bus().release_peer(tenant_id, peer_id).await {
            tracing::warn!(%error, tenant = %tenant_id, peer = %peer_id, "could not let a peer slot go; it expires by itself");
        }
    }

    /// Keeps the slots of this pod's live peers (`peers` by tenant) alive: the heartbeat. Each
    /// peer is looked at again (`still_live`) just before its slot is taken again, so a peer
    /// that went offline since the list was made is not counted for another TTL.
    pub async fn refresh_peers(
        &self,
        peers: Vec<(String, Vec<String>)>,
        still_live: impl Fn(&str, &str) -> bool,
    ) {
        let expires = now_ms().saturating_add(self.slot_ttl_ms());
        for (tenant_id, ids) in peers {
            for id in ids.iter().filter(|id| still_live(&tenant_id, id)) {
                let one = std::slice::from_ref(id);
                if let Err(error) = self.bus().refresh_peers(&tenant_id, one, expires).await {
                    tracing::warn!(%error, tenant = %tenant_id, "could not refresh peer slots");
                }
            }
        }
    }

    /// Keeps this pod's slots alive (`conns` by tenant): the heartbeat. Returns each tenant's
    /// open connections on every pod, as the bus counted them (tenants it could not read are
    /// left out).
    pub async fn refresh_connections(
        &self,
        conns: Vec<(String, Vec<ConnId>)>,
    ) -> Vec<(String, u64)> {
        let expires = now_ms().saturating_add(self.slot_ttl_ms());
        let mut open = Vec::with_capacity(conns.len());
        for (tenant_id, ids) in conns {
            let slots: Vec<String> = ids
                .into_iter()
                .map(|c| slot_name(self.bus().pod(), c))
                .collect();
            match self
                .bus()
                .refresh_connections(&tenant_id, &slots, expires)
                .await
            {
                Ok(n) => open.push((tenant_id, n)),
                Err(error) => {
                    tracing::warn!(%error, tenant = %tenant_id, "could not refresh connection slots");
                }
            }
        }
        open
    }
}
