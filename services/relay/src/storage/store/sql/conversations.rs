//! Direct conversations on the write path (protocol.md §10.15): a conversation message is
//! accepted op by op. Its conversation row is locked at the start of the transaction (every
//! batch locks its conversations first, in key order, before any peer row, so two pods cannot
//! deadlock on them); the seq is taken under that lock, in the transaction that enqueues the
//! message, so every participant's inbox holds the conversation in one order.

use repowire_protocol::{ConversationEvent, ConversationRef, PeerSummary};

use super::*;

/// Conversation states as stored.
pub(crate) const ACTIVE: &str = "active";
/// Paused by the loop guard; a person's turn resumes it.
pub(crate) const PAUSED: &str = "paused";
/// Ended: final.
pub(crate) const ENDED: &str = "ended";

/// What a checked conversation message does.
pub(super) enum Check {
    /// Goes ahead as prepared.
    Go(Prepared),
    /// Refused; nothing is written.
    Refuse(AcceptOutcome),
    /// Trips the loop guard: the conversation pauses with this notice instead.
    Pause(Prepared),
}

/// What a conversation message will be, once checked: its recipients and its
/// `Message.conversation`, JSON.
pub(super) struct Prepared {
    pub(super) recipients: Vec<String>,
    pub(super) seq: i64,
    pub(super) conversation: String,
    /// Why it pauses (the loop guard tripped) or ends.
    pub(super) reason: Option<String>,
    /// A turn's new theoretical arrival time of the next turn (its rate).
    pub(super) turn_rate_tat_ms: Option<i64>,
}

#[derive(sqlx::FromRow)]
struct ConversationRow {
    state: String,
    reason: Option<String>,
    last_seq: i64,
    turns_since_person: i64,
    bytes_since_person: i64,
    turn_rate_tat_ms: i64,
}

#[derive(sqlx::FromRow)]
pub(super) struct ParticipantRow {
    pub(super) peer_id: String,
    pub(super) name: String,
    pub(super) circle: String,
    pub(super) left_at_ms: Option<i64>,
}

impl This {
    /// Locks the rows of every conversation a turn or an end (a participant's or the relay's) of `ops` writes to, in key order, before
    /// the batch touches anything else.
    pub(super) async fn lock_conversations(conn: &mut Conn, ops: &[WriteOp]) -> Result<()> {
        let keys: BTreeSet<(&str, &str)> = ops
            .iter()
            .filter_map(|op| match op {
                WriteOp::Accept(NewMessage {
                    tenant_id,
                    conversation:
                        Some(
                            write
                            @ (ConversationWrite::Turn { .. } | ConversationWrite::End { .. }),
                        ),
                    ..
                }) => Some((tenant_id.as_str(), write.id())),
                WriteOp::EndConversation(e) => {
                    Some((e.tenant_id.as_str(), e.conversation_id.as_str()))
                }
                _ => None,
            })
            .collect();
        if LOCK_ROW.is_empty() {
            return Ok(());
        }
        for (tenant_id, conversation_id) in keys {
            sqlx::query(&format!(
                "SELECT conversation_id FROM conversations WHERE tenant_id = $1 AND conversation_id = $2{LOCK_ROW}"
            ))
            .bind(tenant_id)
            .bind(conversation_id)
            .fetch_optional(&mut *conn)
            .await?;
        }
        Ok(())
    }

