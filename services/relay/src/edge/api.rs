//! The tenant-facing HTTP routes: token exchange, the WebSocket endpoint, health, readiness,
//! metrics; and the middleware every route of the relay runs under (see [`super::router`]).

use axum::extract::rejection::JsonRejection;
use axum::extract::ws::WebSocketUpgrade;
use axum::extract::{Query, Request, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Extension, Json, Router};
use repowire_protocol::ErrorCode;
use repowire_protocol::http::{TokenRequest, TokenResponse};
use serde::Deserialize;

use crate::edge::admin;
use crate::edge::connection::{self, Authed};
use crate::edge::httplimit::{ClientAddr, source};
use crate::error::AppError;
use crate::ids::now_ms;
use crate::state::AppState;
use crate::tenancy::apikey;
use crate::tenancy::token::{TokenError, bearer};

/// Read buffer per connection, allocated up front by tungstenite and grown on demand for a larger
/// frame: small, because most connections are idle most of the time (measured with
/// `repowire-bench`: 4 KiB here cost ~3 KiB more per idle connection than 1 KiB).
const READ_BUFFER: usize = 1024;

/// The tenant-facing routes (the edge's [`super::router`] adds the others and the middleware).
pub(super) fn routes(state: &AppState) -> Router<AppState> {
    Router::new()
        .route("/healthz", get(|| async { "ok" }))
        .route("/readyz", get(readyz))
        .route("/metrics", {
            let route = get(metrics);
            if state.config.metrics_auth {
                route.layer(middleware::from_fn_with_state(
                    state.clone(),
                    admin::require_admin,
                ))
            } else {
                route
            }
        })
        .route(
            "/v1/token",
            post(token).layer(middleware::from_fn(crate::edge::jsonbody::objects_only)),
        )
        .route("/v1/ws", get(ws))
}

/// The largest request body read (the admin API's and `/v1/token`'s are far smaller).
const MAX_BODY_BYTES: usize = 2 << 20;

/// Reads the whole request body within the body timeout, one deadline for all of it (a body
/// that trickles in a byte at a time gets no fresh clock per chunk), and hands the handler the
/// body it read: `408` when it is late, `413` past [`MAX_BODY_BYTES`].
pub(super) async fn body_in_time(
    State(state): State<AppState>,
    request: Request,
    next: Next,
) -> Response {
    let (parts, body) = request.into_parts();
    let deadline = std::time::Duration::from_secs(state.config.body_timeout_secs.max(1));
    match tokio::time::timeout(deadline, axum::body::to_bytes(body, MAX_BODY_BYTES)).await {
        Ok(Ok(bytes)) => {
            next.run(Request::from_parts(parts, axum::body::Body::from(bytes)))
                .await
        }
        Ok(Err(error)) => AppError::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            ErrorCode::InvalidRequest,
            format!(
                "the request body could not be read whole (at most {MAX_BODY_BYTES} bytes): {error}"
            ),
        )
        .into_response(),
        Err(_) => AppError::new(
            StatusCode::REQUEST_TIMEOUT,
            ErrorCode::InvalidRequest,
            format!(
                "the request body did not arrive within {} s",
                deadline.as_secs()
            ),
        )
        .into_response(),
    }
}

pub(super) async fn count_errors(
    State(state): State<AppState>,
    request: Request,
    next: Next,
) -> Response {
    let response = next.run(request).await;
    if let Some(code) = response.extensions().get::<ErrorCode>() {
        state.metrics.error(*code);
    }
    response
}

async fn readyz(State(state): State<AppState>) -> Response {
    if state.draining() {
        return (StatusCode::SERVICE_UNAVAILABLE, "draining").into_response();
    }
    if let Err(error) = state.store.ping().await {
        tracing::warn!(%error, "readiness: storage unreachable");
        return (StatusCode::SERVICE_UNAVAILABLE, "storage unreachable").into_response();
    }
    match state.cluster.bus().ping().await {
        Ok(()) => "ready".into_response(),
        Err(error) => {
            tracing::warn!(%error, "readiness: bus unreachable");
            (StatusCode::SERVICE_UNAVAILABLE, "bus unreachable").into_response()
        }
    }
}

async fn metrics(State(state): State<AppState>) -> Response {
    state
        .metrics
        .outbound_queued_bytes
        .set(i64::try_from(state.outbound_budget.used()).unwrap_or(i64::MAX));
    (
        [(
            header::CONTENT_TYPE,
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
        )],
        state.metrics.render(),
    )
        .into_response()
}

async fn token(
    State(state): State<AppState>,
    client: Option<Extension<ClientAddr>>,
    headers: HeaderMap,
    body: Result<Json<TokenRequest>, JsonRejection>,
) -> Result<Json<TokenResponse>, AppError> {
    let source = client.map(|Extension(ClientAddr(addr))| {
        source(addr.ip(), &headers, &state.config.trusted_proxies)
    });
    if let Some(ip) = source {
        state.failed_auth.check(ip)?;
    }
    let exchanged = exchange(&state, body).await;
    if let (Err(e), Some(ip)) = (&exchanged, source)
        && e.status == StatusCode::UNAUTHORIZED
    {
        state.failed_auth.failed(ip)?;
    }
    exchanged
}

