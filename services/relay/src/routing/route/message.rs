//! `ask`, `notify`, `broadcast`, `ack`, `answer`: build the write, hand it to the writer
//! (`converse` and `turn` in `conversation.rs` build theirs with the same parts).
//! The dispatcher answers `accepted` only after the write committed.

use std::sync::Arc;
use std::time::Instant;

use repowire_protocol::{
    APPROVERS, Accepted, Ack, Answer, AnswerValue, Ask, Body, Broadcast, CorrelationId,
    DeliveryState, ErrorCode, MessageId, MessageKind, Notify, PeerSummary, looks_like_session_id,
};
use serde::Serialize;

use super::resolve::resolve;
use super::session::{Handled, Refusal, Session};
use crate::ids::now_ms;
use crate::routing::hub::LivePeer;
use crate::storage::store::{CloseAsk, MessageKey, NewMessage, WriteOp};
use crate::tenancy::limits::enforce::{Reason, Snapshot};

/// Hash of the request that created a message: a retry has the same, a reused id differs.
pub(super) fn content_hash(kind: &str, body: &impl Serialize) -> String {
    crate::tenancy::apikey::hash(&format!(
        "{kind}:{}",
        serde_json::to_string(body).unwrap_or_default()
    ))
}

pub(super) struct Draft<'a> {
    pub(super) id: MessageId,
    pub(super) kind: MessageKind,
    pub(super) sender: &'a LivePeer,
    pub(super) body: String,
    pub(super) correlation_id: Option<String>,
    pub(super) content_hash: String,
    pub(super) recipients: Vec<String>,
}

pub(super) fn new_message(s: &Session, limits: &Snapshot, d: Draft<'_>) -> NewMessage {
    let now = now_ms();
    // The relay's own cap bounds every inbox; a plan may set a smaller one.
    let inbox_cap = limits
        .limits
        .inbox_cap
        .map_or(s.state.config.inbox_cap, |cap| {
            cap.min(s.state.config.inbox_cap)
        });
    let ttl = i64::try_from(s.state.config.message_ttl().as_millis()).unwrap_or(i64::MAX / 4);
    NewMessage {
        tenant_id: s.tenant_id.clone(),
        message_id: d.id.to_string(),
        kind: d.kind,
        from_peer_id: d.sender.record.peer_id.clone(),
        from_name: d.sender.record.name.clone(),
        from_circle: d.sender.record.circle.clone(),
        body: d.body,
        correlation_id: d.correlation_id,
        reply_to: None,
        question: None,
        answer: None,
        content_hash: d.content_hash,
        created_at_ms: now,
        expires_at_ms: now.saturating_add(ttl),
        deadline_ms: None,
        from_session_id: d.sender.session_id.clone(),
        to_session_id: None,
        recipients: d.recipients,
        inbox_cap,
        // Kept with the message: a push from the inbox later continues this trace.
        traceparent: crate::telemetry::current_traceparent(),
        conversation: None,
    }
}

/// A recipient, and the Repowire session the message goes to when the relay knows it.
type Target = (PeerSummary, Option<String>);

/// `to` naming a Repowire session (`rs-…`, any circle of the tenant, as a peer id): its
/// current or last executor, live or not (an offline peer keeps the message in its inbox until
/// the session is resumed). `Ok(None)` when `to` names no session of the tenant (it may still
/// be a peer's name).
async fn session_target(s: &Session, to: &str) -> Result<Option<Target>, Refusal> {
    if !looks_like_session_id(to) {
        return Ok(None);
    }
    let unknown = || {
        Refusal::new(
            ErrorCode::UnknownPeer,
            format!("no session {to} in this tenant"),
        )
    };
    let Some(session) = s.state.store.get_session(&s.tenant_id, to).await? else {
        return Ok(None);
    };
    let peer_id = session.executor_peer_id.clone().ok_or_else(unknown)?;
    let executor = match s.state.hub.live_peer(&s.tenant_id, &peer_id) {
        Some(live) => live.summary(),
        None => s
            .state
            .store
            .get_peer(&s.tenant_id, &peer_id)
            .await?
            .map(|p| crate::routing::hub::summary(&p))
            .ok_or_else(unknown)?,
    };
    Ok(Some((executor, Some(session.session_id))))
}

