//! Direct conversations, the daemon's part (protocol.md §10.15; the relay owns the order and
//! the state): opening one, learning of those a local peer takes part in, and relaying each
//! finished turn of a participant to the others.
//!
//! What is relayed is only the model's own final text of a turn segment, as the runtime reports
//! it at Stop: never hook context, a wake prompt or a notice, so nothing the daemon put in front
//! of the agent comes back out of it (no feedback loop). A segment starts at a prompt, or at a
//! Stop that handed messages over and let the agent go on; a segment that started before the
//! peer joined the conversation (the opener's own turn that opened it) is not relayed.

use repowire_protocol::limits::MAX_TEXT_BYTES;
use repowire_protocol::{Body, ConversationEvent, ErrorCode, Frame, Message, PeerId, Turn};
use serde_json::Value;

use super::Daemon;
use super::errors::store_error;
use super::ops::sender_of;
use super::store::SessionRow;
use crate::api::{ApiError, Conversation, ConversationStarted};
use crate::runtimes::Runtime;

/// The errors after which a conversation is over for the peer that sent a turn in it.
pub(super) fn ends_conversation(code: ErrorCode) -> bool {
    matches!(
        code,
        ErrorCode::ConversationEnded | ErrorCode::UnknownConversation | ErrorCode::NotParticipant
    )
}

/// A turn's text as relayed: whole when it fits a message, else cut at a character boundary
/// with the recipients told how much was left out.
pub(super) fn turn_text(text: &str) -> String {
    if text.len() <= MAX_TEXT_BYTES {
        return text.to_owned();
    }
    // Room for the note: "\n… [N more bytes not relayed]" is under 64 bytes.
    let mut end = MAX_TEXT_BYTES - 64;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!(
        "{}\n… [{} more bytes not relayed]",
        &text[..end],
        text.len() - end
    )
}

impl Daemon {
    /// Opens a conversation: the opening message to `peers`; from then on each participant's
    /// finished turns reach the others.
    pub async fn start_conversation(
        &self,
        from: Option<&str>,
        caller_pid: Option<u32>,
        peers: Vec<String>,
        circle: Option<String>,
        text: String,
    ) -> Result<ConversationStarted, ApiError> {
        let (session, peer) = self.registered_actor(from, caller_pid).await?;
        let frame = Frame::new(Body::Converse(repowire_protocol::Converse {
            from: PeerId(peer.clone()),
            to: peers.clone(),
            circle,
            text: text.clone(),
        }));
        let body = frame.body.clone();
        let (outcome, accepted) = self
            .submit_answered(frame, &peer, "notify", Some(peers.join(", ")), text)
            .await?;
        if let Some(a) = &accepted {
            // Known here at once (the frame handler records it too, as for a resent opening).
            self.conversation_accepted(&body, a).await;
        }
        Ok(ConversationStarted {
            conversation_id: accepted.and_then(|a| a.conversation_id),
            outcome,
            from: sender_of(&session),
        })
    }

    /// Ends a conversation the acting peer takes part in: the others get a notice, and
    /// nothing more is relayed in it.
    pub async fn end_conversation(
        &self,
        from: Option<&str>,
        caller_pid: Option<u32>,
        conversation_id: String,
        reason: Option<String>,
    ) -> Result<crate::api::Sent, ApiError> {
        let (session, peer) = self.registered_actor(from, caller_pid).await?;
        let frame = Frame::new(Body::EndConversation(repowire_protocol::EndConversation {
            from: PeerId(peer.clone()),
            conversation_id: conversation_id.clone(),
            reason: reason.clone(),
        }));
        let body = frame.body.clone();
        let (outcome, accepted) = self
            .submit_answered(
                frame,
                &peer,
                "notify",
                Some(conversation_id),
                reason.unwrap_or_default(),
            )
            .await?;
        if let Some(a) = &accepted {
            self.conversation_accepted(&body, a).await;
        }
        Ok(super::ops::with_sender(outcome, &session))
    }

    /// A session ends: its peer's conversations end too, the others told why (best effort, as
    /// the `unregister` that follows: with the link down they are not told).
    pub(super) async fn end_conversations_of(&self, session: &SessionRow, peer: &str) {
        let Ok(open) = self.store.conversations_of(peer, false).await else {
            return;
        };
        let who = session.name.as_deref().unwrap_or(peer);
        let reason = format!("the session of @{who} ended");
        for c in open {
            self.link.send(&Frame::new(Body::EndConversation(
                repowire_protocol::EndConversation {
                    from: PeerId(peer.to_owned()),
                    conversation_id: c.conversation_id.clone(),
                    reason: Some(reason.clone()),
                },
            )));
            let _ = self
                .store
                .conversation_state(peer, &c.conversation_id, "ended", &reason)
                .await;
        }
    }

