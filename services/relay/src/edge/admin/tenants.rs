//! Routes of tenants.

use axum::Extension;
use axum::Json;
use axum::extract::Query;
use axum::extract::rejection::{JsonRejection, QueryRejection};
use axum::extract::{Path, State};
use axum::http::StatusCode;
use repowire_protocol::CloseCode;

#[cfg(feature = "openapi")]
use super::ErrorBody;
use super::body;
use crate::error::AppError;
use crate::state::AppState;
use crate::storage::store::TenantRecord;
use crate::tenancy::admin::audit::{self, AdminCtx};
use crate::tenancy::admin::tenants::{TenantPage, TenantQuery};
use crate::tenancy::admin::{
    NewTenant, TenantDetail, TenantPatch, create_tenant, get_tenant, update_tenant,
};

#[cfg_attr(feature = "openapi", utoipa::path(
    operation_id = "create_tenant", post, path = "/admin/v1/tenants", tag = "tenants", request_body = NewTenant,
    responses((status = 201, description = "The tenant", body = TenantRecord),
              (status = 400, description = "Bad name, unknown plan, bad override", body = ErrorBody),
              (status = 409, description = "The name is taken", body = ErrorBody))
))]
pub(super) async fn create_tenant_http(
    State(state): State<AppState>,
    Extension(ctx): Extension<AdminCtx>,
    new: Result<Json<NewTenant>, JsonRejection>,
) -> Result<(StatusCode, Json<TenantRecord>), AppError> {
    let new = body(new, "tenant (expected {\"name\": \"…\"})")?;
    let store = state.store.as_ref();
    let tenant = create_tenant(store, new).await?;
    let id = Some(tenant.id.as_str());
    audit::record(
        store,
        &ctx,
        "tenant.create",
        &tenant.id,
        id,
        None::<&()>,
        Some(&tenant),
    )
    .await;
    Ok((StatusCode::CREATED, Json(tenant)))
}

#[cfg_attr(feature = "openapi", utoipa::path(
    operation_id = "list_tenants", get, path = "/admin/v1/tenants", tag = "tenants",
    params(TenantQuery),
    responses((status = 200, description = "A page of tenants, oldest first", body = TenantPage),
              (status = 400, description = "Bad limit, cursor, plan or status", body = ErrorBody))
))]
pub(super) async fn list_tenants_http(
    State(state): State<AppState>,
    query: Result<Query<TenantQuery>, QueryRejection>,
) -> Result<Json<TenantPage>, AppError> {
    let Query(query) = query.map_err(|e| AppError::bad_request(e.body_text()))?;
    Ok(Json(
        crate::tenancy::admin::tenants::list_tenants(state.store.as_ref(), query).await?,
    ))
}

#[cfg_attr(feature = "openapi", utoipa::path(
    operation_id = "delete_tenant", delete, path = "/admin/v1/tenants/{tenant}", tag = "tenants",
    params(("tenant" = String, Path, description = "Tenant id (`tnt-…`: looked up as an id) or name")),
    responses((status = 200, description = "Deleted: keys revoked, connections closing, data kept until the purge", body = TenantDetail),
              (status = 404, description = "No such tenant", body = ErrorBody),
              (status = 409, description = "Deleted already", body = ErrorBody))
))]
pub(super) async fn delete_tenant_http(
    State(state): State<AppState>,
    Extension(ctx): Extension<AdminCtx>,
    Path(tenant_ref): Path<String>,
) -> Result<Json<TenantDetail>, AppError> {
    let store = state.store.as_ref();
    let before = get_tenant(store, &tenant_ref).await?;
    let detail = crate::tenancy::admin::tenants::delete_tenant(store, &tenant_ref).await?;
    let id = detail.tenant.id.as_str();
    close_everywhere(&state, id).await;
    state.cluster.events().forget(id).await;
    audit::record(
        store,
        &ctx,
        "tenant.delete",
        id,
        Some(id),
        Some(&before),
        Some(&detail),
    )
    .await;
    Ok(Json(detail))
}

