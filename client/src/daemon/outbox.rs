//! The outbox as the daemon works it: frames sent again after a reconnect, re-minted for a
//! peer that got a new id, sent messages' outcomes asked for again, and `repowire outbox`
//! (what is queued per relay identity, dropping another identity's).

use repowire_protocol::{Body, Frame, PeerId};

use super::errors::store_error;
use super::{Daemon, RELAY_TIMEOUT, store};
use crate::api::ApiError;

impl Daemon {
    /// Frames queued by a peer whose reclaim was refused get new ids and the new sender: the
    /// relay would refuse the old sender, and the old ids must not be reused for new content.
    pub(super) async fn remint_outbox(&self, old: &str, new: &PeerId) {
        let Ok(rows) = self.store.outbox().await else {
            return;
        };
        for (frame_id, _, text) in rows.into_iter().filter(|(_, p, _)| p == old) {
            let Ok(mut frame) = serde_json::from_str::<Frame>(&text) else {
                continue;
            };
            match &mut frame.body {
                Body::Ask(a) => a.from = new.clone(),
                Body::Notify(n) => n.from = new.clone(),
                Body::Broadcast(b) => b.from = new.clone(),
                Body::Ack(a) => a.from = new.clone(),
                Body::Answer(a) => a.from = new.clone(),
                _ => continue,
            }
            frame.id = repowire_protocol::MessageId::new();
            if let Err(error) = self
                .store
                .remint(
                    &frame_id,
                    &frame.id.to_string(),
                    new.as_str(),
                    &repowire_protocol::encode(&frame),
                )
                .await
            {
                tracing::error!(%error, frame = %frame_id, "could not re-mint an outbox frame");
            }
        }
    }

    /// Sends unanswered message-creating frames again, unchanged (same ids): all of them, or
    /// one sender's.
    pub async fn resend_outbox(&self, sender: Option<&str>) {
        let Ok(rows) = self.store.outbox().await else {
            return;
        };
        for (_, peer, text) in rows {
            if sender.is_some_and(|s| s != peer) {
                continue;
            }
            if let Ok(frame) = serde_json::from_str::<Frame>(&text)
                && !self.link.send(&frame)
            {
                return;
            }
        }
    }

    /// Asks the relay for the outcome of messages still open: `delivery` frames are not kept
    /// for a sender that was offline (§13.4).
    pub(super) async fn refresh_sent(&self) {
        let since = store::now_ms() - 7 * 24 * 3600 * 1000;
        let Ok(open) = self.store.open_sent(since).await else {
            return;
        };
        for row in open {
            let Ok(message_id) = row.message_id.parse() else {
                continue;
            };
            let query = Frame::new(Body::StatusQuery(repowire_protocol::StatusQuery {
                peer_id: PeerId(row.peer_id.clone()),
                message_id: Some(message_id),
                correlation_id: None,
            }));
            let Ok(Frame {
                body: Body::Status(status),
                ..
            }) = self.link.request(query, RELAY_TIMEOUT).await
            else {
                continue;
            };
            let events = self
                .store
                .sent(&row.message_id)
                .await
                .ok()
                .flatten()
                .map(|(_, e)| e)
                .unwrap_or_default();
            for r in status.recipients {
                let known = events.iter().any(|e| {
                    e.recipient.as_deref() == Some(r.peer_id.as_str())
                        && e.state == r.state.as_str()
                });
                if !known && r.state != repowire_protocol::DeliveryState::Accepted {
                    let _ = self
                        .store
                        .sent_delivery(
                            &row.message_id,
                            r.peer_id.as_str(),
                            r.state.as_str(),
                            r.reason.as_deref(),
                        )
                        .await;
                }
            }
            if let Some(reply) = status.reply
                && let Some(cid) = &row.correlation_id
            {
                let _ = self.store.sent_reply(cid, &reply).await;
            }
        }
    }

    /// Queued messages per relay identity: the current one's go out as the link allows;
    /// another's stay until the daemon works with that relay and tenant again, or are dropped.
    pub async fn outbox(&self) -> Result<crate::api::OutboxReport, ApiError> {
        let realm = self.store.realm();
        let realms = self.store.outbox_by_realm().await.map_err(store_error)?;
        Ok(crate::api::OutboxReport {
            realm: realm.to_owned(),
            realms: realms
                .into_iter()
                .map(|r| crate::api::OutboxRealm {
                    current: r.realm == realm,
                    realm: r.realm,
                    messages: r.messages,
                    oldest_ms: r.oldest_ms,
                })
                .collect(),
        })
    }

    /// Drops what is queued for another relay identity (never the current one's).
    pub async fn drop_outbox(&self, realm: &str) -> Result<crate::api::OutboxDropped, ApiError> {
        if realm == self.store.realm() {
            return Err(ApiError::new(
                repowire_protocol::ErrorCode::InvalidRequest,
                "that is the relay this daemon works with now: its queued messages are being sent",
            ));
        }
        let dropped = self
            .store
            .drop_outbox_of_realm(realm)
            .await
            .map_err(store_error)?;
        Ok(crate::api::OutboxDropped {
            realm: realm.to_owned(),
            dropped,
        })
    }
}
