//! Routes of API keys.

use axum::Extension;
use axum::extract::Query;
use axum::extract::rejection::{JsonRejection, QueryRejection};
use axum::http::HeaderMap;
use serde::{Deserialize, Serialize};

use axum::Json;
use axum::extract::{Path, State};
use axum::http::StatusCode;

#[cfg(feature = "openapi")]
use super::ErrorBody;
use super::body;
use crate::error::AppError;
use crate::state::AppState;
use crate::storage::store::ApiKeyRecord;
use crate::tenancy::admin::audit::{self, AdminCtx};
use crate::tenancy::admin::keys::KeyPage;
use crate::tenancy::admin::page::PageQuery;
use crate::tenancy::admin::{KeyCreated, KeyRequestBody, get_key, revoke_key, rotate_key};
use crate::tenancy::apikey::KeyMode;

#[cfg_attr(feature = "openapi", utoipa::path(
    operation_id = "create_key", post, path = "/admin/v1/tenants/{tenant}/keys", tag = "keys", request_body = KeyRequestBody,
    params(("tenant" = String, Path, description = "Tenant id (`tnt-…`: looked up as an id) or name"),
           ("Idempotency-Key" = Option<String>, Header, description = "1-255 printable ASCII characters: a retry with the same value makes no second key")),
    responses((status = 201, description = "The key; its text is shown only here", body = KeyCreated),
              (status = 200, description = "A retry of an earlier request with the same Idempotency-Key: that request's key (its text again within 10 minutes)", body = KeyCreated),
              (status = 400, description = "Bad label, lifetime or Idempotency-Key; no key stored", body = ErrorBody),
              (status = 404, description = "No such tenant", body = ErrorBody),
              (status = 409, description = "The Idempotency-Key was used for a different request, or the tenant is deleted", body = ErrorBody))
))]
pub(super) async fn create_key_http(
    State(state): State<AppState>,
    Extension(ctx): Extension<AdminCtx>,
    Path(tenant_ref): Path<String>,
    headers: HeaderMap,
    request: Result<Json<KeyRequestBody>, JsonRejection>,
) -> Result<(StatusCode, Json<KeyCreated>), AppError> {
    let request = body(request, "key request")?;
    let created = match headers.get("idempotency-key") {
        Some(value) => {
            let idempotency_key = value
                .to_str()
                .map_err(|_| AppError::bad_request("the Idempotency-Key is not printable ASCII"))?;
            crate::tenancy::admin::keys::create_key_once(
                state.store.as_ref(),
                &state.tokens,
                &tenant_ref,
                &request,
                idempotency_key,
                i64::try_from(state.config.key_replay_window_secs.saturating_mul(1000))
                    .unwrap_or(i64::MAX),
            )
            .await?
        }
        None => {
            let mode = if request.test {
                KeyMode::Test
            } else {
                KeyMode::Live
            };
            crate::tenancy::admin::keys::check_new_key(&request.label, request.expires_in_days)?;
            let expires = crate::tenancy::admin::keys::key_expiry(
                crate::ids::now_ms(),
                request.expires_in_days,
                request.expires_at_ms,
            )?;
            let minted = crate::tenancy::admin::keys::create_key_until(
                state.store.as_ref(),
                &tenant_ref,
                mode,
                &request.label,
                expires,
                request.scopes.as_deref(),
            )
            .await?;
            KeyCreated {
                api_key: Some(minted.text),
                key: minted.record,
                replayed: false,
            }
        }
    };
    // A replay wrote nothing: only a creation is audited.
    if created.replayed {
        return Ok((StatusCode::OK, Json(created)));
    }
    let key = &created.key;
    audit::record(
        state.store.as_ref(),
        &ctx,
        "key.create",
        &key.id,
        Some(&key.tenant_id),
        None::<&()>,
        Some(key),
    )
    .await;
    Ok((StatusCode::CREATED, Json(created)))
}

#[cfg_attr(feature = "openapi", utoipa::path(
    operation_id = "get_key", get, path = "/admin/v1/keys/{key_id}", tag = "keys",
    params(("key_id" = String, Path, description = "Key id (`key-…`)")),
    responses((status = 200, description = "The key (never its text)", body = ApiKeyRecord),
              (status = 404, description = "No such key", body = ErrorBody))
))]
pub(super) async fn get_key_http(
    State(state): State<AppState>,
    Path(key_id): Path<String>,
) -> Result<Json<ApiKeyRecord>, AppError> {
    Ok(Json(get_key(state.store.as_ref(), &key_id).await?))
}

