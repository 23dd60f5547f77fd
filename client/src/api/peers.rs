//! The typed replies of `peers` (the peers visible to the caller, the caller's own row marked)
//! and `work_sessions` (the tenant's work streams, [`repowire_protocol::SessionInfo`]). Their
//! JSON is what `repowire peer list --json` and `repowire session list --json` print and what
//! the MCP `list_peers` tool returns as structured content.

use repowire_protocol::PeerInfo;
use serde::{Deserialize, Serialize};

/// One visible peer, as the relay lists it; `you` marks the caller's own row.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ListedPeer {
    /// The relay's view of the peer.
    #[serde(flatten)]
    pub peer: PeerInfo,
    /// The caller itself (`peer list` shows "(you)").
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub you: bool,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// `repowire peer list --json` keeps its shape: the relay's fields, then `you` on the
    /// caller's own row only.
    #[test]
    fn peer_list_json_keeps_its_shape() {
        let fixture = json!([
            {"peer_id": "peer-me", "name": "app", "circle": "dev", "backend": "claude-code",
             "role": "agent", "status": "online", "turn_state": "idle", "path": "/w/app",
             "machine": "laptop", "last_seen_ms": 1790000000000_i64, "you": true},
            {"peer_id": "peer-b", "name": "api", "circle": "dev", "backend": "claude-code",
             "role": "agent", "status": "offline", "turn_state": "working",
             "description": "refactoring the store", "last_seen_ms": 1790000000001_i64},
        ]);
        let peers: Vec<ListedPeer> = serde_json::from_value(fixture.clone()).expect("reads");
        assert!(peers[0].you && !peers[1].you);
        let written = serde_json::to_value(&peers).expect("writes");
        assert_eq!(written, fixture);
        let keys =
            |v: &serde_json::Value| v.as_object().map(|o| o.keys().cloned().collect::<Vec<_>>());
        assert_eq!(keys(&written[0]), keys(&fixture[0]));
        assert_eq!(keys(&written[1]), keys(&fixture[1]));
    }
}
