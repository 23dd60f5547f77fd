//! What the local API does for peer commands: act as a local session, send asks and
//! notifications through the outbox, close asks, list peers, report delivery states.

use repowire_protocol::{
    Ack, Ask, Body, Broadcast, CorrelationId, Frame, ListPeers, Notify, PeerId,
};

use super::errors::{relay_error, stopped_error, store_error, unexpected};
use super::link::LinkError;
use super::store::{SentRow, SessionRow, now_ms};
use super::{Daemon, RELAY_TIMEOUT};
use crate::api::{ApiError, Outgoing, SendKind, SendOutcome, Sender, Sent};

/// A send's answer with the peer it was sent as (`peer ask` and friends print it).
pub(super) fn with_sender(outcome: SendOutcome, session: &SessionRow) -> Sent {
    Sent {
        outcome,
        from: sender_of(session),
    }
}

/// The local peer a session sends as.
pub(super) fn sender_of(session: &SessionRow) -> Sender {
    Sender {
        peer_id: session.peer_id.clone(),
        name: session.name.clone(),
        session_id: session.session_id.clone(),
    }
}

impl Daemon {
    /// Sends an ask, notify or broadcast. The frame is durable in the outbox before it goes
    /// out; the answer says `accepted` only when the relay said so, else `queued`. A
    /// `tool_permission` question is refused here: only the PreToolUse hook path asks one.
    pub async fn send(&self, out: Outgoing, caller_pid: Option<u32>) -> Result<Sent, ApiError> {
        if let Some(q) = &out.question
            && q.kind == repowire_protocol::QuestionKind::ToolPermission
        {
            return Err(ApiError::new(
                repowire_protocol::ErrorCode::InvalidRequest,
                "a tool_permission question comes only from the PreToolUse hook path; ask a `choice` question instead",
            ));
        }
        let (session, peer) = self
            .registered_actor(out.from.as_deref(), caller_pid)
            .await?;
        let sent = self.send_as(&peer, out).await?;
        Ok(with_sender(sent, &session))
    }

    /// Sends `out` as `peer` (a registered local peer), any question kind allowed.
    pub(super) async fn send_as(&self, peer: &str, out: Outgoing) -> Result<SendOutcome, ApiError> {
        let (frame, kind, to, text) = frame_of(peer, out)?;
        self.submit(frame, peer, kind, to, text).await
    }

    /// Sends a frame once, without the outbox, for a blocking question: one that reached the
    /// relay only after its asker stopped waiting could be answered for nothing. Refused at once
    /// when the link is down or the relay refuses it (also with a retryable error); `unknown`
    /// when the relay did not answer in time (it may have it: its `accepted` still counts).
    pub(super) async fn submit_once(
        &self,
        frame: Frame,
        peer: &str,
        kind: &str,
        to: Option<String>,
        text: String,
    ) -> Result<SendOutcome, ApiError> {
        self.validated(&frame)?;
        if !self.link.is_ready() {
            return Err(self.link_failure(&LinkError::Down));
        }
        let id = frame.id.to_string();
        self.record_sent(&frame, peer, kind, to, text).await?;
        // Its caller waits for the answer from now on: one that arrives before this call
        // returns (an approver quicker than this task) is for the caller, not the agent.
        self.store
            .set_blocking(&id, "waiting")
            .await
            .map_err(store_error)?;
        let refused = |why: String| {
            let id = id.clone();
            async move {
                let _ = self.store.sent_rejected(&id, &why).await;
            }
        };
        match self.link.request(frame, RELAY_TIMEOUT).await {
            Ok(Frame {
                body: Body::Accepted(a),
                ..
            }) => Ok(SendOutcome::Accepted {
                message_id: a.message_id.to_string(),
                correlation_id: a.correlation_id.map(|c| c.0),
                recipients: a.recipients,
            }),
            Ok(Frame {
                body: Body::Error(e),
                ..
            }) => {
                refused(format!("{}: {}", e.code.as_str(), e.message)).await;
                Err(relay_error(&e))
            }
            Ok(other) => Err(unexpected(&other.body)),
            Err(LinkError::Timeout) => Ok(SendOutcome::Unknown {
                message_id: id,
                reason: "the relay did not answer in time; it may have the question".into(),
            }),
            Err(e) => {
                refused(e.to_string()).await;
                Err(self.link_failure(&e))
            }
        }
    }

