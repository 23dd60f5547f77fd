//! Route of the audit log.

use axum::Json;
use axum::extract::rejection::QueryRejection;
use axum::extract::{Query, State};

#[cfg(feature = "openapi")]
use super::ErrorBody;
use crate::error::AppError;
use crate::state::AppState;
use crate::tenancy::admin::audit::{self, AuditPage, AuditQuery};

#[cfg_attr(feature = "openapi", utoipa::path(
    operation_id = "list_audit", get, path = "/admin/v1/audit", tag = "audit",
    params(AuditQuery),
    responses((status = 200, description = "A page of admin writes, oldest first", body = AuditPage),
              (status = 400, description = "Bad filter, limit or cursor", body = ErrorBody))
))]
pub(super) async fn list_audit_http(
    State(state): State<AppState>,
    query: Result<Query<AuditQuery>, QueryRejection>,
) -> Result<Json<AuditPage>, AppError> {
    let Query(query) = query.map_err(|e| AppError::bad_request(e.body_text()))?;
    Ok(Json(audit::list(state.store.as_ref(), query).await?))
}
