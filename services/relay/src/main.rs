//! `repowire-relay`: parse config, set up tracing, open storage, then serve or run an admin
//! command. Everything else is in the library.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::{Context, bail};
use clap::Parser;
use repowire_relay::config::Command;
use repowire_relay::storage::store::Store;
use repowire_relay::storage::store::postgres::PgStore;
use repowire_relay::storage::store::sqlite::SqliteStore;
use repowire_relay::telemetry::Exporter;
use repowire_relay::tenancy::token::Tokens;
use repowire_relay::{AppState, Config, RelayConfig, storage::datadir, tenancy::admin};
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
    // The admin CLI's stdout is its output (tables, JSON, a key): its logs go to stderr.
    let admin = matches!(config.command, Some(Command::Admin(_) | Command::Check(_)));
    let exporter = match runtime.block_on(async { init_tracing(&config.relay, admin) }) {
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
fn init_tracing(relay: &RelayConfig, admin: bool) -> anyhow::Result<Option<Exporter>> {
    use repowire_logs::{LogFormat, Stream};
    use tracing_subscriber::Layer as _;
    use tracing_subscriber::layer::SubscriberExt as _;
    use tracing_subscriber::util::SubscriberInitExt as _;
    if admin {
        // An admin command's output is its stdout; its diagnostics go to stderr.
        repowire_logs::init(
            LogFormat::Text,
            Stream::Stderr,
            repowire_logs::env_filter("warn"),
        );
        return Ok(None);
    }
    // Postgres NOTICEs that sqlx logs at INFO (`relation "_sqlx_migrations" already exists` on
    // every start) are not news: warnings and errors of the database still show.
    let filter = repowire_logs::env_filter("info,sqlx::postgres::notice=warn");
    let logs = repowire_logs::layer(relay.log_format, Stream::Stdout).with_filter(filter);
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

/// `repowire-relay check`: one line (or JSON) on stdout when the relay takes the key.
async fn check(args: &repowire_relay::config::CheckArgs) -> anyhow::Result<()> {
    let checked = repowire_relay::check::check(&args.relay_url, &args.api_key).await?;
    if args.json {
        println!(
            "{}",
            serde_json::json!({
                "relay": checked.url,
                "tenant_id": checked.tenant_id,
                "connection_id": checked.connection_id,
            })
        );
    } else {
        println!(
            "ok: {} took the key (tenant {}) and opened a WebSocket (connection {})",
            checked.url, checked.tenant_id, checked.connection_id
        );
    }
    Ok(())
}

fn default_data_dir() -> PathBuf {
    let base = std::env::var_os("XDG_DATA_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".local/share")))
        .unwrap_or_else(|| PathBuf::from("."));
    base.join("repowire-relay")
}

/// Where the store is: Postgres, or the embedded SQLite file in the data dir.
enum Storage<'a> {
    Postgres(&'a str),
    Embedded(PathBuf),
}

fn storage<'a>(config: &'a RelayConfig, data_dir: &Path) -> anyhow::Result<Storage<'a>> {
    match config.database_url.as_deref() {
        Some(url) if url.starts_with("postgres://") || url.starts_with("postgresql://") => {
            Ok(Storage::Postgres(url))
        }
        Some(other) => bail!(
            "DATABASE_URL must be a postgres:// URL (got `{}`)",
            other.split(':').next().unwrap_or("")
        ),
        None => Ok(Storage::Embedded(data_dir.join("relay.db"))),
    }
}

async fn open_store(config: &RelayConfig, storage: &Storage<'_>) -> anyhow::Result<Arc<dyn Store>> {
    Ok(match storage {
        Storage::Postgres(url) => Arc::new(
            PgStore::connect(url, config.db_pool)
                .await
                .context("connecting to Postgres")?,
        ),
        Storage::Embedded(path) => Arc::new(
            SqliteStore::open(path)
                .await
                .with_context(|| format!("opening {}", path.display()))?,
        ),
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
    Ok(datadir::embedded_jwt_secret(data_dir)?)
}

/// The commands that open the relay's storage.
enum OnStorage {
    Admin(repowire_relay::config::AdminArgs),
    Migrate,
    Serve,
}

async fn run(config: Config) -> anyhow::Result<()> {
    let relay = config.relay;
    // The check is a client of some relay: it touches no storage of its own.
    let command = match config.command {
        Some(Command::Check(args)) => return check(&args).await,
        Some(Command::Admin(admin)) => OnStorage::Admin(admin),
        Some(Command::Migrate) => OnStorage::Migrate,
        Some(Command::Serve) | None => OnStorage::Serve,
    };
    let data_dir = relay.data_dir.clone().unwrap_or_else(default_data_dir);
    let storage = storage(&relay, &data_dir)?;
    match command {
        OnStorage::Admin(admin) => {
            if let Storage::Embedded(path) = &storage
                && !path.exists()
            {
                if !admin.create {
                    bail!(
                        "no relay database at {}: give the relay's --data-dir (or DATABASE_URL), \
                         or add --create to start a new one",
                        path.display()
                    );
                }
                datadir::ensure_private_dir(&data_dir)?;
            }
            let store = open_store(&relay, &storage).await?;
            let (mut out, mut notes) = (std::io::stdout().lock(), std::io::stderr().lock());
            admin::cli::run(
                store.as_ref(),
                admin.command,
                admin.json,
                &mut out,
                &mut notes,
            )
            .await
        }
        OnStorage::Migrate => {
            let _held = match storage {
                Storage::Embedded(_) => {
                    datadir::ensure_private_dir(&data_dir)?;
                    Some(datadir::lock(&data_dir)?)
                }
                Storage::Postgres(_) => None,
            };
            let store = open_store(&relay, &storage).await?;
            tracing::info!(storage = store.backend(), "database schema up to date");
            Ok(())
        }
        OnStorage::Serve => {
            // Configuration is checked, and the data dir held, before anything touches storage.
            let held = match storage {
                Storage::Embedded(_) => {
                    datadir::ensure_private_dir(&data_dir)?;
                    Some(datadir::lock(&data_dir)?)
                }
                Storage::Postgres(_) => None,
            };
            let tokens = Tokens::new(&jwt_secret(&relay, &data_dir)?, relay.token_ttl());
            let tls = match (&relay.tls_cert, &relay.tls_key) {
                (Some(cert), Some(key)) => {
                    Some(repowire_relay::edge::tls::server_config(cert, key)?)
                }
                _ => None,
            };
            let store = open_store(&relay, &storage).await?;
            let bootstrap_file = relay
                .bootstrap_key_file
                .clone()
                .filter(|p| !p.as_os_str().is_empty())
                .or_else(|| {
                    matches!(storage, Storage::Embedded(_))
                        .then(|| data_dir.join("bootstrap-api-key"))
                });
            let served = serve(relay, store, tokens, tls, bootstrap_file).await;
            drop(held);
            served
        }
    }
}

/// On an empty database: with a key file, the `default` tenant and its first key, the key
/// written to the file before it is stored (so no stored key is one nobody can read); without
/// one, a line saying how to create a tenant. Safe when several pods start at once on one
/// database: one creates the tenant, the others find it there.
async fn bootstrap(store: &dyn Store, key_file: Option<&Path>) -> anyhow::Result<()> {
    if !store.list_tenants().await?.is_empty() {
        return Ok(());
    }
    let Some(path) = key_file else {
        tracing::warn!(
            "no tenants yet: create one with `repowire-relay admin tenant create NAME` and \
             `repowire-relay admin key create NAME`, or POST /admin/v1/tenants; or start a relay \
             with --bootstrap-key-file PATH to create a `default` tenant"
        );
        return Ok(());
    };
    let (tenant, key) = admin::default_tenant();
    datadir::write_secret(path, &key.text)?;
    match admin::store_first_tenant(store, &tenant, &key).await {
        Ok(true) => {
            tracing::info!(tenant = %tenant.id, key = %key.record.id, file = %path.display(), "created tenant `default` and its first API key (the key is in the file, mode 0600)");
            eprintln!(
                "Created tenant `default` ({}). Its first API key is in {} (readable only by you).",
                tenant.id,
                path.display()
            );
            Ok(())
        }
        outcome => {
            let _ = std::fs::remove_file(path);
            match outcome {
                Ok(_) => {
                    tracing::info!("another relay created the first tenant at the same moment");
                    Ok(())
                }
                Err(e) => Err(e.into()),
            }
        }
    }
}

async fn serve(
    relay: RelayConfig,
    store: Arc<dyn Store>,
    tokens: Tokens,
    tls: Option<Arc<rustls::ServerConfig>>,
    bootstrap_file: Option<PathBuf>,
) -> anyhow::Result<()> {
    if let Some(oidc) = relay.oidc().map_err(anyhow::Error::msg)? {
        repowire_relay::edge::dashboard::oidc::idp::Idp::new(oidc.clone())
            .map_err(anyhow::Error::msg)?;
        tracing::info!(issuer = %oidc.issuer, staff = oidc.staff.len(), "dashboard sign-in through OpenID Connect");
    }
    let listener = tokio::net::TcpListener::bind(relay.listen)
        .await
        .with_context(|| format!("binding {}", relay.listen))?;
    bootstrap(store.as_ref(), bootstrap_file.as_deref()).await?;
    let shutdown = CancellationToken::new();
    signals(shutdown.clone())?;
    let addr = listener.local_addr()?;
    tracing::info!(%addr, storage = store.backend(), tls = tls.is_some(), "repowire relay listening (WebSocket at /v1/ws)");
    let (state, writer) = match (&relay.redis_url, relay.database_url.is_some()) {
        (Some(url), true) => {
            let pod = relay.pod();
            let bus = repowire_relay::cluster::bus::redis::RedisBus::connect(
                url,
                &relay.redis_prefix,
                &pod,
            )
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

/// Handlers for SIGTERM and SIGINT, installed before the relay says it listens (a signal that
/// arrives right after that line drains the relay instead of killing it), then awaited.
fn signals(shutdown: CancellationToken) -> anyhow::Result<()> {
    use tokio::signal::unix::{SignalKind, signal};
    let mut term = signal(SignalKind::terminate()).context("listening for SIGTERM")?;
    let mut int = signal(SignalKind::interrupt()).context("listening for SIGINT")?;
    tokio::spawn(async move {
        tokio::select! {
            _ = int.recv() => tracing::info!("interrupt: draining"),
            _ = term.recv() => tracing::info!("SIGTERM: draining"),
        }
        shutdown.cancel();
    });
    Ok(())
}
