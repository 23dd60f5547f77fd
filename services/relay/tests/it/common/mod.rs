//! Test harness: an in-process relay on a loopback port over a real store (SQLite file or a
//! fresh Postgres database from `#[sqlx::test]`), and a real WebSocket client.
//!
//! Waits are bounded by [`WAIT`] so a missing frame fails the test instead of hanging it; no
//! test sleeps to make a race pass.

#![allow(dead_code, unreachable_pub, unused_imports)] // not every module uses every helper

use std::path::PathBuf;
use std::sync::Arc;

use repowire_relay::cluster::bus::Bus;
use repowire_relay::storage::store::Store;
use repowire_relay::storage::store::postgres::PgStore;
use repowire_relay::storage::store::sqlite::SqliteStore;
use repowire_relay::tenancy::apikey::KeyMode;
use repowire_relay::tenancy::token::Tokens;
use repowire_relay::{AppState, RelayConfig, tenancy::admin};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

mod admin_http;
pub use admin_http::{ADMIN, Admin, admin_cli};
pub use repowire_e2e::WAIT;
pub use repowire_e2e::client::{self, TestClient};

/// A database the relay can be (re)started on.
pub enum Db {
    /// A SQLite file in a temp dir.
    Sqlite(tempfile::TempDir),
    /// A fresh Postgres database.
    Postgres(sqlx::PgPool),
}

impl Db {
    pub fn sqlite() -> Self {
        Db::Sqlite(tempfile::tempdir().expect("temp dir"))
    }

    pub fn path(&self) -> Option<PathBuf> {
        match self {
            Db::Sqlite(dir) => Some(dir.path().join("relay.db")),
            Db::Postgres(_) => None,
        }
    }

    /// A store over this database (a new one each call, as a restarted process would open).
    pub async fn store(&self) -> Arc<dyn Store> {
        match self {
            Db::Sqlite(dir) => Arc::new(
                SqliteStore::open(&dir.path().join("relay.db"))
                    .await
                    .expect("open sqlite"),
            ),
            Db::Postgres(pool) => {
                Arc::new(PgStore::new(pool.clone()).await.expect("migrate postgres"))
            }
        }
    }
}

/// A running relay.
pub struct TestRelay {
    pub http: String,
    pub ws: String,
    pub state: AppState,
    shutdown: CancellationToken,
    task: JoinHandle<std::io::Result<()>>,
}

impl TestRelay {
    pub async fn start(db: &Db) -> Self {
        Self::start_with(db, RelayConfig::for_tests()).await
    }

    pub async fn start_with(db: &Db, config: RelayConfig) -> Self {
        Self::start_inner(db, config, None, None).await
    }

    /// A relay serving TLS with `tls`; `http`/`ws` use https/wss and the name `localhost`.
    pub async fn start_tls(db: &Db, tls: std::sync::Arc<rustls::ServerConfig>) -> Self {
        Self::start_inner(db, RelayConfig::for_tests(), None, Some(tls)).await
    }

    /// One pod of a cluster whose pods share `db` and reach each other through `bus`.
    pub async fn start_pod(db: &Db, bus: Arc<dyn Bus>) -> Self {
        Self::start_inner(db, RelayConfig::for_tests(), Some(bus), None).await
    }

    /// Like [`TestRelay::start_pod`], with settings.
    pub async fn start_pod_with(db: &Db, config: RelayConfig, bus: Arc<dyn Bus>) -> Self {
        Self::start_inner(db, config, Some(bus), None).await
    }

    async fn start_inner(
        db: &Db,
        config: RelayConfig,
        bus: Option<Arc<dyn Bus>>,
        tls: Option<std::sync::Arc<rustls::ServerConfig>>,
    ) -> Self {
        let store = db.store().await;
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let addr = listener.local_addr().expect("addr");
        let tokens = Tokens::new(
            config.jwt_secret.as_deref().unwrap_or_default().as_bytes(),
            config.token_ttl(),
        );
        let shutdown = CancellationToken::new();
        let (state, writer) = match bus {
            Some(bus) => AppState::with_bus(config, store, tokens, shutdown.clone(), bus),
            None => AppState::new(config, store, tokens, shutdown.clone()),
        };
        let (task, http, ws) = match tls {
            Some(tls) => (
                tokio::spawn(repowire_relay::run_tls(
                    listener,
                    tls,
                    state.clone(),
                    writer,
                )),
                format!("https://localhost:{}", addr.port()),
                format!("wss://localhost:{}/v1/ws", addr.port()),
            ),
            None => (
                tokio::spawn(repowire_relay::run(listener, state.clone(), writer)),
                format!("http://{addr}"),
                format!("ws://{addr}/v1/ws"),
            ),
        };
        Self {
            http,
            ws,
            state,
            shutdown,
            task,
        }
    }

