//! The admin HTTP API under `/admin/v1`, guarded by its own bearer credential that no tenant
//! key or token can match. Each route calls the operation of [`super`] of the same name.

use axum::extract::rejection::JsonRejection;
use axum::extract::{Path, Request, State};
use axum::http::{HeaderMap, StatusCode};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use repowire_protocol::ErrorCode;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::plans::{self, NewPlan, PlanPatch};
use super::{
    KeyCreated, KeyRequestBody, NewTenant, TenantDetail, TenantPatch, create_key, create_tenant,
    get_key, get_tenant, list_keys, revoke_key, rotate_key, update_tenant,
};
use crate::apikey::KeyMode;
use crate::error::AppError;
use crate::state::AppState;
use crate::store::{ApiKeyRecord, PlanRecord, TenantRecord};

/// Admin routes, nested under `/admin/v1`.
pub fn router(state: AppState) -> Router<AppState> {
    let guarded = Router::new()
        .route("/plans", get(list_plans_http).post(create_plan_http))
        .route("/plans/{plan}", get(get_plan_http).patch(update_plan_http))
        .route("/tenants", get(list_tenants_http).post(create_tenant_http))
        .route(
            "/tenants/{tenant}",
            get(get_tenant_http).patch(update_tenant_http),
        )
        .route("/tenants/{tenant}/suspend", post(suspend_tenant_http))
        .route("/tenants/{tenant}/resume", post(resume_tenant_http))
        .route(
            "/tenants/{tenant}/keys",
            get(list_keys_http).post(create_key_http),
        )
        .route("/keys/{key_id}", get(get_key_http).delete(revoke_key_http))
        .route("/keys/{key_id}/rotate", post(rotate_key_http))
        .layer(middleware::from_fn_with_state(state, require_admin));
    // The document describes the API; it holds nothing secret.
    #[cfg(feature = "openapi")]
    let guarded = guarded.route("/openapi.json", get(openapi_http));
    guarded
}

/// Every admin error body: `{"error": {"code": "...", "message": "..."}}`. Only described here
/// (for the OpenAPI document); [`AppError`] writes it.
#[cfg(feature = "openapi")]
#[derive(utoipa::ToSchema)]
#[allow(dead_code)]
struct ErrorBody {
    error: ErrorDetail,
}

/// The error inside [`ErrorBody`].
#[cfg(feature = "openapi")]
#[derive(utoipa::ToSchema)]
#[allow(dead_code)]
struct ErrorDetail {
    /// Stable machine-readable code (`invalid_request`, `not_found`, `conflict`, `forbidden`,
    /// `unavailable`).
    code: String,
    /// For people.
    message: String,
}

/// The admin API's OpenAPI document.
#[cfg(feature = "openapi")]
pub fn openapi() -> utoipa::openapi::OpenApi {
    use utoipa::OpenApi;
    AdminApi::openapi()
}

#[cfg(feature = "openapi")]
async fn openapi_http() -> Json<utoipa::openapi::OpenApi> {
    Json(openapi())
}

#[cfg(feature = "openapi")]
#[derive(utoipa::OpenApi)]
#[openapi(
    info(
        title = "Repowire relay admin API",
        version = "1",
        description = "Plans, tenants and API keys of a Repowire relay deployment. Every route needs `Authorization: Bearer <admin credential>` (REPOWIRE_ADMIN_TOKEN); no tenant key or token is ever accepted. docs/admin.md explains the operations."
    ),
    paths(
        list_plans_http,
        create_plan_http,
        get_plan_http,
        update_plan_http,
        list_tenants_http,
        create_tenant_http,
        get_tenant_http,
        update_tenant_http,
        suspend_tenant_http,
        resume_tenant_http,
        list_keys_http,
        create_key_http,
        get_key_http,
        rotate_key_http,
        revoke_key_http
    ),
    components(schemas(ErrorBody, ErrorDetail)),
    modifiers(&AdminCredential),
    security(("admin" = []))
)]
struct AdminApi;

#[cfg(feature = "openapi")]
struct AdminCredential;

