//! Reading messages back: a peer's inbox after a
//! seq, and a sender's view of one of its messages with each recipient's state.

use super::*;

#[derive(sqlx::FromRow)]
struct InboxRow {
    seq: i64,
    state: String,
    #[sqlx(flatten)]
    message: StoredMessage,
}

impl This {
    pub(super) async fn inbox_after_sql(
        &self,
        tenant_id: &str,
        peer_id: &str,
        after_seq: i64,
        pending_only: bool,
        limit: i64,
    ) -> Result<Vec<InboxEntry>> {
        let filter = if pending_only {
            "i.state = 'accepted' AND i.seq > p.delivered_seq"
        } else {
            "i.state NOT IN ('expired', 'failed')"
        };
        let sql = format!(
            "SELECT i.seq, CASE WHEN i.state = 'accepted' AND i.seq <= p.delivered_seq THEN 'delivered' ELSE i.state END AS state, {MSG_COLS} FROM inbox i JOIN messages m \
             ON m.tenant_id = i.tenant_id AND m.message_id = i.message_id JOIN peer_cursors p ON p.tenant_id = i.tenant_id AND p.peer_id = i.peer_id \
             WHERE i.tenant_id = $1 AND i.peer_id = $2 AND i.seq > $3 AND {filter} \
             ORDER BY i.seq LIMIT $4"
        );
        let rows: Vec<InboxRow> = sqlx::query_as(&sql)
            .bind(tenant_id)
            .bind(peer_id)
            .bind(after_seq)
            .bind(limit)
            .fetch_all(&self.pool)
            .await?;
        rows.into_iter()
            .map(|r| {
                Ok(InboxEntry {
                    seq: r.seq,
                    state: state(&r.state)?,
                    message: r.message,
                })
            })
            .collect()
    }

    pub(super) async fn message_status_sql(
        &self,
        tenant_id: &str,
        sender: &str,
        key: &MessageKey,
    ) -> Result<Option<MessageStatus>> {
        let (column, value) = match key {
            MessageKey::Id(id) => ("m.message_id", id),
            MessageKey::Correlation(cid) => ("m.correlation_id", cid),
        };
        let sql = format!(
            "SELECT {MSG_COLS} FROM messages m WHERE m.tenant_id = $1 AND m.from_peer_id = $2 \
             AND {column} = $3 AND m.kind <> 'reply'"
        );
        let message: Option<StoredMessage> = sqlx::query_as(&sql)
            .bind(tenant_id)
            .bind(sender)
            .bind(value)
            .fetch_optional(&self.pool)
            .await?;
        let Some(message) = message else {
            return Ok(None);
        };
        let rows: Vec<(String, String, Option<String>)> = sqlx::query_as(
            "SELECT i.peer_id, CASE WHEN i.state = 'accepted' AND i.seq <= p.delivered_seq THEN 'delivered' ELSE i.state END, i.reason FROM inbox i JOIN peer_cursors p ON p.tenant_id = i.tenant_id AND p.peer_id = i.peer_id \
             WHERE i.tenant_id = $1 AND i.message_id = $2 ORDER BY i.peer_id",
        )
        .bind(tenant_id)
        .bind(&message.message_id)
        .fetch_all(&self.pool)
        .await?;
        let recipients = rows
            .into_iter()
            .map(|(p, s, r)| Ok((p, state(&s)?, r)))
            .collect::<Result<_>>()?;
        // How it was closed: the reply that closed it (its sender), or the timeout.
        // (closed_by, the closing reply's sender id, name and circle)
        let closing: Option<FourTexts> = sqlx::query_as(
            "SELECT m.closed_by, r.from_peer_id, r.from_name, r.from_circle FROM messages m \
             LEFT JOIN messages r ON r.tenant_id = m.tenant_id AND r.message_id = m.closed_by AND r.kind = 'reply' \
             WHERE m.tenant_id = $1 AND m.message_id = $2",
        )
        .bind(tenant_id)
        .bind(&message.message_id)
        .fetch_optional(&self.pool)
        .await?;
        let (closed_by, by_peer, by_name, by_circle) = closing.unwrap_or_default();
        let answered_by = match (by_peer, by_name, by_circle) {
            (Some(peer_id), Some(name), Some(circle)) => Some(PeerRef {
                peer_id,
                name,
                circle,
            }),
            _ => None,
        };
        let timed_out = closed_by.as_deref() == Some(CLOSED_BY_TIMEOUT);
        Ok(Some(MessageStatus {
            message,
            recipients,
            answered_by,
            timed_out,
        }))
    }
}