    /// Cancels and waits for the drain to finish.
    pub async fn stop(self) {
        self.shutdown.cancel();
        tokio::time::timeout(WAIT, self.task)
            .await
            .expect("drained in time")
            .expect("join")
            .expect("serve");
    }

    /// Shutdown without waiting (to observe the drain from a client).
    pub fn begin_shutdown(&self) {
        self.shutdown.cancel();
    }

    /// A new tenant on the `unlimited` plan and a live key for it (scenarios that are not about
    /// limits must not run into the default plan's).
    pub async fn tenant(&self, name: &str) -> (String, String) {
        self.tenant_on(admin::NewTenant {
            name: name.to_owned(),
            plan: Some("unlimited".into()),
            ..Default::default()
        })
        .await
    }

    /// A new tenant as `new` says, and a live key for it with every scope (`approve` too: the
    /// people of these tests approve; `key_scopes.rs` checks what a key gets by default).
    pub async fn tenant_on(&self, new: admin::NewTenant) -> (String, String) {
        let t = admin::create_tenant(self.state.store.as_ref(), new)
            .await
            .expect("tenant");
        let every: Vec<String> = repowire_relay::tenancy::apikey::ALL_SCOPES
            .iter()
            .map(|s| (*s).to_owned())
            .collect();
        let k = admin::create_key(
            self.state.store.as_ref(),
            &t.id,
            KeyMode::Live,
            "test",
            None,
            Some(&every),
        )
        .await
        .expect("key");
        (t.id, k.text)
    }

    /// A connected client for a key.
    pub async fn client(&self, api_key: &str) -> TestClient {
        TestClient::connect(&self.http, &self.ws, api_key).await
    }

    /// The stored id of an API key (the JWT subject).
    pub async fn key_id(&self, api_key: &str) -> String {
        self.state
            .store
            .find_api_key_by_hash(&repowire_relay::tenancy::apikey::hash(api_key))
            .await
            .expect("db")
            .expect("key exists")
            .id
    }

    pub async fn metrics(&self) -> String {
        reqwest::get(format!("{}/metrics", self.http))
            .await
            .expect("metrics")
            .text()
            .await
            .expect("body")
    }
}

/// A relay with one tenant and two connected peers, `alice` and `bob` of circle `dev`: the
/// starting point of most scenarios.
pub struct Duo {
    pub relay: TestRelay,
    pub key: String,
    pub a: TestClient,
    pub alice: repowire_protocol::PeerInfo,
    pub b: TestClient,
    pub bob: repowire_protocol::PeerInfo,
}

impl Duo {
    pub async fn start(db: &Db) -> Self {
        Self::start_with(db, RelayConfig::for_tests()).await
    }

    pub async fn start_with(db: &Db, config: RelayConfig) -> Self {
        let relay = TestRelay::start_with(db, config).await;
        let (_, key) = relay.tenant("acme").await;
        let (mut a, mut b) = (relay.client(&key).await, relay.client(&key).await);
        let alice = a.peer("alice", "dev").await;
        let bob = b.peer("bob", "dev").await;
        Self {
            relay,
            key,
            a,
            alice,
            b,
            bob,
        }
    }
}

/// Reads a counter sample from Prometheus text (0 when absent).
pub fn counter(metrics: &str, series: &str) -> f64 {
    metrics
        .lines()
        .find(|l| l.starts_with(series) && l[series.len()..].starts_with(' '))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse().ok())
        .unwrap_or(0.0)
}

/// Runs one scenario against SQLite and against Postgres.
#[macro_export]
macro_rules! both_backends {
    ($($name:ident),* $(,)?) => {
        mod sqlite {
            $(
                #[tokio::test]
                async fn $name() {
                    super::$name($crate::common::Db::sqlite()).await;
                }
            )*
        }
        mod postgres {
            $(
                #[sqlx::test(migrations = false)]
                async fn $name(pool: sqlx::PgPool) {
                    super::$name($crate::common::Db::Postgres(pool)).await;
                }
            )*
        }
    };
}
