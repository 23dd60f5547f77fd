//! What every reconcile shares: the Kubernetes client, the relay's admin client, settings,
//! metrics, events, and the per-object memory (last verification, failure count).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use kube::runtime::controller::Action;
use kube::runtime::events::{Event, EventType, Recorder, Reporter};
use kube::{Resource, ResourceExt};

use crate::metrics::Metrics;
use crate::relay::{AdminClient, RelayError};

/// The field manager of every write (server-side apply).
pub const MANAGER: &str = "repowire-operator";

/// Why a reconcile failed. Shown in metrics by [`Error::reason`]; never holds a key.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The relay's admin API.
    #[error(transparent)]
    Relay(#[from] RelayError),
    /// The Kubernetes API.
    #[error("kubernetes: {0}")]
    Kube(#[from] kube::Error),
    /// An object that cannot be handled as it is.
    #[error("{0}")]
    Invalid(String),
}

impl Error {
    /// The reconcile's own error, out of the finalizer's wrapping.
    pub fn from_finalizer(e: kube::runtime::finalizer::Error<Self>) -> Self {
        use kube::runtime::finalizer::Error as F;
        match e {
            F::ApplyFailed(e) | F::CleanupFailed(e) => e,
            F::AddFinalizer(e) | F::RemoveFinalizer(e) => Self::Kube(e),
            other => Self::Invalid(other.to_string()),
        }
    }

    /// Whether the object changed on the server since the reconcile read it.
    pub fn is_conflict(&self) -> bool {
        matches!(self, Self::Kube(e) if is_conflict(e))
    }

    /// A short reason, for metrics.
    pub fn reason(&self) -> &'static str {
        match self {
            Self::Relay(e) => e.reason(),
            Self::Kube(e) if is_conflict(e) => "Conflict",
            Self::Kube(_) => "Kube",
            Self::Invalid(_) => "Invalid",
        }
    }
}

/// Settings every reconcile reads.
#[derive(Debug, Clone)]
pub struct Settings {
    /// How often an object in place is checked against the relay.
    pub resync: Duration,
    /// How often a tenant's usage is read into its status.
    pub usage_interval: Duration,
    /// How long a deletion keeps trying to reach the relay before it lets the object go.
    pub deletion_timeout: Duration,
    /// The URL written to API key Secrets (`relayUrl`), for clients.
    pub public_relay_url: String,
}

/// The shared context.
pub struct Context {
    /// Kubernetes.
    pub client: kube::Client,
    /// The relay.
    pub relay: AdminClient,
    /// Settings.
    pub settings: Settings,
    /// Metrics.
    pub metrics: Arc<Metrics>,
    recorder: Recorder,
    verified: Mutex<HashMap<String, tokio::time::Instant>>,
    failures: Mutex<HashMap<String, u32>>,
}

impl Context {
    /// A context; events are reported as `reporter`.
    pub fn new(
        client: kube::Client,
        relay: AdminClient,
        settings: Settings,
        metrics: Arc<Metrics>,
        reporter: Reporter,
    ) -> Self {
        Self {
            recorder: Recorder::new(client.clone(), reporter),
            client,
            relay,
            settings,
            metrics,
            verified: Mutex::default(),
            failures: Mutex::default(),
        }
    }

    /// Publishes an event about `obj`. A failure to publish is logged, not fatal.
    pub async fn event<K: Resource<DynamicType = ()>>(
        &self,
        obj: &K,
        warning: bool,
        reason: &str,
        action: &str,
        note: String,
    ) {
        let event = Event {
            type_: if warning {
                EventType::Warning
            } else {
                EventType::Normal
            },
            reason: reason.into(),
            note: Some(note),
            action: action.into(),
            secondary: None,
        };
        if let Err(e) = self.recorder.publish(&event, &obj.object_ref(&())).await {
            tracing::warn!(error = %e, reason, "could not publish an event");
        }
    }

    /// Whether `uid` was checked against the relay within the resync interval.
    pub fn recently_verified(&self, uid: &str) -> bool {
        self.verified
            .lock()
            .ok()
            .and_then(|m| m.get(uid).copied())
            .is_some_and(|at| at.elapsed() < self.settings.resync)
    }

    /// Records that `uid` was checked against the relay now.
    pub fn verified(&self, uid: &str) {
        if let Ok(mut m) = self.verified.lock() {
            m.insert(uid.to_string(), tokio::time::Instant::now());
        }
    }

