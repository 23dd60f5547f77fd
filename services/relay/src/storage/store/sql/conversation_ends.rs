//! The relay's own ends of direct conversations (protocol.md §10.15): a participant's peer was
//! unregistered (its session ended), or no turn came for the idle timeout. The conversation row
//! is locked first (see `conversations`), the end is guarded by the state it was chosen in (a
//! turn that came since keeps an idle conversation going; an end that came first wins), and the
//! notice takes the conversation's next seq, as a participant's `end_conversation` does.

use repowire_protocol::{ConversationEvent, ConversationRef, PeerSummary};

use super::conversations::{ENDED, ParticipantRow};
use super::*;

#[derive(sqlx::FromRow)]
struct Ended {
    last_seq: i64,
    opener_peer_id: String,
}

impl This {
    /// Ends a conversation for the relay, if it is still due; the notice to the participants
    /// still in it (not the one that left).
    pub(super) async fn end_by_relay(conn: &mut Conn, e: &RelayEnd) -> Result<Option<Box<Notice>>> {
        let participants: Vec<ParticipantRow> = sqlx::query_as(
            "SELECT peer_id, name, circle, left_at_ms FROM conversation_participants \
             WHERE tenant_id = $1 AND conversation_id = $2 AND left_at_ms IS NULL ORDER BY position",
        )
        .bind(&e.tenant_id)
        .bind(&e.conversation_id)
        .fetch_all(&mut *conn)
        .await?;
        let (before_ms, reason) = match &e.cause {
            EndCause::Left { peer_id } => {
                let Some(gone) = participants.iter().find(|p| &p.peer_id == peer_id) else {
                    return Ok(None);
                };
                (i64::MAX, format!("@{}'s session ended", gone.name))
            }
            EndCause::IdleSince {
                before_ms,
                idle_secs,
            } => (
                *before_ms,
                format!("no turn for {}", for_people(*idle_secs)),
            ),
        };
        let ended: Option<Ended> = sqlx::query_as(
            "UPDATE conversations SET last_seq = last_seq + 1, state = $3, reason = $4, \
             ended_at_ms = $5 WHERE tenant_id = $1 AND conversation_id = $2 AND state <> $3 \
             AND last_turn_at_ms < $6 RETURNING last_seq, opener_peer_id",
        )
        .bind(&e.tenant_id)
        .bind(&e.conversation_id)
        .bind(ENDED)
        .bind(&reason)
        .bind(e.now_ms)
        .bind(before_ms)
        .fetch_optional(&mut *conn)
        .await?;
        let Some(ended) = ended else {
            return Ok(None);
        };
        // The notice is from the peer that left, or (idle) from the opener; should the opener
        // have left, from the first still in it.
        let from_id = match &e.cause {
            EndCause::Left { peer_id } => peer_id.as_str(),
            EndCause::IdleSince { .. } => ended.opener_peer_id.as_str(),
        };
        let from = participants
            .iter()
            .find(|p| p.peer_id == from_id)
            .or(participants.first());
        Self::end_notice(conn, e, &participants, from, ended.last_seq, reason).await
    }

