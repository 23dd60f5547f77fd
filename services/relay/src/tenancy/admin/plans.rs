//! Plans: create, list, get, change. A plan is a named bundle of limits (see
//! [`crate::tenancy::limits`]); `free`, `team` and `unlimited` are seeded by the migrations.

use serde::Deserialize;

use super::AdminError;
use crate::ids::now_ms;
use crate::storage::store::{Limits, PlanRecord, TenantStore};
use crate::tenancy::limits::{self, LimitsPatch};

/// Longest plan description, bytes.
pub const MAX_DESCRIPTION_BYTES: usize = 512;

/// `POST /plans`.
#[derive(Debug, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct NewPlan {
    /// Unique name (1–64 bytes of letters, digits, `.`, `_`, `-`).
    pub name: String,
    /// What it is for, for people (at most 512 bytes).
    #[serde(default)]
    pub description: String,
    /// Its limits; a limit left out or `null` is unlimited.
    #[serde(default, deserialize_with = "crate::tenancy::admin::fields::object")]
    pub limits: Limits,
}

/// `PATCH /plans/{plan}`: what is left out stays as it is.
#[derive(Debug, Default, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct PlanPatch {
    /// New description.
    #[serde(default)]
    pub description: Option<String>,
    /// Changes to the limits (`null` makes a limit unlimited).
    #[serde(
        default,
        deserialize_with = "crate::tenancy::admin::fields::optional_object"
    )]
    pub limits: Option<LimitsPatch>,
}

/// Checks text shown to people in tables and dashboards.
pub(crate) fn check_text(what: &str, text: &str, max: usize) -> Result<(), AdminError> {
    if text.len() > max {
        return Err(AdminError::Invalid(format!(
            "the {what} is {} bytes; the limit is {max}",
            text.len()
        )));
    }
    if text.chars().any(char::is_control) {
        return Err(AdminError::Invalid(format!(
            "the {what} holds control characters"
        )));
    }
    // People read these as who or what a thing is: no text may hide or reorder itself.
    if text.chars().any(repowire_protocol::validate::is_deceptive) {
        return Err(AdminError::Invalid(format!(
            "the {what} holds bidirectional controls or invisible characters"
        )));
    }
    Ok(())
}

/// Creates a plan.
pub async fn create_plan(store: &dyn TenantStore, new: NewPlan) -> Result<PlanRecord, AdminError> {
    if !repowire_protocol::validate::is_valid_name(&new.name) {
        return Err(AdminError::Invalid(
            "a plan name is 1-64 characters of letters, digits, '.', '_' or '-'".into(),
        ));
    }
    check_text("description", &new.description, MAX_DESCRIPTION_BYTES)?;
    limits::validate(&new.limits).map_err(AdminError::Invalid)?;
    let now = now_ms();
    let plan = PlanRecord {
        name: new.name,
        description: new.description,
        limits: new.limits,
        created_at_ms: now,
        updated_at_ms: now,
    };
    store.create_plan(&plan).await?;
    Ok(plan)
}

/// One plan by name.
pub async fn get_plan(store: &dyn TenantStore, name: &str) -> Result<PlanRecord, AdminError> {
    store
        .get_plan(name)
        .await?
        .ok_or_else(|| AdminError::NotFound(format!("no plan `{name}`")))
}

/// Changes a plan. Tenants on it get the new limits; a limit below what a tenant uses now is
/// accepted and applies from then on (nothing already accepted is undone).
pub async fn update_plan(
    store: &dyn TenantStore,
    name: &str,
    patch: PlanPatch,
) -> Result<PlanRecord, AdminError> {
    let mut plan = get_plan(store, name).await?;
    if let Some(description) = patch.description {
        check_text("description", &description, MAX_DESCRIPTION_BYTES)?;
        plan.description = description;
    }
    if let Some(change) = &patch.limits {
        plan.limits = change.apply(&plan.limits);
    }
    limits::validate(&plan.limits).map_err(AdminError::Invalid)?;
    plan.updated_at_ms = now_ms();
    if !store.update_plan(&plan).await? {
        return Err(AdminError::NotFound(format!("no plan `{name}`")));
    }
    Ok(plan)
}