    /// The conversations the acting peer takes part in, newest first.
    pub async fn conversations(
        &self,
        from: Option<&str>,
        caller_pid: Option<u32>,
        ended: bool,
    ) -> Result<Vec<Conversation>, ApiError> {
        let (_, peer) = self.registered_actor(from, caller_pid).await?;
        let rows = self
            .store
            .conversations_of(&peer, ended)
            .await
            .map_err(store_error)?;
        Ok(rows
            .into_iter()
            .map(|r| Conversation {
                participants: r.participants(),
                conversation_id: r.conversation_id,
                state: r.state,
                reason: r.reason,
                peer_id: r.peer_id,
                joined_at_ms: r.joined_at_ms,
                last_seq: r.last_seq,
            })
            .collect())
    }

    /// A `converse` or `turn` of ours was accepted: the opener joins its conversation, a
    /// speaker's conversation moves on.
    pub(super) async fn conversation_accepted(
        &self,
        sent: &Body,
        accepted: &repowire_protocol::Accepted,
    ) {
        let (Some(id), Some(seq)) = (&accepted.conversation_id, accepted.conversation_seq) else {
            return;
        };
        let (peer, participants) = match sent {
            Body::Converse(c) => {
                let opener = self.store.active_sessions().await.ok().and_then(|all| {
                    all.into_iter()
                        .find(|s| s.peer_id.as_deref() == Some(c.from.as_str()))
                });
                let me = repowire_protocol::PeerSummary {
                    peer_id: c.from.clone(),
                    name: opener
                        .as_ref()
                        .and_then(|s| s.name.clone())
                        .unwrap_or_else(|| c.from.0.clone()),
                    circle: opener.map(|s| s.circle).unwrap_or_default(),
                };
                let mut all = vec![me];
                all.extend(accepted.recipients.iter().cloned());
                (c.from.as_str(), all)
            }
            Body::Turn(t) => {
                let known = self
                    .store
                    .conversations_of(t.from.as_str(), true)
                    .await
                    .ok()
                    .and_then(|rows| rows.into_iter().find(|r| r.conversation_id == *id));
                let Some(known) = known else { return };
                (t.from.as_str(), known.participants())
            }
            Body::EndConversation(e) => {
                let why = e.reason.as_deref().unwrap_or("ended here");
                let _ = self
                    .store
                    .conversation_state(e.from.as_str(), id, "ended", why)
                    .await;
                return;
            }
            _ => return,
        };
        if let Err(error) = self
            .store
            .conversation_seen(peer, id, &participants, seq, "active", None)
            .await
        {
            tracing::error!(%error, conversation = %id, "could not record a conversation");
        }
        if matches!(sent, Body::Converse(_))
            && let Err(error) = self
                .store
                .conversation_opening(peer, id, &accepted.message_id.to_string())
                .await
        {
            tracing::error!(%error, conversation = %id, "could not record a conversation's opening");
        }
    }

    /// A delivered message of a conversation: the recipient takes part in it from now on, in
    /// the state the message says. Returns whether the agent is to be woken for it: not for a
    /// notice (paused, ended), which waits for the agent's next turn, while the people at the
    /// pane are told on its status line.
    pub(super) async fn conversation_delivered(&self, to: &str, message: &Message) -> bool {
        let Some(c) = &message.conversation else {
            return true;
        };
        let state = match c.event {
            ConversationEvent::Paused => "paused",
            ConversationEvent::Ended => "ended",
            _ => "active",
        };
        if let Err(error) = self
            .store
            .conversation_seen(
                to,
                &c.id,
                &c.participants,
                c.seq,
                state,
                c.reason.as_deref(),
            )
            .await
        {
            tracing::error!(%error, conversation = %c.id, "could not record a conversation");
        }
        if state == "active" {
            return true;
        }
        tracing::info!(peer = %to, conversation = %c.id, state, "conversation notice");
        self.tell_people(to, &c.id, state).await;
        false
    }