    /// Closes an ask this actor received, optionally with a reply.
    pub async fn ack(
        &self,
        from: Option<&str>,
        caller_pid: Option<u32>,
        correlation_id: String,
        reply: Option<String>,
    ) -> Result<Sent, ApiError> {
        let (session, peer) = self.registered_actor(from, caller_pid).await?;
        let correlation_id = self.ask_id_of(&peer, &correlation_id).await?;
        let body = Body::Ack(Ack {
            from: PeerId(peer.clone()),
            correlation_id: CorrelationId(correlation_id.clone()),
            reply: reply.clone(),
        });
        let sent = self
            .submit(
                Frame::new(body),
                &peer,
                "ack",
                Some(correlation_id),
                reply.unwrap_or_default(),
            )
            .await?;
        Ok(with_sender(sent, &session))
    }

    /// Answers a structured ask this actor received.
    pub async fn answer(
        &self,
        from: Option<&str>,
        caller_pid: Option<u32>,
        correlation_id: String,
        option_id: Option<String>,
        text: Option<String>,
    ) -> Result<Sent, ApiError> {
        let (session, peer) = self.registered_actor(from, caller_pid).await?;
        let received = self
            .store
            .received_ask(&peer, &correlation_id)
            .await
            .map_err(store_error)?;
        // A question the person's own peer never received is one to `@approvers` (a tool
        // call waiting for approval): only a person at a terminal answers it.
        if received.is_none() && session.session_id == super::CLI_SESSION {
            self.person_at_terminal(caller_pid).await?;
        }
        let correlation_id = received.unwrap_or(correlation_id);
        let summary = option_id.clone().or(text.clone()).unwrap_or_default();
        let body = Body::Answer(repowire_protocol::Answer {
            from: PeerId(peer.clone()),
            correlation_id: CorrelationId(correlation_id.clone()),
            option_id,
            text,
        });
        let sent = self
            .submit(
                Frame::new(body),
                &peer,
                "answer",
                Some(correlation_id),
                summary,
            )
            .await?;
        Ok(with_sender(sent, &session))
    }

    /// Writes or deletes a key of the actor's circle's shared state (kept by the relay).
    pub async fn state_set(
        &self,
        from: Option<&str>,
        caller_pid: Option<u32>,
        key: String,
        value: Option<String>,
    ) -> Result<crate::api::StateWritten, ApiError> {
        let (_, peer) = self.registered_actor(from, caller_pid).await?;
        let frame = Frame::new(Body::StateSet(repowire_protocol::StateSet {
            peer_id: PeerId(peer),
            key: key.clone(),
            value: value.clone(),
        }));
        self.validated(&frame)?;
        match self.ask_relay(frame).await? {
            Body::Ok(_) => Ok(crate::api::StateWritten { key, value }),
            other => Err(unexpected(&other)),
        }
    }

    /// Reads the actor's circle's shared state.
    pub async fn state_get(
        &self,
        from: Option<&str>,
        caller_pid: Option<u32>,
        key: Option<String>,
    ) -> Result<crate::api::CircleState, ApiError> {
        let (_, peer) = self.registered_actor(from, caller_pid).await?;
        let frame = Frame::new(Body::StateGet(repowire_protocol::StateGet {
            peer_id: PeerId(peer),
            key,
        }));
        self.validated(&frame)?;
        match self.ask_relay(frame).await? {
            Body::State(st) => Ok(crate::api::CircleState {
                circle: st.circle,
                entries: st.entries,
            }),
            other => Err(unexpected(&other)),
        }
    }

    /// Sends a request and returns the answer's body; relay errors and link failures become
    /// API errors.
    pub(super) async fn ask_relay(&self, frame: Frame) -> Result<Body, ApiError> {
        match self.link.request(frame, RELAY_TIMEOUT).await {
            Ok(Frame {
                body: Body::Error(e),
                ..
            }) => Err(relay_error(&e)),
            Ok(answer) => Ok(answer.body),
            Err(e) => Err(self.link_failure(&e)),
        }
    }

    /// The relay's own rules (names, sizes), checked before anything is sent.
    pub(super) fn validated(&self, frame: &Frame) -> Result<(), ApiError> {
        repowire_protocol::decode(&repowire_protocol::encode(frame))
            .map(drop)
            .map_err(|e| ApiError::new(e.code, e.message))
    }

    /// Sets or clears the actor's description.
    pub async fn describe(
        &self,
        from: Option<&str>,
        caller_pid: Option<u32>,
        text: String,
    ) -> Result<crate::api::Described, ApiError> {
        let (_, peer) = self.registered_actor(from, caller_pid).await?;
        let frame = Frame::new(Body::UpdatePeer(repowire_protocol::UpdatePeer {
            peer_id: PeerId(peer),
            turn_state: None,
            description: Some(text.clone()),
        }));
        match self.ask_relay(frame).await? {
            Body::Ok(_) => Ok(crate::api::Described { description: text }),
            other => Err(unexpected(&other)),
        }
    }

