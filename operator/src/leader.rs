//! Leader election on a `coordination.k8s.io/v1` Lease, with kube-lease-manager (server-side
//! apply on the Lease with a field manager per replica, so two replicas cannot both take it). A replica reconciles only while
//! it holds the Lease; losing it stops the controllers at once (fencing), and the process
//! exits so that it starts again from a clean state.

use std::time::Duration;

use kube_lease_manager::{LeaseManager, LeaseManagerBuilder};
use tokio::sync::watch;

/// Lease settings.
#[derive(Debug, Clone)]
pub struct LeaseConfig {
    /// Lease name.
    pub name: String,
    /// Lease namespace.
    pub namespace: String,
    /// This replica's identity.
    pub identity: String,
    /// How long the Lease lasts without renewal.
    pub duration: Duration,
}

/// Joins the election: the receiver says whether this replica leads.
pub async fn elect(
    client: kube::Client,
    config: &LeaseConfig,
) -> anyhow::Result<(
    watch::Receiver<bool>,
    tokio::task::JoinHandle<Result<LeaseManager, kube_lease_manager::LeaseManagerError>>,
)> {
    let secs = config.duration.as_secs().max(2);
    let manager = LeaseManagerBuilder::new(client, &config.name)
        .with_namespace(&config.namespace)
        .with_identity(&config.identity)
        .with_duration(secs)
        // Renew a third of the way before expiry.
        .with_grace((secs / 3).max(1))
        // One field manager per replica: the Lease is taken by server-side apply without
        // force, and only a different manager's ownership of `holderIdentity` makes the API
        // server refuse a second taker (409). A shared manager would let both take it.
        .with_field_manager(format!("{}-{}", crate::context::MANAGER, config.identity))
        .build()
        .await?;
    Ok(manager.watch().await)
}

/// Waits until `rx` says this replica leads; `false` if the election ended first.
pub async fn leading(rx: &mut watch::Receiver<bool>) -> bool {
    rx.wait_for(|leading| *leading).await.is_ok()
}

/// Waits until `rx` says this replica no longer leads (or the election ended).
pub async fn lost(rx: &mut watch::Receiver<bool>) {
    let _ = rx.wait_for(|leading| !*leading).await;
}
