//! The admin HTTP API under `/admin/v1`, guarded by its own bearer credential that no tenant
//! key or token can match. Each route calls the operation of [`super`] of the same name.

use axum::extract::rejection::JsonRejection;
use axum::extract::{Request, State};
use axum::http::{HeaderMap, Method, StatusCode};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use repowire_protocol::ErrorCode;
use sha2::{Digest, Sha256};

mod audit;
mod keys;
mod plans;
mod tenants;
mod tokens;
pub(crate) mod usage;

use audit::*;
use keys::*;
use plans::*;
use tenants::*;
use tokens::*;
use usage::*;

pub(crate) use tenants::suspend_or_resume as set_tenant_suspended;

use crate::error::AppError;
use crate::state::AppState;
use crate::tenancy::admin::audit::AdminCtx;

/// Admin routes, nested under `/admin/v1`.
pub fn router(state: AppState) -> Router<AppState> {
    let guarded = Router::new()
        .route("/plans", get(list_plans_http).post(create_plan_http))
        .route("/plans/{plan}", get(get_plan_http).patch(update_plan_http))
        .route("/tenants", get(list_tenants_http).post(create_tenant_http))
        .route(
            "/tenants/{tenant}",
            get(get_tenant_http)
                .patch(update_tenant_http)
                .delete(delete_tenant_http),
        )
        .route("/tenants/{tenant}/purge", post(purge_tenant_http))
        .route("/tenants/{tenant}/suspend", post(suspend_tenant_http))
        .route("/tenants/{tenant}/resume", post(resume_tenant_http))
        .route(
            "/tenants/{tenant}/keys",
            get(list_keys_http).post(create_key_http),
        )
        .route("/keys/{key_id}", get(get_key_http).delete(revoke_key_http))
        .route("/keys/{key_id}/rotate", post(rotate_key_http))
        .route("/audit", get(list_audit_http))
        .route("/tenants/{tenant}/usage", get(tenant_usage_http))
        .route("/usage", get(usage_export_http))
        .route(
            "/admin-tokens",
            get(list_admin_tokens_http).post(create_admin_token_http),
        )
        .route(
            "/admin-tokens/{token_id}",
            axum::routing::delete(revoke_admin_token_http),
        )
        // The credential first, then the body's shape.
        .layer(middleware::from_fn(crate::edge::jsonbody::objects_only))
        .layer(middleware::from_fn_with_state(state, require_admin));
    // The document describes the API; it holds nothing secret.
    #[cfg(feature = "openapi")]
    let guarded = guarded.route("/openapi.json", get(openapi_http));
    guarded
}

/// Every admin error body: `{"error": {"code": "...", "message": "..."}}`, the body of every
/// relay HTTP error (the protocol crate's type, which [`AppError`] writes).
#[cfg(feature = "openapi")]
pub(super) use repowire_protocol::http::HttpError as ErrorBody;

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
        description = "Plans, tenants, API keys, usage, admin tokens and the audit log of a Repowire relay deployment. Every route needs `Authorization: Bearer <admin credential>`: the bootstrap token (REPOWIRE_ADMIN_TOKEN) or a minted admin token with the scope `admin:read` (GET) or `admin:write` (every other method); no tenant key or token is ever accepted. docs/admin.md explains the operations."
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
        delete_tenant_http,
        purge_tenant_http,
        list_keys_http,
        create_key_http,
        get_key_http,
        rotate_key_http,
        revoke_key_http,
        list_audit_http,
        tenant_usage_http,
        usage_export_http,
        create_admin_token_http,
        list_admin_tokens_http,
        revoke_admin_token_http
    ),
    components(schemas(ErrorBody, repowire_protocol::http::HttpErrorBody, repowire_protocol::ErrorCode, crate::storage::store::TenantStatus, usage::Format)),
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
        use utoipa::openapi::{Content, Ref, ResponseBuilder};
        let components = api.components.get_or_insert_with(Default::default);
        components.add_security_scheme(
            "admin",
            SecurityScheme::Http(HttpBuilder::new().scheme(HttpAuthScheme::Bearer).build()),
        );
        // Every route may answer 403: the credential is checked before the route runs.
        let forbidden = ResponseBuilder::new()
            .description("No admin credential, a wrong one, or an admin token without the scope this request needs (admin:tokens for /admin-tokens, else admin:read for GET and admin:write otherwise)")
            .content(
                "application/json",
                Content::new(Some(Ref::from_schema_name("ErrorBody"))),
            )
            .build();
        for item in api.paths.paths.values_mut() {
            for operation in [
                &mut item.get,
                &mut item.put,
                &mut item.post,
                &mut item.delete,
                &mut item.patch,
            ]
            .into_iter()
            .flatten()
            {
                operation
                    .responses
                    .responses
                    .entry("403".into())
                    .or_insert_with(|| forbidden.clone().into());
            }
        }
    }
}

/// A credential's digest, to compare two in time independent of where they differ.
pub(crate) fn digest(s: &str) -> [u8; 32] {
    Sha256::digest(s.as_bytes()).into()
}

/// The admin credential check (and the scope a request needs), as middleware: the admin
/// routes, and `/metrics` when `--metrics-auth` is set.
pub(crate) async fn require_admin(
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
    let given = crate::tenancy::token::bearer(&headers)
        .ok()
        .flatten()
        .unwrap_or("");
    let forbidden = |message: String| {
        AppError::new(StatusCode::FORBIDDEN, ErrorCode::Forbidden, message).into_response()
    };
    // Comparing digests keeps the comparison time independent of where the strings differ.
    let ctx = if digest(given) == digest(expected) {
        AdminCtx::admin_token()
    } else {
        let token = match crate::tenancy::admin::tokens::find(state.store.as_ref(), given).await {
            Ok(Some(token)) => token,
            Ok(None) => return forbidden("admin credential required".into()),
            Err(e) => return AppError::from(e).into_response(),
        };
        let needed = if request.uri().path().starts_with("/admin-tokens") {
            crate::tenancy::admin::tokens::TOKENS
        } else if matches!(*request.method(), Method::GET | Method::HEAD) {
            crate::tenancy::admin::tokens::READ
        } else {
            crate::tenancy::admin::tokens::WRITE
        };
        if !token.has(needed) {
            return forbidden(format!(
                "admin token {} lacks the scope `{needed}` this request needs",
                token.id
            ));
        }
        // Only for the operator's view; a failure here must not refuse a valid token.
        if let Err(error) = state
            .store
            .admin_token_used(&token.id, crate::ids::now_ms())
            .await
        {
            tracing::warn!(%error, token = %token.id, "could not record an admin token's use");
        }
        AdminCtx::minted(token)
    };
    let request_id = ctx.request_id.clone();
    let mut request = request;
    request.extensions_mut().insert(ctx);
    let mut response = next.run(request).await;
    if let Ok(value) = axum::http::HeaderValue::from_str(&request_id) {
        response.headers_mut().insert("x-request-id", value);
    }
    response
}

/// A JSON body, or `400 invalid_request` saying what was expected.
pub(super) fn body<T>(body: Result<Json<T>, JsonRejection>, what: &str) -> Result<T, AppError> {
    body.map(|Json(b)| b)
        .map_err(|e| AppError::bad_request(format!("invalid {what}: {e}")))
}
