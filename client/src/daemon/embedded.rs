//! With no relay configured, the daemon runs the relay library in-process: SQLite under the
//! state directory, bound to 127.0.0.1 on a free port. Local-only use and hosted use run the
//! same relay code; the daemon talks to this one over loopback exactly as to a remote one.

use std::path::Path;
use std::sync::Arc;

use anyhow::Context;
use clap::Parser;
use repowire_relay::storage::store::Store;
use repowire_relay::storage::store::sqlite::SqliteStore;
use repowire_relay::tenancy::token::Tokens;
use repowire_relay::{AppState, tenancy::admin};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use super::link::Endpoint;
use crate::config::write_private;

/// A running embedded relay.
pub struct EmbeddedRelay {
    /// How to reach it.
    pub endpoint: Endpoint,
    /// Ends after shutdown, once drained.
    pub task: JoinHandle<()>,
}

/// Starts the embedded relay.
pub async fn start(home: &Path, shutdown: CancellationToken) -> anyhow::Result<EmbeddedRelay> {
    let dir = home.join("relay");
    crate::config::ensure_home(&dir)?;
    let store: Arc<dyn Store> = Arc::new(
        SqliteStore::open_with(&dir.join("relay.db"), 2)
            .await
            .context("opening the embedded relay's database")?,
    );
    let api_key = api_key(store.as_ref(), &dir).await?;
    let secret = repowire_relay::storage::datadir::embedded_jwt_secret(&dir)?;
    // The relay's own settings, from this environment's REPOWIRE_* variables (a bad one is an
    // error that says which, not clap exiting the daemon).
    let mut config = repowire_relay::Config::try_parse_from(["repowire-relay"])
        .map_err(|e| {
            let said = e.to_string();
            anyhow::anyhow!(
                "the embedded relay cannot use this environment's settings: {}",
                said.lines()
                    .next()
                    .unwrap_or_default()
                    .trim_start_matches("error: ")
            )
        })?
        .relay;
    config.listen = std::net::SocketAddr::from(([127, 0, 0, 1], 0));
    config.database_url = None;
    config.redis_url = None;
    config.data_dir = Some(dir.clone());
    config.admin_token = None;
    // Other local users can reach loopback: with no admin token, /metrics answers nobody.
    config.metrics_auth = true;
    config.tls_cert = None;
    config.tls_key = None;
    let tokens = Tokens::new(&secret, config.token_ttl());
    let listener = tokio::net::TcpListener::bind(config.listen)
        .await
        .context("binding the embedded relay to loopback")?;
    let addr = listener.local_addr()?;
    let (state, writer) = AppState::new(config, store, tokens, shutdown);
    let task = tokio::spawn(async move {
        if let Err(error) = repowire_relay::run(listener, state, writer).await {
            tracing::error!(%error, "embedded relay stopped");
        }
    });
    tracing::info!(%addr, "embedded relay listening on loopback");
    Ok(EmbeddedRelay {
        endpoint: Endpoint {
            base: format!("http://{addr}"),
            api_key,
        },
        task,
    })
}

/// The key the daemon uses with its own relay: minted once, kept in a 0600 file.
async fn api_key(store: &dyn Store, dir: &Path) -> anyhow::Result<String> {
    let path = dir.join("api-key");
    if let Ok(key) = std::fs::read_to_string(&path) {
        return Ok(key.trim().to_owned());
    }
    let key = match admin::bootstrap(store).await? {
        Some((_, key)) => key.text,
        None => {
            let tenants = store.list_tenants().await?;
            let tenant = tenants
                .first()
                .context("the embedded relay has no tenant")?;
            // The laptop's own relay: its one user approves their own agents' tool calls.
            let every: Vec<String> = repowire_relay::tenancy::apikey::ALL_SCOPES
                .iter()
                .map(|s| (*s).to_owned())
                .collect();
            admin::create_key(
                store,
                &tenant.id,
                repowire_relay::tenancy::apikey::KeyMode::Live,
                "repowire daemon",
                None,
                Some(&every),
            )
            .await?
            .text
        }
    };
    write_private(&path, &key).with_context(|| format!("writing {}", path.display()))?;
    Ok(key)
}
