//! `state_set` / `state_get`: a small key-value store shared by the peers of one circle of one
//! tenant, durable in the store. The scope is always the asking peer's own tenant and circle.

use repowire_protocol::limits::MAX_STATE_KEYS;
use repowire_protocol::{Body, ErrorCode, MessageId, Reply, State, StateEntry, StateGet, StateSet};

use super::session::{Handled, Refusal, Session};
use crate::ids::now_ms;
use crate::storage::store::StateWrite;
use crate::tenancy::limits::enforce::Reason;

pub(super) async fn set(s: &Session, id: MessageId, st: StateSet) -> Handled {
    let peer = s.own(st.peer_id.as_str())?;
    let limits = s.state.limits.snapshot(&s.tenant_id).await?;
    let max_bytes = limits.limits.max_state_bytes;
    let written = s
        .state
        .store
        .state_set(
            &s.tenant_id,
            &peer.record.circle,
            &st.key,
            st.value.as_deref(),
            st.peer_id.as_str(),
            now_ms(),
            MAX_STATE_KEYS,
            max_bytes,
        )
        .await?;
    if let StateWrite::OverBytes { used } = written {
        let max = max_bytes.unwrap_or(0);
        let refusal = s.state.limits.refuse(
            &limits,
            Reason::StateBytes,
            ErrorCode::LimitExceeded,
            format!(
                "this tenant's plan allows {max} bytes of shared state and {used} are stored \
                 elsewhere; this entry ({} bytes) does not fit: delete keys first",
                st.key.len() + st.value.as_deref().map_or(0, str::len)
            ),
            None,
        );
        s.state.limits.count(&s.tenant_id, &refusal);
        return Err(refusal.into());
    }
    if written == StateWrite::Full {
        return Err(Refusal::new(
            ErrorCode::LimitExceeded,
            format!(
                "circle `{}` already holds {MAX_STATE_KEYS} shared-state keys; delete one first",
                peer.record.circle
            ),
        ));
    }
    s.send(Body::Ok(Reply { re: id }));
    Ok(())
}

pub(super) async fn get(s: &Session, id: MessageId, g: StateGet) -> Handled {
    let peer = s.own(g.peer_id.as_str())?;
    let entries = s
        .state
        .store
        .state_get(&s.tenant_id, &peer.record.circle, g.key.as_deref())
        .await?
        .into_iter()
        .map(|r| StateEntry {
            key: r.key,
            value: r.value,
            updated_by: repowire_protocol::PeerId(r.updated_by),
            updated_at_ms: r.updated_at_ms,
        })
        .collect();
    s.send(Body::State(State {
        re: id,
        circle: peer.record.circle.clone(),
        entries,
    }));
    Ok(())
}
