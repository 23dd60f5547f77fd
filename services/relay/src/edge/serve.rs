//! Serving HTTP/1 on accepted connections, with the bounds that hold before a client has
//! authenticated (issue 30): a deadline on each request's headers that also ends a connection
//! sitting idle before its first or next request (silent sockets, slow-loris), the body
//! deadline of [`crate::edge::router`], and a cap on the connections that are not (yet) an
//! authenticated WebSocket. A connection past the cap is closed at once, so silent sockets
//! cannot take the file descriptors that `/healthz`, `/v1/token` and real upgrades need.
//!
//! hyper's own HTTP/1 server does the work: `axum::serve` leaves its header-read timeout off
//! and offers no hook to set it. A connection holds its pending slot for as long as hyper
//! serves it as HTTP; an upgrade hands the socket to the WebSocket task (which holds a slot
//! of `--max-connections` instead) and frees it. WebSocket upgrades are HTTP/1.1 only, and
//! so is this server (the TLS listener offers only `http/1.1` in ALPN).

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::serve::Listener;
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio_util::task::TaskTracker;
use tower::ServiceExt;

use crate::edge::httplimit::ClientAddr;
use crate::state::AppState;

/// Serves `app` on `listener` until the state's shutdown token is cancelled, then waits (at
/// most the drain timeout) for the HTTP requests in progress to finish.
pub(crate) async fn serve<L>(mut listener: L, app: Router, state: &AppState)
where
    L: Listener<Addr = std::net::SocketAddr>,
{
    let mut http = http1::Builder::new();
    http.timer(TokioTimer::new())
        .header_read_timeout(Duration::from_secs(state.config.header_timeout_secs.max(1)));
    let http = Arc::new(http);
    let connections = TaskTracker::new();
    loop {
        let (io, addr) = tokio::select! {
            biased;
            () = state.shutdown.cancelled() => break,
            accepted = listener.accept() => accepted,
        };
        let Ok(pending) = state.pending_slots.clone().try_acquire_owned() else {
            state.metrics.pending_refused.inc();
            tracing::debug!(
                ?addr,
                "too many connections not yet authenticated: closed at once"
            );
            continue;
        };
        let app = app.clone();
        let service = hyper::service::service_fn(move |mut request: hyper::Request<Incoming>| {
            let app = app.clone();
            request.extensions_mut().insert(ClientAddr(addr));
            async move {
                let response = app.oneshot(request.map(axum::body::Body::new)).await;
                Ok::<_, Infallible>(response.unwrap_or_else(|never| match never {}))
            }
        });
        let (http, shutdown) = (http.clone(), state.shutdown.clone());
        connections.spawn(async move {
            let connection = http
                .serve_connection(TokioIo::new(io), service)
                .with_upgrades();
            tokio::pin!(connection);
            let served = tokio::select! {
                served = connection.as_mut() => served,
                () = shutdown.cancelled() => {
                    // Finish the request in progress, take no other.
                    connection.as_mut().graceful_shutdown();
                    connection.await
                }
            };
            if let Err(error) = served {
                tracing::debug!(%error, ?addr, "http connection ended with an error");
            }
            drop(pending);
        });
    }
    state.start_draining();
    // Connections registered after this see the cancelled token themselves
    // (`connection::serve`).
    state.hub.kick_all(
        repowire_protocol::CloseCode::GOING_AWAY,
        "relay shutting down; reconnect and resume",
    );
    drop(listener);
    connections.close();
    let drain = state.config.drain_timeout();
    if tokio::time::timeout(drain, connections.wait())
        .await
        .is_err()
    {
        tracing::warn!(
            ?drain,
            "http requests did not finish within the drain timeout"
        );
    }
}
