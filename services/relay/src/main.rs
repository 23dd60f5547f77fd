//! `repowire-relay`: parse config, set up tracing, open storage, then serve or run an admin
//! command. Everything else is in the library.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::{Context, bail};
use clap::Parser;
use repowire_relay::apikey::KeyMode;
use repowire_relay::config::{AdminCommand, Command, KeyCommand, TenantCommand};
use repowire_relay::store::Store;
use repowire_relay::store::postgres::PgStore;
use repowire_relay::store::sqlite::SqliteStore;
use repowire_relay::telemetry::Exporter;
use repowire_relay::token::Tokens;
use repowire_relay::{AppState, Config, RelayConfig, admin};
use tokio_util::sync::CancellationToken;

fn main() -> ExitCode {
    let mut config = Config::parse();
    // One pod id for the whole process: the cluster and the trace resource both name it.
    config.relay.pod_id = Some(config.relay.pod());
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    // The span exporter runs on this runtime, so it is set up inside it.
    let exporter = match runtime.block_on(async { init_tracing(&config.relay) }) {
        Ok(exporter) => exporter,
        Err(e) => {
            eprintln!("error: {e:#}");
            return ExitCode::FAILURE;
        }
    };
    let result = runtime.block_on(run(config));
    if let Some(exporter) = exporter {
        // The runtime's workers are still running: they send the last spans.
        exporter.shutdown();
    }
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

/// Logs to stdout (JSON or text, filtered by `RUST_LOG`) and, with an OTLP endpoint, spans to
/// the collector.
fn init_tracing(relay: &RelayConfig) -> anyhow::Result<Option<Exporter>> {
    use tracing_subscriber::Layer as _;
    use tracing_subscriber::layer::SubscriberExt as _;
    use tracing_subscriber::util::SubscriberInitExt as _;
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let logs = if relay.log_format == "text" {
        tracing_subscriber::fmt::layer().with_filter(filter).boxed()
    } else {
        tracing_subscriber::fmt::layer()
            .json()
            .flatten_event(true)
            .with_filter(filter)
            .boxed()
    };
    let registry = tracing_subscriber::registry().with(logs);
    match relay.otlp_endpoint.as_deref().filter(|e| !e.is_empty()) {
        Some(endpoint) => {
            let pod = relay.pod();
            let (exporter, spans) = Exporter::otlp(endpoint, &pod)
                .with_context(|| format!("setting up OTLP export to {endpoint}"))?;
            registry.with(spans).init();
            tracing::info!(%endpoint, %pod, "exporting traces over OTLP");
            Ok(Some(exporter))
        }
        None => {
            registry.init();
            Ok(None)
        }
    }
}

fn default_data_dir() -> PathBuf {
    let base = std::env::var_os("XDG_DATA_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".local/share")))
        .unwrap_or_else(|| PathBuf::from("."));
    base.join("repowire-relay")
}

async fn open_store(config: &RelayConfig, data_dir: &Path) -> anyhow::Result<Arc<dyn Store>> {
    Ok(match config.database_url.as_deref() {
        Some(url) if url.starts_with("postgres://") || url.starts_with("postgresql://") => {
            Arc::new(
                PgStore::connect(url, config.db_pool)
                    .await
                    .context("connecting to Postgres")?,
            )
        }
        Some(other) => bail!(
            "DATABASE_URL must be a postgres:// URL (got `{}`)",
            other.split(':').next().unwrap_or("")
        ),
        None => {
            std::fs::create_dir_all(data_dir)
                .with_context(|| format!("creating {}", data_dir.display()))?;
            let path = data_dir.join("relay.db");
            Arc::new(
                SqliteStore::open(&path)
                    .await
                    .with_context(|| format!("opening {}", path.display()))?,
            )
        }
    })
}

/// The JWT secret: configured, or (embedded mode only) generated once into the data dir so
/// tokens survive restarts.
fn jwt_secret(config: &RelayConfig, data_dir: &Path) -> anyhow::Result<Vec<u8>> {
    if let Some(secret) = &config.jwt_secret {
        if secret.len() < 32 {
            bail!("REPOWIRE_JWT_SECRET must be at least 32 characters");
        }
        return Ok(secret.as_bytes().to_vec());
    }
    if config.database_url.is_some() {
        bail!("set REPOWIRE_JWT_SECRET: with Postgres every relay pod must verify the same tokens");
    }
    let path = data_dir.join("jwt-secret");
    if let Ok(existing) = std::fs::read_to_string(&path) {
        return Ok(existing.trim().as_bytes().to_vec());
    }
    let secret: String = (0..48)
        .map(|_| format!("{:02x}", rand::random::<u8>()))
        .collect();
    write_private(&path, &secret)?;
    Ok(secret.into_bytes())
}

fn write_private(path: &Path, contents: &str) -> anyhow::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
        .with_context(|| format!("creating {}", path.display()))?;
    file.write_all(contents.as_bytes())?;
    Ok(())
}

async fn run(config: Config) -> anyhow::Result<()> {
    let relay = config.relay;
    let data_dir = relay.data_dir.clone().unwrap_or_else(default_data_dir);
    match config.command {
        Some(Command::Admin { command }) => {
            let store = open_store(&relay, &data_dir).await?;
            admin_command(store.as_ref(), command).await
        }
        Some(Command::Serve) | None => {
            // Configuration is checked before anything touches storage.
            if relay.database_url.is_none() {
                std::fs::create_dir_all(&data_dir)
                    .with_context(|| format!("creating {}", data_dir.display()))?;
            }
            let tokens = Tokens::new(&jwt_secret(&relay, &data_dir)?, relay.token_ttl());
            let tls = match (&relay.tls_cert, &relay.tls_key) {
                (Some(cert), Some(key)) => Some(repowire_relay::tls::server_config(cert, key)?),
                _ => None,
            };
            let store = open_store(&relay, &data_dir).await?;
            serve(relay, store, tokens, tls).await
        }
    }
}

async fn serve(
    relay: RelayConfig,
    store: Arc<dyn Store>,
    tokens: Tokens,
    tls: Option<Arc<rustls::ServerConfig>>,
) -> anyhow::Result<()> {
    if let Some((tenant, key)) = admin::bootstrap(store.as_ref()).await? {
        println!(
            "Created tenant `{}` ({}) and its first API key. It is shown once; keep it:",
            tenant.name, tenant.id
        );
        println!();
        println!("    {}", key.text);
        println!();
    }
    let listener = tokio::net::TcpListener::bind(relay.listen)
        .await
        .with_context(|| format!("binding {}", relay.listen))?;
    let addr = listener.local_addr()?;
    tracing::info!(%addr, storage = store.backend(), tls = tls.is_some(), "repowire relay listening (WebSocket at /v1/ws)");
    let shutdown = CancellationToken::new();
    tokio::spawn(signals(shutdown.clone()));
    let (state, writer) = match (&relay.redis_url, relay.database_url.is_some()) {
        (Some(url), true) => {
            let pod = relay.pod();
            let bus = repowire_relay::bus::redis::RedisBus::connect(url, &relay.redis_prefix, &pod)
                .await
                .context("connecting to Redis")?;
            tracing::info!(%pod, prefix = %relay.redis_prefix, "one pod of a cluster: presence and cross-pod delivery through Redis");
            AppState::with_bus(relay, store, tokens, shutdown, Arc::new(bus))
        }
        (Some(_), false) => {
            tracing::warn!("REDIS_URL is ignored: an embedded (SQLite) relay is a single process");
            AppState::new(relay, store, tokens, shutdown)
        }
        (None, _) => AppState::new(relay, store, tokens, shutdown),
    };
    match tls {
        Some(tls) => repowire_relay::run_tls(listener, tls, state, writer).await?,
        None => repowire_relay::run(listener, state, writer).await?,
    }
    tracing::info!("relay stopped");
    Ok(())
}

async fn signals(shutdown: CancellationToken) {
    let mut term = match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
        Ok(s) => s,
        Err(error) => {
            tracing::error!(%error, "cannot listen for SIGTERM");
            return;
        }
    };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => tracing::info!("interrupt: draining"),
        _ = term.recv() => tracing::info!("SIGTERM: draining"),
    }
    shutdown.cancel();
}

