//! Waiting for answers: `wait_reply` (an ask's reply, whenever it comes), blocking questions
//! (`ask_blocking`: ask, park until the relay records an answer or the question's deadline, and
//! return the typed outcome), and the questions to `@approvers` (`questions`, and answering
//! them as the person at this machine).
//!
//! The relay is the clock and the judge: a question's deadline is kept there, an answer after
//! it is refused there, and a timeout is recorded there with the default taken. A blocking
//! caller therefore waits a little past the deadline ([`VERDICT_GRACE`]) for the relay's word,
//! and only without it decides on its own ("no verdict"); a reply that comes after that is not
//! handed to the agent, and its sender is told it failed.

use std::sync::Arc;
use std::time::Duration;

use repowire_protocol::{Body, CorrelationId, Frame, PeerId, Status};

use super::errors::store_error;
use super::hooks::AfterWrite;
use super::store::{InboxRow, SentEvent, SentRow};
use super::{Daemon, RELAY_TIMEOUT};
use crate::api::{ApiError, Blocked, Outgoing, Reply, SendKind, WaitOutcome};

/// How long past a question's deadline a blocking caller waits for the relay to report the
/// timeout (or an answer it took just before it) before deciding without it.
pub const VERDICT_GRACE: Duration = Duration::from_secs(3);

/// How long a blocking caller asks the relay for the outcome once more at its deadline.
const LAST_WORD: Duration = Duration::from_secs(1);

/// The longest a blocking question may wait.
pub const MAX_BLOCKING: Duration = Duration::from_secs(3600);

/// How an ask this daemon sent stands, as far as a waiting caller cares.
enum Outcome {
    /// The reply message is here (an `ack` with a reply, or an `answer`).
    Replied(InboxRow),
    /// Closed without a reply message: a bare ack, a chained ask, or its question's timeout.
    Closed {
        state: String,
        status: Option<Status>,
    },
    /// It will never be answered: refused, expired undelivered, or failed.
    Failed { state: String, reason: String },
}

impl Daemon {
    /// Where the ask `cid` that `peer` sent stands; `None` while it is open (or while a reply
    /// the relay recorded is still on its way: `reply_expected` remembers that it is).
    async fn outcome(
        &self,
        peer: &str,
        row: &SentRow,
        events: &[SentEvent],
        reply_expected: &mut bool,
    ) -> Result<Option<Outcome>, ApiError> {
        if let Some(cid) = &row.correlation_id
            && let Some(reply) = self.store.reply_for(peer, cid).await.map_err(store_error)?
        {
            return Ok(Some(Outcome::Replied(reply)));
        }
        Ok(match row.state.as_str() {
            // A reply travels separately from the `delivery` that closes the ask.
            "acked" | "answered" if !*reply_expected => {
                let cid = row.correlation_id.clone().unwrap_or_default();
                match self.relay_status(peer, &cid).await {
                    // Closed by its timeout (a default is no reply message), or without a reply.
                    Some(st) if st.timed_out || (st.reply.is_none() && st.answer.is_none()) => {
                        Some(Outcome::Closed {
                            state: row.state.clone(),
                            status: Some(st),
                        })
                    }
                    // Unknown (relay unreachable), or a reply exists: wait for it.
                    _ => {
                        *reply_expected = true;
                        None
                    }
                }
            }
            "failed" | "expired" | "rejected" => Some(Outcome::Failed {
                state: row.state.clone(),
                reason: events
                    .iter()
                    .rev()
                    .find_map(|e| e.reason.clone())
                    .or(row.error.clone())
                    .unwrap_or_else(|| row.state.clone()),
            }),
            _ => None,
        })
    }

    /// The relay's `status` of an ask `peer` sent, if the relay answers.
    async fn relay_status(&self, peer: &str, cid: &str) -> Option<Status> {
        let query = Frame::new(Body::StatusQuery(repowire_protocol::StatusQuery {
            peer_id: PeerId(peer.to_owned()),
            message_id: None,
            correlation_id: Some(CorrelationId(cid.to_owned())),
        }));
        match self.link.request(query, RELAY_TIMEOUT).await {
            Ok(Frame {
                body: Body::Status(st),
                ..
            }) => Some(st),
            _ => None,
        }
    }