/// Resolves a recipient (a session id, a peer id or a name); when that fails, a retry of an
/// already stored message is still answered `accepted` (names may have changed since the
/// original was accepted, and the sender must learn that it was). Returns `Ok(None)` when the
/// retry was answered.
pub(super) async fn resolve_or_settled(
    s: &Session,
    id: MessageId,
    sender: &LivePeer,
    to: &str,
    circle: Option<&str>,
    content_hash: &str,
) -> Result<Option<Target>, Refusal> {
    let resolved = match session_target(s, to).await {
        Ok(Some(target)) => Ok(target),
        Ok(None) => resolve(s, sender, to, circle).await.map(|target| {
            // The recipient's session when it is live here (best effort: nullable).
            let session = s
                .state
                .hub
                .live_peer(&s.tenant_id, target.peer_id.as_str())
                .and_then(|p| p.session_id);
            (target, session)
        }),
        Err(refusal) => Err(refusal),
    };
    let refusal = match resolved {
        Ok(target) => return Ok(Some(target)),
        Err(refusal) => refusal,
    };
    if settled(s, id, sender, content_hash).await? {
        return Ok(None);
    }
    Err(refusal)
}

/// Answers `accepted` if this message is already stored (a retry whose answer was lost), and
/// says so; refuses a reused id with different content; `false` if it is not stored.
pub(super) async fn settled(
    s: &Session,
    id: MessageId,
    sender: &LivePeer,
    content_hash: &str,
) -> Result<bool, Refusal> {
    let key = MessageKey::Id(id.to_string());
    let Some(stored) = s
        .state
        .store
        .message_status(&s.tenant_id, &sender.record.peer_id, &key)
        .await?
    else {
        return Ok(false);
    };
    if stored.message.content_hash != content_hash {
        return Err(Refusal::new(
            ErrorCode::DuplicateId,
            "this message id was already used for a different message; mint a new UUIDv7",
        ));
    }
    let mut recipients = Vec::with_capacity(stored.recipients.len());
    for (peer_id, _, _) in &stored.recipients {
        recipients.push(match s.state.store.get_peer(&s.tenant_id, peer_id).await? {
            Some(p) => crate::routing::hub::summary(&p),
            None => PeerSummary {
                peer_id: peer_id.clone().into(),
                name: peer_id.clone(),
                circle: String::new(),
            },
        });
    }
    let conversation = stored
        .message
        .conversation
        .as_deref()
        .and_then(crate::routing::dispatch::conversation);
    s.send(Body::Accepted(Accepted {
        re: id,
        message_id: id,
        correlation_id: stored.message.correlation_id.map(Into::into),
        recipients,
        conversation_id: conversation.as_ref().map(|c| c.id.clone()),
        conversation_seq: conversation.as_ref().map(|c| c.seq),
    }));
    Ok(true)
}

/// Whether the tenant's limits let this new message in. A refused retry of a message that is
/// already stored is answered `accepted` instead: the sender must not be told that a message
/// it already sent failed. Admitted: the tenant's limits; `None`: answered (settled).
pub(super) async fn admit(
    s: &Session,
    id: MessageId,
    sender: &LivePeer,
    content_hash: &str,
    text: &str,
) -> Result<Option<Arc<Snapshot>>, Refusal> {
    let refusal = match s
        .state
        .limits
        .admit_message(&s.tenant_id, text.len())
        .await?
    {
        Ok(limits) => return Ok(Some(limits)),
        Err(refusal) => refusal,
    };
    if refusal.reason != Reason::MessageBytes && settled(s, id, sender, content_hash).await? {
        return Ok(None);
    }
    s.state.limits.count(&s.tenant_id, &refusal);
    Err(Refusal::from(refusal))
}

/// Open questions to `@approvers` one peer may have: a session waits on one at a time, a few
/// tool calls of one turn may wait together; more is a peer flooding the approvers.
const MAX_OPEN_APPROVALS: usize = 16;

