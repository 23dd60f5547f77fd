//! Prometheus metrics, rendered at `/metrics`.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;
use repowire_protocol::ErrorCode;

/// A `type` label.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct TypeLabel {
    /// Frame type or message kind.
    pub r#type: &'static str,
}

/// A `code` label.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct CodeLabel {
    /// Error code.
    pub code: &'static str,
}

/// A `state` label.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct StateLabel {
    /// Delivery state.
    pub state: &'static str,
}

/// A `lane` label: the writer lane a batch was committed in (see `writer.rs`).
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct LaneLabel {
    /// `messages` or `receipts` (`all` where one lane commits everything).
    pub lane: &'static str,
}

/// Labels of a limit refusal: which limit, and the tenant's plan (never the tenant: the
/// number of tenants is unbounded, of plans small).
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct LimitLabel {
    /// `message_bytes`, `messages_per_minute`, `messages_per_month`, `peers`, `connections`.
    pub reason: &'static str,
    /// The tenant's plan.
    pub plan: String,
}

/// A histogram family whose histograms share one set of buckets.
pub type Histograms<L> = Family<L, Histogram, fn() -> Histogram>;

/// Every metric of a relay process.
#[derive(Debug)]
pub struct Metrics {
    registry: Registry,
    /// Open WebSocket connections.
    pub connections: Gauge,
    /// Live registered peers on this process.
    pub peers: Gauge,
    /// Frames received, by type.
    pub frames_received: Family<TypeLabel, Counter>,
    /// Requests refused (WebSocket error frames and HTTP errors), by error code.
    pub errors: Family<CodeLabel, Counter>,
    /// Messages persisted, by kind.
    pub messages_accepted: Family<TypeLabel, Counter>,
    /// Delivery state changes, by state.
    pub delivery_states: Family<StateLabel, Counter>,
    /// Connections closed for not keeping up.
    pub slow_consumers: Counter,
    /// Connections closed at once because too many were not yet authenticated.
    pub pending_refused: Counter,
    /// Bytes queued to this process's connections (set when the metrics are read).
    pub outbound_queued_bytes: Gauge,
    /// Write batches applied again after a concurrent transaction aborted them.
    pub write_conflicts: Counter,
    /// Catch-ups started because a live delivery skipped ahead of an entry not yet pushed.
    pub order_catch_ups: Counter,
    /// Requests refused by a tenant limit, by limit and plan.
    pub limit_refusals: Family<LimitLabel, Counter>,
    /// Limit checks that could not reach the bus and let the request through.
    pub limit_checks_failed_open: Counter,
    /// Age of the oldest connection measurement not yet in the usage rows (0 when the last
    /// flush left nothing behind): what a kill of this process would lose.
    pub usage_flush_lag_seconds: Gauge<f64, std::sync::atomic::AtomicU64>,
    /// Usage flushes that failed (their measurements are kept for the next one).
    pub usage_flush_failures: Counter,
    /// Time from a message frame's arrival to its durable accept.
    pub accept_seconds: Histogram,
    /// Writes per committed transaction, by writer lane.
    pub write_batch_size: Histograms<LaneLabel>,
    /// Time to apply and commit one write batch, by writer lane.
    pub write_batch_seconds: Histograms<LaneLabel>,
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    /// Registers every metric.
    pub fn new() -> Self {
        let mut registry = Registry::with_prefix("repowire");
        let m = Self {
            connections: Gauge::default(),
            peers: Gauge::default(),
            frames_received: Family::default(),
            errors: Family::default(),
            messages_accepted: Family::default(),
            delivery_states: Family::default(),
            slow_consumers: Counter::default(),
            pending_refused: Counter::default(),
            outbound_queued_bytes: Gauge::default(),
            write_conflicts: Counter::default(),
            order_catch_ups: Counter::default(),
            limit_refusals: Family::default(),
            limit_checks_failed_open: Counter::default(),
            usage_flush_lag_seconds: Gauge::default(),
            usage_flush_failures: Counter::default(),
            accept_seconds: Histogram::new(exponential_buckets(0.000_1, 2.0, 16)),
            write_batch_size: Family::new_with_constructor(|| {
                Histogram::new(exponential_buckets(1.0, 2.0, 11))
            }),
            write_batch_seconds: Family::new_with_constructor(|| {
                Histogram::new(exponential_buckets(0.000_1, 2.0, 16))
            }),
            registry: Registry::default(),
        };
        registry.register(
            "connections",
            "Open WebSocket connections",
            m.connections.clone(),
        );
        registry.register("peers", "Live registered peers", m.peers.clone());
        registry.register(
            "frames_received",
            "Frames received by type",
            m.frames_received.clone(),
        );
        registry.register("errors", "Refused requests by error code", m.errors.clone());
        registry.register(
            "messages_accepted",
            "Messages persisted by kind",
            m.messages_accepted.clone(),
        );
        registry.register(
            "delivery_states",
            "Delivery state changes",
            m.delivery_states.clone(),
        );
        registry.register(
            "slow_consumers",
            "Connections closed as slow consumers",
            m.slow_consumers.clone(),
        );
        registry.register(
            "pending_refused",
            "Connections closed at once: too many were not yet authenticated",
            m.pending_refused.clone(),
        );
        registry.register(
            "outbound_queued_bytes",
            "Bytes queued to this process's connections, not yet written",
            m.outbound_queued_bytes.clone(),
        );
        registry.register(
            "write_conflicts",
            "Write batches applied again after a deadlock or serialization failure",
            m.write_conflicts.clone(),
        );
        registry.register(
            "order_catch_ups",
            "Catch-ups from the inbox because a live delivery arrived ahead of an earlier entry (a forward from another pod still on its way)",
            m.order_catch_ups.clone(),
        );
        registry.register(
            "limit_refusals",
            "Requests refused by a tenant limit, by limit and plan",
            m.limit_refusals.clone(),
        );
        registry.register(
            "limit_checks_failed_open",
            "Cluster-wide limit checks that could not reach the bus and let the request through",
            m.limit_checks_failed_open.clone(),
        );
        registry.register(
            "usage_flush_lag_seconds",
            "Age of the oldest connection-time or peak measurement not yet stored in the usage rows",
            m.usage_flush_lag_seconds.clone(),
        );
        registry.register(
            "usage_flush_failures",
            "Usage flushes that failed and were kept for the next one",
            m.usage_flush_failures.clone(),
        );
        registry.register(
            "accept_seconds",
            "Frame arrival to durable accept",
            m.accept_seconds.clone(),
        );
        registry.register(
            "write_batch_size",
            "Writes per transaction",
            m.write_batch_size.clone(),
        );
        registry.register(
            "write_batch_seconds",
            "Apply and commit time of a write batch",
            m.write_batch_seconds.clone(),
        );
        Self { registry, ..m }
    }

    /// Counts a refused request.
    pub fn error(&self, code: ErrorCode) {
        self.errors
            .get_or_create(&CodeLabel {
                code: code.as_str(),
            })
            .inc();
    }

    /// Prometheus text exposition.
    pub fn render(&self) -> String {
        let mut out = String::new();
        // Writing into a String cannot fail.
        let _ = prometheus_client::encoding::text::encode(&mut out, &self.registry);
        out
    }
}
