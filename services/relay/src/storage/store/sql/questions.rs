//! Structured questions in the write path and their listing: closing an ask whose question timed out (at an answer that came too
//! late, or by the periodic sweep of overdue questions), telling a late closer who closed it
//! first, and reading the questions sent to `@approvers`.

use super::*;

impl This {
    /// Closes an open ask whose question's deadline has passed: with the question's
    /// default (answered) or as expired, its entry moved with the reason. `None` if
    /// another frame closed it first, or when its entry had already ended (failed or
    /// expired undelivered, which its asker heard): then the thread closes quietly.
    pub(super) async fn close_by_timeout(
        conn: &mut Conn,
        tenant_id: &str,
        correlation_id: &str,
        ask: &AskRow,
        now_ms: i64,
    ) -> Result<Option<ClosedAsk>> {
        let timeout = timeout_close(ask.question.as_deref());
        let at = ask.deadline_ms.map_or(now_ms, |d| d.min(now_ms));
        let close = (
            CLOSED_BY_TIMEOUT,
            timeout.state,
            timeout.answer.as_deref(),
            timeout.reply_text.as_deref(),
            Some(timeout.reason.as_str()),
        );
        if !Self::close_row(conn, tenant_id, ask, close, at).await?
            || state(&ask.state)?.is_terminal()
        {
            return Ok(None);
        }
        Ok(Some(ClosedAsk {
            message_id: ask.message_id.clone(),
            correlation_id: correlation_id.to_owned(),
            asker: ask.from_peer_id.clone(),
            asker_name: ask.from_name.clone(),
            asker_circle: ask.from_circle.clone(),
            asker_session_id: ask.from_session_id.clone(),
            recipient: ask.recipient.clone(),
            state: timeout.state,
            reason: Some(timeout.reason),
        }))
    }

    /// How a closed ask was closed, for a closer that came too late: who answered what
    /// (option ids and the names the relay checked; never free text), or its timeout.
    pub(super) async fn closing_detail(
        conn: &mut Conn,
        tenant_id: &str,
        ask: &AskRow,
    ) -> Result<String> {
        // (closed_by, answer, the closing reply's sender id and name)
        let row: Option<FourTexts> = sqlx::query_as(
            "SELECT m.closed_by, m.answer, r.from_peer_id, r.from_name FROM messages m \
             LEFT JOIN messages r ON r.tenant_id = m.tenant_id AND r.message_id = m.closed_by AND r.kind = 'reply' \
             WHERE m.tenant_id = $1 AND m.message_id = $2",
        )
        .bind(tenant_id)
        .bind(&ask.message_id)
        .fetch_optional(&mut *conn)
        .await?;
        let (closed_by, answer, by_peer, by_name) = row.unwrap_or_default();
        let option = answer
            .as_deref()
            .and_then(|a| serde_json::from_str::<repowire_protocol::AnswerValue>(a).ok())
            .and_then(|a| a.option_id);
        let what = match &option {
            Some(o) => format!("option `{o}`"),
            None => "a reply".to_owned(),
        };
        Ok(match (closed_by.as_deref(), by_peer, by_name) {
            (Some(CLOSED_BY_TIMEOUT), _, _) => match option {
                Some(o) => {
                    format!("the question timed out unanswered and its default `{o}` was taken")
                }
                None => "the question timed out unanswered".to_owned(),
            },
            (_, Some(peer), Some(name)) if answer.is_some() => {
                format!("it was already answered by @{name} ({peer}): {what}")
            }
            (_, Some(peer), Some(name)) => {
                format!("it was already acked by @{name} ({peer}) with a reply")
            }
            _ => "it is already closed".to_owned(),
        })
    }

    /// Closes the open asks whose question's deadline is at or before `now_ms`, oldest
    /// deadline first, at most `limit`.
    pub(super) async fn close_overdue(
        conn: &mut Conn,
        now_ms: i64,
        limit: i64,
    ) -> Result<Vec<(String, ClosedAsk)>> {
        // Every tenant's due rows (the partial index holds only open questions with a
        // deadline); each is then closed under its own tenant. On Postgres every pod
        // sweeps: rows another transaction holds (another pod's sweep, an answer being
        // taken) are skipped, not waited for, and the rest are locked in one order.
        let lock = if BACKEND == "postgres" {
            " FOR UPDATE SKIP LOCKED"
        } else {
            ""
        };
        let sql = format!(
            "SELECT tenant_id, correlation_id FROM messages \
             WHERE deadline_ms IS NOT NULL AND closed_at_ms IS NULL AND deadline_ms <= $1 \
             AND correlation_id IS NOT NULL ORDER BY deadline_ms, tenant_id, message_id LIMIT $2{lock}"
        );
        let due: Vec<(String, String)> = sqlx::query_as(&sql)
            .bind(now_ms)
            .bind(limit)
            .fetch_all(&mut *conn)
            .await?;
        let mut closed = Vec::with_capacity(due.len());
        for (tenant_id, cid) in due {
            let Some(ask) = Self::ask_row(conn, &tenant_id, &cid).await? else {
                continue;
            };
            if ask.closed_at_ms.is_some() || ask.deadline_ms.is_none_or(|d| d > now_ms) {
                continue;
            }
            if let Some(c) = Self::close_by_timeout(conn, &tenant_id, &cid, &ask, now_ms).await? {
                closed.push((tenant_id, c));
            }
        }
        Ok(closed)
    }

    /// The questions in the inbox of `@approvers`: open ones oldest first, or closed ones
    /// newest first; with `asker`, only those it asked.
    pub(super) async fn questions_page(
        pool: &sqlx::Pool<Db>,
        tenant_id: &str,
        asker: Option<&str>,
        closed: bool,
        limit: i64,
    ) -> Result<Vec<QuestionRecord>> {
        let (open_or_closed, order) = if closed {
            (
                "m.closed_at_ms IS NOT NULL",
                "m.closed_at_ms DESC, i.seq DESC",
            )
        } else {
            (
                "m.closed_at_ms IS NULL AND i.state = 'accepted'",
                "i.seq ASC",
            )
        };
        let asker_filter = if asker.is_some() {
            "AND m.from_peer_id = $4"
        } else {
            ""
        };
        let sql = format!(
            "SELECT m.message_id, m.correlation_id, m.from_peer_id, m.from_name, m.from_circle, m.body, \
             m.question, m.created_at_ms, m.deadline_ms, i.state, i.reason, m.answer, m.reply_text, \
             m.closed_at_ms, r.from_peer_id AS answered_by, r.from_name AS answered_by_name, \
             r.from_circle AS answered_by_circle \
             FROM inbox i JOIN messages m ON m.tenant_id = i.tenant_id AND m.message_id = i.message_id \
             LEFT JOIN messages r ON r.tenant_id = m.tenant_id AND r.message_id = m.closed_by AND r.kind = 'reply' \
             WHERE i.tenant_id = $1 AND i.peer_id = $2 AND {open_or_closed} {asker_filter} \
             ORDER BY {order} LIMIT $3"
        );
        let mut query = sqlx::query_as::<_, QuestionRecord>(&sql)
            .bind(tenant_id)
            .bind(CONTROL_PEER)
            .bind(limit);
        if let Some(asker) = asker {
            query = query.bind(asker);
        }
        Ok(query.fetch_all(pool).await?)
    }
}