    /// Shows a conversation's new state on the status line of the participant's pane (never
    /// keystrokes). Only our own words and the relay-minted id (checked): a reason from the
    /// relay is not shown there.
    async fn tell_people(&self, peer: &str, conversation_id: &str, state: &str) {
        let Some(session) = self
            .store
            .active_sessions()
            .await
            .ok()
            .and_then(|all| all.into_iter().find(|s| s.peer_id.as_deref() == Some(peer)))
        else {
            return;
        };
        let Some(pane) = &session.pane else { return };
        if !repowire_protocol::looks_like_conversation_id(conversation_id) {
            return;
        }
        let text = match state {
            "paused" => format!(
                "repowire: conversation {conversation_id} paused: too many turns without a \
                 person's prompt. Prompt the agent to resume it."
            ),
            _ => format!("repowire: conversation {conversation_id} has ended."),
        };
        if let Err(error) =
            crate::tmux::display_message(session.tmux_socket.as_deref(), pane, &text, 30).await
        {
            tracing::debug!(%error, %pane, "could not show a conversation notice");
        }
    }

    /// A turn of ours was refused for good: the conversation is over, or paused, for its
    /// speaker.
    pub(super) async fn conversation_refused(&self, sent: &Body, code: ErrorCode, why: &str) {
        let (from, id) = match sent {
            Body::Turn(t) => (&t.from, &t.conversation_id),
            Body::EndConversation(e) => (&e.from, &e.conversation_id),
            _ => return,
        };
        let state = match code {
            ErrorCode::ConversationPaused => "paused",
            code if ends_conversation(code) => "ended",
            _ => return,
        };
        let _ = self
            .store
            .conversation_state(from.as_str(), id, state, why)
            .await;
    }

    /// A new segment of a session's turn starts (a prompt: a person's unless `ours`; or a
    /// Stop that handed messages over and lets the agent go on), with what was handed over.
    pub(super) async fn segment_started(
        &self,
        session: &SessionRow,
        by_person: bool,
        handed: Option<&super::hooks::AfterWrite>,
    ) {
        let conversations = handed.map(|a| a.conversations.as_slice()).unwrap_or(&[]);
        if let Err(error) = self
            .store
            .segment_started(&session.session_id, by_person, conversations)
            .await
        {
            tracing::warn!(%error, session = %session.session_id, "could not record a turn segment");
        }
    }

    /// At Stop: the segment's final text goes to the other participants of every active
    /// conversation the session's peer joined before the segment started. Durable in the
    /// outbox before this returns; sent without waiting for the relay.
    pub(super) async fn relay_turn(&self, session: &SessionRow, runtime: Runtime, payload: &Value) {
        let Some(peer) = &session.peer_id else {
            return;
        };
        let Ok(conversations) = self.store.conversations_of(peer, false).await else {
            return;
        };
        if conversations.is_empty() {
            return;
        }
        let Some(segment) = self.store.segment(&session.session_id).await.ok().flatten() else {
            return;
        };
        let payload = payload.clone();
        let said = tokio::task::spawn_blocking(move || runtime.turn_text(&payload))
            .await
            .ok()
            .flatten();
        let Some(text) = said.filter(|t| !t.trim().is_empty()) else {
            tracing::debug!(session = %session.session_id, "a turn with no text to relay");
            return;
        };
        let text = turn_text(&text);
        // A segment a person started goes to every conversation (a paused one resumes); one a
        // relayed message started, only to the conversations whose messages it was handed:
        // an answer to another peer's ask is not a conversation's business.
        let handed = segment.conversations();
        for c in conversations.iter().filter(|c| {
            c.joined_at_ms <= segment.started_at_ms
                && if segment.by_person {
                    true
                } else {
                    c.state == "active" && handed.contains(&c.conversation_id)
                }
        }) {
            let frame = Frame::new(Body::Turn(Turn {
                from: PeerId(peer.clone()),
                conversation_id: c.conversation_id.clone(),
                text: text.clone(),
                by_person: segment.by_person,
            }));
            if let Err(error) = self
                .enqueue(
                    frame,
                    peer,
                    "notify",
                    Some(c.conversation_id.clone()),
                    text.clone(),
                )
                .await
            {
                tracing::warn!(conversation = %c.conversation_id, error = %error.message, "a turn was not relayed");
            }
        }
        // Relayed once: a later Stop of the same segment (none is expected) sends nothing.
        let _ = self.store.segment_relayed(&session.session_id).await;
    }
}
