//! Direct conversations on the write path (protocol.md §10.15): a conversation message is
//! accepted op by op. Its conversation row is locked at the start of the transaction (every
//! batch locks its conversations first, in key order, before any peer row, so two pods cannot
//! deadlock on them); the seq is taken under that lock, in the transaction that enqueues the
//! message, so every participant's inbox holds the conversation in one order.

use repowire_protocol::{ConversationEvent, ConversationRef, PeerSummary};

use super::*;

/// Conversation states as stored.
pub(crate) const ACTIVE: &str = "active";
/// Ended: final.
pub(crate) const ENDED: &str = "ended";

/// What a conversation message will be, once checked: its recipients and its
/// `Message.conversation`, JSON.
pub(super) struct Prepared {
    pub(super) recipients: Vec<String>,
    pub(super) seq: i64,
    pub(super) conversation: String,
}

#[derive(sqlx::FromRow)]
struct ConversationRow {
    state: String,
    reason: Option<String>,
    last_seq: i64,
}

#[derive(sqlx::FromRow)]
struct ParticipantRow {
    peer_id: String,
    name: String,
    circle: String,
    left_at_ms: Option<i64>,
}

impl This {
    /// Locks the rows of every conversation a turn of `ops` writes to, in key order, before
    /// the batch touches anything else.
    pub(super) async fn lock_conversations(conn: &mut Conn, ops: &[WriteOp]) -> Result<()> {
        let keys: BTreeSet<(&str, &str)> = ops
            .iter()
            .filter_map(|op| match op {
                WriteOp::Accept(NewMessage {
                    tenant_id,
                    conversation:
                        Some(ConversationWrite::Turn {
                            conversation_id, ..
                        }),
                    ..
                }) => Some((tenant_id.as_str(), conversation_id.as_str())),
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
    /// `Err`: the refusal to answer.
    pub(super) async fn prepare_conversation(
        conn: &mut Conn,
        m: &NewMessage,
        write: &ConversationWrite,
    ) -> Result<std::result::Result<Prepared, AcceptOutcome>> {
        let (participants, seq, event) = match write {
            ConversationWrite::Open { participants, .. } => {
                (participants.clone(), 1, ConversationEvent::Open)
            }
            ConversationWrite::Turn {
                conversation_id, ..
            } => {
                let row: Option<ConversationRow> = sqlx::query_as(
                    "SELECT state, reason, last_seq FROM conversations \
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
                (participants, row.last_seq + 1, ConversationEvent::Turn)
            }
        };
        let recipients = participants
            .iter()
            .map(|p| p.peer_id.0.clone())
            .filter(|p| *p != m.from_peer_id)
            .collect();
        let conversation = ConversationRef {
            id: write.id().to_owned(),
            seq: u64::try_from(seq).unwrap_or_default(),
            event,
            participants,
            reason: None,
        };
        let conversation = serde_json::to_string(&conversation)
            .map_err(|e| StoreError::Corrupt(format!("conversation does not encode: {e}")))?;
        Ok(Ok(Prepared {
            recipients,
            seq,
            conversation,
        }))
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
            } => {
                sqlx::query(
                    "UPDATE conversations SET last_seq = $3, last_turn_at_ms = $4, \
                     turns_since_person = CASE WHEN $5 THEN 0 ELSE turns_since_person + 1 END \
                     WHERE tenant_id = $1 AND conversation_id = $2",
                )
                .bind(&m.tenant_id)
                .bind(conversation_id)
                .bind(prepared.seq)
                .bind(m.created_at_ms)
                .bind(*by_person)
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
