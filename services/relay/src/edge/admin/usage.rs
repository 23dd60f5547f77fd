//! Routes of usage: one tenant's, by hour, day or month; and every tenant's for a month (the
//! billing export). JSON, or CSV with `format=csv`.

use std::collections::BTreeMap;

use axum::Json;
use axum::extract::rejection::QueryRejection;
use axum::extract::{Path, Query, State};
use axum::http::header;
use axum::response::{IntoResponse, Response};
use serde::{Deserialize, Serialize};

#[cfg(feature = "openapi")]
use super::ErrorBody;
use crate::error::AppError;
use crate::ids::now_ms;
use crate::state::AppState;
use crate::tenancy::admin::AdminError;
use crate::tenancy::usage::{self, Granularity, Period};

/// Output format.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub(crate) enum Format {
    /// `application/json`.
    #[default]
    Json,
    /// `text/csv`: `tenant_id,tenant_name,period_start,granularity,metric,value`.
    Csv,
}

/// `GET /tenants/{tenant}/usage` parameters.
#[derive(Debug, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::IntoParams))]
#[cfg_attr(feature = "openapi", into_params(parameter_in = Query))]
#[serde(deny_unknown_fields)]
pub(crate) struct TenantUsageQuery {
    /// From (ms since 1970, inclusive; the hour it falls in counts whole), 0 to
    /// 253402300800000. Default: the start of this month.
    #[cfg_attr(
        feature = "openapi",
        param(minimum = 0, maximum = 253_402_300_800_000_i64)
    )]
    from: Option<i64>,
    /// To (ms since 1970, exclusive), 0 to 253402300800000. Default: now.
    #[cfg_attr(
        feature = "openapi",
        param(minimum = 0, maximum = 253_402_300_800_000_i64)
    )]
    to: Option<i64>,
    /// `hour`, `day` (default) or `month` (UTC).
    granularity: Option<Granularity>,
    /// `json` (default) or `csv`.
    format: Option<Format>,
}

impl TenantUsageQuery {
    /// The same report as CSV (the dashboard's download).
    pub(crate) fn into_csv(mut self) -> Self {
        self.format = Some(Format::Csv);
        self
    }
}

/// `GET /usage` parameters.
#[derive(Debug, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::IntoParams))]
#[cfg_attr(feature = "openapi", into_params(parameter_in = Query))]
#[serde(deny_unknown_fields)]
pub(super) struct UsageExportQuery {
    /// The month, `YYYY-MM` (UTC).
    period: String,
    /// `json` (default) or `csv`.
    format: Option<Format>,
}

/// Usage as JSON.
#[derive(Debug, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub(crate) struct UsageReport {
    /// `hour`, `day` or `month`.
    granularity: Granularity,
    /// From (ms).
    from: i64,
    /// To (ms).
    to: i64,
    /// One entry per tenant and period with usage, every metric listed.
    periods: Vec<Period>,
}

async fn answer(
    state: &AppState,
    periods: Vec<Period>,
    granularity: Granularity,
    (from, to): (i64, i64),
    format: Format,
) -> Result<Response, AppError> {
    match format {
        Format::Json => Ok(Json(UsageReport {
            granularity,
            from,
            to,
            periods,
        })
        .into_response()),
        Format::Csv => {
            let mut names = BTreeMap::new();
            for p in &periods {
                if !names.contains_key(&p.tenant_id)
                    && let Some(t) = state
                        .store
                        .find_tenant(crate::storage::store::TenantKey::Id(&p.tenant_id))
                        .await?
                {
                    names.insert(t.id, t.name);
                }
            }
            let body = usage::csv(&periods, granularity, &names);
            Ok(([(header::CONTENT_TYPE, "text/csv; charset=utf-8")], body).into_response())
        }
    }
}

#[cfg_attr(feature = "openapi", utoipa::path(
    operation_id = "tenant_usage", get, path = "/admin/v1/tenants/{tenant}/usage", tag = "usage",
    params(("tenant" = String, Path, description = "Tenant id (`tnt-…`: looked up as an id) or name"), TenantUsageQuery),
    responses((status = 200, description = "Usage by period (JSON, or CSV with format=csv)",
               content((UsageReport = "application/json"), (String = "text/csv"))),
              (status = 400, description = "Bad range, granularity or format", body = ErrorBody),
              (status = 404, description = "No such tenant", body = ErrorBody))
))]
pub(super) async fn tenant_usage_http(
    State(state): State<AppState>,
    Path(tenant_ref): Path<String>,
    query: Result<Query<TenantUsageQuery>, QueryRejection>,
) -> Result<Response, AppError> {
    let Query(q) = query.map_err(|e| AppError::bad_request(e.body_text()))?;
    let tenant = crate::tenancy::admin::tenant(state.store.as_ref(), &tenant_ref).await?;
    tenant_report(&state, &tenant.id, q).await
}

/// The latest time a usage range may name: 10000-01-01T00:00:00Z (ms). Bounding the range
/// keeps the hour and calendar arithmetic within `i64`.
const LATEST_MS: i64 = 253_402_300_800_000;

/// One tenant's usage as `q` asks (shared with the tenant's own `GET /v1/usage`).
pub(crate) async fn tenant_report(
    state: &AppState,
    tenant_id: &str,
    q: TenantUsageQuery,
) -> Result<Response, AppError> {
    let now = now_ms();
    let from = q.from.unwrap_or_else(|| usage::month_start(now));
    let to = q.to.unwrap_or(now + 1);
    for (name, at) in [("from", from), ("to", to)] {
        if !(0..=LATEST_MS).contains(&at) {
            return Err(AdminError::Invalid(format!(
                "{name} is {at}; a time is 0 (1970) to {LATEST_MS} (the year 10000) in ms"
            ))
            .into());
        }
    }
    if from >= to {
        return Err(AdminError::Invalid(format!("from ({from}) is not before to ({to})")).into());
    }
    let granularity = q.granularity.unwrap_or(Granularity::Day);
    let periods =
        usage::report(state.store.as_ref(), Some(tenant_id), from, to, granularity).await?;
    answer(
        state,
        periods,
        granularity,
        (from, to),
        q.format.unwrap_or_default(),
    )
    .await
}

#[cfg_attr(feature = "openapi", utoipa::path(
    operation_id = "usage_export", get, path = "/admin/v1/usage", tag = "usage",
    params(UsageExportQuery),
    responses((status = 200, description = "Every tenant's usage in the month, one period per tenant (JSON, or CSV with format=csv)",
               content((UsageReport = "application/json"), (String = "text/csv"))),
              (status = 400, description = "Bad period or format", body = ErrorBody))
))]
pub(super) async fn usage_export_http(
    State(state): State<AppState>,
    query: Result<Query<UsageExportQuery>, QueryRejection>,
) -> Result<Response, AppError> {
    let Query(q) = query.map_err(|e| AppError::bad_request(e.body_text()))?;
    let (from, to) = usage::parse_month(&q.period).ok_or_else(|| {
        AdminError::Invalid(format!("period `{}` is not a month (YYYY-MM)", q.period))
    })?;
    let periods = usage::report(state.store.as_ref(), None, from, to, Granularity::Month).await?;
    answer(
        &state,
        periods,
        Granularity::Month,
        (from, to),
        q.format.unwrap_or_default(),
    )
    .await
}
