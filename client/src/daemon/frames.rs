//! What the daemon does with each frame the relay sends: answers to its sends (`accepted`,
//! `error`), state changes of what it sent (`delivery`), and messages for its peers (`deliver`:
//! stored, receipted, then the agent woken); and the receipts it owes the relay.

use std::sync::Arc;
use std::time::Duration;

use repowire_protocol::{Body, ErrorCode, Frame, MessageKind, PeerId, Receipt, ReceiptState};

use super::{Daemon, hooks, retryable};

impl Daemon {
    /// One frame from the relay (answers are also passed to their waiters by the link).
    pub async fn on_frame(self: &Arc<Self>, frame: &Frame) {
        match &frame.body {
            Body::Accepted(a) => {
                let id = a.message_id.to_string();
                if let Ok(Some(text)) = self.store.outbox_frame(&id).await
                    && let Ok(sent) = serde_json::from_str::<Frame>(&text)
                {
                    match &sent.body {
                        Body::Ack(ack) => {
                            let _ = self
                                .store
                                .close_ask(ack.from.as_str(), ack.correlation_id.as_str())
                                .await;
                        }
                        Body::Answer(ans) => {
                            let _ = self
                                .store
                                .close_ask(ans.from.as_str(), ans.correlation_id.as_str())
                                .await;
                        }
                        Body::Ask(ask) => {
                            if let Some(chained) = &ask.reply_to {
                                let _ = self
                                    .store
                                    .close_ask(ask.from.as_str(), chained.as_str())
                                    .await;
                            }
                        }
                        Body::Converse(_) | Body::Turn(_) | Body::EndConversation(_) => {
                            self.conversation_accepted(&sent.body, a).await;
                        }
                        _ => {}
                    }
                }
                let _ = self.store.remove_outbox(&id).await;
                let cid = a.correlation_id.as_ref().map(|c| c.as_str());
                let _ = self.store.sent_accepted(&id, cid).await;
                // A blocking question whose first answer was lost learns its ask id here.
                self.replies.notify_waiters();
            }
            Body::Error(e) => {
                let Some(re) = e.re else {
                    tracing::warn!(code = e.code.as_str(), message = %e.message, "relay notice");
                    return;
                };
                let id = re.to_string();
                let Ok(Some(text)) = self.store.outbox_frame(&id).await else {
                    return; // not a message of ours (a receipt, a query): its caller sees it
                };
                if e.code == ErrorCode::NotRegistered {
                    // Sent before the sender was registered on this connection: it goes out
                    // again right after the sender's registration.
                    return;
                }
                if retryable(e.code) {
                    let me = self.clone();
                    let wait = Duration::from_millis(e.retry_after_ms.unwrap_or(
                        if e.code == ErrorCode::InboxFull {
                            5_000
                        } else {
                            1_000
                        },
                    ));
                    tokio::spawn(async move {
                        tokio::time::sleep(wait).await;
                        me.resend_one(&id).await;
                    });
                    return;
                }
                if let Ok(sent) = serde_json::from_str::<Frame>(&text)
                    && matches!(
                        e.code,
                        ErrorCode::AskClosed
                            | ErrorCode::UnknownCorrelation
                            | ErrorCode::NotRecipient
                    )
                {
                    // Nothing left to close here: stop reminding the agent about it.
                    let closing = match &sent.body {
                        Body::Ack(a) => Some((&a.from, &a.correlation_id)),
                        Body::Answer(a) => Some((&a.from, &a.correlation_id)),
                        _ => None,
                    };
                    if let Some((from, cid)) = closing {
                        let _ = self.store.close_ask(from.as_str(), cid.as_str()).await;
                    }
                }
                if let Ok(sent) = serde_json::from_str::<Frame>(&text) {
                    self.conversation_refused(&sent.body, e.code, &e.message)
                        .await;
                }
                if self.store.remove_outbox(&id).await.unwrap_or(false) {
                    let _ = self
                        .store
                        .sent_rejected(&id, &format!("{}: {}", e.code.as_str(), e.message))
                        .await;
                }
            }
            Body::Deliver(d) => self.on_deliver(d, frame.traceparent.as_deref()).await,
            Body::Delivery(d) => {
                let _ = self
                    .store
                    .sent_delivery(
                        &d.message_id.to_string(),
                        d.recipient.as_str(),
                        d.state.as_str(),
                        d.reason.as_deref(),
                    )
                    .await;
                // A closed or failed ask ends a `wait_reply`.
                self.replies.notify_waiters();
            }
            _ => {}
        }
    }

    /// A frame nobody waited for: a `registered` that arrived after its request timed out left
    /// a peer on this connection that no session holds — take it off again.
    pub async fn on_unclaimed(&self, frame: &Frame) {
        if let Body::Registered(r) = &frame.body {
            let held = self
                .store
                .active_sessions()
                .await
                .map(|s| {
                    s.iter()
                        .any(|s| s.peer_id.as_deref() == Some(r.peer.peer_id.as_str()))
                })
                .unwrap_or(true);
            if !held {
                tracing::warn!(peer = %r.peer.peer_id, "late registration nobody holds; unregistering it");
                self.link
                    .send(&Frame::new(Body::Unregister(repowire_protocol::PeerRef {
                        peer_id: r.peer.peer_id.clone(),
                    })));
            }
        }
    }

    pub(super) async fn resend_one(&self, id: &str) {
        if let Ok(Some(text)) = self.store.outbox_frame(id).await
            && let Ok(frame) = serde_json::from_str::<Frame>(&text)
            && self.link.is_ready()
        {
            self.link.send(&frame);
        }
    }