    /// Forgets `uid` (deleted, or changed so that it must be checked again).
    pub fn forget(&self, uid: &str) {
        if let Ok(mut m) = self.verified.lock() {
            m.remove(uid);
        }
        if let Ok(mut m) = self.failures.lock() {
            m.remove(uid);
        }
    }

    /// A reconcile of `obj` succeeded: its backoff starts again from the bottom.
    pub fn succeeded<K: Resource>(&self, obj: &K) {
        if let Ok(mut m) = self.failures.lock() {
            m.remove(&uid(obj));
        }
    }

    /// The error policy: requeue after a capped exponential backoff (5 s, 10 s, … 5 min).
    pub fn backoff<K: Resource>(&self, obj: &K, kind: &str, error: &Error) -> Action {
        self.metrics.failed(kind, error.reason());
        if error.is_conflict() {
            // Worked from an object older than the one on the server (see
            // `reconcile::status`): again at once on the newer one, no backoff.
            tracing::debug!(kind, name = %obj.meta().name.as_deref().unwrap_or_default(), "the object changed meanwhile; reconciling the newer one");
            return Action::requeue(CONFLICT_RETRY);
        }
        let n = self
            .failures
            .lock()
            .map(|mut m| {
                let n = m.entry(uid(obj)).or_insert(0);
                *n = n.saturating_add(1);
                *n
            })
            .unwrap_or(1);
        let delay = backoff_delay(n);
        tracing::warn!(kind, name = %obj.meta().name.as_deref().unwrap_or_default(), error = %error, retry_in_s = delay.as_secs(), "reconcile failed");
        Action::requeue(delay)
    }
}

/// The `n`th consecutive failure's delay: 5 s doubling, at most 5 minutes.
/// How soon a reconcile that met a newer object runs again.
pub const CONFLICT_RETRY: Duration = Duration::from_millis(200);

/// The delay after the `n`th failure in a row: 5 s doubling up to 5 min.
pub fn backoff_delay(n: u32) -> Duration {
    let secs = 5u64.saturating_mul(1u64 << n.saturating_sub(1).min(10));
    Duration::from_secs(secs.min(300))
}

/// The object's uid (empty if it has none, as in hand-made test objects).
pub fn uid<K: Resource>(obj: &K) -> String {
    obj.meta().uid.clone().unwrap_or_default()
}

/// Now, ms since the epoch.
pub fn now_ms() -> i64 {
    k8s_openapi::jiff::Timestamp::now().as_millisecond()
}

/// A time (ms) as RFC 3339.
pub fn rfc3339(ms: i64) -> String {
    k8s_openapi::jiff::Timestamp::from_millisecond(ms)
        .map(|t| t.to_string())
        .unwrap_or_default()
}

/// RFC 3339 to ms.
pub fn parse_rfc3339(text: &str) -> Option<i64> {
    text.parse::<k8s_openapi::jiff::Timestamp>()
        .ok()
        .map(|t| t.as_millisecond())
}

/// Whether `obj` has been deleting for longer than `timeout`.
pub fn deletion_overdue<K: Resource>(obj: &K, timeout: Duration) -> bool {
    obj.meta().deletion_timestamp.as_ref().is_some_and(|t| {
        let since = now_ms() - t.0.as_millisecond();
        since > i64::try_from(timeout.as_millis()).unwrap_or(i64::MAX)
    })
}

/// `namespace/name`, for logs and labels.
pub fn object_key<K: Resource>(obj: &K) -> String {
    format!(
        "{}/{}",
        obj.meta().namespace.as_deref().unwrap_or_default(),
        obj.meta().name.as_deref().unwrap_or_default()
    )
}

/// The namespace of a namespaced object.
pub fn namespace<K: Resource>(obj: &K) -> Result<String, Error> {
    obj.meta()
        .namespace
        .clone()
        .ok_or_else(|| Error::Invalid(format!("{} has no namespace", obj.name_any())))
}

/// Whether a Kubernetes error is 409 Conflict (the object changed since it was read).
pub fn is_conflict(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == 409)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_and_caps() {
        let delays: Vec<u64> = (1..=9).map(|n| backoff_delay(n).as_secs()).collect();
        assert_eq!(delays, [5, 10, 20, 40, 80, 160, 300, 300, 300]);
        assert_eq!(backoff_delay(u32::MAX).as_secs(), 300);
    }

    #[test]
    fn times_round_trip() {
        let ms = 1_790_000_000_123;
        assert_eq!(parse_rfc3339(&rfc3339(ms)), Some(ms));
    }
}