/// `POST /keys/{key_id}/rotate`.
#[derive(Debug, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub(super) struct RotateKey {
    /// How long the old key keeps working, seconds (0 to 2 592 000, i.e. 30 days).
    grace_seconds: u64,
}

/// A rotation's result.
#[derive(Debug, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub(super) struct Rotated {
    /// The new key's text: shown once.
    api_key: String,
    /// The new key.
    key: ApiKeyRecord,
    /// The old key, now expiring at the end of the grace period.
    previous: ApiKeyRecord,
}

#[cfg_attr(feature = "openapi", utoipa::path(
    operation_id = "rotate_key", post, path = "/admin/v1/keys/{key_id}/rotate", tag = "keys", request_body = RotateKey,
    params(("key_id" = String, Path, description = "Key id (`key-…`)")),
    responses((status = 201, description = "The new key (text shown once) and the old one with its new expiry", body = Rotated),
              (status = 400, description = "Bad grace period, or the key is revoked or expired", body = ErrorBody),
              (status = 404, description = "No such key", body = ErrorBody),
              (status = 409, description = "The key's tenant is deleted", body = ErrorBody))
))]
pub(super) async fn rotate_key_http(
    State(state): State<AppState>,
    Extension(ctx): Extension<AdminCtx>,
    Path(key_id): Path<String>,
    request: Result<Json<RotateKey>, JsonRejection>,
) -> Result<(StatusCode, Json<Rotated>), AppError> {
    let request = body(request, "rotation (expected {\"grace_seconds\": N})")?;
    let store = state.store.as_ref();
    let before = get_key(store, &key_id).await?;
    let (minted, previous) = rotate_key(store, &key_id, request.grace_seconds).await?;
    let after = serde_json::json!({ "key": &minted.record, "previous": &previous });
    let tenant = Some(previous.tenant_id.as_str());
    audit::record(
        store,
        &ctx,
        "key.rotate",
        &key_id,
        tenant,
        Some(&before),
        Some(&after),
    )
    .await;
    Ok((
        StatusCode::CREATED,
        Json(Rotated {
            api_key: minted.text,
            key: minted.record,
            previous,
        }),
    ))
}

#[cfg_attr(feature = "openapi", utoipa::path(
    operation_id = "list_keys", get, path = "/admin/v1/tenants/{tenant}/keys", tag = "keys",
    params(("tenant" = String, Path, description = "Tenant id (`tnt-…`: looked up as an id) or name"), PageQuery),
    responses((status = 200, description = "A page of the tenant's keys (never their text)", body = KeyPage),
              (status = 400, description = "Bad limit or cursor", body = ErrorBody),
              (status = 404, description = "No such tenant", body = ErrorBody))
))]
pub(super) async fn list_keys_http(
    State(state): State<AppState>,
    Path(tenant_ref): Path<String>,
    query: Result<Query<PageQuery>, QueryRejection>,
) -> Result<Json<KeyPage>, AppError> {
    let Query(page) = query.map_err(|e| AppError::bad_request(e.body_text()))?;
    Ok(Json(
        crate::tenancy::admin::keys::list_keys_page(state.store.as_ref(), &tenant_ref, &page)
            .await?,
    ))
}

#[cfg_attr(feature = "openapi", utoipa::path(
    operation_id = "revoke_key", delete, path = "/admin/v1/keys/{key_id}", tag = "keys",
    params(("key_id" = String, Path, description = "Key id (`key-…`)")),
    responses((status = 204, description = "Revoked; its connections close on every relay process"),
              (status = 404, description = "No such key", body = ErrorBody))
))]
pub(super) async fn revoke_key_http(
    State(state): State<AppState>,
    Extension(ctx): Extension<AdminCtx>,
    Path(key_id): Path<String>,
) -> Result<StatusCode, AppError> {
    let store = state.store.as_ref();
    let before = get_key(store, &key_id).await?;
    revoke_key(store, Some(&state.hub), &key_id).await?;
    state.cluster.revoked(&key_id).await;
    let after = get_key(store, &key_id).await?;
    let tenant = Some(before.tenant_id.as_str());
    audit::record(
        store,
        &ctx,
        "key.revoke",
        &key_id,
        tenant,
        Some(&before),
        Some(&after),
    )
    .await;
    Ok(StatusCode::NO_CONTENT)
}
