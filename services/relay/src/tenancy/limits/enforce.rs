//! Enforcing a tenant's limits in this relay process: what a message, a registration or a
//! connection may spend, checked before anything is stored.
//!
//! - **Effective limits** are cached per tenant and read again after `refresh` (1 s by
//!   default) or at once when the bus says they changed ([`Enforcer::changed`]), so a plan or
//!   override change applies on every pod within a second even if the notice is lost.
//! - **Messages per minute** is one GCRA bucket per tenant on the bus (Redis: shared by every
//!   pod). A pod takes tokens in small chunks ([`chunk`]: 10 ms of the tenant's rate) and
//!   spends them locally for at most [`ALLOWANCE_LIFETIME`]: the hot path pays a round trip
//!   per chunk, not per message. Every accepted message spent a token Redis granted, so the
//!   cluster never exceeds the bucket's bound; a token may be spent up to the lifetime after it
//!   was granted, and unspent ones lapse (the tenant gets slightly less, never more).
//! - **Messages per month** compares the month's usage rows (committed messages, read at each
//!   refresh) plus what this pod admitted since with the quota. Messages admitted on other pods
//!   since the last refresh are not seen: the quota can be overrun by what the cluster accepts
//!   in one refresh interval.
//! - A check that cannot reach the bus lets the message through and counts it
//!   (`limit_checks_failed_open`): a Redis outage must not stop every tenant.

use std::collections::HashMap;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use repowire_protocol::ErrorCode;
use tokio::time::Instant;

use crate::cluster::bus::Bus;
use crate::cluster::bus::gcra::Rate;
use crate::ids::now_ms;
use crate::metrics::{LimitLabel, Metrics};
use crate::storage::store::{Limits, Store, StoreError, TenantKey};
use crate::tenancy::usage::calendar;

/// How long tokens taken from the cluster bucket may be spent by this pod.
pub const ALLOWANCE_LIFETIME: Duration = Duration::from_secs(1);

/// Tokens a pod takes from the cluster bucket at once: 10 ms of the tenant's rate, at least 1.
pub fn chunk(rate: Rate) -> u64 {
    (rate.per_minute / 6000).clamp(1, 1000)
}

/// Which limit refused a request (a metrics label).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reason {
    /// `max_message_bytes`.
    MessageBytes,
    /// `messages_per_minute`.
    MessagesPerMinute,
    /// `messages_per_month`.
    MessagesPerMonth,
    /// `max_peers`.
    Peers,
    /// `max_connections`.
    Connections,
    /// `max_state_bytes`.
    StateBytes,
    /// `max_stored_peers`.
    StoredPeers,
}

impl Reason {
    /// The label.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::MessageBytes => "message_bytes",
            Self::MessagesPerMinute => "messages_per_minute",
            Self::MessagesPerMonth => "messages_per_month",
            Self::Peers => "peers",
            Self::Connections => "connections",
            Self::StateBytes => "state_bytes",
            Self::StoredPeers => "stored_peers",
        }
    }
}

/// A request a limit refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LimitRefusal {
    /// Which limit.
    pub reason: Reason,
    /// The error code (`text_too_large`, `rate_limited`, `quota_exceeded`, `limit_exceeded`).
    pub code: ErrorCode,
    /// Why, with what to do.
    pub message: String,
    /// When a retry can succeed (rate, quota).
    pub retry_after_ms: Option<u64>,
    /// The tenant's plan (a metrics label).
    pub plan: String,
}

/// A tenant's limits as this pod last read them.
#[derive(Debug, Clone)]
pub struct Snapshot {
    /// The plan (a metrics label).
    pub plan: String,
    /// The effective limits.
    pub limits: Limits,
    /// Messages counted this month when read (only with a monthly quota).
    month_used: i64,
    /// The month read (its start, ms).
    month: i64,
    read_at: Instant,
}

#[derive(Debug, Default)]
struct Allowance {
    tokens: u64,
    granted_at: Option<Instant>,
}

