//! The accept half of the write path (which brings
//! the imports and row types into scope): inbox slots under the cap, messages and their entries,
//! correlation ids, and the set-based batch of accepts.

use super::*;

impl This {
    /// Hands out the next inbox slot of `peer_id` unless its inbox holds `cap` pending
    /// entries. `Ok(None)`: full or unknown (see [`Self::peer_exists`]).
    pub(super) async fn allocate_slot(
        conn: &mut Conn,
        tenant_id: &str,
        peer_id: &str,
        cap: i64,
    ) -> Result<Option<i64>> {
        Self::allocate_slots(conn, tenant_id, peer_id, 1, cap).await
    }

    /// The content hash of a stored message, if the id is taken in this tenant.
    pub(super) async fn stored_hash(
        conn: &mut Conn,
        tenant_id: &str,
        message_id: &str,
    ) -> Result<Option<String>> {
        Ok(sqlx::query_scalar(
            "SELECT content_hash FROM messages WHERE tenant_id = $1 AND message_id = $2",
        )
        .bind(tenant_id)
        .bind(message_id)
        .fetch_optional(&mut *conn)
        .await?)
    }

    /// Recipients of a stored message (its inbox entries), for answering a retry.
    pub(super) async fn entry_peers(
        conn: &mut Conn,
        tenant_id: &str,
        message_id: &str,
    ) -> Result<Vec<String>> {
        Ok(sqlx::query_scalar(
            "SELECT peer_id FROM inbox WHERE tenant_id = $1 AND message_id = $2 ORDER BY peer_id",
        )
        .bind(tenant_id)
        .bind(message_id)
        .fetch_all(&mut *conn)
        .await?)
    }

    /// Broadcast recipients whose inbox was full get a failed entry, so the sender's
    /// status shows the refusal and not only the one-time delivery frame.
    pub(super) async fn record_refusals(
        conn: &mut Conn,
        m: &NewMessage,
        peers: &[String],
    ) -> Result<()> {
        for peer_id in peers {
            if let Some(seq) = Self::allocate_unbounded(conn, &m.tenant_id, peer_id).await? {
                let slot = Enqueued {
                    peer_id: peer_id.clone(),
                    seq,
                };
                Self::insert_entry_as(
                    conn,
                    m,
                    &slot,
                    DeliveryState::Failed,
                    Some(INBOX_FULL_REASON),
                )
                .await?;
            }
        }
        Ok(())
    }

    /// A slot outside the cap, for recording a refusal in the inbox history.
    pub(super) async fn allocate_unbounded(
        conn: &mut Conn,
        tenant_id: &str,
        peer_id: &str,
    ) -> Result<Option<i64>> {
        Ok(sqlx::query_scalar(
            "UPDATE peers SET last_seq = last_seq + 1 WHERE tenant_id = $1 AND peer_id = $2 RETURNING last_seq",
        )
        .bind(tenant_id)
        .bind(peer_id)
        .fetch_optional(&mut *conn)
        .await?)
    }

    pub(super) async fn peer_exists(
        conn: &mut Conn,
        tenant_id: &str,
        peer_id: &str,
    ) -> Result<bool> {
        // Selects a TEXT column: a literal `1` is INT4 in Postgres but INTEGER in SQLite.
        let found: Option<String> =
            sqlx::query_scalar("SELECT peer_id FROM peers WHERE tenant_id = $1 AND peer_id = $2")
                .bind(tenant_id)
                .bind(peer_id)
                .fetch_optional(&mut *conn)
                .await?;
        Ok(found.is_some())
    }

    /// Inserts the message row; false on a unique collision (correlation id or a
    /// concurrent insert of the same id).
    pub(super) async fn insert_message(
        conn: &mut Conn,
        m: &NewMessage,
        cid: Option<&str>,
        conversation: Option<&str>,
    ) -> Result<bool> {
        let inserted = sqlx::query(
            "INSERT INTO messages (tenant_id, message_id, kind, from_peer_id, from_name, \
             from_circle, body, correlation_id, reply_to, question, answer, content_hash, \
             created_at_ms, expires_at_ms, traceparent, deadline_ms, from_session_id, to_session_id, \
             conversation_id, conversation) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, \
             $19, $20) ON CONFLICT DO NOTHING",
        )
        .bind(&m.tenant_id)
        .bind(&m.message_id)
        .bind(m.kind.as_str())
        .bind(&m.from_peer_id)
        .bind(&m.from_name)
        .bind(&m.from_circle)
        .bind(&m.body)
        .bind(cid)
        .bind(&m.reply_to)
        .bind(&m.question)
        .bind(&m.answer)
        .bind(&m.content_hash)
        .bind(m.created_at_ms)
        .bind(m.expires_at_ms)
        .bind(&m.traceparent)
        .bind(m.deadline_ms)
        .bind(&m.from_session_id)
        .bind(&m.to_session_id)
        .bind(m.conversation.as_ref().map(ConversationWrite::id))
        .bind(conversation)
        .execute(&mut *conn)
        .await?
        .rows_affected();
        Ok(inserted == 1)
    }