#[cfg(feature = "openapi")]
impl utoipa::Modify for AdminCredential {
    fn modify(&self, api: &mut utoipa::openapi::OpenApi) {
        use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme};
        let components = api.components.get_or_insert_with(Default::default);
        components.add_security_scheme(
            "admin",
            SecurityScheme::Http(HttpBuilder::new().scheme(HttpAuthScheme::Bearer).build()),
        );
    }
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

/// A JSON body, or `400 invalid_request` saying what was expected.
fn body<T>(body: Result<Json<T>, JsonRejection>, what: &str) -> Result<T, AppError> {
    body.map(|Json(b)| b)
        .map_err(|e| AppError::bad_request(format!("invalid {what}: {e}")))
}

#[cfg_attr(feature = "openapi", utoipa::path(
    operation_id = "list_plans", get, path = "/admin/v1/plans", tag = "plans",
    responses((status = 200, description = "Every plan, by name", body = [PlanRecord]),
              (status = 403, description = "Not an admin credential", body = ErrorBody))
))]
async fn list_plans_http(State(state): State<AppState>) -> Result<Json<Vec<PlanRecord>>, AppError> {
    Ok(Json(state.store.list_plans().await?))
}

#[cfg_attr(feature = "openapi", utoipa::path(
    operation_id = "create_plan", post, path = "/admin/v1/plans", tag = "plans", request_body = NewPlan,
    responses((status = 201, description = "The plan", body = PlanRecord),
              (status = 400, description = "Bad name, text or limit", body = ErrorBody),
              (status = 409, description = "The name is taken", body = ErrorBody))
))]
async fn create_plan_http(
    State(state): State<AppState>,
    new: Result<Json<NewPlan>, JsonRejection>,
) -> Result<(StatusCode, Json<PlanRecord>), AppError> {
    let new = body(new, "plan")?;
    Ok((
        StatusCode::CREATED,
        Json(plans::create_plan(state.store.as_ref(), new).await?),
    ))
}

#[cfg_attr(feature = "openapi", utoipa::path(
    operation_id = "get_plan", get, path = "/admin/v1/plans/{plan}", tag = "plans",
    params(("plan" = String, Path, description = "Plan name")),
    responses((status = 200, description = "The plan", body = PlanRecord),
              (status = 404, description = "No such plan", body = ErrorBody))
))]
async fn get_plan_http(
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
async fn update_plan_http(
    State(state): State<AppState>,
    Path(name): Path<String>,
    patch: Result<Json<PlanPatch>, JsonRejection>,
) -> Result<Json<PlanRecord>, AppError> {
    let patch = body(patch, "plan change")?;
    Ok(Json(
        plans::update_plan(state.store.as_ref(), &name, patch).await?,
    ))
}

#[cfg_attr(feature = "openapi", utoipa::path(
    operation_id = "create_tenant", post, path = "/admin/v1/tenants", tag = "tenants", request_body = NewTenant,
    responses((status = 201, description = "The tenant", body = TenantRecord),
              (status = 400, description = "Bad name, unknown plan, bad override", body = ErrorBody),
              (status = 409, description = "The name is taken", body = ErrorBody))
))]
async fn create_tenant_http(
    State(state): State<AppState>,
    new: Result<Json<NewTenant>, JsonRejection>,
) -> Result<(StatusCode, Json<TenantRecord>), AppError> {
    let new = body(new, "tenant (expected {\"name\": \"…\"})")?;
    Ok((
        StatusCode::CREATED,
        Json(create_tenant(state.store.as_ref(), new).await?),
    ))
}

#[cfg_attr(feature = "openapi", utoipa::path(
    operation_id = "list_tenants", get, path = "/admin/v1/tenants", tag = "tenants",
    responses((status = 200, description = "Every tenant, oldest first", body = [TenantRecord]))
))]
async fn list_tenants_http(
    State(state): State<AppState>,
) -> Result<Json<Vec<TenantRecord>>, AppError> {
    Ok(Json(state.store.list_tenants().await?))
}

