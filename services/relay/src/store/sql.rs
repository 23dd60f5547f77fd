//! The SQL implementation of [`Store`](super::Store), written once and instantiated for
//! Postgres and SQLite by [`impl_store!`].
//!
//! Both dialects accept `$N` placeholders, `ON CONFLICT`, `RETURNING` and partial indexes, so
//! one body serves both; the macro makes each instance type-check against its own driver.
//! Inside [`Store::apply`](super::Store::apply) no statement is allowed to fail on expected
//! conditions (Postgres aborts a transaction on any error): duplicates and caps are detected
//! with reads, `ON CONFLICT DO NOTHING` and guarded updates instead.
//!
//! Write batches open with a backend-specific statement: SQLite needs `BEGIN IMMEDIATE`, or a
//! batch that reads before it writes fails with `SQLITE_BUSY_SNAPSHOT` whenever another
//! connection committed in between (no busy timeout can resolve that).
//!
//! Write order inside one op matters: the first write of an op is the guarded slot allocation,
//! so an op that is refused (full inbox) has written nothing.

pub(crate) const TENANT_COLS: &str = "id, name, plan, created_at_ms";
pub(crate) const KEY_COLS: &str =
    "id, tenant_id, hash, display, label, mode, created_at_ms, expires_at_ms, revoked_at_ms";
pub(crate) const PEER_COLS: &str = "tenant_id, peer_id, name, circle, backend, role, path, machine, \
     description, description_at_ms, created_at_ms, last_seen_ms, last_seq";
pub(crate) const MSG_COLS: &str = "m.message_id, m.kind, m.from_peer_id, m.from_name, \
     m.from_circle, m.body, m.correlation_id, m.reply_to, m.question, m.answer, m.created_at_ms, \
     m.expires_at_ms, m.reply_text, m.content_hash";

/// Reason recorded for a broadcast recipient whose inbox was full.
pub(crate) const INBOX_FULL_REASON: &str = "inbox_full: the recipient's inbox is full";

/// Parses a stored delivery state.
pub(crate) fn state(s: &str) -> super::Result<repowire_protocol::DeliveryState> {
    repowire_protocol::DeliveryState::parse(s)
        .ok_or_else(|| super::StoreError::Corrupt(format!("unknown inbox state `{s}`")))
}

/// Which transitions a receipt may make: forward only, never out of a terminal state.
pub(crate) fn receipt_allowed(
    from: repowire_protocol::DeliveryState,
    to: repowire_protocol::DeliveryState,
) -> bool {
    use repowire_protocol::DeliveryState::*;
    matches!(
        (from, to),
        (Accepted, Delivered) | (Accepted | Delivered, Injected | Failed)
    )
}

/// Which of their rows a write batch locks for a set of peers: a peer's delivered cursor and its
/// inbox slots are rows of different tables (`peer_cursors`, `peers`), so the pod serving a
/// peer's receipts and a pod accepting messages for it do not wait for each other.
#[derive(Debug, Clone, Copy)]
pub(crate) enum PeerRows {
    /// `peer_cursors`: what receipts update.
    Cursors,
    /// `peers` (`last_seq`, `admitted`): what accepts update.
    Slots,
}

/// Rows per multi-row statement: well under SQLite's bound-parameter limit at 14 columns.
pub(crate) const CHUNK: usize = 256;

/// Writes the batch path applies set-based (one statement for many rows); everything else is
/// applied op by op. Consecutive simple writes form a run; runs never cross a complex op, so
/// the batch keeps its order.
pub(crate) fn is_simple(op: &super::WriteOp) -> bool {
    use repowire_protocol::DeliveryState::{Delivered, Injected};
    match op {
        super::WriteOp::Accept(m) => m.reply_to.is_none(),
        super::WriteOp::Receipt(r) => matches!(r.state, Delivered | Injected),
        _ => false,
    }
}

/// One inbox entry by (tenant, peer, message), with its effective state and its peer's cursor
/// (an `EntryRow`).
pub(crate) const ENTRY_BY_KEY: &str = "SELECT i.tenant_id, i.peer_id, i.message_id, i.seq, \
     CASE WHEN i.state = 'accepted' AND i.seq <= p.delivered_seq THEN 'delivered' ELSE i.state END AS state, \
     i.state AS row_state, p.delivered_seq AS cursor, m.from_peer_id, m.correlation_id \
     FROM inbox i JOIN messages m ON m.tenant_id = i.tenant_id AND m.message_id = i.message_id \
     JOIN peer_cursors p ON p.tenant_id = i.tenant_id AND p.peer_id = i.peer_id \
     WHERE i.tenant_id = $1 AND i.peer_id = $2 AND i.message_id = $3";