    pub(super) async fn insert_entry(
        conn: &mut Conn,
        m: &NewMessage,
        slot: &Enqueued,
    ) -> Result<()> {
        Self::insert_entry_as(conn, m, slot, DeliveryState::Accepted, None).await
    }

    pub(super) async fn insert_entry_as(
        conn: &mut Conn,
        m: &NewMessage,
        slot: &Enqueued,
        state: DeliveryState,
        reason: Option<&str>,
    ) -> Result<()> {
        sqlx::query(
            "INSERT INTO inbox (tenant_id, peer_id, seq, message_id, state, reason, \
             updated_at_ms, expires_at_ms) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)",
        )
        .bind(&m.tenant_id)
        .bind(&slot.peer_id)
        .bind(slot.seq)
        .bind(&m.message_id)
        .bind(state.as_str())
        .bind(reason)
        .bind(m.created_at_ms)
        .bind(m.expires_at_ms)
        .execute(&mut *conn)
        .await?;
        Ok(())
    }

    /// Writes the message row, re-minting an originating correlation id on a collision.
    /// `conversation`: its `Message.conversation`, JSON, for a conversation's message.
    pub(super) async fn insert_with_cid(
        conn: &mut Conn,
        m: &NewMessage,
        conversation: Option<&str>,
    ) -> Result<Option<String>> {
        let mut cid = m.correlation_id.clone();
        for _ in 0..4 {
            if Self::insert_message(conn, m, cid.as_deref(), conversation).await? {
                return Ok(cid);
            }
            cid = match (m.kind, &cid) {
                (MessageKind::Ask, _) => Some(CorrelationId::ask_from_random(rand::random()).0),
                (MessageKind::Notify | MessageKind::Broadcast, _) => {
                    Some(CorrelationId::notif_from_random(rand::random()).0)
                }
                _ => break,
            };
        }
        Err(StoreError::Conflict(format!(
            "message {} collided with a concurrent insert",
            m.message_id
        )))
    }

    /// Applies a run of simple writes: receipts first (they free inbox room), then accepts.
    pub(super) async fn flush_run(
        conn: &mut Conn,
        ops: &[WriteOp],
        run: &[usize],
        outcomes: &mut [Option<WriteOutcome>],
    ) -> Result<()> {
        let receipts: Vec<(usize, &ReceiptOp)> = run
            .iter()
            .filter_map(|&i| match &ops[i] {
                WriteOp::Receipt(r) => Some((i, r)),
                _ => None,
            })
            .collect();
        let accepts: Vec<(usize, &NewMessage)> = run
            .iter()
            .filter_map(|&i| match &ops[i] {
                WriteOp::Accept(m) => Some((i, m)),
                _ => None,
            })
            .collect();
        // Every peer row this run will update, locked first and in one order (per
        // dialect): two pods' writers touching the same rows then wait for each other
        // instead of deadlocking. Receipts update their peers' cursor rows, accepts their
        // recipients' slot rows (`peer_cursors`, `peers`; cursors first, then slots), so
        // the pod serving a peer's receipts and a pod accepting messages for it lock
        // different rows.
        let mut cursors: BTreeSet<(&str, &str)> = BTreeSet::new();
        for (_, r) in &receipts {
            cursors.insert((r.tenant_id.as_str(), r.peer_id.as_str()));
        }
        let mut slots: BTreeSet<(&str, &str)> = BTreeSet::new();
        for (_, m) in &accepts {
            for to in &m.recipients {
                slots.insert((m.tenant_id.as_str(), to.as_str()));
            }
        }
        Self::lock_peers(conn, PeerRows::Cursors, &cursors).await?;
        Self::lock_peers(conn, PeerRows::Slots, &slots).await?;
        if !receipts.is_empty() {
            Self::bulk_receipts(conn, &receipts, outcomes).await?;
        }
        if !accepts.is_empty() {
            Self::bulk_accepts(conn, &accepts, outcomes).await?;
        }
        Ok(())
    }