    async fn end_notice(
        conn: &mut Conn,
        e: &RelayEnd,
        participants: &[ParticipantRow],
        from: Option<&ParticipantRow>,
        seq: i64,
        reason: String,
    ) -> Result<Option<Box<Notice>>> {
        let Some(from) = from else {
            return Ok(None);
        };
        let left = match &e.cause {
            EndCause::Left { peer_id } => Some(peer_id.as_str()),
            EndCause::IdleSince { .. } => None,
        };
        let summaries: Vec<PeerSummary> = participants
            .iter()
            .map(|p| PeerSummary {
                peer_id: p.peer_id.clone().into(),
                name: p.name.clone(),
                circle: p.circle.clone(),
            })
            .collect();
        let conversation = serde_json::to_string(&ConversationRef {
            id: e.conversation_id.clone(),
            seq: u64::try_from(seq).unwrap_or_default(),
            event: ConversationEvent::Ended,
            participants: summaries,
            reason: Some(reason.clone()),
        })
        .map_err(|e| StoreError::Corrupt(format!("conversation does not encode: {e}")))?;
        let mut recipients: Vec<String> = participants
            .iter()
            .map(|p| p.peer_id.clone())
            .filter(|p| Some(p.as_str()) != left)
            .collect();
        recipients.sort();
        let message_id = repowire_protocol::MessageId::new().to_string();
        let notice = NewMessage {
            tenant_id: e.tenant_id.clone(),
            content_hash: format!("notice:{message_id}"),
            message_id,
            kind: MessageKind::Notify,
            from_peer_id: from.peer_id.clone(),
            from_name: from.name.clone(),
            from_circle: from.circle.clone(),
            body: format!("The conversation ended: {reason}."),
            correlation_id: Some(CorrelationId::notif_from_random(rand::random()).0),
            reply_to: None,
            question: None,
            answer: None,
            created_at_ms: e.now_ms,
            expires_at_ms: e.expires_at_ms,
            deadline_ms: None,
            from_session_id: None,
            to_session_id: None,
            recipients: recipients.clone(),
            inbox_cap: i64::MAX,
            traceparent: None,
            conversation: Some(ConversationWrite::End {
                conversation_id: e.conversation_id.clone(),
                reason: reason.clone(),
            }),
        };
        let mut enqueued = Vec::new();
        for peer_id in recipients {
            // Past the cap too: a notice that the conversation stopped is never refused.
            if let Some(seq) = Self::allocate_unbounded(conn, &e.tenant_id, &peer_id).await? {
                enqueued.push(Enqueued { peer_id, seq });
            }
        }
        let correlation_id = Self::insert_with_cid(conn, &notice, Some(&conversation)).await?;
        for slot in &enqueued {
            Self::insert_entry(conn, &notice, slot).await?;
        }
        Ok(Some(Box::new(Notice {
            message: notice,
            correlation_id,
            conversation,
            enqueued,
        })))
    }

    /// Conversations not ended whose last turn came before `before_ms`, oldest first, at most
    /// `limit`: (tenant, conversation).
    pub(super) async fn idle_conversations_sql(
        &self,
        before_ms: i64,
        limit: i64,
    ) -> Result<Vec<(String, String)>> {
        Ok(sqlx::query_as(
            "SELECT tenant_id, conversation_id FROM conversations \
             WHERE state <> $1 AND last_turn_at_ms < $2 ORDER BY last_turn_at_ms LIMIT $3",
        )
        .bind(ENDED)
        .bind(before_ms)
        .bind(limit)
        .fetch_all(&self.pool)
        .await?)
    }

    /// The conversations `peer_id` takes part in that have not ended.
    pub(super) async fn live_conversations_of_sql(
        &self,
        tenant_id: &str,
        peer_id: &str,
    ) -> Result<Vec<String>> {
        Ok(sqlx::query_scalar(
            "SELECT c.conversation_id FROM conversation_participants p \
             JOIN conversations c ON c.tenant_id = p.tenant_id AND c.conversation_id = p.conversation_id \
             WHERE p.tenant_id = $1 AND p.peer_id = $2 AND p.left_at_ms IS NULL AND c.state <> $3 \
             ORDER BY c.conversation_id",
        )
        .bind(tenant_id)
        .bind(peer_id)
        .bind(ENDED)
        .fetch_all(&self.pool)
        .await?)
    }
}

/// A timeout as people say it: "2 hours", "30 minutes", "45 seconds".
fn for_people(secs: u64) -> String {
    let (n, unit) = match secs {
        s if s >= 3600 && s % 3600 == 0 => (s / 3600, "hour"),
        s if s >= 60 && s % 60 == 0 => (s / 60, "minute"),
        s => (s, "second"),
    };
    format!("{n} {unit}{}", if n == 1 { "" } else { "s" })
}

#[cfg(test)]
mod tests {
    use super::for_people;

    #[test]
    fn timeouts_read_as_people_say_them() {
        assert_eq!(for_people(3600), "1 hour");
        assert_eq!(for_people(7200), "2 hours");
        assert_eq!(for_people(1800), "30 minutes");
        assert_eq!(for_people(90), "90 seconds");
        assert_eq!(for_people(1), "1 second");
    }
}
