//! Usage beyond message counts (issue 16.4): deliveries, counted once per inbox entry inside
//! the receipt's transaction, and connection time and peaks, measured by the pod and flushed
//! (here by calling the flush directly, and by a clean stop). Both storage backends. The kill
//! case is `tests/tests/it/relay_metering.rs` (a real process killed with SIGKILL).

use crate::common;

use std::sync::Arc;
use std::time::Instant;

use common::{Db, TestRelay};
use repowire_protocol::{Body, MessageId, Receipt, ReceiptState};
use repowire_relay::storage::store::Store;
use repowire_relay::storage::store::metering::metric;
use repowire_relay::tenancy::flusher;

/// One metric of a tenant: summed over every hour, or for a peak the highest hour.
async fn metered(store: &Arc<dyn Store>, tenant: &str, name: &str) -> i64 {
    let rows = store
        .usage_rows(Some(tenant), 0, i64::MAX)
        .await
        .expect("usage");
    let values = rows.iter().filter(|r| r.metric == name).map(|r| r.value);
    if metric::is_peak(name) {
        values.max().unwrap_or(0)
    } else {
        values.sum()
    }
}

/// A delivery is an entry's first arrival at its recipient: `delivered` or `injected` from
/// `accepted`, once; repeated receipts, `delivered` → `injected` and failures add none.
async fn deliveries_count_each_entry_once(db: Db) {
    let relay = TestRelay::start(&db).await;
    let (acme, key) = relay.tenant("acme").await;
    let mut a = relay.client(&key).await;
    let alice = a.peer("alice", "dev").await;
    let mut b = relay.client(&key).await;
    let bob = b.peer("bob", "dev").await;
    let mut sent: Vec<MessageId> = Vec::new();
    for text in ["one", "two", "three", "four"] {
        sent.push(
            a.notify(&alice, "bob", text)
                .await
                .expect("notify")
                .message_id,
        );
    }
    let receipted = [
        (sent[0], ReceiptState::Delivered),
        (sent[0], ReceiptState::Delivered), // a retry: unchanged
        (sent[0], ReceiptState::Injected),  // moved on, but not a second arrival
        (sent[1], ReceiptState::Injected),  // straight from accepted: an arrival
    ];
    for (message, state) in receipted {
        b.receipt(&bob.peer_id, message, state).await;
    }
    // Never arrived.
    b.send(Body::Receipt(Receipt {
        peer_id: bob.peer_id.clone(),
        message_id: sent[2],
        state: ReceiptState::Failed,
        reason: Some("the session is gone".into()),
    }))
    .await;
    // Alice hears the last change of each; receipts of one connection commit in order, so
    // every receipt above is stored once these are heard.
    assert_eq!(
        a.state_of(sent[0]).await.state,
        repowire_protocol::DeliveryState::Delivered
    );
    assert_eq!(
        a.state_of(sent[0]).await.state,
        repowire_protocol::DeliveryState::Injected
    );
    a.state_of(sent[1]).await;
    a.state_of(sent[2]).await;
    let store = relay.state.store.clone();
    assert_eq!(metered(&store, &acme, metric::DELIVERIES).await, 2);
    assert_eq!(metered(&store, &acme, metric::NOTIFIES).await, 4);
    relay.stop().await;
}

/// Connection time runs from the connection's admission to its close; peaks count the
/// tenant's connections and live peers; tenants are metered apart; a clean stop stores what
/// was measured since the last flush.
async fn connection_time_and_peaks_are_metered_and_stored_by_a_clean_stop(db: Db) {
    let relay = TestRelay::start(&db).await;
    let store = relay.state.store.clone();
    let (acme, key) = relay.tenant("acme").await;
    let (beta, beta_key) = relay.tenant("beta").await;
    let opening = Instant::now();
    let mut a = relay.client(&key).await;
    a.peer("alice", "dev").await;
    let mut b = relay.client(&key).await;
    b.peer("bob", "dev").await;
    let mut o = relay.client(&beta_key).await;
    o.peer("olga", "dev").await;
    let open = Instant::now();

    assert!(flusher::flush(&relay.state).await, "flushed");
    assert_eq!(metered(&store, &acme, metric::PEAK_CONNECTIONS).await, 2);
    assert_eq!(metered(&store, &acme, metric::PEAK_PEERS).await, 2);
    assert_eq!(metered(&store, &beta, metric::PEAK_CONNECTIONS).await, 1);
    assert_eq!(metered(&store, &beta, metric::PEAK_PEERS).await, 1);
    let first = metered(&store, &acme, metric::CONNECTION_MS).await;
    assert!(first > 0, "the flush stored connection time");

    let stopping = Instant::now();
    relay.stop().await;
    let stopped = Instant::now();
    let ms = |d: std::time::Duration| i64::try_from(d.as_millis()).expect("ms");
    let acme_ms = metered(&store, &acme, metric::CONNECTION_MS).await;
    // Each of acme's two connections was open at least from `open` to `stopping` and at most
    // from `opening` to `stopped` (1 ms either way for whole milliseconds).
    let (low, high) = (2 * ms(stopping - open) - 2, 2 * ms(stopped - opening) + 2);
    assert!(
        (low..=high).contains(&acme_ms) && acme_ms >= first,
        "acme: {acme_ms} ms of connections, expected {low}..={high}"
    );
    let beta_ms = metered(&store, &beta, metric::CONNECTION_MS).await;
    assert!(
        (ms(stopping - open) - 1..=ms(stopped - opening) + 1).contains(&beta_ms),
        "beta: {beta_ms} ms"
    );
    assert_eq!(
        metered(&store, &acme, metric::PEAK_CONNECTIONS).await,
        2,
        "the peak did not grow"
    );
}

both_backends!(
    deliveries_count_each_entry_once,
    connection_time_and_peaks_are_metered_and_stored_by_a_clean_stop,
);
