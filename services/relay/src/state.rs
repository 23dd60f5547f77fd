//! `AppState`: cheap handles shared by every request and connection.

use std::ops::Deref;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use tokio::sync::Semaphore;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::cluster::Cluster;
use crate::cluster::bus::Bus;
use crate::cluster::bus::memory::MemoryBus;
use crate::config::RelayConfig;
use crate::metrics::Metrics;
use crate::routing::directory::Directory;
use crate::routing::dispatch::Dispatcher;
use crate::routing::hub::Hub;
use crate::storage::store::Store;
use crate::storage::writer::Writer;
use crate::tenancy::limits::enforce::Enforcer;
use crate::tenancy::token::Tokens;

/// Shared state; clone freely.
#[derive(Clone, Debug)]
pub struct AppState(Arc<Inner>);

/// What [`AppState`] holds.
#[derive(Debug)]
pub struct Inner {
    /// Settings.
    pub config: RelayConfig,
    /// Durable storage.
    pub store: Arc<dyn Store>,
    /// Live state of this process.
    pub hub: Arc<Hub>,
    /// The write path.
    pub writer: Writer,
    /// JWT issue/verify.
    pub tokens: Tokens,
    /// Metrics.
    pub metrics: Arc<Metrics>,
    /// Root shutdown token: cancelled on SIGTERM/Ctrl-C.
    pub shutdown: CancellationToken,
    /// Connection tasks, awaited on shutdown.
    pub tracker: TaskTracker,
    /// Connection slots.
    pub conn_slots: Arc<Semaphore>,
    /// The other pods (presence, forwarding); a single-process bus when there are none.
    pub cluster: Arc<Cluster>,
    /// Stored peers kept for name resolution, dropped when a registration may change them.
    pub directory: Directory,
    /// Tenant limits: what a message, registration or connection may spend.
    pub limits: Enforcer,
    /// The request rate of the tenant-facing HTTP endpoints, per credential.
    pub http_limit: crate::edge::httplimit::HttpLimiter,
    /// Failed token exchanges, per source address.
    pub failed_auth: crate::edge::httplimit::FailureLimiter,
    /// Connection time and peaks measured here, until the next usage flush.
    pub meter: Arc<crate::tenancy::usage::meter::Meter>,
    /// Bytes queued to every connection of this process, against `--outbound-budget-bytes`.
    pub outbound_budget: Arc<crate::routing::hub::Budget>,
    /// Connections not yet authenticated (HTTP requests, upgrades in progress), against
    /// `--max-pending-connections`.
    pub pending_slots: Arc<Semaphore>,
    /// Sign-ups per source address (see [`crate::edge::dashboard::signup`]).
    pub signups: crate::edge::dashboard::signup::SignupLimiter,
    /// The dashboard's OpenID Connect provider, when configured (`--oidc-issuer`).
    pub oidc: Option<Arc<crate::edge::dashboard::oidc::idp::Idp>>,
    /// The dashboard's person connections on this pod (see [`crate::edge::dashboard::human`]).
    pub humans: crate::edge::dashboard::human::Humans,
    draining: AtomicBool,
}

impl std::fmt::Debug for dyn Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Store({})", self.backend())
    }
}

impl Deref for AppState {
    type Target = Inner;
    fn deref(&self) -> &Inner {
        &self.0
    }
}

impl AppState {
    /// Builds the state of a single-process relay and starts the writer task (returned for
    /// shutdown).
    pub fn new(
        config: RelayConfig,
        store: Arc<dyn Store>,
        tokens: Tokens,
        shutdown: CancellationToken,
    ) -> (Self, JoinHandle<()>) {
        let bus: Arc<dyn Bus> = Arc::new(MemoryBus::new(config.pod()));
        Self::with_bus(config, store, tokens, shutdown, bus)
    }

