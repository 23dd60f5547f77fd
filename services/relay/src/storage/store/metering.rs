//! What a batch of writes adds to the tenants' usage: counted from the outcomes of the batch,
//! inside its transaction (see `apply` in `sql/mod.rs`), so usage is exactly what was
//! stored — a retried message (same id, `Duplicate`) and a refused one add nothing, and a
//! receipt repeated after its entry moved on adds no second delivery.
//!
//! Connection time and peaks are not writes of a batch: each pod measures them and adds them
//! every flush interval (`usage::meter`).

use std::collections::BTreeMap;

use super::{AcceptOutcome, CloseOutcome, ReceiptOutcome, WriteOp, WriteOutcome};

/// One hour, in ms.
pub const HOUR_MS: i64 = 3_600_000;

/// The usage metrics, as stored and exported.
pub mod metric {
    /// `ask` messages accepted.
    pub const ASKS: &str = "messages_ask";
    /// `notify` messages accepted.
    pub const NOTIFIES: &str = "messages_notify";
    /// `broadcast` messages accepted.
    pub const BROADCASTS: &str = "messages_broadcast";
    /// Replies (an `ack` with a reply, an `answer`) accepted.
    pub const REPLIES: &str = "messages_reply";
    /// Bytes of message text accepted.
    pub const BYTES: &str = "message_bytes";
    /// Inbox entries made (a broadcast makes one per recipient).
    pub const ENTRIES: &str = "inbox_entries";
    /// Inbox entries that reached their recipient (a receipt moved them out of `accepted` to
    /// `delivered` or `injected`; each entry counts once).
    pub const DELIVERIES: &str = "deliveries";
    /// Milliseconds of open WebSocket connections (flushed by each pod, see `usage::meter`).
    pub const CONNECTION_MS: &str = "connection_ms";
    /// Most connections open at once in the cluster (a peak: summed by maximum).
    pub const PEAK_CONNECTIONS: &str = "peak_connections";
    /// Most peers live at once in the cluster (a peak: summed by maximum).
    pub const PEAK_PEERS: &str = "peak_peers";
    /// Every metric, in export order.
    pub const ALL: [&str; 10] = [
        ASKS,
        NOTIFIES,
        BROADCASTS,
        REPLIES,
        BYTES,
        ENTRIES,
        DELIVERIES,
        CONNECTION_MS,
        PEAK_CONNECTIONS,
        PEAK_PEERS,
    ];

    /// Whether a metric is a peak (periods take the maximum of their hours) rather than a
    /// count (periods take the sum).
    pub fn is_peak(metric: &str) -> bool {
        matches!(metric, PEAK_CONNECTIONS | PEAK_PEERS)
    }
}

/// `(tenant, hour start, metric) → amount` added by a batch, in a stable order (the order the
/// rows are upserted in, so concurrent batches lock them in one order).
pub type Additions = BTreeMap<(String, i64, &'static str), i64>;

/// The usage a batch adds, from its ops and their outcomes.
pub fn additions(ops: &[WriteOp], outcomes: &[Option<WriteOutcome>]) -> Additions {
    let mut add = Additions::new();
    let mut bump = |tenant: &str, at_ms: i64, metric: &'static str, n: i64| {
        if n != 0 {
            let hour = at_ms.div_euclid(HOUR_MS) * HOUR_MS;
            *add.entry((tenant.to_owned(), hour, metric)).or_insert(0) += n;
        }
    };
    for (op, outcome) in ops.iter().zip(outcomes) {
        match (op, outcome) {
            (
                WriteOp::Accept(m),
                Some(WriteOutcome::Accept(AcceptOutcome::Accepted { enqueued, .. })),
            ) => {
                let kind = match m.kind {
                    repowire_protocol::MessageKind::Ask => metric::ASKS,
                    repowire_protocol::MessageKind::Notify => metric::NOTIFIES,
                    repowire_protocol::MessageKind::Broadcast => metric::BROADCASTS,
                    repowire_protocol::MessageKind::Reply => metric::REPLIES,
                };
                bump(&m.tenant_id, m.created_at_ms, kind, 1);
                bump(&m.tenant_id, m.created_at_ms, metric::BYTES, len(&m.body));
                bump(
                    &m.tenant_id,
                    m.created_at_ms,
                    metric::ENTRIES,
                    len_of(enqueued),
                );
            }
            (
                WriteOp::Close(c),
                Some(WriteOutcome::Close(CloseOutcome::Closed {
                    reply: Some(_),
                    reply_text,
                    ..
                })),
            ) => {
                let at = c.reply.as_ref().map_or(0, |r| r.created_at_ms);
                bump(&c.tenant_id, at, metric::REPLIES, 1);
                bump(
                    &c.tenant_id,
                    at,
                    metric::BYTES,
                    reply_text.as_deref().map_or(0, len),
                );
                bump(&c.tenant_id, at, metric::ENTRIES, 1);
            }
            (
                WriteOp::Receipt(r),
                Some(WriteOutcome::Receipt(ReceiptOutcome::Changed { arrived: true, .. })),
            ) => bump(&r.tenant_id, r.now_ms, metric::DELIVERIES, 1),
            _ => {}
        }
    }
    add
}

fn len(s: &str) -> i64 {
    i64::try_from(s.len()).unwrap_or(i64::MAX)
}

fn len_of<T>(v: &[T]) -> i64 {
    i64::try_from(v.len()).unwrap_or(i64::MAX)
}