    /// Waits for the reply to an ask the actor sent. The reply is marked consumed (and reported
    /// `injected`) only once the answer reached the caller; it is then not pushed to the agent
    /// again. An ask closed without a reply (a bare ack, a chain, its question's timeout), or
    /// one that failed, ends the wait too.
    pub async fn wait_reply(
        self: &Arc<Self>,
        from: Option<&str>,
        caller_pid: Option<u32>,
        cid: &str,
        timeout: Duration,
    ) -> Result<(WaitOutcome, Option<AfterWrite>), ApiError> {
        let actor = self.actor(from, caller_pid).await?;
        let owned = match (
            &actor.peer_id,
            self.store.sent(cid).await.map_err(store_error)?,
        ) {
            (Some(peer), Some((row, _))) => row.kind == "ask" && &row.peer_id == peer,
            _ => false,
        };
        if !owned {
            return Err(ApiError::new(
                repowire_protocol::ErrorCode::UnknownMessage,
                format!("`{cid}` is not an ask this session sent"),
            ));
        }
        let peer = actor.peer_id.unwrap_or_default();
        let deadline = tokio::time::Instant::now() + timeout;
        let mut reply_expected = false;
        loop {
            let notified = self.replies.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            if let Some((row, events)) = self.store.sent(cid).await.map_err(store_error)?
                && let Some(outcome) = self
                    .outcome(&peer, &row, &events, &mut reply_expected)
                    .await?
            {
                return Ok(waited(cid, outcome));
            }
            if tokio::time::timeout_at(deadline, notified).await.is_err() {
                return Ok((
                    WaitOutcome::Waiting {
                        correlation_id: cid.to_owned(),
                        message: format!(
                            "no reply within {} s; the ask stays open",
                            timeout.as_secs()
                        ),
                    },
                    None,
                ));
            }
        }
    }

    /// Asks `to` a question as the actor and waits for its outcome (see [`Daemon::block_on`]).
    /// `tool_permission` questions are refused here: they come from the PreToolUse hook.
    pub async fn ask_blocking(
        self: &Arc<Self>,
        out: Outgoing,
        caller_pid: Option<u32>,
    ) -> Result<(Blocked, Option<AfterWrite>), ApiError> {
        let question = out.question.clone().ok_or_else(|| {
            ApiError::new(
                repowire_protocol::ErrorCode::InvalidRequest,
                "a blocking question needs a question: --choice, --text-answer or --acknowledge",
            )
        })?;
        if question.kind == repowire_protocol::QuestionKind::ToolPermission {
            return Err(ApiError::new(
                repowire_protocol::ErrorCode::InvalidRequest,
                "a tool_permission question comes only from the PreToolUse hook path",
            ));
        }
        let (session, peer) = self
            .registered_actor(out.from.as_deref(), caller_pid)
            .await?;
        let (outcome, after) = self.block_on(&peer, out, None).await?;
        // The outcome of the wait, with the peer it was asked as (as a send's reply has it).
        let from = super::ops::sender_of(&session);
        Ok((Blocked { outcome, from }, after))
    }