async fn admin_command(store: &dyn Store, command: AdminCommand) -> anyhow::Result<()> {
    match command {
        AdminCommand::Tenant(TenantCommand::Create { name }) => {
            let t = admin::create_tenant(store, &name).await?;
            println!("{}\t{}", t.id, t.name);
        }
        AdminCommand::Tenant(TenantCommand::List) => {
            for t in store.list_tenants().await? {
                println!("{}\t{}\t{}", t.id, t.name, t.plan);
            }
        }
        AdminCommand::Key(KeyCommand::Create {
            tenant,
            label,
            test,
            expires_in_days,
        }) => {
            let mode = if test { KeyMode::Test } else { KeyMode::Live };
            let k = admin::create_key(store, &tenant, mode, &label, expires_in_days).await?;
            eprintln!(
                "key {} for tenant {} (shown once):",
                k.record.id, k.record.tenant_id
            );
            println!("{}", k.text);
        }
        AdminCommand::Key(KeyCommand::List { tenant }) => {
            for k in admin::list_keys(store, &tenant).await? {
                let state = if k.revoked_at_ms.is_some() {
                    "revoked"
                } else {
                    "active"
                };
                println!("{}\t{}\t{}\t{}", k.id, k.display, state, k.label);
            }
        }
        AdminCommand::Key(KeyCommand::Revoke { key_id }) => {
            admin::revoke_key(store, None, &key_id).await?;
            println!("revoked {key_id}");
        }
    }
    Ok(())
}
