//! `repowire-operator run`: the controllers, behind the leader election, beside the health
//! and metrics server; SIGTERM or SIGINT stops them gracefully.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::Secret;
use kube::runtime::Controller;
use kube::runtime::events::Reporter;
use kube::runtime::reflector::{ObjectRef, Store};
use kube::runtime::watcher;
use kube::{Api, ResourceExt};

use crate::config::{Config, LogFormat};
use crate::context::{Context, MANAGER};
use crate::crd::{ApiKey, Tenant};
use crate::leader::{self, LeaseConfig};
use crate::metrics::Metrics;
use crate::reconcile::{apikey, secret, tenant};
use crate::relay::AdminClient;
use crate::server::{self, Health};

/// Sets up logging.
pub fn init_tracing(format: LogFormat) {
    repowire_logs::init(
        format,
        repowire_logs::Stream::Stderr,
        repowire_logs::env_filter("info"),
    );
}

/// Runs the operator until a signal (or the loss of leadership).
pub async fn run(config: Config) -> anyhow::Result<()> {
    let token = config.admin_token()?;
    let relay = AdminClient::new(
        &config.relay_url,
        token,
        Duration::from_secs(config.relay_timeout_secs),
    )?;
    let client = kube::Client::try_default().await?;
    let metrics = Arc::new(Metrics::default());
    let ready = Arc::new(AtomicBool::new(false));
    let listener = tokio::net::TcpListener::bind(config.listen).await?;
    tracing::info!(listen = %listener.local_addr()?, relay = relay.base(), namespace = config.namespace.as_deref().unwrap_or("(all)"), "repowire-operator starting");
    let app = server::router(Health {
        metrics: metrics.clone(),
        ready: ready.clone(),
    });
    tokio::spawn(async move {
        if let Err(e) = axum::serve(listener, app).await {
            tracing::error!(error = %e, "the health server stopped");
        }
    });
    let identity = config
        .identity
        .clone()
        .unwrap_or_else(|| format!("repowire-operator-{}", std::process::id()));
    let ctx = Arc::new(Context::new(
        client.clone(),
        relay,
        config.settings(),
        metrics.clone(),
        Reporter {
            controller: MANAGER.into(),
            instance: Some(identity.clone()),
        },
    ));
    let shutdown = shutdown_signal();
    tokio::pin!(shutdown);

    if !config.leader_election {
        ready.store(true, Ordering::Relaxed);
        metrics.set_leader(true);
        controllers(client, config.namespace.clone(), ctx, shutdown_signal()).await;
        return Ok(());
    }
    let lease = LeaseConfig {
        name: config.lease_name.clone(),
        namespace: config.lease_namespace.clone(),
        identity,
        duration: Duration::from_secs(config.lease_secs),
    };
    let (mut rx, election) = leader::elect(client.clone(), &lease).await?;
    ready.store(true, Ordering::Relaxed);
    tokio::select! {
        () = &mut shutdown => { drop(rx); let _ = election.await; return Ok(()); }
        leads = leader::leading(&mut rx) => if !leads { anyhow::bail!("the leader election ended"); }
    }
    tracing::info!(lease = %lease.name, identity = %lease.identity, "leading: starting the controllers");
    metrics.set_leader(true);
    let mut lost_rx = rx.clone();
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let stop = async move {
        let _ = stop_rx.await;
    };
    let run = tokio::spawn(controllers(client, config.namespace.clone(), ctx, stop));
    let lost = tokio::select! {
        () = &mut shutdown => false,
        () = leader::lost(&mut lost_rx) => true,
    };
    metrics.set_leader(false);
    let _ = stop_tx.send(());
    let _ = run.await;
    drop(rx);
    drop(lost_rx);
    // Dropping the receivers makes the election release the Lease and end.
    let _ = election.await;
    if lost {
        anyhow::bail!("lost the leader Lease: stopped reconciling; exiting to start again");
    }
    Ok(())
}

/// Both controllers, until `stop` completes (in-flight reconciles finish first).
pub async fn controllers(
    client: kube::Client,
    namespace: Option<String>,
    ctx: Arc<Context>,
    stop: impl std::future::Future<Output = ()> + Send + 'static,
) {
    let api = |c: &kube::Client| -> (Api<Tenant>, Api<ApiKey>, Api<Secret>) {
        match &namespace {
            Some(ns) => (
                Api::namespaced(c.clone(), ns),
                Api::namespaced(c.clone(), ns),
                Api::namespaced(c.clone(), ns),
            ),
            None => (
                Api::all(c.clone()),
                Api::all(c.clone()),
                Api::all(c.clone()),
            ),
        }
    };
    let (tenants, keys, secrets) = api(&client);
    let (tenants_for_keys, _, _) = api(&client);
    let (stop_tx, _) = tokio::sync::broadcast::channel::<()>(1);
    let stop_a = stop_tx.subscribe();
    let stop_b = stop_tx.subscribe();
    let on = |mut rx: tokio::sync::broadcast::Receiver<()>| async move {
        let _ = rx.recv().await;
    };
    let tenant_controller = Controller::new(tenants, watcher::Config::default())
        .graceful_shutdown_on(on(stop_a))
        .run(tenant::reconcile, tenant::error_policy, ctx.clone())
        .for_each(|r| async move {
            if let Err(e) = r {
                tracing::debug!(error = %e, "tenant reconcile ended in error");
            }
        });
    let key_controller = Controller::new(keys, watcher::Config::default());
    // A key waiting for its Tenant wakes when that Tenant changes (becomes Ready), found
    // through the controller's own cache of keys.
    let key_store = key_controller.store();
    let key_controller = key_controller
        .watches(
            tenants_for_keys,
            watcher::Config::default(),
            move |t: Tenant| keys_of(&key_store, &t),
        )
        .owns(
            secrets,
            watcher::Config::default()
                .labels(&format!("{}=repowire-operator", secret::MANAGED_LABEL)),
        )
        .graceful_shutdown_on(on(stop_b))
        .run(apikey::reconcile, apikey::error_policy, ctx)
        .for_each(|r| async move {
            if let Err(e) = r {
                tracing::debug!(error = %e, "api key reconcile ended in error");
            }
        });
    tokio::spawn(async move {
        stop.await;
        let _ = stop_tx.send(());
    });
    futures::join!(tenant_controller, key_controller);
    tracing::info!("controllers stopped");
}

/// The keys in `store` that name `tenant` (same namespace).
fn keys_of(store: &Store<ApiKey>, tenant: &Tenant) -> Vec<ObjectRef<ApiKey>> {
    let name = tenant.name_any();
    let namespace = tenant.namespace();
    store
        .state()
        .iter()
        .filter(|k| k.spec.tenant_ref.name == name && k.namespace() == namespace)
        .map(|k| ObjectRef::from_obj(k.as_ref()))
        .collect()
}

async fn shutdown_signal() {
    let ctrl_c = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        let mut term =
            match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
                Ok(s) => s,
                Err(_) => {
                    let _ = ctrl_c.await;
                    return;
                }
            };
        tokio::select! {
            _ = ctrl_c => {},
            _ = term.recv() => {},
        }
    }
    #[cfg(not(unix))]
    let _ = ctrl_c.await;
    tracing::info!("shutting down");
}
