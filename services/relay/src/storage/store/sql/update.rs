//! The update half of the write path: entry state
//! moves (receipts, ack/answer closing an ask, expiry) and the set-based batch of receipts.

use super::*;

impl This {
    /// Moves an inbox entry whose row says `row_from` to `to` (compare-and-set on the row)
    /// and, if it still `counted` as pending (effectively `accepted`), decrements the
    /// pending counter. False if the row was no longer in `row_from`.
    #[allow(clippy::too_many_arguments)] // one row's full key and both states; a struct would only rename them
    pub(super) async fn move_entry(
        conn: &mut Conn,
        tenant_id: &str,
        peer_id: &str,
        message_id: &str,
        row_from: &str,
        counted: bool,
        to: DeliveryState,
        reason: Option<&str>,
        now_ms: i64,
    ) -> Result<bool> {
        let moved = sqlx::query(
            "UPDATE inbox SET state = $1, reason = $2, updated_at_ms = $3 \
             WHERE tenant_id = $4 AND peer_id = $5 AND message_id = $6 AND state = $7",
        )
        .bind(to.as_str())
        .bind(reason)
        .bind(now_ms)
        .bind(tenant_id)
        .bind(peer_id)
        .bind(message_id)
        .bind(row_from)
        .execute(&mut *conn)
        .await?
        .rows_affected()
            == 1;
        if moved && counted {
            sqlx::query(
                "UPDATE peer_cursors SET released = released + 1 WHERE tenant_id = $1 AND peer_id = $2",
            )
            .bind(tenant_id)
            .bind(peer_id)
            .execute(&mut *conn)
            .await?;
        }
        Ok(moved)
    }

    pub(super) async fn ask_row(
        conn: &mut Conn,
        tenant_id: &str,
        cid: &str,
    ) -> Result<Option<AskRow>> {
        // Locked on Postgres so two pods closing the same ask serialise here instead of
        // both passing the open check.
        let sql = format!(
            "SELECT m.message_id, m.from_peer_id, m.from_name, m.from_circle, m.from_session_id, m.closed_at_ms, m.closed_by, m.question, m.deadline_ms, \
             i.peer_id AS recipient, i.state AS row_state, CASE WHEN i.state = 'accepted' AND i.seq <= p.delivered_seq THEN 'delivered' ELSE i.state END AS state \
             FROM messages m JOIN inbox i ON i.tenant_id = m.tenant_id AND i.message_id = m.message_id \
             JOIN peer_cursors p ON p.tenant_id = i.tenant_id AND p.peer_id = i.peer_id \
             WHERE m.tenant_id = $1 AND m.correlation_id = $2 AND m.kind = 'ask'{LOCK_ASK}"
        );
        Ok(sqlx::query_as::<_, AskRow>(&sql)
            .bind(tenant_id)
            .bind(cid)
            .fetch_optional(&mut *conn)
            .await?)
    }

    /// Closes an open ask row (messages + the recipient's entry, with `reason`). False if
    /// another frame closed it first. `close`: (closing frame id, the entry's new state,
    /// answer JSON, reply text, reason).
    pub(super) async fn close_row(
        conn: &mut Conn,
        tenant_id: &str,
        ask: &AskRow,
        close: (
            &str,
            DeliveryState,
            Option<&str>,
            Option<&str>,
            Option<&str>,
        ),
        now_ms: i64,
    ) -> Result<bool> {
        let (frame_id, to, answer, reply_text, reason) = close;
        let closed = sqlx::query(
            "UPDATE messages SET closed_at_ms = $1, closed_by = $2, answer = $3, \
             reply_text = $4 WHERE tenant_id = $5 AND message_id = $6 AND closed_at_ms IS NULL",
        )
        .bind(now_ms)
        .bind(frame_id)
        .bind(answer)
        .bind(reply_text)
        .bind(tenant_id)
        .bind(&ask.message_id)
        .execute(&mut *conn)
        .await?
        .rows_affected()
            == 1;
        if closed {
            let from = state(&ask.state)?;
            if !from.is_terminal() {
                let counted = from == DeliveryState::Accepted;
                Self::move_entry(
                    conn,
                    tenant_id,
                    &ask.recipient,
                    &ask.message_id,
                    &ask.row_state,
                    counted,
                    to,
                    reason,
                    now_ms,
                )
                .await?;
            }
        }
        Ok(closed)
    }