    /// Sends the ask `out` (which must carry a question with `timeout_ms`) as `peer`, once and
    /// without the outbox, and waits until the relay reports its outcome, or until `deadline`
    /// (default: the question's timeout plus [`VERDICT_GRACE`] from now) without a word from
    /// the relay (`state: "no_verdict"`). Nothing is asked while the relay link is down, or
    /// when the relay refuses the question: nobody could answer it in time.
    pub(super) async fn block_on(
        self: &Arc<Self>,
        peer: &str,
        mut out: Outgoing,
        deadline: Option<tokio::time::Instant>,
    ) -> Result<(WaitOutcome, Option<AfterWrite>), ApiError> {
        let timeout = out
            .question
            .as_ref()
            .and_then(|q| q.timeout_ms)
            .map(Duration::from_millis)
            .ok_or_else(|| {
                ApiError::new(
                    repowire_protocol::ErrorCode::InvalidRequest,
                    "a blocking question needs a timeout (question.timeout_ms)",
                )
            })?;
        if timeout > MAX_BLOCKING {
            return Err(ApiError::new(
                repowire_protocol::ErrorCode::InvalidRequest,
                format!(
                    "a blocking question waits at most {} s",
                    MAX_BLOCKING.as_secs()
                ),
            ));
        }
        out.kind = SendKind::Ask;
        let deadline =
            deadline.unwrap_or_else(|| tokio::time::Instant::now() + timeout + VERDICT_GRACE);
        let (frame, kind, to, text) = super::ops::frame_of(peer, out)?;
        let message_id = frame.id.to_string();
        // Armed before the question leaves: whenever its caller stops waiting without an
        // outcome (also while it is being sent), an answer arriving later counts for nothing.
        let mut guard = Abandon {
            daemon: self.clone(),
            message_id: message_id.clone(),
            armed: true,
        };
        let sending = self.submit_once(frame, peer, kind, to, text);
        match tokio::time::timeout_at(deadline, sending).await {
            Ok(sent) => drop(sent?),
            Err(_) => {
                return Ok((
                    WaitOutcome::NoVerdict {
                        message_id: None,
                        correlation_id: None,
                        reason: "the relay did not take the question in time".into(),
                    },
                    None,
                ));
            }
        }
        let mut reply_expected = false;
        loop {
            let notified = self.replies.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            if let Some((row, events)) = self.store.sent(&message_id).await.map_err(store_error)?
                && let Some(outcome) = self
                    .outcome(peer, &row, &events, &mut reply_expected)
                    .await?
            {
                guard.armed = false;
                self.store
                    .set_blocking(&message_id, "decided")
                    .await
                    .map_err(store_error)?;
                let cid = row.correlation_id.clone().unwrap_or_default();
                return Ok(waited(&cid, outcome));
            }
            if tokio::time::timeout_at(deadline, notified).await.is_err() {
                let cid = self
                    .store
                    .sent(&message_id)
                    .await
                    .ok()
                    .flatten()
                    .and_then(|(row, _)| row.correlation_id);
                // A `delivery` can be lost with a connection: the relay is asked once more,
                // briefly (the caller's own deadline is not far).
                let last_word = async {
                    let cid = cid.as_deref()?;
                    let st = tokio::time::timeout(LAST_WORD, self.relay_status(peer, cid))
                        .await
                        .ok()??;
                    from_status(cid, st)
                };
                let said = last_word.await;
                // A reply that reached this machine meanwhile waits for this caller: it is the
                // outcome, and is consumed with it rather than handed to the agent later.
                if let Some(cid) = cid.as_deref()
                    && let Some(reply) =
                        self.store.reply_for(peer, cid).await.map_err(store_error)?
                {
                    guard.armed = false;
                    self.store
                        .set_blocking(&message_id, "decided")
                        .await
                        .map_err(store_error)?;
                    return Ok(waited(cid, Outcome::Replied(reply)));
                }
                if let Some(decided) = said {
                    guard.armed = false;
                    self.store
                        .set_blocking(&message_id, "decided")
                        .await
                        .map_err(store_error)?;
                    return Ok((decided, None));
                }
                // Abandoned before answering, so that a reply arriving now already finds it so
                // (and is not handed to the agent); `guard` would do it too, but later. One that
                // arrived since the check above (while still `waiting`) is refused the same way.
                guard.armed = false;
                self.store
                    .set_blocking(&message_id, "abandoned")
                    .await
                    .map_err(store_error)?;
                if let Some(cid) = cid.as_deref()
                    && let Ok(Some(late)) = self.store.reply_for(peer, cid).await
                {
                    self.refuse_late_reply(peer, &late.message_id, None).await;
                }
                return Ok((
                    WaitOutcome::NoVerdict {
                        message_id: Some(message_id),
                        correlation_id: cid,
                        reason: format!(
                            "the relay reported no outcome within {} s of the question's {} s timeout",
                            VERDICT_GRACE.as_secs(),
                            timeout.as_secs()
                        ),
                    },
                    None,
                ));
            }
        }
    }

    /// The questions to `@approvers` the actor may see (all of the tenant's for a person),
    /// open ones or closed ones.
    pub async fn questions(
        &self,
        from: Option<&str>,
        caller_pid: Option<u32>,
        closed: bool,
        limit: Option<u32>,
    ) -> Result<Vec<crate::api::Approval>, ApiError> {
        let (session, peer) = self.registered_actor(from, caller_pid).await?;
        let frame = Frame::new(Body::ListQuestions(repowire_protocol::ListQuestions {
            peer_id: PeerId(peer),
            closed,
            limit,
        }));
        self.validated(&frame)?;
        let questions = match self.ask_relay(frame).await? {
            Body::Questions(q) => q.questions,
            other => return Err(super::errors::unexpected(&other)),
        };
        if !closed {
            return Ok(questions
                .into_iter()
                .map(|q| crate::api::Approval::Asked(Box::new(q)))
                .collect());
        }
        // The record of decisions: the relay's, and the calls denied on this machine without
        // one.
        let limit = limit.unwrap_or(repowire_protocol::DEFAULT_QUESTIONS_LISTED);
        let local = self.local_of(&session, limit).await?;
        Ok(super::history::merged(questions, local, limit))
    }