    /// Records a message-creating frame this daemon is sending (`peer status` shows it).
    pub(super) async fn record_sent(
        &self,
        frame: &Frame,
        peer: &str,
        kind: &str,
        to: Option<String>,
        text: String,
    ) -> Result<(), ApiError> {
        let correlation_id = match &frame.body {
            Body::Ack(a) => Some(a.correlation_id.0.clone()),
            Body::Answer(a) => Some(a.correlation_id.0.clone()),
            _ => None,
        };
        self.store
            .insert_sent(&SentRow {
                message_id: frame.id.to_string(),
                peer_id: peer.to_owned(),
                kind: kind.to_owned(),
                to_name: to,
                text,
                correlation_id,
                state: "queued".into(),
                error: None,
                reply: None,
                created_at_ms: now_ms(),
            })
            .await
            .map_err(store_error)
    }

    /// Validates, records and puts a frame in the outbox, and sends it when the link is up,
    /// without waiting for the answer (its `accepted` or `error` is handled as it arrives).
    pub(super) async fn enqueue(
        &self,
        frame: Frame,
        peer: &str,
        kind: &str,
        to: Option<String>,
        text: String,
    ) -> Result<(), ApiError> {
        self.validated(&frame)?;
        let encoded = repowire_protocol::encode(&frame);
        let id = frame.id.to_string();
        self.record_sent(&frame, peer, kind, to, text).await?;
        self.store
            .put_outbox(&id, peer, &encoded)
            .await
            .map_err(store_error)?;
        if self.link.is_ready() {
            self.link.send(&frame);
        }
        Ok(())
    }

    /// Validates, records, sends, and waits briefly for the relay's answer.
    async fn submit(
        &self,
        frame: Frame,
        peer: &str,
        kind: &str,
        to: Option<String>,
        text: String,
    ) -> Result<SendOutcome, ApiError> {
        Ok(self.submit_answered(frame, peer, kind, to, text).await?.0)
    }

    /// [`Self::submit`], with the relay's `accepted` when it came in time (a conversation's
    /// opening learns its conversation id from it).
    pub(super) async fn submit_answered(
        &self,
        frame: Frame,
        peer: &str,
        kind: &str,
        to: Option<String>,
        text: String,
    ) -> Result<(SendOutcome, Option<repowire_protocol::Accepted>), ApiError> {
        // The relay's own decoder: the same limits and rules, checked before anything is stored.
        self.validated(&frame)?;
        // A link that gave up will not come back by itself: say so, and keep nothing that
        // would claim to be sent later.
        if let super::link::LinkState::Stopped {
            reason,
            key_refused,
        } = self.link.state()
        {
            return Err(stopped_error(&reason, key_refused));
        }
        let encoded = repowire_protocol::encode(&frame);
        let id = frame.id.to_string();
        self.record_sent(&frame, peer, kind, to, text).await?;
        self.store
            .put_outbox(&id, peer, &encoded)
            .await
            .map_err(store_error)?;
        // Until the sessions are registered after a reconnect, a frame would be refused as
        // `not_registered`: it waits in the outbox, which is sent once registration is done.
        if !self.link.is_ready() {
            return Ok((
                SendOutcome::Queued {
                    message_id: id,
                    reason: "the relay link is not up; kept in the outbox and sent when it is"
                        .into(),
                },
                None,
            ));
        }
        match self.link.request(frame, RELAY_TIMEOUT).await {
            Ok(Frame {
                body: Body::Accepted(a),
                ..
            }) => Ok((
                SendOutcome::Accepted {
                    message_id: id,
                    correlation_id: a.correlation_id.clone().map(|c| c.0),
                    recipients: a.recipients.clone(),
                },
                Some(a),
            )),
            Ok(Frame {
                body: Body::Error(e),
                ..
            }) if !super::retryable(e.code) => Err(relay_error(&e)),
            Ok(Frame {
                body: Body::Error(e),
                ..
            }) => Ok((
                SendOutcome::Queued {
                    message_id: id,
                    reason: format!("the relay will be asked again: {}", e.message),
                },
                None,
            )),
            Ok(other) => Err(unexpected(&other.body)),
            Err(e) => Ok((
                SendOutcome::Queued {
                    message_id: id,
                    reason: format!("{e}; kept in the outbox and sent when the relay is reachable"),
                },
                None,
            )),
        }
    }

