//! The web dashboard under `/dashboard`: a tenant's view of its mesh, served by the relay
//! itself. Server-rendered HTML (askama templates in `templates/dashboard/`, escaped by
//! default), forms that work without JavaScript, one stylesheet; docs/dashboard.md says why.
//!
//! - [`session`]: the session cookie, CSRF, and what a signed-in browser may do.
//! - [`signin`]: one-time sign-in links (`POST /v1/dashboard/links`, what `repowire dashboard`
//!   calls), sign-in with a link or an API key, logout.
//! - [`signup`]: self-serve sign-up (a tenant on the free plan and its first key), when on.
//! - [`overview`]: peers by circle and this month's usage against the plan.
//! - [`asks`]: the tenant's recent asks with their states and each recipient's, filtered.
//! - [`compose`]: send a notify or an ask as the person's `human` peer ([`human`]).
//! - [`approvals`]: open questions to `@approvers`, answered with a button (`approve`).
//! - [`events`]: the tenant's event log, newest first; [`stream`] follows it live (SSE).
//! - [`keys`]: the tenant's API keys: list, make (text shown once), revoke (`keys:manage`).
//! - [`usage`]: the month's usage as a CSV download.
//! - [`oidc`]: sign-in through the relay's OpenID Connect provider (members, sign-up, staff);
//!   [`members`]: inviting and removing the people who sign in that way (`keys:manage`).
//! - [`operator`]: the relay operator's pages (tenants, suspend/resume, plans), with an admin
//!   credential and a cookie of their own.
//! - [`page`]: the shared layout data, page errors, and the response headers every page gets.

pub mod approvals;
pub mod asks;
pub mod compose;
pub mod events;
pub mod human;
pub mod keys;
pub mod members;
pub mod oidc;
pub mod operator;
pub mod overview;
pub mod page;
pub mod session;
pub mod signin;
pub mod signup;
pub mod stream;
pub mod usage;

use axum::Router;
use axum::http::header;
use axum::middleware;
use axum::response::IntoResponse;
use axum::routing::{get, post};

use crate::state::AppState;

/// The stylesheet, served from the binary.
const APP_CSS: &str = include_str!("../../../assets/dashboard/app.css");
/// The event log's live view (the dashboard's only script).
const EVENTS_JS: &str = include_str!("../../../assets/dashboard/events.js");
/// The tab's icon (without one, browsers ask for `/favicon.ico`, outside the dashboard).
const ICON_SVG: &str = include_str!("../../../assets/dashboard/icon.svg");

/// The dashboard's routes, and the sign-in link endpoint of the tenant API.
pub fn router() -> Router<AppState> {
    let pages = Router::new()
        .route("/dashboard", get(overview::page))
        .route("/dashboard/", get(overview::page))
        .route("/dashboard/signin", get(signin::page).post(signin::submit))
        .route("/dashboard/logout", post(signin::logout))
        .route("/dashboard/signup", get(signup::page).post(signup::submit))
        .route("/dashboard/asks", get(asks::page))
        .route("/dashboard/compose", get(compose::page).post(compose::send))
        .route(
            "/dashboard/approvals",
            get(approvals::page).post(approvals::answer),
        )
        .route("/dashboard/events", get(events::page))
        .route("/dashboard/events/stream", get(stream::stream))
        .route("/dashboard/keys", get(keys::page).post(keys::create))
        .route("/dashboard/keys/revoke", post(keys::revoke))
        .route("/dashboard/usage.csv", get(usage::csv))
        .route(
            "/dashboard/members",
            get(members::page).post(members::invite),
        )
        .route("/dashboard/members/remove", post(members::remove))
        .route("/dashboard/oidc/start", post(oidc::start))
        .route("/dashboard/oidc/callback", get(oidc::callback))
        .route(
            "/dashboard/choose",
            get(oidc::choose::page).post(oidc::choose::pick),
        )
        .route("/dashboard/operator", get(operator::page))
        .route(
            "/dashboard/operator/signin",
            get(operator::signin).post(operator::signin_submit),
        )
        .route("/dashboard/operator/tenants", post(operator::tenant_action))
        .route("/dashboard/operator/logout", post(operator::logout))
        .route("/dashboard/assets/app.css", get(stylesheet))
        .route("/dashboard/assets/icon.svg", get(icon))
        .route("/dashboard/assets/events.js", get(script))
        .layer(middleware::from_fn(page::headers));
    Router::new()
        .route("/v1/dashboard/links", post(signin::mint_link))
        .merge(pages)
}

async fn icon() -> impl IntoResponse {
    (
        [
            (header::CONTENT_TYPE, "image/svg+xml"),
            (header::CACHE_CONTROL, "public, max-age=86400"),
        ],
        ICON_SVG,
    )
}

async fn script() -> impl IntoResponse {
    (
        [
            (header::CONTENT_TYPE, "text/javascript; charset=utf-8"),
            // Versioned like the stylesheet.
            (header::CACHE_CONTROL, "public, max-age=86400"),
        ],
        EVENTS_JS,
    )
}

async fn stylesheet() -> impl IntoResponse {
    (
        [
            (header::CONTENT_TYPE, "text/css; charset=utf-8"),
            // The URL carries the relay's version (`?v=`), so a new relay is a new URL.
            (header::CACHE_CONTROL, "public, max-age=86400"),
        ],
        APP_CSS,
    )
}
