//! What a tenant may read about itself with its own credentials (read-only): `GET /v1/limits`
//! (its plan, the limits in effect and this month's messages against the quota) and
//! `GET /v1/usage` (its usage rows, like the admin API's `GET /tenants/{t}/usage`).
//!
//! The credential is `Authorization: Bearer <API key or JWT>`; it names the tenant, so there
//! is no tenant in the path and no way to ask about another one. Admin credentials are not
//! tenant credentials and are refused here.

use axum::extract::rejection::QueryRejection;
use axum::extract::{Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use axum::{Json, Router, routing::get};
use repowire_protocol::ErrorCode;
use serde::Serialize;

use crate::edge::admin::usage::{TenantUsageQuery, tenant_report};
use crate::edge::api;
use crate::error::AppError;
use crate::ids::now_ms;
use crate::state::AppState;
use crate::storage::store::Limits;
use crate::tenancy::apikey;
use crate::tenancy::token::bearer;
use crate::tenancy::usage::calendar;

/// The routes.
pub fn router() -> Router<AppState> {
    Router::new()
        .route("/v1/limits", get(limits))
        .route("/v1/usage", get(usage))
}

/// `GET /v1/limits`.
#[derive(Debug, Serialize)]
pub struct TenantLimits {
    /// The tenant.
    pub tenant_id: String,
    /// Its plan.
    pub plan: String,
    /// The limits in effect (`null`: unlimited).
    pub limits: Limits,
    /// This calendar month (UTC).
    pub month: MonthUse,
    /// Bytes of shared state stored now, against `limits.max_state_bytes`.
    pub state_bytes: i64,
    /// Peers stored now (live and offline), against `limits.max_stored_peers`.
    pub stored_peers: i64,
}

/// A tenant's calendar month.
#[derive(Debug, Serialize)]
pub struct MonthUse {
    /// Its start (ms).
    pub start_ms: i64,
    /// When the monthly quota resets (ms): the next month's start.
    pub resets_at_ms: i64,
    /// Messages counted so far (every kind, replies included).
    pub messages: i64,
}

/// The tenant of the request's credential: an API key, or a JWT from `POST /v1/token`.
async fn tenant_of(state: &AppState, headers: &HeaderMap) -> Result<String, AppError> {
    let given = bearer(headers)
        .map_err(|e| AppError::unauthorized(ErrorCode::Unauthorized, e.to_string()))?
        .ok_or_else(|| {
            AppError::unauthorized(
                ErrorCode::Unauthorized,
                "missing credential: send `Authorization: Bearer <API key or token>`",
            )
        })?;
    // Per credential, before anything is read for it.
    let hash = apikey::hash(given);
    state.http_limit.check(&hash)?;
    if apikey::parse(given).is_err() {
        let authed = api::authenticate(state, Some(given)).await?;
        if !authed.scopes.split(' ').any(|s| s == apikey::USAGE_READ) {
            return Err(lacks_usage_read());
        }
        return Ok(authed.tenant_id);
    }
    let key = state
        .store
        .find_api_key_by_hash(&hash)
        .await?
        .ok_or_else(|| AppError::unauthorized(ErrorCode::Unauthorized, "unknown API key"))?;
    if !key.usable_at(now_ms()) {
        return Err(AppError::unauthorized(
            ErrorCode::KeyRevoked,
            "this API key was revoked or has expired",
        ));
    }
    if key.tenant_suspended {
        return Err(AppError::new(
            StatusCode::FORBIDDEN,
            ErrorCode::TenantSuspended,
            "this tenant is suspended by the relay's operator",
        ));
    }
    if !key.has(apikey::USAGE_READ) {
        return Err(lacks_usage_read());
    }
    Ok(key.tenant_id)
}

fn lacks_usage_read() -> AppError {
    AppError::new(
        StatusCode::FORBIDDEN,
        ErrorCode::Forbidden,
        format!(
            "this credential's API key lacks the scope `{}`",
            apikey::USAGE_READ
        ),
    )
}

async fn limits(
    State(state): State<AppState>,
    headers: HeaderMap,
) -> Result<Json<TenantLimits>, AppError> {
    let tenant_id = tenant_of(&state, &headers).await?;
    let detail = crate::tenancy::admin::tenants::get_tenant_by(
        state.store.as_ref(),
        crate::storage::store::TenantKey::Id(&tenant_id),
    )
    .await?;
    let start = calendar::month_start(now_ms());
    let end = calendar::next_month_start(start);
    let messages = state.store.messages_counted(&tenant_id, start, end).await?;
    Ok(Json(TenantLimits {
        tenant_id,
        plan: detail.tenant.plan,
        limits: detail.effective_limits,
        state_bytes: detail.state_bytes,
        stored_peers: detail.stored_peers,
        month: MonthUse {
            start_ms: start,
            resets_at_ms: end,
            messages,
        },
    }))
}

async fn usage(
    State(state): State<AppState>,
    headers: HeaderMap,
    query: Result<Query<TenantUsageQuery>, QueryRejection>,
) -> Result<Response, AppError> {
    let tenant_id = tenant_of(&state, &headers).await?;
    let Query(q) = query.map_err(|e| AppError::bad_request(e.body_text()))?;
    tenant_report(&state, &tenant_id, q).await
}