#[cfg_attr(feature = "openapi", utoipa::path(
    operation_id = "get_tenant", get, path = "/admin/v1/tenants/{tenant}", tag = "tenants",
    params(("tenant" = String, Path, description = "Tenant id or name")),
    responses((status = 200, description = "The tenant with the limits in effect", body = TenantDetail),
              (status = 404, description = "No such tenant", body = ErrorBody))
))]
async fn get_tenant_http(
    State(state): State<AppState>,
    Path(tenant_ref): Path<String>,
) -> Result<Json<TenantDetail>, AppError> {
    Ok(Json(get_tenant(state.store.as_ref(), &tenant_ref).await?))
}

#[cfg_attr(feature = "openapi", utoipa::path(
    operation_id = "update_tenant", patch, path = "/admin/v1/tenants/{tenant}", tag = "tenants", request_body = TenantPatch,
    params(("tenant" = String, Path, description = "Tenant id or name")),
    responses((status = 200, description = "The tenant as changed", body = TenantDetail),
              (status = 400, description = "Unknown plan, bad text or override; nothing changed", body = ErrorBody),
              (status = 404, description = "No such tenant", body = ErrorBody))
))]
async fn update_tenant_http(
    State(state): State<AppState>,
    Path(tenant_ref): Path<String>,
    patch: Result<Json<TenantPatch>, JsonRejection>,
) -> Result<Json<TenantDetail>, AppError> {
    let patch = body(patch, "tenant change")?;
    Ok(Json(
        update_tenant(state.store.as_ref(), &tenant_ref, patch).await?,
    ))
}

#[cfg_attr(feature = "openapi", utoipa::path(
    operation_id = "suspend_tenant", post, path = "/admin/v1/tenants/{tenant}/suspend", tag = "tenants",
    params(("tenant" = String, Path, description = "Tenant id or name")),
    responses((status = 200, description = "Suspended (again); its connections close with 4010 on every relay process", body = TenantDetail),
              (status = 404, description = "No such tenant", body = ErrorBody))
))]
async fn suspend_tenant_http(
    State(state): State<AppState>,
    Path(tenant_ref): Path<String>,
) -> Result<Json<TenantDetail>, AppError> {
    let detail = super::tenants::set_suspended(state.store.as_ref(), &tenant_ref, true).await?;
    // This process closes them now; the others at their next key check.
    crate::keycheck::close_unusable(&state).await;
    Ok(Json(detail))
}

#[cfg_attr(feature = "openapi", utoipa::path(
    operation_id = "resume_tenant", post, path = "/admin/v1/tenants/{tenant}/resume", tag = "tenants",
    params(("tenant" = String, Path, description = "Tenant id or name")),
    responses((status = 200, description = "Active (again)", body = TenantDetail),
              (status = 404, description = "No such tenant", body = ErrorBody))
))]
async fn resume_tenant_http(
    State(state): State<AppState>,
    Path(tenant_ref): Path<String>,
) -> Result<Json<TenantDetail>, AppError> {
    Ok(Json(
        super::tenants::set_suspended(state.store.as_ref(), &tenant_ref, false).await?,
    ))
}

