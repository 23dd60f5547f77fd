//! Direct conversations of local peers (a cache of the relay's, per relay identity), and the
//! current segment of each session's turn (when it started, whether a person started it).

use repowire_protocol::PeerSummary;
use serde::Serialize;

use super::{Result, Store, now_ms};

/// A conversation one local peer takes part in.
#[derive(Debug, Clone, Serialize, sqlx::FromRow)]
pub struct ConversationRow {
    /// The local participant.
    pub peer_id: String,
    /// The relay's id (`cv-…`).
    pub conversation_id: String,
    /// `active`, `paused` or `ended`.
    pub state: String,
    /// Why it is not active.
    pub reason: Option<String>,
    /// JSON: every participant, the opener first.
    pub participants: String,
    /// The opener's peer id.
    pub opener: String,
    /// When this peer joined it.
    pub joined_at_ms: i64,
    /// The latest seq this peer saw in it (sent or received).
    pub last_seq: i64,
    /// Last change.
    pub updated_at_ms: i64,
}

impl ConversationRow {
    /// The participants, the opener first.
    pub fn participants(&self) -> Vec<PeerSummary> {
        serde_json::from_str(&self.participants).unwrap_or_default()
    }
}

/// Where a session's current turn segment started.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct Segment {
    /// When (ms).
    pub started_at_ms: i64,
    /// A person's prompt started it.
    pub by_person: bool,
    /// JSON: the conversations whose messages started it.
    pub conversations: String,
}

impl Segment {
    /// The conversations whose messages started it.
    pub fn conversations(&self) -> Vec<String> {
        serde_json::from_str(&self.conversations).unwrap_or_default()
    }
}

