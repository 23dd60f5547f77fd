//! Name resolution: from `to` (a peer id or a display name) and an optional circle to exactly
//! one peer of the caller's tenant, or a refusal. Never guesses between several matches.
//!
//! Scope: with `circle`, that circle only. Without it, the caller's own circle plus peers whose
//! role crosses circles; a caller whose role crosses circles sees the whole tenant. Live peers
//! win over offline ones of the same name (the offline one is a past session); several live
//! matches, or several offline matches with no live one, are ambiguous.

use repowire_protocol::{ErrorCode, PeerId, PeerSummary};

use super::session::{Refusal, Session};
use crate::routing::directory::Lookup;
use crate::routing::hub::{self, LivePeer, summary};

pub(super) async fn resolve(
    s: &Session,
    caller: &LivePeer,
    to: &str,
    circle: Option<&str>,
) -> Result<PeerSummary, Refusal> {
    if PeerId::looks_like(to) {
        if let Some(live) = s.state.hub.live_peer(&s.tenant_id, to) {
            return Ok(live.summary());
        }
        let store = &s.state.store;
        let stored = s
            .state
            .directory
            .get(&s.tenant_id, Lookup::Id, to, || async {
                Ok::<_, crate::storage::store::StoreError>(
                    store
                        .get_peer(&s.tenant_id, to)
                        .await?
                        .into_iter()
                        .collect(),
                )
            })
            .await?;
        return match stored.first() {
            Some(p) => Ok(summary(p)),
            None => Err(Refusal::new(
                ErrorCode::UnknownPeer,
                format!("no peer with id {to}"),
            )),
        };
    }
    let in_scope =
        |peer_circle: &str, role: &str| hub::in_scope(caller, false, circle, peer_circle, role);
    let mut live: Vec<PeerSummary> = s
        .state
        .hub
        .live_named(&s.tenant_id, to)
        .iter()
        .filter(|p| in_scope(&p.record.circle, &p.record.role))
        .map(LivePeer::summary)
        .collect();
    // The stored peers of that name (kept by the directory): the offline candidates, and in
    // a cluster the ones to look up on other pods.
    let cluster = &s.state.cluster;
    let store = &s.state.store;
    let stored: Vec<PeerSummary> = if live.is_empty() || cluster.shared() {
        s.state
            .directory
            .get(&s.tenant_id, Lookup::Name, to, || {
                store.peers_named(&s.tenant_id, to)
            })
            .await?
            .iter()
            .filter(|p| in_scope(&p.circle, &p.role))
            .map(summary)
            .collect()
    } else {
        Vec::new()
    };
    // With nothing live here and one stored candidate, that candidate is the answer whether
    // it is live elsewhere or not: presence is read only when it can change the answer.
    let decided = live.is_empty() && stored.len() == 1;
    for p in stored.iter().filter(|_| !decided) {
        if !live.iter().any(|l| l.peer_id == p.peer_id)
            && cluster
                .live_elsewhere(&s.tenant_id, p.peer_id.as_str())
                .await
                .is_some()
        {
            live.push(p.clone());
        }
    }
    let candidates = if live.is_empty() { stored } else { live };
    match candidates.len() {
        1 => Ok(candidates
            .into_iter()
            .next()
            .unwrap_or_else(|| unreachable!("length checked"))),
        0 => Err(Refusal::new(
            ErrorCode::UnknownPeer,
            match circle {
                Some(c) => format!("no peer named `{to}` in circle `{c}`"),
                None => format!(
                    "no peer named `{to}` in circle `{}`; list peers, or pass `circle` to look in another",
                    caller.record.circle
                ),
            },
        )),
        n => Err(Refusal {
            code: ErrorCode::AmbiguousPeer,
            message: format!(
                "`{to}` matches {n} peers; pass `circle` or address one by its peer id"
            ),
            candidates,
            retry_after_ms: None,
        }),
    }
}