    /// The calls this machine denied without an approver's decision, as the record of
    /// decisions lists them; no relay needed.
    pub async fn local_decisions(
        &self,
        from: Option<&str>,
        caller_pid: Option<u32>,
        limit: Option<u32>,
    ) -> Result<Vec<crate::api::Approval>, ApiError> {
        let session = self.actor(from, caller_pid).await?;
        let limit = limit.unwrap_or(repowire_protocol::DEFAULT_QUESTIONS_LISTED);
        let local = self.local_of(&session, limit).await?;
        Ok(super::history::merged(Vec::new(), local, limit))
    }

    /// Local denials `session` may see: the person at this machine every session's, an agent
    /// its own.
    async fn local_of(
        &self,
        session: &super::store::SessionRow,
        limit: u32,
    ) -> Result<Vec<super::store::LocalDecision>, ApiError> {
        let whose =
            (session.session_id != super::CLI_SESSION).then_some(session.session_id.as_str());
        self.store
            .local_decisions(whose, limit)
            .await
            .map_err(store_error)
    }
}

/// A waited-for outcome as the API reports it; a reply still queued is consumed once the
/// answer reached the caller.
fn waited(cid: &str, outcome: Outcome) -> (WaitOutcome, Option<AfterWrite>) {
    match outcome {
        Outcome::Replied(row) => {
            let after = (row.state == "queued").then(|| AfterWrite {
                peer_id: row.peer_id.clone(),
                message_ids: vec![row.message_id.clone()],
                state: "consumed",
                how: Default::default(),
                conversations: Vec::new(),
            });
            let reply: Option<Reply> = serde_json::from_str(&row.body).ok();
            let state = if reply.as_ref().is_some_and(|r| r.answer.is_some()) {
                "answered"
            } else {
                "acked"
            };
            (
                WaitOutcome::Replied {
                    outcome: state.to_owned(),
                    correlation_id: cid.to_owned(),
                    reply,
                },
                after,
            )
        }
        Outcome::Closed { state, status } => {
            let timed_out = status.as_ref().is_some_and(|s| s.timed_out);
            let reason = status
                .as_ref()
                .and_then(|s| s.recipients.iter().find_map(|r| r.reason.clone()));
            (
                WaitOutcome::Closed {
                    outcome: state,
                    correlation_id: cid.to_owned(),
                    timed_out,
                    answer: status.as_ref().and_then(|s| s.answer.clone()),
                    reply_text: status.as_ref().and_then(|s| s.reply.clone()),
                    reason,
                },
                None,
            )
        }
        Outcome::Failed { state, reason } => (
            WaitOutcome::Failed {
                outcome: state,
                reason,
                correlation_id: cid.to_owned(),
            },
            None,
        ),
    }
}

/// The outcome a closed ask's `status` tells, shaped as [`waited`] shapes it (a reply built
/// from `answered_by`, `answer` and `reply` when a reply closed it); `None` while it is open.
fn from_status(cid: &str, st: Status) -> Option<WaitOutcome> {
    let closed = st.recipients.iter().any(|r| r.state.is_terminal());
    if !closed {
        return None;
    }
    if let (false, Some(by)) = (st.timed_out, &st.answered_by) {
        return Some(WaitOutcome::Replied {
            outcome: if st.answer.is_some() {
                "answered"
            } else {
                "acked"
            }
            .to_owned(),
            correlation_id: cid.to_owned(),
            reply: Some(Reply {
                from: Some(by.clone()),
                answer: st.answer.clone(),
                text: st.reply.clone(),
                rest: Default::default(),
            }),
        });
    }
    let state = st
        .recipients
        .iter()
        .find(|r| r.state.is_terminal())
        .map(|r| r.state.as_str())
        .unwrap_or("closed")
        .to_owned();
    Some(
        waited(
            cid,
            Outcome::Closed {
                state,
                status: Some(st),
            },
        )
        .0,
    )
}

/// Marks a blocking ask abandoned when its waiter goes away without an outcome (the caller hung
/// up, or the wait ran out), so a reply that comes later is not handed to the agent.
struct Abandon {
    daemon: Arc<Daemon>,
    message_id: String,
    armed: bool,
}

impl Drop for Abandon {
    fn drop(&mut self) {
        if self.armed {
            let daemon = self.daemon.clone();
            let id = std::mem::take(&mut self.message_id);
            tokio::spawn(async move {
                if let Err(error) = daemon.store.set_blocking(&id, "abandoned").await {
                    tracing::warn!(%error, msg = %id, "could not mark a blocking ask abandoned");
                }
            });
        }
    }
}