impl Store {
    /// Records that `peer_id` takes part in a conversation (from `seq` on), or that it saw a
    /// later seq of it, in `state` (`active`, `paused`, `ended`) for `reason`. The first record
    /// sets when it joined; an older seq seen late changes nothing but the participants.
    pub async fn conversation_seen(
        &self,
        peer_id: &str,
        conversation_id: &str,
        participants: &[PeerSummary],
        seq: u64,
        state: &str,
        reason: Option<&str>,
    ) -> Result<()> {
        let now = now_ms();
        let opener = participants
            .first()
            .map(|p| p.peer_id.as_str().to_owned())
            .unwrap_or_default();
        sqlx::query(
            "INSERT INTO conversations (realm, peer_id, conversation_id, state, reason, \
             participants, opener, joined_at_ms, last_seq, updated_at_ms) \
             VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?) \
             ON CONFLICT (realm, peer_id, conversation_id) DO UPDATE SET \
             participants = excluded.participants, \
             state = CASE WHEN excluded.last_seq >= last_seq AND state <> 'ended' \
                 THEN excluded.state ELSE state END, \
             reason = CASE WHEN excluded.last_seq >= last_seq AND state <> 'ended' \
                 THEN excluded.reason ELSE reason END, \
             last_seq = MAX(last_seq, excluded.last_seq), \
             updated_at_ms = excluded.updated_at_ms",
        )
        .bind(self.realm())
        .bind(peer_id)
        .bind(conversation_id)
        .bind(state)
        .bind(reason)
        .bind(serde_json::to_string(participants).unwrap_or_else(|_| "[]".into()))
        .bind(opener)
        .bind(now)
        .bind(i64::try_from(seq).unwrap_or(i64::MAX))
        .bind(now)
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    /// Moves a conversation of `peer_id` to `state` (the relay refused a turn in it: `ended`
    /// or `paused`). An ended one stays ended.
    pub async fn conversation_state(
        &self,
        peer_id: &str,
        conversation_id: &str,
        state: &str,
        reason: &str,
    ) -> Result<()> {
        sqlx::query(
            "UPDATE conversations SET state = ?, reason = ?, updated_at_ms = ? \
             WHERE realm = ? AND peer_id = ? AND conversation_id = ? AND state <> 'ended'",
        )
        .bind(state)
        .bind(reason)
        .bind(now_ms())
        .bind(self.realm())
        .bind(peer_id)
        .bind(conversation_id)
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    /// The conversations of `peer_id` on the current relay, newest first; only those not
    /// ended unless `ended`.
    pub async fn conversations_of(
        &self,
        peer_id: &str,
        ended: bool,
    ) -> Result<Vec<ConversationRow>> {
        sqlx::query_as(
            "SELECT peer_id, conversation_id, state, reason, participants, opener, joined_at_ms, \
             last_seq, updated_at_ms FROM conversations WHERE realm = ? AND peer_id = ? \
             AND (? OR state <> 'ended') ORDER BY joined_at_ms DESC, conversation_id",
        )
        .bind(self.realm())
        .bind(peer_id)
        .bind(ended)
        .fetch_all(&self.pool)
        .await
    }

    /// The messages of a conversation `peer_id` received (their stored bodies, in inbox order)
    /// and when.
    pub async fn conversation_received(
        &self,
        peer_id: &str,
        conversation_id: &str,
    ) -> Result<Vec<(String, i64)>> {
        sqlx::query_as(
            "SELECT body, received_at_ms FROM inbox WHERE realm = ? AND peer_id = ? \
             AND json_extract(body, '$.conversation.id') = ? ORDER BY seq",
        )
        .bind(self.realm())
        .bind(peer_id)
        .bind(conversation_id)
        .fetch_all(&self.pool)
        .await
    }

    /// Records the message that opened a conversation `peer_id` opened.
    pub async fn conversation_opening(
        &self,
        peer_id: &str,
        conversation_id: &str,
        message_id: &str,
    ) -> Result<()> {
        sqlx::query(
            "UPDATE conversations SET opening_message_id = ? \
             WHERE realm = ? AND peer_id = ? AND conversation_id = ?",
        )
        .bind(message_id)
        .bind(self.realm())
        .bind(peer_id)
        .bind(conversation_id)
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    /// What `peer_id` sent in a conversation (its opening, turns and end): whether it is the
    /// opening, text, when, state and error.
    pub async fn conversation_sent(
        &self,
        peer_id: &str,
        conversation_id: &str,
    ) -> Result<Vec<(bool, String, i64, String, Option<String>)>> {
        sqlx::query_as(
            "SELECT COALESCE(s.message_id = c.opening_message_id, 0), s.text, s.created_at_ms, s.state, s.error \
             FROM sent s JOIN conversations c ON c.realm = s.realm AND c.peer_id = s.peer_id \
             AND c.conversation_id = ? \
             WHERE s.realm = ? AND s.peer_id = ? \
             AND (s.to_name = c.conversation_id OR s.message_id = c.opening_message_id) \
             ORDER BY s.created_at_ms, s.message_id",
        )
        .bind(conversation_id)
        .bind(self.realm())
        .bind(peer_id)
        .fetch_all(&self.pool)
        .await
    }

    /// Starts a new segment of a session's turn.
    pub async fn segment_started(
        &self,
        session_id: &str,
        by_person: bool,
        conversations: &[String],
    ) -> Result<()> {
        sqlx::query(
            "INSERT INTO turn_segments (session_id, started_at_ms, by_person, conversations) \
             VALUES (?, ?, ?, ?) ON CONFLICT (session_id) DO UPDATE SET \
             started_at_ms = excluded.started_at_ms, by_person = excluded.by_person, \
             conversations = excluded.conversations",
        )
        .bind(session_id)
        .bind(now_ms())
        .bind(by_person)
        .bind(serde_json::to_string(conversations).unwrap_or_else(|_| "[]".into()))
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    /// The current segment of a session's turn, if one started while this daemon watched.
    pub async fn segment(&self, session_id: &str) -> Result<Option<Segment>> {
        sqlx::query_as(
            "SELECT started_at_ms, by_person, conversations FROM turn_segments WHERE session_id = ?",
        )
            .bind(session_id)
            .fetch_optional(&self.pool)
            .await
    }

    /// The current segment was relayed: the next one starts at the next prompt or continuation.
    pub async fn segment_relayed(&self, session_id: &str) -> Result<()> {
        sqlx::query("DELETE FROM turn_segments WHERE session_id = ?")
            .bind(session_id)
            .execute(&self.pool)
            .await?;
        Ok(())
    }
}