    /// Grouped compare-and-set updates of inbox rows: for each (row state, new state),
    /// the listed entries (indices into `rows`) still in that row state move. Returns
    /// the indices of the entries that moved.
    pub(super) async fn update_rows(
        conn: &mut Conn,
        rows: &[EntryRow],
        groups: &BTreeMap<(&str, &'static str), Vec<usize>>,
        now_ms: i64,
    ) -> Result<Vec<usize>> {
        let index: HashMap<(&str, &str, &str), usize> = groups
            .values()
            .flatten()
            .map(|&i| {
                (
                    (
                        rows[i].tenant_id.as_str(),
                        rows[i].peer_id.as_str(),
                        rows[i].message_id.as_str(),
                    ),
                    i,
                )
            })
            .collect();
        let mut moved = Vec::new();
        for ((from, to), entries) in groups {
            for chunk in entries.chunks(CHUNK) {
                let mut qb = sqlx::QueryBuilder::<Db>::new("UPDATE inbox SET state = ");
                qb.push_bind(*to)
                    .push(", reason = NULL, updated_at_ms = ")
                    .push_bind(now_ms);
                qb.push(" WHERE state = ").push_bind(*from);
                qb.push(" AND (tenant_id, peer_id, message_id) IN (");
                qb.push_values(chunk, |mut b, &i| {
                    let r = &rows[i];
                    b.push_bind(r.tenant_id.as_str())
                        .push_bind(r.peer_id.as_str())
                        .push_bind(r.message_id.as_str());
                });
                qb.push(") RETURNING tenant_id, peer_id, message_id");
                let keys: Vec<Key> = qb.build_query_as().fetch_all(&mut *conn).await?;
                moved.extend(keys.iter().filter_map(|k| {
                    index
                        .get(&(k.0.as_str(), k.1.as_str(), k.2.as_str()))
                        .copied()
                }));
            }
        }
        Ok(moved)
    }

    pub(super) async fn bulk_receipts(
        conn: &mut Conn,
        rs: &[(usize, &ReceiptOp)],
        outcomes: &mut [Option<WriteOutcome>],
    ) -> Result<()> {
        // The entries the receipts name; everything below refers to them by index (no
        // key is cloned or hashed twice). A key receipted twice comes back twice: the
        // index keeps one copy, and the others never change state, so they are skipped.
        let mut rows: Vec<EntryRow> = Vec::with_capacity(rs.len());
        for chunk in rs.chunks(CHUNK) {
            // Per dialect (postgres.rs, sqlite.rs): the lookup must go key by key
            // through the unique (tenant, message, peer) index whatever the statistics say.
            rows.extend(Self::receipt_entries(conn, chunk).await?);
        }
        let mut index: HashMap<(&str, &str, &str), usize> = HashMap::with_capacity(rows.len());
        for (i, row) in rows.iter().enumerate() {
            index.insert(
                (
                    row.tenant_id.as_str(),
                    row.peer_id.as_str(),
                    row.message_id.as_str(),
                ),
                i,
            );
        }
        // Walk the receipts in order against the states as they evolve in this run.
        let original: Vec<DeliveryState> = rows
            .iter()
            .map(|row| state(&row.state))
            .collect::<Result<_>>()?;
        let mut current = original.clone();
        let mut planned: Vec<(usize, usize, DeliveryState, DeliveryState)> = Vec::new();
        for (i, r) in rs {
            match index.get(&(
                r.tenant_id.as_str(),
                r.peer_id.as_str(),
                r.message_id.as_str(),
            )) {
                None => outcomes[*i] = Some(WriteOutcome::Receipt(ReceiptOutcome::Unknown)),
                Some(&e) if receipt_allowed(current[e], r.state) => {
                    planned.push((*i, e, current[e], r.state));
                    current[e] = r.state;
                }
                Some(_) => outcomes[*i] = Some(WriteOutcome::Receipt(ReceiptOutcome::Unchanged)),
            }
        }
        let now_ms = rs.iter().map(|(_, r)| r.now_ms).max().unwrap_or_default();
        // Entries going from (effectively) accepted to delivered advance their peer's
        // delivered cursor when they are next in line: no row is rewritten. The rest
        // (injected, out-of-order delivered) are row updates, grouped by row state.
        let mut advance: BTreeMap<(&str, &str), Vec<usize>> = BTreeMap::new();
        let mut groups: BTreeMap<(&str, &'static str), Vec<usize>> = BTreeMap::new();
        for (e, row) in rows.iter().enumerate() {
            let (from, to) = (original[e], current[e]);
            if from == to {
                continue;
            }
            if from == DeliveryState::Accepted && to == DeliveryState::Delivered {
                advance
                    .entry((row.tenant_id.as_str(), row.peer_id.as_str()))
                    .or_default()
                    .push(e);
            } else {
                groups
                    .entry((row.row_state.as_str(), to.as_str()))
                    .or_default()
                    .push(e);
            }
        }
        // Row updates first, so entries they move past `accepted` do not stop a cursor.
        let mut moved_rows = Self::update_rows(conn, &rows, &groups, now_ms).await?;
        let mut leftovers: BTreeMap<(&str, &'static str), Vec<usize>> = BTreeMap::new();
        let mut moved = vec![false; rows.len()];
        // Per peer: the entries in its range (cursor, last receipted], read for every peer
        // at once, then every cursor moved at once (per dialect: one round trip each on
        // Postgres).
        let mut advance: Vec<((&str, &str), Vec<usize>)> = advance.into_iter().collect();
        for (_, es) in &mut advance {
            es.sort_by_key(|&e| rows[e].seq);
        }
        let spans: Vec<(&str, &str, i64, i64)> = advance
            .iter()
            .map(|((t, p), es)| (*t, *p, rows[es[0]].cursor, rows[es[es.len() - 1]].seq))
            .collect();
        let betweens = Self::inbox_ranges(conn, &spans).await?;
        let mut moves: Vec<(&str, &str, i64, i64, i64)> = Vec::new();
        let mut reaches: Vec<Option<(usize, i64)>> = Vec::with_capacity(advance.len());
        for ((_, es), (&(t, p, cursor, _), between)) in
            advance.iter().zip(spans.iter().zip(&betweens))
        {
            let wanted: HashSet<i64> = es.iter().map(|&e| rows[e].seq).collect();
            // Walk forward: entries already past `accepted` are skipped over; an
            // accepted entry nobody receipted stops the cursor.
            let (mut reach, mut count) = (cursor, 0i64);
            for (seq, row_state) in between {
                if row_state != "accepted" {
                    reach = *seq;
                } else if wanted.contains(seq) {
                    reach = *seq;
                    count += 1;
                } else {
                    break;
                }
            }
            if reach > cursor {
                reaches.push(Some((moves.len(), reach)));
                moves.push((t, p, cursor, reach, count));
            } else {
                reaches.push(None);
            }
        }
        let advanced = Self::advance_cursors(conn, &moves).await?;
        for ((_, es), reach) in advance.into_iter().zip(reaches) {
            let reach = reach.filter(|(m, _)| advanced[*m]).map(|(_, r)| r);
            for e in es {
                if reach.is_some_and(|r| rows[e].seq <= r) {
                    moved[e] = true;
                } else {
                    leftovers
                        .entry(("accepted", DeliveryState::Delivered.as_str()))
                        .or_default()
                        .push(e);
                }
            }
        }
        // Receipted entries the cursor could not cover (out of order) move row by row.
        moved_rows.extend(Self::update_rows(conn, &rows, &leftovers, now_ms).await?);
        // Row updates of entries that were effectively accepted free room in their peer's
        // inbox (cursor advances already counted theirs).
        let mut freed: BTreeMap<(&str, &str), i64> = BTreeMap::new();
        for &e in &moved_rows {
            moved[e] = true;
            if original[e] == DeliveryState::Accepted {
                *freed
                    .entry((rows[e].tenant_id.as_str(), rows[e].peer_id.as_str()))
                    .or_default() += 1;
            }
        }
        for ((tenant_id, peer_id), n) in freed {
            sqlx::query("UPDATE peer_cursors SET released = released + $1 WHERE tenant_id = $2 AND peer_id = $3")
                .bind(n)
                .bind(tenant_id)
                .bind(peer_id)
                .execute(&mut *conn)
                .await?;
        }
        for (i, e, from, to) in planned {
            outcomes[i] = Some(WriteOutcome::Receipt(if moved[e] {
                ReceiptOutcome::Changed {
                    change: rows[e].change(to, None),
                    arrived: crate::storage::store::arrival(from, to),
                }
            } else {
                // Another writer moved it first: nothing changed here.
                ReceiptOutcome::Unchanged
            }));
        }
        Ok(())
    }

    pub(super) async fn close_one(conn: &mut Conn, c: &CloseAsk) -> Result<CloseOutcome> {
        let Some(ask) = Self::ask_row(conn, &c.tenant_id, &c.correlation_id).await? else {
            return Ok(CloseOutcome::Unknown);
        };
        let to_approvers = ask.recipient == CONTROL_PEER;
        if to_approvers {
            if let Err(why) = may_approve(
                &c.by_role,
                c.by_approver_key,
                &c.by_peer_id,
                &ask.from_peer_id,
            ) {
                return Ok(CloseOutcome::NotEligible(why));
            }
        } else if ask.recipient != c.by_peer_id {
            return Ok(CloseOutcome::NotRecipient);
        }
        let closed = ClosedAsk {
            message_id: ask.message_id.clone(),
            correlation_id: c.correlation_id.clone(),
            asker: ask.from_peer_id.clone(),
            asker_name: ask.from_name.clone(),
            asker_circle: ask.from_circle.clone(),
            asker_session_id: ask.from_session_id.clone(),
            recipient: ask.recipient.clone(),
            state: c.state,
            reason: None,
        };
        if ask.closed_at_ms.is_some() {
            if ask.closed_by.as_deref() != Some(c.frame_id.as_str()) {
                let how = Self::closing_detail(conn, &c.tenant_id, &ask).await?;
                return Ok(CloseOutcome::AlreadyClosed(how));
            }
            // The same frame id again: a retry only if it carries the same reply.
            let stored = Self::stored_hash(conn, &c.tenant_id, &c.frame_id).await?;
            let same = match (&c.reply, stored) {
                (Some(reply), Some(hash)) => reply.content_hash == hash,
                (None, None) => true,
                _ => false,
            };
            return Ok(if same {
                CloseOutcome::Duplicate { closed }
            } else {
                CloseOutcome::IdReused
            });
        }
        if ask.deadline_ms.is_some_and(|d| c.now_ms >= d) {
            // Past its deadline: the timeout closes it now, whatever this frame says.
            return Ok(
                match Self::close_by_timeout(conn, &c.tenant_id, &c.correlation_id, &ask, c.now_ms)
                    .await?
                {
                    Some(closed) => CloseOutcome::TimedOut { closed },
                    None => CloseOutcome::AlreadyClosed(format!(
                        "{} is already closed",
                        c.correlation_id
                    )),
                },
            );
        }
        if to_approvers && c.answer.is_none() {
            return Ok(CloseOutcome::InvalidAnswer(format!(
                "a question to {CONTROL_PEER} is closed with `answer` (an option), not `ack`"
            )));
        }
        if c.reply.is_some()
            && Self::stored_hash(conn, &c.tenant_id, &c.frame_id)
                .await?
                .is_some()
        {
            return Ok(CloseOutcome::IdReused);
        }
        let mut reply = c.reply.clone();
        if let Some(answer) = &c.answer {
            let question = match ask
                .question
                .as_deref()
                .map(serde_json::from_str::<repowire_protocol::Question>)
            {
                None => {
                    return Ok(CloseOutcome::InvalidAnswer(
                        "this ask has no structured question; close it with ack".into(),
                    ));
                }
                Some(Err(e)) => return Err(StoreError::Corrupt(format!("question JSON: {e}"))),
                Some(Ok(q)) => q,
            };
            match question.check_answer(answer) {
                Err(why) => return Ok(CloseOutcome::InvalidAnswer(why)),
                Ok(rendered) => {
                    if let Some(r) = reply.as_mut() {
                        r.body = rendered;
                    }
                }
            }
        }
        let slot = match &reply {
            Some(r) => {
                match Self::allocate_slot(conn, &c.tenant_id, &ask.from_peer_id, r.inbox_cap)
                    .await?
                {
                    Some(seq) => Some(Enqueued {
                        peer_id: ask.from_peer_id.clone(),
                        seq,
                    }),
                    None => return Ok(CloseOutcome::InboxFull),
                }
            }
            None => None,
        };
        let answer_json = c
            .answer
            .as_ref()
            .map(|a| serde_json::to_string(a).unwrap_or_default());
        let reply_text = reply.as_ref().map(|r| r.body.clone());
        let close = (
            c.frame_id.as_str(),
            c.state,
            answer_json.as_deref(),
            reply_text.as_deref(),
            None,
        );
        if !Self::close_row(conn, &c.tenant_id, &ask, close, c.now_ms).await? {
            return Ok(CloseOutcome::AlreadyClosed(format!(
                "{} is already closed",
                c.correlation_id
            )));
        }
        if let (Some(r), Some(slot)) = (&reply, &slot) {
            let mut r = r.clone();
            r.answer = answer_json.clone();
            r.to_session_id = ask.from_session_id.clone();
            Self::insert_with_cid(conn, &r, None).await?;
            Self::insert_entry(conn, &r, slot).await?;
        }
        Ok(CloseOutcome::Closed {
            closed,
            reply: slot,
            reply_text,
        })
    }

    pub(super) async fn receipt_one(conn: &mut Conn, r: &ReceiptOp) -> Result<ReceiptOutcome> {
        let row = sqlx::query_as::<_, EntryRow>(crate::storage::store::shared::ENTRY_BY_KEY)
            .bind(&r.tenant_id)
            .bind(&r.peer_id)
            .bind(&r.message_id)
            .fetch_optional(&mut *conn)
            .await?;
        let Some(row) = row else {
            return Ok(ReceiptOutcome::Unknown);
        };
        let from = state(&row.state)?;
        if !receipt_allowed(from, r.state) {
            return Ok(ReceiptOutcome::Unchanged);
        }
        let counted = from == DeliveryState::Accepted;
        let moved = Self::move_entry(
            conn,
            &r.tenant_id,
            &r.peer_id,
            &r.message_id,
            &row.row_state,
            counted,
            r.state,
            r.reason.as_deref(),
            r.now_ms,
        )
        .await?;
        if !moved {
            return Ok(ReceiptOutcome::Unchanged);
        }
        Ok(ReceiptOutcome::Changed {
            change: row.change(r.state, r.reason.clone()),
            arrived: crate::storage::store::arrival(from, r.state),
        })
    }

    pub(super) async fn expire_due(
        conn: &mut Conn,
        now_ms: i64,
        limit: i64,
    ) -> Result<Vec<StateChange>> {
        // Per dialect (postgres.rs, sqlite.rs): only the entries past each peer's cursor
        // can still be waiting, so only those are read.
        let rows = Self::due_entries(conn, now_ms, limit).await?;
        let mut changes = Vec::with_capacity(rows.len());
        for row in rows {
            let reason = "not delivered before the message TTL";
            if Self::move_entry(
                conn,
                &row.tenant_id,
                &row.peer_id,
                &row.message_id,
                "accepted",
                true,
                DeliveryState::Expired,
                Some(reason),
                now_ms,
            )
            .await?
            {
                changes.push(row.change(DeliveryState::Expired, Some(reason.into())));
            }
        }
        Ok(changes)
    }
}
