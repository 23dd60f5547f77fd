//! The audit log: every admin write — through the admin API or `repowire-relay admin` — is
//! recorded with who, what, when, the request and the object before and after it. A key's
//! text never appears (only its record).

use serde::{Deserialize, Serialize};

use super::AdminError;
use super::page::{PageQuery, next_cursor};
use crate::ids::now_ms;
use crate::storage::store::{AdminTokenRecord, AuditEvent, AuditFilter, TenantStore};

/// Who is acting and in which request.
#[derive(Debug, Clone)]
pub struct AdminCtx {
    /// `admin-token` (the bootstrap token), `admin-token:adm-…` (a minted one) or `cli`.
    pub actor: String,
    /// A UUIDv7, answered as `x-request-id`.
    pub request_id: String,
    /// The minted admin token behind the request; `None` for the bootstrap token and the CLI,
    /// which hold every scope.
    pub token: Option<AdminTokenRecord>,
}

impl AdminCtx {
    /// A request authenticated with the configured admin credential.
    pub fn admin_token() -> Self {
        Self {
            actor: "admin-token".into(),
            request_id: uuid::Uuid::now_v7().to_string(),
            token: None,
        }
    }

    /// A request authenticated with a minted admin token.
    pub fn minted(token: AdminTokenRecord) -> Self {
        Self {
            actor: format!("admin-token:{}", token.id),
            request_id: uuid::Uuid::now_v7().to_string(),
            token: Some(token),
        }
    }

    /// A `repowire-relay admin` command.
    pub fn cli() -> Self {
        Self {
            actor: "cli".into(),
            request_id: uuid::Uuid::now_v7().to_string(),
            token: None,
        }
    }
}

fn json_of(value: Option<&impl Serialize>) -> Option<String> {
    value.and_then(|v| serde_json::to_string(v).ok())
}

/// Records one write. It runs after the write succeeded; if the record cannot be stored the
/// write stands (answering an error would invite a retry of a write that happened) and the
/// failure is logged as an error.
pub async fn record(
    store: &dyn TenantStore,
    ctx: &AdminCtx,
    action: &str,
    target: &str,
    tenant_id: Option<&str>,
    before: Option<&impl Serialize>,
    after: Option<&impl Serialize>,
) {
    let event = AuditEvent {
        id: uuid::Uuid::now_v7().to_string(),
        at_ms: now_ms(),
        actor: ctx.actor.clone(),
        action: action.to_owned(),
        target: target.to_owned(),
        tenant_id: tenant_id.map(str::to_owned),
        request_id: ctx.request_id.clone(),
        before_json: json_of(before),
        after_json: json_of(after),
    };
    if let Err(error) = store.insert_audit(&event).await {
        tracing::error!(%error, action, target, request = %ctx.request_id, "an admin write was not audited");
    }
}

/// `GET /audit` filters.
#[derive(Debug, Clone, Default, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::IntoParams))]
#[cfg_attr(feature = "openapi", into_params(parameter_in = Query))]
#[serde(deny_unknown_fields)]
pub struct AuditQuery {
    /// Only events of this tenant (id or name; a purged tenant by id).
    pub tenant: Option<String>,
    /// Only events at or after this time (ms since the epoch).
    pub from: Option<i64>,
    /// Only events before this time (ms since the epoch).
    pub to: Option<i64>,
    /// Items per page, 1–500 (default 100).
    pub limit: Option<u32>,
    /// The previous page's `next_cursor`.
    pub cursor: Option<String>,
}

/// A page of audit events.
#[derive(Debug, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct AuditPage {
    /// Oldest first.
    pub items: Vec<AuditEvent>,
    /// Pass as `cursor` for the next page; `null` on the last one.
    pub next_cursor: Option<String>,
}

/// A page of the audit log, oldest first.
pub async fn list(store: &dyn TenantStore, query: AuditQuery) -> Result<AuditPage, AdminError> {
    let page = PageQuery {
        limit: query.limit,
        cursor: query.cursor,
    };
    let limit = page.limit()?;
    if let (Some(from), Some(to)) = (query.from, query.to)
        && from > to
    {
        return Err(AdminError::Invalid(format!(
            "from ({from}) is after to ({to})"
        )));
    }
    // A purged tenant's events stay: its id still selects them.
    let tenant_id = match query.tenant {
        Some(t) => Some(match store.find_tenant(super::tenant_key(&t)).await? {
            Some(found) => found.id,
            None => t,
        }),
        None => None,
    };
    let filter = AuditFilter {
        tenant_id,
        from_ms: query.from,
        to_ms: query.to,
        after: page.after()?,
    };
    let items = store.list_audit(&filter, limit).await?;
    let full = i64::try_from(items.len()).unwrap_or(i64::MAX) == limit;
    let next_cursor = next_cursor(full, items.last().map(|e| (e.at_ms, e.id.as_str())));
    Ok(AuditPage { items, next_cursor })
}
