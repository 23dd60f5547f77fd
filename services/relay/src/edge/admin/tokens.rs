//! Routes of admin tokens.

use axum::extract::rejection::JsonRejection;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::{Extension, Json};

#[cfg(feature = "openapi")]
use super::ErrorBody;
use super::body;
use crate::error::AppError;
use crate::state::AppState;
use crate::storage::store::AdminTokenRecord;
use crate::tenancy::admin::audit::{self, AdminCtx};
use crate::tenancy::admin::tokens::{self, MintedAdminToken, NewAdminToken};

#[cfg_attr(feature = "openapi", utoipa::path(
    operation_id = "create_admin_token", post, path = "/admin/v1/admin-tokens", tag = "admin tokens", request_body = NewAdminToken,
    responses((status = 201, description = "The token; its text is shown only here", body = MintedAdminToken),
              (status = 400, description = "Bad label, lifetime or scopes; nothing stored", body = ErrorBody),
              (status = 403, description = "A scope the calling token does not hold; nothing stored", body = ErrorBody))
))]
pub(super) async fn create_admin_token_http(
    State(state): State<AppState>,
    Extension(ctx): Extension<AdminCtx>,
    new: Result<Json<NewAdminToken>, JsonRejection>,
) -> Result<(StatusCode, Json<MintedAdminToken>), AppError> {
    let new = body(new, "admin token (expected {\"scopes\": [\"admin:read\"]})")?;
    let store = state.store.as_ref();
    let minted = tokens::create(store, new, ctx.token.as_ref()).await?;
    let id = minted.admin_token.id.clone();
    audit::record(
        store,
        &ctx,
        "admin_token.create",
        &id,
        None,
        None::<&()>,
        Some(&minted.admin_token),
    )
    .await;
    Ok((StatusCode::CREATED, Json(minted)))
}

#[cfg_attr(feature = "openapi", utoipa::path(
    operation_id = "list_admin_tokens", get, path = "/admin/v1/admin-tokens", tag = "admin tokens",
    responses((status = 200, description = "Every minted admin token, oldest first (never their text)", body = Vec<AdminTokenRecord>))
))]
pub(super) async fn list_admin_tokens_http(
    State(state): State<AppState>,
) -> Result<Json<Vec<AdminTokenRecord>>, AppError> {
    Ok(Json(tokens::list(state.store.as_ref()).await?))
}

#[cfg_attr(feature = "openapi", utoipa::path(
    operation_id = "revoke_admin_token", delete, path = "/admin/v1/admin-tokens/{token_id}", tag = "admin tokens",
    params(("token_id" = String, Path, description = "Admin token id (`adm-…`)")),
    responses((status = 204, description = "Revoked: refused from the next request on"),
              (status = 404, description = "No such token, or revoked already", body = ErrorBody))
))]
pub(super) async fn revoke_admin_token_http(
    State(state): State<AppState>,
    Extension(ctx): Extension<AdminCtx>,
    Path(token_id): Path<String>,
) -> Result<StatusCode, AppError> {
    let store = state.store.as_ref();
    tokens::revoke(store, &token_id, ctx.token.as_ref()).await?;
    audit::record(
        store,
        &ctx,
        "admin_token.revoke",
        &token_id,
        None,
        None::<&()>,
        None::<&()>,
    )
    .await;
    Ok(StatusCode::NO_CONTENT)
}
