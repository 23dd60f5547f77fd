//! A tenant's peers as the whole relay sees them: its stored peers, each with this pod's live
//! binding or the presence another pod announced. `list_peers` scopes and pages it; the
//! dashboard shows all of it.

use std::collections::HashMap;

use repowire_protocol::PeerInfo;

use crate::cluster::bus::Presence;
use crate::routing::hub::{LivePeer, peer_info};
use crate::state::AppState;
use crate::storage::store::{PeerRecord, Result};

/// One stored peer and where it is live, if it is.
#[derive(Debug, Clone)]
pub struct Member {
    /// The stored peer; its description is the live one when it is live here.
    pub record: PeerRecord,
    /// Its binding on this pod.
    pub live: Option<LivePeer>,
    /// Its presence on another pod (only when not live here).
    pub elsewhere: Option<Presence>,
}

impl Member {
    /// Live on some pod.
    pub fn online(&self) -> bool {
        self.live.is_some() || self.elsewhere.is_some()
    }

    /// What a peer list shows of it.
    pub fn info(&self) -> PeerInfo {
        let info = peer_info(&self.record, self.live.as_ref());
        match &self.elsewhere {
            Some(p) => crate::cluster::with_presence(info, p),
            None => info,
        }
    }
}

/// Every stored peer of the tenant, ordered by circle, name and peer id (byte by byte).
pub async fn members(state: &AppState, tenant_id: &str) -> Result<Vec<Member>> {
    let mut live: HashMap<String, LivePeer> = state
        .hub
        .live_peers(tenant_id)
        .into_iter()
        .map(|p| (p.record.peer_id.clone(), p))
        .collect();
    let mut remote = state.cluster.remote_live(tenant_id).await;
    let mut records = state.store.list_peers(tenant_id).await?;
    records.sort_by(|a, b| (&a.circle, &a.name, &a.peer_id).cmp(&(&b.circle, &b.name, &b.peer_id)));
    Ok(records
        .into_iter()
        .map(|mut record| {
            let live = live.remove(&record.peer_id);
            let elsewhere = match live {
                Some(_) => None,
                None => remote.remove(&record.peer_id),
            };
            if let Some(p) = &live {
                record.description = p.record.description.clone();
                record.description_at_ms = p.record.description_at_ms;
            }
            Member {
                record,
                live,
                elsewhere,
            }
        })
        .collect())
}
