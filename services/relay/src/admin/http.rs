//! The admin HTTP API under `/admin/v1`, guarded by its own bearer credential that no tenant
//! key or token can match. Each route calls the operation of [`super`] of the same name.

use axum::extract::rejection::JsonRejection;
use axum::extract::{Path, Request, State};
use axum::http::{HeaderMap, StatusCode};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{delete, get};
use axum::{Json, Router};
use repowire_protocol::ErrorCode;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::{create_key, create_tenant, list_keys, revoke_key};
use crate::apikey::KeyMode;
use crate::error::AppError;
use crate::state::AppState;
use crate::store::{ApiKeyRecord, TenantRecord};

/// Admin routes, nested under `/admin/v1`.
pub fn router(state: AppState) -> Router<AppState> {
    Router::new()
        .route("/tenants", get(list_tenants_http).post(create_tenant_http))
        .route(
            "/tenants/{tenant}/keys",
            get(list_keys_http).post(create_key_http),
        )
        .route("/keys/{key_id}", delete(revoke_key_http))
        .layer(middleware::from_fn_with_state(state, require_admin))
}

fn digest(s: &str) -> [u8; 32] {
    Sha256::digest(s.as_bytes()).into()
}

async fn require_admin(
    State(state): State<AppState>,
    headers: HeaderMap,
    request: Request,
    next: Next,
) -> Response {
    let Some(expected) = state
        .config
        .admin_token
        .as_deref()
        .filter(|t| !t.is_empty())
    else {
        return AppError::not_found("the admin API is disabled: set REPOWIRE_ADMIN_TOKEN")
            .into_response();
    };
    // A header of another shape than `Bearer <credential>` is a wrong credential (403).
    let given = crate::token::bearer(&headers).ok().flatten().unwrap_or("");
    // Comparing digests keeps the comparison time independent of where the strings differ.
    if digest(given) != digest(expected) {
        return AppError::new(
            StatusCode::FORBIDDEN,
            ErrorCode::Forbidden,
            "admin credential required",
        )
        .into_response();
    }
    next.run(request).await
}

#[derive(Debug, Deserialize)]
struct NewTenant {
    name: String,
}

async fn create_tenant_http(
    State(state): State<AppState>,
    body: Result<Json<NewTenant>, JsonRejection>,
) -> Result<(StatusCode, Json<TenantRecord>), AppError> {
    let Json(body) =
        body.map_err(|e| AppError::bad_request(format!("expected {{\"name\": \"…\"}}: {e}")))?;
    Ok((
        StatusCode::CREATED,
        Json(create_tenant(state.store.as_ref(), &body.name).await?),
    ))
}

async fn list_tenants_http(
    State(state): State<AppState>,
) -> Result<Json<Vec<TenantRecord>>, AppError> {
    Ok(Json(state.store.list_tenants().await?))
}

#[derive(Debug, Default, Deserialize)]
struct NewKey {
    #[serde(default)]
    label: String,
    #[serde(default)]
    test: bool,
    expires_in_days: Option<u32>,
}

#[derive(Debug, Serialize)]
struct MintedKeyBody {
    /// The key text: shown this once.
    api_key: String,
    key: ApiKeyRecord,
}

async fn create_key_http(
    State(state): State<AppState>,
    Path(tenant_ref): Path<String>,
    body: Result<Json<NewKey>, JsonRejection>,
) -> Result<(StatusCode, Json<MintedKeyBody>), AppError> {
    let Json(body) =
        body.map_err(|e| AppError::bad_request(format!("invalid key request: {e}")))?;
    let mode = if body.test {
        KeyMode::Test
    } else {
        KeyMode::Live
    };
    let minted = create_key(
        state.store.as_ref(),
        &tenant_ref,
        mode,
        &body.label,
        body.expires_in_days,
    )
    .await?;
    Ok((
        StatusCode::CREATED,
        Json(MintedKeyBody {
            api_key: minted.text,
            key: minted.record,
        }),
    ))
}

async fn list_keys_http(
    State(state): State<AppState>,
    Path(tenant_ref): Path<String>,
) -> Result<Json<Vec<ApiKeyRecord>>, AppError> {
    Ok(Json(list_keys(state.store.as_ref(), &tenant_ref).await?))
}

async fn revoke_key_http(
    State(state): State<AppState>,
    Path(key_id): Path<String>,
) -> Result<StatusCode, AppError> {
    revoke_key(state.store.as_ref(), Some(&state.hub), &key_id).await?;
    state.cluster.revoked(&key_id).await;
    Ok(StatusCode::NO_CONTENT)
}