/// The recipient `@approvers` stands for: the tenant's stored control peer (made on first
/// use), unless `asker` already has [`MAX_OPEN_APPROVALS`] questions waiting there.
async fn approvers(s: &Session, asker: &LivePeer) -> Result<PeerSummary, Refusal> {
    let store = &s.state.store;
    let control = match store
        .get_peer(&s.tenant_id, crate::storage::store::CONTROL_PEER)
        .await?
    {
        Some(stored) => stored,
        None => {
            let control = crate::storage::store::control_peer(&s.tenant_id, now_ms());
            store.upsert_peer(&control).await?;
            control
        }
    };
    let limit = i64::try_from(MAX_OPEN_APPROVALS).unwrap_or(i64::MAX);
    let open = store
        .list_questions(&s.tenant_id, Some(&asker.record.peer_id), false, limit)
        .await?;
    if open.len() >= MAX_OPEN_APPROVALS {
        return Err(Refusal::new(
            ErrorCode::LimitExceeded,
            format!(
                "this peer already has {MAX_OPEN_APPROVALS} questions waiting at {APPROVERS}; wait for them to be answered or to time out"
            ),
        ));
    }
    Ok(crate::routing::hub::summary(&control))
}

pub(super) async fn ask(s: &Session, id: MessageId, a: Ask, started: Instant) -> Handled {
    let sender = s.own(a.from.as_str())?;
    let hash = content_hash("ask", &a);
    let (target, to_session) = if a.to == APPROVERS {
        match approvers(s, &sender).await {
            Ok(target) => (target, None),
            // A retry of a question already stored is answered `accepted`, as for any ask.
            Err(_) if settled(s, id, &sender, &hash).await? => return Ok(()),
            Err(refusal) => return Err(refusal),
        }
    } else {
        let Some(target) =
            resolve_or_settled(s, id, &sender, &a.to, a.circle.as_deref(), &hash).await?
        else {
            return Ok(());
        };
        target
    };
    let Some(limits) = admit(s, id, &sender, &hash, &a.text).await? else {
        return Ok(());
    };
    let mut m = new_message(
        s,
        &limits,
        Draft {
            id,
            kind: MessageKind::Ask,
            sender: &sender,
            body: a.text.clone(),
            correlation_id: Some(CorrelationId::ask_from_random(rand::random()).0),
            content_hash: hash,
            recipients: vec![target.peer_id.0.clone()],
        },
    );
    m.reply_to = a.reply_to.map(|c| c.0);
    m.to_session_id = to_session;
    m.deadline_ms = a.question.as_ref().and_then(|q| q.timeout_ms).map(|t| {
        m.created_at_ms
            .saturating_add(i64::try_from(t).unwrap_or(i64::MAX))
    });
    // An undelivered question waits for its deadline, not less: it would otherwise expire
    // (and leave the lists of questions) before it is closed.
    if let Some(deadline) = m.deadline_ms {
        m.expires_at_ms = m.expires_at_ms.max(deadline);
    }
    m.question = a
        .question
        .as_ref()
        .and_then(|q| serde_json::to_string(q).ok());
    s.submit(id, WriteOp::Accept(m), vec![target], started)
        .await
}

pub(super) async fn notify(s: &Session, id: MessageId, n: Notify, started: Instant) -> Handled {
    let sender = s.own(n.from.as_str())?;
    let hash = content_hash("notify", &n);
    let Some((target, to_session)) =
        resolve_or_settled(s, id, &sender, &n.to, n.circle.as_deref(), &hash).await?
    else {
        return Ok(());
    };
    let Some(limits) = admit(s, id, &sender, &hash, &n.text).await? else {
        return Ok(());
    };
    let mut m = new_message(
        s,
        &limits,
        Draft {
            id,
            kind: MessageKind::Notify,
            sender: &sender,
            body: n.text.clone(),
            correlation_id: Some(CorrelationId::notif_from_random(rand::random()).0),
            content_hash: hash,
            recipients: vec![target.peer_id.0.clone()],
        },
    );
    m.to_session_id = to_session;
    s.submit(id, WriteOp::Accept(m), vec![target], started)
        .await
}

