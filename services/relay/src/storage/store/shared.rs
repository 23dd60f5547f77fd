//! The backend-independent pieces of the SQL both stores run (see [`super::sql`]): column
//! lists, shared query texts and the rules the write path applies to stored states.

pub(crate) const TENANT_COLS: &str = "id, name, plan, created_at_ms, \
     disabled_at_ms AS suspended_at_ms, deleted_at_ms, display_name, max_peers, \
     max_connections, max_message_bytes, inbox_cap, max_messages_per_minute AS messages_per_minute, \
     max_monthly_messages AS messages_per_month, max_state_bytes, max_stored_peers";
pub(crate) const KEY_COLS: &str = "id, tenant_id, hash, display, label, mode, created_at_ms, expires_at_ms, revoked_at_ms, \
     last_used_at_ms, scopes, (SELECT COUNT(*) FROM tenants t WHERE t.id = api_keys.tenant_id \
     AND t.disabled_at_ms IS NOT NULL) > 0 AS tenant_suspended";
pub(crate) const PEER_COLS: &str = "tenant_id, peer_id, name, circle, backend, role, path, machine, \
     description, description_at_ms, created_at_ms, last_seen_ms, last_seq";
pub(crate) const MSG_COLS: &str = "m.message_id, m.kind, m.from_peer_id, m.from_name, \
     m.from_circle, m.body, m.correlation_id, m.reply_to, m.question, m.answer, m.created_at_ms, \
     m.expires_at_ms, m.reply_text, m.content_hash, m.traceparent, m.from_session_id, m.to_session_id, \
     m.conversation";

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

/// Rows per multi-row statement: well under SQLite's bound-parameter limit at 17 columns.
pub(crate) const CHUNK: usize = 256;

/// Writes the batch path applies set-based (one statement for many rows); everything else is
/// applied op by op. Consecutive simple writes form a run; runs never cross a complex op, so
/// the batch keeps its order.
pub(crate) fn is_simple(op: &super::WriteOp) -> bool {
    use repowire_protocol::DeliveryState::{Delivered, Injected};
    match op {
        // A chained ask closes another in the same transaction, and a question with a timeout
        // stores its deadline, and a conversation's message takes its conversation's next seq:
        // all take the op-by-op path.
        super::WriteOp::Accept(m) => {
            m.reply_to.is_none() && m.deadline_ms.is_none() && m.conversation.is_none()
        }
        // An `injected` receipt with a `reason` (how the message reached the agent) is
        // applied op by op, which stores the reason and passes it on to the sender.
        super::WriteOp::Receipt(r) => {
            matches!(r.state, Delivered) || (r.state == Injected && r.reason.is_none())
        }
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
