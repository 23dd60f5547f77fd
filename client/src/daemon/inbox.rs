//! `repowire inbox`: what was delivered to a local peer that no agent reads — the daemon's own
//! peer for the person at the terminal, usually. Reading a message here is what the agents'
//! hand-over is for them: it moves the message from `queued` to `handed` and tells the sender
//! with an `injected` receipt.

use std::sync::Arc;
use std::time::Duration;

use repowire_protocol::{Message, ReceiptState};

use super::Daemon;
use super::errors::store_error;
use super::store::InboxEntry;
use crate::api::{ApiError, InboxListing, InboxMessage, InboxPeer, InboxQuery};

/// Most messages one listing returns (besides every unread one).
pub const MAX_LIMIT: u32 = 500;

/// Longest a listing waits for a new message.
pub const MAX_WAIT: Duration = Duration::from_secs(60);

impl Daemon {
    /// Lists the actor's inbox; waits up to `wait_ms` for an unread message when there is none;
    /// marks the unread ones it returns read unless `peek`.
    pub async fn inbox(
        self: &Arc<Self>,
        query: InboxQuery,
        caller_pid: Option<u32>,
    ) -> Result<InboxListing, ApiError> {
        if query.limit > MAX_LIMIT {
            return Err(ApiError::new(
                repowire_protocol::ErrorCode::InvalidRequest,
                format!("limit {} is over the maximum of {MAX_LIMIT}", query.limit),
            )
            .hint("page with --after SEQ instead"));
        }
        let wait = Duration::from_millis(query.wait_ms).min(MAX_WAIT);
        let acting = self.acting(query.from.as_deref(), caller_pid).await?;
        let (session, peer) = self.registered(acting.session).await?;
        // Subscribed before the first read: a message stored between the read and the wait
        // still ends the wait.
        let mut arrivals = self.inbox_arrivals.subscribe();
        let deadline = tokio::time::Instant::now() + wait;
        let rows = loop {
            arrivals.borrow_and_update();
            let rows = self
                .store
                .inbox_of(&peer, query.read, query.after_seq, i64::from(query.limit))
                .await
                .map_err(store_error)?;
            let unread = rows.iter().any(|r| r.state == "queued");
            if unread || wait.is_zero() {
                break rows;
            }
            match tokio::time::timeout_at(deadline, arrivals.changed()).await {
                Ok(Ok(())) => continue,
                _ => break rows,
            }
        };
        if !query.peek {
            self.mark_read(&peer, &rows).await?;
        }
        Ok(InboxListing {
            peer: InboxPeer {
                peer_id: peer,
                name: session.name,
                circle: session.circle,
                repowire_session_id: session.repowire_session_id,
            },
            messages: rows.iter().map(entry).collect(),
        })
    }

    /// Marks the unread ones of `rows` read and tells their senders (`injected`).
    async fn mark_read(&self, peer: &str, rows: &[InboxEntry]) -> Result<(), ApiError> {
        let unread: Vec<String> = rows
            .iter()
            .filter(|r| r.state == "queued")
            .map(|r| r.message_id.clone())
            .collect();
        if unread.is_empty() {
            return Ok(());
        }
        let moved = self
            .store
            .take_queued(peer, &unread, "handed")
            .await
            .map_err(store_error)?;
        for id in moved {
            self.receipt(peer, &id, ReceiptState::Injected, None, None)
                .await;
        }
        Ok(())
    }

    /// The ask id a received message is known by: `id` itself when it is one, else the ask id
    /// of the ask with that message id (as `repowire inbox` shows both).
    pub async fn ask_id_of(&self, peer: &str, id: &str) -> Result<String, ApiError> {
        Ok(self
            .store
            .received_ask(peer, id)
            .await
            .map_err(store_error)?
            .unwrap_or_else(|| id.to_owned()))
    }
}

/// One message as the API returns it. `unread` is its state before this listing.
fn entry(row: &InboxEntry) -> InboxMessage {
    let message: Option<Message> = serde_json::from_str(&row.body).ok();
    InboxMessage {
        message_id: row.message_id.clone(),
        seq: row.seq,
        kind: row.kind.clone(),
        id: row
            .correlation_id
            .clone()
            .unwrap_or_else(|| row.message_id.clone()),
        correlation_id: row.correlation_id.clone(),
        unread: row.state == "queued",
        state: row.state.clone(),
        open: row.kind == "ask" && !row.closed,
        received_at_ms: row.received_at_ms,
        created_at_ms: message.as_ref().map(|m| m.created_at_ms),
        reply_to: message
            .as_ref()
            .and_then(|m| m.reply_to.as_ref())
            .map(|c| c.as_str().to_owned()),
        from_repowire_session_id: message.as_ref().and_then(|m| m.from_session_id.clone()),
        to_repowire_session_id: message.as_ref().and_then(|m| m.to_session_id.clone()),
        question: message.as_ref().and_then(|m| m.question.clone()),
        text: message.as_ref().map(|m| m.text.clone()),
        from: message.map(|m| m.from),
    }
}