    /// Grants `k` consecutive slots to a peer if its inbox has room for all of them.
    pub(in super::super) async fn allocate_slots(
        conn: &mut Conn,
        tenant_id: &str,
        peer_id: &str,
        k: i64,
        cap: i64,
    ) -> Result<Option<i64>> {
        Ok(sqlx::query_scalar(
            "UPDATE peers SET last_seq = last_seq + $1, admitted = admitted + $1 \
             WHERE tenant_id = $2 AND peer_id = $3 AND admitted + $1 - (SELECT c.released FROM peer_cursors c \
             WHERE c.tenant_id = $2 AND c.peer_id = $3) <= $4 RETURNING last_seq",
        )
        .bind(k)
        .bind(tenant_id)
        .bind(peer_id)
        .bind(cap)
        .fetch_optional(&mut *conn)
        .await?)
    }

    pub(super) async fn bulk_accepts(
        conn: &mut Conn,
        ms: &[(usize, &NewMessage)],
        outcomes: &mut [Option<WriteOutcome>],
    ) -> Result<()> {
        // 1. Ids already stored (retries, or reuse with other content).
        let mut existing: HashMap<(String, String), (String, Option<String>)> = HashMap::new();
        for chunk in ms.chunks(CHUNK) {
            // Per dialect, like `receipt_entries`.
            for (t, id, hash, cid) in Self::stored_messages(conn, chunk).await? {
                existing.insert((t, id), (hash, cid));
            }
        }
        // 2. Classify: stored before, repeated within this run, or fresh.
        let mut first: HashMap<(&str, &str), usize> = HashMap::new();
        let mut repeats: Vec<(usize, usize)> = Vec::new();
        let mut fresh: Vec<usize> = Vec::new();
        for (pos, (i, m)) in ms.iter().enumerate() {
            let stored = if existing.is_empty() {
                None
            } else {
                existing.get(&(m.tenant_id.clone(), m.message_id.clone()))
            };
            if let Some((hash, cid)) = stored {
                let outcome = if *hash == m.content_hash {
                    let recipients = Self::entry_peers(conn, &m.tenant_id, &m.message_id).await?;
                    AcceptOutcome::Duplicate {
                        recipients,
                        correlation_id: cid.clone(),
                        conversation: None,
                    }
                } else {
                    AcceptOutcome::IdReused
                };
                outcomes[*i] = Some(WriteOutcome::Accept(outcome));
            } else if let Some(&earlier) = first.get(&(m.tenant_id.as_str(), m.message_id.as_str()))
            {
                repeats.push((pos, earlier));
            } else {
                first.insert((m.tenant_id.as_str(), m.message_id.as_str()), pos);
                fresh.push(pos);
            }
        }
        // 3. Inbox slots: per recipient, in op order. Peers are locked in key order within this
        // run only; other writes of the batch may lock in another order (see apply).
        let mut wanted: BTreeMap<(&str, &str), Vec<usize>> = BTreeMap::new();
        for &pos in &fresh {
            let m = ms[pos].1;
            let mut rs: Vec<&str> = m.recipients.iter().map(String::as_str).collect();
            rs.sort_unstable();
            rs.dedup();
            for r in rs {
                wanted
                    .entry((m.tenant_id.as_str(), r))
                    .or_default()
                    .push(pos);
            }
        }
        let mut slots: HashMap<usize, Vec<Enqueued>> = HashMap::new();
        let mut refused: HashMap<usize, Vec<String>> = HashMap::new();
        let mut failed: HashMap<usize, AcceptOutcome> = HashMap::new();
        // Every recipient's run of slots at once (per dialect: one round trip on Postgres);
        // a recipient without room for all of its run is served slot by slot below.
        let asks: Vec<(&str, &str, i64, i64)> = wanted
            .iter()
            .map(|((t, p), positions)| {
                (*t, *p, positions.len() as i64, ms[positions[0]].1.inbox_cap)
            })
            .collect();
        let lasts = Self::take_slots(conn, &asks).await?;
        for (((tenant_id, peer_id), positions), last) in wanted.iter().zip(lasts) {
            let k = positions.len() as i64;
            let cap = ms[positions[0]].1.inbox_cap;
            let granted: Vec<i64> = match last {
                Some(last) => (last - k + 1..=last).collect(),
                None => {
                    let mut some = Vec::new();
                    while (some.len() as i64) < k {
                        match Self::allocate_slot(conn, tenant_id, peer_id, cap).await? {
                            Some(seq) => some.push(seq),
                            None => break,
                        }
                    }
                    some
                }
            };
            let unknown =
                granted.is_empty() && !Self::peer_exists(conn, tenant_id, peer_id).await?;
            for (n, &pos) in positions.iter().enumerate() {
                let single = ms[pos].1.kind != MessageKind::Broadcast;
                let peer_id = (*peer_id).to_owned();
                match granted.get(n) {
                    Some(&seq) => slots
                        .entry(pos)
                        .or_default()
                        .push(Enqueued { peer_id, seq }),
                    None if unknown && single => {
                        failed.insert(pos, AcceptOutcome::UnknownRecipient { peer_id });
                    }
                    None if unknown => {}
                    None if single => {
                        failed.insert(pos, AcceptOutcome::InboxFull { peer_id });
                    }
                    None => refused.entry(pos).or_default().push(peer_id),
                }
            }
        }
        // 4. Message rows, then inbox entries.
        let insert: Vec<usize> = fresh
            .iter()
            .copied()
            .filter(|p| !failed.contains_key(p))
            .collect();
        let mut inserted: HashSet<(String, String)> = HashSet::new();
        let mut all_inserted = true;
        for chunk in insert.chunks(CHUNK) {
            let rows: Vec<&NewMessage> = chunk.iter().map(|&pos| ms[pos].1).collect();
            // Per dialect: returns the (tenant, id) of the rows inserted.
            let done = Self::insert_messages(conn, &rows).await?;
            // Ids are distinct here (repeats were set aside), so a full count means
            // every row went in; only a short one needs looking at row by row.
            all_inserted &= done.len() == rows.len();
            inserted.extend(done);
        }
        let mut cids: HashMap<usize, Option<String>> = HashMap::new();
        for &pos in &insert {
            let m = ms[pos].1;
            let cid = if all_inserted
                || inserted.contains(&(m.tenant_id.clone(), m.message_id.clone()))
            {
                m.correlation_id.clone()
            } else {
                // A correlation-id collision: re-mint and insert this one alone.
                Self::insert_with_cid(conn, m, None).await?
            };
            cids.insert(pos, cid);
        }
        let entries: Vec<(usize, &Enqueued)> = insert
            .iter()
            .flat_map(|&pos| slots.get(&pos).into_iter().flatten().map(move |e| (pos, e)))
            .collect();
        for chunk in entries.chunks(CHUNK) {
            let rows: Vec<(&NewMessage, &Enqueued)> =
                chunk.iter().map(|&(pos, e)| (ms[pos].1, e)).collect();
            // Per dialect: new entries, all `accepted`.
            Self::insert_entries(conn, &rows).await?;
        }
        for (&pos, peers) in &refused {
            Self::record_refusals(conn, ms[pos].1, peers).await?;
        }
        // 5. Outcomes, in op order; repeats mirror their first occurrence.
        for &pos in &fresh {
            let outcome = match failed.remove(&pos) {
                Some(f) => f,
                None => AcceptOutcome::Accepted {
                    enqueued: slots.remove(&pos).unwrap_or_default(),
                    refused: refused.remove(&pos).unwrap_or_default(),
                    correlation_id: cids.remove(&pos).flatten(),
                    closed_prior: None,
                    conversation: None,
                },
            };
            outcomes[ms[pos].0] = Some(WriteOutcome::Accept(outcome));
        }
        for (pos, earlier) in repeats {
            let (i, m) = ms[pos];
            let first_m = ms[earlier].1;
            let outcome = match &outcomes[ms[earlier].0] {
                _ if m.content_hash != first_m.content_hash => AcceptOutcome::IdReused,
                Some(WriteOutcome::Accept(AcceptOutcome::Accepted {
                    enqueued,
                    correlation_id,
                    ..
                })) => AcceptOutcome::Duplicate {
                    recipients: enqueued.iter().map(|e| e.peer_id.clone()).collect(),
                    correlation_id: correlation_id.clone(),
                    conversation: None,
                },
                Some(WriteOutcome::Accept(other)) => other.clone(),
                _ => AcceptOutcome::IdReused,
            };
            outcomes[i] = Some(WriteOutcome::Accept(outcome));
        }
        Ok(())
    }