async fn exchange(
    state: &AppState,
    body: Result<Json<TokenRequest>, JsonRejection>,
) -> Result<Json<TokenResponse>, AppError> {
    let Json(req) = body
        .map_err(|e| AppError::bad_request(format!("expected {{\"api_key\": \"rw_…\"}}: {e}")))?;
    let now = now_ms();
    let key = usable_key(state, &req.api_key, now).await?;
    if !key.has(apikey::CONNECT) {
        return Err(AppError::new(
            StatusCode::FORBIDDEN,
            ErrorCode::Forbidden,
            format!(
                "this API key lacks the scope `{}`: it cannot connect agents",
                apikey::CONNECT
            ),
        ));
    }
    // Only for the operator's view of keys: a failure here must not refuse a valid key.
    if let Err(error) = state.store.key_used(&key.id, now).await {
        tracing::warn!(%error, key = %key.id, "could not record the key's last use");
    }
    let (token, expires_at_ms) = state.tokens.issue(&key.id, &key.tenant_id, now);
    Ok(Json(TokenResponse {
        token,
        expires_at_ms,
        tenant_id: key.tenant_id,
    }))
}

/// The stored key of an API key's text, if it may be used now: well-formed, within the
/// credential's request rate, known, neither revoked nor expired, its tenant not suspended.
/// Scopes are the caller's to check.
pub(super) async fn usable_key(
    state: &AppState,
    text: &str,
    now: i64,
) -> Result<crate::storage::store::ApiKeyRecord, AppError> {
    apikey::parse(text)
        .map_err(|e| AppError::unauthorized(ErrorCode::Unauthorized, e.to_string()))?;
    let hash = apikey::hash(text);
    state.http_limit.check(&hash)?;
    let key = state
        .store
        .find_api_key_by_hash(&hash)
        .await?
        .ok_or_else(|| AppError::unauthorized(ErrorCode::Unauthorized, "unknown API key"))?;
    if !key.usable_at(now) {
        return Err(AppError::unauthorized(
            ErrorCode::KeyRevoked,
            "this API key was revoked or has expired",
        ));
    }
    if key.tenant_suspended {
        return Err(suspended());
    }
    Ok(key)
}

#[derive(Debug, Deserialize)]
struct WsQuery {
    /// For clients that cannot set headers on the upgrade request.
    access_token: Option<String>,
}

/// What a suspended tenant's token exchange and upgrade get.
fn suspended() -> AppError {
    AppError::new(
        StatusCode::FORBIDDEN,
        ErrorCode::TenantSuspended,
        "this tenant is suspended by the relay's operator",
    )
}

/// Checks the bearer token and its key. Shared by the upgrade handler and tests.
pub async fn authenticate(state: &AppState, token: Option<&str>) -> Result<Authed, AppError> {
    let token = token.ok_or_else(|| {
        AppError::unauthorized(
            ErrorCode::Unauthorized,
            "missing token: send `Authorization: Bearer <jwt>` from POST /v1/token",
        )
    })?;
    let claims = state.tokens.verify(token).map_err(|e| match e {
        TokenError::Expired => AppError::unauthorized(ErrorCode::TokenExpired, e.to_string()),
        TokenError::Invalid(_) => AppError::unauthorized(ErrorCode::Unauthorized, e.to_string()),
    })?;
    let key = state.store.get_api_key(&claims.sub).await?;
    match key {
        Some(k) if k.tenant_id == claims.tid && k.usable_at(now_ms()) && k.tenant_suspended => {
            Err(suspended())
        }
        Some(k) if k.tenant_id == claims.tid && k.usable_at(now_ms()) => Ok(Authed {
            tenant_id: k.tenant_id,
            key_id: k.id,
            scopes: k.scopes,
        }),
        Some(k) if k.tenant_id == claims.tid => Err(AppError::unauthorized(
            ErrorCode::KeyRevoked,
            "the API key behind this token was revoked or has expired",
        )),
        _ => Err(AppError::unauthorized(
            ErrorCode::Unauthorized,
            "the token names no known API key",
        )),
    }
}

async fn ws(
    State(state): State<AppState>,
    headers: HeaderMap,
    Query(query): Query<WsQuery>,
    upgrade: Result<WebSocketUpgrade, axum::extract::ws::rejection::WebSocketUpgradeRejection>,
) -> Result<Response, AppError> {
    if state.draining() {
        return Err(AppError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            ErrorCode::ShuttingDown,
            "this relay is draining; connect to another",
        ));
    }
    let upgrade =
        upgrade.map_err(|e| AppError::bad_request(format!("not a WebSocket upgrade: {e}")))?;
    let given = bearer(&headers)
        .map_err(|e| AppError::unauthorized(ErrorCode::Unauthorized, e.to_string()))?;
    let authed = authenticate(&state, given.or(query.access_token.as_deref())).await?;
    let permit = state.conn_slots.clone().try_acquire_owned().map_err(|_| {
        AppError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            ErrorCode::RateLimited,
            "connection limit reached; retry later",
        )
        .with_retry_after(std::time::Duration::from_secs(1))
    })?;
    let conn = state.hub.next_conn_id();
    let slot = match state
        .limits
        .hold_connection(&authed.tenant_id, conn)
        .await?
    {
        Ok(slot) => slot.metered(&state.meter),
        Err(refusal) => {
            return Err(AppError::new(
                StatusCode::FORBIDDEN,
                refusal.code,
                refusal.message,
            ));
        }
    };
    let tracker = state.tracker.clone();
    Ok(upgrade
        .read_buffer_size(READ_BUFFER)
        // Frames queued together leave in one system call (see `connection::write_queued`);
        // with 0 every frame was a write of its own, ~30 % of the relay's CPU under load.
        .write_buffer_size(connection::WRITE_BATCH_BYTES)
        .max_message_size(repowire_protocol::limits::MAX_TRANSPORT_BYTES)
        .max_frame_size(repowire_protocol::limits::MAX_TRANSPORT_BYTES)
        .on_upgrade(move |socket| {
            tracker.track_future(connection::serve(
                socket,
                state,
                authed,
                (conn, slot),
                permit,
            ))
        }))
}