macro_rules! impl_store {
    ($store:ident, $db:ty, $backend:literal, $begin_write:literal, $lock_ask:literal) => {
        use $crate::store::sql::{
            CHUNK, INBOX_FULL_REASON, KEY_COLS, MSG_COLS, PEER_COLS, PeerRows, TENANT_COLS, is_simple, receipt_allowed,
            state,
        };
        use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
        type Key = (String, String, String);
        use $crate::store::*;
        use repowire_protocol::{CorrelationId, DeliveryState, MessageKind};

        type Conn = <$db as sqlx::Database>::Connection;

        #[derive(sqlx::FromRow)]
        struct InboxRow {
            seq: i64,
            state: String,
            #[sqlx(flatten)]
            message: StoredMessage,
        }

        #[derive(sqlx::FromRow)]
        struct AskRow {
            message_id: String,
            from_peer_id: String,
            from_name: String,
            from_circle: String,
            closed_at_ms: Option<i64>,
            closed_by: Option<String>,
            question: Option<String>,
            recipient: String,
            /// Effective state (see the module docs); `row_state` is what the row says.
            state: String,
            row_state: String,
        }

        #[derive(sqlx::FromRow)]
        struct EntryRow {
            tenant_id: String,
            peer_id: String,
            message_id: String,
            seq: i64,
            /// Effective state; `row_state` is what the row says; `cursor` the peer's delivered_seq.
            state: String,
            row_state: String,
            cursor: i64,
            from_peer_id: String,
            correlation_id: Option<String>,
        }

        impl EntryRow {
            /// The change a sender hears about when this entry moves to `state`.
            fn change(&self, state: DeliveryState, reason: Option<String>) -> StateChange {
                StateChange {
                    tenant_id: self.tenant_id.clone(),
                    sender: self.from_peer_id.clone(),
                    message_id: self.message_id.clone(),
                    correlation_id: self.correlation_id.clone(),
                    recipient: self.peer_id.clone(),
                    state,
                    reason,
                }
            }
        }

        impl $store {
            /// Hands out the next inbox slot of `peer_id` unless its inbox holds `cap` pending
            /// entries. `Ok(None)`: full or unknown (see [`Self::peer_exists`]).
            async fn allocate_slot(
                conn: &mut Conn,
                tenant_id: &str,
                peer_id: &str,
                cap: i64,
            ) -> Result<Option<i64>> {
                Self::allocate_slots(conn, tenant_id, peer_id, 1, cap).await
            }

            /// The content hash of a stored message, if the id is taken in this tenant.
            async fn stored_hash(conn: &mut Conn, tenant_id: &str, message_id: &str) -> Result<Option<String>> {
                Ok(sqlx::query_scalar("SELECT content_hash FROM messages WHERE tenant_id = $1 AND message_id = $2")
                    .bind(tenant_id)
                    .bind(message_id)
                    .fetch_optional(&mut *conn)
                    .await?)
            }

            /// Recipients of a stored message (its inbox entries), for answering a retry.
            async fn entry_peers(conn: &mut Conn, tenant_id: &str, message_id: &str) -> Result<Vec<String>> {
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
            async fn record_refusals(conn: &mut Conn, m: &NewMessage, peers: &[String]) -> Result<()> {
                for peer_id in peers {
                    if let Some(seq) = Self::allocate_unbounded(conn, &m.tenant_id, peer_id).await? {
                        let slot = Enqueued { peer_id: peer_id.clone(), seq };
                        Self::insert_entry_as(conn, m, &slot, DeliveryState::Failed, Some(INBOX_FULL_REASON)).await?;
                    }
                }
                Ok(())
            }

            /// A slot outside the cap, for recording a refusal in the inbox history.
            async fn allocate_unbounded(conn: &mut Conn, tenant_id: &str, peer_id: &str) -> Result<Option<i64>> {
                Ok(sqlx::query_scalar(
                    "UPDATE peers SET last_seq = last_seq + 1 WHERE tenant_id = $1 AND peer_id = $2 RETURNING last_seq",
                )
                .bind(tenant_id)
                .bind(peer_id)
                .fetch_optional(&mut *conn)
                .await?)
            }

            async fn peer_exists(conn: &mut Conn, tenant_id: &str, peer_id: &str) -> Result<bool> {
                // Selects a TEXT column: a literal `1` is INT4 in Postgres but INTEGER in SQLite.
                let found: Option<String> =
                    sqlx::query_scalar("SELECT peer_id FROM peers WHERE tenant_id = $1 AND peer_id = $2")
                        .bind(tenant_id)
                        .bind(peer_id)
                        .fetch_optional(&mut *conn)
                        .await?;
                Ok(found.is_some())
            }

            /// Moves an inbox entry whose row says `row_from` to `to` (compare-and-set on the row)
            /// and, if it still `counted` as pending (effectively `accepted`), decrements the
            /// pending counter. False if the row was no longer in `row_from`.
            #[allow(clippy::too_many_arguments)] // one row's full key and both states; a struct would only rename them
            async fn move_entry(
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

            /// Inserts the message row; false on a unique collision (correlation id or a
            /// concurrent insert of the same id).
            async fn insert_message(conn: &mut Conn, m: &NewMessage, cid: Option<&str>) -> Result<bool> {
                let inserted = sqlx::query(
                    "INSERT INTO messages (tenant_id, message_id, kind, from_peer_id, from_name, \
                     from_circle, body, correlation_id, reply_to, question, answer, content_hash, \
                     created_at_ms, expires_at_ms) \
                     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14) \
                     ON CONFLICT DO NOTHING",
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
                .execute(&mut *conn)
                .await?
                .rows_affected();
                Ok(inserted == 1)
            }

            async fn insert_entry(conn: &mut Conn, m: &NewMessage, slot: &Enqueued) -> Result<()> {
                Self::insert_entry_as(conn, m, slot, DeliveryState::Accepted, None).await
            }

            async fn insert_entry_as(
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
            async fn insert_with_cid(conn: &mut Conn, m: &NewMessage) -> Result<Option<String>> {
                let mut cid = m.correlation_id.clone();
                for _ in 0..4 {
                    if Self::insert_message(conn, m, cid.as_deref()).await? {
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

            async fn ask_row(conn: &mut Conn, tenant_id: &str, cid: &str) -> Result<Option<AskRow>> {
                // Locked on Postgres so two pods closing the same ask serialise here instead of
                // both passing the open check.
                Ok(sqlx::query_as::<_, AskRow>(concat!(
                    "SELECT m.message_id, m.from_peer_id, m.from_name, m.from_circle, m.closed_at_ms, m.closed_by, m.question, \
                     i.peer_id AS recipient, i.state AS row_state, CASE WHEN i.state = 'accepted' AND i.seq <= p.delivered_seq THEN 'delivered' ELSE i.state END AS state \
                     FROM messages m JOIN inbox i ON i.tenant_id = m.tenant_id AND i.message_id = m.message_id \
                     JOIN peer_cursors p ON p.tenant_id = i.tenant_id AND p.peer_id = i.peer_id \
                     WHERE m.tenant_id = $1 AND m.correlation_id = $2 AND m.kind = 'ask'",
                    $lock_ask
                ))
                .bind(tenant_id)
                .bind(cid)
                .fetch_optional(&mut *conn)
                .await?)
            }

            /// Closes an open ask row (messages + the recipient's entry). False if another
            /// frame closed it first.
            async fn close_row(
                conn: &mut Conn,
                tenant_id: &str,
                ask: &AskRow,
                close: (&str, DeliveryState, Option<&str>, Option<&str>),
                now_ms: i64,
            ) -> Result<bool> {
                let (frame_id, to, answer, reply_text) = close;
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
                            conn, tenant_id, &ask.recipient, &ask.message_id, &ask.row_state, counted, to, None, now_ms,
                        )
                        .await?;
                    }
                }
                Ok(closed)
            }

            /// Applies a run of simple writes: receipts first (they free inbox room), then accepts.
            async fn flush_run(
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

            /// Grouped compare-and-set updates of inbox rows: for each (row state, new state),
            /// the listed entries (indices into `rows`) still in that row state move. Returns
            /// the indices of the entries that moved.
            async fn update_rows(
                conn: &mut Conn,
                rows: &[EntryRow],
                groups: &BTreeMap<(&str, &'static str), Vec<usize>>,
                now_ms: i64,
            ) -> Result<Vec<usize>> {
                let index: HashMap<(&str, &str, &str), usize> = groups
                    .values()
                    .flatten()
                    .map(|&i| ((rows[i].tenant_id.as_str(), rows[i].peer_id.as_str(), rows[i].message_id.as_str()), i))
                    .collect();
                let mut moved = Vec::new();
                for ((from, to), entries) in groups {
                    for chunk in entries.chunks(CHUNK) {
                        let mut qb = sqlx::QueryBuilder::<$db>::new("UPDATE inbox SET state = ");
                        qb.push_bind(*to).push(", reason = NULL, updated_at_ms = ").push_bind(now_ms);
                        qb.push(" WHERE state = ").push_bind(*from);
                        qb.push(" AND (tenant_id, peer_id, message_id) IN (");
                        qb.push_values(chunk, |mut b, &i| {
                            let r = &rows[i];
                            b.push_bind(r.tenant_id.as_str()).push_bind(r.peer_id.as_str()).push_bind(r.message_id.as_str());
                        });
                        qb.push(") RETURNING tenant_id, peer_id, message_id");
                        let keys: Vec<Key> = qb.build_query_as().fetch_all(&mut *conn).await?;
                        moved.extend(keys.iter().filter_map(|k| index.get(&(k.0.as_str(), k.1.as_str(), k.2.as_str())).copied()));
                    }
                }
                Ok(moved)
            }

            async fn bulk_receipts(
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
                    index.insert((row.tenant_id.as_str(), row.peer_id.as_str(), row.message_id.as_str()), i);
                }
                // Walk the receipts in order against the states as they evolve in this run.
                let original: Vec<DeliveryState> = rows.iter().map(|row| state(&row.state)).collect::<Result<_>>()?;
                let mut current = original.clone();
                let mut planned: Vec<(usize, usize, DeliveryState)> = Vec::new();
                for (i, r) in rs {
                    match index.get(&(r.tenant_id.as_str(), r.peer_id.as_str(), r.message_id.as_str())) {
                        None => outcomes[*i] = Some(WriteOutcome::Receipt(ReceiptOutcome::Unknown)),
                        Some(&e) if receipt_allowed(current[e], r.state) => {
                            current[e] = r.state;
                            planned.push((*i, e, r.state));
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
                        advance.entry((row.tenant_id.as_str(), row.peer_id.as_str())).or_default().push(e);
                    } else {
                        groups.entry((row.row_state.as_str(), to.as_str())).or_default().push(e);
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
                for ((_, es), (&(t, p, cursor, _), between)) in advance.iter().zip(spans.iter().zip(&betweens)) {
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
                            leftovers.entry(("accepted", DeliveryState::Delivered.as_str())).or_default().push(e);
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
                        *freed.entry((rows[e].tenant_id.as_str(), rows[e].peer_id.as_str())).or_default() += 1;
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
                for (i, e, to) in planned {
                    outcomes[i] = Some(WriteOutcome::Receipt(if moved[e] {
                        ReceiptOutcome::Changed(rows[e].change(to, None))
                    } else {
                        // Another writer moved it first: nothing changed here.
                        ReceiptOutcome::Unchanged
                    }));
                }
                Ok(())
            }

            /// Grants `k` consecutive slots to a peer if its inbox has room for all of them.
            async fn allocate_slots(conn: &mut Conn, tenant_id: &str, peer_id: &str, k: i64, cap: i64) -> Result<Option<i64>> {
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

            async fn bulk_accepts(
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
                            AcceptOutcome::Duplicate { recipients, correlation_id: cid.clone() }
                        } else {
                            AcceptOutcome::IdReused
                        };
                        outcomes[*i] = Some(WriteOutcome::Accept(outcome));
                    } else if let Some(&earlier) = first.get(&(m.tenant_id.as_str(), m.message_id.as_str())) {
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
                        wanted.entry((m.tenant_id.as_str(), r)).or_default().push(pos);
                    }
                }
                let mut slots: HashMap<usize, Vec<Enqueued>> = HashMap::new();
                let mut refused: HashMap<usize, Vec<String>> = HashMap::new();
                let mut failed: HashMap<usize, AcceptOutcome> = HashMap::new();
                // Every recipient's run of slots at once (per dialect: one round trip on Postgres);
                // a recipient without room for all of its run is served slot by slot below.
                let asks: Vec<(&str, &str, i64, i64)> = wanted
                    .iter()
                    .map(|((t, p), positions)| (*t, *p, positions.len() as i64, ms[positions[0]].1.inbox_cap))
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
                    let unknown = granted.is_empty() && !Self::peer_exists(conn, tenant_id, peer_id).await?;
                    for (n, &pos) in positions.iter().enumerate() {
                        let single = ms[pos].1.kind != MessageKind::Broadcast;
                        let peer_id = (*peer_id).to_owned();
                        match granted.get(n) {
                            Some(&seq) => slots.entry(pos).or_default().push(Enqueued { peer_id, seq }),
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
                let insert: Vec<usize> = fresh.iter().copied().filter(|p| !failed.contains_key(p)).collect();
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
                    let cid = if all_inserted || inserted.contains(&(m.tenant_id.clone(), m.message_id.clone())) {
                        m.correlation_id.clone()
                    } else {
                        // A correlation-id collision: re-mint and insert this one alone.
                        Self::insert_with_cid(conn, m).await?
                    };
                    cids.insert(pos, cid);
                }
                let entries: Vec<(usize, &Enqueued)> = insert
                    .iter()
                    .flat_map(|&pos| slots.get(&pos).into_iter().flatten().map(move |e| (pos, e)))
                    .collect();
                for chunk in entries.chunks(CHUNK) {
                    let rows: Vec<(&NewMessage, &Enqueued)> = chunk.iter().map(|&(pos, e)| (ms[pos].1, e)).collect();
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
                        },
                    };
                    outcomes[ms[pos].0] = Some(WriteOutcome::Accept(outcome));
                }
                for (pos, earlier) in repeats {
                    let (i, m) = ms[pos];
                    let first_m = ms[earlier].1;
                    let outcome = match &outcomes[ms[earlier].0] {
                        _ if m.content_hash != first_m.content_hash => AcceptOutcome::IdReused,
                        Some(WriteOutcome::Accept(AcceptOutcome::Accepted { enqueued, correlation_id, .. })) => {
                            AcceptOutcome::Duplicate {
                                recipients: enqueued.iter().map(|e| e.peer_id.clone()).collect(),
                                correlation_id: correlation_id.clone(),
                            }
                        }
                        Some(WriteOutcome::Accept(other)) => other.clone(),
                        _ => AcceptOutcome::IdReused,
                    };
                    outcomes[i] = Some(WriteOutcome::Accept(outcome));
                }
                Ok(())
            }

            async fn accept_one(conn: &mut Conn, m: &NewMessage) -> Result<AcceptOutcome> {
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
                    return Ok(AcceptOutcome::Duplicate { recipients, correlation_id });
                }

                let prior = match &m.reply_to {
                    Some(cid) => match Self::ask_row(conn, &m.tenant_id, cid).await? {
                        Some(ask) if ask.from_peer_id == m.from_peer_id || ask.recipient == m.from_peer_id => Some(ask),
                        _ => return Ok(AcceptOutcome::BadReplyTo),
                    },
                    None => None,
                };

                let single = m.kind != MessageKind::Broadcast;
                let mut recipients = m.recipients.clone();
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
                    Some(ask) if ask.closed_at_ms.is_none() => {
                        let close = (m.message_id.as_str(), DeliveryState::Acked, None, None);
                        Self::close_row(conn, &m.tenant_id, &ask, close, m.created_at_ms)
                            .await?
                            .then(|| ClosedAsk {
                                message_id: ask.message_id.clone(),
                                correlation_id: m.reply_to.clone().unwrap_or_default(),
                                asker: ask.from_peer_id.clone(),
                                asker_name: ask.from_name.clone(),
                                asker_circle: ask.from_circle.clone(),
                                recipient: ask.recipient.clone(),
                                state: DeliveryState::Acked,
                            })
                    }
                    _ => None,
                };

                let correlation_id = Self::insert_with_cid(conn, m).await?;
                for slot in &enqueued {
                    Self::insert_entry(conn, m, slot).await?;
                }
                Self::record_refusals(conn, m, &refused).await?;
                Ok(AcceptOutcome::Accepted { enqueued, refused, correlation_id, closed_prior })
            }

            async fn close_one(conn: &mut Conn, c: &CloseAsk) -> Result<CloseOutcome> {
                let Some(ask) = Self::ask_row(conn, &c.tenant_id, &c.correlation_id).await? else {
                    return Ok(CloseOutcome::Unknown);
                };
                if ask.recipient != c.by_peer_id {
                    return Ok(CloseOutcome::NotRecipient);
                }
                let closed = ClosedAsk {
                    message_id: ask.message_id.clone(),
                    correlation_id: c.correlation_id.clone(),
                    asker: ask.from_peer_id.clone(),
                    asker_name: ask.from_name.clone(),
                    asker_circle: ask.from_circle.clone(),
                    recipient: ask.recipient.clone(),
                    state: c.state,
                };
                if ask.closed_at_ms.is_some() {
                    if ask.closed_by.as_deref() != Some(c.frame_id.as_str()) {
                        return Ok(CloseOutcome::AlreadyClosed);
                    }
                    // The same frame id again: a retry only if it carries the same reply.
                    let stored = Self::stored_hash(conn, &c.tenant_id, &c.frame_id).await?;
                    let same = match (&c.reply, stored) {
                        (Some(reply), Some(hash)) => reply.content_hash == hash,
                        (None, None) => true,
                        _ => false,
                    };
                    return Ok(if same { CloseOutcome::Duplicate { closed } } else { CloseOutcome::IdReused });
                }
                if c.reply.is_some() && Self::stored_hash(conn, &c.tenant_id, &c.frame_id).await?.is_some() {
                    return Ok(CloseOutcome::IdReused);
                }
                let mut reply = c.reply.clone();
                if let Some(answer) = &c.answer {
                    let question = match ask.question.as_deref().map(serde_json::from_str::<repowire_protocol::Question>) {
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
                    Some(r) => match Self::allocate_slot(conn, &c.tenant_id, &ask.from_peer_id, r.inbox_cap).await? {
                        Some(seq) => Some(Enqueued { peer_id: ask.from_peer_id.clone(), seq }),
                        None => return Ok(CloseOutcome::InboxFull),
                    },
                    None => None,
                };
                let answer_json = c
                    .answer
                    .as_ref()
                    .map(|a| serde_json::to_string(a).unwrap_or_default());
                let reply_text = reply.as_ref().map(|r| r.body.clone());
                let close = (c.frame_id.as_str(), c.state, answer_json.as_deref(), reply_text.as_deref());
                if !Self::close_row(conn, &c.tenant_id, &ask, close, c.now_ms).await? {
                    return Ok(CloseOutcome::AlreadyClosed);
                }
                if let (Some(r), Some(slot)) = (&reply, &slot) {
                    let mut r = r.clone();
                    r.answer = answer_json.clone();
                    Self::insert_with_cid(conn, &r).await?;
                    Self::insert_entry(conn, &r, slot).await?;
                }
                Ok(CloseOutcome::Closed { closed, reply: slot, reply_text })
            }

            async fn receipt_one(conn: &mut Conn, r: &ReceiptOp) -> Result<ReceiptOutcome> {
                let row = sqlx::query_as::<_, EntryRow>($crate::store::sql::ENTRY_BY_KEY)
                .bind(&r.tenant_id)
                .bind(&r.peer_id)
                .bind(&r.message_id)
                .fetch_optional(&mut *conn)
                .await?;
                let Some(row) = row else { return Ok(ReceiptOutcome::Unknown) };
                let from = state(&row.state)?;
                if !receipt_allowed(from, r.state) {
                    return Ok(ReceiptOutcome::Unchanged);
                }
                let counted = from == DeliveryState::Accepted;
                let moved = Self::move_entry(
                    conn, &r.tenant_id, &r.peer_id, &r.message_id, &row.row_state, counted, r.state,
                    r.reason.as_deref(), r.now_ms,
                )
                .await?;
                if !moved {
                    return Ok(ReceiptOutcome::Unchanged);
                }
                Ok(ReceiptOutcome::Changed(row.change(r.state, r.reason.clone())))
            }

            async fn expire_due(conn: &mut Conn, now_ms: i64, limit: i64) -> Result<Vec<StateChange>> {
                // Per dialect (postgres.rs, sqlite.rs): only the entries past each peer's cursor
                // can still be waiting, so only those are read.
                let rows = Self::due_entries(conn, now_ms, limit).await?;
                let mut changes = Vec::with_capacity(rows.len());
                for row in rows {
                    let reason = "not delivered before the message TTL";
                    if Self::move_entry(
                        conn, &row.tenant_id, &row.peer_id, &row.message_id,
                        "accepted", true, DeliveryState::Expired, Some(reason), now_ms,
                    )
                    .await?
                    {
                        changes.push(row.change(DeliveryState::Expired, Some(reason.into())));
                    }
                }
                Ok(changes)
            }
        }

        #[async_trait::async_trait]
        impl Store for $store {
            fn backend(&self) -> &'static str {
                $backend
            }

            fn writer_store(&self) -> Option<std::sync::Arc<dyn Store>> {
                self.own_writer_store()
            }

            async fn close(&self) {
                self.pool.close().await;
            }

            fn parallel_receipts(&self) -> bool {
                Self::PARALLEL_RECEIPTS
            }

            async fn ping(&self) -> Result<()> {
                sqlx::query("SELECT 1").execute(&self.pool).await?;
                Ok(())
            }

            async fn create_tenant(&self, t: &TenantRecord) -> Result<()> {
                let inserted = sqlx::query(
                    "INSERT INTO tenants (id, name, plan, created_at_ms) VALUES ($1, $2, $3, $4) \
                     ON CONFLICT DO NOTHING",
                )
                .bind(&t.id)
                .bind(&t.name)
                .bind(&t.plan)
                .bind(t.created_at_ms)
                .execute(&self.pool)
                .await?
                .rows_affected();
                if inserted == 0 {
                    return Err(StoreError::Conflict(format!("a tenant named `{}` exists", t.name)));
                }
                Ok(())
            }

            async fn list_tenants(&self) -> Result<Vec<TenantRecord>> {
                let sql = format!("SELECT {TENANT_COLS} FROM tenants ORDER BY created_at_ms, id");
                Ok(sqlx::query_as(&sql).fetch_all(&self.pool).await?)
            }

            async fn find_tenant(&self, id_or_name: &str) -> Result<Option<TenantRecord>> {
                let sql = format!("SELECT {TENANT_COLS} FROM tenants WHERE id = $1 OR name = $1");
                Ok(sqlx::query_as(&sql).bind(id_or_name).fetch_optional(&self.pool).await?)
            }

            async fn insert_api_key(&self, k: &ApiKeyRecord) -> Result<()> {
                sqlx::query(
                    "INSERT INTO api_keys (id, tenant_id, hash, display, label, mode, created_at_ms, \
                     expires_at_ms, revoked_at_ms) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)",
                )
                .bind(&k.id)
                .bind(&k.tenant_id)
                .bind(&k.hash)
                .bind(&k.display)
                .bind(&k.label)
                .bind(&k.mode)
                .bind(k.created_at_ms)
                .bind(k.expires_at_ms)
                .bind(k.revoked_at_ms)
                .execute(&self.pool)
                .await?;
                Ok(())
            }

            async fn find_api_key_by_hash(&self, hash: &str) -> Result<Option<ApiKeyRecord>> {
                let sql = format!("SELECT {KEY_COLS} FROM api_keys WHERE hash = $1");
                Ok(sqlx::query_as(&sql).bind(hash).fetch_optional(&self.pool).await?)
            }

            async fn get_api_key(&self, id: &str) -> Result<Option<ApiKeyRecord>> {
                let sql = format!("SELECT {KEY_COLS} FROM api_keys WHERE id = $1");
                Ok(sqlx::query_as(&sql).bind(id).fetch_optional(&self.pool).await?)
            }

            async fn list_api_keys(&self, tenant_id: &str) -> Result<Vec<ApiKeyRecord>> {
                let sql = format!(
                    "SELECT {KEY_COLS} FROM api_keys WHERE tenant_id = $1 ORDER BY created_at_ms, id"
                );
                Ok(sqlx::query_as(&sql).bind(tenant_id).fetch_all(&self.pool).await?)
            }

            async fn revoke_api_key(&self, id: &str, now_ms: i64) -> Result<bool> {
                let n = sqlx::query(
                    "UPDATE api_keys SET revoked_at_ms = $1 WHERE id = $2 AND revoked_at_ms IS NULL",
                )
                .bind(now_ms)
                .bind(id)
                .execute(&self.pool)
                .await?
                .rows_affected();
                Ok(n == 1)
            }

            async fn upsert_peer(&self, p: &PeerRecord) -> Result<()> {
                // The peer and its delivered cursor (a row of its own, see migration 0007) together.
                let mut tx = self.pool.begin().await?;
                sqlx::query(
                    "INSERT INTO peers (tenant_id, peer_id, name, circle, backend, role, path, machine, \
                     description, description_at_ms, created_at_ms, last_seen_ms) \
                     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12) \
                     ON CONFLICT (tenant_id, peer_id) DO UPDATE SET name = excluded.name, \
                     circle = excluded.circle, backend = excluded.backend, role = excluded.role, \
                     path = excluded.path, machine = excluded.machine, last_seen_ms = excluded.last_seen_ms",
                )
                .bind(&p.tenant_id)
                .bind(&p.peer_id)
                .bind(&p.name)
                .bind(&p.circle)
                .bind(&p.backend)
                .bind(&p.role)
                .bind(&p.path)
                .bind(&p.machine)
                .bind(&p.description)
                .bind(p.description_at_ms)
                .bind(p.created_at_ms)
                .bind(p.last_seen_ms)
                .execute(&mut *tx)
                .await?;
                sqlx::query("INSERT INTO peer_cursors (tenant_id, peer_id) VALUES ($1, $2) ON CONFLICT DO NOTHING")
                    .bind(&p.tenant_id)
                    .bind(&p.peer_id)
                    .execute(&mut *tx)
                    .await?;
                tx.commit().await?;
                Ok(())
            }

            async fn get_peer(&self, tenant_id: &str, peer_id: &str) -> Result<Option<PeerRecord>> {
                let sql = format!("SELECT {PEER_COLS} FROM peers WHERE tenant_id = $1 AND peer_id = $2");
                Ok(sqlx::query_as(&sql).bind(tenant_id).bind(peer_id).fetch_optional(&self.pool).await?)
            }

            async fn peers_named(&self, tenant_id: &str, name: &str) -> Result<Vec<PeerRecord>> {
                let sql = format!(
                    "SELECT {PEER_COLS} FROM peers WHERE tenant_id = $1 AND name = $2 ORDER BY circle, peer_id"
                );
                Ok(sqlx::query_as(&sql).bind(tenant_id).bind(name).fetch_all(&self.pool).await?)
            }

            async fn list_peers(&self, tenant_id: &str) -> Result<Vec<PeerRecord>> {
                let sql = format!(
                    "SELECT {PEER_COLS} FROM peers WHERE tenant_id = $1 ORDER BY circle, name, peer_id"
                );
                Ok(sqlx::query_as(&sql).bind(tenant_id).fetch_all(&self.pool).await?)
            }

            async fn set_description(
                &self,
                tenant_id: &str,
                peer_id: &str,
                description: Option<&str>,
                now_ms: i64,
            ) -> Result<()> {
                sqlx::query(
                    "UPDATE peers SET description = $1, description_at_ms = $2, last_seen_ms = $3 \
                     WHERE tenant_id = $4 AND peer_id = $5",
                )
                .bind(description)
                .bind(description.map(|_| now_ms))
                .bind(now_ms)
                .bind(tenant_id)
                .bind(peer_id)
                .execute(&self.pool)
                .await?;
                Ok(())
            }

                        async fn clear_description(&self, tenant_id: &str, peer_id: &str, set_at: i64) -> Result<()> {
                sqlx::query(
                    "UPDATE peers SET description = NULL, description_at_ms = NULL \
                     WHERE tenant_id = $1 AND peer_id = $2 AND description_at_ms = $3",
                )
                .bind(tenant_id)
                .bind(peer_id)
                .bind(set_at)
                .execute(&self.pool)
                .await?;
                Ok(())
            }

            async fn touch_peer(&self, tenant_id: &str, peer_id: &str, now_ms: i64) -> Result<()> {
                sqlx::query("UPDATE peers SET last_seen_ms = $1 WHERE tenant_id = $2 AND peer_id = $3")
                    .bind(now_ms)
                    .bind(tenant_id)
                    .bind(peer_id)
                    .execute(&self.pool)
                    .await?;
                Ok(())
            }

            async fn state_set(
                &self,
                tenant_id: &str,
                circle: &str,
                key: &str,
                value: Option<&str>,
                by: &str,
                now_ms: i64,
                max_keys: usize,
            ) -> Result<StateWrite> {
                let Some(value) = value else {
                    sqlx::query("DELETE FROM shared_state WHERE tenant_id = $1 AND circle = $2 AND key = $3")
                        .bind(tenant_id)
                        .bind(circle)
                        .bind(key)
                        .execute(&self.pool)
                        .await?;
                    return Ok(StateWrite::Deleted);
                };
                // One statement: an existing key is always updated; a new one only below the cap.
                let done = sqlx::query(
                    "INSERT INTO shared_state (tenant_id, circle, key, value, updated_by, updated_at_ms) \
                     SELECT $1, $2, $3, $4, $5, $6 \
                     WHERE EXISTS (SELECT 1 FROM shared_state WHERE tenant_id = $1 AND circle = $2 AND key = $3) \
                        OR (SELECT COUNT(*) FROM shared_state WHERE tenant_id = $1 AND circle = $2) < $7 \
                     ON CONFLICT (tenant_id, circle, key) DO UPDATE SET value = excluded.value, \
                        updated_by = excluded.updated_by, updated_at_ms = excluded.updated_at_ms",
                )
                .bind(tenant_id)
                .bind(circle)
                .bind(key)
                .bind(value)
                .bind(by)
                .bind(now_ms)
                .bind(i64::try_from(max_keys).unwrap_or(i64::MAX))
                .execute(&self.pool)
                .await?;
                Ok(if done.rows_affected() == 0 { StateWrite::Full } else { StateWrite::Stored })
            }

            async fn state_get(
                &self,
                tenant_id: &str,
                circle: &str,
                key: Option<&str>,
            ) -> Result<Vec<StateRecord>> {
                Ok(sqlx::query_as(
                    "SELECT key, value, updated_by, updated_at_ms FROM shared_state \
                     WHERE tenant_id = $1 AND circle = $2 AND ($3 IS NULL OR key = $3) ORDER BY key",
                )
                .bind(tenant_id)
                .bind(circle)
                .bind(key)
                .fetch_all(&self.pool)
                .await?)
            }

            async fn apply(&self, ops: &[WriteOp]) -> Result<Vec<WriteOutcome>> {
                let mut tx = self.pool.begin_with($begin_write).await?;
                let mut outcomes: Vec<Option<WriteOutcome>> = ops.iter().map(|_| None).collect();
                let mut run = Vec::new();
                for (i, op) in ops.iter().enumerate() {
                    if is_simple(op) {
                        run.push(i);
                        continue;
                    }
                    Self::flush_run(&mut tx, ops, &run, &mut outcomes).await?;
                    run.clear();
                    outcomes[i] = Some(match op {
                        WriteOp::Accept(m) => WriteOutcome::Accept(Self::accept_one(&mut tx, m).await?),
                        WriteOp::Close(c) => WriteOutcome::Close(Self::close_one(&mut tx, c).await?),
                        WriteOp::Receipt(r) => WriteOutcome::Receipt(Self::receipt_one(&mut tx, r).await?),
                        WriteOp::Expire { now_ms, limit } => {
                            WriteOutcome::Expire(Self::expire_due(&mut tx, *now_ms, *limit).await?)
                        }
                    });
                }
                Self::flush_run(&mut tx, ops, &run, &mut outcomes).await?;
                tx.commit().await?;
                outcomes
                    .into_iter()
                    .map(|o| o.ok_or_else(|| StoreError::Corrupt("a write got no outcome".into())))
                    .collect()
            }

            async fn inbox_after(
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
                    .map(|r| Ok(InboxEntry { seq: r.seq, state: state(&r.state)?, message: r.message }))
                    .collect()
            }

            async fn message_status(
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
                let Some(message) = message else { return Ok(None) };
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
                Ok(Some(MessageStatus { message, recipients }))
            }
        }
    };
}

pub(crate) use impl_store;
