//! After-commit fan-out: turns write outcomes into frames — `accepted` or `error` for the
//! submitter, `deliver` for recipients, `delivery` state changes for senders.
//!
//! Runs on the writer's dispatching task, in commit order, and never blocks: every push is a `try_send`
//! through the hub. A recipient that is not live here simply keeps the entry in its inbox.

use std::sync::Arc;

use repowire_protocol::{
    Accepted, Body, ConversationRef, Delivery, DeliveryState, ErrorCode, ErrorFrame, PeerSummary,
};

use crate::cluster::Cluster;
use crate::cluster::events::TenantEvent;
use crate::metrics::{Metrics, StateLabel, TypeLabel};
use crate::routing::hub::{Hub, Live};
use crate::storage::store::INBOX_FULL_REASON;
use crate::storage::store::*;
use crate::storage::writer::{AfterCommit, Origin};

pub(crate) use super::wire::{conversation, message_id};
pub use super::wire::{deliver_frame, deliver_stored, frame_text, stored, to_wire};

/// Post-commit dispatcher.
#[derive(Debug)]
pub struct Dispatcher {
    hub: Arc<Hub>,
    metrics: Arc<Metrics>,
    cluster: Arc<Cluster>,
}

impl Dispatcher {
    /// A dispatcher pushing through `hub`.
    pub fn new(hub: Arc<Hub>, metrics: Arc<Metrics>, cluster: Arc<Cluster>) -> Self {
        Self {
            hub,
            metrics,
            cluster,
        }
    }

    fn reply(&self, origin: Option<&Origin>, body: Body) {
        if let Some(o) = origin {
            self.hub
                .send_to_conn(&o.tenant_id, o.conn, frame_text(body));
        }
    }

    fn refuse(&self, origin: Option<&Origin>, code: ErrorCode, message: String) {
        self.metrics.error(code);
        if let Some(o) = origin {
            self.reply(
                origin,
                Body::Error(ErrorFrame::new(Some(o.re), code, message)),
            );
        }
    }

    fn accepted(
        &self,
        origin: Option<&Origin>,
        id: &str,
        cid: Option<String>,
        ids: &[String],
        conversation: Option<&ConversationRef>,
    ) {
        let Some(o) = origin else { return };
        self.metrics
            .accept_seconds
            .observe(o.started.elapsed().as_secs_f64());
        let recipients = ids
            .iter()
            .map(|id| {
                o.recipients
                    .iter()
                    .chain(conversation.iter().flat_map(|c| c.participants.iter()))
                    .find(|r| r.peer_id.as_str() == id)
                    .cloned()
                    .unwrap_or_else(|| PeerSummary {
                        peer_id: id.clone().into(),
                        name: id.clone(),
                        circle: String::new(),
                    })
            })
            .collect();
        self.reply(
            origin,
            Body::Accepted(Accepted {
                re: o.re,
                message_id: message_id(id),
                correlation_id: cid.map(Into::into),
                recipients,
                conversation_id: conversation.map(|c| c.id.clone()),
                conversation_seq: conversation.map(|c| c.seq),
            }),
        );
    }