#[derive(Debug, Default)]
struct TenantState {
    snapshot: Mutex<Option<Arc<Snapshot>>>,
    /// Messages this pod admitted since the snapshot was read.
    admitted: AtomicI64,
    /// Tokens of the cluster bucket this pod holds (one taker at a time, across the round trip).
    allowance: tokio::sync::Mutex<Allowance>,
}

/// A tenant and one of its limits.
type RefusalKind = (String, &'static str);

/// The limits of every tenant this pod serves.
#[derive(Debug)]
pub struct Enforcer {
    store: Arc<dyn Store>,
    bus: Arc<dyn Bus>,
    metrics: Arc<Metrics>,
    refresh: Duration,
    burst_secs: u64,
    slot_ttl: Duration,
    tenants: Mutex<HashMap<String, Arc<TenantState>>>,
    /// Where refusals are recorded for the tenant to see (the dashboard's overview).
    events: Arc<crate::cluster::events::EventLog>,
    /// When a refusal of each tenant and limit was last recorded, and how many came since: a
    /// flood of refused frames is recorded once a second, with its count, not once a frame.
    recorded: Mutex<HashMap<RefusalKind, (std::time::Instant, u64)>>,
}

#[allow(clippy::unwrap_used)] // a poisoned lock only follows a panic elsewhere
impl Enforcer {
    /// An enforcer reading limits from `store` at most every `refresh`, with message buckets on
    /// `bus` holding `burst_secs` seconds of a tenant's rate, and connection slots that live
    /// `slot_ttl` unless refreshed; refusals are recorded in `events`.
    pub fn new(
        store: Arc<dyn Store>,
        bus: Arc<dyn Bus>,
        metrics: Arc<Metrics>,
        refresh: Duration,
        (burst_secs, slot_ttl): (u64, Duration),
        events: Arc<crate::cluster::events::EventLog>,
    ) -> Self {
        Self {
            events,
            recorded: Mutex::new(HashMap::new()),
            store,
            bus,
            metrics,
            refresh,
            burst_secs,
            slot_ttl,
            tenants: Mutex::new(HashMap::new()),
        }
    }

    pub(super) fn bus(&self) -> &Arc<dyn Bus> {
        &self.bus
    }

    pub(super) fn slot_ttl_ms(&self) -> i64 {
        i64::try_from(self.slot_ttl.as_millis()).unwrap_or(i64::MAX / 4)
    }

    pub(super) fn failed_open(&self, tenant_id: &str, error: &crate::cluster::bus::BusError) {
        self.metrics.limit_checks_failed_open.inc();
        tracing::warn!(%error, tenant = tenant_id, "a limit could not be checked on the bus; letting the request through");
    }

    fn tenant(&self, tenant_id: &str) -> Arc<TenantState> {
        self.tenants
            .lock()
            .unwrap()
            .entry(tenant_id.to_owned())
            .or_default()
            .clone()
    }

    /// The limits of a tenant or of every tenant (`None`) changed: read them again at next use.
    pub fn changed(&self, tenant_id: Option<&str>) {
        let tenants = self.tenants.lock().unwrap();
        let stale = |t: &TenantState| *t.snapshot.lock().unwrap() = None;
        match tenant_id {
            Some(id) => tenants.get(id).into_iter().for_each(|t| stale(t)),
            None => tenants.values().for_each(|t| stale(t)),
        }
    }

    /// A tenant's limits, read again when older than the refresh interval.
    pub async fn snapshot(&self, tenant_id: &str) -> Result<Arc<Snapshot>, StoreError> {
        let state = self.tenant(tenant_id);
        let cached = state.snapshot.lock().unwrap().clone();
        if let Some(s) = cached
            && s.read_at.elapsed() < self.refresh
            && s.month == calendar::month_start(now_ms())
        {
            return Ok(s);
        }
        let fresh = Arc::new(self.read(tenant_id).await?);
        *state.snapshot.lock().unwrap() = Some(fresh.clone());
        state.admitted.store(0, Ordering::SeqCst);
        Ok(fresh)
    }

    async fn read(&self, tenant_id: &str) -> Result<Snapshot, StoreError> {
        let read_at = Instant::now();
        let month = calendar::month_start(now_ms());
        let Some(tenant) = self.store.find_tenant(TenantKey::Id(tenant_id)).await? else {
            // Deleted and purged while connected: its keys are revoked, nothing to limit.
            return Ok(Snapshot {
                plan: String::new(),
                limits: Limits::default(),
                month_used: 0,
                month,
                read_at,
            });
        };
        let plan = self.store.get_plan(&tenant.plan).await?.ok_or_else(|| {
            StoreError::Corrupt(format!(
                "tenant {} is on plan `{}`, which does not exist",
                tenant.id, tenant.plan
            ))
        })?;
        let limits = super::effective(&plan.limits, &tenant.overrides);
        let month_used = if limits.messages_per_month.is_some() {
            let end = calendar::next_month_start(month);
            self.store.messages_counted(&tenant.id, month, end).await?
        } else {
            0
        };
        Ok(Snapshot {
            plan: tenant.plan,
            limits,
            month_used,
            month,
            read_at,
        })
    }

    /// A refusal by `reason` for a tenant on `snapshot`'s plan; not counted until
    /// [`Enforcer::count`] (a refused retry of a stored message is answered `accepted`).
    pub fn refuse(
        &self,
        snapshot: &Snapshot,
        reason: Reason,
        code: ErrorCode,
        message: String,
        retry_after_ms: Option<u64>,
    ) -> LimitRefusal {
        LimitRefusal {
            reason,
            code,
            message,
            retry_after_ms,
            plan: snapshot.plan.clone(),
        }
    }

    /// Counts a refusal that was sent, by limit and plan, and records it for the tenant.
    pub fn count(&self, tenant_id: &str, refusal: &LimitRefusal) {
        if let Some(repeated) = self.to_record(tenant_id, refusal.reason.as_str()) {
            self.events.record(
                tenant_id,
                crate::cluster::events::TenantEvent::Refused {
                    at_ms: crate::ids::now_ms(),
                    limit: refusal.reason.as_str().to_owned(),
                    code: refusal.code.as_str().to_owned(),
                    message: refusal.message.clone(),
                    repeated,
                },
            );
        }
        self.metrics
            .limit_refusals
            .get_or_create(&LimitLabel {
                reason: refusal.reason.as_str(),
                plan: refusal.plan.clone(),
            })
            .inc();
    }

    /// Whether this refusal is recorded (at most once a second per tenant and limit), and how
    /// many of its kind were not since the last one that was.
    fn to_record(&self, tenant_id: &str, limit: &'static str) -> Option<u64> {
        let now = std::time::Instant::now();
        let mut recorded = self.recorded.lock().unwrap();
        if recorded.len() > 10_000 {
            recorded.retain(|_, (at, _)| now.duration_since(*at) < Duration::from_secs(1));
        }
        match recorded.get_mut(&(tenant_id.to_owned(), limit)) {
            Some((at, since)) if now.duration_since(*at) < Duration::from_secs(1) => {
                *since += 1;
                None
            }
            Some((at, since)) => {
                let repeated = *since;
                *at = now;
                *since = 0;
                Some(repeated)
            }
            None => {
                recorded.insert((tenant_id.to_owned(), limit), (now, 0));
                Some(0)
            }
        }
    }

    /// Whether a tenant may store one more message of `text_bytes`: its size, the month's
    /// quota, then the rate (a token is spent only when the others pass). Admitted: the limits
    /// it was admitted under (for the write: the inbox cap).
    pub async fn admit_message(
        &self,
        tenant_id: &str,
        text_bytes: usize,
    ) -> Result<Result<Arc<Snapshot>, LimitRefusal>, StoreError> {
        let snapshot = self.snapshot(tenant_id).await?;
        let limits = &snapshot.limits;
        if let Err(refusal) = self.fits(&snapshot, text_bytes) {
            return Ok(Err(refusal));
        }
        let state = self.tenant(tenant_id);
        if let Some(quota) = limits.messages_per_month {
            let used = snapshot.month_used + state.admitted.load(Ordering::SeqCst);
            if used >= quota {
                let reset = calendar::next_month_start(snapshot.month);
                let wait = u64::try_from(reset - now_ms()).unwrap_or(0).max(1);
                return Ok(Err(self.refuse(
                    &snapshot,
                    Reason::MessagesPerMonth,
                    ErrorCode::QuotaExceeded,
                    format!(
                        "this tenant's plan allows {quota} messages a month and they are used up; the quota resets at {}",
                        calendar::utc_string(reset)
                    ),
                    Some(wait),
                )));
            }
        }
        if let Some(per_minute) = limits.messages_per_minute {
            let rate = Rate::new(u64::try_from(per_minute).unwrap_or(1), self.burst_secs);
            if let Err(wait_us) = self.spend_token(tenant_id, &state, rate).await {
                return Ok(Err(self.refuse(
                    &snapshot,
                    Reason::MessagesPerMinute,
                    ErrorCode::RateLimited,
                    format!(
                        "this tenant's plan allows {per_minute} messages a minute across all its connections; nothing was accepted, retry later"
                    ),
                    Some(wait_us.div_ceil(1000).max(1)),
                )));
            }
        }
        state.admitted.fetch_add(1, Ordering::SeqCst);
        Ok(Ok(snapshot))
    }

    /// Whether a reply of `text_bytes` fits the tenant's message size (replies are not held to
    /// the rate or the quota: see `route::message`).
    pub async fn reply_fits(
        &self,
        tenant_id: &str,
        text_bytes: usize,
    ) -> Result<Result<Arc<Snapshot>, LimitRefusal>, StoreError> {
        let snapshot = self.snapshot(tenant_id).await?;
        Ok(self.fits(&snapshot, text_bytes).map(|()| snapshot))
    }

    fn fits(&self, snapshot: &Snapshot, text_bytes: usize) -> Result<(), LimitRefusal> {
        match snapshot.limits.max_message_bytes {
            Some(max) if i64::try_from(text_bytes).unwrap_or(i64::MAX) > max => Err(self.refuse(
                snapshot,
                Reason::MessageBytes,
                ErrorCode::TextTooLarge,
                format!(
                    "the text is {text_bytes} bytes; this tenant's plan allows {max} per message; shorten or split it"
                ),
                None,
            )),
            _ => Ok(()),
        }
    }

    /// Spends one token of the tenant's bucket, taking a chunk from the bus when this pod holds
    /// none (or only lapsed ones). `Err` is the µs until one would be granted.
    async fn spend_token(
        &self,
        tenant_id: &str,
        state: &TenantState,
        rate: Rate,
    ) -> Result<(), u64> {
        let mut allowance = state.allowance.lock().await;
        let fresh = allowance
            .granted_at
            .is_some_and(|at| at.elapsed() < ALLOWANCE_LIFETIME);
        if allowance.tokens > 0 && fresh {
            allowance.tokens -= 1;
            return Ok(());
        }
        match self.bus.take_tokens(tenant_id, rate, chunk(rate)).await {
            Ok(grant) if grant.granted > 0 => {
                allowance.tokens = grant.granted - 1;
                allowance.granted_at = Some(Instant::now());
                Ok(())
            }
            Ok(grant) => {
                allowance.tokens = 0;
                Err(grant.retry_after_us)
            }
            Err(error) => {
                self.failed_open(tenant_id, &error);
                Ok(())
            }
        }
    }

    /// A tenant's inbox cap, if its plan sets one.
    pub async fn inbox_cap(&self, tenant_id: &str) -> Result<Option<i64>, StoreError> {
        Ok(self.snapshot(tenant_id).await?.limits.inbox_cap)
    }
}