    pub(super) async fn accept_one(conn: &mut Conn, m: &NewMessage) -> Result<AcceptOutcome> {
        let existing: Option<(String, Option<String>)> = sqlx::query_as(
            "SELECT content_hash, correlation_id FROM messages \
             WHERE tenant_id = $1 AND message_id = $2",
        )
        .bind(&m.tenant_id)
        .bind(&m.message_id)
        .fetch_optional(&mut *conn)
        .await?;
        if let Some((hash, correlation_id)) = existing {
            if hash != m.content_hash {
                return Ok(AcceptOutcome::IdReused);
            }
            let recipients = Self::entry_peers(conn, &m.tenant_id, &m.message_id).await?;
            let conversation = match &m.conversation {
                Some(_) => Self::stored_conversation(conn, &m.tenant_id, &m.message_id).await?,
                None => None,
            };
            return Ok(AcceptOutcome::Duplicate {
                recipients,
                correlation_id,
                conversation,
            });
        }
        // A conversation's message goes to the conversation's other participants.
        let conversation = match &m.conversation {
            Some(write) => match Self::prepare_conversation(conn, m, write).await? {
                super::conversations::Check::Go(prepared) => Some((write, prepared)),
                super::conversations::Check::Refuse(refused) => return Ok(refused),
                super::conversations::Check::Pause(prepared) => {
                    return Self::pause_conversation(conn, m, write, prepared).await;
                }
            },
            None => None,
        };

        let prior = match &m.reply_to {
            Some(cid) => match Self::ask_row(conn, &m.tenant_id, cid).await? {
                Some(ask)
                    if ask.from_peer_id == m.from_peer_id || ask.recipient == m.from_peer_id =>
                {
                    Some(ask)
                }
                _ => return Ok(AcceptOutcome::BadReplyTo),
            },
            None => None,
        };

        // One recipient refuses the whole message; a broadcast or a conversation skips those it
        // cannot reach (a full inbox gets a failed entry the sender can see).
        let single = m.kind != MessageKind::Broadcast && conversation.is_none();
        let mut recipients = match &conversation {
            Some((_, prepared)) => prepared.recipients.clone(),
            None => m.recipients.clone(),
        };
        recipients.sort();
        recipients.dedup();
        let mut enqueued = Vec::with_capacity(recipients.len());
        let mut refused = Vec::new();
        for peer_id in recipients {
            match Self::allocate_slot(conn, &m.tenant_id, &peer_id, m.inbox_cap).await? {
                Some(seq) => enqueued.push(Enqueued { peer_id, seq }),
                None if !Self::peer_exists(conn, &m.tenant_id, &peer_id).await? => {
                    if single {
                        return Ok(AcceptOutcome::UnknownRecipient { peer_id });
                    }
                }
                None if single => return Ok(AcceptOutcome::InboxFull { peer_id }),
                None => refused.push(peer_id),
            }
        }

        let closed_prior = match prior {
            // A question to `@approvers` closes only with an approver's answer (or its
            // timeout): the asker cannot close it by chaining.
            Some(ask)
                if ask.closed_at_ms.is_none()
                    && ask.recipient != CONTROL_PEER
                    && ask.deadline_ms.is_some_and(|d| m.created_at_ms >= d) =>
            {
                // Past its deadline: its timeout closes it, not the chain.
                let cid = m.reply_to.clone().unwrap_or_default();
                Self::close_by_timeout(conn, &m.tenant_id, &cid, &ask, m.created_at_ms).await?
            }
            Some(ask) if ask.closed_at_ms.is_none() && ask.recipient != CONTROL_PEER => {
                let close = (
                    m.message_id.as_str(),
                    DeliveryState::Acked,
                    None,
                    None,
                    None,
                );
                Self::close_row(conn, &m.tenant_id, &ask, close, m.created_at_ms)
                    .await?
                    .then(|| ClosedAsk {
                        message_id: ask.message_id.clone(),
                        correlation_id: m.reply_to.clone().unwrap_or_default(),
                        asker: ask.from_peer_id.clone(),
                        asker_name: ask.from_name.clone(),
                        asker_circle: ask.from_circle.clone(),
                        asker_session_id: ask.from_session_id.clone(),
                        recipient: ask.recipient.clone(),
                        state: DeliveryState::Acked,
                        reason: None,
                    })
            }
            _ => None,
        };

        if let Some((write, prepared)) = &conversation {
            Self::record_conversation(conn, m, write, prepared).await?;
        }
        let conversation = conversation.map(|(_, prepared)| prepared.conversation);
        let correlation_id = Self::insert_with_cid(conn, m, conversation.as_deref()).await?;
        for slot in &enqueued {
            Self::insert_entry(conn, m, slot).await?;
        }
        Self::record_refusals(conn, m, &refused).await?;
        Ok(AcceptOutcome::Accepted {
            enqueued,
            refused,
            correlation_id,
            closed_prior: closed_prior.map(Box::new),
            conversation,
        })
    }
}
