//! Tenants: create (on a plan, with optional overrides), get with the limits in effect, change.

use serde::{Deserialize, Serialize};

use super::page::{PageQuery, next_cursor};
use super::{AdminError, plans};
use crate::ids::{TENANT_ID_PREFIX, now_ms, random_suffix};
use crate::storage::store::{
    Limits, PlanRecord, Store, TenantFilter, TenantKey, TenantRecord, TenantStatus,
};
use crate::tenancy::limits::{self, LimitsPatch};

/// Longest display name, bytes.
pub const MAX_DISPLAY_NAME_BYTES: usize = 128;

/// The plan a tenant gets when none is named.
pub const DEFAULT_PLAN: &str = "free";

/// `POST /tenants`.
#[derive(Debug, Default, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct NewTenant {
    /// Unique name (1–64 bytes of letters, digits, `.`, `_`, `-`; never starting with `tnt-`,
    /// which is how tenant ids start).
    pub name: String,
    /// Its plan (default `free`).
    #[serde(default)]
    pub plan: Option<String>,
    /// A name for people (at most 128 bytes).
    #[serde(default)]
    pub display_name: Option<String>,
    /// Values replacing the plan's for this tenant.
    #[serde(default, deserialize_with = "crate::tenancy::admin::fields::object")]
    pub overrides: Limits,
}

/// `PATCH /tenants/{tenant}`: what is left out stays as it is.
#[derive(Debug, Default, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct TenantPatch {
    /// Move the tenant to this plan.
    #[serde(default)]
    pub plan: Option<String>,
    /// New display name; `null` removes it.
    #[serde(default, deserialize_with = "present_text")]
    #[cfg_attr(feature = "openapi", schema(value_type = Option<String>))]
    pub display_name: Option<Option<String>>,
    /// Changes to the overrides (`null` returns a limit to the plan's value).
    #[serde(
        default,
        deserialize_with = "crate::tenancy::admin::fields::optional_object"
    )]
    pub overrides: Option<LimitsPatch>,
}

fn present_text<'de, D: serde::Deserializer<'de>>(
    d: D,
) -> Result<Option<Option<String>>, D::Error> {
    Option::<String>::deserialize(d).map(Some)
}

/// A tenant with its plan and the limits in effect.
#[derive(Debug, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct TenantDetail {
    /// The tenant.
    #[serde(flatten)]
    pub tenant: TenantRecord,
    /// Each override where it has one, else the plan's value; `null` is unlimited.
    pub effective_limits: Limits,
    /// Bytes of shared state it stores now (keys and values, every circle), against
    /// `effective_limits.max_state_bytes`.
    pub state_bytes: i64,
    /// Peers it stores now (live and offline), against `effective_limits.max_stored_peers`.
    pub stored_peers: i64,
}

async fn plan_named(store: &dyn Store, name: &str) -> Result<PlanRecord, AdminError> {
    store.get_plan(name).await?.ok_or_else(|| {
        AdminError::Invalid(format!("no plan `{name}` (GET /admin/v1/plans lists them)"))
    })
}

/// A tenant name: 1–64 letters, digits, `.`, `_`, `-`, and never the shape of a tenant id
/// (`tnt-…`, in any case), so that a `{tenant}` reference can always tell an id from a name.
pub(crate) fn check_name(name: &str) -> Result<(), AdminError> {
    if !repowire_protocol::validate::is_valid_name(name) {
        return Err(AdminError::Invalid(
            "a tenant name is 1-64 characters of letters, digits, '.', '_' or '-'".into(),
        ));
    }
    if name
        .get(..TENANT_ID_PREFIX.len())
        .is_some_and(|lead| lead.eq_ignore_ascii_case(TENANT_ID_PREFIX))
    {
        return Err(AdminError::Invalid(format!(
            "a tenant name may not start with `{TENANT_ID_PREFIX}`: that is how tenant ids start"
        )));
    }
    Ok(())
}

fn check_display_name(name: Option<&str>) -> Result<(), AdminError> {
    match name {
        Some(n) => plans::check_text("display name", n, MAX_DISPLAY_NAME_BYTES),
        None => Ok(()),
    }
}

/// Creates a tenant. Everything is checked before anything is stored.
pub async fn create_tenant(store: &dyn Store, new: NewTenant) -> Result<TenantRecord, AdminError> {
    check_name(&new.name)?;
    check_display_name(new.display_name.as_deref())?;
    limits::validate(&new.overrides).map_err(AdminError::Invalid)?;
    let plan = plan_named(store, new.plan.as_deref().unwrap_or(DEFAULT_PLAN)).await?;
    let tenant = TenantRecord {
        id: format!("{TENANT_ID_PREFIX}{}", random_suffix()),
        name: new.name,
        plan: plan.name,
        created_at_ms: now_ms(),
        suspended_at_ms: None,
        deleted_at_ms: None,
        display_name: new.display_name,
        overrides: new.overrides,
    };
    store.create_tenant(&tenant).await?;
    Ok(tenant)
}

/// A tenant (by id or name) with the limits in effect.
pub async fn get_tenant(store: &dyn Store, tenant_ref: &str) -> Result<TenantDetail, AdminError> {
    get_tenant_by(store, super::tenant_key(tenant_ref)).await
}

/// A tenant (by the key given) with the limits in effect.
pub(crate) async fn get_tenant_by(
    store: &dyn Store,
    key: TenantKey<'_>,
) -> Result<TenantDetail, AdminError> {
    let tenant = super::tenant_by(store, key).await?;
    let plan = store.get_plan(&tenant.plan).await?.ok_or_else(|| {
        AdminError::Store(crate::storage::store::StoreError::Corrupt(format!(
            "tenant {} is on plan `{}`, which does not exist",
            tenant.id, tenant.plan
        )))
    })?;
    Ok(TenantDetail {
        effective_limits: limits::effective(&plan.limits, &tenant.overrides),
        state_bytes: store.state_bytes(&tenant.id).await?,
        stored_peers: store.stored_peers(&tenant.id).await?,
        tenant,
    })
}