#[cfg_attr(feature = "openapi", utoipa::path(
    operation_id = "create_key", post, path = "/admin/v1/tenants/{tenant}/keys", tag = "keys", request_body = KeyRequestBody,
    params(("tenant" = String, Path, description = "Tenant id or name"),
           ("Idempotency-Key" = Option<String>, Header, description = "1-255 printable ASCII characters: a retry with the same value makes no second key")),
    responses((status = 201, description = "The key; its text is shown only here", body = KeyCreated),
              (status = 200, description = "A retry of an earlier request with the same Idempotency-Key: that request's key (its text again within 10 minutes)", body = KeyCreated),
              (status = 400, description = "Bad label, lifetime or Idempotency-Key; no key stored", body = ErrorBody),
              (status = 404, description = "No such tenant", body = ErrorBody),
              (status = 409, description = "The Idempotency-Key was used for a different request", body = ErrorBody))
))]
async fn create_key_http(
    State(state): State<AppState>,
    Path(tenant_ref): Path<String>,
    headers: HeaderMap,
    request: Result<Json<KeyRequestBody>, JsonRejection>,
) -> Result<(StatusCode, Json<KeyCreated>), AppError> {
    let request = body(request, "key request")?;
    if let Some(value) = headers.get("idempotency-key") {
        let idempotency_key = value
            .to_str()
            .map_err(|_| AppError::bad_request("the Idempotency-Key is not printable ASCII"))?;
        let created = super::keys::create_key_once(
            state.store.as_ref(),
            &state.tokens,
            &tenant_ref,
            &request,
            idempotency_key,
            i64::try_from(state.config.key_replay_window_secs.saturating_mul(1000))
                .unwrap_or(i64::MAX),
        )
        .await?;
        let status = if created.replayed {
            StatusCode::OK
        } else {
            StatusCode::CREATED
        };
        return Ok((status, Json(created)));
    }
    let mode = if request.test {
        KeyMode::Test
    } else {
        KeyMode::Live
    };
    let minted = create_key(
        state.store.as_ref(),
        &tenant_ref,
        mode,
        &request.label,
        request.expires_in_days,
    )
    .await?;
    Ok((
        StatusCode::CREATED,
        Json(KeyCreated {
            api_key: Some(minted.text),
            key: minted.record,
            replayed: false,
        }),
    ))
}

#[cfg_attr(feature = "openapi", utoipa::path(
    operation_id = "get_key", get, path = "/admin/v1/keys/{key_id}", tag = "keys",
    params(("key_id" = String, Path, description = "Key id (`key-…`)")),
    responses((status = 200, description = "The key (never its text)", body = ApiKeyRecord),
              (status = 404, description = "No such key", body = ErrorBody))
))]
async fn get_key_http(
    State(state): State<AppState>,
    Path(key_id): Path<String>,
) -> Result<Json<ApiKeyRecord>, AppError> {
    Ok(Json(get_key(state.store.as_ref(), &key_id).await?))
}

/// `POST /keys/{key_id}/rotate`.
#[derive(Debug, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
struct RotateKey {
    /// How long the old key keeps working, seconds (0 to 2 592 000, i.e. 30 days).
    grace_seconds: u64,
}

/// A rotation's result.
#[derive(Debug, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
struct Rotated {
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
              (status = 404, description = "No such key", body = ErrorBody))
))]
async fn rotate_key_http(
    State(state): State<AppState>,
    Path(key_id): Path<String>,
    request: Result<Json<RotateKey>, JsonRejection>,
) -> Result<(StatusCode, Json<Rotated>), AppError> {
    let request = body(request, "rotation (expected {\"grace_seconds\": N})")?;
    let (minted, previous) =
        rotate_key(state.store.as_ref(), &key_id, request.grace_seconds).await?;
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
    params(("tenant" = String, Path, description = "Tenant id or name")),
    responses((status = 200, description = "The tenant's keys (never their text)", body = [ApiKeyRecord]),
              (status = 404, description = "No such tenant", body = ErrorBody))
))]
async fn list_keys_http(
    State(state): State<AppState>,
    Path(tenant_ref): Path<String>,
) -> Result<Json<Vec<ApiKeyRecord>>, AppError> {
    Ok(Json(list_keys(state.store.as_ref(), &tenant_ref).await?))
}

#[cfg_attr(feature = "openapi", utoipa::path(
    operation_id = "revoke_key", delete, path = "/admin/v1/keys/{key_id}", tag = "keys",
    params(("key_id" = String, Path, description = "Key id (`key-…`)")),
    responses((status = 204, description = "Revoked; its connections close on every relay process"),
              (status = 404, description = "No such key", body = ErrorBody))
))]
async fn revoke_key_http(
    State(state): State<AppState>,
    Path(key_id): Path<String>,
) -> Result<StatusCode, AppError> {
    revoke_key(state.store.as_ref(), Some(&state.hub), &key_id).await?;
    state.cluster.revoked(&key_id).await;
    Ok(StatusCode::NO_CONTENT)
}