    /// Records an accepted message in its tenant's event log, its recipients by name where
    /// the sender's request resolved them.
    fn logged<'a>(
        &self,
        m: &NewMessage,
        correlation_id: Option<&str>,
        to: impl Iterator<Item = &'a String>,
        origin: Option<&Origin>,
    ) {
        if !self.cluster.events().recording(&m.tenant_id) {
            return;
        }
        let names = to
            .map(|id| {
                origin
                    .and_then(|o| o.recipients.iter().find(|r| r.peer_id.as_str() == id))
                    .map_or_else(|| id.clone(), |r| r.name.clone())
            })
            .collect();
        self.cluster
            .events()
            .record(&m.tenant_id, TenantEvent::message(m, correlation_id, names));
    }

    fn state_change(&self, c: &StateChange) {
        if self.cluster.events().recording(&c.tenant_id) {
            self.cluster
                .events()
                .record(&c.tenant_id, TenantEvent::delivery(c));
        }
        self.metrics
            .delivery_states
            .get_or_create(&StateLabel {
                state: c.state.as_str(),
            })
            .inc();
        let frame = frame_text(Body::Delivery(Delivery {
            from: c.sender.clone().into(),
            message_id: message_id(&c.message_id),
            correlation_id: c.correlation_id.clone().map(Into::into),
            recipient: c.recipient.clone().into(),
            state: c.state,
            reason: c.reason.clone(),
        }));
        if !self
            .hub
            .send_to_peer(&c.tenant_id, &c.sender, frame.clone())
        {
            // Not here: maybe on another pod. (`delivery` frames are best-effort, §13.4.)
            self.cluster.forward(&c.tenant_id, &c.sender, None, frame);
        }
    }

    fn closed(&self, tenant_id: &str, closed: &ClosedAsk) {
        self.state_change(&StateChange {
            tenant_id: tenant_id.to_owned(),
            sender: closed.asker.clone(),
            message_id: closed.message_id.clone(),
            correlation_id: Some(closed.correlation_id.clone()),
            recipient: closed.recipient.clone(),
            state: closed.state,
            reason: closed.reason.clone(),
        });
    }

    fn enqueue(
        &self,
        m: &NewMessage,
        cid: Option<String>,
        conversation: Option<String>,
        slots: &[Enqueued],
    ) {
        let message = to_wire(&stored(m, cid, conversation));
        for slot in slots {
            let live = self
                .hub
                .deliver_live(&m.tenant_id, &slot.peer_id, slot.seq, || {
                    deliver_frame(&slot.peer_id, slot.seq, false, message.clone())
                });
            if live == Live::NotHere {
                // Not live in this process: the pod holding it (if any) pushes it.
                self.cluster.forward(
                    &m.tenant_id,
                    &slot.peer_id,
                    Some(slot.seq),
                    deliver_frame(&slot.peer_id, slot.seq, false, message.clone()),
                );
            }
        }
    }

    /// A notice the relay wrote into a conversation (paused, ended): pushed to each
    /// participant it was enqueued for.
    fn notice(&self, n: &Notice) {
        self.enqueue(
            &n.message,
            n.correlation_id.clone(),
            Some(n.conversation.clone()),
            &n.enqueued,
        );
    }

    fn accept(&self, m: &NewMessage, outcome: &AcceptOutcome, origin: Option<&Origin>) {
        match outcome {
            AcceptOutcome::Accepted { enqueued, refused, correlation_id, closed_prior, conversation: json } => {
                self.metrics.messages_accepted.get_or_create(&TypeLabel { r#type: m.kind.as_str() }).inc();
                let ids: Vec<String> = enqueued.iter().map(|e| e.peer_id.clone()).collect();
                self.logged(m, correlation_id.as_deref(), ids.iter().chain(refused), origin);
                let conversation = json.as_deref().and_then(conversation);
                self.accepted(origin, &m.message_id, correlation_id.clone(), &ids, conversation.as_ref());
                for peer in refused {
                    self.state_change(&StateChange {
                        tenant_id: m.tenant_id.clone(),
                        sender: m.from_peer_id.clone(),
                        message_id: m.message_id.clone(),
                        correlation_id: correlation_id.clone(),
                        recipient: peer.clone(),
                        state: DeliveryState::Failed,
                        reason: Some(INBOX_FULL_REASON.into()),
                    });
                }
                if let Some(closed) = closed_prior {
                    self.closed(&m.tenant_id, closed);
                }
                self.enqueue(m, correlation_id.clone(), json.clone(), enqueued);
            }
            AcceptOutcome::Duplicate { recipients, correlation_id, conversation: json } => {
                let conversation = json.as_deref().and_then(conversation);
                self.accepted(origin, &m.message_id, correlation_id.clone(), recipients, conversation.as_ref());
            }
            AcceptOutcome::UnknownConversation => self.refuse(
                origin,
                ErrorCode::UnknownConversation,
                format!("no conversation {} in this tenant", conversation_id(m)),
            ),
            AcceptOutcome::NotParticipant => self.refuse(
                origin,
                ErrorCode::NotParticipant,
                format!("this peer is not a participant of {}", conversation_id(m)),
            ),
            AcceptOutcome::ConversationPaused { reason, notice } => {
                self.refuse(
                    origin,
                    ErrorCode::ConversationPaused,
                    format!(
                        "{} is paused ({}); the turn was not relayed",
                        conversation_id(m),
                        reason.as_deref().unwrap_or("by its loop guard")
                    ),
                );
                if let Some(n) = notice {
                    self.notice(n);
                }
            }
            AcceptOutcome::ConversationRateLimited { turns_per_minute, retry_after_ms } => {
                self.metrics.error(ErrorCode::RateLimited);
                if let Some(o) = origin {
                    let mut e = ErrorFrame::new(
                        Some(o.re),
                        ErrorCode::RateLimited,
                        format!(
                            "{} allows {turns_per_minute} turns a minute; the turn was not relayed, send it again after {retry_after_ms} ms",
                            conversation_id(m)
                        ),
                    );
                    e.retry_after_ms = Some(*retry_after_ms);
                    self.reply(origin, Body::Error(e));
                }
            }
            AcceptOutcome::ConversationEnded { reason } => self.refuse(
                origin,
                ErrorCode::ConversationEnded,
                format!(
                    "{} has ended{}; nothing more is relayed in it",
                    conversation_id(m),
                    reason.as_deref().map(|r| format!(" ({r})")).unwrap_or_default()
                ),
            ),
            AcceptOutcome::IdReused => self.refuse(
                origin,
                ErrorCode::DuplicateId,
                "this message id was already used for a different message; mint a new UUIDv7".into(),
            ),
            AcceptOutcome::InboxFull { peer_id } => self.refuse(
                origin,
                ErrorCode::InboxFull,
                format!("the inbox of {peer_id} is full of undelivered messages; nothing was accepted, try again later"),
            ),
            AcceptOutcome::UnknownRecipient { peer_id } => self.refuse(
                origin,
                ErrorCode::UnknownPeer,
                format!("peer {peer_id} no longer exists"),
            ),
            AcceptOutcome::BadReplyTo => self.refuse(
                origin,
                ErrorCode::UnknownCorrelation,
                format!(
                    "reply_to {} names no ask you sent or received",
                    m.reply_to.as_deref().unwrap_or_default()
                ),
            ),
        }
    }

    fn close(&self, c: &CloseAsk, outcome: &CloseOutcome, origin: Option<&Origin>) {
        match outcome {
            CloseOutcome::Closed {
                closed,
                reply,
                reply_text,
            } => {
                let asker = PeerSummary {
                    peer_id: closed.asker.clone().into(),
                    name: closed.asker_name.clone(),
                    circle: closed.asker_circle.clone(),
                };
                let origin_with_asker = origin.map(|o| Origin {
                    recipients: vec![asker.clone()],
                    ..o.clone()
                });
                let ids: Vec<String> = reply.iter().map(|r| r.peer_id.clone()).collect();
                self.accepted(
                    origin_with_asker.as_ref(),
                    &c.frame_id,
                    Some(c.correlation_id.clone()),
                    &ids,
                    None,
                );
                self.closed(&c.tenant_id, closed);
                if let (Some(r), Some(slot)) = (&c.reply, reply) {
                    let mut r = r.clone();
                    r.answer = c
                        .answer
                        .as_ref()
                        .and_then(|a| serde_json::to_string(a).ok());
                    r.body = reply_text.clone().unwrap_or_default();
                    r.to_session_id = closed.asker_session_id.clone();
                    self.logged(
                        &r,
                        Some(&c.correlation_id),
                        std::iter::once(&slot.peer_id),
                        origin_with_asker.as_ref(),
                    );
                    self.enqueue(
                        &r,
                        Some(c.correlation_id.clone()),
                        None,
                        std::slice::from_ref(slot),
                    );
                }
            }
            CloseOutcome::Duplicate { closed } => {
                self.accepted(
                    origin,
                    &c.frame_id,
                    Some(closed.correlation_id.clone()),
                    &[],
                    None,
                );
            }
            CloseOutcome::Unknown => self.refuse(
                origin,
                ErrorCode::UnknownCorrelation,
                format!("no ask {} in this tenant", c.correlation_id),
            ),
            CloseOutcome::NotRecipient => self.refuse(
                origin,
                ErrorCode::NotRecipient,
                format!(
                    "only the peer that received {} can close it",
                    c.correlation_id
                ),
            ),
            CloseOutcome::NotEligible(why) => {
                self.refuse(origin, ErrorCode::NotRecipient, why.clone())
            }
            CloseOutcome::AlreadyClosed(how) => self.refuse(
                origin,
                ErrorCode::AskClosed,
                format!("{} is closed: {how}", c.correlation_id),
            ),
            CloseOutcome::TimedOut { closed } => {
                self.refuse(
                    origin,
                    ErrorCode::AskClosed,
                    format!(
                        "{} is closed: {}",
                        c.correlation_id,
                        closed.reason.as_deref().unwrap_or("its question timed out")
                    ),
                );
                self.closed(&c.tenant_id, closed);
            }
            CloseOutcome::InvalidAnswer(why) => {
                self.refuse(origin, ErrorCode::InvalidAnswer, why.clone())
            }
            CloseOutcome::IdReused => self.refuse(
                origin,
                ErrorCode::DuplicateId,
                "this frame id is already the id of another message; mint a new UUIDv7".into(),
            ),
            CloseOutcome::InboxFull => self.refuse(
                origin,
                ErrorCode::InboxFull,
                "the asker's inbox is full; the ask stays open, try again later".into(),
            ),
        }
    }
}

impl AfterCommit for Dispatcher {
    fn committed(&self, op: &WriteOp, outcome: &WriteOutcome, origin: Option<&Origin>) {
        match origin {
            Some(o) => o.trace.in_scope(|| self.dispatch(op, outcome, origin)),
            None => self.dispatch(op, outcome, origin),
        }
    }

    fn failed(&self, _op: &WriteOp, error: &StoreError, origin: Option<&Origin>) {
        let refuse = || {
            self.refuse(
                origin,
                ErrorCode::Unavailable,
                format!(
                    "storage is unavailable; nothing was accepted, retry with the same id ({})",
                    error_kind(error)
                ),
            );
        };
        match origin {
            Some(o) => o.trace.in_scope(refuse),
            None => refuse(),
        }
    }
}

impl Dispatcher {
    fn dispatch(&self, op: &WriteOp, outcome: &WriteOutcome, origin: Option<&Origin>) {
        match (op, outcome) {
            (WriteOp::Accept(m), WriteOutcome::Accept(o)) => self.accept(m, o, origin),
            (WriteOp::Close(c), WriteOutcome::Close(o)) => self.close(c, o, origin),
            (WriteOp::Receipt(r), WriteOutcome::Receipt(o)) => match o {
                ReceiptOutcome::Changed { change, .. } => self.state_change(change),
                ReceiptOutcome::Unchanged => {}
                ReceiptOutcome::Unknown => self.refuse(
                    origin,
                    ErrorCode::UnknownMessage,
                    format!(
                        "message {} is not in the inbox of {}",
                        r.message_id, r.peer_id
                    ),
                ),
            },
            (WriteOp::Expire { .. }, WriteOutcome::Expire(changes)) => {
                for change in changes {
                    self.state_change(change);
                }
            }
            (WriteOp::CloseOverdue { .. }, WriteOutcome::CloseOverdue(closed)) => {
                for (tenant_id, ask) in closed {
                    self.closed(tenant_id, ask);
                }
            }
            (WriteOp::EndConversation(_), WriteOutcome::EndConversation(notice)) => {
                if let Some(n) = notice {
                    self.notice(n);
                }
            }
            (op, outcome) => tracing::error!(?op, ?outcome, "write outcome does not match its op"),
        }
    }
}

/// The conversation a message was written to, for an error text.
fn conversation_id(m: &NewMessage) -> &str {
    m.conversation.as_ref().map_or("", ConversationWrite::id)
}

/// A non-revealing name for a storage failure.
fn error_kind(e: &StoreError) -> &'static str {
    match e {
        StoreError::Unavailable(_) => "database unreachable",
        StoreError::Migrate(_) => "schema",
        StoreError::Corrupt(_) => "unreadable row",
        StoreError::Conflict(_) => "concurrent write",
    }
}