/// A tenant that is not deleted (a deleted one can only be read or purged).
pub(crate) async fn live_tenant(
    store: &dyn Store,
    key: TenantKey<'_>,
) -> Result<TenantRecord, AdminError> {
    let tenant = super::tenant_by(store, key).await?;
    if tenant.deleted_at_ms.is_some() {
        return Err(AdminError::Store(
            crate::storage::store::StoreError::Conflict(format!(
                "tenant `{}` is deleted; it can only be purged",
                tenant.id
            )),
        ));
    }
    Ok(tenant)
}

/// Changes a tenant's plan, display name or overrides. A limit below the tenant's current use
/// is accepted and applies from then on.
pub async fn update_tenant(
    store: &dyn Store,
    tenant_ref: &str,
    patch: TenantPatch,
) -> Result<TenantDetail, AdminError> {
    let mut tenant = live_tenant(store, super::tenant_key(tenant_ref)).await?;
    if let Some(plan) = &patch.plan {
        tenant.plan = plan_named(store, plan).await?.name;
    }
    if let Some(display_name) = patch.display_name {
        check_display_name(display_name.as_deref())?;
        tenant.display_name = display_name;
    }
    if let Some(change) = &patch.overrides {
        tenant.overrides = change.apply(&tenant.overrides);
    }
    limits::validate(&tenant.overrides).map_err(AdminError::Invalid)?;
    if !store.update_tenant(&tenant).await? {
        return Err(AdminError::NotFound(format!("no tenant `{tenant_ref}`")));
    }
    get_tenant_by(store, TenantKey::Id(&tenant.id)).await
}

/// Suspends (`true`) or resumes (`false`) a tenant. A suspended tenant's token exchanges and
/// upgrades get `403 tenant_suspended`, and every relay process closes its live connections
/// (4010) within its key-check interval; resuming lets its keys in again. Idempotent.
pub async fn set_suspended(
    store: &dyn Store,
    tenant_ref: &str,
    suspended: bool,
) -> Result<TenantDetail, AdminError> {
    let tenant = live_tenant(store, super::tenant_key(tenant_ref)).await?;
    let at = match (suspended, tenant.suspended_at_ms) {
        (true, Some(since)) => Some(since),
        (true, None) => Some(now_ms()),
        (false, _) => None,
    };
    if !store.set_tenant_suspended(&tenant.id, at).await? {
        return Err(AdminError::NotFound(format!("no tenant `{tenant_ref}`")));
    }
    get_tenant_by(store, TenantKey::Id(&tenant.id)).await
}

/// `GET /tenants` filters.
#[derive(Debug, Clone, Default, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::IntoParams))]
#[cfg_attr(feature = "openapi", into_params(parameter_in = Query))]
#[serde(deny_unknown_fields)]
pub struct TenantQuery {
    /// Items per page, 1–500 (default 100).
    pub limit: Option<u32>,
    /// The previous page's `next_cursor`.
    pub cursor: Option<String>,
    /// Only tenants on this plan.
    pub plan: Option<String>,
    /// Only tenants in this state (default: every tenant that is not deleted).
    pub status: Option<TenantStatus>,
}

/// A page of tenants.
#[derive(Debug, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct TenantPage {
    /// Oldest first.
    pub items: Vec<TenantRecord>,
    /// Pass as `cursor` for the next page; `null` on the last one.
    pub next_cursor: Option<String>,
}

/// A page of tenants, oldest first.
pub async fn list_tenants(store: &dyn Store, query: TenantQuery) -> Result<TenantPage, AdminError> {
    let page = PageQuery {
        limit: query.limit,
        cursor: query.cursor,
    };
    let limit = page.limit()?;
    let filter = TenantFilter {
        plan: query.plan,
        status: query.status,
        after: page.after()?,
    };
    let items = store.list_tenants_page(&filter, limit).await?;
    let full = i64::try_from(items.len()).unwrap_or(i64::MAX) == limit;
    let next_cursor = next_cursor(full, items.last().map(|t| (t.created_at_ms, t.id.as_str())));
    Ok(TenantPage { items, next_cursor })
}

/// Deletes a tenant: every key of it is revoked (its connections close on every relay process
/// within the key-check interval), it serves nothing, and its data stays until it is purged —
/// by [`purge_tenant`] or by the relay once the retention period has passed.
pub async fn delete_tenant(
    store: &dyn Store,
    tenant_ref: &str,
) -> Result<TenantDetail, AdminError> {
    let tenant = live_tenant(store, super::tenant_key(tenant_ref)).await?;
    store.delete_tenant(&tenant.id, now_ms()).await?;
    get_tenant_by(store, TenantKey::Id(&tenant.id)).await
}

/// Removes every row of a deleted tenant (peers, messages, inboxes, shared state, keys, the
/// tenant itself). Refused (`Invalid`) for a tenant that is not deleted.
pub async fn purge_tenant(store: &dyn Store, tenant_ref: &str) -> Result<(), AdminError> {
    let tenant = super::tenant(store, tenant_ref).await?;
    if tenant.deleted_at_ms.is_none() {
        return Err(AdminError::Invalid(format!(
            "tenant `{tenant_ref}` is not deleted: delete it first"
        )));
    }
    if !store.purge_tenant(&tenant.id).await? {
        return Err(AdminError::NotFound(format!("no tenant `{tenant_ref}`")));
    }
    tracing::info!(tenant = %tenant.id, "tenant purged");
    Ok(())
}
