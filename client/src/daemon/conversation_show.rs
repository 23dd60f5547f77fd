//! `conversation show`: one conversation a local peer takes part in, with what it received in
//! it (the relay's order) and what it sent (its turns and its end), as this daemon saw them.
//! Tenant-walled as the rest of the daemon's state: only the current relay identity's rows.

use repowire_protocol::{ConversationEvent, ErrorCode, Message};

use super::Daemon;
use super::errors::store_error;
use crate::api::{ApiError, Conversation, ConversationLine, ConversationShown};

impl Daemon {
    /// `conversation show ID`.
    pub async fn conversation_show(
        &self,
        from: Option<&str>,
        caller_pid: Option<u32>,
        conversation_id: &str,
    ) -> Result<ConversationShown, ApiError> {
        let (session, peer) = self.registered_actor(from, caller_pid).await?;
        let row = self
            .store
            .conversations_of(&peer, true)
            .await
            .map_err(store_error)?
            .into_iter()
            .find(|c| c.conversation_id == conversation_id)
            .ok_or_else(|| {
                ApiError::new(
                    ErrorCode::UnknownConversation,
                    format!("@{peer} takes part in no conversation `{conversation_id}` here"),
                )
                .hint("`repowire conversation list --all` lists them")
            })?;
        let received = self
            .store
            .conversation_received(&peer, conversation_id)
            .await
            .map_err(store_error)?;
        let sent = self
            .store
            .conversation_sent(&peer, conversation_id)
            .await
            .map_err(store_error)?;
        let me = session.name.clone().unwrap_or_else(|| peer.clone());
        let mut messages: Vec<ConversationLine> = received
            .into_iter()
            .filter_map(|(body, at_ms)| {
                let m: Message = serde_json::from_str(&body).ok()?;
                let c = m.conversation?;
                Some(ConversationLine {
                    seq: Some(c.seq),
                    event: match c.event {
                        ConversationEvent::Open => "open",
                        ConversationEvent::Turn => "turn",
                        ConversationEvent::Paused => "paused",
                        ConversationEvent::Resumed => "resumed",
                        ConversationEvent::Ended => "ended",
                    }
                    .to_owned(),
                    from: m.from.name,
                    at_ms,
                    text: m.text,
                    state: None,
                    error: None,
                })
            })
            .collect();
        // Received ones keep the relay's order; a sent one goes before the first received
        // after it.
        for (opening, text, at_ms, state, error) in sent {
            let at = if opening {
                0
            } else {
                messages
                    .iter()
                    .position(|l| l.seq.is_some() && l.at_ms > at_ms)
                    .unwrap_or(messages.len())
            };
            messages.insert(
                at,
                ConversationLine {
                    seq: opening.then_some(1),
                    event: if opening { "open" } else { "sent" }.into(),
                    from: me.clone(),
                    at_ms,
                    text,
                    state: Some(state),
                    error,
                },
            );
        }
        Ok(ConversationShown {
            conversation: Conversation {
                participants: row.participants(),
                conversation_id: row.conversation_id,
                state: row.state,
                reason: row.reason,
                peer_id: row.peer_id,
                joined_at_ms: row.joined_at_ms,
                last_seq: row.last_seq,
            },
            messages,
        })
    }
}