/// Closes every connection of a deleted (or purged) tenant on every relay process now: its
/// keys are announced as revoked on the bus (this process included). The key check of each
/// process closes whatever a lost announcement left open within its interval, purged keys
/// included (a key that no longer exists counts as revoked).
async fn close_everywhere(state: &AppState, tenant_id: &str) {
    match state.store.list_api_keys(tenant_id).await {
        Ok(keys) => {
            for key in keys {
                state
                    .hub
                    .kick_key(&key.id, CloseCode::KEY_REVOKED, "tenant deleted");
                state.cluster.revoked(&key.id).await;
            }
        }
        Err(error) => {
            tracing::warn!(%error, tenant = %tenant_id, "could not list a deleted tenant's keys; the key check closes its connections");
        }
    }
    crate::tenancy::keycheck::close_unusable(state).await;
}

#[cfg_attr(feature = "openapi", utoipa::path(
    operation_id = "purge_tenant", post, path = "/admin/v1/tenants/{tenant}/purge", tag = "tenants",
    params(("tenant" = String, Path, description = "Tenant id (`tnt-…`: looked up as an id) or name")),
    responses((status = 204, description = "Every row of the deleted tenant is gone"),
              (status = 400, description = "The tenant is not deleted", body = ErrorBody),
              (status = 404, description = "No such tenant", body = ErrorBody))
))]
pub(super) async fn purge_tenant_http(
    State(state): State<AppState>,
    Extension(ctx): Extension<AdminCtx>,
    Path(tenant_ref): Path<String>,
) -> Result<StatusCode, AppError> {
    let store = state.store.as_ref();
    let before = get_tenant(store, &tenant_ref).await?;
    let id = before.tenant.id.as_str();
    // Announced before the rows go (the keys can be listed only while they exist), and again
    // by every key check after: no connection of a purged tenant stays to write for it.
    if before.tenant.deleted_at_ms.is_some() {
        close_everywhere(&state, id).await;
    }
    crate::tenancy::admin::tenants::purge_tenant(store, &tenant_ref).await?;
    // Again: peers that went offline after the deletion were logged.
    state.cluster.events().forget(id).await;
    audit::record(
        store,
        &ctx,
        "tenant.purge",
        id,
        Some(id),
        Some(&before),
        None::<&()>,
    )
    .await;
    Ok(StatusCode::NO_CONTENT)
}

#[cfg_attr(feature = "openapi", utoipa::path(
    operation_id = "get_tenant", get, path = "/admin/v1/tenants/{tenant}", tag = "tenants",
    params(("tenant" = String, Path, description = "Tenant id (`tnt-…`: looked up as an id) or name")),
    responses((status = 200, description = "The tenant with the limits in effect", body = TenantDetail),
              (status = 404, description = "No such tenant", body = ErrorBody))
))]
pub(super) async fn get_tenant_http(
    State(state): State<AppState>,
    Path(tenant_ref): Path<String>,
) -> Result<Json<TenantDetail>, AppError> {
    Ok(Json(get_tenant(state.store.as_ref(), &tenant_ref).await?))
}

