//! The edge: what faces clients. The tenant HTTP API and self-serve routes, the WebSocket
//! connection loop, the HTTP/1 server with its pre-authentication bounds, request-rate limits of
//! the HTTP endpoints, JSON body checks, TLS, and the admin API's routes and OpenAPI document
//! (`admin`, over the operations in `crate::tenancy::admin`), and the web dashboard
//! (`dashboard`). `router` composes them.

pub mod admin;
pub mod api;
pub mod connection;
pub mod dashboard;
pub mod httplimit;
pub mod jsonbody;
pub mod selfserve;
pub(crate) mod serve;
pub mod tls;

use axum::Router;
use axum::middleware::from_fn_with_state;

use crate::state::AppState;

/// The relay's whole HTTP surface: the tenant-facing routes, self-serve, the admin API under
/// `/admin/v1`, all under the same middleware (error counting; a request body must arrive
/// within the body timeout, issue 30; headers are bounded in `serve`).
pub fn router(state: AppState) -> Router {
    api::routes(&state)
        .merge(selfserve::router())
        .merge(dashboard::router())
        .nest("/admin/v1", admin::router(state.clone()))
        .layer(from_fn_with_state(state.clone(), api::count_errors))
        .layer(from_fn_with_state(state.clone(), api::body_in_time))
        .with_state(state)
}
