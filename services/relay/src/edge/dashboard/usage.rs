//! `GET /dashboard/usage.csv`: the tenant's usage as CSV, a download. The same report as
//! `GET /v1/usage?format=csv` (the same query: `from`, `to`, `granularity`; this month by day
//! when left out), with the session as the credential.

use axum::extract::rejection::QueryRejection;
use axum::extract::{Query, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::Response;

use super::page::PageError;
use super::session;
use crate::edge::admin::usage::{TenantUsageQuery, tenant_report};
use crate::ids::now_ms;
use crate::state::AppState;
use crate::tenancy::apikey;
use crate::tenancy::usage::calendar;

/// `GET /dashboard/usage.csv`.
pub(crate) async fn csv(
    State(state): State<AppState>,
    headers: HeaderMap,
    query: Result<Query<TenantUsageQuery>, QueryRejection>,
) -> Result<Response, PageError> {
    let signed = session::required(&state, &headers).await?;
    if !signed.may(apikey::USAGE_READ) {
        return Err(PageError::Shown(
            StatusCode::FORBIDDEN,
            "this session's key lacks `usage:read`".into(),
        ));
    }
    let Query(q) = query.map_err(|e| PageError::Shown(StatusCode::BAD_REQUEST, e.body_text()))?;
    let mut response = tenant_report(&state, signed.tenant_id(), q.into_csv()).await?;
    let month = &calendar::utc_string(now_ms())[..7];
    let name = format!("repowire-usage-{}-{month}.csv", signed.tenant.name);
    // Tenant names are letters, digits, `.`, `_` and `-`: a safe file name as they are.
    if let Ok(value) = HeaderValue::from_str(&format!("attachment; filename=\"{name}\"")) {
        response
            .headers_mut()
            .insert(header::CONTENT_DISPOSITION, value);
    }
    Ok(response)
}
