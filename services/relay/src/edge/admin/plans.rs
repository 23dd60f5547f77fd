//! Routes of plans.

use axum::Extension;
use axum::Json;
use axum::extract::rejection::JsonRejection;
use axum::extract::{Path, State};
use axum::http::StatusCode;

#[cfg(feature = "openapi")]
use super::ErrorBody;
use super::body;
use crate::error::AppError;
use crate::state::AppState;
use crate::storage::store::PlanRecord;
use crate::tenancy::admin::audit::{self, AdminCtx};
use crate::tenancy::admin::plans::{self, NewPlan, PlanPatch};

#[cfg_attr(feature = "openapi", utoipa::path(
    operation_id = "list_plans", get, path = "/admin/v1/plans", tag = "plans",
    responses((status = 200, description = "Every plan, by name", body = [PlanRecord]),
              (status = 403, description = "Not an admin credential", body = ErrorBody))
))]
pub(super) async fn list_plans_http(
    State(state): State<AppState>,
) -> Result<Json<Vec<PlanRecord>>, AppError> {
    Ok(Json(state.store.list_plans().await?))
}

#[cfg_attr(feature = "openapi", utoipa::path(
    operation_id = "create_plan", post, path = "/admin/v1/plans", tag = "plans", request_body = NewPlan,
    responses((status = 201, description = "The plan", body = PlanRecord),
              (status = 400, description = "Bad name, text or limit", body = ErrorBody),
              (status = 409, description = "The name is taken", body = ErrorBody))
))]
pub(super) async fn create_plan_http(
    State(state): State<AppState>,
    Extension(ctx): Extension<AdminCtx>,
    new: Result<Json<NewPlan>, JsonRejection>,
) -> Result<(StatusCode, Json<PlanRecord>), AppError> {
    let new = body(new, "plan")?;
    let plan = plans::create_plan(state.store.as_ref(), new).await?;
    let store = state.store.as_ref();
    audit::record(
        store,
        &ctx,
        "plan.create",
        &plan.name,
        None,
        None::<&()>,
        Some(&plan),
    )
    .await;
    Ok((StatusCode::CREATED, Json(plan)))
}

#[cfg_attr(feature = "openapi", utoipa::path(
    operation_id = "get_plan", get, path = "/admin/v1/plans/{plan}", tag = "plans",
    params(("plan" = String, Path, description = "Plan name")),
    responses((status = 200, description = "The plan", body = PlanRecord),
              (status = 404, description = "No such plan", body = ErrorBody))
))]
pub(super) async fn get_plan_http(
    State(state): State<AppState>,
    Path(name): Path<String>,
) -> Result<Json<PlanRecord>, AppError> {
    Ok(Json(plans::get_plan(state.store.as_ref(), &name).await?))
}

#[cfg_attr(feature = "openapi", utoipa::path(
    operation_id = "update_plan", patch, path = "/admin/v1/plans/{plan}", tag = "plans", request_body = PlanPatch,
    params(("plan" = String, Path, description = "Plan name")),
    responses((status = 200, description = "The plan as changed", body = PlanRecord),
              (status = 400, description = "Bad text or limit; nothing changed", body = ErrorBody),
              (status = 404, description = "No such plan", body = ErrorBody))
))]
pub(super) async fn update_plan_http(
    State(state): State<AppState>,
    Extension(ctx): Extension<AdminCtx>,
    Path(name): Path<String>,
    patch: Result<Json<PlanPatch>, JsonRejection>,
) -> Result<Json<PlanRecord>, AppError> {
    let patch = body(patch, "plan change")?;
    let store = state.store.as_ref();
    let before = plans::get_plan(store, &name).await?;
    let after = plans::update_plan(store, &name, patch).await?;
    state.limits.changed(None);
    state.cluster.limits_changed(None).await;
    audit::record(
        store,
        &ctx,
        "plan.update",
        &name,
        None,
        Some(&before),
        Some(&after),
    )
    .await;
    Ok(Json(after))
}