    /// Checks a conversation message and decides its recipients and seq; writes nothing.
    pub(super) async fn prepare_conversation(
        conn: &mut Conn,
        m: &NewMessage,
        write: &ConversationWrite,
    ) -> Result<Check> {
        let mut turn_rate_tat_ms = None;
        let (participants, seq, event, why) = match write {
            ConversationWrite::Open { participants, .. } => {
                (participants.clone(), 1, ConversationEvent::Open, None)
            }
            ConversationWrite::Turn {
                conversation_id,
                by_person,
                loop_turns,
                loop_bytes,
                turns_per_minute,
            } => {
                let (row, participants) = match Self::member_of(conn, m, conversation_id).await? {
                    Ok(found) => found,
                    Err(refused) => return Ok(Check::Refuse(refused)),
                };
                if row.state == PAUSED && !by_person {
                    return Ok(Check::Refuse(AcceptOutcome::ConversationPaused {
                        reason: row.reason,
                        notice: None,
                    }));
                }
                // Its own rate, a person's turns too: refused turns are sent again later.
                match turn_rate(row.turn_rate_tat_ms, m.created_at_ms, *turns_per_minute) {
                    Ok(tat) => turn_rate_tat_ms = Some(tat),
                    Err(retry_after_ms) => {
                        return Ok(Check::Refuse(AcceptOutcome::ConversationRateLimited {
                            turns_per_minute: *turns_per_minute,
                            retry_after_ms,
                        }));
                    }
                }
                // The loop guard: one more turn no person started than it allows, or one whose
                // text would take the bytes relayed since a person's turn past its limit, pauses
                // it.
                let bytes = i64::try_from(m.body.len()).unwrap_or(i64::MAX);
                let why = if *by_person {
                    None
                } else if row.turns_since_person >= *loop_turns {
                    Some(format!(
                        "{loop_turns} turns in a row without a person's prompt"
                    ))
                } else if row.bytes_since_person.saturating_add(bytes) > *loop_bytes {
                    let budget = if loop_bytes % 1024 == 0 {
                        format!("{} KiB", loop_bytes / 1024)
                    } else {
                        format!("{loop_bytes} bytes")
                    };
                    Some(format!("{budget} relayed without a person's prompt"))
                } else {
                    None
                }
                .map(|why| {
                    format!("{why}; a person's prompt in any participant's session resumes it")
                });
                let event = if why.is_some() {
                    ConversationEvent::Paused
                } else {
                    ConversationEvent::Turn
                };
                (participants, row.last_seq + 1, event, why)
            }
            ConversationWrite::End {
                conversation_id,
                reason,
            } => {
                let (row, participants) = match Self::member_of(conn, m, conversation_id).await? {
                    Ok(found) => found,
                    Err(refused) => return Ok(Check::Refuse(refused)),
                };
                let ended = Some(reason.clone());
                (
                    participants,
                    row.last_seq + 1,
                    ConversationEvent::Ended,
                    ended,
                )
            }
        };
        // The loop guard's notice goes to every participant, the speaker too; anything else
        // to the others.
        let pauses = event == ConversationEvent::Paused;
        let recipients = participants
            .iter()
            .map(|p| p.peer_id.0.clone())
            .filter(|p| pauses || *p != m.from_peer_id)
            .collect();
        let conversation = ConversationRef {
            id: write.id().to_owned(),
            seq: u64::try_from(seq).unwrap_or_default(),
            event,
            participants,
            reason: why.clone(),
        };
        let conversation = serde_json::to_string(&conversation)
            .map_err(|e| StoreError::Corrupt(format!("conversation does not encode: {e}")))?;
        let prepared = Prepared {
            recipients,
            seq,
            conversation,
            reason: why,
            turn_rate_tat_ms,
        };
        Ok(if pauses {
            Check::Pause(prepared)
        } else {
            Check::Go(prepared)
        })
    }

    /// A conversation `m`'s sender takes part in and that has not ended, with its participants
    /// still in it, the opener first.
    async fn member_of(
        conn: &mut Conn,
        m: &NewMessage,
        conversation_id: &str,
    ) -> Result<std::result::Result<(ConversationRow, Vec<PeerSummary>), AcceptOutcome>> {
        let row: Option<ConversationRow> = sqlx::query_as(
            "SELECT state, reason, last_seq, turns_since_person, bytes_since_person, turn_rate_tat_ms \
             FROM conversations \
             WHERE tenant_id = $1 AND conversation_id = $2",
        )
        .bind(&m.tenant_id)
        .bind(conversation_id)
        .fetch_optional(&mut *conn)
        .await?;
        let Some(row) = row else {
            return Ok(Err(AcceptOutcome::UnknownConversation));
        };
        let rows: Vec<ParticipantRow> = sqlx::query_as(
            "SELECT peer_id, name, circle, left_at_ms FROM conversation_participants \
             WHERE tenant_id = $1 AND conversation_id = $2 ORDER BY position",
        )
        .bind(&m.tenant_id)
        .bind(conversation_id)
        .fetch_all(&mut *conn)
        .await?;
        if !rows
            .iter()
            .any(|p| p.peer_id == m.from_peer_id && p.left_at_ms.is_none())
        {
            return Ok(Err(AcceptOutcome::NotParticipant));
        }
        if row.state == ENDED {
            return Ok(Err(AcceptOutcome::ConversationEnded { reason: row.reason }));
        }
        let participants = rows
            .into_iter()
            .filter(|p| p.left_at_ms.is_none())
            .map(|p| PeerSummary {
                peer_id: p.peer_id.into(),
                name: p.name,
                circle: p.circle,
            })
            .collect();
        Ok(Ok((row, participants)))
    }

