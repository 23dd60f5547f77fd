//! `bind_session` and `list_sessions`: which work stream (Repowire session) a peer executes,
//! and the sessions a peer may see, each `active` while its executor is live on any pod.

use std::collections::HashMap;

use repowire_protocol::{
    BindSession, Body, ListSessions, MessageId, PeerSummary, SessionBound, SessionInfo,
    SessionStatus, Sessions, TranscriptLocator, session_id_from_random,
};

use super::session::{Handled, Session};
use crate::ids::now_ms;
use crate::routing::hub::in_scope;
use crate::storage::store::{SessionBind, SessionRecord};

pub(super) async fn bind(s: &Session, id: MessageId, b: BindSession) -> Handled {
    let peer = s.own(b.peer_id.as_str())?;
    let record = &peer.record;
    // The work stream this continues: its own, or one whose executor is gone and ran in the
    // same directory of the same machine (a resume). Naming a session (or its runtime id)
    // takes nothing from a live executor, nor from another place: the binder gets a session of
    // its own instead.
    let found = s
        .state
        .store
        .find_session(
            &s.tenant_id,
            b.session_id.as_deref(),
            &b.runtime_session_id,
            &record.backend,
        )
        .await?;
    let refused = found.is_some();
    let target = match found {
        Some(found) => match found.executor_peer_id.as_deref() {
            Some(executor) if executor == record.peer_id => {
                Some((found.session_id, executor.to_owned()))
            }
            Some(executor)
                if found.machine == record.machine
                    && found.project_path == record.path
                    && !is_live(s, executor).await =>
            {
                Some((found.session_id, executor.to_owned()))
            }
            executor => {
                tracing::warn!(
                    tenant = %s.tenant_id,
                    peer = %record.peer_id,
                    session = %found.session_id,
                    executor = executor.unwrap_or("-"),
                    "that session is executed elsewhere; binding a new one"
                );
                None
            }
        },
        None => None,
    };
    let claim_runtime = target.is_some() || !refused;
    let (session_id, expected_executor) = target.unzip();
    let bind = SessionBind {
        tenant_id: s.tenant_id.clone(),
        session_id,
        expected_executor,
        runtime_session_id: b.runtime_session_id,
        peer_id: record.peer_id.clone(),
        backend: record.backend.clone(),
        circle: record.circle.clone(),
        project_path: record.path.clone(),
        machine: record.machine.clone(),
        transcript_path: b.transcript.as_ref().map(|t| t.path.clone()),
        transcript_cursor: b
            .transcript
            .as_ref()
            .and_then(|t| t.cursor)
            .map(|c| i64::try_from(c).unwrap_or(i64::MAX)),
        new_session_id: session_id_from_random(rand::random()),
        claim_runtime,
        now_ms: now_ms(),
    };
    let (session, runtimes) = s.state.store.bind_session(&bind).await?;
    s.state
        .hub
        .set_session(&s.tenant_id, &record.peer_id, &session.session_id);
    tracing::info!(
        tenant = %s.tenant_id,
        peer = %record.peer_id,
        session = %session.session_id,
        source = b.source.as_deref().unwrap_or("-"),
        "session bound"
    );
    let executor = Some(peer.summary());
    s.send(Body::SessionBound(SessionBound {
        re: id,
        session: info(session, runtimes, executor, SessionStatus::Active),
    }));
    Ok(())
}

pub(super) async fn list(s: &Session, id: MessageId, l: ListSessions) -> Handled {
    let caller = s.own(l.peer_id.as_str())?;
    let live: HashMap<String, PeerSummary> = s
        .state
        .hub
        .live_peers(&s.tenant_id)
        .iter()
        .map(|p| (p.record.peer_id.clone(), p.summary()))
        .collect();
    let remote = s.state.cluster.remote_live(&s.tenant_id).await;
    let stored: HashMap<String, PeerSummary> = s
        .state
        .store
        .list_peers(&s.tenant_id)
        .await?
        .iter()
        .map(|p| (p.peer_id.clone(), crate::routing::hub::summary(p)))
        .collect();
    let mut sessions = Vec::new();
    for (record, runtimes) in s.state.store.list_sessions(&s.tenant_id).await? {
        // Sessions are seen as their executors are: by circle, as `list_peers` shows peers.
        if !in_scope(&caller, l.all_circles, None, &record.circle, "agent") {
            continue;
        }
        let executor_id = record.executor_peer_id.clone().unwrap_or_default();
        let is_live = live.contains_key(&executor_id) || remote.contains_key(&executor_id);
        let executor = live
            .get(&executor_id)
            .or_else(|| stored.get(&executor_id))
            .cloned();
        let status = if is_live {
            SessionStatus::Active
        } else {
            SessionStatus::Detached
        };
        sessions.push(info(record, runtimes, executor, status));
    }
    s.send(Body::Sessions(Sessions { re: id, sessions }));
    Ok(())
}

/// True if the peer is live on this relay process or another of the cluster.
async fn is_live(s: &Session, peer_id: &str) -> bool {
    s.state.hub.live_peer(&s.tenant_id, peer_id).is_some()
        || s.state
            .cluster
            .live_elsewhere(&s.tenant_id, peer_id)
            .await
            .is_some()
}

fn info(
    r: SessionRecord,
    runtime_session_ids: Vec<String>,
    executor: Option<PeerSummary>,
    status: SessionStatus,
) -> SessionInfo {
    SessionInfo {
        session_id: r.session_id,
        backend: r.backend,
        circle: r.circle,
        project_path: r.project_path,
        machine: r.machine,
        status,
        executor,
        runtime_session_ids,
        transcript: r.transcript_path.map(|path| TranscriptLocator {
            path,
            cursor: r.transcript_cursor.and_then(|c| u64::try_from(c).ok()),
        }),
        created_at_ms: r.created_at_ms,
        last_seen_ms: r.last_seen_ms,
    }
}
