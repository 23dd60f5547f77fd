//! The operator's Prometheus metrics: reconciles, errors by reason, durations.

use std::time::Duration;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

/// Labels: the kind reconciled.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct KindLabel {
    /// `Tenant` or `ApiKey`.
    pub kind: String,
}

/// Labels: the kind and why it failed.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ErrorLabel {
    /// `Tenant` or `ApiKey`.
    pub kind: String,
    /// A short reason (`RelayUnreachable`, `Kube`, …).
    pub reason: String,
}

/// Every metric, registered once.
pub struct Metrics {
    registry: Registry,
    reconciles: Family<KindLabel, Counter>,
    errors: Family<ErrorLabel, Counter>,
    duration: Family<KindLabel, Histogram>,
    leader: Gauge,
}

impl Default for Metrics {
    fn default() -> Self {
        let mut registry = Registry::with_prefix("repowire_operator");
        let reconciles = Family::<KindLabel, Counter>::default();
        let errors = Family::<ErrorLabel, Counter>::default();
        let duration = Family::<KindLabel, Histogram>::new_with_constructor(|| {
            Histogram::new(exponential_buckets(0.005, 2.0, 14))
        });
        let leader = Gauge::default();
        registry.register("reconciles", "Reconciles run", reconciles.clone());
        registry.register(
            "reconcile_errors",
            "Reconciles that failed, by reason",
            errors.clone(),
        );
        registry.register(
            "reconcile_duration_seconds",
            "How long a reconcile took",
            duration.clone(),
        );
        registry.register(
            "leader",
            "1 while this replica holds the leader lease",
            leader.clone(),
        );
        Self {
            registry,
            reconciles,
            errors,
            duration,
            leader,
        }
    }
}

impl Metrics {
    /// A reconcile of `kind` finished after `took`.
    pub fn reconciled(&self, kind: &str, took: Duration) {
        let label = KindLabel { kind: kind.into() };
        self.reconciles.get_or_create(&label).inc();
        self.duration
            .get_or_create(&label)
            .observe(took.as_secs_f64());
    }

    /// A reconcile of `kind` failed for `reason`.
    pub fn failed(&self, kind: &str, reason: &str) {
        self.errors
            .get_or_create(&ErrorLabel {
                kind: kind.into(),
                reason: reason.into(),
            })
            .inc();
    }

    /// Whether this replica leads.
    pub fn set_leader(&self, leading: bool) {
        self.leader.set(i64::from(leading));
    }

    /// The text exposition.
    pub fn encode(&self) -> String {
        let mut out = String::new();
        // Writing to a String cannot fail.
        let _ = prometheus_client::encoding::text::encode(&mut out, &self.registry);
        out
    }
}