pub(super) async fn broadcast(
    s: &Session,
    id: MessageId,
    b: Broadcast,
    started: Instant,
) -> Handled {
    let sender = s.own(b.from.as_str())?;
    let hash = content_hash("broadcast", &b);
    let Some(limits) = admit(s, id, &sender, &hash, &b.text).await? else {
        return Ok(());
    };
    let mut recipients: Vec<PeerSummary> = s
        .state
        .hub
        .live_peers(&s.tenant_id)
        .iter()
        .filter(|p| {
            p.record.circle == sender.record.circle && p.record.peer_id != sender.record.peer_id
        })
        .map(LivePeer::summary)
        .collect();
    // And the circle's peers live on other pods of the cluster.
    // Without the bus, the recipients on other pods are unknown: refuse rather than send to
    // fewer peers than the circle has.
    let remote = s
        .state
        .cluster
        .remote_live_strict(&s.tenant_id)
        .await
        .map_err(|e| {
            Refusal::new(
                ErrorCode::Unavailable,
                format!("cannot reach the cluster's presence ({e}); nothing was sent, try again"),
            )
        })?;
    let elsewhere: Vec<PeerSummary> = remote
        .into_values()
        .filter(|p| p.circle == sender.record.circle && p.peer_id != sender.record.peer_id)
        .filter(|p| !recipients.iter().any(|r| r.peer_id.as_str() == p.peer_id))
        .map(|p| PeerSummary {
            peer_id: p.peer_id.into(),
            name: p.name,
            circle: p.circle,
        })
        .collect();
    recipients.extend(elsewhere);
    recipients.sort_by(|a, b| a.peer_id.cmp(&b.peer_id));
    let m = new_message(
        s,
        &limits,
        Draft {
            id,
            kind: MessageKind::Broadcast,
            sender: &sender,
            body: b.text.clone(),
            correlation_id: Some(CorrelationId::notif_from_random(rand::random()).0),
            content_hash: hash,
            recipients: recipients.iter().map(|r| r.peer_id.0.clone()).collect(),
        },
    );
    s.submit(id, WriteOp::Accept(m), recipients, started).await
}

#[allow(clippy::too_many_arguments)] // one per column of the close; a struct would only rename them
fn close(
    s: &Session,
    limits: &Snapshot,
    id: MessageId,
    sender: &LivePeer,
    cid: &CorrelationId,
    state: DeliveryState,
    answer: Option<AnswerValue>,
    reply: Option<(String, String)>,
) -> CloseAsk {
    CloseAsk {
        tenant_id: s.tenant_id.clone(),
        correlation_id: cid.0.clone(),
        by_peer_id: sender.record.peer_id.clone(),
        by_role: sender.record.role.clone(),
        by_approver_key: s.approves,
        frame_id: id.to_string(),
        state,
        answer,
        reply: reply.map(|(body, hash)| {
            let mut m = new_message(
                s,
                limits,
                Draft {
                    id,
                    kind: MessageKind::Reply,
                    sender,
                    body,
                    correlation_id: Some(cid.0.clone()),
                    content_hash: hash,
                    recipients: Vec::new(),
                },
            );
            m.reply_to = None;
            m
        }),
        now_ms: now_ms(),
    }
}

/// A reply (an `ack`'s text, an `answer`) must fit the tenant's message size; it is not held to
/// the rate or the monthly quota (the quota counts it): a conversation the tenant could start
/// can always finish.
/// Admitted: the tenant's limits.
pub(super) async fn reply_fits(s: &Session, text: Option<&str>) -> Result<Arc<Snapshot>, Refusal> {
    let bytes = text.map_or(0, str::len);
    match s.state.limits.reply_fits(&s.tenant_id, bytes).await? {
        Ok(limits) => Ok(limits),
        Err(refusal) => {
            s.state.limits.count(&s.tenant_id, &refusal);
            Err(refusal.into())
        }
    }
}

pub(super) async fn ack(s: &Session, id: MessageId, a: Ack, started: Instant) -> Handled {
    let sender = s.own(a.from.as_str())?;
    let hash = content_hash("ack", &a);
    let limits = reply_fits(s, a.reply.as_deref()).await?;
    let reply = a.reply.clone().map(|text| (text, hash));
    let op = close(
        s,
        &limits,
        id,
        &sender,
        &a.correlation_id,
        DeliveryState::Acked,
        None,
        reply,
    );
    s.submit(id, WriteOp::Close(op), Vec::new(), started).await
}

pub(super) async fn answer(s: &Session, id: MessageId, a: Answer, started: Instant) -> Handled {
    let sender = s.own(a.from.as_str())?;
    let value = AnswerValue {
        option_id: a.option_id.clone(),
        text: a.text.clone(),
    };
    let limits = reply_fits(s, a.text.as_deref()).await?;
    // The reply body is rendered by the store from the question; the hash covers the request.
    let reply = Some((String::new(), content_hash("answer", &a)));
    let op = close(
        s,
        &limits,
        id,
        &sender,
        &a.correlation_id,
        DeliveryState::Answered,
        Some(value),
        reply,
    );
    s.submit(id, WriteOp::Close(op), Vec::new(), started).await
}
