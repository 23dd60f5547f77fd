//! Tenants and API keys: the operations (shared by the admin HTTP API and the
//! `repowire-relay admin` subcommands) and the admin HTTP API, guarded by its own bearer
//! credential that no tenant key or token can match.

use axum::extract::rejection::JsonRejection;
use axum::extract::{Path, Request, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{delete, get};
use axum::{Json, Router};
use repowire_protocol::{CloseCode, ErrorCode};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::apikey::{self, KeyMode, MintedKey};
use crate::error::AppError;
use crate::hub::Hub;
use crate::ids::{now_ms, random_suffix};
use crate::state::AppState;
use crate::store::{ApiKeyRecord, Store, StoreError, TenantRecord};

/// Why an admin operation failed.
#[derive(Debug, thiserror::Error)]
pub enum AdminError {
    /// No such tenant or key.
    #[error("{0}")]
    NotFound(String),
    /// Bad input.
    #[error("{0}")]
    Invalid(String),
    /// Storage.
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl From<AdminError> for AppError {
    fn from(e: AdminError) -> Self {
        match e {
            AdminError::NotFound(m) => AppError::not_found(m),
            AdminError::Invalid(m) => AppError::bad_request(m),
            AdminError::Store(s) => s.into(),
        }
    }
}

/// Creates a tenant.
pub async fn create_tenant(store: &dyn Store, name: &str) -> Result<TenantRecord, AdminError> {
    if !repowire_protocol::validate::is_valid_name(name) {
        return Err(AdminError::Invalid(
            "a tenant name is 1-64 characters of letters, digits, '.', '_' or '-'".into(),
        ));
    }
    let tenant = TenantRecord {
        id: format!("tnt-{}", random_suffix()),
        name: name.to_owned(),
        plan: "free".into(),
        created_at_ms: now_ms(),
    };
    store.create_tenant(&tenant).await?;
    Ok(tenant)
}

async fn tenant(store: &dyn Store, id_or_name: &str) -> Result<TenantRecord, AdminError> {
    store
        .find_tenant(id_or_name)
        .await?
        .ok_or_else(|| AdminError::NotFound(format!("no tenant `{id_or_name}`")))
}

/// Mints and stores a key for a tenant (by id or name).
pub async fn create_key(
    store: &dyn Store,
    tenant_ref: &str,
    mode: KeyMode,
    label: &str,
    expires_in_days: Option<u32>,
) -> Result<MintedKey, AdminError> {
    let tenant = tenant(store, tenant_ref).await?;
    let now = now_ms();
    let expires = expires_in_days.map(|d| now + i64::from(d) * 86_400_000);
    let minted = apikey::mint(&tenant.id, mode, label, now, expires);
    store.insert_api_key(&minted.record).await?;
    Ok(minted)
}

/// Keys of a tenant.
pub async fn list_keys(
    store: &dyn Store,
    tenant_ref: &str,
) -> Result<Vec<ApiKeyRecord>, AdminError> {
    let tenant = tenant(store, tenant_ref).await?;
    Ok(store.list_api_keys(&tenant.id).await?)
}

/// Revokes a key and closes this process's connections that use it.
pub async fn revoke_key(
    store: &dyn Store,
    hub: Option<&Hub>,
    key_id: &str,
) -> Result<(), AdminError> {
    if store.get_api_key(key_id).await?.is_none() {
        return Err(AdminError::NotFound(format!("no key `{key_id}`")));
    }
    store.revoke_api_key(key_id, now_ms()).await?;
    if let Some(hub) = hub {
        let closed = hub.kick_key(key_id, CloseCode::KEY_REVOKED, "API key revoked");
        tracing::info!(key = key_id, closed, "api key revoked");
    }
    Ok(())
}

/// On first start of an empty store: a `default` tenant and its first key (shown once).
pub async fn bootstrap(store: &dyn Store) -> Result<Option<(TenantRecord, MintedKey)>, AdminError> {
    if !store.list_tenants().await?.is_empty() {
        return Ok(None);
    }
    let tenant = create_tenant(store, "default").await?;
    let key = create_key(store, &tenant.id, KeyMode::Live, "bootstrap", None).await?;
    Ok(Some((tenant, key)))
}

// ---- HTTP -------------------------------------------------------------------------------

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
    let given = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .unwrap_or("");
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