    /// The loop guard tripped: the conversation pauses, and every participant gets a notice
    /// (a message of the relay's, from the speaker's peer, in the conversation's order). The
    /// turn itself is not stored.
    pub(super) async fn pause_conversation(
        conn: &mut Conn,
        m: &NewMessage,
        write: &ConversationWrite,
        prepared: Prepared,
    ) -> Result<AcceptOutcome> {
        let reason = prepared.reason.clone().unwrap_or_default();
        sqlx::query(
            "UPDATE conversations SET state = $3, reason = $4, last_seq = $5 \
             WHERE tenant_id = $1 AND conversation_id = $2",
        )
        .bind(&m.tenant_id)
        .bind(write.id())
        .bind(PAUSED)
        .bind(&reason)
        .bind(prepared.seq)
        .execute(&mut *conn)
        .await?;
        let mut notice = m.clone();
        notice.message_id = repowire_protocol::MessageId::new().to_string();
        notice.body = format!("The conversation is paused: {reason}.");
        notice.content_hash = format!("notice:{}", notice.message_id);
        notice.correlation_id = Some(CorrelationId::notif_from_random(rand::random()).0);
        notice.recipients = prepared.recipients.clone();
        let mut enqueued = Vec::new();
        let mut recipients = prepared.recipients.clone();
        recipients.sort();
        for peer_id in recipients {
            // Past the cap too: a notice that the conversation stopped is never refused.
            if let Some(seq) = Self::allocate_unbounded(conn, &m.tenant_id, &peer_id).await? {
                enqueued.push(Enqueued { peer_id, seq });
            }
        }
        let correlation_id =
            Self::insert_with_cid(conn, &notice, Some(&prepared.conversation)).await?;
        for slot in &enqueued {
            Self::insert_entry(conn, &notice, slot).await?;
        }
        Ok(AcceptOutcome::ConversationPaused {
            reason: Some(reason),
            notice: Some(Box::new(Notice {
                message: notice,
                correlation_id,
                conversation: prepared.conversation,
                enqueued,
            })),
        })
    }

    /// Records a conversation message in its conversation: the new conversation and its
    /// participants, or the seq it took.
    pub(super) async fn record_conversation(
        conn: &mut Conn,
        m: &NewMessage,
        write: &ConversationWrite,
        prepared: &Prepared,
    ) -> Result<()> {
        match write {
            ConversationWrite::Open {
                conversation_id,
                participants,
            } => {
                sqlx::query(
                    "INSERT INTO conversations (tenant_id, conversation_id, opener_peer_id, state, \
                     last_seq, created_at_ms, last_turn_at_ms) VALUES ($1, $2, $3, $4, $5, $6, $6)",
                )
                .bind(&m.tenant_id)
                .bind(conversation_id)
                .bind(&m.from_peer_id)
                .bind(ACTIVE)
                .bind(prepared.seq)
                .bind(m.created_at_ms)
                .execute(&mut *conn)
                .await?;
                for (position, p) in participants.iter().enumerate() {
                    sqlx::query(
                        "INSERT INTO conversation_participants (tenant_id, conversation_id, \
                         peer_id, name, circle, position) VALUES ($1, $2, $3, $4, $5, $6)",
                    )
                    .bind(&m.tenant_id)
                    .bind(conversation_id)
                    .bind(p.peer_id.as_str())
                    .bind(&p.name)
                    .bind(&p.circle)
                    .bind(i64::try_from(position).unwrap_or(i64::MAX))
                    .execute(&mut *conn)
                    .await?;
                }
            }
            ConversationWrite::Turn {
                conversation_id,
                by_person,
                ..
            } => {
                // A person's turn resets the counts, and resumes a paused conversation.
                sqlx::query(
                    "UPDATE conversations SET last_seq = $3, last_turn_at_ms = $4, \
                     turns_since_person = CASE WHEN $5 THEN 0 ELSE turns_since_person + 1 END, \
                     bytes_since_person = CASE WHEN $5 THEN 0 ELSE bytes_since_person + $7 END, \
                     state = $6, reason = NULL, turn_rate_tat_ms = $8 \
                     WHERE tenant_id = $1 AND conversation_id = $2",
                )
                .bind(&m.tenant_id)
                .bind(conversation_id)
                .bind(prepared.seq)
                .bind(m.created_at_ms)
                .bind(*by_person)
                .bind(ACTIVE)
                .bind(i64::try_from(m.body.len()).unwrap_or(i64::MAX))
                .bind(prepared.turn_rate_tat_ms.unwrap_or_default())
                .execute(&mut *conn)
                .await?;
            }
            ConversationWrite::End {
                conversation_id,
                reason,
            } => {
                sqlx::query(
                    "UPDATE conversations SET last_seq = $3, state = $4, reason = $5, \
                     ended_at_ms = $6 WHERE tenant_id = $1 AND conversation_id = $2",
                )
                .bind(&m.tenant_id)
                .bind(conversation_id)
                .bind(prepared.seq)
                .bind(ENDED)
                .bind(reason)
                .bind(m.created_at_ms)
                .execute(&mut *conn)
                .await?;
            }
        }
        Ok(())
    }

    /// The `Message.conversation` of a stored message, for answering a retry.
    pub(super) async fn stored_conversation(
        conn: &mut Conn,
        tenant_id: &str,
        message_id: &str,
    ) -> Result<Option<String>> {
        Ok(sqlx::query_scalar(
            "SELECT conversation FROM messages WHERE tenant_id = $1 AND message_id = $2",
        )
        .bind(tenant_id)
        .bind(message_id)
        .fetch_optional(&mut *conn)
        .await?
        .flatten())
    }
}