    /// Peers visible to the actor.
    pub async fn peers(
        &self,
        from: Option<&str>,
        caller_pid: Option<u32>,
        include_offline: bool,
        all_circles: bool,
        circle: Option<String>,
    ) -> Result<Vec<crate::api::ListedPeer>, ApiError> {
        let (_, peer) = self.registered_actor(from, caller_pid).await?;
        // The relay answers in pages (protocol.md §8.5): follow them to the end. The bound only
        // stops a relay that never ends its pages; 10 000 pages are 5 million peers.
        let mut peers = Vec::new();
        let mut cursor = None;
        for _ in 0..10_000 {
            let frame = Frame::new(Body::ListPeers(ListPeers {
                peer_id: PeerId(peer.clone()),
                circle: circle.clone(),
                include_offline,
                all_circles,
                limit: None,
                cursor: cursor.take(),
            }));
            match self.ask_relay(frame).await? {
                Body::Peers(p) => {
                    peers.extend(p.peers);
                    match p.next_cursor {
                        Some(next) => cursor = Some(next),
                        None => {
                            // The caller's own row says so (`peer list` shows "(you)").
                            return Ok(peers
                                .into_iter()
                                .map(|p| crate::api::ListedPeer {
                                    you: p.peer_id.as_str() == peer,
                                    peer: p,
                                })
                                .collect());
                        }
                    }
                }
                other => return Err(unexpected(&other)),
            }
        }
        Err(ApiError::new(
            repowire_protocol::ErrorCode::Unavailable,
            "the relay's peer list did not end after 10 000 pages",
        ))
    }

    /// A sent message's state and history, by message id or correlation id.
    pub async fn message_status(&self, id: &str) -> Result<crate::api::MessageStatus, ApiError> {
        match self.store.sent(id).await.map_err(store_error)? {
            Some((message, events)) => Ok(crate::api::MessageStatus { message, events }),
            None => Err(ApiError::new(
                repowire_protocol::ErrorCode::UnknownMessage,
                format!("this daemon sent no message `{id}`"),
            )),
        }
    }

    /// Daemon status.
    pub async fn status(&self) -> Result<crate::api::DaemonStatus, ApiError> {
        let sessions = self.store.active_sessions().await.map_err(store_error)?;
        let outbox = self.store.outbox_len().await.map_err(store_error)?;
        let realm = self.store.realm();
        let elsewhere: Vec<_> = self
            .store
            .outbox_by_realm()
            .await
            .map_err(store_error)?
            .into_iter()
            .filter(|r| r.realm != realm)
            .map(|r| crate::api::RealmQueue {
                realm: r.realm,
                messages: r.messages,
                oldest_ms: r.oldest_ms,
            })
            .collect();
        Ok(crate::api::DaemonStatus {
            pid: std::process::id(),
            // What a CLI of another build compares with its own (`cli::version_drift`).
            version: Some(crate::VERSION.to_owned()),
            home: self.settings.home.clone(),
            relay: self.relay_base.clone(),
            realm: realm.to_owned(),
            embedded: matches!(self.settings.relay, crate::config::RelayTarget::Embedded),
            link: self.link.state(),
            outbox,
            queued_elsewhere: elsewhere,
            sessions: sessions.into_iter().map(Into::into).collect(),
            wakes: self.wake_outcomes().into_iter().collect(),
            refused: self
                .refused_sessions()
                .into_iter()
                .map(|(session_id, code, message)| crate::api::RefusedSession {
                    session_id,
                    code,
                    message,
                })
                .collect(),
        })
    }
}

/// The frame `out` is as `peer` sends it, with its kind's name, recipient and text (for the
/// `sent` record).
pub(super) fn frame_of(
    peer: &str,
    out: Outgoing,
) -> Result<(Frame, &'static str, Option<String>, String), ApiError> {
    let Outgoing {
        from: _,
        kind,
        to,
        circle,
        text,
        reply_to,
        question,
    } = out;
    if question.is_some() && kind != SendKind::Ask {
        return Err(ApiError::new(
            repowire_protocol::ErrorCode::InvalidRequest,
            "only an ask can carry a question",
        ));
    }
    let from = PeerId(peer.to_owned());
    let need_to = || {
        to.clone().ok_or_else(|| {
            ApiError::new(
                repowire_protocol::ErrorCode::InvalidRequest,
                "a recipient is required",
            )
        })
    };
    let body = match kind {
        SendKind::Ask => Body::Ask(Ask {
            from,
            to: need_to()?,
            circle,
            text: text.clone(),
            reply_to: reply_to.map(CorrelationId),
            question,
        }),
        SendKind::Notify => Body::Notify(Notify {
            from,
            to: need_to()?,
            circle,
            text: text.clone(),
        }),
        SendKind::Broadcast => Body::Broadcast(Broadcast {
            from,
            text: text.clone(),
        }),
    };
    let kind_name = kind.message_kind().as_str();
    Ok((Frame::new(body), kind_name, to, text))
}