    /// A pushed message: stored, receipted (continuing the deliver's trace, so the relay's
    /// trace of the message includes its arrival here), then the agent is woken.
    async fn on_deliver(self: &Arc<Self>, d: &repowire_protocol::Deliver, trace: Option<&str>) {
        let message_id = d.message.message_id.to_string();
        let to = d.to.as_str();
        let session = self
            .store
            .active_sessions()
            .await
            .ok()
            .and_then(|s| s.into_iter().find(|s| s.peer_id.as_deref() == Some(to)));
        if session.is_none() {
            self.receipt(
                to,
                &message_id,
                ReceiptState::Failed,
                Some("no active session holds this peer on the recipient's machine".into()),
                trace,
            )
            .await;
            return;
        }
        let fresh = match self.store.insert_inbox(to, d.seq, &d.message).await {
            Ok(fresh) => fresh,
            Err(error) => {
                // Not stored, so not receipted: the relay pushes it again later.
                tracing::error!(%error, message = %message_id, "could not store a delivered message");
                return;
            }
        };
        self.receipt(to, &message_id, ReceiptState::Delivered, None, trace)
            .await;
        if !fresh {
            return;
        }
        let wake = self.conversation_delivered(to, &d.message).await;
        tracing::info!(%to, from = %d.message.from.name, kind = d.message.kind.as_str(), msg = %message_id, "message delivered");
        self.inbox_arrivals.send_modify(|n| *n += 1);
        if d.message.kind == MessageKind::Reply
            && let Some(cid) = &d.message.correlation_id
        {
            let _ = self.store.sent_reply(cid.as_str(), &d.message.text).await;
            self.replies.notify_waiters();
            match self.store.blocking_of(cid.as_str()).await {
                // Its caller decided without it (the question's deadline passed with no word
                // from the relay): it counts for nothing, and its sender must know.
                Ok(Some(b)) if b == "abandoned" => {
                    self.refuse_late_reply(to, &message_id, trace).await;
                    return;
                }
                // A blocked caller takes it; the agent is not woken for it.
                Ok(Some(b)) if b == "waiting" => return,
                // Its caller already has the answer (from the relay's `status`): it reached
                // who asked, and is not handed to the agent again.
                Ok(Some(b)) if b == "decided" => {
                    let after = hooks::AfterWrite {
                        peer_id: to.to_owned(),
                        message_ids: vec![message_id.clone()],
                        state: "consumed",
                        how: Default::default(),
                        conversations: Vec::new(),
                    };
                    self.commit_hand_over(after).await;
                    return;
                }
                _ => {}
            }
        }
        if wake {
            self.clone().maybe_wake(to).await;
        }
    }

    /// A reply to a blocking ask whose caller stopped waiting without it: it counts for
    /// nothing, is not handed to the agent, and its sender is told it failed.
    pub(super) async fn refuse_late_reply(&self, to: &str, message_id: &str, trace: Option<&str>) {
        let taken = self
            .store
            .take_queued(to, &[message_id.to_owned()], "consumed")
            .await;
        if !matches!(&taken, Ok(moved) if !moved.is_empty()) {
            return; // handed over already, or refused by the delivery path
        }
        let reason = "the answer arrived after the asker had stopped waiting for it \
                      (it decided without an answer at the question's deadline)";
        self.receipt(
            to,
            message_id,
            ReceiptState::Failed,
            Some(reason.into()),
            trace,
        )
        .await;
    }

    /// Sends a receipt (idempotent; no answer on success). An `injected` or `failed` receipt
    /// that cannot be sent now is remembered and sent after the next registration; a
    /// `delivered` one needs no memory: the relay pushes the entry again until it gets it.
    /// `trace` is the `traceparent` of the message's `deliver`, when at hand.
    pub async fn receipt(
        &self,
        peer_id: &str,
        message_id: &str,
        state: ReceiptState,
        reason: Option<String>,
        trace: Option<&str>,
    ) {
        let Ok(id) = message_id.parse() else {
            return;
        };
        let sent = self.link.send(
            &Frame::new(Body::Receipt(Receipt {
                peer_id: PeerId(peer_id.to_owned()),
                message_id: id,
                state,
                reason: reason.clone(),
            }))
            .traced(trace.map(str::to_owned)),
        );
        tracing::debug!(peer = peer_id, msg = message_id, ?state, sent, "receipt");
        if !sent && state != ReceiptState::Delivered {
            let _ = self
                .store
                .set_receipt_pending(peer_id, message_id, true, reason.as_deref())
                .await;
        }
    }

    /// Sends the receipts a peer could not send while the link was down.
    pub(super) async fn send_pending_receipts(&self, peer_id: &str) {
        let Ok(rows) = self.store.pending_receipts(peer_id).await else {
            return;
        };
        for (message_id, state, reason) in rows {
            let Ok(id) = message_id.parse() else { continue };
            let (state, reason) = match state.as_str() {
                "failed" => (
                    ReceiptState::Failed,
                    reason.or(Some("not delivered to the agent".into())),
                ),
                // For `injected`: how the message reached the agent, when it was not woken.
                _ => (ReceiptState::Injected, reason),
            };
            let receipt = Frame::new(Body::Receipt(Receipt {
                peer_id: PeerId(peer_id.to_owned()),
                message_id: id,
                state,
                reason,
            }));
            if !self.link.send(&receipt) {
                return;
            }
            let _ = self
                .store
                .set_receipt_pending(peer_id, &message_id, false, None)
                .await;
        }
    }
}
