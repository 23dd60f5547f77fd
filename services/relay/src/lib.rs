//! The Repowire relay: authenticated WebSocket routing between agent sessions, with durable
//! per-peer inboxes.
//!
//! Components:
//! - [`config`]: the one configuration struct (flags + env).
//! - [`api`]: HTTP routes (token exchange, WebSocket upgrade, health, metrics) and
//!   [`admin`] (tenants and API keys, HTTP and CLI).
//! - [`connection`]: one WebSocket connection's loop; [`route`]: the handlers of client frames,
//!   where the routing semantics live.
//! - [`hub`]: live state of this process (connections, bound peers, delivery order).
//! - [`writer`]: batched durable writes; [`dispatch`]: fan-out after each commit.
//! - [`store`]: the storage trait with Postgres and SQLite implementations.
//! - [`bus`]: what pods share besides the database (presence, name claims, pod-addressed
//!   events); [`cluster`] sends on it, [`inbound`] applies what other pods send.
//! - [`datadir`]: the embedded relay's private data directory, its lock and secret files.
//! - [`apikey`], [`token`]: API keys and the JWTs they are exchanged for.
//! - [`keycheck`]: closes live connections whose key was revoked or expired, by any path.
//! - [`metrics`], [`sweeper`] (message expiry), [`tls`] (optional rustls listener); `serve`
//!   serves HTTP with the bounds that hold before authentication (header and body deadlines,
//!   a cap on pending connections).
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

pub mod admin;
pub mod api;
pub mod apikey;
pub mod bus;
pub mod cluster;
pub mod config;
pub mod connection;
pub mod datadir;
pub mod directory;
pub mod dispatch;
pub mod error;
pub mod flusher;
pub mod gcra;
pub mod httplimit;
pub mod hub;
pub mod ids;
pub mod inbound;
pub mod jsonbody;
pub mod keycheck;
pub mod limits;
pub mod metrics;
pub mod route;
pub mod selfserve;
mod serve;
pub mod state;
pub mod store;
pub mod sweeper;
pub mod telemetry;
pub mod tls;
pub mod token;
pub mod usage;
pub mod writer;

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
        tls::TlsListener::new(listener, tls, pending)?,
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
    let sweeper = tokio::spawn(sweeper::run(state.clone()));
    let inbound = tokio::spawn(inbound::run(state.clone()));
    let catch_ups = tokio::spawn(route::run_catch_ups(state.clone()));
    let keycheck = tokio::spawn(keycheck::run(state.clone()));
    let flusher = tokio::spawn(flusher::run(state.clone()));
    serve::serve(listener, api::router(state.clone()), &state).await;
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
    if tokio::time::timeout(drain, flusher::flush(&state))
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
