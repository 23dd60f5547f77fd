//! The Repowire relay: authenticated WebSocket routing between agent sessions, with durable
//! per-peer inboxes.
//!
//! Its folders are its layers (DESIGN §11–12); imports point down, never up:
//! - [`edge`]: what faces clients — the HTTP routers ([`edge::router`]: token exchange,
//!   WebSocket upgrade, health, metrics, self-serve, the admin API), one WebSocket
//!   connection's loop, the HTTP server with its pre-authentication bounds, TLS.
//! - [`routing`]: [`routing::route`] (the handlers of client frames, where the routing semantics
//!   live), [`routing::dispatch`] (fan-out after each commit), [`routing::hub`] (this process's
//!   live connections and delivery order), [`routing::directory`], [`routing::sweeper`], and
//!   [`routing::inbound`] (applies what other pods send).
//! - [`state`]: the handles every request shares.
//! - [`cluster`]: pods as one relay — what this pod sends on the [`cluster::bus`].
//! - [`tenancy`]: limits, usage, API keys and tokens, the live-key check, and the admin
//!   operations on tenants, plans and keys ([`tenancy::admin`]).
//! - [`storage`]: the [`storage::store`] trait (Postgres, SQLite), the batched
//!   [`storage::writer`], the embedded relay's [`storage::datadir`].
//! - [`check`]: `repowire-relay check`, a client of the relay's public interface (the chart's
//!   `helm test`); nothing in the relay uses it.
//! - At the root, used by all: [`config`] (the one configuration struct), [`error`], [`ids`],
//!   [`metrics`], [`telemetry`].
//!
//! docs/architecture.md draws the layers and a message's path through them.
//!
//! [`run`] (or [`run_tls`]) serves a bound listener until the state's shutdown token is cancelled, then drains.

/// `--version`: the crate version and the git revision it was built from.
pub const VERSION: &str = concat!(
    env!("CARGO_PKG_VERSION"),
    " (",
    env!("REPOWIRE_GIT_REV"),
    ")"
);

#[cfg(feature = "check")]
pub mod check;
pub mod cluster;
pub mod config;
pub mod edge;
pub mod error;
pub mod ids;
pub mod metrics;
pub mod routing;
pub mod state;
pub mod storage;
pub mod telemetry;
pub mod tenancy;

use std::sync::Arc;

use axum::serve::ListenerExt;
use tokio::net::TcpListener;
use tokio::task::JoinHandle;

pub use config::{Config, RelayConfig};
pub use state::AppState;

/// Serves until `state.shutdown` is cancelled, then drains: readiness goes false, no new
/// connections are accepted, open ones are closed with 1001, and queued writes are committed,
/// all within the drain timeout.
pub async fn run(
    listener: TcpListener,
    state: AppState,
    writer_task: JoinHandle<()>,
) -> std::io::Result<()> {
    // Frames are small and pipelined: without TCP_NODELAY, Nagle's algorithm can hold one back
    // until the previous segment is acknowledged.
    let listener = listener.tap_io(|tcp| {
        if let Err(error) = tcp.set_nodelay(true) {
            tracing::warn!(%error, "could not set TCP_NODELAY");
        }
    });
    serve_on(listener, state, writer_task).await
}

/// Like [`run`], over TLS (`wss://`, `https://`).
pub async fn run_tls(
    listener: TcpListener,
    tls: Arc<rustls::ServerConfig>,
    state: AppState,
    writer_task: JoinHandle<()>,
) -> std::io::Result<()> {
    let pending = state.pending_slots.clone();
    serve_on(
        edge::tls::TlsListener::new(listener, tls, pending)?,
        state,
        writer_task,
    )
    .await
}

async fn serve_on<L>(
    listener: L,
    state: AppState,
    writer_task: JoinHandle<()>,
) -> std::io::Result<()>
where
    L: axum::serve::Listener<Addr = std::net::SocketAddr>,
{
    let sweeper = tokio::spawn(routing::sweeper::run(state.clone()));
    let inbound = tokio::spawn(routing::inbound::run(state.clone()));
    let catch_ups = tokio::spawn(routing::route::run_catch_ups(state.clone()));
    let keycheck = tokio::spawn(tenancy::keycheck::run(state.clone()));
    let flusher = tokio::spawn(tenancy::flusher::run(state.clone()));
    edge::serve::serve(listener, edge::router(state.clone()), &state).await;
    let drain = state.config.drain_timeout();
    state.tracker.close();
    if tokio::time::timeout(drain, state.tracker.wait())
        .await
        .is_err()
    {
        tracing::warn!(?drain, "connections did not close within the drain timeout");
    }
    if tokio::time::timeout(drain, state.writer.flush())
        .await
        .is_err()
    {
        tracing::warn!("queued writes did not finish within the drain timeout");
    }
    // Connections are closed: their time is measured to the end; store it.
    flusher.abort();
    if tokio::time::timeout(drain, tenancy::flusher::flush(&state))
        .await
        .is_err()
    {
        tracing::warn!("measured usage was not stored within the drain timeout");
    }
    sweeper.abort();
    inbound.abort();
    catch_ups.abort();
    keycheck.abort();
    // Everything queued before the flush is committed; nothing new can arrive.
    writer_task.abort();
    Ok(())
}