#[cfg_attr(feature = "openapi", utoipa::path(
    operation_id = "update_tenant", patch, path = "/admin/v1/tenants/{tenant}", tag = "tenants", request_body = TenantPatch,
    params(("tenant" = String, Path, description = "Tenant id (`tnt-…`: looked up as an id) or name")),
    responses((status = 200, description = "The tenant as changed", body = TenantDetail),
              (status = 400, description = "Unknown plan, bad text or override; nothing changed", body = ErrorBody),
              (status = 404, description = "No such tenant", body = ErrorBody),
              (status = 409, description = "The tenant is deleted", body = ErrorBody))
))]
pub(super) async fn update_tenant_http(
    State(state): State<AppState>,
    Extension(ctx): Extension<AdminCtx>,
    Path(tenant_ref): Path<String>,
    patch: Result<Json<TenantPatch>, JsonRejection>,
) -> Result<Json<TenantDetail>, AppError> {
    let patch = body(patch, "tenant change")?;
    let store = state.store.as_ref();
    let before = get_tenant(store, &tenant_ref).await?;
    let after = update_tenant(store, &tenant_ref, patch).await?;
    let id = after.tenant.id.as_str();
    state.limits.changed(Some(id));
    state.cluster.limits_changed(Some(id)).await;
    audit::record(
        store,
        &ctx,
        "tenant.update",
        id,
        Some(id),
        Some(&before),
        Some(&after),
    )
    .await;
    Ok(Json(after))
}

#[cfg_attr(feature = "openapi", utoipa::path(
    operation_id = "suspend_tenant", post, path = "/admin/v1/tenants/{tenant}/suspend", tag = "tenants",
    params(("tenant" = String, Path, description = "Tenant id (`tnt-…`: looked up as an id) or name")),
    responses((status = 200, description = "Suspended (again); its connections close with 4010 on every relay process", body = TenantDetail),
              (status = 404, description = "No such tenant", body = ErrorBody),
              (status = 409, description = "The tenant is deleted", body = ErrorBody))
))]
pub(super) async fn suspend_tenant_http(
    State(state): State<AppState>,
    Extension(ctx): Extension<AdminCtx>,
    Path(tenant_ref): Path<String>,
) -> Result<Json<TenantDetail>, AppError> {
    let detail = set_suspended(&state, &ctx, &tenant_ref, true).await?;
    // This process closes them now; the others at their next key check.
    crate::tenancy::keycheck::close_unusable(&state).await;
    Ok(Json(detail))
}

#[cfg_attr(feature = "openapi", utoipa::path(
    operation_id = "resume_tenant", post, path = "/admin/v1/tenants/{tenant}/resume", tag = "tenants",
    params(("tenant" = String, Path, description = "Tenant id (`tnt-…`: looked up as an id) or name")),
    responses((status = 200, description = "Active (again)", body = TenantDetail),
              (status = 404, description = "No such tenant", body = ErrorBody),
              (status = 409, description = "The tenant is deleted", body = ErrorBody))
))]
pub(super) async fn resume_tenant_http(
    State(state): State<AppState>,
    Extension(ctx): Extension<AdminCtx>,
    Path(tenant_ref): Path<String>,
) -> Result<Json<TenantDetail>, AppError> {
    Ok(Json(set_suspended(&state, &ctx, &tenant_ref, false).await?))
}

/// Suspends (its connections on this process closed now, the others' at their next key
/// check) or resumes a tenant, audited: the admin API's and the operator dashboard's.
pub(crate) async fn suspend_or_resume(
    state: &AppState,
    ctx: &AdminCtx,
    tenant_ref: &str,
    suspend: bool,
) -> Result<TenantDetail, AppError> {
    let detail = set_suspended(state, ctx, tenant_ref, suspend).await?;
    if suspend {
        crate::tenancy::keycheck::close_unusable(state).await;
    }
    Ok(detail)
}

/// Suspends or resumes a tenant, audited with its state before and after.
async fn set_suspended(
    state: &AppState,
    ctx: &AdminCtx,
    tenant_ref: &str,
    suspended: bool,
) -> Result<TenantDetail, AppError> {
    let store = state.store.as_ref();
    let before = get_tenant(store, tenant_ref).await?;
    let after = crate::tenancy::admin::tenants::set_suspended(store, tenant_ref, suspended).await?;
    let id = after.tenant.id.as_str();
    let action = if suspended {
        "tenant.suspend"
    } else {
        "tenant.resume"
    };
    audit::record(
        store,
        ctx,
        action,
        id,
        Some(id),
        Some(&before),
        Some(&after),
    )
    .await;
    Ok(after)
}