    /// Like [`AppState::new`], as one pod of a cluster sharing `bus`.
    pub fn with_bus(
        config: RelayConfig,
        store: Arc<dyn Store>,
        tokens: Tokens,
        shutdown: CancellationToken,
        bus: Arc<dyn Bus>,
    ) -> (Self, JoinHandle<()>) {
        let hub = Arc::new(Hub::default());
        // In a cluster, answers are kept only once change notices are heard (cluster::run).
        let directory = Directory::new(!bus.shared());
        let metrics = Arc::new(Metrics::new());
        let events = crate::cluster::events::EventLog::start(bus.clone(), config.event_log_len);
        let limits = Enforcer::new(
            store.clone(),
            bus.clone(),
            metrics.clone(),
            std::time::Duration::from_millis(config.limits_refresh_ms),
            (config.rate_burst_secs, config.presence_ttl()),
            events.clone(),
        );
        let cluster = Cluster::start(bus, config.presence_ttl(), events);
        let dispatcher = Arc::new(Dispatcher::new(
            hub.clone(),
            metrics.clone(),
            cluster.clone(),
        ));
        let (writer, writer_task) = Writer::spawn(
            store.clone(),
            dispatcher,
            metrics.clone(),
            config.write_batch,
        );
        let conn_slots = Arc::new(Semaphore::new(config.max_connections));
        let outbound_budget = crate::routing::hub::Budget::new(config.outbound_budget_bytes);
        let failed_auth = crate::edge::httplimit::FailureLimiter::new(
            config.failed_auth_per_minute,
            config.failed_auth_burst,
        );
        let signups_per_hour = config.signups_per_hour;
        // `main` refuses to start with settings that do not check.
        let oidc = config
            .oidc()
            .ok()
            .flatten()
            .and_then(|settings| crate::edge::dashboard::oidc::idp::Idp::new(settings).ok())
            .map(Arc::new);
        let pending_slots = Arc::new(Semaphore::new(config.max_pending_connections.max(1)));
        let http_limit = crate::edge::httplimit::HttpLimiter::new(
            config.http_requests_per_minute,
            config.http_burst,
        );
        let state = Self(Arc::new(Inner {
            config,
            store,
            hub,
            writer,
            tokens,
            metrics,
            shutdown,
            tracker: TaskTracker::new(),
            conn_slots,
            cluster,
            directory,
            limits,
            meter: Arc::default(),
            http_limit,
            failed_auth,
            outbound_budget,
            pending_slots,
            humans: Default::default(),
            signups: crate::edge::dashboard::signup::SignupLimiter::new(signups_per_hour),
            oidc,
            draining: AtomicBool::new(false),
        }));
        (state, writer_task)
    }

    /// The ids of a tenant's live peers on every pod (presence from the bus; when the bus
    /// cannot be read, this pod's own).
    pub async fn live_peer_ids(&self, tenant_id: &str) -> std::collections::HashSet<String> {
        let mut live = self.local_peer_ids(tenant_id);
        live.extend(self.cluster.remote_live(tenant_id).await.into_keys());
        live
    }

    /// Like [`AppState::live_peer_ids`], failing when the cluster bus cannot be read (for a
    /// caller that must not take a peer live elsewhere for an offline one).
    pub async fn live_peer_ids_strict(
        &self,
        tenant_id: &str,
    ) -> crate::cluster::bus::Result<std::collections::HashSet<String>> {
        let mut live = self.local_peer_ids(tenant_id);
        live.extend(
            self.cluster
                .remote_live_strict(tenant_id)
                .await?
                .into_keys(),
        );
        Ok(live)
    }

    /// The ids of a tenant's peers live on this pod.
    fn local_peer_ids(&self, tenant_id: &str) -> std::collections::HashSet<String> {
        self.hub
            .live_peers(tenant_id)
            .into_iter()
            .map(|p| p.record.peer_id)
            .collect()
    }

    /// True once shutdown began: `/readyz` fails and new connections are refused.
    pub fn draining(&self) -> bool {
        self.draining.load(Ordering::SeqCst) || self.shutdown.is_cancelled()
    }

    /// Marks the process as draining.
    pub fn start_draining(&self) {
        self.draining.store(true, Ordering::SeqCst);
    }
}
